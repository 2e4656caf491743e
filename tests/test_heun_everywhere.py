"""A time scheme defined in this file only (Heun's SSP-RK2 as Shu–Osher arrays) runs unchanged through
every engine's ``solve(scheme=...)``: circle, sphere on a fixed mesh, the adaptive S^2 engine, zonal,
causal and particles, each with its observed order 2 in time on a smooth case.

Each engine runs with fixed steps dt, dt/2, dt/4 and a reference at dt/16 of the same engine and
scheme (so only the time error is measured); the first-order ``upwind`` flux keeps the semi-discrete
right-hand side smooth in time where the face speeds keep their signs (symmetric data: the
stagnation points sit on cell centres or faces and stay there)."""
from fractions import Fraction

import numpy as np
import pytest

import meanfield as mf
from meanfield.measures import perturbed_uniform
from meanfield.solvers import adaptive, causal, circle, particles, sphere, zonal
from meanfield.solvers.schemes import ShuOsher


class Heun(ShuOsher):
    """Heun's method (SSP-RK2): y1 = y + hF(y), y2 = ½ y + ½ (y1 + h F(y1))."""
    name, order = "heun", 2
    alpha = [[1], [Fraction(1, 2), Fraction(1, 2)]]
    beta = [[1], [0, Fraction(1, 2)]]


def circle_run(dt):
    return circle.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 0.4], cells=64, flux="upwind", scheme=Heun,
                        dt=dt, energy=False, progress=False).rho[-1]


def sphere_run(dt):
    return sphere.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 2], [0.0, 0.4], mesh=sphere.icosphere(2),
                        flux="upwind", scheme=Heun, dt=dt, energy=False, progress=False).rho[-1]


def adaptive_run(dt):
    sol = adaptive.solve(mf.SA(2.0), perturbed_uniform(3, degree=2, amplitude=0.2), [0.0, 0.4], base=2, finest=3,
                         flux="upwind", scheme=Heun, dt=dt, energy=False, progress=False)
    assert sol.info["remeshes"] == 0 and sol.info["method"] == "heun"        # one mesh: a smooth system
    return sol.rho[-1]


def zonal_run(dt):
    return zonal.solve(mf.SA(2.0), lambda th: 1 + 0.5 * np.cos(th), [0.0, 0.4], 3, cells=64, flux="upwind",
                       scheme=Heun, dt=dt, energy=False, progress=False).masses[-1]


def causal_run(dt):
    return causal.solve(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th) * (1 + s), [0.0, 0.4], slices=4, cells=32,
                        flux="upwind", scheme=Heun, dt=dt, progress=False).rho[-1]


def particles_run(dt):
    return particles.solve(mf.SA(2.0), mf.uniform_sphere(6, 3, seed=1), [0.0, 0.4], scheme=Heun, dt=dt,
                           energy=False, progress=False).x[-1]


RUNS = {"circle": (circle_run, 0.02), "sphere": (sphere_run, 0.02), "adaptive": (adaptive_run, 0.02),
        "zonal": (zonal_run, 0.02), "causal": (causal_run, 0.02), "particles": (particles_run, 0.04)}


@pytest.mark.parametrize("engine", RUNS)
def test_heun_written_here_has_order_two_in_every_engine(engine):
    run, dt = RUNS[engine]
    reference = run(dt / 16)
    errors = [np.max(np.abs(run(h) - reference)) for h in (dt, dt / 2, dt / 4)]
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all((1.8 <= orders) & (orders <= 2.2)), (engine, errors, orders)


def test_the_result_records_the_scheme_of_this_file():
    sol = circle.solve(mf.SA(1.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 0.1], cells=32, scheme=Heun(), energy=False,
                       progress=False)
    assert sol.info["method"] == "heun" and sol.rho.min() >= 0 and abs(sol.mass[-1] - 1) < 1e-13


def test_a_fixed_step_on_unrefined_adaptive_cells_is_the_fixed_mesh_solve():
    """adaptive.solve(dt=) with finest == base takes sphere.solve's fixed steps on icosphere(base), bit for bit."""
    rho0 = perturbed_uniform(3, degree=2, amplitude=0.2)
    a = adaptive.solve(mf.SA(2.0), rho0, [0.0, 0.1, 0.2], base=2, finest=2, scheme=Heun, dt=0.01, progress=False)
    s = sphere.solve(mf.SA(2.0), rho0, [0.0, 0.1, 0.2], mesh=sphere.icosphere(2), scheme=Heun, dt=0.01, progress=False)
    assert np.array_equal(a.rho, s.rho) and a.info["nsteps"] == s.info["nsteps"] == 20 and a.info["dt"] == 0.01
