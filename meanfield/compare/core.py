r"""Particles against the density PDE: the package's main job (``meanfield compare``).

From one initial density ρ_0 and one model, run

- the particle system with n tokens discretising ρ_0 (``sampling``: "stratified" by default,
  or "iid", "quantile", "weighted"; see ``meanfield.sampling``), for several independent draws
  (one batched solve), and
- the finite-volume solver for the continuity equation (``meanfield.solvers.circle`` on S^1; on
  S^2 ``meanfield.solvers.adaptive`` by default, cells that follow the clusters, or
  ``meanfield.solvers.sphere`` on a uniform icosphere),

  .. math::

      \partial_t \rho + \operatorname{div}(\rho X[\rho]) = 0,

and report at every output time: W_1 and W_2 between each empirical measure
:math:`\mu^n_t = \frac1n \sum_i \delta_{x_i(t)}` (tokens closer than 1e-7 merged into one atom, which
changes W_p by less than 2e-7 and makes exact transport fast once clusters have collapsed) and the
grid measure :math:`\sum_i \rho_i(t) \lvert C_i\rvert \delta_{c_i}` (geodesic, radians; ``meanfield.wasserstein``),
the interaction energies E_β of both, and their cluster counts.

Two reference lines explain the distance (``Comparison.iid_prediction`` and ``grid_error``):

- i.i.d. draws put O(n^{-1/2}) of mass error in every low harmonic of ρ_0; the most unstable
  mode l* (``theory.most_unstable_mode``) amplifies it at the rate λ* = ``growth_rate(model, d, l*)``
  until clusters form and freeze it into the cluster masses, so

  .. math::

      W_p(\mu^n_t, \rho_t) \approx n^{-1/2} e^{\lambda^* t}, \qquad t_n = \frac{\log n}{2\lambda^*},

  and i.i.d. tokens cannot track the PDE past the horizon t_n, where that reaches 1.
  Stratified and quantile samples match the low moments of ρ_0 to O(n^{-3/2}) and O(n^{-2}): the
  amplified error stays far below the grid's.
- the grid's own error, estimated by W_p(ρ_h, ρ_{2h}) against the solution on the coarser grid
  (half the cells on S^1, one icosphere level less on S^2; on adaptive cells every level one less:
  base, bulk and finest, ``coarser_cells``): about the error of ρ_h for a first-order scheme
  (err(2h) ≈ 2 err(h)), three times it for a second-order one.

E_β of μ^n includes the self-interaction e^β/(2βn) of the diagonal i = j, a bias of
O(1/n) against the density's E_β on top of the O(n^{-1/2}) sampling fluctuation.

Clusters are counted the same way for both measures, by the package's one definition
(``meanfield.clusters``): connected parts of mass >= 1% of the region where the measure is
denser than 5% of the uniform density 1/|S^{d-1}|.
"""
import json
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .. import atomic
from ..checks import as_choice, as_count, as_flag, as_seed, as_time_grid
from ..clusters import density_clusters, particle_clusters
from ..energy import energy
from ..geometry import GEOMETRIES
from ..measures import drop_negligible, merge_atoms, sample_density
from ..models import as_model
from ..progress import track
from ..sampling import METHODS, RANDOMISED, discretise
from ..solvers.results import _Saveable
from ..theory import growth_rate, most_unstable_mode
from ..transport.sphere import series_method, wasserstein

__all__ = ["Comparison", "compare", "write_report", "sphere_cells", "coarser_cells", "describe_grid"]

MAX_LEVEL = 8              # finest icosphere the command accepts (655,362 cells)
MAX_FINEST = 9             # finest adaptive level accepted (the level tested in ``solvers.adaptive``)
MESHES = ("adaptive", "uniform")   # the density's cells on S^2
LEVEL = 4                  # icosphere level of mesh="uniform" (2562 cells)
# adaptive cells on S^2 by default (mesh="adaptive"): the most accurate setting whose whole command fits the
# budget of the uniform level-4 run it replaced (measured in docs/comparison.md)
ADAPTIVE = dict(base=3, finest=8, bulk=4)
# the solvers' default flux (second order, clusters still transported): on the default circle and sphere
# comparisons it has 2.8x and 2.0x less grid error than first-order "upwind" (docs/comparison.md)
FLUX = "upwind2"
MERGE_TOL = 1e-7           # tokens closer than this (a box of R^d) are one atom for W_p (changes it by < 2e-7)
NEGLIGIBLE = 1e-14         # cells of the density lighter than this in all are left out of W_p (changes W_2 by < 3.2e-7)


@dataclass(eq=False, repr=False)
class Comparison(_Saveable):
    r"""Particles vs density at the output times t, over S independent draws of tokens (result of
    ``compare``).

    .. math::

        w_p[k, s] = W_p\Big(\mu^{n, s}_{t_k}, \sum_i \rho_i(t_k) |C_i| \delta_{c_i}\Big), \quad p = 1, 2.

    ``save(path)`` / ``Comparison.load(path)`` keep everything (both solutions included) in one
    .npz file; ``to_xarray()`` / ``to_netcdf(path)`` / ``Comparison.from_netcdf(path)`` do the
    same through xarray (particle arrays prefixed ``particles_``, density arrays ``density_``).

    Parameters
    ----------
    t : numpy.ndarray, shape (m,)
        Output times.
    w1, w2 : numpy.ndarray, shape (m, S)
        Wasserstein distances (radians) between each draw's empirical measure and the grid measure.
    energy_particles : numpy.ndarray, shape (m, S)
        E_β of the tokens.
    energy_density : numpy.ndarray, shape (m,)
        E_β of the density.
    clusters_particles : numpy.ndarray, shape (m, S)
        Cluster counts of the tokens.
    clusters_density : numpy.ndarray, shape (m,)
        Cluster counts of the density.
    particles : ParticleSolution
        x of shape (m, S, n, d).
    density : DensitySolution
        On the sphere's adaptive cells (the default) on changing meshes: ``density.cells`` per output,
        ``density.snapshot(k)`` output k on its own mesh, ``density.measure(k)`` its cell measure.
    info : dict
        Settings, methods, ``grid`` (the density's cells: ``describe_grid``), ``timings`` (wall seconds of
        particles, density (its grid reference included), grid_reference, transport), ``cpu_seconds``
        (the same parts in CPU seconds), and for attractive isotropic models lambda_star, mode l*,
        horizon t_n.
    weights : numpy.ndarray, shape (S, n), optional
        Weights of the tokens (None: 1/n).
    grid_error : numpy.ndarray, shape (m,), optional
        W_2(ρ_h, ρ_{2h}) (None when not computed).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> c.w1.shape, c.energy_density.shape
    ((2, 2), (2,))
    >>> bool(c.w2.max() < 0.2), c.grid_error.shape
    (True, (2,))
    """
    t: np.ndarray
    w1: np.ndarray
    w2: np.ndarray
    energy_particles: np.ndarray
    energy_density: np.ndarray
    clusters_particles: np.ndarray
    clusters_density: np.ndarray
    particles: object
    density: object
    info: dict = field(default_factory=dict)
    weights: np.ndarray = None
    grid_error: np.ndarray = None

    @property
    def iid_prediction(self):
        """n^{-1/2} e^{λ* t} capped at π (the diameter bounds W_p): the predicted distance for
        i.i.d. tokens (m,); None for models without an unstable mode."""
        rate = self.info.get("lambda_star")
        if rate is None:
            return None
        return np.minimum(np.exp(rate * self.t) / np.sqrt(self.info["n"]), np.pi)

    @property
    def energy_gap(self):
        """(mean over draws of E_β(μ^n) - E_β(ρ)) / E_β(ρ) at each output time (m,)."""
        return self.energy_particles.mean(axis=1) / self.energy_density - 1.0

    @property
    def quantum_level(self):
        """π (2n)^{-1/2}: W_2 of moving half a token's mass 1/(2n) across the diameter π. Once clusters
        have formed W_2 ≈ D sqrt(δm) for a cluster-mass error δm at distance D, and n tokens (of
        weight ~1/n each) cannot fix a cluster's mass better than that: W_2 has this floor."""
        return quantum_level(self.info["n"], 2)

    @property
    def quantum_level_w1(self):
        """π/(2n): W_1 ≈ D δm of the same half token's mass δm = 1/(2n) moved across the diameter D = π,
        the W_1 counterpart of ``quantum_level``."""
        return quantum_level(self.info["n"], 1)

    def table(self):
        """The comparison as a plain-text table (means ± standard deviations over the draws)."""
        s = self.w1.shape[1]
        head = (f"{'t':>7} {'W1':>19} {'W2':>19} {'E particles':>12} {'E density':>12} {'gap':>8} "
                f"{'clusters:':>9} {'tokens':>7} {'density':>7}")
        lines = [head, "-" * len(head)]
        for k, t in enumerate(self.t):
            c = self.clusters_particles[k]
            cl = f"{c[0]}" if np.all(c == c[0]) else f"{c.min()}-{c.max()}"
            lines.append(f"{t:7.3g} {_pm(self.w1[k], s):>19} {_pm(self.w2[k], s):>19} "
                         f"{self.energy_particles[k].mean():12.6g} {self.energy_density[k]:12.6g} "
                         f"{100 * self.energy_gap[k]:7.2f}% {'':>9} {cl:>7} {self.clusters_density[k]:>7}")
        return "\n".join(lines)

    def to_dict(self):
        """JSON-ready numbers: settings, per-draw series and a summary."""
        return dict(
            info=self.info,
            t=self.t.tolist(),
            w1=self.w1.tolist(), w2=self.w2.tolist(),
            energy_particles=self.energy_particles.tolist(), energy_density=self.energy_density.tolist(),
            energy_gap=self.energy_gap.tolist(),
            clusters_particles=self.clusters_particles.tolist(),
            clusters_density=self.clusters_density.tolist(),
            grid_error=None if self.grid_error is None else self.grid_error.tolist(),
            iid_prediction=None if self.iid_prediction is None else self.iid_prediction.tolist(),
            summary=dict(w1_final=float(self.w1[-1].mean()), w2_final=float(self.w2[-1].mean()),
                         w2_max=float(self.w2.mean(axis=1).max()),
                         energy_gap_max=float(np.abs(self.energy_gap).max()),
                         clusters_particles_final=self.clusters_particles[-1].tolist(),
                         clusters_density_final=int(self.clusters_density[-1]),
                         grid_error_final=None if self.grid_error is None else float(self.grid_error[-1])),
        )

    def explanation(self):
        """A few lines setting the final W_2 against the two reference lines."""
        info, w2 = self.info, float(self.w2[-1].mean())
        lines = [f"final W2 = {w2:.3g} rad with {info['sampling']} sampling of n = {info['n']} tokens"]
        if self.grid_error is not None:
            against = info.get("grid", {}).get("reference")
            lines.append(f"grid error estimate W2(rho_h, rho_2h) = {self.grid_error[-1]:.3g} rad "
                         + (f"against {against} " if against else "")
                         + f"(final W2 / grid error = {w2 / max(self.grid_error[-1], 1e-300):.2f})")
        lines.append(f"after clustering W2 ~ D sqrt(dm) and W1 ~ D dm for a cluster-mass error dm at distance D: "
                     f"half a token's mass (dm = 1/2n) across the diameter (D = pi) gives W2 ~ pi (2n)^-1/2 = "
                     f"{self.quantum_level:.3g} and W1 ~ pi/(2n) = {self.quantum_level_w1:.3g} "
                     f"(measured: W2 {w2:.3g}, W1 {float(self.w1[-1].mean()):.3g})")
        if info.get("lambda_star") is not None:
            lines.append(f"i.i.d. tokens: n^-1/2 e^(lambda* t) with lambda* = {info['lambda_star']:.3f} (mode l* = "
                         f"{info['mode']}) reaches 1 at the horizon t_n = log(n)/(2 lambda*) = {info['horizon']:.2f}; "
                         f"past it i.i.d. draws cannot track the PDE")
        return "\n".join(lines)

    def plot(self, kind="distances"):
        """A figure of the comparison (``meanfield.cli.report``): "distances" (W_1 and W_2 against t
        with the reference lines), "energy" (E_β of both measures and their gap) or "solution" (the
        density with the tokens on top).

        Returns
        -------
        matplotlib.figure.Figure
        """
        from ..cli.report import energy_figure, solution_figure, wasserstein_figure
        views = {"distances": wasserstein_figure, "energy": energy_figure, "solution": solution_figure}
        return views[as_choice(kind, "kind", tuple(views))](self)

    def final_line(self):
        """One line: the final W_1 and W_2 (mean over the draws) and the time they were measured at."""
        return (f"final W_1 = {float(self.w1[-1].mean()):.3g}, W_2 = {float(self.w2[-1].mean()):.3g} rad "
                f"at t = {float(self.t[-1]):g} ({_draws(self.w1.shape[1])})")

    @classmethod
    def load(cls, path):
        """Read a comparison back: a .npz file written by ``save``, or a report folder written by
        ``meanfield compare`` / ``write_report`` (the folder itself or its report.json).

        Parameters
        ----------
        path : str or os.PathLike
            A .npz file, a report folder, or the report.json inside one.

        Returns
        -------
        Comparison
            (a ``compare.causal.CausalComparison`` for a report of ``meanfield compare --causal``)
        """
        report = read_report(path)
        if report is None:
            return super().load(path)
        folder, numbers = report
        if numbers.get("info", {}).get("causal"):
            from .causal import CausalComparison
            return CausalComparison.from_report(folder, numbers)
        from ..solvers.results import DensitySolution, ParticleSolution
        particles = ParticleSolution.load(os.path.join(folder, "particles.npz"))
        density = DensitySolution.load(os.path.join(folder, "density.npz"))
        grid_error = numbers.get("grid_error")
        return cls(t=np.array(numbers["t"], dtype=float), w1=np.array(numbers["w1"]), w2=np.array(numbers["w2"]),
                   energy_particles=np.array(numbers["energy_particles"]),
                   energy_density=np.array(numbers["energy_density"]),
                   clusters_particles=np.array(numbers["clusters_particles"], dtype=int),
                   clusters_density=np.array(numbers["clusters_density"], dtype=int),
                   particles=particles, density=density, info=numbers["info"], weights=particles.weights,
                   grid_error=None if grid_error is None else np.array(grid_error, dtype=float))


def read_report(path):
    """(folder, numbers of its report.json) for a report folder or its report.json; None for any
    other path (a .npz file written by ``save``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    if os.path.basename(path) != "report.json":
        return None
    with open(path) as fh:
        return os.path.dirname(path), json.load(fh)


def _draws(s):
    return "one draw" if s == 1 else f"mean of {s} draws"


def quantum_level(n, p=2):
    """π (2n)^{-1/p}: W_p of half a token's mass δm = 1/(2n) moved across the diameter D = π.

    Once clusters have formed, a cluster-mass error δm at distance D costs W_p ≈ D δm^{1/p}, and
    n tokens of weight 1/n cannot fix a cluster's mass better than 1/(2n): below this level W_p
    no longer measures the discretisations' error.

    Parameters
    ----------
    n : int or array of int
        Tokens.
    p : float
        The order of W_p (1 or 2).

    Returns
    -------
    float or array
        π (2n)^{-1/p} in radians.

    Examples
    --------
    >>> print(f"{quantum_level(2000, 2):.4f} {quantum_level(2000, 1):.2e}")
    0.0497 7.85e-04
    """
    level = np.pi * (2.0 * np.asarray(n, dtype=float)) ** (-1.0 / p)
    return float(level) if level.ndim == 0 else level


def _pm(values, s):
    return f"{values.mean():.3e}" + (f" ± {values.std(ddof=1):.1e}" if s > 1 else "")


def sphere_cells(mesh=None, level=None, base=None, finest=None, bulk=None):
    r"""The density's cells on S^2, resolved and checked: a uniform icosphere or adaptive cells.

    ``mesh=None`` means "uniform" when ``level`` is given and "adaptive" otherwise, so that ``level``
    alone keeps its meaning (``icosphere(level)``).  Adaptive cells (``meanfield.solvers.adaptive``)
    run from level ``base`` where the density is thin to ``finest`` in the clusters, with every cell
    at least ``bulk`` where the density is at least a tenth of its mean (the smooth phase, where the
    cluster masses are decided):

    .. math::

        \text{base} \le \text{bulk} \le \text{finest} \le 9.

    Parameters
    ----------
    mesh : {"adaptive", "uniform"}, optional
        The kind of cells (default: "uniform" if ``level`` is given, else "adaptive").
    level : int, optional
        ``icosphere(level)`` for mesh="uniform" (default ``LEVEL`` = 4), at most ``MAX_LEVEL``.
    base, finest, bulk : int, optional
        The adaptive levels (defaults ``ADAPTIVE``: 3, 8, 4; ``bulk`` by default 4 clipped to
        [base, finest]).

    Returns
    -------
    dict
        ``{"mesh": "uniform", "level": L}`` or ``{"mesh": "adaptive", "base": .., "finest": .., "bulk": ..}``.

    Raises
    ------
    ValueError
        For a level out of range, levels out of order, or settings of the other kind of cells
        (``level`` with mesh="adaptive", ``base``/``finest``/``bulk`` with mesh="uniform").
    TypeError
        For levels that are not integers.

    Examples
    --------
    >>> from meanfield.compare import sphere_cells
    >>> sphere_cells()
    {'mesh': 'adaptive', 'base': 3, 'finest': 8, 'bulk': 4}
    >>> sphere_cells(level=3)
    {'mesh': 'uniform', 'level': 3}
    >>> sphere_cells(base=2, finest=3)
    {'mesh': 'adaptive', 'base': 2, 'finest': 3, 'bulk': 3}
    """
    given = [name for name, value in (("base", base), ("finest", finest), ("bulk", bulk)) if value is not None]
    if mesh is None:
        mesh = "uniform" if level is not None else "adaptive"
    as_choice(mesh, "mesh", MESHES)
    if mesh == "uniform":
        if given:
            raise ValueError(f"{'/'.join(given)} set adaptive cells; mesh 'uniform' is icosphere(level): "
                             f"drop {'/'.join(given)} or use mesh 'adaptive'")
        level = as_count(LEVEL if level is None else level, "level", minimum=0)
        if level > MAX_LEVEL:
            raise ValueError(f"level must be <= {MAX_LEVEL} (icosphere({MAX_LEVEL}) has {10 * 4 ** MAX_LEVEL + 2} "
                             f"cells); got {level}")
        return dict(mesh="uniform", level=level)
    if level is not None:
        raise ValueError("level selects a uniform icosphere(level): use mesh 'uniform' (or level alone), or set "
                         "adaptive cells by base/finest/bulk")
    from meanfield.solvers.adaptive import check_levels
    base = as_count(ADAPTIVE["base"] if base is None else base, "base", minimum=0)
    finest = as_count(ADAPTIVE["finest"] if finest is None else finest, "finest", minimum=0)
    if finest > MAX_FINEST:
        raise ValueError(f"finest must be <= {MAX_FINEST} (the finest level of adaptive cells tested); got {finest}")
    base, finest, bulk = check_levels(base, finest, min(max(ADAPTIVE["bulk"], base), finest) if bulk is None else bulk)
    return dict(mesh="adaptive", base=base, finest=finest, bulk=bulk)


def coarser_cells(cells):
    """The cells of the grid-error reference: one level less everywhere, or None when there is none.

    A uniform ``icosphere(level)`` gives ``icosphere(level - 1)``.  Adaptive cells give base, bulk and
    finest each one less: the refinement criterion measures a cell's mass in units of a base cell, so
    lowering ``base`` by one lowers the level every cell asks for by one, and with ``bulk`` and
    ``finest`` one less the reference is the same run with every cell one level coarser, the
    h → 2h of the uniform estimate (keeping ``base`` would coarsen only the bulk and the clusters).

    Parameters
    ----------
    cells : dict
        As returned by ``sphere_cells``.

    Returns
    -------
    dict or None
        The coarser cells (None for level 0 or base 0).

    Examples
    --------
    >>> from meanfield.compare import coarser_cells, sphere_cells
    >>> coarser_cells(sphere_cells())
    {'mesh': 'adaptive', 'base': 2, 'finest': 7, 'bulk': 3}
    >>> coarser_cells(sphere_cells(level=4)), coarser_cells(sphere_cells(level=0))
    ({'mesh': 'uniform', 'level': 3}, None)
    """
    if cells["mesh"] == "uniform":
        return None if cells["level"] < 1 else dict(cells, level=cells["level"] - 1)
    if cells["base"] < 1:
        return None
    return dict(cells, **{name: cells[name] - 1 for name in ("base", "finest", "bulk")})


def describe_grid(grid):
    """One line describing ``Comparison.info["grid"]``: the cells of the density and, on adaptive cells,
    how many at the first output, at most and at the last, and the number of remeshes.

    Parameters
    ----------
    grid : dict
        ``info["grid"]`` of a ``Comparison``.

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield.compare import describe_grid
    >>> describe_grid({"cells": 2562, "mesh": "icosphere(4)"})
    'icosphere(4), 2562 cells'
    >>> describe_grid({"cells": 2702, "mesh": "adaptive", "base": 3, "finest": 8, "bulk": 4,
    ...                "cells_per_output": [2702, 1500, 993], "remeshes": 20})
    'adaptive cells (levels 3-8, bulk 4): 2702 at t = 0, 2702 at most, 993 at T, 20 remeshes'
    """
    if grid.get("mesh") != "adaptive":
        return (f"{grid['mesh']}, " if grid.get("mesh") else "") + f"{grid['cells']} cells"
    counts = grid["cells_per_output"]
    return (f"adaptive cells (levels {grid['base']}-{grid['finest']}, bulk {grid['bulk']}): {counts[0]} at t = 0, "
            f"{grid['cells']} at most, {counts[-1]} at T, {grid['remeshes']} remeshes")


def _grid_info(density, d, coarse_cells):
    """info["grid"] of a comparison, read from the density itself (so that a precomputed one is described
    as it is): cells (the largest mesh), the mesh, and on changing meshes the cells of every output,
    the adaptive levels, the remeshes and every mesh used (t, cells, finest level)."""
    if d != 3:
        return dict(cells=int(density.points.shape[0]))
    reference = None if coarse_cells is None else (
        f"icosphere({coarse_cells['level']})" if coarse_cells["mesh"] == "uniform" else
        "adaptive " + ", ".join(f"{k} {coarse_cells[k]}" for k in ("base", "finest", "bulk")))
    if density.cells is None:
        return dict(cells=int(density.points.shape[0]), mesh=density.info.get("mesh"), reference=reference)
    info = density.info
    return dict(cells=int(np.max(density.cells)), mesh="adaptive", base=info.get("base"), finest=info.get("finest"),
                bulk=info.get("bulk"), cells_per_output=[int(c) for c in density.cells],
                remeshes=info.get("remeshes"), meshes=info.get("meshes"), reference=reference)


def density_solver(geometry, model, rho0, t_eval, *, cells=512, level=None, mesh=None, base=None, finest=None,
                   bulk=None, flux=FLUX, progress=None):
    """The finite-volume solution on S^1 (``cells`` cells) or S^2 (the cells of ``sphere_cells``: adaptive
    by default, ``icosphere(level)`` when ``level`` is given or mesh="uniform").

    Parameters
    ----------
    geometry : {"circle", "sphere"}
    model : SA or USA
    rho0 : callable
        Points (N, d) -> densities.
    t_eval : array_like
        Output times.
    cells : int
        Cells on the circle.
    level, mesh, base, finest, bulk : optional
        The cells on the sphere (``sphere_cells``).
    flux : str
        The flux.
    progress : bool or None
        Progress bars (uniform cells; none on adaptive cells).

    Returns
    -------
    DensitySolution
        On changing meshes (``cells`` per output) for adaptive cells.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import density_solver
    >>> sol = density_solver("sphere", mf.SA(3.0), mf.perturbed_uniform(3, seed=0), [0.0, 0.5], base=1, finest=2)
    >>> sol.cells.shape, density_solver("sphere", mf.SA(3.0), mf.perturbed_uniform(3), [0.0], level=1).cells
    ((2,), None)
    """
    if geometry == "circle":
        from meanfield.solvers import circle
        return circle.solve(model, rho0, t_eval, cells=as_count(cells, "cells"), flux=flux, progress=progress)
    spec = sphere_cells(mesh, level, base, finest, bulk)
    if spec["mesh"] == "uniform":
        from meanfield.solvers import sphere
        return sphere.solve(model, rho0, t_eval, mesh=sphere.icosphere(spec["level"]), flux=flux, progress=progress)
    from meanfield.solvers import adaptive
    return adaptive.solve(model, rho0, t_eval, flux=flux, base=spec["base"], finest=spec["finest"], bulk=spec["bulk"],
                          progress=progress)


def check_density_settings(geometry, model, cells=512, level=None, flux=FLUX, *, grid=None, base=None, finest=None,
                           bulk=None):
    """Refuse, before any computation, what the density solver would refuse after the particle
    solve: the model, the grid (cells; on the sphere the cells of ``sphere_cells``: an icosphere
    level <= MAX_LEVEL, or adaptive levels base <= bulk <= finest <= MAX_FINEST) and the flux,
    checked against the solver module's own list of flux names.

    Parameters
    ----------
    geometry : {"circle", "sphere"}
    model : SA or USA
    cells : int
        Cells of the circle grid (geometry="circle").
    level : int, optional
        Icosphere level (geometry="sphere"; implies grid="uniform").
    flux : str
        One of ``circle.FLUXES`` or ``sphere.FLUXES``.
    grid, base, finest, bulk : optional
        The cells on the sphere (``sphere_cells``; ``grid`` is its ``mesh``, as ``compare``'s).

    Returns
    -------
    dict or None
        The sphere's cells (``sphere_cells``), None on the circle.

    Raises
    ------
    ValueError or TypeError
        Naming the offending argument (also ``grid``, ``base``, ``finest`` or ``bulk`` on the circle).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import check_density_settings
    >>> check_density_settings("sphere", mf.SA(4.0), finest=2)
    Traceback (most recent call last):
    ...
    ValueError: finest = 2 must be at least base = 3
    """
    as_choice(geometry, "geometry", tuple(GEOMETRIES))
    if geometry == "circle":
        given = [name for name, value in (("grid", grid), ("base", base), ("finest", finest), ("bulk", bulk))
                 if value is not None]
        if given:
            raise ValueError(f"{'/'.join(given)} set the density's cells on the sphere; on the circle use cells")
        from meanfield.solvers import circle
        as_choice(flux, "flux", circle.FLUXES)
        circle.max_step(model, as_count(cells, "cells"), flux)
        return None
    from meanfield.solvers import sphere
    as_choice(flux, "flux", sphere.FLUXES)
    spec = sphere_cells(grid, level, base, finest, bulk)
    # the model's checks; adaptive cells: on icosphere(0), as adaptive.solve does (base may be fine)
    sphere.max_step(model, sphere.icosphere(spec["level"] if spec["mesh"] == "uniform" else 0), flux)
    return spec


def compare(model, rho0, t_eval, n: int = 2000, seeds: int = 3, *, geometry: str = "circle",
            cells: int | None = None, level: int | None = None, grid: str | None = None, base: int | None = None,
            finest: int | None = None, bulk: int | None = None, flux: str = FLUX, scheme: str | type | None = None,
            dt: float | None = None, summation: str = "auto", transport: str = "auto", seed: int = 0, density=None,
            progress: bool | None = None, sampling: str = "stratified", grid_reference: bool = True,
            causal: bool = False, slices: int = 64, bins: int = 8):
    r"""Run particles and the density PDE from ρ_0 and compare them at the times t_eval.

    At each output time: W_1 and W_2 (geodesic, radians) between each draw's empirical
    measure and the grid measure, the energies E_β of both, and their cluster counts
    (``meanfield.clusters``):

    .. math::

        W_p\Big(\frac1n \sum_i \delta_{x_i(t)}, \sum_i \rho_i(t) |C_i| \delta_{c_i}\Big).

    With ``causal=True``: causal particles against the causal PDE on [0, 1] × S^1
    (``meanfield.compare.causal.compare_causal``: the mean over ``bins`` bins of s of the circle
    W_1, cluster counts, no energies — causal attention is not a gradient flow); returns a
    ``CausalComparison``.

    Parameters
    ----------
    model : SA or USA
        Q = K = I, V = ±I (what the density solvers handle).
    rho0 : callable
        Points (N, d) -> densities on S^1 (geometry="circle") or S^2 ("sphere").
    t_eval : array_like, shape (m,)
        Increasing output times.
    n : int
        Tokens per draw.
    seeds : int
        Independent draws (from ``numpy.random.default_rng(seed)``), solved as one batch.
    geometry : {"circle", "sphere"}
        S^1 or S^2.
    cells : int
        Cells of the grid on the circle (default 512; 256 in θ with ``causal``).
    level : int, optional
        ``icosphere(level)`` on the sphere (grid="uniform"; default 4). Given alone it selects
        grid="uniform".
    grid : {"adaptive", "uniform"}, optional
        The kind of the density's cells on the sphere (``sphere_cells``; not ``mesh=``, which is a ``Mesh``
        object in ``sphere.solve``): "adaptive" (the default unless ``level``
        is given) solves with ``meanfield.solvers.adaptive`` on cells that follow the clusters,
        "uniform" with ``meanfield.solvers.sphere`` on ``icosphere(level)``. The SA β = 4, T = 20
        comparison of ``meanfield compare --geometry sphere`` ends at W_1 = 0.0075 against 0.036 on
        icosphere(4), in about the same time (docs/comparison.md).
    base, finest, bulk : int, optional
        Adaptive cells (grid="adaptive"): level ``base`` where the density is thin, ``finest`` in the
        clusters, at least ``bulk`` wherever the density is at least a tenth of its mean (defaults
        ``ADAPTIVE``: 3, 8, 4; ``bulk`` clipped to [base, finest]; ``adaptive.solve``).
    flux : str
        The flux (default ``FLUX`` = "upwind2", the solvers' own default).
    scheme : str or Scheme class, optional
        The particles' time scheme (``scheme=`` of ``meanfield.solvers.particles.solve``); None: "rk4"
        on S^1, "dopri5" on S^2 (adaptive steps: SA β = 4, n = 1000, T = 20 takes 715 field evaluations instead
        of RK4's 1600 at its default step, and lands 5× closer to an RK4 run at a quarter of that step,
        1.2e-7 against 6.2e-7).
    dt : float, optional
        Step of the particle integrator.
    summation : {"auto", "direct", "fast"}
        How the particle interactions are summed.
    transport : str
        The ``wasserstein`` method ("auto": exact on S^1, exact on S^2 up to n·cells = 2.5·10^7).
    seed : int
        Seed of the draws.
    density : DensitySolution, optional
        A precomputed solution at the same t_eval (skips the PDE solve).
    progress : bool or None
        Progress bars (None: only for solves longer than a few seconds).
    sampling : {"stratified", "iid", "quantile", "weighted"}
        How the tokens discretise ρ_0 (``meanfield.sampling.discretise``): "stratified" (default),
        "iid", "quantile" (S^1, deterministic: one draw whatever ``seeds``), "weighted" (the
        particles carry weights ρ·area).
    grid_reference : bool
        Also solve on the coarser grid (half the cells, icosphere(level - 1), or adaptive cells with
        base, bulk and finest one level less: ``coarser_cells``) and record W_2(ρ_h, ρ_{2h}) as the
        grid error estimate (skipped for a precomputed ``density``).
    causal : bool
        Causal attention: particles vs ``solvers.causal`` (geometry "circle", flux "upwind2",
        sampling "stratified" or "iid"; rho0 may be f(s, θ)).
    slices, bins : int
        With ``causal``: the slices in s of the PDE and the bins of s of the distance (n and
        ``slices`` multiples of ``bins``).

    Returns
    -------
    Comparison or CausalComparison
        ``w1``, ``w2`` (m, seeds), energies, cluster counts, both solutions and ``info``; on adaptive
        cells ``density`` is on changing meshes (``density.cells``, ``density.snapshot(k)``) and
        ``info["grid"]`` records the cells of every output, the remeshes and the meshes.

    Raises
    ------
    ValueError
        If the model, grid, sampling, times or a precomputed density do not fit (checked before any
        solve).
    TypeError
        If the model is not SA/USA.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> c.particles.x.shape                 # (m, seeds, n, d)
    (2, 2, 64, 2)
    >>> c.info["sampling"], c.info["geometry"]
    ('stratified', 'circle')
    >>> s = compare(mf.SA(beta=4.0), mf.perturbed_uniform(3, seed=0), [0.0, 1.0], n=40, seeds=1,
    ...             geometry="sphere", base=1, finest=2)          # adaptive cells, levels 1 to 2
    >>> s.info["grid"]["mesh"], len(s.info["grid"]["cells_per_output"]), s.info["grid"]["reference"]
    ('adaptive', 2, 'adaptive base 0, finest 1, bulk 1')
    """
    if as_flag(causal, "causal"):
        given = [name for name, value in (("level", level), ("grid", grid), ("base", base), ("finest", finest),
                                          ("bulk", bulk)) if value is not None]
        if given:
            raise ValueError(f"causal=True solves the causal PDE on [0, 1] × S^1 (cells and slices): "
                             f"{', '.join(given)} set the cells on S^2 and do not apply")
        return _compare_causal(model, rho0, t_eval, n, seeds, geometry=geometry, cells=cells, flux=flux,
                               scheme=scheme, dt=dt, summation=summation, seed=seed, density=density,
                               progress=progress, sampling=sampling, grid_reference=grid_reference, slices=slices,
                               bins=bins)
    if getattr(model, "causal", False):
        raise ValueError(f"{model!r} is causal: compare it with the causal PDE on [0, 1] × S^1 by passing causal=True")
    cells = 512 if cells is None else cells
    model = as_model(model)
    as_choice(geometry, "geometry", tuple(GEOMETRIES))
    d = GEOMETRIES[geometry]
    t_eval = as_time_grid(t_eval)
    n, seeds = as_count(n, "n"), as_count(seeds, "seeds")
    seed = as_seed(seed)
    spec = None
    if density is None:
        spec = check_density_settings(geometry, model, cells, level, flux, grid=grid, base=base, finest=finest,
                                      bulk=bulk)
    as_choice(sampling, "sampling", METHODS)
    if sampling == "quantile" and d != 2:
        raise ValueError("sampling 'quantile' is the inverse CDF on the circle; on the sphere use 'stratified' "
                         "or 'weighted'")
    if sampling not in RANDOMISED:
        seeds = 1
    timings, cpu = {}, {}
    clock = _Clock(timings, cpu)
    x0, weights = initial_tokens(rho0, n, d, sampling, seed, seeds)
    from meanfield.solvers import particles
    if scheme is None:
        scheme = "dopri5" if geometry == "sphere" and dt is None else "rk4"
    part = particles.solve(model, x0, t_eval, scheme=scheme, dt=dt, summation=summation, progress=progress,
                           energy=False, weights=weights)
    ws = [None] * seeds if weights is None else weights
    part.energy = np.array([[energy(xs, model.beta, weights=w, summation=summation) for xs, w in zip(xk, ws)]
                            for xk in part.x])
    clock.lap("particles")
    coarse, coarse_cells = None, None
    if density is None:
        density = density_solver(geometry, model, rho0, t_eval, cells=cells, flux=flux, progress=progress,
                                 **(spec or {}))
        coarse_cells = coarser_cells(spec) if spec is not None else None
        if grid_reference and (cells // 2 >= 8 if geometry == "circle" else coarse_cells is not None):
            reference = _Clock({}, {})
            coarse = density_solver(geometry, model, rho0, t_eval, cells=cells // 2, flux=flux, **(coarse_cells or {}))
            reference.lap("grid_reference")
            timings.update(reference.wall)
            cpu.update(reference.cpu)
        if coarse is None:
            coarse_cells = None
    elif density.t.shape != t_eval.shape or not np.allclose(density.t, t_eval) or density.points.shape[-1] != d:
        raise ValueError("density must be a DensitySolution on the same sphere at the same output times t_eval")
    else:
        check_same_problem(density, model, rho0)
    clock.lap("density")
    m = t_eval.size
    w1, w2 = np.empty((m, seeds)), np.empty((m, seeds))
    cp, cd = np.empty((m, seeds), dtype=int), np.empty(m, dtype=int)
    methods = set()
    most = _most_cells(density)
    series = series_method(transport, d, n * most)          # one method for the whole series
    for k in track(range(m), "transport", progress, unit="outputs"):
        y, b = drop_negligible(*density.measure(k), tol=NEGLIGIBLE)
        for s in range(seeds):
            atoms = merge_atoms(part.x[k, s], ws[s], tol=MERGE_TOL)
            w1[k, s], info = wasserstein(*atoms, y, b, p=1, method=series, return_info=True)
            methods.add(info["method"])
            w2[k, s] = wasserstein(*atoms, y, b, p=2, method=series)
        cp[k] = [particle_clusters(xs, w) for xs, w in zip(part.x[k], ws)]
        cd[k] = density_clusters(density, k)
    grid_error = None if coarse is None else np.array(
        [wasserstein(*drop_negligible(*density.measure(k), tol=NEGLIGIBLE),
                     *drop_negligible(*coarse.measure(k), tol=NEGLIGIBLE), p=2,
                     method=series_method(transport, d, most * _most_cells(coarse))) for k in range(m)])
    clock.lap("transport")
    info = dict(geometry=geometry, d=d, model=model.to_dict(), model_name=repr(model), n=n, seeds=seeds, seed=seed,
                sampling=sampling, **instability(model, d, n),
                flux=density.info.get("flux", flux), grid=_grid_info(density, d, coarse_cells),
                particle_method=part.info.get("method"),
                particle_dt=part.info.get("dt"), density_dt=density.info.get("dt"),
                transport_methods=sorted(methods), transport_exact="sliced" not in methods,
                rho0=getattr(rho0, "spec", None), timings={k: round(v, 3) for k, v in timings.items()},
                cpu_seconds={k: round(v, 3) for k, v in cpu.items()})
    return Comparison(t=t_eval, w1=w1, w2=w2, energy_particles=part.energy,
                      energy_density=np.asarray(density.energy, dtype=float), clusters_particles=cp,
                      clusters_density=cd, particles=part, density=density, info=info, weights=weights,
                      grid_error=grid_error)


def check_same_problem(density: object, model: object, rho0: object, tol: float = 0.02) -> None:
    r"""Refuse a precomputed density of another model or another initial density.

    The density's model must equal ``model``, and its output 0 must carry ρ0's mass where ρ0 does: the
    first and second moments of the cell measure m_i = ρ_i(0)|C_i| and of ρ0 read at the cell centres,
    w_i = ρ0(c_i)|C_i| (both normalised), may differ by at most ``tol``:

    .. math::

        \max\Big(\Big|\sum_i (m_i - w_i)\, c_i\Big|_\infty,\
        \Big|\sum_i (m_i - w_i)\, c_i c_i^T\Big|_\infty\Big) \le \text{tol}.

    (The same ρ0 gives 0 where the solver reads ρ0 at the centres and the sub-cell shift of cell averages
    otherwise; two different perturbations of the uniform density differ by several hundredths.)

    Parameters
    ----------
    density : DensitySolution
        The precomputed solution (fixed or changing meshes).
    model : SA or USA
        The comparison's model.
    rho0 : callable
        The comparison's initial density.
    tol : float
        Largest moment difference at t = 0.

    Raises
    ------
    ValueError
        Naming what differs.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare.core import check_same_problem
    >>> from meanfield.solvers import circle
    >>> rho0 = mf.perturbed_uniform(2, seed=0)
    >>> sol = circle.solve(mf.SA(2.0), rho0, [0.0, 0.5], cells=64)
    >>> check_same_problem(sol, mf.SA(2.0), rho0)                   # the same problem: nothing to say
    >>> check_same_problem(sol, mf.SA(3.0), rho0)
    Traceback (most recent call last):
    ...
    ValueError: density was solved for SA(beta=2), not for the comparison's SA(beta=3)
    """
    if getattr(density, "model", None) != model:
        raise ValueError(f"density was solved for {density.model!r}, not for the comparison's {model!r}")
    first = density.snapshot(0) if getattr(density, "cells", None) is not None else density
    points = first.points
    given = np.clip(np.asarray(rho0(points), dtype=float), 0.0, None) * first.areas
    solved = np.clip(first.rho[0], 0.0, None) * first.areas
    gap = max(np.abs(_moments(points, given) - _moments(points, solved)).max(), 0.0)
    if not gap <= tol:
        raise ValueError(f"density does not start from the comparison's rho0: their first or second moments "
                         f"at t = 0 differ by {gap:.3g} (> {tol:g}); solve the density from the same rho0")


def _moments(points, weights):
    """First and second moments (flattened) of the normalised measure sum_i w_i delta_{points_i}."""
    w = weights / weights.sum()
    return np.concatenate([w @ points, np.einsum("i,ij,ik->jk", w, points, points).ravel()])


def _most_cells(density):
    """The most cells of any output of a density solution (fixed or changing meshes)."""
    cells = getattr(density, "cells", None)
    return int(np.max(cells)) if cells is not None else int(density.points.shape[-2])


class _Clock:
    """Wall (``time.perf_counter``) and CPU (``time.process_time``, all threads) seconds of the parts of a
    comparison: ``lap(name)`` records the time since the previous lap into ``wall[name]`` and ``cpu[name]``."""

    def __init__(self, wall, cpu):
        self.wall, self.cpu = wall, cpu
        self.start = time.perf_counter(), time.process_time()

    def lap(self, name):
        now = time.perf_counter(), time.process_time()
        self.wall[name], self.cpu[name] = now[0] - self.start[0], now[1] - self.start[1]
        self.start = now


def _compare_causal(model, rho0, t_eval, n, seeds, *, geometry, cells, flux, scheme, **options):
    """``compare(..., causal=True)``: the geometry and flux checked, then ``compare.causal.compare_causal``."""
    from meanfield.solvers import circle

    from .causal import CELLS, compare_causal
    if as_choice(geometry, "geometry", tuple(GEOMETRIES)) != "circle":
        raise ValueError("causal=True compares with the causal PDE on [0, 1] × S^1: geometry must be 'circle'")
    if as_choice(flux, "flux", circle.FLUXES) != FLUX:
        raise ValueError(f"the causal PDE solver has one flux, {FLUX!r}; got flux={flux!r}")
    return compare_causal(model, rho0, t_eval, n, seeds, cells=CELLS if cells is None else cells,
                          scheme="rk4" if scheme is None else scheme, **options)


def initial_tokens(rho0, n, d, sampling, seed, seeds):
    """x0 (seeds, n, d) discretising ρ_0 and their weights (seeds, n), or None when all are 1/n.
    The draws use successive states of ``numpy.random.default_rng(seed)`` (i.i.d.: one batch, as
    ``sample_density(rho0, n, d, seed, batch=seeds)``)."""
    if sampling == "iid":
        return sample_density(rho0, n, d, seed=seed, batch=seeds), None
    rng = np.random.default_rng(seed)
    draws = [discretise(rho0, n, d, sampling, seed=rng) for _ in range(seeds)]
    x0 = np.stack([x for x, _ in draws])
    return x0, (np.stack([w for _, w in draws]) if sampling == "weighted" else None)


def instability(model, d, n):
    """{lambda_star, mode, horizon}: the fastest linear growth rate λ* at the uniform measure, its
    degree l* and the i.i.d. horizon t_n = log(n)/(2λ*); empty for models with no unstable mode."""
    if not model.is_isotropic or model.sign < 0:
        return {}
    mode = most_unstable_mode(model, d)
    rate = growth_rate(model, d, mode)
    if not rate > 0:
        return {}
    return dict(lambda_star=rate, mode=mode, horizon=float(np.log(n) / (2.0 * rate)))


def write_report(comparison, folder, options=None):
    """Write a comparison's report into ``folder`` all at once: report.json, particles.npz, density.npz
    and the PNG plots.

    The write goes through ``meanfield.atomic.replace_folder``: an interrupted write leaves the
    previous report whole, and a finished one carries the marker complete.json.
    ``Comparison.load(folder)`` reads it back.

    Parameters
    ----------
    comparison : Comparison
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
    >>> from meanfield.compare import write_report
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     paths = write_report(c, os.path.join(parent, "report"))
    ...     print(sorted(os.path.basename(p) for p in paths if not p.endswith(".png")))
    ['complete.json', 'density.npz', 'particles.npz', 'report.json']
    """
    if comparison.info.get("causal"):
        from ..plotting.causal import report_figures
    else:
        from ..cli.report import report_figures
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
        names.extend(os.path.relpath(p, tmp) for p in report_figures(comparison, tmp))

    folder = atomic.replace_folder(folder, write, "out")
    return [os.path.join(folder, name) for name in names + [atomic.MARKER]]
