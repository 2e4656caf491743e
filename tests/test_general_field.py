"""The general-Q, K, V field on cells (solvers/general_field.py): the harmonic expansion against direct
log-sum-exp quadrature, direct quadrature against an independent brute-force sum and the particle field,
the isotropic special cases against the isotropic engines, the energy E_A, growth rates, bad input."""
import numpy as np
import pytest
from scipy.special import ive

import meanfield as mf
from meanfield.solvers import circle, general_field as gf, particles, sphere
from meanfield.solvers.kernels import spectral
from meanfield.solvers.meshes import voronoi as mesh


def random_heads(rng, d, beta_norm, normalised=True, heads=1):
    """SA (or USA) heads with Gaussian Q, K, V and β scaled so that β‖Q^T K‖_2 = beta_norm."""
    cls = mf.SA if normalised else mf.USA
    out = []
    for _ in range(heads):
        Q, K, V = rng.normal(size=(3, d, d))
        out.append(cls(beta_norm / np.linalg.norm(Q.T @ K, 2), Q=Q, K=K, V=V))
    return out[0] if heads == 1 else mf.MultiHead(out)


def cells(d):
    """(points, masses) of a non-uniform cell measure: icosphere level 3 on S^2, 300 random points on S^1."""
    if d == 3:
        m = mesh.icosphere(3)
        x, areas = m.points, m.areas
    else:
        theta = np.sort(np.random.default_rng(7).uniform(0, 2 * np.pi, 300))
        x, areas = np.column_stack([np.cos(theta), np.sin(theta)]), np.full(300, 2 * np.pi / 300)
    rho = np.exp(2.0 * x[:, 0] - x[:, 1] ** 2)
    masses = rho * areas
    return x, masses / masses.sum()


def brute_force(head, x, y, m):
    """The field and log Φ by NumPy with the largest exponent factored out: independent of the package."""
    A, V = head.interaction(x.shape[1])
    s = head.beta * (x @ A @ y.T)
    top = s.max(axis=1, keepdims=True)
    k = m * np.exp(s - top)
    phi = k.sum(axis=1)
    G = (k @ y) @ V.T
    G = G / phi[:, None] if head.normalised else G * np.exp(top)
    return G - np.sum(G * x, axis=1, keepdims=True) * x, np.log(phi) + top[:, 0]


def relative_error(model, X, reference, log_phi):
    """max_i |X_i - X_i^ref| in the field's natural scale: Σ_h ‖V_h‖ (SA), Σ_h ‖V_h‖ Φ_h(x_i) (USA)."""
    d = X.shape[1]
    scale = sum(np.linalg.norm(h.interaction(d)[1], 2) * (1.0 if h.normalised else np.exp(lp))
                for h, lp in zip(getattr(model, "heads", (model,)), log_phi))
    return float(np.max(np.linalg.norm(X - reference, axis=1) / scale))


# ---------------------------------------------------------------- Must show: expansion = direct quadrature

@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("normalised", [True, False])
@pytest.mark.parametrize("beta_norm", [1.0, 10.0, 30.0])
@pytest.mark.parametrize("heads", [1, 3])
def test_expansion_equals_direct_quadrature(d, normalised, beta_norm, heads):
    model = random_heads(np.random.default_rng(int(10 * beta_norm) + d + heads), d, beta_norm, normalised, heads)
    x, m = cells(d)
    expansion = gf.GeneralField(model, x, summation="expansion")
    X, log_phi = expansion(m)
    Xd, log_phi_d, info = gf.attention_field(model, x, x, m, "direct")
    assert info["summation"] == ["direct"] * heads
    assert expansion.info["summation"] == ["expansion"] * heads
    assert expansion.info["degree"] == [gf.degree(beta_norm, d)] * heads
    assert relative_error(model, X, Xd, log_phi_d) < 1e-12
    assert np.abs(log_phi - log_phi_d).max() < 1e-12 * max(1.0, beta_norm)


def test_fallback_recomputes_where_the_expansion_is_not_trusted():
    """SA at β‖A‖ = 30 with the mass near one point: Φ is tiny far from it, those targets are summed
    directly (and only those), and the result still equals direct quadrature."""
    rng = np.random.default_rng(3)
    model = random_heads(rng, 3, 30.0)
    x, _ = cells(3)
    m = np.exp(40.0 * (x @ np.array([0.0, 0.6, 0.8]) - 1.0))
    m /= m.sum()
    field = gf.GeneralField(model, x, summation="expansion")
    X, log_phi = field(m)
    assert 0 < field.info["recomputed"][0] < x.shape[0]
    Xd, log_phi_d, _ = gf.attention_field(model, x, x, m, "direct")
    assert relative_error(model, X, Xd, log_phi_d) < 1e-12


def test_targets_apart_from_sources_and_feedforward():
    """Face-like targets (midpoints of pairs of sources) and a feed-forward term: expansion = direct."""
    rng = np.random.default_rng(4)
    y, m = cells(3)
    mid = y[:200] + 0.3 * y[1:201]         # targets off the sources
    mid /= np.linalg.norm(mid, axis=1, keepdims=True)
    ff = mf.FeedForward(rng.normal(size=(3, 4)), rng.normal(size=(4, 3)), rng.normal(size=4), "tanh")
    model = mf.MultiHead([random_heads(rng, 3, 5.0), random_heads(rng, 3, 3.0, False)], feedforward=ff)
    X, log_phi, _ = gf.attention_field(model, mid, y, m, "expansion")
    Xd, log_phi_d, _ = gf.attention_field(model, mid, y, m, "direct")
    assert relative_error(model, X, Xd, log_phi_d) < 1e-12
    assert np.abs(np.sum(X * mid, axis=1)).max() < 1e-14


# ---------------------------------------------------------------- direct quadrature against independent sums

@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("normalised", [True, False])
def test_direct_equals_brute_force_and_particles(d, normalised):
    rng = np.random.default_rng(d)
    head = random_heads(rng, d, 20.0, normalised)
    x = mf.uniform_sphere(60, d, seed=d)
    y = mf.uniform_sphere(80, d, seed=d + 1)
    m = rng.random(80)
    m /= m.sum()
    X, log_phi, _ = gf.attention_field(head, x, y, m, "direct")
    Xb, log_phi_b = brute_force(head, x, y, m)
    assert relative_error(head, X, Xb, log_phi_b[None]) < 1e-13
    assert np.abs(log_phi[0] - log_phi_b).max() < 1e-13 * 20
    # the particle field of the weighted points, targets = sources
    Xs, log_phi_s, _ = gf.attention_field(head, y, y, m, "auto")
    Xp = particles.velocity(head, y, weights=m, summation="direct")
    assert relative_error(head, Xs, Xp, log_phi_s) < 1e-13


# ---------------------------------------------------------------- the isotropic special cases

def rotation(rng, d):
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_isotropic_cases_equal_the_sphere_engine(cls, sign):
    cells3 = mesh.icosphere(3)
    rho = np.exp(1.5 * cells3.points[:, 2] - cells3.points[:, 0] ** 2)
    rho /= (rho * cells3.areas).sum()
    R = rotation(np.random.default_rng(0), 3)
    for model, beta in ((cls(3.0, Q=R, K=R, V=sign), 3.0), (cls(1.5, Q=2.0, V=sign * np.eye(3)), 3.0),
                        (cls(2.0, Q=0.5 * R, K=3 * R, V=sign), 3.0)):
        X = gf.attention_field(model, cells3.points, cells3.points, rho * cells3.areas, "expansion")[0]
        Xi = sphere.cell_field(cls(beta, V=sign), rho, cells3, summation="direct")[0]
        assert np.abs(X - Xi).max() < 1e-14 * max(1.0, np.abs(Xi).max())


@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
def test_isotropic_cases_equal_the_circle_engine(cls):
    N = 256
    theta = circle.cell_angles(N)
    x = np.column_stack([np.cos(theta), np.sin(theta)])
    rho = np.exp(np.cos(theta) + 0.5 * np.sin(2 * theta))
    rho /= rho.sum() * 2 * np.pi / N
    R = rotation(np.random.default_rng(1), 2)
    for model in (cls(4.0, Q=R, K=R), cls(2.0, Q=2.0)):
        for how in ("expansion", "direct"):
            X = gf.attention_field(model, x, x, rho * 2 * np.pi / N, how)[0]
            u = -X[:, 0] * np.sin(theta) + X[:, 1] * np.cos(theta)
            ui = circle.velocity(cls(4.0), rho)
            assert np.abs(u - ui).max() < 1e-13 * max(1.0, np.abs(ui).max())


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("normalised", [True, False])
def test_slopes_equal_finite_differences_along_geodesics(d, normalised):
    """GeneralField.stage's f'(0) of f(s) = <X(x(s)), t(s)> against central differences of the directly
    summed field at x(±s) (two heads)."""
    rng = np.random.default_rng(14)
    model = mf.MultiHead([random_heads(rng, d, b, normalised) for b in (4.0, 9.0)])
    y, m = cells(d)
    cells_k = rng.choice(y.shape[0], 40, replace=False)
    x = y[cells_k]
    t = rng.normal(size=x.shape)
    t -= np.sum(t * x, axis=1, keepdims=True) * x
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    X, log_phi, slopes, trusted = gf.GeneralField(model, y, summation="expansion").stage(m, cells_k, t)
    assert trusted.all()
    Xd, _, _ = gf.attention_field(model, y, y, m, "direct")
    assert relative_error(model, X, Xd, log_phi) < 1e-12
    s = 1e-4
    f = []
    for sign in (1.0, -1.0):
        xs = x * np.cos(s) + sign * t * np.sin(s)
        ts = -sign * x * np.sin(s) + t * np.cos(s)           # d/ds of x(±s), up to the sign of s
        Xs = gf.attention_field(model, xs, y, m, "direct")[0]
        f.append(np.sum(Xs * ts, axis=1))
    fd = (f[0] - f[1]) / (2 * s)
    scale = np.abs(fd).max()
    assert np.abs(slopes - fd).max() < 1e-6 * scale


# ---------------------------------------------------------------- the uniform measure: an exact field

@pytest.mark.parametrize("normalised", [True, False])
def test_uniform_measure_on_the_circle_has_the_exact_field(normalised):
    """Equispaced cells are a spectrally accurate quadrature: the cell field is the exact one to round-off."""
    N = 512
    theta = circle.cell_angles(N)
    x = np.column_stack([np.cos(theta), np.sin(theta)])
    model = mf.MultiHead([random_heads(np.random.default_rng(s), 2, 8.0, normalised) for s in (1, 2)])
    exact, log_phi = gf.uniform_field(model, x)
    for how in ("expansion", "direct"):
        X, log_phi_h, _ = gf.attention_field(model, x, x, np.full(N, 1 / N), how)
        assert relative_error(model, X, exact, log_phi) < 1e-13
        assert np.abs(log_phi_h - log_phi).max() < 1e-13


def test_uniform_measure_on_icospheres_converges_to_the_exact_field():
    """The cell measure of the uniform density on icospheres 3, 4, 5: error O(h^2) against the exact field
    (a check of the field that shares nothing with the expansion or the quadrature)."""
    head = random_heads(np.random.default_rng(5), 3, 4.0)
    errors = []
    for level in (3, 4, 5):
        cells3 = mesh.icosphere(level)
        exact, log_phi = gf.uniform_field(head, cells3.points)
        X = gf.attention_field(head, cells3.points, cells3.points, cells3.areas / (4 * np.pi), "expansion")[0]
        errors.append(relative_error(head, X, exact, log_phi))
    assert errors[0] < 1e-2 and errors[0] / errors[1] > 3.5 and errors[1] / errors[2] > 3.5
    assert np.abs(exact).max() > 0.1                     # the uniform state is not at rest here


# ---------------------------------------------------------------- harmonic pieces

def test_kernel_sums_of_second_moments():
    """The sums the field's derivatives need, W = m (1, y, y_a y_b), against the brute-force kernel."""
    rng = np.random.default_rng(11)
    head = random_heads(rng, 3, 8.0)
    y, m = cells(3)
    W = np.column_stack([m, m[:, None] * y] + [m * y[:, a] * y[:, b] for a in range(3) for b in range(a, 3)])
    field = gf.GeneralField(head, y, summation="expansion")
    S, shift = field.kernel_sums(0, W)
    A, _ = head.interaction(3)
    exact = np.exp(head.beta * (y @ A @ y.T) - shift[:, None]) @ W
    assert np.abs(S - exact).max() < 1e-13 * np.abs(W).sum(axis=0).max()
    with pytest.raises(ValueError, match="one row per source"):
        field.kernel_sums(0, W[1:])
    with pytest.raises(ValueError, match="directly"):
        gf.GeneralField(head, y, summation="direct").kernel_sums(0, W)


def test_usa_overflow_is_refused():
    y = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(FloatingPointError, match="overflows"):
        gf.attention_field(mf.USA(750.0, Q=np.diag([1.0, 0.9])), y, y, [0.5, 0.5], "expansion")

def test_kernel_weights_are_the_bessel_coefficients():
    b = np.array([0.0, 0.3, 2.0, 30.0, 300.0])
    L = 40
    assert np.allclose(gf.kernel_weights(b, L, 2), ive(np.arange(L + 1), b[:, None]), rtol=1e-13, atol=1e-300)
    spherical = np.sqrt(np.pi / (2 * b[1:, None])) * ive(np.arange(L + 1) + 0.5, b[1:, None])
    assert np.allclose(gf.kernel_weights(b, L, 3)[1:], spherical, rtol=1e-12, atol=1e-300)
    assert np.allclose(gf.kernel_weights(b[:1], L, 3)[0], np.eye(L + 1)[0])


@pytest.mark.parametrize("d", [2, 3])
def test_truncation_meets_the_stated_tolerance(d):
    """With the fallback off (rtol = 1), the expansion's error against direct quadrature stays below the
    stated truncation tolerance and falls with it (the accuracy/degree trade-off); at the default
    tolerance the degree is the isotropic engines'."""
    rng = np.random.default_rng(9)
    head = random_heads(rng, d, 30.0)
    x, m = cells(d)
    Xd, log_phi_d, _ = gf.attention_field(head, x, x, m, "direct")
    for b in (0.5, 3.0, 30.0, 1000.0):       # the tail computed here, just above 1e-17, and the isotropic degree
        assert gf.degree(b, d, 1.0000001e-17) == gf.degree(b, d) == spectral.degree(b, d)
    errors, degrees = [], []
    for tolerance in (1e-4, 1e-8, 1e-12):
        field = gf.GeneralField(head, x, summation="expansion", rtol=1.0, tolerance=tolerance)
        errors.append(relative_error(head, field(m)[0], Xd, log_phi_d))
        degrees.append(field.info["degree"][0])
        assert field.info["tolerance"] == tolerance
        assert errors[-1] < 1e3 * tolerance                # the tail is relative to e^{b}, the field to Φ
    assert degrees[0] < degrees[1] < degrees[2] < gf.degree(30.0, d)
    assert errors[0] > errors[1] > errors[2]
    with pytest.raises(ValueError, match="tolerance"):
        gf.GeneralField(head, x, tolerance=0.0)


def test_blocked_tables_equal_stored_ones(monkeypatch):
    """Tables too large to store are rebuilt in blocks at each call: the same sums, to round-off."""
    rng = np.random.default_rng(15)
    model = mf.MultiHead([random_heads(rng, 3, 6.0), random_heads(rng, 3, 2.0, False)])
    y, m = cells(3)
    t = np.cross(y[:5], [0.0, 0.0, 1.0])
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    stored = gf.GeneralField(model, y, summation="expansion")
    monkeypatch.setattr(gf, "TABLE_BYTES", 1 << 16)
    monkeypatch.setattr(gf, "BLOCK_BYTES", 1 << 18)
    blocked = gf.GeneralField(model, y, summation="expansion")
    assert stored.info["tables"] == ["stored"] * 2 and blocked.info["tables"] == ["blocked"] * 2
    *values, trusted = stored.stage(m, np.arange(5), t)
    *blocked_values, blocked_trusted = blocked.stage(m, np.arange(5), t)
    assert np.array_equal(trusted, blocked_trusted)
    for a, b in zip(values, blocked_values):
        assert np.abs(a - b).max() <= 1e-13 * max(1.0, np.abs(a).max())


def test_degenerate_interaction_is_a_constant_kernel():
    """Q^T K of rank 1 vanishes on a plane of targets (b(x) = 0): the kernel is 1 there."""
    Q = np.zeros((3, 3))
    Q[0, 0] = 5.0
    x, m = cells(3)
    model = mf.SA(1.0, Q=Q, V=np.diag([1.0, 2.0, 3.0]))
    X, log_phi, _ = gf.attention_field(model, x, x, m, "expansion")
    Xd, log_phi_d, _ = gf.attention_field(model, x, x, m, "direct")
    assert relative_error(model, X, Xd, log_phi_d) < 1e-13


def test_auto_summation_and_info():
    x, m = cells(3)
    head = random_heads(np.random.default_rng(2), 3, 5.0)
    assert gf.GeneralField(head, x[:20]).info["summation"] == ["direct"]
    info = gf.GeneralField(head, x).info
    assert info["summation"] == ["expansion"] and info["degree"] == [gf.degree(5.0, 3)]
    assert info["tolerance"] == 1e-17
    assert gf.GeneralField(random_heads(np.random.default_rng(2), 4, 5.0), mf.uniform_sphere(50, 4, seed=0)
                           ).info["summation"] == ["direct"]


# ---------------------------------------------------------------- energy

def brute_energy(head, y, m):
    A, _ = head.interaction(y.shape[1])
    return float(m @ np.exp(head.beta * (y @ A @ y.T)) @ m / (2 * head.beta))


@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
def test_energy_of_symmetric_interaction(cls):
    rng = np.random.default_rng(5)
    Q = rng.normal(size=(3, 3))
    A = Q.T @ Q                                # K = Q: symmetric Q^T K
    y, m = cells(3)
    E, why = gf.energy(cls(2.0, Q=Q, K=Q, V=A), y, m)
    assert why.startswith("non-decreasing")
    assert E == pytest.approx(brute_energy(cls(2.0, Q=Q, K=Q), y, m), rel=1e-13)
    E, why = gf.energy(cls(2.0, Q=Q, K=Q, V=-A), y, m)
    assert why.startswith("non-increasing") and E == pytest.approx(brute_energy(cls(2.0, Q=Q, K=Q), y, m), rel=1e-13)
    # the isotropic case is mf.energy
    assert gf.energy(cls(3.0), y, m)[0] == pytest.approx(mf.energy(y, 3.0, weights=m), rel=1e-13)
    assert gf.energy(cls(0.0), y, m)[0] == pytest.approx(mf.energy(y, 0.0, weights=m), rel=1e-13)


def test_energy_reuses_a_field_of_the_same_points():
    rng = np.random.default_rng(15)
    Q = rng.normal(size=(3, 3))
    model = mf.SA(2.0, Q=Q, K=Q, V=Q.T @ Q)
    y, m = cells(3)
    field = gf.GeneralField(model, y, summation="expansion")
    assert gf.energy(model, y, m, field=field)[0] == pytest.approx(brute_energy(model, y, m), rel=1e-12)
    with pytest.raises(ValueError, match="targets and sources"):
        gf.energy(model, y, m, field=gf.GeneralField(model, y[::-1].copy()))
    with pytest.raises(ValueError, match="targets and sources"):
        gf.energy(model, y, m, field=gf.GeneralField(model, y, y.copy()))


def test_sphere_operator_energy_uses_its_own_tables_and_equals_cell_energy():
    rng = np.random.default_rng(16)
    Q = rng.normal(size=(3, 3))
    model = mf.USA(1.5, Q=Q, K=Q, V=Q.T @ Q)
    cells_ = sphere.icosphere(2)
    rho = 1 + 0.5 * cells_.points[:, 0]
    op = sphere.SphereOperator(model, cells_)
    E = op.energy(rho)
    assert E == pytest.approx(brute_energy(model, cells_.points, rho * cells_.areas), rel=1e-12)
    assert E == pytest.approx(sphere.cell_energy(model, rho, cells_), rel=1e-13)
    X, log_phi = sphere.cell_field(model, rho, cells_)             # general heads: one cached field per mesh
    Xd, log_phid = particles.attention_field(model, cells_.points[None], (rho * cells_.areas)[None],
                                             summation="direct")
    assert np.allclose(X, Xd[0], rtol=0, atol=1e-12 * np.abs(Xd).max())
    assert np.allclose(log_phi, log_phid[0], rtol=1e-12)


def test_energy_without_gradient_structure_is_nan_with_the_reason():
    rng = np.random.default_rng(6)
    y, m = cells(2)
    Q, K = rng.normal(size=(2, 2, 2))
    cases = {"not symmetric": mf.SA(1.0, Q=Q, K=K, V=Q.T @ K),
             "neither": mf.USA(1.0, V=np.diag([1.0, 2.0])),
             "several heads": mf.MultiHead([mf.SA(1.0), mf.SA(2.0)]),
             "feed-forward": mf.MultiHead([mf.USA(1.0)], feedforward=mf.FeedForward(np.eye(2), np.eye(2), [0, 0]))}
    for words, model in cases.items():
        E, why = gf.energy(model, y, m)
        assert np.isnan(E) and why.startswith("not a gradient flow") and words in why


def test_energy_of_usa_heads_adds_up():
    y, m = cells(3)
    heads = [mf.USA(1.0, Q=np.diag([1.0, 2.0, 0.5]), V=np.diag([1.0, 2.0, 0.5])), mf.USA(2.0)]
    E, _ = gf.energy(mf.MultiHead(heads), y, m)
    assert E == pytest.approx(sum(brute_energy(h, y, m) for h in heads), rel=1e-13)


def test_energy_does_not_overflow_before_it_must():
    y = np.array([[1.0, 0.0], [0.0, 1.0]])
    E, _ = gf.energy(mf.SA(700.0, Q=1.01, V=1.01), y, [0.5, 0.5])
    assert E == pytest.approx(np.exp(707.0 - np.log(4 * 700.0)) / 1.0, rel=1e-12)
    with pytest.raises(FloatingPointError, match="overflows"):
        gf.energy(mf.SA(700.0, Q=1.03, V=1.03), y, [0.5, 0.5], summation="direct")


def test_energy_increases_along_the_particle_flow():
    """E_A of the particles' weighted measure is non-decreasing along SA and USA with V = A symmetric
    (the gradient-flow structure, paper §2.4) and non-increasing with V = -A."""
    # the particle field of the weighted measure is ``general_field``'s (test_direct_equals_...), so this
    # checks the energy's sign convention and the gradient-flow condition V = ±Q^T K
    rng = np.random.default_rng(12)
    Q = rng.normal(size=(3, 3))
    x0 = mf.uniform_sphere(40, 3, seed=3)
    w = rng.random(40)
    w /= w.sum()
    for cls in (mf.SA, mf.USA):
        for sign in (1.0, -1.0):
            model = cls(1.0, Q=Q, K=Q, V=sign * Q.T @ Q)
            sol = particles.solve(model, x0, np.linspace(0.0, 1.0, 6), weights=w, energy=False, progress=False)
            E = [gf.energy(model, x, w)[0] for x in sol.x]
            assert np.all(sign * np.diff(E) >= -1e-13 * max(E))          # round-off once clustered
            assert sign * (E[-1] - E[0]) > 0.01 * E[0]


def test_speed_bound_holds_for_general_weights():
    """theory.speed_bound against the largest field of random two-point measures (and a Dirac next to
    the target, where the USA bound is nearly attained for scalar weights)."""
    rng = np.random.default_rng(13)
    for d in (2, 3):
        models = [random_heads(rng, d, 3.0, normalised) for normalised in (True, False)]
        models += [mf.USA(1.5, Q=2.0, V=-0.5), mf.SA(2.0, Q=-1.0, V=3.0)]
        for model in models:
            bound = mf.theory.speed_bound(model)
            y = mf.uniform_sphere(400, d, seed=d)
            top = 0.0
            for j in range(0, 400, 2):
                X = gf.attention_field(model, y, y[j:j + 2], np.array([0.5, 0.5]), "direct")[0]
                top = max(top, np.linalg.norm(X, axis=1).max())
            assert top <= bound * (1 + 1e-12)
            if model.value_scalar is not None:
                assert top > 0.5 * bound


# ---------------------------------------------------------------- growth rates of the uniform state

@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
@pytest.mark.parametrize("c, v", [(2.0, 1.0), (-1.5, 1.0), (0.5, -2.0)])
def test_growth_rate_of_scalar_interaction_matches_the_linearised_field(cls, c, v):
    """λ_l of Q^T K = c I, V = v I against the linearised field of the grid measure on S^1:
    ρ = (1 + ε cos lθ)/2π gives X = a ε sin lθ tangentially and λ_l = -a l (central difference in ε)."""
    N, beta = 512, 1.5
    theta = circle.cell_angles(N)
    x = np.column_stack([np.cos(theta), np.sin(theta)])
    model = cls(beta, Q=c, V=v)
    field = gf.GeneralField(model, x, summation="direct")
    for l in (1, 2, 3):
        u = []
        for eps in (1e-5, -1e-5):
            X, _ = field((1 + eps * np.cos(l * theta)) / N)
            u.append(-X[:, 0] * np.sin(theta) + X[:, 1] * np.cos(theta))
        a = (2 / N) * np.sum((u[0] - u[1]) / 2e-5 * np.sin(l * theta))
        assert mf.growth_rate(model, 2, l) == pytest.approx(-a * l, rel=1e-8, abs=1e-12)


def test_growth_rate_of_a_rotation_pair_is_the_isotropic_one():
    R = rotation(np.random.default_rng(8), 3)
    assert mf.growth_rate(mf.SA(2.0, Q=R, K=R), 3, 2) == pytest.approx(mf.growth_rate(mf.SA(2.0), 3, 2), rel=1e-12)
    with pytest.raises(ValueError, match="Q\\^T K = c I and V = v I"):
        mf.growth_rate(mf.SA(2.0, Q=np.diag([1.0, 2.0, 3.0])), 3, 2)


# ---------------------------------------------------------------- bad input

BAD_MATRICES = [(np.full((3, 3), np.nan), "NaN or inf"), (np.full((3, 3), np.inf), "NaN or inf"),
                (np.ones((3, 2)), "square"), (np.ones(3), "square"), (np.zeros((0, 0)), "square"),
                ("abc", "real numbers")]


@pytest.mark.parametrize("bad, match", BAD_MATRICES)
def test_bad_matrices_are_refused(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        mf.SA(1.0, Q=bad)


def test_matrices_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match="same R\\^d"):
        mf.USA(1.0, Q=np.eye(2), V=np.eye(3))


def test_bad_points_masses_and_summation_are_refused():
    x, m = cells(3)
    with pytest.raises(ValueError, match="unit vectors"):
        gf.GeneralField(mf.SA(1.0), 2 * x)
    with pytest.raises(ValueError, match="R\\^d"):
        gf.GeneralField(mf.SA(1.0), x, sources=np.eye(2))
    with pytest.raises(ValueError, match="has shape"):
        gf.GeneralField(mf.SA(1.0, Q=np.eye(2)), x)
    with pytest.raises(ValueError, match="summation"):
        gf.GeneralField(mf.SA(1.0), x, summation="fast")
    with pytest.raises(ValueError, match="S\\^1 or S\\^2"):
        gf.GeneralField(mf.SA(1.0), mf.uniform_sphere(5, 4, seed=0), summation="expansion")
    with pytest.raises(ValueError, match="causal"):
        gf.GeneralField(mf.SA(1.0, causal=True), x)
    field = gf.GeneralField(mf.SA(1.0), x)
    t = np.array([[0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="target indices"):
        field.stage(m, [x.shape[0]], t)
    with pytest.raises(ValueError, match="target indices"):
        field.stage(m, [0.5], t)
    with pytest.raises(ValueError, match="directly"):
        gf.GeneralField(mf.SA(1.0), x, summation="direct").stage(m, [0], t)
    ff = mf.FeedForward(np.eye(3), np.eye(3), np.zeros(3))
    with pytest.raises(ValueError, match="feed-forward"):
        gf.GeneralField(mf.MultiHead([mf.SA(1.0)], feedforward=ff), x).stage(m, [0], t)
    with pytest.raises(ValueError, match="non-negative"):
        field(-m)
    with pytest.raises(ValueError, match="one per source"):
        field(m[:-1])
    with pytest.raises(ValueError, match="NaN"):
        field(np.full_like(m, np.nan))


def test_serial_and_blas_products_agree(monkeypatch):
    rng = np.random.default_rng(17)
    Q, K, V = rng.normal(size=(3, 3, 3))
    small = mesh.icosphere(2)
    y, m = small.points, small.areas / small.areas.sum()
    field = gf.GeneralField(mf.SA(1.0, Q=Q, K=K, V=V), y, summation="expansion")
    assert field.expansions[0].targets.size + field.expansions[0].sources.size <= gf.SERIAL_ENTRIES
    t = np.cross(y, [0.3, 0.5, 0.8])
    serial = field.stage(m, np.arange(y.shape[0]), t)
    monkeypatch.setattr(gf, "SERIAL_ENTRIES", 0)
    blas = field.stage(m, np.arange(y.shape[0]), t)
    for a, b in zip(serial, blas):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-14 * np.abs(b).max())
