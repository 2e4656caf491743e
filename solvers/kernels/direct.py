"""Fused Numba kernels for direct O(n m d) summation of the attention field.

For targets x_i and weighted sources (y_j, w_j), with scores s_ij = β <x_i, A y_j>
(A = Q^T K):

    Φ_i   = sum_j w_j e^{s_ij}                       (returned as log Φ_i)
    G_i   = sum_j w_j e^{s_ij} y_j
    X_i   = P_{x_i} V G_i / Φ_i        (SA)     or     P_{x_i} V G_i        (USA)

Targets are processed in tiles of ``TILE`` against blocks of ``BLOCK`` sources (a parallel
job takes ``GROUP`` tiles through each block while it is in cache), with an online
log-sum-exp per target: each block's scores are shifted by the running maximum M_i, so
only e^{s - M} <= 1 is ever formed and the USA factor e^{M} is applied once at the end.
Memory is O(GROUP TILE d + TILE BLOCK) per thread, never n×m.  Dot products are register-
blocked (2×2 and 4×2) and the exponential is a vectorisable Cody–Waite + degree-13 Taylor
evaluation (error <= 2.3e-16 relative on [-708, 0]; terms below e^{-708} relative to the
largest are flushed to ~1e-308).

With the causal mask (targets = sources) a group of tiles runs only through the blocks that
start at or before its last target, and row t of a tile starting at i0 keeps the first
i0 + t - j0 + 1 sources of the block at j0 (j <= i); the USA division by the prefix weight
W_i = sum_{j<=i} w_j is the caller's (``particles._direct``).
"""
from .. import _numba_env  # noqa: F401

import math
from contextlib import contextmanager

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

TILE = 16      # targets per tile (a multiple of 4)
BLOCK = 128    # sources per block
GROUP = 8      # tiles per parallel job: each block of sources is read once per group, from cache
SMALL_D = 8    # up to this dimension, scores are axpys over sources rather than dot products
# FMA contraction only.  Reassociation ("reassoc") made the kernels 2× faster at large d but let
# LLVM vectorise the reductions differently in a process that compiles the kernels and in one
# that loads them from Numba's cache (last-bit differences), which breaks bit-exact resume.
#: Numba fastmath flags of every kernel: fused multiply-adds and no signed zeros, no reassociation
#: (cached and freshly compiled code then agree to the bit, which bit-exact resume needs).
FASTMATH = {"contract", "nsz"}
PAIR_SECONDS = 3.5e-9     # one (target, source) pair on one core, d <= 4 (× d/4 beyond)
PARALLEL_SECONDS = 5e-4   # kernels estimated to take less run on the calling thread


def direct_seconds(B, n, m, d):
    r"""Estimated one-core time of ``attention_field`` for B batches of n targets, m sources.

    .. math::

        t = c\, B\, n\, m \max(1, d/4), \qquad c = 3.5 \times 10^{-9}\ \mathrm{s}.

    Parameters
    ----------
    B, n, m, d : int
        Batches, targets, sources, dimension.

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from meanfield.solvers.kernels.direct import direct_seconds
    >>> round(direct_seconds(1, 1000, 1000, 8) * 1000, 3)
    7.0
    """
    return PAIR_SECONDS * B * n * m * max(1.0, d / 4)


@contextmanager
def threads_for(seconds):
    """Run a parallel kernel on the calling thread alone when it is estimated to take less
    than ``PARALLEL_SECONDS``: waking the thread pool costs ~10 µs on an idle machine and
    milliseconds on an oversubscribed one (many-step runs with few tokens live there).

    A context manager: inside it, Numba uses one thread when ``seconds`` is small; the thread
    count is restored on exit.

    Parameters
    ----------
    seconds : float
        The estimated time of the kernel (e.g. ``direct_seconds``).

    Returns
    -------
    contextmanager

    Examples
    --------
    >>> import numba
    >>> from meanfield.solvers.kernels.direct import threads_for
    >>> before = numba.get_num_threads()
    >>> with threads_for(1e-6):
    ...     numba.get_num_threads()
    1
    >>> numba.get_num_threads() == before
    True
    """
    if seconds >= PARALLEL_SECONDS:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01   # ln 2 with 21 trailing zero bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10


@intrinsic
def _bits_as_float(typingctx, bits):
    """Reinterpret the bits of an int64 as a float64."""
    if bits != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _float_bits(typingctx, value):
    """Reinterpret the bits of a float64 as an int64."""
    if value != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


_ROUNDER = 6755399441055744.0          # 1.5 · 2^52: t + _ROUNDER rounds t (|t| < 2^51) to an integer k ...
_ROUNDER_BITS = 0x4338000000000000     # ... held in the low bits: bits(t + _ROUNDER) = _ROUNDER_BITS + k
_EXP_FLOOR = -708.0                    # arguments below are raised to it: e^{-708} is still a normal number
#: The constants of ``exp_nonpositive`` (its floor, log2 e, the rounder and its bits, ln 2 in two parts), for
#: kernels that repeat its operations on vectors of lanes (``tiles.exp_tile``).
EXP_CONSTANTS = (_EXP_FLOOR, _LOG2E, _ROUNDER, _ROUNDER_BITS, _LN2_HI, _LN2_LO)


@njit(cache=True, fastmath={"contract"})
def exp_nonpositive(x):
    r"""e^x for x <= 0 (x = -inf allowed), by Cody–Waite reduction and a Taylor polynomial.

    .. math::

        e^x = 2^k e^r, \qquad k = \operatorname{round}(x / \ln 2), \quad |r| \le \tfrac12 \ln 2,

    e^r by its Taylor polynomial of degree 13 (relative error <= 2.3e-16 on [-708, 0]; x < -708
    gives e^{-708}).  k is rounded by adding 1.5 · 2^52 and read from the bits of the sum, so that
    no float → int conversion is needed (AVX2 has none for packed doubles, which kept the loops
    calling this scalar: 2.2× slower).  Not inlined by Numba (LLVM still inlines and vectorises it): the callers'
    reassociation would break the Cody–Waite reduction.

    Parameters
    ----------
    x : float
        x <= 0.

    Returns
    -------
    float

    Examples
    --------
    >>> import math
    >>> from meanfield.solvers.kernels.direct import exp_nonpositive
    >>> abs(exp_nonpositive(-1.5) / math.exp(-1.5) - 1) < 1e-15, exp_nonpositive(-math.inf) < 1e-307
    (True, True)
    """
    x = max(x, _EXP_FLOOR)
    rounded = x * _LOG2E + _ROUNDER
    k = rounded - _ROUNDER
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * _bits_as_float((_float_bits(rounded) - _ROUNDER_BITS + 1023) << 52)


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _queries(x, i0, A, beta, general_A, U):
    """U[t] = β A^T x_{i0+t} for the tile's targets (the last target repeats as padding)."""
    n, d = x.shape
    for t in range(TILE):
        i = min(i0 + t, n - 1)
        for c in range(d):
            if general_A:
                acc = 0.0
                for k in range(d):
                    acc += A[k, c] * x[i, k]
            else:
                acc = A[0, 0] * x[i, c]
            U[t, c] = beta * acc


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _scores(U, y, yT, j0, nb, S):
    """S[t, k] = <U[t], y[j0+k]>: axpys over k for small d, 2×2 blocks of dot products otherwise."""
    T, d = U.shape
    if d <= SMALL_D:
        for t in range(T):
            for k in range(nb):
                S[t, k] = 0.0
            for c in range(d):
                u = U[t, c]
                for k in range(nb):
                    S[t, k] += u * yT[c, j0 + k]
        return
    for t in range(0, T, 2):
        for k in range(0, nb, 2):
            k1 = min(k + 1, nb - 1)
            a00 = 0.0
            a01 = 0.0
            a10 = 0.0
            a11 = 0.0
            for c in range(d):
                u0 = U[t, c]
                u1 = U[t + 1, c]
                y0 = y[j0 + k, c]
                y1 = y[j0 + k1, c]
                a00 += u0 * y0
                a01 += u0 * y1
                a10 += u1 * y0
                a11 += u1 * y1
            S[t, k] = a00
            S[t + 1, k] = a10
            S[t, k1] = a01
            S[t + 1, k1] = a11


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _softmax_update(S, w, j0, nb, i0, causal, mx, z, G):
    """Online log-sum-exp: raise the running maxima M_t to the block's, rescale (z, G) by
    e^{M_old - M_new}, then overwrite S by w_k e^{s - M} and add it to z; ``causal``: row t
    (target i0 + t) keeps the sources j0 + k <= i0 + t, the others' S is set to 0."""
    T, d = G.shape
    for t in range(T):
        reach = min(nb, max(0, i0 + t - j0 + 1)) if causal else nb
        top = -np.inf
        for k in range(reach):
            if w[j0 + k] > 0.0:
                top = max(top, S[t, k])
        if top > mx[t]:
            scale = exp_nonpositive(mx[t] - top)
            z[t] *= scale
            for c in range(d):
                G[t, c] *= scale
            mx[t] = top
        m_t = mx[t]
        acc = 0.0
        for k in range(reach):
            e = w[j0 + k] * exp_nonpositive(min(S[t, k] - m_t, 0.0))
            S[t, k] = e
            acc += e
        for k in range(reach, nb):
            S[t, k] = 0.0
        z[t] += acc


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _accumulate(S, yT, j0, nb, G):
    """G[t, c] += sum_k S[t, k] y[j0+k, c], in 4 (targets) × 2 (coordinates) blocks."""
    T, d = G.shape
    for t in range(0, T, 4):
        for c in range(0, d, 2):
            c1 = min(c + 1, d - 1)
            a00 = 0.0
            a01 = 0.0
            a10 = 0.0
            a11 = 0.0
            a20 = 0.0
            a21 = 0.0
            a30 = 0.0
            a31 = 0.0
            for k in range(nb):
                y0 = yT[c, j0 + k]
                y1 = yT[c1, j0 + k]
                s = S[t, k]
                a00 += s * y0
                a01 += s * y1
                s = S[t + 1, k]
                a10 += s * y0
                a11 += s * y1
                s = S[t + 2, k]
                a20 += s * y0
                a21 += s * y1
                s = S[t + 3, k]
                a30 += s * y0
                a31 += s * y1
            G[t, c] += a00
            G[t + 1, c] += a10
            G[t + 2, c] += a20
            G[t + 3, c] += a30
            if c1 > c:
                G[t, c1] += a01
                G[t + 1, c1] += a11
                G[t + 2, c1] += a21
                G[t + 3, c1] += a31


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _finish(x, i0, G, z, mx, V, normalised, general_V, out, log_phi):
    """X_i = P_x V G / z (SA) or P_x V G e^M (USA); log Φ_i = M + log z."""
    n, d = x.shape
    v = np.empty(d)
    for t in range(min(TILE, n - i0)):
        i = i0 + t
        factor = 1.0 / z[t] if normalised else math.exp(mx[t])
        for c in range(d):
            if general_V:
                acc = 0.0
                for k in range(d):
                    acc += V[c, k] * G[t, k]
            else:
                acc = V[0, 0] * G[t, c]
            v[c] = acc * factor
        dot = 0.0
        for c in range(d):
            dot += v[c] * x[i, c]
        for c in range(d):
            out[i, c] = v[c] - dot * x[i, c]
        log_phi[i] = mx[t] + math.log(z[t])


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def attention_field(x, y, yT, w, A, V, beta, normalised, general_A, general_V, causal, out, log_phi):
    r"""Batched field: x (B, n, d) targets, sources y (B, m, d) and yT = y transposed (B, d, m),
    weights w (B, m) >= 0.  Writes X into ``out`` (B, n, d) and log Φ into ``log_phi`` (B, n).
    ``causal`` (n = m): target i sums over the sources j <= i only (USA: not yet divided by W_i).

    .. math::

        X_i = P_{x_i} V \frac{G_i}{\Phi_i}\ \text{(SA) or}\ P_{x_i} V G_i\ \text{(USA)}, \qquad
        G_i = \sum_j w_j e^{\beta \langle x_i, A y_j \rangle} y_j, \quad
        \Phi_i = \sum_j w_j e^{\beta \langle x_i, A y_j \rangle}.

    Parameters
    ----------
    x : ndarray, shape (B, n, d)
        Targets (unit vectors).
    y : ndarray, shape (B, m, d)
        Sources.
    yT : ndarray, shape (B, d, m)
        The sources transposed (C-contiguous).
    w : ndarray, shape (B, m)
        Weights.
    A, V : ndarray, shape (d, d) or (1, 1)
        Read only when ``general_A`` / ``general_V``; otherwise A = A[0, 0] I, V = V[0, 0] I.
    beta : float
    normalised, general_A, general_V, causal : bool
    out : ndarray, shape (B, n, d)
        Receives X.
    log_phi : ndarray, shape (B, n)
        Receives log Φ.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.direct import attention_field
    >>> x = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> out, log_phi, one = np.empty((1, 2, 2)), np.empty((1, 2)), np.ones((1, 1))
    >>> attention_field(x, x, np.ascontiguousarray(np.swapaxes(x, 1, 2)), np.full((1, 2), 0.5), one, one, 1.0,
    ...                 True, False, False, False, out, log_phi)
    >>> np.round(out[0], 4)
    array([[0.    , 0.2689],
           [0.2689, 0.    ]])
    """
    B, n, d = x.shape
    m = y.shape[1]
    ntiles = (n + TILE - 1) // TILE
    ngroups = (ntiles + GROUP - 1) // GROUP
    for job in prange(B * ngroups):
        b = job // ngroups
        first = (job - b * ngroups) * GROUP
        tiles = min(GROUP, ntiles - first)
        U = np.empty((tiles, TILE, d))
        G = np.zeros((tiles, TILE, d))
        S = np.empty((TILE, BLOCK))
        mx = np.full((tiles, TILE), -np.inf)
        z = np.zeros((tiles, TILE))
        for g in range(tiles):
            _queries(x[b], (first + g) * TILE, A, beta, general_A, U[g])
        end = min(m, (first + tiles) * TILE) if causal else m
        for j0 in range(0, end, BLOCK):
            nb = min(BLOCK, m - j0)
            for g in range(tiles):
                _scores(U[g], y[b], yT[b], j0, nb, S)
                _softmax_update(S, w[b], j0, nb, (first + g) * TILE, causal, mx[g], z[g], G[g])
                _accumulate(S, yT[b], j0, nb, G[g])
        for g in range(tiles):
            _finish(x[b], (first + g) * TILE, G[g], z[g], mx[g], V, normalised, general_V, out[b], log_phi[b])


@njit(parallel=True, cache=True)
def circle_angle_field(theta, src, w, beta, sign, normalised, causal, out):
    r"""The angular velocities of tokens on the circle by direct sums, batched.

    .. math::

        \dot\theta_i = \pm \frac{1}{Z_i} \sum_j w_j e^{\beta \cos(\theta_i - \theta_j)} \sin(\theta_j - \theta_i),

    Z_i = sum_j w_j e^{β cos(θ_i-θ_j)} (``normalised``) or 1 (then the sum is multiplied by e^β
    after a shift by it), for (B, n) targets and (B, m) sources.  ``causal`` (n = m): the sums
    over j <= i, and USA divided by W_i = sum_{j<=i} w_j.

    Parameters
    ----------
    theta : ndarray, shape (B, n)
        Target angles.
    src : ndarray, shape (B, m)
        Source angles.
    w : ndarray, shape (B, m)
        Weights.
    beta, sign : float
        β and the sign ±1 of V = ±I.
    normalised, causal : bool
    out : ndarray, shape (B, n)
        Receives dθ/dt.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.direct import circle_angle_field
    >>> th, out = np.array([[0.0, np.pi / 2]]), np.empty((1, 2))
    >>> circle_angle_field(th, th, np.full((1, 2), 0.5), 1.0, 1.0, True, False, out)
    >>> np.round(out, 4)
    array([[ 0.2689, -0.2689]])
    """
    B, n = theta.shape
    m = src.shape[1]
    for idx in prange(B * n):
        b = idx // n
        i = idx - b * n
        ti = theta[b, i]
        z = 0.0
        g = 0.0
        prefix = 0.0
        for j in range(min(m, i + 1) if causal else m):
            delta = src[b, j] - ti
            e = w[b, j] * math.exp(beta * (math.cos(delta) - 1.0))
            z += e
            g += e * math.sin(delta)
            prefix += w[b, j]
        if normalised:
            out[b, i] = sign * g / z
        elif causal:
            out[b, i] = sign * g * math.exp(beta) / prefix
        else:
            out[b, i] = sign * g * math.exp(beta)
