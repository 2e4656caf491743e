"""Finite volumes for the mean-field continuity equation on S^2 (Q^T K = I, V = ±I).

    ∂_t ρ + div_S(ρ X[ρ]) = 0,   X = ±(1/β) ∇_S Φ (USA),  ±(1/β) ∇_S log Φ (SA),
    Φ(x) = ∫ e^{β<x,y>} ρ(y) dσ(y)

on a spherical Voronoi mesh (``meanfield.solvers.mesh``).  The cell values ρ_i carry the measure
Σ_j m_j δ_{c_j}, m_j = ρ_j |C_j|; the cell velocities X_i and log Φ_i are the particle field of
that measure at the generators c_i (``particles.attention_field``: direct log-sum-exp
quadrature or the spherical-harmonic fast path).  The semi-discrete scheme is

    dρ_i/dt = -(1/|C_i|) Σ_{j ~ i} F_ij,    F_ij = |f_ij| (ρ_i u_ij^+ - ρ_j u_ji^-)

with the face f_ij, n_ij its unit normal from i to j; one vocabulary of fluxes on S^1 and S^2:

- flux="upwind2" (default): second-order cell-centred upwind with a well-balanced field.
  F_ij = |f_ij| (ρ^f_i (u^E_ij)^+ + ρ^f_j (u^W_ij)^-) with the limited face values ρ^f of
  ``meanfield.solvers.reconstruction`` (least-squares gradient, Barth–Jespersen limiter, 0 ≤ ρ^f ≤ 2ρ)
  and face velocities extrapolated from the generators along the geodesic to the face midpoint,
  u^E_ij = <X_i, n_ij> + (d_ij/2) <∇_n X, n>_i,  u^W_ij = <X_j, n_ij> - (d_ij/2) <∇_n X, n>_j
  (exact derivatives of the discrete field: ``_slopes``), clipped to the speed bound.  The field
  is ``balanced_field``: the point-mass field minus that of the discrete uniform density, so the
  uniform density is a steady state to round-off (SA and USA, any β).  At faces of cells in a
  cluster one or two cells wide (``reconstruction.UNRESOLVED``) the flux is the first-order upwind
  one, so one-cell clusters travel at their particle speed.
- flux="upwind": u_ij = <X_i, n_ij> at c_i, u_ji = <X_j, n_ij> at c_j
  (cell-centred velocity donor cell; first order, transports one-cell clusters);
- flux="tpfa": u_ij = u_ji = (P_j - P_i) / d(c_i, c_j), P = ±Φ/β (USA) or ±log Φ/β (SA),
  P = ±<x, ∫ y dμ> at β = 0 (two-point potential difference).  The discrete energy
  E_β = (1/2β) Σ_ij m_i m_j e^{β<c_i,c_j>} then obeys dE_β/dt = Σ_faces F_ij (Φ_j - Φ_i)/β ≥ 0
  for V = I, every F_ij having the sign of P_j - P_i, hence of Φ_j - Φ_i.
- flux="muscl": the tpfa velocity with the limited face values ρ^f (second order, the same
  energy identity), but like tpfa it pins one-cell clusters.

The cell-centred upwind flux is made for concentrating (V = I) dynamics.  At a source (a cell
whose own velocity vanishes while its neighbours move away, e.g. a density maximum under V = -I)
it sheds mass only at the cell's own small speed, so repulsive runs stall short of the uniform
state (L1 residue ≈ 0.04, 0.024, 0.017 on icosphere levels 2, 3, 4); use flux="tpfa" there.

SSP-RK3 in time.  Every forward-Euler stage keeps ρ ≥ 0 when
dt · max_i (perimeter_i / |C_i|) · sup|X| ≤ CFL (1 for upwind and tpfa, 1/2 for the reconstructed
fluxes), with sup|X| = ``theory.speed_bound(model)``
(1 for SA); the default step is that bound.  Mass is conserved to round-off (each flux leaves
one cell and enters its neighbour).
"""
from . import _numba_env  # noqa: F401

from functools import lru_cache

import numpy as np
from numba import njit, prange
from scipy.special import logsumexp

from meanfield.budget import BUDGET, as_budget, check_fixed_steps
from meanfield.checks import as_choice, as_density, as_float_array, as_positive, as_time_grid
from meanfield.theory import speed_bound

from . import particles, reconstruction, spectral
from .circle import isotropic_model
from .mesh import Mesh, fibonacci, icosphere, voronoi_mesh
from .results import DensitySolution
from .diffusion import as_diffusion, combined_step, mesh_laplacian, mesh_rate
from .stepping import Checkpoint, digest, integrate

__all__ = ["solve", "time_derivative", "max_step", "cell_field", "cell_potential", "balanced_field", "icosphere",
           "fibonacci", "voronoi_mesh", "Mesh"]

FLUXES = ("upwind2", "upwind", "muscl", "tpfa")
DEFAULT_FLUX = "upwind2"
CFL = {"upwind2": 0.5, "upwind": 1.0, "muscl": 0.5, "tpfa": 1.0}
DEFAULT_LEVEL = 4
_QUADRATIC = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))   # the six entries of y y^T


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
    _gather(flux, edges, cell_ptr, cell_edges, areas, out)


@njit(cache=True)
def _reconstructed_divergence(rho, face_rho, slots, unresolved, u_east, u_west, u_i, u_j, edges, lengths,
                              cell_ptr, cell_edges, areas, flux, out):
    """out_i = -(1/|C_i|) Σ_faces ±F_e with F_e = |f_e| (ρ^f_i (u^E_e)^+ + ρ^f_j (u^W_e)^-) from the
    face values ρ^f, or the first-order upwind flux |f_e| (ρ_i u_i^+ - ρ_j u_j^-) where either cell
    is ``unresolved``."""
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        if unresolved[i] or unresolved[j]:
            flux[e] = lengths[e] * (rho[i] * max(u_i[e], 0.0) + rho[j] * min(u_j[e], 0.0))
        else:
            flux[e] = lengths[e] * (face_rho[slots[e, 0]] * max(u_east[e], 0.0)
                                    + face_rho[slots[e, 1]] * min(u_west[e], 0.0))
    _gather(flux, edges, cell_ptr, cell_edges, areas, out)


@njit(cache=True)
def _gather(flux, edges, cell_ptr, cell_edges, areas, out):
    """out_i = -(1/|C_i|) Σ_{faces e of i} ±F_e (+ if i is the first cell of e)."""
    for i in range(out.shape[0]):
        acc = 0.0
        for k in range(cell_ptr[i], cell_ptr[i + 1]):
            e = cell_edges[k]
            if edges[e, 0] == i:
                acc += flux[e]
            else:
                acc -= flux[e]
        out[i] = -acc / areas[i]


def _check_model(model):
    """The circle solver's check (Q^T K = I, V = ±I, USA weights within double precision), and β within
    the spectral sums' range: the balance correction needs them."""
    return isotropic_model(model, "sphere", multihead=True, max_beta=spectral.MAX_BETA,
                           limit=" (its balance correction uses the spectral sums, whose round-off 3 beta eps "
                                 "exceeds their tolerance beyond)")


def _heads(model):
    """The heads of a MultiHead model, or (model,): the field is the sum of theirs."""
    return getattr(model, "heads", (model,))


def _check_mesh(mesh):
    if mesh is None:
        return icosphere(DEFAULT_LEVEL)
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a meanfield.solvers.mesh.Mesh (icosphere(level), fibonacci(n), "
                        f"voronoi_mesh(points)) or None; got {type(mesh).__name__}")
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


@lru_cache(maxsize=32)
def _uniform_sums(mesh, beta):
    """The kernel sums of the cell measure of the uniform density with unit total density weight,
    Σ_j |C_j| e^{β(<c_i,c_j> - 1)} (1, c_j, c_j c_j^T): the discrete uniform state's own field."""
    out = _kernel_sums(mesh, beta, mesh.areas)
    out.setflags(write=False)
    return out


def _kernel_sums(mesh, beta, masses):
    """S (N, 10): Σ_j m_j e^{β(<c_i,c_j> - 1)} (1, c_j, the six entries of c_j c_j^T)
    (``spectral.kernel_sum``: Φ~, G~ and H~ = Σ m_j e^{...} c_j c_j^T shifted by e^{-β})."""
    y = mesh.points
    W = np.column_stack([masses, masses[:, None] * y] + [masses * y[:, a] * y[:, b] for a, b in _QUADRATIC])
    return spectral.kernel_sum(beta, y, y, W)


def _quadratic_form(H, t):
    """t^T H t for H given by its six entries (_QUADRATIC order), rows of t (E, 3)."""
    return sum((1.0 if a == b else 2.0) * H[:, k] * t[:, a] * t[:, b] for k, (a, b) in enumerate(_QUADRATIC))


def balanced_field(model, rho, mesh, summation="auto"):
    """(X, D, trusted): well-balanced cell velocities X (N, 3) and the pieces D = (Φ~, G~, H~) of their
    derivatives, with the field of the discrete uniform state removed.

    With S[m] the shifted kernel sums (``_kernel_sums``), U = (M/4π) S[|C|] the sums of the uniform
    density of the same mass M, and λ_i = min(1, Φ~_i/Φ~^U_i):

        G~ = G~[m] - λ G~^U,   H~ = H~[m] - λ H~^U,   X = ±P G~ / Φ~ (SA),  ±e^β P G~ (USA),

    i.e. X = X[m] - λ X^U with X[m] the point-mass field (``cell_field``; computed from these sums
    except where they are not trusted, or everywhere with summation="direct").  The continuous uniform density has X = 0
    and zero derivatives, so this only removes the O(h²) quadrature error of the cell-centre atoms
    (λ = 1 at the uniform state: it is then a steady state to round-off, for SA and USA at any β);
    λ < 1 fades the correction where Φ is below its uniform value, so that it never dominates a
    small Φ.  ``trusted`` is False where the spectral sums are below their error bound (SA, large β,
    far from the mass): there λ = 0 and the derivative is not used.

    Parameters
    ----------
    model : SA or USA with Q^T K = I, V = ±I (validated by the caller).
    rho : (N,) cell densities.
    mesh : Mesh.
    summation : "auto", "fast" or "direct": how X[m] is evaluated ("direct": Numba log-sum-exp for
        every cell; otherwise from the spectral sums, with direct recomputation where not trusted).

    Returns
    -------
    X : (N, 3) balanced cell velocities.
    S : (N, 10) balanced shifted sums (Φ~, G~, the six entries of H~ in ``_QUADRATIC`` order).
    trusted : (N,) bool.
    """
    masses = rho * mesh.areas
    mass = masses.sum()
    S = _kernel_sums(mesh, model.beta, masses)
    U = (mass / (4 * np.pi)) * _uniform_sums(mesh, model.beta)
    floor = spectral.roundoff(model.beta, 3) * mass
    trusted = S[:, 0] - floor > (1.0 + np.sqrt(3.0)) * floor / spectral.RTOL
    lam = np.where(trusted, np.minimum(1.0, S[:, 0] / U[:, 0]), 0.0)
    if summation == "direct":
        vel, _ = cell_field(model, rho, mesh, summation)
        G = -lam[:, None] * U[:, 1:4]          # only the correction
    else:                                       # X[m] from the same sums; direct where not trusted
        G = S[:, 1:4] - lam[:, None] * U[:, 1:4]
    G = G - np.sum(G * mesh.points, axis=1, keepdims=True) * mesh.points
    if model.normalised:
        G = G / np.where(trusted, S[:, 0], 1.0)[:, None]
    else:
        G = G * np.exp(model.beta / 2) * np.exp(model.beta / 2)
    if summation == "direct":
        vel = vel + model.sign * G
    else:
        vel = model.sign * G
        redo = np.flatnonzero(~trusted)
        if redo.size:
            vel[redo] = particles.attention_field(model, mesh.points[redo][None], masses[None],
                                                  sources=mesh.points[None], summation="direct")[0][0]
    S[:, 1:] -= lam[:, None] * U[:, 1:]
    return vel, S, trusted


def _slopes(model, S, points, t):
    """f'(0) = <∇_t X, t> along the geodesics from the generators ``points`` (one row per face side) in
    the unit tangent directions t: with A = β t^T H t - <x, G> (Φ' = β <G, t>, <G, x''> = -<G, x>),
    f' = ±A e^β (USA, shifted sums) and ±(A/Φ~ - β <G~, t>²/Φ~²) (SA)."""
    G = S[:, 1:4]
    A = model.beta * _quadratic_form(S[:, 4:], t) - np.sum(G * points, axis=1)
    if not model.normalised:
        return model.sign * A * np.exp(model.beta / 2) * np.exp(model.beta / 2)
    gt = np.sum(G * t, axis=1) / S[:, 0]
    return model.sign * (A / S[:, 0] - model.beta * gt * gt)


def _face_velocities(model, rho, mesh, summation):
    """One head's normal velocities at the generators, u_i = <X_i, n_ij>, u_j = <X_j, n_ij>, and
    extrapolated to the face, u^E, u^W (clipped to the head's speed bound), for every face."""
    i, j = mesh.edges[:, 0], mesh.edges[:, 1]
    n0, n1 = mesh.normals[:, 0], mesh.normals[:, 1]
    vel, S, trusted = balanced_field(model, rho, mesh, summation)
    u_i = np.sum(vel[i] * n0, axis=1)
    u_j = np.sum(vel[j] * n1, axis=1)
    half = 0.5 * mesh.distances
    slope_i = np.where(trusted[i], _slopes(model, S[i], mesh.points[i], n0), 0.0)
    slope_j = np.where(trusted[j], _slopes(model, S[j], mesh.points[j], n1), 0.0)
    bound = speed_bound(model) * (1.0 if model.normalised else float(rho @ mesh.areas))
    return u_i, u_j, np.clip(u_i + half * slope_i, -bound, bound), np.clip(u_j - half * slope_j, -bound, bound)


def _cell_potential(model, rho, mesh, summation):
    """Σ_h P_h over the heads (``cell_potential``): the two-point fluxes' potential."""
    return sum(cell_potential(head, rho, mesh, cell_field(head, rho, mesh, summation)[1]) for head in _heads(model))


def _second_order(model, rho, mesh, flux, summation):
    """dρ/dt for the reconstructed fluxes "upwind2" and "muscl" (module docstring)."""
    weights, offsets, slots = reconstruction.geometry(mesh)
    face_rho = np.empty(offsets.shape[0])
    unresolved = np.empty(mesh.size, dtype=np.bool_)
    reconstruction.face_values(rho, mesh.cell_ptr, mesh.cell_neighbours, weights, offsets, face_rho, unresolved)
    i, j = mesh.edges[:, 0], mesh.edges[:, 1]
    if flux == "muscl":
        pot = _cell_potential(model, rho, mesh, summation)
        u_east = u_west = u_i = u_j = (pot[j] - pot[i]) / mesh.distances
        unresolved[:] = False
    else:
        parts = [_face_velocities(head, rho, mesh, summation) for head in _heads(model)]
        u_i, u_j, u_east, u_west = (sum(p[k] for p in parts) for k in range(4))
    out = np.empty_like(rho)
    _reconstructed_divergence(rho, face_rho, slots, unresolved, u_east, u_west, u_i, u_j, mesh.edges,
                              mesh.lengths, mesh.cell_ptr, mesh.cell_edges, mesh.areas,
                              np.empty(mesh.edges.shape[0]), out)
    return out


def _derivative(model, rho, mesh, flux, summation):
    if flux in ("upwind2", "muscl"):
        return _second_order(model, rho, mesh, flux, summation)
    upwind = flux == "upwind"
    if upwind:                          # the potential is not used
        vel = sum(cell_field(head, rho, mesh, summation)[0] for head in _heads(model))
        pot = np.zeros_like(rho)
    else:                               # the velocity is not used
        vel, pot = np.zeros((rho.size, 3)), _cell_potential(model, rho, mesh, summation)
    out = np.empty_like(rho)
    _divergence(rho, vel, pot, upwind, mesh.edges, mesh.lengths, mesh.distances, mesh.normals,
                mesh.cell_ptr, mesh.cell_edges, mesh.areas, np.empty(mesh.edges.shape[0]), out)
    return out


def time_derivative(model, rho, mesh=None, flux=DEFAULT_FLUX, summation="auto"):
    """dρ/dt of the semi-discrete scheme for cell densities ``rho`` (N,) on ``mesh``."""
    model = _check_model(model)
    mesh = _check_mesh(mesh)
    as_choice(flux, "flux", FLUXES)
    _check_summation(summation)
    rho = as_density(rho, "rho")
    if rho.shape != (mesh.size,):
        raise ValueError(f"rho must have one value per cell, shape ({mesh.size},); got {rho.shape}")
    return _derivative(model, rho, mesh, flux, summation)


def max_step(model, mesh=None, flux=DEFAULT_FLUX):
    """The positivity bound CFL / (speed_bound(model) · max_i perimeter_i/|C_i|) for unit mass:
    CFL = 1 for the first-order fluxes (upwind, tpfa), 1/2 for the reconstructed ones (upwind2,
    muscl: a face value is at most twice the cell's)."""
    model = _check_model(model)
    mesh = _check_mesh(mesh)
    as_choice(flux, "flux", FLUXES)
    return float(CFL[flux] / (speed_bound(model) * np.max(mesh.perimeters / mesh.areas)))


def _initial_density(rho0, mesh):
    if callable(rho0):
        values = as_float_array(rho0(mesh.points.copy()), "rho0(points)")
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
    """E_β = (1/2β) Σ_i m_i Φ_i of the cell measure (β = 0: (1/2)|Σ m_i c_i|²); for a MultiHead
    model Σ_h ±E_{β_h} if every head is USA (its field is then that sum's gradient), else NaN."""
    if hasattr(model, "heads"):
        if any(head.normalised for head in model.heads):
            return np.nan
        return sum(head.sign * _energy(head, rho, mesh, summation) for head in model.heads)
    masses = rho * mesh.areas
    if model.beta == 0:
        mean = masses @ mesh.points
        return 0.5 * float(mean @ mean)
    _, log_phi = cell_field(model, rho, mesh, summation)
    pos = masses > 0
    return float(np.exp(logsumexp(log_phi[pos], b=masses[pos])) / (2.0 * model.beta))


def solve(model, rho0, t_eval, mesh=None, flux=DEFAULT_FLUX, *, dt=None, summation="auto", energy=True,
          progress=None, checkpoint=None, checkpoint_every=100, resume=False, diffusion=0.0, budget=BUDGET):
    """Solve the continuity equation on S^2 and return a DensitySolution.

    model: SA or USA with Q^T K = I, V = ±I, or a MultiHead of such heads (the velocity is the
    sum of the heads'; .energy is Σ_h ±E_{β_h} when every head is USA, else NaN).
    rho0: a callable of points (N, 3) -> densities
    (evaluated at the cell generators) or an array of cell densities; it is normalised to unit
    mass (μ_0 is a probability measure).  mesh: a Mesh (default ``icosphere(4)``, 2562 cells).
    flux: "upwind2" (default), "upwind", "muscl" or "tpfa" (see the module docstring).  dt: SSP-RK3
    step, at most and by default ``max_step(model, mesh, flux)`` (larger values are refused: they
    break positivity).
    summation: "auto" | "direct" | "fast" for Φ (``particles.attention_field``).
    ``checkpoint`` (a path) saves the state every ``checkpoint_every`` steps; ``resume=True``
    continues an existing checkpoint bit for bit.
    budget: seconds (default one hour; None: no limit): a run whose step count times the measured
    cost of a step exceeds it is refused before it starts (``meanfield.budget``).
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
    bound = combined_step(max_step(model, mesh, flux), diffusion, mesh_rate(mesh))
    if dt is None:
        dt = bound
    elif as_positive(dt, "dt") > bound:
        raise ValueError(f"dt = {dt:g} exceeds the positivity bound {bound:.6g} for {model!r} on {mesh.name}; "
                         f"use dt <= {bound:.6g} (or leave dt=None)")
    meta = dict(solver="sphere", model=model.to_dict(), flux=flux, dt=dt, summation=summation,
                mesh=mesh.name, cells=mesh.size, diffusion=diffusion,
                mesh_digest=digest(np.concatenate([mesh.points.ravel(), mesh.areas])))
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta)
    laplacian = mesh_laplacian(mesh) if diffusion > 0 else None

    def rhs(r):
        out = _derivative(model, r, mesh, flux, summation)
        return out if laplacian is None else out + diffusion * (laplacian @ r)

    check_fixed_steps(as_budget(budget), t_eval, dt, lambda: rhs(rho), 3,
                      f"this solve of {model!r} on {mesh.name} to t = {t_eval[-1]:g}")
    rhos, info = integrate(rhs, rho, t_eval, scheme="ssprk3", dt=dt, checkpoint=ckpt, resume=resume,
                           progress=progress)
    en = np.array([_energy(model, r, mesh, summation) for r in rhos]) if energy else None
    info.update(flux=flux, dt=dt, max_dt=bound, summation=summation, mesh=mesh.name, cells=mesh.size,
                diffusion=diffusion)
    return DensitySolution(t=t_eval, points=np.array(mesh.points), areas=np.array(mesh.areas), rho=rhos,
                           mass=rhos @ mesh.areas, energy=en, model=model, info=info)
