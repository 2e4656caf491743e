r"""Finite volumes for the continuity equation on the circle S^1 (any Q, K, V; formulas for Q^T K = I, V = ±I).

General Q, K, V (2 × 2): the cell velocities are the particles' field of the cell measure
(``full_model.CellField``, docs/full_model.md) with the same fluxes; Q^T K = c I, V = ±I runs as the
isotropic model at β' = cβ (``density_model``).  Below, the isotropic case.

.. math::

    \partial_t \rho + \partial_\theta(\rho u) = 0, \qquad
    u(\theta) = \pm \frac{1}{Z(\theta)} \int e^{\beta \cos(\theta - \theta')} \sin(\theta' - \theta)
    \rho(\theta') \, d\theta',

Z = Φ(θ) = ∫ e^{β cos(θ-θ')} ρ(θ') dθ' (SA) or 1 (USA), sign - for V = -I; ρ is a density
against arc length with unit mass.  Equivalently u = ±(1/β) ∂_θ Φ (USA), ±(1/β) ∂_θ log Φ (SA).

Grid: N cells [ih, (i+1)h], h = 2π/N, centres θ_i = (i + 1/2) h, masses m_i = ρ_i h, M = Σ m_i.
The fields of the grid measure Σ_j m_j δ_{θ_j} are exact circulant convolutions of the kernels shifted
by e^{-β} (so nothing overflows), evaluated by FFT (summation="direct", the reference path) or by the
Fourier sum truncated where e^{-β} I_k(β) falls below round-off (summation="fast",
``kernels.circle``: K = 22 modes at β = 3, 66 at β = 50) in one fused Numba pass per stage:

    Φ_i = e^β Φ~_i,  Φ~_i = M + β q_i,  q_i = Σ_j m_j expm1(β(cos(θ_i-θ_j) - 1))/β   (→ cos - 1 at β = 0),
    g_i = Σ_j m_j e^{β(cos(θ_i-θ_j) - 1)} sin(θ_j-θ_i),
    u_i = ±e^β g_i (USA),  ±g_i / Φ~_i (SA).

The FFT's absolute error is below 1.4 ε log2(N) M (measured; the truncation adds at most 1e-16 M); where Φ~_i < τ M,
τ = 4 ε log2(N) / 1e-10, the SA quantities of cell i are recomputed by direct log-sum-exp over the
sources (``_log_space_sums``: blocks of √N sources whose largest possible term is below e^{-40}
times a known term are skipped), so SA keeps relative accuracy 1e-10 where Φ is tiny, for any β.
That costs O(N) per such cell: it happens only for large β and mass concentrated far from the cell.

Semi-discrete scheme dρ_i/dt = -(F_{i+1/2} - F_{i-1/2})/h; one vocabulary of fluxes on S^1 and S^2:

- flux="upwind2" (default): second-order cell-centred upwind.  Minmod states ρ^E_i = ρ_i + σ_i/2,
  ρ^W_i = ρ_i - σ_i/2, σ_i = minmod(ρ_{i+1} - ρ_i, ρ_i - ρ_{i-1}), and face velocities extrapolated
  from the centre with the exact derivative of the discrete field, u^E_i = u_i + (h/2) u'_i,
  u^W_i = u_i - (h/2) u'_i (``CircleOperator.centre``), clipped to the speed bound:
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

SSP-RK3 in time.  A forward-Euler stage keeps ρ ≥ 0 when dt · rate ≤ 1, rate = max_i out_i/(h ρ_i) the
actual outflow of the state (``kernels.circle.flux_pass``); by default every step is chosen from it,
h_k = min(max_dt, 0.9/rate), every later stage checked, output times hit exactly (``stepping.integrate``
with ``positivity=True``).  A given dt runs fixed steps, refused above the global bound
dt · sup|u| ≤ CFL · h with CFL = 1 (upwind, tpfa), 1/2 (upwind2, muscl) and sup|u| =
``theory.speed_bound(model)`` (1 for SA), which the rate never exceeds.  Mass is conserved to round-off
(each flux leaves one cell and enters its neighbour).
"""
from __future__ import annotations

from . import _numba_env  # noqa: F401

from collections.abc import Callable
from os import PathLike

from numpy.typing import ArrayLike

import math

import numpy as np
import scipy.fft
import scipy.sparse
from numba import njit, prange

from meanfield.budget import BUDGET
from meanfield.checks import as_beta, as_choice, as_count, as_density, as_float_array, as_positive, as_time_grid
from meanfield.checks import unit_mass
from meanfield.geometry import circle_points
from meanfield.models import SA, USA, MultiHead, as_model
from meanfield.theory import speed_bound

from .full_model import CellField, isotropic_equivalent
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME, Operator, scheme_name, upwind_matrix, with_scheme
from .results import DensitySolution
from .kernels import circle as kernels
from .diffusion import as_diffusion, circle_rate, combined_step
from .energy_report import detector_times, energy_dips, pinned_on_fixed_mesh, ring_adjacency, warn_pinned
from . import stepping, threads
from .stepping import TIME_STEP, Checkpoint, integrate, positivity_step, takes_operator, with_tolerances

__all__ = ["solve", "CircleOperator", "time_derivative", "velocity", "energy", "max_step", "step_cap",
           "cell_angles", "resolve_summation", "check_cells", "initial_density", "density_model"]

FLUXES = ("upwind2", "upwind", "muscl", "tpfa")
DEFAULT_FLUX = "upwind2"
CFL = {"upwind2": 0.5, "upwind": 1.0, "muscl": 0.5, "tpfa": 1.0}
DEFAULT_CELLS = 512
MIN_CELLS = 8
SUMMATIONS = ("auto", "fast", "direct")
FOURIER_WORK = 1 << 18    # "auto" sums the field as a truncated Fourier series up to this many cells × modes
RTOL = 1e-10          # relative accuracy kept for SA where Φ is tiny
FFT_ERROR = 4.0       # |FFT convolution error| <= FFT_ERROR ε log2(N) M (measured: below 1.4)
CUTOFF = 40.0         # direct sums drop terms below e^{-40} times the largest (N e^{-40} < 1e-12)
PARALLEL_WORK = 1 << 22   # direct sums run multi-threaded above this many terms
SEPARATE_ROWS = 8192      # from this many cells, inverse FFTs run one row at a time (faster)
MAX_USA_BETA = float(np.log(np.finfo(float).max))    # e^β overflows beyond 709.78


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
    r"""Cell centres of the uniform grid of the circle.

    .. math::

        \theta_i = \left(i + \tfrac12\right) \frac{2\pi}{N}, \qquad i = 0, \dots, N - 1.

    Parameters
    ----------
    cells : int
        N (default 512).

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import circle
    >>> bool(np.allclose(circle.cell_angles(8), np.pi / 8 * np.arange(1, 16, 2)))
    True
    """
    cells = check_cells(cells)
    return (np.arange(cells) + 0.5) * (2 * np.pi / cells)


class _Head:
    """The centre velocities, slopes and potential of one head on one grid, with its kernel spectra.

    summation "direct": the circulant sums by FFT (exact to round-off); "fast": the truncated Fourier
    sum (``kernels.circle``) over the ``degree`` modes the kernel needs."""

    def __init__(self, model, cells, flux, summation="direct"):
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
        # the convolutions each flux needs (``kernels.circle.centre_velocities`` reads them in this order)
        if flux == "upwind2":
            spectra = [g_hat, self.q_hat, dg_hat] if model.normalised else [g_hat, dg_hat]
        elif flux == "upwind":
            spectra = [g_hat, self.q_hat] if model.normalised else [g_hat]
        else:
            spectra = [self.q_hat if model.normalised else scale * self.q_hat]
        self.spectra = np.array(spectra)
        self.bound = speed_bound(model)
        self.tau = FFT_ERROR * np.finfo(float).eps * np.log2(cells) / RTOL
        self.width = max(8, int(np.sqrt(cells)))      # source blocks of the direct sums
        self.log_space_cells = 0
        self.summation = summation
        self.degree = kernels.degree(beta, cells) if summation == "fast" else cells // 2
        if summation == "fast":
            self.tables = kernels.fourier_tables(cells, self.degree)
            k1 = self.degree + 1
            self.fourier_spectra = np.stack([self.spectra[:, :k1].real, self.spectra[:, :k1].imag], axis=-1)
            self._fold, self._small = np.empty((2, cells)), np.empty((4, k1))

    def fields(self, rho):
        """The convolutions of ρ h with the flux's kernels, (F, N), and the mass M = Σ ρ_i h."""
        if self.summation == "fast":
            out = np.empty((self.spectra.shape[0], self.cells))
            kernels.fourier_fields(rho, self.fourier_spectra, *self.tables, self._fold, self._small, out)
            return out, float(np.sum(rho)) * self.h
        r = scipy.fft.rfft(rho)
        mass = r[0].real * self.h
        if self.cells >= SEPARATE_ROWS:    # pocketfft's batched transform is slower for long rows
            return np.array([scipy.fft.irfft(r * s, n=self.cells) for s in self.spectra]), mass
        return scipy.fft.irfft(r * self.spectra, n=self.cells), mass

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

    def centre(self, rho, centre=None):
        """Add this head's (u, u', P) at the cell centres to ``centre`` (3, N) (a new zero array if None);
        return (centre, this head's speed bound).

        upwind2: u and u' = du/dθ (the derivative of the grid measure's field, its own cell included);
        USA u = ±e^β G, u' = ±e^β G'; SA u = ±G/Φ~, u' = ±G'/Φ~ - ±β u² (Φ~' = β G).  upwind: u.  muscl,
        tpfa: the potential P with u_{i+1/2} = (P_{i+1} - P_i)/h.  Where SA's Φ~ is below the FFT's
        accuracy, u (or P) comes from log space and u' = 0 there."""
        model = self.model
        fields, mass = self.fields(rho)
        mine = np.zeros((3, self.cells))
        code = kernels.FLUX_CODES[self.flux]
        floor = self.tau * mass
        if kernels.centre_velocities(fields, mass, model.beta, float(model.sign), model.normalised, code, floor,
                                     False, mine[0], mine[1], mine[2]):
            bad = np.flatnonzero(mass + model.beta * fields[0 if code >= 2 else 1] < floor)
            log_phi, vel = self._log_space(rho, bad)
            if code >= 2:
                mine[2, bad] = (model.sign / model.beta) * (log_phi - np.log(mass))
            else:
                mine[0, bad] = vel
        centre = mine if centre is None else centre + mine
        return centre, self.bound * (1.0 if model.normalised else mass)

    def velocity(self, rho):
        """u_i at the cell centres."""
        return self.centre(rho)[0][0]

    def potential(self, rho):
        """P_i with u_{i+1/2} = (P_{i+1} - P_i)/h (the MUSCL flux's potential)."""
        return self.centre(rho)[0][2]

    def energy(self, rho):
        """E_β = (1/2β) Σ_ij m_i m_j e^{β cos(θ_i-θ_j)} = e^β (M² + β Σ_i m_i q_i)/(2β);
        at β = 0 the limit (1/2)|Σ_i m_i x_i|² = (1/2)(M² + Σ_i m_i q_i)."""
        r = scipy.fft.rfft(rho)
        mass = r[0].real * self.h
        q = scipy.fft.irfft(r * self.q_hat, n=self.cells)
        beta = self.model.beta
        mq = self.h * float(rho @ q)
        if beta == 0:
            return 0.5 * (mass * mass + mq)
        return float(np.exp(beta + np.log(mass * mass + beta * mq)) / (2 * beta))


class CircleOperator(Operator):
    r"""The semi-discrete finite-volume system of ``solve`` on the uniform grid of the circle.

    .. math::

        \frac{d\rho_i}{dt} = -\frac{F_{i+1/2} - F_{i-1/2}}{h} + D\,\frac{\rho_{i+1} - 2\rho_i + \rho_{i-1}}{h^2}

    for a model (one head, or a MultiHead of isotropic heads whose velocities, slopes, potentials
    and speed bounds add) and the fluxes F of ``flux`` (module docstring); the engine contract of
    ``meanfield.solvers.contract``.  ``op(rho)`` returns (dρ/dt, rate), rate the forward-Euler
    positivity rate max_i out_i/(h ρ_i) (+ 2D/h²) (``kernels.circle.flux_pass``).

    summation "fast": one fused Numba call (``kernels.circle.fused_stage``), falling back to the
    per-head path when an SA cell needs log space; "direct": the FFT fields head by head, then the
    same flux pass; "auto": ``resolve_summation``.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads (``isotropic_model``).
    cells : int
        N >= 8.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
    summation : {"auto", "fast", "direct"}
    diffusion : float
        D >= 0.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> op = circle.CircleOperator(mf.SA(2.0), 64, "upwind")
    >>> rho = 1 + 0.5 * np.cos(circle.cell_angles(64))
    >>> drho, rate = op(rho)
    >>> bool(np.allclose(-op.linear_part(rho) @ rho, drho, rtol=0, atol=1e-13))
    True
    >>> points, weights = op.measure(rho)
    >>> points.shape, bool(np.isclose(weights.sum(), rho.sum() * 2 * np.pi / 64))
    ((64, 2), True)
    """

    positive = True

    def __init__(self, model: SA | USA | MultiHead, cells: int, flux: str = DEFAULT_FLUX, summation: str = "auto",
                 diffusion: float = 0.0):
        self.model, self.cells, self.flux, self.diffusion = model, cells, flux, diffusion
        self.h = 2 * np.pi / cells
        self.code = kernels.FLUX_CODES[flux]
        self._work = np.empty((5, cells))
        self.general = None
        if not model.is_isotropic:      # the full model: ``full_model.CellField`` on the cell centres
            as_choice(summation, "summation", SUMMATIONS)
            self.general = CellField(model, circle_points(cell_angles(cells)), np.full(cells, self.h), summation,
                                     slopes=flux == "upwind2")
            if self.code >= 2 and self.general.signs is None:
                self.general.potential(np.ones(cells))        # refuses with the reason
            self.summation = self.general.info["summation"][0] if len(set(self.general.info["summation"])) == 1 \
                else "mixed"
            self.heads = []
            return
        self.summation = summation = resolve_summation(model, cells, summation)
        self.heads = [_Head(head, cells, flux, summation) for head in getattr(model, "heads", (model,))]
        if summation == "fast":
            k1 = max(op.degree for op in self.heads) + 1
            nf = max(op.spectra.shape[0] for op in self.heads)
            self.spectra = np.zeros((len(self.heads), nf, k1, 2))
            for k, op in enumerate(self.heads):
                self.spectra[k, :op.spectra.shape[0], :op.degree + 1] = op.fourier_spectra
            self.params = np.array([[op.model.beta, op.model.sign, op.model.normalised, op.tau, op.bound,
                                     op.spectra.shape[0]] for op in self.heads], dtype=float)
            self.tables = kernels.fourier_tables(cells, k1 - 1)
            self._fields, self._centre = np.empty((nf, cells)), np.empty((3, cells))
            self._fold, self._small = np.empty((2, cells)), np.empty((4, k1))

    @property
    def degree(self):
        """The Fourier degree K of the field (N/2 for the exact FFT sums; for the full model the largest
        degree of the expansion, None when summed directly)."""
        if self.general is not None:
            return max((k for k in self.general.info["degree"] if k is not None), default=None)
        return max(op.degree for op in self.heads)

    @property
    def log_space_cells(self):
        """The most cells whose SA field came from log space at one evaluation (the full model: whose
        field was recomputed by direct quadrature at the last evaluation)."""
        if self.general is not None:
            return int(sum(self.general.field.info["recomputed"]))
        return max(op.log_space_cells for op in self.heads)

    def centre(self, rho):
        """(u, u', P) at the cell centres summed over the heads, and the summed speed bound."""
        if self.general is not None:
            return self.general.angular(rho, self.flux)
        centre, bound = None, 0.0
        for op in self.heads:
            centre, speed = op.centre(rho, centre)
            bound += speed
        return centre, bound

    def __call__(self, rho):
        with threads.evaluation():         # on the threads the solve found faster (``threads.ThreadChoice``)
            return self._evaluate(rho)

    def _evaluate(self, rho):
        out = np.empty(self.cells)
        if self.summation == "fast":
            rate, tiny = kernels.fused_stage(rho, self.params, self.spectra, *self.tables, self.h, self.code,
                                             self.diffusion, self._fields, self._centre, self._fold, self._small,
                                             self._work, out)
            if not tiny:
                return out, rate
        centre, bound = self.centre(rho)
        rate = kernels.flux_pass(rho, centre[0], centre[1], centre[2], bound, self.h, self.code, self.diffusion,
                                 self._work, out)
        return out, rate

    def energy(self, rho):
        """E_β (one head); for a MultiHead Σ_h ±E_{β_h} when every head is USA (the field is then its
        Wasserstein gradient), NaN otherwise (SA heads: no common gradient structure); for the full model
        E_V (``general_field.energy``), NaN where the flow is not a gradient flow of it."""
        if self.general is not None:
            return self.general.energy(rho)[0]
        if not isinstance(self.model, MultiHead):
            return self.heads[0].energy(rho)
        if any(h.normalised for h in self.model.heads):
            return np.nan
        return sum(h.sign * op.energy(rho) for h, op in zip(self.model.heads, self.heads))

    def step_bound(self):
        """``max_step(model, cells, flux)`` combined with the diffusion's 2D/h²."""
        return combined_step(max_step(self.model, self.cells, self.flux), self.diffusion, circle_rate(self.cells))

    def measure(self, rho):
        """The cell centres (cos θ_i, sin θ_i), (N, 2), and the cell masses ρ_i h."""
        return circle_points(cell_angles(self.cells)), rho * self.h

    def velocity(self, rho):
        """u_i at the cell centres (the first-order upwind flux's field, whatever ``flux``)."""
        if self.general is not None:
            return self.general.angular(rho, "upwind")[0][0]
        if self.code <= 1:
            return self.centre(rho)[0][0]
        return CircleOperator(self.model, self.cells, "upwind", self.summation).centre(rho)[0][0]

    def linear_part(self, rho):
        """A with -A ρ = dρ/dt of flux="upwind" for the field frozen at ρ (``contract.upwind_matrix``),
        the diffusion's -D Δ_h included; ``h * ones @ A == 0``."""
        left = np.arange(self.cells)
        right = (left + 1) % self.cells
        u = self.velocity(rho)
        A = upwind_matrix(left, right, u, u[right], np.ones(self.cells), np.full(self.cells, self.h))
        if self.diffusion > 0:
            A = A + (self.diffusion / self.h ** 2) * scipy.sparse.diags(
                [2.0 * np.ones(self.cells), -np.ones(self.cells - 1), -np.ones(self.cells - 1), [-1.0], [-1.0]],
                [0, 1, -1, self.cells - 1, 1 - self.cells], format="csr")
        return A.tocsr()


def resolve_summation(model, cells, summation="auto"):
    """The field's summation on a grid of ``cells`` cells.

    "fast": the Fourier sum truncated at K = ``kernels.circle.degree`` modes, in the fused Numba
    stage; "direct": the exact circulant sums by FFT, head by head.  "auto" takes "fast" while its
    O(N K) work is below ``FOURIER_WORK`` (the measured crossover, benchmarks/bench_density.py).

    Parameters
    ----------
    model : SA, USA or MultiHead
    cells : int
    summation : {"auto", "fast", "direct"}

    Returns
    -------
    str
        "fast" or "direct".

    Raises
    ------
    ValueError
        For another ``summation``.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import circle
    >>> circle.resolve_summation(mf.SA(3.0), 512)
    'fast'
    """
    as_choice(summation, "summation", SUMMATIONS)
    if summation != "auto":
        return summation
    degree = max(kernels.degree(head.beta, cells) for head in getattr(model, "heads", (model,)))
    return "fast" if cells * (degree + 1) <= FOURIER_WORK else "direct"


def step_cap(model, cells=DEFAULT_CELLS, flux=DEFAULT_FLUX):
    r"""The default largest step of the positivity-controlled ``solve``.

    .. math::

        \Delta t_{\max} = \max\left(\texttt{max\_step}(\text{model}, N, \text{flux}),\
        \frac{\texttt{TIME\_STEP}}{\text{speed\_bound}(\text{model})}\right).

    It binds only where the speeds, hence the positivity rate, are small (near the uniform state),
    where it keeps λ dt <= 0.1 λ/speed_bound for the linear growth rates λ (SA: λ <= 2/e for
    every β, since λ_l = l² I_l(β)/(β I_0(β)); USA: λ and the speed bound both grow like e^β/√β).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    cells : int
    flux : {"upwind2", "upwind", "muscl", "tpfa"}

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import circle
    >>> circle.step_cap(mf.SA(1.0)) >= circle.max_step(mf.SA(1.0))
    True
    """
    model = density_model(model)
    return max(max_step(model, cells, flux), float(TIME_STEP / speed_bound(model)))


def isotropic_model(model, solver="circle", why="", multihead=False, max_beta=np.inf, limit=""):
    """``model`` checked for the density solvers.

    Accepted: SA or USA with Q^T K = I and V = ±I, USA weights e^β within double precision and
    β <= ``max_beta``; where ``multihead``, also a ``MultiHead`` all of whose heads are such
    (without feed-forward term).

    Parameters
    ----------
    model : SA, USA or MultiHead
    solver : str
        The solver's name, for the messages.
    why : str
        Why the solver needs isotropic heads (appended to the message).
    multihead : bool
        Accept a MultiHead.
    max_beta : float
        The largest β the solver represents.
    limit : str
        Why ``max_beta`` (appended to the message).

    Returns
    -------
    SA, USA or MultiHead
        The model (``meanfield.models.as_model`` of it).

    Raises
    ------
    ValueError
        For a general Q, K, V, a feed-forward term, β > ``max_beta`` or USA with β > 709.78.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> circle.isotropic_model(mf.SA(2.0))
    SA(beta=2)
    >>> circle.isotropic_model(mf.SA(2.0, V=-1.0)).sign
    -1.0
    """
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
        if 0 < head.beta < np.finfo(float).tiny:       # E_β ≈ 1/(2β) overflows; the dynamics is β = 0's
            raise ValueError(f"beta = {head.beta:g} is subnormal: E_beta ≈ 1/(2 beta) overflows double precision "
                             f"and the dynamics equals beta = 0's to round-off; use beta = 0")
    return model


def density_model(model, d=2, solver="circle", max_beta=np.inf, limit=""):
    """``model`` checked for a density solver on S^{d-1}: any Q, K, V (SA, USA, MultiHead of such).

    A model whose kernel is isotropic (Q^T K = c I, c >= 0, V = ±I, e.g. Q = K = R for a rotation R:
    ``full_model.isotropic_equivalent``) comes back as the isotropic model at β' = cβ, checked by
    ``isotropic_model``, so the isotropic fast paths run for it; any other comes back as it is, for
    the full model's field (``full_model.CellField``).

    Parameters
    ----------
    model : SA, USA or MultiHead
    d : int
        The dimension of the points (2: S^1, 3: S^2).
    solver : str
        The solver's name, for the messages.
    max_beta, limit
        As in ``isotropic_model`` (isotropic models only).

    Returns
    -------
    SA, USA or MultiHead

    Raises
    ------
    ValueError
        For matrices that do not act on R^d, a feed-forward term, causal or time-dependent weights,
        or a USA speed bound beyond double precision.
    TypeError
        For something that is not a model.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> circle.density_model(mf.SA(1.5, Q=2.0))
    SA(beta=3)
    >>> circle.density_model(mf.SA(1.5, V=np.diag([1.0, 2.0]))).is_isotropic
    False
    """
    model = as_model(model, multihead=True)
    if model.is_time_dependent:
        raise ValueError(f"the {solver} solver needs constant weights; got {model!r} (use particles.solve)")
    for head in getattr(model, "heads", (model,)):
        head.interaction(d)                 # matrices acting on R^d
    reduced = isotropic_equivalent(model, d)
    if reduced is not None:
        return isotropic_model(reduced, solver, multihead=True, max_beta=max_beta, limit=limit)
    if getattr(model, "feedforward", None) is not None:
        raise ValueError(f"the {solver} solver does not treat a feed-forward term; got {model!r} "
                         f"(use particles.solve)")
    speed_bound(model)                      # refuses a USA speed bound beyond double precision
    return model


def check_cells(cells: int) -> int:
    """``cells`` checked as a grid size of the circle: an integer N >= ``MIN_CELLS`` (8).

    Parameters
    ----------
    cells : int

    Returns
    -------
    int

    Raises
    ------
    ValueError
        For fewer than 8 cells (or a non-integer).

    Examples
    --------
    >>> from meanfield.solvers import circle
    >>> circle.check_cells(64)
    64
    """
    cells = as_count(cells, "cells")
    if cells < MIN_CELLS:
        raise ValueError(f"cells must be >= {MIN_CELLS} (the MUSCL stencil and a meaningful grid need "
                         f"at least {MIN_CELLS} cells); got {cells}")
    return cells


def _cell_density(rho, name="rho"):
    rho = as_density(rho, name)
    check_cells(rho.size)
    return rho


def initial_density(rho0: Callable | ArrayLike, cells: int | None = None) -> np.ndarray:
    """The initial cell densities of ``solve``, normalised to unit mass.

    Parameters
    ----------
    rho0 : callable or array_like
        A callable of points (N, 2) -> densities, evaluated at the cell centres, or the cell
        densities (N,).
    cells : int, optional
        N (default 512 for a callable; an array sets it).

    Returns
    -------
    ndarray, shape (N,)
        Σ_i ρ_i h = 1.

    Raises
    ------
    ValueError
        For a bad density, shape or cell count.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import circle
    >>> rho = circle.initial_density(lambda x: 1 + 0.5 * x[:, 0], 64)
    >>> bool(np.isclose(rho.sum() * 2 * np.pi / 64, 1.0))
    True
    """
    if callable(rho0):
        cells = check_cells(DEFAULT_CELLS if cells is None else cells)
        points = circle_points(cell_angles(cells))
        values = as_float_array(rho0(points), "rho0(points)")
        if values.shape != (cells,):
            raise ValueError(f"rho0(points) must return one density per cell centre, shape ({cells},); got "
                             f"{values.shape}. rho0 is called with the points (cos θ, sin θ), shape ({cells}, 2); "
                             f"for a function f of the angle pass lambda x: f(meanfield.circle_angles(x))")
        rho = as_density(values, "rho0(points)")
    else:
        rho = _cell_density(rho0, "rho0")
        if cells is not None and check_cells(cells) != rho.size:
            raise ValueError(f"rho0 has {rho.size} cell values but cells = {cells}; leave cells=None (the array "
                             f"sets the grid) or pass a callable of points")
    return unit_mass(rho, np.full(rho.size, 2 * np.pi / rho.size))


def max_step(model, cells=DEFAULT_CELLS, flux=DEFAULT_FLUX):
    r"""The largest fixed step of ``solve``: the positivity bound of SSP-RK3 for unit mass.

    .. math::

        \Delta t \le \mathrm{CFL} \cdot \frac{h}{\text{speed\_bound(model)}}, \qquad h = \frac{2\pi}{N},

    CFL = 1 for the first-order fluxes (upwind, tpfa), 1/2 for the reconstructed ones (upwind2,
    muscl: a face value is at most twice the cell's).  A MultiHead's speed bound is the sum of the
    heads'.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    cells : int
        N >= 8.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For a non-isotropic model, fewer than 8 cells or an unknown flux.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> bool(np.isclose(circle.max_step(mf.SA(1.0), 512, "upwind"), 2 * np.pi / 512))   # SA speeds are <= 1
    True
    """
    model = density_model(model)
    cells = check_cells(cells)
    as_choice(flux, "flux", FLUXES)
    return float(CFL[flux] * (2 * np.pi / cells) / speed_bound(model))


def velocity(model, rho):
    r"""Angular velocity at the cell centres of the grid measure Σ_j ρ_j h δ_{θ_j}.

    .. math::

        u_i = \pm \frac{1}{Z_i} \sum_j \rho_j h\, e^{\beta \cos(\theta_i - \theta_j)} \sin(\theta_j - \theta_i),
        \qquad Z_i = \Phi_i \ \text{(SA)}, \ 1 \ \text{(USA)},

    the exact circulant sums by FFT; relative accuracy 1e-10 for SA even where Φ is tiny.  A
    MultiHead's velocity is the sum of its heads'.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    rho : array_like, shape (N,)
        Cell densities (not renormalised).

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> float(np.abs(circle.velocity(mf.SA(2.0), np.ones(64))).max()) < 1e-14    # uniform: at rest
    True
    """
    model = density_model(model)
    rho = _cell_density(rho)
    return CircleOperator(model, rho.size, "upwind", summation="direct").centre(rho)[0][0]


def time_derivative(model, rho, flux=DEFAULT_FLUX, summation="auto", rate=False):
    r"""dρ/dt of the semi-discrete finite-volume scheme.

    .. math::

        \frac{d\rho_i}{dt} = -\frac{F_{i+1/2} - F_{i-1/2}}{h}

    with the fluxes F of ``flux`` (module docstring).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Isotropic heads.
    rho : array_like, shape (N,)
        Cell densities.
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
    summation : {"auto", "fast", "direct"}
    rate : bool
        Also return the forward-Euler positivity rate max_i out_i/(h ρ_i).

    Returns
    -------
    ndarray, shape (N,), or (ndarray, float) with ``rate``

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> rho = 1 + 0.5 * np.cos(circle.cell_angles(64))
    >>> bool(abs(circle.time_derivative(mf.SA(2.0), rho).sum()) < 1e-12)     # mass is conserved
    True
    """
    model = density_model(model)
    as_choice(flux, "flux", FLUXES)
    rho = _cell_density(rho)
    dydt, r = CircleOperator(model, rho.size, flux, summation)(rho)
    return (dydt, r) if rate else dydt


def energy(rho, beta):
    r"""E_β of the grid measure Σ_i ρ_i h δ_{θ_i}, by one FFT convolution.

    .. math::

        E_\beta = \frac{1}{2\beta} \sum_{i,j} \rho_i \rho_j h^2 e^{\beta \cos(\theta_i - \theta_j)},

    equal to ``meanfield.energy`` of the cell centres with weights ρ_i h; at β = 0 the limit
    (1/2)|Σ_i ρ_i h x_i|².

    Parameters
    ----------
    rho : array_like, shape (N,)
        Cell densities.
    beta : float
        β >= 0.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import circle
    >>> rho = np.zeros(64); rho[0] = 64 / (2 * np.pi)        # all the mass in one cell
    >>> bool(np.isclose(circle.energy(rho, 2.0), np.exp(2.0) / 4))
    True
    """
    rho = _cell_density(rho)
    return _Head(SA(as_beta(beta)), rho.size, "upwind").energy(rho)


@threads.solving()      # the faster of Numba's threads and one (``threads.ThreadChoice``)
def solve(model: SA | USA | MultiHead, rho0: Callable | ArrayLike, t_eval: ArrayLike, *, cells: int | None = None,
          flux: str = DEFAULT_FLUX, scheme: str | type | object = DENSITY_SCHEME, dt: float | None = None,
          max_dt: float | None = None, cfl: float = stepping.CFL, summation: str = "auto", diffusion: float = 0.0,
          energy: bool = True, progress: bool | None = None, checkpoint: str | PathLike | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = stepping.IMPLICIT_RTOL,
          atol: float = stepping.IMPLICIT_ATOL) -> DensitySolution:
    """Solve the continuity equation on S^1 by finite volumes + SSP-RK3; return a DensitySolution.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Any β >= 0 and Q, K, V (2 × 2 or scalars), or a MultiHead of such heads (the velocity is the sum
        of the heads'; .energy is Σ_h ±E_{β_h} when every head is isotropic USA, else NaN).  Q^T K = c I,
        V = ±I runs as the isotropic model at β' = cβ; other weights by ``full_model.CellField``: .energy
        is E_V where V = ±Q^T K is symmetric, else NaN, info["energy_reason"] says which, info["summation"],
        info["degree"] and info["tolerance"] describe the field (docs/full_model.md).
    rho0 : callable or array
        A callable of points (N, 2) -> densities (evaluated at the cell centres (cos θ_i, sin θ_i); for a
        function f of the angle pass ``lambda x: f(meanfield.circle_angles(x))``) or an array of cell
        densities; normalised to unit mass (μ_0 is a probability measure).
    t_eval : array
        Output times, increasing; the steps end on each of them exactly.
    cells : int, optional
        Number of cells (default 512 for a callable; an array sets it).
    flux : {"upwind2", "upwind", "muscl", "tpfa"}
        See the module docstring.
    scheme : str, Scheme class or instance
        The time scheme (``stepping.integrate``), default "ssprk3"; with ``dt=None`` its steps are
        positivity-controlled.  "mprk22" (error-controlled to ``rtol``/``atol``), "implicit_euler"
        (fixed ``dt``) and "auto" (SSP-RK3, then MPRK22 once the dynamics slows) are linearly implicit:
        positive and conservative for every step, ``dt`` of any size; they integrate the first-order
        upwind system (``CircleOperator.linear_part``) whatever ``flux`` (docs/implicit.md).
    dt : float, optional
        None (default): steps from the actual speeds, h_k = min(max_dt, cfl / rate(ρ_k)) with rate the
        forward-Euler positivity rate max_i out_i/(h ρ_i) of the current state (+ 2D/h²), every SSP stage
        checked and a step retried if a later stage needs a smaller one (``stepping.integrate`` with
        ``positivity=True``).  A number: fixed steps of at most dt, refused above the global bound
        ``max_step(model, cells, flux)`` (combined with the diffusion's 2D/h²).
    max_dt : float, optional
        Largest controlled step (default ``step_cap(model, cells, flux)``).
    cfl : float
        Fraction in (0, 1] of the positivity bound 1/rate a controlled step takes (default 0.9).
    summation : {"auto", "fast", "direct"}
        The field: the truncated Fourier sum in one fused Numba pass, or the exact FFT sums (the reference
        path); "auto" picks by cost (``resolve_summation``).  info["summation"] and info["degree"] say which.
    diffusion : float
        D >= 0 adds D ∂²ρ/∂θ² (``meanfield.solvers.diffusion``; the law of particles with noise σ = sqrt(2D)).
    energy : bool
        Compute the discrete E_β at the output times (else ``.energy`` is None).
    progress, checkpoint, checkpoint_every, resume
        A progress bar (None: after a few seconds on a terminal); ``checkpoint`` (a path) saves the
        state every ``checkpoint_every`` steps and ``resume=True`` continues it bit for bit.
    budget : float or None
        Seconds (default one hour; None: no limit): a fixed-step run whose step count times the
        measured cost of a step exceeds it is refused before it starts; any run past it saves its
        checkpoint and stops with a RuntimeError (``stepping.integrate``; ``resume=True`` continues it).
    rtol, atol : float
        Tolerances of the error-controlled schemes ("mprk22", "auto"): the L1 norm of MPRK22's error
        estimate relative to atol + rtol |ρ| (default 1e-3, 1e-8).

    Returns
    -------
    DensitySolution
        .points the cell centres (N, 2), .areas = h = 2π/N, .rho (m, N), .mass (m,) = Σ_i ρ_i h, .energy (m,)
        the discrete E_β; .info holds flux, summation, degree, dt (fixed step or None), max_dt, cells,
        nsteps, nfev, nrejected (and hmin, hmax of the controlled steps; switches: (t, scheme) of
        "auto") and log_space_cells.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> sol = circle.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 1.0], cells=128, progress=False)
    >>> bool(abs(sol.mass[-1] - 1) < 1e-13 and sol.rho.min() >= 0)
    True
    """
    model = density_model(model)
    t_eval = as_time_grid(t_eval)
    as_choice(flux, "flux", FLUXES)
    rho = initial_density(rho0, cells)
    cells = rho.size
    stage = CircleOperator(model, cells, flux, summation, as_diffusion(diffusion))
    diffusion, bound = stage.diffusion, stage.step_bound()
    h = 2 * np.pi / cells
    implicit = takes_operator(scheme)
    if dt is None:
        max_dt = step_cap(model, cells, flux) if max_dt is None else as_positive(max_dt, "max_dt")
        rhs, cap, controlled = stage, max_dt, True
    elif implicit:
        rhs, cap, controlled, max_dt = stage, as_positive(dt, "dt"), False, bound
    else:
        dt = positivity_step(dt, bound, f"{model!r} with {cells} cells and the {flux} flux")
        rhs, cap, controlled, max_dt = (lambda r: stage(r)[0]), dt, False, bound
    what = f"this solve of {model!r} on {cells} cells to t = {t_eval[-1]:g}"
    meta = dict(solver="circle", model=model.to_dict(), flux=flux, dt=dt, max_dt=max_dt, cfl=cfl, cells=cells,
                diffusion=diffusion, summation=stage.summation)
    meta = with_scheme(with_tolerances(meta, scheme, rtol, atol), scheme)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta,
                                                      sizes=np.ones(cells))
    times, outputs = detector_times(t_eval, flux)        # denser for the fluxes that pin: the detector's states
    states, info = integrate(rhs, rho, times, scheme=scheme, dt=cap, checkpoint=ckpt, resume=resume,
                             progress=progress, positivity=controlled, cfl=cfl, context=what, rtol=rtol, atol=atol,
                             budget=budget)
    rhos = states[outputs]
    info.update(method=scheme_name(scheme), flux=flux, dt=dt, max_dt=max_dt, cells=cells,
                log_space_cells=stage.log_space_cells,
                diffusion=diffusion, summation=stage.summation, degree=stage.degree)
    energy = np.array([stage.energy(r) for r in rhos]) if energy else None
    points = circle_points(cell_angles(cells))
    if stage.general is not None:
        info.update(tolerance=stage.general.info["tolerance"], energy_reason=stage.general.energy_reason)
    if energy is not None:
        sign = getattr(model, "sign", 1.0) if stage.general is None else stage.general.energy_sign
        info["energy_dips"] = energy_dips(energy, sign)
    info.update(pinned=pinned_on_fixed_mesh(times, states * h, ring_adjacency(cells), points, lambda k: velocity(
                    model, states[k])[:, None] * points[:, ::-1] * [-1, 1], np.full(cells, h)).tolist())
    warn_pinned(info["pinned"], f"cells {info['pinned'][:5]}", flux)
    return DensitySolution(t=t_eval, points=points, areas=np.full(cells, h), rho=rhos,
                           mass=rhos.sum(axis=1) * h, energy=energy, model=model, info=info)
