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
                                     (65, 36, 2 * tiles.COLUMNS + 3), (0, 5, 9)])
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


@pytest.mark.parametrize("n", [5, 32, 37])
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
