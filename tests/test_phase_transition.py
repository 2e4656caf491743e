"""The authors' unprojected Euler step, the span reduction and the direct sampler of span coordinates
(issue 27: the paper's phase diagrams, Γ_d -> Γ_∞)."""
import numpy as np
import pytest
from scipy import stats
from scipy.special import betainc

import meanfield as mf
from meanfield.cli import figures
from meanfield.geometry import span_coordinates, uniform_span_coordinates
from meanfield.solvers import euclidean, particles, span
from meanfield.theory import equiangular_curve


def test_unprojected_step_is_the_authors_update():
    rng = np.random.default_rng(0)
    d = 6
    Q, K, V = (np.eye(d) + 0.3 * rng.standard_normal((d, d)) for _ in range(3))
    model = mf.SA(3.0, Q=Q, K=K, V=V)
    x0 = mf.uniform_sphere(7, d, seed=1)
    D = euclidean.velocity(model, x0) + x0 @ V.T      # Σ_j P_ij V (x_j - x_i) + V x_i: the raw drift
    assert np.allclose(particles.unprojected_drift(model, x0), D, rtol=0, atol=1e-13)
    sol = particles.solve(model, x0, [0.0, 0.05], method="euler_unprojected", dt=0.05, energy=False)
    step = x0 + 0.05 * D
    assert np.allclose(sol.x[-1], step / np.linalg.norm(step, axis=1, keepdims=True), rtol=0, atol=1e-14)


def test_unprojected_euler_is_first_order_and_lags_the_ode():
    """Orthonormal start: the exact solution is the equiangular curve γ(t); the scheme's error at T
    halves with h, and its γ lies below γ(T) (the step is h/(1 + h <x_i, D_i>) < h: slow in t)."""
    n, T, model = 6, 2.0, mf.SA(4.0)
    x0 = np.eye(n)
    exact = equiangular_curve(model, n, [0.0, T])[-1]
    errors = []
    for h in (0.04, 0.02, 0.01):
        x = particles.solve(model, x0, [0.0, T], method="euler_unprojected", dt=h, energy=False).x[-1]
        gamma = x[0] @ x[1]
        errors.append(gamma - exact)
    errors = np.array(errors)
    assert np.all(errors < 0)
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(orders - 1.0) < 0.1), orders


def test_unprojected_refusals():
    x = mf.uniform_sphere(5, 3, seed=2)
    with pytest.raises(ValueError, match="summation"):
        particles.solve(mf.SA(1.0), x, [0, 1], method="euler_unprojected", summation="fast")
    with pytest.raises(ValueError, match="noise"):
        particles.solve(mf.SA(1.0), x, [0, 1], method="euler_unprojected", noise=0.1, seed=0)
    with pytest.raises(ValueError, match="one SA/USA head"):
        particles.solve(mf.MultiHead([mf.SA(1.0), mf.SA(2.0)]), x, [0, 1], method="euler_unprojected")
    with pytest.raises(ValueError, match="stability bound"):      # h |D| <= 1/2: dt = 0.6 > 0.5
        particles.solve(mf.SA(0.0), x, [0, 1], method="euler_unprojected", dt=0.6)
    with pytest.raises(ValueError, match="span"):
        particles.unprojected_drift(mf.SA(1.0), mf.uniform_sphere(3, 2000, seed=0))
    with pytest.raises(ValueError, match="angles"):
        particles.solve_angles(mf.SA(1.0), np.zeros(3), [0, 1], method="euler_unprojected")


@pytest.mark.parametrize("d", [128, 512])
@pytest.mark.parametrize("method", ["rk4", "euler_unprojected"])
def test_span_reduction_equals_the_full_solve(d, method):
    x0 = mf.uniform_sphere(16, d, seed=d, batch=2)
    t = np.linspace(0.0, 8.0, 5)
    full = particles.solve(mf.SA(5.0), x0, t, method=method, dt=0.1, energy=False)
    reduced = span.solve_in_span(mf.SA(5.0), x0, t, method=method, dt=0.1, energy=False)
    assert reduced.info["span_dimension"] == 16
    assert np.max(np.abs(full.x - reduced.x)) < 1e-12
    assert np.max(np.abs(full.x[-1] @ full.x[-1][0].T)) > 0.99       # it got somewhere: clusters formed


def test_span_reduction_refuses_general_weights():
    rng = np.random.default_rng(3)
    model = mf.SA(1.0, K=np.eye(40) + 0.1 * rng.standard_normal((40, 40)))
    with pytest.raises(ValueError, match="span"):
        span.solve_in_span(model, mf.uniform_sphere(4, 40, seed=0), [0, 1])


def test_span_coordinates_keep_the_tokens():
    x = mf.uniform_sphere(5, 30, seed=4, batch=3)
    c, basis = span_coordinates(x)
    assert c.shape == (3, 5, 5) and np.all(np.triu(c[0], 1) == 0) and np.all(np.diagonal(c, 0, 1, 2) > 0)
    assert np.allclose(c @ np.swapaxes(basis, 1, 2), x, atol=1e-14)


def test_direct_span_sampler_has_the_law_of_uniform_points():
    """Bartlett sampler against QR coordinates of actual uniform points (d = 20, n = 5): two-sample KS
    on coordinates and on the smallest Gram eigenvalue; and at d = 10^5 the inner products follow
    the exact law P(<x, y> > s) = I_{1-s²}((d-1)/2, 1/2)/2."""
    B, n, d = 4000, 5, 20
    direct = uniform_span_coordinates(n, d, seed=5, batch=B)
    qr = span_coordinates(mf.uniform_sphere(n, d, seed=6, batch=B))[0]
    for a, b in [(direct[:, 1, 0], qr[:, 1, 0]), (direct[:, 4, 4], qr[:, 4, 4]),
                 (np.linalg.eigvalsh(direct @ np.swapaxes(direct, 1, 2))[:, 0],
                  np.linalg.eigvalsh(qr @ np.swapaxes(qr, 1, 2))[:, 0])]:
        assert stats.ks_2samp(a, b).pvalue > 1e-3
    big = 100_000
    c = uniform_span_coordinates(3, big, seed=7, batch=3000)
    dots = np.einsum("bi,bi->b", c[:, 0], c[:, 2])

    def cdf(s):
        tail = 0.5 * betainc((big - 1) / 2.0, 0.5, 1.0 - s * s)
        return np.where(s >= 0, 1.0 - tail, tail)
    assert stats.kstest(dots, cdf).pvalue > 1e-3
    # exact law of the last diagonal entry: c_nn² = χ²_{d-n+1}/χ²_d ~ Beta((d-n+1)/2, (n-1)/2); one-sample KS
    # with 20000 draws, which rejects a planted off-by-one in the degrees of freedom (χ²_{d-i+2})
    B = 20_000
    exact = stats.beta((d - n + 1) / 2, (n - 1) / 2).cdf
    assert stats.kstest(uniform_span_coordinates(n, d, seed=8, batch=B)[:, -1, -1] ** 2, exact).pvalue > 1e-3
    rng = np.random.default_rng(9)
    wrong = np.tril(rng.standard_normal((B, n, n)), -1)
    wrong[:, np.arange(n), np.arange(n)] = np.sqrt(rng.chisquare(d + 1 - np.arange(n), size=(B, n)))
    assert stats.kstest(mf.normalise(wrong)[:, -1, -1] ** 2, exact).pvalue < 1e-6


def test_finite_dimension_helpers():
    """d*: the first d from which on every distance is within 5 % (NaN = censored); t50 from the median
    gap by log-linear interpolation, exact for an exponential decay."""
    fd = figures.load_script("finite_dimension")
    dims = [2, 4, 8, 16]
    assert fd.first_within(dims, np.array([0.01, 0.2, 0.03, 0.01])) == 8
    assert fd.first_within(dims, np.array([0.01, np.nan, 0.01, 0.01])) == 8
    assert fd.first_within(dims, np.array([0.0, 0.0, 0.0, 0.06])) is None
    t = np.linspace(0.0, 1.0, 11)
    assert abs(fd.crossing(t, np.exp(-3.0 * t), np.exp(-1.35)) - 0.45) < 1e-12
    assert np.isnan(fd.crossing(t, np.exp(-t), 1e-3))
