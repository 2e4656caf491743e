r"""Exact solutions to test the solvers against.

At β = 0 both SA and USA reduce to :math:`X[\mu](x) = P_x m`, :math:`m = \int y\, d\mu`, which maps
the Möbius (Poisson-kernel) family into itself:

- S^1: the wrapped Cauchy density, centred at a fixed ψ, with its concentration r(t)
  growing towards 1,

  .. math::

      \rho = \frac{1}{2\pi} \frac{1 - r^2}{1 - 2r\cos(\theta - \psi) + r^2}, \qquad
      r(t) = \frac{r_0 e^{t/2}}{\sqrt{1 - r_0^2 + r_0^2 e^t}}.

- S^2: the Möbius density ρ_w, w = s e, with m(s) the length of its mean
  (``mobius_mean``),

  .. math::

      \rho_w(x) = \frac{1}{4\pi} \Big(\frac{1 - |w|^2}{|x - w|^2}\Big)^2, \qquad
      \dot s = \tfrac12 (1 - s^2)\, m(s), \quad
      m(s) = \frac{1 + s^2}{2s} - \frac{(1 - s^2)^2}{4s^2} \ln\frac{1+s}{1-s}.

For β > 0: two half-mass Diracs at angle φ stay on their great circle and (signs flip for V = -I)

.. math::

    \text{USA: } \dot\varphi = -e^{\beta\cos\varphi} \sin\varphi, \qquad
    \text{SA: } \dot\varphi = -\frac{2 e^{\beta\cos\varphi}\sin\varphi}{e^\beta + e^{\beta\cos\varphi}}.

Zonal measures on S^{d-1} at β = 0 (any d): the mean is m(t) = ⟨m, e⟩ e, and every token's
s = ⟨x, e⟩ obeys :math:`\dot s = \langle P_x m, e\rangle = \langle m, e\rangle (1 - s^2)`, so

.. math::

    \operatorname{artanh} s(t) = \operatorname{artanh} s(0) + \tau(t), \qquad
    \dot\tau = \langle m, e\rangle = \int \tanh(\operatorname{artanh} s_0 + \tau)\, d\mu_0(s_0):

one scalar ODE for τ, and μ_t is the push-forward of μ_0 by s_0 ↦ tanh(artanh s_0 + τ(t)).
"""
import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import solve_ivp

from .checks import as_float_array, as_points, as_time_grid
from .models import SA, USA, as_model

__all__ = ["wrapped_cauchy_radius", "wrapped_cauchy_density", "wrapped_cauchy_cdf", "mobius_mean",
           "mobius_radius", "mobius_density", "mobius_push", "two_dirac_angle", "zonal_consensus_shift",
           "zonal_consensus_push"]


def _check_radius(r, name, upper=1.0):
    r = as_float_array(r, name)
    if np.any(r < 0) or np.any(r >= upper):
        raise ValueError(f"{name} must lie in [0, 1); got {r}")
    return r


def wrapped_cauchy_radius(t: ArrayLike, r0: ArrayLike) -> np.ndarray:
    r"""The order parameter |∫ x dμ_t| of the wrapped Cauchy solution at β = 0 on S^1.

    .. math::

        r(t) = \frac{r_0 e^{t/2}}{\sqrt{1 - r_0^2 + r_0^2 e^t}}.

    Parameters
    ----------
    t : array_like
        Times.
    r0 : array_like
        r(0) in [0, 1).

    Returns
    -------
    numpy.ndarray
        r(t), broadcast over t and r0.

    Raises
    ------
    ValueError
        If r0 is not in [0, 1) or an input is not finite.

    Examples
    --------
    >>> from meanfield.exact import wrapped_cauchy_radius
    >>> wrapped_cauchy_radius([0.0, 1.0, 20.0], 0.5).round(6)
    array([0.5     , 0.689469, 1.      ])
    """
    t = as_float_array(t, "t")
    r0 = _check_radius(r0, "r0")
    e = np.exp(t)
    return r0 * np.sqrt(e) / np.sqrt(1 - r0 ** 2 + r0 ** 2 * e)


def wrapped_cauchy_density(theta: ArrayLike, r: ArrayLike, psi: float = 0.0) -> np.ndarray:
    r"""The wrapped Cauchy density on S^1, against arc length.

    .. math::

        \rho(\theta) = \frac{1}{2\pi} \frac{1 - r^2}{1 - 2r\cos(\theta - \psi) + r^2}.

    Parameters
    ----------
    theta : array_like
        Angles (radians).
    r : array_like
        Concentration in [0, 1).
    psi : float
        Centre angle ψ.

    Returns
    -------
    numpy.ndarray
        ρ(θ).

    Raises
    ------
    ValueError
        If r is not in [0, 1) or an input is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.exact import wrapped_cauchy_density
    >>> round(float(wrapped_cauchy_density(0.0, 0.0) * 2 * np.pi), 12)      # r = 0: uniform
    1.0
    >>> round(float(wrapped_cauchy_density(0.0, 0.5)), 6)                  # (1 + r) / (2π (1 - r))
    0.477465
    """
    theta = as_float_array(theta, "theta")
    r = _check_radius(r, "r")
    return (1 - r ** 2) / (1 - 2 * r * np.cos(theta - psi) + r ** 2) / (2 * np.pi)


def wrapped_cauchy_cdf(theta: ArrayLike, r: ArrayLike, psi: float = 0.0) -> np.ndarray:
    r"""Mass of the wrapped Cauchy density on [ψ - π, θ], for θ ∈ [ψ - π, ψ + π].

    .. math::

        F(\theta) = \frac12 + \frac1\pi \arctan\Big(\frac{1 + r}{1 - r} \tan\frac{\theta - \psi}{2}\Big).

    Parameters
    ----------
    theta : array_like
        Angles in [ψ - π, ψ + π].
    r : array_like
        Concentration in [0, 1).
    psi : float
        Centre angle ψ.

    Returns
    -------
    numpy.ndarray
        F(θ) in [0, 1].

    Raises
    ------
    ValueError
        If r is not in [0, 1) or θ is outside [ψ - π, ψ + π].

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.exact import wrapped_cauchy_cdf
    >>> wrapped_cauchy_cdf(np.array([-np.pi, 0.0, np.pi]), 0.7).round(12)
    array([0. , 0.5, 1. ])
    """
    theta = as_float_array(theta, "theta")
    r = _check_radius(r, "r")
    u = theta - psi
    if np.any(np.abs(u) > np.pi * (1 + 1e-14)):
        raise ValueError("theta must lie within [psi - pi, psi + pi]")
    with np.errstate(divide="ignore"):
        return 0.5 + np.arctan((1 + r) / (1 - r) * np.tan(np.clip(u, -np.pi, np.pi) / 2)) / np.pi


def mobius_mean(s: ArrayLike) -> np.ndarray:
    r"""Length of the mean of the Möbius density ρ_w on S^2, for |w| = s.

    .. math::

        m(s) = \Big|\int x \rho_w \, d\sigma\Big| = \frac{1 + s^2}{2s} - \frac{(1 - s^2)^2}{4s^2} \ln\frac{1+s}{1-s},
        \qquad m(0) = 0

    (the series 4s/3 - 4s³/15 below s = 1e-3).

    Parameters
    ----------
    s : array_like
        |w| in [0, 1).

    Returns
    -------
    numpy.ndarray
        m(s).

    Raises
    ------
    ValueError
        If s is not in [0, 1).

    Examples
    --------
    >>> from meanfield.exact import mobius_mean
    >>> [round(float(m), 6) for m in mobius_mean([0.0, 1e-4, 0.5])]
    [0.0, 0.000133, 0.632031]
    """
    s = _check_radius(s, "s")
    small = s < 1e-3
    ss = np.where(small, 0.5, s)
    exact = (1 + ss ** 2) / (2 * ss) - (1 - ss ** 2) ** 2 / (4 * ss ** 2) * np.log((1 + ss) / (1 - ss))
    # series at 0: m(s) = (4/3) s - (4/15) s^3 ... from expanding the logarithm
    series = 4 * s / 3 - 4 * s ** 3 / 15
    return np.where(small, series, exact)


def mobius_radius(t: ArrayLike, s0: float) -> np.ndarray:
    r"""The Möbius parameter s(t) = |w(t)| of the exact β = 0 solution on S^2.

    .. math::

        \dot s = \tfrac12 (1 - s^2)\, m(s), \qquad s(t_0) = s_0

    (``mobius_mean``; DOP853, rtol 1e-12).

    Parameters
    ----------
    t : array_like
        Increasing times; the solution starts at t[0].
    s0 : float
        s(t[0]) in [0, 1).

    Returns
    -------
    numpy.ndarray
        s at the times t.

    Raises
    ------
    ValueError
        If s0 is not in [0, 1) or t is not increasing.

    Examples
    --------
    >>> from meanfield.exact import mobius_radius
    >>> mobius_radius([0.0, 1.0, 5.0], 0.2).round(4)
    array([0.2   , 0.3661, 0.9691])
    """
    t = as_time_grid(t, "t")
    s0 = float(_check_radius(s0, "s0"))
    if s0 == 0:
        return np.zeros_like(t)
    sol = solve_ivp(lambda _t, s: 0.5 * (1 - s ** 2) * mobius_mean(np.clip(s, 0, 1 - 1e-16)),
                    (t[0], t[-1]), [s0], t_eval=t, rtol=1e-12, atol=1e-14, method="DOP853")
    return sol.y[0]


def mobius_density(x: ArrayLike, w: ArrayLike) -> np.ndarray:
    r"""The Möbius (Poisson-kernel) density on S^2, against area, for w in the open unit ball.

    .. math::

        \rho_w(x) = \frac{1}{4\pi} \Big(\frac{1 - |w|^2}{|x - w|^2}\Big)^2.

    Parameters
    ----------
    x : array_like, shape (n, 3)
        Points of S^2.
    w : array_like, shape (3,)
        |w| < 1.

    Returns
    -------
    numpy.ndarray
        ρ_w(x), shape (n,).

    Raises
    ------
    ValueError
        If x are not unit vectors of R^3 or |w| >= 1.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.exact import mobius_density
    >>> x = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    >>> (mobius_density(x, [0.0, 0.0, 0.5]) * 4 * np.pi).round(6)      # ((1 + s)/(1 - s))^2 and its inverse
    array([9.      , 0.111111])
    """
    x = as_points(x, "x", d=3)
    w = as_float_array(w, "w")
    if w.shape != (3,) or not np.linalg.norm(w) < 1:
        raise ValueError("w must be a vector in R^3 with |w| < 1")
    dist2 = np.sum((x - w) ** 2, axis=1)
    return ((1 - w @ w) / dist2) ** 2 / (4 * np.pi)


def mobius_push(x: ArrayLike, w: ArrayLike) -> np.ndarray:
    r"""The Möbius map that pushes the uniform measure on S^2 to ρ_w.

    .. math::

        T_w(x) = \frac{(1 - |w|^2) x + 2(1 + \langle x, w\rangle) w}{1 + 2\langle x, w\rangle + |w|^2}.

    Parameters
    ----------
    x : array_like, shape (n, 3)
        Points of S^2.
    w : array_like, shape (3,)
        |w| < 1.

    Returns
    -------
    numpy.ndarray
        T_w(x), shape (n, 3), unit vectors.

    Raises
    ------
    ValueError
        If x are not unit vectors of R^3 or |w| >= 1.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.exact import mobius_mean, mobius_push
    >>> y = mobius_push(mf.uniform_sphere(200_000, 3, seed=0), [0.0, 0.0, 0.5])
    >>> bool(abs(y[:, 2].mean() - mobius_mean(0.5)) < 0.01)
    True
    """
    x = as_points(x, "x", d=3)
    w = as_float_array(w, "w")
    if w.shape != (3,) or not np.linalg.norm(w) < 1:
        raise ValueError("w must be a vector in R^3 with |w| < 1")
    xw = x @ w
    y = ((1 - w @ w) * x + 2 * (1 + xw)[:, None] * w) / (1 + 2 * xw + w @ w)[:, None]
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def two_dirac_angle(model: SA | USA, t: ArrayLike, phi0: float) -> np.ndarray:
    r"""Angle φ(t) between two half-mass Diracs (QᵀK = I, V = ±I), from φ(t[0]) = φ_0.

    .. math::

        \text{USA: } \dot\varphi = -e^{\beta\cos\varphi} \sin\varphi, \qquad
        \text{SA: } \dot\varphi = -\frac{2 \sin\varphi}{e^{\beta(1 - \cos\varphi)} + 1}

    (signs flip for V = -I; DOP853, rtol 1e-12).

    Parameters
    ----------
    model : SA or USA
        With QᵀK = I and V = ±I.
    t : array_like
        Increasing times.
    phi0 : float
        φ(t[0]) in [0, π].

    Returns
    -------
    numpy.ndarray
        φ at the times t.

    Raises
    ------
    ValueError
        If the model is not isotropic, phi0 is out of [0, π] or t is not increasing.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.exact import two_dirac_angle
    >>> phi = two_dirac_angle(mf.SA(beta=0.0), [0.0, 1.0], np.pi / 2)
    >>> bool(np.isclose(np.tan(phi[1] / 2), np.exp(-1.0)))    # β = 0: tan(φ/2) = e^{-t} tan(φ0/2)
    True
    """
    model = as_model(model)
    if not model.is_isotropic:
        raise ValueError("two_dirac_angle needs Q^T K = I and V = ±I")
    t = as_time_grid(t, "t")
    phi0 = float(as_float_array(phi0, "phi0"))
    if not 0 <= phi0 <= np.pi:
        raise ValueError(f"phi0 must lie in [0, pi]; got {phi0}")
    beta, sign = model.beta, model.sign

    def rhs(_t, phi):
        c = np.cos(phi)
        if model.normalised:
            return -sign * 2 * np.sin(phi) / (np.exp(beta * (1 - c)) + 1)
        return -sign * np.exp(beta * c) * np.sin(phi)

    sol = solve_ivp(rhs, (t[0], t[-1]), [phi0], t_eval=t, rtol=1e-12, atol=1e-14, method="DOP853")
    return sol.y[0]


def zonal_consensus_shift(t: ArrayLike, s0: ArrayLike, weights: ArrayLike) -> np.ndarray:
    r"""The shift τ(t) of the exact β = 0 solution for a zonal measure Σ_i w_i (ring at s0_i).

    .. math::

        \dot\tau = \sum_i w_i \tanh(\operatorname{artanh} s_{0,i} + \tau), \qquad \tau(t_0) = 0;

    every polar coordinate s = ⟨x, e⟩ then moves to tanh(artanh s0_i + τ(t)) (DOP853, rtol 1e-12).

    Parameters
    ----------
    t : array_like
        Increasing times.
    s0 : array_like
        Polar coordinates of the rings, in (-1, 1).
    weights : array_like
        Non-negative masses of the rings (normalised here), shape of s0.

    Returns
    -------
    numpy.ndarray
        τ at the times t.

    Raises
    ------
    ValueError
        If s0 is not in (-1, 1) or the weights are invalid.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.exact import zonal_consensus_shift
    >>> zonal_consensus_shift([0.0, 1.0], [0.5, -0.5], [3.0, 1.0]).round(6)
    array([0.      , 0.363556])
    """
    t = as_time_grid(t, "t")
    s0 = as_float_array(s0, "s0")
    if np.any(np.abs(s0) >= 1):
        raise ValueError("s0 must lie in (-1, 1): the poles are fixed points, leave them out")
    w = as_float_array(weights, "weights")
    if w.shape != s0.shape or np.any(w < 0) or not w.sum() > 0:
        raise ValueError("weights must be non-negative, of the shape of s0, with positive total")
    w = w / w.sum()
    a0 = np.arctanh(s0)
    sol = solve_ivp(lambda _t, tau: [w @ np.tanh(a0 + tau[0])], (t[0], t[-1]), [0.0], t_eval=t, rtol=1e-12,
                    atol=1e-14, method="DOP853")
    return sol.y[0]


def zonal_consensus_push(s0: ArrayLike, tau: ArrayLike) -> np.ndarray:
    r"""Where the polar coordinate s0 has moved after the shift τ (β = 0).

    .. math::

        s = \tanh(\operatorname{artanh} s_0 + \tau).

    Parameters
    ----------
    s0 : array_like
        Polar coordinates in [-1, 1].
    tau : array_like
        Shift (``zonal_consensus_shift``).

    Returns
    -------
    numpy.ndarray
        The new polar coordinates.

    Raises
    ------
    ValueError
        If s0 is not finite.

    Examples
    --------
    >>> from meanfield.exact import zonal_consensus_push
    >>> zonal_consensus_push([0.0, 0.5], 1.0).round(6)
    array([0.761594, 0.913671])
    """
    return np.tanh(np.arctanh(as_float_array(s0, "s0")) + tau)
