"""Batched small systems: many independent systems of a few tokens, each kept in cache.

For one system of n tokens x_1..x_n with weights w_j >= 0 and scores s_ij = β <x_i, A x_j>
(A = Q^T K):

    M_i   = max_{j: w_j > 0} s_ij                          (stable softmax shift)
    e_ij  = w_j e^{s_ij - M_i},   z_i = sum_j e_ij,   G_i = sum_j e_ij x_j
    X_i   = P_{x_i} V G_i / z_i   (SA)     or     P_{x_i} V G_i e^{M_i}   (USA)
    log Φ_i = M_i + log z_i

With the causal mask (``causal``) every sum over j runs over j <= i only (e_ij = 0 for j > i) and
USA divides by the prefix weight W_i = sum_{j<=i} w_j (1/i for w_j = 1/n).

computed as matrix products of the whole system (n ≤ ``SMALL_N``).  A system is held
transposed, x^T (d, n), so that every loop runs along the n targets in contiguous memory:
scores S^T = x U^T with U = β x A, the shifts, exponentials and sums z elementwise over targets,
values G^T = x^T E^T, each product updating a row with four terms at a time.  None of these
loops is a reduction along the vectorised index, so they vectorise without reassociation
(kernels.py explains why reassociation is off: bit-exact resume across processes).
One parallel job per system; its scratch (a few d × n and n × n arrays) is allocated once per
job and reused by every stage of every step.

``advance`` takes ``count`` fixed steps of forward Euler or RK4 of every system, each stage's
field evaluated at the renormalised stage and the step followed by x <- x/|x|: the scheme of
``stepping.fixed_step`` with ``project=normalise`` applied to ``rhs(x) = X(normalise(x))``.
The state stays in the job's cache between steps.
"""
from . import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit, prange

from .kernels import _FAST, exp_nonpositive

SMALL_N = 128   # the largest system treated here: its n × n scores stay in cache per thread
BLAS_MIN_K = 16           # products with a shorter inner dimension: our loops beat a dgemm call
BLAS_MAX_WORK = 65536 * 4  # OpenBLAS computes a dgemm of m n k <= 65536 × 4 on the calling thread


@njit(cache=True, inline="always", fastmath=_FAST)
def _rows_times(P, C, out):
    """out[r, :] = sum_k P[r, k] C[k, :]  (P (R, K), C (K, n)), four terms k per update."""
    R, K = P.shape
    n = C.shape[1]
    for r in range(R):
        for i in range(n):
            out[r, i] = 0.0
    K4 = K - K % 4
    for k in range(0, K4, 4):
        for r in range(R):
            p0 = P[r, k]
            p1 = P[r, k + 1]
            p2 = P[r, k + 2]
            p3 = P[r, k + 3]
            for i in range(n):
                out[r, i] += (p0 * C[k, i] + p1 * C[k + 1, i]) + (p2 * C[k + 2, i] + p3 * C[k + 3, i])
    for k in range(K4, K):
        for r in range(R):
            p0 = P[r, k]
            for i in range(n):
                out[r, i] += p0 * C[k, i]


@njit(cache=True, inline="always", fastmath=_FAST)
def _product(P, C, out):
    """out = P C: BLAS dgemm where it is faster than the loops (inner dimension >= BLAS_MIN_K) and
    small enough (R K n <= BLAS_MAX_WORK) that OpenBLAS runs it on the calling thread, so that it
    never starts threads of its own inside a parallel job; ``_rows_times`` otherwise."""
    R, K = P.shape
    if K >= BLAS_MIN_K and R * K * C.shape[1] <= BLAS_MAX_WORK:
        np.dot(P, C, out)
    else:
        _rows_times(P, C, out)


@njit(cache=True, inline="always", fastmath=_FAST)
def _column_dots(aT, bT, out):
    """out[i] = <aT[:, i], bT[:, i]>, summed over c in order (element-wise over i: vectorises)."""
    d, n = aT.shape
    for i in range(n):
        out[i] = 0.0
    for c in range(d):
        for i in range(n):
            out[i] += aT[c, i] * bT[c, i]


@njit(cache=True, inline="always", fastmath=_FAST)
def _unit_columns(yT, xT, norm):
    """xT[:, i] = yT[:, i] / |yT[:, i]|."""
    d, n = yT.shape
    _column_dots(yT, yT, norm)
    for i in range(n):
        norm[i] = 1.0 / math.sqrt(norm[i])
    for c in range(d):
        for i in range(n):
            xT[c, i] = yT[c, i] * norm[i]


NO_MASK = -(1 << 62)   # the ``shift`` of unmasked attention: every source reaches every target


@njit(cache=True, inline="always")
def first_target(j, shift, n):
    """The first target i that source row j reaches, i >= j + shift (clipped to [0, n]).

    The causal mask j_global <= i_global with shift = j0 - i0 (block offsets), nothing masked for
    NO_MASK.

    Parameters
    ----------
    j : int
        The source's row in its block.
    shift : int
        j0 - i0, the block's first source less the tile's first target, or ``NO_MASK``.
    n : int
        The number of targets in the tile.

    Returns
    -------
    int
        In [0, n].

    Examples
    --------
    >>> from meanfield.solvers.small import NO_MASK, first_target
    >>> first_target(3, 0, 8), first_target(3, -5, 8), first_target(3, NO_MASK, 8)
    (3, 0, 0)
    """
    return min(max(j + shift, 0), n)


@njit(cache=True, inline="always", fastmath=_FAST)
def weighted_exponentials(ST, w, m, z, shift):
    r"""Weighted, shifted exponentials of a transposed score block, in place, and their sums.

    .. math::

        e_{ji} = w_j\, e^{\min(S^T_{ji} - m_i,\, 0)}, \qquad z_i \mathrel{+}= \sum_j e_{ji}

    (element-wise along i); e_ji = 0 for the masked targets i < ``first_target(j, shift, n)``.

    Parameters
    ----------
    ST : ndarray, shape (J, n)
        Scores S^T[j, i], overwritten by e_ji.
    w : ndarray, shape (J,)
        Source weights.
    m : ndarray, shape (n,)
        The running maxima.
    z : ndarray, shape (n,)
        Running sums, increased in place.
    shift : int
        The causal offset (see ``first_target``) or ``NO_MASK``.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.small import NO_MASK, weighted_exponentials
    >>> ST, z = np.zeros((2, 2)), np.zeros(2)
    >>> weighted_exponentials(ST, np.array([0.25, 0.75]), np.zeros(2), z, NO_MASK)
    >>> z
    array([1., 1.])
    """
    J, n = ST.shape
    for j in range(J):
        wj = w[j]
        lo = first_target(j, shift, n)
        for i in range(lo):
            ST[j, i] = 0.0
        for i in range(lo, n):
            e = wj * exp_nonpositive(min(ST[j, i] - m[i], 0.0))
            ST[j, i] = e
            z[i] += e


@njit(cache=True, inline="always", fastmath=_FAST)
def _field(xT, x, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m, z,
           outT, log_phi):
    """X^T (into outT (d, n)) and log Φ of one system given as xT (d, n) and x = xT^T (n, d).

    A_T = A^T and V are read only when general_A / general_V; otherwise A = a I, V = v_scale I.
    ``causal``: token i attends to j <= i (USA divided by W_i = sum_{j<=i} w_j).
    Scratch: UT, GT (d, n), ST (n, n), m, z (n,)."""
    d, n = xT.shape
    if general_A:
        _product(A_T, xT, UT)              # U^T = A^T x^T
        scale = beta
    else:
        for c in range(d):
            for i in range(n):
                UT[c, i] = xT[c, i]
        scale = beta * a
    _product(x, UT, ST)                    # S^T[j, i] = <x_j, A^T x_i> = <x_i, A x_j>
    for i in range(n):
        m[i] = -np.inf
        z[i] = 0.0
    shift = 0 if causal else NO_MASK
    for j in range(n):
        for i in range(n):
            ST[j, i] *= scale
        if w[j] > 0.0:
            for i in range(first_target(j, shift, n), n):
                m[i] = max(m[i], ST[j, i])
    weighted_exponentials(ST, w, m, z, shift)
    _product(xT, ST, GT)                   # G^T = x^T E^T
    prefix = 0.0
    for i in range(n):
        log_phi[i] = m[i] + math.log(z[i])
        prefix += w[i]
        if normalised:
            z[i] = 1.0 / z[i]
        else:
            z[i] = math.exp(m[i]) / prefix if causal else math.exp(m[i])
    if general_V:
        _product(V, GT, outT)
        for c in range(d):
            for i in range(n):
                outT[c, i] *= z[i]
    else:
        for c in range(d):
            for i in range(n):
                outT[c, i] = (v_scale * z[i]) * GT[c, i]
    _column_dots(outT, xT, m)
    for c in range(d):
        for i in range(n):
            outT[c, i] -= m[i] * xT[c, i]


@njit(cache=True, inline="always")
def _transpose(src, dst):
    r, s = src.shape
    for i in range(r):
        for j in range(s):
            dst[j, i] = src[i, j]


@njit(cache=True, inline="always")
def _scratch(n, d):
    """A job's work arrays for ``_field``: U^T, G^T (d, n), S^T (n, n), m, z (n,)."""
    return np.empty((d, n)), np.empty((d, n)), np.empty((n, n)), np.empty(n), np.empty(n)


@njit(parallel=True, cache=True, fastmath=_FAST)
def field(x, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, out, log_phi):
    r"""The attention field X and log Φ of each small system of tokens that are their own sources.

    .. math::

        X_i = P_{x_i} V \frac{\sum_j w_j e^{\beta \langle x_i, A x_j \rangle} x_j}{\Phi_i}
        \ \text{(SA; USA without the division)}, \qquad
        \Phi_i = \sum_j w_j e^{\beta \langle x_i, A x_j \rangle},

    by whole-system matrix products, one system per parallel job.  A_T = A^T (d, d) and V (d, d)
    are read only when general_A / general_V; otherwise A = a I and V = v_scale I; ``causal``
    masks j > i (USA: not divided by the prefix weights).

    Parameters
    ----------
    x : ndarray, shape (B, n, d)
        B systems of n <= ``SMALL_N`` unit vectors.
    w : ndarray, shape (B, n)
        Weights.
    beta : float
    A_T, V : ndarray, shape (d, d) or (1, 1)
    a, v_scale : float
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
    >>> from meanfield.solvers.small import field
    >>> x = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> out, log_phi = np.empty((1, 2, 2)), np.empty((1, 2))
    >>> one = np.ones((1, 1))
    >>> field(x, np.full((1, 2), 0.5), 1.0, one, 1.0, one, 1.0, True, False, False, False, out, log_phi)
    >>> np.round(out[0], 4)
    array([[0.    , 0.2689],
           [0.2689, 0.    ]])
    """
    B, n, d = x.shape
    for b in prange(B):
        UT, GT, ST, m, z = _scratch(n, d)
        xT = np.empty((d, n))
        oT = np.empty((d, n))
        _transpose(x[b], xT)
        _field(xT, x[b], w[b], beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m,
               z, oT, log_phi[b])
        _transpose(oT, out[b])


@njit(cache=True, inline="always", fastmath=_FAST)
def _stage(yT, h, kT, sT):
    """sT = yT + h kT."""
    d, n = yT.shape
    for c in range(d):
        for i in range(n):
            sT[c, i] = yT[c, i] + h * kT[c, i]


@njit(parallel=True, cache=True, fastmath=_FAST)
def advance(x, w, h, count, rk4, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, out):
    r"""``count`` steps of size h (forward Euler, or RK4 when ``rk4``) of every system of
    x (B, n, d), each followed by renormalisation; the result goes into out (B, n, d).

    Euler:  y <- N(y + h X(N(y)));   RK4: k1 = X(N(y)), k2 = X(N(y + h/2 k1)),
    k3 = X(N(y + h/2 k2)), k4 = X(N(y + h k3)), y <- N(y + h/6 (k1 + 2 k2 + 2 k3 + k4)),
    with N(y) = y/|y| for each token:

    .. math::

        y \leftarrow N\Big(y + \frac{h}{6}(k_1 + 2k_2 + 2k_3 + k_4)\Big), \qquad N(y)_i = \frac{y_i}{|y_i|}.

    Parameters
    ----------
    x : ndarray, shape (B, n, d)
        B systems of n <= ``SMALL_N`` tokens.
    w : ndarray, shape (B, n)
        Weights.
    h : float
        The step.
    count : int
        The number of steps.
    rk4 : bool
        RK4 (else forward Euler).
    beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal
        The model, as for ``field``.
    out : ndarray, shape (B, n, d)
        Receives the tokens after ``count`` steps.

    Returns
    -------
    None

    Examples
    --------
    Two tokens a quarter turn apart attract each other:

    >>> import numpy as np
    >>> from meanfield.solvers.small import advance
    >>> x, out = np.array([[[1.0, 0.0], [0.0, 1.0]]]), np.empty((1, 2, 2))
    >>> one = np.ones((1, 1))
    >>> advance(x, np.full((1, 2), 0.5), 0.1, 5, True, 1.0, one, 1.0, one, 1.0, True, False, False, False, out)
    >>> bool(out[0, 0] @ out[0, 1] > 0), bool(np.allclose(np.linalg.norm(out, axis=2), 1))
    (True, True)
    """
    B, n, d = x.shape
    for b in prange(B):
        UT, GT, ST, m, z = _scratch(n, d)
        work = np.empty((5, d, n))
        yT, xT, kT, aT, sT = work[0], work[1], work[2], work[3], work[4]   # state, stage, k, sum of k, y + h k
        xs = np.empty((n, d))
        lp = np.empty(n)
        wb = w[b]
        _transpose(x[b], yT)
        for _ in range(count):
            _unit_columns(yT, xT, m)
            _transpose(xT, xs)
            _field(xT, xs, wb, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m,
                   z, kT, lp)
            if rk4:
                for c in range(d):
                    for i in range(n):
                        aT[c, i] = kT[c, i]
                for s in range(3):
                    _stage(yT, (0.5 * h) if s < 2 else h, kT, sT)
                    _unit_columns(sT, xT, m)
                    _transpose(xT, xs)
                    _field(xT, xs, wb, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT,
                           ST, GT, m, z, kT, lp)
                    two = 2.0 if s < 2 else 1.0
                    for c in range(d):
                        for i in range(n):
                            aT[c, i] = aT[c, i] + two * kT[c, i]
                _stage(yT, h / 6.0, aT, sT)
            else:
                _stage(yT, h, kT, sT)
            _unit_columns(sT, yT, m)
        _transpose(yT, out[b])
