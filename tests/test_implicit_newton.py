"""The fully implicit upwind Euler scheme ``backward_euler`` (Newton–Krylov, schemes.BackwardEuler): the nonlinear
step, order 1, the error estimate and control, the drift of collapsed clusters, Newton failures, the step-count
guard (positivity and mass for every step: tests/test_implicit.py; resumes: tests/test_implicit_adaptive.py)."""
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import meanfield as mf
from meanfield.solvers import circle
from meanfield.solvers.circle import CircleOperator
from meanfield.solvers.contract import upwind_matrix
from meanfield.solvers.schemes import BackwardEuler, ImplicitEuler
from meanfield.solvers.stepping import MAX_STEPS, integrate

def _smooth(cells):
    theta = circle.cell_angles(cells)
    rho = (1 + 0.5 * np.cos(theta) + 0.3 * np.sin(2 * theta)) / (2 * np.pi)
    return rho / (rho.sum() * 2 * np.pi / cells)


def test_nonlinear_step_solves_the_backward_euler_equation():
    """A two-cell drain at the state-dependent rate 1 + y_0: z - 1 + h (1 + z) z = 0 exactly solved, while the
    frozen-field step solves z (1 + h (1 + y_0)) = 1."""
    class Drain:
        def linear_part(self, y):
            return upwind_matrix([0], [1], [1.0 + y[0]], [0.0], [1.0], np.ones(2))
    for h in (0.1, 1.0, 1e4):
        exact = (-(1 + h) + np.sqrt((1 + h) ** 2 + 4 * h)) / (2 * h)
        step = BackwardEuler(rtol=1e-10, atol=1e-14).step(Drain(), 0.0, np.array([1.0, 0.0]), h)
        assert abs(step.y[0] - exact) < 1e-6 * exact and abs(step.y.sum() - 1) < 1e-15 and step.y.min() >= 0, h
        assert abs(ImplicitEuler().step(Drain(), 0.0, np.array([1.0, 0.0]), h).y[0] - 1 / (1 + 2 * h)) < 1e-15


# --- order in time, the error estimate ----------------------------------------------------------

@pytest.fixture(scope="module")
def smooth_case():
    model, cells, T = mf.SA(2.0), 64, 2.0
    rho0 = _smooth(cells)
    rhs = lambda t, rho: circle.time_derivative(model, rho, flux="upwind", summation="direct")  # noqa: E731
    exact = solve_ivp(rhs, (0.0, T), rho0, method="DOP853", rtol=1e-12, atol=1e-14).y[:, -1]
    return model, cells, T, rho0, exact, rhs


def test_observed_order_one_in_time(smooth_case):
    model, cells, T, rho0, exact, _ = smooth_case
    errors = []
    for n in (10, 20, 40, 80):
        sol = circle.solve(model, rho0, [0.0, T], cells=cells, flux="upwind", summation="direct",
                           scheme="backward_euler", dt=T / n, progress=False, energy=False)
        errors.append(np.abs(sol.rho[-1] - exact).sum() * 2 * np.pi / cells)
    rates = -np.diff(np.log2(errors))
    assert np.all(np.abs(rates - 1) < 0.1), rates


def test_error_estimate_is_the_local_error(smooth_case):
    """The filtered estimate ((y_n - y_{n+1}) - h F(y_n))/2 against the true local error of one step."""
    model, cells, _, rho0, _, rhs = smooth_case
    op = CircleOperator(model, cells, "upwind", "direct")
    for h in (0.02, 0.05):
        step = BackwardEuler(rtol=1e-10, atol=1e-14).step(op, 0.0, rho0, h)
        local = solve_ivp(rhs, (0.0, h), rho0, method="DOP853", rtol=1e-12, atol=1e-14).y[:, -1] - step.y
        assert np.abs(step.error - local).sum() < 0.15 * np.abs(local).sum(), h


def test_error_control_reaches_the_tolerance(smooth_case):
    """A first-order scheme whose local error is held to rtol: steps grow like rtol^(-1/2) and the error at T, a sum
    of about T/h local errors, falls like rtol^(1/2) (measured: 0.63 sqrt(rtol) relative, the same at every rtol)."""
    model, cells, T, rho0, exact, _ = smooth_case
    errors, steps = [], []
    for rtol in (1e-3, 1e-4, 1e-5):
        sol = circle.solve(model, rho0, [0.0, T], cells=cells, flux="upwind", summation="direct",
                           scheme="backward_euler", rtol=rtol, atol=1e-10, max_dt=10.0, progress=False, energy=False)
        errors.append(np.abs(sol.rho[-1] - exact).sum() / np.abs(exact).sum() / np.sqrt(rtol))
        steps.append(sol.info["nsteps"])
    assert np.all((np.array(errors) > 0.3) & (np.array(errors) < 1.5)), errors
    assert max(errors) < 1.2 * min(errors), errors
    assert np.all(np.abs(np.diff(np.log10(steps)) - 0.5) < 0.15), steps


# --- the physics the frozen field missed ---------------------------------------------------------

def test_collapsed_clusters_drift_at_their_true_speed():
    """Two clusters of SA β = 12 collapsed to a cell or two (256 cells, first-order upwind): over 60 time units
    fixed backward Euler steps of 1, 10 and 30 keep the explicit solver's drift (measured 0.9996, 0.996, 0.987:
    the first-order error of 2 steps), where the frozen field keeps 0.51, 0.093, 0.033 (dt/(1 + dt))."""
    cells, beta = 256, 12.0
    theta = circle.cell_angles(cells)
    rho = sum(np.exp(-np.angle(np.exp(1j * (theta - c))) ** 2 / (2 * 0.05 ** 2)) for c in (np.pi / 3, -np.pi / 3))
    kw = dict(cells=cells, flux="upwind", energy=False, progress=False)

    def angle(r):
        z = r * np.exp(1j * theta)
        up = np.sin(theta) > 0
        return abs(np.angle(z[up].sum() / z[~up].sum()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = circle.solve(mf.SA(beta), rho / (rho.sum() * 2 * np.pi / cells), [0.0, 30.0], **kw).rho[-1]
        ref = circle.solve(mf.SA(beta), start, [0.0, 60.0], **kw).rho[-1]
        drift = angle(ref) - angle(start)
        for dt, frozen in ((1.0, 0.55), (10.0, 0.12), (30.0, 0.05)):
            new = circle.solve(mf.SA(beta), start, [0.0, 60.0], scheme="backward_euler", dt=dt, **kw).rho[-1]
            old = circle.solve(mf.SA(beta), start, [0.0, 60.0], scheme="implicit_euler", dt=dt, **kw).rho[-1]
            assert abs((angle(new) - angle(start)) / drift - 1) < 0.02, dt
            assert (angle(old) - angle(start)) / drift < frozen, dt


# --- failures, resumes, the step-count guard -----------------------------------------------------

def test_newton_failure_rejects_and_retries_smaller():
    """Through the clustering of a smooth start Newton fails on some of the steps the error control proposes (one
    step of 50 always; more with two iterations allowed): those steps are rejected and retried smaller, fixed steps
    are halved, and the results stay positive and conservative."""
    cells = 128
    op = CircleOperator(mf.SA(3.0), cells, "upwind")
    rho0 = _smooth(cells)
    assert not np.all(np.isfinite(BackwardEuler().step(op, 0.0, rho0, 50.0).error))
    failures = []

    class Counting(BackwardEuler):
        def step(self, f, t, y, h, k1=None):
            out = super().step(f, t, y, h, k1)
            failures.append(not np.all(np.isfinite(out.error)))
            return out
    Y, info = integrate(op, rho0, np.array([0.0, 50.0]), scheme=Counting(max_iter=2), dt=1.0, positivity=True,
                        rtol=1e-3, atol=1e-8)
    assert sum(failures) > 0 and info["nrejected"] >= sum(failures)
    assert Y.min() >= 0 and abs(Y[-1].sum() * 2 * np.pi / cells - 1) < 1e-12
    Z, fixed = integrate(op, rho0, np.array([0.0, 50.0]), scheme="backward_euler", dt=50.0)
    assert fixed["nsteps"] == 1 and fixed["nfev"] > 100 and Z.min() >= 0
    assert abs(Z[-1].sum() * 2 * np.pi / cells - 1) < 1e-12


def test_newton_that_cannot_converge_stops_with_an_error():
    """A field that returns NaN: every step fails, the controller shrinks the step to its underflow and says so
    (no hang); fixed steps give up after their halvings."""
    class Broken(CircleOperator):
        def __call__(self, rho):
            out, rate = super().__call__(rho)
            return np.full_like(out, np.nan), rate
    op = Broken(mf.SA(3.0), 32, "upwind")
    with pytest.raises(ValueError, match="implicit step size underflow"):
        integrate(op, _smooth(32), np.array([0.0, 1.0]), scheme="backward_euler", dt=0.1, positivity=True)
    with pytest.raises(RuntimeError, match="halvings"):
        integrate(op, _smooth(32), np.array([0.0, 1.0]), scheme="backward_euler", dt=0.5)


def test_error_controlled_runs_may_span_more_than_max_steps_caps():
    """The step-count guard refuses fixed steps over MAX_STEPS, but not error-controlled implicit runs or auto,
    whose cap dt binds only in the fast phase."""
    cells = 64
    op = CircleOperator(mf.SA(3.0), cells, "upwind")
    rho0 = np.full(cells, 1e-6)
    rho0[3] += cells / (2 * np.pi)
    span = 2e3 * MAX_STEPS * 1e-4
    for scheme in ("backward_euler", "auto"):
        Y, info = integrate(op, rho0, np.array([0.0, span]), scheme=scheme, dt=1e-4, positivity=True)
        assert Y.min() >= 0 and info["nsteps"] < 1e5, scheme
    with pytest.raises(ValueError, match="more than"):
        integrate(op, rho0, np.array([0.0, span]), scheme="backward_euler", dt=1e-4)
