r"""Finite volumes for the mean-field PDE of causal attention on [0, 1] × S^1 (Q^T K = I, V = ±I).

Token i of n sits at the position s = (i - 1/2)/n in the sequence; as n → ∞ the tokens become a
density ρ(t, s, θ) that is a probability density in θ for every s (one token per position).
Causal attention moves each slice with the field of the part of the sequence before it:

.. math::

    \partial_t \rho(t, s, \cdot) + \partial_\theta\big(\rho(t, s, \cdot)\, u_s\big) = 0, \qquad
    P_s = \frac{1}{s} \int_0^s \rho(t, s', \cdot) \, ds',

    u_s(\theta) = \pm \frac{1}{Z_s(\theta)} \int e^{\beta \cos(\theta' - \theta)} \sin(\theta' - \theta)
    P_s(\theta') \, d\theta', \qquad Z_s = \int e^{\beta \cos(\theta' - \theta)} P_s \ \text{(SA)},

    u_s(\theta) = \pm e^\beta \int e^{\beta(\cos(\theta' - \theta) - 1)} \sin(\theta' - \theta) P_s(\theta')
    \, d\theta' \ \text{(USA)}

i.e. u_s is the (full-attention) circle field of the prefix average P_s.  For SA this is the
softmax over s' <= s; for USA it is the 1/i normalisation of the particle model (the prefix
measure divided by its mass s), the choice that keeps "β = 0: SA = USA" and makes the first
tokens' dynamics independent of the sequence length (docs/causal.md).  There is no transport in
s: every slice keeps its mass.

Grid: S slices of width 1/S (centres s_k = (k + 1/2)/S) times N cells of width h = 2π/N in θ,
cell averages ρ_{k,i}, each slice of unit mass Σ_i ρ_{k,i} h = 1.  The prefix average of slice k
by the midpoint rule (second order in s):

    P_k = ( Σ_{l<k} ρ_l + ρ_k / 2 ) / (k + 1/2).

All fields come from one batch of FFTs: the rows' θ-spectra, a cumulative sum over s (the
spectrum of P_k, by linearity), products with the kernel spectra of the grid measure
Σ_j P_{k,j} h δ_{θ_j} (the circle solver's exact circulant convolutions, shifted by e^{-β}):

    g = Σ_j m_j e^{β(cos δ - 1)} sin δ,   q = Σ_j m_j expm1(β(cos δ - 1))/β,
    g' = Σ_j m_j e^{β(cos δ - 1)} (β sin²δ - cos δ)     (δ = θ_j - θ_i, m_j = P_{k,j} h),
    SA: u = ±g/(1 + βq),  u' = ±g'/(1 + βq) - ±β u²;    USA: u = ±e^β g,  u' = ±e^β g'

and inverse FFTs: O(S N log N) per evaluation, never the O(S² N²) double sum.

Flux in θ, one Numba job per slice: second-order upwind ("upwind2", as on the circle):
minmod states ρ^E_i = ρ_i + σ_i/2, ρ^W_i = ρ_i - σ_i/2, face velocities u^E_i = u_i + (h/2) u'_i,
u^W_i = u_i - (h/2) u'_i clipped to the speed bound, F_{i+1/2} = ρ^E_i (u^E_i)^+ + ρ^W_{i+1} (u^W_{i+1})^-,
and the first-order donor cell F_{i+1/2} = ρ_i u_i^+ + ρ_{i+1} u_{i+1}^- at the faces of clusters
narrower than about two cells (|ρ_{i+1} - 2ρ_i + ρ_{i-1}| > ``UNRESOLVED`` · max of the three), so
that such clusters travel at their particle speed.  SSP-RK3 in time with dt · sup|u| <= h/2
(the default step; larger steps are refused): every stage is a convex combination of forward
Euler steps that keep ρ >= 0 (a face value is at most twice its cell's).  Mass is conserved
slice by slice to round-off.

SA accuracy where Z is tiny: the FFT sums have absolute error <= 4 ε log2(N); where
1 + βq falls below that (large β, far from all the prefix mass) u is clipped to the bound.  Since
P_k >= ρ_k/(2k + 1), such a cell carries ρ_{k,i} <= (2k + 1) · 4 ε log2(N)/h, so the flux error it
makes is below 8 (2k + 1) ε log2(N)/h (< 1e-9 at S = 256, N = 512).

Not built: the same equation on [0, 1] × S^2.  The sphere solver's harmonic table would give the
prefix sums of all slices as one BLAS-3 product (S times its field work), but its stage — ten
kernel moments per cell, a balance correction, trusted slopes, outflow-controlled steps — works on
one density and would have to run per slice (docs/causal.md, "Not built").
"""
from __future__ import annotations

from . import _numba_env  # noqa: F401

from dataclasses import replace

from collections.abc import Callable
from os import PathLike

import numpy as np
from numpy.typing import ArrayLike
import scipy.fft
import scipy.sparse
from numba import njit, prange

from meanfield.budget import BUDGET
from meanfield.checks import as_choice, as_count, as_float_array, as_positive, as_time_grid
from meanfield.budget import check_memory
from meanfield.checks import unit_mass
from meanfield.geometry import circle_points
from meanfield.models import SA, USA, as_model
from meanfield.theory import speed_bound

from .circle import cell_angles, density_model
from .diffusion import no_diffusion
from .full_model import CellField
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME, Operator, scheme_name, upwind_matrix, with_scheme
from .results import CausalDensitySolution
from .stepping import IMPLICIT_ATOL, IMPLICIT_RTOL, Checkpoint, integrate, positivity_step, takes_operator, \
    with_tolerances

__all__ = ["solve", "CausalOperator", "velocity", "time_derivative", "max_step", "slice_positions", "prefix_average"]

CFL = 0.5
FLUXES = ("upwind2", "upwind")
UNRESOLVED = 0.5
MIN_CELLS = 8
MAX_USA_BETA = float(np.log(np.finfo(float).max))
FFT_ERROR = 4.0


def slice_positions(slices):
    r"""Slice centres of the token-position axis [0, 1].

    .. math::

        s_k = \frac{k + 1/2}{S}, \qquad k = 0, \dots, S - 1

    (token i of n = S tokens sits at s = (i - 1/2)/n, i = 1..n).

    Parameters
    ----------
    slices : int
        S >= 1.

    Returns
    -------
    ndarray, shape (S,)

    Examples
    --------
    >>> from meanfield.solvers import causal
    >>> causal.slice_positions(4)
    array([0.125, 0.375, 0.625, 0.875])
    """
    slices = as_count(slices, "slices")
    return (np.arange(slices) + 0.5) / slices


def _causal_model(model):
    """A causal SA/USA model (USA: e^β within double precision): Q^T K = c I, V = ±I as the isotropic
    model at β' = cβ (``full_model.isotropic_equivalent``), any other Q, K, V (2 × 2) as it is."""
    model = as_model(model, causal=True)
    plain = density_model(replace(model, causal=False), 2, "causal")
    model = replace(plain, causal=True)
    if not model.is_isotropic:
        return model
    if not model.normalised and model.beta > MAX_USA_BETA:
        raise ValueError(f"USA velocities reach e^beta, which overflows double precision for beta > "
                         f"{MAX_USA_BETA:.2f}; got beta = {model.beta:g} (use SA)")
    return model


def _grid_density(rho, name="rho"):
    """rho (S, N) cell densities: finite, >= 0, every slice of positive mass; N >= MIN_CELLS."""
    rho = as_float_array(rho, name)
    if rho.ndim != 2:
        raise ValueError(f"{name} must be an array (slices, cells) of cell densities; got shape {rho.shape}")
    if rho.shape[1] < MIN_CELLS:
        raise ValueError(f"{name} needs at least {MIN_CELLS} cells in θ; got {rho.shape[1]}")
    if not np.all(np.isfinite(rho)) or np.any(rho < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    if np.any(rho.sum(axis=1) <= 0):
        raise ValueError(f"{name} has slices of zero mass (rows {np.flatnonzero(rho.sum(axis=1) <= 0)[:5]}); "
                         f"every position s carries one token's worth of mass")
    return np.ascontiguousarray(rho)


def prefix_average(rho):
    """P_k = (Σ_{l<k} ρ_l + ρ_k/2)/(k + 1/2) for cell densities rho (S, N): the midpoint rule for
    (1/s) ∫_0^s ρ(s') ds' at the slice centres.

    Parameters
    ----------
    rho : array (S, N)

    Returns
    -------
    array (S, N)

    Examples
    --------
    >>> prefix_average(np.array([[1.0, 3.0], [3.0, 1.0]]))[1]
    array([1.66666667, 2.33333333])
    """
    rho = as_float_array(rho, "rho")
    return (np.cumsum(rho, axis=0) - 0.5 * rho) / (np.arange(rho.shape[0]) + 0.5)[:, None]


class CausalOperator(Operator):
    r"""The semi-discrete finite-volume system of ``solve``: S slices of N cells on the circle.

    .. math::

        \frac{d\rho_{k,i}}{dt} = -\frac{F_{k,i+1/2} - F_{k,i-1/2}}{h}, \qquad h = 2\pi / N,

    slice k transported by the field of the prefix average of the slices up to it (``fields``), with
    the second-order upwind flux (``_divergence``; flux="upwind2", the solver's) or the first-order
    donor cell F = ρ_i u_i^+ + ρ_{i+1} u_{i+1}^- everywhere (flux="upwind"); the engine contract of
    ``meanfield.solvers.contract`` for the state (S, N).  The steps are fixed, so ``op(rho)``'s rate
    is the a-priori one, 1 / ``max_step(model, cells)``.

    Parameters
    ----------
    model : SA or USA
        Causal (``_causal_model``).
    cells : int
        N.
    flux : {"upwind2", "upwind"}

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import causal, circle
    >>> op = causal.CausalOperator(mf.SA(2.0, causal=True), 32, "upwind")
    >>> rho = 1 + 0.5 * np.cos(circle.cell_angles(32) - np.arange(4)[:, None])
    >>> drho, rate = op(rho)
    >>> bool(np.allclose(-(op.linear_part(rho) @ rho.ravel()), drho.ravel(), rtol=0, atol=1e-14))
    True
    """

    positive = True

    def __init__(self, model: SA | USA, cells: int, flux: str = "upwind2"):
        self.model, self.cells = model, cells
        self.flux = as_choice(flux, "flux", FLUXES)
        self.h = 2 * np.pi / cells
        self.bound = speed_bound(replace(model, causal=False))
        self.general = None
        if not model.is_isotropic:      # the full model: each prefix average's field (``full_model.CellField``)
            self.general = CellField(replace(model, causal=False), circle_points(cell_angles(cells)),
                                     np.full(cells, self.h), slopes=self.flux == "upwind2")
            return
        beta = model.beta
        offsets = np.arange(cells)
        offsets = np.where(offsets <= cells // 2, offsets, offsets - cells) * self.h
        cos, sin = np.cos(offsets), np.sin(offsets)
        shift = beta * (cos - 1.0)
        scale = model.sign * (1.0 if model.normalised else np.exp(beta))
        g = scale * self.h * scipy.fft.rfft(-np.exp(shift) * sin)
        dg = scale * self.h * scipy.fft.rfft(np.exp(shift) * (beta * sin ** 2 - cos))
        if model.normalised:
            q = self.h * scipy.fft.rfft(np.expm1(shift) / beta if beta > 0 else cos - 1.0)
            self.spectra = np.stack([g, dg, q])[:, None, :]
        else:
            self.spectra = np.stack([g, dg])[:, None, :]
        self.floor = FFT_ERROR * np.finfo(float).eps * np.log2(cells)

    def fields(self, rho):
        """(u, u') (S, N) at the cell centres: the prefix averages' spectra by a cumulative sum of
        the rows' spectra, times the kernels' spectra, one batched inverse FFT; for the full model the
        field of each prefix average (``CellField.angular``: O(S N L) by the Fourier expansion)."""
        if self.general is not None:
            u, slope = np.empty(rho.shape), np.empty(rho.shape)
            for k, p in enumerate(prefix_average(rho)):
                (u[k], slope[k], _), _ = self.general.angular(p, self.flux)
            return u, slope
        r = scipy.fft.rfft(rho, axis=1)
        r = (np.cumsum(r, axis=0) - 0.5 * r) / (np.arange(rho.shape[0]) + 0.5)[:, None]
        f = scipy.fft.irfft(r[None] * self.spectra, n=self.cells, axis=-1)
        if not self.model.normalised:
            return f[0], f[1]
        z = np.maximum(1.0 + self.model.beta * f[2], self.floor)
        u = np.clip(f[0] / z, -self.bound, self.bound)
        slope = np.where(z > self.floor, f[1] / z - (self.model.sign * self.model.beta) * u * u, 0.0)
        return u, slope

    def __call__(self, rho):
        out = np.empty_like(rho)
        # unresolved = -1 marks every face as a cluster face: the donor-cell flux throughout
        _divergence(rho, *self.fields(rho), self.bound, self.h, UNRESOLVED if self.flux == "upwind2" else -1.0, out)
        return out, 1.0 / self.step_bound()

    def step_bound(self):
        """``max_step(model, cells)``: h / (2 sup|u|)."""
        return max_step(self.model, self.cells)

    def energy(self, rho):
        """NaN: the causal dynamics is not a gradient flow."""
        return np.nan

    def measure(self, rho):
        """The points (s_k, θ_i), (S N, 2), of [0, 1] × S^1 and their masses ρ_{k,i} h / S."""
        s = slice_positions(rho.shape[0])
        points = np.column_stack([np.repeat(s, self.cells), np.tile(cell_angles(self.cells), s.size)])
        return points, rho.ravel() * (self.h / s.size)

    def linear_part(self, rho):
        """A (S N, S N) with -A @ rho.ravel() = dρ/dt of flux="upwind" for the fields frozen at
        ρ: one ``contract.upwind_matrix`` block per slice; ``h * ones @ A == 0``."""
        u = self.fields(rho)[0]
        left = np.arange(self.cells)
        right = (left + 1) % self.cells
        ones, sizes = np.ones(self.cells), np.full(self.cells, self.h)
        return scipy.sparse.block_diag([upwind_matrix(left, right, v, v[right], ones, sizes) for v in u],
                                       format="csr")


@njit(cache=True, inline="always")
def _minmod(a, b):
    if a * b <= 0.0:
        return 0.0
    return a if abs(a) < abs(b) else b


@njit(parallel=True, cache=True)
def _divergence(rho, u, slope, bound, h, unresolved, out):
    """out = -(F_{i+1/2} - F_{i-1/2})/h for every slice (one parallel job per slice): the
    second-order upwind flux from minmod states and extrapolated face velocities, the donor
    cell flux at faces of clusters narrower than about two cells."""
    S, n = rho.shape
    for k in prange(S):
        r = rho[k]
        sharp = np.empty(n, dtype=np.bool_)
        east = np.empty(n)
        west = np.empty(n)
        half = np.empty(n)
        for i in range(n):
            a = r[i - 1]
            c = r[(i + 1) % n]
            sharp[i] = abs(a - 2.0 * r[i] + c) > unresolved * max(a, r[i], c)
            half[i] = 0.5 * _minmod(r[i] - a, c - r[i])
            du = 0.5 * h * slope[k, i]
            east[i] = min(max(u[k, i] + du, -bound), bound)
            west[i] = min(max(u[k, i] - du, -bound), bound)
        flux = np.empty(n)
        for i in range(n):
            j = (i + 1) % n
            if sharp[i] or sharp[j]:
                flux[i] = r[i] * max(u[k, i], 0.0) + r[j] * min(u[k, j], 0.0)
            else:
                flux[i] = (r[i] + half[i]) * max(east[i], 0.0) + (r[j] - half[j]) * min(west[j], 0.0)
        for i in range(n):
            out[k, i] = (flux[i - 1] - flux[i]) / h


def max_step(model, cells):
    """The positivity bound h / (2 sup|u|) on the SSP-RK3 step, h = 2π/cells (sup|u| = 1 for SA,
    ``theory.speed_bound`` for USA: the prefix averages are probability densities).

    Parameters
    ----------
    model : SA or USA (Q^T K = I, V = ±I; causal or not, it is run causally)
    cells : int
        Cells in θ.

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> round(max_step(mf.SA(4.0, causal=True), 512), 6)
    0.006136
    """
    model = _causal_model(model)
    cells = as_count(cells, "cells", minimum=MIN_CELLS)
    return float(CFL * (2 * np.pi / cells) / speed_bound(replace(model, causal=False)))


def velocity(model, rho):
    r"""Angular velocities at the cell centres: the circle field of the prefix averages.

    .. math::

        u_{k,i} = \pm \frac{1}{Z_{k,i}} \int e^{\beta \cos(\theta_i - \theta')} \sin(\theta' - \theta_i)
        \, P_k(\theta') \, d\theta', \qquad P_k = \texttt{prefix\_average}(\rho)_k,

    with the slices normalised to unit mass before P_k is formed.

    Parameters
    ----------
    model : SA or USA
        Q^T K = I, V = ±I (run causally).
    rho : array_like, shape (S, N)
        Cell densities, every slice of positive mass.

    Returns
    -------
    ndarray, shape (S, N)

    Raises
    ------
    ValueError
        For a non-isotropic model, negative or non-finite densities, a slice without mass, fewer
        than 8 cells.

    Examples
    --------
    >>> import meanfield as mf
    >>> u = velocity(mf.SA(2.0, causal=True), np.ones((4, 64)))
    >>> float(abs(u).max()) < 1e-14
    True
    """
    model = _causal_model(model)
    rho = _grid_density(rho)
    return CausalOperator(model, rho.shape[1]).fields(_unit_slices(rho))[0]


def time_derivative(model, rho):
    r"""dρ/dt of the semi-discrete scheme, slice by slice.

    .. math::

        \frac{d\rho_{k,i}}{dt} = -\frac{F_{k,i+1/2} - F_{k,i-1/2}}{h},

    F the upwind fluxes of ρ_k in the velocity ``velocity(model, rho)[k]``.

    Parameters
    ----------
    model : SA or USA
        Q^T K = I, V = ±I.
    rho : array_like, shape (S, N)
        Cell densities of unit-mass slices.

    Returns
    -------
    ndarray, shape (S, N)

    Examples
    --------
    >>> import meanfield as mf
    >>> th = 2 * np.pi * (np.arange(32) + 0.5) / 32
    >>> rho = (1 + 0.5 * np.cos(th))[None].repeat(3, axis=0) / (2 * np.pi)
    >>> bool(np.abs(time_derivative(mf.SA(2.0), rho).sum(axis=1)).max() < 1e-12)   # each slice keeps its mass
    True
    """
    model = _causal_model(model)
    rho = _grid_density(rho)
    return CausalOperator(model, rho.shape[1])(rho)[0]


def _unit_slices(rho):
    return unit_mass(rho, np.full(rho.shape[1], 2 * np.pi / rho.shape[1]))


def _initial_density(rho0, slices, cells):
    """rho0 on the grid: a callable f(s (S, 1), θ (1, N)) -> (S, N) evaluated at the cell centres,
    or an array (S, N) of cell densities; every slice normalised to unit mass."""
    if callable(rho0):
        s = slice_positions(slices)[:, None]
        theta = cell_angles(as_count(cells, "cells", minimum=MIN_CELLS))[None, :]
        values = np.broadcast_to(as_float_array(rho0(s, theta), "rho0(s, theta)"), (s.size, theta.size))
        rho = _grid_density(values, "rho0(s, theta)")
    else:
        rho = _grid_density(rho0, "rho0")
    return _unit_slices(rho)


def solve(model: SA | USA, rho0: Callable | ArrayLike, t_eval: ArrayLike, *, slices: int = 64, cells: int = 256,
          flux: str = "upwind2", scheme: str | type | object = DENSITY_SCHEME, dt: float | None = None,
          summation: str = "auto", diffusion: float = 0.0, progress: bool | None = None,
          checkpoint: str | PathLike | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = IMPLICIT_RTOL,
          atol: float = IMPLICIT_ATOL) -> CausalDensitySolution:
    """Solve the causal mean-field PDE on [0, 1] × S^1 (module docstring) by finite volumes and
    SSP-RK3; return a CausalDensitySolution.

    Parameters
    ----------
    model : SA or USA, any β >= 0 and any 2 × 2 Q, K, V (run causally whether or not it was made
        with ``causal=True``); Q^T K = c I, V = ±I runs as the isotropic model at β' = cβ, other
        weights by the Fourier expansion of their kernel (``full_model.CellField``, info["summation"],
        info["degree"], info["tolerance"]).
    rho0 : callable or array
        f(s, θ) with s (S, 1), θ (1, N) the slice and cell centres, returning densities (S, N) (or
        anything broadcasting to it); or an array (S, N) of cell densities.  Every slice is
        normalised to unit mass (one token per position).
    t_eval : array
        Increasing output times.
    slices, cells : int
        S and N (ignored when rho0 is an array, whose shape sets them).
    flux : {"upwind2", "upwind"}
        The second-order upwind flux (default) or the first-order donor cell (``CausalOperator``).
    scheme : str, Scheme class or instance
        The time scheme (``stepping.integrate``), default "ssprk3", fixed steps.
    dt : float, optional
        The step, at most and by default ``max_step(model, cells)``.
    summation : {"auto"}
        The prefix fields are exact cumulative FFT sums; there is no other summation to choose.
    diffusion : float
        Only 0 (the default): this solver has no diffusion term, and D > 0 is refused
        (``circle.solve`` and ``sphere.solve`` take one).
    progress : bool or None
        A progress bar (None: after a few seconds on a terminal).
    checkpoint, checkpoint_every, resume
        As in the circle solver: the state saved every ``checkpoint_every`` steps, a resumed run
        equal bit for bit to an uninterrupted one.
    budget : float or None
        Seconds (default one hour; None: no limit): a fixed-step run whose step count times the
        measured cost of a step exceeds it is refused before it starts; any run past it saves its
        checkpoint and stops with a RuntimeError (``stepping.integrate``; ``resume=True`` continues it).
    rtol, atol : float
        Tolerances of the error-controlled schemes ("mprk22", "auto"): the L1 norm of MPRK22's error
        estimate relative to atol + rtol |y| (default 1e-3, 1e-8).  The linearly implicit schemes
        ("implicit_euler", "mprk22", "auto") take a ``dt`` of any size and integrate the first-order
        upwind system whatever ``flux`` (docs/implicit.md).

    Returns
    -------
    CausalDensitySolution
        t (m,), s (S,), theta (N,), rho (m, S, N), mass (m, S) per slice, model, info (dt, steps).

    Examples
    --------
    >>> import meanfield as mf
    >>> sol = solve(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s), [0, 1], slices=8, cells=32)
    >>> bool(np.allclose(sol.mass, 1.0, atol=1e-13)) and bool(sol.rho.min() >= 0)
    True
    """
    model = _causal_model(model)
    t_eval = as_time_grid(t_eval)
    check_memory(8.0 * (t_eval.size + 12) * (np.size(rho0) if not callable(rho0) else
                                             as_count(slices, "slices") * as_count(cells, "cells")),
                 f"the causal solve on {slices} slices x {cells} cells to {t_eval.size} output times")
    as_choice(summation, "summation", ("auto",))
    no_diffusion(diffusion, "causal.solve")
    rho = _initial_density(rho0, slices, cells)
    slices, cells = rho.shape
    bound = max_step(model, cells)
    implicit = takes_operator(scheme)
    controlled = implicit and dt is None                 # implicit: error-controlled, else any fixed dt
    dt = as_positive(dt, "dt") if implicit and dt is not None else \
        positivity_step(dt, bound, f"{model!r} with {cells} cells in θ")
    op = CausalOperator(model, cells, flux)
    meta = dict(solver="causal", model=model.to_dict(), dt=dt, slices=slices, cells=cells)
    if flux != "upwind2":
        meta["flux"] = flux
    meta = with_scheme(with_tolerances(meta, scheme, rtol, atol), scheme)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta,
                                                      sizes=np.ones(cells))
    what = f"this solve of {model!r} on {slices} x {cells} cells to t = {t_eval[-1]:g}"
    rhs = op if implicit else (lambda r: op(r)[0])
    rhos, info = integrate(rhs, rho, t_eval, scheme=scheme, dt=as_positive(dt, "dt"), checkpoint=ckpt, resume=resume,
                           progress=progress, positivity=controlled, rtol=rtol, atol=atol, budget=budget, context=what)
    info.update(method=scheme_name(scheme), dt=dt, max_dt=bound, slices=slices, cells=cells, flux=flux)
    if op.general is not None:
        info.update(summation=op.general.info["summation"], degree=op.general.info["degree"],
                    tolerance=op.general.info["tolerance"])
    return CausalDensitySolution(t=t_eval, s=slice_positions(slices), theta=cell_angles(cells), rho=rhos,
                                 mass=rhos.sum(axis=2) * (2 * np.pi / cells), model=model, info=info)
