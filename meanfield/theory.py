"""Closed-form predictions: linear growth rates at the uniform measure, speed bounds, and
the d -> ∞ (equiangular) limit of the inner products.

Funk–Hecke: against the uniform probability measure on S^{d-1}, the zonal kernel e^{β<x,·>}
acts on degree-l harmonics by

    c_l(β) = Γ(d/2) (2/β)^{d/2-1} I_{l+d/2-1}(β)      (d = 2: I_l(β); d = 3: i_l(β) = sinh-type),

so a perturbation along a degree-l harmonic of the uniform density grows at rate
λ_l = ± l(l+d-2) c_l(β)/β (USA) or ± l(l+d-2) c_l(β)/(β c_0(β)) (SA), sign - for V = -I.
"""
import numpy as np
from scipy.integrate import quad, solve_ivp
from scipy.special import expit, gammaln, ive, logsumexp

from .checks import as_beta, as_count, as_float_array, as_time_grid
from .models import as_model

__all__ = ["funk_hecke", "growth_rate", "most_unstable_mode", "speed_bound", "equiangular_rhs",
           "equiangular_curve", "clustering_time", "equiangular_layer", "long_context_limit"]


LOG_MAX = float(np.log(np.finfo(float).max))
DEBYE_ORDER = 30.0       # from this order on, log I_ν uses Debye's expansion where ive fails


def log_ive(nu, x):
    """log(I_ν(x) e^{-x}) for ν >= 0, x > 0, finite where ``scipy.special.ive`` under- or overflows
    (ν >> x, or x >~ 1e9, where it returns 0 or NaN).

    There, for x² <= 4(ν+1), the power series in log space (DLMF 10.25.2; term ratio <= 1/k):
        log I_ν(x) = ν log(x/2) - log Γ(ν+1) + log Σ_k (x²/4)^k / (k! (ν+1)_k);
    otherwise, for ν >= 30, Debye's uniform expansion (DLMF 10.41.3), t = ν/sqrt(ν²+x²):
        log I_ν(x) - x = -log(2π)/2 - log(ν²+x²)/4 + ν²/(sqrt(ν²+x²)+x) - ν asinh(ν/x)
                         + log(1 + u_1(t)/ν + u_2(t)/ν²),
        u_1 = (3t - 5t³)/24,  u_2 = (81t² - 462t⁴ + 385t⁶)/1152   (relative error O(ν^-3));
    for ν < 30 (then x is huge) Hankel's expansion (DLMF 10.40.1), μ = 4ν²:
        log I_ν(x) - x = -log(2πx)/2 + log(1 - (μ-1)/(8x) + (μ-1)(μ-9)/(2(8x)²)).

    Parameters
    ----------
    nu : float
        Order ν >= 0.
    x : float
        Argument x > 0.

    Returns
    -------
    float
        log(I_ν(x)) - x.
    """
    with np.errstate(all="ignore"):
        value = ive(nu, x)
    if np.isfinite(value) and value > 1e-280:
        return float(np.log(value))
    if x * x <= 4.0 * (nu + 1.0):
        k = np.arange(1, 60)
        log_terms = np.concatenate([[0.0], np.cumsum(2 * np.log(x / 2) - np.log(k) - np.log(nu + k))])
        return float(nu * np.log(x / 2) - gammaln(nu + 1) + logsumexp(log_terms) - x)
    if nu >= DEBYE_ORDER:
        r = np.hypot(nu, x)
        t = nu / r
        u1 = (3 * t - 5 * t ** 3) / 24
        u2 = (81 * t ** 2 - 462 * t ** 4 + 385 * t ** 6) / 1152
        return float(-0.5 * np.log(2 * np.pi) - 0.5 * np.log(r) + nu * nu / (r + x) - nu * np.arcsinh(nu / x)
                     + np.log1p(u1 / nu + u2 / nu ** 2))
    mu = 4.0 * nu * nu
    return float(-0.5 * np.log(2 * np.pi * x) + np.log1p(-(mu - 1) / (8 * x) + (mu - 1) * (mu - 9) / (128 * x * x)))


def _log_funk_hecke(beta, d, l):
    """log c_l(β) for β > 0, overflow- and underflow-free (``log_ive``)."""
    nu = d / 2.0 - 1.0
    return gammaln(d / 2.0) + nu * np.log(2.0 / beta) + log_ive(l + nu, beta) + beta


def funk_hecke(beta, d, l):
    """c_l(β) = Γ(d/2) (2/β)^{d/2-1} I_{l+d/2-1}(β); at β = 0 the limit δ_{l0}."""
    beta = as_beta(beta)
    d = as_count(d, "d", minimum=2)
    l = as_count(l, "l", minimum=0)
    if beta == 0:
        return 1.0 if l == 0 else 0.0
    return _exp(_log_funk_hecke(beta, d, l), f"c_{l}(beta) at beta = {beta:g}")


def growth_rate(model, d: int, l: int, diffusion: float = 0.0) -> float:
    """Linear growth rate λ_l of a degree-l harmonic perturbation of the uniform measure on S^{d-1}.

    USA: λ_l = ± l(l+d-2) c_l(β)/β;  SA: λ_l = ± l(l+d-2) c_l(β)/(β c_0(β)), with the
    Funk–Hecke coefficient c_l(β) = Γ(d/2) (2/β)^{d/2-1} I_{l+d/2-1}(β) (sign - for V = -I).
    At β = 0 both reduce to the consensus dynamics: λ_1 = ±(d-1)/d, λ_l = 0 for l >= 2.
    With diffusion D Δ_S (noise σ = sqrt(2D)): λ_l - D l(l+d-2), the harmonic's Laplace eigenvalue.

    Parameters
    ----------
    model : SA or USA
        With Q^T K = I and V = ±I.
    d : int
        Ambient dimension (the sphere is S^{d-1}).
    l : int
        Degree of the spherical harmonic (l >= 0).
    diffusion : float
        D >= 0.

    Returns
    -------
    float
        λ_l: the perturbation grows like e^{λ_l t}.
    """
    diffusion = float(as_float_array(diffusion, "diffusion"))
    if diffusion < 0:
        raise ValueError(f"diffusion must be >= 0; got {diffusion:g}")
    rate = _interaction_rate(model, d, l)
    return rate - diffusion * l * (l + as_count(d, "d", minimum=2) - 2)


def _interaction_rate(model, d, l):
    model = as_model(model)
    if not model.is_isotropic:
        raise ValueError("growth rates are for Q^T K = I and V = ±I")
    d = as_count(d, "d", minimum=2)
    l = as_count(l, "l", minimum=0)
    beta = model.beta
    eig = l * (l + d - 2)
    if l == 0:
        return 0.0
    if beta == 0:
        return model.sign * (d - 1) / d if l == 1 else 0.0
    log_c = _log_funk_hecke(beta, d, l)
    if model.normalised:
        log_c = log_c - _log_funk_hecke(beta, d, 0)
    return model.sign * _exp(np.log(eig) + log_c - np.log(beta), f"the growth rate at beta = {beta:g}")


def most_unstable_mode(model, d):
    """The degree l >= 1 of fastest linear growth, l* ≈ sqrt(2β) for large β (attractive models)."""
    model = as_model(model)
    if not model.is_isotropic or model.sign < 0:
        raise ValueError("the uniform measure has an unstable mode only for attractive models (V = I)")
    d = as_count(d, "d", minimum=2)
    if model.beta == 0:
        return 1
    # log λ_l = log l(l+d-2) + log I_{l+d/2-1}(β) + const is concave in l (l ↦ I_{l+ν}(β) is
    # log-concave), so an integer ternary search finds the maximum in O(log β) evaluations.
    def log_rate(l):
        return np.log(l * (l + d - 2.0)) + log_ive(l + d / 2.0 - 1.0, model.beta)

    lo, hi = 1, int(4 * np.sqrt(2 * model.beta + 1)) + 8
    while hi - lo > 2:
        m1 = lo + (hi - lo) // 3
        m2 = hi - (hi - lo) // 3
        if log_rate(m1) < log_rate(m2):
            lo = m1 + 1
        else:
            hi = m2
    return max(range(lo, hi + 1), key=log_rate)


def speed_bound(model):
    """sup |X[μ]| over probability measures μ (isotropic models, V = ±I).

    SA: 1 (|P_x V y| <= 1 averaged by a probability); USA: max_{t∈[-1,1]} e^{βt} sqrt(1-t²),
    attained at t* = (sqrt(1+4β²) - 1)/(2β) (t* = 0 at β = 0).  MultiHead: the sum of the heads'
    bounds (|Σ_h X_h| <= Σ_h |X_h|)."""
    model = as_model(model, multihead=True)
    if hasattr(model, "heads"):
        return sum(speed_bound(head) for head in model.heads)
    if not model.is_isotropic:
        raise ValueError("speed_bound is for Q^T K = I and V = ±I")
    if model.normalised:
        return 1.0
    b = model.beta
    t = 0.0 if b == 0 else (np.sqrt(1 + 4 * b * b) - 1) / (2 * b)
    return _exp(b * t + 0.5 * np.log1p(-t * t), f"the USA speed bound at beta = {b:g}")


def _exp(log_value, what):
    """e^log_value, or a ValueError naming beta where it exceeds the largest double."""
    if log_value > LOG_MAX:
        raise ValueError(f"{what} is e^{log_value:.6g}, beyond the largest double; use a smaller beta")
    return float(np.exp(log_value))


def equiangular_rhs(model, n):
    """dρ/dt for n tokens with all pairwise inner products equal to ρ (attractive sign; V = -I flips it):

    USA: (2/n) e^{βρ} (1-ρ)(1+(n-1)ρ);   SA: 2 e^{βρ}(1-ρ)(1+(n-1)ρ) / (e^β + (n-1) e^{βρ}).

    Derivation: <x_i', x_k> = Σ_j a_ij (<x_j,x_k> - <x_i,x_j><x_i,x_k>) with the j = k term 1-ρ², the
    n-2 others ρ-ρ², and j = i zero; add the symmetric term <x_i, x_k'>.  Also the d -> ∞ limit
    for i.i.d. random tokens (their inner products concentrate at a common value).
    """
    model = as_model(model)
    if not model.is_isotropic:
        raise ValueError("the equiangular reduction needs Q^T K = I and V = ±I")
    n = as_count(n, "n", minimum=2)
    beta, sign = model.beta, model.sign

    def rhs(_t, rho):
        core = 2.0 * (1.0 - rho) * (1.0 + (n - 1) * rho)
        if model.normalised:  # divide numerator and denominator by e^{βρ}
            return sign * core / (np.exp(beta * (1.0 - rho)) + (n - 1))
        return sign * core * np.exp(beta * rho) / n

    return rhs


def equiangular_curve(model, n, t, rho0=0.0):
    """ρ(t) solving ``equiangular_rhs`` from ρ(t[0]) = rho0 (rtol 1e-11)."""
    model = as_model(model)
    n = as_count(n, "n", minimum=2)
    t = as_time_grid(t, "t")
    rho0 = as_float_array(rho0, "rho0")
    if rho0.ndim != 0:
        raise ValueError(f"rho0 must be a number (the common inner product); got shape {rho0.shape}")
    rho0 = float(rho0)
    if not -1.0 / (n - 1) <= rho0 <= 1.0:
        raise ValueError(f"rho0 must lie in [-1/(n-1), 1] for n equiangular unit vectors; got {rho0}")
    sol = solve_ivp(equiangular_rhs(model, n), (t[0], t[-1]), [rho0], t_eval=t, rtol=1e-11, atol=1e-13,
                    method="DOP853")
    return sol.y[0]


def clustering_time(model, n, delta=1e-3):
    """The time t at which the equiangular curve γ_β (γ(0) = 0, ``equiangular_rhs``) reaches 1 - δ.

    The points (t, β) with γ_β(t) = 1 - δ form the curve Γ_{∞,δ} of the paper (its d -> ∞ phase
    boundary of the region where every pairwise inner product is >= 1 - δ).  Since γ' > 0 on
    [0, 1), t = ∫_0^{1-δ} dγ / γ'(γ), computed by adaptive quadrature: for SA
    1/γ' = (e^{β(1-γ)} + n - 1) / (2 (1-γ)(1 + (n-1)γ)), for USA n e^{-βγ} / (2 (1-γ)(1 + (n-1)γ)).

    Parameters
    ----------
    model : SA or USA with Q^T K = I and V = I (attractive)
    n : int >= 2, tokens
    delta : float in (0, 1)

    Returns
    -------
    float, the time t*(β)
    """
    model = as_model(model)
    if not model.is_isotropic or model.sign < 0:
        raise ValueError("clustering_time needs an attractive isotropic model (Q^T K = I, V = I)")
    n = as_count(n, "n", minimum=2)
    delta = float(as_float_array(delta, "delta"))
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1); got {delta}")
    rhs = equiangular_rhs(model, n)
    # the integrand grows like 1/(1-γ) towards the end point: split there for the quadrature
    ends = [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0 - delta]
    ends = [a for a in ends if a < 1.0 - delta] + [1.0 - delta]
    return float(sum(quad(lambda g: 1.0 / rhs(0.0, g), a, b, epsabs=0.0, epsrel=1e-12, limit=200)[0]
                     for a, b in zip(ends[:-1], ends[1:])))


def equiangular_layer(rho, beta, n):
    """One softmax attention layer (V = I) followed by normalisation, on n tokens whose pairwise
    inner products all equal ρ (Rigollet, arXiv:2512.01868; paper.md §6.3): token i's output
    y_i = Σ_j A_ij x_j with A_ii = a, A_ij = b (j ≠ i),

        a = e^β / Z,  b = e^{βρ} / Z,  Z = e^β + (n-1) e^{βρ},
        cos(y_i, y_k) = (ρ + (1-ρ)(2ab + (n-2)b²)) / (ρ + (1-ρ)(a² + (n-1)b²))

    (Gram matrix ρ 11^T + (1-ρ) I and rows of A summing to 1).  a = expit(β(1-ρ) - log(n-1)) and
    b = (1-a)/(n-1), so nothing overflows for any β, n.

    Parameters
    ----------
    rho : float or array, in (-1/(n-1), 1)
    beta : float or array, >= 0
    n : int or array of ints >= 2 (broadcast together)

    Returns
    -------
    (a, cosine) : arrays (the diagonal attention weight and the output cosine)

    Examples
    --------
    >>> a, c = equiangular_layer(0.5, 0.0, 2)
    >>> float(a), float(c)
    (0.5, 1.0)
    """
    rho, beta, n = (np.asarray(v, dtype=float) for v in (rho, beta, n))
    if np.any(n < 2) or np.any(beta < 0) or np.any(rho >= 1) or np.any(rho <= -1.0 / (n - 1)):
        raise ValueError("equiangular_layer needs n >= 2, beta >= 0 and -1/(n-1) < rho < 1")
    a = expit(beta * (1.0 - rho) - np.log(n - 1.0))
    b = expit(np.log(n - 1.0) - beta * (1.0 - rho)) / (n - 1.0)
    cosine = (rho + (1 - rho) * (2 * a * b + (n - 2) * b * b)) / (rho + (1 - rho) * (a * a + (n - 1) * b * b))
    return a, cosine


def long_context_limit(rho, gamma):
    """The n → ∞ limit of ``equiangular_layer`` at β_n = γ log n (arXiv:2512.01868, attributed to
    Chen et al. 2025): with c = γ(1-ρ), a = 1/(1 + (n-1) n^{-c}) → L and the output cosine →
    ρ/(ρ + (1-ρ) L²), where

        L = 0 (c < 1: every token averages the others, cosine → 1: collapse),
        L = 1/2 (c = 1),   L = 1 (c > 1: each token keeps itself, cosine → ρ: identity).

    Approach: a ~ n^{c-1} (c < 1), 1 - a ~ n^{1-c} (c > 1), a - 1/2 ~ 1/(4n) (c = 1).

    Parameters
    ----------
    rho : float in (0, 1)
    gamma : float >= 0

    Returns
    -------
    (L, cosine) : floats

    Examples
    --------
    >>> long_context_limit(0.5, 2.0)
    (0.5, 0.8)
    """
    rho, gamma = float(rho), float(gamma)
    if not 0 < rho < 1 or gamma < 0:
        raise ValueError(f"long_context_limit needs 0 < rho < 1 and gamma >= 0; got rho = {rho}, gamma = {gamma}")
    c = gamma * (1 - rho)
    L = 0.0 if c < 1 else 0.5 if c == 1 else 1.0
    return L, rho / (rho + (1 - rho) * L * L)
