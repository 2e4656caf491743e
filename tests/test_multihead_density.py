"""MultiHead models in the density solvers (every head isotropic): the velocity is the sum of the
heads' fields.  Checked against the particle solver's own MultiHead path (an independent sum),
by scaling (identical heads double the field) and by the energy of all-USA heads."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import circle, particles, sphere, zonal

F_CIRCLE = lambda x: np.exp(1.5 * x[:, 0]) + 0.5 * np.exp(x[:, 1])          # noqa: E731
F_SPHERE = lambda x: np.exp(1.5 * x[:, 0]) + 0.5 * np.exp(x[:, 1] + x[:, 2])  # noqa: E731
MIXED = mf.MultiHead([mf.SA(3.0), mf.USA(1.0, V=-1.0)])


@pytest.mark.parametrize("flux", circle.FLUXES)
def test_identical_heads_double_the_circle_field(flux):
    theta = circle.cell_angles(128)
    rho = 1 + 0.3 * np.cos(theta + 0.1) + 0.2 * np.sin(3 * theta)
    two = circle.time_derivative(mf.MultiHead([mf.SA(2.0), mf.SA(2.0)]), rho, flux)
    one = circle.time_derivative(mf.SA(2.0), rho, flux)
    np.testing.assert_allclose(two, 2 * one, rtol=0, atol=1e-14 * np.abs(one).max())


@pytest.mark.parametrize("flux", sphere.FLUXES)
def test_identical_heads_double_the_sphere_field(flux):
    mesh = sphere.icosphere(1)
    rho = F_SPHERE(mesh.points)
    two = sphere.time_derivative(mf.MultiHead([mf.USA(2.0), mf.USA(2.0)]), rho, mesh, flux)
    one = sphere.time_derivative(mf.USA(2.0), rho, mesh, flux)
    np.testing.assert_allclose(two, 2 * one, rtol=0, atol=1e-14 * np.abs(one).max())


def test_circle_multihead_matches_particles():
    """SA(3) + USA(1, V=-I) to T = 3 (the density moves by W1 = 0.36): quantile particles and the
    FV solution stay at the grid's own distance h/4 from each other (0.0062, then 0.0017 at 4× the
    cells), i.e. the discrepancy does not grow along the run."""
    t = np.array([0.0, 3.0])
    x0, w = mf.discretise(F_CIRCLE, 2000, 2, method="quantile")
    ps = particles.solve(MIXED, x0, t, weights=w)
    for cells in (256, 1024):
        fv = circle.solve(MIXED, F_CIRCLE, t, cells=cells)
        moved = mf.wasserstein(fv.points, fv.rho[0], fv.points, fv.rho[1], p=1)
        dist = [mf.wasserstein(ps.x[k], w, fv.points, fv.rho[k] * fv.areas, p=1) for k in range(2)]
        h = 2 * np.pi / cells
        assert moved > 0.3
        assert dist[1] < 0.3 * h and abs(dist[1] - dist[0]) < 0.02 * h
        assert np.allclose(fv.mass, 1, atol=1e-13) and fv.rho.min() >= 0


def test_sphere_multihead_moment_matches_particles():
    """Change of the first moment over t ∈ [0, 1] (about 0.08): FV on icosphere levels 1, 2 against
    weighted particles (n = 1000; n = 4000 agrees to 1e-5); the error falls at order >= 1.5."""
    t = np.array([0.0, 1.0])
    x0, w = mf.discretise(F_SPHERE, 1000, 3, method="weighted")
    ps = particles.solve(MIXED, x0, t, weights=w)
    moment = np.einsum("n,knd->kd", w, ps.x)
    errors = []
    for level in (1, 2):
        fv = sphere.solve(MIXED, F_SPHERE, t, mesh=sphere.icosphere(level), energy=False)
        fm = (fv.rho * fv.areas) @ fv.points
        errors.append(np.abs((fm[1] - fm[0]) - (moment[1] - moment[0])).max())
        assert np.allclose(fv.mass, 1, atol=1e-13) and fv.rho.min() >= 0
    assert np.abs(moment[1] - moment[0]).max() > 0.07
    assert errors[1] < 3e-3 and np.log2(errors[0] / errors[1]) >= 1.5, errors


@pytest.mark.parametrize("geometry", ["circle", "sphere"])
def test_all_usa_heads_energy_is_monotone(geometry):
    """USA(1) + USA(3, V=-I): the field is the gradient of E_1 - E_3, which the two-point flux
    keeps non-decreasing to round-off; SA heads give NaN (no gradient structure)."""
    model = mf.MultiHead([mf.USA(1.0), mf.USA(3.0, V=-1.0)])
    t = np.linspace(0, 2, 9)
    if geometry == "circle":
        sol = circle.solve(model, F_CIRCLE, t, cells=128, flux="tpfa")
        nan = circle.solve(MIXED, F_CIRCLE, t[:2], cells=128).energy
        e0 = circle.energy(sol.rho[0], 1.0) - circle.energy(sol.rho[0], 3.0)
    else:
        mesh = sphere.icosphere(2)
        sol = sphere.solve(model, F_SPHERE, t, mesh=mesh, flux="tpfa")
        nan = sphere.solve(MIXED, F_SPHERE, t[:2], mesh=mesh).energy
        m = sol.rho[0] * sol.areas
        e0 = (particles.energies(1.0, sol.points[None], m[None])
              - particles.energies(3.0, sol.points[None], m[None]))[0]
    assert np.isclose(sol.energy[0], e0, rtol=1e-12)
    assert np.all(np.diff(sol.energy) >= -1e-13 * np.abs(sol.energy).max())
    assert sol.energy[-1] - sol.energy[0] > 0.05
    assert np.isnan(nan).all()


def test_multihead_refused_where_not_treated():
    scaled = mf.MultiHead([mf.SA(1.0), mf.SA(2.0, Q=2.0)])      # Q^T K = 2 I: the isotropic head at beta' = 4
    isotropic = mf.MultiHead([mf.SA(1.0), mf.SA(4.0)])
    assert circle.max_step(scaled, 256) == circle.max_step(isotropic, 256)
    assert sphere.max_step(scaled) == sphere.max_step(isotropic)
    with pytest.raises(ValueError, match="feed-forward"):
        ff = mf.FeedForward(np.eye(2), np.eye(2), [0.0, 0.0])
        circle.solve(mf.MultiHead([mf.SA(1.0)], feedforward=ff), F_CIRCLE, [0, 1])
    with pytest.raises(TypeError, match="MultiHead"):
        zonal.solve(mf.MultiHead([mf.SA(1.0)]), lambda s: 1 + s, [0, 1], 3)
    assert circle.max_step(MIXED, 256) == pytest.approx(
        0.5 * (2 * np.pi / 256) / (1 + mf.theory.speed_bound(mf.USA(1.0))))
