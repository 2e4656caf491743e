"""Bridges between particles and densities (issue 15): kde, DensitySolution.at / .sample,
ParticleSolution.measure."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.interpolation import SphericalTriangulation
from meanfield.measures import perturbed_uniform
from meanfield.solvers import circle, particles, sphere
from meanfield.solvers.meshes.voronoi import fibonacci_points
from meanfield.solvers.results import DensitySolution

CIRCLE_Q = mf.circle_points(2 * np.pi * (np.arange(4096) + 0.5) / 4096)
SPHERE_Q = fibonacci_points(40_000)


def integral(f, d):
    """∫ f dσ by the midpoint rule on S^1 / the equal-area Fibonacci rule on S^2."""
    q = CIRCLE_Q if d == 2 else SPHERE_Q
    return f(q).mean() * (2 * np.pi if d == 2 else 4 * np.pi)


def solution(points, areas, rho):
    rho = np.atleast_2d(rho)
    return DensitySolution(t=np.arange(rho.shape[0], dtype=float), points=points, areas=areas, rho=rho,
                           mass=rho @ areas, energy=np.zeros(rho.shape[0]), model=mf.SA(1.0))


# --- kde --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [2, 3])
def test_kde_integrates_to_one_for_any_bandwidth(d):
    x = mf.uniform_sphere(50, d, seed=0)
    for h in (0.05, 0.3, 2.0, None):
        f = mf.kde(x, bandwidth=h)
        assert integral(f, d) == pytest.approx(1.0, abs=2e-3 if h == 0.05 else 1e-6)
        assert np.all(f(x) > 0)
    # a very narrow kernel (κ = 10^6) does not overflow: its peak is the Gaussian's (2π h²)^{-q/2}
    f = mf.kde(x[:1], bandwidth=1e-3)
    assert f(x[:1])[0] == pytest.approx((2 * np.pi * 1e-6) ** (-(d - 1) / 2), rel=1e-5)


@pytest.mark.parametrize("d", [2, 3])
def test_kde_converges_to_the_sampled_density(d):
    """L1 error of the Silverman-rule estimate from n i.i.d. draws of the default ρ_0 falls as n
    grows (rate n^{-2/(q+4)} for q = d - 1 in theory: factor 0.66 / 0.71 per 8x)."""
    rho = perturbed_uniform(d)
    errors = []
    for n in (250, 2000):
        f = mf.kde(mf.sample_density(rho, n, d, seed=1))
        errors.append(integral(lambda q: np.abs(f(q) - rho(q)), d))
    assert errors[1] < 0.85 * errors[0]
    assert errors[1] < 0.2


def test_kde_weights_and_use_as_initial_density():
    x = mf.circle_points(np.array([0.0, np.pi]))
    f = mf.kde(x, weights=[3.0, 1.0], bandwidth=0.2)
    assert f(x[:1])[0] == pytest.approx(3 * f(x[1:])[0], rel=1e-12)
    sol = circle.solve(mf.SA(1.0), f, [0.0, 0.1], cells=64)
    assert sol.mass[-1] == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="bandwidth"):
        mf.kde(x, bandwidth=-1.0)
    with pytest.raises(ValueError, match="d = 4"):
        mf.kde(mf.uniform_sphere(5, 4, seed=0))


# --- at ---------------------------------------------------------------------------------------------

def test_at_on_the_circle_is_exact_on_piecewise_linear_data_and_second_order():
    cells = 64
    centres = circle.cell_angles(cells)
    sol = solution(mf.circle_points(centres), np.full(cells, 2 * np.pi / cells), np.ones(cells))
    # data linear between the centres (a tent with kinks at centres 10 and 40): reproduced exactly
    tent = lambda th: np.interp(th, [centres[10], centres[40]], [1.0, 4.0])
    sol.rho[0] = tent(centres)
    th = np.random.default_rng(0).uniform(centres[10], centres[40], 500)
    np.testing.assert_allclose(sol.at(mf.circle_points(th), 0), tent(th), rtol=1e-12)
    # periodic: between the last and the first centre
    sol.rho[0] = np.arange(cells, dtype=float)
    assert sol.at(mf.circle_points(np.array([0.0])), 0)[0] == pytest.approx(0.5 * (cells - 1))
    errors = []
    for cells in (64, 128, 256):
        c = circle.cell_angles(cells)
        s = solution(mf.circle_points(c), np.full(cells, 2 * np.pi / cells), np.exp(np.sin(3 * c)))
        errors.append(np.abs(s.at(CIRCLE_Q) - np.exp(np.sin(3 * mf.circle_angles(CIRCLE_Q)))).max())
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(orders > 1.9), orders


def test_at_on_the_sphere_is_exact_on_linear_data_and_second_order():
    mesh = sphere.icosphere(2)
    sol = solution(np.array(mesh.points), np.array(mesh.areas), np.ones(mesh.size))
    x = mf.uniform_sphere(2000, 3, seed=0)
    tri = SphericalTriangulation(mesh.points)
    vertices, lam = tri.locate(x)
    assert np.all(lam >= 0) and np.allclose(lam.sum(axis=1), 1.0)
    # the located facet's cone contains x: x is a non-negative combination of its vertices
    coeffs = np.linalg.solve(np.transpose(mesh.points[vertices], (0, 2, 1)), x[:, :, None])[..., 0]
    assert np.all(coeffs >= -1e-12)
    # constants exactly; affine data g(y) = a.y + c exactly at the projection of x on the facet
    np.testing.assert_allclose(sol.at(x, 0), 1.0, rtol=1e-13)
    a, c = np.array([0.3, -1.2, 0.7]), 2.0
    sol.rho[0] = mesh.points @ a + c + 5.0
    projected = np.einsum("qv,qvj->qj", lam, mesh.points[vertices])
    np.testing.assert_allclose(sol.at(x, 0), projected @ a + c + 5.0, rtol=1e-12)
    np.testing.assert_allclose(sol.at(mesh.points[:50], 0), sol.rho[0, :50], rtol=1e-12)   # nodes
    # second order on smooth data: error ratio ~4 per level (spacing halves)
    f = lambda y: np.exp(y[:, 0] * y[:, 2]) + y[:, 1] ** 2
    errors = []
    for level in (2, 3, 4):
        m = sphere.icosphere(level)
        s = solution(np.array(m.points), np.array(m.areas), f(np.array(m.points)))
        errors.append(np.abs(s.at(x) - f(x)).max())
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(orders > 1.8), orders


# --- sample and measure -------------------------------------------------------------------------------

@pytest.mark.parametrize("geometry", ["circle", "sphere"])
def test_sample_from_a_solution_has_no_duplicates_and_its_moments(geometry):
    """From a solution at t > 0: distinct points (the README's old recipe put tokens on the cell
    centres, 451 distinct of 500), whose mean matches the grid measure's to 1/n-ish."""
    model, t = mf.SA(4.0), [0.0, 2.0]
    if geometry == "circle":
        sol = circle.solve(model, perturbed_uniform(2), t, cells=256)
    else:
        sol = sphere.solve(model, perturbed_uniform(3, degree=2), t, mesh=sphere.icosphere(3), energy=False)
    y, b = sol.measure(-1)
    d = y.shape[1]
    for method in ("stratified", "weighted", "iid") + (("quantile",) if d == 2 else ()):
        x, w = sol.sample(2000, method=method, seed=0)
        assert np.unique(x.round(12), axis=0).shape[0] == 2000
        tol = 3e-2 if method == "iid" else 3e-3
        np.testing.assert_allclose(w @ x, b @ y, atol=tol, err_msg=method)
        np.testing.assert_allclose(w @ (x[:, :, None] * x[:, None, :]).reshape(2000, -1),
                                   b @ (y[:, :, None] * y[:, None, :]).reshape(y.shape[0], -1), atol=tol)
    with pytest.raises(ValueError, match="k"):
        sol.sample(10, k=5)


def test_particle_measure_carries_the_weights():
    rho = perturbed_uniform(2)
    x0, w = mf.discretise(rho, 50, 2, "weighted", seed=0)
    sol = particles.solve(mf.SA(2.0), x0, [0.0, 0.5], weights=w)
    x, wk = sol.measure(-1)
    np.testing.assert_array_equal(x, sol.x[-1])
    np.testing.assert_allclose(wk, w / w.sum())
    batch = particles.solve(mf.SA(2.0), np.stack([x0, x0[::-1]]), [0.0, 0.5])
    xb, wb = batch.measure(0, draw=1)
    np.testing.assert_array_equal(xb, x0[::-1])
    np.testing.assert_allclose(wb, 1 / 50)
