"""Exact solutions to test the solvers against.

At β = 0 both SA and USA reduce to X[μ](x) = P_x m, m = ∫ y dμ, which maps the Möbius
(Poisson-kernel) family into itself:

- S^1: the wrapped Cauchy density ρ = (1/2π)(1-r²)/(1 - 2r cos(θ-ψ) + r²) with
  r(t) = r0 e^{t/2} / sqrt(1 - r0² + r0² e^t), ψ fixed.
- S^2: ρ_w(x) = (1/4π)((1-|w|²)/|x-w|²)², w = s e, with ds/dt = (1/2)(1-s²) m(s) and
  m(s) = (1+s²)/(2s) - ((1-s²)²/(4s²)) ln((1+s)/(1-s)) the mean's length.

For β > 0: two half-mass Diracs at angle φ stay on their great circle and
USA: dφ/dt = -e^{β cos φ} sin φ;  SA: dφ/dt = -2 e^{β cos φ} sin φ / (e^β + e^{β cos φ})
(signs flip for V = -I).

Zonal measures on S^{d-1} at β = 0 (any d): the mean is m(t) = <m, e> e, and every token's
s = <x, e> obeys ds/dt = <P_x m, e> = <m, e>(1 - s²), so artanh s(t) = artanh s(0) + τ(t) with
τ' = <m, e> = ∫ tanh(artanh s_0 + τ) dμ_0(s_0): one scalar ODE for τ, and μ_t is the push-forward
of μ_0 by s_0 ↦ tanh(artanh s_0 + τ(t)).
"""
import numpy as np
from scipy.integrate import solve_ivp

from .checks import as_float_array, as_points, as_time_grid
from .models import as_model

__all__ = ["wrapped_cauchy_radius", "wrapped_cauchy_density", "wrapped_cauchy_cdf", "mobius_mean",
           "mobius_radius", "mobius_density", "mobius_push", "two_dirac_angle", "zonal_consensus_shift",
           "zonal_consensus_push"]


def _check_radius(r, name, upper=1.0):
    r = as_float_array(r, name)
    if np.any(r < 0) or np.any(r >= upper):
        raise ValueError(f"{name} must lie in [0, 1); got {r}")
    return r


def wrapped_cauchy_radius(t, r0):
    """r(t) = r0 e^{t/2} / sqrt(1 - r0² + r0² e^t): the order parameter |∫ x dμ_t| at β = 0 on S^1."""
    t = as_float_array(t, "t")
    r0 = _check_radius(r0, "r0")
    e = np.exp(t)
    return r0 * np.sqrt(e) / np.sqrt(1 - r0 ** 2 + r0 ** 2 * e)


def wrapped_cauchy_density(theta, r, psi=0.0):
    """(1/2π)(1-r²)/(1 - 2r cos(θ-ψ) + r²), a density against arc length."""
    theta = as_float_array(theta, "theta")
    r = _check_radius(r, "r")
    return (1 - r ** 2) / (1 - 2 * r * np.cos(theta - psi) + r ** 2) / (2 * np.pi)


def wrapped_cauchy_cdf(theta, r, psi=0.0):
    """Mass of the wrapped Cauchy density on [ψ - π, θ] for θ ∈ [ψ - π, ψ + π]:
    1/2 + (1/π) arctan(((1+r)/(1-r)) tan((θ-ψ)/2))."""
    theta = as_float_array(theta, "theta")
    r = _check_radius(r, "r")
    u = theta - psi
    if np.any(np.abs(u) > np.pi * (1 + 1e-14)):
        raise ValueError("theta must lie within [psi - pi, psi + pi]")
    with np.errstate(divide="ignore"):
        return 0.5 + np.arctan((1 + r) / (1 - r) * np.tan(np.clip(u, -np.pi, np.pi) / 2)) / np.pi


def mobius_mean(s):
    """m(s) = |∫ x ρ_w dσ| for |w| = s: (1+s²)/(2s) - ((1-s²)²/(4s²)) ln((1+s)/(1-s)); m(0) = 0."""
    s = _check_radius(s, "s")
    small = s < 1e-3
    ss = np.where(small, 0.5, s)
    exact = (1 + ss ** 2) / (2 * ss) - (1 - ss ** 2) ** 2 / (4 * ss ** 2) * np.log((1 + ss) / (1 - ss))
    # series at 0: m(s) = (4/3) s - (4/15) s^3 ... from expanding the logarithm
    series = 4 * s / 3 - 4 * s ** 3 / 15
    return np.where(small, series, exact)


def mobius_radius(t, s0):
    """s(t) solving ds/dt = (1/2)(1-s²) m(s), s(t[0]) = s0 (rtol 1e-12)."""
    t = as_time_grid(t, "t")
    s0 = float(_check_radius(s0, "s0"))
    if s0 == 0:
        return np.zeros_like(t)
    sol = solve_ivp(lambda _t, s: 0.5 * (1 - s ** 2) * mobius_mean(np.clip(s, 0, 1 - 1e-16)),
                    (t[0], t[-1]), [s0], t_eval=t, rtol=1e-12, atol=1e-14, method="DOP853")
    return sol.y[0]


def mobius_density(x, w):
    """ρ_w(x) = (1/4π)((1-|w|²)/|x-w|²)² on S^2 (density against area), w in the open unit ball."""
    x = as_points(x, "x", d=3)
    w = as_float_array(w, "w")
    if w.shape != (3,) or not np.linalg.norm(w) < 1:
        raise ValueError("w must be a vector in R^3 with |w| < 1")
    dist2 = np.sum((x - w) ** 2, axis=1)
    return ((1 - w @ w) / dist2) ** 2 / (4 * np.pi)


def mobius_push(x, w):
    """T_w(x) = ((1-|w|²)x + 2(1+<x,w>)w)/(1 + 2<x,w> + |w|²): pushes uniform points to ρ_w."""
    x = as_points(x, "x", d=3)
    w = as_float_array(w, "w")
    if w.shape != (3,) or not np.linalg.norm(w) < 1:
        raise ValueError("w must be a vector in R^3 with |w| < 1")
    xw = x @ w
    y = ((1 - w @ w) * x + 2 * (1 + xw)[:, None] * w) / (1 + 2 * xw + w @ w)[:, None]
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def two_dirac_angle(model, t, phi0):
    """Angle φ(t) between two half-mass Diracs (Q = K = I, V = ±I), from φ(t[0]) = phi0."""
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


def zonal_consensus_shift(t, s0, weights):
    """τ(t) with τ(t_0) = 0 and τ' = Σ_i w_i tanh(artanh s0_i + τ) (rtol 1e-12): at β = 0 every polar
    coordinate s = <x, e> of a zonal measure Σ_i w_i (ring at s0_i) moves to tanh(artanh s0_i + τ(t)).
    s0 in (-1, 1); weights non-negative (normalised here)."""
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


def zonal_consensus_push(s0, tau):
    """tanh(artanh s0 + τ): where the polar coordinate s0 has moved after the shift τ (β = 0)."""
    return np.tanh(np.arctanh(as_float_array(s0, "s0")) + tau)
