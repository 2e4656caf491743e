"""Checkpoint/resume: an interrupted solve, resumed from its checkpoint, equals the uninterrupted
solve bit for bit (particles with every method, batches, weights and general Q, K, V; the circle
and sphere finite volumes), whether stopped by an exception or killed by SIGKILL."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import circle, particles, schemes, small, sphere, zonal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = np.linspace(0.0, 2.0, 5)


class Interrupted(Exception):
    pass


def count_steps(monkeypatch, name, stop_after=None):
    """Wrap every registered scheme's ``step`` (one call per step; "dopri5": DormandPrince's only),
    ``ShuOsher.stages_within`` (one call per positivity-controlled attempt) or small.advance (``count``
    steps per call) to count steps, raising before a call that would take more than ``stop_after``."""
    owners, attribute = {"step": (list(schemes.SCHEMES.values()), "step"),
                         "dopri5": ([schemes.DormandPrince], "step"),
                         "stages_within": ([schemes.ShuOsher], "stages_within"),
                         "advance": ([small], "advance")}[name]
    calls = [0]

    def wrap(real):
        def step(*args, **kwargs):
            count = args[3] if name == "advance" else 1
            if stop_after is not None and calls[0] + count > stop_after:
                raise Interrupted
            calls[0] += count
            return real(*args, **kwargs)
        return step
    for owner in owners:
        monkeypatch.setattr(owner, attribute, wrap(getattr(owner, attribute)))
    return calls


def assert_resumes_exactly(monkeypatch, tmp_path, solve, fields, stop_after, every, step="step"):
    """Interrupt ``solve(**kw)`` after ``stop_after`` steps, resume it, compare with a clean run."""
    path = tmp_path / "run.ckpt.npz"
    full_steps = count_steps(monkeypatch, step)
    full = solve()
    monkeypatch.undo()
    assert stop_after < full_steps[0]
    count_steps(monkeypatch, step, stop_after=stop_after)
    with pytest.raises(Interrupted):
        solve(checkpoint=path, checkpoint_every=every)
    monkeypatch.undo()
    assert path.exists()
    resumed_steps = count_steps(monkeypatch, step)
    resumed = solve(checkpoint=path, checkpoint_every=every, resume=True)
    monkeypatch.undo()
    # it restarted from the last checkpoint, not from t = 0
    if step in ("step", "advance"):
        assert resumed_steps[0] == full_steps[0] - stop_after // every * every
    else:                                   # dopri5: rejected steps count too
        assert resumed_steps[0] < full_steps[0]
    for name in fields:
        a, b = getattr(full, name), getattr(resumed, name)
        assert a.shape == b.shape and np.array_equal(a, b), name
    assert resumed.info["nsteps"] == full.info["nsteps"]
    return full


@pytest.mark.parametrize("engine, step", [("kernels", "step"), ("small", "advance")])
@pytest.mark.parametrize("method, stop_after, every", [
    ("rk4", 23, 7),          # stopped mid-interval, checkpoint mid-interval
    ("rk4", 20, 10),         # checkpoint exactly at an output time
    ("euler", 31, 4),
])
def test_particles_fixed_step(monkeypatch, tmp_path, method, stop_after, every, engine, step):
    x0 = mf.uniform_sphere(10, 3, seed=1)
    model = mf.SA(3.0)

    def solve(**kw):
        return particles.solve(model, x0, T, method=method, dt=0.05, engine=engine, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "x", "energy"], stop_after, every, step)
    assert full.info["nsteps"] == 40 and full.info["engine"] == engine


@pytest.mark.parametrize("engine, step", [("kernels", "step"), ("small", "advance")])
def test_particles_causal(monkeypatch, tmp_path, engine, step):
    """Causal attention (the mask inside both engines) resumes bit for bit."""
    x0 = mf.uniform_sphere(10, 3, seed=3)

    def solve(**kw):
        return particles.solve(mf.SA(3.0, Q=np.diag([1.0, 2.0, 0.5]), causal=True), x0, T, dt=0.05, engine=engine,
                               **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "x"], 23, 7, step)
    assert full.info["engine"] == engine and np.all(np.isnan(full.energy))


def test_particles_blas_tiled_engine(monkeypatch, tmp_path):
    """n > small.SMALL_N and d = 16: the field is summed by ``gemm`` (BLAS tiles)."""
    x0 = mf.uniform_sphere(small.SMALL_N + 12, 16, seed=4)

    def solve(**kw):
        return particles.solve(mf.SA(3.0), x0, T, dt=0.1, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "x", "energy"], 9, 4)
    assert full.info["engine"] == "kernels" and full.info["summation"] == "direct"


def test_particles_adaptive(monkeypatch, tmp_path):
    x0 = mf.uniform_sphere(12, 3, seed=2)

    def solve(**kw):
        return particles.solve(mf.SA(5.0), x0, T, method="adaptive", rtol=1e-9, atol=1e-12, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "x", "energy"], 13, 3, step="dopri5")
    assert full.info["nsteps"] > 13


@pytest.mark.parametrize("model", [mf.USA(2.0), mf.SA(1.5, V=-1.0), mf.SA(2.0, Q=np.diag([1.0, 2.0, 0.5]), V=-0.5)],
                         ids=["USA", "repulsive", "general"])
def test_particles_batched_models_and_weights(monkeypatch, tmp_path, model):
    x0 = mf.uniform_sphere(7, 3, seed=3, batch=3)
    w = np.random.default_rng(0).uniform(0.5, 1.5, 7)

    def solve(**kw):
        return particles.solve(model, x0, T, dt=0.05, weights=w, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "x"], 17, 5, step="advance")
    assert full.x.shape == (5, 3, 7, 3)


@pytest.mark.parametrize("summation", ["fast", "direct"])
@pytest.mark.parametrize("dt, step", [(0.04, "step"), (None, "stages_within")], ids=["fixed", "controlled"])
def test_circle_finite_volumes(monkeypatch, tmp_path, dt, step, summation):
    """Fixed steps, and steps from the positivity rate (one ``ShuOsher.stages_within`` call per attempt)."""
    def solve(**kw):
        return circle.solve(mf.SA(4.0), lambda x: 1.0 + 0.3 * x[:, 0] + 0.2 * x[:, 1] ** 3, T, cells=64, dt=dt,
                            summation=summation, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "rho", "mass", "energy"], 15, 4, step)
    assert full.info["nsteps"] > 15 and full.info["summation"] == summation


def test_zonal_controlled_steps(monkeypatch, tmp_path):
    def solve(**kw):
        return zonal.solve(mf.SA(4.0), lambda s: np.exp(2.0 * s), T, 4, cells=48, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "masses", "mass", "energy"], 15, 4,
                                  "stages_within")
    assert full.info["nsteps"] > 15 and full.info["dt"] is None


def test_sphere_finite_volumes(monkeypatch, tmp_path):
    """The default controlled steps (one ``ShuOsher.stages_within`` call per attempt)."""
    mesh = sphere.icosphere(1)

    def solve(**kw):
        return sphere.solve(mf.SA(2.0), lambda x: 1.0 + 0.5 * x[:, 2] + 0.2 * x[:, 0] * x[:, 1],
                            np.linspace(0.0, 3.0, 4), mesh=mesh, **kw)
    full = assert_resumes_exactly(monkeypatch, tmp_path, solve, ["t", "rho", "mass", "energy"], 3, 2,
                                  "stages_within")
    assert full.info["nsteps"] > 3


def test_resume_without_checkpoint_runs_from_the_start(tmp_path):
    x0 = mf.uniform_sphere(6, 3, seed=4)
    full = particles.solve(mf.SA(1.0), x0, T, dt=0.1)
    fresh = particles.solve(mf.SA(1.0), x0, T, dt=0.1, checkpoint=tmp_path / "c.npz", resume=True)
    assert np.array_equal(full.x, fresh.x)
    # a finished run's checkpoint is its end state: resuming returns it without a step
    again = particles.solve(mf.SA(1.0), x0, T, dt=0.1, checkpoint=tmp_path / "c.npz", resume=True)
    assert np.array_equal(full.x, again.x)


def test_checkpoint_of_another_run_is_refused(tmp_path):
    x0 = mf.uniform_sphere(6, 3, seed=5)
    path = tmp_path / "c.npz"
    particles.solve(mf.SA(1.0), x0, T, dt=0.1, checkpoint=path, checkpoint_every=3)
    with pytest.raises(ValueError, match="different run"):
        particles.solve(mf.SA(2.0), x0, T, dt=0.1, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match="different run"):
        particles.solve(mf.SA(1.0), x0, T, dt=0.05, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match="other output times"):
        particles.solve(mf.SA(1.0), x0, T[:-1], dt=0.1, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match="another initial state"):
        particles.solve(mf.SA(1.0), mf.uniform_sphere(6, 3, seed=6), T, dt=0.1, checkpoint=path, resume=True)


KILLED_SOLVE = """
import time, numpy as np
import meanfield as mf
from meanfield.solvers import particles, small
real = small.advance
def slow_steps(*args):
    time.sleep(0.004 * args[3])      # slows the run down so that the test can kill it mid-way
    return real(*args)
small.advance = slow_steps
x0 = mf.uniform_sphere(16, 3, seed=7)
particles.solve(mf.SA(4.0), x0, np.linspace(0, 8, 9), dt=0.01, checkpoint={path!r}, checkpoint_every=25)
"""


def test_solve_killed_by_sigkill_resumes_exactly(tmp_path):
    path = tmp_path / "killed.npz"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SOLVE.format(path=str(path))], cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists():
            with np.load(path) as ck:
                if int(ck["k"]) >= 3:          # a few output times done
                    break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with np.load(path) as ck:
        k = int(ck["k"])
    assert 3 <= k < 9, "the solve finished before it could be killed"
    x0 = mf.uniform_sphere(16, 3, seed=7)
    t = np.linspace(0, 8, 9)
    resumed = particles.solve(mf.SA(4.0), x0, t, dt=0.01, checkpoint=path, checkpoint_every=25, resume=True)
    full = particles.solve(mf.SA(4.0), x0, t, dt=0.01)
    assert resumed.info["nsteps"] == full.info["nsteps"] == 800
    assert np.array_equal(resumed.x, full.x) and np.array_equal(resumed.energy, full.energy)


def test_checkpoint_with_other_weights_is_refused(tmp_path):
    path = tmp_path / "weighted.npz"
    x0 = mf.uniform_sphere(8, 3, seed=0)
    w = np.linspace(1.0, 2.0, 8)
    particles.solve(mf.USA(1.0), x0, [0, 1], weights=w, checkpoint=path, checkpoint_every=5)
    with pytest.raises(ValueError, match="different run"):
        particles.solve(mf.USA(1.0), x0, [0, 1], weights=w[::-1], checkpoint=path, resume=True)
