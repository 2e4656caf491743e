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
import time

import numpy as np

from ..budget import check_memory
from ..checks import as_choice, as_count, as_flag, as_seed, as_time_grid
from ..clusters import density_clusters, particle_clusters
from .models import energy_note, particle_energy
from ..geometry import GEOMETRIES
from ..models import as_model
from ..sampling import METHODS, RANDOMISED
from ..solvers import circle, particles
from .causal import CELLS, compare_causal
from .cells import FLUX, check_density_settings, coarser_cells, grid_info
from .density import density_solver
from .distances import distance_series, grid_error, instability
from .report import Comparison
from .tokens import initial_tokens

__all__ = ["compare", "check_same_problem", "Clock"]


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
        if transport != "auto":
            raise ValueError(f"transport = {transport!r} does not apply with causal=True: the causal comparison "
                             f"measures its own distance, W_1 on the circle per bin of s (leave transport='auto')")
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
    check_memory(8.0 * n * seeds * d * (t_eval.size + 8), f"n = {n} tokens x {seeds} seeds")
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
    clock = Clock(timings, cpu)
    x0, weights = initial_tokens(rho0, n, d, sampling, seed, seeds)
    if scheme is None:
        scheme = "dopri5" if geometry == "sphere" and dt is None else "rk4"
    part = particles.solve(model, x0, t_eval, scheme=scheme, dt=dt, summation=summation, progress=progress,
                           energy=False, weights=weights)
    ws = [None] * seeds if weights is None else weights
    part.energy = np.array([[particle_energy(model, xs, w, summation) for xs, w in zip(xk, ws)]
                            for xk in part.x])
    clock.lap("particles")
    coarse, coarse_cells = None, None
    if density is None:
        density = density_solver(geometry, model, rho0, t_eval, cells=cells, flux=flux, progress=progress,
                                 **(spec or {}))
        coarse_cells = coarser_cells(spec) if spec is not None else None
        if grid_reference and (cells // 2 >= 8 if geometry == "circle" else coarse_cells is not None):
            reference = Clock({}, {})
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
    ws = [None] * seeds if weights is None else weights
    w1, w2, methods = distance_series(part.x, weights, density, transport, progress)
    cp = np.array([[particle_clusters(xs, w) for xs, w in zip(xk, ws)] for xk in part.x], dtype=int)
    cd = np.array([density_clusters(density, k) for k in range(t_eval.size)], dtype=int)
    grid = None if coarse is None else grid_error(density, coarse, transport)
    clock.lap("transport")
    cells_used = grid_info(density, d, coarse_cells)
    info = dict(geometry=geometry, d=d, model=model.to_dict(), model_name=repr(model), n=n, seeds=seeds, seed=seed,
                sampling=sampling, **instability(model, d, n), energy=energy_note(model, d),
                flux=density.info.get("flux", flux), grid=cells_used, particle_method=part.info.get("method"),
                particle_dt=part.info.get("dt"), density_dt=density.info.get("dt"),
                transport_methods=sorted(methods), transport_exact="sliced" not in methods,
                rho0=getattr(rho0, "spec", None), timings={k: round(v, 3) for k, v in timings.items()},
                cpu_seconds={k: round(v, 3) for k, v in cpu.items()})
    return Comparison(t=t_eval, w1=w1, w2=w2, energy_particles=part.energy,
                      energy_density=np.asarray(density.energy, dtype=float), clusters_particles=cp,
                      clusters_density=cd, particles=part, density=density, info=info, weights=weights,
                      grid_error=grid)


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

    Returns
    -------
    None
        Nothing: the check passes silently.

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


class Clock:
    """Wall (``time.perf_counter``) and CPU (``time.process_time``, all threads) seconds of the parts of a
    comparison: ``lap(name)`` records the time since the previous lap into ``wall[name]`` and ``cpu[name]``.

    Parameters
    ----------
    wall, cpu : dict
        Where the laps are recorded (name -> seconds).

    Examples
    --------
    >>> from meanfield.compare.core import Clock
    >>> wall, cpu = {}, {}
    >>> clock = Clock(wall, cpu)
    >>> clock.lap("nothing")
    >>> sorted(wall) == sorted(cpu) == ["nothing"] and wall["nothing"] >= 0
    True
    """

    def __init__(self, wall, cpu):
        self.wall, self.cpu = wall, cpu
        self.start = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        """Record the seconds since the previous lap (or the start) under ``name``."""
        now = time.perf_counter(), time.process_time()
        self.wall[name], self.cpu[name] = now[0] - self.start[0], now[1] - self.start[1]
        self.start = now


def _compare_causal(model, rho0, t_eval, n, seeds, *, geometry, cells, flux, scheme, **options):
    """``compare(..., causal=True)``: the geometry and flux checked, then ``compare.causal.compare_causal``."""
    if as_choice(geometry, "geometry", tuple(GEOMETRIES)) != "circle":
        raise ValueError("causal=True compares with the causal PDE on [0, 1] × S^1: geometry must be 'circle'")
    if as_choice(flux, "flux", circle.FLUXES) != FLUX:
        raise ValueError(f"the causal PDE solver has one flux, {FLUX!r}; got flux={flux!r}")
    return compare_causal(model, rho0, t_eval, n, seeds, cells=CELLS if cells is None else cells,
                          scheme="rk4" if scheme is None else scheme, **options)
