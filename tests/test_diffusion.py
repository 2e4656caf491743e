"""Diffusion in the finite-volume solvers (the noisy, McKean–Vlasov density equation)."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import circle, sphere
from meanfield.solvers.diffusion import circle_laplacian, mesh_laplacian
from meanfield.solvers.meshes.voronoi import icosphere
from meanfield.solvers.stepping import integrate


def test_circle_heat_equation_first_moment_decays_as_exp_minus_dt():
    """Without interaction, ∫ x ρ decays as e^{-(d-1) D t} (d = 2): second order in h."""
    D, T = 0.3, 1.0
    errors = []
    for cells in (64, 128, 256):
        theta = circle.cell_angles(cells)
        h = 2 * np.pi / cells
        rho0 = (1 + 0.5 * np.cos(theta)) / (2 * np.pi)
        out, _ = integrate(lambda r: D * circle_laplacian(r, h), rho0, np.array([0.0, T]), scheme="ssprk3",
                           dt=0.2 * h * h / D)
        m1 = h * out[-1] @ np.cos(theta)
        errors.append(abs(m1 / (h * rho0 @ np.cos(theta)) - np.exp(-D * T)))
    assert errors[-1] < 1e-3 * np.exp(-D * T)
    assert np.log2(errors[0] / errors[1]) > 1.8 and np.log2(errors[1] / errors[2]) > 1.8


def test_mesh_heat_equation_first_moment_decays_as_exp_minus_2dt():
    D, T = 0.25, 1.0
    mesh = icosphere(5)
    L = mesh_laplacian(mesh)
    rho0 = (1 + 0.8 * mesh.points[:, 2]) / (4 * np.pi)
    rate = np.max(-L.diagonal())
    out, info = integrate(lambda r: D * (L @ r), rho0, np.array([0.0, T]), scheme="ssprk3", dt=0.5 / (D * rate))
    m = (out[-1] * mesh.areas) @ mesh.points[:, 2] / ((rho0 * mesh.areas) @ mesh.points[:, 2])
    assert m == pytest.approx(np.exp(-2 * D * T), rel=1e-3)
    # conservative: the columns of |C| L sum to zero, so mass is kept to round-off (per step)
    assert abs((out[-1] - rho0) @ mesh.areas) < 1e-15 * info["nsteps"]


def _first_mode_rate(D, cells=256, eps=1e-4, T=2.0):
    theta = circle.cell_angles(cells)
    sol = circle.solve(mf.SA(0.0), lambda x: 1 + eps * x[:, 0], np.linspace(0, T, 5), cells=cells,
                       diffusion=D)
    amp = sol.rho @ np.cos(theta)
    return np.polyfit(sol.t, np.log(np.abs(amp)), 1)[0]


def test_noisy_kuramoto_critical_noise_is_one_half():
    """β = 0 on the circle: λ_1 = 1/2 - D, so the uniform state loses stability at D_c = 1/2."""
    ds = np.array([0.3, 0.7])
    rates = np.array([_first_mode_rate(D) for D in ds])
    assert rates == pytest.approx([mf.growth_rate(mf.SA(0.0), 2, 1, diffusion=D) for D in ds], abs=5e-3)
    critical = ds[0] - rates[0] * (ds[1] - ds[0]) / (rates[1] - rates[0])
    assert critical == pytest.approx(0.5, rel=0.02)


def test_sphere_growth_rate_with_diffusion():
    """SA β = 2 on S^2, degree-2 zonal mode: λ_2 - 6 D."""
    D, eps = 0.05, 1e-4
    mesh = icosphere(4)
    p2 = lambda z: 1.5 * z * z - 0.5
    sol = sphere.solve(mf.SA(2.0), lambda x: 1 + eps * p2(x[:, 2]), np.linspace(0, 1.5, 4), mesh=mesh,
                       diffusion=D, energy=False)
    amp = (sol.rho * mesh.areas) @ p2(mesh.points[:, 2])
    rate = np.polyfit(sol.t, np.log(np.abs(amp)), 1)[0]
    assert rate == pytest.approx(mf.growth_rate(mf.SA(2.0), 3, 2, diffusion=D), rel=0.03)


def test_diffusion_keeps_mass_and_positivity_and_is_in_the_step_bound():
    sol = circle.solve(mf.SA(6.0), lambda x: np.exp(4 * x[:, 0]), np.linspace(0, 3, 4), cells=128, diffusion=0.05)
    assert np.all(sol.rho >= 0) and np.allclose(sol.mass, 1, atol=1e-13)
    h = 2 * np.pi / 128
    # controlled steps: the positivity rate includes the diffusion's 2D/h², so no step exceeds 0.9 h²/(2D)
    assert sol.info["hmax"] <= 0.9 * h ** 2 / 0.1 * (1 + 1e-12)
    bound = 1 / (1 / circle.max_step(mf.SA(6.0), 128) + 0.1 / h ** 2)      # the fixed steps' bound
    fixed = circle.solve(mf.SA(6.0), lambda x: np.exp(4 * x[:, 0]), [0, 0.2], cells=128, diffusion=0.05, dt=bound)
    assert fixed.info["max_dt"] == pytest.approx(bound) and np.all(fixed.rho >= 0)
    with pytest.raises(ValueError, match="positivity bound"):
        circle.solve(mf.SA(6.0), lambda x: 1 + 0 * x[:, 0], [0, 1], cells=128, diffusion=0.05,
                     dt=circle.max_step(mf.SA(6.0), 128))
    with pytest.raises(ValueError, match="diffusion must be >= 0"):
        sphere.solve(mf.SA(1.0), lambda x: 1 + 0 * x[:, 0], [0, 1], mesh=icosphere(1), diffusion=-1)


def test_growth_rate_with_diffusion_is_the_laplace_shift():
    for d, l in [(2, 1), (3, 4), (10, 2)]:
        assert mf.growth_rate(mf.USA(3.0), d, l, diffusion=0.1) == pytest.approx(
            mf.growth_rate(mf.USA(3.0), d, l) - 0.1 * l * (l + d - 2))
