"""The ``meanfield compare`` report: its folder (``write_report``: numbers, both solutions, figures) and
the plots of a particles-vs-density ``Comparison``.

- ``solution_figure``: the density with particles on top — on S^1 the space-time density
  (θ against t) with particle trajectories, on S^2 density maps with the tokens at three times;
- ``wasserstein_figure``: W_1 and W_2 (particles, density) against t, mean and range over draws,
  with the two reference lines: the grid's own error W_2(ρ_h, ρ_{2h}) and the i.i.d. prediction
  n^{-1/2} e^{λ* t} with its horizon t_n = log(n)/(2λ*);
- ``energy_figure``: E_β of both measures against t, and their relative gap.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import numpy as np

from .. import atomic
from ..plotting.causal import report_figures as causal_report_figures
from ..plotting.circle import spacetime
from ..plotting.sphere import particles_on_density
from ..solvers.results import ParticleSolution

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..compare import Comparison

__all__ = ["write_report", "solution_figure", "wasserstein_figure", "energy_figure", "report_figures"]

TRAJECTORIES = 60          # particle trajectories drawn over the space-time density


def _pyplot():
    import matplotlib.pyplot as plt   # deferred: matplotlib is heavy and only the figures need it
    return plt


def _one_draw(particles, pick=slice(None)):
    """The tokens ``pick`` of the first draw of a batched run (x of shape (m, S, n, d))."""
    x = particles.x[:, 0] if particles.x.ndim == 4 else particles.x
    return ParticleSolution(t=particles.t, x=x[:, pick], energy=None, model=particles.model, info=particles.info)


def solution_figure(comparison: Comparison) -> Figure:
    r"""The solution panel of a comparison report.

    S^1: the space-time density (log colours) with the trajectories of up to 60 tokens of the first
    draw; S^2: Mollweide density maps (log colours, one scale per panel) at the first, middle and last
    output with that draw's tokens and their clusters (rings, area ∝ mass):

    .. math::

        (t, \theta) \mapsto \log_{10} \rho(t, \theta) \ (S^1), \qquad x \mapsto \log_{10} \rho(t_k, x) \ (S^2).

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> from meanfield.cli.report import solution_figure
    >>> fig = solution_figure(c)
    >>> fig.axes[0].get_xlabel()
    't'
    >>> plt.close(fig)
    """
    plt = _pyplot()
    name = comparison.info.get("model_name", "")
    if comparison.density.points.shape[1] == 2:
        n = comparison.particles.x.shape[-2]
        pick = np.linspace(0, n - 1, min(TRAJECTORIES, n)).astype(int)
        fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
        spacetime(comparison.density, ax=ax, particles=_one_draw(comparison.particles, pick), log=True)
        ax.set_title(f"{name}: density and {pick.size} of the {n} tokens")
        return fig
    draw = _one_draw(comparison.particles)
    m = comparison.t.size
    ks = sorted({0, m // 2, m - 1})
    fig = plt.figure(figsize=(5.5 * len(ks), 3.2), constrained_layout=True)
    for i, k in enumerate(ks):      # each panel its own logarithmic scale: the density sharpens over time
        ax = fig.add_subplot(1, len(ks), i + 1, projection="mollweide")
        # output k on its own mesh: adaptive cells change from output to output
        particles_on_density(comparison.density.snapshot(k), 0, draw.x[k], ax=ax, s=3, resolution=300)
    fig.suptitle(f"{name}: density and the {draw.x.shape[1]} tokens of the first draw")
    return fig


def wasserstein_figure(comparison: Comparison) -> Figure:
    r"""W_1 and W_2 (radians) against t: the mean over draws and a band of ± 1 standard deviation of the
    draws (clipped at the smallest distance measured, the axis being logarithmic); the grid error
    estimate W_2(ρ_h, ρ_{2h}) (dashed), the i.i.d. prediction (dotted) and the i.i.d. horizon t_n
    (vertical), the quantum level (dash-dotted):

    .. math::

        n^{-1/2} e^{\lambda_* t}, \qquad t_n = \frac{\log n}{2\lambda_*}, \qquad \pi (2n)^{-1/2}.

    The vertical range is the measured data's (with the reference lines where they come near it):
    the i.i.d. prediction leaves through the top once it exceeds everything measured. The legend
    sits below the axes.

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> from meanfield.cli.report import wasserstein_figure
    >>> fig = wasserstein_figure(c)
    >>> fig.axes[0].get_yscale()
    'log'
    >>> plt.close(fig)
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5.5), constrained_layout=True)
    t = comparison.t
    info = comparison.info
    for name, w, color in (("$W_1$", comparison.w1, "C0"), ("$W_2$", comparison.w2, "C1")):
        mean = w.mean(axis=1)
        ax.plot(t, mean, color=color, label=f"{name} ({info.get('sampling', 'iid')} tokens)")
        if w.shape[1] > 1:
            sd = w.std(axis=1, ddof=1)
            ax.fill_between(t, np.maximum(mean - sd, w.min()), mean + sd, color=color, alpha=0.25, lw=0,
                            label=f"{name}: ± 1 sd of the {w.shape[1]} draws")
    if comparison.grid_error is not None:
        ax.plot(t, comparison.grid_error, "k--", label=r"grid error $W_2(\rho_h, \rho_{2h})$")
    ax.axhline(comparison.quantum_level, color="grey", lw=0.8, ls="-.",
               label=r"half a token's mass across $\pi$: $\pi (2n)^{-1/2}$")
    if comparison.iid_prediction is not None:
        ax.plot(t, comparison.iid_prediction, ":", color="C3",
                label=rf"i.i.d. prediction $n^{{-1/2}} e^{{\lambda_* t}}$, $\lambda_* = {info['lambda_star']:.3g}$")
        ax.axvline(info["horizon"], color="C3", lw=0.8, alpha=0.7)
        ax.annotate(f"$t_n = {info['horizon']:.2f}$", (info["horizon"], 0.02), xycoords=("data", "axes fraction"),
                    color="C3", xytext=(3, 0), textcoords="offset points")
    ax.set_yscale("log")
    ax.set_ylim(*_data_range(comparison))
    ax.set_xlabel("$t$")
    ax.set_ylabel("distance (rad)")
    grid = info.get("grid", {})
    cells = f"{grid.get('cells')} cells"
    if grid.get("mesh") == "adaptive" and grid["cells_per_output"][-1] != grid["cells"]:
        cells = f"adaptive, {grid['cells']} cells at most, {grid['cells_per_output'][-1]} at T"
    elif grid.get("mesh") == "adaptive":
        cells = f"adaptive, {cells}"
    ax.set_title(f"particles (n = {info.get('n')}, {comparison.w1.shape[1]} draws) vs density ({cells})")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return fig


def _data_range(comparison):
    """Log-axis limits holding every measured distance, the grid error and the quantum level, with a
    margin of a factor 1.5 (the i.i.d. prediction is not a measurement: it may leave the axes)."""
    values = [comparison.w1, comparison.w2, comparison.quantum_level]
    if comparison.grid_error is not None:
        values.append(comparison.grid_error)
    values = np.concatenate([np.ravel(v) for v in values])
    values = values[np.isfinite(values) & (values > 0)]
    return values.min() / 1.5, values.max() * 1.5


def energy_figure(comparison: Comparison) -> Figure:
    r"""E_β of the density and of each draw of particles against t (top), their relative gap (bottom):

    .. math::

        \frac{\overline{E_\beta(\mu^n_t)} - E_\beta(\rho_t)}{E_\beta(\rho_t)} \ (\%).

    Parameters
    ----------
    comparison : Comparison

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> from meanfield.cli.report import energy_figure
    >>> fig = energy_figure(c)
    >>> len(fig.axes)
    2
    >>> plt.close(fig)
    """
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 5.5), sharex=True, constrained_layout=True,
                                      gridspec_kw=dict(height_ratios=(2, 1)))
    t = comparison.t
    # the density underneath, broad and light; the particles on top, thin: both stay visible where they agree
    top.plot(t, comparison.energy_density, color="0.6", lw=5, alpha=0.6, solid_capstyle="round", zorder=1,
             label="density")
    top.plot(t, comparison.energy_particles, color="C1", lw=0.8, alpha=0.7, zorder=2)
    top.plot(t, comparison.energy_particles.mean(axis=1), color="C1", lw=1.5, ls=(0, (4, 2)), marker=".", zorder=3,
             label="particles (each draw; dashed: mean)")
    top.set_ylabel(r"$E_\beta$")
    top.legend()
    bottom.plot(t, 100 * comparison.energy_gap, color="C3")
    bottom.axhline(0.0, color="k", lw=0.5)
    bottom.set_ylabel(r"$E_\beta$ gap (%)")
    bottom.set_xlabel("$t$")
    return fig


def report_figures(comparison: Comparison, folder: str | os.PathLike) -> list[str]:
    """Write solution.png, wasserstein.png and energy.png of a comparison to ``folder`` (130 dpi, each
    figure closed after it is saved).

    Parameters
    ----------
    comparison : Comparison
    folder : str or os.PathLike
        An existing folder.

    Returns
    -------
    list of str
        The paths written.

    Examples
    --------
    >>> import os, tempfile
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> from meanfield.cli.report import report_figures
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     print([os.path.basename(p) for p in report_figures(c, folder)])
    ['solution.png', 'wasserstein.png', 'energy.png']
    """
    plt = _pyplot()
    paths = []
    for name, make in (("solution", solution_figure), ("wasserstein", wasserstein_figure),
                       ("energy", energy_figure)):
        fig = make(comparison)
        paths.append(os.path.join(folder, f"{name}.png"))
        fig.savefig(paths[-1], dpi=130)
        plt.close(fig)
    return paths


def write_report(comparison, folder: str | os.PathLike, options: dict | None = None) -> list[str]:
    """Write a comparison's report into ``folder`` all at once: report.json, particles.npz, density.npz
    and the PNG plots.

    The write goes through ``meanfield.atomic.replace_folder``: an interrupted write leaves the
    previous report whole, and a finished one carries the marker complete.json.
    ``Comparison.load(folder)`` reads it back.

    Parameters
    ----------
    comparison : Comparison or CausalComparison
        The result of ``compare``.
    folder : str or os.PathLike
        The report folder (new, empty, or a previous report).
    options : dict, optional
        Command-line options, stored in report.json.

    Returns
    -------
    list of str
        The paths of every file written, the marker included.

    Raises
    ------
    ValueError
        If ``folder`` cannot be replaced (a file, or a non-empty folder that is not a report).

    Examples
    --------
    >>> import os, tempfile
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> from meanfield.cli.report import write_report
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     paths = write_report(c, os.path.join(parent, "report"))
    ...     print(sorted(os.path.basename(p) for p in paths if not p.endswith(".png")))
    ['complete.json', 'density.npz', 'particles.npz', 'report.json']
    """
    figures = causal_report_figures if comparison.info.get("causal") else report_figures
    numbers = comparison.to_dict()
    if options is not None:
        numbers["options"] = options
    names = []

    def write(tmp):
        with open(os.path.join(tmp, "report.json"), "w") as fh:
            json.dump(numbers, fh, indent=1, default=str)
        names.append("report.json")
        for name, sol in (("particles", comparison.particles), ("density", comparison.density)):
            sol.save(os.path.join(tmp, f"{name}.npz"))
            names.append(f"{name}.npz")
        names.extend(os.path.relpath(p, tmp) for p in figures(comparison, tmp))

    folder = atomic.replace_folder(folder, write, "out")
    return [os.path.join(folder, name) for name in names + [atomic.MARKER]]
