"""Interacting-particle solver: n tokens on S^{d-1} (any d, β, Q, K, V, and batches).

    dx_i/dt = X[μ^n](x_i),   μ^n = sum_j w_j δ_{x_j}   (w_j = 1/n by default)

Time stepping: RK4 or forward Euler followed by x <- x/|x| (the projection keeps RK4's
order and the constraint to round-off), or the adaptive Dormand–Prince 5(4) pair.

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
from . import _numba_env  # noqa: F401

import numpy as np
from scipy.special import logsumexp

from meanfield.checks import (as_batch_weights, as_choice, as_count, as_float_array, as_points, as_positive,
                              as_time_grid)
from meanfield.budget import BUDGET, as_budget, check_fixed_steps, deadline
from meanfield.geometry import circle_points, normalise
from meanfield.models import SA, MultiHead, as_model

from . import gemm, kernels, small, spectral, stepping
from .results import ParticleSolution
from .noise import brownian_kick
from .stepping import Checkpoint, digest, fixed_step, integrate

METHODS = {"rk4": "rk4", "euler": "euler", "adaptive": "dopri5", "dopri5": "dopri5"}
SUMMATIONS = ("auto", "direct", "fast")


def _batched(x):
    return x[None] if x.ndim == 2 else x


def _uniform_weights(shape):
    B, n = shape[0], shape[1]
    return np.full((B, n), 1.0 / n)


def resolve_summation(model, d, n, m, summation="auto"):
    """"direct" or "fast": what ``attention_field`` does for n targets and m sources in R^d.

    "fast" (``meanfield.solvers.spectral``) needs Q^T K = I, V = ±I and d in {2, 3}; "auto" takes it
    when it is valid and its estimated cost is below the direct O(n m) summation's."""
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
    """Whether direct summation runs on the batched small-system engine (``small``): systems of
    at most ``small.SMALL_N`` tokens that are their own sources."""
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


def _direct_gemm(model, x, y, w, A, V, dtype=np.float64):
    """``_direct`` by ``gemm.softmax_sums`` (d <= gemm.MAX_D): queries U = β x A,
    then X = P_x V G with G the weighted softmax (SA) or exponential (USA) mean of the sources."""
    U = model.beta * (x @ A) if model.attention_scalar is None else (model.beta * A[0, 0]) * x
    B, n, d = x.shape
    with kernels.threads_for(kernels.direct_seconds(B, n, y.shape[1], d)):
        G, log_phi = gemm.softmax_sums(U, y, w, model.normalised, dtype, causal=model.causal)
    v = G @ V.T if model.value_scalar is None else V[0, 0] * G
    return v - np.sum(v * x, axis=-1, keepdims=True) * x, log_phi


def attention_field(model, x, weights=None, sources=None, summation="auto", stats=None, dtype=np.float64):
    """(X, log Φ) at targets x (B, n, d) from sources (B, m, d) (default: x itself) with
    weights (B, m) >= 0 (default 1/m).  No input checks: internal entry point of the solvers.
    ``dtype`` float32: direct summation with single-precision products (``gemm``).

    summation: "direct", "fast" or "auto" (``resolve_summation``).  The fast path recomputes
    directly the targets where its error bound exceeds ``spectral.RTOL``.  ``stats`` (a dict)
    accumulates the number of calls per summation and of such recomputed targets."""
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
    """The velocity field at targets x (B, n, d) of a constant model: one head's
    ``attention_field``, or for ``MultiHead`` the sum over heads (each summed as ``summation``
    allows for it) plus the projected feed-forward term P_x W σ(A x + b)."""
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
    """Tangent velocities X[μ](x_i) of tokens x (n, d) or a batch (B, n, d), μ = sum_j w_j δ_{x_j};
    ``model`` SA, USA or MultiHead, with weights evaluated at time ``t`` if they depend on it.
    ``dtype``: float64 (default) or float32 (opt-in single-precision score and value products,
    direct summation, d <= 1024; relative error ~1e-7 (1 + β), see docs/performance.md);
    the result is float64 in both cases.  ``backend="torch"`` (one SA/USA head, direct
    summation) computes it with PyTorch on ``device`` (None: CUDA when available, else the CPU;
    ``meanfield.solvers.torch_backend``, any d in float32 too)."""
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
    """A step well inside RK4's stability region: 0.25 / L with L ≈ the field's Lipschitz
    constant |V| (1 + β|A|) (times e^{β|A|} for USA), capped at 0.1 (unless ``cap=False``)."""
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
    """The largest fixed step accepted: c / L, with L the Lipschitz bound of ``default_dt`` and
    c = 2.78 (RK4) or 2 (Euler) the scheme's stability interval on the negative real axis.
    Larger steps can make the discrete dynamics unstable (tokens jumping about the sphere).

    Parameters
    ----------
    model : SA or USA
    d : int
        Dimension of the ambient space (tokens on S^{d-1}).
    method : {"rk4", "euler"}

    Returns
    -------
    float
        The bound on ``dt`` that ``solve`` and ``solve_angles`` enforce.
    """
    model = as_model(model, causal=True)
    d = as_count(d, "d", minimum=2)
    scheme = METHODS[as_choice(method, "method", ("rk4", "euler"))]
    _check_exponent(model, d)
    return STABLE_STEP[scheme] * default_dt(model, d, cap=False) / 0.25


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
    """``default_dt`` for MultiHead: Lipschitz constants add, so the steps combine harmonically
    (the feed-forward term adds |W| |A| sup|σ'| with sup|σ'| <= 1.13 for ReLU, GELU, tanh)."""
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
    as_choice(method, "method", tuple(METHODS))
    scheme = METHODS[method]
    if dt is not None:
        dt = as_positive(dt, "dt")
    return model, t_eval, scheme, dt


def _fixed_step(model, d, scheme, dt):
    """The fixed step: ``default_dt`` if None, refused above ``max_step`` (None for dopri5)."""
    if scheme == "dopri5":
        return dt
    if dt is None:
        return default_dt(model, d)
    bound = max_step(model, d, scheme)
    if dt > bound:
        raise ValueError(f"dt = {dt:g} exceeds the stability bound {bound:.6g} of {scheme} for {model!r} in R^{d} "
                         f"(2.78/L for rk4, 2/L for euler, L the field's Lipschitz bound); use dt <= {bound:.6g} "
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
    fits = plain and scheme != "dopri5" and uses_small(n, n, how)
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

    def advance(y, h, count):
        out = np.empty(y.shape)
        with kernels.threads_for(count * seconds):
            small.advance(y, w, h, count, scheme == "rk4", *args, out)
        return out, evaluations * count
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


def solve(model, x0, t_eval, method="rk4", dt=None, *, summation="auto", weights=None, rtol=1e-8,
          atol=1e-10, progress=None, energy=True, checkpoint=None, checkpoint_every=100,
          resume=False, noise=0.0, seed=None, observe=None, engine="auto", dtype=np.float64, budget=BUDGET,
          backend="numba", device=None):
    """Integrate the tokens x0 (n, d) or a batch (B, n, d) and return a ParticleSolution.

    model: SA, USA or MultiHead; weights (β, Q, K, V, the feed-forward W, A, b) may be callables
    of t, evaluated at every stage time (the schemes keep their order).
    method: "rk4" (default), "euler" (both with renormalisation after each step, step ``dt``,
    default ``default_dt``) or "adaptive" (Dormand–Prince 5(4) with ``rtol``, ``atol``).
    noise: σ >= 0 adds Brownian motion on the sphere, generator (σ²/2) Δ_S (McKean–Vlasov
    particles): with method="euler", the geodesic Euler–Maruyama step
    x <- (x + h X(x) + σ √h P_x ξ)/|...|, ξ ~ N(0, I_d), weak order 1; ``seed`` fixes the draws
    (each step's are keyed by (seed, step), so resumed runs draw the same numbers).
    ``checkpoint`` (a path) saves the state every ``checkpoint_every`` steps; with
    ``resume=True`` an existing checkpoint is continued, bit for bit.
    summation: "auto" | "direct" | "fast" (see ``resolve_summation``), chosen once for the run
    and used for the energies too; info["summation"] says which ran and info["recomputed"]
    how many target evaluations the fast path handed to direct summation.

    engine: "auto" | "small" | "kernels".  Systems of at most ``small.SMALL_N`` tokens with
    direct summation and "euler" or "rk4" run on the fused engine ``small.advance`` ("small":
    every system's steps between output times are taken in cache, batches in parallel);
    "kernels" takes each step through ``stepping.fixed_step`` and the tiled direct summation
    (``gemm`` for d <= 1024, ``kernels`` beyond); "auto" picks
    "small" wherever it applies.  info["engine"] says which ran (same scheme, results within
    round-off of each other).

    observe: a function of the tokens (shaped like x0) returning an array (same shape at every
    output time).  When given, the solution stores ``observed`` (m, ...) = observe(x(t_k)) and
    ``last`` = x(t_eval[-1]) instead of the trajectory ``x`` (None): per-time statistics of
    large batches without holding m copies of the state.  ``energy`` is still (m,) or (m, B).

    dtype: float64 (default) or float32: the field's score and value products in single precision
    (``gemm`` engine, direct summation, d <= 1024, engine "kernels"); the state, the steps
    and the energies stay float64.

    backend: "numba" (default: the engines above, on the CPU) or "torch" (PyTorch,
    ``meanfield.solvers.torch_backend``; optional, ``pip install "meanfield-attention[gpu]"``):
    one SA/USA head (causal or not, any Q, K, V, weights, batches) with constant weights, Euler or
    RK4, direct summation, float64 or float32 (the latter for any d), ``observe``, checkpoints, on
    ``device`` (None: CUDA when available, else the CPU; "cpu", "cuda", "cuda:k").  Results equal the
    Numba engines' to round-off (float64); info["engine"] is "torch" and info["device"] the device.
    Noise, several heads, time-dependent weights, method "adaptive" and summation "fast" are
    refused.  A checkpoint resumes on the backend and device type that wrote it (bit for bit).

    budget: seconds (default ``meanfield.budget.BUDGET``, one hour; None: no limit).  A fixed-step
    run whose step count times the measured cost of one step exceeds it is refused before it
    starts; an adaptive run is stopped when it reaches it (resume from its checkpoint).

    Time-dependent weights: the default step is the smallest ``block_dt`` of the model at the
    output times and 65 equispaced times of the run (the field's Lipschitz bound may grow with t).
    """
    model, t_eval, scheme, dt = _integration_setup(model, t_eval, method, dt)
    budget = as_budget(budget)
    x0 = as_points(x0, "x0", ndim=(2, 3))
    backend = _backend(backend, device)
    dtype = _precision(dtype, x0.shape[-1], summation, backend)
    if backend == "torch":
        _torch_supports(model, summation, scheme, brownian_kick(noise, seed, scheme)[0], engine)
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
        dt = _fixed_step(model, x0.shape[-1], scheme, dt)
    if scheme == "dopri5":
        for head in getattr(first, "heads", (first,)):
            _check_adaptive(head, x0.shape[-1], t_eval, as_positive(rtol, "rtol"), as_positive(atol, "atol"))
    kick, seed = brownian_kick(noise, seed, scheme)
    stats = {}

    def rhs(t, x):
        # the field of the normalised configuration: Runge–Kutta stages leave the sphere by
        # O(h²), and this extension is the one both summations evaluate identically
        return field(model.at(t), normalise(x), w, summation=how, stats=stats, dtype=dtype)

    plain = not isinstance(model, MultiHead) and not model.is_time_dependent and kick is None
    if backend == "torch":
        engine, advance, device = _torch_advance(model, w, scheme, batched.shape, device, dtype)
    else:
        engine = _engine(engine, scheme, x0.shape[-2], how, plain and dtype == np.float64)
        advance = _small_advance(model, w, scheme, batched.shape) if engine == "small" else None
    log = {}
    packed = None if observe is None else _observer(observe, model, w, x0.shape, energy, how, log)
    meta = dict(solver="particles", model=model.to_dict(), method=scheme, dt=dt, rtol=rtol, atol=atol,
                summation=how, weights=None if w is None else digest(w), noise=float(noise) if kick else 0.0, seed=seed,
                engine=engine, dtype=np.dtype(dtype).name,
                observe=None if observe is None else getattr(observe, "__qualname__", repr(observe)))
    if backend == "torch":
        meta.update(backend=backend, device=device.type)
    what = f"this {method} solve of {model!r} ({batched.shape[0]} x {x0.shape[-2]} tokens to t = {t_eval[-1]:g})"
    if scheme == "dopri5":
        rhs = deadline(rhs, budget, what)
    else:
        one_step = ((lambda: advance(batched.copy(), dt, 1)) if advance is not None else
                    (lambda: fixed_step(rhs, t_eval[0], batched, dt, scheme)))
        check_fixed_steps(budget, t_eval, dt, one_step, 1, what)
        stats.clear()
    xs, info = integrate(rhs, batched, t_eval, scheme=scheme, dt=dt, rtol=rtol, atol=atol,
                         project=normalise, progress=progress, time_dependent=True, kick=kick,
                         checkpoint=_checkpoint(checkpoint, checkpoint_every, meta), resume=resume,
                         advance=advance, observe=packed)
    info.update(method=method, dt=dt, summation=how, recomputed=stats.get("recomputed", 0), engine=engine,
                dtype=np.dtype(dtype).name)
    if backend == "torch":
        info["device"] = str(device)
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
    """log(2β E_β) = log Σ_ij w_i w_j e^{β<x_i,x_j>} (β > 0) for each system of x (B, n, d),
    weights (B, n) (default 1/n): log-sum-exp over the field's log Φ, overflow-free for any β."""
    w = _uniform_weights(x.shape) if weights is None else weights
    _, log_phi = attention_field(SA(beta), x, w, summation=summation)
    return logsumexp(log_phi, b=w, axis=1)


def energies(beta, x, weights=None, summation="auto"):
    """E_β for each system of x (B, n, d); at β = 0 the limit (1/2)|Σ_i w_i x_i|² of E_β - 1/(2β)."""
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
    """dθ_i/dt on the circle, θ (n,) or (B, n): (1/Z_i) sum_j e^{β cos(θ_i-θ_j)} sin(θ_j-θ_i)
    (Z_i the softmax sum for SA, n for USA; times -1 for V = -I).  "direct" sums in angles;
    "fast" is <X(x_i), (-sin θ_i, cos θ_i)> with the Fourier summation of ``attention_field``."""
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


def solve_angles(model, theta0, t_eval, method="rk4", dt=None, *, summation="auto", rtol=1e-8, atol=1e-10,
                 progress=None):
    """The circle (d = 2) in angle variables θ; returns a ParticleSolution with .theta (m, ...)
    (unwrapped angles) and .x = (cos θ, sin θ).  summation as in ``angle_velocity``."""
    model, t_eval, scheme, dt = _integration_setup(model, t_eval, method, dt)
    theta0 = as_float_array(theta0, "theta0")
    angle_velocity(model, theta0, summation)  # validates shapes, the model and the summation
    _check_exponent(model, 2)
    n = theta0.shape[-1]
    how = resolve_summation(model, 2, n, n, summation)
    dt = _fixed_step(model, 2, scheme, dt)
    if scheme == "dopri5":
        _check_adaptive(model, 2, t_eval, as_positive(rtol, "rtol"), as_positive(atol, "atol"))
    ths, info = integrate(lambda th: angle_velocity(model, th, how), theta0, t_eval, scheme=scheme, dt=dt,
                          rtol=rtol, atol=atol, progress=progress)
    info.update(method=method, dt=dt, summation=how)
    xs = circle_points(ths)
    en = _trajectory_energy(model, xs, None, how)
    if _energy_note(model):
        info["energy"] = _energy_note(model)
    return ParticleSolution(t=t_eval, x=xs, energy=en, model=model, info=info, theta=ths)
