"""The wheel: one top-level package, the experiment scripts and py.typed inside it, the version
from one source; ``meanfield figures`` runs from the unpacked wheel and writes to ./figures."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import meanfield
from meanfield import cli
from meanfield.cli import figures

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                          "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {run.stderr[-500:]}")
    (path,) = out.glob("meanfield_attention-*.whl")
    return path


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"meanfield"}
    assert "meanfield/py.typed" in names and "meanfield/solvers/particles.py" in names
    assert {"meanfield/validation/kuramoto.py", "meanfield/validation/phase_diagram.py"} <= set(names)
    assert f"-{meanfield.__version__}-" in wheel.name
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert f"Version: {meanfield.__version__}" in text and "License-File: LICENSE" in text


def test_figures_from_the_unpacked_wheel(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    run = subprocess.run([sys.executable, "-c", "import sys, meanfield.cli as c; sys.exit(c.main(['figures', '--list']))"],
                         cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg",
                                            "NUMBA_CACHE_DIR": str(tmp_path / "cache")},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "kuramoto" in run.stdout and "phase_diagram" in run.stdout
    check = subprocess.run([sys.executable, "-c", "import meanfield.cli.figures as f; print(f.validation_dir())"],
                           cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=300)
    assert check.stdout.strip().startswith(str(site)), check.stdout + check.stderr


def test_figures_write_to_dot_figures_unless_told(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert figures._parser().parse_args([]).out == "figures"
    exp = figures.Experiment("demo", "a demo", [])
    assert exp.out == Path("figures") and (tmp_path / "figures").is_dir()
    assert not (ROOT / "validation" / "results" / "demo.json").exists()


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: meanfield") and "compare" in out and "figures" in out


def test_progress_bar_appears_only_for_long_solves_by_default(monkeypatch):
    from meanfield import progress as reporting
    from meanfield.solvers import stepping
    created = []

    class Recorder(reporting.Progress):
        def __init__(self, total, desc="solve", show=None, **kwargs):
            super().__init__(total, desc, show, **kwargs)
            created.append((self.delay, self.enabled))

    monkeypatch.setattr(stepping, "Progress", Recorder)
    import meanfield as mf
    x0 = mf.uniform_sphere(5, 3, seed=0)
    for progress in (None, True, False):
        mf.particles.solve(mf.SA(1.0), x0, [0.0, 0.1], dt=0.05, progress=progress)
    assert created == [(reporting.DELAY, True), (0.0, True), (reporting.DELAY, False)]
