"""The Examples of the whole public API run as doctests: every module of ``meanfield`` and of
``meanfield.solvers`` (installed from solvers/, so the modules are found by import, not by path),
one test per module, in a temporary folder, with matplotlib's Agg backend and no figure left open."""
import doctest
import importlib
import pkgutil

import pytest

NOT_API = ("meanfield.validation", "meanfield.__main__")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def api_modules():
    """Every module of ``meanfield`` and of ``meanfield.solvers`` (which lives in solvers/ and is
    installed under that name, so it is walked from its own path), without NOT_API."""
    names = []
    for package in ("meanfield", "meanfield.solvers"):
        root = importlib.import_module(package)
        names += [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    return sorted({n for n in names if not any(n == s or n.startswith(s + ".") for s in NOT_API)})


MODULES = api_modules()


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    plt = pytest.importorskip("matplotlib.pyplot")
    plt.switch_backend("Agg")
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    tests = [test for test in doctest.DocTestFinder().find(module, name) if test.examples]
    if not tests:
        pytest.skip(f"{name} has no examples")
    lines = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    failed = sum(runner.run(test, out=lines.append).failed for test in tests)
    assert failed == 0, "".join(lines)
    assert plt.get_fignums() == [], f"{name}: its examples leave figures open"


def test_the_solvers_are_collected():
    assert "meanfield.solvers.circle" in MODULES and "meanfield.transport" in MODULES
    assert not any(n.startswith("meanfield.validation") for n in MODULES)
