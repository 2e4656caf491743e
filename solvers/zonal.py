"""Finite volumes in the polar angle for zonal densities on S^{d-1}, any d >= 2 (Q = K = I, V = ±I).

A zonal density depends on x only through s = <x, e> = cos θ, θ ∈ [0, π] the polar angle from a
fixed axis e; the dynamics keeps it zonal.  Writing x = cos θ e + sin θ u with u on the unit
sphere S^{d-2} of e^⊥, the interaction integrates in closed form over the equatorial sphere:

    k(θ, θ') = mean over u, u' of e^{β<x, x'>} = e^{β cos θ cos θ'} M_{d-1}(β sin θ sin θ'),
    M_k(a)   = Γ(k/2) (2/a)^{k/2-1} I_{k/2-1}(a) = 0F1(; k/2; a²/4)    (M_1 = cosh, M_2 = I_0),

the mean of e^{a<u,v>} over the unit sphere of R^k.  The polar angle of a token moves with

    u(θ) = ±(1/Z(θ)) ∫ k(θ, θ') [-sin θ cos θ' + R(a) cos θ sin θ'] dμ(θ'),   a = β sin θ sin θ',

R = M_k'/M_k = I_{k/2}(a)/I_{k/2-1}(a), Z = Φ(θ) = ∫ k(θ, θ') dμ(θ') (SA) or 1 (USA): this is
±(1/β) ∂_θ Φ (USA) and ±(1/β) ∂_θ log Φ (SA); at β = 0 both are -sin θ <m, e> (X = P_x m).

Grid: N cells [θ_{i-1/2}, θ_{i+1/2}] of width h = π/N, centres θ_i; the state is the cell masses
m_i (a probability vector), i.e. the measure Σ_i m_i (uniform measure on the ring θ = θ_i), whose
fields are exact finite sums with the kernel tables K_ij = k(θ_i, θ_j).  The cell measures
|C_i| = |S^{d-1}| (F(θ_{i+1/2}) - F(θ_{i-1/2})), F(θ) = I_{sin²(θ/2)}((d-1)/2, (d-1)/2) (regularised
incomplete beta: the fraction of the sphere within angle θ of e), give the density ρ_i = m_i/|C_i|.

Large β: the tables are stored as E_ij = K_ij e^{-β} ∈ (0, 1] (log M by scaled Bessel functions
``ive``, by the series 0F1 where those underflow, i.e. small a or large d), so USA velocities are
e^β (E∘G) m and SA velocities (E∘G) m / E m, G_ij the bracket above.  SA rows whose E m falls
below 1e-100 (mass far away at large β) are recomputed by log-sum-exp over log K_ij + log m_j;
elsewhere E_ij and m_j below 1e-150 are dropped (a relative error below N 1e-50; it keeps subnormal
numbers, a hundredfold slower, out of the matrix products).

Scheme: the circle solver's fluxes, applied to the masses m_i (m_i/h is the density in θ), with zero
flux through the poles:

    dm_i/dt = -(F_{i+1/2} - F_{i-1/2})/h,   F_{1/2} = F_{N+1/2} = 0.

- flux="upwind2" (default): second order.  Minmod states m^E_i = m_i + σ_i/2, m^W_i = m_i - σ_i/2 and
  face velocities extrapolated with the exact θ-derivative of the ring measure's field,
  u^{E,W}_i = u_i ± (h/2) u'_i (clipped to the speed bound); F_{i+1/2} = m^E_i (u^E_i)^+ + m^W_{i+1} (u^W_{i+1})^-,
  and the first-order flux at the faces of clusters narrower than about two cells (so a one-cell ring
  moves with its own velocity).  u' comes from the table ∂_θ(E∘G) = E∘(βG² + ∂_θG), ∂_θ k = β k G,
  ∂_θG = -cos θ cos θ' - R sin θ sin θ' + β R'(a) cos²θ sin²θ', R' = 1 - R² - (2ν+1) R/a.
- flux="upwind": the cell-centred velocity donor cell F_{i+1/2} = m_i u_i^+ + m_{i+1} u_{i+1}^-
  (first order; a one-cell cluster moves with its own velocity).

Both are evaluated by the circle's kernels on the mirror image (m, m reversed) over 2N cells of the
full circle, whose velocity is odd and slope even about the poles: minmod slopes vanish in the two polar
cells and the two polar fluxes cancel exactly.  SSP-RK3 in time, by default with steps from the
positivity rate of the current state (``kernels.circle.flux_pass``, as in ``circle.solve``); a given dt
runs fixed steps, at most the global bound dt sup|u| <= CFL h, CFL = 1/2 (upwind2) or 1 (upwind),
sup|u| <= ``speed_bound`` (1 for SA).  Mass is conserved to round-off.
"""
from __future__ import annotations

import functools

from collections.abc import Callable
from os import PathLike

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betainc, gammaln, hyp0f1, ive, logsumexp

from meanfield.budget import BUDGET
from meanfield.checks import as_beta, as_choice, as_count, as_density, as_float_array, as_positive, as_time_grid
from meanfield.checks import unit_mass
from meanfield.measures import sphere_area
from meanfield.models import SA, USA, as_model
from meanfield.theory import speed_bound

from . import stepping
from .kernels import gegenbauer
from .circle import CFL, isotropic_model
from .full_model import isotropic_equivalent
from .kernels.circle import FLUX_CODES, flux_pass
from .diffusion import no_diffusion
from .contract import CHECKPOINT_EVERY, DENSITY_SCHEME, Operator, scheme_name, upwind_matrix, with_scheme
from .results import ZonalSolution
from .stepping import TIME_STEP, Checkpoint, integrate, positivity_step, takes_operator, with_tolerances

__all__ = ["solve", "ZonalOperator", "time_derivative", "velocity", "energy", "max_step", "step_cap",
           "resolve_summation",
           "polar_grid", "cell_measures", "cell_masses", "log_ring_mean"]

FLUXES = ("upwind2", "upwind")
DEFAULT_FLUX = "upwind2"
DEFAULT_CELLS = 512
MIN_CELLS = 8
SERIES_BELOW = 50.0     # log M_k(a) and R(a) by the series 0F1 for a < 50 (or where ive underflows)
LOG_SPACE_BELOW = 1e-100  # SA rows with E m below this (times the mass) go to log-sum-exp
FLUSH = 1e-150          # table entries and masses below this enter the sums as 0 (no subnormal arithmetic)
SUMMATIONS = ("auto", "fast", "direct")
SERIES_FLOOR = 1e-6     # the Gegenbauer series is used while e^{-2β} >= this (E m >= e^{-2β} M)


BESSEL_LIMIT = 2.0 ** 30  # scipy's ive (AMOS) returns NaN for arguments a >= 2^30


@functools.cache
def max_beta(d):
    """The largest β whose kernel tables K_ij = k(θ_i, θ_j) are finite on S^{d-1}: the tables need
    log M_{d-1}(a) for every a = β sin θ sin θ' in [0, β], so β stays below 2^30 (the Bessel
    functions' argument limit) and, in high dimension, below the first a where neither ive nor the
    series 0F1 represents log M (about 40 √d for d >= 10^4: d = 10^6 allows β <= 3.7e4).

    Example: ``max_beta(3)`` is 2^30 (1.07e9) up to the scan's resolution."""
    a = np.geomspace(1e-3, BESSEL_LIMIT * (1 - 1e-9), 3000)
    with np.errstate(all="ignore"):
        log_m, ratio = _log_ring_mean_and_ratio(0.5 * (d - 3), a)
    bad = np.flatnonzero(~(np.isfinite(log_m) & np.isfinite(ratio)))
    return float(a[bad[0] - 1] if bad.size else a[-1])


def _check_model(model, d=None):
    """The model checked as for the circle solver, and its β within ``max_beta(d)`` (when d is given);
    Q^T K = c I (c >= 0), V = ±I as the isotropic model at β' = cβ (``full_model.isotropic_equivalent``),
    the only weights under which a zonal density stays zonal (V = v I with |v| != 1 is V = ±I in the
    time |v| t)."""
    model = as_model(model)
    sizes = {getattr(model, n).shape[0] for n in "QKV" if isinstance(getattr(model, n), np.ndarray)}
    reduced = isotropic_equivalent(model, d if d is not None else sizes.pop() if sizes else 3)
    if reduced is None:
        raise ValueError(f"the zonal solver treats Q^T K = c I (c >= 0) and V = ±I: under other weights a zonal "
                         f"density does not stay zonal (V = v I with |v| != 1 is V = ±I with time rescaled by "
                         f"|v|); got {model!r} (use sphere.solve or circle.solve for general Q, K, V)")
    return isotropic_model(reduced, "zonal", " (zonal densities stay zonal only then)",
                           max_beta=np.inf if d is None else max_beta(d),
                           limit=f" in dimension d = {d} (its kernel tables overflow beyond)")

def polar_grid(cells=DEFAULT_CELLS):
    r"""The uniform grid of polar angles [0, π]: cell centres and edges.

    .. math::

        \theta_i = \left(i + \tfrac12\right) \frac{\pi}{N}, \qquad
        \theta_{i \pm 1/2} = \left(i + \tfrac12 \pm \tfrac12\right) \frac{\pi}{N}.

    Parameters
    ----------
    cells : int
        N >= 8 (default 512).

    Returns
    -------
    centres : ndarray, shape (N,)
    edges : ndarray, shape (N + 1,)

    Examples
    --------
    >>> from meanfield.solvers import zonal
    >>> centres, edges = zonal.polar_grid(8)
    >>> centres.shape, float(edges[0]), float(edges[-1])
    ((8,), 0.0, 3.141592653589793)
    """
    cells = _check_cells(cells)
    edges = np.linspace(0.0, np.pi, cells + 1)
    return (np.arange(cells) + 0.5) * (np.pi / cells), edges


def cell_measures(d, cells=DEFAULT_CELLS):
    r"""Surface measures of the polar-angle cells on S^{d-1}, summing to |S^{d-1}|.

    .. math::

        |C_i| = \sigma\{x \in S^{d-1} : \theta(x) \in [\theta_{i-1/2}, \theta_{i+1/2}]\},
        \qquad F(\theta) = I_{\sin^2(\theta/2)}(a, a), \quad a = \tfrac{d-1}{2},

    F the fraction of the sphere within angle θ of the pole (a regularised incomplete beta
    function), and 1 - I_{cos²(θ/2)}(a, a) on the southern half, so that cells near either pole
    keep full relative accuracy.  They underflow to 0 only where |C_i| < 1e-308 (e.g. d = 128
    within 0.003 rad of a pole); for d > 350 |S^{d-1}| itself underflows, and so do all |C_i| (the
    solver works with the fractions |C_i|/|S^{d-1}|).

    Parameters
    ----------
    d : int
        Ambient dimension, d >= 2.
    cells : int
        N >= 8.

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import zonal
    >>> bool(np.isclose(zonal.cell_measures(3, 64).sum(), 4 * np.pi))
    True
    """
    d = as_count(d, "d", minimum=2)
    return sphere_area(d) * _cell_fractions(d, cells)


def _cell_fractions(d, cells):
    """|C_i| / |S^{d-1}| (kept apart: |S^{d-1}| itself underflows for d > 350)."""
    _, edges = polar_grid(cells)
    a = 0.5 * (d - 1)
    north = betainc(a, a, np.sin(0.5 * edges) ** 2)        # fraction within angle θ of e
    south = betainc(a, a, np.cos(0.5 * edges) ** 2)        # fraction beyond angle θ
    upper = edges[1:] <= 0.5 * np.pi
    return np.maximum(np.where(upper, north[1:] - north[:-1], south[:-1] - south[1:]), 0.0)


def log_ring_mean(k, a):
    r"""log M_k(a), the log of the mean of e^{a<u, v>} over u uniform on the unit sphere of R^k.

    .. math::

        M_k(a) = \Gamma(k/2) \left(\frac{2}{a}\right)^{k/2 - 1} I_{k/2 - 1}(a)
               = {}_0F_1\!\left(; \tfrac{k}{2}; \tfrac{a^2}{4}\right), \qquad M_k(0) = 1,

    by scaled Bessel functions for a >= 50 and the series where those underflow or a is small
    (relative accuracy ~1e-13).

    Parameters
    ----------
    k : int
        Dimension of the ring's sphere, k >= 1.
    a : float or array_like
        a >= 0.

    Returns
    -------
    ndarray
        log M_k(a), shaped like a.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import zonal
    >>> bool(np.isclose(zonal.log_ring_mean(3, 2.0), np.log(np.sinh(2.0) / 2.0)))   # M_3(a) = sinh(a)/a
    True
    """
    k = as_count(k, "k")
    a = np.asarray(as_float_array(a, "a"))
    return _log_ring_mean_and_ratio(0.5 * k - 1.0, a)[0]


def _log_ring_mean_and_ratio(nu, a):
    """(log M(a), R(a) = M'(a)/M(a) = I_{ν+1}(a)/I_ν(a)) for ν = k/2 - 1, elementwise."""
    shape = np.shape(a)
    a = np.asarray(a, dtype=np.float64).ravel()
    log_m = np.empty_like(a)
    ratio = np.empty_like(a)
    big = a >= SERIES_BELOW
    if np.any(big):
        ab = a[big]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            i0, i1 = ive(nu, ab), ive(nu + 1.0, ab)
            lb = gammaln(nu + 1.0) + nu * np.log(2.0 / ab) + np.log(i0) + ab
            rb = i1 / i0
        good = np.isfinite(lb) & np.isfinite(rb) & (i0 > 0)
        idx = np.flatnonzero(big)
        log_m[idx[good]], ratio[idx[good]] = lb[good], rb[good]
        big[idx[~good]] = False                       # ive underflowed (ν >> a): use the series
    small = ~big
    if np.any(small):
        z = 0.25 * a[small] ** 2
        f0, f1 = hyp0f1(nu + 1.0, z), hyp0f1(nu + 2.0, z)
        log_m[small] = np.log(f0)
        ratio[small] = a[small] / (2.0 * nu + 2.0) * f1 / f0
    return log_m.reshape(shape), ratio.reshape(shape)


def _check_cells(cells):
    cells = as_count(cells, "cells")
    if cells < MIN_CELLS:
        raise ValueError(f"cells must be >= {MIN_CELLS}; got {cells}")
    return cells


class ZonalOperator(Operator):
    r"""The semi-discrete finite-volume system of ``solve``: cell masses m_i of a zonal density.

    .. math::

        \frac{dm_i}{dt} = -\frac{F_{i+1/2} - F_{i-1/2}}{h}, \qquad h = \pi / N,

    the circle scheme on the mirror image (m, m reversed) over the full circle of 2N cells, so the
    fluxes through both poles vanish; the engine contract of ``meanfield.solvers.contract``, with
    the kernel tables (summation "direct") or the Gegenbauer series ("fast") of one model,
    dimension, grid and flux.  ``op(m)`` returns (dm/dt, rate).

    Parameters
    ----------
    model : SA or USA
        Isotropic (``solve``'s check).
    d : int
        Ambient dimension.
    cells : int
        N.
    flux : {"upwind2", "upwind"}
    summation : {"auto", "fast", "direct"}
        "auto": ``resolve_summation``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> op = zonal.ZonalOperator(mf.SA(2.0), 3, 64, "upwind")
    >>> m = zonal.cell_masses(lambda s: 1 + 0.5 * s, 3, 64)
    >>> dm, rate = op(m)
    >>> bool(abs(dm.sum()) < 1e-15), bool(np.allclose(-op.linear_part(m) @ m, dm, rtol=0, atol=1e-15))
    (True, True)
    """

    positive = True

    def __init__(self, model: SA | USA, d: int, cells: int, flux: str = DEFAULT_FLUX, summation: str = "auto"):
        summation = resolve_summation(model, summation)
        self.model, self.d, self.cells, self.flux = model, d, cells, flux
        self.theta, _ = polar_grid(cells)
        self.h = np.pi / cells
        self.cos = np.cos(self.theta)
        self.bound = speed_bound(model)
        self._work, self._zeros = np.empty((5, 2 * cells)), np.zeros(2 * cells)
        self.log_space_cells = 0
        self.summation = summation
        if summation == "fast":
            self.series = gegenbauer.Series(model.beta, d, self.theta)
            self.degree = self.series.degree
        else:
            self._tables()

    def _tables(self):
        """The O(N²) kernel tables (summation "direct"; also where the series falls below its round-off)."""
        model, d, flux = self.model, self.d, self.flux
        self.summation, self.degree = "direct", None
        beta = model.beta
        c, s = self.cos, np.sin(self.theta)
        nu = 0.5 * (d - 3)
        a = beta * np.outer(s, s)
        log_m, ratio = _log_ring_mean_and_ratio(nu, a)
        self.log_k = beta * np.outer(c, c) + log_m          # log K_ij
        table = np.exp(self.log_k - beta)                   # E_ij = K_ij e^{-β}
        self.table = np.where(table >= FLUSH, table, 0.0)
        self.bracket = -np.outer(s, c) + ratio * np.outer(c, s)   # G_ij
        self.moved = self.table * self.bracket              # E∘G
        if flux == "upwind2":
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio_over_a = np.where(a > 0, ratio / a, 1.0 / (2.0 * nu + 2.0))
            ratio_slope = 1.0 - ratio ** 2 - (2.0 * nu + 1.0) * ratio_over_a          # R'(a)
            bracket_slope = -np.outer(c, c) - ratio * np.outer(s, s) + beta * ratio_slope * np.outer(c * c, s * s)
            self.moved_slope = self.table * (beta * self.bracket ** 2 + bracket_slope)   # ∂_θ(E∘G) = E∘(βG² + ∂_θG)

    def velocity(self, m):
        """u_i, the polar-angle velocity at the cell centres of the ring measure Σ_j m_j."""
        return self._fields(m, slope=False)[0]

    def velocity_and_slope(self, m):
        """(u_i, u'_i, bound): the centre velocities, their θ-derivatives (the derivative of the ring
        measure's field, its own cell included) and the speed bound.  USA: u' = ±e^β ∂_θ(E∘G) m.
        SA: u = ±N/Z, u' = ±N'/Z ∓ β u² (Z' = β N, since ∂_θ k = β k G); u' = 0 on log-space rows."""
        return self._fields(m, slope=True)

    def _fields(self, m, slope):
        model = self.model
        if self.summation == "fast":      # E m >= e^{-2β} M >= 1e-6 M there (``resolve_summation``): no log space
            den, num, dnum = self.series.fields(m, slope)
            if model.normalised and not np.all(den >= LOG_SPACE_BELOW * m.sum()):
                self._tables()            # the series is below its round-off somewhere: the tables from now on
        if self.summation != "fast":
            m_sum = np.where(m >= FLUSH, m, 0.0)     # dropped terms: < N 1e-150 E m / 1e-100, see below
            num = self.moved @ m_sum
            dnum = self.moved_slope @ m_sum if slope else None
        if not model.normalised:
            scale = model.sign * np.exp(model.beta)
            return scale * num, (scale * dnum if slope else None), self.bound * m.sum()
        if self.summation != "fast":
            den = self.table @ m_sum
        with np.errstate(invalid="ignore", divide="ignore"):
            u = num / den
            du = dnum / den - model.beta * u * u if slope else None
        bad = np.flatnonzero(~(den >= LOG_SPACE_BELOW * m.sum()))
        if bad.size:
            self.log_space_cells = max(self.log_space_cells, bad.size)
            with np.errstate(divide="ignore"):
                logw = self.log_k[bad] + np.log(m)[None, :]
            w = np.exp(logw - logsumexp(logw, axis=1, keepdims=True))
            u[bad] = np.sum(w * self.bracket[bad], axis=1)
            if slope:
                du[bad] = 0.0
        return model.sign * u, (model.sign * du if slope else None), self.bound

    def __call__(self, m):
        """dm/dt and the positivity rate: the circle scheme on the mirror image (m, m reversed) over the full
        circle of 2N cells, whose velocity is odd and slope even about the poles: the fluxes through both
        poles vanish exactly."""
        n = self.cells
        out = np.empty(2 * n)
        both = np.concatenate((m, m[::-1]))
        if self.flux == "upwind2":
            u, du, bound = self.velocity_and_slope(m)
            du = np.concatenate((du, du[::-1]))
        else:
            u, du, bound = self.velocity(m), self._zeros, 0.0
        rate = flux_pass(both, np.concatenate((u, -u[::-1])), du, du, bound, self.h, FLUX_CODES[self.flux], 0.0,
                         self._work, out)
        return out[:n], rate

    def energy(self, m):
        """E_β = (1/2β) Σ_ij m_i m_j K_ij = e^β m^T E m/(2β); at β = 0 the limit (1/2)(Σ_i m_i cos θ_i)²."""
        beta = self.model.beta
        if beta == 0:
            return 0.5 * float(m @ self.cos) ** 2
        quadratic = self.series.quadratic(m) if self.summation == "fast" else m @ self.table @ m
        return float(np.exp(beta + np.log(quadratic) - np.log(2.0 * beta)))

    def step_bound(self):
        """``max_step(model, cells, flux)``."""
        return max_step(self.model, self.cells, self.flux)

    def measure(self, m):
        """The polar angles θ_i of the rings, (N, 1), and their masses m_i (a measure on [0, π])."""
        return self.theta[:, None], m

    def linear_part(self, m):
        """A with -A m = dm/dt of flux="upwind" for the field frozen at m (``contract.upwind_matrix``:
        faces between neighbouring rings, none through the poles); ``ones @ A == 0``."""
        left = np.arange(self.cells - 1)
        u = self.velocity(m)
        return upwind_matrix(left, left + 1, u[:-1], u[1:], np.ones(left.size), np.full(self.cells, self.h))


def cell_masses(f0, d, cells=None):
    r"""Cell masses, a probability vector, of a zonal profile on S^{d-1}.

    .. math::

        m_i = \frac{f_i |C_i|}{\sum_j f_j |C_j|}.

    Parameters
    ----------
    f0 : callable or array_like
        A profile f(s), a callable of s = cos θ evaluated at the cell centres, or the cell
        densities f_i against surface measure.
    d : int
        Ambient dimension, d >= 2.
    cells : int, optional
        Number of cells for a callable (default 512; an array sets it).

    Returns
    -------
    ndarray, shape (N,)

    Raises
    ------
    ValueError
        For negative or non-finite densities, a shape mismatch, or a profile without mass.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import zonal
    >>> m = zonal.cell_masses(lambda s: np.ones_like(s), 3, cells=8)   # uniform on S^2: m_i = |C_i| / 4π
    >>> bool(np.allclose(m, zonal.cell_measures(3, 8) / (4 * np.pi)))
    True
    """
    d = as_count(d, "d", minimum=2)
    if callable(f0):
        cells = _check_cells(DEFAULT_CELLS if cells is None else cells)
        s = np.cos(polar_grid(cells)[0])
        values = as_float_array(f0(s), "f0(s)")
        if values.shape != (cells,):
            raise ValueError(f"f0(s) must return one density per cell centre, shape ({cells},); got {values.shape}. "
                             f"f0 is called with s = cos θ at the cell centres, shape ({cells},)")
        f = as_density(values, "f0(s)")
    else:
        f = as_density(f0, "f0")
        _check_cells(f.size)
        if cells is not None and _check_cells(cells) != f.size:
            raise ValueError(f"f0 has {f.size} cell values but cells = {cells}; leave cells=None (the array sets "
                             f"the grid) or pass a callable of s")
    fractions = _cell_fractions(d, f.size)
    if not np.any((f > 0) & (fractions > 0)):
        raise ValueError(f"f0 has no mass on S^{d - 1}: it vanishes wherever the cell measures are positive")
    return unit_mass(f, fractions, "f0") * fractions


def max_step(model, cells=DEFAULT_CELLS, flux=DEFAULT_FLUX):
    r"""The largest fixed step of ``solve``: the positivity bound of SSP-RK3 for unit mass.

    .. math::

        \Delta t \le \mathrm{CFL} \cdot \frac{h}{\text{speed\_bound(model)}}, \qquad h = \frac{\pi}{N},

    CFL = 1/2 (upwind2: a face value is at most twice the cell's) or 1 (upwind), as on the circle.

    Parameters
    ----------
    model : SA or USA
        Q^T K = I, V = ±I.
    cells : int
    flux : {"upwind2", "upwind"}

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> bool(np.isclose(zonal.max_step(mf.SA(1.0), 512, "upwind"), np.pi / 512))
    True
    """
    model = _check_model(model)
    as_choice(flux, "flux", FLUXES)
    return float(CFL[flux] * (np.pi / _check_cells(cells)) / speed_bound(model))


def resolve_summation(model, summation="auto"):
    """The field's summation of the zonal solver.

    "direct": the O(N²) kernel tables, with log-sum-exp rows for SA where E m is tiny; "fast":
    the truncated Gegenbauer series (``gegenbauer``, O(N L)).  "auto" takes the series while
    e^{-2β} >= ``SERIES_FLOOR`` (β <= 6.9), where E m >= e^{-2β} M keeps SA's quotients accurate to
    1e-10 relative without log space.

    Parameters
    ----------
    model : SA or USA
    summation : {"auto", "fast", "direct"}

    Returns
    -------
    str
        "fast" or "direct".

    Raises
    ------
    ValueError
        For "fast" beyond β = 6.9, or another summation.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> zonal.resolve_summation(mf.SA(2.0)), zonal.resolve_summation(mf.SA(20.0))
    ('fast', 'direct')
    """
    as_choice(summation, "summation", SUMMATIONS)
    fits = np.exp(-2.0 * model.beta) >= SERIES_FLOOR
    if summation == "fast" and not fits:
        raise ValueError(f"summation='fast' needs beta <= {-0.5 * np.log(SERIES_FLOOR):.3g} (E m can fall below "
                         f"the series' round-off otherwise); got beta = {model.beta:g}: use 'direct' or 'auto'")
    if summation == "auto":
        return "fast" if fits else "direct"
    return summation


def step_cap(model, cells=DEFAULT_CELLS, flux=DEFAULT_FLUX):
    r"""The default largest controlled step of ``solve``.

    .. math::

        \Delta t_{\max} = \max\left(\texttt{max\_step},\ \frac{\texttt{TIME\_STEP}}{\text{speed\_bound(model)}}\right),

    as ``circle.step_cap`` (it binds only where the speeds are small).

    Parameters
    ----------
    model : SA or USA
    cells : int
    flux : {"upwind2", "upwind"}

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> zonal.step_cap(mf.SA(1.0)) >= zonal.max_step(mf.SA(1.0))
    True
    """
    return max(max_step(model, cells, flux), TIME_STEP / speed_bound(_check_model(model)))


def _check_masses(masses, name="masses"):
    m = as_density(masses, name)
    _check_cells(m.size)
    return m


def velocity(model, masses, d):
    r"""Polar-angle velocity at the cell centres of the ring measure Σ_j m_j.

    .. math::

        u_i = \langle X[\mu](x), e_\theta \rangle \ \text{at} \ \theta(x) = \theta_i,
        \qquad \mu = \sum_j m_j \,\sigma_{\theta_j},

    σ_θ the uniform probability on the ring of polar angle θ.

    Parameters
    ----------
    model : SA or USA
        Q^T K = I, V = ±I.
    masses : array_like, shape (N,)
        Cell masses (not renormalised).
    d : int
        Ambient dimension.

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> m = zonal.cell_measures(3, 64) / (4 * np.pi)
    >>> u = zonal.velocity(mf.SA(2.0), m, 3)             # uniform: at rest up to the O(h²) quadrature error
    >>> float(np.abs(u).max()) < 1e-4, float(np.abs(u + u[::-1]).max()) < 1e-15    # and odd about the equator
    (True, True)
    """
    d = as_count(d, "d", minimum=2)
    model = _check_model(model, d)
    m = _check_masses(masses)
    return ZonalOperator(model, d, m.size, "upwind", "direct").velocity(m)


def time_derivative(model, masses, d, flux=DEFAULT_FLUX):
    r"""dm/dt of the semi-discrete scheme for the cell masses on S^{d-1}.

    .. math::

        \frac{dm_i}{dt} = -(F_{i+1/2} - F_{i-1/2}),

    F the mass fluxes through the ring faces (module docstring).

    Parameters
    ----------
    model : SA or USA
    masses : array_like, shape (N,)
    d : int
    flux : {"upwind2", "upwind"}

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> m = zonal.cell_masses(lambda s: 1 + 0.5 * s, 4, cells=64)
    >>> bool(abs(zonal.time_derivative(mf.SA(2.0), m, 4).sum()) < 1e-15)    # mass is conserved
    True
    """
    d = as_count(d, "d", minimum=2)
    model = _check_model(model, d)
    as_choice(flux, "flux", FLUXES)
    m = _check_masses(masses)
    return ZonalOperator(model, d, m.size, flux, "direct")(m)[0]


def energy(masses, beta, d):
    r"""E_β of the ring measure Σ_i m_i σ_{θ_i}.

    .. math::

        E_\beta = \frac{1}{2\beta} \sum_{i,j} m_i m_j \int\!\!\int e^{\beta \langle x, y\rangle}
        \, d\sigma_{\theta_i}(x) \, d\sigma_{\theta_j}(y),

    equal to ``meanfield.energy`` of tokens spread uniformly over the rings, in the limit of many
    tokens per ring; at β = 0 the limit (1/2)|mean|².

    Parameters
    ----------
    masses : array_like, shape (N,)
    beta : float
        β >= 0.
    d : int

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import zonal
    >>> m = np.zeros(512); m[0] = 1.0                      # one ring next to the pole
    >>> bool(np.isclose(zonal.energy(m, 2.0, 3), np.exp(2.0) / 4, rtol=1e-3))
    True
    """
    m = _check_masses(masses)
    d = as_count(d, "d", minimum=2)
    return ZonalOperator(_check_model(SA(as_beta(beta)), d), d, m.size, "upwind", "direct").energy(m)


def solve(model: SA | USA, f0: Callable | ArrayLike, t_eval: ArrayLike, d: int, *, cells: int | None = None,
          flux: str = DEFAULT_FLUX, scheme: str | type | object = DENSITY_SCHEME, dt: float | None = None,
          max_dt: float | None = None, cfl: float = stepping.CFL, summation: str = "auto", diffusion: float = 0.0,
          energy: bool = True,
          progress: bool | None = None, checkpoint: str | PathLike | None = None,
          checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, rtol: float = stepping.IMPLICIT_RTOL,
          atol: float = stepping.IMPLICIT_ATOL) -> ZonalSolution:
    r"""Solve the mean-field equation for a zonal density on S^{d-1}; return a ZonalSolution.

    A density that depends on the polar angle θ = arccos <x, e> only stays so, and its cell masses
    on a grid of θ evolve by

    .. math::

        \partial_t f + \frac{1}{\sin^{d-2}\theta} \partial_\theta\!\left(\sin^{d-2}\theta \, f \, u[f]\right) = 0,

    u the polar-angle velocity (``velocity``), by finite volumes and SSP-RK3.

    Parameters
    ----------
    model : SA or USA
        With Q^T K = I and V = ±I, any β >= 0 (USA: β <= 709.78, where e^β overflows).
    f0 : callable or array_like
        The zonal profile: a callable of s = cos θ = <x, e> (evaluated at the cell centres) or the
        cell densities f_i against surface measure; normalised to unit mass.
    t_eval : array_like
        Output times, increasing.
    d : int
        Ambient dimension (the sphere is S^{d-1}), d >= 2.
    cells : int, optional
        Number of polar-angle cells (default 512 for a callable; an array sets it).
    flux : {"upwind2", "upwind"}
        The circle solver's fluxes: second-order "upwind2" (default) or the first-order
        cell-centred donor cell "upwind".
    scheme : str, Scheme class or instance
        The time scheme (``stepping.integrate``), default "ssprk3"; with ``dt=None`` its steps are
        positivity-controlled.
    dt : float, optional
        None (default): SSP-RK3 steps from the actual speeds, h_k = min(max_dt, cfl / rate(m_k)),
        rate the forward-Euler positivity rate of the current state, as in ``circle.solve``.  A
        number: fixed steps of at most dt, refused above ``max_step(model, cells, flux)``.
    max_dt : float, optional
        Largest controlled step (default ``step_cap(model, cells, flux)``).
    cfl : float
        The fraction of the positivity bound 1/rate a controlled step takes.
    summation : {"auto", "fast", "direct"}
        The truncated Gegenbauer series (``gegenbauer``, O(N L)) or the O(N²) kernel tables (the
        reference path); "auto" takes the series for β <= 6.9 (``resolve_summation``).
    diffusion : float
        Only 0 (the default): this solver has no diffusion term, and D > 0 is refused
        (``circle.solve`` and ``sphere.solve`` take one).
    energy : bool
        Compute the discrete E_β at the output times (else ``.energy`` is None).
    progress : bool or None
    checkpoint : str or path, optional
    checkpoint_every : int
    resume : bool
        As for ``circle.solve``: periodic checkpoints that a rerun with ``resume=True`` continues
        bit for bit.
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
    ZonalSolution
        ``t``, ``theta`` (N,) cell centres, ``edges`` (N+1,), ``areas`` (N,) cell measures
        |C_i|, ``masses`` (m, N), ``rho`` (m, N) = masses/areas, ``mass`` (m,), ``energy`` (m,)
        the discrete E_β, ``d``, ``model``, ``info`` (flux, dt, max_dt, cells, nsteps, nfev,
        nrejected, hmin, hmax, summation, degree, log_space_cells).

    Raises
    ------
    ValueError
        For a non-isotropic model, β beyond what the tables of dimension d represent, a bad
        profile, times or option, or a fixed-step run that does not fit in ``budget``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> sol = zonal.solve(mf.SA(2.0), lambda s: 1 + 0.5 * s, [0.0, 1.0], d=16, cells=64, progress=False)
    >>> bool(abs(sol.mass[-1] - 1) < 1e-13 and sol.masses.min() >= 0 and sol.energy[-1] >= sol.energy[0])
    True
    """
    t_eval = as_time_grid(t_eval)
    d = as_count(d, "d", minimum=2)
    model = _check_model(model, d)
    as_choice(flux, "flux", FLUXES)
    no_diffusion(diffusion, "zonal.solve")
    m0 = cell_masses(f0, d, cells)
    cells = m0.size
    op = ZonalOperator(model, d, cells, flux, summation)
    implicit = takes_operator(scheme)
    if dt is None:
        max_dt = step_cap(model, cells, flux) if max_dt is None else as_positive(max_dt, "max_dt")
        rhs, cap = op, max_dt
    elif implicit:
        max_dt, rhs, cap = max_step(model, cells, flux), op, as_positive(dt, "dt")
    else:
        max_dt = max_step(model, cells, flux)
        dt = positivity_step(dt, max_dt, f"{model!r} with {cells} cells")
        rhs, cap = (lambda m: op(m)[0]), dt
    what = f"this solve of {model!r} on {cells} cells to t = {t_eval[-1]:g}"
    meta = dict(solver="zonal", model=model.to_dict(), d=d, flux=flux, dt=dt, max_dt=max_dt, cfl=cfl, cells=cells,
                summation=op.summation)
    meta = with_scheme(with_tolerances(meta, scheme, rtol, atol), scheme)
    ckpt = None if checkpoint is None else Checkpoint(checkpoint, every=checkpoint_every, meta=meta,
                                                      sizes=np.ones(m0.size))
    masses, info = integrate(rhs, m0, t_eval, scheme=scheme, dt=cap, checkpoint=ckpt, resume=resume,
                             progress=progress, positivity=dt is None, cfl=cfl, context=what, rtol=rtol, atol=atol,
                             budget=budget)
    info.update(method=scheme_name(scheme), flux=flux, dt=dt, max_dt=max_dt, cells=cells,
                log_space_cells=op.log_space_cells,
                summation=op.summation, degree=op.degree)
    theta, edges = polar_grid(cells)
    return ZonalSolution(t=t_eval, theta=theta, edges=edges, areas=cell_measures(d, cells), masses=masses,
                         mass=masses.sum(axis=1), energy=np.array([op.energy(m) for m in masses]) if energy else None,
                         d=d,
                         model=model, info=info)
