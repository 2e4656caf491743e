"""scheme="auto" on the adaptive engines (adaptive S², adaptive circle): a run interrupted after its switch
to backward Euler and resumed from its checkpoint repeats the uninterrupted run bit for bit (the member in use, the
implicit step and the switches are saved at each check, ``stepping.stretch_state``)."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import adaptive, adaptive_circle, circle
from meanfield.solvers.schemes import BackwardEuler
from meanfield.solvers.stepping import next_stretch, restored_stretch, stretch_state


class Interrupted(Exception):
    pass


def _interrupted_then_resumed(monkeypatch, path, solve, after):
    """The run stopped at the ``after``-th backward Euler step (past the switch), then resumed from ``path``."""
    real, calls = BackwardEuler.step, [0]

    def stopping(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > after:
            raise Interrupted
        return real(self, *args, **kwargs)
    monkeypatch.setattr(BackwardEuler, "step", stopping)
    with pytest.raises(Interrupted):
        solve(checkpoint=path, checkpoint_every=1)
    monkeypatch.undo()
    return solve(checkpoint=path, checkpoint_every=1, resume=True)


def _same(full, resumed):
    assert np.array_equal(full.rho, resumed.rho) and np.array_equal(full.cells, resumed.cells)
    for key in ("nsteps", "nfev", "switches", "meshes"):
        assert resumed.info[key] == full.info[key], key


def test_adaptive_sphere_auto_resumes_bit_for_bit(monkeypatch, tmp_path):
    def solve(**kw):
        return adaptive.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 2], [0.0, 5.0, 20.0, 30.0], base=1, finest=3,
                              bulk=2, scheme="auto", energy=False, progress=False, **kw)
    full = solve()
    assert [name for _, name in full.info["switches"]][:1] == ["backward_euler"] and full.info["remeshes"] > 0
    resumed = _interrupted_then_resumed(monkeypatch, tmp_path / "run.npz", solve, after=4)
    _same(full, resumed)


def test_adaptive_circle_auto_resumes_bit_for_bit(monkeypatch, tmp_path):
    def solve(**kw):
        return adaptive_circle.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 5.0, 20.0, 200.0], cells=32,
                                     finest_cells=256, scheme="auto", energy=False, progress=False, **kw)
    full = solve()
    assert [name for _, name in full.info["switches"]][:1] == ["backward_euler"]
    resumed = _interrupted_then_resumed(monkeypatch, tmp_path / "run.npz", solve, after=3)
    _same(full, resumed)


def test_stretch_state_round_trip_and_refusals():
    auto = adaptive.sphere_fv.auto_scheme("auto")
    switched = [(3.0, "backward_euler")]
    saved = stretch_state(next_stretch(auto, {"switches": switched, "h": 0.25})[0], 0.25, switched)
    scheme, step, switches = restored_stretch(auto, saved)
    assert (scheme.start, scheme.switch, scheme.back, step, switches) == ("implicit", 0.1, 0.25, 0.25, switched)
    assert restored_stretch("ssprk3", stretch_state("ssprk3", None, [])) == ("ssprk3", None, [])
    back = next_stretch(auto, {"switches": [(3.0, "backward_euler"), (4.0, "ssprk3")]})[0]      # went back: remembered
    assert back.returned and restored_stretch(auto, stretch_state(back, None, []))[0].returned
    assert next_stretch(back, {})[0].returned and not next_stretch(auto, {})[0].returned
    with pytest.raises(ValueError, match="does not fit"):
        restored_stretch("ssprk3", saved)                       # an auto member for an explicit run
    with pytest.raises(ValueError, match="does not fit"):
        restored_stretch("auto", dict(saved, stretch_step=np.array(-1.0)))


@pytest.mark.parametrize("scheme, after", [("backward_euler", 17), ("auto", 3)])
def test_circle_backward_euler_and_auto_resume_bit_for_bit(monkeypatch, tmp_path, scheme, after):
    """The fixed-grid engine too: a run stopped at a backward Euler step resumes bit for bit."""
    rho0 = 1 + 0.5 * np.cos(circle.cell_angles(128) - 1.0)

    def solve(**kw):
        return circle.solve(mf.SA(3.0), rho0, np.linspace(0.0, 50.0, 6), cells=128, scheme=scheme, progress=False,
                            **kw)
    full = solve()
    assert full.info["nsteps"] > after
    resumed = _interrupted_then_resumed(monkeypatch, tmp_path / "run.npz", solve, after=after)
    assert np.array_equal(full.rho, resumed.rho) and resumed.info["nsteps"] == full.info["nsteps"]


def test_auto_streak_is_carried_across_stretches():
    """An adaptive engine's stretches can be shorter than the patience of auto's switch rule (30 steps after a
    switch back): the count of steps that met the rule goes on into the next stretch and into checkpoints."""
    from meanfield.solvers.schemes import Auto
    scheme, step = next_stretch(Auto(returned=True), {"switches": [], "streak": 12})
    assert (scheme.start, scheme.returned, scheme.streak, step) == ("explicit", True, 12, None)
    back, _, _ = restored_stretch("auto", stretch_state(scheme, step, []))
    assert (back.start, back.returned, back.streak) == ("explicit", True, 12)
    assert restored_stretch("auto", {"stretch_mode": np.array(0), "stretch_step": np.array(np.nan)})[0].streak == 0
    with pytest.raises(ValueError, match="streak"):
        Auto(streak=-1)
    with pytest.raises(ValueError, match="does not fit"):
        restored_stretch("auto", {"stretch_mode": np.array(0), "stretch_step": np.array(np.nan),
                                  "stretch_streak": np.array(-3)})


def test_s2_auto_thresholds_bracket_the_cost_of_a_backward_euler_step():
    """sphere.auto_scheme switches to backward Euler at h_e / h_i < 1/10 and back above 1/4 because a
    backward Euler step costs about 5-6 SSP-RK3 steps on S² (two resting clusters, icosphere(3), CPU
    time, the fastest of several tries of each): the break-even ratio lies between the thresholds."""
    import time
    from meanfield.solvers import sphere, sphere_fv
    from meanfield.solvers.schemes import BackwardEuler, SSPRK3
    mesh = sphere.icosphere(3)
    x = mesh.points
    rho0 = np.exp(20 * x[:, 2]) + np.exp(20 * (x @ np.array([0.0, np.sin(2.0), np.cos(2.0)])))
    y = sphere.solve(mf.SA(3.0), rho0, [0.0, 20.0], mesh=mesh, progress=False, energy=False).rho[-1]
    op = sphere_fv.SphereOperator(mf.SA(3.0), mesh, "upwind2")
    implicit, explicit = BackwardEuler(1e-3, 1e-8), SSPRK3()

    def fastest(step, tries=7):
        times = []
        for _ in range(tries):
            begin = time.process_time()
            step()
            times.append(time.process_time() - begin)
        return min(times)
    implicit_step = fastest(lambda: implicit.step(op, 0.0, y, 1.0))
    explicit_step = fastest(lambda: [explicit.step(lambda t, z: op(z)[0], 0.0, y, 0.01) for _ in range(5)]) / 5
    cost = implicit_step / explicit_step
    assert 1 / sphere_fv.AUTO_BACK < cost < 1 / sphere_fv.AUTO_SWITCH, cost
    assert sphere_fv.auto_scheme("auto").switch == sphere_fv.AUTO_SWITCH
