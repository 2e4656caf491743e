r"""Interacting-particle solver: n tokens on S^{d-1} (any d, β, Q, K, V, and batches).

.. math::

    \frac{dx_i}{dt} = X[\mu^n](x_i), \qquad \mu^n = \sum_j w_j \delta_{x_j} \quad (w_j = 1/n \text{ by default}),
    \qquad X[\mu](x) = P_x \frac{1}{Z(x)} \int e^{\beta \langle Qx, Ky\rangle} V y \, d\mu(y).

Time stepping: RK4 or forward Euler followed by x <- x/|x| (the projection keeps RK4's
order and the constraint to round-off), or the adaptive Dormand–Prince 5(4) pair.  The authors'
scheme of the paper's figures, x_i <- (x_i + h D_i)/|x_i + h D_i| with the unprojected drift
D_i = Σ_j A_ij V x_j (``method="euler_unprojected"``), is the projected Euler step with the
per-token step h/(1 + h <x_i, D_i>): first order, and slow in t by up to h <x_i, D_i> ≈ h.

Summation of the field: "direct" (``kernels``: blocked O(n m d) log-sum-exp, any d, Q, K, V;
``gemm``: the same with score and value tiles as BLAS products, used for d <= 1024;
``small``: whole-system matrix products for batches of systems of at most ``small.SMALL_N``
tokens, with the fixed steps fused into the engine) or "fast" (``spectral``: Fourier / Funk–Hecke expansion,
O((n + m) K) on S^1 and
O((n + m) L²) on S^2 for Q^T K = I, V = ±I, with an a-posteriori error bound and direct
recomputation of the targets where it fails); "auto" picks the cheaper valid one.

Causal models (``SA(..., causal=True)``: token i attends to j <= i, USA divided by the prefix
weight sum_{j<=i} w_j) run on every direct engine (the mask is applied inside ``small``, ``gemm``
and ``kernels``); the fast summation has no causal form and refuses them.  Their energies are
NaN: the causal dynamics is not a gradient flow (info["energy"] says so).
"""
from __future__ import annotations

from . import _numba_env  # noqa: F401

from collections.abc import Callable
from os import PathLike

from numpy.typing import ArrayLike

import numpy as np
from scipy.special import logsumexp

from meanfield.checks import (as_batch_weights, as_choice, as_count, as_float_array, as_points, as_positive,
                              as_time_grid)
from meanfield.checks import as_flag
from meanfield.budget import BUDGET, as_budget
from meanfield.geometry import circle_points, normalise, span_coordinates
from meanfield.models import SA, USA, Hardmax, MultiHead, as_model

from . import hardmax, small, stepping
from .kernels import direct as kernels, gemm, spectral, tiles
from .contract import CHECKPOINT_EVERY, PARTICLE_SCHEME, Operator, scheme_keyword, scheme_name
from .results import ParticleSolution
from .noise import brownian_kick
from .stepping import Checkpoint, digest, integrate

METHODS = {"rk4": "rk4", "euler": "euler", "euler_unprojected": "euler", "adaptive": "dopri5", "dopri5": "dopri5"}
SUMMATIONS = ("auto", "direct", "fast")


def _batched(x):
    return x[None] if x.ndim == 2 else x


def _uniform_weights(shape):
    B, n = shape[0], shape[1]
    return np.full((B, n), 1.0 / n)


def resolve_summation(model, d, n, m, summation="auto"):
    """The summation that ``attention_field`` uses for n targets and m sources in R^d.

    "fast" (``meanfield.solvers.kernels.spectral``: Fourier / Funk–Hecke sums) needs Q^T K = I, V = ±I,
    d in {2, 3} and a non-causal model; "auto" takes it where it is valid and its estimated cost is
    below the direct O(n m) log-sum-exp summation's.

    Parameters
    ----------
    model : SA or USA
        The attention head.
    d : int
        Ambient dimension (tokens on S^{d-1}).
    n, m : int
        Numbers of targets and of sources.
    summation : {"auto", "direct", "fast"}
        What the caller asks for.

    Returns
    -------
    str
        "direct" or "fast".

    Raises
    ------
    ValueError
        For an unknown ``summation``, or "fast" where the fast sums do not apply (causal model,
        general Q, K, V, d > 3, β beyond the series' range).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import particles
    >>> particles.resolve_summation(mf.SA(1.0), 3, 10, 10)
    'direct'
    >>> particles.resolve_summation(mf.SA(1.0), 3, 100_000, 100_000)
    'fast'
    """
    as_choice(summation, "summation", SUMMATIONS)
    if summation == "direct":
        return "direct"
    if model.causal:
        if summation == "fast":
            raise ValueError(f"summation='fast' has no causal mask (its Fourier / Funk–Hecke sums run over all "
                             f"tokens); {model!r} needs summation='direct' or 'auto'")
        return "direct"
    valid = spectral.supports(model, d)
    if summation == "fast":
        if not valid:
            raise ValueError(f"summation='fast' needs Q^T K = I, V = ±I, points on S^1 or S^2 (d = 2 or 3) and "
                             f"beta <= {spectral.MAX_BETA:.4g}; got {model!r} with d = {d}; use summation='auto' "
                             f"or 'direct'")
        return "fast"
    if not valid:
        return "direct"
    direct, fast = spectral.cost(d, model.beta, n, m)
    return "fast" if fast < direct else "direct"


def _operators(model, d):
    """(A, V) for the kernels: the (d, d) matrices A = Q^T K and V when they are general, and
    1 × 1 arrays [[a]], [[v]] when A = a I, V = v I (O(1) memory for any d)."""
    a, v = model.attention_scalar, model.value_scalar
    if a is None or v is None:
        A, V = model.interaction(d)
    A = np.full((1, 1), a) if a is not None else A
    V = np.full((1, 1), v) if v is not None else V
    return A, V


def _small_arguments(model, d):
    """The model's arguments of ``small.field`` / ``small.advance`` after x, w (and h, count, rk4)."""
    A, V = _operators(model, d)
    general_A, general_V = model.attention_scalar is None, model.value_scalar is None
    return (model.beta, np.ascontiguousarray(A.T), float(A[0, 0]), V, float(V[0, 0]), model.normalised,
            general_A, general_V, model.causal)


def uses_small(n, m, how):
    """Whether direct summation runs on the batched small-system engine ``small``.

    That engine takes systems of at most ``small.SMALL_N`` tokens that are their own sources.

    Parameters
    ----------
    n, m : int
        Numbers of targets and of sources.
    how : str
        The resolved summation ("direct" or "fast", see ``resolve_summation``).

    Returns
    -------
    bool

    Examples
    --------
    >>> from meanfield.solvers import particles
    >>> particles.uses_small(32, 32, "direct"), particles.uses_small(32, 64, "direct")
    (True, False)
    """
    return how == "direct" and n == m and n <= small.SMALL_N


def _direct(model, x, y, w, dtype=np.float64):
    """Direct log-sum-exp summation for x (B, n, d), y (B, m, d): ``small.field`` when the
    targets are the sources and n <= small.SMALL_N, else ``gemm.softmax_sums`` for
    d <= gemm.MAX_D, else ``kernels.attention_field``; float32 products (``dtype``, which
    ``_precision`` admits only for d <= gemm.MAX_D) skip the float64 ``small.field``."""
    B, n, d = x.shape
    w = np.ascontiguousarray(w)
    if model.causal and y.shape[1] != n:
        raise ValueError(f"causal attention pairs target i with the sources j <= i: it needs as many sources as "
                         f"targets; got {n} targets and {y.shape[1]} sources")
    if y is x and n <= small.SMALL_N and dtype == np.float64:
        out, log_phi = np.empty(x.shape), np.empty(x.shape[:2])
        with kernels.threads_for(kernels.direct_seconds(B, n, n, d)):
            small.field(np.ascontiguousarray(x), w, *_small_arguments(model, d), out, log_phi)
        return out, log_phi
    A, V = _operators(model, d)
    y = np.ascontiguousarray(y)
    if gemm.supports(d):
        return _direct_gemm(model, x, y, w, A, V, dtype)
    return _direct_kernels(model, x, y, w, A, V)


def _direct_kernels(model, x, y, w, A, V):
    """``_direct`` by ``kernels.attention_field`` (any d; the engine for d > gemm.MAX_D)."""
    B, n, d = x.shape
    out, log_phi = np.empty(x.shape), np.empty(x.shape[:2])
    with kernels.threads_for(kernels.direct_seconds(B, n, y.shape[1], d)):
        kernels.attention_field(np.ascontiguousarray(x), y, np.ascontiguousarray(np.swapaxes(y, 1, 2)),
                                w, A, V, model.beta, model.normalised,
                                model.attention_scalar is None, model.value_scalar is None, model.causal, out,
                                log_phi)
    if model.causal and not model.normalised:
        out /= np.cumsum(w, axis=1)[:, :, None]
    return out, log_phi


def _direct_gemm(model, x, y, w, A, V, dtype=np.float64, tangent=True):
    """``_direct`` by ``gemm.softmax_sums`` (d <= gemm.MAX_D): queries U = β x A,
    then X = P_x V G with G the weighted softmax (SA) or exponential (USA) mean of the sources
    (the unprojected drift V G when ``tangent`` is False)."""
    U = model.beta * (x @ A) if model.attention_scalar is None else (model.beta * A[0, 0]) * x
    B, n, d = x.shape
    with kernels.threads_for(kernels.direct_seconds(B, n, y.shape[1], d)):
        G, log_phi = gemm.softmax_sums(U, y, w, model.normalised, dtype, causal=model.causal)
    v = G @ V.T if model.value_scalar is None else V[0, 0] * G
    if not tangent:
        return v, log_phi
    return v - np.sum(v * x, axis=-1, keepdims=True) * x, log_phi


def unprojected_drift(model, x, weights=None, dtype=np.float64):
    r"""The drift D_i of the authors' Euler step x_i <- (x_i + h D_i)/|x_i + h D_i| (paper.md §4):

    .. math::

        D_i = \frac{1}{Z_i} \sum_j w_j e^{\beta \langle Q x_i, K x_j \rangle} V x_j, \qquad
        Z_i = \sum_j w_j e^{\beta \langle Q x_i, K x_j \rangle} \quad \text{(SA)},

    without the division by Z_i for USA; the velocity field is its tangential part P_{x_i} D_i.

    Parameters
    ----------
    model : SA or USA
        One head with constant weights (causal allowed).
    x : ndarray (n, d) or (B, n, d)
        Unit vectors, d <= 1024 (``gemm``: the tiled summation that can skip the projection).
    weights : ndarray (n,) or (B, n), optional
        w_j >= 0 (default 1/n).
    dtype : float64 or float32
        Precision of the score and value products.

    Returns
    -------
    ndarray
        D, shaped like x.

    Raises
    ------
    ValueError
        If the model has several heads or time-dependent weights, d > ``gemm.MAX_D``, USA's weights
        would overflow (β |Q^T K| > 709.78), x is not an array of unit vectors, or the weights are invalid.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> x = mf.uniform_sphere(5, 3, seed=0)
    >>> D = unprojected_drift(mf.SA(1.0), x)
    >>> X = mf.velocity(mf.SA(1.0), x)
    >>> bool(np.allclose(D - np.sum(D * x, -1, keepdims=True) * x, X))
    True
    """
    model = as_model(model, causal=True)
    x = as_points(x, "x", ndim=(2, 3))
    _check_unprojected(model, x.shape[-1])
    _check_exponent(model, x.shape[-1])
    dtype = _precision(dtype, x.shape[-1], "direct")
    w = as_batch_weights(weights, x)
    w = _uniform_weights(_batched(x).shape) if w is None else w
    A, V = _operators(model, x.shape[-1])
    return _direct_gemm(model, _batched(x), _batched(x), np.ascontiguousarray(w), A, V, dtype,
                        tangent=False)[0].reshape(x.shape)


def _check_unprojected(model, d):
    """The unprojected drift is summed by ``gemm`` (d <= gemm.MAX_D) for one constant head."""
    if isinstance(model, MultiHead) or model.is_time_dependent:
        raise ValueError(f"method='euler_unprojected' (the authors' scheme) takes one SA/USA head with constant "
                         f"weights; got {model!r}")
    if not gemm.supports(d):
        raise ValueError(f"method='euler_unprojected' sums the drift with the gemm engine, d <= {gemm.MAX_D}; got "
                         f"d = {d} (for d >= n, solve in the span of the tokens: meanfield.solvers.span)")


def radial_bound(model, d):
    r"""A bound on |<x_i, D_i>| <= |D_i| for the unprojected drift: |V| (SA, a convex combination of
    the V x_j) or |V| e^{β|Q^T K|} (USA).  The step x + h D stays away from 0 when h times it is < 1.

    .. math::

        |\langle x_i, D_i \rangle| \le |D_i| \le \|V\|_2 \ \text{(SA)}, \qquad
        |D_i| \le \|V\|_2 \, e^{\beta \|Q^\top K\|_2} \ \text{(USA, unit total weight)},

    so |x_i + h D_i| ≥ 1 - h · bound > 0 when h · bound < 1.

    Parameters
    ----------
    model : SA or USA
        One head (validated by the caller).
    d : int
        Dimension of the tokens.

    Returns
    -------
    float
        The bound (spectral norms).

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> radial_bound(mf.SA(1.0), 3), round(radial_bound(mf.USA(2.0), 3), 6)        # 1 and e^2
    (1.0, 7.389056)
    >>> radial_bound(mf.SA(1.0, V=np.diag([1.0, -3.0, 2.0])), 3)
    3.0
    """
    A, V = _operators(model, d)
    bound = np.linalg.norm(V, 2)
    if not model.normalised:
        bound *= np.exp(model.beta * np.linalg.norm(A, 2))
    return float(bound)


def attention_field(model, x, weights=None, sources=None, summation="auto", stats=None, dtype=np.float64):
    r"""The attention field and the log partition functions at targets x from weighted sources y.

    .. math::

        X(x_i) = P_{x_i} \frac{1}{Z_i} \sum_j w_j e^{\beta \langle Q x_i, K y_j\rangle} V y_j,
        \qquad \Phi_i = \sum_j w_j e^{\beta \langle Q x_i, K y_j\rangle},

    with Z_i = Φ_i (SA) or Σ_j w_j (USA) and P_x = I - x x^T.  No input checks: this is the
    solvers' internal entry point (``velocity`` is the checked one).

    Parameters
    ----------
    model : SA or USA
        One attention head with constant weights.
    x : ndarray, shape (B, n, d)
        Targets (unit vectors).
    weights : ndarray, shape (B, m), optional
        Non-negative source weights (default 1/m).
    sources : ndarray, shape (B, m, d), optional
        Sources y (default: x itself).
    summation : {"auto", "direct", "fast"}
        See ``resolve_summation``; the fast path recomputes directly the targets where its error
        bound exceeds ``spectral.RTOL``.
    stats : dict, optional
        Accumulates the number of calls per summation and of recomputed targets ("recomputed").
    dtype : {numpy.float64, numpy.float32}
        float32: single-precision score and value products (``gemm``, direct summation).

    Returns
    -------
    X : ndarray, shape (B, n, d)
        The field (tangent to the sphere at each target).
    log_phi : ndarray, shape (B, n)
        log Φ_i.

    Raises
    ------
    FloatingPointError
        Where the USA field overflows double precision.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> x = mf.uniform_sphere(5, 3, seed=0)[None]
    >>> X, log_phi = particles.attention_field(mf.SA(1.0), x)
    >>> X.shape, log_phi.shape, bool(np.abs(np.sum(X * x, axis=-1)).max() < 1e-15)
    ((1, 5, 3), (1, 5), True)
    """
    y = x if sources is None else sources
    w = _uniform_weights(y.shape) if weights is None else weights
    how = resolve_summation(model, x.shape[-1], x.shape[1], y.shape[1], summation)
    recomputed = 0
    if how == "fast":
        out, log_phi, trusted = spectral.attention_field(model, x, y, w)
        for b in range(x.shape[0]):
            redo = np.flatnonzero(~trusted[b])
            if redo.size:
                recomputed += redo.size
                v, lp = _direct(model, x[b, redo][None], y[b][None], w[b][None])
                out[b, redo] = v[0]
                log_phi[b, redo] = lp[0]
    else:
        out, log_phi = _direct(model, x, y, w, dtype)
    if stats is not None:
        stats[how] = stats.get(how, 0) + 1
        stats["recomputed"] = stats.get("recomputed", 0) + recomputed
    _check_finite(model, out)
    return out, log_phi


def _check_finite(model, out):
    """``out`` (a USA velocity, or a state stepped by one) refused where it is no longer finite."""
    if not model.normalised and not np.all(np.isfinite(out)):
        raise FloatingPointError(
            f"USA velocity overflows double precision at beta = {model.beta:g} (e^(beta <Qx,Ky>) > 1e308); "
            f"use SA, a smaller beta, or rescale time")


def field(model, x, weights=None, summation="auto", stats=None, dtype=np.float64):
    r"""The velocity field at targets x (B, n, d) of a model with constant weights.

    One head: ``attention_field``'s X.  ``MultiHead``: the sum over heads (each summed as
    ``summation`` allows for it) plus the projected feed-forward term,

    .. math::

        X(x) = \sum_h X_h(x) + P_x W \sigma(A x + b).

    Parameters
    ----------
    model : SA, USA or MultiHead
        With constant weights (``model.at(t)`` of a time-dependent one).
    x : ndarray, shape (B, n, d)
        Tokens, which are also the sources.
    weights : ndarray, shape (B, n), optional
        Token weights (default 1/n).
    summation, stats, dtype
        As in ``attention_field``.

    Returns
    -------
    ndarray, shape (B, n, d)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> x = mf.uniform_sphere(4, 3, seed=1)[None]
    >>> bool(np.allclose(particles.field(mf.SA(1.0), x), particles.attention_field(mf.SA(1.0), x)[0]))
    True
    """
    if not isinstance(model, MultiHead):
        return attention_field(model, x, weights, summation=summation, stats=stats, dtype=dtype)[0]
    out = sum(attention_field(h, x, weights, summation=summation if summation != "fast" or
                              (spectral.supports(h, x.shape[-1]) and not h.causal) else "direct", stats=stats,
                              dtype=dtype)[0]
              for h in model.heads)
    if model.feedforward is not None:
        f = model.feedforward.field(x)
        out = out + f - np.sum(f * x, axis=-1, keepdims=True) * x
    return out


def velocity(model, x, weights=None, summation="auto", t=0.0, dtype=np.float64, *, backend="numba", device=None):
    r"""Tangent velocities X[μ](x_i) of tokens x, μ = Σ_j w_j δ_{x_j}.

    .. math::

        \dot x_i = P_{x_i} \frac{1}{Z_i} \sum_j w_j e^{\beta \langle Q x_i, K x_j\rangle} V x_j,
        \qquad Z_i = \sum_j w_j e^{\beta \langle Q x_i, K x_j\rangle} \ \text{(SA)}, \quad
        Z_i = \sum_j w_j \ \text{(USA)}.

    Parameters
    ----------
    model : SA, USA, MultiHead or Hardmax
        The dynamics; weights that depend on time are evaluated at ``t``.  A Hardmax (β = ∞) gives
        ``hardmax.velocity`` (tokens (n, d), no weights; the other options do not apply).
    x : array_like, shape (n, d) or (B, n, d)
        Unit vectors.
    weights : array_like, shape (n,) or (B, n), optional
        Non-negative token weights (default 1/n); causal models need w_1 > 0.
    summation : {"auto", "direct", "fast"}
        See ``resolve_summation``.
    t : float
        Time at which time-dependent weights are evaluated.
    dtype : {numpy.float64, numpy.float32}
        float32: single-precision score and value products (direct summation, d <= 1024; relative
        error ~1e-7 (1 + β), docs/performance.md); the result is float64 in both cases.
    backend : {"numba", "torch"}
        "torch" (one SA/USA head, direct summation) computes it with PyTorch on ``device``
        (``meanfield.solvers.torch_backend``, any d in float32 too).
    device : str, optional
        The torch device (None: CUDA when available, else the CPU).

    Returns
    -------
    ndarray, shape like x
        The velocities, tangent to the sphere.

    Raises
    ------
    ValueError
        For points that are not unit vectors, non-finite entries, a bad shape, negative weights, a
        summation that does not apply, or USA weights that overflow double precision.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> x = mf.uniform_sphere(6, 3, seed=0)
    >>> v = particles.velocity(mf.SA(1.0), x)
    >>> v.shape, bool(np.allclose(np.sum(v * x, axis=1), 0.0))
    ((6, 3), True)
    """
    if isinstance(model, Hardmax):          # β = ∞: the hardmax field (``hardmax.velocity``)
        if weights is not None:
            raise ValueError("the hardmax field weighs every token of the chosen set equally: pass weights=None")
        return hardmax.velocity(model, x)
    model = as_model(model, multihead=True, time_dependent=True, causal=True).at(t)
    x = as_points(x, "x", ndim=(2, 3))
    backend = _backend(backend, device)
    dtype = _precision(dtype, x.shape[-1], summation, backend)
    if backend == "torch":
        _torch_supports(model, summation)
        _check_exponent(model, x.shape[-1])
        w = _causal_weights(model, as_batch_weights(weights, x))
        w = _uniform_weights(_batched(x).shape) if w is None else w
        out = _torch_field(model, x.shape[-1], device, dtype).numpy(_batched(x), w)[0]
        _check_finite(model, out)
        return out.reshape(x.shape)
    for head in getattr(model, "heads", (model,)):
        _check_exponent(head, x.shape[-1])
        resolve_summation(head, x.shape[-1], x.shape[-2], x.shape[-2],
                          "auto" if isinstance(model, MultiHead) and summation == "fast" else summation)
    w = _causal_weights(model, as_batch_weights(weights, x))
    return field(model, _batched(x), w, summation=summation, dtype=dtype).reshape(x.shape)


class ParticleOperator(Operator):
    r"""The particle system dx_i/dt = X[μ^n](x_i) on S^{d-1} as an engine operator.

    .. math::

        \frac{dx_i}{dt} = X[\mu^n](x_i), \qquad \mu^n = \sum_j w_j \delta_{x_j},

    the field of ``velocity``; the engine contract of ``meanfield.solvers.contract`` for the state
    x (n, d) or (B, n, d): the rate is 0 (no step keeps anything non-negative: ``positive`` is
    False), ``project`` is x/|x| after each step, ``energy`` E_β of the empirical measure (NaN for
    a MultiHead or a causal model, where it is not the dynamics' energy), and there is no linear
    part (``linear_part`` raises NotImplementedError).

    Parameters
    ----------
    model : SA, USA or MultiHead
    d : int
        The dimension of the tokens.
    weights : array_like, optional
        Token weights (default 1/n).
    summation : {"auto", "direct", "fast"}

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> x = mf.uniform_sphere(6, 3, seed=0)
    >>> op = particles.ParticleOperator(mf.SA(1.0), 3)
    >>> v, rate = op(x)
    >>> bool(np.allclose(v, particles.velocity(mf.SA(1.0), x))), rate
    (True, 0.0)
    """

    positive = False

    def __init__(self, model: SA | USA | MultiHead, d: int, weights: ArrayLike | None = None,
                 summation: str = "auto"):
        self.model, self.d = as_model(model, multihead=True, causal=True), as_count(d, "d", minimum=2)
        self.weights, self.summation = weights, summation

    def __call__(self, x):
        return velocity(self.model, x, self.weights, self.summation), 0.0

    def step_bound(self):
        """``max_step(model, d)`` (the RK4 stability bound; the smallest over a MultiHead's heads)."""
        return min(max_step(head, self.d) for head in getattr(self.model, "heads", (self.model,)))

    def energy(self, x):
        """E_β of the empirical measure (one system), NaN where it is not the dynamics' energy."""
        if isinstance(self.model, MultiHead) or self.model.causal:
            return np.nan
        w = None if self.weights is None else np.asarray(self.weights, dtype=float)[None]
        return float(energies(self.model.beta, _batched(np.asarray(x, dtype=float)), w, self.summation)[0])

    def measure(self, x):
        """The tokens and their weights."""
        x = np.asarray(x, dtype=float)
        return x, (np.full(x.shape[-2], 1.0 / x.shape[-2]) if self.weights is None else np.asarray(self.weights))

    def project(self, x):
        """x/|x|: back onto the sphere."""
        return normalise(x)


def _causal_weights(model, w):
    """w, refused for a causal model when a first token has weight 0 (it would attend to nothing)."""
    if w is not None and any(h.causal for h in getattr(model, "heads", (model,))) and np.any(w[:, 0] <= 0):
        raise ValueError("causal attention needs weights with w_1 > 0: token 1 attends only to itself")
    return w


BACKENDS = ("numba", "torch")


def _backend(backend, device):
    """``backend`` checked; ``device`` is an option of the torch backend only."""
    as_choice(backend, "backend", BACKENDS)
    if backend == "numba" and device is not None:
        raise ValueError(f"device={device!r} places a run of backend='torch'; the Numba engines run on the CPU "
                         f"(pass backend='torch' or leave device=None)")
    return backend


def _torch_supports(model, summation, scheme="rk4", noise=None, engine="auto"):
    """Refuse what the torch backend does not run: several heads, time-dependent weights, the fast
    summation, adaptive steps, noise, the Numba engines (never a silent fallback)."""
    if isinstance(model, MultiHead) or model.is_time_dependent:
        raise ValueError(f"backend='torch' runs one SA/USA head with constant weights; got {model!r} "
                         f"(use backend='numba')")
    if summation == "fast":
        raise ValueError("backend='torch' sums the field directly; summation='fast' needs backend='numba'")
    if scheme == "dopri5":
        raise ValueError("backend='torch' takes fixed Euler or RK4 steps; method='adaptive' needs backend='numba'")
    if noise is not None:
        raise ValueError("backend='torch' has no Brownian noise; noise > 0 needs backend='numba'")
    if engine not in ("auto", "torch"):
        raise ValueError(f"engine={engine!r} is a Numba engine; with backend='torch' leave engine='auto'")


def _torch_field(model, d, device, dtype):
    """``torch_backend.Field`` of one constant SA/USA head in R^d."""
    from . import torch_backend
    A, V = _operators(model, d)
    return torch_backend.Field(model.beta, A, V, model.normalised, model.causal, device=device, dtype=dtype)


def _precision(dtype, d, summation, backend="numba"):
    """np.float64 or np.float32 from ``dtype``; float32 needs direct summation and (Numba) the ``gemm`` range of d."""
    try:
        kind = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float64 or float32; got {dtype!r}") from None
    if kind not in (np.float64, np.float32):
        raise ValueError(f"dtype must be float64 or float32; got {dtype!r}")
    if kind == np.float32 and (summation == "fast" or not (backend == "torch" or gemm.supports(d))):
        raise ValueError(f"dtype=float32 needs direct summation and d <= {gemm.MAX_D} "
                         f"(single-precision BLAS tiles); got d = {d}, summation {summation!r}")
    return kind.type


def default_dt(model, d, cap=True):
    r"""The default fixed step: 0.25 / L, well inside RK4's stability region.

    .. math::

        L = |V| (1 + \beta |Q^T K|) \quad (\text{times } e^{\beta |Q^T K|} \text{ for USA}),

    L a bound on the field's Lipschitz constant (operator norms); capped at 0.1 unless ``cap=False``.

    Parameters
    ----------
    model : SA or USA
    d : int
        Ambient dimension.
    cap : bool
        Cap the step at 0.1.

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import particles
    >>> particles.default_dt(mf.SA(1.0), 3), particles.default_dt(mf.SA(1.0), 3, cap=False)
    (0.1, 0.125)
    """
    A, V = _operators(model, d)
    a = np.linalg.norm(A, 2)      # a 1 × 1 array for A = a I: no d × d matrix, no SVD
    lip = np.linalg.norm(V, 2) * (1.0 + model.beta * a)
    if not model.normalised:
        lip *= np.exp(model.beta * a)
    step = 0.25 / max(lip, 1e-300)
    return float(min(0.1, step) if cap else step)


STABLE_STEP = {"rk4": 2.78, "euler": 2.0}   # real-axis stability interval of each scheme, |h λ| <= c
MAX_EXP = float(np.log(np.finfo(float).max))  # e^x overflows beyond x = 709.78


def max_step(model, d, method="rk4"):
    """The largest fixed step ``solve`` accepts: c / L.

    L is the Lipschitz bound of ``default_dt`` and c = 2.78 (RK4) or 2 (Euler) the scheme's
    stability interval on the negative real axis; larger steps can make the discrete dynamics
    unstable (tokens jumping about the sphere).

    Parameters
    ----------
    model : SA or USA
    d : int
        Dimension of the ambient space (tokens on S^{d-1}).
    method : {"rk4", "euler", "euler_unprojected"}
        "euler_unprojected" also keeps h |<x_i, D_i>| <= 1/2 (``radial_bound``), so that the
        authors' step x + h D never comes near 0 and its effective step h/(1 + h <x_i, D_i>)
        stays within a factor 2 of h.

    Returns
    -------
    float
        The bound on ``dt`` that ``solve`` and ``solve_angles`` enforce.

    Raises
    ------
    ValueError
        For d < 2, another method, or USA weights that overflow double precision.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import particles
    >>> round(particles.max_step(mf.SA(1.0), 3), 4), particles.max_step(mf.SA(1.0), 3, "euler")
    (1.39, 1.0)
    """
    model = as_model(model, causal=True)
    d = as_count(d, "d", minimum=2)
    scheme = METHODS[as_choice(method, "method", ("rk4", "euler", "euler_unprojected"))]
    _check_exponent(model, d)
    bound = STABLE_STEP[scheme] * default_dt(model, d, cap=False) / 0.25
    if method == "euler_unprojected":
        bound = min(bound, 0.5 / radial_bound(model, d))
    return bound


def _check_exponent(model, d):
    """USA weights e^{β<Qx,Ky>} overflow double precision when β |Q^T K| > 709.78."""
    if not model.normalised:
        a = np.linalg.norm(_operators(model, d)[0], 2)
        if model.beta * a > MAX_EXP:
            raise ValueError(f"beta = {model.beta:g} is too large for USA: e^(beta <Qx,Ky>) overflows double "
                             f"precision beyond beta |Q^T K| = {MAX_EXP:.2f}; use SA, a smaller beta, or rescale time")


def _check_adaptive(model, d, t_eval, rtol, atol):
    """Refuse adaptive runs that round-off alone would force into more than MAX_STEPS steps: the
    field is summed from terms of size S = |V| e^{β|Q^T K|} (USA; 1 for SA), so its absolute
    round-off ε S sets a per-step error ≈ h ε S, and a step below (rtol + atol)/(ε S) —
    T ε S / (rtol + atol) steps over the run."""
    if model.normalised:
        return
    A, V = _operators(model, d)
    speed = np.linalg.norm(V, 2) * np.exp(model.beta * np.linalg.norm(A, 2))
    steps = (t_eval[-1] - t_eval[0]) * np.finfo(float).eps * speed / (rtol + atol)
    if steps > stepping.MAX_STEPS:
        raise ValueError(f"beta = {model.beta:g} makes USA speeds reach {speed:.3g}: round-off in the field alone "
                         f"would force ~{steps:.1e} adaptive steps at rtol = {rtol:g}, atol = {atol:g}; loosen "
                         f"rtol/atol, shorten t_eval, use a smaller beta or SA")


def block_dt(model, d):
    """``default_dt`` for a ``MultiHead``: the heads' Lipschitz bounds add.

    The steps combine harmonically; the feed-forward term adds |W| |A| sup|σ'|, with
    sup|σ'| <= 1.13 for ReLU, GELU and tanh.  For one head it is ``default_dt``.

    Parameters
    ----------
    model : SA, USA or MultiHead
        With constant weights.
    d : int
        Ambient dimension.

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import particles
    >>> h = mf.SA(1.0)
    >>> particles.block_dt(h, 3), particles.block_dt(mf.MultiHead([h, h]), 3)    # two heads: half the step
    (0.1, 0.05)
    """
    if not isinstance(model, MultiHead):
        return default_dt(model, d)
    lip = sum(0.25 / default_dt(h, d) for h in model.heads)
    if model.feedforward is not None:
        W, A, _ = model.feedforward._validated()
        lip += 1.13 * np.linalg.norm(W, 2) * np.linalg.norm(A, 2)
    return float(min(0.1, 0.25 / lip))


def _integration_setup(model, t_eval, method, dt):
    model = as_model(model, multihead=True, time_dependent=True, causal=True)
    t_eval = as_time_grid(t_eval)
    if isinstance(method, str) or not hasattr(method, "step"):
        as_choice(method, "scheme (method)", tuple(METHODS))
        scheme = METHODS[method]
    else:               # a scheme class or instance (it has ``step``): ``stepping.integrate`` takes it as it is
        scheme = method
    if dt is not None:
        dt = as_positive(dt, "dt")
    return model, t_eval, scheme, dt


def _fixed_step(model, d, scheme, dt):
    """The fixed step: ``default_dt`` if None, refused above ``max_step`` (None for dopri5)."""
    if scheme == "dopri5":
        return dt
    if dt is None:
        return default_dt(model, d)
    bound = max_step(model, d, scheme if isinstance(scheme, str) else "euler")   # a class: Euler's bound
    if dt > bound:
        raise ValueError(f"dt = {dt:g} exceeds the stability bound {bound:.6g} of {scheme} for {model!r} in R^{d} "
                         f"(2.78/L for rk4, 2/L for euler, L the field's Lipschitz bound; euler_unprojected also "
                         f"dt |D| <= 1/2, see max_step); use dt <= {bound:.6g} "
                         f"(or leave dt=None, or method='adaptive')")
    return dt


def _checkpoint(checkpoint, checkpoint_every, meta):
    if checkpoint is None:
        return None
    return Checkpoint(checkpoint, every=checkpoint_every, meta=meta)


ENGINES = ("auto", "small", "kernels")


def _engine(engine, scheme, n, how, plain):
    """The engine that runs ``solve`` (see its docstring); ``plain``: one head with constant
    weights and no noise."""
    as_choice(engine, "engine", ENGINES)
    fits = plain and scheme in ("euler", "rk4") and uses_small(n, n, how)
    if engine == "small" and not fits:
        raise ValueError(f"engine='small' needs one SA/USA head with constant weights, no noise, method "
                         f"'euler' or 'rk4', direct summation and at most {small.SMALL_N} tokens per system; "
                         f"got method {scheme!r}, summation {how!r}, n = {n}; use engine='auto'")
    return "small" if engine != "kernels" and fits else "kernels"


def _small_advance(model, w, scheme, shape):
    """``advance(y, h, count)`` for ``integrate``: ``small.advance`` on the batch (B, n, d)."""
    B, n, d = shape
    args = _small_arguments(model, d)
    w = _uniform_weights(shape) if w is None else np.ascontiguousarray(w)
    evaluations = 4 if scheme == "rk4" else 1
    seconds = evaluations * kernels.direct_seconds(B, n, n, d)

    in_span = small.stays_in_span(n, d, *args)

    def advance(y, h, count):
        y, basis = span_coordinates(y) if in_span else (y, None)
        y = np.ascontiguousarray(y)
        out = np.empty(y.shape)
        with kernels.threads_for(count * seconds):
            small.advance(y, w, h, count, scheme == "rk4", *args, out)
        return (out if basis is None else normalise(out @ np.swapaxes(basis, 1, 2))), evaluations * count
    return advance


def _torch_advance(model, w, scheme, shape, device, dtype):
    """("torch", ``advance(y, h, count)`` for ``integrate``, the torch.device): the torch backend's
    fixed steps of the batch (B, n, d)."""
    from . import torch_backend
    field = _torch_field(model, shape[-1], device, dtype)
    steps = torch_backend.stepper(field, _uniform_weights(shape) if w is None else w, scheme == "rk4")

    def advance(y, h, count):
        y, evaluations = steps(y, h, count)
        _check_finite(model, y)
        return y, evaluations
    return "torch", advance, field.device


def _observer(observe, model, w, shape, energy, how, log):
    """Pack E_β (if ``energy``) and observe(x) of one output time into one flat row (logging
    the shape of observe's value), so that the run stores O(B) numbers per output time."""
    def packed(y):
        value = np.asarray(observe(y.reshape(shape)), dtype=np.float64)
        log["shape"] = value.shape
        parts = [value.ravel()]
        if energy:
            parts.insert(0, _trajectory_energy(model, y[None], w, how).ravel())
        return np.concatenate(parts)
    return packed


def solve(model: SA | USA | MultiHead, x0: ArrayLike, t_eval: ArrayLike, *,
          scheme: str | type | object = PARTICLE_SCHEME, dt: float | None = None, rtol: float = 1e-8,
          atol: float = 1e-10, summation: str = "auto", weights: ArrayLike | None = None, noise: float = 0.0,
          seed: int | None = None, energy: bool = True, progress: bool | None = None,
          checkpoint: str | PathLike | None = None, checkpoint_every: int = CHECKPOINT_EVERY, resume: bool = False,
          budget: float | None = BUDGET, observe: Callable | None = None, engine: str = "auto",
          dtype: type = np.float64, backend: str = "numba", device: str | None = None,
          method: str | type | object | None = None) -> ParticleSolution:
    r"""Integrate the tokens x0 on S^{d-1} and return a ParticleSolution.

    .. math::

        \frac{dx_i}{dt} = X[\mu^n](x_i), \qquad \mu^n = \sum_j w_j \delta_{x_j},

    with the field of ``velocity`` (plus (σ²/2) Δ_S Brownian motion when ``noise`` > 0).

    Parameters
    ----------
    model : SA, USA or MultiHead
        The dynamics; its weights (β, Q, K, V, the feed-forward W, A, b) may be callables of t,
        evaluated at every stage time (the schemes keep their order).
    x0 : array_like, shape (n, d) or (B, n, d)
        Initial tokens (unit vectors), one system or a batch of B systems.
    t_eval : array_like
        Increasing output times; the steps end on each of them exactly.
    scheme : {"rk4", "euler", "adaptive", "dopri5", "euler_unprojected"}, or a Scheme class or instance
        The time scheme (the API contract's ``method=`` is the same keyword under its old name).
        RK4 or forward Euler, each followed by the projection x <- x/|x| (it keeps the scheme's
        order), with fixed step ``dt``; or the adaptive Dormand–Prince 5(4) pair with ``rtol``,
        ``atol``; or "euler_unprojected", the scheme of the paper's figures (its
        ``phase-diagrams.py`` and ``sphere.py``), x_i <- (x_i + h D_i)/|x_i + h D_i| with the
        unprojected drift D_i = Σ_j A_ij V x_j (``unprojected_drift``): first order, its t runs slow
        by the factor 1 + h <x_i, D_i> (one head, direct summation, d <= 1024, no noise;
        docs/phase_transition.md measures the bias).
    dt : float, optional
        Fixed step (default ``block_dt`` of the model, for time-dependent weights the smallest over
        the run); refused above ``max_step``.
    summation : {"auto", "direct", "fast"}
        Chosen once for the run (``resolve_summation``) and used for the energies too.
    weights : array_like, shape (n,) or (B, n), optional
        Non-negative token weights (default 1/n).
    rtol, atol : float
        Tolerances of the adaptive method.
    progress : bool or None
        A progress report (None: after a few seconds; a bar on a terminal, log lines elsewhere).
    energy : bool
        Compute E_β at the output times.
    checkpoint : str or path, optional
        Save the state every ``checkpoint_every`` steps; ``resume=True`` continues an existing
        checkpoint bit for bit.
    checkpoint_every : int
    resume : bool
    noise : float
        σ >= 0: with method "euler", the geodesic Euler–Maruyama step
        x <- (x + h X(x) + σ √h P_x ξ)/|...|, ξ ~ N(0, I_d), weak order 1.
    seed : int, optional
        Fixes the noise; each step's draws are keyed by (seed, step), so resumed runs repeat them.
    observe : callable, optional
        A function of the tokens (shaped like x0) returning an array of the same shape at every
        output time: the solution then stores ``observed`` (m, ...) and ``last`` = x(t_eval[-1])
        instead of the trajectory (``x`` is None).
    engine : {"auto", "small", "kernels"}
        "small": the fused engine ``small.advance`` (systems of at most ``small.SMALL_N`` tokens,
        direct summation, "euler" or "rk4", one head with constant weights, no noise); "kernels":
        each step through ``stepping.fixed_step`` and the tiled direct summation; "auto" picks
        "small" wherever it applies.  Both give the same scheme, within round-off.
    dtype : {numpy.float64, numpy.float32}
        float32: single-precision score and value products (``gemm`` engine, direct summation,
        d <= 1024, engine "kernels"); state, steps and energies stay float64.
    budget : float or None
        Seconds (default one hour; None: no limit).  A fixed-step run whose step count times the
        measured cost of one step exceeds it is refused before it starts; any run past it saves its
        checkpoint and stops with a RuntimeError (``stepping.integrate``; ``resume=True`` continues it).

    backend : {"numba", "torch"}
        "numba" (default: the engines above, on the CPU) or "torch" (PyTorch,
        ``meanfield.solvers.torch_backend``; optional, ``pip install "meanfield-attention[gpu]"``):
        one SA/USA head (causal or not, any Q, K, V, weights, batches) with constant weights, Euler
        or RK4, direct summation, float64 or float32 (the latter for any d), ``observe``,
        checkpoints.  Results equal the Numba engines' to round-off (float64); info["engine"] is
        "torch" and info["device"] the device.  Noise, several heads, time-dependent weights, method
        "adaptive" and summation "fast" are refused.  A checkpoint resumes on the backend and
        device type that wrote it (bit for bit).
    device : str, optional
        The torch device: None (CUDA when available, else the CPU), "cpu", "cuda", "cuda:k".
    method : str, optional
        The same as ``scheme`` (the name the API contract gives it); pass one of the two.

    Returns
    -------
    ParticleSolution
        ``t`` (m,), ``x`` (m, n, d) or (m, B, n, d), ``energy`` (m,) or (m, B) (NaN, with the reason
        in ``info["energy"]``, where E_β is not the dynamics' energy), ``info`` (method, dt,
        summation, engine, step counts, recomputed targets of the fast summation; for the engine
        "small", ``vector_unit``: the vector width its products were compiled for, ``tiles.CHOICE``).

    Raises
    ------
    ValueError
        For invalid tokens, weights, times, methods or options, a ``dt`` above ``max_step``, USA
        weights that overflow, or a fixed-step run that does not fit in ``budget``.
    RuntimeError
        When a run passes its ``budget``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> x0 = mf.uniform_sphere(8, 3, seed=0)
    >>> sol = particles.solve(mf.SA(1.0), x0, [0.0, 1.0, 2.0], progress=False)
    >>> sol.x.shape, bool(np.all(np.diff(sol.energy) >= 0))
    ((3, 8, 3), True)
    """
    method = scheme_keyword(scheme, method, PARTICLE_SCHEME)
    model, t_eval, scheme, dt = _integration_setup(model, t_eval, method, dt)
    budget = as_budget(budget)
    energy = as_flag(energy, "energy")
    x0 = as_points(x0, "x0", ndim=(2, 3))
    backend = _backend(backend, device)
    dtype = _precision(dtype, x0.shape[-1], summation, backend)
    if backend == "torch":
        _torch_supports(model, summation, scheme, brownian_kick(noise, seed, scheme)[0], engine)
    unprojected = method == "euler_unprojected"
    if unprojected and backend == "torch":
        raise ValueError("method='euler_unprojected' runs on backend='numba' only")
    if unprojected:
        summation = _unprojected_options(model, x0.shape[-1], summation, noise, engine)
    first = model.at(t_eval[0])
    for head in getattr(first, "heads", (first,)):
        _check_exponent(head, x0.shape[-1])
    if isinstance(model, MultiHead) or model.is_time_dependent:
        velocity(model, x0, summation=summation, t=t_eval[0])  # validates shapes and summations
        how = summation
    else:
        how = resolve_summation(model, x0.shape[-1], x0.shape[-2], x0.shape[-2],
                                "direct" if backend == "torch" else summation)
    w = _causal_weights(model, as_batch_weights(weights, x0))
    batched = _batched(x0)
    if scheme != "dopri5" and dt is None and model.is_time_dependent:
        probes = np.union1d(t_eval, np.linspace(t_eval[0], t_eval[-1], 65))
        dt = min(block_dt(model.at(t), x0.shape[-1]) for t in probes)
    elif scheme != "dopri5" and dt is None:
        dt = block_dt(first, x0.shape[-1])
    elif scheme != "dopri5" and not isinstance(model, MultiHead) and not model.is_time_dependent:
        dt = _fixed_step(model, x0.shape[-1], method if unprojected else scheme, dt)
    if scheme == "dopri5":
        for head in getattr(first, "heads", (first,)):
            _check_adaptive(head, x0.shape[-1], t_eval, as_positive(rtol, "rtol"), as_positive(atol, "atol"))
    kick, seed = brownian_kick(noise, seed, scheme)
    stats = {}

    def rhs(t, x):
        # the field of the normalised configuration: Runge–Kutta stages leave the sphere by
        # O(h²), and this extension is the one both summations evaluate identically
        return field(model.at(t), normalise(x), w, summation=how, stats=stats, dtype=dtype)

    if unprojected:     # the authors' step x <- N(x + h D(x)): Euler on the drift, then x/|x|
        A, V = _operators(model, x0.shape[-1])
        wu = np.ascontiguousarray(_uniform_weights(batched.shape) if w is None else w)

        def rhs(t, x):
            y = normalise(x)
            return _direct_gemm(model, y, y, wu, A, V, dtype, tangent=False)[0]

    plain = not isinstance(model, MultiHead) and not model.is_time_dependent and kick is None and not unprojected
    if backend == "torch":
        engine, advance, device = _torch_advance(model, w, scheme, batched.shape, device, dtype)
    else:
        engine = _engine(engine, scheme, x0.shape[-2], how, plain and dtype == np.float64)
        advance = _small_advance(model, w, scheme, batched.shape) if engine == "small" else None
    log = {}
    packed = None if observe is None else _observer(observe, model, w, x0.shape, energy, how, log)
    meta = dict(solver="particles", model=model.to_dict(),
                method=method if unprojected else scheme_name(scheme), dt=dt,
                rtol=rtol, atol=atol, summation=how, weights=None if w is None else digest(w),
                noise=float(noise) if kick else 0.0, seed=seed, engine=engine, dtype=np.dtype(dtype).name,
                observe=None if observe is None else getattr(observe, "__qualname__", repr(observe)))
    if backend == "torch":
        meta.update(backend=backend, device=device.type)
    what = f"this {method} solve of {model!r} ({batched.shape[0]} x {x0.shape[-2]} tokens to t = {t_eval[-1]:g})"
    xs, info = integrate(rhs, batched, t_eval, scheme=scheme, dt=dt, rtol=rtol, atol=atol,
                         project=normalise, progress=progress, time_dependent=True, kick=kick,
                         checkpoint=_checkpoint(checkpoint, checkpoint_every, meta), resume=resume,
                         advance=advance, observe=packed, context=what, budget=budget)
    info.update(method=scheme_name(method), dt=dt, summation=how, recomputed=stats.get("recomputed", 0), engine=engine,
                dtype=np.dtype(dtype).name)
    if backend == "torch":
        info["device"] = str(device)
    if engine == "small":
        info["vector_unit"] = tiles.CHOICE
    if kick is not None:
        info.update(noise=float(noise), seed=seed)
    stored = None if w is None else w.reshape(x0.shape[:-1])
    if observe is not None:
        B = int(np.prod(x0.shape[:-2]))
        en = xs[:, :B].reshape((t_eval.size,) + x0.shape[:-2]) if energy else None
        observed = xs[:, B if energy else 0:].reshape((t_eval.size,) + log["shape"])
        last = info.pop("state").reshape(x0.shape)
        if energy and _energy_note(model):
            info["energy"] = _energy_note(model)
        return ParticleSolution(t=t_eval, x=None, energy=en, model=model, info=info, observed=observed,
                                last=last, weights=stored)
    xs = xs.reshape((t_eval.size,) + x0.shape)
    en = _trajectory_energy(model, xs, w, how) if energy else None
    if energy and np.all(np.isnan(en)):
        info["energy"] = _energy_note(model)
    return ParticleSolution(t=t_eval, x=xs, energy=en, model=model, info=info, weights=stored)


def _unprojected_options(model, d, summation, noise, engine):
    """The summation of method="euler_unprojected" ("direct"), refusing what it does not take:
    several heads, time-dependent weights, d > gemm.MAX_D, fast summation, noise, engine="small"."""
    if not isinstance(model, MultiHead):
        model = as_model(model, time_dependent=True, causal=True)
    _check_unprojected(model, d)
    as_choice(summation, "summation", SUMMATIONS)
    if summation == "fast" or noise or engine == "small":
        raise ValueError(f"method='euler_unprojected' runs the direct gemm summation without noise on "
                         f"engine='kernels' (or 'auto'); got summation={summation!r}, noise={noise!r}, "
                         f"engine={engine!r}")
    return "direct"


def _energy_note(model):
    """Why ``_trajectory_energy`` is NaN for ``model`` (None where it is E_β)."""
    heads = getattr(model, "heads", (model,))
    if any(h.causal for h in heads):
        return ("NaN: causal attention is not a gradient flow (Karagodin–Polyanskiy–Rigollet, arXiv:2411.04990): "
                "token i feels tokens j <= i only, so no interaction energy E_beta decreases or increases along it")
    if model.is_time_dependent or not model.is_isotropic or (len(heads) > 1 and any(h.normalised for h in heads)):
        return ("NaN: E_beta is the dynamics' energy only for isotropic heads (Q^T K = I, V = ±I) "
                "with constant weights and no feed-forward term")
    return None


def log_energies(beta, x, weights=None, summation="auto"):
    r"""log(2β E_β) of each system of x, overflow-free for any β > 0.

    .. math::

        \log(2\beta E_\beta) = \log \sum_{i,j} w_i w_j e^{\beta \langle x_i, x_j\rangle},

    computed by log-sum-exp over the field's log Φ_i.

    Parameters
    ----------
    beta : float
        β > 0.
    x : ndarray, shape (B, n, d)
        Unit vectors (not checked).
    weights : ndarray, shape (B, n), optional
        Default 1/n.
    summation : {"auto", "direct", "fast"}

    Returns
    -------
    ndarray, shape (B,)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> x = mf.uniform_sphere(5, 3, seed=0)[None]
    >>> bool(np.isclose(particles.log_energies(1.0, x)[0], np.log(2 * mf.energy(x[0], 1.0))))
    True
    """
    w = _uniform_weights(x.shape) if weights is None else weights
    _, log_phi = attention_field(SA(beta), x, w, summation=summation)
    return logsumexp(log_phi, b=w, axis=1)


def energies(beta, x, weights=None, summation="auto"):
    r"""E_β for each system of x.

    .. math::

        E_\beta = \frac{1}{2\beta} \sum_{i,j} w_i w_j e^{\beta \langle x_i, x_j\rangle},

    and at β = 0 the limit (1/2)|Σ_i w_i x_i|² of E_β - 1/(2β).

    Parameters
    ----------
    beta : float
        β >= 0.
    x : ndarray, shape (B, n, d)
    weights : ndarray, shape (B, n), optional
        Default 1/n.
    summation : {"auto", "direct", "fast"}

    Returns
    -------
    ndarray, shape (B,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import particles
    >>> x = np.array([[[1.0, 0.0], [1.0, 0.0]]])
    >>> particles.energies(0.0, x), bool(np.isclose(particles.energies(2.0, x)[0], np.exp(2.0) / 4))
    (array([0.5]), True)
    """
    w = _uniform_weights(x.shape) if weights is None else weights
    if beta == 0:
        mean = np.einsum("bn,bnd->bd", w, x)
        return 0.5 * np.einsum("bd,bd->b", mean, mean)
    return np.exp(log_energies(beta, x, w, summation)) / (2.0 * beta)


def _trajectory_energy(model, xs, w, summation):
    """E_β along the run where it is the dynamics' Lyapunov function: one isotropic head
    (E_β; its sign flips for V = -I), or heads that are all isotropic USA, where the field is
    the Wasserstein gradient of Σ_h ±E_{β_h}.  NaN elsewhere: general Q, K, V, time-dependent
    weights, feed-forward terms, and SA heads with several β (each head is a gradient flow for
    its own reweighted metric, and their sum for none) and causal heads (no gradient structure);
    ``solve`` says why in info["energy"]."""
    heads = getattr(model, "heads", (model,))
    if _energy_note(model):
        return np.full(xs.shape[:-2], np.nan)
    flat = xs.reshape((-1,) + xs.shape[-2:])
    wf = None if w is None else np.repeat(w[None], xs.shape[0], axis=0).reshape(-1, xs.shape[-2])
    how = summation if summation in ("direct", "fast") and len(heads) == 1 else "auto"
    total = sum((h.sign if len(heads) > 1 else 1.0) * energies(h.beta, flat, wf, how) for h in heads)
    return total.reshape(xs.shape[:-2])


def angle_velocity(model, theta, summation="auto"):
    r"""dθ_i/dt of tokens on the circle in angle variables.

    .. math::

        \frac{d\theta_i}{dt} = \frac{s}{Z_i} \sum_j e^{\beta \cos(\theta_i - \theta_j)} \sin(\theta_j - \theta_i),

    Z_i the softmax sum (SA) or n (USA), s = ±1 for V = ±I.  "direct" sums in angles; "fast" is
    <X(x_i), (-sin θ_i, cos θ_i)> with the Fourier summation of ``attention_field``.

    Parameters
    ----------
    model : SA or USA
        With Q = K = I and V = ±I.
    theta : array_like, shape (n,) or (B, n)
    summation : {"auto", "direct", "fast"}

    Returns
    -------
    ndarray, shape like theta

    Raises
    ------
    ValueError
        For a non-isotropic model, an empty or wrongly shaped theta, non-finite angles.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> particles.angle_velocity(mf.SA(1.0), np.array([0.0, np.pi / 2]))   # 1/(e + 1): towards each other
    array([ 0.26894142, -0.26894142])
    """
    model = as_model(model, causal=True)
    theta = as_float_array(theta, "theta")
    if theta.ndim not in (1, 2) or theta.size == 0:
        raise ValueError(f"theta must be a non-empty array of shape (n,) or (B, n); got {theta.shape}")
    if not model.is_isotropic:
        raise ValueError("the angle form needs Q = K = I and V = ±I; use solve() with Cartesian points")
    th = np.atleast_2d(theta)
    if resolve_summation(model, 2, th.shape[1], th.shape[1], summation) == "fast":
        v, _ = attention_field(model, circle_points(th), summation="fast")
        return (np.cos(th) * v[..., 1] - np.sin(th) * v[..., 0]).reshape(theta.shape)
    out = np.empty(th.shape)
    with kernels.threads_for(4 * kernels.direct_seconds(th.shape[0], th.shape[1], th.shape[1], 2)):
        kernels.circle_angle_field(th, th, _uniform_weights(th.shape), model.beta, model.sign,
                                   model.normalised, model.causal, out)
    return out.reshape(theta.shape)


def solve_angles(model: SA | USA, theta0: ArrayLike, t_eval: ArrayLike, *,
                 scheme: str | type | object = PARTICLE_SCHEME, dt: float | None = None, rtol: float = 1e-8,
                 atol: float = 1e-10, summation: str = "auto", progress: bool | None = None,
                 budget: float | None = BUDGET, method: str | type | object | None = None) -> ParticleSolution:
    """Integrate tokens on the circle (d = 2) in angle variables θ.

    The equation of ``angle_velocity``, with the schemes of ``solve`` (without projection: angles
    need none).

    Parameters
    ----------
    model : SA or USA
        With Q = K = I and V = ±I.
    theta0 : array_like, shape (n,) or (B, n)
        Initial angles.
    t_eval : array_like
        Increasing output times.
    scheme : {"rk4", "euler", "adaptive", "dopri5"}, or a Scheme class or instance
    dt : float, optional
        Fixed step (default ``default_dt``), at most ``max_step``.
    rtol, atol : float
        Tolerances of the adaptive method.
    summation : {"auto", "direct", "fast"}
    progress : bool or None
    budget : float or None
        Seconds, as in ``solve``.
    method : str, optional
        The same as ``scheme`` (as ``solve``); pass one of the two.

    Returns
    -------
    ParticleSolution
        With ``theta`` (m, ...) the unwrapped angles and ``x`` = (cos θ, sin θ).

    Raises
    ------
    ValueError
        As ``angle_velocity`` and ``solve``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import particles
    >>> sol = particles.solve_angles(mf.SA(1.0), np.array([0.0, 1.0]), [0.0, 20.0], progress=False)
    >>> bool(abs(sol.theta[-1, 1] - sol.theta[-1, 0]) < 1e-6)     # the two tokens have merged
    True
    """
    method = scheme_keyword(scheme, method, PARTICLE_SCHEME)
    if method == "euler_unprojected":
        raise ValueError("method='euler_unprojected' steps Cartesian tokens along the unprojected drift; angles have "
                         "no such drift: use solve() with circle_points(theta0)")
    model, t_eval, scheme, dt = _integration_setup(model, t_eval, method, dt)
    theta0 = as_float_array(theta0, "theta0")
    angle_velocity(model, theta0, summation)  # validates shapes, the model and the summation
    _check_exponent(model, 2)
    n = theta0.shape[-1]
    how = resolve_summation(model, 2, n, n, summation)
    dt = _fixed_step(model, 2, scheme, dt)
    if scheme == "dopri5":
        _check_adaptive(model, 2, t_eval, as_positive(rtol, "rtol"), as_positive(atol, "atol"))
    rhs = lambda th: angle_velocity(model, th, how)     # noqa: E731
    what = f"this {method} solve of {model!r} ({n} angles to t = {t_eval[-1]:g})"
    ths, info = integrate(rhs, theta0, t_eval, scheme=scheme, dt=dt, rtol=rtol, atol=atol, progress=progress,
                          context=what, budget=budget)
    info.update(method=scheme_name(method), dt=dt, summation=how)
    xs = circle_points(ths)
    en = _trajectory_energy(model, xs, None, how)
    if _energy_note(model):
        info["energy"] = _energy_note(model)
    return ParticleSolution(t=t_eval, x=xs, energy=en, model=model, info=info, theta=ths)
