"""Fuzzing every public entry point with hypothesis: shapes, dtypes, NaN/inf and extreme values.

The contract checked for every call: either a ValueError/TypeError whose message names one of the
arguments, or a finite answer that passes a correctness check (tangent velocities, unit points,
energy bounds, metric bounds, mass conservation, ...) — never another exception, a crash, a hang
(each example runs under a 60 s alarm) or a silent NaN/inf.  Kept cheap for CI: tiny sizes,
derandomised, 20–40 examples per entry point.
"""
import re
import signal
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import meanfield as mf
from meanfield import theory
from meanfield.clusters import cluster_count
from meanfield.solvers import adaptive, adaptive_circle, causal, circle, hardmax, particles, sphere

FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],     # no shrinking: bounded cost even on failure
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
ALARM = 60           # seconds: a hang fails the example (kernels are compiled before, see _compiled)
BUDGET = 10          # seconds: the solvers' work budget, so that a long but legitimate run is refused up front
MESH = sphere.icosphere(0)

# --------------------------------------------------------------------------- strategies

extreme_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-300, 1e-17, 0.5, 1.0, 709.0, 710.0, 800.0, 1e20, 1e300, -1.0]),
)
dtypes = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.complex128, np.bool_])
shapes = st.one_of(st.sampled_from([(), (0,), (3,), (0, 3), (1, 1), (2, 3, 1), (1, 2, 3, 4)]),
                   hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=5))


@st.composite
def arrays(draw):
    """Arbitrary arrays: any of the dtypes and shapes above, extreme or non-finite entries."""
    shape = draw(shapes)
    data = draw(hnp.arrays(np.float64, shape, elements=extreme_floats))
    with np.errstate(all="ignore"):
        return data.astype(draw(dtypes))


@st.composite
def points(draw, d=None):
    """Mostly valid unit vectors (n, d), sometimes perturbed by one extreme entry or cast to float32."""
    n = draw(st.integers(1, 6))
    d = d or draw(st.integers(2, 4))
    g = draw(hnp.arrays(np.float64, (n, d), elements=st.floats(-1, 1).filter(lambda v: abs(v) > 1e-3)))
    x = g / np.linalg.norm(g, axis=1, keepdims=True)
    twist = draw(st.sampled_from(["none", "none", "float32", "entry", "duplicate"]))
    if twist == "float32":
        x = x.astype(np.float32)
    elif twist == "entry":
        x = x.copy()
        x[draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))] = draw(extreme_floats)
    elif twist == "duplicate":
        x = np.vstack([x, x[:1]])
    return x


def weights_for(n):
    return st.one_of(st.none(), hnp.arrays(np.float64, n, elements=st.one_of(
        st.floats(0, 1e300), st.sampled_from([0.0, 5e-324, 1e-310, np.nan, -1.0, np.inf]))), arrays())


models = st.builds(lambda cls, beta, v: cls(beta, V=v), st.sampled_from([mf.SA, mf.USA]),
                   st.one_of(st.floats(0, 60), st.sampled_from([0.0, 1e-300, 700.0, 710.0, 1e6])),
                   st.sampled_from([None, -1.0]))


# --------------------------------------------------------------------------- the contract

@pytest.fixture(scope="module", autouse=True)
def _compiled():
    """Load (or compile) every kernel once, outside the alarms: on a cold Numba cache the first
    call of a kernel takes seconds, which must not count as a hang."""
    for d in (2, 3, 4):
        x = mf.uniform_sphere(6, d, seed=0)
        for model in (mf.SA(2.0), mf.USA(2.0, V=-1.0)):
            for summation in ("direct", "auto"):
                particles.velocity(model, x, summation=summation)
            for method in ("rk4", "euler", "adaptive"):
                particles.solve(model, x, [0.0, 0.05], method=method)
        mf.wasserstein(x, None, x[::-1], None)
        cluster_count(x)
    for flux in circle.FLUXES:
        circle.solve(mf.SA(1.0), np.ones(16), [0.0, 0.05], flux=flux)
    for flux in sphere.FLUXES:
        sphere.solve(mf.USA(1.0), np.ones(MESH.size), [0.0, 0.05], mesh=MESH, flux=flux)
    causal.solve(mf.SA(1.0), np.ones((4, 16)), [0.0, 0.05], slices=4, cells=16)
    hardmax.solve(mf.Hardmax(1.0), mf.uniform_sphere(4, 3, seed=0), [0.0, 0.05])
    adaptive.solve(mf.SA(1.0), np.ones(42), [0.0, 0.05], base=1, finest=2)
    adaptive_circle.solve(mf.SA(1.0), np.ones(16), [0.0, 0.05], cells=16, finest_cells=64)

@contextmanager
def alarm(seconds=ALARM):
    def expire(*_):
        raise TimeoutError(f"no answer within {seconds} s: a hang")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _finite(value):
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, (tuple, list)):
        return all(_finite(v) for v in value)
    arr = np.asarray(value)
    return arr.dtype.kind not in "fc" or bool(np.all(np.isfinite(arr)))


def answer_or_named_error(call, *names):
    """call()'s value if it is finite; else the test fails unless call raised ValueError/TypeError
    (or RuntimeError: an adaptive run stopped at its budget) naming one of ``names`` (then None)."""
    try:
        with alarm(), np.errstate(all="ignore"):
            value = call()
    except (ValueError, TypeError, RuntimeError) as exc:
        message = str(exc)
        assert any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", message) for n in names), \
            f"{type(exc).__name__}({message!r}) names none of {names}"
        return None
    assert _finite(value), f"silent NaN/inf: {value!r}"
    return value


# --------------------------------------------------------------------------- geometry

@FUZZ
@given(x=st.one_of(arrays(), points()))
def test_fuzz_geometry(x):
    u = answer_or_named_error(lambda: mf.normalise(x), "x")
    if u is not None:
        assert np.allclose(np.linalg.norm(u, axis=-1), 1.0)
    theta = answer_or_named_error(lambda: mf.circle_angles(x), "x")
    if theta is not None:
        assert np.all((0 <= theta) & (theta < 2 * np.pi))
    back = answer_or_named_error(lambda: mf.circle_points(x), "theta")
    if back is not None:
        assert np.allclose(np.linalg.norm(back, axis=-1), 1.0)
    dist = answer_or_named_error(lambda: mf.geodesic_distance(x, x), "x", "y")
    if dist is not None:
        assert np.all((dist >= 0) & (dist <= np.pi)) and np.allclose(np.diag(dist), 0.0, atol=1e-7)
    proj = answer_or_named_error(lambda: mf.tangent_projection(x, np.ones(np.shape(x))), "x", "v")
    if proj is not None:
        assert np.allclose(np.sum(proj * np.asarray(x, float), axis=-1), 0.0, atol=1e-6)


@FUZZ
@given(n=st.one_of(st.integers(-2, 6), extreme_floats, st.just("3")), d=st.one_of(st.integers(-1, 5), extreme_floats),
       seed=st.one_of(st.none(), st.integers(-3, 2 ** 70), st.just(1.5)))
def test_fuzz_sampling(n, d, seed):
    x = answer_or_named_error(lambda: mf.uniform_sphere(n, d, seed=seed), "n", "d", "seed")
    if x is not None:
        assert x.shape == (n, d) and np.allclose(np.linalg.norm(x, axis=1), 1.0)
    rot = answer_or_named_error(lambda: mf.random_rotation(d, seed=seed), "d", "seed")
    if rot is not None:
        assert np.allclose(rot @ rot.T, np.eye(d)) and np.isclose(np.linalg.det(rot), 1.0)


# --------------------------------------------------------------------------- models, fields and energies

@FUZZ
@given(beta=st.one_of(extreme_floats, st.just("1"), st.just(True)),
       q=st.one_of(st.none(), extreme_floats, arrays()))
def test_fuzz_models(beta, q):
    model = answer_or_named_error(lambda: mf.SA(beta, Q=q), "beta", "Q")
    if model is not None:
        assert model.beta >= 0 and mf.model_from_dict(model.to_dict()) == model


@FUZZ
@given(model=models, x=points(), data=st.data())
def test_fuzz_velocity_and_energy(model, x, data):
    w = data.draw(weights_for(np.shape(x)[0]))
    v = answer_or_named_error(lambda: particles.velocity(model, x, weights=w), "x", "weights", "beta")
    if v is not None:
        # USA sums terms up to e^β (the self-interaction), so its absolute accuracy is ε e^β
        scale = max(1.0, np.abs(v).max(), 0.0 if model.normalised else np.exp(min(model.beta, 709.0)))
        assert np.allclose(np.sum(v * np.asarray(x, float), axis=1), 0.0, atol=1e-6 * scale)
        if model.normalised:
            assert np.all(np.linalg.norm(v, axis=1) <= 1 + 1e-6)            # |X_SA| <= 1
    e = answer_or_named_error(lambda: mf.energy(x, model.beta, weights=w), "x", "weights", "beta")
    if e is not None and model.beta > 0:
        # E_β of a probability measure lies in [e^{-β}, e^{β}]/(2β)
        log_e = np.log(e) + np.log(2 * model.beta)
        assert -model.beta * (1 + 1e-9) - 1e-9 <= log_e <= model.beta * (1 + 1e-9) + 1e-9
    log_e = answer_or_named_error(lambda: mf.log_energy(x, model.beta, weights=w), "x", "weights", "beta")
    if log_e is not None and e is not None and e > 0 and model.beta > 0:
        assert np.isclose(log_e, np.log(e) + np.log(2 * model.beta), rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------- theory

@FUZZ
@given(model=models, d=st.one_of(st.integers(-1, 400), st.just(2.5)), l=st.one_of(st.integers(-1, 50), st.just(1e3)))
def test_fuzz_theory(model, d, l):
    rate = answer_or_named_error(lambda: mf.growth_rate(model, d, l), "d", "l", "beta")
    if rate is not None and l == 1 and model.beta == 0:
        assert np.isclose(rate, model.sign * (d - 1) / d)
    if model.sign > 0:
        mode = answer_or_named_error(lambda: mf.most_unstable_mode(model, d), "d", "beta")
        if mode is not None:
            assert mode >= 1 and mode <= 4 * np.sqrt(2 * model.beta + 1) + 8
    c = answer_or_named_error(lambda: theory.funk_hecke(model.beta, d, l), "d", "l", "beta")
    if c is not None:
        assert 0 <= c
    bound = answer_or_named_error(lambda: theory.speed_bound(model), "beta")
    if bound is not None:
        assert bound > 0


@settings(FUZZ, max_examples=15)
@given(model=models, n=st.one_of(st.integers(-1, 50), st.just(2.0)), rho0=st.one_of(st.floats(-2, 2), extreme_floats))
def test_fuzz_equiangular_curve(model, n, rho0):
    curve = answer_or_named_error(lambda: theory.equiangular_curve(model, n, [0.0, 0.5], rho0), "n", "rho0", "t")
    if curve is not None:
        assert np.all(curve <= 1 + 1e-9)


# --------------------------------------------------------------------------- transport and clusters

@FUZZ
@given(x=points(), data=st.data(), p=st.one_of(extreme_floats, st.floats(1, 300), st.just("2")),
       method=st.sampled_from(["auto", "circle", "emd", "sliced", "nope"]))
def test_fuzz_wasserstein(x, data, p, method):
    y = data.draw(points(d=np.shape(x)[1]))
    a, b = data.draw(weights_for(np.shape(x)[0])), data.draw(weights_for(np.shape(y)[0]))
    w = answer_or_named_error(lambda: mf.wasserstein(x, a, y, b, p=p, method=method, n_projections=20),
                              "x", "y", "p", "method", "weights of x", "weights of y", "same sphere")
    if w is not None:
        assert 0 <= w <= np.pi + 1e-9
    self_w = answer_or_named_error(lambda: mf.wasserstein(x, a, x, a, p=p, method=method, n_projections=20),
                                   "x", "p", "method", "weights of x")
    if self_w is not None and method != "sliced":
        assert self_w < 1e-6


@FUZZ
@given(x=points(), tol=st.one_of(extreme_floats, st.floats(1e-30, 4)), data=st.data(),
       min_mass=st.one_of(extreme_floats, st.floats(0, 1)))
def test_fuzz_cluster_count(x, tol, data, min_mass):
    w = data.draw(weights_for(np.shape(x)[0]))
    count = answer_or_named_error(lambda: cluster_count(x, tol=tol, weights=w, min_mass=min_mass),
                                  "x", "tol", "weights", "min_mass")
    if count is not None:
        assert 0 <= count <= np.shape(x)[0] and (count >= 1 or min_mass > 0)


# --------------------------------------------------------------------------- densities and solvers

@settings(FUZZ, max_examples=20)
@given(d=st.sampled_from([2, 3, 5]), amplitude=st.one_of(extreme_floats, st.floats(0, 1)),
       degree=st.one_of(st.integers(-1, 5), extreme_floats), n=st.integers(-1, 30),
       seed=st.one_of(st.integers(-2, 10), st.none()))
def test_fuzz_densities(d, amplitude, degree, n, seed):
    rho = answer_or_named_error(lambda: mf.perturbed_uniform(d, amplitude, degree, seed or 0),
                                "amplitude", "degree", "seed")
    if rho is None:
        return
    x = answer_or_named_error(lambda: mf.sample_density(rho, n, d, seed=seed), "n", "seed")
    if x is not None:
        assert x.shape == (n, d) and np.allclose(np.linalg.norm(x, axis=1), 1.0)


@settings(FUZZ, max_examples=25)
@given(model=models, x=points(d=3), t_end=st.one_of(st.floats(1e-3, 2.0), extreme_floats),
       method=st.sampled_from(["rk4", "euler", "adaptive", "RK4"]),
       dt=st.one_of(st.none(), st.floats(1e-4, 1.0), extreme_floats))
def test_fuzz_particle_solve(model, x, t_end, method, dt):
    sol = answer_or_named_error(lambda: particles.solve(model, x, [0.0, t_end], method=method, dt=dt, budget=BUDGET),
                                "x0", "t_eval", "method", "dt", "beta", "budget")
    if sol is not None:
        assert np.allclose(np.linalg.norm(sol.x, axis=-1), 1.0)
        if model.is_isotropic and model.sign > 0:   # E_β is non-decreasing along the flow
            assert sol.energy[-1] >= sol.energy[0] * (1 - 1e-6)


@settings(FUZZ, max_examples=20)
@given(model=models, rho=st.one_of(hnp.arrays(np.float64, st.integers(8, 24), elements=st.floats(0, 10)), arrays()),
       t_end=st.one_of(st.floats(1e-3, 0.5), extreme_floats), flux=st.sampled_from(sorted(set(circle.FLUXES) | {"muscl", "tpfa", "nope"})),
       dt=st.one_of(st.none(), extreme_floats))
def test_fuzz_circle_solve(model, rho, t_end, flux, dt):
    sol = answer_or_named_error(lambda: circle.solve(model, rho, [0.0, t_end], flux=flux, dt=dt, budget=BUDGET),
                                "rho0", "t_eval", "flux", "dt", "beta", "cells", "budget")
    if sol is not None:
        assert np.allclose(sol.mass, 1.0, rtol=1e-12) and np.all(sol.rho >= -1e-14)


@settings(FUZZ, max_examples=12)
@given(model=models, rho=st.one_of(hnp.arrays(np.float64, MESH.size, elements=st.floats(0, 10)), arrays()),
       t_end=st.one_of(st.floats(1e-3, 0.3), extreme_floats), flux=st.sampled_from(sorted(set(sphere.FLUXES) | {"muscl", "tpfa", "nope"})))
def test_fuzz_sphere_solve(model, rho, t_end, flux):
    sol = answer_or_named_error(lambda: sphere.solve(model, rho, [0.0, t_end], mesh=MESH, flux=flux, budget=BUDGET),
                                "rho0", "t_eval", "flux", "beta", "budget")
    if sol is not None:
        assert np.allclose(sol.mass, 1.0, rtol=1e-12) and np.all(sol.rho >= -1e-14)


@pytest.mark.parametrize("level", [-1, 0.5, "2", None])
def test_fuzz_icosphere_levels(level):
    answer_or_named_error(lambda: sphere.icosphere(level), "level")


@settings(FUZZ, max_examples=15)
@given(model=models, d=st.one_of(st.integers(-1, 12), st.just(3.5)),
       f0=st.one_of(hnp.arrays(np.float64, st.integers(8, 24), elements=st.floats(0, 10)), arrays(),
                    st.just(lambda s: 1.0 + 0.5 * s), st.just(lambda s: (1.0 + s) * 1j), st.just(lambda s: "1")),
       t_end=st.one_of(st.floats(1e-3, 0.3), extreme_floats))
def test_fuzz_zonal_solve(model, d, f0, t_end):
    from meanfield.solvers import zonal
    sol = answer_or_named_error(lambda: zonal.solve(model, f0, [0.0, t_end], d, budget=BUDGET),
                                "f0", "f0(s)", "d", "t_eval", "beta", "cells", "masses", "budget")
    if sol is not None:
        assert np.all(sol.masses >= -1e-14) and np.allclose(sol.masses.sum(axis=-1), 1.0, rtol=1e-12)


@FUZZ
@given(theta=st.one_of(hnp.arrays(np.float64, st.integers(2, 6), elements=st.floats(-10, 10)), arrays()),
       beta=st.one_of(extreme_floats, st.floats(0, 800)))
def test_fuzz_landscape(theta, beta):
    from meanfield import landscape
    e = answer_or_named_error(lambda: landscape.energy(theta, beta), "theta", "beta")
    g = answer_or_named_error(lambda: landscape.gradient(theta, beta), "theta", "beta")
    h = answer_or_named_error(lambda: landscape.hessian(theta, beta), "theta", "beta")
    if g is not None:
        assert abs(g.sum()) <= 1e-9 * max(1.0, np.abs(g).max())       # rotation invariance
    if h is not None:
        assert np.allclose(h, h.T) and np.allclose(h.sum(axis=1), 0.0, atol=1e-9 * max(1.0, np.abs(h).max()))
    if e is not None and beta > 0 and not isinstance(beta, bool):
        assert np.log(e) <= beta - np.log(2 * beta) + 1e-9                # E_β <= e^β/(2β)


# --------------------------------------------------------------------------- issue 29: more entry points

huge_scales = st.sampled_from([1.0, 1.0, 1e-300, 5e-324, 1e300, 1e307, 1.0, 0.0, -1.0, np.nan, np.inf])


@settings(FUZZ, max_examples=25)
@given(d=st.sampled_from([2, 3, 2, 3, 4]),
       method=st.sampled_from(["iid", "quantile", "stratified", "weighted", "stratified", "weighted", "nope"]),
       n=st.one_of(st.integers(1, 40), st.sampled_from([-1, 0, 10 ** 10, 2.5])), scale=huge_scales,
       cells=st.one_of(st.none(), st.none(), arrays()), seed=st.one_of(st.none(), st.integers(0, 5), st.just(-1)))
def test_fuzz_discretise(d, method, n, scale, cells, seed):
    from meanfield.sampling import discretise
    rho = (lambda x: scale * (1.5 + np.asarray(x)[:, 0])) if cells is None else cells
    out = answer_or_named_error(lambda: discretise(rho, n, d, method, seed=seed),
                                "n", "d", "method", "rho", "rho(points)", "seed")
    if out is not None:
        x, w = out
        assert x.shape == (n, d) and np.allclose(np.linalg.norm(x, axis=1), 1.0)
        assert np.all(w >= 0) and np.isclose(w.sum(), 1.0)


FLOW_OUTPUTS = {"same": lambda x: x, "nan": lambda x: x * np.nan, "twice": lambda x: 2 * x,
                "complex": lambda x: x + 0j, "short": lambda x: x[:1], "list": lambda x: x.tolist(),
                "float32": lambda x: x.astype(np.float32), "inf": lambda x: x / 0.0}


@settings(FUZZ, max_examples=20)
@given(which=st.sampled_from(["quantiles", "triangles"]), output=st.sampled_from(sorted(FLOW_OUTPUTS)),
       n=st.one_of(st.integers(2, 24), st.sampled_from([-1, 1.5])),
       jump=st.one_of(st.floats(1e-3, 1.0), st.floats(1e-3, 1.0), extreme_floats), rounds=st.integers(-1, 2))
def test_fuzz_refined(which, output, n, jump, rounds):
    from meanfield.sampling import refined_quantiles, refined_triangles

    def flow(x, w):
        return FLOW_OUTPUTS[output](np.roll(x, 1, axis=0))      # a flow that permutes the atoms
    if which == "quantiles":
        out = answer_or_named_error(lambda: refined_quantiles(lambda x: 1 + 0.5 * x[:, 0], flow, n, rounds=rounds,
                                                              jump=jump), "flow(x, w)", "n", "jump", "rounds")
        atoms, weights = (None, None) if out is None else out
    else:
        out = answer_or_named_error(lambda: refined_triangles(lambda x: 1 + 0.5 * x[:, 2], flow, level=1,
                                                              rounds=rounds, jump=jump), "flow(x, w)", "jump", "rounds")
        atoms, weights = (None, None) if out is None else (out.final, out.weights)
    if atoms is not None:
        assert np.allclose(np.linalg.norm(atoms, axis=1), 1.0) and np.isclose(weights.sum(), 1.0)


@settings(FUZZ, max_examples=15)
@given(beta=st.sampled_from([0.0, 1e-300, 1e3, 1e9, 1e12, 1e300]), d=st.sampled_from([2, 3, 10, 10 ** 4, 10 ** 6]),
       n=st.one_of(st.integers(-1, 20), st.just(10 ** 10)))
def test_fuzz_zonal_extremes(beta, d, n):
    from meanfield.compare import zonal as zonal_analysis
    from meanfield.solvers import zonal
    sol = answer_or_named_error(lambda: zonal.solve(mf.SA(beta), lambda s: 1 + 0.3 * s, [0.0, 0.05], d, cells=16),
                                "beta", "d")
    if sol is not None:
        assert np.all(np.isfinite(sol.masses)) and np.all(sol.masses >= -1e-14)
        assert np.allclose(sol.masses.sum(axis=1), 1.0, rtol=1e-12)
    x = answer_or_named_error(lambda: zonal_analysis.sample(lambda s: 1 + 0.3 * s, n, d, seed=0), "n", "d")
    if x is not None:
        assert x.shape == (n, d) and np.allclose(np.linalg.norm(x, axis=1), 1.0)


@settings(FUZZ, max_examples=15)
@given(n=st.one_of(st.integers(2, 6), st.integers(2, 6), st.sampled_from([-1, 12, 100, 2.5])),
       beta=st.one_of(st.floats(0, 20), st.floats(0, 20), extreme_floats),
       random_starts=st.one_of(st.integers(0, 3), st.sampled_from([-1, 1.5])), symmetric=st.booleans())
def test_fuzz_critical_points(n, beta, random_starts, symmetric):
    from meanfield import landscape
    found = answer_or_named_error(lambda: landscape.critical_points(n, beta, random_starts, symmetric=symmetric,
                                                                    max_iter=20, budget=1.0),
                                  "n", "beta", "random_starts", "budget")
    for cp in found or []:
        assert np.all(np.isfinite(cp.theta)) and np.isfinite(cp.energy) and cp.residual <= 1e-10


@settings(FUZZ, max_examples=8)
@given(beta=st.one_of(st.floats(0, 10), st.floats(0, 10), st.sampled_from([1e300, -1.0, np.nan])),
       ns=st.lists(st.one_of(st.integers(4, 24), st.integers(4, 24), st.sampled_from([-1, 2.5])), min_size=2,
                   max_size=2),
       grids=st.lists(st.one_of(st.integers(8, 40), st.integers(8, 40), st.sampled_from([-1, 10 ** 9])), min_size=2,
                      max_size=2),
       t_end=st.one_of(st.floats(1e-3, 0.5), st.floats(1e-3, 0.5), extreme_floats))
def test_fuzz_convergence_study(beta, ns, grids, t_end):
    from meanfield.convergence import core as convergence
    result = answer_or_named_error(lambda: convergence.study(mf.SA(beta), mf.perturbed_uniform(2, seed=1), [0.0, t_end],
                                                             ns, grids), "beta", "n", "grid", "cells", "t_eval",
                                   "budget")
    if result is not None:
        assert np.all(result.w1 >= 0) and np.all(result.w1 <= np.pi + 1e-9)


# --------------------------------------------------------------------------- causal, hardmax, adaptive (issue 38)

@settings(FUZZ, max_examples=12)
@given(model=models, rho=st.one_of(hnp.arrays(np.float64, (4, 16), elements=st.floats(0, 1e300)), arrays()),
       t_end=st.one_of(st.floats(1e-3, 0.3), extreme_floats), dt=st.one_of(st.none(), extreme_floats))
def test_fuzz_causal_solve(model, rho, t_end, dt):
    sol = answer_or_named_error(lambda: causal.solve(model, rho, [0.0, t_end], dt=dt),
                                "rho0", "t_eval", "dt", "beta", "model", "cells", "slices")
    if sol is not None:
        assert np.allclose(sol.mass, 1.0, rtol=1e-12) and np.all(sol.rho >= -1e-14)


@settings(FUZZ, max_examples=15)
@given(beta=st.one_of(st.floats(0, 50), extreme_floats), x=points(d=3),
       t_end=st.one_of(st.floats(1e-3, 1.0), extreme_floats), dt=st.one_of(st.floats(1e-3, 0.5), extreme_floats),
       scheme=st.sampled_from(["rk4", "euler", "nope"]))
def test_fuzz_hardmax_solve(beta, x, t_end, dt, scheme):
    sol = answer_or_named_error(lambda: hardmax.solve(mf.Hardmax(beta), x, [0.0, t_end], dt=dt, scheme=scheme),
                                "Q", "beta", "x0", "t_eval", "dt", "scheme")
    if sol is not None:
        assert np.allclose(np.linalg.norm(sol.x, axis=-1), 1.0, atol=1e-8)


@settings(FUZZ, max_examples=10)
@given(model=models, rho=st.one_of(hnp.arrays(np.float64, 42, elements=st.floats(0, 1e300)), arrays()),
       t_end=st.one_of(st.floats(1e-3, 0.3), extreme_floats), interval=st.one_of(st.floats(1e-2, 1.0), extreme_floats),
       finest=st.sampled_from([1, 2, 3, 20, -1]))
def test_fuzz_adaptive_solve(model, rho, t_end, interval, finest):
    sol = answer_or_named_error(lambda: adaptive.solve(model, rho, [0.0, t_end], base=1, finest=finest,
                                                       interval=interval, budget=BUDGET),
                                "rho0", "t_eval", "interval", "finest", "beta", "budget", "MAX_FINEST")
    if sol is not None:
        assert np.allclose(sol.mass, 1.0, rtol=1e-12) and all(np.all(r >= -1e-14) for r in sol.rho)


@settings(FUZZ, max_examples=10)
@given(model=models, rho=st.one_of(hnp.arrays(np.float64, 16, elements=st.floats(0, 1e300)), arrays()),
       t_end=st.one_of(st.floats(1e-3, 0.5), extreme_floats), interval=st.one_of(st.floats(1e-2, 1.0), extreme_floats),
       finest=st.sampled_from([16, 64, 1024, 100, 0]))
def test_fuzz_adaptive_circle_solve(model, rho, t_end, interval, finest):
    sol = answer_or_named_error(lambda: adaptive_circle.solve(model, rho, [0.0, t_end], cells=16, finest_cells=finest,
                                                              interval=interval, budget=BUDGET),
                                "rho0", "t_eval", "interval", "finest_cells", "beta", "budget", "cells")
    if sol is not None:
        assert np.allclose(sol.mass, 1.0, rtol=1e-12) and all(np.all(r >= -1e-14) for r in sol.rho)
