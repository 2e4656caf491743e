"""Fault injection: processes killed while writing a report folder, interrupted report writes,
and corrupted sweep-store task files."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import meanfield as mf
from meanfield import atomic, sweep
from meanfield.cli.report import write_report
from meanfield.compare import core as compare
from meanfield.cli import compare as compare_cli

sys.path.insert(0, os.path.dirname(__file__))
import sweep_tasks  # noqa: E402

WRITER = textwrap.dedent("""
    import importlib.util, os, sys, time
    spec = importlib.util.spec_from_file_location("atomic", {atomic!r})
    atomic = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(atomic)
    folder, tag = sys.argv[1], sys.argv[2]

    def write(tmp):
        print("writing", flush=True)
        for i in range(6):
            with open(os.path.join(tmp, f"part{{i}}.txt"), "w") as fh:
                fh.write(tag * 4096)
            time.sleep(0.01)

    atomic.replace_folder(folder, write)
    print("done", flush=True)
""")


def _tags(folder):
    """The set of tags the folder's parts were written with."""
    return {open(os.path.join(folder, f)).read(1) for f in os.listdir(folder) if f.startswith("part")}


def test_killed_report_write_leaves_the_old_or_the_new_folder(tmp_path):
    """SIGKILL at random moments of a folder write: the folder is always complete (marker and
    every listed file intact) and holds one run's files only; leftovers vanish on the next write."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(atomic=atomic.__file__))
    folder = str(tmp_path / "report")
    run = [sys.executable, str(script), folder]
    assert subprocess.run(run + ["A"], capture_output=True, timeout=60).returncode == 0
    rng = np.random.default_rng(0)
    seen = set()
    for trial, tag in enumerate("BCDEFGHIJK"):
        child = subprocess.Popen(run + [tag], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "writing"
        time.sleep(rng.uniform(0.0, 0.09))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        assert atomic.is_complete(folder), f"trial {trial}: incomplete folder"
        tags = _tags(folder)
        assert len(tags) == 1, f"trial {trial}: a mix of runs {tags}"
        seen |= tags
    assert subprocess.run(run + ["Z"], capture_output=True, timeout=60).returncode == 0
    assert _tags(folder) == {"Z"} and atomic.is_complete(folder)
    assert sorted(os.listdir(tmp_path)) == ["report", "writer.py"]       # no leftovers
    assert "A" in seen or len(seen) > 1


def test_crash_between_the_fallback_renames_is_recovered(tmp_path, monkeypatch):
    """Without renameat2 the swap is two renames; a crash between them leaves no folder, and the
    next write restores the old one first."""
    folder = tmp_path / "r"
    atomic.replace_folder(folder, lambda tmp: open(os.path.join(tmp, "part0.txt"), "w").write("A"))
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    real_rename, calls = os.rename, []

    def crash_on_second(a, b):
        calls.append(a)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_rename(a, b)

    monkeypatch.setattr(atomic.os, "rename", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_folder(folder, lambda tmp: open(os.path.join(tmp, "part0.txt"), "w").write("B"))
    monkeypatch.setattr(atomic.os, "rename", real_rename)
    assert not folder.exists()
    atomic._recover(str(folder))
    assert _tags(folder) == {"A"} and atomic.is_complete(folder)


def test_interrupted_report_keeps_the_previous_report(tmp_path, monkeypatch):
    """write_report of a real comparison; a second one interrupted (SIGINT) half way through
    its figures leaves the first report whole, with its marker."""
    model, rho0 = mf.SA(2.0), mf.perturbed_uniform(2, seed=1)
    first = compare.compare(model, rho0, [0.0, 0.5], n=16, seeds=1, cells=32)
    folder = tmp_path / "report"
    paths = write_report(first, folder)
    assert atomic.is_complete(folder) and {os.path.basename(p) for p in paths} <= set(os.listdir(folder))
    before = (folder / "report.json").read_text()
    from meanfield.cli import report

    def interrupted(comparison, where):
        (open(os.path.join(where, "half.png"), "wb")).write(b"\x89PNG")
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "report_figures", interrupted)
    second = compare.compare(model, rho0, [0.0, 1.0], n=16, seeds=1, cells=32)
    with pytest.raises(KeyboardInterrupt):
        write_report(second, folder)
    assert (folder / "report.json").read_text() == before and atomic.is_complete(folder)
    assert json.loads(before)["t"] == [0.0, 0.5]
    assert sorted(os.listdir(tmp_path)) == ["report"]


# --------------------------------------------------------------------------- the sweep store

def _corruptions(path):
    data = path.read_bytes()
    flipped = bytearray(data)
    for i in range(40, len(data), 97):
        flipped[i] ^= 0xFF
    return {"empty": b"", "truncated": data[: len(data) // 2], "flipped": bytes(flipped), "garbage": b"not a zip"}


@pytest.mark.parametrize("kind", ["empty", "truncated", "flipped", "garbage"])
def test_corrupt_task_file_is_detected_named_and_recomputed(tmp_path, kind):
    grid = {"a": [1, 2, 3]}
    clean = sweep.run(sweep_tasks.polynomial, grid, 2, tmp_path)
    victim = tmp_path / "tasks" / f"{clean.keys[3]}.npz"
    victim.write_bytes(_corruptions(victim)[kind])
    with pytest.warns(RuntimeWarning, match=clean.keys[3]):
        partial = sweep.load(tmp_path)
    assert len(partial) == 5 and partial.info["pending"] == 1 and partial.info["corrupt"] == [str(victim)]
    with pytest.warns(RuntimeWarning, match=f"{clean.keys[3]}.npz"):
        again = sweep.run(sweep_tasks.polynomial, grid, 2, tmp_path)
    assert again.info["computed"] == 1 and again.info["reused"] == 5
    assert again.get("y").tolist() == clean.get("y").tolist()
    assert np.array_equal(again.get("v"), clean.get("v"))
    assert (tmp_path / "tasks" / f"{clean.keys[3]}.npz.corrupt").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(sweep.load(tmp_path)) == 6


def test_corrupt_manifest_is_named(tmp_path):
    sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path)
    (tmp_path / "sweep.json").write_text("{ truncated")
    with pytest.raises(ValueError, match="sweep.json is corrupt"):
        sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path)



def test_full_disk_while_storing_a_task_fails_that_task_only(tmp_path, monkeypatch):
    real_write, calls = sweep.write_file, []

    def full_on_second_task(path, write):
        if os.path.basename(os.path.dirname(path)) == "tasks":
            calls.append(path)
            if len(calls) == 2:
                raise OSError(28, "No space left on device")
        real_write(path, write)

    monkeypatch.setattr(sweep, "write_file", full_on_second_task)
    with pytest.raises(sweep.SweepError, match="(?s)1 of 3 tasks.*No space left"):
        sweep.run(sweep_tasks.polynomial, {"a": [1, 2, 3]}, 1, tmp_path)
    monkeypatch.setattr(sweep, "write_file", real_write)
    again = sweep.run(sweep_tasks.polynomial, {"a": [1, 2, 3]}, 1, tmp_path)
    assert again.info["computed"] == 1 and again.get("y").tolist() == [1, 4, 9]


# --------------------------------------------------------------------------- issue 29: more faults

def test_two_writers_of_one_new_folder_take_turns(tmp_path):
    """Two processes writing one new report folder at once (two `compare --out` runs): both
    finish, and the folder is one complete report of one of them, with no leftovers."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(atomic=atomic.__file__))
    folder = str(tmp_path / "report")
    children = [subprocess.Popen([sys.executable, str(script), folder, tag], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for tag in "AB"]
    outputs = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    assert atomic.is_complete(folder) and len(_tags(folder)) == 1
    assert sorted(os.listdir(tmp_path)) == ["report", "writer.py"]


def test_compare_out_on_a_read_only_mount_is_refused_up_front(tmp_path, monkeypatch, capsys):
    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(atomic.tempfile, "mkdtemp", read_only)
    with pytest.raises(SystemExit) as info:
        compare_cli.options(["--out", str(tmp_path / "r")])
    assert info.value.code == 2
    assert f"out {tmp_path / 'r'} cannot be written (Read-only file system)" in capsys.readouterr().err


def test_compare_out_on_a_full_mount_names_the_folder_and_keeps_the_old_report(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "r"
    argv = ["--n", "16", "--T", "0.5", "--cells", "32", "--seeds", "1", "--outputs", "2", "--quiet",
            "--out", str(folder)]
    assert compare_cli.main(argv) == 0
    before = (folder / "report.json").read_text()
    from meanfield.cli import report

    def full(comparison, where):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report, "report_figures", full)
    assert compare_cli.main(argv[:-1] + [str(folder)]) == 1
    assert f"cannot write out {folder}: No space left on device" in capsys.readouterr().err
    assert (folder / "report.json").read_text() == before and atomic.is_complete(folder)
    assert sorted(os.listdir(tmp_path)) == ["r"]


def test_report_folder_and_marker_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomic.replace_folder(tmp_path / "r", lambda tmp: open(os.path.join(tmp, "a.txt"), "w").write("x"))
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "r").st_mode & 0o777 == 0o755
    assert os.stat(tmp_path / "r" / atomic.MARKER).st_mode & 0o777 == 0o644


CONVERGENCE = textwrap.dedent("""
    import sys, time
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from meanfield.cli import convergence as convergence_cli
    real = Figure.savefig

    def slow_savefig(self, *args, **kwargs):
        print("writing", flush=True)
        time.sleep(0.3)
        return real(self, *args, **kwargs)

    Figure.savefig = slow_savefig
    sys.exit(convergence_cli.main(["--n", "8", "16", "--grids", "16", "32", "--T", sys.argv[2], "--times", "2",
                               "--out", sys.argv[1], "--quiet"]))
""")


def test_killed_convergence_run_leaves_the_old_or_the_new_results(tmp_path):
    """`meanfield convergence` killed while it writes its results: the folder keeps the previous
    complete results (never a JSON of one run beside the plot of another)."""
    script = tmp_path / "conv.py"
    script.write_text(CONVERGENCE)
    folder = tmp_path / "out"
    run = [sys.executable, str(script), str(folder)]
    assert subprocess.run(run + ["0.5"], capture_output=True, timeout=300).returncode == 0
    first = (folder / "convergence.json").read_text()
    child = subprocess.Popen(run + ["0.25"], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    time.sleep(np.random.default_rng(1).uniform(0.0, 0.35))
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    assert atomic.is_complete(folder) and (folder / "convergence.json").read_text() == first
    atomic._recover(str(folder))            # what the next write does first: the leftovers go
    assert sorted(os.listdir(tmp_path)) == ["conv.py", "out"]


KILLED_RUN = textwrap.dedent("""
    import time, numpy as np
    import meanfield as mf
    from meanfield.solvers import particles, schemes, sphere
    real = schemes.ShuOsher.step

    def slow_step(*args):
        time.sleep({pause})            # so that the test can kill the run mid-way
        return real(*args)

    schemes.ShuOsher.step = slow_step
    {call}
""")
NOISY = ("particles.solve(mf.SA(2.0), mf.uniform_sphere(8, 3, seed=2), np.linspace(0, 2, 9), method='euler', "
         "dt=0.01, noise=0.3, seed=5, energy=False, checkpoint={path!r}, checkpoint_every=20)")
SPHERE = ("sphere.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 2], np.linspace(0, 3, 7), mesh=sphere.icosphere(1), "
          "checkpoint={path!r}, checkpoint_every=2)")


@pytest.mark.parametrize("call, pause", [(NOISY, 0.01), (SPHERE, 0.1)], ids=["noisy-particles", "sphere"])
def test_killed_checkpointed_run_resumes_bit_for_bit(tmp_path, call, pause):
    path = tmp_path / "run.npz"
    code = KILLED_RUN.format(pause=pause, call=call.format(path=str(path)))
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 120
    k = 0
    while time.monotonic() < deadline and proc.poll() is None and k < 3:
        time.sleep(0.05)
        try:
            with np.load(path) as ck:
                k = int(ck["k"])
        except (OSError, ValueError, KeyError):
            pass
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with np.load(path) as ck:
        k = int(ck["k"])
    assert 2 <= k < 9, "the run finished before it could be killed"
    from meanfield.solvers import particles, sphere      # noqa: F401  (names of the calls)
    full = eval(call.format(path=str(tmp_path / "fresh.npz")))
    resumed = eval(call.format(path=str(path)).replace("checkpoint=", "resume=True, checkpoint="))
    for name in ("t", "x", "rho", "mass", "energy"):
        a, b = getattr(full, name, None), getattr(resumed, name, None)
        assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), name


# --------------------------------------------------------------------------- report folders and their markers

@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    """A real comparison's report folder (written once; tests copy it)."""
    folder = tmp_path_factory.mktemp("reports") / "report"
    c = compare.compare(mf.SA(2.0), mf.perturbed_uniform(2, seed=1), [0.0, 0.5], n=16, seeds=1, cells=32)
    write_report(c, folder)
    return folder


def _copy(folder, to):
    import shutil
    shutil.copytree(folder, to)
    return to


@pytest.mark.parametrize("added", ["notes.txt", "mydata/x.csv", "empty_folder/"])
def test_out_over_a_report_holding_user_files_refuses_and_keeps_them(tmp_path, small_report, capsys, added):
    """A report folder to which the user added a file or a folder: --out refuses (exit 2, naming it)
    and replace_folder refuses, so nothing of the user's is deleted."""
    out = _copy(small_report, tmp_path / "out")
    target = out / added
    if added.endswith("/"):
        target.mkdir()
    else:
        target.parent.mkdir(exist_ok=True)
        target.write_text("mine")
    with pytest.raises(SystemExit) as exit_:
        compare_cli.main(["--n", "8", "--cells", "16", "--T", "0.1", "--out", str(out), "--quiet"])
    assert exit_.value.code == 2 and added.split("/")[0] in capsys.readouterr().err
    with pytest.raises(ValueError, match="does not list"):
        atomic.replace_folder(out, lambda tmp: None)
    assert target.exists() and (out / "report.json").exists()


def test_out_refuses_a_folder_whose_marker_is_damaged(tmp_path, small_report):
    out = _copy(small_report, tmp_path / "out")
    (out / atomic.MARKER).write_text("{not json")
    with pytest.raises(ValueError, match="damaged"):
        atomic.check_folder(out, "out")


def _changed_digit(path):
    text = path.read_text()
    i = next(i for i, ch in enumerate(text) if ch in "123456789" and i > text.index('"w1"'))
    path.write_text(text[:i] + str(int(text[i]) % 9 + 1) + text[i + 1:])


@pytest.mark.parametrize("fault", ["digit", "swapped", "missing", "added", "truncated", "no_marker"])
def test_report_loaders_verify_the_folder_against_its_marker(tmp_path, small_report, fault):
    """A report folder changed after it was written is refused by Comparison.load, naming what differs."""
    out = _copy(small_report, tmp_path / "out")
    if fault == "digit":
        _changed_digit(out / "report.json")
        match = "report.json changed"
    elif fault == "swapped":        # another report's density (same size class, different numbers)
        other = compare.compare(mf.SA(2.0), mf.perturbed_uniform(2, seed=2), [0.0, 0.5], n=16, seeds=1, cells=32)
        write_report(other, tmp_path / "other")
        os.replace(tmp_path / "other" / "density.npz", out / "density.npz")
        match = "density.npz"
    elif fault == "missing":
        os.remove(out / "particles.npz")
        match = "particles.npz is missing"
    elif fault == "added":
        (out / "extra.npz").write_bytes(b"x")
        match = "extra.npz is not listed"
    elif fault == "truncated":
        (out / "report.json").write_text((out / "report.json").read_text()[:50])
        match = "report.json has"
    else:
        os.remove(out / atomic.MARKER)
        match = "no complete.json"
    for path in (out, out / "report.json"):
        with pytest.raises(ValueError, match=match) as err:
            compare.Comparison.load(path)
        assert str(out) in str(err.value)
    assert compare.Comparison.load(small_report).t.tolist() == [0.0, 0.5]
