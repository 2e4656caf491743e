"""Finite volumes on S^1 with adaptive cells that follow the clusters and the watersheds.

The continuity equation ∂_t ρ + ∂_θ(ρ u) = 0 of ``circle`` (the same fluxes, the same positivity-
controlled SSP-RK3) is solved on a dyadic mesh (``dyadic``): base cells of width 2π/N_0 halved up to
L times, L = log2(``finest_cells``/``cells``).

- **Field on cells of different widths.**  The circle's FFT sums need equal cells.  Here the field
  is that of the piecewise-constant density ρ(θ) = ρ_j on C_j = [c_j - w_j/2, c_j + w_j/2], a truncated
  Fourier sum over its exact coefficients,

      ρ̂_k = Σ_j ∫_{C_j} ρ_j e^{-ikθ} dθ = Σ_j m_j sinc(k w_j/2) e^{-ik c_j} = A_k - i B_k,
      F(c_i) = Σ_{|k|≤K} κ̂_k ρ̂_k e^{ik c_i},

  κ̂_k the continuous Fourier coefficients of the kernels: e^{β(cos δ - 1)} = Σ_k a_k e^{ikδ} with
  a_k = e^{-β} I_k(β), so Q = (e^{β(cos δ-1)} - 1)/β has (a_k - [k = 0])/β, G = -e^{β(cos δ-1)} sin δ
  = ∂_δ(e^{β(cos δ-1)})/β has i k a_k/β and G' has -k² a_k/β.  K = ``kernels.circle.degree``(β) bounds
  the dropped modes by 1e-16 times the mass, so the sums are exact to round-off at O(N K) work (tables
  of cos k c_i, sin k c_i and the sinc factors built once per mesh; two matrix products per field).
  Why this measure: the uniform density has ρ̂_k = 0 for k ≠ 0 on any cells, so it is at rest to
  round-off on every adaptive mesh (the point masses m_j δ_{c_j} of the uniform solver would give an
  O(h²) field on unequal cells); it differs from the uniform solver's field by O(h²) on equal cells.
  Where SA's Φ~ = M + βQ falls below the sums' accuracy the cell's Φ~ and u are recomputed by direct
  log-sum-exp over the point masses (``kernels.dyadic.log_space``), as in ``circle``.
- **Fluxes and reconstruction** on cells of different widths: ``kernels.dyadic.flux_pass``.
- **Criterion.**  Cell i wants the higher of the levels of two criteria, mass and watersheds:
- *mass*: ℓ^mass_i = clip(⌈log2(ρ_i/(θ ρ̄))⌉, 0, L), ρ̄ = M/2π: no cell holds more than θ
  (``threshold``) times the mass of a base cell at the mean density, so clusters sit in the finest
  cells (the error past clustering is about m_c h/2 per cluster in W1);
- *watersheds*: while a watershed (a face where the velocity changes sign from - to +, u_i ≤ 0 <
  u_{i+1}: the flow divides there) carries density ≥ ``watershed`` · ρ̄, every cell wants at least
  the level of ``watershed_cells``.  The cluster masses are decided then, before the collapse: a
  cluster ends with the mass between the two separatrices around it, and the scheme misplaces a
  separatrix by the error of the velocity field there, which is the O(h²) error of the density
  within the kernel's reach (about 1.2 rad at β = 4: refining only 0.4 / 0.8 / 1.2 rad around the
  watersheds, a local variant, left 2.9e-5 / 1.1e-5 / 1.3e-6 of cluster mass error, refining all
  5.8e-7, no watershed refinement 3.1e-5; docs/adaptive.md).  So the smooth phase runs on
  ``watershed_cells`` cells, and the cluster-mass error δm falls like (2π/watershed_cells)² while the
  finest level decides the positions.  Once no watershed carries mass the cells coarsen.
- **Hysteresis and grading.**  Refinement is immediate; a cell stays refined while it wants its level with θ/4 and
  ``watershed``/4 (hysteresis); ``buffer`` cells of every level surround the finer ones (``dyadic.select``);
  θ is raised fourfold while the mesh would exceed ``max_cells``.
- **Leading refinement.**  Each cell's wanted level is carried downstream over |u_i| · ``interval``, the
  farthest its mass can move before the next check (``dyadic.downstream``): a moving cluster's refined
  cells lead it, instead of its front running onto coarser cells between two checks.
- **Initial data**: a callable ρ_0 is averaged over each cell (Gauss–Legendre); values at the centres
  would be off by w_i² ρ''/24, differently on coarse and fine cells, which moves O(h_0²) mass between
  the clusters' basins.
- **Remeshing**: the criterion is checked every ``every`` steps and at least every ``interval`` time
  units; a new mesh gets the densities by ``dyadic.transfer`` (conservative, ≥ 0, within a cell).
- **Energy**: E_β of the piecewise-constant density (the energy whose first variation is the field
  used), e^β (M² + β Σ_k w_k q̂_k |ρ̂_k|²)/(2β), at the outputs (``info["energy_dips"]``) and across
  every remesh (``info["remesh_energy"]``).

With ``finest_cells == cells`` nothing is refined and the run is ``circle.solve``, bit for bit.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from os import PathLike

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ive

from meanfield.budget import BUDGET, as_budget, check_advance, over_budget
from meanfield.checks import as_choice, as_count, as_float_array, as_density, as_positive, as_time_grid
from meanfield.checks import as_flag, unit_mass
from meanfield.npzfile import NPZ_ERRORS
from meanfield.progress import Progress

from meanfield.models import SA, USA, MultiHead

from . import circle
from .full_model import CellField, energy_direction
from .kernels import circle as kernels
from .diffusion import no_diffusion
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME, Operator, scheme_name, upwind_matrix, with_scheme
from .meshes.dyadic import downstream, select, transfer, uniform_mesh, DyadicMesh
from .results import DensitySolution
from .kernels.dyadic import flux_pass, log_space
from .meshes.changing import padded_solution, pinned_on_stretches, remesh_energy
from .energy_report import ring_adjacency, warn_pinned
from .restored import restored_run
from .stepping import CFL as STEP_CFL, IMPLICIT_ATOL, IMPLICIT_RTOL, Checkpoint, digest, integrate, next_stretch, \
    restored_stretch, stretch_state, with_tolerances

__all__ = ["solve", "DyadicOperator", "initial_mesh", "wanted_levels", "time_derivative", "DEFAULTS"]

DEFAULTS = dict(cells=256, finest_cells=8192, threshold=2.0, watershed=1e-2, watershed_cells=1024, buffer=2, every=8,
                interval=0.25, max_cells=8192)
MAX_BETA = 2.0 ** 30   # scipy's ive(k, beta) returns NaN beyond (the kernels' Fourier coefficients)
BESSEL = " (the kernels' Fourier coefficients ive(k, beta) of scipy stop at 2^30)"
TINY_BETA = 1e-150  # below it the kernels' coefficients are their β → 0 limits (relative error O(β))
QUADRATURE = 4      # Gauss–Legendre nodes per cell for the cell averages of a callable rho0
_FIELDS = {"upwind2": ("G", "Q", "dG"), "upwind": ("G", "Q"), "muscl": ("Q",), "tpfa": ("Q",)}


def _coefficients(beta, degree):
    """Fourier coefficients (k = 0..K) of the kernels Q, G (odd: i γ_k, γ returned) and G'."""
    k = np.arange(degree + 1, dtype=float)
    if beta < TINY_BETA:                # the β → 0 limits: I_k(β)/β and (I_0 - 1)/β lose every digit below
        a_over_beta = np.where(k == 1, 0.5, 0.0)
        q = np.where(k == 0, -1.0, a_over_beta)
    else:
        a = ive(k, beta)
        a_over_beta = a / beta
        q = (a - (k == 0)) / beta
    return dict(Q=(q, True), G=(k * a_over_beta, False), dG=(-k * k * a_over_beta, True))


class _Head:
    """One head's fields on a mesh: the coefficient rows of its kernels (module docstring)."""

    def __init__(self, model, flux, degree, tau):
        self.model, self.tau = model, tau
        names = _FIELDS[flux]
        if not model.normalised:
            names = tuple(n for n in names if n != "Q") if flux in ("upwind2", "upwind") else names
        coef = _coefficients(model.beta, degree)
        scale = model.sign * (1.0 if model.normalised else np.exp(model.beta))
        weights = np.where(np.arange(degree + 1) == 0, 1.0, 2.0)
        self.rows = []
        for name in names:
            c, even = coef[name]
            self.rows.append((weights * c * (1.0 if (name == "Q" and model.normalised) else scale), even))
        self.bound = circle.speed_bound(model)

    def fields(self, a, b, cos_t, sin_t):
        """The fields at the centres, (F, N), from A_k = Σ m_j cos k c_j and B_k = Σ m_j sin k c_j:
        Σ_k w_k e_k (A_k cos k c_i + B_k sin k c_i) for an even kernel (coefficients e_k) and
        Σ_k w_k γ_k (B_k cos k c_i - A_k sin k c_i) for an odd one (i γ_k), w_0 = 1, w_k = 2."""
        p = np.array([c * (a if even else b) for c, even in self.rows])
        r = np.array([c * (b if even else -a) for c, even in self.rows])
        return p @ cos_t + r @ sin_t


class DyadicOperator(Operator):
    r"""The semi-discrete finite-volume system on a DyadicMesh (cells of different widths).

    .. math::

        \frac{d\rho_i}{dt} = -\frac{F_{i+1/2} - F_{i-1/2}}{w_i}

    with ``circle``'s fluxes on cells of widths w_i (``dyadic_kernels.flux_pass``) and the field of the
    piecewise-constant density (module docstring); the engine contract of
    ``meanfield.solvers.contract``.  ``op(rho)`` returns (dρ/dt, rate).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    mesh : DyadicMesh
    flux : {"upwind2", "upwind", "muscl", "tpfa"}

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.adaptive_circle import DyadicOperator
    >>> from meanfield.solvers.meshes.dyadic import select, uniform_mesh
    >>> mesh = select(uniform_mesh(16, 2), [2] + [0] * 15, buffer=1)      # cells of three widths
    >>> op = DyadicOperator(mf.SA(2.0), mesh, "upwind")
    >>> rho = 1 + 0.5 * np.cos(mesh.angles)
    >>> bool(np.allclose(-op.linear_part(rho) @ rho, op(rho)[0], rtol=0, atol=1e-13))
    True
    """

    positive = True

    def __init__(self, model: SA | USA | MultiHead, mesh: DyadicMesh, flux: str = circle.DEFAULT_FLUX):
        self.model, self.mesh, self.flux = model, mesh, flux
        self.code = kernels.FLUX_CODES[flux]
        self.widths, self.gaps = mesh.widths, mesh.gaps
        self._work = np.empty((5, mesh.size))
        self.log_space_cells = 0
        self.general = None
        if not model.is_isotropic:      # the full model: point masses at the centres, balanced (``CellField``)
            self.general = CellField(model, _points(mesh), mesh.widths, balanced=flux == "upwind2",
                                     slopes=flux == "upwind2")
            if self.code >= 2 and self.general.signs is None:
                self.general.potential(np.ones(mesh.size))        # refuses with the reason
            self.degree = max((k for k in self.general.info["degree"] if k is not None), default=None)
            return
        heads = getattr(model, "heads", (model,))
        self.degree = max(kernels.degree(h.beta, mesh.units) for h in heads)
        tau = circle.FFT_ERROR * np.finfo(float).eps * np.log2(mesh.units) / circle.RTOL
        self.heads = [_Head(h, flux, self.degree, tau) for h in heads]
        k = np.arange(self.degree + 1)
        phase = np.outer(k, mesh.angles)
        self.cos, self.sin = np.cos(phase), np.sin(phase)
        spread = np.sinc(np.outer(k, mesh.widths) / (2 * np.pi))     # sin(k w_j/2)/(k w_j/2)
        self.cos_cells, self.sin_cells = self.cos * spread, self.sin * spread

    def transform(self, rho):
        """(A, B, M): the Fourier sums of the piecewise-constant density and its mass."""
        m = rho * self.widths
        return self.cos_cells @ m, self.sin_cells @ m, float(np.sum(m))

    def centre(self, rho):
        """(u, u', P) at the centres summed over the heads, and the summed speed bound."""
        if self.general is not None:
            return self.general.angular(rho, self.flux)
        a, b, mass = self.transform(rho)
        centre, bound = np.zeros((3, self.mesh.size)), 0.0
        for head in self.heads:
            model = head.model
            mine = np.zeros((3, self.mesh.size))
            fields = head.fields(a, b, self.cos, self.sin)
            floor = head.tau * mass
            if kernels.centre_velocities(fields, mass, model.beta, float(model.sign), model.normalised, self.code,
                                         floor, False, mine[0], mine[1], mine[2]):
                bad = np.flatnonzero(mass + model.beta * fields[0 if self.code >= 2 else 1] < floor)
                self.log_space_cells = max(self.log_space_cells, bad.size)
                log_phi, vel = np.empty(bad.size), np.empty(bad.size)
                log_space(rho * self.widths, self.mesh.angles, model.beta, bad, log_phi, vel)
                if self.code >= 2:
                    mine[2, bad] = (model.sign / model.beta) * (log_phi - np.log(mass))
                else:
                    mine[0, bad] = model.sign * vel
            centre += mine
            bound += head.bound * (1.0 if model.normalised else mass)
        return centre, bound

    def __call__(self, rho):
        centre, bound = self.centre(rho)
        out = np.empty(self.mesh.size)
        rate = flux_pass(rho, self.widths, self.gaps, centre[0], centre[1], centre[2], bound, self.code,
                         self._work, out)
        return out, rate

    def velocity(self, rho):
        """u at the centres (summed over the heads)."""
        if self.code == 0 or self.code == 1:
            return self.centre(rho)[0][0]
        return DyadicOperator(self.model, self.mesh, "upwind").velocity(rho)

    def step_bound(self):
        """CFL · w_min / speed_bound(model): ``circle.max_step`` for the narrowest cell."""
        return float(circle.CFL[self.flux] * self.widths.min() / circle.speed_bound(self.model))

    def measure(self, rho):
        """The cell centres (cos c_i, sin c_i), (N, 2), and the cell masses ρ_i w_i."""
        return _points(self.mesh), rho * self.widths

    def linear_part(self, rho):
        """A with -A ρ = dρ/dt of flux="upwind" for the field frozen at ρ (``contract.upwind_matrix``);
        ``widths @ A == 0``."""
        left = np.arange(self.mesh.size)
        right = (left + 1) % self.mesh.size
        u = self.velocity(rho)
        return upwind_matrix(left, right, u, u[right], np.ones(left.size), self.widths)

    def energy(self, rho):
        """E_β of the piecewise-constant density, e^β (M² + β Σ_k w_k q_k (A_k² + B_k²))/(2β) (Parseval
        on the Fourier sums); at β = 0 its limit; Σ_h ±E_{β_h} for USA heads, NaN with SA heads; the full
        model: E_V of the point masses (``general_field.energy``), NaN where not a gradient flow."""
        if self.general is not None:
            return self.general.energy(rho)[0]
        a, b, mass = self.transform(rho)
        if len(self.heads) > 1 and any(h.model.normalised for h in self.heads):
            return np.nan
        total = 0.0
        for head in self.heads:
            beta = head.model.beta
            q = _coefficients(beta, self.degree)["Q"][0] * np.where(np.arange(self.degree + 1) == 0, 1.0, 2.0)
            mq = float(q @ (a * a + b * b))
            e = 0.5 * (mass * mass + mq) if beta == 0 else float(np.exp(beta + np.log(mass * mass + beta * mq)) /
                                                                 (2 * beta))
            total += e * (head.model.sign if len(self.heads) > 1 else 1.0)
        return total


def time_derivative(model, rho, mesh, flux=circle.DEFAULT_FLUX):
    r"""dρ/dt of the scheme on a DyadicMesh for cell densities ``rho`` (one per cell).

    The semi-discrete continuity equation on cells C_i of widths w_i (``kernels.dyadic.flux_pass``,
    the field from the exact Fourier coefficients of the piecewise-constant density):

    .. math::

        \frac{d\rho_i}{dt} = -\frac{F_{i+1/2} - F_{i-1/2}}{w_i}, \qquad
        \sum_i w_i \frac{d\rho_i}{dt} = 0.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Q^T K = I, V = ±I heads (as ``circle.solve``).
    rho : array_like, shape (mesh.size,)
        Cell densities (>= 0).
    mesh : DyadicMesh
        The cells.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
        The flux (``circle``'s).

    Returns
    -------
    ndarray, shape (mesh.size,)
        dρ_i/dt.

    Raises
    ------
    ValueError
        If the model is not isotropic, the flux unknown, or rho not one non-negative finite density per cell.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers.meshes.dyadic import select, uniform_mesh
    >>> mesh = select(uniform_mesh(16, 2), [2] + [0] * 15, buffer=1)      # cells of three widths
    >>> rate = time_derivative(mf.SA(2.0), 1 + 0.5 * np.cos(mesh.angles), mesh)
    >>> bool(abs(rate @ mesh.widths) < 1e-14)                             # mass is conserved
    True
    >>> rest = time_derivative(mf.SA(2.0), np.full(mesh.size, 1 / (2 * np.pi)), mesh)
    >>> bool(np.abs(rest).max() < 1e-14)                                  # the uniform density is at rest
    True
    """
    model = circle.density_model(model, 2, "adaptive circle", max_beta=MAX_BETA, limit=BESSEL)
    as_choice(flux, "flux", circle.FLUXES)
    rho = as_density(rho, "rho")
    if rho.shape != (mesh.size,):
        raise ValueError(f"rho must hold one density per cell, shape ({mesh.size},); got {rho.shape}")
    return DyadicOperator(model, mesh, flux)(rho)[0]


def wanted_levels(rho, velocity, mesh, threshold, watershed, watershed_level, lead=0.0):
    r"""The level each cell wants (module docstring): the mass criterion, raised to
    ``watershed_level`` everywhere while a watershed carries density ≥ ``watershed`` ρ̄, and carried
    downstream over the distance |u_i| ``lead`` (leading refinement).

    .. math::

        \ell_i = \operatorname{clip}\Big(\Big\lceil \log_2 \frac{\rho_i}{\theta \bar\rho} \Big\rceil, 0, L\Big),
        \qquad \bar\rho = \frac{1}{2\pi} \sum_j \rho_j w_j,

    and ℓ_i ← max(ℓ_i, ``watershed_level``) for every i when some face has u_i ≤ 0 < u_{i+1} and
    max(ρ_i, ρ_{i+1}) ≥ ``watershed`` ρ̄.  Then every cell within u_i ``lead`` downstream of cell i
    gets at least ℓ_i (``dyadic.downstream``): the cells a cluster reaches before the next check are
    refined before it arrives.

    Parameters
    ----------
    rho : ndarray, shape (mesh.size,)
        Cell densities.
    velocity : ndarray, shape (mesh.size,)
        u at the cell centres.
    mesh : DyadicMesh
        The cells (widths w_j, finest level L).
    threshold : float
        θ > 0, the most mass a cell may hold in units of a base cell at the mean density.
    watershed : float
        The density, in units of ρ̄, above which a watershed asks for ``watershed_level`` (0: off).
    watershed_level : int
        The level of the smooth phase.
    lead : float
        τ ≥ 0, the time ahead the refinement leads the flow (the longest time between two checks; 0: off).

    Returns
    -------
    ndarray of int64, shape (mesh.size,)
        The wanted levels, in [0, L] (or ``watershed_level``).

    Examples
    --------
    >>> from meanfield.solvers.meshes.dyadic import uniform_mesh
    >>> mesh = uniform_mesh(8, 2)
    >>> rho = np.array([8.0, 1, 1, 1, 1, 1, 1, 1])
    >>> wanted_levels(rho, np.zeros(8), mesh, 2.0, 0.01, 1).tolist()             # no watershed
    [2, 0, 0, 0, 0, 0, 0, 0]
    >>> wanted_levels(rho, -np.sin(mesh.angles), mesh, 2.0, 0.01, 1).tolist()    # one at θ = π
    [2, 1, 1, 1, 1, 1, 1, 1]
    >>> wanted_levels(rho, np.full(8, 0.5), mesh, 2.0, 0.01, 1, lead=2.0).tolist()  # moving forward
    [2, 2, 2, 0, 0, 0, 0, 0]
    """
    mean = float(rho @ mesh.widths) / (2 * np.pi)
    with np.errstate(divide="ignore"):
        mass = np.ceil(np.log2(rho / (threshold * mean)))
    levels = np.clip(np.nan_to_num(mass, neginf=0.0), 0, mesh.depth).astype(np.int64)
    if watershed > 0 and watershed_level > 0:
        split = (velocity <= 0) & (np.roll(velocity, -1) > 0)
        if np.any(split & (np.maximum(rho, np.roll(rho, -1)) >= watershed * mean)):
            levels = np.maximum(levels, watershed_level)
    return downstream(mesh, levels, velocity * lead) if lead > 0 else levels


def _refined(mesh, stage, rho, settings, threshold):
    """The mesh the criterion asks for (hysteresis against ``mesh``), and the threshold used."""
    velocity = stage.velocity(rho)
    ws, level = settings["watershed"], settings["watershed_level"]
    while True:
        want = wanted_levels(rho, velocity, mesh, threshold, ws, level, settings["interval"])
        keep = np.minimum(wanted_levels(rho, velocity, mesh, threshold / 4, ws / 4, level, settings["interval"]),
                          mesh.levels)
        new = select(mesh, np.maximum(want, keep), settings["buffer"])
        if new.size <= settings["max_cells"] or np.all(want == 0):
            return new, threshold
        threshold *= 4.0


def _initial(rho0, mesh, cells):
    """Unit-mass densities of rho0 on ``mesh``: a callable averaged over each cell (Gauss–Legendre,
    ``QUADRATURE`` nodes: values at the centres would be off by w_i² ρ''/24, which differs between
    coarse and fine cells and so moves O(h_0²) mass between the clusters' basins), or an array of
    base-cell densities moved by ``dyadic.transfer``."""
    if callable(rho0):
        nodes, weights = np.polynomial.legendre.leggauss(QUADRATURE)
        angles = (mesh.angles[:, None] + 0.5 * mesh.widths[:, None] * nodes).ravel()
        values = as_float_array(rho0(np.column_stack([np.cos(angles), np.sin(angles)])), "rho0(points)")
        if values.shape != angles.shape:
            raise ValueError(f"rho0(points) must return one density per point, shape ({angles.size},); "
                             f"got {values.shape}")
        shape = unit_mass(as_density(values, "rho0(points)"), np.ones(values.size))     # no overflow in the sums
        rho = shape.reshape(mesh.size, QUADRATURE) @ weights
    else:
        rho = as_density(rho0, "rho0")
        if rho.shape != (cells,):
            raise ValueError(f"an array rho0 must hold one density per base cell, shape ({cells},); got "
                             f"{rho.shape} (or pass a callable of points (N, 2))")
        rho = transfer(uniform_mesh(cells, mesh.depth), mesh, rho / rho.max())   # relative sizes: no overflow
    return unit_mass(rho, mesh.widths)


def initial_mesh(model, rho0, cells, depth, flux, settings, threshold):
    """(mesh, rho, threshold) the criterion asks for at t = 0: refined from the base grid with rho0
    evaluated on each new mesh until the mesh no longer changes.

    The densities on a mesh are the cell averages of a callable rho0 (Gauss–Legendre), or an array of
    base-cell densities moved by ``dyadic.transfer``, normalised to Σ_i ρ_i w_i = 1; the levels are
    ``wanted_levels`` with hysteresis, graded by ``dyadic.select``.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Validated isotropic model (as ``solve`` passes it).
    rho0 : callable or ndarray
        Points (N, 2) -> densities, or the densities on the ``cells`` base cells.
    cells : int
        N_0, the number of base cells.
    depth : int
        L, the finest level.
    flux : str
        The flux (the criterion's velocity is computed with it).
    settings : dict
        ``watershed``, ``watershed_level``, ``buffer``, ``interval`` (the lead time of ``wanted_levels``) and
        ``max_cells`` (``solve``'s settings).
    threshold : float
        θ, raised fourfold while the mesh would exceed ``max_cells``.

    Returns
    -------
    mesh : DyadicMesh
    rho : ndarray, shape (mesh.size,)
        Unit-mass cell densities of rho0 on it.
    threshold : float
        The θ used.

    Raises
    ------
    ValueError
        If rho0 gives negative or non-finite densities, or an array rho0 is not one density per base cell.

    Examples
    --------
    >>> import meanfield as mf
    >>> settings = dict(watershed=0.0, watershed_level=0, buffer=2, interval=0.25, max_cells=8192)
    >>> bump = lambda x: np.exp(8 * x[:, 0])                   # concentrated around θ = 0
    >>> mesh, rho, theta = initial_mesh(mf.SA(4.0), bump, 16, 3, "upwind2", settings, 2.0)
    >>> mesh.size, int(mesh.levels[0]), int(mesh.levels[16]), round(float(rho @ mesh.widths), 12), theta
    (34, 2, 0, 1.0, 2.0)
    """
    mesh = uniform_mesh(cells, depth)
    for _ in range(depth + 2):
        rho = _initial(rho0, mesh, cells)
        new, threshold = _refined(mesh, DyadicOperator(model, mesh, flux), rho, settings, threshold)
        if np.array_equal(new.edges, mesh.edges):
            break
        mesh = new
    return mesh, _initial(rho0, mesh, cells), threshold


def _depth(cells, finest_cells):
    ratio = finest_cells // cells
    if finest_cells % cells or ratio & (ratio - 1):
        raise ValueError(f"finest_cells = {finest_cells} must be cells = {cells} times a power of two")
    return int(ratio).bit_length() - 1


def solve(model: SA | USA | MultiHead, rho0: Callable | ArrayLike, t_eval: ArrayLike, *, cells: int = DEFAULTS["cells"],
          finest_cells: int = DEFAULTS["finest_cells"], flux: str = circle.DEFAULT_FLUX,
          scheme: str | type | object = DENSITY_SCHEME, threshold: float = DEFAULTS["threshold"],
          watershed: float = DEFAULTS["watershed"], watershed_cells: int = DEFAULTS["watershed_cells"],
          buffer: int = DEFAULTS["buffer"], every: int = DEFAULTS["every"], interval: float = DEFAULTS["interval"],
          max_cells: int = DEFAULTS["max_cells"], summation: str = "auto", diffusion: float = 0.0,
          energy: bool = True, progress: bool | None = None,
          checkpoint: str | PathLike | None = None, checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = IMPLICIT_RTOL, atol: float = IMPLICIT_ATOL) -> DensitySolution:
    r"""Solve the continuity equation on S^1 on adaptive cells; return a DensitySolution whose
    ``cells`` field gives each output's number of cells.

    .. math::

        \partial_t \rho + \partial_\theta(\rho \, u) = 0, \qquad
        F_\kappa(\theta) = \sum_{|k| \le K} \hat\kappa_k \hat\rho_k e^{ik\theta}, \qquad
        \hat\rho_k = \sum_j m_j \operatorname{sinc}(k w_j / 2) e^{-ik c_j},

    the velocity u built from the fields F_κ of the kernels κ (module docstring), by finite volumes
    on a dyadic mesh that refines where the mass concentrates and around the watersheds, stepped by
    positivity-controlled SSP-RK3.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Heads with Q^T K = I, V = ±I, as ``circle.solve``.
    rho0 : callable or array_like
        Points (N, 2) -> densities (averaged over each cell), or an array of densities on the
        ``cells`` base cells; normalised to unit mass.
    t_eval : array_like
        Increasing output times (the steps end on each).
    cells : int
        N_0, the number of base cells (coarsest level).
    finest_cells : int
        The number of cells of the finest level, N_0 2^L (``finest_cells == cells``: ``circle.solve``).
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
        ``circle``'s fluxes (default "upwind2").
    scheme : str, Scheme class or instance
        The time scheme (``stepping.integrate``), default "ssprk3", positivity-controlled.
    threshold : float
        θ, the most mass a cell may hold in units of a base cell at the mean density.
    watershed : float
        While a watershed (a - to + sign change of the velocity) carries a density of at least
        this times the mean, every cell is refined to ``watershed_cells`` (module docstring); 0 turns the
        watershed criterion off.
    watershed_cells : int
        The cells of that smooth phase, cells 2^k (clipped to [cells, finest_cells]).
    buffer : int
        Cells of each level around the finer ones.
    every, interval : int, float
        The criterion is checked every ``every`` steps and at least every ``interval``.
    max_cells : int
        The most cells a mesh may have (θ is raised until it fits).
    summation : {"auto"}
        The field of the piecewise-constant density is an exact non-uniform Fourier sum; there is no
        other summation to choose.
    diffusion : float
        Only 0 (the default): this solver has no diffusion term, and D > 0 is refused
        (``circle.solve`` and ``sphere.solve`` take one).
    energy : bool
        Compute E_β at the outputs and across the remeshes.
    progress : bool or None
        One report for the whole run (``meanfield.progress``), across its stretches between remeshes.
    checkpoint, checkpoint_every, resume : path, int, bool
        A path where the run's state is saved at the first criterion check after every
        ``checkpoint_every`` time steps (and where the budget stops the run); ``resume=True``
        continues it bit for bit.
    budget : float or None
        Seconds after which the run stops with a RuntimeError at the next check of the criterion, after
        saving its ``checkpoint`` (resume from it; None: no limit).
    rtol, atol : float
        Tolerances of the error-controlled schemes ("mprk22", "auto"; ``circle.solve``).  With an
        implicit scheme the mesh is checked every ``every`` implicit steps (at least ``interval``) and the
        implicit controller restarts on each new mesh from the last step; "auto" goes on with the member it
        ended a stretch with.

    Returns
    -------
    DensitySolution
        rho, points, areas padded to the largest mesh and ``cells`` (m,); info holds the settings,
        remeshes, checks, remesh_seconds, meshes (t, cells, finest level of each mesh), energy_dips,
        remesh_energy, log_space_cells and the step counters (nfev, nsteps, nrejected, hmin, hmax).

    Raises
    ------
    ValueError
        On invalid input: a model other than Q^T K = I, V = ±I heads, an unknown flux, bad output times
        or densities, ``finest_cells`` not ``cells`` times a power of two, a non-finite or negative
        ``watershed``, ``watershed_cells`` above ``max_cells``, ``resume`` without ``checkpoint``, or a
        checkpoint written by another run.
    RuntimeError
        When the run passes its ``budget``.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.measures import perturbed_uniform
    >>> sol = solve(mf.SA(4.0), perturbed_uniform(2), [0.0, 2.0], cells=64, finest_cells=512)
    >>> bool(abs(sol.mass[-1] - 1) < 1e-13 and sol.rho.min() >= 0), int(sol.cells[-1]) > 64
    (True, True)
    """
    model = circle.density_model(model, 2, "adaptive circle", max_beta=MAX_BETA, limit=BESSEL)
    as_choice(flux, "flux", circle.FLUXES)
    as_choice(summation, "summation", ("auto",))
    no_diffusion(diffusion, "adaptive_circle.solve")
    t_eval = as_time_grid(t_eval)
    energy = as_flag(energy, "energy")
    cells = circle.check_cells(cells)
    finest = as_count(finest_cells, "finest_cells")
    depth = _depth(cells, finest)
    budget = as_budget(budget)
    settings = dict(threshold=as_positive(threshold, "threshold"), buffer=as_count(buffer, "buffer", minimum=0),
                    watershed=float(watershed),
                    max_cells=as_count(max_cells, "max_cells"), every=as_count(every, "every"),
                    interval=as_positive(interval, "interval"))
    check_advance(t_eval, settings["interval"], "interval", "this adaptive circle solve", "remeshing stretches")
    if not (np.isfinite(settings["watershed"]) and settings["watershed"] >= 0):
        raise ValueError(f"watershed must be a finite number >= 0; got {watershed!r}")
    watershed_cells = min(max(as_count(watershed_cells, "watershed_cells"), cells), finest)
    settings["watershed_level"] = _depth(cells, watershed_cells)
    if watershed_cells > settings["max_cells"] and settings["watershed"] > 0:
        raise ValueError(f"watershed_cells = {watershed_cells} exceeds max_cells = {max_cells}")
    if depth == 0:
        return circle.solve(model, rho0, t_eval, cells=cells, flux=flux, scheme=scheme, energy=energy,
                            progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                            resume=resume, budget=budget, rtol=rtol, atol=atol)
    start = time.perf_counter()
    mesh, rho, threshold = initial_mesh(model, rho0, cells, depth, flux, settings, settings["threshold"])
    run = _Run(model, flux, scheme, t_eval, cells, depth, settings, energy, rtol, atol)
    run.begin(mesh, rho, threshold, time.perf_counter() - start)
    ckpt = None
    if checkpoint is not None:
        meta = dict(solver="adaptive_circle", model=model.to_dict(), flux=flux, cells=cells, finest=finest,
                    energy=energy, **settings)
        meta = with_scheme(with_tolerances(meta, scheme, rtol, atol), scheme)
        ckpt = Checkpoint(checkpoint, every=checkpoint_every, meta=meta)
        if resume:
            run.restore(ckpt)
    elif resume:
        raise ValueError("resume=True needs checkpoint=PATH (the file to resume from)")
    run.advance(ckpt, progress, budget, start)
    return run.solution()


class _Run:
    """The state of an adaptive run between criterion checks (what a checkpoint holds)."""

    def __init__(self, model, flux, scheme, t_eval, cells, depth, settings, energy, rtol, atol):
        self.rtol, self.atol = rtol, atol
        self.model, self.flux, self.t_eval, self.cells, self.depth = model, flux, t_eval, cells, depth
        self.scheme = scheme
        self.settings, self.energy = settings, energy

    def begin(self, mesh, rho, threshold, seconds):
        self.mesh, self.rho, self.threshold = mesh, rho, threshold
        self.t, self.k = float(self.t_eval[0]), 1
        self.out = [(mesh, rho)]
        self.counters = dict(nfev=0, nsteps=0, nrejected=0, hmin=np.inf, hmax=0.0, checks=0)
        self.meshes = [dict(t=self.t, cells=mesh.size, finest=int(mesh.levels.max()))]
        self.jumps, self.remesh_seconds = [], seconds
        self.switches = []                  # of scheme="auto"
        self.stretch, self.implicit_step = self.scheme, None      # the next stretch's scheme (stepping.next_stretch)
        self.start = digest(rho)
        self.stage = DyadicOperator(self.model, mesh, self.flux)

    def _state(self):
        sizes = np.array([m.size for m, _ in self.out])
        return dict(t_eval=self.t_eval, start=np.array(self.start), t=np.array(self.t), k=np.array(self.k),
                    rho=self.rho, edges=self.mesh.edges, threshold=np.array(self.threshold),
                    out_sizes=sizes, out_edges=np.concatenate([m.edges for m, _ in self.out]),
                    out_rho=np.concatenate([r for _, r in self.out]), jumps=np.array(self.jumps, dtype=float),
                    meshes=np.array(json.dumps(self.meshes)), counters=np.array(json.dumps(self.counters)),
                    **stretch_state(self.stretch, self.implicit_step, self.switches))

    def restore(self, ckpt):
        if not os.path.exists(ckpt.path):
            return
        try:
            with np.load(ckpt.path, allow_pickle=False) as data:
                state = {key: data[key] for key in data.files}
            meta = str(state["meta"])
        except NPZ_ERRORS as exc:
            raise ValueError(f"checkpoint {ckpt.path} is unreadable or corrupt ({type(exc).__name__}: {exc}); "
                             f"delete it to start afresh") from None
        if meta != ckpt.meta or str(state.get("start")) != self.start or not np.array_equal(state.get("t_eval"),
                                                                                               self.t_eval):
            raise ValueError(f"checkpoint {ckpt.path} was written by a different run (model, settings, initial "
                             f"state or output times differ); delete it or choose another checkpoint path")
        try:
            restored = restored_run(state, self.t_eval, self.cells, self.depth)
            self.stretch, self.implicit_step, self.switches = restored_stretch(self.scheme, state)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
            raise ValueError(f"checkpoint {ckpt.path} is inconsistent ({exc}); delete it to start afresh") from None
        self.t, self.k, self.threshold, self.mesh, self.rho, self.out, self.jumps, self.meshes, self.counters = restored
        self.stage = DyadicOperator(self.model, self.mesh, self.flux)

    def advance(self, ckpt, progress, budget, start):
        t_eval, counters = self.t_eval, self.counters
        last = float(t_eval[-1])
        saved_steps = counters["nsteps"]
        reporter = Progress(float(last - t_eval[0]), "solve", progress)      # one report for every stretch
        reporter.update(self.t - float(t_eval[0]))
        while self.k < t_eval.size:
            implicit_step = self.implicit_step
            if implicit_step is None:
                rate = self.stage(self.rho)[1]
                step = min(self.settings["every"] * STEP_CFL / rate if rate > 0 else np.inf, self.settings["interval"])
            else:                   # implicit steps: remesh every `every` of them (or `interval`, if longer)
                step = max(self.settings["every"] * implicit_step, self.settings["interval"])
            horizon = min(self.t + step, last)
            stops = np.concatenate([[self.t], t_eval[(t_eval > self.t) & (t_eval < horizon)], [horizon]])
            states, info = integrate(self.stage, self.rho, stops, scheme=self.stretch,
                                     dt=circle.step_cap(self.model, self.mesh.units, self.flux), positivity=True,
                                     cfl=STEP_CFL, progress=reporter, rtol=self.rtol, atol=self.atol,
                                     first_step=implicit_step)
            self.stretch, self.implicit_step = next_stretch(self.stretch, info)
            self.switches += info.get("switches", [])
            for key in ("nfev", "nsteps", "nrejected"):
                counters[key] += info[key]
            counters.update(hmin=min(counters["hmin"], info["hmin"]), hmax=max(counters["hmax"], info["hmax"]))
            for s, state in zip(stops[1:], states[1:]):
                if self.k < t_eval.size and s == t_eval[self.k]:
                    self.out.append((self.mesh, state))
                    self.k += 1
            self.t, self.rho = float(horizon), states[-1]
            if self.k >= t_eval.size:
                break
            self._check()
            stop = over_budget(start, budget, "the adaptive circle solve", self.t, None if ckpt is None else ckpt.path)
            if ckpt is not None and (counters["nsteps"] - saved_steps >= ckpt.every or stop is not None):
                ckpt.save(self._state())                                           # also where it stops
                saved_steps = counters["nsteps"]
            if stop is not None:
                reporter.close()
                raise stop
        reporter.close()
        if ckpt is not None:
            ckpt.save(self._state())

    def _check(self):
        begin = time.perf_counter()
        self.counters["checks"] += 1
        new, self.threshold = _refined(self.mesh, self.stage, self.rho, self.settings, self.threshold)
        if not np.array_equal(new.edges, self.mesh.edges):
            moved = transfer(self.mesh, new, self.rho)
            new_stage = DyadicOperator(self.model, new, self.flux)
            if self.energy:
                before, after = self.stage.energy(self.rho), new_stage.energy(moved)
                self.jumps.append((after - before) / abs(before) if before else 0.0)
            self.mesh, self.rho, self.stage = new, moved, new_stage
            self.meshes.append(dict(t=self.t, cells=new.size, finest=int(new.levels.max())))
        self.remesh_seconds += time.perf_counter() - begin

    def solution(self):
        meshes, rhos = [m for m, _ in self.out], [r for _, r in self.out]
        info = dict(method=scheme_name(self.scheme), flux=self.flux, cells=self.cells,
                    finest_cells=self.cells << self.depth, threshold=self.threshold,
                    remeshes=len(self.meshes) - 1, remesh_seconds=self.remesh_seconds, meshes=self.meshes,
                    log_space_cells=self.stage.log_space_cells,
                    **{k: v for k, v in self.settings.items() if k != "threshold"}, **self.counters)
        if scheme_name(self.scheme) == "auto":
            info["switches"] = self.switches
        sign, reason = energy_direction(self.model, 2)
        general = self.stage.general
        if general is not None:
            info.update(field=general.info["summation"], degree=general.info["degree"],
                        tolerance=general.info["tolerance"], energy_reason=reason)
        en = None
        if self.energy:
            en = np.array([DyadicOperator(self.model, m, self.flux).energy(r) for m, r in self.out])
            info["remesh_energy"] = remesh_energy(self.jumps, sign)
        pinned = pinned_on_stretches(self.t_eval, meshes, rhos, lambda m: ring_adjacency(m.size), _points,
                                     lambda m: m.widths, self._field, lambda m: m.widths)
        info["pinned"] = sorted({float(m.angles[i]) for m, cells in pinned for i in cells})
        warn_pinned(info["pinned"], f"at angles {np.round(info['pinned'][:5], 4).tolist()}", self.flux)
        return padded_solution(self.t_eval, [_points(m) for m in meshes], [m.widths for m in meshes], rhos, en,
                               self.model, info, sign)

    def _field(self, mesh, rho):
        """The particle field (N, 2) at the centres: u times the unit tangent (-sin c, cos c)."""
        return DyadicOperator(self.model, mesh, "upwind").velocity(rho)[:, None] * _points(mesh)[:, ::-1] * [-1.0, 1.0]


def _points(mesh):
    """Cell centres (cos c_i, sin c_i)."""
    return np.column_stack([np.cos(mesh.angles), np.sin(mesh.angles)])
