"""Fast summation of the attention kernel on S^1 and S^2 (Q^T K = I, V = ±I).

The shifted kernel has the expansions (Fourier on S^1, Funk–Hecke on S^2)

    e^{β(cos(θ-φ) - 1)} = sum_{k in Z} κ_k e^{ik(θ-φ)},          κ_k = e^{-β} I_k(β)
    e^{β(<x,y> - 1)}    = sum_{l >= 0} κ_l (2l+1) P_l(<x,y>),  κ_l = e^{-β} i_l(β)

with κ > 0 and sum_k κ_k = sum_l (2l+1) κ_l = 1.  Truncating where the tail of that sum
drops below ``TRUNCATION`` = 1e-17 (degree K, L ≈ 8.6 √β + O(1)) and using the transforms of
``meanfield.solvers.kernels.harmonics``, the potentials

    S_ic = sum_j W_jc e^{β(<x_i, y_j> - 1)},   W = (w, w y_1, ..., w y_d)   (columns c = 0..d)

cost O((n + m) K d) on S^1 and O((n + m) L² d) on S^2; S_i0 = e^{-β} Φ(x_i) and
S_i,1.. = e^{-β} G(x_i), G = sum_j w_j e^{β<x,y_j>} y_j, so that

    log Φ = log S_0 + β,   X = ±P_x G / Φ (SA)   or   X = ±e^β P_x G (USA).

Accuracy.  Every term of the expansion is bounded by the kernel at <x,y> = 1, so the
truncated sum is evaluated with an absolute error of at most δ sum_j |W_jc|, with

    δ = (L + 1 + 3β) eps + TRUNCATION:

round-off grows with the number of modes, and the kernel itself is ill-conditioned: an
O(eps) change of <x, y> changes e^{β<x,y>} by β eps relative (direct summation shares that
term).  Measured against extended-precision sums (clusters of any width, β up to 1000) the
error stays below (0.35 (L + 1) + 1.2 β) eps; tests/test_spectral.py checks the bound.
With W_tot = sum_j w_j this gives, to first order in δ,

    |log Φ_fast - log Φ| <= δ W_tot / S_0,
    |X_fast - X| <= (1 + √d) δ W_tot / S_0          (SA; |X| <= 1)
    |X_fast - X| <= √d δ W_tot / S_0 · Φ            (USA; |X| <= Φ)

i.e. a relative error (in the field's natural scale) of ε_i = (1 + √d) δ W_tot / (S_0 - δ W_tot).
Where Φ(x_i) is small compared with the total mass (SA at large β away from the clusters:
S_0 can be as small as e^{-2β} W_tot) ε_i exceeds ``RTOL``, and those targets — only those —
are recomputed by direct log-sum-exp summation over all sources (``particles.attention_field``).
"""
from .. import _numba_env  # noqa: F401

from functools import lru_cache

import numpy as np

from meanfield.geometry import normalise

from . import direct as kernels, harmonics

TRUNCATION = 1e-17
RTOL = 1e-10
EPS = np.finfo(float).eps
#: beyond this β the sums' round-off 3βε (``roundoff``) exceeds RTOL, so no sum would be trusted
#: (and the degree ~12√β makes the transforms needlessly slow): fast summation is not offered
MAX_BETA = RTOL / (3 * EPS)

# Cost model (one core of the reference machine), used by summation="auto": seconds per
# (point, mode) of an analysis or synthesis with 4 weight columns, and per call.
FAST_MODE = {2: 1.5e-9, 3: 2.0e-9}
FAST_OVERHEAD = 2e-4


def supports(model, d):
    """Whether fast summation applies: Q^T K = I, V = ±I on S^1 (d = 2) and S^2 (d = 3), β <= MAX_BETA.

    Parameters
    ----------
    model : meanfield.models.Model
    d : int
        The dimension.

    Returns
    -------
    bool

    Examples
    --------
    >>> from meanfield.models import SA
    >>> from meanfield.solvers.kernels import spectral
    >>> bool(spectral.supports(SA(beta=1.0), 3)), spectral.supports(SA(beta=1.0), 4)
    (True, False)
    """
    return d in (2, 3) and model.is_isotropic and model.beta <= MAX_BETA


@lru_cache(maxsize=64)
def kernel_coefficients(beta, d):
    r"""κ_0..κ_K of e^{β(<x,y>-1)} (d = 2: e^{-β} I_k(β); d = 3: e^{-β} i_l(β)), truncated at the
    smallest degree whose tail sum_{k>K} (2κ_k resp. (2l+1)κ_l) is <= TRUNCATION.

    Miller's algorithm: the three-term recurrences I_{k-1} = I_{k+1} + (2k/β) I_k and
    i_{l-1} = i_{l+1} + ((2l+1)/β) i_l, run downwards from a degree far beyond the truncation
    (where they are stable) as the ratios ρ_k = κ_k/κ_{k-1} = 1/(c_k + ρ_{k+1}), give κ up to
    a factor, fixed by the identity at <x,y> = 1: κ_0 + 2 sum κ_k = 1 resp. sum (2l+1) κ_l = 1.

    .. math::

        e^{\beta(\cos\theta - 1)} = \kappa_0 + 2 \sum_{k \ge 1} \kappa_k \cos k\theta \ (S^1), \qquad
        e^{\beta(\langle x, y \rangle - 1)} = \sum_{l \ge 0} (2l + 1)\, \kappa_l P_l(\langle x, y \rangle) \ (S^2).

    Parameters
    ----------
    beta : float
        0 <= β <= ``MAX_BETA``.
    d : {2, 3}
        The dimension.

    Returns
    -------
    ndarray, shape (K + 1,)
        κ_0..κ_K (read-only).

    Raises
    ------
    ValueError
        For β > ``MAX_BETA``.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import ive
    >>> from meanfield.solvers.kernels import spectral
    >>> kappa = spectral.kernel_coefficients(1.0, 2)
    >>> kappa.size, bool(np.allclose(kappa, ive(np.arange(kappa.size), 1.0)))
    (16, True)
    """
    if beta == 0:
        return np.ones(1)
    if not beta <= MAX_BETA:
        raise ValueError(f"beta = {beta:g} is beyond the fast summation's range beta <= {MAX_BETA:.4g} (its "
                         f"round-off 3 beta eps would exceed its tolerance); use summation='direct'")
    top = int(12 * np.sqrt(beta) + 2 * beta ** (1 / 3) + 64)
    shift = 0.0 if d == 2 else 0.5
    ratio = np.zeros(top + 2)
    for k in range(top, 0, -1):
        ratio[k] = 1.0 / (2 * (k + shift) / beta + ratio[k + 1])
    t = np.cumprod(np.concatenate([[1.0], ratio[1:top + 1]]))
    k = np.arange(top + 1)
    weight = (np.where(k == 0, 1.0, 2.0) if d == 2 else 2 * k + 1) * t
    total = weight.sum()
    tail = np.cumsum(weight[::-1])[::-1] / total          # tail[k] = sum_{j >= k} weight_j
    degree = int(np.argmax(tail <= TRUNCATION)) - 1
    out = t[:degree + 1] / total
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def table_weights(beta):
    r"""ε_m κ_l for the columns of ``harmonics.sphere_basis`` at the truncation degree L of β on S^2,
    so that Σ_j W_jc e^{β(<x_i, y_j> - 1)} = (T_x diag(ε_m κ_l) T_y^T W)_ic.

    .. math::

        \sum_j W_{jc} e^{\beta(\langle x_i, y_j \rangle - 1)}
        = \big(T_x \operatorname{diag}(\varepsilon_m \kappa_l)\, T_y^T W\big)_{ic},
        \qquad \varepsilon_0 = 1,\ \varepsilon_{m > 0} = 2.

    Parameters
    ----------
    beta : float

    Returns
    -------
    ndarray
        One weight per column of ``harmonics.sphere_basis`` (read-only).

    Examples
    --------
    >>> from meanfield.solvers.kernels import spectral
    >>> w = spectral.table_weights(1.0)
    >>> w.size == (spectral.degree(1.0, 3) + 1) ** 2
    True
    """
    kappa = kernel_coefficients(beta, 3)
    degrees, orders = harmonics.basis_indices(kappa.size - 1)
    out = np.where(orders == 0, 1.0, 2.0) * kappa[degrees]
    out.setflags(write=False)
    return out


def degree(beta, d):
    """Truncation degree K (S^1) or L (S^2) of the kernel's expansion (``kernel_coefficients``).

    Parameters
    ----------
    beta : float
    d : {2, 3}

    Returns
    -------
    int

    Examples
    --------
    >>> from meanfield.solvers.kernels import spectral
    >>> spectral.degree(0.0, 2), spectral.degree(1.0, 2), spectral.degree(100.0, 3) > 50
    (0, 15, True)
    """
    return kernel_coefficients(beta, d).size - 1


def kernel_sum(beta, x, y, W):
    r"""S (n, C) with S_ic = sum_j W_jc e^{β(<x_i, y_j> - 1)} for targets x (n, d), sources
    y (m, d), d in {2, 3}, and weights W (m, C) of any sign.

    .. math::

        S_{ic} = \sum_j W_{jc}\, e^{\beta(\langle x_i, y_j \rangle - 1)},

    in O((n + m) K^{d-1} C) operations through the kernel's expansion in harmonics of degree K.

    Parameters
    ----------
    beta : float
    x : ndarray, shape (n, d)
        Targets (unit vectors).
    y : ndarray, shape (m, d)
        Sources (unit vectors).
    W : ndarray, shape (m, C)
        Weights.

    Returns
    -------
    ndarray, shape (n, C)

    Raises
    ------
    ValueError
        For d not in {2, 3}.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels import spectral
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> S = spectral.kernel_sum(1.0, x, x, np.ones((2, 1)))
    >>> bool(np.allclose(S[:, 0], 1 + np.exp(-1.0)))
    True
    """
    d = x.shape[1]
    if d not in (2, 3):
        raise ValueError(f"fast summation needs points on S^1 or S^2 (d = 2 or 3); got d = {d}")
    kappa = kernel_coefficients(beta, d)
    x = np.ascontiguousarray(x, dtype=float)
    y = np.ascontiguousarray(y, dtype=float)
    W = np.ascontiguousarray(W, dtype=float)
    S = np.empty((x.shape[0], W.shape[1]))
    eps_m = np.where(np.arange(kappa.size) == 0, 1.0, 2.0)
    with kernels.threads_for(_transform_seconds(d, kappa.size - 1, x.shape[0] + y.shape[0], W.shape[1])):
        if d == 2:
            A = harmonics.circle_analysis(y, W, kappa.size - 1)
            A *= (eps_m * kappa)[:, None]
            harmonics.circle_synthesis(x, A, S)
        else:
            A = harmonics.sphere_analysis(y, W, kappa.size - 1)
            A *= (eps_m[:, None] * kappa[None, :])[:, :, None]
            harmonics.sphere_synthesis(x, A, S)
    return S


def roundoff(beta, d):
    r"""δ: the absolute error of kernel_sum per unit of sum_j |W_jc|.

    .. math::

        \delta = (K + 1 + 3\beta)\,\varepsilon + 10^{-17}.

    Parameters
    ----------
    beta : float
    d : {2, 3}

    Returns
    -------
    float

    Examples
    --------
    >>> from meanfield.solvers.kernels import spectral
    >>> bool(spectral.roundoff(1.0, 2) < 1e-14)
    True
    """
    return (degree(beta, d) + 1 + 3 * beta) * EPS + TRUNCATION


def attention_field(model, x, y, w, rtol=RTOL):
    r"""(X, log Φ, trusted) for targets x (B, n, d), sources y (B, m, d), weights w (B, m).

    ``trusted`` (B, n) is False where the error bound ε_i exceeds ``rtol``: the caller must
    recompute those targets directly (their X and log Φ here are placeholders).  The sums are
    those of the unit vectors x/|x|, y/|y| (inputs are unit vectors up to ``checks.UNIT_TOL``).

    .. math::

        X_i = \pm P_{x_i} \frac{\sum_j w_j e^{\beta \langle x_i, y_j \rangle} y_j}{\Phi_i}, \qquad
        \Phi_i = \sum_j w_j e^{\beta \langle x_i, y_j \rangle}

    (SA; USA without the division), the sums by ``kernel_sum``.

    Parameters
    ----------
    model : meanfield.models.Model
        Q^T K = I, V = ±I (``supports``).
    x : ndarray, shape (B, n, d)
        Targets, d in {2, 3}.
    y : ndarray, shape (B, m, d)
        Sources.
    w : ndarray, shape (B, m)
        Weights.
    rtol : float
        The relative error trusted.

    Returns
    -------
    X : ndarray, shape (B, n, d)
    log_phi : ndarray, shape (B, n)
    trusted : ndarray of bool, shape (B, n)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.models import SA
    >>> from meanfield.solvers.kernels import spectral
    >>> x = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> X, log_phi, trusted = spectral.attention_field(SA(beta=1.0), x, x, np.full((1, 2), 0.5))
    >>> np.round(X[0], 4), bool(trusted.all())
    (array([[0.    , 0.2689],
           [0.2689, 0.    ]]), True)
    """
    B, n, d = x.shape
    beta = model.beta
    delta = roundoff(beta, d)
    x = normalise(x)
    y = normalise(y)
    out = np.empty(x.shape)
    log_phi = np.empty((B, n))
    trusted = np.empty((B, n), dtype=bool)
    for b in range(B):
        W = np.empty((y.shape[1], d + 1))
        W[:, 0] = w[b]
        W[:, 1:] = w[b][:, None] * y[b]
        S = kernel_sum(beta, x[b], y[b], W)
        floor = delta * w[b].sum()
        good = S[:, 0] - floor > (1.0 + np.sqrt(d)) * floor / rtol
        phi = np.where(good, S[:, 0], 1.0)
        G = S[:, 1:]
        X = G - np.sum(G * x[b], axis=1, keepdims=True) * x[b]
        if model.normalised:
            X /= phi[:, None]
        else:
            X *= np.exp(beta / 2)      # in two halves: e^β alone overflows for β > 709
            X *= np.exp(beta / 2)
        out[b] = model.sign * X
        log_phi[b] = np.log(phi) + beta
        trusted[b] = good
    return out, log_phi, trusted


def _transform_seconds(d, degree, points, columns):
    """Estimated one-core time of an analysis plus a synthesis over ``points`` points."""
    modes = degree + 1 if d == 2 else (degree + 1) * (degree + 2) / 2
    return FAST_MODE[d] * points * modes * columns / 4


def cost(d, beta, n, m):
    """Estimated one-core seconds (direct, fast) for n targets and m sources (``summation="auto"``).

    Parameters
    ----------
    d : {2, 3}
    beta : float
    n, m : int
        Numbers of targets and sources.

    Returns
    -------
    direct, fast : float
        Seconds.

    Examples
    --------
    >>> from meanfield.solvers.kernels import spectral
    >>> direct, fast = spectral.cost(2, 1.0, 1000, 1000)
    >>> fast < direct
    True
    """
    return (kernels.direct_seconds(1, n, m, d),
            FAST_OVERHEAD + _transform_seconds(d, degree(beta, d), n + m, d + 1))
