"""The zonal ring kernel as a truncated Gegenbauer series (the zonal solver's fast field).

Averaged over the equatorial spheres of two rings at polar angles θ, θ' on S^{d-1}, the kernel
e^{β<x, x'>} is (Funk–Hecke and the product formula of zonal harmonics)

    k(θ, θ') = Σ_l c_l(β) N_l P_l(cos θ) P_l(cos θ'),
    c_l(β) = Γ(d/2) (2/β)^{d/2-1} I_{l+d/2-1}(β),   N_l = dim of the degree-l harmonics on S^{d-1},

P_l the Gegenbauer polynomial of index λ = d/2 - 1 normalised to P_l(1) = 1 (Chebyshev T_l for d = 2,
Legendre for d = 3), computed by P_{l+1} = (2(l+λ) s P_l - l P_{l-1})/(l + 2λ).  With the ring masses'
moments M_l = Σ_j m_j P_l(cos θ_j) and a_l = e^{-β} c_l N_l (Σ_l a_l = 1), the zonal solver's fields are

    E m = Σ_l a_l M_l P_l(cos θ_i),   (E∘G) m = Σ_l (a_l/β) M_l ∂_θ P_l,   ∂_θ(E∘G) m = Σ_l (a_l/β) M_l ∂²_θ P_l

(∂_θ k = β k G): O(N L) work for L + 1 terms instead of the O(N²) tables.  ``degree`` keeps the terms
until the dropped ones bound every field's absolute error by ``TRUNCATION`` times the mass (P_l, ∂_θ P_l
and ∂²_θ P_l are bounded by 1, l(l+2λ)/(2λ+1) and (l(l+2λ))²/(2λ+1) in modulus).  At β = 0 the series is
1 + d s s'.
"""
import numpy as np
from scipy.special import gammaln, ive

TRUNCATION = 1e-16
MAX_DEGREE = 2000


def log_coefficients(beta, d, degree):
    r"""The logs of the normalised coefficients of the ring kernel's Gegenbauer series.

    .. math::

        a_l = e^{-\beta} c_l(\beta) N_l, \qquad
        c_l(\beta) = \Gamma(d/2) \left(\frac{2}{\beta}\right)^{d/2-1} I_{l+d/2-1}(\beta), \qquad
        \sum_l a_l = 1,

    N_l the dimension of the degree-l harmonics on S^{d-1}; -inf where the Bessel factor underflows.

    Parameters
    ----------
    beta : float
        β > 0.
    d : int
    degree : int

    Returns
    -------
    ndarray, shape (degree + 1,)

    Examples
    --------
    >>> bool(np.isclose(np.exp(log_coefficients(3.0, 3, 60)).sum(), 1.0))
    True
    """
    l = np.arange(degree + 1, dtype=float)
    nu = 0.5 * d - 1.0
    if d == 2:
        log_n = np.where(l == 0, 0.0, np.log(2.0))
    else:
        log_n = np.log(2 * l + d - 2) + gammaln(l + d - 2) - gammaln(l + 1) - gammaln(d - 1)
    with np.errstate(divide="ignore"):
        return gammaln(0.5 * d) + nu * np.log(2.0 / beta) + np.log(ive(l + nu, beta)) + log_n


def degree(beta, d, tolerance=TRUNCATION):
    r"""The series degree that the zonal solver keeps.

    .. math::

        L = \min\left\{L : \sum_{l > L} a_l \frac{1 + (l(l + d - 2))^2}{\min(\beta, 1)} \le \text{tolerance}\right\}

    (module docstring: this bounds every field's absolute error by the tolerance times the mass).

    Parameters
    ----------
    beta : float
    d : int
    tolerance : float

    Returns
    -------
    int

    Examples
    --------
    >>> degree(3.0, 3) < degree(30.0, 3)
    True
    """
    if beta == 0:
        return 1
    log_a = log_coefficients(beta, d, MAX_DEGREE)
    l = np.arange(MAX_DEGREE + 1, dtype=float)
    terms = np.exp(log_a) * (1.0 + (l * (l + d - 2)) ** 2) / min(beta, 1.0)
    tail = np.cumsum(terms[::-1])[::-1]               # tail[j] = Σ_{l >= j} terms
    above = np.flatnonzero(tail[1:] > tolerance)
    if above.size and above[-1] + 1 >= MAX_DEGREE:
        raise ValueError(f"the Gegenbauer series of the zonal kernel needs more than {MAX_DEGREE} terms at "
                         f"beta = {beta:g}, d = {d}; use summation='direct'")
    return int(above[-1] + 1 if above.size else 0)


def tables(theta, d, degree):
    r"""The normalised Gegenbauer polynomials of cos θ and their first two θ-derivatives.

    .. math::

        P_{l+1}(s) = \frac{2(l + \lambda) s P_l(s) - l P_{l-1}(s)}{l + 2\lambda}, \qquad
        \lambda = \frac d2 - 1, \quad P_l(1) = 1.

    Parameters
    ----------
    theta : ndarray, shape (N,)
    d : int
    degree : int

    Returns
    -------
    P, dP, d2P : ndarray, shape (degree + 1, N)
        P_l(cos θ), ∂_θ P_l(cos θ), ∂²_θ P_l(cos θ).

    Examples
    --------
    >>> P, dP, d2P = tables(np.array([0.3]), 3, 2)        # Legendre for d = 3
    >>> bool(np.allclose(P[:, 0], [1, np.cos(0.3), (3 * np.cos(0.3) ** 2 - 1) / 2]))
    True
    """
    s, sn = np.cos(theta), np.sin(theta)
    lam = 0.5 * d - 1.0
    p, dp, d2p = (np.zeros((degree + 1, theta.size)) for _ in range(3))
    p[0] = 1.0
    if degree >= 1:
        p[1], dp[1] = s, 1.0
    for l in range(1, degree):
        a, b = 2.0 * (l + lam) / (l + 2.0 * lam), l / (l + 2.0 * lam)
        p[l + 1] = a * s * p[l] - b * p[l - 1]
        dp[l + 1] = a * (p[l] + s * dp[l]) - b * dp[l - 1]
        d2p[l + 1] = a * (2.0 * dp[l] + s * d2p[l]) - b * d2p[l - 1]
    return p, -sn * dp, sn * sn * d2p - s * dp


class Series:
    r"""The fields of the zonal solver for one β, d and grid, by the truncated series.

    ``fields(m)`` returns (E m, (E∘G) m, ∂_θ(E∘G) m) and ``quadratic(m)`` = m^T E m:

    .. math::

        E m = \sum_l a_l M_l P_l(\cos\theta_i), \qquad M_l = \sum_j m_j P_l(\cos\theta_j).

    Parameters
    ----------
    beta : float
    d : int
    theta : ndarray, shape (N,)
        Cell centres.

    Examples
    --------
    >>> from meanfield.solvers import zonal
    >>> s = Series(2.0, 3, zonal.polar_grid(16)[0])
    >>> m = np.full(16, 1 / 16)
    >>> bool(np.isclose(s.quadratic(m), m @ s.fields(m)[0]))
    True
    """

    def __init__(self, beta, d, theta):
        self.degree = degree(beta, d)
        self.p, self.dp, self.d2p = tables(theta, d, self.degree)
        if beta == 0:
            self.a = np.zeros(self.degree + 1)
            self.a[0] = 1.0
            self.b = np.zeros(self.degree + 1)
            self.b[1] = 1.0                      # lim c_1 N_1 / β = (1/d) d
        else:
            self.a = np.exp(log_coefficients(beta, d, self.degree))
            self.b = self.a / beta

    def fields(self, m, slope=True):
        moments = self.p @ m
        weighted = self.b * moments
        return (self.p.T @ (self.a * moments), self.dp.T @ weighted,
                self.d2p.T @ weighted if slope else None)

    def quadratic(self, m):
        moments = self.p @ m
        return float(self.a @ (moments * moments))
