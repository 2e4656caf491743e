"""Fast (spectral) summation on S^1 and S^2 and the blocked direct kernel.

Independent references: Legendre polynomials and cosines (scipy) for the transforms,
extended-precision (long double) sums for the kernel sums, mpmath-free Bessel values from
scipy.special.ive, the NumPy dense reference and the direct kernel for the velocities.
"""
import resource

import numba
import numpy as np
import pytest
from scipy.special import eval_legendre, ive

import meanfield as mf
from meanfield.solvers import particles, reference
from meanfield.solvers.kernels import direct as kernels, harmonics, spectral


def weights_matrix(w, y):
    return np.column_stack([w] + [w * y[:, c] for c in range(y.shape[1])])


def clustered(n, d, centres, width, seed):
    rng = np.random.default_rng(seed)
    c = mf.uniform_sphere(centres, d, seed=seed + 1)
    return mf.normalise(c[rng.integers(0, centres, n)] + width * rng.standard_normal((n, d)))


def extended_sum(beta, x, y, W):
    """S_ic = sum_j W_jc e^{β(<x_i,y_j> - 1)} in long double."""
    t = x.astype(np.longdouble) @ y.astype(np.longdouble).T
    return (np.exp(beta * (t - 1)) @ W.astype(np.longdouble)).astype(float)


def natural_error(model, v, ref, log_phi_ref):
    """max_i |X_i - X_i^ref| in the field's scale: 1 (SA, |X| <= 1) or Φ(x_i) (USA, |X| <= Φ)."""
    scale = 1.0 if model.normalised else np.exp(log_phi_ref)[..., None]
    return np.max(np.abs(v - ref) / scale)


# ------------------------------------------------------------------ coefficients and transforms

@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [1e-3, 0.5, 9.0, 100.0, 400.0])
def test_kernel_coefficients_match_bessel_and_sum_to_one(d, beta):
    kappa = spectral.kernel_coefficients(beta, d)
    k = np.arange(kappa.size)
    bessel = ive(k, beta) if d == 2 else ive(k + 0.5, beta) * np.sqrt(np.pi / (2 * beta))
    assert np.allclose(kappa, bessel, rtol=1e-12, atol=0)
    weight = (np.where(k == 0, 1, 2) if d == 2 else 2 * k + 1) * kappa
    assert abs(weight.sum() - 1) < 4e-16 * kappa.size
    kk = np.arange(kappa.size, kappa.size + 60)   # the truncated tail is below 1e-17
    tail = 2 * ive(kk, beta) if d == 2 else (2 * kk + 1) * ive(kk + 0.5, beta) * np.sqrt(np.pi / (2 * beta))
    assert tail.sum() <= spectral.TRUNCATION
    if beta >= 9:
        assert abs(kappa.size - 1 - 8.6 * np.sqrt(beta)) < 10


def test_sphere_transforms_reproduce_the_addition_theorem():
    rng = np.random.default_rng(0)
    L = 14
    kappa = rng.uniform(0, 1, L + 1)
    x, y = mf.uniform_sphere(37, 3, seed=1), mf.uniform_sphere(101, 3, seed=2)
    W = rng.standard_normal((101, 3))
    A = harmonics.sphere_analysis(y, W, L)
    A *= (np.where(np.arange(L + 1) == 0, 1.0, 2.0)[:, None] * kappa[None, :])[:, :, None]
    S = np.empty((37, 3))
    harmonics.sphere_synthesis(x, A, S)
    kern = sum(kappa[l] * (2 * l + 1) * eval_legendre(l, x @ y.T) for l in range(L + 1))
    assert np.max(np.abs(S - kern @ W)) < 1e-13 * np.max(np.abs(kern @ W)) * L


def test_circle_transforms_reproduce_the_fourier_series():
    rng = np.random.default_rng(3)
    K = 11
    kappa = rng.uniform(0, 1, K + 1)
    th, ph = rng.uniform(0, 2 * np.pi, 40), rng.uniform(0, 2 * np.pi, 90)
    W = rng.standard_normal((90, 2))
    A = harmonics.circle_analysis(mf.circle_points(ph), W, K)
    A *= (np.where(np.arange(K + 1) == 0, 1.0, 2.0) * kappa)[:, None]
    S = np.empty((40, 2))
    harmonics.circle_synthesis(mf.circle_points(th), A, S)
    diff = th[:, None] - ph[None, :]
    kern = kappa[0] + sum(2 * kappa[k] * np.cos(k * diff) for k in range(1, K + 1))
    assert np.max(np.abs(S - kern @ W)) < 1e-13 * np.max(np.abs(kern @ W))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [1.0, 9.0, 100.0, 400.0])
def test_kernel_sum_error_within_the_documented_bound(d, beta):
    """|S_fast - S| <= δ sum_j |W_jc| against long-double sums, for spread and tight clusters."""
    delta = spectral.roundoff(beta, d)
    for width in (0.3, 1e-2, 0.0):
        y = clustered(400, d, 2, width, seed=int(beta) + d)
        x = np.vstack([y[:40], mf.uniform_sphere(40, d, seed=7)])
        W = weights_matrix(np.random.default_rng(1).uniform(0, 1, 400), y)
        err = np.abs(spectral.kernel_sum(beta, x, y, W) - extended_sum(beta, x, y, W))
        assert np.all(err <= delta * np.abs(W).sum(axis=0))


# ------------------------------------------------------------------ fast vs direct velocities

@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("n", [10, 1000])
def test_fast_equals_direct_velocity(d, n):
    x = mf.uniform_sphere(n, d, seed=n + d)[None]
    for beta in (0.5, 1.0, 4.0, 9.0, 25.0):
        for model in (mf.SA(beta), mf.USA(beta), mf.SA(beta, V=-1)):
            vf, lf = particles.attention_field(model, x, summation="fast")
            vd, ld = particles.attention_field(model, x, summation="direct")
            assert natural_error(model, vf, vd, ld) < 1e-10
            assert np.max(np.abs(lf - ld)) < 1e-10
            # for these well-spread tokens it also holds relative to max |X|
            assert np.max(np.abs(vf - vd)) < 1e-10 * np.max(np.abs(vd))


@pytest.mark.parametrize("d", [2, 3])
def test_fast_with_weighted_sources_as_in_the_finite_volume_solvers(d):
    rng = np.random.default_rng(d)
    y = mf.uniform_sphere(500, d, seed=11)
    w = rng.uniform(0, 1, 500) * (rng.uniform(0, 1, 500) > 0.3)     # cell masses, some empty
    for x in (y, mf.uniform_sphere(77, d, seed=12)):
        for model in (mf.SA(6.0), mf.USA(2.0, V=-1)):
            vf, lf = particles.attention_field(model, x[None], w[None], sources=y[None], summation="fast")
            with np.errstate(divide="ignore"):
                ref = reference.attention_field(model, x, y, w)
                lref = reference.log_potential(model, x, y, w)
            assert natural_error(model, vf[0], ref, lref) < 1e-10
            assert np.max(np.abs(lf[0] - lref)) < 1e-10


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [25.0, 50.0])
def test_sa_at_large_beta_falls_back_where_the_bound_fails(d, beta):
    """Two tight clusters plus lonely tokens: Φ at the lonely ones is ~1/n of the mass, the
    spectral sum loses its relative accuracy there and those targets are summed directly."""
    x = np.vstack([clustered(3000, d, 2, 0.02, seed=5), mf.uniform_sphere(6, d, seed=6)])[None]
    model = mf.SA(beta)
    stats = {}
    vf, lf = particles.attention_field(model, x, summation="fast", stats=stats)
    vd, ld = particles.attention_field(model, x, summation="direct")
    assert 0 < stats["recomputed"] < 60
    assert natural_error(model, vf, vd, ld) < 1e-10 and np.max(np.abs(lf - ld)) < 1e-10
    # one cluster seen from its antipodes: Φ ~ e^{-2β} of the mass
    y = clustered(500, d, 1, 0.02, seed=7)[None]
    w = np.full((1, 500), 1.0 / 500)
    far = np.concatenate([-y[:, :3], y[:, :3]], axis=1)
    vf, lf = particles.attention_field(model, far, w, sources=y, summation="fast", stats=stats)
    vd, ld = particles.attention_field(model, far, w, sources=y, summation="direct")
    assert natural_error(model, vf, vd, ld) < 1e-10 and np.max(np.abs(lf - ld)) < 1e-10
    # there the unchecked spectral field is useless: the fallback is not idle
    with np.errstate(invalid="ignore", divide="ignore"):
        raw, _, trusted = spectral.attention_field(model, far, y, w, rtol=np.inf)
        assert not np.all(np.abs(raw - vd)[0, :3] < 1e-3)
    assert np.allclose(raw[0, 3:], vd[0, 3:], atol=1e-12)


def test_fast_batches_equal_separate_calls():
    x = mf.uniform_sphere(800, 3, seed=13, batch=3)
    w = np.random.default_rng(13).uniform(0.1, 1, (3, 800))
    batch, log_phi = particles.attention_field(mf.USA(5.0), x, w, summation="fast")
    for b in range(3):
        one, lp = particles.attention_field(mf.USA(5.0), x[b][None], w[b][None], summation="fast")
        assert np.array_equal(batch[b], one[0]) and np.array_equal(log_phi[b], lp[0])


def test_fast_at_beta_zero_is_consensus():
    x = mf.uniform_sphere(300, 3, seed=4)
    mean = x.mean(axis=0)
    consensus = mean - (x @ mean)[:, None] * x
    for model in (mf.SA(0.0), mf.USA(0.0)):
        assert np.allclose(particles.velocity(model, x, summation="fast"), consensus, atol=1e-15)


@pytest.mark.parametrize("d,model", [(2, mf.SA(4.0)), (3, mf.SA(4.0)), (2, mf.USA(1.0)), (3, mf.USA(1.0, V=-1))])
def test_trajectories_fast_and_direct_agree_at_T10(d, model):
    x0 = mf.uniform_sphere(200, d, seed=20 + d)
    t = [0.0, 5.0, 10.0]
    fast = particles.solve(model, x0, t, dt=0.05, summation="fast")
    direct = particles.solve(model, x0, t, dt=0.05, summation="direct")
    assert fast.info["summation"] == "fast" and direct.info["summation"] == "direct"
    assert np.max(np.abs(fast.x - direct.x)) < 1e-8
    assert np.allclose(fast.energy, direct.energy, rtol=1e-10, atol=0)


def test_angle_form_fast_equals_direct():
    theta = np.random.default_rng(8).uniform(0, 2 * np.pi, (2, 300))
    for model in (mf.SA(9.0), mf.USA(2.0, V=-1)):
        fast = particles.angle_velocity(model, theta, summation="fast")
        direct = particles.angle_velocity(model, theta, summation="direct")
        scale = 1.0 if model.normalised else np.exp(model.beta)
        assert np.max(np.abs(fast - direct)) < 1e-10 * scale
    a = particles.solve_angles(mf.SA(4.0), theta[0], [0, 2.0], dt=0.05, summation="fast")
    b = particles.solve_angles(mf.SA(4.0), theta[0], [0, 2.0], dt=0.05, summation="direct")
    assert np.max(np.abs(a.theta - b.theta)) < 1e-9


def test_energy_uses_the_fast_summation_accurately():
    x = clustered(3000, 3, 5, 0.1, seed=9)
    for beta in (1.0, 9.0, 30.0):
        fast = mf.energy(x, beta, summation="fast")
        assert abs(fast - mf.energy(x, beta, summation="direct")) < 1e-11 * fast


def test_auto_chooses_by_cost_and_validity():
    resolve = particles.resolve_summation
    assert resolve(mf.SA(9.0), 3, 10, 10) == "direct"
    assert resolve(mf.SA(9.0), 3, 10**4, 10**4) == "fast"
    assert resolve(mf.USA(9.0, V=-1), 2, 10**4, 10**4) == "fast"
    assert resolve(mf.SA(9.0), 4, 10**5, 10**5) == "direct"
    assert resolve(mf.SA(9.0, Q=2.0), 3, 10**5, 10**5) == "direct"
    assert resolve(mf.SA(9.0), 3, 10**4, 10**4, "direct") == "direct"
    for model, d in ((mf.SA(1.0), 4), (mf.SA(1.0, V=np.diag([1.0, 2.0, 3.0])), 3), (mf.USA(1.0, K=0.5), 2)):
        with pytest.raises(ValueError, match="summation='fast'"):
            particles.velocity(model, mf.uniform_sphere(5, d, seed=0), summation="fast")
    with pytest.raises(ValueError, match="summation"):
        particles.solve(mf.SA(1.0), mf.uniform_sphere(5, 3, seed=0), [0, 1], summation="fmm")


def test_fast_is_deterministic_across_thread_counts():
    x = mf.uniform_sphere(5000, 3, seed=10)[None]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one, _ = particles.attention_field(mf.SA(9.0), x, summation="fast")
        numba.set_num_threads(before)
        many, _ = particles.attention_field(mf.SA(9.0), x, summation="fast")
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one, many)


# ------------------------------------------------------------------ the blocked direct kernel

@pytest.mark.parametrize("d", [2, 3, 16, 33])
@pytest.mark.parametrize("Model", [mf.SA, mf.USA])
def test_direct_kernel_matches_numpy_reference(Model, d):
    """Random Q, K, V, sources != targets, zero weights, sizes off the tile and block grid."""
    rng = np.random.default_rng(d)
    x, y = mf.uniform_sphere(37, d, seed=1), mf.uniform_sphere(301, d, seed=2)
    w = rng.uniform(0, 1, 301) * (rng.uniform(0, 1, 301) > 0.2)
    Q, K, V = (np.eye(d) + 0.3 * rng.standard_normal((d, d)) for _ in range(3))
    for model in (Model(1.7), Model(2.5, Q, K, V), Model(0.0, V=-1)):
        v, log_phi = particles.attention_field(model, x[None], w[None], sources=y[None], summation="direct")
        with np.errstate(divide="ignore"):
            ref = reference.attention_field(model, x, y, w)
            lref = reference.log_potential(model, x, y, w)
        assert np.max(np.abs(v[0] - ref)) <= 1e-12 * max(1.0, np.max(np.abs(ref)))
        assert np.max(np.abs(log_phi[0] - lref)) < 1e-12


def test_zero_weight_sources_with_huge_scores_do_not_poison_the_sum():
    """A massless source far above the running maximum must not give 0 · inf = NaN."""
    x = np.array([[1.0, 0.0, 0.0]])
    y = np.array([[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    v, log_phi = particles.attention_field(mf.SA(800.0), x[None], np.array([[1.0, 0.0]]), sources=y[None],
                                           summation="direct")
    assert np.all(np.isfinite(v)) and np.isclose(log_phi[0, 0], -800.0)


def test_vectorised_exponential():
    s = -np.concatenate([np.linspace(0, 708, 100001), np.random.default_rng(0).exponential(3, 10000)])
    got = np.array([kernels.exp_nonpositive(v) for v in s[::97]])
    assert np.max(np.abs(got / np.exp(s[::97]) - 1)) < 3e-16


def test_direct_kernel_streams_in_bounded_memory():
    """n = 6000 in d = 64: the dense n×n score matrix alone would take 288 MB."""
    x = mf.uniform_sphere(6000, 64, seed=3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    v = particles.velocity(mf.SA(1.0), x)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64 and np.all(np.isfinite(v))
