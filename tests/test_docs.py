"""The documentation builds with warnings as errors, every gallery example executed, and the
code of the tutorials and of the README runs."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def python_blocks(page):
    """The ```python fenced blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


@pytest.mark.slow
def test_docs_build_with_warnings_as_errors_and_every_example_executed(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("sphinx_gallery")
    gallery = DOCS / "auto_examples"
    shutil.rmtree(gallery, ignore_errors=True)      # generated: rebuilt from examples/, every script rerun
    env = dict(os.environ, MPLBACKEND="Agg")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
           str(DOCS), str(tmp_path / "html")]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-8000:]
    html = tmp_path / "html"
    assert EXAMPLES, "no gallery examples found in examples/"
    for script in EXAMPLES:
        page = html / "auto_examples" / f"{script.stem}.html"
        assert page.is_file(), f"{script.name} has no gallery page"
        assert list((gallery / "images").glob(f"sphx_glr_{script.stem}_*.png")), f"{script.name} drew no figure"
    for page in ("index", "api/solvers", "tutorials/pde", "tutorials/validate", "tutorials/energies"):
        assert (html / f"{page}.html").is_file(), page
    # the API reference carries the docstrings' formulas and parameters
    solvers = (html / "api" / "solvers.html").read_text()
    assert "ParticleSolution" in solvers and "to_xarray" in solvers


@pytest.mark.parametrize("page", sorted((DOCS / "tutorials").glob("*.md")) + [ROOT / "README.md", DOCS / "extending.md"],
                         ids=lambda p: p.stem)
def test_tutorial_and_readme_code_runs(page, tmp_path, monkeypatch):
    blocks = python_blocks(page)
    assert blocks, f"{page.name} has no python code"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)
    import matplotlib.pyplot as plt
    plt.close("all")
