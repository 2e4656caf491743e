"""The BLAS-tiled direct summation (meanfield.solvers.gemm) against the dense NumPy reference
(solvers/reference.py) and the tiled kernels: fields and log-potentials agree to 1e-12 relative
(SA, USA, weights with zeros, general and scalar Q, K, V, large β, several tiles and blocks,
batches); equal inputs give equal bits whatever the thread count."""
import numba
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import gemm, kernels, particles, reference

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
                            out, log_phi)
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


@pytest.mark.parametrize("d", [gemm.MIN_D, 64, 200, gemm.MAX_D])
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
