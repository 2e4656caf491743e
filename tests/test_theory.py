"""Closed-form theory and exact solutions against independent formulas and the particle solver."""
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import iv, spherical_in

import meanfield as mf
from meanfield import exact, theory


@pytest.mark.parametrize("beta", [0.3, 1.0, 4.0, 9.0, 60.0])
@pytest.mark.parametrize("l", [1, 2, 3, 4])
def test_growth_rates_match_bessel_formulas(beta, l):
    assert np.isclose(theory.growth_rate(mf.USA(beta), 2, l), l * l * iv(l, beta) / beta, rtol=1e-12)
    assert np.isclose(theory.growth_rate(mf.SA(beta), 2, l), l * l * iv(l, beta) / (beta * iv(0, beta)),
                      rtol=1e-12)
    i_l, i_0 = spherical_in(l, beta), spherical_in(0, beta)
    assert np.isclose(theory.growth_rate(mf.USA(beta), 3, l), l * (l + 1) * i_l / beta, rtol=1e-12)
    assert np.isclose(theory.growth_rate(mf.SA(beta), 3, l), l * (l + 1) * i_l / (beta * i_0), rtol=1e-12)
    assert np.isclose(theory.growth_rate(mf.SA(beta, V=-1), 3, l), -theory.growth_rate(mf.SA(beta), 3, l))


@pytest.mark.parametrize("d", [2, 3, 7])
def test_funk_hecke_coefficient_by_quadrature(d):
    """c_l = ∫ e^{βt} P_l^{(d)}(t) dν_d(t), ν_d the law of <x, e> for uniform x, P^{(d)} Gegenbauer-normalised."""
    from scipy.special import eval_gegenbauer, gamma
    beta, alpha = 2.5, (d - 2) / 2
    norm = gamma(d / 2) / (np.sqrt(np.pi) * gamma((d - 1) / 2))
    for l in range(4):
        poly = (lambda t: eval_gegenbauer(l, alpha, t) / eval_gegenbauer(l, alpha, 1.0)) if d > 2 else \
            (lambda t: np.cos(l * np.arccos(t)))
        val = quad(lambda t: np.exp(beta * t) * poly(t) * (1 - t * t) ** ((d - 3) / 2) * norm, -1, 1)[0]
        assert np.isclose(theory.funk_hecke(beta, d, l), val, rtol=1e-8)


def test_beta_zero_limits_and_most_unstable_mode():
    for d in (2, 3, 5):
        assert np.isclose(theory.growth_rate(mf.SA(1e-9), d, 1), theory.growth_rate(mf.SA(0.0), d, 1))
        assert theory.growth_rate(mf.SA(0.0), d, 1) == (d - 1) / d
    for beta in (8.0, 32.0, 128.0):
        assert abs(theory.most_unstable_mode(mf.SA(beta), 2) - np.sqrt(2 * beta)) <= 1.0
    with pytest.raises(ValueError, match="attractive"):
        theory.most_unstable_mode(mf.SA(4.0, V=-1), 2)


@pytest.mark.parametrize("Model", [mf.SA, mf.USA])
@pytest.mark.parametrize("beta", [1.0, 4.0, 9.0])
def test_lattice_displacement_modes_grow_at_lambda_k(Model, beta):
    """n equally spaced particles displaced by ε cos(kθ) grow at λ_k up to aliasing O(I_{n-k}(β))."""
    n, eps = 128, 1e-7
    model = Model(beta)
    lattice = 2 * np.pi * np.arange(n) / n
    for k in range(1, 5):
        u = np.cos(k * lattice)
        rate = mf.velocity(model, mf.circle_points(lattice + eps * u))
        tangent = np.stack([-np.sin(lattice + eps * u), np.cos(lattice + eps * u)], axis=1)
        particles_rate = np.sum(rate * tangent, axis=1) / (eps * u)
        mask = np.abs(u) > 0.5
        assert np.allclose(particles_rate[mask], theory.growth_rate(model, 2, k), rtol=1e-5)


def test_speed_bound_is_the_maximal_two_point_speed():
    for beta in (0.0, 0.5, 3.0, 40.0):
        t = np.linspace(-1, 1, 200001)
        assert np.isclose(theory.speed_bound(mf.USA(beta)), np.max(np.exp(beta * t) * np.sqrt(1 - t * t)),
                          rtol=1e-8)
    assert theory.speed_bound(mf.SA(30.0)) == 1.0


def test_wrapped_cauchy_is_normalised_with_the_right_mean():
    r = 0.6
    mass = quad(lambda th: exact.wrapped_cauchy_density(th, r), -np.pi, np.pi)[0]
    mean = quad(lambda th: np.cos(th) * exact.wrapped_cauchy_density(th, r), -np.pi, np.pi)[0]
    assert np.isclose(mass, 1.0) and np.isclose(mean, r)
    th = np.linspace(-np.pi, np.pi, 7)
    cdf = [quad(lambda s: exact.wrapped_cauchy_density(s, r), -np.pi, b)[0] for b in th]
    assert np.allclose(exact.wrapped_cauchy_cdf(th, r), cdf, atol=1e-10)


def test_wrapped_cauchy_radius_solves_the_order_parameter_ode():
    """β = 0 Kuramoto: the order parameter of the wrapped Cauchy family obeys dr/dt = r(1-r²)/2."""
    t = np.linspace(0, 5, 11)
    r = exact.wrapped_cauchy_radius(t, 0.2)
    from scipy.integrate import solve_ivp
    ode = solve_ivp(lambda _t, y: 0.5 * y * (1 - y * y), (0, 5), [0.2], t_eval=t, rtol=1e-12, atol=1e-14).y[0]
    assert np.allclose(r, ode, atol=1e-10)


def test_mobius_family_mean_and_normalisation():
    s = 0.45
    w = np.array([0.0, 0.0, s])
    # integrate over colatitude: the density is zonal around w
    dens = lambda c: exact.mobius_density(np.array([[np.sqrt(1 - c * c), 0.0, c]]), w)[0]  # noqa: E731
    mass = 2 * np.pi * quad(dens, -1, 1)[0]
    mean = 2 * np.pi * quad(lambda c: c * dens(c), -1, 1)[0]
    assert np.isclose(mass, 1.0, rtol=1e-10) and np.isclose(mean, exact.mobius_mean(s), rtol=1e-10)
    y = exact.mobius_push(mf.uniform_sphere(200_000, 3, seed=0), w)
    assert abs(y.mean(axis=0)[2] - exact.mobius_mean(s)) < 5e-3


# paper.md §3.7: t*(β) with γ_β(t*) = 1 - 1e-3, printed to the digits shown
CLUSTERING_TIMES = {
    ("SA", 32): {0.1: "5.19", 1: "5.27", 2: "5.46", 4: "6.95", 6: "16.0", 9: "178.7"},
    ("SA", 128): {0.1: "5.88", 1: "5.91", 2: "5.98", 4: "6.57", 6: "10.35", 9: "82.6"},
    ("USA", 32): {0.1: "4.86", 1: "2.90", 2: "1.88", 4: "1.13", 6: "0.870", 9: "0.686"},
}


@pytest.mark.parametrize("name, n", list(CLUSTERING_TIMES))
def test_clustering_time_matches_the_paper_table(name, n):
    Model = {"SA": mf.SA, "USA": mf.USA}[name]
    for beta, printed in CLUSTERING_TIMES[name, n].items():
        t = theory.clustering_time(Model(beta), n, delta=1e-3)
        half_digit = 0.5 * 10.0 ** -len(printed.partition(".")[2])
        assert abs(t - float(printed)) <= half_digit, (beta, t, printed)
        assert abs(t / float(printed) - 1) <= 1.1e-3


@pytest.mark.parametrize("Model", [mf.SA, mf.USA])
def test_clustering_time_is_where_the_equiangular_ode_reaches_one_minus_delta(Model):
    for beta, n, delta in [(0.5, 4, 1e-2), (3.0, 32, 1e-3), (7.0, 128, 1e-4)]:
        t = theory.clustering_time(Model(beta), n, delta)
        rho = theory.equiangular_curve(Model(beta), n, [0.0, t])
        assert rho[-1] == pytest.approx(1 - delta, abs=1e-9)


def test_clustering_time_closed_form_and_inverse_table():
    # n = 2, β = 0: γ = tanh t, so t* = artanh(1 - δ)
    assert theory.clustering_time(mf.SA(0.0), 2, 1e-3) == pytest.approx(np.arctanh(1 - 1e-3), rel=1e-10)
    from scipy.optimize import brentq
    # β_c(30) on Γ_{∞,1e-3}: paper.md prints 6.91 (n = 32) and 7.79 (n = 128); the quadrature
    # gives 6.910 and 7.785 (t*(7.79) = 30.12 by the same ODE), so the second is read to 0.01
    for n, printed, tol in [(32, 6.91, 0.005), (128, 7.79, 0.01)]:
        beta = brentq(lambda b: theory.clustering_time(mf.SA(b), n) - 30.0, 4.0, 9.0)
        assert abs(beta - printed) <= tol


def test_clustering_time_rejects_bad_input():
    with pytest.raises(ValueError, match="delta"):
        theory.clustering_time(mf.SA(1.0), 8, delta=0.0)
    with pytest.raises(ValueError, match="attractive"):
        theory.clustering_time(mf.SA(1.0, V=-1), 8)
    with pytest.raises(ValueError, match="n"):
        theory.clustering_time(mf.SA(1.0), 1)
