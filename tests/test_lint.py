"""ruff (configured in pyproject.toml) finds nothing in the package (validation scripts included), the
examples and the docs."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    pytest.importorskip("ruff")
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    run = subprocess.run([exe, "check", "--no-cache", "meanfield", "solvers", "validation", "examples", "docs"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
