"""Finite volumes for the continuity equation on the circle S^1 (Q^T K = I, V = ±I).

    ∂_t ρ + ∂_θ(ρ u) = 0,   u(θ) = ±(1/Z(θ)) ∫ e^{β cos(θ-θ')} sin(θ'-θ) ρ(θ') dθ',

Z = Φ(θ) = ∫ e^{β cos(θ-θ')} ρ(θ') dθ' (SA) or 1 (USA), sign - for V = -I; ρ is a density
against arc length with unit mass.  Equivalently u = ±(1/β) ∂_θ Φ (USA), ±(1/β) ∂_θ log Φ (SA).

Grid: N cells [ih, (i+1)h], h = 2π/N, centres θ_i = (i + 1/2) h, masses m_i = ρ_i h, M = Σ m_i.
The fields of the grid measure Σ_j m_j δ_{θ_j} are exact circulant convolutions, evaluated by
FFT with the kernels shifted by e^{-β} (so nothing overflows):

    Φ_i = e^β Φ~_i,  Φ~_i = M + β q_i,  q_i = Σ_j m_j expm1(β(cos(θ_i-θ_j) - 1))/β   (→ cos - 1 at β = 0),
    g_i = Σ_j m_j e^{β(cos(θ_i-θ_j) - 1)} sin(θ_j-θ_i),
    u_i = ±e^β g_i (USA),  ±g_i / Φ~_i (SA).

The FFT's absolute error is below 1.4 ε log2(N) M (measured); where Φ~_i < τ M,
τ = 4 ε log2(N) / 1e-10, the SA quantities of cell i are recomputed by direct log-sum-exp over the
sources (``_log_space_sums``: blocks of √N sources whose largest possible term is below e^{-40}
times a known term are skipped), so SA keeps relative accuracy 1e-10 where Φ is tiny, for any β.
That costs O(N) per such cell: it happens only for large β and mass concentrated far from the cell.

Semi-discrete scheme dρ_i/dt = -(F_{i+1/2} - F_{i-1/2})/h; one vocabulary of fluxes on S^1 and S^2:

- flux="upwind2" (default): second-order cell-centred upwind.  Minmod states ρ^E_i = ρ_i + σ_i/2,
  ρ^W_i = ρ_i - σ_i/2, σ_i = minmod(ρ_{i+1} - ρ_i, ρ_i - ρ_{i-1}), and face velocities extrapolated
  from the centre with the exact derivative of the discrete field, u^E_i = u_i + (h/2) u'_i,
  u^W_i = u_i - (h/2) u'_i (``_Operator.velocity_and_slope``), clipped to the speed bound:
  F_{i+1/2} = ρ^E_i (u^E_i)^+ + ρ^W_{i+1} (u^W_{i+1})^-.  Both face values are second order on
  smooth data, and the uniform density stays exactly at rest (u = u' = 0).  At a face of a cell that is part of a
  cluster narrower than about two cells (|ρ_{i+1} - 2ρ_i + ρ_{i-1}| > ``UNRESOLVED`` · max of the
  three) the flux is the first-order "upwind" one, whose pairwise forces cancel in the barycentre,
  so one-cell clusters travel at their particle speed.
- flux="upwind" (James–Vauchelet, Delarue–Lagoutière–Vauchelet): cell-centred velocity
  donor cell F_{i+1/2} = ρ_i u_i^+ + ρ_{i+1} u_{i+1}^-.  First order; a one-cell cluster moves
  with its own velocity, so near-Dirac clusters travel and merge correctly.
- flux="muscl" (Carrillo–Chertock–Huang): interface velocity u_{i+1/2} = (P_{i+1} - P_i)/h from
  the potential P = ±Φ/β (USA; here ±e^β q), ±log(Φ~/M)/β (SA; ±q/M at β = 0), and minmod
  reconstruction F_{i+1/2} = u^+ (ρ_i + σ_i/2) + u^- (ρ_{i+1} - σ_{i+1}/2).  Second order on smooth
  data; since dE_β/dt = (1/β) Σ_i (Φ_{i+1} - Φ_i) F_{i+1/2} ≥ 0 (F has the sign of P_{i+1} - P_i),
  the discrete energy is monotone (the upwind fluxes' energy can dip by O(βh²) when a cluster hops
  between cells); but a one-cell cluster is pinned unless the outside pull beats its own
  inward face velocity (≈ h/2 for SA).
- flux="tpfa": the same two-point potential-difference flux without reconstruction (σ = 0),
  first order, energy monotone, pins one-cell clusters.

SSP-RK3 in time.  Each forward-Euler stage keeps ρ ≥ 0 when dt · sup|u| ≤ CFL · h with
CFL = 1 (upwind, tpfa), 1/2 (upwind2, muscl) and sup|u| = ``theory.speed_bound(model)`` (1 for SA); that is
the default step and larger ones are refused.  Mass is conserved to round-off (each flux leaves
one cell and enters its neighbour).
"""
from . import _numba_env  # noqa: F401

import math

import numpy as np
import scipy.fft
from numba import njit, prange

from meanfield.budget import BUDGET, as_budget, check_fixed_steps
from meanfield.checks import as_beta, as_choice, as_count, as_density, as_float_array, as_positive, as_time_grid
from meanfield.geometry import circle_points
from meanfield.models import SA, MultiHead, as_model
from meanfield.theory import speed_bound

from .results import DensitySolution
from .diffusion import as_diffusion, circle_laplacian, circle_rate, combined_step
from .stepping import Checkpoint, integrate

__all__ = ["solve", "time_derivative", "velocity", "energy", "max_step", "cell_angles"]

FLUXES = ("upwind2", "upwind", "muscl", "tpfa")
DEFAULT_FLUX = "upwind2"
CFL = {"upwind2": 0.5, "upwind": 1.0, "muscl": 0.5, "tpfa": 1.0}
DEFAULT_CELLS = 512
MIN_CELLS = 8
UNRESOLVED = 0.5      # upwind2 falls back to the first-order upwind flux at faces of such cells
RTOL = 1e-10          # relative accuracy kept for SA where Φ is tiny
FFT_ERROR = 4.0       # |FFT convolution error| <= FFT_ERROR ε log2(N) M (measured: below 1.4)
CUTOFF = 40.0         # direct sums drop terms below e^{-40} times the largest (N e^{-40} < 1e-12)
PARALLEL_WORK = 1 << 22   # direct sums run multi-threaded above this many terms
SEPARATE_ROWS = 8192      # from this many cells, inverse FFTs run one row at a time (faster)
MAX_USA_BETA = float(np.log(np.finfo(float).max))    # e^β overflows beyond 709.78


@njit(cache=True)
def _upwind_divergence(rho, u, inv_h, out):
    """out_i = -(F_{i+1/2} - F_{i-1/2})/h, F_{i+1/2} = ρ_i u_i^+ + ρ_{i+1} u_{i+1}^- (periodic)."""
    n = rho.shape[0]
    f_left = rho[n - 1] * max(u[n - 1], 0.0) + rho[0] * min(u[0], 0.0)
    for i in range(n):
        j = i + 1 if i + 1 < n else 0
        f_right = rho[i] * max(u[i], 0.0) + rho[j] * min(u[j], 0.0)
        out[i] = (f_left - f_right) * inv_h
        f_left = f_right


@njit(cache=True, inline="always")
def _minmod(a, b):
    if a * b <= 0.0:
        return 0.0
    return a if abs(a) < abs(b) else b


@njit(cache=True)
def _muscl_divergence(rho, pot, inv_h, limited, out):
    """out_i = -(F_{i+1/2} - F_{i-1/2})/h with u_{i+1/2} = (P_{i+1} - P_i)/h and minmod states
    ρ^E_i = ρ_i + σ_i/2 (left of the face), ρ^W_{i+1} = ρ_{i+1} - σ_{i+1}/2 (right); σ = 0 unless
    ``limited`` (the first-order two-point flux)."""
    n = rho.shape[0]
    half_slope = np.zeros(n)
    for i in range(n):
        left = rho[i] - rho[i - 1]          # rho[-1] is the last cell: periodic
        right = rho[i + 1 if i + 1 < n else 0] - rho[i]
        if limited:
            half_slope[i] = 0.5 * _minmod(left, right)
    fluxes = np.empty(n)
    for i in range(n):
        j = i + 1 if i + 1 < n else 0
        uf = (pot[j] - pot[i]) * inv_h
        fluxes[i] = max(uf, 0.0) * (rho[i] + half_slope[i]) + min(uf, 0.0) * (rho[j] - half_slope[j])
    for i in range(n):
        out[i] = (fluxes[i - 1] - fluxes[i]) * inv_h


@njit(cache=True, inline="always")
def _unresolved(rho, i):
    """Cell i is part of a cluster narrower than about two cells: |ρ_{i+1} - 2ρ_i + ρ_{i-1}| exceeds
    ``UNRESOLVED`` times the largest of the three (a smooth profile of width w cells has ≈ 1/w²)."""
    n = rho.shape[0]
    a = rho[i - 1]
    c = rho[i + 1 if i + 1 < n else 0]
    return abs(a - 2.0 * rho[i] + c) > UNRESOLVED * max(a, rho[i], c)


@njit(cache=True)
def _upwind2_divergence(rho, u, slope, bound, h, out):
    """out_i = -(F_{i+1/2} - F_{i-1/2})/h with minmod states ρ^E_i = ρ_i + σ_i/2, ρ^W_i = ρ_i - σ_i/2
    and face velocities extrapolated from the cell centres along the field of the other cells,
    u^E_i = u_i + (h/2) u'_i, u^W_i = u_i - (h/2) u'_i (clipped to [-bound, bound]):
    F_{i+1/2} = ρ^E_i (u^E_i)^+ + ρ^W_{i+1} (u^W_{i+1})^-."""
    n = rho.shape[0]
    half = np.empty(n)
    east = np.empty(n)
    west = np.empty(n)
    for i in range(n):
        half[i] = 0.5 * _minmod(rho[i] - rho[i - 1], rho[i + 1 if i + 1 < n else 0] - rho[i])
        du = 0.5 * h * slope[i]
        east[i] = max(min(u[i] + du, bound), -bound)
        west[i] = max(min(u[i] - du, bound), -bound)
    inv_h = 1.0 / h
    fluxes = np.empty(n)
    for i in range(n):
        j = i + 1 if i + 1 < n else 0
        if _unresolved(rho, i) or _unresolved(rho, j):   # a cluster one or two cells wide: DLV
            fluxes[i] = rho[i] * max(u[i], 0.0) + rho[j] * min(u[j], 0.0)
        else:
            fluxes[i] = (rho[i] + half[i]) * max(east[i], 0.0) + (rho[j] - half[j]) * min(west[j], 0.0)
    for i in range(n):
        out[i] = (fluxes[i - 1] - fluxes[i]) * inv_h


@njit(cache=True)
def _softmax_velocity(g, q, mass, beta, floor, phi, u):
    """Φ~_i = M + β q_i and u_i = g_i / Φ~_i; returns how many cells have Φ~_i < floor."""
    tiny = 0
    for i in range(g.shape[0]):
        phi[i] = mass + beta * q[i]
        u[i] = g[i] / phi[i] if phi[i] >= floor else 0.0
        tiny += phi[i] < floor
    return tiny


@njit(cache=True)
def _log_potential(q, mass, beta, sign, floor, phi, pot):
    """Φ~_i = M + β q_i and P_i = ±log(Φ~_i/M)/β = ±log1p(β q_i/M)/β (±q_i/M at β = 0);
    returns how many cells have Φ~_i < floor."""
    tiny = 0
    for i in range(q.shape[0]):
        phi[i] = mass + beta * q[i]
        if phi[i] < floor:
            tiny += 1
            pot[i] = 0.0
        elif beta == 0.0:
            pot[i] = sign * q[i] / mass
        else:
            pot[i] = sign * math.log1p(beta * q[i] / mass) / beta
    return tiny


@njit(cache=True, inline="always")
def _ring_distance(i, j, n):
    d = abs(i - j)
    return min(d, n - d)


def _log_space_sums(log_m, block_max, block_arg, width, cos_tab, sin_tab, beta, targets, log_phi, vel):
    """Direct log-sum-exp at the target cells i: log Φ~_i = log Σ_j m_j e^{β(cos(θ_i-θ_j)-1)} and
    the softmax velocity Σ_j w_ij sin(θ_j-θ_i), w_ij ∝ m_j e^{β cos(θ_i-θ_j)} (tables by offset i-j).

    The sources come in blocks of ``width`` cells with their largest log m_j (at block_arg).
    The block maxima's terms give a lower bound ``low`` on the largest term; a block whose
    bound max log m + β(cos(distance to i) - 1) is below low - CUTOFF is skipped, the others
    are summed with a running maximum, dropping terms below e^{-CUTOFF} times it.
    """
    n = log_m.shape[0]
    for k in prange(targets.shape[0]):
        i = targets[k]
        low = -np.inf
        for b in range(block_max.shape[0]):
            j = block_arg[b]
            low = max(low, log_m[j] + beta * (cos_tab[i - j] - 1.0))   # a negative i - j wraps around
        top = -np.inf
        z = 0.0
        g = 0.0
        for b in range(block_max.shape[0]):
            first = b * width
            last = min(first + width, n) - 1
            near = 0
            if i < first or i > last:
                near = min(_ring_distance(i, first, n), _ring_distance(i, last, n))
            if block_max[b] + beta * (cos_tab[near] - 1.0) < low - CUTOFF:
                continue
            for j in range(first, last + 1):
                s = log_m[j] + beta * (cos_tab[i - j] - 1.0)
                if s > top - CUTOFF:
                    if s > top:
                        scale = math.exp(top - s)
                        z *= scale
                        g *= scale
                        top = s
                    e = math.exp(s - top)
                    z += e
                    g -= e * sin_tab[i - j]
        log_phi[k] = top + math.log(z)
        vel[k] = g / z


@njit(cache=True)
def _block_maxima(log_m, width, block_max, block_arg):
    """Largest log m_j of each block of ``width`` consecutive cells, and where it is."""
    n = log_m.shape[0]
    for b in range(block_max.shape[0]):
        best = b * width
        for j in range(b * width, min((b + 1) * width, n)):
            if log_m[j] > log_m[best]:
                best = j
        block_max[b] = log_m[best]
        block_arg[b] = best


_log_space_serial = njit(cache=True)(_log_space_sums)
_log_space_parallel = njit(parallel=True, cache=True)(_log_space_sums)


def cell_angles(cells=DEFAULT_CELLS):
    """Cell centres θ_i = (i + 1/2) 2π/N, i = 0..N-1."""
    cells = _check_cells(cells)
    return (np.arange(cells) + 0.5) * (2 * np.pi / cells)


def _divergence(op, rho):
    """dρ/dt = -(F_{i+1/2} - F_{i-1/2})/h for the flux ``op.flux``, from the centre velocities and
    slopes (upwind2), velocities (upwind) or potential (muscl, tpfa) that ``op`` evaluates."""
    out = np.empty(op.cells)
    if op.flux == "upwind2":
        _upwind2_divergence(rho, *op.velocity_and_slope(rho), op.h, out)
    elif op.flux == "upwind":
        _upwind_divergence(rho, op.velocity(rho), 1.0 / op.h, out)
    else:
        _muscl_divergence(rho, op.potential(rho), 1.0 / op.h, op.flux == "muscl", out)
    return out


class _Operator:
    """The semi-discrete right-hand side for one model, grid and flux, with its kernel spectra."""

    def __init__(self, model, cells, flux):
        self.model, self.cells, self.flux = model, cells, flux
        self.h = 2 * np.pi / cells
        beta = model.beta
        offsets = np.arange(cells)
        offsets = np.where(offsets <= cells // 2, offsets, offsets - cells) * self.h
        self.cos, self.sin = np.cos(offsets), np.sin(offsets)   # exactly even / odd tables
        shift = beta * (self.cos - 1.0)
        q_kernel = np.expm1(shift) / beta if beta > 0 else self.cos - 1.0
        self.q_hat = scipy.fft.rfft(q_kernel) * self.h
        scale = model.sign * (1.0 if model.normalised else np.exp(beta))
        g_hat = scale * self.h * scipy.fft.rfft(-np.exp(shift) * self.sin)
        # G' kernel e^{β(cos δ - 1)} (β sin²δ - cos δ): the θ-derivative of the G kernel
        dg_hat = scale * self.h * scipy.fft.rfft(np.exp(shift) * (beta * self.sin ** 2 - self.cos))
        # the convolutions each flux needs, stacked for one batched inverse FFT
        self.centre_spectra = np.array([g_hat, self.q_hat] if model.normalised else [g_hat])
        self.slope_spectra = np.array([g_hat, self.q_hat, dg_hat] if model.normalised else [g_hat, dg_hat])
        self.face_spectra = np.array([self.q_hat if model.normalised else scale * self.q_hat])
        self.bound = speed_bound(model)
        self.tau = FFT_ERROR * np.finfo(float).eps * np.log2(cells) / RTOL
        self.width = max(8, int(np.sqrt(cells)))      # source blocks of the direct sums
        self.log_space_cells = 0

    def _convolve(self, rho, spectra):
        """Circulant convolutions of the masses ρ h with the kernels (one per row of ``spectra``);
        also M = Σ ρ_i h.  pocketfft's batched transform is slower than separate ones for long rows."""
        r = scipy.fft.rfft(rho)
        mass = r[0].real * self.h
        if spectra.ndim == 2 and self.cells >= SEPARATE_ROWS:
            return [scipy.fft.irfft(r * s, n=self.cells) for s in spectra], mass
        return scipy.fft.irfft(r * spectra, n=self.cells), mass

    def _log_space(self, rho, bad):
        """Direct log Φ~ and SA velocity (sign applied) at the cells ``bad``."""
        self.log_space_cells = max(self.log_space_cells, bad.size)
        with np.errstate(divide="ignore"):
            log_m = np.log(rho * self.h)
        nblocks = -(-self.cells // self.width)
        block_max, block_arg = np.empty(nblocks), np.empty(nblocks, dtype=np.int64)
        _block_maxima(log_m, self.width, block_max, block_arg)
        log_phi, vel = np.empty(bad.size), np.empty(bad.size)
        kernel = _log_space_parallel if bad.size * self.cells > PARALLEL_WORK else _log_space_serial
        kernel(log_m, block_max, block_arg, self.width, self.cos, self.sin, self.model.beta, bad, log_phi, vel)
        return log_phi, self.model.sign * vel

    def velocity(self, rho):
        """u_i at the cell centres (the upwind flux's velocity)."""
        fields, mass = self._convolve(rho, self.centre_spectra)
        if not self.model.normalised:
            return fields[0]
        phi, u = np.empty(self.cells), np.empty(self.cells)
        floor = self.tau * mass
        if _softmax_velocity(fields[0], fields[1], mass, self.model.beta, floor, phi, u):
            bad = np.flatnonzero(phi < floor)
            u[bad] = self._log_space(rho, bad)[1]
        return u

    def velocity_and_slope(self, rho):
        """(u_i, u'_i, bound): the centre velocities, their θ-derivatives (the derivative of the
        grid measure's field, its own cell included) and the speed bound.

        USA: u' = ±e^β G'_i.  SA: u = ±G/Φ~, u' = ±G'_i/Φ~_i - ±β u_i² (Φ~' = β G); where Φ~ is
        below the FFT's accuracy (SA, large β) u comes from log space and u' = 0 there."""
        fields, mass = self._convolve(rho, self.slope_spectra)
        if not self.model.normalised:
            return fields[0], fields[1], self.bound * mass
        phi, u = np.empty(self.cells), np.empty(self.cells)
        floor = self.tau * mass
        tiny = _softmax_velocity(fields[0], fields[1], mass, self.model.beta, floor, phi, u)
        slope = fields[2] / np.maximum(phi, floor) - (self.model.sign * self.model.beta) * u * u
        if tiny:
            bad = np.flatnonzero(phi < floor)
            u[bad] = self._log_space(rho, bad)[1]
            slope[bad] = 0.0
        return u, slope, self.bound

    def potential(self, rho):
        """P_i with u_{i+1/2} = (P_{i+1} - P_i)/h (the MUSCL flux's potential)."""
        fields, mass = self._convolve(rho, self.face_spectra)
        if not self.model.normalised:
            return fields[0]
        beta, sign = self.model.beta, self.model.sign
        phi, pot = np.empty(self.cells), np.empty(self.cells)
        floor = self.tau * mass
        if _log_potential(fields[0], mass, beta, sign, floor, phi, pot):
            bad = np.flatnonzero(phi < floor)
            pot[bad] = (sign / beta) * (self._log_space(rho, bad)[0] - np.log(mass))
        return pot

    def __call__(self, rho):
        return _divergence(self, rho)

    def energy(self, rho):
        """E_β = (1/2β) Σ_ij m_i m_j e^{β cos(θ_i-θ_j)} = e^β (M² + β Σ_i m_i q_i)/(2β);
        at β = 0 the limit (1/2)|Σ_i m_i x_i|² = (1/2)(M² + Σ_i m_i q_i)."""
        q, mass = self._convolve(rho, self.q_hat)
        beta = self.model.beta
        mq = self.h * float(rho @ q)
        if beta == 0:
            return 0.5 * (mass * mass + mq)
        return float(np.exp(beta + np.log(mass * mass + beta * mq)) / (2 * beta))


class _HeadSum:
    """The right-hand side of a MultiHead model whose heads are all isotropic: the velocity is
    the sum of the heads' fields, u = Σ_h u_h (and u' = Σ_h u'_h, the bound Σ_h bound_h, the
    potential P = Σ_h P_h, since u_{i+1/2} = (P_{i+1} - P_i)/h is linear in P)."""

    def __init__(self, model, cells, flux):
        self.model, self.cells, self.flux = model, cells, flux
        self.h = 2 * np.pi / cells
        self.heads = [_Operator(head, cells, flux) for head in model.heads]

    @property
    def log_space_cells(self):
        return max(op.log_space_cells for op in self.heads)

    def velocity(self, rho):
        return sum(op.velocity(rho) for op in self.heads)

    def velocity_and_slope(self, rho):
        parts = [op.velocity_and_slope(rho) for op in self.heads]
        return tuple(sum(p[k] for p in parts) for k in range(3))

    def potential(self, rho):
        return sum(op.potential(rho) for op in self.heads)

    def __call__(self, rho):
        return _divergence(self, rho)

    def energy(self, rho):
        """Σ_h ±E_{β_h} where every head is USA (the field is then its Wasserstein gradient);
        NaN otherwise (SA heads: no common gradient structure)."""
        if any(h.normalised for h in self.model.heads):
            return np.nan
        return sum(h.sign * op.energy(rho) for h, op in zip(self.model.heads, self.heads))


def _operator(model, cells, flux):
    return (_HeadSum if isinstance(model, MultiHead) else _Operator)(model, cells, flux)


def isotropic_model(model, solver="circle", why="", multihead=False, max_beta=np.inf, limit=""):
    """``model`` checked for the density solvers: SA or USA with Q^T K = I and V = ±I (``why``
    says why the ``solver`` needs it), USA weights e^β within double precision and β <= ``max_beta``
    (the largest the ``solver`` represents, ``limit`` says why); where ``multihead``, also a
    MultiHead all of whose heads are such (and no feed-forward term)."""
    model = as_model(model, multihead=multihead)
    if not model.is_isotropic:
        raise ValueError(f"the {solver} solver treats Q^T K = I and V = ±I{why}"
                         f"{' for every head, without feed-forward term' if multihead else ''}; got {model!r} "
                         f"(use particles.solve for general Q, K, V)")
    for head in getattr(model, "heads", (model,)):
        if not head.normalised and head.beta > MAX_USA_BETA:
            raise ValueError(f"USA velocities reach e^beta, which overflows double precision for beta > "
                             f"{MAX_USA_BETA:.2f}; got beta = {head.beta:g} (use SA, or rescale time)")
        if head.beta > max_beta:
            raise ValueError(f"beta = {head.beta:g} is beyond what the {solver} solver represents: it needs "
                             f"beta <= {max_beta:.6g}{limit}")
    return model


def _check_cells(cells):
    cells = as_count(cells, "cells")
    if cells < MIN_CELLS:
        raise ValueError(f"cells must be >= {MIN_CELLS} (the MUSCL stencil and a meaningful grid need "
                         f"at least {MIN_CELLS} cells); got {cells}")
    return cells


def _cell_density(rho, name="rho"):
    rho = as_density(rho, name)
    _check_cells(rho.size)
    return rho


def _initial_density(rho0, cells):
    """rho0 (callable of points or array of cell values) on the grid, normalised to unit mass."""
    if callable(rho0):
        cells = _check_cells(DEFAULT_CELLS if cells is None else cells)
        points = circle_points(cell_angles(cells))
        values = as_float_array(rho0(points), "rho0(points)")
        if values.shape != (cells,):
            raise ValueError(f"rho0(points) must return one density per cell centre, shape ({cells},); got "
                             f"{values.shape}. rho0 is called with the points (cos θ, sin θ), shape ({cells}, 2); "
                             f"for a function f of the angle pass lambda x: f(meanfield.circle_angles(x))")
        rho = as_density(values, "rho0(points)")
    else:
        rho = _cell_density(rho0, "rho0")
        if cells is not None and _check_cells(cells) != rho.size:
            raise ValueError(f"rho0 has {rho.size} cell values but cells = {cells}; leave cells=None (the array "
                             f"sets the grid) or pass a callable of points")
    return rho / (rho.sum() * (2 * np.pi / rho.size))


def max_step(model, cells=DEFAULT_CELLS, flux=DEFAULT_FLUX):
    """The positivity bound CFL · h / speed_bound(model) on the SSP-RK3 step (unit mass):
    CFL = 1 for the first-order fluxes (upwind, tpfa), 1/2 for the reconstructed ones (upwind2,
    muscl: a face value is at most twice the cell's); h = 2π/cells.  For a MultiHead model the
    speed bound is the sum of the heads' bounds."""
    model = isotropic_model(model, multihead=True)
    cells = _check_cells(cells)
    as_choice(flux, "flux", FLUXES)
    return float(CFL[flux] * (2 * np.pi / cells) / speed_bound(model))


def velocity(model, rho):
    """Angular velocity u_i = X[μ](θ_i)·e_θ at the cell centres of the grid measure Σ_j ρ_j h δ_{θ_j}
    (rho: cell densities, not renormalised); relative accuracy 1e-10 for SA even where Φ is tiny.
    MultiHead (isotropic heads): the sum of the heads' velocities."""
    model = isotropic_model(model, multihead=True)
    rho = _cell_density(rho)
    return _operator(model, rho.size, "upwind").velocity(rho)


def time_derivative(model, rho, flux=DEFAULT_FLUX):
    """dρ/dt of the semi-discrete scheme for cell densities ``rho`` (N,)."""
    model = isotropic_model(model, multihead=True)
    as_choice(flux, "flux", FLUXES)
    rho = _cell_density(rho)
    return _operator(model, rho.size, flux)(rho)


def energy(rho, beta):
    """E_β of the grid measure Σ_i ρ_i h δ_{θ_i} (equal to ``meanfield.energy`` of the cell centres
    with weights ρ_i h), by one FFT convolution; at β = 0 the limit (1/2)|Σ_i ρ_i h x_i|²."""
    rho = _cell_density(rho)
    return _Operator(SA(as_beta(beta)), rho.size, "upwind").energy(rho)


def solve(model, rho0, t_eval, cells=None, flux=DEFAULT_FLUX, *, dt=None, progress=None, checkpoint=None,
          checkpoint_every=100, resume=False, diffusion=0.0, budget=BUDGET):
    """Solve the continuity equation on S^1 by finite volumes + SSP-RK3; return a DensitySolution.

    model: SA or USA with Q^T K = I, V = ±I, any β >= 0, or a MultiHead of such heads (the
    velocity is the sum of the heads'; .energy is Σ_h ±E_{β_h} when every head is USA, else NaN).
    rho0: a callable of points (N, 2) ->
    densities (evaluated at the cell centres (cos θ_i, sin θ_i); for a function f of the angle
    pass ``lambda x: f(meanfield.circle_angles(x))``) or an array of cell densities; it is
    normalised to unit mass (μ_0 is a probability measure).  cells: number of cells (default
    512 for a callable; an array sets it).  flux: "upwind2" (default), "upwind", "muscl" or "tpfa"
    (see the module docstring).  dt: the step, at most and by default ``max_step(model, cells, flux)`` (larger
    steps break positivity and are refused).  ``checkpoint`` (a path) saves the state every
    ``checkpoint_every`` steps; ``resume=True`` continues an existing checkpoint bit for bit.
    diffusion: D >= 0 adds D ∂²ρ/∂θ² (``meanfield.solvers.diffusion``; the law of particles with
    noise σ = sqrt(2D)), and the step bound becomes 1/(1/max_step + 2D/h²).
    budget: seconds (default one hour; None: no limit): a run whose step count times the measured
    cost of a step exceeds it is refused before it starts (``meanfield.budget``).

    The solution's .points are the cell centres (N, 2), .areas = h = 2π/N, .rho (m, N), .mass (m,)
    = Σ_i ρ_i h, .energy (m,) the discrete E_β; .info holds flux, dt, max_dt, cells, the step
    counts and log_space_cells (most SA cells evaluated directly in one evaluation).
    """
    model = isotropic_model(model, multihead=True)
    t_eval = as_time_grid(t_eval)
    as_choice(flux, "flux", FLUXES)
    rho = _initial_density(rho0, cells)
    cells = rho.size
    diffusion = as_diffusion(diffusion)
    bound = combined_step(max_step(model, cells, flux), diffusion, circle_rate(cells))
    if dt is None:
        dt = bound
    elif as_positive(dt, "dt") > bound:
        raise ValueError(f"dt = {dt:g} exceeds the positivity bound {bound:.6g} for {model!r} with {cells} cells "
                         f"and the {flux} flux; use dt <= {bound:.6g} (or leave dt=None)")
    op = _operator(model, cells, flux)
    h = 2 * np.pi / cells
    rhs = op if diffusion == 0 else (lambda r: op(r) + diffusion * circle_laplacian(r, h))
    check_fixed_steps(as_budget(budget), t_eval, dt, lambda: rhs(rho), 3,
                      f"this solve of {model!r} on {cells} cells to t = {t_eval[-1]:g}")
    meta = dict(solver="circle", model=model.to_dict(), flux=flux, dt=dt, cells=cells, diffusion=diffusion)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta)
    rhos, info = integrate(rhs, rho, t_eval, scheme="ssprk3", dt=dt, checkpoint=ckpt, resume=resume,
                           progress=progress)
    info.update(flux=flux, dt=dt, max_dt=bound, cells=cells, log_space_cells=op.log_space_cells,
                diffusion=diffusion)
    return DensitySolution(t=t_eval, points=circle_points(cell_angles(cells)), areas=np.full(cells, h), rho=rhos,
                           mass=rhos.sum(axis=1) * h, energy=np.array([op.energy(r) for r in rhos]), model=model,
                           info=info)
