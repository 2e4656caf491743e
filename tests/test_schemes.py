"""Time schemes as registered classes, the controllers and the progress report: observed orders on
y' = -y and on the circle's finite volumes, positivity of Shu–Osher and non-SSP schemes under control,
ssprk3 bit for bit against its hand-written Shu–Osher formula, checkpoint resume with a scheme given
as a class, ``as_scheme`` errors, and progress lines when the output is not a terminal."""
from fractions import Fraction

import numpy as np
import pytest

import meanfield as mf
from meanfield import progress as reporting
from meanfield.solvers import adaptive_circle, circle, schemes, sphere, stepping
from meanfield.solvers.schemes import SCHEMES, ShuOsher, as_scheme
from meanfield.solvers.stepping import Checkpoint, integrate


class SSPRK2(ShuOsher):
    """Heun's method as Shu–Osher arrays, defined here only: y1 = y + hF(y), y2 = ½y + ½(y1 + hF(y1))."""
    name, order = "ssprk2", 2
    alpha = [[1], [Fraction(1, 2), Fraction(1, 2)]]
    beta = [[1], [0, Fraction(1, 2)]]


FIXED = [name for name, cls in SCHEMES.items()
         if not (cls.adaptive or cls.implicit or name == "auto")] + [SSPRK2]


def observed_orders(errors, ratio=2.0):
    errors = np.asarray(errors)
    return np.log(errors[:-1] / errors[1:]) / np.log(ratio)


@pytest.mark.parametrize("scheme", FIXED)
def test_order_on_exponential_decay(scheme):
    order = as_scheme(scheme).order
    t = np.array([0.0, 1.0])
    errors = [abs(integrate(lambda y: -y, np.ones(1), t, scheme=scheme, dt=dt)[0][-1, 0] - np.exp(-1.0))
              for dt in (0.1, 0.05, 0.025)]
    assert np.all(np.abs(observed_orders(errors) - order) < 0.2), errors


def test_dormand_prince_order_in_equal_steps_and_tolerance_through_integrate():
    """The pair's step is of order 5 (equal steps of ``step``); through ``integrate`` its error control
    meets the tolerance."""
    pair = as_scheme("dopri5")
    errors = []
    for n in (10, 20, 40):
        y = np.ones(1)
        for i in range(n):
            y = pair.step(lambda t, y: -y, i / n, y, 1.0 / n).y
        errors.append(abs(y[0] - np.exp(-1.0)))
    assert np.all(np.abs(observed_orders(errors) - pair.order) < 0.2), errors
    for rtol in (1e-6, 1e-9):
        Y, info = integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), scheme=schemes.DormandPrince, rtol=rtol,
                            atol=1e-14)
        assert abs(Y[-1, 0] - np.exp(-1.0)) < 10 * rtol and info["nsteps"] > 1


@pytest.mark.parametrize("scheme", FIXED)
def test_order_on_the_circle_finite_volumes(scheme):
    """The semi-discrete circle system (64 cells, first-order upwind, symmetric data: the stagnation
    points sit on faces, so the right-hand side is smooth) against RK4 with a 25 times smaller step."""
    cells = 64
    stage = circle.CircleOperator(mf.SA(2.0), cells, "upwind")
    rho0 = (1 + 0.4 * np.cos(circle.cell_angles(cells))) / (2 * np.pi)
    t = np.array([0.0, 0.5])

    def f(rho):
        return stage(rho)[0]
    reference = integrate(f, rho0, t, scheme="rk4", dt=1e-3)[0][-1]
    errors = [np.abs(integrate(f, rho0, t, scheme=scheme, dt=dt)[0][-1] - reference).max()
              for dt in (0.1, 0.05, 0.025)]
    assert np.all(np.abs(observed_orders(errors) - as_scheme(scheme).order) < 0.2), errors


def test_shu_osher_subclass_keeps_circle_densities_non_negative_under_positivity_control():
    cells = 128
    stage = circle.CircleOperator(mf.SA(9.0), cells, circle.DEFAULT_FLUX)
    theta = circle.cell_angles(cells)
    rho0 = np.exp(6 * np.cos(theta) + 3 * np.sin(3 * theta)) + 1e-12
    rho0 /= rho0.sum() * 2 * np.pi / cells
    t = np.linspace(0.0, 4.0, 5)
    cap = circle.step_cap(mf.SA(9.0), cells, circle.DEFAULT_FLUX)
    rhos, info = integrate(stage, rho0, t, scheme=SSPRK2, dt=cap, positivity=True)
    assert rhos.min() >= 0 and np.allclose(rhos.sum(axis=1) * 2 * np.pi / cells, 1.0, rtol=0, atol=1e-12)
    assert info["nsteps"] > 10 and info["hmax"] <= cap
    assert SSPRK2().substeps == [1.0, 1.0] and [float(c) for c in SSPRK2().c] == [0.0, 1.0]


def test_positivity_control_of_a_non_ssp_scheme_rejects_negative_results():
    """u' = -s u, s' = 1 (rate s): one RK4 step of h = 0.9/s(0) makes u negative, as the later stages
    see larger rates; the controller rejects it and halves the step, and u stays positive."""
    def f(y):
        return np.array([-y[1] * y[0], 1.0]), y[1]
    y0 = np.array([1.0, 0.3])
    assert schemes.RK4().step(lambda t, y: f(y)[0], 0.0, y0, 0.9 / 0.3).y[0] < 0
    Y, info = integrate(f, y0, np.array([0.0, 3.0]), scheme="rk4", dt=10.0, positivity=True)
    assert info["nrejected"] >= 1 and Y.min() >= 0
    assert abs(Y[-1, 0] - np.exp(-(0.3 * 3 + 4.5))) < 2e-3
    cells = 64                                       # and on the circle, RK4 never returns a negative density
    stage = circle.CircleOperator(mf.SA(9.0), cells, circle.DEFAULT_FLUX)
    rho0 = np.exp(8 * np.cos(circle.cell_angles(cells)))
    rhos, _ = integrate(stage, rho0 / rho0.mean() / (2 * np.pi), np.linspace(0, 3, 4), scheme="rk4",
                        dt=circle.step_cap(mf.SA(9.0), cells, circle.DEFAULT_FLUX), positivity=True)
    assert rhos.min() >= 0


def shu_osher_ssprk3(f, y, h):
    """Shu and Osher's SSP-RK3 step as written in their paper (the arithmetic of the old ``stepping``)."""
    y1 = y + h * f(y)
    y2 = 0.75 * y + 0.25 * (y1 + h * f(y1))
    return y / 3.0 + (2.0 / 3.0) * (y2 + h * f(y2))


def test_ssprk3_is_bit_for_bit_the_shu_osher_formula():
    """Fixed steps on the circle and sphere finite volumes (equal steps ending on each output time),
    and the first positivity-controlled step of a circle solve, equal to the hand-written formula."""
    cells = 64
    stage = circle.CircleOperator(mf.SA(4.0), cells, circle.DEFAULT_FLUX)
    theta = circle.cell_angles(cells)
    mesh = sphere.icosphere(2)
    sphere_stage = sphere.SphereOperator(mf.SA(2.0), mesh, sphere.DEFAULT_FLUX, "direct", 0.0)
    for f, rho0, dt in ((lambda r: stage(r)[0], 1 + 0.3 * np.cos(theta) + 0.2 * np.sin(theta) ** 3, 0.04),
                        (lambda r: sphere_stage(r)[0], 1 + 0.5 * mesh.points[:, 2] * mesh.points[:, 0], 0.01)):
        t = np.array([0.0, 0.1, 0.25])
        rhos, _ = integrate(f, rho0, t, scheme="ssprk3", dt=dt)
        y = rho0.copy()
        for t0, t1 in zip(t[:-1], t[1:]):
            n = int(np.ceil((t1 - t0) / dt * (1 - 1e-12)))
            for _ in range(n):
                y = shu_osher_ssprk3(f, y, (t1 - t0) / n)
        assert np.array_equal(rhos[-1], y)
    rho0 = 1 + 0.3 * np.cos(theta)
    rate = stage(rho0)[1]
    h = 0.5 / rate                                   # within every stage's bound: one step
    rhos, info = integrate(stage, rho0, np.array([0.0, h]), scheme=schemes.SSPRK3(), dt=1.0, positivity=True)
    assert info["nsteps"] == 1 and np.array_equal(rhos[-1], shu_osher_ssprk3(lambda r: stage(r)[0], rho0, h))


def test_checkpoint_resume_is_bit_for_bit_with_a_scheme_given_as_a_class(tmp_path):
    cells = 48
    stage = circle.CircleOperator(mf.SA(4.0), cells, circle.DEFAULT_FLUX)
    rho0 = 1 + 0.4 * np.cos(circle.cell_angles(cells)) ** 3
    t = np.linspace(0.0, 2.0, 5)
    cap = circle.step_cap(mf.SA(4.0), cells, circle.DEFAULT_FLUX)
    whole, info = integrate(stage, rho0, t, scheme=SSPRK2, dt=cap, positivity=True)
    calls = [0]

    def interrupted(rho):
        calls[0] += 1
        if calls[0] > 10:
            raise KeyboardInterrupt
        return stage(rho)
    path = tmp_path / "run.npz"
    with pytest.raises(KeyboardInterrupt):
        integrate(interrupted, rho0, t, scheme=SSPRK2, dt=cap, positivity=True, checkpoint=Checkpoint(path, every=3))
    with np.load(path) as saved:
        assert 0 < int(saved["nsteps"]) < info["nsteps"]
    resumed, again = integrate(stage, rho0, t, scheme=SSPRK2(), dt=cap, positivity=True,
                               checkpoint=Checkpoint(path, every=3), resume=True)
    assert np.array_equal(whole, resumed) and again == info


@pytest.mark.parametrize("scheme, positivity", [("rk4", False), ("dopri5", False), (SSPRK2, True)])
def test_a_run_past_its_budget_saves_and_resumes_bit_for_bit(tmp_path, scheme, positivity):
    def f(y):
        return (-y, 1.0) if positivity else -y
    t = np.linspace(0.0, 3.0, 4)
    whole, info = integrate(f, np.ones(2), t, scheme=scheme, dt=0.01, positivity=positivity)
    path = tmp_path / "run.npz"
    with pytest.raises(RuntimeError, match="a test passed its budget of 1e-09 s at t = .*resume=True on .*run.npz"):
        integrate(f, np.ones(2), t, scheme=scheme, dt=0.01, positivity=positivity, budget=1e-9, context="a test",
                  checkpoint=Checkpoint(path, every=10 ** 6))
    with np.load(path) as saved:
        assert int(saved["nsteps"]) == 1                # stopped after the first step
    resumed, again = integrate(f, np.ones(2), t, scheme=scheme, dt=0.01, positivity=positivity,
                               checkpoint=Checkpoint(path), resume=True)
    assert np.array_equal(whole, resumed)
    # nfev counts the evaluation at the resumed state again (the error controller's first stage)
    assert again["nsteps"] == info["nsteps"] and again["nrejected"] == info["nrejected"]
    with pytest.raises(RuntimeError, match="pass checkpoint=PATH to be able to resume"):
        integrate(f, np.ones(2), t, scheme=scheme, dt=0.01, positivity=positivity, budget=1e-9)


def test_as_scheme_names_classes_instances_and_errors():
    assert {name: type(as_scheme(name)).__name__ for name in SCHEMES} == {
        "euler": "ForwardEuler", "ssprk3": "SSPRK3", "rk4": "RK4", "dopri5": "DormandPrince",
        "implicit_euler": "ImplicitEuler", "mprk22": "MPRK22", "backward_euler": "BackwardEuler", "auto": "Auto"}
    scheme = SSPRK2()
    assert as_scheme(scheme) is scheme and isinstance(as_scheme(SSPRK2), SSPRK2)
    with pytest.raises(ValueError, match="unknown scheme 'heun'; choose one of 'euler', 'ssprk3', 'rk4', 'dopri5'"):
        as_scheme("heun")
    for bad in (3, None, int, object()):
        with pytest.raises(TypeError, match="scheme must be a name"):
            as_scheme(bad)
    with pytest.raises(ValueError, match="unknown scheme"):
        integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), scheme="rk45", dt=0.1)

    class NotConvex(ShuOsher):
        alpha, beta = [[1], [Fraction(1, 2), Fraction(1, 4)]], [[1], [0, 1]]
    with pytest.raises(ValueError, match="not a convex combination"):
        NotConvex()
    with pytest.raises(ValueError, match="give dt"):
        integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), scheme="rk4")


def slow_decay(y):
    import time
    time.sleep(0.002)
    return -y


def test_progress_lines_when_the_output_is_not_a_terminal(capsys, monkeypatch):
    """stdout/stderr captured (not a terminal): periodic plain lines, then a last one; none when asked."""
    monkeypatch.setattr(reporting, "DELAY", 0.0)
    monkeypatch.setattr(reporting, "INTERVAL", 0.01)
    integrate(slow_decay, np.ones(1), np.linspace(0.0, 10.0, 3), dt=0.5)     # progress=None: the default
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3 and all(line.startswith("solve: t=") for line in lines)
    assert "s elapsed, ~" in lines[0] and "s left" in lines[0]
    assert lines[-1].startswith("solve: t=10/10 (100%), done in")
    integrate(slow_decay, np.ones(1), np.linspace(0.0, 10.0, 3), dt=0.5, progress=False)
    assert capsys.readouterr().err == ""
    with reporting.quiet():                     # the commands' --quiet
        integrate(slow_decay, np.ones(1), np.linspace(0.0, 10.0, 3), dt=0.5)
    assert capsys.readouterr().err == ""

    def interrupted(y):
        if y[0] < 0.1:
            raise KeyboardInterrupt
        return slow_decay(y)
    with pytest.raises(KeyboardInterrupt):
        integrate(interrupted, np.ones(1), np.linspace(0.0, 10.0, 3), dt=0.5)
    assert ", stopped in" in capsys.readouterr().err.splitlines()[-1]


def test_sphere_and_particle_solves_report_outside_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(reporting, "DELAY", 0.0)
    monkeypatch.setattr(reporting, "INTERVAL", 0.0)
    mf.particles.solve(mf.SA(1.0), mf.uniform_sphere(5, 3, seed=0), [0.0, 0.5], dt=0.05)
    sphere.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 2], [0.0, 0.5], mesh=sphere.icosphere(1))
    lines = capsys.readouterr().err.splitlines()
    assert sum(line.startswith("solve: t=0.5/0.5 (100%), done in") for line in lines) == 2, lines


def test_progress_waits_for_long_runs_by_default(capsys):
    integrate(lambda y: -y, np.ones(1), np.linspace(0.0, 1.0, 3), dt=0.1)    # far below DELAY: silent
    assert capsys.readouterr().err == ""
    integrate(lambda y: -y, np.ones(1), np.linspace(0.0, 1.0, 3), dt=0.1, progress=True)
    assert capsys.readouterr().err.splitlines()[-1].startswith("solve: t=1/1 (100%), done in")


def test_one_progress_report_for_an_adaptive_run_across_its_stretches(capsys, monkeypatch):
    monkeypatch.setattr(reporting, "INTERVAL", 0.0)
    rho0 = lambda x: 1 + 0.3 * x[:, 0] + 0.1 * x[:, 1]                    # noqa: E731
    sol = adaptive_circle.solve(mf.SA(4.0), rho0, [0.0, 1.0, 2.0], cells=32, finest_cells=128, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert sol.info["remeshes"] >= 1 or sol.info["checks"] >= 1
    assert sum("done in" in line for line in lines) == 1 and lines[-1].startswith("solve: t=2/2 (100%)")
    times = [float(line.split("t=")[1].split("/")[0]) for line in lines]
    assert times == sorted(times)


def test_progress_counts_tasks():
    import io
    out = io.StringIO()
    with reporting.Progress(4, "figures", show=True, unit="figures", interval=0.0, stream=out) as report:
        for _ in range(4):
            report.update(1)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("figures: 1/4 figures (25%)") and lines[-1].startswith("figures: 4/4 figures (100%)")
    out = io.StringIO()                     # a resumed sweep: the tasks done before count in the share only
    with reporting.Progress(10, "sweep", show=True, unit="tasks", interval=0.0, stream=out, initial=4) as report:
        report.update(1)
    assert out.getvalue().startswith("sweep: 5/10 tasks (50%)")
    assert stepping.Progress is reporting.Progress


def test_meanfield_figures_reports_outside_a_terminal(capsys, monkeypatch, tmp_path):
    """``meanfield figures`` reports its experiments as log lines when its output is captured."""
    from types import SimpleNamespace
    from meanfield.cli import figures
    monkeypatch.setattr(reporting, "DELAY", 0.0)
    monkeypatch.setattr(reporting, "INTERVAL", 0.0)
    ran = []
    experiment = SimpleNamespace(main=lambda argv: ran.append(argv), __doc__="A stand-in experiment.")
    monkeypatch.setattr(figures, "scripts", lambda: {"first": None, "second": None})
    monkeypatch.setattr(figures, "load_script", lambda name: experiment)
    assert figures.main(["--out", str(tmp_path)]) == 0 and len(ran) == 2
    lines = capsys.readouterr().err.splitlines()
    assert any(line.startswith("figures: 1/2 figures (50%)") for line in lines), lines
    assert lines[-1].startswith("figures: 2/2 figures (100%), done in"), lines
