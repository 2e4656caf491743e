"""Optimal-transport distances against closed forms and the independent exact solver, and
sampling of tokens from densities against exact laws."""
import numpy as np
import pytest
from scipy import stats

import meanfield as mf
from meanfield import exact, measures
from meanfield.transport import sphere as transport
from meanfield.geometry import circle_points, random_rotation, uniform_sphere
from meanfield.transport import wasserstein

EXACT = ["circle", "emd", "multiscale"]


def great_circle(theta, rotation):
    """Points at angles θ on the great circle R(e_1, e_2) of S^2."""
    return np.column_stack([np.cos(theta), np.sin(theta), np.zeros_like(theta)]) @ rotation.T


def angle_gap(s, t):
    return np.abs((s - t + np.pi) % (2 * np.pi) - np.pi)


# --- closed forms -----------------------------------------------------------------------------

@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("p", [1, 2, 3.5])
@pytest.mark.parametrize("s, t", [(0.3, 2.0), (5.9, 0.2), (0.0, np.pi - 1e-9), (1.0, 1.0 + 1e-9), (4.0, 4.0)])
def test_two_diracs_on_circle_are_at_geodesic_distance(method, p, s, t):
    value = wasserstein(circle_points([s]), None, circle_points([t]), None, p=p, method=method)
    assert abs(value - angle_gap(s, t)) < 1e-8


@pytest.mark.parametrize("p", [1, 2, 3])
def test_two_diracs_on_sphere_are_at_geodesic_distance(p):
    x, y = uniform_sphere(5, 3, seed=1), uniform_sphere(5, 3, seed=2)
    for xi, yi in zip(x, y):
        expected = np.arccos(np.clip(xi @ yi, -1, 1))
        assert abs(wasserstein(xi[None], None, yi[None], None, p=p) - expected) < 1e-8
    near = mf.normalise(x[0] + 1e-9 * np.cross(x[0], y[0]))
    assert abs(wasserstein(x[:1], None, near[None], None) - 1e-9 * np.linalg.norm(np.cross(x[0], y[0]))) < 1e-15


@pytest.mark.parametrize("d, method", [(2, "circle"), (2, "emd"), (3, "emd"), (5, "emd"), (3, "multiscale"),
                                       (5, "multiscale")])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_dirac_against_any_measure(d, method, p):
    """W_p(δ_x, ν)^p = ∫ d(x, y)^p dν: the only coupling is the product."""
    rng = np.random.default_rng(d)
    y, b = uniform_sphere(37, d, seed=rng), rng.random(37)
    x = uniform_sphere(1, d, seed=rng)
    expected = (b @ np.arccos(np.clip(y @ x[0], -1, 1)) ** p / b.sum()) ** (1 / p)
    assert abs(wasserstein(x, None, y, b, p=p, method=method) - expected) < 1e-8


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("p", [1, 2, 4])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_rotated_equispaced_measure_on_circle(method, p, n):
    """n equispaced atoms rotated by α <= π/n: every atom's nearest target is at distance α."""
    theta = 2 * np.pi * np.arange(n) / n + 0.7
    for alpha in (1e-6, 0.3 * np.pi / n, np.pi / n):
        value = wasserstein(circle_points(theta), None, circle_points(theta + alpha), None, p=p, method=method)
        assert abs(value - alpha) < 1e-8


@pytest.mark.parametrize("p", [1, 2])
def test_rotated_equispaced_measure_on_a_great_circle_of_s2(p):
    R = random_rotation(3, seed=5)
    n, alpha = 6, 0.4
    theta = 2 * np.pi * np.arange(n) / n
    assert abs(wasserstein(great_circle(theta, R), None, great_circle(theta + alpha, R), None, p=p) - alpha) < 1e-8


@pytest.mark.parametrize("method", EXACT)
@pytest.mark.parametrize("p", [1, 2, 3])
def test_uniform_atoms_against_a_finer_uniform_measure(method, p):
    """n equispaced atoms vs nK equispaced atoms (K per arc, symmetric about each atom):
    W_p^p = mean over k of |offset_k|^p, the offsets (k + 1/2 - K/2) 2π/(nK)."""
    n, K = 12, 9
    coarse = 2 * np.pi * np.arange(n) / n
    offsets = (np.arange(K) + 0.5 - K / 2) * 2 * np.pi / (n * K)
    fine = (coarse[:, None] + offsets[None]).ravel()
    expected = np.mean(np.abs(offsets) ** p) ** (1 / p)
    assert abs(wasserstein(circle_points(coarse), None, circle_points(fine), None, p=p, method=method)
               - expected) < 1e-8


@pytest.mark.parametrize("d", [2, 3])
def test_rotation_invariance_and_symmetry(d):
    rng = np.random.default_rng(11)
    x, y = uniform_sphere(40, d, seed=rng), uniform_sphere(25, d, seed=rng)
    a, b = rng.random(40), rng.random(25)
    R = random_rotation(d, seed=3)
    value = wasserstein(x, a, y, b)
    assert abs(wasserstein(x @ R.T, a, y @ R.T, b) - value) < 1e-10
    assert abs(wasserstein(y, b, x, a) - value) < 1e-10
    assert wasserstein(x, a, x, a) < 1e-12
    # rescaled weights agree only to round-off δ ~ 1e-16 after normalisation, and W_2 is only
    # Hölder-1/2 in the weights (W_2 <= π sqrt(δ)): a floor of ~1e-8, not an error
    assert wasserstein(x, a, x, 3 * a) < np.pi * np.sqrt(1e-15)


# --- the circle algorithm against the independent exact solver --------------------------------

@pytest.mark.parametrize("p", [1, 1.5, 2, 3])
@pytest.mark.parametrize("trial", range(4))
def test_circle_algorithm_matches_network_simplex(p, trial):
    rng = np.random.default_rng(100 + trial)
    n, m = rng.integers(1, 90, size=2)
    x = circle_points(rng.random(n) * 2 * np.pi)
    y = circle_points(np.concatenate([rng.random(m - 1) * 2 * np.pi, mf.circle_angles(x[:1])]))  # a shared atom
    a, b = rng.random(n), rng.random(m)
    a[rng.random(n) < 0.2] = 0.0
    a[0] = 1.0
    assert abs(wasserstein(x, a, y, b, p=p, method="circle") - wasserstein(x, a, y, b, p=p, method="emd")) < 1e-10


def test_circle_is_the_automatic_choice_in_the_plane():
    x, y = uniform_sphere(30, 2, seed=1), uniform_sphere(20, 2, seed=2)
    value, info = wasserstein(x, None, y, None, return_info=True)
    assert info["method"] == "circle" and info["exact"] and info["p"] == 2.0
    assert isinstance(value, float)


def test_auto_falls_back_to_sliced_beyond_the_exact_size_and_says_so(monkeypatch):
    x, y = uniform_sphere(50, 3, seed=1), uniform_sphere(40, 3, seed=2)
    exact, info = wasserstein(x, None, y, None, return_info=True)
    assert info["method"] == "emd"
    monkeypatch.setattr(transport, "EXACT_LIMIT", 50 * 40 - 1)
    value, info = wasserstein(x, None, y, None, return_info=True)
    assert info["method"] == "sliced" and not info["exact"]
    assert value == wasserstein(x, None, y, None, method="sliced")


def test_sliced_distance_is_repeatable_and_not_w2():
    x, y = uniform_sphere(50, 3, seed=1), uniform_sphere(40, 3, seed=2)
    value, info = wasserstein(x, None, y, None, method="sliced", return_info=True)
    assert info["method"] == "sliced" and not info["exact"]
    assert value == wasserstein(x, None, y, None, method="sliced")          # seeded: repeatable
    assert 0 < value < wasserstein(x, None, y, None, method="emd")


def test_sliced_distance_vanishes_for_equal_measures_and_grows_with_separation():
    x = uniform_sphere(60, 3, seed=4)
    assert wasserstein(x, None, x, None, method="sliced") < 1e-12
    R = random_rotation(3, seed=0)
    values = []
    for angle in (0.05, 0.2, 0.8):
        c, s = np.cos(angle), np.sin(angle)
        turn = R @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ R.T      # about the axis R e_3
        values.append(wasserstein(x, None, x @ turn.T, None, method="sliced"))
    assert values[0] < values[1] < values[2]


# --- input validation ---------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    x, y = uniform_sphere(4, 3, seed=1), uniform_sphere(5, 3, seed=2)
    with pytest.raises(ValueError, match="non-negative"):
        wasserstein(x, [1, -1, 1, 1], y, None)
    with pytest.raises(ValueError, match="positive total"):
        wasserstein(x, np.zeros(4), y, None)
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        wasserstein(x, None, y, np.ones(4))
    with pytest.raises(ValueError, match="p must be >= 1"):
        wasserstein(x, None, y, None, p=0.5)
    with pytest.raises(TypeError, match="p must be a real"):
        wasserstein(x, None, y, None, p="2")
    with pytest.raises(ValueError, match="unknown method"):
        wasserstein(x, None, y, None, method="sinkhorn")
    with pytest.raises(ValueError, match="same sphere"):
        wasserstein(x, None, uniform_sphere(5, 2, seed=1), None)
    with pytest.raises(ValueError, match="circle"):
        wasserstein(x, None, y, None, method="circle")
    with pytest.raises(ValueError, match="unit vectors"):
        wasserstein(2 * x, None, y, None)
    with pytest.raises(ValueError, match="NaN"):
        wasserstein(x, [1, np.nan, 1, 1], y, None)


# --- measures: sampling and initial densities ---------------------------------------------------

def test_sphere_area():
    assert np.isclose(measures.sphere_area(2), 2 * np.pi, rtol=1e-14)
    assert np.isclose(measures.sphere_area(3), 4 * np.pi, rtol=1e-14)
    assert np.isclose(measures.sphere_area(4), 2 * np.pi ** 2, rtol=1e-14)


def test_circle_sampling_follows_the_wrapped_cauchy_law():
    r = 0.6
    rho = lambda x: exact.wrapped_cauchy_density(mf.circle_angles(x), r)      # noqa: E731
    x = measures.sample_density(rho, 20000, 2, seed=3)
    theta = (mf.circle_angles(x) + np.pi) % (2 * np.pi) - np.pi
    assert stats.kstest(theta, lambda t: exact.wrapped_cauchy_cdf(t, r)).pvalue > 1e-3
    # the exact order parameter |∫ x dμ| = r, within 4 standard errors of the sample mean
    assert abs(np.linalg.norm(x.mean(axis=0)) - r) < 4 * np.sqrt(0.5 * (1 - r ** 2) / 20000)


def test_sphere_sampling_by_rejection_matches_the_mobius_push_forward():
    w = np.array([0.1, -0.3, 0.4])
    rho = lambda x: exact.mobius_density(x, w)                                # noqa: E731
    x = measures.sample_density(rho, 20000, 3, seed=7)
    y = exact.mobius_push(uniform_sphere(20000, 3, seed=8), w)
    e = w / np.linalg.norm(w)
    assert stats.ks_2samp(x @ e, y @ e).pvalue > 1e-3
    mean = exact.mobius_mean(np.linalg.norm(w))
    assert np.linalg.norm(x.mean(axis=0) - mean * e) < 4 * np.sqrt(1 / 20000)
    assert x.shape == (20000, 3) and np.allclose(np.linalg.norm(x, axis=1), 1)


def test_rejection_restarts_when_the_probe_bound_is_exceeded(monkeypatch):
    """A density spike missed by the probes raises the bound instead of biasing the draw."""
    monkeypatch.setattr(measures, "BOUND_PROBES", 16)
    pole = np.array([0.0, 0.0, 1.0])
    rho = lambda x: 1.0 + 400.0 * (x @ pole > 0.99)                             # noqa: E731
    x = measures.sample_density(rho, 4000, 3, seed=1)
    cap = 2 * np.pi * 0.01                                                     # area of {<x, pole> > 0.99}
    p_cap = 401 * cap / (4 * np.pi + 400 * cap)
    assert abs(np.mean(x @ pole > 0.99) - p_cap) < 4 * np.sqrt(p_cap * (1 - p_cap) / 4000)


def test_sampling_is_seeded_and_batched():
    rho = measures.perturbed_uniform(2, seed=1)
    a = measures.sample_density(rho, 100, 2, seed=5, batch=3)
    b = measures.sample_density(rho, 100, 2, seed=5, batch=3)
    assert a.shape == (3, 100, 2) and np.array_equal(a, b)
    assert not np.array_equal(a[0], a[1])


def _sphere_quadrature(f):
    """∫_{S^2} f dσ by Gauss–Legendre in z times the trapezoid rule in longitude (exact for
    polynomials of degree < 64)."""
    z, wz = np.polynomial.legendre.leggauss(40)
    phi = 2 * np.pi * np.arange(80) / 80
    zz, pp = np.meshgrid(z, phi, indexing="ij")
    s = np.sqrt(1 - zz ** 2)
    pts = np.stack([s * np.cos(pp), s * np.sin(pp), zz], axis=-1).reshape(-1, 3)
    return float(np.sum(f(pts).reshape(zz.shape) * wz[:, None]) * 2 * np.pi / 80)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_perturbed_uniform_is_a_positive_probability_density(seed):
    rho2 = measures.perturbed_uniform(2, amplitude=0.5, degree=6, seed=seed)
    theta = 2 * np.pi * np.arange(256) / 256
    values = rho2(circle_points(theta))
    assert abs(values.mean() * 2 * np.pi - 1) < 1e-13
    assert values.min() >= 0.5 / (2 * np.pi) - 1e-15
    rho3 = measures.perturbed_uniform(3, amplitude=0.5, degree=6, seed=seed)
    assert abs(_sphere_quadrature(rho3) - 1) < 1e-13
    assert rho3(uniform_sphere(5000, 3, seed=seed)).min() >= 0.5 / (4 * np.pi) - 1e-15
    assert rho2.spec["seed"] == seed


@pytest.mark.parametrize("d, l", [(2, 1), (2, 5), (3, 1), (3, 4)])
def test_zonal_harmonic_is_normalised_and_orthogonal_to_constants(d, l):
    assert np.isclose(measures.zonal_harmonic(l, d, 1.0), 1.0)
    u = np.array([0.6, 0.0, 0.8])[:d] / np.linalg.norm(np.array([0.6, 0.0, 0.8])[:d])
    if d == 2:
        theta = 2 * np.pi * np.arange(64) / 64
        assert abs(np.mean(measures.zonal_harmonic(l, d, circle_points(theta) @ u))) < 1e-14
    else:
        assert abs(_sphere_quadrature(lambda x: measures.zonal_harmonic(l, d, np.clip(x @ u, -1, 1)))) < 1e-13


def test_bad_densities_are_refused():
    with pytest.raises(TypeError, match="callable"):
        measures.sample_density(np.ones(10), 5, 2)
    with pytest.raises(ValueError, match="non-negative"):
        measures.sample_density(lambda x: x[:, 0], 5, 2)
    with pytest.raises(ValueError, match="one density per point"):
        measures.sample_density(lambda x: np.ones(3), 5, 3)
    with pytest.raises(ValueError, match="amplitude must be < 1"):
        measures.perturbed_uniform(2, amplitude=1.5)
    with pytest.raises(ValueError, match="n must be >= 1"):
        measures.sample_density(lambda x: np.ones(len(x)), 0, 2)


def test_circle_w2_matches_the_network_simplex_where_one_binary_search_fails():
    """2000 vs 4000 stratified tokens of the default ρ_0: POT's binary search at eps = 1e-12 alone
    returned W_2 = 4.33 rad (> π); the exact value is 1.35e-3."""
    from meanfield.compare import initial_tokens
    from meanfield.measures import perturbed_uniform
    rho = perturbed_uniform(2)
    x = initial_tokens(rho, 2000, 2, "stratified", 0, 1)[0][0]
    y = initial_tokens(rho, 4000, 2, "stratified", 0, 1)[0][0]
    exact = wasserstein(x, None, y, None, p=2, method="emd")
    assert wasserstein(x, None, y, None, p=2, method="circle") == pytest.approx(exact, rel=1e-7)   # 1.1e-8


def test_circle_w2_matches_the_network_simplex_on_clustered_measures():
    """Two clusters 1e-3 rad wide, random cubed weights, 60 pairs: every W_2 agrees with the network
    simplex to 1e-9.  POT's binary search (with the best of three tolerances) failed on pairs 13 and 45
    here, returning 5-6 rad where W_2 <= π; the golden-section search over the shift replaced it."""
    for trial in range(60):
        rng = np.random.default_rng(trial)
        n, m = rng.integers(2, 60, 2)
        centres = rng.uniform(0, 2 * np.pi, 2)
        x = circle_points(centres[rng.integers(0, 2, n)] + 1e-3 * rng.standard_normal(n))
        y = circle_points(centres[rng.integers(0, 2, m)] + 1e-3 * rng.standard_normal(m))
        a, b = rng.uniform(0, 1, n) ** 3, rng.uniform(0, 1, m) ** 3
        exact = wasserstein(x, a, y, b, p=2, method="emd")
        assert abs(wasserstein(x, a, y, b, p=2, method="circle") - exact) <= 1e-9 * max(exact, 1e-3), trial


@pytest.mark.parametrize("shift", [3e-6, 1e-9])
def test_circle_w2_of_a_tiny_rotation_is_the_rotation(shift):
    """W_2 between 1000 weighted atoms and the same atoms rotated by a shift far below their spacing
    is the shift: the minimum over the cut sits on a kink of the piecewise-linear cost, which the
    search evaluates (golden section alone stopped 2.6e-3 off at 1e-9)."""
    rng = np.random.default_rng(5)
    theta = np.sort(rng.uniform(0, 2 * np.pi, 1000))
    a = rng.uniform(size=1000)
    w2 = wasserstein(circle_points(theta), a, circle_points(theta + shift), a, p=2, method="circle")
    assert w2 == pytest.approx(shift, rel=1e-6)


def test_a_series_resolves_auto_once_from_its_largest_problem():
    from meanfield.transport import series_method
    assert series_method("auto", 3, transport.EXACT_LIMIT) == "emd"
    assert series_method("auto", 3, transport.EXACT_LIMIT + 1) == "sliced"
    assert series_method("auto", 2, 10 * transport.EXACT_LIMIT) == "circle"
    assert series_method("multiscale", 3, 1) == "multiscale"
    with pytest.raises(ValueError, match="method"):
        series_method("exact", 3, 1)


def test_compare_never_switches_method_inside_its_series(monkeypatch):
    """Atoms merge as tokens cluster, so later outputs are smaller problems: "auto" per call would switch
    from sliced to exact emd mid-series. Here the first output keeps all 40 tokens and later ones half."""
    import meanfield as mf
    from meanfield.compare import distances as compare_module
    from meanfield.compare import compare
    calls = []

    def shrinking(x, w, tol):
        calls.append(len(calls))
        return (x, w) if len(calls) == 1 else (x[::2], np.full(len(x[::2]), 1.0 / len(x[::2])))

    monkeypatch.setattr(compare_module, "merge_atoms", shrinking)
    monkeypatch.setattr(transport, "EXACT_LIMIT", 40 * 162 - 1)      # 20 x 162 would be exact
    c = compare(mf.SA(1.0), mf.perturbed_uniform(3, seed=0), [0.0, 0.5, 1.0], n=40, seeds=1, geometry="sphere",
                grid="uniform", level=2, grid_reference=False, progress=False)
    assert len(calls) == 3
    assert c.info["transport_methods"] == ["sliced"] and c.info["transport_exact"] is False
