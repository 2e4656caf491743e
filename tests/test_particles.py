"""Interacting-particle solver: kernels vs reference, orders, invariants, exact reductions."""
import numpy as np
import pytest

import meanfield as mf
from meanfield import clusters, exact, theory
from meanfield.solvers import particles, reference
from meanfield.solvers.results import ParticleSolution


def random_qkv(d, seed):
    rng = np.random.default_rng(seed)
    return [np.eye(d) + 0.3 * rng.standard_normal((d, d)) for _ in range(3)]


@pytest.mark.parametrize("d", [2, 3, 16])
@pytest.mark.parametrize("Model", [mf.SA, mf.USA])
def test_kernel_matches_numpy_reference(Model, d):
    x = mf.uniform_sphere(300, d, seed=d)
    for model in (Model(beta=1.7), Model(2.5, *random_qkv(d, d))):
        v = mf.velocity(model, x)
        ref = reference.attention_field(model, x)
        assert np.max(np.abs(v - ref)) <= 1e-12 * max(1.0, np.max(np.abs(ref)))


def test_weighted_sources_and_log_potential_match_reference():
    x = mf.uniform_sphere(50, 3, seed=1)
    y = mf.uniform_sphere(70, 3, seed=2)
    w = np.random.default_rng(3).uniform(0, 1, 70)
    for model in (mf.SA(3.0), mf.USA(3.0, V=-1)):
        v, log_phi = particles.attention_field(model, x[None], w[None], sources=y[None])
        assert np.allclose(v[0], reference.attention_field(model, x, y, w), rtol=0, atol=1e-12)
        assert np.allclose(log_phi[0], reference.log_potential(model, x, y, w), rtol=1e-13, atol=0)


def test_large_beta_is_finite_and_matches_log_space_reference():
    x = mf.uniform_sphere(64, 3, seed=4)
    v = mf.velocity(mf.SA(beta=500.0), x)
    assert np.all(np.isfinite(v))
    assert np.allclose(v, reference.attention_field(mf.SA(beta=500.0), x), atol=1e-10)
    assert np.isfinite(mf.energy(x, 700.0))


def test_velocity_is_tangent_and_beta0_is_consensus():
    x = mf.uniform_sphere(40, 5, seed=5)
    v = mf.velocity(mf.SA(beta=3.0), x)
    assert np.max(np.abs(np.sum(v * x, axis=1))) < 1e-14
    mean = x.mean(axis=0)
    consensus = mean - (x @ mean)[:, None] * x
    for model in (mf.SA(0.0), mf.USA(0.0)):
        assert np.allclose(mf.velocity(model, x), consensus, atol=1e-15)


def test_beta0_angle_form_is_kuramoto():
    theta = np.random.default_rng(6).uniform(0, 2 * np.pi, 25)
    z = np.mean(np.exp(1j * theta))
    kuramoto = np.abs(z) * np.sin(np.angle(z) - theta)
    assert np.allclose(particles.angle_velocity(mf.SA(0.0), theta), kuramoto, atol=1e-14)


@pytest.mark.parametrize("Model", [mf.SA, mf.USA])
def test_angle_form_agrees_with_cartesian(Model):
    theta = np.random.default_rng(7).uniform(0, 2 * np.pi, 30)
    model = Model(beta=2.0)
    x = mf.circle_points(theta)
    v = mf.velocity(model, x)
    tangent = np.stack([-np.sin(theta), np.cos(theta)], axis=1)
    assert np.allclose(np.sum(v * tangent, axis=1), particles.angle_velocity(model, theta), atol=1e-13)
    assert np.allclose(particles.angle_velocity(model, theta), reference.circle_angle_field(model, theta),
                       atol=1e-13)
    a = particles.solve_angles(model, theta, [0, 0.5, 1.0], dt=0.01)
    c = particles.solve(model, x, [0, 0.5, 1.0], dt=0.01)
    assert np.max(np.abs(a.x - c.x)) < 1e-9


def _final(method, dt, x0, model):
    return particles.solve(model, x0, [0.0, 1.0], method=method, dt=dt, energy=False).x[-1]


@pytest.mark.parametrize("method,order", [("rk4", 4), ("euler", 1)])
def test_observed_order(method, order):
    model = mf.SA(beta=2.0)
    x0 = mf.uniform_sphere(16, 3, seed=8)
    ref = _final("rk4", 1 / 640, x0, model)
    dts = [0.1, 0.05, 0.025] if method == "rk4" else [0.02, 0.01, 0.005]
    errs = [np.max(np.abs(_final(method, dt, x0, model) - ref)) for dt in dts]
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(rates - order) < 0.25), (errs, rates)


def test_adaptive_meets_tolerance():
    model = mf.USA(beta=1.0)
    x0 = mf.uniform_sphere(20, 3, seed=9)
    ref = particles.solve(model, x0, [0, 2.0], dt=0.002, energy=False).x[-1]
    sol = particles.solve(model, x0, [0, 2.0], method="adaptive", rtol=1e-9, atol=1e-11, energy=False)
    assert np.max(np.abs(sol.x[-1] - ref)) < 1e-7
    assert sol.info["nsteps"] < 400


def test_norm_preserved_over_many_steps():
    sol = particles.solve(mf.SA(beta=1.0), mf.uniform_sphere(10, 4, seed=10), [0, 100.0], dt=0.01,
                          energy=False)
    assert sol.info["nsteps"] == 10_000
    assert np.max(np.abs(np.linalg.norm(sol.x, axis=-1) - 1)) < 1e-12


@pytest.mark.parametrize("model", [mf.SA(beta=4.0), mf.USA(beta=1.0)])
def test_energy_non_decreasing(model):
    sol = particles.solve(model, mf.uniform_sphere(40, 3, seed=11), np.linspace(0, 10, 41), dt=0.02)
    assert np.all(np.diff(sol.energy) >= -1e-12 * sol.energy[1:])
    assert sol.energy[-1] > sol.energy[0]


def test_repulsive_energy_non_increasing():
    sol = particles.solve(mf.SA(beta=1.0, V=-1), mf.uniform_sphere(12, 3, seed=12), np.linspace(0, 5, 21))
    assert np.all(np.diff(sol.energy) <= 1e-12 * sol.energy[1:])


def test_rotation_equivariance():
    R = mf.random_rotation(4, seed=13)
    x0 = mf.uniform_sphere(15, 4, seed=14)
    model = mf.SA(beta=2.0)
    a = particles.solve(model, x0 @ R.T, [0, 1, 2], energy=False).x
    b = particles.solve(model, x0, [0, 1, 2], energy=False).x @ R.T
    assert np.max(np.abs(a - b)) < 1e-12


def test_collapse_to_one_cluster():
    sol = particles.solve(mf.SA(beta=1.0), mf.uniform_sphere(32, 3, seed=15), [0, 30.0], energy=False)
    assert clusters.cluster_count(sol.x[-1], tol=1e-3) == 1


def test_batch_equals_separate_runs():
    x0 = mf.uniform_sphere(10, 3, seed=16, batch=3)
    model = mf.USA(beta=1.5)
    batch = particles.solve(model, x0, [0, 1.0])
    assert batch.x.shape == (2, 3, 10, 3) and batch.energy.shape == (2, 3)
    for b in range(3):
        single = particles.solve(model, x0[b], [0, 1.0])
        assert np.array_equal(batch.x[:, b], single.x)
        assert np.allclose(batch.energy[:, b], single.energy, rtol=1e-14)


@pytest.mark.parametrize("Model", [mf.SA, mf.USA])
def test_equiangular_exact_reduction(Model):
    n, d = 4, 6
    x0 = np.eye(d)[:n]
    t = np.linspace(0, 3, 7)
    model = Model(beta=1.5)
    sol = particles.solve(model, x0, t, dt=0.005, energy=False)
    gram = np.einsum("kid,kjd->kij", sol.x, sol.x)
    off = gram[:, ~np.eye(n, dtype=bool)]
    assert np.max(np.ptp(off, axis=1)) < 1e-12
    assert np.max(np.abs(off[:, 0] - theory.equiangular_curve(model, n, t, 0.0))) < 1e-9


@pytest.mark.parametrize("model", [mf.SA(beta=3.0), mf.USA(beta=3.0), mf.SA(beta=1.0, V=-1)])
def test_two_particles_follow_two_dirac_ode(model):
    phi0 = 2.0
    x0 = np.array([[1.0, 0.0, 0.0], [np.cos(phi0), np.sin(phi0), 0.0]])
    t = np.linspace(0, 4, 9)
    sol = particles.solve(model, x0, t, dt=0.002, energy=False)
    phi = np.arccos(np.clip(np.sum(sol.x[:, 0] * sol.x[:, 1], axis=1), -1, 1))
    assert np.max(np.abs(phi - exact.two_dirac_angle(model, t, phi0))) < 1e-9


def test_save_and_load_roundtrip(tmp_path):
    sol = particles.solve(mf.SA(beta=1.0, V=-1), mf.uniform_sphere(5, 3, seed=17), [0, 0.5])
    sol.save(tmp_path / "run.npz")
    back = ParticleSolution.load(tmp_path / "run.npz")
    assert back.model == sol.model and np.array_equal(back.x, sol.x) and back.info == sol.info


@pytest.mark.parametrize("call,match", [
    (lambda: particles.solve(mf.SA(), np.full((4, 3), np.nan), [0, 1]), "NaN"),
    (lambda: particles.solve(mf.SA(), 2 * mf.uniform_sphere(4, 3), [0, 1]), "unit"),
    (lambda: particles.solve(mf.SA(), np.ones(3), [0, 1]), "shape"),
    (lambda: particles.solve(mf.SA(), mf.uniform_sphere(4, 3), [0, 1], dt=0.0), "dt"),
    (lambda: particles.solve(mf.SA(), mf.uniform_sphere(4, 3), [0, 1], dt=-1.0), "dt"),
    (lambda: particles.solve(mf.SA(), mf.uniform_sphere(4, 3), [1, 0]), "increasing"),
    (lambda: particles.solve(mf.SA(), mf.uniform_sphere(4, 3), [0, 1], method="rk45"), "method"),
    (lambda: mf.SA(beta=-1.0), "beta"),
    (lambda: mf.SA(beta=np.nan), "beta"),
    (lambda: mf.velocity(mf.SA(Q=np.eye(3)), mf.uniform_sphere(4, 2)), "Q"),
    (lambda: mf.energy(mf.uniform_sphere(4, 3), 1.0, weights=[1, 1, -1, 1]), "weights"),
])
def test_bad_input_raises_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cluster_diagnostics():
    base = mf.uniform_sphere(3, 3, seed=18)
    x = mf.normalise(np.repeat(base, 20, axis=0) + 1e-5 * np.random.default_rng(0).standard_normal((60, 3)))
    assert clusters.cluster_count(x, tol=1e-3) == 3
    assert clusters.cluster_count(x, tol=1e-3, min_mass=0.5) == 0
    dens, edges = clusters.inner_product_histogram(x, bins=20)
    assert np.isclose(np.sum(dens * np.diff(edges)), 1.0)


def test_model_description_roundtrip():
    Q = np.arange(9.0).reshape(3, 3)
    model = mf.USA(beta=2.0, Q=Q, V=-1)
    assert mf.model_from_dict(model.to_dict()) == model
    assert model.value_scalar == -1 and model.attention_scalar is None and not model.is_isotropic
    assert mf.SA(1.0, V=-1).sign == -1 and mf.SA(1.0).is_identity
