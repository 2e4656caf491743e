"""The batched small-system engine (meanfield.solvers.small) against the dense NumPy reference
(solvers/reference.py) and the tiled kernels: fields, log-potentials and whole Euler / RK4
trajectories agree to 1e-12 relative in float64; ``solve`` picks the engine automatically;
``observe`` streams per-time statistics."""
import math

import numpy as np
import pytest
from numba import njit

import meanfield as mf
from meanfield.geometry import normalise
from meanfield.solvers import particles, reference, small, stepping
from meanfield.solvers.kernels import tiles
from meanfield.solvers.kernels.direct import FASTMATH

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log 0 weights in the reference
RNG = np.random.default_rng(11)
D = 5
MODELS = [mf.SA(4.0), mf.USA(2.0), mf.SA(1.5, V=-1.0), mf.SA(2.0, Q=1.5, K=0.5, V=-2.0),
          mf.SA(3.0, Q=RNG.normal(size=(D, D)) / 2, K=RNG.normal(size=(D, D)) / 2, V=RNG.normal(size=(D, D))),
          mf.USA(1.0, Q=RNG.normal(size=(D, D)) / 2, V=RNG.normal(size=(D, D)))]
IDS = ["SA", "USA", "repulsive", "scalars", "SA-general", "USA-general"]


def relative(a, b):
    """max |a - b| / max |b| (a single token has a zero field: then absolute, scale 1e-3)."""
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-3)


def weights(B, n, zeros=False):
    w = RNG.uniform(0.2, 1.0, (B, n))
    if zeros:
        w[:, ::3] = 0.0
    return w / w.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("model", MODELS, ids=IDS)
@pytest.mark.parametrize("n", [1, 7, 32])
def test_field_and_log_potential_match_reference(model, n):
    d = D
    x = mf.uniform_sphere(n, d, seed=n, batch=3)
    w = weights(3, n, zeros=n > 3)
    out, log_phi = particles._direct(model, x, x, w)
    for b in range(3):
        assert relative(out[b], reference.attention_field(model, x[b], x[b], w[b])) < 1e-12
        assert relative(log_phi[b], reference.log_potential(model, x[b], x[b], w[b])) < 1e-12


@pytest.mark.parametrize("d", [2, 3, 33, 130])
def test_dimensions_and_agreement_with_tiled_kernel(d):
    model = mf.SA(5.0)
    x = mf.uniform_sphere(32, d, seed=d, batch=4)
    w = np.full((4, 32), 1 / 32)
    ours, lp = particles._direct(model, x, x, w)
    tiled, lp_tiled = particles._direct(model, x, x.copy(), w)       # sources not the targets: tiled kernel
    assert relative(ours, tiled) < 1e-12 and relative(lp, lp_tiled) < 1e-12
    assert relative(ours[0], reference.attention_field(model, x[0])) < 1e-12


def test_large_beta_stays_finite():
    x = mf.uniform_sphere(32, 3, seed=0, batch=2)
    v = particles.velocity(mf.SA(800.0), x)
    assert np.all(np.isfinite(v))
    lp = particles._direct(mf.SA(800.0), x, x, np.full((2, 32), 1 / 32))[1]
    assert relative(lp[1], reference.log_potential(mf.SA(800.0), x[1], x[1], np.full(32, 1 / 32))) < 1e-12


def reference_trajectory(model, x0, t, method, dt, w=None):
    """The scheme of ``solve`` with the dense NumPy field, through ``stepping.integrate``."""
    def rhs(x):
        xs = normalise(x)
        return np.stack([reference.attention_field(model, xs[b], xs[b], None if w is None else w[b])
                         for b in range(x.shape[0])])
    return stepping.integrate(rhs, x0, t, scheme=method, dt=dt, project=normalise)[0]


@pytest.mark.parametrize("method", ["euler", "rk4"])
@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_trajectories_match_reference(model, method):
    x0 = mf.uniform_sphere(9, D, seed=4, batch=3)
    w = weights(3, 9)
    t = np.linspace(0.0, 1.0, 3)
    sol = particles.solve(model, x0, t, method=method, dt=0.01, weights=w)   # inside every model's stability bound
    assert sol.info["engine"] == "small" and sol.info["nsteps"] == 100
    assert sol.info["vector_unit"] == tiles.CHOICE
    assert relative(sol.x, reference_trajectory(model, x0, t, method, 0.01, w)) < 1e-12


@pytest.mark.parametrize("method", ["euler", "rk4"])
@pytest.mark.parametrize("model", MODELS[:4], ids=IDS[:4])
def test_trajectories_in_the_span_of_the_tokens_match_reference(model, method):
    """d >= 2n with V = v I: ``advance`` runs in the coordinates of span{x_1..x_n}, also when
    tokens coincide (rank < n)."""
    x0 = mf.uniform_sphere(5, 12, seed=6, batch=2)
    x0[1, 3] = x0[1, 0]
    assert small.stays_in_span(5, 12, *particles._small_arguments(model, 12))
    t = np.array([0.0, 0.5])
    sol = particles.solve(model, x0, t, method=method, dt=0.01)
    assert relative(sol.x, reference_trajectory(model, x0, t, method, 0.01)) < 1e-12
    assert not small.stays_in_span(2, D, *particles._small_arguments(MODELS[4], D))     # general A, V


@pytest.mark.parametrize("beta", [0.49 * small.SYMMETRIC_MAX_EXP, 0.51 * small.SYMMETRIC_MAX_EXP])
def test_symmetric_and_shifted_kernels_agree_with_reference(beta):
    """Below 2 β |a| = SYMMETRIC_MAX_EXP one symmetric kernel e^{β <x_i, x_j> - β} (half the scores),
    above it the per-target shifts: both give the reference's field and log Φ."""
    model = mf.SA(beta)
    assert small.symmetric(beta, 1.0, False, False) == (beta < small.SYMMETRIC_MAX_EXP / 2)
    x = mf.uniform_sphere(40, 3, seed=1, batch=2)
    x[:, 1] = x[:, 0] * np.cos(0.01) + np.cross(x[:, 0], x[:, 2]) / np.linalg.norm(np.cross(x[:, 0], x[:, 2]), axis=1,
                                                                                 keepdims=True) * np.sin(0.01)
    x = normalise(x)
    w = np.full((2, 40), 1 / 40)
    out, log_phi = particles._direct(model, x, x, w)
    for b in range(2):
        assert relative(out[b], reference.attention_field(model, x[b], x[b], w[b])) < 1e-12
        assert relative(log_phi[b], reference.log_potential(model, x[b], x[b], w[b])) < 1e-12


def test_engines_agree_and_auto_choice():
    x0 = mf.uniform_sphere(20, 4, seed=5, batch=6)
    t = np.linspace(0.0, 2.0, 5)
    fused = particles.solve(mf.SA(4.0), x0, t, method="euler", dt=0.1)
    tiled = particles.solve(mf.SA(4.0), x0, t, method="euler", dt=0.1, engine="kernels")
    assert fused.info["engine"] == "small" and tiled.info["engine"] == "kernels"
    assert relative(fused.x, tiled.x) < 1e-12 and relative(fused.energy, tiled.energy) < 1e-12
    big = mf.uniform_sphere(small.SMALL_N + 1, 3, seed=0)
    assert particles.solve(mf.SA(1.0), big, [0, 0.1]).info["engine"] == "kernels"
    assert particles.solve(mf.SA(1.0), x0, [0, 0.1], method="adaptive").info["engine"] == "kernels"
    with pytest.raises(ValueError, match="engine='small'"):
        particles.solve(mf.SA(1.0), big, [0, 0.1], engine="small")
    with pytest.raises(ValueError, match="engine"):
        particles.solve(mf.SA(1.0), x0, [0, 0.1], engine="gpu")


def test_observe_streams_statistics():
    x0 = mf.uniform_sphere(16, 3, seed=8, batch=5)
    t = np.linspace(0.0, 3.0, 7)

    def order(x):                       # |mean of the tokens| per system, (B,)
        return np.linalg.norm(x.mean(axis=-2), axis=-1)
    full = particles.solve(mf.SA(2.0), x0, t, method="euler", dt=0.1)
    streamed = particles.solve(mf.SA(2.0), x0, t, method="euler", dt=0.1, observe=order)
    assert streamed.x is None and streamed.observed.shape == (7, 5)
    assert np.array_equal(streamed.observed, np.stack([order(x) for x in full.x]))
    assert np.array_equal(streamed.energy, full.energy) and np.array_equal(streamed.final, full.x[-1])
    single = particles.solve(mf.SA(2.0), x0[0], t, method="rk4", observe=lambda x: x[:2], energy=False)
    assert single.observed.shape == (7, 2, 3) and single.energy is None and single.last.shape == (16, 3)


def test_observe_resumes_from_checkpoint(tmp_path):
    x0 = mf.uniform_sphere(8, 3, seed=9, batch=2)
    t = np.linspace(0.0, 2.0, 5)
    stat = lambda x: x[..., 0].max(axis=-1)     # noqa: E731
    full = particles.solve(mf.SA(2.0), x0, t, dt=0.05, observe=stat)
    path = tmp_path / "obs.npz"
    partial = particles.solve(mf.SA(2.0), x0, t[:1 + 2], dt=0.05, observe=stat)
    assert np.array_equal(partial.observed, full.observed[:3])
    first = particles.solve(mf.SA(2.0), x0, t, dt=0.05, observe=stat, checkpoint=path, checkpoint_every=7)
    again = particles.solve(mf.SA(2.0), x0, t, dt=0.05, observe=stat, checkpoint=path, resume=True)
    assert np.array_equal(first.observed, full.observed) and np.array_equal(again.observed, full.observed)
    assert np.array_equal(again.last, full.last)


@pytest.mark.parametrize("n, d", [(2, 20000), (4, 3000)])
def test_scalar_operators_take_order_n_d_memory(n, d):
    """Identity and scalar Q, K, V never form a d × d matrix (20000² doubles would be 3.2 GB)."""
    import tracemalloc
    x0 = mf.uniform_sphere(n, d, seed=1)
    for model in (mf.SA(1.0), mf.USA(0.5, Q=2.0, V=-1.0)):
        tracemalloc.start()
        sol = particles.solve(model, x0, [0.0, 1.0], dt=0.1)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 100 * n * d * 8 and sol.info["nsteps"] == 10
        x = sol.final
        s = model.beta * model.attention_scalar * (x @ x.T)         # the field with scalars, O(n² d)
        e = np.exp(s - s.max(axis=1, keepdims=True)) if model.normalised else np.exp(s) / n
        g = model.value_scalar * (e @ x) / (e.sum(axis=1, keepdims=True) if model.normalised else 1.0)
        assert relative(particles.velocity(model, x), g - np.sum(g * x, axis=1, keepdims=True) * x) < 1e-12


def test_noise_and_multihead_run_on_the_tiled_engine():
    x0 = mf.uniform_sphere(8, 3, seed=0)
    noisy = particles.solve(mf.SA(1.0), x0, [0, 0.2], method="euler", dt=0.1, noise=0.1, seed=0)
    heads = particles.solve(mf.MultiHead([mf.SA(1.0), mf.SA(2.0)]), x0, [0, 0.2], dt=0.1)
    assert noisy.info["engine"] == heads.info["engine"] == "kernels"
    with pytest.raises(ValueError, match="engine='small'"):
        particles.solve(mf.SA(1.0), x0, [0, 0.2], method="euler", dt=0.1, noise=0.1, seed=0, engine="small")


@njit(fastmath=FASTMATH)
def _unit_columns(yT):
    """yT[:, i] / |yT[:, i]|: the squares summed over the rows in order (fused multiply-adds), 1/sqrt, product."""
    d, n = yT.shape
    out = np.empty_like(yT)
    for i in range(n):
        acc = 0.0
        for c in range(d):
            acc = acc + yT[c, i] * yT[c, i]
        inverse = 1.0 / math.sqrt(acc)
        for c in range(d):
            out[c, i] = yT[c, i] * inverse
    return out


@njit(fastmath=FASTMATH)
def _step(yT, XT, h):
    """yT + h XT, one fused multiply-add per entry."""
    return yT + h * XT


@pytest.mark.parametrize("model", [MODELS[0], MODELS[1], MODELS[3], MODELS[5], mf.SA(400.0)],
                         ids=["SA", "USA", "scalars", "USA-general", "shifted"])
@pytest.mark.parametrize("n", [5, 32, 37])
def test_euler_steps_equal_plain_loops_bit_for_bit(model, n):
    """``advance``'s fused Euler tail (one register kernel per block of columns, the next step's weighted
    tokens written with the stage) gives the bits of the plain scheme y <- N(y + h X(N(y))) with X from
    ``field`` and N summed in order, step after step."""
    B, d, h = 3, D, 0.05
    x = RNG.normal(size=(B, n, d))
    w = weights(B, n)
    args = particles._small_arguments(model, d)
    y = np.swapaxes(x, 1, 2).copy()
    for count in (1, 2, 3):
        stage = np.stack([_unit_columns(y[b]) for b in range(B)])
        X, log_phi = np.empty((B, n, d)), np.empty((B, n))
        small.field(np.ascontiguousarray(np.swapaxes(stage, 1, 2)), w, *args, X, log_phi)
        y = np.stack([_unit_columns(_step(y[b], np.ascontiguousarray(X[b].T), h)) for b in range(B)])
        out = np.empty_like(x)
        small.advance(x, w, h, count, False, *args, out)
        assert np.array_equal(out, np.swapaxes(y, 1, 2)), count


def test_advance_takes_weights_of_any_strides():
    """The Euler tail reads whole vectors of weights: a strided view gives the bits of its copy."""
    x = RNG.normal(size=(3, 9, D))
    w = weights(3, 18)[:, ::2]
    args = particles._small_arguments(mf.SA(2.0), D)
    out, copied = np.empty_like(x), np.empty_like(x)
    small.advance(x, w, 0.05, 3, False, *args, out)
    small.advance(x, np.ascontiguousarray(w), 0.05, 3, False, *args, copied)
    assert np.array_equal(out, copied)


@pytest.mark.parametrize("model", [MODELS[0], MODELS[4]], ids=["SA", "SA-general"])
def test_same_bits_on_any_thread_count(model):
    """The threads pull the systems from a shared counter, so which thread computes a system
    changes from run to run; each system is computed alone, so the bits do not."""
    import numba
    x = normalise(RNG.normal(size=(37, 9, D)))
    w = weights(37, 9, zeros=True)
    args = particles._small_arguments(model, D)
    runs = []
    before = numba.get_num_threads()
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS, 1):
            numba.set_num_threads(threads)
            out, field, log_phi = np.empty_like(x), np.empty_like(x), np.empty((37, 9))
            small.advance(x, w, 0.05, 4, False, *args, out)
            small.field(x, w, *args, field, log_phi)
            runs.append((out, field, log_phi))
    finally:
        numba.set_num_threads(before)
    for run in runs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(run, runs[0]))
