"""The paper's richer models (§1.7, §5 items 7–9): multi-head, time-dependent weights,
feed-forward terms and noise, in the particle solver."""
import math

import numpy as np
import pytest

import meanfield as mf
from meanfield.models import FeedForward, MultiHead, model_from_dict
from meanfield.solvers import particles
from meanfield.solvers.noise import mean_contraction


def test_identical_heads_equal_one_head_with_scaled_values():
    x = mf.uniform_sphere(40, 3, seed=0)
    for cls in (mf.SA, mf.USA):
        two = particles.velocity(MultiHead([cls(2.0), cls(2.0)]), x)
        one = particles.velocity(cls(2.0, V=2.0), x)
        assert np.allclose(two, one, rtol=0, atol=1e-14)


def test_multihead_is_the_sum_of_its_heads_with_general_weights():
    rng = np.random.default_rng(1)
    heads = [mf.SA(1.5, Q=rng.normal(size=(4, 4)), V=rng.normal(size=(4, 4))), mf.USA(0.7, K=-2.0)]
    x = mf.uniform_sphere(30, 4, seed=2)
    total = particles.velocity(MultiHead(heads), x)
    assert np.allclose(total, sum(particles.velocity(h, x) for h in heads), rtol=0, atol=1e-14)


def test_multihead_batched_solve_equals_separate_solves():
    model = MultiHead([mf.SA(1.0), mf.SA(4.0, V=-0.5)])
    x0 = np.stack([mf.uniform_sphere(12, 3, seed=s) for s in range(3)])
    t = np.linspace(0, 2, 5)
    batch = particles.solve(model, x0, t, dt=0.05)
    for b in range(3):
        one = particles.solve(model, x0[b], t, dt=0.05)
        assert np.allclose(batch.x[:, b], one.x, rtol=0, atol=1e-13)


def test_usa_heads_ascend_the_summed_energy():
    """All-USA isotropic heads: the field is the Wasserstein gradient of Σ_h ±E_{β_h}."""
    model = MultiHead([mf.USA(1.0), mf.USA(3.0), mf.USA(0.5, V=-1.0)])
    sol = particles.solve(model, mf.uniform_sphere(24, 3, seed=3), np.linspace(0, 4, 41), dt=0.02)
    x = sol.x[-1]
    expected = mf.energy(x, 1.0) + mf.energy(x, 3.0) - mf.energy(x, 0.5)
    assert sol.energy[-1] == pytest.approx(expected, rel=1e-12)
    assert np.all(np.diff(sol.energy) >= -1e-13 * np.abs(sol.energy[1:]))
    assert sol.energy[-1] > sol.energy[0] + 1e-3


def test_energy_is_nan_where_there_is_no_gradient_structure():
    sol = particles.solve(MultiHead([mf.SA(1.0), mf.SA(2.0)]), mf.uniform_sphere(8, 3, seed=4), [0, 0.5])
    assert np.all(np.isnan(sol.energy))


def test_multihead_round_trips_through_its_description():
    ff = FeedForward(np.eye(3)[:, :2], np.ones((2, 3)), np.zeros(2), activation="gelu")
    model = MultiHead([mf.SA(1.0, V=-1.0), mf.USA(2.0, Q=np.diag([1.0, 2.0, 3.0]))], feedforward=ff)
    assert model_from_dict(model.to_dict()) == model


@pytest.mark.parametrize("activation, sigma", [
    ("relu", lambda z: np.maximum(z, 0)),
    ("tanh", np.tanh),
    ("gelu", np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))),
])
def test_feedforward_field_is_the_projected_perceptron(activation, sigma):
    rng = np.random.default_rng(5)
    W, A, b = rng.normal(size=(3, 6)), rng.normal(size=(6, 3)), rng.normal(size=6)
    x = mf.uniform_sphere(10, 3, seed=6)
    v = particles.velocity(MultiHead([mf.SA(1.0, V=0.0)], FeedForward(W, A, b, activation)), x)
    raw = sigma(x @ A.T + b) @ W.T
    expected = raw - np.sum(raw * x, axis=1, keepdims=True) * x
    assert np.allclose(v, expected, rtol=0, atol=1e-13)
    assert np.allclose(np.sum(v * x, axis=1), 0, atol=1e-14)


def test_feedforward_shape_mismatch_is_named():
    with pytest.raises(ValueError, match="FeedForward needs W"):
        FeedForward(np.ones((3, 2)), np.ones((3, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="activation"):
        FeedForward(np.ones((3, 2)), np.ones((2, 3)), np.zeros(2), activation="swish")


def _time_dependent_model():
    return mf.SA(beta=lambda t: 2.0 + np.sin(t), V=lambda t: 1.0 + 0.5 * np.cos(2 * t),
                 Q=lambda t: np.array([[1.0, 0.3 * t, 0], [0, 1, 0], [0, 0, 1]]))


def test_time_dependent_weights_are_evaluated_at_the_stage_times_rk4_order_4():
    model = _time_dependent_model()
    x0 = mf.uniform_sphere(10, 3, seed=7)
    t = [0.0, 1.0]
    errors = []
    ref = particles.solve(model, x0, t, dt=1 / 256).x[-1]
    for dt in (1 / 8, 1 / 16, 1 / 32):
        errors.append(np.abs(particles.solve(model, x0, t, dt=dt).x[-1] - ref).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 3.7), orders


def test_time_dependent_adaptive_matches_rk4():
    model = _time_dependent_model()
    x0 = mf.uniform_sphere(10, 3, seed=8)
    a = particles.solve(model, x0, [0, 1.5], method="adaptive", rtol=1e-10, atol=1e-12).x[-1]
    b = particles.solve(model, x0, [0, 1.5], dt=1 / 128).x[-1]
    assert np.abs(a - b).max() < 1e-8


def test_constant_callables_reproduce_the_constant_model_exactly():
    x0 = mf.uniform_sphere(10, 3, seed=9)
    a = particles.solve(mf.SA(beta=lambda t: 3.0), x0, [0, 1], dt=0.05).x
    b = particles.solve(mf.SA(3.0), x0, [0, 1], dt=0.05, engine="kernels").x   # the same summation path
    assert np.array_equal(a, b)


def test_time_dependent_models_are_refused_where_unsupported():
    model = mf.SA(beta=lambda t: 1 + t)
    with pytest.raises(ValueError, match="depend on t"):
        mf.growth_rate(model, 3, 2)
    assert model.at(1.0) == mf.SA(2.0)


# --- noise ------------------------------------------------------------------------------------

def _free_tokens(n_systems, d):
    """n_systems single tokens at the north pole: no interaction, only Brownian motion."""
    x0 = np.zeros((n_systems, 1, d))
    x0[..., -1] = 1.0
    return x0


@pytest.mark.parametrize("d", [2, 3])
def test_first_moment_decays_as_brownian_motion_within_three_standard_errors(d):
    sigma, dt, T, n = 0.8, 2e-3, 0.5, 20000
    sol = particles.solve(mf.SA(0.0), _free_tokens(n, d), [0, T], method="euler", dt=dt,
                          noise=sigma, seed=11, energy=False)
    z = sol.x[-1, :, 0, -1]
    se = z.std() / np.sqrt(n)
    exact = np.exp(-(d - 1) * sigma ** 2 / 2 * T)       # generator (σ²/2) Δ_S, D = σ²/2
    assert abs(z.mean() - exact) < 3 * se
    # the scheme's own mean, m(h)^k, agrees too (and differs from the exact decay by O(h))
    assert abs(z.mean() - mean_contraction(sigma, dt, d) ** round(T / dt)) < 3 * se


def test_euler_maruyama_is_weak_order_one():
    sigma, T, d = 1.0, 1.0, 3
    exact = np.exp(-(d - 1) * sigma ** 2 / 2 * T)
    err = [abs(mean_contraction(sigma, h, d) ** round(T / h) - exact) for h in (0.02, 0.01, 0.005)]
    orders = np.log2(np.array(err[:-1]) / np.array(err[1:]))
    assert np.all(np.abs(orders - 1) < 0.1), orders


def test_noise_is_reproducible_and_resumes_exactly(tmp_path):
    x0 = mf.uniform_sphere(16, 3, seed=12)
    kw = dict(method="euler", dt=0.01, noise=0.3, seed=5)
    a = particles.solve(mf.SA(2.0), x0, np.linspace(0, 1, 5), **kw)
    b = particles.solve(mf.SA(2.0), x0, np.linspace(0, 1, 5), **kw)
    assert np.array_equal(a.x, b.x) and a.info["seed"] == 5
    c = particles.solve(mf.SA(2.0), x0, np.linspace(0, 1, 5), checkpoint=tmp_path / "c.npz",
                        checkpoint_every=7, **kw)
    assert np.array_equal(a.x, c.x)
    assert np.allclose(np.linalg.norm(a.x, axis=-1), 1, atol=1e-14)


def test_noise_needs_euler_and_a_valid_amplitude():
    x0 = mf.uniform_sphere(4, 3, seed=0)
    with pytest.raises(ValueError, match="method='euler'"):
        particles.solve(mf.SA(1.0), x0, [0, 1], noise=0.1)
    with pytest.raises(ValueError, match="noise must be >= 0"):
        particles.solve(mf.SA(1.0), x0, [0, 1], method="euler", noise=-0.1)
    with pytest.raises(ValueError, match="seed"):
        particles.solve(mf.SA(1.0), x0, [0, 1], method="euler", noise=0.1, seed=-3)


# --- without layer normalisation --------------------------------------------------------------

def _raw_attention(beta, A, V, x):
    """ẋ_i = Σ_j softmax_j(β <x_i, A x_j>) V x_j, the unrescaled Euclidean dynamics."""
    s = beta * x @ A @ x.T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ x @ V.T


def test_euclidean_rescaled_solution_is_the_raw_dynamics_rescaled():
    from scipy.linalg import expm
    from meanfield.solvers import euclidean
    rng = np.random.default_rng(13)
    V = np.array([[1.0, 0.3], [-0.2, 0.5]])
    Q = np.array([[1.0, 0.2], [0.0, 0.8]])
    model = mf.SA(0.7, Q=Q, V=V)
    x0 = rng.normal(size=(7, 2))
    T, h = 1.0, 1e-3
    x = x0.copy()
    f = lambda y: _raw_attention(0.7, Q.T, V, y)
    for _ in range(int(T / h)):                      # reference: plain RK4 on the raw tokens
        k1 = f(x); k2 = f(x + h / 2 * k1); k3 = f(x + h / 2 * k2); k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    sol = euclidean.solve(model, x0, [0, T], dt=1e-2)
    assert np.allclose(sol.x[-1], x @ expm(-T * V).T, atol=1e-8)
    assert np.allclose(euclidean.tokens(model, T, sol.x[-1]), x, atol=1e-8)


def test_euclidean_identity_values_shrink_the_convex_hull():
    from scipy.spatial import ConvexHull
    from meanfield.solvers import euclidean
    z0 = np.random.default_rng(14).normal(size=(15, 2))
    sol = euclidean.solve(mf.SA(1.0), z0, np.linspace(0, 6, 25), dt=0.02)
    areas = [ConvexHull(z).volume for z in sol.x]
    assert np.all(np.diff(areas) <= 1e-12) and areas[-1] < areas[0]


def test_euclidean_refuses_usa():
    from meanfield.solvers import euclidean
    with pytest.raises(ValueError, match="softmax model SA"):
        euclidean.solve(mf.USA(1.0), np.ones((3, 2)), [0, 1])
