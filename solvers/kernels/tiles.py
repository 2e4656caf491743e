"""Register-tiled matrix products in the order of the inner index, at the machine's vector width.

``tile_product(PT, C, out)`` writes out = PTᵀ C (PT (K, R), C (K, n)) by tiles of ``ROWS`` rows ×
``COLUMNS`` columns held in vector registers for the whole inner loop: per inner index k, ``ROWS``
broadcasts of PT[k, r..r+ROWS) and one load of C[k, i..i+COLUMNS), then ``ROWS`` fused multiply-adds
of ``COLUMNS``-wide vectors.  Every entry is one FMA chain over k = 0, 1, ..., K-1 starting from 0
(no reassociation), so the result has the same bits as any other in-order FMA loop, whichever
width ran, compiled or loaded from the cache.  float64 and float32 alike (the ``gemm`` engine's
single-precision products).

The width is chosen per machine when this module is imported (``vector_unit``): ``COLUMNS`` is twice
the number of doubles in the widest vector register (AVX-512: 16, AVX2/AVX: 8, SSE2 or other: 4),
so a tile is 2 ``ROWS`` vector accumulators — 8, enough independent FMA chains to hide the FMA
latency on two FMA pipes.  Loops the compiler vectorises keep the accumulators in memory; the
tile, written in LLVM IR (``_tile_of``), keeps them in registers.  The last R mod ``ROWS`` rows (the z
row of the ``small`` engine's value products) take tiles of 1 to 3 rows, as wide as keeps about as many
accumulators, then ``COLUMNS`` wide (``_edge``); only the last n mod ``COLUMNS`` columns are loops.
"""
from .. import _numba_env  # noqa: F401

import math

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, config
from numba.extending import intrinsic

from .direct import EXP_CONSTANTS, FASTMATH

ROWS = 4   # rows of a tile: broadcasts per inner index


def vector_unit(features=None):
    """The widest vector unit of the machine Numba compiles for: its name and width in doubles.

    Parameters
    ----------
    features : str or None
        LLVM feature string ("+avx2,+fma,-avx512f,..."); None: ``NUMBA_CPU_FEATURES`` if set,
        else the host's features.

    Returns
    -------
    (str, int)
        ("avx512", 8), ("avx2", 4), ("avx", 4) or ("sse2", 2).

    Examples
    --------
    >>> from meanfield.solvers.kernels.tiles import vector_unit
    >>> vector_unit("+avx,+avx2,+fma,-avx512f")
    ('avx2', 4)
    >>> vector_unit("+sse2,-avx")
    ('sse2', 2)
    """
    if features is None:
        features = config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
    present = {f[1:] for f in features.split(",") if f.startswith("+")}
    for name, width in (("avx512f", 8), ("avx2", 4), ("avx", 4)):
        if name in present:
            return name.replace("f", "") if name == "avx512f" else name, width
    return "sse2", 2


UNIT, WIDTH = vector_unit()
COLUMNS = 2 * WIDTH   # columns of a tile: two vector registers per row
#: The choice made on this machine, as ``solve`` reports it (info["vector_unit"]).
CHOICE = f"{UNIT}: {WIDTH} doubles per vector register, {ROWS} x {COLUMNS} tiles"


def ir_loop(builder, count, initial, body):
    """Emit the LLVM IR of a counted loop carrying values: for k = 0 .. count - 1, values <- body(k, values).

    Parameters
    ----------
    builder : llvmlite.ir.IRBuilder
        Positioned where the loop starts; left after it.
    count : llvmlite.ir.Value
        The number of passes (i64).
    initial : list of llvmlite.ir.Value
        The carried values before the loop (accumulators: they stay in registers).
    body : callable
        ``body(k, values)`` emits one pass (k the i64 index) and returns the new values, in order.

    Returns
    -------
    list of llvmlite.ir.Value
        The values after the loop.

    Examples
    --------
    >>> from llvmlite import ir
    >>> from meanfield.solvers.kernels.tiles import ir_loop
    >>> i64 = ir.IntType(64)
    >>> function = ir.Function(ir.Module(), ir.FunctionType(i64, [i64]), "triangle")
    >>> builder = ir.IRBuilder(function.append_basic_block())
    >>> total, = ir_loop(builder, function.args[0], [ir.Constant(i64, 0)], lambda k, v: [builder.add(v[0], k)])
    >>> _ = builder.ret(total)
    >>> "phi" in str(function)
    True
    """
    index = ir.IntType(64)
    start = builder.basic_block
    header = builder.append_basic_block("loop.header")
    step = builder.append_basic_block("loop.body")
    done = builder.append_basic_block("loop.done")
    builder.branch(header)
    builder.position_at_end(header)
    k = builder.phi(index)
    k.add_incoming(ir.Constant(index, 0), start)
    values = [builder.phi(v.type) for v in initial]
    for phi, v in zip(values, initial):
        phi.add_incoming(v, start)
    builder.cbranch(builder.icmp_signed("<", k, count), step, done)
    builder.position_at_end(step)
    new = body(k, values)
    end = builder.basic_block
    k.add_incoming(builder.add(k, ir.Constant(index, 1)), end)
    for phi, v in zip(values, new):
        phi.add_incoming(v, end)
    builder.branch(header)
    builder.position_at_end(done)
    return values


def _tile_of(rows, tiles):
    """An intrinsic ``tile(PT, C, out, r, i)``: out[r:r+rows, i:i+columns] = PT[:, r:r+rows]ᵀ
    C[:, i:i+columns] with columns = tiles ``COLUMNS`` (read when it compiles), the rows × columns /
    ``WIDTH`` accumulators in vector registers (C and out with contiguous rows; PT any strides; all
    float64 or all float32)."""
    def tile(typingctx, PT, C, out, r, i):
        columns = tiles * COLUMNS
        arrays = (PT, C, out)
        if not all(isinstance(a, types.Array) and a.ndim == 2 for a in arrays):
            return None
        if PT.dtype not in (types.float64, types.float32) or C.dtype != PT.dtype or out.dtype != PT.dtype:
            return None
        if C.layout != "C" or out.layout != "C":
            return None
        single = PT.dtype == types.float32

        def codegen(context, builder, signature, args):
            real, index = ir.FloatType() if single else ir.DoubleType(), ir.IntType(64)
            vector = ir.VectorType(real, columns)
            pt, c, o = (context.make_array(t)(context, builder, v) for t, v in zip(signature.args[:3], args[:3]))
            row0, col0 = args[3], args[4]
            size = ir.Constant(index, 4 if single else 8)
            pt_rows, pt_cols = (builder.sdiv(s, size) for s in cgutils.unpack_tuple(builder, pt.strides, 2))
            c_row = builder.sdiv(cgutils.unpack_tuple(builder, c.strides, 2)[0], size)
            o_row = builder.sdiv(cgutils.unpack_tuple(builder, o.strides, 2)[0], size)
            K = cgutils.unpack_tuple(builder, c.shape, 2)[0]
            zero = ir.Constant(vector, [0.0] * columns)
            splat = ir.Constant(ir.VectorType(ir.IntType(32), columns), [0] * columns)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector] * 3),
                                                 f"llvm.fmuladd.v{columns}f{32 if single else 64}")  # fused if FMA

            def vector_at(data, row_stride, row, col):
                offset = builder.add(builder.mul(row, row_stride), col)
                return builder.bitcast(builder.gep(data, [offset]), vector.as_pointer())

            def inner(k, acc):                      # acc[t] += PT[k, r + t] C[k, i:i+columns]
                cols = builder.load(vector_at(c.data, c_row, k, col0), align=4 if single else 8)
                pt_k = builder.mul(k, pt_rows)
                new = []
                for t in range(rows):
                    col = builder.mul(builder.add(row0, ir.Constant(index, t)), pt_cols)
                    p = builder.load(builder.gep(pt.data, [builder.add(pt_k, col)]))
                    broadcast = builder.shuffle_vector(builder.insert_element(ir.Constant(vector, ir.Undefined), p,
                                                                              ir.Constant(ir.IntType(32), 0)),
                                                       ir.Constant(vector, ir.Undefined), splat)
                    new.append(builder.call(fma, [broadcast, cols, acc[t]]))
                return new
            acc = ir_loop(builder, K, [zero] * rows, inner)
            for t in range(rows):
                row = builder.add(row0, ir.Constant(index, t))
                builder.store(acc[t], vector_at(o.data, o_row, row, col0), align=4 if single else 8)
            return context.get_dummy_value()

        return types.none(PT, C, out, r, i), codegen

    tile.__name__ = f"_tile_{rows}_by_{tiles}"
    return intrinsic(tile)


_tile = _tile_of(ROWS, 1)
#: The tiles of the last R mod ``ROWS`` rows, by their number of rows: a wide one (about as many
#: accumulators as a full tile, so as many independent FMA chains) and one ``COLUMNS`` wide.
_EDGE_1, _EDGE_1_WIDE = _tile_of(1, 1), _tile_of(1, ROWS)
_EDGE_2, _EDGE_2_WIDE = _tile_of(2, 1), _tile_of(2, ROWS // 2)
_EDGE_3 = _tile_of(3, 1)


@njit(cache=True, inline="always")
def _edge(PT, C, out, r, left, i, full):
    """The tiles of the last ``left`` < ``ROWS`` rows r .. r + left - 1, columns i .. full - 1 (a
    multiple of ``COLUMNS`` apart): wide tiles, then ``COLUMNS`` wide ones."""
    if left == 1:
        while i + ROWS * COLUMNS <= full:
            _EDGE_1_WIDE(PT, C, out, r, i)
            i += ROWS * COLUMNS
        while i < full:
            _EDGE_1(PT, C, out, r, i)
            i += COLUMNS
    elif left == 2:
        while i + ROWS // 2 * COLUMNS <= full:
            _EDGE_2_WIDE(PT, C, out, r, i)
            i += ROWS // 2 * COLUMNS
        while i < full:
            _EDGE_2(PT, C, out, r, i)
            i += COLUMNS
    elif left == 3:
        while i < full:
            _EDGE_3(PT, C, out, r, i)
            i += COLUMNS


@intrinsic
def exp_tile(typingctx, rows, i, scale, shift):
    r"""Shifted exponentials of a tile of ``ROWS`` rows × ``WIDTH`` columns, in place (in compiled code):

    .. math::

        \mathrm{rows}_{ti} \leftarrow e^{\min(\mathrm{scale}\, \mathrm{rows}_{ti} - \mathrm{shift},\, 0)},
        \qquad t < \mathrm{ROWS}, \quad i \le c < i + \mathrm{WIDTH},

    by the operations of ``direct.exp_nonpositive`` lane by lane (so the same bits), on one vector of
    ROWS × WIDTH lanes: the rows' polynomial chains (13 dependent multiply-adds each) interleave, where
    the loop LLVM vectorises runs one row's chain after another and waits on each (about a third
    faster on AVX2).

    Parameters
    ----------
    rows : numpy.ndarray, shape (ROWS, n)
        float64, contiguous rows; columns i .. i + WIDTH - 1 are overwritten.
    i : int
        The first column, i + WIDTH <= n.
    scale, shift : float
        The scores' scale and shift.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from numba import njit
    >>> from meanfield.solvers.kernels.tiles import ROWS, WIDTH, exp_tile
    >>> @njit
    ... def exponentials(rows):
    ...     exp_tile(rows, 0, 1.0, 0.0)
    >>> rows = -np.arange(ROWS * WIDTH, dtype=float).reshape(ROWS, WIDTH)
    >>> exponentials(rows)
    >>> bool(np.allclose(rows, np.exp(-np.arange(ROWS * WIDTH)).reshape(ROWS, WIDTH), rtol=1e-15, atol=0))
    True
    """
    if not (isinstance(rows, types.Array) and rows.ndim == 2 and rows.dtype == types.float64 and rows.layout == "C"):
        return None
    lanes = ROWS * WIDTH
    floor, log2e, rounder, rounder_bits, ln2_hi, ln2_lo = EXP_CONSTANTS
    taylor = [1.0 / math.factorial(k) for k in range(13, -1, -1)]      # 1/13!, ..., 1/2, 1, 1

    def codegen(context, builder, signature, args):
        double, index, i64 = ir.DoubleType(), ir.IntType(64), ir.IntType(64)
        row_vector, vector, ints = ir.VectorType(double, WIDTH), ir.VectorType(double, lanes), ir.VectorType(i64, lanes)
        a = context.make_array(signature.args[0])(context, builder, args[0])
        column, scale_, shift_ = args[1], args[2], args[3]
        stride = builder.sdiv(cgutils.unpack_tuple(builder, a.strides, 2)[0], ir.Constant(index, 8))

        def splat(value, kind=vector):
            if isinstance(value, (int, float)):
                return ir.Constant(kind, [value] * lanes)
            one = builder.insert_element(ir.Constant(kind, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(one, ir.Constant(kind, ir.Undefined),
                                          ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

        def fma(x, y, z):
            f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector] * 3),
                                               f"llvm.fmuladd.v{lanes}f64")
            return builder.call(f, [x, y, z])

        pointers = [builder.bitcast(builder.gep(a.data, [builder.add(builder.mul(ir.Constant(index, t), stride),
                                                                       column)]), row_vector.as_pointer())
                    for t in range(ROWS)]
        parts = [builder.load(p, align=8) for p in pointers]
        while len(parts) > 1:                                  # concatenate pairwise: WIDTH -> ROWS * WIDTH lanes
            width = len(parts[0].type)
            mask = ir.Constant(ir.VectorType(ir.IntType(32), 2 * width), list(range(2 * width)))
            parts = [builder.shuffle_vector(parts[k], parts[k + 1], mask) for k in range(0, len(parts), 2)]
        v = parts[0]
        t = fma(splat(scale_), v, builder.fneg(splat(shift_)))
        t = builder.select(builder.fcmp_ordered("<", t, splat(0.0)), t, splat(0.0))           # min(t, 0)
        x = builder.select(builder.fcmp_ordered(">", t, splat(floor)), t, splat(floor))     # max(t, floor)
        rounded = fma(x, splat(log2e), splat(rounder))
        k = builder.fsub(rounded, splat(rounder))
        minus_k = builder.fneg(k)
        r = fma(minus_k, splat(ln2_lo), fma(minus_k, splat(ln2_hi), x))
        p = splat(taylor[0])
        for c in taylor[1:]:
            p = fma(p, r, splat(c))
        bits = builder.bitcast(rounded, ints)
        power = builder.shl(builder.add(builder.sub(bits, splat(rounder_bits, ints)), splat(1023, ints)),
                            splat(52, ints))
        e = builder.fmul(p, builder.bitcast(power, vector))
        for row, pointer in enumerate(pointers):
            mask = ir.Constant(ir.VectorType(ir.IntType(32), WIDTH), list(range(row * WIDTH, (row + 1) * WIDTH)))
            builder.store(builder.shuffle_vector(e, ir.Constant(vector, ir.Undefined), mask), pointer, align=8)
        return context.get_dummy_value()

    return types.none(rows, i, scale, shift), codegen


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _entries(PT, C, out, r0, r1, i0):
    """out[r, i] for r0 <= r < r1 and i >= i0, each an FMA chain over k in order."""
    K, n = C.shape
    for r in range(r0, r1):
        o = out[r]
        for i in range(i0, n):
            o[i] = 0.0
        for k in range(K):
            p = PT[k, r]
            for i in range(np.uint64(i0), np.uint64(n)):    # unsigned: no wrap-around test, so LLVM vectorises
                o[i] = o[i] + p * C[k, i]


@njit(cache=True, inline="always")
def tile_start(r):
    """The first column of row r kept in the upper part of a symmetric product: r rounded down to a
    multiple of ``COLUMNS`` (whole tiles only; rows r..r+ROWS-1 of one tile share it).

    Parameters
    ----------
    r : int
        A row, r >= 0.

    Returns
    -------
    int
        r - (r mod COLUMNS).

    Examples
    --------
    >>> from meanfield.solvers.kernels.tiles import COLUMNS, tile_start
    >>> tile_start(COLUMNS - 1), tile_start(COLUMNS + 1) == COLUMNS
    (0, True)
    """
    return r - r % COLUMNS


@njit(cache=True, fastmath=FASTMATH)
def tile_product(PT: np.ndarray, C: np.ndarray, out: np.ndarray, upper: bool) -> None:
    r"""The matrix product out = PTᵀ C, each entry summed in the order of k with fused
    multiply-adds, by register tiles of ``ROWS`` × ``COLUMNS``:

    .. math::

        \mathrm{out}_{ri} = \sum_{k=0}^{K-1} PT_{kr}\, C_{ki}.

    Parameters
    ----------
    PT : numpy.ndarray, shape (K, R)
        The left factor, transposed (any strides).
    C : numpy.ndarray, shape (K, n)
        Contiguous rows.
    out : numpy.ndarray, shape (R, n)
        Written in place (contiguous rows).
    upper : bool
        R = n and the product symmetric: only the entries i >= ``tile_start(r)`` of each row r are
        written (the rest is the mirror image).

    Returns
    -------
    None
        The product is in ``out``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.tiles import tile_product
    >>> PT, C = np.arange(6.0).reshape(2, 3), np.arange(18.0).reshape(2, 9)
    >>> out = np.empty((3, 9))
    >>> tile_product(PT, C, out, False)
    >>> bool(np.array_equal(out, PT.T @ C))
    True
    """
    K, R = PT.shape
    n = C.shape[1]
    full = n - n % COLUMNS
    for r in range(0, R - R % ROWS, ROWS):
        for i in range(tile_start(r) if upper else 0, full, COLUMNS):
            _tile(PT, C, out, r, i)
        _entries(PT, C, out, r, r + ROWS, full)
    r = R - R % ROWS
    _edge(PT, C, out, r, R - r, tile_start(r) if upper else 0, full)
    _entries(PT, C, out, r, R, full)
