"""Finite volumes for the mean-field continuity equation on S^2 (Q^T K = I, V = ±I).

    ∂_t ρ + div_S(ρ X[ρ]) = 0,   X = ±(1/β) ∇_S Φ (USA),  ±(1/β) ∇_S log Φ (SA),
    Φ(x) = ∫ e^{β<x,y>} ρ(y) dσ(y)

on a spherical Voronoi mesh (``meanfield.solvers.mesh``).  The cell values ρ_i carry the measure
Σ_j m_j δ_{c_j}, m_j = ρ_j |C_j|; the cell velocities X_i and log Φ_i are the particle field of
that measure at the generators c_i (``particles.attention_field``: direct log-sum-exp
quadrature or the spherical-harmonic fast path).  The semi-discrete scheme is

    dρ_i/dt = -(1/|C_i|) Σ_{j ~ i} F_ij,    F_ij = |f_ij| (ρ_i u_ij^+ - ρ_j u_ji^-)

with the face f_ij, n_ij its unit normal from i to j, and

- flux="upwind" (default): u_ij = <X_i, n_ij> at c_i, u_ji = <X_j, n_ij> at c_j
  (cell-centred velocity donor cell; first order, transports one-cell clusters);
- flux="tpfa": u_ij = u_ji = (P_j - P_i) / d(c_i, c_j), P = ±Φ/β (USA) or ±log Φ/β (SA),
  P = ±<x, ∫ y dμ> at β = 0 (two-point potential difference).  The discrete energy
  E_β = (1/2β) Σ_ij m_i m_j e^{β<c_i,c_j>} then obeys dE_β/dt = Σ_faces F_ij (Φ_j - Φ_i)/β ≥ 0
  for V = I, every F_ij having the sign of P_j - P_i, hence of Φ_j - Φ_i.

The cell-centred upwind flux is made for concentrating (V = I) dynamics.  At a source (a cell
whose own velocity vanishes while its neighbours move away, e.g. a density maximum under V = -I)
it sheds mass only at the cell's own small speed, so repulsive runs stall short of the uniform
state (L1 residue ≈ 0.04, 0.024, 0.017 on icosphere levels 2, 3, 4); use flux="tpfa" there.

SSP-RK3 in time.  Every forward-Euler stage keeps ρ ≥ 0 when
dt · max_i (perimeter_i / |C_i|) · sup|X| ≤ 1, with sup|X| = ``theory.speed_bound(model)``
(1 for SA); the default step is that bound.  Mass is conserved to round-off (each flux leaves
one cell and enters its neighbour).
"""
from . import _numba_env  # noqa: F401

import numpy as np
from numba import njit, prange
from scipy.special import logsumexp

from meanfield.checks import as_choice, as_density, as_positive, as_time_grid
from meanfield.models import as_model
from meanfield.theory import speed_bound

from . import particles
from .mesh import Mesh, fibonacci, icosphere, voronoi_mesh
from .results import DensitySolution
from .diffusion import as_diffusion, combined_step, mesh_laplacian, mesh_rate
from .stepping import Checkpoint, integrate

__all__ = ["solve", "time_derivative", "max_step", "cell_field", "cell_potential", "icosphere", "fibonacci",
           "voronoi_mesh", "Mesh"]

FLUXES = ("upwind", "tpfa")
DEFAULT_LEVEL = 4


@njit(parallel=True, cache=True)
def _divergence(rho, vel, pot, upwind, edges, lengths, distances, normals, cell_ptr, cell_edges,
                areas, flux, out):
    """out_i = -(1/|C_i|) Σ_faces ±F_e: face fluxes F_e (prange over faces), then a gather over
    each cell's faces (prange over cells), so no two threads write the same entry."""
    for e in prange(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        if upwind:
            ui = vel[i, 0] * normals[e, 0, 0] + vel[i, 1] * normals[e, 0, 1] + vel[i, 2] * normals[e, 0, 2]
            uj = vel[j, 0] * normals[e, 1, 0] + vel[j, 1] * normals[e, 1, 1] + vel[j, 2] * normals[e, 1, 2]
        else:
            ui = (pot[j] - pot[i]) / distances[e]
            uj = ui
        flux[e] = lengths[e] * (rho[i] * max(ui, 0.0) - rho[j] * max(-uj, 0.0))
    for i in prange(rho.shape[0]):
        acc = 0.0
        for k in range(cell_ptr[i], cell_ptr[i + 1]):
            e = cell_edges[k]
            if edges[e, 0] == i:
                acc += flux[e]
            else:
                acc -= flux[e]
        out[i] = -acc / areas[i]


def _check_model(model):
    model = as_model(model)
    if not model.is_isotropic:
        raise ValueError(f"the sphere solver treats Q^T K = I and V = ±I; got {model!r} "
                         f"(use particles.solve for general Q, K, V)")
    return model


def _check_mesh(mesh):
    if mesh is None:
        return icosphere(DEFAULT_LEVEL)
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a meanfield.solvers.mesh.Mesh (icosphere(level), fibonacci(n), voronoi_mesh(points)) "
                        f"or None; got {type(mesh).__name__}")
    return mesh


def _check_summation(summation):
    return as_choice(summation, "summation", particles.SUMMATIONS)


def cell_field(model, rho, mesh, summation="auto"):
    """(X, log Φ) at the generators for the measure Σ_j ρ_j |C_j| δ_{c_j}: X (N, 3), log Φ (N,)."""
    vel, log_phi = particles.attention_field(model, mesh.points[None], (rho * mesh.areas)[None],
                                             summation=summation)
    return vel[0], log_phi[0]


def cell_potential(model, rho, mesh, log_phi):
    """P_i with X = ∇_S P: ±Φ_i/β (USA), ±log Φ_i/β (SA), ±<c_i, Σ_j m_j c_j>/(Σ m or 1) at β = 0."""
    if model.beta == 0:
        masses = rho * mesh.areas
        pot = mesh.points @ (masses @ mesh.points)
        if model.normalised:
            pot = pot / masses.sum()
    elif model.normalised:
        pot = log_phi / model.beta
    else:
        pot = np.exp(log_phi) / model.beta
    return model.sign * pot


def _derivative(model, rho, mesh, flux, summation):
    vel, log_phi = cell_field(model, rho, mesh, summation)
    upwind = flux == "upwind"
    pot = log_phi if upwind else cell_potential(model, rho, mesh, log_phi)  # upwind ignores pot
    out = np.empty_like(rho)
    _divergence(rho, vel, pot, upwind, mesh.edges, mesh.lengths, mesh.distances, mesh.normals,
                mesh.cell_ptr, mesh.cell_edges, mesh.areas, np.empty(mesh.edges.shape[0]), out)
    return out


def time_derivative(model, rho, mesh=None, flux="upwind", summation="auto"):
    """dρ/dt of the semi-discrete scheme for cell densities ``rho`` (N,) on ``mesh``."""
    model = _check_model(model)
    mesh = _check_mesh(mesh)
    as_choice(flux, "flux", FLUXES)
    _check_summation(summation)
    rho = as_density(rho, "rho")
    if rho.shape != (mesh.size,):
        raise ValueError(f"rho must have one value per cell, shape ({mesh.size},); got {rho.shape}")
    return _derivative(model, rho, mesh, flux, summation)


def max_step(model, mesh=None):
    """The positivity bound 1 / (speed_bound(model) · max_i perimeter_i/|C_i|) for unit mass."""
    model = _check_model(model)
    mesh = _check_mesh(mesh)
    return float(1.0 / (speed_bound(model) * np.max(mesh.perimeters / mesh.areas)))


def _initial_density(rho0, mesh):
    if callable(rho0):
        values = np.asarray(rho0(mesh.points.copy()), dtype=np.float64)
        if values.shape != (mesh.size,):
            raise ValueError(f"rho0(points) must return one density per point, shape ({mesh.size},); "
                             f"got {values.shape}")
    else:
        values = rho0
    rho = as_density(values, "rho0")
    if rho.shape != (mesh.size,):
        raise ValueError(f"rho0 must have one value per cell of the mesh, shape ({mesh.size},); got {rho.shape} "
                         f"(or pass a callable of points (N, 3))")
    return rho / (rho @ mesh.areas)


def _energy(model, rho, mesh, summation):
    """E_β = (1/2β) Σ_i m_i Φ_i of the cell measure (β = 0: (1/2)|Σ m_i c_i|²)."""
    masses = rho * mesh.areas
    if model.beta == 0:
        mean = masses @ mesh.points
        return 0.5 * float(mean @ mean)
    _, log_phi = cell_field(model, rho, mesh, summation)
    pos = masses > 0
    return float(np.exp(logsumexp(log_phi[pos], b=masses[pos])) / (2.0 * model.beta))


def solve(model, rho0, t_eval, mesh=None, flux="upwind", *, dt=None, summation="auto", energy=True,
          progress=False, checkpoint=None, checkpoint_every=100, resume=False, diffusion=0.0):
    """Solve the continuity equation on S^2 and return a DensitySolution.

    model: SA or USA with Q^T K = I, V = ±I.  rho0: a callable of points (N, 3) -> densities
    (evaluated at the cell generators) or an array of cell densities; it is normalised to unit
    mass (μ_0 is a probability measure).  mesh: a Mesh (default ``icosphere(4)``, 2562 cells).
    flux: "upwind" or "tpfa" (see the module docstring).  dt: SSP-RK3 step, at most and by
    default ``max_step(model, mesh)`` (larger values are refused: they break positivity).
    summation: "auto" | "direct" | "fast" for Φ (``particles.attention_field``).
    ``checkpoint`` (a path) saves the state every ``checkpoint_every`` steps; ``resume=True``
    continues an existing checkpoint bit for bit.
    diffusion: D >= 0 adds D Δ_S ρ by two-point fluxes (``meanfield.solvers.diffusion``; the law
    of particles with noise σ = sqrt(2D)); the step bound includes it.
    """
    model = _check_model(model)
    mesh = _check_mesh(mesh)
    t_eval = as_time_grid(t_eval)
    diffusion = as_diffusion(diffusion)
    as_choice(flux, "flux", FLUXES)
    _check_summation(summation)
    rho = _initial_density(rho0, mesh)
    bound = combined_step(max_step(model, mesh), diffusion, mesh_rate(mesh))
    if dt is None:
        dt = bound
    elif as_positive(dt, "dt") > bound:
        raise ValueError(f"dt = {dt:g} exceeds the positivity bound {bound:.6g} for {model!r} on {mesh.name}; "
                         f"use dt <= {bound:.6g} (or leave dt=None)")
    meta = dict(solver="sphere", model=model.to_dict(), flux=flux, dt=dt, summation=summation,
                mesh=mesh.name, cells=mesh.size, diffusion=diffusion)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta)
    laplacian = mesh_laplacian(mesh) if diffusion > 0 else None

    def rhs(r):
        out = _derivative(model, r, mesh, flux, summation)
        return out if laplacian is None else out + diffusion * (laplacian @ r)

    rhos, info = integrate(rhs, rho, t_eval, scheme="ssprk3", dt=dt, checkpoint=ckpt, resume=resume,
                           progress=progress)
    en = np.array([_energy(model, r, mesh, summation) for r in rhos]) if energy else None
    info.update(flux=flux, dt=dt, max_dt=bound, summation=summation, mesh=mesh.name, cells=mesh.size,
                diffusion=diffusion)
    return DensitySolution(t=t_eval, points=np.array(mesh.points), areas=np.array(mesh.areas), rho=rhos,
                           mass=rhos @ mesh.areas, energy=en, model=model, info=info)
