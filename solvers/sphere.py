r"""Finite volumes for the mean-field continuity equation on S^2: ``solve`` on a fixed spherical Voronoi
mesh (the engine of ``meanfield.solvers.sphere_fv``: fluxes, field, step bounds, ``SphereOperator``) or, by
default, on adaptive cells that follow the clusters (``meanfield.solvers.adaptive``, built on the same
operator).  The engine's public names are available here too (``sphere.icosphere``, ``sphere.max_step``,
``sphere.SphereOperator``, ...).
"""
from __future__ import annotations

from collections.abc import Callable
from os import PathLike

from numpy.typing import ArrayLike

from meanfield.budget import BUDGET
from meanfield.models import SA, USA, MultiHead

from . import adaptive
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME
from .results import DensitySolution
from .meshes.voronoi import Mesh, fibonacci, icosphere, voronoi_mesh
from .sphere_fv import (CFL, DEFAULT_FLUX, DEFAULT_LEVEL, FLUXES, SphereOperator, auto_scheme, balanced_field,
                        cell_energy, cell_field, cell_potential, check_model, field_method, initial_density, max_step,
                        solve_on_mesh, step_cap, time_derivative)
from .stepping import CFL as STEP_CFL, IMPLICIT_ATOL, IMPLICIT_RTOL

__all__ = ["solve", "SphereOperator", "time_derivative", "max_step", "step_cap", "cell_field", "cell_potential",
           "cell_energy", "balanced_field", "field_method", "initial_density", "check_model", "auto_scheme",
           "icosphere", "fibonacci", "voronoi_mesh", "Mesh", "FLUXES", "DEFAULT_FLUX", "DEFAULT_LEVEL", "CFL"]


def solve(model: SA | USA | MultiHead, rho0: Callable | ArrayLike, t_eval: ArrayLike, *, mesh: Mesh | None = None,
          flux: str = DEFAULT_FLUX, scheme: str | type | object = DENSITY_SCHEME, dt: float | None = None,
          max_dt: float | None = None, cfl: float = STEP_CFL, summation: str = "auto", diffusion: float = 0.0,
          energy: bool = True, progress: bool | None = None, checkpoint: str | PathLike | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = IMPLICIT_RTOL, atol: float = IMPLICIT_ATOL) -> DensitySolution:
    r"""Solve the continuity equation on S^2 by finite volumes and return a DensitySolution.

    .. math::

        \partial_t \rho + \operatorname{div}_S(\rho X[\rho]) = D \Delta_S \rho

    on a spherical Voronoi mesh (module docstring), SSP-RK3 in time.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Any Q, K, V (3 × 3 or scalars), or a MultiHead of such heads (the velocity is the sum of the heads';
        ``.energy`` is Σ_h ±E_{β_h} when every head is isotropic USA, else NaN).  Q^T K = c I, V = ±I runs
        as the isotropic model at β' = cβ; other weights: ``.energy`` is E_V where V = ±Q^T K is symmetric,
        else NaN, ``info["energy_reason"]``, ``info["field"]``, ``info["degree"]``, ``info["tolerance"]``
        (docs/full_model.md).
    rho0 : callable or array_like
        A callable of points (N, 3) -> densities (evaluated at the cell generators), or the cell
        densities (N,); normalised to unit mass (μ_0 is a probability measure).
    t_eval : array_like
        Increasing output times; the steps end on each of them exactly.
    mesh : Mesh, optional
        A fixed mesh (``icosphere(level)``, ``fibonacci(n)``, ``voronoi_mesh(points)``).  Default
        None: adaptive cells that follow the clusters, ``adaptive.solve`` with its defaults (base
        level 3, finest level 9, level 5 wherever the density is at least a tenth of its mean): the
        best point of the work–precision diagram of docs/adaptive.md (SA β = 3, T = 10: W1 = 1.4e-3
        against a refined particle reference in 10–12.5 s of wall time on 2 cores for the whole call
        in a fresh process, where ``icosphere(4)`` gives 0.039 in 1.7 s, ``icosphere(5)`` 0.019 in
        9.2 s and ``icosphere(6)`` 0.010 in 120 s).  The result then has ``cells`` (the cells of each
        output: the mesh changes over time), padded ``points``, ``areas`` and ``rho``, and
        ``snapshot(k)``; an array ``rho0`` may lie on any ``icosphere(k)``, k <= 9.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
        The fluxes of the module docstring (default "upwind2").
    scheme : str, Scheme class or instance
        The time scheme (``stepping.integrate``), default "ssprk3"; with ``dt=None`` its steps are
        positivity-controlled.
    dt : float, optional
        None (default): steps controlled by the actual face speeds (``stepping.integrate`` with
        ``positivity=True``), each ``cfl`` times the largest step for which every cell keeps ρ >= 0
        given the mass that leaves it, at most ``step_cap(model, mesh, flux)``, every SSP stage
        checked.  A number: that fixed step, at most ``max_step`` (larger values are refused); on
        adaptive cells (``mesh=None``) steps of at most dt and at most each mesh's bound.
    max_dt : float, optional
        Largest controlled step (default ``step_cap(model, mesh, flux)``; fixed mesh only).
    cfl : float
        In (0, 1]: the fraction of the positivity bound a controlled step takes.
    summation : {"auto", "fast", "direct"}
        The field from the kernel sums (``field_method``: a harmonic table and BLAS, or the
        transforms), or by direct log-sum-exp quadrature at every cell (the reference).
    energy : bool
        Compute E_β of the cell measure at the output times.
    progress : bool or None
        A progress report (None: after a few seconds; a bar on a terminal, log lines elsewhere).
    checkpoint : str or path, optional
        Save the state every ``checkpoint_every`` steps (on adaptive cells: at the first check of the
        refinement criterion after that many steps); ``resume=True`` continues an existing checkpoint
        bit for bit.
    checkpoint_every : int
        Time steps between checkpoints.
    resume : bool
    diffusion : float
        D >= 0 adds D Δ_S ρ by two-point fluxes (``meanfield.solvers.diffusion``; the law of
        particles with noise σ = √(2D)); the step bounds include it.
    budget : float or None
        Seconds (default one hour; None: no limit): a fixed-step run whose step count times the
        measured cost of a step exceeds it is refused before it starts; any run past it saves its
        checkpoint and stops with a RuntimeError (``stepping.integrate``; ``resume=True`` continues it).
    rtol, atol : float
        Tolerances of the error-controlled schemes ("mprk22", "auto"; ``circle.solve``).

    Returns
    -------
    DensitySolution
        ``t``, ``points`` (N, 3), ``areas`` (N,), ``rho`` (m, N), ``mass`` (m,), ``energy`` (m,);
        ``info`` holds flux, dt (None for controlled steps), max_dt, cfl, nsteps, nfev, nrejected,
        hmin and hmax, summation, field (method and degree of the kernel sums), mesh, cells,
        diffusion, energy_dips (``energy_report.energy_dips``) and pinned (cells holding a cluster
        that its particle velocity would have moved by more than a cell; a ``PinnedClusterWarning``
        names them).  On adaptive cells (``mesh=None``) the fields of ``adaptive.solve``: ``cells``
        per output, and ``info`` with the meshes, remeshes and the energy across them.

    Raises
    ------
    ValueError
        For a non-isotropic model, a bad density, times, flux or summation, a ``dt`` above
        ``max_step``, ``max_dt`` with ``mesh=None``, or a fixed-step run that does not fit in ``budget``.
    TypeError
        When ``mesh`` is not a Mesh.
    RuntimeError
        When a run passes its ``budget``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> sol = sphere.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 2] ** 2, [0.0, 1.0], mesh=sphere.icosphere(2))
    >>> bool(abs(sol.mass[-1] - 1) < 1e-13 and sol.rho.min() >= 0)
    True
    """
    if mesh is None and max_dt is not None:
        raise ValueError("max_dt needs a fixed mesh: pass mesh=icosphere(level) (the default mesh=None solves on "
                         "adaptive cells)")
    if mesh is None:        # the default: adaptive cells
        return adaptive.solve(model, rho0, t_eval, flux=flux, scheme=scheme, dt=dt, summation=summation,
                              energy=energy, progress=progress, checkpoint=checkpoint,
                              checkpoint_every=checkpoint_every, resume=resume, cfl=cfl, diffusion=diffusion,
                              budget=budget, rtol=rtol, atol=atol)
    return solve_on_mesh(model, rho0, t_eval, mesh, flux=flux, scheme=scheme, dt=dt, max_dt=max_dt, cfl=cfl,
                         summation=summation, diffusion=diffusion, energy=energy, progress=progress,
                         checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume, budget=budget,
                         rtol=rtol, atol=atol)
