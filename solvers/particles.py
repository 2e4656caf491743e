"""Interacting-particle solver: n tokens on S^{d-1} (any d, β, Q, K, V, and batches).

    dx_i/dt = X[μ^n](x_i),   μ^n = sum_j w_j δ_{x_j}   (w_j = 1/n by default)

Time stepping: RK4 or forward Euler followed by x <- x/|x| (the projection keeps RK4's
order and the constraint to round-off), or the adaptive Dormand–Prince 5(4) pair.
"""
from . import _numba_env  # noqa: F401

import numpy as np

from meanfield.checks import (as_choice, as_float_array, as_points, as_positive, as_time_grid,
                              as_weights)
from meanfield.geometry import circle_points, normalise
from meanfield.models import as_model

from . import kernels
from .results import ParticleSolution
from .stepping import Checkpoint, integrate

METHODS = {"rk4": "rk4", "euler": "euler", "adaptive": "dopri5", "dopri5": "dopri5"}
SUMMATIONS = ("auto", "direct")


def _batched(x):
    return x[None] if x.ndim == 2 else x


def _uniform_weights(shape):
    B, n = shape[0], shape[1]
    return np.full((B, n), 1.0 / n)


def attention_field(model, x, weights=None, sources=None, summation="auto"):
    """(X, log Φ) at targets x (B, n, d) from sources (B, m, d) (default: x itself) with
    weights (B, m).  No input checks: internal entry point of the solvers."""
    y = x if sources is None else sources
    w = _uniform_weights(y.shape) if weights is None else weights
    d = x.shape[-1]
    A, V = model.interaction(d)
    general_A = model.attention_scalar is None
    general_V = model.value_scalar is None
    out = np.empty(x.shape)
    log_phi = np.empty(x.shape[:2])
    yT = np.ascontiguousarray(np.swapaxes(y, 1, 2))
    kernels.attention_field(np.ascontiguousarray(x), yT, np.ascontiguousarray(w), A, V, model.beta,
                            model.normalised, general_A, general_V, out, log_phi)
    if not model.normalised and not np.all(np.isfinite(out)):
        raise FloatingPointError(
            f"USA velocity overflows double precision at beta = {model.beta:g} (e^(beta <Qx,Ky>) > 1e308); "
            f"use SA, a smaller beta, or rescale time")
    return out, log_phi


def _check_weights(weights, x):
    if weights is None:
        return None
    w = np.asarray(weights)
    if x.ndim == 3 and w.ndim == 2:
        return np.stack([as_weights(row, x.shape[1]) for row in w])
    return np.broadcast_to(as_weights(w, x.shape[-2]), x.shape[:-1]).copy().reshape(-1, x.shape[-2])


def velocity(model, x, weights=None, summation="auto"):
    """Tangent velocities X[μ](x_i) of tokens x (n, d) or a batch (B, n, d), μ = sum_j w_j δ_{x_j}."""
    model = as_model(model)
    x = as_points(x, "x", ndim=(2, 3))
    as_choice(summation, "summation", SUMMATIONS)
    w = _check_weights(weights, x)
    v, _ = attention_field(model, _batched(x), w, summation=summation)
    return v.reshape(x.shape)


def default_dt(model, d):
    """A step well inside RK4's stability region: 0.25 / L with L ≈ the field's Lipschitz
    constant |V| (1 + β|A|) (times e^{β|A|} for USA), capped at 0.1."""
    A, V = model.interaction(d)
    a = np.linalg.norm(A, 2)
    lip = np.linalg.norm(V, 2) * (1.0 + model.beta * a)
    if not model.normalised:
        lip *= np.exp(model.beta * a)
    return float(min(0.1, 0.25 / max(lip, 1e-300)))


def _integration_setup(model, t_eval, method, dt):
    model = as_model(model)
    t_eval = as_time_grid(t_eval)
    as_choice(method, "method", tuple(METHODS))
    scheme = METHODS[method]
    if dt is not None:
        dt = as_positive(dt, "dt")
    return model, t_eval, scheme, dt


def _checkpoint(checkpoint, checkpoint_every, meta):
    if checkpoint is None:
        return None
    return Checkpoint(checkpoint, every=checkpoint_every, meta=meta)


def solve(model, x0, t_eval, method="rk4", dt=None, *, summation="auto", weights=None, rtol=1e-8,
          atol=1e-10, progress=False, energy=True, checkpoint=None, checkpoint_every=100,
          resume=False):
    """Integrate the tokens x0 (n, d) or a batch (B, n, d) and return a ParticleSolution.

    method: "rk4" (default), "euler" (both with renormalisation after each step, step ``dt``,
    default ``default_dt``) or "adaptive" (Dormand–Prince 5(4) with ``rtol``, ``atol``).
    ``checkpoint`` (a path) saves the state every ``checkpoint_every`` steps; with
    ``resume=True`` an existing checkpoint is continued, bit for bit.
    """
    model, t_eval, scheme, dt = _integration_setup(model, t_eval, method, dt)
    x0 = as_points(x0, "x0", ndim=(2, 3))
    as_choice(summation, "summation", SUMMATIONS)
    w = _check_weights(weights, x0)
    batched = _batched(x0)
    if scheme != "dopri5" and dt is None:
        dt = default_dt(model, x0.shape[-1])

    def rhs(x):
        return attention_field(model, x, w, summation=summation)[0]

    meta = dict(solver="particles", model=model.to_dict(), method=scheme, dt=dt, rtol=rtol, atol=atol,
                summation=summation)
    xs, info = integrate(rhs, batched, t_eval, scheme=scheme, dt=dt, rtol=rtol, atol=atol,
                         project=normalise, progress=progress,
                         checkpoint=_checkpoint(checkpoint, checkpoint_every, meta), resume=resume)
    xs = xs.reshape((t_eval.size,) + x0.shape)
    info.update(method=method, dt=dt, summation=summation)
    en = _trajectory_energy(model, xs, w, summation) if energy else None
    return ParticleSolution(t=t_eval, x=xs, energy=en, model=model, info=info)


def _trajectory_energy(model, xs, w, summation):
    from meanfield.energy import energy as _energy
    if not model.is_isotropic:
        return np.full(xs.shape[:-2], np.nan)
    flat = xs.reshape((-1,) + xs.shape[-2:])
    wf = None if w is None else np.repeat(w[None], xs.shape[0], axis=0).reshape(-1, xs.shape[-2])
    e = np.array([_energy(flat[i], model.beta, None if wf is None else wf[i], summation=summation)
                  for i in range(flat.shape[0])])
    return e.reshape(xs.shape[:-2])


def angle_velocity(model, theta):
    """dθ_i/dt on the circle, θ (n,) or (B, n): (1/Z_i) sum_j e^{β cos(θ_i-θ_j)} sin(θ_j-θ_i)
    (Z_i the softmax sum for SA, n for USA; times -1 for V = -I)."""
    model = as_model(model)
    theta = as_float_array(theta, "theta")
    if theta.ndim not in (1, 2) or theta.shape[-1] == 0:
        raise ValueError(f"theta must have shape (n,) or (B, n); got {theta.shape}")
    if not model.is_isotropic:
        raise ValueError("the angle form needs Q = K = I and V = ±I; use solve() with Cartesian points")
    th = np.atleast_2d(theta)
    out = np.empty(th.shape)
    kernels.circle_angle_field(th, th, _uniform_weights(th.shape), model.beta, model.sign,
                               model.normalised, out)
    return out.reshape(theta.shape)


def solve_angles(model, theta0, t_eval, method="rk4", dt=None, *, rtol=1e-8, atol=1e-10, progress=False):
    """The circle (d = 2) in angle variables θ; returns a ParticleSolution with .theta (m, ...)
    (unwrapped angles) and .x = (cos θ, sin θ)."""
    model, t_eval, scheme, dt = _integration_setup(model, t_eval, method, dt)
    theta0 = as_float_array(theta0, "theta0")
    angle_velocity(model, theta0)  # validates shapes and the model
    if scheme != "dopri5" and dt is None:
        dt = default_dt(model, 2)
    ths, info = integrate(lambda th: angle_velocity(model, th), theta0, t_eval, scheme=scheme, dt=dt,
                          rtol=rtol, atol=atol, progress=progress)
    info.update(method=method, dt=dt)
    xs = circle_points(ths)
    en = _trajectory_energy(model, xs, None, "direct")
    return ParticleSolution(t=t_eval, x=xs, energy=en, model=model, info=info, theta=ths)
