"""The register-tiled products (meanfield.solvers.kernels.tiles): PTᵀ C to round-off against
NumPy, to the bit against plain in-order FMA loops (the same chains), whole tiles and remainders
alike, float64 and float32; the upper part of symmetric products; the vector-unit choice."""
import numpy as np
import pytest
from numba import njit

from meanfield.solvers.kernels import tiles
from meanfield.solvers.kernels.direct import FASTMATH

RNG = np.random.default_rng(3)


@njit(fastmath=FASTMATH)
def in_order(PT, C):
    """out[r, i] = sum_k PT[k, r] C[k, i], one scalar multiply-add (fused: "contract") per k, in order."""
    K, R = PT.shape
    out = np.empty((R, C.shape[1]), C.dtype)
    for r in range(R):
        for i in range(C.shape[1]):
            acc = C.dtype.type(0.0)
            for k in range(K):
                acc = acc + PT[k, r] * C[k, i]
            out[r, i] = acc
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K, R, n", [(32, 32, 32), (32, 33, 32), (3, 7, 13), (1, 4, tiles.COLUMNS),
                                     (65, 36, 2 * tiles.COLUMNS + 3), (0, 5, 9),
                                     # the last R mod 4 rows: wide, COLUMNS-wide and loop parts
                                     (5, 6, 3 * tiles.COLUMNS + 5), (7, 5, 5 * tiles.COLUMNS + 1),
                                     (4, 2, 2 * tiles.COLUMNS), (3, 1, 4 * tiles.COLUMNS), (9, 3, 13)])
def test_product_equals_in_order_loops_bit_for_bit(K, R, n, dtype):
    PT, C = RNG.normal(size=(K, R)).astype(dtype), RNG.normal(size=(K, n)).astype(dtype)
    out = np.full((R, n), np.nan, dtype)
    tiles.tile_product(PT, C, out, False)
    tol = 1e-13 if dtype == np.float64 else 1e-5
    assert np.allclose(out, PT.T.astype(float) @ C.astype(float), rtol=tol, atol=tol)
    assert np.array_equal(out, in_order(PT, C))


def test_left_factor_of_any_strides():
    P, C = RNG.normal(size=(9, 6)), RNG.normal(size=(6, 17))
    out = np.empty((9, 17))
    tiles.tile_product(P.T, C, out, False)                 # a transposed view: strided broadcasts
    assert np.allclose(out, P @ C, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("n", [5, 32, 34, 37, 39])
def test_upper_part_of_symmetric_product(n):
    xT = RNG.normal(size=(4, n))
    out = np.full((n, n), np.nan)
    tiles.tile_product(xT, xT, out, True)
    gram = xT.T @ xT
    for r in range(n):
        lo = tiles.tile_start(r)
        assert np.allclose(out[r, lo:], gram[r, lo:], rtol=1e-13, atol=1e-13)
        assert np.all(np.isnan(out[r, :lo]))               # the lower part is left alone


def test_vector_unit_is_the_widest_present():
    assert tiles.vector_unit("+sse2,+avx,+avx2,+fma,+avx512f") == ("avx512", 8)
    assert tiles.vector_unit("+sse2,+avx,-avx2") == ("avx", 4)
    assert tiles.COLUMNS == 2 * tiles.WIDTH and tiles.UNIT in tiles.CHOICE


WIDE = """
import sys
import numpy as np
from meanfield.solvers.kernels import tiles
if sys.argv[1] == "wide":
    tiles.WIDTH, tiles.COLUMNS = 8, 16      # AVX-512's tiles (vectors LLVM splits where the unit is narrower)
from meanfield.solvers import small
x = np.random.default_rng(0).normal(size=(8, 37, 6))
x /= np.linalg.norm(x, axis=-1, keepdims=True)
one, out = np.ones((1, 1)), np.empty_like(x)
small.advance(x, np.full((8, 37), 1 / 37), 0.1, 5, False, 4.0, one, 1.0, one, 1.0, True, False, False, False, out)
np.save(sys.argv[2], out)
"""


def test_tile_width_does_not_change_the_bits(tmp_path):
    """A run with AVX-512's 4 × 16 tiles equals one with the 4 × 8 tiles to the bit (the same FMA
    chains), so a checkpoint resumes on a machine of another width; each in a fresh process, the
    wide one with a Numba cache of its own (the width is compiled in)."""
    import os
    import subprocess
    import sys
    runs = []
    for width in ("wide", "narrow"):
        env = dict(os.environ, NUMBA_NUM_THREADS="1")
        if width == "wide":
            env["NUMBA_CACHE_DIR"] = str(tmp_path / width)
        subprocess.run([sys.executable, "-c", WIDE, width, str(tmp_path / f"{width}.npy")], env=env, check=True)
        runs.append(np.load(tmp_path / f"{width}.npy"))
    assert np.array_equal(runs[0], runs[1])


def test_exp_tile_repeats_exp_nonpositive_bit_for_bit():
    """The interleaved exponentials of a tile equal ``direct.exp_nonpositive`` to the bit, from 0 down
    to the underflow end (-708 and below gives e^-708, -inf too; no NaN), within a few ulp of np.exp
    (2.5 ulp measured: exp_nonpositive's own error)."""
    from numba import njit

    from meanfield.solvers.kernels.direct import FASTMATH, exp_nonpositive

    @njit(fastmath=FASTMATH)
    def both(a, scale, shift):
        b = a.copy()
        for j in range(0, a.shape[0], tiles.ROWS):
            for i in range(0, a.shape[1], tiles.WIDTH):
                tiles.exp_tile(a[j:j + tiles.ROWS], i, scale, shift)
        for j in range(b.shape[0]):
            for i in range(b.shape[1]):
                b[j, i] = exp_nonpositive(min(scale * b[j, i] - shift, 0.0))
        return b

    special = [0.0, -0.0, -1e-300, -707.9, -708.0, -708.1, -745.0, -1e300, -np.inf, 3.0]
    values = np.concatenate([-RNG.random(60000) * 800, -RNG.random(20000) * 1e-6, special])
    values = np.resize(values, (values.size // (64 * tiles.ROWS) + 1) * 64 * tiles.ROWS).reshape(-1, 64)
    for scale, shift in ((1.0, 0.0), (4.0, 4.0), (-3.0, 2.5)):
        a = values.copy()
        b = both(a, scale, shift)
        assert np.array_equal(a, b) and not np.isnan(a).any()
        t = np.minimum(scale * values - shift, 0.0)
        normal = t >= -708.0
        assert np.max(np.abs(a[normal] / np.exp(t[normal]) - 1)) <= 1e-15
        if not normal.all():                                   # clamped at -708: e^-708 for all of them
            assert np.all(a[~normal] == a[~normal].min()) and 0 < a[~normal].min() < 1e-307
