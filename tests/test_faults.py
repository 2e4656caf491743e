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
from meanfield import atomic, compare, sweep

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
    paths = compare.write_report(first, folder)
    assert atomic.is_complete(folder) and {os.path.basename(p) for p in paths} <= set(os.listdir(folder))
    before = (folder / "report.json").read_text()
    from meanfield.plotting import report

    def interrupted(comparison, where):
        (open(os.path.join(where, "half.png"), "wb")).write(b"\x89PNG")
        raise KeyboardInterrupt
    monkeypatch.setattr(report, "report_figures", interrupted)
    second = compare.compare(model, rho0, [0.0, 1.0], n=16, seeds=1, cells=32)
    with pytest.raises(KeyboardInterrupt):
        compare.write_report(second, folder)
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
