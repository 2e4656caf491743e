"""Linearly implicit schemes (schemes.ImplicitEuler, schemes.MPRK22, scheme="auto") through the engines:
positivity and mass for every step size, orders in time against an independent high-accuracy solution,
the error control, steps set by the dynamics, resume bit for bit, the explicit/implicit switch, and the
M-matrix solve (implicit.m_matrix_solve) on its own.

The operators are the engines' own (``CircleOperator``, ``SphereOperator``): their ``linear_part`` is
checked against their upwind right-hand side, and the reference solutions come from that right-hand
side with DOP853.
"""
import numpy as np
import pytest
import scipy.sparse
from scipy.integrate import solve_ivp
from scipy.sparse.linalg import spsolve

import meanfield as mf
from meanfield.solvers import adaptive_circle, causal, circle, schemes, sphere, zonal
from meanfield.solvers.circle import CircleOperator
from meanfield.solvers.contract import upwind_matrix
from meanfield.solvers.controllers import choose_scheme
from meanfield.solvers.energy_report import energy_dips
from meanfield.solvers.implicit import _cyclic_bands, m_matrix_solve
from meanfield.solvers.schemes import MPRK22, SCHEMES, ImplicitEuler
from meanfield.solvers.stepping import integrate

STEPS = (1e-3, 0.1, 10.0, 1e3, 1e4)


def _dirac(cells, where=0, background=1e-12):
    rho = np.full(cells, background)
    rho[where] += cells / (2 * np.pi)
    return rho


def _smooth(cells):
    theta = circle.cell_angles(cells)
    return (1 + 0.5 * np.cos(theta) + 0.3 * np.sin(2 * theta)) / (2 * np.pi)


def _donor(weights, source, target, rates):
    """Mass flows source -> target at rates · ρ_source (``upwind_matrix`` with one-sided speeds)."""
    n = len(source)
    return upwind_matrix(source, target, rates, np.zeros(n), np.ones(n), weights)


# --- the transport matrix of the engines ------------------------------------------------------

def test_circle_linear_part_is_the_upwind_system():
    op = CircleOperator(mf.SA(3.0), 128, "upwind", "direct")
    rho = _smooth(128) + 0.2 * _dirac(128, 40, 0.0)
    expected = circle.time_derivative(mf.SA(3.0), rho, flux="upwind", summation="direct")
    assert np.abs(-op.linear_part(rho) @ rho - expected).max() < 1e-12 * np.abs(expected).max()


@pytest.mark.parametrize("engine", ["circle", "sphere"])
def test_sign_pattern_and_zero_weighted_column_sums(engine):
    if engine == "circle":
        op, rho, weights = CircleOperator(mf.SA(3.0), 64, "upwind"), _smooth(64), np.full(64, 2 * np.pi / 64)
    else:
        mesh = sphere.icosphere(2)
        op, rho, weights = sphere.SphereOperator(mf.SA(3.0), mesh, "upwind"), 1 + mesh.points[:, 2], mesh.areas
    a = op.linear_part(rho).toarray()
    off = a - np.diag(np.diag(a))
    assert np.diag(a).min() >= 0 and off.max() <= 0
    assert np.abs(weights @ a).max() < 1e-13 * np.abs(a).max()


# --- positivity and mass, every step size, through the solvers ----------------------------------

@pytest.mark.parametrize("scheme", ["implicit_euler", "mprk22", "backward_euler"])
@pytest.mark.parametrize("state", ["dirac", "two clusters", "smooth"])
def test_circle_solve_positive_and_conservative_for_every_step(scheme, state):
    cells = 256
    rho0 = {"dirac": _dirac(cells, 7), "two clusters": 0.5 * _dirac(cells, 7, 0.0) + 0.5 * _dirac(cells, 130, 0.0),
            "smooth": _smooth(cells)}[state]
    for dt in STEPS:
        sol = circle.solve(mf.SA(3.0), rho0, dt * np.arange(4), cells=cells, scheme=scheme, dt=dt, progress=False)
        assert sol.rho.min() >= 0, (dt, sol.rho.min())
        assert np.abs(sol.mass - 1).max() < 1e-12, dt
        assert sol.info["nsteps"] == 3


@pytest.mark.parametrize("scheme", ["implicit_euler", "mprk22", "backward_euler"])
def test_sphere_solve_positive_and_conservative_for_every_step(scheme):
    mesh = sphere.icosphere(3)
    rng = np.random.default_rng(1)
    rho0 = rng.uniform(0, 1, mesh.size) * (rng.uniform(size=mesh.size) < 0.3)
    for dt in STEPS:
        sol = sphere.solve(mf.SA(3.0), rho0, dt * np.arange(3), mesh=mesh, scheme=scheme, dt=dt, progress=False,
                           energy=False)
        assert sol.rho.min() >= 0, (dt, sol.rho.min())
        assert np.abs(sol.mass - sol.mass[0]).max() < 1e-12, dt


def test_sphere_mass_gathers_in_one_cluster_on_a_large_step():
    """SA β = 3 from a cap around the north pole: one implicit Euler step of 1e4 gathers the mass there."""
    mesh = sphere.icosphere(3)
    rho0 = np.exp(4 * mesh.points[:, 2])
    sol = sphere.solve(mf.SA(3.0), rho0, [0.0, 1e4], mesh=mesh, scheme="implicit_euler", dt=1e4, progress=False)
    top = mesh.points[:, 2] > np.cos(0.3)
    assert mesh.areas[top] @ sol.rho[-1][top] > 0.99


def test_every_density_solver_takes_the_implicit_schemes():
    """zonal, causal and the adaptive circle (per stretch, the mesh changing between them): positive,
    mass-conserving, and steps far above the explicit bound once the cluster rests."""
    model = mf.SA(3.0)
    z = zonal.solve(model, lambda th: 1 + 0.5 * np.cos(th), [0.0, 10.0, 1e3], 3, scheme="mprk22", progress=False)
    assert z.masses.min() >= 0 and np.abs(z.mass - 1).max() < 1e-12 and z.info["hmax"] > 10 * z.info["max_dt"]
    c = causal.solve(model, lambda s, th: 1 + 0.5 * np.cos(th), [0.0, 100.0], slices=8, cells=64,
                     scheme="implicit_euler", dt=50.0, progress=False)
    assert c.rho.min() >= 0 and np.abs(c.mass - c.mass[0]).max() < 1e-12 and c.info["nsteps"] == 2
    a = adaptive_circle.solve(model, lambda x: 1 + 0.5 * x[:, 0], [0.0, 10.0, 1e3], scheme="auto", progress=False)
    assert min(r.min() for r in a.rho) >= 0 and np.abs(a.mass - 1).max() < 1e-12
    assert a.info["remeshes"] > 0 and [name for _, name in a.info["switches"]][:1] == ["backward_euler"]


# --- orders in time, the error control ---------------------------------------------------------

def _reference(model, rho0, T):
    """The semi-discrete upwind system solved by the circle engine's right-hand side and DOP853."""
    rhs = lambda t, rho: circle.time_derivative(model, rho, flux="upwind", summation="direct")  # noqa: E731
    return solve_ivp(rhs, (0.0, T), rho0, method="DOP853", rtol=1e-12, atol=1e-14).y[:, -1]


@pytest.fixture(scope="module")
def smooth_case():
    model, cells, T = mf.SA(2.0), 64, 2.0
    rho0 = _smooth(cells)
    rho0 = rho0 / (rho0.sum() * 2 * np.pi / cells)
    return model, cells, T, rho0, _reference(model, rho0, T)


@pytest.mark.parametrize("scheme", [ImplicitEuler, MPRK22])
def test_observed_order_in_time_through_circle_solve(scheme, smooth_case):
    model, cells, T, rho0, exact = smooth_case
    errors = []
    for n in (10, 20, 40, 80):
        sol = circle.solve(model, rho0, [0.0, T], cells=cells, flux="upwind", summation="direct",
                           scheme=scheme.name, dt=T / n, progress=False, energy=False)
        assert sol.info["nsteps"] == n
        errors.append(np.abs(sol.rho[-1] - exact).sum() * 2 * np.pi / cells)
    rates = -np.diff(np.log2(errors))
    assert np.all(np.abs(rates - scheme.order) < 0.2), rates


def test_error_estimate_is_the_first_order_error(smooth_case):
    """MPRK22's estimate y_{n+1} - y^(2) is, to leading order, the implicit Euler step's local error."""
    model, cells, _, rho0, _ = smooth_case
    op = CircleOperator(model, cells, "upwind", "direct")
    h = 0.05
    step = MPRK22().step(op, 0.0, rho0, h)
    local = _reference(model, rho0, h) - ImplicitEuler().step(op, 0.0, rho0, h).y
    assert np.abs(step.error - local).sum() < 0.1 * np.abs(local).sum()


def test_error_control_reaches_the_tolerance(smooth_case):
    """The relative L1 error at T is proportional to rtol (measured: 1.2-1.3 rtol) and the steps grow
    like rtol^(-1/2), as the second-order solution controlled by a first-order estimate should."""
    model, cells, T, rho0, exact = smooth_case
    errors, steps = [], []
    for rtol in (1e-3, 1e-4, 1e-5):
        sol = circle.solve(model, rho0, [0.0, T], cells=cells, flux="upwind", summation="direct", scheme="mprk22",
                           rtol=rtol, atol=1e-10, max_dt=10.0, progress=False, energy=False)
        errors.append(np.abs(sol.rho[-1] - exact).sum() / np.abs(exact).sum() / rtol)
        steps.append(sol.info["nsteps"])
    assert np.all((np.array(errors) > 0.3) & (np.array(errors) < 3.0)), errors
    assert np.all(np.abs(np.diff(np.log10(steps)) - 0.5) < 0.15), steps


def test_plain_callable_refused_with_an_implicit_scheme():
    with pytest.raises(TypeError, match="linear_part"):
        integrate(lambda y: -y, np.ones(3), np.array([0.0, 1.0]), scheme="mprk22", dt=0.1, positivity=True)
    op = CircleOperator(mf.SA(1.0), 16, "upwind")
    with pytest.raises(ValueError, match="no error estimate"):
        integrate(op, _smooth(16), np.array([0.0, 1.0]), scheme="implicit_euler", dt=0.1, positivity=True)
    with pytest.raises(ValueError, match="chooses its own steps"):
        circle.solve(mf.SA(1.0), _smooth(16), [0.0, 1.0], cells=16, scheme="auto", dt=0.1, progress=False)


def test_registry():
    assert {"implicit_euler", "mprk22", "auto"} <= set(SCHEMES)
    assert schemes.as_scheme("mprk22").implicit and not schemes.as_scheme("ssprk3").implicit


# --- steps set by the dynamics ---------------------------------------------------------------

def test_steps_grow_on_a_clustered_state():
    """One-cell cluster, SA β = 3, 512 cells: the explicit bound is h/|X| ≈ 0.012; the steps grow past 1e3."""
    cells = 512
    rho0 = _dirac(cells, 100)
    sol = circle.solve(mf.SA(3.0), rho0, [0.0, 1e4], cells=cells, flux="upwind", scheme="mprk22", progress=False)
    explicit = 2 * np.pi / cells / np.abs(circle.velocity(mf.SA(3.0), rho0 / (rho0.sum() * 2 * np.pi / cells))).max()
    assert sol.info["hmax"] > 1e5 * explicit and sol.info["nsteps"] < 60
    assert sol.rho.min() >= 0 and abs(sol.mass[-1] - 1.0) < 1e-12


@pytest.mark.parametrize("scheme", ["mprk22", "backward_euler"])
def test_energy_along_implicit_steps_on_a_plateau(scheme):
    """Two clusters nearly antipodal (SA β = 3, 256 cells, t <= 100: no merge yet).  Cell-centred
    upwind fluxes let E_β of the cell measure dip when mass hops between cells, in the semi-discrete
    system itself (``energy_report``): the implicit schemes' dips are those of the explicit solver on
    the same system (measured for MPRK22: 35 and 36 of 100 outputs, largest 2.2e-5 relative for both),
    and the energy rises overall."""
    cells, beta = 256, 3.0
    theta = circle.cell_angles(cells)
    rho0 = 0.55 * np.exp(60 * (np.cos(theta - 1.0) - 1)) + 0.45 * np.exp(60 * (np.cos(theta - 1.0 - 3.0) - 1))
    t = np.linspace(0.0, 100.0, 101)
    implicit = circle.solve(mf.SA(beta), rho0, t, cells=cells, flux="upwind", scheme=scheme, progress=False)
    explicit = circle.solve(mf.SA(beta), rho0, t, cells=cells, flux="upwind", progress=False)
    dips, reference = implicit.info["energy_dips"], explicit.info["energy_dips"]
    assert dips == energy_dips(implicit.energy)
    assert dips["largest"] < 1.5 * reference["largest"] and dips["count"] < 1.5 * reference["count"], \
        (dips, reference)
    assert implicit.energy[-1] > implicit.energy[0]


# --- resume, auto ------------------------------------------------------------------------------

class Interrupted(Exception):
    pass


def test_mprk22_resumes_bit_for_bit(monkeypatch, tmp_path):
    rho0 = 1 + 0.5 * np.cos(circle.cell_angles(128) - 1.0)
    t = np.linspace(0.0, 50.0, 6)

    def solve(**kw):
        return circle.solve(mf.SA(3.0), rho0, t, cells=128, scheme="mprk22", progress=False, **kw)
    full = solve()
    real, calls = MPRK22.step, [0]

    def stopping(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > 17:
            raise Interrupted
        return real(self, *args, **kwargs)
    monkeypatch.setattr(MPRK22, "step", stopping)
    path = tmp_path / "run.npz"
    with pytest.raises(Interrupted):
        solve(checkpoint=path, checkpoint_every=5)
    monkeypatch.undo()
    resumed = solve(checkpoint=path, checkpoint_every=5, resume=True)
    assert np.array_equal(full.rho, resumed.rho) and resumed.info["nsteps"] == full.info["nsteps"]
    with pytest.raises(ValueError, match="different run"):
        circle.solve(mf.SA(3.0), rho0, t, cells=128, scheme="mprk22", rtol=1e-4, progress=False, checkpoint=path,
                     checkpoint_every=5, resume=True)


def test_auto_switches_and_matches_the_explicit_solver():
    """From a smooth bump (SA β = 3, 512 cells) one cluster forms by t ≈ 10 and rests: auto runs SSP-RK3
    through the fast phase, then MPRK22, reaching t = 1e4 in fewer steps than the explicit solver
    takes to t = 20, and the state at t = 10, 20 agrees
    with the explicit solver's on the same (first-order upwind) system to the tolerance."""
    cells = 512
    rho0 = 1 + 0.3 * np.cos(circle.cell_angles(cells) - 1.0)
    t = np.array([0.0, 10.0, 20.0, 1e4])
    auto = circle.solve(mf.SA(3.0), rho0, t, cells=cells, flux="upwind", scheme="auto", rtol=1e-4, progress=False)
    explicit = circle.solve(mf.SA(3.0), rho0, t[:3], cells=cells, flux="upwind", progress=False)
    names = [name for _, name in auto.info["switches"]]
    assert names[0] == "backward_euler" and 1.0 < auto.info["switches"][0][0] < 20.0, auto.info["switches"]
    assert auto.info["nsteps"] < explicit.info["nsteps"]
    for k in (1, 2):
        assert np.abs(auto.rho[k] - explicit.rho[k]).sum() * 2 * np.pi / cells < 1e-2
    assert auto.rho.min() >= 0 and np.abs(auto.mass - 1).max() < 1e-12


def test_auto_starts_explicit_from_near_uniform():
    """A near-uniform start is the fast phase: the explicit step is its cap, so auto does not switch."""
    rho0 = 1 + 1e-3 * np.cos(3 * circle.cell_angles(256))
    sol = circle.solve(mf.SA(3.0), rho0, [0.0, 2.0], cells=256, scheme="auto", progress=False)
    assert sol.info["switches"] == []


def test_choose_scheme_switches_after_patience_and_back():
    state = ("explicit", 0)
    for expected in ("explicit", "explicit", "implicit"):
        state = choose_scheme(*state, 0.003, 0.1)                         # r = 0.03 < 1/20
        assert state[0] == expected
    assert choose_scheme("explicit", 2, 0.003, 0.05) == ("explicit", 0)      # r = 0.06: the streak ends
    assert choose_scheme("explicit", 2, 0.003, 0.1, capped=True) == ("explicit", 0)
    assert choose_scheme("implicit", 2, 0.1, 0.5) == ("explicit", 0)          # r = 0.2 > 1/10
    assert choose_scheme("implicit", 2, 0.1, 1.4) == ("implicit", 0)          # r = 1/14 between the thresholds
    assert choose_scheme("explicit", 2, 0.1, 1.4) == ("explicit", 0)
    assert choose_scheme("explicit", 2, 0.01, np.inf) == ("implicit", 0)
    assert choose_scheme("explicit", 3, 1.0, 11.0, switch=0.1, patience=5) == ("explicit", 4)


@pytest.mark.parametrize("args, kwargs", [
    (("auto", 0, 1.0, 1.0), {}),
    (("explicit", 0, 1.0, 1.0), dict(switch=0.6, back=0.5)),
    (("explicit", 0, 1.0, 1.0), dict(patience=0)),
    (("explicit", 0, 1.0, -1.0), {}),
    (("explicit", 0, 1.0, np.nan), {}),
])
def test_choose_scheme_refuses_bad_input(args, kwargs):
    with pytest.raises(ValueError):
        choose_scheme(*args, **kwargs)


# --- the M-matrix solve ---------------------------------------------------------------------

@pytest.mark.parametrize("cells", [3, 4, 5, 64, 2048])
def test_cyclic_tridiagonal_path_equals_superlu(cells):
    """S¹ matrices take the O(N) elimination; it agrees with SuperLU and keeps signs and mass."""
    rng = np.random.default_rng(cells)
    j = np.arange(cells)
    u = rng.normal(size=cells)
    a = _donor(np.ones(cells), np.r_[j, j], np.r_[(j + 1) % cells, (j - 1) % cells],
               np.r_[np.maximum(u, 0), np.maximum(-u, 0)])
    assert _cyclic_bands(a, 1.0) is not None
    b = rng.uniform(size=cells) * (rng.uniform(size=cells) < 0.5)
    b[0] = 1.0
    for h in STEPS:
        x = m_matrix_solve(a, h, b)
        reference = spsolve(scipy.sparse.identity(cells, format="csc") + h * a, b)
        assert x.min() >= 0 and abs(x.sum() - b.sum()) < 1e-11 * b.sum()
        assert np.abs(x - reference).max() < 1e-9 * np.abs(reference).max()


def test_m_matrix_solve_keeps_signs_for_a_random_transport_matrix():
    """Signs exactly; mass to round-off of the assembled matrix: its weighted column sums w_t (c/w_t) - c
    vanish to ε c per entry only, so the mass moves by about ε h max(c) |x| (rates up to ~1e4 here, h
    up to 1e4: measured 4e-12 relative, 1e-10 allowed)."""
    rng = np.random.default_rng(2)
    n = 200
    src, dst = rng.integers(0, n, 2000), rng.integers(0, n, 2000)
    keep = src != dst
    w = rng.uniform(0.5, 2.0, n)
    rates = rng.exponential(1.0, keep.sum()) * 10.0 ** rng.integers(-3, 4, keep.sum())   # six decades
    a = _donor(w, src[keep], dst[keep], rates)
    b = rng.uniform(0, 1, n) * (rng.uniform(size=n) < 0.1)
    for h in STEPS:
        x = m_matrix_solve(a, h, b)
        assert x.min() >= 0 and abs(w @ x - w @ b) < 1e-10 * (w @ b), h
