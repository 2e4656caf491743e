"""Bad input never reaches a kernel: every public entry point answers NaN/inf, non-unit points,
wrong shapes and dtypes, empty arrays, negative or massless densities and weights, β < 0,
non-increasing times, bad or unstable steps and unknown method names with a ValueError or
TypeError that names the argument.  And large β (up to 700) never overflows."""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import meanfield as mf
from meanfield.clusters import cluster_count
from meanfield.transport import wasserstein
from meanfield.solvers import circle, particles, sphere

FAST = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
MESH = sphere.icosphere(1)
GOOD3 = mf.uniform_sphere(5, 3, seed=0)
T = [0.0, 0.1]


def rejects(call, *names):
    """call() raises ValueError/TypeError whose message names (as a word) one of ``names``."""
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    message = str(info.value)
    assert any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", message) for name in names), \
        f"{message!r} does not name {names}"
    return message


# --------------------------------------------------------------------------- bad points

POINT_TAKERS = {
    "mf.velocity": (lambda x: mf.velocity(mf.SA(1.0), x), "x"),
    "particles.velocity": (lambda x: particles.velocity(mf.USA(1.0), x, summation="direct"), "x"),
    "mf.energy": (lambda x: mf.energy(x, 2.0), "x"),
    "mf.log_energy": (lambda x: mf.log_energy(x, 2.0), "x"),
    "particles.solve": (lambda x: particles.solve(mf.SA(1.0), x, T), "x0"),
    "wasserstein": (lambda x: wasserstein(x, None, x, None), "x"),
    "cluster_count": (lambda x: cluster_count(x), "x"),
}


@st.composite
def unit_points(draw, min_d=2):
    n = draw(st.integers(1, 6))
    d = draw(st.integers(min_d, 4))
    g = draw(hnp.arrays(np.float64, (n, d), elements=st.floats(-1, 1).filter(lambda v: abs(v) > 0.1)))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


@st.composite
def nonfinite_points(draw):
    x = draw(unit_points()).copy()
    i, j = draw(st.integers(0, x.shape[0] - 1)), draw(st.integers(0, x.shape[1] - 1))
    x[i, j] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return x


@st.composite
def off_sphere_points(draw):
    x = draw(unit_points()).copy()
    i = draw(st.integers(0, x.shape[0] - 1))
    x[i] *= draw(st.one_of(st.floats(0.0, 0.999), st.floats(1.001, 1e6)))
    return x


badly_shaped_points = st.one_of(
    hnp.arrays(np.float64, st.sampled_from([(), (3,), (0, 3), (4, 0), (4, 1), (2, 0, 3), (1, 1, 2, 3)]),
               elements=st.just(0.6)),
    st.just([[1.0, 0.0], [0.0, 1.0, 0.0]]),                      # ragged
)
wrongly_typed_points = st.sampled_from([
    np.array([["1", "0"]]), np.array([[1 + 0j, 0j]]), np.eye(2, dtype=bool), np.array([[None, 1.0]]),
    "points", None, {"x": 1},
])


@pytest.mark.parametrize("entry", list(POINT_TAKERS))
@FAST
@given(x=st.one_of(nonfinite_points(), off_sphere_points(), badly_shaped_points, wrongly_typed_points))
def test_bad_points_are_named(entry, x):
    call, name = POINT_TAKERS[entry]
    rejects(lambda: call(x), name)


@pytest.mark.parametrize("make", [
    lambda w: mf.velocity(mf.SA(1.0), GOOD3, weights=w),
    lambda w: mf.energy(GOOD3, 1.0, weights=w),
    lambda w: mf.energy(GOOD3, 0.0, weights=w),
    lambda w: particles.solve(mf.SA(1.0), GOOD3, T, weights=w),
    lambda w: particles.solve(mf.SA(1.0), np.stack([GOOD3] * 2), T, weights=w),
    lambda w: wasserstein(GOOD3, w, GOOD3, None),
], ids=["velocity", "energy", "energy-beta0", "solve", "solve-batch", "wasserstein"])
@FAST
@given(w=st.one_of(
    hnp.arrays(np.float64, 5, elements=st.floats(-10, 0)),                      # negative or zero mass
    hnp.arrays(np.float64, 5, elements=st.sampled_from([np.nan, np.inf, 1.0])).filter(
        lambda w: not np.all(np.isfinite(w))),
    hnp.arrays(np.float64, st.sampled_from([(4,), (6,), (0,), (3, 5), (5, 5, 1)]), elements=st.just(1.0)),
    st.just(np.full(5, 1e308)),                                                 # total overflows
    st.just(np.array(["a"] * 5)),
))
def test_bad_weights_are_named(make, w):
    rejects(lambda: make(w), "weights")


# --------------------------------------------------------------------------- β, models, counts

bad_betas = st.one_of(st.floats(max_value=-1e-300, allow_infinity=True), st.just(np.nan), st.just(np.inf),
                      st.sampled_from(["1", None, 1j, True, [1.0]]))


@FAST
@given(beta=bad_betas, kind=st.sampled_from([mf.SA, mf.USA]))
def test_bad_beta_is_named(beta, kind):
    rejects(lambda: kind(beta), "beta")
    rejects(lambda: mf.energy(GOOD3, beta), "beta")
    rejects(lambda: circle.energy(np.ones(16), beta), "beta")


@pytest.mark.parametrize("kwargs, name", [
    (dict(Q=np.ones((2, 3))), "Q"), (dict(K=np.full((3, 3), np.nan)), "K"), (dict(V="-1"), "V"),
    (dict(V=1j), "V"), (dict(Q=np.ones((2, 2, 2))), "Q"),
])
def test_bad_matrices_are_named(kwargs, name):
    rejects(lambda: mf.SA(1.0, **kwargs), name)


def test_matrices_of_another_dimension_and_non_models():
    rejects(lambda: mf.velocity(mf.SA(1.0, Q=np.eye(2)), GOOD3), "SA.Q")
    for call in (lambda m: mf.velocity(m, GOOD3), lambda m: particles.solve(m, GOOD3, T),
                 lambda m: circle.solve(m, np.ones(16), T), lambda m: sphere.solve(m, np.ones(MESH.size), T, mesh=MESH),
                 lambda m: mf.growth_rate(m, 3, 2)):
        rejects(lambda: call("SA"), "model")
        rejects(lambda: call(None), "model")
    # the density solvers take any V (the full model's field); the angle ODE only V = ±I
    rejects(lambda: particles.solve_angles(mf.SA(1.0, V=2.0), np.zeros(3), T), "V = ±I")
    rejects(lambda: mf.growth_rate(mf.SA(1.0, V=np.diag([1.0, 2.0, 3.0])), 3, 2), "V = v I")


bad_counts = st.one_of(st.integers(max_value=0), st.floats(0.5, 10), st.sampled_from(["3", None, True, 2.0]))


@FAST
@given(bad=bad_counts)
def test_bad_counts_are_named(bad):
    rejects(lambda: mf.uniform_sphere(bad, 3), "n")
    rejects(lambda: mf.uniform_sphere(4, bad), "d")
    rejects(lambda: mf.growth_rate(mf.SA(1.0), bad, 2), "d")
    if bad is not None:                                  # None is the default of these two
        rejects(lambda: mf.uniform_sphere(4, 3, batch=bad), "batch")
        rejects(lambda: circle.solve(mf.SA(1.0), lambda x: np.ones(len(x)), T, cells=bad), "cells")
    rejects(lambda: particles.solve(mf.SA(1.0), GOOD3, T, checkpoint="unused.npz", checkpoint_every=bad),
            "checkpoint_every")


def test_other_bad_integers_are_named():
    rejects(lambda: mf.uniform_sphere(4, 1), "d")
    rejects(lambda: mf.growth_rate(mf.SA(1.0), 3, -1), "l")
    rejects(lambda: mf.growth_rate(mf.SA(1.0), 3, 2.0), "l")
    for seed in (-1, "seed", 1.5):
        rejects(lambda: mf.uniform_sphere(4, 3, seed=seed), "seed")


# --------------------------------------------------------------------------- times, steps, names

TIME_TAKERS = {
    "particles.solve": lambda t, **kw: particles.solve(mf.SA(1.0), GOOD3, t, **kw),
    "particles.solve_angles": lambda t, **kw: particles.solve_angles(mf.SA(1.0), np.linspace(0, 1, 4), t, **kw),
    "circle.solve": lambda t, **kw: circle.solve(mf.SA(1.0), np.ones(16), t, **kw),
    "sphere.solve": lambda t, **kw: sphere.solve(mf.SA(1.0), np.ones(MESH.size), t, mesh=MESH, **kw),
}


@st.composite
def non_increasing_times(draw):
    t = sorted(draw(st.lists(st.floats(-10, 10), min_size=2, max_size=6)))
    i = draw(st.integers(0, len(t) - 2))
    t[i + 1] = t[i] - draw(st.floats(0, 1))          # a repeated or decreasing time
    return t


bad_times = st.one_of(non_increasing_times(), st.just([]), st.just([[0.0, 1.0]]), st.just([0.0, np.nan]),
                      st.just([0.0, np.inf]), st.just(["0", "1"]))


@pytest.mark.parametrize("entry", list(TIME_TAKERS))
@FAST
@given(t=bad_times)
def test_bad_output_times_are_named(entry, t):
    rejects(lambda: TIME_TAKERS[entry](t), "t_eval")


bad_steps = st.one_of(st.floats(max_value=0.0), st.sampled_from([np.nan, np.inf, -np.inf, "0.1", 1j]))


@pytest.mark.parametrize("entry", list(TIME_TAKERS))
@FAST
@given(dt=bad_steps)
def test_bad_steps_are_named(entry, dt):
    rejects(lambda: TIME_TAKERS[entry](T, dt=dt), "dt")


@pytest.mark.parametrize("entry", ["circle.solve", "sphere.solve"])
@FAST
@given(factor=st.floats(1.0001, 1e6))
def test_steps_beyond_the_positivity_bound_are_refused(entry, factor):
    bound = (circle.max_step(mf.SA(1.0), 16) if entry == "circle.solve" else sphere.max_step(mf.SA(1.0), MESH))
    message = rejects(lambda: TIME_TAKERS[entry](T, dt=bound * factor), "dt")
    assert "positivity" in message


@FAST
@given(fraction=st.floats(0.01, 1.0), beta=st.floats(0.0, 50.0))
def test_large_particle_steps_stay_on_the_sphere(fraction, beta):
    """Any step up to the stability bound 2.78/L is accepted, and renormalisation keeps the
    tokens unit vectors however coarse the step (only the accuracy suffers)."""
    dt = fraction * particles.max_step(mf.SA(beta), 3)
    x = particles.solve(mf.SA(beta), GOOD3, [0.0, 2 * dt], dt=dt).x
    assert np.all(np.isfinite(x)) and np.allclose(np.linalg.norm(x, axis=-1), 1.0)


@FAST
@given(factor=st.floats(1.0001, 1e6), beta=st.floats(0.0, 50.0), method=st.sampled_from(["rk4", "euler"]))
def test_particle_steps_beyond_the_stability_bound_are_refused(factor, beta, method):
    dt = factor * particles.max_step(mf.USA(beta), 3, method)
    message = rejects(lambda: particles.solve(mf.USA(beta), GOOD3, [0.0, 1.0], method=method, dt=dt), "dt")
    assert "stability" in message


@pytest.mark.parametrize("entry", ["particles.solve", "particles.solve_angles"])
def test_bad_tolerances_are_named(entry):
    for name in ("rtol", "atol"):
        for value in (-1e-8, 0.0, np.nan, "1e-8"):
            rejects(lambda: TIME_TAKERS[entry](T, method="adaptive", **{name: value}), name)


NAMED_CHOICES = [
    (lambda m: particles.solve(mf.SA(1.0), GOOD3, T, scheme=m), "scheme"),
    (lambda m: particles.solve_angles(mf.SA(1.0), np.zeros(3), T, scheme=m), "scheme"),
    (lambda m: particles.solve(mf.SA(1.0), GOOD3, T, summation=m), "summation"),
    (lambda m: particles.velocity(mf.SA(1.0), GOOD3, summation=m), "summation"),
    (lambda m: circle.solve(mf.SA(1.0), np.ones(16), T, flux=m), "flux"),
    (lambda m: sphere.solve(mf.SA(1.0), np.ones(MESH.size), T, mesh=MESH, flux=m), "flux"),
    (lambda m: sphere.solve(mf.SA(1.0), np.ones(MESH.size), T, mesh=MESH, summation=m), "summation"),
    (lambda m: wasserstein(GOOD3, None, GOOD3, None, method=m), "method"),
]


@pytest.mark.parametrize("case", range(len(NAMED_CHOICES)))
@FAST
@given(name=st.one_of(st.text(max_size=8), st.sampled_from(["RK4", "rk45", "Euler", "fft", None, 3])).filter(
    lambda s: s not in ("rk4", "euler", "adaptive", "dopri5", "auto", "direct", "fast", "upwind", "muscl",
                        "tpfa", "emd", "sliced", "circle")))
def test_unknown_names_are_named(case, name):
    call, what = NAMED_CHOICES[case]
    message = rejects(lambda: call(name), what)
    assert "choose one of" in message


# --------------------------------------------------------------------------- densities

@st.composite
def bad_densities(draw, size):
    kind = draw(st.sampled_from(["negative", "massless", "nonfinite", "shape", "empty", "callable", "type"]))
    if kind == "negative":
        rho = draw(hnp.arrays(np.float64, size, elements=st.floats(0, 5)))
        rho[draw(st.integers(0, size - 1))] = -draw(st.floats(1e-12, 5))
        return rho
    if kind == "massless":
        return np.zeros(size)
    if kind == "nonfinite":
        rho = np.ones(size)
        rho[draw(st.integers(0, size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        return rho
    if kind == "shape":
        return np.ones(draw(st.sampled_from([(size, 2), (2, size)])))
    if kind == "empty":
        return np.zeros(0)
    if kind == "callable":
        out = draw(st.sampled_from([-1.0, np.nan, 0.0]))
        return lambda x: np.full(len(x), out)
    return draw(st.sampled_from(["uniform", None, np.ones(size, dtype=complex)]))


@FAST
@given(rho=bad_densities(16))
def test_bad_circle_densities_are_named(rho):
    rejects(lambda: circle.solve(mf.SA(1.0), rho, T), "rho0")


@FAST
@given(rho=st.one_of(bad_densities(MESH.size), st.just(np.ones(MESH.size + 1))))
def test_bad_sphere_densities_are_named(rho):
    rejects(lambda: sphere.solve(mf.SA(1.0), rho, T, mesh=MESH), "rho0")


def test_bad_angles_and_meshes_are_named():
    for theta in (np.zeros(0), np.zeros((0, 3)), np.zeros((1, 1, 2)), [0.0, np.nan], ["a"]):
        rejects(lambda: particles.solve_angles(mf.SA(1.0), theta, T), "theta", "theta0")
    rejects(lambda: sphere.solve(mf.SA(1.0), np.ones(12), T, mesh=12), "mesh")
    rejects(lambda: wasserstein(GOOD3, None, mf.uniform_sphere(4, 2, seed=0), None), "same sphere")
    for p in (0.5, np.nan, "2"):
        rejects(lambda: wasserstein(GOOD3, None, GOOD3, None, p=p), "p")


# --------------------------------------------------------------------------- large β

@FAST
@given(x=unit_points(min_d=2), beta=st.floats(0.0, 700.0, allow_subnormal=False), repulsive=st.booleans())
def test_large_beta_never_overflows(x, beta, repulsive):
    v_sign = -1.0 if repulsive else None
    sa = mf.velocity(mf.SA(beta, V=v_sign), x)
    usa = mf.velocity(mf.USA(beta, V=v_sign), x)
    assert np.all(np.isfinite(sa)) and np.all(np.isfinite(usa))
    assert np.all(np.linalg.norm(sa, axis=1) <= 1.0 + 1e-12)            # |X_SA| <= 1
    assert np.allclose(np.sum(sa * x, axis=1), 0.0, atol=1e-12)          # tangent
    assert np.isfinite(mf.energy(x, beta)) and np.isfinite(mf.log_energy(x, beta))
    assert np.isfinite(mf.growth_rate(mf.SA(beta), x.shape[1], 2))
    assert np.isfinite(mf.growth_rate(mf.USA(beta), x.shape[1], 2))


@pytest.mark.parametrize("beta", [300.0, 700.0])
def test_large_beta_solvers_stay_finite(beta):
    x = mf.uniform_sphere(20, 3, seed=1)
    sol = particles.solve(mf.SA(beta), x, [0.0, 0.05, 0.1])
    assert np.all(np.isfinite(sol.x)) and np.all(np.isfinite(sol.energy))
    assert np.all(np.diff(sol.energy) >= -1e-12 * sol.energy[:-1])      # E_β non-decreasing
    rho = 1.0 + 0.5 * np.cos(circle.cell_angles(64))
    for model in (mf.SA(beta), mf.USA(beta)):
        u = circle.velocity(model, rho)
        assert np.all(np.isfinite(u))
    out = circle.solve(mf.SA(beta), rho, [0.0, 0.1])
    assert np.all(np.isfinite(out.rho)) and np.all(out.rho >= 0) and np.isclose(out.mass[-1], out.mass[0], rtol=1e-13)
    rho_s = sphere.solve(mf.SA(beta), lambda p: 1.0 + 0.5 * p[:, 2], [0.0, 0.02], mesh=MESH)
    assert np.all(np.isfinite(rho_s.rho)) and np.all(rho_s.rho >= 0) and np.all(np.isfinite(rho_s.energy))


def test_usa_beyond_double_precision_says_so():
    """e^{β<Qx,Ky>} with β|Q^T K| > 709 does not fit a double: a clear error, not inf/NaN."""
    with pytest.raises(ValueError, match="overflows double precision"):
        mf.velocity(mf.USA(400.0, Q=2.0), GOOD3)
