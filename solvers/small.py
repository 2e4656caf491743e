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
transposed, x^T (d, n), so that every loop runs along the n targets in contiguous memory.  The
products are ``kernels.tiles.tile_product``: register tiles at the machine's vector width, each
entry one FMA chain in the order of the inner index (no reassociation; kernels/direct.py explains
why: bit-exact resume across processes), the same bits whatever the width; the ``gemm`` engine
uses the same kernel for its products at small d.  The element-wise passes (normalisation,
projection, the RK4 stages) are loops LLVM vectorises: unsigned indices and the NumPy error model
(no zero-division test per element); a forward Euler step after the value product is one register
kernel per block of columns (``_euler_tail``: its column sums stay in vector registers), with the same
operations in the same order as those loops, so the same bits.

Scores β a <x_i, x_j> (A = a I, no mask, 2 β|a| <= ``SYMMETRIC_MAX_EXP``) take the symmetric kernel
K_ij = e^{β a <x_i, x_j> - M} with one shift M = β|a| max_j |x_j|^2 >= s_ij for every target:
only the upper part of the Gram matrix and of K is computed (rows from ``tiles.tile_start(j)`` and
``_upper_start(j)``; the rest copied by ``_mirror``), and
[G^T; z] = [x^T; 1] diag(w) K is one product.  Other models (general A, causal masks, large
β) take the per-target maxima M_i and S^T = x U^T with U = β x A.
Threads pull systems one at a time from a shared counter (``_take``), so that a thread slowed by
other work on its core takes fewer systems; each thread's scratch (a few d × n and n × n arrays) is
allocated once and reused by every stage of every step of its systems.

``advance`` takes ``count`` fixed steps of forward Euler or RK4 of every system, each stage's
field evaluated at the renormalised stage and the step followed by x <- x/|x|: the scheme of
``stepping.fixed_step`` with ``project=normalise`` applied to ``rhs(x) = X(normalise(x))``.
The state stays in the job's cache between steps.  With d >= 2n dimensions and
V = v I every step stays in the span of the system's tokens: the caller (``particles``) may then
advance the coordinates ``geometry.span_coordinates`` in an orthonormal basis of that span, n instead of
d per token (d = 128, n = 32: a quarter of the work), map back and renormalise once per call.
"""
from . import _numba_env  # noqa: F401

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .kernels.direct import FASTMATH, exp_nonpositive
from .kernels.tiles import ROWS, WIDTH, exp_tile, ir_loop, tile_product

SMALL_N = 128   # the largest system treated here: its n × n scores stay in cache per thread
BLAS_MAX_WORK = 65536 * 4  # OpenBLAS computes a dgemm of m n k <= 65536 × 4 on the calling thread (gemm.py)


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _column_dots(aT, bT, out):
    """out[i] = <aT[:, i], bT[:, i]>, summed over c in order (element-wise over i: vectorises)."""
    d, n = aT.shape
    for i in range(n):
        out[i] = 0.0
    for c in range(d):
        for i in range(n):
            out[i] += aT[c, i] * bT[c, i]


@njit(cache=True, inline="always", fastmath=FASTMATH)
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


@njit(cache=True, inline="always", fastmath=FASTMATH)
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
        for i in range(np.uint64(lo), np.uint64(n)):     # unsigned: vectorises (see tiles._entries)
            e = wj * exp_nonpositive(min(ST[j, i] - m[i], 0.0))
            ST[j, i] = e
            z[i] += e


SYMMETRIC_MAX_EXP = 700.0   # 2 β|a| up to this: unit tokens' e^{β a <x_i, x_j> - β|a|} >= e^{-700} is normal


@njit(cache=True)
def symmetric(beta, a, general_A, causal):
    """Whether ``_field`` takes the symmetric kernel K_ij = e^{β a <x_i, x_j> - M} (one shift M for
    all targets): scores β a <x_i, x_j> (A = a I), no mask, and 2 β|a| <= ``SYMMETRIC_MAX_EXP``
    (no term underflows).

    Parameters
    ----------
    beta : float
        β >= 0.
    a : float
        A = a I (read when not ``general_A``).
    general_A : bool
        A is a general (d, d) matrix.
    causal : bool
        Token i attends to j <= i only.

    Returns
    -------
    bool
        True: the symmetric kernel; False: the per-target shifts M_i.

    Examples
    --------
    >>> from meanfield.solvers.small import symmetric
    >>> bool(symmetric(4.0, 1.0, False, False)), bool(symmetric(400.0, 1.0, False, False))
    (True, False)
    """
    return not general_A and not causal and 2.0 * beta * abs(a) <= SYMMETRIC_MAX_EXP


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _exponentials(rows, lo, scale, shift):
    """rows[:, i] <- e^{min(scale rows[:, i] - shift, 0)} for i >= lo: ``ROWS`` rows by ``tiles.exp_tile``
    (the rows' polynomial chains interleaved, ``WIDTH`` columns at a time), fewer rows and the last
    columns by ``exp_nonpositive`` (the same operations, so the same bits)."""
    n = rows.shape[1]
    start = lo
    if rows.shape[0] == ROWS:
        while start + WIDTH <= n:
            exp_tile(rows, start, scale, shift)
            start += WIDTH
    for row in rows:
        for i in range(np.uint64(start), np.uint64(n)):     # unsigned: vectorises (see tiles._entries)
            row[i] = exp_nonpositive(min(scale * row[i] - shift, 0.0))


@njit(cache=True, inline="always")
def _upper_start(j):
    """The first column of the rows j .. j + ROWS - 1 (j a multiple of ``ROWS``) whose exponentials
    ``_symmetric_sums`` computes: j rounded down to whole vectors (``WIDTH``)."""
    return j - j % WIDTH


@njit(cache=True, inline="always")
def _mirror(ST):
    """ST[r, i] = ST[i, r] below the exponentials of ``_symmetric_sums`` (columns i < ``_upper_start``
    of the row's group), by blocks of ``ROWS`` × ``ROWS`` (ROWS = 4; each read whole before it is written)."""
    n = ST.shape[0]
    last = n - n % ROWS
    for j in range(0, last, ROWS):
        for i in range(0, _upper_start(j), ROWS):
            for a in range(ROWS):
                column = (ST[i, j + a], ST[i + 1, j + a], ST[i + 2, j + a], ST[i + 3, j + a])
                row = ST[j + a]
                row[i], row[i + 1], row[i + 2], row[i + 3] = column
    for r in range(last, n):
        for i in range(_upper_start(last)):
            ST[r, i] = ST[i, r]


@njit(cache=True, fastmath=FASTMATH)
def _symmetric_sums(xT, w, scale, WT, GT, ST, m, weighted):
    """G^T (d, n) and z (row d of GT) for the symmetric kernel, one shift M_i = M for all i:

        K = e^{scale x x^T - M},  M = |scale| max_j |x_j|^2 >= scale <x_i, x_j>
            (scores: the upper part, rows from ``tile_start(j)``; exponentials from ``_upper_start(j)``;
            then ``_mirror``),
        [G^T; z] = [x^T; 1] W K,  W = diag(w)   (one product, z as its last row).

    ``weighted``: WT already holds [x^T; 1] W (the Euler tail writes it with the next stage)."""
    d, n = xT.shape
    tile_product(xT, xT, ST, True)         # <x_j, x_i> for i >= tile_start(j)
    shift = 0.0
    for j in range(n):
        shift = max(shift, abs(scale) * ST[j, j])
    for j in range(0, n, ROWS):                 # the rows of a tile together: independent exponentials
        _exponentials(ST[j:j + ROWS], _upper_start(j), scale, shift)
    _mirror(ST)
    if not weighted:
        for c in range(d):
            for j in range(n):
                WT[c, j] = w[j] * xT[c, j]
        for j in range(n):
            WT[d, j] = w[j]
    for j in range(n):
        m[j] = shift
    tile_product(WT.T, ST, GT, False)


@njit(cache=True, fastmath=FASTMATH)
def _shifted_sums(xT, w, scale, A_T, general_A, causal, UT, GT, ST, m):
    """G^T (d, n) and z (row d of GT) with the shifts M_i = max_{j: w_j > 0} s_ij (any A, mask)."""
    d, n = xT.shape
    if general_A:
        tile_product(A_T.T, xT, UT[:d], False)            # U^T = A^T x^T
    else:
        for c in range(d):
            for i in range(n):
                UT[c, i] = xT[c, i]
    tile_product(xT, UT[:d], ST, False)                   # S^T[j, i] = <x_j, A^T x_i> = <x_i, A x_j>
    z = GT[d]
    for i in range(n):
        m[i] = -np.inf
        z[i] = 0.0
    shift = 0 if causal else NO_MASK
    for j in range(n):
        for i in range(n):
            ST[j, i] *= scale
        if w[j] > 0.0:
            for i in range(np.uint64(first_target(j, shift, n)), np.uint64(n)):
                m[i] = max(m[i], ST[j, i])
    weighted_exponentials(ST, w, m, z, shift)
    tile_product(xT.T, ST, GT[:d], False)                 # G^T = x^T E^T


@njit(cache=True, inline="always", fastmath=FASTMATH, error_model="numpy")
def _scaled_sums(xT, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m, outT,
                 log_phi, weighted):
    """The field before its projection as columns scaled, M[:, i] scale[i] (SA: V G_i / z_i; USA:
    V G_i e^{M_i}), and log Φ (into log_phi, unless it is empty) of one system given as xT (d, n):
    returns M (GT[:d] = G^T, or outT = V G^T when ``general_V``); scale is GT[d] (v_scale folded in).

    A_T = A^T and V are read only when general_A / general_V; otherwise A = a I, V = v_scale I.
    ``causal``: token i attends to j <= i (USA divided by W_i = sum_{j<=i} w_j).
    Scratch: UT, GT (d + 1, n), ST (n, n), m (n,); ``weighted``: UT holds [x^T; 1] W (``_symmetric_sums``)."""
    d, n = xT.shape
    if symmetric(beta, a, general_A, causal):
        _symmetric_sums(xT, w, beta * a, UT, GT, ST, m, weighted)
    else:
        _shifted_sums(xT, w, beta if general_A else beta * a, A_T, general_A, causal, UT, GT, ST, m)
    z = GT[d]
    prefix = 0.0
    for i in range(n):
        if log_phi.size:
            log_phi[i] = m[i] + math.log(z[i])
        prefix += w[i]
        if normalised:
            z[i] = 1.0 / z[i]
        else:
            z[i] = math.exp(m[i]) / prefix if causal else math.exp(m[i])
    if general_V:
        tile_product(V.T, GT[:d], outT, False)
        return outT
    for i in range(np.uint64(0), np.uint64(n)):     # unsigned: vectorises (see tiles._entries)
        z[i] = v_scale * z[i]
    return GT[:d]


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _values(xT, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m, outT,
            log_phi):
    """The field before its projection (``_scaled_sums``) into outT (d, n), the dots <outT_i, x_i>
    into m, and log Φ (into log_phi, unless it is empty) of one system given as xT (d, n)."""
    d, n = xT.shape
    M = _scaled_sums(xT, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m,
                     outT, log_phi, False)
    z = GT[d]
    lo, un = np.uint64(0), np.uint64(n)      # unsigned: vectorises (see tiles._entries)
    for i in range(lo, un):
        m[i] = 0.0
    for c in range(d):
        for i in range(lo, un):
            value = M[c, i] * z[i]
            outT[c, i] = value
            m[i] += value * xT[c, i]


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _field(xT, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m, outT,
           log_phi):
    """X^T (into outT (d, n)) and log Φ (into log_phi, unless it is empty) of one system given as
    xT (d, n): ``_values``, then the projection outT_i <- outT_i - <outT_i, x_i> x_i."""
    _values(xT, w, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m, outT,
            log_phi)
    lo, un = np.uint64(0), np.uint64(xT.shape[1])
    for c in range(xT.shape[0]):
        for i in range(lo, un):
            outT[c, i] -= m[i] * xT[c, i]


@intrinsic
def _take(typingctx, counter):
    """counter[0] += 1 as one atomic operation; the value before.

    The parallel entries loop over ``prange(B)`` but take their systems from a shared counter: the
    first iteration a thread runs pulls systems until none is left, the others find none.  A thread
    that shares its core with other work thus takes fewer systems instead of holding up the others at
    the end (prange's static split would), whatever the thread count.  Every system is computed
    alone, so the results do not depend on which thread took it."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", array.data, ir.Constant(ir.IntType(64), 1), "monotonic")

    return types.int64(counter), codegen


@njit(cache=True, inline="always")
def _transpose(src, dst):
    r, s = src.shape
    for i in range(r):
        for j in range(s):
            dst[j, i] = src[i, j]


@njit(cache=True, inline="always")
def _scratch(n, d):
    """A job's work arrays for ``_field``: U^T, G^T (d + 1, n), S^T (n, n), m (n,)."""
    return np.empty((d + 1, n)), np.empty((d + 1, n)), np.empty((n, n)), np.empty(n)


@njit(parallel=True, cache=True, fastmath=FASTMATH, error_model="numpy")
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
    taken = np.zeros(1, np.int64)          # systems pulled so far (``_take``)
    for _ in prange(B):
        b = _take(taken)
        if b >= B:
            continue
        UT, GT, ST, m = _scratch(n, d)
        xT = np.empty((d, n))
        oT = np.empty((d, n))
        while b < B:
            _transpose(x[b], xT)
            _field(xT, w[b], beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m,
                   oT, log_phi[b])
            _transpose(oT, out[b])
            b = _take(taken)


def stays_in_span(n, d, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal):
    """Whether ``advance`` runs in the coordinates of the span of each system's tokens
    (``geometry.span_coordinates``): V = v I (and A = a I), so that every stage X_i = P_{x_i} v G_i / z_i
    and hence every step stays in span{x_1..x_n}, and d >= 2n, so that it at least halves the
    work.  (The other arguments are those of ``advance`` after h, count, rk4.)

    Parameters
    ----------
    n, d : int
        Tokens per system and their dimension.
    beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal
        The model, as for ``advance`` (only general_A and general_V are read).

    Returns
    -------
    bool
        d >= 2n and A = a I and V = v I.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.small import stays_in_span
    >>> one = np.ones((1, 1))
    >>> stays_in_span(2, 4, 1.0, one, 1.0, one, 1.0, True, False, False, False)
    True
    >>> stays_in_span(2, 3, 1.0, one, 1.0, one, 1.0, True, False, False, False)
    False
    >>> stays_in_span(2, 4, 1.0, one, 1.0, np.eye(4), 1.0, True, False, True, False)
    False
    """
    return d >= 2 * n and not general_V and not general_A


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _stage(yT, h, kT, sT):
    """sT = yT + h kT."""
    d, n = yT.shape
    for c in range(d):
        for i in range(n):
            sT[c, i] = yT[c, i] + h * kT[c, i]


def _euler_columns(lanes):
    """An intrinsic ``euler(yT, xT, kT, sT, MT, scale, h, i0, w, WT, weighted)``: the rest of a forward Euler step
    after the value product for the columns i0 .. i0 + lanes - 1, each column's sums in a vector register:

        k = scale M,  m = <k, x>,  s = y + h (k - m x),  y = s/|s|,  x = y/|y|  (and WT = w x if ``weighted``)

    (the projection of ``_field``, ``_stage``, two ``_unit_columns`` and the weighting of
    ``_symmetric_sums``, with the same operations in the same order, so the same bits), four passes
    over the d rows.  The loops LLVM vectorises keep the sums in memory and store them back on every
    row; here they stay in registers."""
    def euler(typingctx, yT, xT, kT, sT, MT, scale, h, i0, w, WT, weighted):
        if not all(isinstance(a, types.Array) and a.dtype == types.float64 and a.layout == "C"
                   for a in (yT, xT, kT, sT, MT, scale, w, WT)):
            return None

        def codegen(context, builder, signature, args):
            double, index = ir.DoubleType(), ir.IntType(64)
            vector = ir.VectorType(double, lanes)
            y, x, k, s, M, sc = (context.make_array(t)(context, builder, v)
                                 for t, v in zip(signature.args[:6], args[:6]))
            weights, W = (context.make_array(t)(context, builder, v) for t, v in zip(signature.args[8:10], args[8:10]))
            col0 = args[7]
            eight = ir.Constant(index, 8)
            rows = cgutils.unpack_tuple(builder, y.shape, 2)[0]

            def row_stride(a):
                return builder.sdiv(cgutils.unpack_tuple(builder, a.strides, 2)[0], eight)

            def pointer(a, stride, c):
                at = builder.gep(a.data, [builder.add(builder.mul(c, stride), col0)])
                return builder.bitcast(at, vector.as_pointer())

            def splat(value):
                one = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
                return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined),
                                              ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

            fmuladd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector] * 3),
                                                     f"llvm.fmuladd.v{lanes}f64")
            sqrt = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector]),
                                                  f"llvm.sqrt.v{lanes}f64")
            arrays = dict(y=y, x=x, k=k, s=s, M=M, W=W)
            strides = {name: row_stride(a) for name, a in arrays.items()}

            def load(name, c):
                return builder.load(pointer(arrays[name], strides[name], c), align=8)

            def store(value, name, c):
                builder.store(value, pointer(arrays[name], strides[name], c), align=8)

            def rows_loop(body):
                """acc <- body(c, acc) for c = 0 .. rows - 1, from acc = 0; the last acc."""
                zero = ir.Constant(vector, [0.0] * lanes)
                return ir_loop(builder, rows, [zero], lambda c, acc: [body(c, acc[0])])[0]

            def reciprocal_norm(squares):
                return builder.fdiv(ir.Constant(vector, [1.0] * lanes), builder.call(sqrt, [squares]))

            def columns(a):
                return builder.load(builder.bitcast(builder.gep(a.data, [col0]), vector.as_pointer()), align=8)
            column_scale = columns(sc)
            step_h = splat(args[6])

            def values(c, m):                       # k = scale M, m += k x
                value = builder.fmul(column_scale, load("M", c))
                store(value, "k", c)
                return builder.call(fmuladd, [value, load("x", c), m])
            minus_m = builder.fneg(rows_loop(values))

            def stage(c, norm):                     # s = y + h (k - m x), |s|^2
                t = builder.call(fmuladd, [minus_m, load("x", c), load("k", c)])
                value = builder.call(fmuladd, [step_h, t, load("y", c)])
                store(value, "s", c)
                return builder.call(fmuladd, [value, value, norm])
            inverse = reciprocal_norm(rows_loop(stage))

            def state(c, norm):                     # y = s/|s|, |y|^2
                value = builder.fmul(load("s", c), inverse)
                store(value, "y", c)
                return builder.call(fmuladd, [value, value, norm])
            inverse = reciprocal_norm(rows_loop(state))

            column_weights = columns(weights)
            weighting = context.cast(builder, args[10], signature.args[10], types.boolean)

            def unit(c, unused):                    # x = y/|y| (and WT = w x)
                value = builder.fmul(load("y", c), inverse)
                store(value, "x", c)
                with builder.if_then(weighting):   # loop-invariant: LLVM takes the test out of the loop
                    store(builder.fmul(column_weights, value), "W", c)
                return unused
            rows_loop(unit)
            return context.get_dummy_value()

        return types.none(yT, xT, kT, sT, MT, scale, h, i0, w, WT, weighted), codegen

    euler.__name__ = f"_euler_{lanes}"
    return intrinsic(euler)


_EULER_WIDE, _EULER_VECTOR, _EULER_ONE = (_euler_columns(lanes) for lanes in (4 * WIDTH, WIDTH, 1))


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _euler_tail(yT, xT, kT, sT, MT, scale, h, w, WT, weighted):
    """The rest of a forward Euler step after the value product (k = scale M column by column,
    m = <k, x>, s = y + h (k - m x), y = s/|s|, x = y/|y|: the next step's stage; WT[:d] = w x when
    ``weighted``), by ``_euler_columns`` on blocks of 4 ``WIDTH``, then ``WIDTH``, then single columns."""
    n = yT.shape[1]
    i = 0
    while i + 4 * WIDTH <= n:
        _EULER_WIDE(yT, xT, kT, sT, MT, scale, h, i, w, WT, weighted)
        i += 4 * WIDTH
    while i + WIDTH <= n:
        _EULER_VECTOR(yT, xT, kT, sT, MT, scale, h, i, w, WT, weighted)
        i += WIDTH
    while i < n:
        _EULER_ONE(yT, xT, kT, sT, MT, scale, h, i, w, WT, weighted)
        i += 1


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")
def _advance_one(xb, wb, h, count, rk4, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, outb,
                 UT, GT, ST, m, yT, xT, kT, aT, sT, lp):
    """``advance`` of one system xb (n, d) into outb, with the job's scratch."""
    n, d = xb.shape
    _transpose(xb, yT)
    _unit_columns(yT, xT, m)
    weighted = symmetric(beta, a, general_A, causal)       # the tail writes [x^T; 1] W for the next step
    for step in range(count):
        if not rk4:
            M = _scaled_sums(xT, wb, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT,
                             m, kT, lp, weighted and step > 0)
            _euler_tail(yT, xT, kT, sT, M, GT[d], h, wb, UT, weighted)
            continue
        _field(xT, wb, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT, ST, GT, m, kT,
               lp)
        for c in range(d):
            for i in range(n):
                aT[c, i] = kT[c, i]
        for s in range(3):
            _stage(yT, (0.5 * h) if s < 2 else h, kT, sT)
            _unit_columns(sT, xT, m)
            _field(xT, wb, beta, A_T, a, V, v_scale, normalised, general_A, general_V, causal, UT,
                   ST, GT, m, kT, lp)
            two = 2.0 if s < 2 else 1.0
            for c in range(d):
                for i in range(n):
                    aT[c, i] = aT[c, i] + two * kT[c, i]
        _stage(yT, h / 6.0, aT, sT)
        _unit_columns(sT, yT, m)
        _unit_columns(yT, xT, m)
    _transpose(yT, outb)


@njit(parallel=True, cache=True, fastmath=FASTMATH, error_model="numpy")
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
    taken = np.zeros(1, np.int64)          # systems pulled so far (``_take``)
    for _ in prange(B):
        b = _take(taken)
        if b >= B:
            continue
        UT, GT, ST, m = _scratch(n, d)
        work = np.empty((5, d, n))
        yT, xT, kT, aT, sT = work[0], work[1], work[2], work[3], work[4]   # state, stage, k, sum of k, y + h k
        lp = np.empty(0)                   # log Φ is not needed between steps
        while b < B:
            wb = np.ascontiguousarray(w[b])    # the Euler tail reads whole vectors of weights
            _advance_one(x[b], wb, h, count, rk4, beta, A_T, a, V, v_scale, normalised, general_A, general_V,
                         causal, out[b], UT, GT, ST, m, yT, xT, kT, aT, sT, lp)
            b = _take(taken)
