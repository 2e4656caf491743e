r"""Finite volumes for the mean-field continuity equation on a fixed mesh of S^2 (any Q, K, V; formulas for
Q^T K = I, V = ±I); ``meanfield.solvers.sphere.solve`` runs them (``solve_on_mesh``) or the adaptive cells.

General Q, K, V (3 × 3): the cell velocities are the particles' field of the cell measure
(``full_model.CellField``, well-balanced against the exact uniform field; docs/full_model.md) with the
same fluxes; Q^T K = c I, V = ±I runs as the isotropic model at β' = cβ.  Below, the isotropic case.

.. math::

    \partial_t \rho + \operatorname{div}_S(\rho X[\rho]) = 0, \qquad
    X = \pm \tfrac{1}{\beta} \nabla_S \Phi \ \text{(USA)}, \quad \pm \tfrac{1}{\beta} \nabla_S \log \Phi \ \text{(SA)},
    \qquad \Phi(x) = \int e^{\beta \langle x, y\rangle} \rho(y) \, d\sigma(y)

on a spherical Voronoi mesh (``meanfield.solvers.meshes.voronoi``).  The cell values ρ_i carry the measure
Σ_j m_j δ_{c_j}, m_j = ρ_j |C_j|; the cell velocities X_i and log Φ_i are the particle field of
that measure at the generators c_i (``particles.attention_field``: direct log-sum-exp
quadrature or the spherical-harmonic fast path).  The semi-discrete scheme is

    dρ_i/dt = -(1/|C_i|) Σ_{j ~ i} F_ij,    F_ij = |f_ij| (ρ_i u_ij^+ - ρ_j u_ji^-)

with the face f_ij, n_ij its unit normal from i to j; one vocabulary of fluxes on S^1 and S^2:

- flux="upwind2" (default): second-order cell-centred upwind with a well-balanced field.
  F_ij = |f_ij| (ρ^f_i (u^E_ij)^+ + ρ^f_j (u^W_ij)^-) with the limited face values ρ^f of
  ``meanfield.solvers.meshes.reconstruction`` (least-squares gradient, Barth–Jespersen limiter, 0 ≤ ρ^f ≤ 2ρ)
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

The kernel sums behind the field (Φ~, G~, H~ of ``balanced_field``) come from a harmonic table
per mesh and two products per stage (``field_method``; the degree L is where the Funk–Hecke
tail of the kernel drops below 1e-17, so the sums equal the direct ones to round-off; computed in
row blocks by ``threads.table_product``, which stays fast beside other busy processes), and the rest
of a stage (field, reconstruction, face speeds, fluxes, divergence and positivity rate) is a few
Numba passes over work arrays allocated once per solve (``SphereOperator``).

SSP-RK3 in time.  A forward-Euler stage of size h keeps every ρ_i ≥ 0 when h · rate ≤ 1, with
rate = max_i (mass leaving cell i per unit time) / m_i computed from the current fluxes; by
default (dt=None) each step is ``cfl`` = 0.9 of that bound at its first stage, and a step whose
later stage needs less is rejected and retried (``stepping.integrate(positivity=True)``).  The
global bound dt · max_i (perimeter_i / |C_i|) · sup|X| ≤ CFL (1 for upwind and tpfa, 1/2 for the
reconstructed fluxes, sup|X| = ``theory.speed_bound(model)``, 1 for SA: ``max_step``) assumes the
largest speed leaving through every face; the actual outflows are far smaller (SA β = 3, T = 10:
110 / 166 / 299 / 574 steps on levels 3 / 4 / 5 / 6 instead of 578 / 1156 / 2313 / 4625), and a fixed ``dt`` up to that
bound is still accepted.  Mass is conserved to round-off (each flux leaves one cell and enters its
neighbour).
"""
from __future__ import annotations

from . import _numba_env  # noqa: F401

from collections.abc import Callable
from os import PathLike

from numpy.typing import ArrayLike

import math
from functools import lru_cache

import numpy as np
from numba import njit, prange
from scipy.special import logsumexp

from meanfield.budget import BUDGET
from meanfield.checks import as_choice, as_density, as_float_array, as_positive, as_time_grid
from meanfield.checks import as_flag
from meanfield.checks import unit_mass
from meanfield.theory import speed_bound
from meanfield.models import SA, USA, MultiHead

from . import particles, threads
from .kernels import harmonics, spectral
from .meshes import reconstruction
from .circle import density_model
from .full_model import CellField
from . import general_field
from .meshes.voronoi import Mesh, icosphere
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME, Operator, scheme_name, upwind_matrix, with_scheme
from .schemes import Auto
from .results import DensitySolution
from .energy_report import detector_times, energy_dips, mesh_adjacency, pinned_on_fixed_mesh, warn_pinned
from .diffusion import as_diffusion, combined_step, mesh_laplacian, mesh_rate
from .stepping import CFL as STEP_CFL, IMPLICIT_ATOL, IMPLICIT_RTOL, TIME_STEP, Checkpoint, digest, integrate, \
    takes_operator, with_tolerances

__all__ = ["solve_on_mesh", "SphereOperator", "time_derivative", "max_step", "step_cap", "cell_field",
           "cell_potential", "cell_energy", "balanced_field", "field_method", "initial_density", "check_model",
           "auto_scheme", "FLUXES", "DEFAULT_FLUX", "DEFAULT_LEVEL"]

AUTO_SWITCH, AUTO_BACK = 0.1, 0.25    # S² thresholds of scheme="auto" (auto_scheme)

FLUXES = ("upwind2", "upwind", "muscl", "tpfa")
DEFAULT_FLUX = "upwind2"
CFL = {"upwind2": 0.5, "upwind": 1.0, "muscl": 0.5, "tpfa": 1.0}
DEFAULT_LEVEL = 4
TABLE_BYTES = 1 << 28      # harmonic tables up to 256 MiB are kept per mesh; larger ones use the transforms
_QUADRATIC = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))   # the six entries of y y^T


@njit(cache=True)
def _fluxes(rho, face_rho, slots, unresolved, first_order, u, edges, lengths, cell_ptr, cell_edges, areas,
            buf, out):
    """out_i = -(1/|C_i|) Σ_faces ±F_e and the positivity rate max_i (outflow_i / m_i).

    F_e = |f_e| (ρ^f_i (u^E_e)^+ + ρ^f_j (u^W_e)^-) from the face values ρ^f, or the first-order
    upwind flux |f_e| (ρ_i (u_i)^+ + ρ_j (u_j)^-) where ``first_order`` or where either cell is
    ``unresolved``; u holds the rows (u_i, u_j, u^E, u^W) per face.  A forward-Euler stage of size
    h keeps every ρ_i ≥ 0 when h · rate ≤ 1 (each cell loses at most the mass that leaves it)."""
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        if first_order or unresolved[i] or unresolved[j]:
            leave_i = rho[i] * max(u[0, e], 0.0)
            leave_j = -rho[j] * min(u[1, e], 0.0)
        else:
            leave_i = face_rho[slots[e, 0]] * max(u[2, e], 0.0)
            leave_j = -face_rho[slots[e, 1]] * min(u[3, e], 0.0)
        buf[e, 0] = lengths[e] * leave_i
        buf[e, 1] = lengths[e] * leave_j
    rate = 0.0
    for i in range(out.shape[0]):
        acc = 0.0
        leave = 0.0
        for k in range(cell_ptr[i], cell_ptr[i + 1]):
            e = cell_edges[k]
            if edges[e, 0] == i:
                acc += buf[e, 0] - buf[e, 1]
                leave += buf[e, 0]
            else:
                acc -= buf[e, 0] - buf[e, 1]
                leave += buf[e, 1]
        out[i] = -acc / areas[i]
        if leave > 0.0:
            rate = max(rate, leave / areas[i] / rho[i]) if rho[i] > 0.0 else np.inf    # ρ|C| may underflow
    return rate


@njit(cache=True)
def _balance(S, U, scale_u, points, beta, sign, normalised, floor, limit, balanced, direct, vel, trusted):
    """The field X of ``balanced_field`` from the kernel sums S (N, 10), in place: vel (N, 3),
    trusted (N,) (Φ~ - floor > limit), and S[:, 1:] balanced (λ U subtracted, U = scale_u times the
    unit uniform sums) when ``balanced``;
    with ``direct``, vel holds the directly summed X[m] on entry and only the correction -λ X^U is
    added."""
    half = math.exp(beta / 2)
    for i in range(S.shape[0]):
        trusted[i] = S[i, 0] - floor > limit
        lam = scale_u * min(1.0, S[i, 0] / (scale_u * U[i, 0])) if trusted[i] and balanced else 0.0
        g0 = -lam * U[i, 1] + (0.0 if direct else S[i, 1])
        g1 = -lam * U[i, 2] + (0.0 if direct else S[i, 2])
        g2 = -lam * U[i, 3] + (0.0 if direct else S[i, 3])
        radial = g0 * points[i, 0] + g1 * points[i, 1] + g2 * points[i, 2]
        g0 -= radial * points[i, 0]
        g1 -= radial * points[i, 1]
        g2 -= radial * points[i, 2]
        scale = sign * ((1.0 / S[i, 0] if trusted[i] else 1.0) if normalised else half * half)
        if direct:
            vel[i, 0] += scale * g0
            vel[i, 1] += scale * g1
            vel[i, 2] += scale * g2
        else:
            vel[i, 0] = scale * g0
            vel[i, 1] = scale * g1
            vel[i, 2] = scale * g2
        if balanced:
            for c in range(1, 10):
                S[i, c] -= lam * U[i, c]


@njit(cache=True, inline="always")
def _slope(S, i, x, t, beta, sign, normalised):
    """f'(0) = <∇_t X, t> along the geodesic from the generator x in the unit tangent direction t:
    with A = β t^T H t - <x, G> (Φ' = β <G, t>, <G, x''> = -<G, x>), f' = ±A e^β (USA, shifted sums)
    and ±(A/Φ~ - β <G~, t>²/Φ~²) (SA); H's six entries in ``_QUADRATIC`` order."""
    tHt = (S[i, 4] * t[0] * t[0] + S[i, 5] * t[1] * t[1] + S[i, 6] * t[2] * t[2]
           + 2.0 * (S[i, 7] * t[0] * t[1] + S[i, 8] * t[0] * t[2] + S[i, 9] * t[1] * t[2]))
    A = beta * tHt - (S[i, 1] * x[0] + S[i, 2] * x[1] + S[i, 3] * x[2])
    if not normalised:
        half = math.exp(beta / 2)
        return sign * A * half * half
    gt = (S[i, 1] * t[0] + S[i, 2] * t[1] + S[i, 3] * t[2]) / S[i, 0]
    return sign * (A / S[i, 0] - beta * gt * gt)


@njit(parallel=True, cache=True)
def _face_speeds(vel, S, trusted, points, edges, normals, distances, beta, sign, normalised, extrapolate,
                 bound, u):
    """Add one head's normal speeds to u (4, E): at the generators u_i = <X_i, n_ij>, u_j = <X_j, n_ij>,
    and, with ``extrapolate``, at the face u^E = u_i + (d/2) f'_i, u^W = u_j - (d/2) f'_j (the slope
    only where trusted), clipped to ±bound."""
    for e in prange(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        n0 = normals[e, 0]
        n1 = normals[e, 1]
        ui = vel[i, 0] * n0[0] + vel[i, 1] * n0[1] + vel[i, 2] * n0[2]
        uj = vel[j, 0] * n1[0] + vel[j, 1] * n1[1] + vel[j, 2] * n1[2]
        ue = ui
        uw = uj
        if extrapolate:
            half = 0.5 * distances[e]
            if trusted[i]:
                ue = ui + half * _slope(S, i, points[i], n0, beta, sign, normalised)
            if trusted[j]:
                uw = uj - half * _slope(S, j, points[j], n1, beta, sign, normalised)
            ue = min(max(ue, -bound), bound)
            uw = min(max(uw, -bound), bound)
        u[0, e] += ui
        u[1, e] += uj
        u[2, e] += ue
        u[3, e] += uw


@njit(cache=True)
def _pair_face_speeds(vel, slopes, trusted, edges, normals, distances, extrapolate, bound, u):
    """u (4, E) of the full model: u_i = <X_i, n_ij>, u_j = <X_j, n_ij> and, with ``extrapolate``,
    u^E = u_i + (d/2) f'_i, u^W = u_j - (d/2) f'_j from the slopes at the pairs (2e, 2e + 1) (only
    where trusted), clipped to ±bound.  Serial: a few flops per face cost less than waking threads."""
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        ui = vel[i, 0] * normals[e, 0, 0] + vel[i, 1] * normals[e, 0, 1] + vel[i, 2] * normals[e, 0, 2]
        uj = vel[j, 0] * normals[e, 1, 0] + vel[j, 1] * normals[e, 1, 1] + vel[j, 2] * normals[e, 1, 2]
        ue = ui
        uw = uj
        if extrapolate:
            half = 0.5 * distances[e]
            if trusted[2 * e]:
                ue = ui + half * slopes[2 * e]
            if trusted[2 * e + 1]:
                uw = uj - half * slopes[2 * e + 1]
            ue = min(max(ue, -bound), bound)
            uw = min(max(uw, -bound), bound)
        u[0, e] = ui
        u[1, e] = uj
        u[2, e] = ue
        u[3, e] = uw


@njit(cache=True)
def _potential_speeds(pot, edges, distances, u):
    """u_i = u_j = u^E = u^W = (P_j - P_i) / d_ij: the two-point (tpfa, muscl) face speeds."""
    for e in range(edges.shape[0]):
        v = (pot[edges[e, 1]] - pot[edges[e, 0]]) / distances[e]
        for r in range(4):
            u[r, e] = v


def check_model(model: SA | USA | MultiHead) -> SA | USA | MultiHead:
    """``model`` checked for the finite volumes on S^2.

    The circle solver's check (``circle.density_model`` on S^2: any Q, K, V; isotropic kernels as the
    isotropic model at β' = cβ), and for those β within the spectral sums' range: the balance
    correction needs them.

    Parameters
    ----------
    model : SA, USA or MultiHead

    Returns
    -------
    SA, USA or MultiHead
        The model the engine runs (isotropic kernels reduced to β' = cβ).

    Raises
    ------
    ValueError or TypeError
        For models the engine cannot take, naming why.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers.sphere_fv import check_model
    >>> check_model(mf.SA(1.5, Q=2.0))
    SA(beta=3)
    """
    return density_model(model, 3, "sphere", max_beta=spectral.MAX_BETA,
                           limit=" (its balance correction uses the spectral sums, whose round-off 3 beta eps "
                                 "exceeds their tolerance beyond)")


def _heads(model):
    """The heads of a MultiHead model, or (model,): the field is the sum of theirs."""
    return getattr(model, "heads", (model,))


def _check_mesh(mesh):
    if mesh is None:
        return icosphere(DEFAULT_LEVEL)
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a meanfield.solvers.meshes.voronoi.Mesh (icosphere(level), fibonacci(n), "
                        f"voronoi_mesh(points)) or None; got {type(mesh).__name__}")
    return mesh


def _check_summation(summation):
    return as_choice(summation, "summation", particles.SUMMATIONS)


def cell_field(model, rho, mesh, summation="auto"):
    r"""The attention field and log Φ at the generators for the cell measure of ``rho``.

    .. math::

        \mu_h = \sum_j \rho_j |C_j| \delta_{c_j}, \qquad
        X(c_i) = X[\mu_h](c_i), \qquad \Phi_i = \sum_j \rho_j |C_j| e^{\beta \langle c_i, c_j\rangle}.

    Parameters
    ----------
    model : SA or USA
        Any Q, K, V: isotropic heads by ``particles.attention_field``, the others by the
        ``general_field.GeneralField`` of the mesh (its tables built once and kept for the last mesh).
    rho : ndarray, shape (N,)
        Cell densities.
    mesh : Mesh
    summation : {"auto", "direct", "fast"}
        As in ``particles.attention_field`` ("fast" is the general field's "expansion").

    Returns
    -------
    X : ndarray, shape (N, 3)
    log_phi : ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(2)
    >>> X, log_phi = sphere.cell_field(mf.SA(2.0), np.full(mesh.size, 1 / (4 * np.pi)), mesh)
    >>> X.shape, log_phi.shape
    ((162, 3), (162,))
    """
    if not model.is_isotropic:
        vel, log_phi = _general_field(model, mesh, summation)(rho * mesh.areas)
        return vel, log_phi[0]
    vel, log_phi = particles.attention_field(model, mesh.points[None], (rho * mesh.areas)[None],
                                             summation=summation)
    return vel[0], log_phi[0]


@lru_cache(maxsize=1)
def _general_field(model, mesh, summation):
    """The ``general_field.GeneralField`` of a general model on the generators of ``mesh``, kept for the
    last (model, mesh, summation): the output energies and fields of a solve reuse its tables."""
    return general_field.GeneralField(model, mesh.points, summation="expansion" if summation == "fast" else summation)


def cell_potential(model, rho, mesh, log_phi):
    r"""The potential P with X = ∇_S P at the generators.

    .. math::

        P_i = \pm \frac{\Phi_i}{\beta} \ \text{(USA)}, \qquad
        P_i = \pm \frac{\log \Phi_i}{\beta} \ \text{(SA)}, \qquad
        P_i = \pm \frac{\langle c_i, \sum_j m_j c_j\rangle}{Z} \ (\beta = 0),
        \quad Z = \sum_j m_j \ \text{(SA)}, \ 1 \ \text{(USA)},

    sign - for V = -I.

    Parameters
    ----------
    model : SA or USA
        With Q^T K = I and V = ±I.
    rho : ndarray, shape (N,)
        Cell densities.
    mesh : Mesh
    log_phi : ndarray, shape (N,)
        log Φ_i from ``cell_field``.

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(1)
    >>> rho = np.full(mesh.size, 1 / (4 * np.pi))
    >>> _, log_phi = sphere.cell_field(mf.SA(2.0), rho, mesh)
    >>> bool(np.allclose(sphere.cell_potential(mf.SA(2.0), rho, mesh, log_phi), log_phi / 2.0))
    True
    """
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


def field_method(mesh, beta):
    """How the kernel sums of a cell measure are evaluated on ``mesh`` at inverse temperature β.

    "table": the real spherical-harmonic basis of degree L (``spectral.degree``: the Funk–Hecke tail
    of e^{β(<x,y>-1)} below 1e-17) is tabulated once per mesh at the generators, T (N, (L+1)^2), and
    S = T diag(ε_m κ_l) T^T W is two products per stage (``threads.table_product``); chosen while T fits in
    ``TABLE_BYTES``.  "transform": the same sums by the Numba transforms of
    ``meanfield.solvers.kernels.harmonics`` (no table; used for larger N (L+1)^2).

    Parameters
    ----------
    mesh : Mesh
    beta : float

    Returns
    -------
    str : "table" or "transform".

    Examples
    --------
    >>> from meanfield.solvers import sphere
    >>> sphere.field_method(sphere.icosphere(5), 3.0)
    'table'
    """
    L = spectral.degree(beta, 3)
    return "table" if mesh.size * (L + 1) ** 2 * 8 <= TABLE_BYTES else "transform"


@lru_cache(maxsize=4)
def _basis(mesh, L):
    """The harmonic table of ``mesh`` up to degree L (``harmonics.sphere_basis``), cached per mesh."""
    T = harmonics.sphere_basis(mesh.points, L)
    T.setflags(write=False)
    return T


@lru_cache(maxsize=16)
def _moments(mesh):
    """(N, 10): (1, c_j, the six entries of c_j c_j^T in ``_QUADRATIC`` order) at the generators."""
    y = mesh.points
    out = np.column_stack([np.ones(mesh.size), y] + [y[:, a] * y[:, b] for a, b in _QUADRATIC])
    out.setflags(write=False)
    return out


def _kernel_sums(mesh, beta, masses, W=None, out=None):
    """S (N, 10): Σ_j m_j e^{β(<c_i,c_j> - 1)} (1, c_j, the six entries of c_j c_j^T), i.e. Φ~, G~ and
    H~ = Σ m_j e^{...} c_j c_j^T shifted by e^{-β}, by the method of ``field_method``; W and out are
    optional (N, 10) work arrays."""
    W = np.multiply(_moments(mesh), masses[:, None], out=W)
    if field_method(mesh, beta) == "transform":
        return spectral.kernel_sum(beta, mesh.points, mesh.points, W)
    return threads.table_product(_basis(mesh, spectral.degree(beta, 3)), W, spectral.table_weights(beta), out)


@lru_cache(maxsize=32)
def _uniform_sums(mesh, beta):
    """The kernel sums of the cell measure of the uniform density with unit total density weight,
    Σ_j |C_j| e^{β(<c_i,c_j> - 1)} (1, c_j, c_j c_j^T): the discrete uniform state's own field."""
    out = _kernel_sums(mesh, beta, mesh.areas)
    out.setflags(write=False)
    return out


def _head_field(head, rho, mesh, summation, balanced, masses, S, vel, trusted, W=None):
    """One head's cell velocities into vel (N, 3), balanced sums into S and ``trusted`` (see
    ``balanced_field``; ``balanced=False``: the point-mass field X[m] itself); returns S."""
    mass = float(masses.sum())
    S = _kernel_sums(mesh, head.beta, masses, W, S)
    floor = spectral.roundoff(head.beta, 3) * mass
    direct = summation == "direct"
    if direct:
        vel[:] = cell_field(head, rho, mesh, summation)[0]
    _balance(S, _uniform_sums(mesh, head.beta), mass / (4 * np.pi), mesh.points,
             head.beta, head.sign, head.normalised, floor, (1.0 + np.sqrt(3.0)) * floor / spectral.RTOL,
             balanced, direct, vel, trusted)
    if not direct:
        redo = np.flatnonzero(~trusted)
        if redo.size:
            vel[redo] = particles.attention_field(head, mesh.points[redo][None], masses[None],
                                                  sources=mesh.points[None], summation="direct")[0][0]
    return S


def balanced_field(model, rho, mesh, summation="auto"):
    """Well-balanced cell velocities X (N, 3) and the pieces S = (Φ~, G~, H~) of their derivatives,
    with the field of the discrete uniform state removed.

    With S[m] the shifted kernel sums (``_kernel_sums``), U = (M/4π) S[|C|] the sums of the uniform
    density of the same mass M, and λ_i = min(1, Φ~_i/Φ~^U_i):

    .. math::

        G̃ = G̃[m] - λ G̃^U,   H̃ = H̃[m] - λ H̃^U,   X = ±P G̃ / Φ̃ (SA),  ±e^β P G̃ (USA),

    i.e. X = X[m] - λ X^U with X[m] the point-mass field (computed from these sums except where they
    are not trusted, or everywhere with summation="direct").  The continuous uniform density has
    X = 0 and zero derivatives, so this only removes the O(h²) quadrature error of the cell-centre
    atoms (λ = 1 at the uniform state: it is then a steady state to round-off, for SA and USA at any
    β); λ < 1 fades the correction where Φ is below its uniform value, so that it never dominates a
    small Φ.  ``trusted`` is False where the spectral sums are below their error bound (SA, large β,
    far from the mass): there λ = 0 and the derivative is not used.

    Parameters
    ----------
    model : SA or USA with Q^T K = I, V = ±I (validated by the caller).
    rho : (N,) cell densities.
    mesh : Mesh.
    summation : "auto", "fast" or "direct": how X[m] is evaluated ("direct": Numba log-sum-exp for
        every cell; otherwise from the kernel sums, with direct recomputation where not trusted).

    Returns
    -------
    X : (N, 3) balanced cell velocities.
    S : (N, 10) balanced shifted sums (Φ~, G~, the six entries of H~ in ``_QUADRATIC`` order).
    trusted : (N,) bool.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(2)
    >>> X, S, trusted = sphere.balanced_field(mf.SA(2.0), np.full(mesh.size, 1 / (4 * np.pi)), mesh)
    >>> bool(np.abs(X).max() < 1e-13)     # the uniform state is at rest
    True
    """
    vel = np.empty((mesh.size, 3))
    trusted = np.empty(mesh.size, dtype=np.bool_)
    S = _head_field(model, rho, mesh, summation, True, rho * mesh.areas, None, vel, trusted)
    return vel, S, trusted


def _cell_potential(model, rho, mesh, summation):
    """Σ_h P_h over the heads (``cell_potential``): the two-point fluxes' potential."""
    return sum(cell_potential(head, rho, mesh, cell_field(head, rho, mesh, summation)[1]) for head in _heads(model))


class SphereOperator(Operator):
    r"""The semi-discrete finite-volume system of ``solve`` on one fixed Voronoi mesh.

    .. math::

        \frac{d\rho_i}{dt} = -\frac{1}{|C_i|} \sum_{j \sim i} F_{ij} + D (\Delta_h \rho)_i

    with the fluxes F of ``flux`` (module docstring); the engine contract of
    ``meanfield.solvers.contract`` (the adaptive engine builds one per mesh).  ``op(rho)`` returns
    (dρ/dt, rate), rate = max_i (mass leaving cell i per unit time) / m_i (+ the diffusion's), with
    the work arrays of every stage allocated once (a call allocates only its result).

    Per stage: the kernel sums of each head (``_kernel_sums``: two products with the harmonic
    table, ``threads.table_product``), then Numba passes for the field (``_balance``), the reconstruction
    (``reconstruction.face_values``), the face speeds (``_face_speeds``) and the fluxes, divergence
    and rate (``_fluxes``).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    mesh : Mesh
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
    summation : {"auto", "fast", "direct"}
    diffusion : float
        D >= 0.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(2)
    >>> op = sphere.SphereOperator(mf.SA(2.0), mesh, "upwind")
    >>> rho = 1 + 0.5 * mesh.points[:, 2]
    >>> drho, rate = op(rho)
    >>> bool(np.allclose(-op.linear_part(rho) @ rho, drho, rtol=0, atol=1e-12))
    True
    >>> bool(abs(drho @ mesh.areas) < 1e-12)          # mass is conserved
    True
    """

    positive = True

    def __init__(self, model: SA | USA | MultiHead, mesh: Mesh, flux: str = DEFAULT_FLUX, summation: str = "auto",
                 diffusion: float = 0.0):
        n, e = mesh.size, mesh.edges.shape[0]
        self.model, self.mesh, self.flux, self.summation = model, mesh, flux, summation
        self.masses, self.W, self.S = np.empty(n), np.empty((n, 10)), np.empty((n, 10))
        self.vel, self.trusted = np.empty((n, 3)), np.empty(n, dtype=np.bool_)
        self.u, self.buf, self.out = np.empty((4, e)), np.empty((e, 2)), np.empty(n)
        self.unresolved = np.zeros(n, dtype=np.bool_)
        self.second = flux in ("upwind2", "muscl")
        if self.second:
            self.weights, self.offsets, self.slots = reconstruction.geometry(mesh)
        else:
            self.weights = self.offsets = np.empty((0, 3))
            self.slots = np.empty((0, 2), dtype=np.int64)
        self.face_rho = np.empty(self.offsets.shape[0])
        self.diffusion = diffusion
        self.laplacian = mesh_laplacian(mesh) if diffusion > 0 else None
        self.diffusion_rate = diffusion * mesh_rate(mesh) if diffusion > 0 else 0.0
        self.general = None
        if not model.is_isotropic:      # the full model: ``full_model.CellField`` on the generators
            self.general = CellField(model, mesh.points, mesh.areas, _check_summation(summation),
                                     balanced=flux == "upwind2", slopes=flux == "upwind2")
            if flux in ("tpfa", "muscl") and self.general.signs is None:
                self.general.potential(np.ones(n))        # refuses with the reason
            self.pairs = np.ascontiguousarray(mesh.edges.ravel())
            self.pair_normals = np.ascontiguousarray(mesh.normals.reshape(-1, 3))
            self.no_slopes = np.zeros(self.pairs.size), np.zeros(self.pairs.size, dtype=bool)

    def _general_speeds(self, rho, balanced, extrapolate):
        """self.u (4, E) of the full model: <X, n> at both generators of each face and, with
        ``extrapolate``, the face values u^E, u^W from the slopes (where trusted), clipped to the bound."""
        mesh, field = self.mesh, self.general
        if extrapolate:
            X, slopes, trusted = field.stage(rho, self.pairs, self.pair_normals)
        else:
            X = field.velocity(rho) if balanced else field.field(rho * mesh.areas)[0]
            slopes, trusted = self.no_slopes
        mass = float(np.multiply(rho, mesh.areas, out=self.masses).sum())     # not a BLAS dot: no thread wake-up
        _pair_face_speeds(X, slopes, trusted, mesh.edges, mesh.normals, mesh.distances, extrapolate,
                          field.bound(mass), self.u)

    def _normal_speeds(self, rho, balanced, extrapolate):
        """Fill self.u (4, E) with the heads' summed normal speeds of the cell-centred field."""
        if self.general is not None:
            return self._general_speeds(rho, balanced, extrapolate)
        mesh, u = self.mesh, self.u
        u[:] = 0.0
        np.multiply(rho, mesh.areas, out=self.masses)
        mass = float(self.masses.sum())
        for head in _heads(self.model):
            S = _head_field(head, rho, mesh, self.summation, balanced, self.masses, self.S, self.vel, self.trusted,
                            self.W)
            _face_speeds(self.vel, S, self.trusted, mesh.points, mesh.edges, mesh.normals, mesh.distances,
                         head.beta, head.sign, head.normalised, extrapolate,
                         speed_bound(head) * (1.0 if head.normalised else mass), u)

    def __call__(self, rho):
        with threads.evaluation():         # on the threads the solve found faster (``threads.ThreadChoice``)
            return self._evaluate(rho)

    def _evaluate(self, rho):
        mesh, u = self.mesh, self.u
        if self.second:
            reconstruction.face_values(rho, mesh.cell_ptr, mesh.cell_neighbours, self.weights, self.offsets,
                                       self.face_rho, self.unresolved)
        if self.flux in ("tpfa", "muscl"):
            pot = _cell_potential(self.model, rho, mesh, self.summation) if self.general is None else \
                self.general.potential(rho)
            _potential_speeds(pot, mesh.edges, mesh.distances, u)
            self.unresolved[:] = False
        else:
            self._normal_speeds(rho, self.flux == "upwind2", self.second)
        rate = _fluxes(rho, self.face_rho, self.slots, self.unresolved, not self.second, u, mesh.edges, mesh.lengths,
                       mesh.cell_ptr, mesh.cell_edges, mesh.areas, self.buf, self.out)
        out = self.out.copy()
        if self.laplacian is not None:
            out += self.diffusion * (self.laplacian @ rho)
        return out, rate + self.diffusion_rate

    def step_bound(self):
        """``max_step(model, mesh, flux)`` combined with the diffusion's rate."""
        return combined_step(max_step(self.model, self.mesh, self.flux), self.diffusion, mesh_rate(self.mesh))

    def energy(self, rho):
        """E_β of the cell measure (``cell_energy``; E_V of the full model with this operator's tables)."""
        with threads.evaluation(timed=False):
            if self.general is not None:
                return self.general.energy(rho)[0]
            return cell_energy(self.model, rho, self.mesh, self.summation)

    def measure(self, rho):
        """The generators (N, 3) and the cell masses ρ_i |C_i|."""
        return self.mesh.points, rho * self.mesh.areas

    def linear_part(self, rho):
        """A with -A ρ = dρ/dt of flux="upwind" (the unbalanced cell-centred field) frozen at ρ
        (``contract.upwind_matrix``), the diffusion's -D Δ_h included; ``areas @ A == 0``."""
        with threads.evaluation(timed=False):
            self._normal_speeds(rho, False, False)
        mesh = self.mesh
        A = upwind_matrix(mesh.edges[:, 0], mesh.edges[:, 1], self.u[0], self.u[1], mesh.lengths, mesh.areas)
        if self.laplacian is not None:
            A = A - self.diffusion * self.laplacian
        return A.tocsr()


def time_derivative(model, rho, mesh=None, flux=DEFAULT_FLUX, summation="auto"):
    r"""dρ/dt of the semi-discrete finite-volume scheme on a Voronoi mesh.

    .. math::

        \frac{d\rho_i}{dt} = -\frac{1}{|C_i|} \sum_{j \sim i} |f_{ij}| F_{ij}

    with the fluxes F of ``flux`` through the faces f_ij (module docstring).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    rho : array_like, shape (N,)
        Cell densities.
    mesh : Mesh, optional
        Default ``icosphere(4)``.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
    summation : {"auto", "fast", "direct"}

    Returns
    -------
    ndarray, shape (N,)

    Raises
    ------
    ValueError
        For a non-isotropic model, an unknown flux or summation, or ``rho`` of the wrong shape.
    TypeError
        When ``mesh`` is not a Mesh.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(2)
    >>> rho = 1 + 0.5 * mesh.points[:, 2]
    >>> bool(abs(sphere.time_derivative(mf.SA(2.0), rho, mesh) @ mesh.areas) < 1e-12)   # mass is conserved
    True
    """
    model = check_model(model)
    mesh = _check_mesh(mesh)
    as_choice(flux, "flux", FLUXES)
    _check_summation(summation)
    rho = as_density(rho, "rho")
    if rho.shape != (mesh.size,):
        raise ValueError(f"rho must have one value per cell, shape ({mesh.size},); got {rho.shape}")
    return SphereOperator(model, mesh, flux, summation)(rho)[0]


def max_step(model, mesh=None, flux=DEFAULT_FLUX):
    r"""The largest fixed step of ``solve``: the positivity bound of SSP-RK3 for unit mass.

    .. math::

        \Delta t \le \frac{\mathrm{CFL}}{\text{speed\_bound(model)} \cdot \max_i |\partial C_i| / |C_i|},

    CFL = 1 for the first-order fluxes (upwind, tpfa), 1/2 for the reconstructed ones (upwind2,
    muscl: a face value is at most twice the cell's).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    mesh : Mesh, optional
        Default ``icosphere(4)``.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(2)
    >>> sphere.max_step(mf.SA(1.0), mesh, "upwind") == 2 * sphere.max_step(mf.SA(1.0), mesh, "upwind2")
    True
    """
    model = check_model(model)
    mesh = _check_mesh(mesh)
    as_choice(flux, "flux", FLUXES)
    return float(CFL[flux] / (speed_bound(model) * np.max(mesh.perimeters / mesh.areas)))


def step_cap(model, mesh=None, flux=DEFAULT_FLUX):
    r"""The largest controlled step of ``solve``.

    .. math::

        \Delta t_{\max} = \max\left(\texttt{max\_step},\ \frac{\texttt{TIME\_STEP}}{\text{speed\_bound(model)}}\right),

    as ``circle.step_cap``: it binds only where the speeds, hence the outflows, are small (near the
    uniform state), where it keeps λ dt <= 0.1 λ / speed_bound for the linear growth rates λ.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    mesh : Mesh, optional
        Default ``icosphere(4)``.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> sphere.step_cap(mf.SA(1.0), sphere.icosphere(2)) >= sphere.max_step(mf.SA(1.0), sphere.icosphere(2))
    True
    """
    model = check_model(model)
    return max(max_step(model, mesh, flux), float(TIME_STEP / speed_bound(model)))


def initial_density(rho0: Callable | ArrayLike, mesh: Mesh) -> np.ndarray:
    """The initial cell densities of ``solve`` on a fixed mesh, normalised to unit mass.

    Parameters
    ----------
    rho0 : callable or array_like
        A callable of points (N, 3) -> densities, evaluated at the generators, or the cell
        densities (N,).
    mesh : Mesh

    Returns
    -------
    ndarray, shape (N,)
        Σ_i ρ_i |C_i| = 1.

    Raises
    ------
    ValueError
        For a bad density or shape.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(1)
    >>> rho = sphere.initial_density(lambda x: 1 + 0.5 * x[:, 2], mesh)
    >>> bool(np.isclose(rho @ mesh.areas, 1.0))
    True
    """
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
    return unit_mass(rho, mesh.areas)


def cell_energy(model: SA | USA | MultiHead, rho: ArrayLike, mesh: Mesh, summation: str = "auto") -> float:
    r"""E_β of the cell measure Σ_i m_i δ_{c_i}, m_i = ρ_i |C_i|.

    .. math::

        E_\beta = \frac{1}{2\beta} \sum_{i,j} m_i m_j e^{\beta \langle c_i, c_j \rangle}
        = \frac{1}{2\beta} \sum_i m_i \Phi_i

    (β = 0: (1/2)|Σ m_i c_i|²); for a MultiHead Σ_h ±E_{β_h} if every head is USA (its field is then
    that sum's gradient), else NaN; for general Q, K, V the energy E_V of ``general_field.energy``
    (NaN where the flow is not a gradient flow of it).  With the harmonic table, Σ_i m_i Φ~_i = Σ_b ε_m κ_l a_b² with
    a = T^T m: one product.

    Parameters
    ----------
    model : SA, USA or MultiHead
    rho : array_like, shape (N,)
        Cell densities.
    mesh : Mesh
    summation : {"auto", "fast", "direct"}

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> mesh = sphere.icosphere(2)
    >>> rho = np.zeros(mesh.size); rho[0] = 1 / mesh.areas[0]         # all the mass in one cell
    >>> bool(np.isclose(sphere.cell_energy(mf.SA(2.0), rho, mesh), np.exp(2.0) / 4))
    True
    """
    if not model.is_isotropic:
        field = _general_field(model, mesh, summation)
        return general_field.energy(model, mesh.points, rho * mesh.areas, field=field)[0]
    if hasattr(model, "heads"):
        if any(head.normalised for head in model.heads):
            return np.nan
        return sum(head.sign * cell_energy(head, rho, mesh, summation) for head in model.heads)
    masses = rho * mesh.areas
    if model.beta == 0:
        mean = masses @ mesh.points
        return 0.5 * float(mean @ mean)
    if summation != "direct" and field_method(mesh, model.beta) == "table":
        a = _basis(mesh, spectral.degree(model.beta, 3)).T @ masses
        return float(np.exp(model.beta + np.log((spectral.table_weights(model.beta) * a) @ a)) / (2.0 * model.beta))
    _, log_phi = cell_field(model, rho, mesh, summation)
    pos = masses > 0
    return float(np.exp(logsumexp(log_phi[pos], b=masses[pos])) / (2.0 * model.beta))


def auto_scheme(scheme: str | type | object) -> str | type | object:
    """``scheme="auto"`` with the thresholds of S²: switch to backward Euler when the explicit step is
    below 1/10 of the implicit one, back above 1/4 (``controllers.choose_scheme``).  On S² a backward
    Euler step (a Newton–Krylov solve: about 11 evaluations of the field or the linear part, and a sparse
    factorisation per Newton iteration) costs about 6 SSP-RK3 steps (three field evaluations each), so
    the two break even at h_explicit / h_implicit ≈ 1/6; the thresholds stand on either side of it, each
    member taken where it is at least about 1.5 times cheaper (not 15-45 as on S¹, where the field is
    cheap beside the solves).  Any other scheme is returned as it is.

    Parameters
    ----------
    scheme : str, Scheme class or instance

    Returns
    -------
    str, Scheme class or instance

    Examples
    --------
    >>> from meanfield.solvers.sphere import auto_scheme
    >>> auto_scheme("auto"), auto_scheme("ssprk3")
    (Auto(switch=0.1, back=0.25), 'ssprk3')
    """
    return Auto(switch=AUTO_SWITCH, back=AUTO_BACK) if isinstance(scheme, str) and scheme == "auto" else scheme


@threads.solving()      # OpenBLAS's spinning threads asleep; the faster of Numba's threads and one
def solve_on_mesh(model: SA | USA | MultiHead, rho0: Callable | ArrayLike, t_eval: ArrayLike, mesh: Mesh, *,
          flux: str = DEFAULT_FLUX, scheme: str | type | object = DENSITY_SCHEME, dt: float | None = None,
          max_dt: float | None = None, cfl: float = STEP_CFL, summation: str = "auto", diffusion: float = 0.0,
          energy: bool = True, progress: bool | None = None, checkpoint: str | PathLike | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = IMPLICIT_RTOL, atol: float = IMPLICIT_ATOL) -> DensitySolution:
    r"""``sphere.solve`` on a fixed mesh: the finite-volume engine of the module docstring.

    .. math::

        \partial_t \rho + \operatorname{div}_S(\rho X[\rho]) = D \Delta_S \rho

    Parameters
    ----------
    model, rho0, t_eval, flux, scheme, dt, max_dt, cfl, summation, diffusion, energy, progress
        As in ``meanfield.solvers.sphere.solve``.
    mesh : Mesh
        The fixed mesh (``icosphere(level)``, ``fibonacci(n)``, ``voronoi_mesh(points)``).
    checkpoint, checkpoint_every, resume, budget, rtol, atol
        As in ``meanfield.solvers.sphere.solve``.

    Returns
    -------
    DensitySolution

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers.sphere_fv import icosphere, solve_on_mesh
    >>> sol = solve_on_mesh(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 2] ** 2, [0.0, 1.0], icosphere(2))
    >>> bool(abs(sol.mass[-1] - 1) < 1e-13 and sol.rho.min() >= 0)
    True
    """
    model = check_model(model)
    mesh = _check_mesh(mesh)
    t_eval = as_time_grid(t_eval)
    energy = as_flag(energy, "energy")
    diffusion = as_diffusion(diffusion)
    as_choice(flux, "flux", FLUXES)
    _check_summation(summation)
    rho = initial_density(rho0, mesh)
    stage = SphereOperator(model, mesh, flux, summation, diffusion)
    bound = stage.step_bound()
    controlled, implicit = dt is None, takes_operator(scheme)
    if not controlled and as_positive(dt, "dt") > bound and not implicit:
        raise ValueError(f"dt = {dt:g} exceeds the positivity bound {bound:.6g} for {model!r} on {mesh.name}; "
                         f"use dt <= {bound:.6g} (or leave dt=None)")
    meta = dict(solver="sphere", model=model.to_dict(), flux=flux, dt=dt, cfl=cfl if controlled else None,
                summation=summation, mesh=mesh.name, cells=mesh.size, diffusion=diffusion,
                mesh_digest=digest(np.concatenate([mesh.points.ravel(), mesh.areas])))
    if max_dt is not None:
        meta["max_dt"] = max_dt
    meta = with_scheme(with_tolerances(meta, scheme, rtol, atol), scheme)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta,
                                                      sizes=mesh.areas)
    rhs = stage if controlled or implicit else (lambda r: stage(r)[0])
    what = f"this solve of {model!r} on {mesh.name} to t = {t_eval[-1]:g}"
    if controlled:
        cap = step_cap(model, mesh, flux) if max_dt is None else as_positive(max_dt, "max_dt")
    times, outputs = detector_times(t_eval, flux)        # denser for the fluxes that pin: the detector's states
    states, info = integrate(rhs, rho, times, scheme=auto_scheme(scheme), dt=cap if controlled else dt,
                             checkpoint=ckpt, resume=resume, progress=progress, positivity=controlled, cfl=cfl,
                             context=what, rtol=rtol, atol=atol, budget=budget)
    rhos = states[outputs]
    en = np.array([stage.energy(r) for r in rhos]) if energy else None
    if stage.general is None:
        fields = sorted({f"{field_method(mesh, head.beta)} (L = {spectral.degree(head.beta, 3)})"
                         for head in _heads(model)})
    else:
        g = stage.general.info
        fields = sorted({"direct" if L is None else f"{how} (L = {L})" for how, L in zip(g["summation"], g["degree"])})
        info.update(degree=g["degree"], tolerance=g["tolerance"], energy_reason=stage.general.energy_reason)
    info.update(method=scheme_name(scheme), flux=flux, dt=dt,
                max_dt=bound, cfl=cfl if controlled else None, summation=summation,
                field=", ".join(fields), mesh=mesh.name, cells=mesh.size, diffusion=diffusion)
    if en is not None:
        sign = getattr(model, "sign", 1.0) if stage.general is None else stage.general.energy_sign
        info["energy_dips"] = energy_dips(en, sign)
    info["pinned"] = pinned_on_fixed_mesh(
        times, states * mesh.areas, mesh_adjacency(mesh.cell_ptr, mesh.cell_neighbours), mesh.points,
        lambda k: sum(cell_field(head, states[k], mesh, summation)[0] for head in _heads(model)),
        np.sqrt(mesh.areas)).tolist()
    warn_pinned(info["pinned"], f"cells {info['pinned'][:5]}", flux)
    return DensitySolution(t=t_eval, points=np.array(mesh.points), areas=np.array(mesh.areas), rho=rhos,
                           mass=rhos @ mesh.areas, energy=en, model=model, info=info)
