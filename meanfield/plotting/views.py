"""The common views of every result object, drawn by ``sol.plot(kind)``.

The result classes live in the engine layer (``meanfield.solvers.results``), which must not
import plotting code.  This module registers its ``plot`` with them when imported
(``results.register_plotter``), and the distribution declares it under the entry-point group
``meanfield.plotters``, which ``sol.plot()`` loads the first time a plot is asked for (as pandas
finds its plotting backends); everything that draws is here, in the interface layer.

==========================  ==========================================================
result                      kinds (the first is the default)
==========================  ==========================================================
ParticleSolution            "tokens" (S^1: θ_i(t); S^2: a map at output k; d > 3: the
                            Gram matrix at output k), "energy" (E_β against t)
DensitySolution             "density" (output k: ρ against θ on S^1, a map on S^2),
                            "spacetime" (S^1: ρ(t, θ)), "energy"
ZonalSolution               "density" (the polar-angle marginal at output k),
                            "spacetime", "energy"
CausalDensitySolution       "density" (ρ(s, θ) at output k)
Comparison                  "distances", "solution", "energy" (the report's figures)
CausalComparison            "distances", "solution" (the causal report's figures)
ZonalComparison             "distances" (W_1 of the polar angles against t), "mean"
                            (the axial component of the mean, particles and PDE)
==========================  ==========================================================
"""
import numpy as np

from ..cli import report
from ..geometry import circle_angles
from ..solvers.results import register_plotter
from . import causal
from .circle import density_overlay, spacetime, trajectory_lines
from .sphere import density_map, draw_tokens

__all__ = ["plot", "VIEWS"]


def _axes(ax, **subplot):
    if ax is None:
        import matplotlib.pyplot as plt
        fig = plt.figure(figsize=(7, 4), constrained_layout=True)
        ax = fig.add_subplot(**subplot)
    return ax


def _output(obj, k):
    m = np.size(obj.t)
    if not -m <= k < m:
        raise IndexError(f"k = {k} is out of range for a result with {m} output times")
    return k % m


PI_TICKS = ([0, np.pi / 2, np.pi, 3 * np.pi / 2, 2 * np.pi], ["0", "π/2", "π", "3π/2", "2π"])
POLAR_TICKS = ([0, np.pi / 4, np.pi / 2, 3 * np.pi / 4, np.pi], ["0", "π/4", "π/2", "3π/4", "π"])


def _first_draw(x):
    """x (m, n, d) of one system, or the first system of a batch (m, B, n, d)."""
    return x[:, 0] if x.ndim == 4 else x


def _particle_tokens(sol, ax=None, k=-1):
    if sol.x is None:
        raise ValueError("this ParticleSolution was run with observe=...: it holds no trajectory to draw")
    x = _first_draw(np.asarray(sol.x))
    k = _output(sol, k)
    d = x.shape[-1]
    if d == 2:
        ax = _axes(ax)
        times, angles = trajectory_lines(sol.t, circle_angles(x))
        ax.plot(times, angles, "-", color="C0", lw=0.8)
        ax.set_xlabel("t")
        ax.set_ylabel("θ")
        ax.set_ylim(0, 2 * np.pi)
        ax.set_yticks(*PI_TICKS)
        ax.set_title(f"{x.shape[1]} tokens on $S^1$")
        return ax
    if d == 3:
        ax = _axes(ax, projection="mollweide")
        draw_tokens(ax, x[k], color="C0")
        ax.grid(True, alpha=0.3)
        ax.set_xticklabels([])          # the longitudes' labels collide at this size; the grid stays
        ax.set_title(f"{x.shape[1]} tokens on $S^2$, t = {sol.t[k]:.3g}")
        return ax
    ax = _axes(ax)
    gram = x[k] @ x[k].T
    _, _, vt = np.linalg.svd(x[k], full_matrices=False)      # order by the angle in the top principal plane:
    order = np.argsort(np.arctan2(x[k] @ vt[1], x[k] @ vt[0]))    # clusters become blocks on the diagonal
    image = ax.imshow(gram[np.ix_(order, order)], vmin=-1, vmax=1, cmap="RdBu_r")
    ax.figure.colorbar(image, ax=ax, label=r"$\langle x_i, x_j\rangle$")
    ax.set_xlabel("token j")
    ax.set_ylabel("token i")
    ax.set_title(f"Gram matrix of {x.shape[1]} tokens in $\\mathbb{{R}}^{{{d}}}$, t = {sol.t[k]:.3g}")
    return ax


def _energy(sol, ax=None):
    energy = None if sol.energy is None else np.asarray(sol.energy, dtype=float)
    if energy is None or np.all(np.isnan(energy)):
        reason = (getattr(sol, "info", None) or {}).get("energy") or "it was run with energy=False"
        raise ValueError(f"this {type(sol).__name__} has no energy to draw: {reason}")
    ax = _axes(ax)
    ax.plot(sol.t, energy.reshape(energy.shape[0], -1), color="C0", lw=1.2)
    ax.set_xlabel("t")
    ax.set_ylabel(r"$E_\beta$")
    return ax


def _circle_density(sol, ax=None, k=-1):
    return density_overlay(sol, _output(sol, k), ax=_axes(ax))


def _density(sol, ax=None, k=-1, **kwargs):
    k = _output(sol, k)
    if sol.cells is not None:
        sol = sol.snapshot(k)
        k = 0
    if sol.points.shape[-1] == 2:
        return _circle_density(sol, ax, k)
    return density_map(sol, k, ax=_axes(ax, projection="mollweide"), **kwargs)


def _spacetime(sol, ax=None, log=True):
    if sol.cells is not None or sol.points.shape[-1] != 2:
        raise ValueError("kind='spacetime' is for densities on S^1 (one fixed grid of angles); on S^2 use "
                         "kind='density' with k=...")
    return spacetime(sol, ax=_axes(ax), log=log)


def _zonal_marginal(sol):
    """The density of the polar angle θ, masses / cell width, (m, N) (never overflows)."""
    return np.asarray(sol.masses) / np.diff(sol.edges)


def _zonal_density(sol, ax=None, k=-1):
    k = _output(sol, k)
    ax = _axes(ax)
    ax.stairs(np.maximum(_zonal_marginal(sol)[k], 1e-300), sol.edges, color="C0", lw=1.5)
    ax.set_yscale("log")
    top = _zonal_marginal(sol)[k].max()
    ax.set_ylim(top * 1e-8, top * 2)
    ax.set_xlim(0, np.pi)
    ax.set_xticks(*POLAR_TICKS)
    ax.set_xlabel("polar angle θ")
    ax.set_ylabel("density of θ")
    ax.set_title(f"$S^{{{sol.d - 1}}}$, t = {sol.t[k]:.3g}")
    return ax


def _zonal_spacetime(sol, ax=None):
    from matplotlib.colors import LogNorm
    ax = _axes(ax)
    values = _zonal_marginal(sol)
    top = values.max()
    mesh = ax.pcolormesh(sol.t, sol.theta, np.maximum(values, top * 1e-8).T, shading="nearest",
                         norm=LogNorm(vmin=top * 1e-8, vmax=top))
    ax.figure.colorbar(mesh, ax=ax, label="density of θ")
    ax.set_xlabel("t")
    ax.set_ylabel("polar angle θ")
    ax.set_yticks(*POLAR_TICKS)
    return ax


def _causal_density(sol, ax=None, k=-1):
    k = _output(sol, k)
    ax = _axes(ax)
    mesh = ax.pcolormesh(sol.theta, sol.s, sol.rho[k], shading="nearest")
    ax.figure.colorbar(mesh, ax=ax, label="ρ(s, θ)")
    ax.set_xlabel("θ")
    ax.set_xticks(*PI_TICKS)
    ax.set_ylabel("token position s")
    ax.set_title(f"causal density, t = {sol.t[k]:.3g}")
    return ax


def _zonal_distances(comparison, ax=None):
    ax = _axes(ax)
    w1 = np.asarray(comparison.w1)
    ax.semilogy(comparison.t, w1.mean(axis=1), "o-", color="C0", label=f"mean over {w1.shape[1]} draws")
    ax.fill_between(comparison.t, w1.min(axis=1), w1.max(axis=1), color="C0", alpha=0.25, label="min–max")
    ax.set_xlabel("t")
    ax.set_ylabel(r"$W_1$ of the polar angles (rad)")
    ax.set_title(rf"particles in $\mathbb{{R}}^{{{comparison.info.get('d', '')}}}$ vs the zonal PDE, "
                 f"n = {comparison.info.get('n', '')}")
    ax.legend()
    return ax


def _zonal_mean(comparison, ax=None):
    ax = _axes(ax)
    ax.plot(comparison.t, comparison.mean_particles, color="C1", lw=1, alpha=0.7)
    ax.plot([], [], color="C1", label="particles (each draw)")
    ax.plot(comparison.t, comparison.mean_pde, "k--", lw=2, label="zonal PDE")
    ax.set_xlabel("t")
    ax.set_ylabel(r"$\langle m, e\rangle$, axial component of the mean")
    ax.legend()
    return ax


def _report(draw_figure):
    def draw(comparison, ax=None):
        if ax is not None:
            raise ValueError("a Comparison's views are whole figures (several panels): call plot() without ax")
        return draw_figure(comparison)
    return draw


#: result class name -> {kind: drawing function}; the first kind is the default
VIEWS = {
    "ParticleSolution": {"tokens": _particle_tokens, "energy": _energy},
    "DensitySolution": {"density": _density, "spacetime": _spacetime, "energy": _energy},
    "ZonalSolution": {"density": _zonal_density, "spacetime": _zonal_spacetime, "energy": _energy},
    "CausalDensitySolution": {"density": _causal_density},
    "Comparison": {"distances": _report(report.wasserstein_figure), "solution": _report(report.solution_figure),
                   "energy": _report(report.energy_figure)},
    "CausalComparison": {"distances": _report(causal.distance_figure), "solution": _report(causal.solution_figure)},
    "ZonalComparison": {"distances": _zonal_distances, "mean": _zonal_mean},
}


def plot(obj, kind=None, ax=None, **kwargs):
    """Draw a common view of a result object (what ``obj.plot(kind, ax, ...)`` calls).

    Parameters
    ----------
    obj : ParticleSolution, DensitySolution, ZonalSolution, CausalDensitySolution or Comparison
    kind : str, optional
        One of ``VIEWS[type(obj).__name__]`` (default: the first).
    ax : matplotlib.axes.Axes, optional
        Where to draw (a new figure if None; Mollweide axes for maps on S^2).
    **kwargs
        Passed to the view: ``k`` (the output index, default -1) for the views of one output
        time, ``log`` for "spacetime" on S^1, the options of ``sphere.density_map`` for maps.

    Returns
    -------
    matplotlib.axes.Axes, or matplotlib.figure.Figure for a Comparison

    Raises
    ------
    ValueError
        For a kind the object does not have, or a view its data cannot give (no energy, no
        trajectory, a space-time view on S^2).
    TypeError
        For an object that is not a result.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.results import ParticleSolution
    >>> x = np.tile([[[1.0, 0.0], [0.0, 1.0]]], (3, 1, 1))
    >>> sol = ParticleSolution(t=np.arange(3.0), x=x, energy=np.array([1.0, 1.1, 1.2]))
    >>> sol.plot("energy").get_ylabel()
    '$E_\\\\beta$'
    >>> import matplotlib.pyplot as plt
    >>> plt.close("all")
    """
    name = type(obj).__name__
    views = VIEWS.get(name)
    if views is None:
        raise TypeError(f"no plots for a {name}; results that plot: {', '.join(VIEWS)}")
    kind = next(iter(views)) if kind is None else kind
    if kind not in views:
        raise ValueError(f"{name}.plot: kind must be one of {', '.join(map(repr, views))}; got {kind!r}")
    return views[kind](obj, ax=ax, **kwargs)


register_plotter(plot)
