"""Finite volumes on S^2 with adaptive cells that follow the clusters.

The continuity equation ∂_t ρ + div_S(ρ X[ρ]) = 0 is solved by ``sphere``'s finite-volume scheme
(``sphere.time_derivative``: any of its fluxes, SSP-RK3) on a spherical Voronoi mesh whose
generators are a graded subset of the nested icosahedral vertices (``remesh``): every vertex of
the base level L_0, and the vertices of the finer levels up to L where the mass asks for them.

- **Criterion** (mass equidistribution): cell i wants the level
  ℓ_i = clip(L_0 + ceil(log_4(ρ_i / (θ ρ̄))), L_0, L), ρ̄ = M/4π, i.e. no cell holds more than θ
  times the mass of a base-level cell of the mean density, as far as level L allows.  A cluster,
  whose density grows without bound, is resolved at level L; a region that empties returns to
  L_0.  Refinement is immediate; a vertex already in the mesh stays until its cell wants less than
  the level with θ/4 (hysteresis, so that a cell does not flip at every check).  ``buffer`` cells of
  each level surround the finer region (``remesh.select``); if the set exceeds ``max_cells``,
  θ is raised fourfold until it fits.
- **Leading refinement**: at each check the wanted levels are carried along the field over |u| ·
  ``interval``, the farthest the mass can move before the next check (``remesh.downstream``): a
  moving cluster finds refined cells ahead of it.
- **Remeshing**: the criterion is checked every ``every`` steps and at least every ``interval`` time
  units; when it changes the generator set,
  the mesh is rebuilt and the densities moved by ``remesh.transfer`` (exact polygon
  intersections, linear reconstruction, each old cell's mass shared among the new cells it
  overlaps: mass to round-off, ρ ≥ 0, the uniform state kept to round-off).
- **Steps**: positivity-controlled SSP-RK3 (``stepping.integrate(positivity=True)``) with
  ``sphere``'s stage, whose rate is the cells' actual outflow (every stage ≥ 0).  Fine cells sit in
  clusters, where |X| is small, so the step is not tied to the finest cell size.
- **Energy**: E_β of the cell measure at the outputs (``info["energy_dips"]``, as the fixed-mesh
  solvers), and across every remesh: ``info["remesh_energy"]`` holds the relative change
  (E_after - E_before)/|E_before| of each remesh and their largest drop and rise.

With ``finest == base`` nothing is ever refined and the run is ``sphere.solve`` on
``icosphere(base)`` (the same stage and the same controlled steps: identical arithmetic).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from os import PathLike

import numpy as np
from numpy.typing import ArrayLike

from meanfield.budget import BUDGET, as_budget, check_advance, over_budget
from meanfield.checks import as_choice, as_count, as_density, as_float_array, as_positive, as_time_grid
from meanfield.checks import as_flag, unit_mass
from meanfield.models import SA, USA, MultiHead, as_model
from meanfield.progress import Progress

from . import sphere_fv, threads
from .circle import density_model
from .full_model import energy_direction
from .kernels import spectral
from .meshes import adaptive_state
from .diffusion import as_diffusion
from .meshes.changing import padded_solution, pinned_on_stretches, remesh_energy
from .energy_report import mesh_adjacency, warn_pinned
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME, scheme_name, with_scheme
from .results import DensitySolution
from .meshes.remesh import adaptive_mesh, downstream, level_size, select, transfer, wanted_levels
from .stepping import CFL as STEP_CFL, IMPLICIT_ATOL, IMPLICIT_RTOL, Checkpoint, digest, integrate, next_stretch, \
    restored_stretch, stretch_state, takes_operator, with_tolerances

__all__ = ["solve", "initial_mesh", "check_levels"]

BULK_DENSITY = 0.1      # cells at least this dense (relative to the mean) keep level ``bulk``
COARSEN = 0.25         # lazy remeshing: coarsen once a quarter of the cells could be two levels coarser
BULK_LEVELS = 2         # default bulk level: base + BULK_LEVELS (at most finest)
DEFAULTS = dict(base=3, finest=9, bulk=None, threshold=2.0, buffer=2, every=8, interval=0.25, max_cells=20000)


def _wanted(rho, mesh, settings, threshold, sweep=None):
    """The level each cell wants: mass equidistribution with ``threshold`` (``remesh.wanted_levels``),
    at least ``bulk`` wherever the density is at least ``BULK_DENSITY`` times its mean, and, given
    ``sweep`` = u τ (the field at the generators times the time to the next check), carried
    downstream over |u| τ (``remesh.downstream``)."""
    areas = mesh.areas
    want = wanted_levels(rho, areas, settings["base"], settings["finest"], threshold)
    if settings["bulk"] > settings["base"]:
        dense = rho * (4 * np.pi) >= BULK_DENSITY * float(rho @ areas)
        want[dense] = np.maximum(want[dense], settings["bulk"])
    return want if sweep is None else downstream(mesh, want, sweep, 1.0)


def _bulk(bulk, base, finest):
    """The bulk level: ``bulk``, or by default min(base + BULK_LEVELS, finest)."""
    return min(base + BULK_LEVELS, finest) if bulk is None else as_count(bulk, "bulk", minimum=0)


MAX_FINEST = 12     # icosphere(12): 1.7e8 cells, 2.7e-4 rad apart; deeper levels are refused


def check_levels(base, finest, bulk=None):
    r"""The levels of adaptive cells, checked: the base level, the finest level and the bulk level
    (by default min(base + BULK_LEVELS, finest)), in order:

    .. math::

        L_0 \le \ell_b \le L.

    Parameters
    ----------
    base, finest : int
        The coarsest and the finest icosahedral level.
    bulk : int, optional
        The level of the cells at least ``BULK_DENSITY`` times as dense as the mean.

    Returns
    -------
    tuple of int
        (base, finest, bulk).

    Raises
    ------
    ValueError
        If a level is negative or the levels are out of order.
    TypeError
        If a level is not an integer.

    Examples
    --------
    >>> from meanfield.solvers.adaptive import check_levels
    >>> check_levels(3, 9), check_levels(2, 3), check_levels(3, 8, bulk=4)
    ((3, 9, 5), (2, 3, 3), (3, 8, 4))
    """
    base = as_count(base, "base", minimum=0)
    finest = as_count(finest, "finest", minimum=0)
    if finest < base:
        raise ValueError(f"finest = {finest} must be at least base = {base}")
    if finest > MAX_FINEST:
        raise ValueError(f"finest = {finest} is above MAX_FINEST = {MAX_FINEST}: icosphere({finest}) has "
                         f"{10 * 4 ** finest + 2:.3g} cells; refine at most to level {MAX_FINEST}")
    bulk = _bulk(bulk, base, finest)
    if not base <= bulk <= finest:
        raise ValueError(f"bulk = {bulk} must lie between base = {base} and finest = {finest}")
    return base, finest, bulk


def _refined(amesh, rho, settings, threshold, lazy=False, sweep=None):
    """The generator set the criterion asks for (with hysteresis against ``amesh``'s own set), led
    along ``sweep`` (u τ at the generators, ``_wanted``; or a callable returning it, called only when
    the lead can change the answer) when it is given.

    With ``lazy``, the set is kept as it is while no cell wants a finer level than it has and
    coarsening would remove fewer than ``COARSEN`` of the cells: a remesh costs as much as tens of
    steps, and the mesh would otherwise follow every sub-cell drift of the buffer zones.  Leading only
    raises wanted levels to levels some cell wants (``remesh.downstream``), so when no cell wants more
    than the coarsest level the mesh has, and the set is kept without the lead, it is kept with it: the
    field is then not evaluated (the near-uniform phase, where every cell wants the bulk level)."""
    base, buffer = settings["base"], settings["buffer"]
    if lazy and callable(sweep):
        want = _wanted(rho, amesh.mesh, settings, threshold)
        if want.max() <= amesh.levels.min() and _kept(amesh, want, _wanted(rho, amesh.mesh, settings, threshold / 4)):
            return amesh.index, threshold
    if callable(sweep):
        sweep = sweep()
    before = None
    while True:
        want = _wanted(rho, amesh.mesh, settings, threshold, sweep)
        keep = _wanted(rho, amesh.mesh, settings, threshold / 4, sweep)
        if lazy and _kept(amesh, want, keep):
            return amesh.index, threshold
        index = np.union1d(select(amesh, want, base, buffer),
                           np.intersect1d(select(amesh, keep, base, buffer), amesh.index, assume_unique=True))
        if index.size <= settings["max_cells"] or np.all(want == base):
            return index, threshold
        if before is not None and np.array_equal(want, before[0]) and np.array_equal(keep, before[1]):
            raise ValueError(f"the mesh needs {index.size} cells, more than max_cells = {settings['max_cells']}, "
                             f"whatever the threshold: the cells at least {BULK_DENSITY:g} times as dense as the mean "
                             f"keep level bulk = {settings['bulk']}; raise max_cells or lower bulk")
        before = want, keep
        threshold *= 4.0


def _kept(amesh, want, keep):
    """The lazy rule of ``_refined``: no cell wants a finer level than it has, and fewer than ``COARSEN``
    of the cells could be two levels coarser."""
    return bool(np.all(want <= amesh.levels) and np.count_nonzero(keep < amesh.levels - 1) < COARSEN * amesh.size)


def _initial(rho0, amesh, base):
    """Unit-mass cell densities of rho0 on amesh: a callable evaluated at the generators, or an
    array of cell densities on icosphere(base) moved conservatively."""
    if callable(rho0):
        values = as_float_array(rho0(amesh.mesh.points.copy()), "rho0(points)")
        if values.shape != (amesh.size,):
            raise ValueError(f"rho0(points) must return one density per point, shape ({amesh.size},); "
                             f"got {values.shape}")
        rho = as_density(values, "rho0")
    else:
        rho = as_density(rho0, "rho0")
        rho = rho / rho.max()                       # relative sizes: no underflow in the transfer
        sizes = [level_size(level) for level in range(amesh.finest + 1)]
        if rho.ndim != 1 or rho.size not in sizes:
            raise ValueError(f"an array rho0 must hold one density per cell of icosphere(k), k <= finest = "
                             f"{amesh.finest}: shape (10·4^k + 2,), e.g. ({sizes[base]},) for icosphere({base}); got "
                             f"{rho.shape} (or pass a callable of points (N, 3))")
        rho = transfer(adaptive_mesh(np.arange(rho.size), amesh.finest), amesh, rho)
    return unit_mass(rho, amesh.mesh.areas)


def initial_mesh(rho0, base=DEFAULTS["base"], finest=DEFAULTS["finest"], threshold=DEFAULTS["threshold"],
                 buffer=DEFAULTS["buffer"], max_cells=DEFAULTS["max_cells"], bulk=None):
    """The adaptive mesh that the refinement criterion asks for at t = 0.

    Found by refining from the base level, with rho0 evaluated on each new mesh, until the set of
    generators no longer changes; each cell i is resolved at the level ``remesh.wanted_levels``
    gives it (the mass of a cell at most θ times that of a base-level cell of the mean density).

    Parameters
    ----------
    rho0 : callable or array_like
        Densities of points (N, 3), or cell densities on ``icosphere(base)``.
    base, finest : int
        The coarsest and the finest icosahedral level.
    threshold : float
        θ (raised if the mesh would exceed ``max_cells``).
    buffer : int
        Cells of each level around the finer region.
    max_cells : int
    bulk : int, optional
        Cells at least ``BULK_DENSITY`` times as dense as the mean are kept on this level or finer
        (default: min(base + BULK_LEVELS, finest); ``bulk=base`` turns this off).

    Returns
    -------
    amesh : remesh.AdaptiveMesh
    rho : ndarray, shape (N,)
        rho0 on its cells, unit mass.
    threshold : float
        The θ used.

    Examples
    --------
    >>> from meanfield.measures import perturbed_uniform
    >>> amesh, rho, _ = initial_mesh(perturbed_uniform(3, degree=2), base=2, finest=3)
    >>> amesh.size >= 162
    True
    """
    settings = dict(base=base, finest=finest, buffer=buffer, max_cells=max_cells, bulk=_bulk(bulk, base, finest))
    amesh = adaptive_mesh(np.arange(level_size(base)), finest)
    for _ in range(finest - base + 2):
        rho = _initial(rho0, amesh, base)
        index, threshold = _refined(amesh, rho, settings, threshold)
        if np.array_equal(index, amesh.index):
            break
        amesh = adaptive_mesh(index, finest)
    return amesh, _initial(rho0, amesh, base), threshold


def _field(heads, rho, mesh, summation):
    """The particle field of the cell densities ``rho`` at the generators, summed over the heads."""
    return sum(sphere_fv.cell_field(h, rho, mesh, summation)[0] for h in heads)


def _pinned(model, out, summation, t):
    """The generators (finest-level indices) of the cells pinned while the mesh stayed the same
    (``meshes.changing.pinned_on_stretches``)."""
    heads = getattr(model, "heads", (model,))
    found = pinned_on_stretches(t, [a for a, _ in out], [r for _, r in out],
                                lambda a: mesh_adjacency(a.mesh.cell_ptr, a.mesh.cell_neighbours),
                                lambda a: a.mesh.points, lambda a: a.mesh.areas,
                                lambda a, rho: _field(heads, rho, a.mesh, summation),
                                lambda a: np.sqrt(a.mesh.areas))
    return np.unique(np.concatenate([np.zeros(0, dtype=np.int64)] + [a.index[cells] for a, cells in found]))


@threads.solving()      # OpenBLAS's spinning threads asleep; the faster of Numba's threads and one
def solve(model: SA | USA | MultiHead, rho0: Callable | ArrayLike, t_eval: ArrayLike, *,
          flux: str = sphere_fv.DEFAULT_FLUX, scheme: str | type | object = DENSITY_SCHEME, dt: float | None = None,
          base: int = DEFAULTS["base"],
          finest: int = DEFAULTS["finest"], bulk: int | None = DEFAULTS["bulk"],
          threshold: float = DEFAULTS["threshold"], buffer: int = DEFAULTS["buffer"], every: int = DEFAULTS["every"],
          interval: float = DEFAULTS["interval"], max_cells: int = DEFAULTS["max_cells"], cfl: float = STEP_CFL,
          summation: str = "auto", diffusion: float = 0.0, energy: bool = True, progress: bool | None = None,
          checkpoint: str | PathLike | None = None, checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = IMPLICIT_RTOL, atol: float = IMPLICIT_ATOL) -> DensitySolution:
    """Solve the continuity equation on S^2 on adaptive cells; return a DensitySolution whose
    ``cells`` field gives each output's number of cells (its mesh may change over time).

    Parameters
    ----------
    model : SA or USA with Q^T K = I, V = ±I, or a MultiHead of such heads (as ``sphere.solve``).
    rho0 : callable of points (N, 3) -> densities, or an array of cell densities on
        ``icosphere(k)`` for some k ≤ ``finest`` (moved conservatively onto the first mesh);
        normalised to unit mass.
    t_eval : increasing output times.
    flux : "upwind2" (default), "upwind", "muscl" or "tpfa" (``sphere``'s fluxes).
    scheme : the time scheme (``stepping.integrate``), default "ssprk3", positivity-controlled.
    dt : None (default): positivity-controlled steps; a number: fixed steps of at most dt, and at most
        the current mesh's positivity bound ``SphereOperator.step_bound()``, the criterion checked every
        ``every`` steps (with ``finest == base``: ``sphere.solve(mesh=icosphere(base), dt=dt)``, step
        for step).
    base, finest : the coarsest and the finest icosahedral level of the cells (L_0 ≤ L; L = L_0
        refines nothing).  ``meanfield.compare`` has its own preset, ``compare.ADAPTIVE`` (3, 8,
        bulk 4), one level coarser so that ``meanfield compare --geometry sphere`` runs in about 30 s.
    threshold : θ, the most mass a cell may hold, in units of a base-level cell at the mean
        density (module docstring).
    buffer : cells of each level around the finer region.
    every, interval : the criterion is checked every ``every`` steps, and at least every ``interval``
        time units (a density can concentrate fourfold in 1/(2β) while the positivity-controlled
        steps of a near-uniform state are long).
    max_cells : the most cells a mesh may have (θ is raised until the mesh fits).
    summation : "auto" | "direct" | "fast" (``particles.attention_field``).
    energy : compute E_β at the outputs and across the remeshes.
    progress : one report for the whole run (``meanfield.progress``), across its stretches.
    checkpoint : path, optional: the run's state is saved there (``adaptive_state``) at the first
        check of the criterion after every ``checkpoint_every`` time steps, and where the budget
        stops the run; ``resume=True`` continues from it, repeating the arithmetic of an
        uninterrupted run (the outputs are equal bit for bit).
    checkpoint_every : time steps between checkpoints (default 100).
    bulk : every cell at least ``BULK_DENSITY`` times as dense as the mean keeps level ``bulk``
        (default min(base + BULK_LEVELS, finest); ``bulk=base``: no such floor): the cluster
        masses are decided at the watersheds while the density is still smooth, and this resolves
        that phase (docs/adaptive.md).
    cfl : in (0, 1]: the fraction of the positivity bound a controlled step takes (as ``sphere.solve``).
    diffusion : D >= 0 adds D Δ_S ρ by two-point fluxes on each mesh (as ``sphere.solve``).
    budget : seconds (default one hour; None: no limit): the run stops with a RuntimeError at the
        first check of the criterion past it, after saving its ``checkpoint`` (resume from it).
    rtol, atol : tolerances of the error-controlled schemes ("mprk22", "auto"; ``circle.solve``).  With
        an implicit scheme the mesh is checked every ``every`` implicit steps (at least ``interval``) and
        the implicit controller restarts on each new mesh from the last step; "auto" goes on with the member
        it ended a stretch with.

    Returns
    -------
    DensitySolution with rho, points, areas padded to the largest mesh and ``cells`` (m,); info
    holds flux, the settings, remeshes (the number of mesh changes), checks, remesh_seconds,
    meshes (t, cells and finest cell level of every mesh used), energy_dips, remesh_energy,
    and the step counters (nfev, nsteps, nrejected, hmin, hmax).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.measures import perturbed_uniform
    >>> sol = solve(mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 0.5], base=2, finest=3)
    >>> bool(abs(sol.mass[-1] - 1) < 1e-12 and sol.rho.min() >= 0)
    True
    """
    model = density_model(as_model(model, multihead=True), 3, "adaptive sphere", max_beta=spectral.MAX_BETA)
    sphere_fv.max_step(model, sphere_fv.icosphere(0), flux)           # validates the flux
    as_choice(summation, "summation", ("auto", "direct", "fast"))
    t_eval = as_time_grid(t_eval)
    energy = as_flag(energy, "energy")
    base, finest, bulk = check_levels(base, finest, bulk)
    buffer = as_count(buffer, "buffer", minimum=0)
    every = as_count(every, "every")
    interval = as_positive(interval, "interval")
    check_advance(t_eval, interval, "interval", "this adaptive solve", "remeshing stretches")
    threshold = as_positive(threshold, "threshold")
    cfl, diffusion, budget = as_positive(cfl, "cfl"), as_diffusion(diffusion), as_budget(budget)
    dt = None if dt is None else as_positive(dt, "dt")
    if cfl > 1:
        raise ValueError(f"cfl must lie in (0, 1]; got {cfl!r}")
    settings = dict(base=base, finest=finest, buffer=buffer, max_cells=as_count(max_cells, "max_cells"), bulk=bulk)
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint=PATH (the file to resume from)")
    meta = dict(solver="adaptive", model=model.to_dict(), flux=flux, summation=summation, t_eval=t_eval.tolist(),
                every=every, interval=interval, threshold=threshold, cfl=cfl, diffusion=diffusion, **settings)
    if dt is not None:
        meta["dt"] = dt
    meta = with_scheme(with_tolerances(meta, scheme, rtol, atol), scheme)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, meta=meta)
    start = time.perf_counter()
    amesh, rho, threshold = initial_mesh(rho0, base, finest, threshold, buffer, settings["max_cells"], bulk)
    remesh_seconds = time.perf_counter() - start
    counters = dict(nfev=0, nsteps=0, nrejected=0, hmin=np.inf, hmax=0.0, checks=0)
    meshes = [dict(t=float(t_eval[0]), cells=amesh.size, finest=int(amesh.levels.max()))]
    jumps = []
    out = [(amesh, rho)]
    t, k = float(t_eval[0]), 1
    initial = digest(rho)
    saved = adaptive_state.load(ckpt, initial, t_eval, finest) if resume else None
    stretch, implicit_step, switches = sphere_fv.auto_scheme(scheme), None, []   # switches of "auto"
    if saved is not None:
        t, k, amesh, rho, threshold = (saved[key] for key in ("t", "k", "amesh", "rho", "threshold"))
        counters, meshes, jumps, out, remesh_seconds = (saved[key] for key in
                                                        ("counters", "meshes", "jumps", "out", "remesh_seconds"))
        try:
            stretch, implicit_step, switches = restored_stretch(stretch, saved["stretch"])
        except ValueError as exc:
            raise ValueError(f"checkpoint {ckpt.path} is inconsistent ({exc}); delete it to start afresh") from None
    stage = sphere_fv.SphereOperator(model, amesh.mesh, flux, summation, diffusion)
    saved_steps = counters["nsteps"]
    every_save = as_count(checkpoint_every, "checkpoint_every")
    reporter = Progress(float(t_eval[-1] - t_eval[0]), "solve", progress)      # one report for every stretch
    reporter.update(t - float(t_eval[0]))
    while k < t_eval.size:
        h = None if dt is None else dt if takes_operator(scheme) else min(dt, stage.step_bound())
        if finest == base:              # nothing to refine: one integration, as sphere.solve
            horizon = float(t_eval[-1])
        elif h is not None:
            horizon = min(t + min(every * h, interval), float(t_eval[-1]))
        elif implicit_step is None:
            rate = stage(rho)[1]
            horizon = min(t + min(every * cfl / rate if rate > 0 else np.inf, interval), float(t_eval[-1]))
        else:                           # implicit steps: remesh every `every` of them (or `interval`, if longer)
            horizon = min(t + max(every * implicit_step, interval), float(t_eval[-1]))
        stops = np.concatenate([[t], t_eval[(t_eval > t) & (t_eval < horizon)], [horizon]])
        if h is None:
            states, info = integrate(stage, rho, stops, scheme=stretch, dt=sphere_fv.step_cap(model, stage.mesh, flux),
                                     positivity=True, cfl=cfl, progress=reporter, rtol=rtol, atol=atol,
                                     first_step=implicit_step)
            stretch, implicit_step = next_stretch(stretch, info)
            switches += info.get("switches", [])
        else:                           # fixed steps of at most dt (an explicit scheme's: within the bound)
            f = stage if takes_operator(scheme) else (lambda r, op=stage: op(r)[0])
            states, info = integrate(f, rho, stops, scheme=scheme, dt=h, progress=reporter)
            info.update(hmin=h, hmax=h)
        for key in ("nfev", "nsteps", "nrejected"):
            counters[key] += info[key]
        counters.update(hmin=min(counters["hmin"], info["hmin"]), hmax=max(counters["hmax"], info["hmax"]))
        for s, state in zip(stops[1:], states[1:]):
            if k < t_eval.size and s == t_eval[k]:
                out.append((amesh, state))
                k += 1
        t, rho = float(horizon), states[-1]
        if k >= t_eval.size:
            break
        begin = time.perf_counter()
        counters["checks"] += 1
        def sweep(rho=rho, amesh=amesh, stage=stage):
            return interval * (_field(getattr(model, "heads", (model,)), rho, amesh.mesh, summation)
                               if stage.general is None else stage.general.field(rho * amesh.mesh.areas)[0])
        index, threshold = _refined(amesh, rho, settings, threshold, lazy=True, sweep=sweep)
        if not np.array_equal(index, amesh.index):
            new = adaptive_mesh(index, finest)
            moved = transfer(amesh, new, rho)
            new_stage = sphere_fv.SphereOperator(model, new.mesh, flux, summation, diffusion)
            if energy:
                before, after = stage.energy(rho), new_stage.energy(moved)
                jumps.append((after - before) / abs(before) if before else 0.0)
            amesh, rho, stage = new, moved, new_stage
            meshes.append(dict(t=t, cells=amesh.size, finest=int(amesh.levels.max())))
        remesh_seconds += time.perf_counter() - begin
        stop = over_budget(start, budget, "the adaptive S^2 solve", t, None if ckpt is None else ckpt.path)
        if ckpt is not None and (counters["nsteps"] - saved_steps >= every_save or stop is not None):
            adaptive_state.save(ckpt, initial, t, k, amesh, rho, threshold, counters, meshes, jumps, out,
                                remesh_seconds, stretch_state(stretch, implicit_step, switches))
            saved_steps = counters["nsteps"]
        if stop is not None:
            reporter.close()
            raise stop
    reporter.close()
    general = {} if stage.general is None else dict(field=stage.general.info["summation"],
                                                    degree=stage.general.info["degree"],
                                                    tolerance=stage.general.info["tolerance"])
    return _solution(model, t_eval, out, flux, summation, energy, counters,
                     dict(general, method=scheme_name(scheme), flux=flux, dt=dt, summation=summation, base=base,
                          finest=finest, bulk=bulk, threshold=threshold,
                          buffer=buffer, every=every, interval=interval, max_cells=settings["max_cells"],
                          cfl=cfl, diffusion=diffusion,
                          remeshes=len(meshes) - 1, remesh_seconds=remesh_seconds, meshes=meshes,
                          **({"switches": switches} if scheme_name(scheme) == "auto" else {})), jumps)


def _solution(model, t_eval, out, flux, summation, energy, counters, info, jumps):
    en = np.array([sphere_fv.cell_energy(model, r, a.mesh, summation) for a, r in out]) if energy else None
    info.update(counters)
    sign, reason = energy_direction(model, 3)
    if not model.is_isotropic:
        info["energy_reason"] = reason
    if en is not None:
        info["remesh_energy"] = remesh_energy(jumps, sign)
    info["pinned"] = _pinned(model, out, summation, t_eval).tolist()
    warn_pinned(info["pinned"], f"generators {info['pinned'][:5]}", flux)
    return padded_solution(t_eval, [a.mesh.points for a, _ in out], [a.mesh.areas for a, _ in out],
                           [r for _, r in out], en, model, info, sign)
