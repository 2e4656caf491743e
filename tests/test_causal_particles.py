"""Causal attention (``SA(..., causal=True)``, ``USA(..., causal=True)``) on the particle engines:
fields against the dense masked NumPy reference to 1e-12 (small, gemm, kernels, angle kernel),
trajectories of every engine and scheme, prefix consistency (the first k tokens of a causal run
are a causal run of k tokens: the 1/i normalisation of USA), token 1 stationary for V = I,
energies NaN with the reason, refusals (fast summation, density solvers), model round trips."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import circle, particles, reference

RNG = np.random.default_rng(26)
D = 5
MODELS = [mf.SA(4.0, causal=True), mf.USA(2.0, causal=True), mf.SA(1.5, V=-1.0, causal=True),
          mf.SA(3.0, Q=RNG.normal(size=(D, D)) / 2, K=RNG.normal(size=(D, D)) / 2, V=RNG.normal(size=(D, D)),
                causal=True),
          mf.USA(1.0, Q=RNG.normal(size=(D, D)) / 2, V=-2.0, causal=True)]
IDS = ["SA", "USA", "repulsive", "SA-general", "USA-general"]


def relative(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-3)


def engines(model, x, w):
    """The field by each direct engine: small (n <= 128), gemm (sources a copy), kernels."""
    A, V = particles._operators(model, x.shape[-1])
    out = {"gemm": particles._direct(model, x, x.copy(), w)[0],
           "kernels": particles._direct_kernels(model, x, x.copy(), w, A, V)[0]}
    if x.shape[1] <= 128:
        out["small"] = particles._direct(model, x, x, w)[0]
    return out


@pytest.mark.parametrize("model", MODELS, ids=IDS)
@pytest.mark.parametrize("n", [1, 9, 45, 300])
def test_every_engine_matches_masked_reference(model, n):
    x = mf.uniform_sphere(n, D, seed=n, batch=2)
    w = RNG.uniform(0.2, 1.0, (2, n))
    w /= w.sum(axis=1, keepdims=True)
    for name, v in engines(model, x, w).items():
        for b in range(2):
            assert relative(v[b], reference.attention_field(model, x[b], x[b], w[b])) < 1e-12, name


def test_mask_changes_the_field_and_angle_kernel_matches():
    theta = RNG.uniform(0, 2 * np.pi, 40)
    for model in (mf.SA(3.0, causal=True), mf.USA(2.0, V=-1.0, causal=True)):
        v = particles.angle_velocity(model, theta, summation="direct")
        assert relative(v, reference.circle_angle_field(model, theta)) < 1e-12
        full = particles.angle_velocity(type(model)(model.beta, V=model.V), theta)
        assert relative(v, full) > 1e-2


@pytest.mark.parametrize("method", ["rk4", "euler"])
def test_engines_agree_along_trajectories(method):
    model = MODELS[3]
    x0 = mf.uniform_sphere(40, D, seed=3, batch=2)
    t = np.linspace(0, 1.0, 3)
    runs = [particles.solve(model, x0, t, method=method, dt=0.01, engine=e) for e in ("small", "kernels")]
    assert runs[0].info["engine"] == "small" and runs[1].info["engine"] == "kernels"
    assert np.max(np.abs(runs[0].x - runs[1].x)) < 1e-12
    # against a NumPy Euler / RK4 of the reference field
    y = x0[0].copy()
    f = lambda z: reference.attention_field(model, mf.normalise(z))   # noqa: E731
    for _ in range(100):
        if method == "euler":
            y = y + 0.01 * f(y)
        else:
            k1 = f(y)
            k2 = f(y + 0.005 * k1)
            k3 = f(y + 0.005 * k2)
            k4 = f(y + 0.01 * k3)
            y = y + 0.01 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        y = mf.normalise(y)
    assert np.max(np.abs(runs[0].x[-1, 0] - y)) < 1e-12


def test_adaptive_noise_and_weights():
    model = mf.USA(1.0, causal=True)
    x0 = mf.uniform_sphere(30, 3, seed=4)
    t = np.linspace(0, 1.0, 3)
    fixed = particles.solve(model, x0, t, dt=0.005)
    adaptive = particles.solve(model, x0, t, method="adaptive", rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(fixed.x[-1] - adaptive.x[-1])) < 1e-8
    noisy = [particles.solve(model, x0, t, method="euler", dt=0.01, noise=0.3, seed=5) for _ in range(2)]
    assert np.array_equal(noisy[0].x, noisy[1].x) and np.max(np.abs(noisy[0].x[-1] - fixed.x[-1])) > 1e-2
    with pytest.raises(ValueError, match="w_1 > 0"):
        particles.solve(model, x0, t, weights=np.r_[0.0, np.ones(29)])


def test_prefix_consistency_and_token_one_fixed():
    """Token i feels tokens j <= i only, so the first k tokens of a causal run do not see the others:
    for SA and for USA with the 1/i normalisation they are the causal run of those k tokens.  With
    V = I token 1 sees only itself and never moves (any Q, K)."""
    x0 = mf.uniform_sphere(50, 4, seed=6)
    t = np.linspace(0, 3.0, 4)
    Q = RNG.normal(size=(4, 4)) / 2
    for model in (mf.SA(5.0, Q=Q, causal=True), mf.USA(2.0, Q=Q, causal=True)):
        whole = particles.solve(model, x0, t)
        part = particles.solve(model, x0[:20], t)
        assert np.max(np.abs(whole.x[:, :20] - part.x)) < 1e-12
        assert np.max(np.abs(whole.x[:, 0] - x0[0])) < 1e-14
        assert np.max(np.abs(whole.x[-1, 1:] - x0[1:])) > 1e-2


def test_energy_not_applicable_and_refusals():
    model = mf.SA(2.0, causal=True)
    x0 = mf.uniform_sphere(10, 2, seed=1)
    sol = particles.solve(model, x0, [0, 0.5])
    assert np.all(np.isnan(sol.energy)) and "not a gradient flow" in sol.info["energy"]
    observed = particles.solve(model, x0, [0, 0.5], observe=lambda x: x[..., 0])
    assert np.all(np.isnan(observed.energy)) and "not a gradient flow" in observed.info["energy"]
    with pytest.raises(ValueError, match="no causal mask"):
        particles.velocity(model, x0, summation="fast")
    assert particles.resolve_summation(model, 2, 10 ** 5, 10 ** 5) == "direct"
    with pytest.raises(ValueError, match="causal"):
        circle.solve(model, np.ones(64), [0, 1])
    with pytest.raises(ValueError, match="causal"):
        circle.velocity(mf.MultiHead([mf.SA(1.0), model]), np.ones(64))


def test_multihead_of_causal_heads_sums_the_heads():
    heads = [mf.SA(2.0, causal=True), mf.USA(1.0, V=-1.0)]
    x = mf.uniform_sphere(20, 3, seed=2)
    v = particles.velocity(mf.MultiHead(heads), x)
    assert relative(v, sum(reference.attention_field(h, x) for h in heads)) < 1e-12
    fast = particles.velocity(mf.MultiHead(heads), x, summation="fast")     # fast where it applies: not causal
    assert relative(fast, v) < 1e-9


def test_model_description_round_trip_and_validation():
    model = mf.USA(2.0, Q=np.eye(3) * 2, causal=True)
    assert repr(model).endswith("causal=True)") and "causal" not in repr(mf.USA(2.0))
    spec = model.to_dict()
    assert spec["causal"] is True and "causal" not in mf.USA(2.0).to_dict()
    assert mf.model_from_dict(spec) == model and model != mf.USA(2.0, Q=np.eye(3) * 2)
    assert model.with_beta(3.0).causal and mf.SA(lambda t: 1 + t, causal=True).at(1.0) == mf.SA(2.0, causal=True)
    with pytest.raises(TypeError, match="causal"):
        mf.SA(1.0, causal="yes")


def test_single_precision_products_keep_the_mask():
    model = mf.SA(3.0, causal=True)
    x = mf.uniform_sphere(200, 4, seed=9)
    v = particles.velocity(model, x, dtype=np.float32)
    assert relative(v, reference.attention_field(model, x)) < 1e-5
