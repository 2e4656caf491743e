"""The BLAS-tiled direct summation (meanfield.solvers.kernels.gemm) against the dense NumPy reference
(solvers/reference.py) and the tiled kernels: fields and log-potentials agree to 1e-12 relative
(SA, USA, weights with zeros, general and scalar Q, K, V, large β, several tiles and blocks,
batches); equal inputs give equal bits whatever the thread count."""
import numba
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import particles, reference
from meanfield.solvers.kernels import direct as kernels, gemm

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log 0 weights in the reference
RNG = np.random.default_rng(5)
D = 20
MODELS = [mf.SA(4.0), mf.USA(2.0), mf.SA(300.0), mf.SA(2.0, Q=1.5, K=0.5, V=-2.0),
          mf.SA(3.0, Q=RNG.normal(size=(D, D)) / 3, K=RNG.normal(size=(D, D)) / 3, V=RNG.normal(size=(D, D))),
          mf.USA(1.0, Q=RNG.normal(size=(D, D)) / 4, V=RNG.normal(size=(D, D)))]
IDS = ["SA", "USA", "SA-large-beta", "scalars", "SA-general", "USA-general"]


def relative(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def kernels_direct(model, x, y, w):
    """``particles._direct`` forced onto ``kernels.attention_field``."""
    A, V = particles._operators(model, x.shape[-1])
    out, log_phi = np.empty(x.shape), np.empty(x.shape[:2])
    kernels.attention_field(x, y, np.ascontiguousarray(np.swapaxes(y, 1, 2)), w, A, V, model.beta,
                            model.normalised, model.attention_scalar is None, model.value_scalar is None,
                            model.causal, out, log_phi)
    return out, log_phi


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_field_and_log_potential_match_reference(model):
    n, m = 45, 300                     # targets: 2 tiles (one padded); sources: 3 blocks (one padded)
    x = mf.uniform_sphere(n, D, seed=1, batch=2)
    y = mf.uniform_sphere(m, D, seed=2, batch=2)
    w = RNG.uniform(0.2, 1.0, (2, m))
    w[:, ::4] = 0.0
    w[1, :140] = 0.0                    # whole blocks without mass
    w /= w.sum(axis=1, keepdims=True)
    out, log_phi = particles._direct(model, x, y, w)
    for b in range(2):
        assert relative(out[b], reference.attention_field(model, x[b], y[b], w[b])) < 1e-12
        assert relative(log_phi[b], reference.log_potential(model, x[b], y[b], w[b])) < 1e-12
    other, other_log_phi = kernels_direct(model, x, y, w)
    assert relative(out, other) < 1e-12 and relative(log_phi, other_log_phi) < 1e-12


@pytest.mark.parametrize("d", [2, 64, 200, gemm.MAX_D])
def test_tiles_fit_one_thread_blas(d):
    R, C = gemm.tiles(d)
    assert R % 8 == 0 and C >= 32 and R * C * d <= gemm.BLAS_MAX_WORK
    x = mf.uniform_sphere(R + 3, d, seed=d)[None]
    v, _ = particles._direct(mf.SA(2.0), x, x, np.full((1, R + 3), 1.0 / (R + 3)))
    assert relative(v[0], reference.attention_field(mf.SA(2.0), x[0])) < 1e-12


def test_used_by_velocity_and_bit_reproducible_across_thread_counts():
    x = mf.uniform_sphere(200, 32, seed=3)
    model = mf.SA(5.0)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = particles.velocity(model, x, summation="direct")
        numba.set_num_threads(before)
        many = particles.velocity(model, x, summation="direct")
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one, many)
    assert relative(many, reference.attention_field(model, x)) < 1e-12
    assert relative(many, kernels_direct(model, x[None], x[None], np.full((1, 200), 1 / 200))[0][0]) < 1e-12


def test_float32_velocity_error_and_checks():
    x = mf.uniform_sphere(300, 64, seed=4)
    exact = particles.velocity(mf.SA(1.0), x)
    single = particles.velocity(mf.SA(1.0), x, dtype="float32")
    assert single.dtype == np.float64 and 1e-9 < relative(single, exact) < 2e-6   # measured 3.7e-7
    with pytest.raises(ValueError, match="d <= 1024"):
        particles.velocity(mf.SA(1.0), mf.uniform_sphere(10, 1030, seed=0), dtype=np.float32)
    with pytest.raises(ValueError, match="direct summation"):
        particles.velocity(mf.SA(1.0), mf.uniform_sphere(10, 3, seed=0), summation="fast", dtype=np.float32)
    with pytest.raises(ValueError, match="float64 or float32"):
        particles.velocity(mf.SA(1.0), x, dtype="float16")
    with pytest.raises(TypeError, match="float64 or float32"):
        particles.velocity(mf.SA(1.0), x, dtype="single-ish")


def test_float32_keeps_the_phase_diagram_statistic():
    """Pair fraction (the paper's phase-diagram statistic) after 100 Euler steps of 32 systems:
    float32 products change it by less than its sampling error (measured: not at all)."""
    from meanfield.clusters import pair_fraction
    x0 = mf.uniform_sphere(32, 16, seed=0, batch=32)
    finals = {}
    for dtype in ("float64", "float32"):
        sol = particles.solve(mf.SA(8.0), x0, [0.0, 10.0], method="euler", dt=0.1, energy=False, dtype=dtype)
        assert sol.info["dtype"] == dtype
        finals[dtype] = sol.x[-1]
    per_system = np.array([pair_fraction(x[None]) for x in finals["float64"]])
    sampling = per_system.std() / np.sqrt(per_system.size)
    assert sampling > 0
    assert abs(pair_fraction(finals["float32"]) - pair_fraction(finals["float64"])) <= sampling
    assert np.max(np.abs(finals["float32"] - finals["float64"])) < 1e-4
