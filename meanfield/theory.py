r"""Closed-form predictions: linear growth rates at the uniform measure, speed bounds, and
the d -> ∞ (equiangular) limit of the inner products.

Funk–Hecke: against the uniform probability measure on S^{d-1}, the zonal kernel
:math:`e^{\beta\langle x, \cdot\rangle}` acts on degree-l harmonics by

.. math::

    c_l(\beta) = \Gamma(d/2) (2/\beta)^{d/2-1} I_{l+d/2-1}(\beta)

(d = 2: :math:`I_l(\beta)`), so a perturbation along a degree-l harmonic of the uniform density grows at rate

.. math::

    \lambda_l = \pm \frac{l(l+d-2)\, c_l(\beta)}{\beta} \ \text{(USA)}, \qquad
    \lambda_l = \pm \frac{l(l+d-2)\, c_l(\beta)}{\beta\, c_0(\beta)} \ \text{(SA)},

sign - for V = -I.
"""
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import quad, solve_ivp
from scipy.special import expit, gammaln, ive, logsumexp

from .checks import as_beta, as_count, as_float_array, as_time_grid
from .models import SA, USA, MultiHead, as_model

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


def funk_hecke(beta: float, d: int, l: int) -> float:
    r"""Funk–Hecke coefficient of the kernel e^{β⟨x, ·⟩} on degree-l harmonics of S^{d-1}.

    .. math::

        c_l(\beta) = \Gamma(d/2) \Big(\frac{2}{\beta}\Big)^{d/2-1} I_{l+d/2-1}(\beta), \qquad c_l(0) = \delta_{l0}.

    Parameters
    ----------
    beta : float
        β >= 0.
    d : int
        Ambient dimension (>= 2).
    l : int
        Degree (>= 0).

    Returns
    -------
    float
        c_l(β), computed in log space.

    Raises
    ------
    ValueError
        If β < 0, d or l are out of range, or c_l(β) exceeds the largest double.

    Examples
    --------
    >>> from scipy.special import iv
    >>> from meanfield.theory import funk_hecke
    >>> round(funk_hecke(2.0, 2, 1), 10) == round(float(iv(1, 2.0)), 10)     # d = 2: I_l(β)
    True
    >>> funk_hecke(0.0, 3, 0), funk_hecke(0.0, 3, 2)
    (1.0, 0.0)
    """
    beta = as_beta(beta)
    d = as_count(d, "d", minimum=2)
    l = as_count(l, "l", minimum=0)
    if beta == 0:
        return 1.0 if l == 0 else 0.0
    return _exp(_log_funk_hecke(beta, d, l), f"c_{l}(beta) at beta = {beta:g}")


def growth_rate(model: SA | USA, d: int, l: int, diffusion: float = 0.0) -> float:
    r"""Linear growth rate λ_l of a degree-l harmonic perturbation of the uniform measure on S^{d-1}.

    .. math::

        \lambda_l = \pm \frac{l(l+d-2)\, c_l(\beta)}{\beta} \ \text{(USA)}, \qquad
        \lambda_l = \pm \frac{l(l+d-2)\, c_l(\beta)}{\beta\, c_0(\beta)} \ \text{(SA)}, \qquad
        \lambda_l \leftarrow \lambda_l - D\, l(l+d-2),

    with the Funk–Hecke coefficient c_l(β) (``funk_hecke``), sign - for V = -I. At β = 0 both reduce
    to the consensus dynamics: λ_1 = ±(d-1)/d, λ_l = 0 for l >= 2. With diffusion D Δ_S
    (noise σ = √(2D)) the harmonic's Laplace eigenvalue times D is subtracted.  For QᵀK = c I and
    V = v I the field is v times that of β' = |c| β (kernel reflected, factor (-1)^(l+1), if c < 0).

    Parameters
    ----------
    model : SA or USA
        With QᵀK = c I and V = v I (Q = K = R a rotation, Q = 2, V = -1, ...).
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

    Raises
    ------
    ValueError
        If QᵀK or V is not a multiple of the identity, D < 0, or d, l are out of range.

    Examples
    --------
    >>> import meanfield as mf
    >>> round(mf.growth_rate(mf.SA(beta=0.0), d=3, l=1), 6)         # consensus: (d-1)/d
    0.666667
    >>> round(mf.growth_rate(mf.USA(beta=1.0, V=-1), d=2, l=1), 6)  # -I_1(1)
    -0.565159
    >>> mf.growth_rate(mf.SA(beta=1.0, Q=2.0), d=3, l=2) == mf.growth_rate(mf.SA(beta=2.0), d=3, l=2)
    True
    """
    diffusion = float(as_float_array(diffusion, "diffusion"))
    if diffusion < 0:
        raise ValueError(f"diffusion must be >= 0; got {diffusion:g}")
    rate = _interaction_rate(model, d, l)
    return rate - diffusion * l * (l + as_count(d, "d", minimum=2) - 2)


def _interaction_rate(model, d, l):
    model = as_model(model)
    d = as_count(d, "d", minimum=2)
    l = as_count(l, "l", minimum=0)
    c, v = _scalar_weights(model, d)
    beta = abs(c) * model.beta                     # e^{cβ<x,y>}: the kernel at β' = |c|β, reflected if c < 0
    parity = 1.0 if c >= 0 else (-1.0) ** (l + 1)    # c_l(-β') / (-β') = (-1)^(l+1) c_l(β') / β'
    eig = l * (l + d - 2)
    if l == 0 or v == 0:
        return 0.0
    if beta == 0:
        return v * (d - 1) / d if l == 1 else 0.0
    log_c = _log_funk_hecke(beta, d, l)
    if model.normalised:
        log_c = log_c - _log_funk_hecke(beta, d, 0)
    return parity * v * _exp(np.log(eig) + log_c - np.log(beta), f"the growth rate at beta = {beta:g}")


def _scalar_weights(model, d):
    """(c, v) with Q^T K = c I and V = v I (to 1e-12 relative), or a ValueError: the uniform measure
    is stationary, and its linearisation diagonal in harmonics, only then."""
    A, V = model.interaction(d)
    c, v = A[0, 0], V[0, 0]
    scale = max(1.0, abs(c), abs(v))
    if np.abs(A - c * np.eye(d)).max() > 1e-12 * scale or np.abs(V - v * np.eye(d)).max() > 1e-12 * scale:
        raise ValueError("growth rates are for Q^T K = c I and V = v I (the uniform measure is then stationary); "
                         f"got Q^T K = {np.round(A, 6).tolist()}, V = {np.round(V, 6).tolist()}")
    return float(c), float(v)


def most_unstable_mode(model: SA | USA, d: int) -> int:
    r"""The degree l >= 1 of fastest linear growth of the uniform measure (attractive models).

    .. math::

        l^* = \operatorname{argmax}_{l \ge 1} \lambda_l \approx \sqrt{2\beta} \quad (\beta \to \infty).

    Parameters
    ----------
    model : SA or USA
        With QᵀK = I and V = I.
    d : int
        Ambient dimension (>= 2).

    Returns
    -------
    int
        l*.

    Raises
    ------
    ValueError
        If the model is not isotropic and attractive.

    Examples
    --------
    >>> import meanfield as mf
    >>> mf.most_unstable_mode(mf.SA(beta=0.0), 2), mf.most_unstable_mode(mf.SA(beta=50.0), 2)
    (1, 10)
    """
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


def speed_bound(model: SA | USA | MultiHead) -> float:
    r"""Supremum (a bound for general Q, K, V) of the speed |X[μ](x)| over probability measures μ.

    .. math::

        \text{SA: } 1, \qquad \text{USA: } \max_{t \in [-1, 1]} e^{\beta t} \sqrt{1 - t^2}
        = e^{\beta t^*} \sqrt{1 - t^{*2}}, \quad t^* = \frac{\sqrt{1 + 4\beta^2} - 1}{2\beta},

    (t* = 0 at β = 0) for QᵀK = I and V = ±I; |v| times that at β' = |c| β for QᵀK = c I, V = v I
    (scalar weights); for matrices the bound ‖V‖_2 (SA: V times a convex combination of unit vectors)
    and ‖V‖_2 e^{β‖QᵀK‖_2} (USA); MultiHead: the sum of the heads' bounds (its feed-forward term is
    not bounded here).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Constant weights.

    Returns
    -------
    float
        The bound.

    Raises
    ------
    ValueError
        If a MultiHead has a feed-forward term, or the bound exceeds the largest double.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.theory import speed_bound
    >>> speed_bound(mf.SA(beta=3.0)), speed_bound(mf.USA(beta=0.0))
    (1.0, 1.0)
    >>> speed_bound(mf.SA(beta=3.0, V=np.diag([1.0, -3.0])))
    3.0
    >>> speed_bound(mf.USA(beta=1.0, Q=2.0)) == speed_bound(mf.USA(beta=2.0))
    True
    """
    model = as_model(model, multihead=True)
    if hasattr(model, "heads"):
        if model.feedforward is not None:
            raise ValueError("speed_bound does not bound a feed-forward term")
        return sum(speed_bound(head) for head in model.heads)
    c, v = model.attention_scalar, model.value_scalar
    if c is None or v is None:
        d = next(getattr(model, n).shape[0] for n in "QKV" if isinstance(getattr(model, n), np.ndarray))
        A, V = model.interaction(d)
        norm = float(np.linalg.norm(V, 2))
        if model.normalised:
            return norm
        return _exp(np.log(norm) + model.beta * np.linalg.norm(A, 2) if norm > 0 else -np.inf,
                    f"the USA speed bound at beta |Q^T K| = {model.beta * np.linalg.norm(A, 2):g}")
    if model.normalised:
        return abs(v)
    b = abs(c) * model.beta
    t = 0.0 if b == 0 else (np.sqrt(1 + 4 * b * b) - 1) / (2 * b)
    return abs(v) * _exp(b * t + 0.5 * np.log1p(-t * t), f"the USA speed bound at beta = {b:g}")


def _exp(log_value, what):
    """e^log_value, or a ValueError naming beta where it exceeds the largest double."""
    if log_value > LOG_MAX:
        raise ValueError(f"{what} is e^{log_value:.6g}, beyond the largest double; use a smaller beta")
    return float(np.exp(log_value))


def equiangular_rhs(model: SA | USA, n: int) -> Callable[[float, float], float]:
    r"""Right-hand side of the ODE for the common inner product ρ of n equiangular tokens.

    .. math::

        \text{USA: } \dot\rho = \frac2n e^{\beta\rho} (1-\rho)(1+(n-1)\rho), \qquad
        \text{SA: } \dot\rho = \frac{2 e^{\beta\rho}(1-\rho)(1+(n-1)\rho)}{e^\beta + (n-1) e^{\beta\rho}}

    (attractive sign; V = -I flips it). Derivation:

    .. math::

        \langle \dot x_i, x_k\rangle
        = \sum_j a_{ij} (\langle x_j, x_k\rangle - \langle x_i, x_j\rangle\langle x_i, x_k\rangle)

    with the j = k term 1-ρ², the n-2 others ρ-ρ², and j = i zero; add the symmetric term. Also the
    d -> ∞ limit for i.i.d. random tokens (their inner products concentrate at a common value).

    Parameters
    ----------
    model : SA or USA
        With QᵀK = I and V = ±I.
    n : int
        Number of tokens (>= 2).

    Returns
    -------
    callable
        rhs(t, ρ), as ``scipy.integrate.solve_ivp`` takes it.

    Raises
    ------
    ValueError
        If the model is not isotropic or n < 2.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.theory import equiangular_rhs
    >>> rhs = equiangular_rhs(mf.USA(beta=0.0), n=2)
    >>> float(rhs(0.0, 0.0)), float(rhs(0.0, 1.0))
    (1.0, 0.0)
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


def equiangular_curve(model: SA | USA, n: int, t: ArrayLike, rho0: float = 0.0) -> np.ndarray:
    r"""The common inner product ρ(t) of equiangular tokens, solving ``equiangular_rhs`` (rtol 1e-11).

    .. math::

        \dot\rho = f_{\beta, n}(\rho), \qquad \rho(t_0) = \rho_0.

    Parameters
    ----------
    model : SA or USA
        With QᵀK = I and V = ±I.
    n : int
        Number of tokens (>= 2).
    t : array_like
        Increasing output times; the curve starts at t[0].
    rho0 : float
        ρ(t[0]) in [-1/(n-1), 1].

    Returns
    -------
    numpy.ndarray
        ρ at the times t.

    Raises
    ------
    ValueError
        If rho0 is out of range or not a number, or t is not an increasing grid.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.theory import equiangular_curve
    >>> rho = equiangular_curve(mf.USA(beta=0.0), 2, [0.0, 1.0])
    >>> bool(np.isclose(rho[1], np.tanh(1.0)))        # ρ' = 1 - ρ²
    True
    """
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


def clustering_time(model: SA | USA, n: int, delta: float = 1e-3) -> float:
    r"""The time at which the equiangular curve γ_β (γ(0) = 0, ``equiangular_rhs``) reaches 1 - δ.

    The points (t, β) with γ_β(t) = 1 - δ form the curve Γ_{∞,δ} of the paper (its d -> ∞ phase
    boundary of the region where every pairwise inner product is >= 1 - δ). Since γ' > 0 on [0, 1),

    .. math::

        t^*(\beta) = \int_0^{1-\delta} \frac{d\gamma}{\dot\gamma(\gamma)}, \qquad
        \frac{1}{\dot\gamma} = \frac{e^{\beta(1-\gamma)} + n - 1}{2(1-\gamma)(1 + (n-1)\gamma)} \ \text{(SA)}, \quad
        \frac{n e^{-\beta\gamma}}{2(1-\gamma)(1 + (n-1)\gamma)} \ \text{(USA)},

    computed by adaptive quadrature.

    Parameters
    ----------
    model : SA or USA
        With QᵀK = I and V = I (attractive).
    n : int
        Number of tokens (>= 2).
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        The time t*(β).

    Raises
    ------
    ValueError
        If the model is not attractive and isotropic, n < 2, or δ is not in (0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.theory import clustering_time
    >>> t = clustering_time(mf.USA(beta=0.0), n=2, delta=0.01)
    >>> bool(np.isclose(t, np.arctanh(0.99)))          # γ = tanh t at β = 0, n = 2
    True
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


def equiangular_layer(rho: ArrayLike, beta: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""One softmax attention layer (V = I) followed by normalisation, on n tokens whose pairwise
    inner products all equal ρ (Rigollet, arXiv:2512.01868; paper.md §6.3).

    Token i's output is :math:`y_i = \sum_j A_{ij} x_j` with :math:`A_{ii} = a`, :math:`A_{ij} = b` (j ≠ i):

    .. math::

        a = \frac{e^\beta}{Z}, \quad b = \frac{e^{\beta\rho}}{Z}, \quad Z = e^\beta + (n-1) e^{\beta\rho}, \qquad
        \cos(y_i, y_k) = \frac{\rho + (1-\rho)(2ab + (n-2)b^2)}{\rho + (1-\rho)(a^2 + (n-1)b^2)}

    (Gram matrix ρ11ᵀ + (1-ρ)I and rows of A summing to 1). a = expit(β(1-ρ) - log(n-1)) and
    b = (1-a)/(n-1), so nothing overflows for any β, n.

    Parameters
    ----------
    rho : float or array_like
        ρ in (-1/(n-1), 1).
    beta : float or array_like
        β >= 0.
    n : int or array_like
        Number of tokens (>= 2); the three are broadcast together.

    Returns
    -------
    a : numpy.ndarray
        The diagonal attention weight.
    cosine : numpy.ndarray
        The output cosine.

    Raises
    ------
    ValueError
        If n < 2, β < 0 or ρ is out of range.

    Examples
    --------
    >>> from meanfield.theory import equiangular_layer
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


def long_context_limit(rho: float, gamma: float) -> tuple[float, float]:
    r"""The n → ∞ limit of ``equiangular_layer`` at β_n = γ log n (arXiv:2512.01868, attributed to
    Chen et al. 2025).

    With c = γ(1-ρ), a = 1/(1 + (n-1) n^{-c}) → L and

    .. math::

        \cos(y_i, y_k) \to \frac{\rho}{\rho + (1-\rho) L^2}, \qquad
        L = \begin{cases} 0 & c < 1 \text{ (every token averages the others: collapse)},\\
        1/2 & c = 1,\\ 1 & c > 1 \text{ (each token keeps itself: identity)}. \end{cases}

    Approach: a ~ n^{c-1} (c < 1), 1 - a ~ n^{1-c} (c > 1), a - 1/2 ~ 1/(4n) (c = 1).

    Parameters
    ----------
    rho : float
        ρ in (0, 1).
    gamma : float
        γ >= 0.

    Returns
    -------
    L : float
        The limit of the diagonal attention weight.
    cosine : float
        The limit of the output cosine.

    Raises
    ------
    ValueError
        If ρ is not in (0, 1) or γ < 0.

    Examples
    --------
    >>> from meanfield.theory import long_context_limit
    >>> long_context_limit(0.5, 2.0)
    (0.5, 0.8)
    """
    rho, gamma = float(rho), float(gamma)
    if not 0 < rho < 1 or gamma < 0:
        raise ValueError(f"long_context_limit needs 0 < rho < 1 and gamma >= 0; got rho = {rho}, gamma = {gamma}")
    c = gamma * (1 - rho)
    L = 0.0 if c < 1 else 0.5 if c == 1 else 1.0
    return L, rho / (rho + (1 - rho) * L * L)
