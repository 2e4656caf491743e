"""One namespace: the engines install as ``meanfield.solvers``, nothing generic at the top level,
and the layers import downwards only (mathematics <- engines <- analysis)."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import meanfield

ROOT = Path(meanfield.__file__).resolve().parent
SOLVERS = Path(meanfield.solvers.__file__).resolve().parent
# The mathematics layer: what the engines may import from meanfield.
# the mathematics layer, and the input, file and work-budget utilities beside it (no engine, no analysis)
CORE = {"checks", "geometry", "models", "theory", "measures", "sampling", "interpolation", "atomic", "budget",
        "npzfile", "progress", "summaries"}


def _run_elsewhere(tmp_path, code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_no_top_level_solvers_package(tmp_path):
    out = _run_elsewhere(tmp_path, "import importlib.util, meanfield.solvers.particles as p;"
                                   "print(importlib.util.find_spec('solvers') is None, p.__name__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "meanfield.solvers.particles"]


def test_stray_solvers_module_in_working_directory_is_harmless(tmp_path):
    (tmp_path / "solvers.py").write_text("raise RuntimeError('user module imported')\n")
    out = _run_elsewhere(tmp_path, "import meanfield as mf; x = mf.uniform_sphere(8, 3, seed=0);"
                                   "print(mf.energy(x, 1.0) > 0)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_short_aliases():
    from meanfield.solvers import circle, particles, sphere
    assert meanfield.particles is particles and meanfield.circle is circle and meanfield.sphere is sphere


def _package(path):
    """The dotted package a file of meanfield or meanfield.solvers belongs to (subfolders included)."""
    root, name = (SOLVERS, "meanfield.solvers") if path.is_relative_to(SOLVERS) else (ROOT, "meanfield")
    return ".".join([name, *path.parent.relative_to(root).parts])


def _meanfield_imports(path):
    """Modules of meanfield that a file imports (absolute or relative), at any depth in the file."""
    tree = ast.parse(path.read_text())
    package = _package(path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.update(f"{base}.{a.name}" if not node.module else base for a in node.names)
    return {n for n in names if n.startswith("meanfield")}


@pytest.mark.parametrize("name", sorted(CORE))
def test_mathematics_layer_does_not_import_engines_or_analysis(name):
    for mod in _meanfield_imports(ROOT / f"{name}.py"):
        sub = mod.split(".")[1] if "." in mod else ""
        assert sub in CORE, f"meanfield.{name} imports {mod}"


@pytest.mark.parametrize("path", sorted(SOLVERS.rglob("*.py")), ids=lambda p: str(p.relative_to(SOLVERS)))
def test_engines_import_only_the_mathematics_layer(path):
    for mod in _meanfield_imports(path):
        parts = mod.split(".")
        if parts[:2] == ["meanfield", "solvers"]:
            continue
        assert len(parts) > 1 and parts[1] in CORE, f"{_package(path)}.{path.stem} imports {mod}"


def test_package_folders_are_found():
    """The layer rules walk the subfolders: the kernels and meshes of the engines, the analysis packages."""
    assert {p.parent.name for p in SOLVERS.rglob("*.py")} >= {"solvers", "kernels", "meshes"}
    assert _package(SOLVERS / "meshes" / "voronoi.py") == "meanfield.solvers.meshes"
    assert _package(ROOT / "transport" / "sphere.py") == "meanfield.transport"
    assert "meanfield.checks" in _meanfield_imports(ROOT / "transport" / "sphere.py")
