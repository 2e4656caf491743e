"""``sol.plot(kind)``: the common views of every result object, drawn by the interface layer
(``meanfield.plotting.views``), which the engines name as their plotting backend and never import."""
import ast
from pathlib import Path

import numpy as np
import pytest

import meanfield as mf
from meanfield.compare import compare
from meanfield.compare.zonal import compare as zonal_compare
from meanfield.plotting.views import VIEWS, plot
from meanfield.solvers import causal, circle, particles, results, sphere, zonal

plt = pytest.importorskip("matplotlib.pyplot")
SOLVERS = Path(results.__file__).resolve().parent


@pytest.fixture(scope="module")
def runs():
    t = np.linspace(0.0, 1.0, 3)
    density = circle.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 0], t, cells=64, progress=False)
    return {
        "circle particles": particles.solve(mf.SA(3.0), mf.uniform_sphere(12, 2, seed=0), t, progress=False),
        "sphere particles": particles.solve(mf.SA(3.0), mf.uniform_sphere(12, 3, seed=0), t, progress=False),
        "R^5 particles": particles.solve(mf.SA(3.0), mf.uniform_sphere(12, 5, seed=0), t, progress=False),
        "circle density": density,
        "sphere density": sphere.solve(mf.SA(3.0), lambda x: 1 + x[:, 2] ** 2, t, mesh=sphere.icosphere(1)),
        "zonal": zonal.solve(mf.SA(2.0), lambda s: 1 + 0.5 * s, t, d=8, cells=32, progress=False),
        "causal": causal.solve(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th), t, slices=4, cells=16),
        "comparison": compare(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 0], t, n=50, seeds=2, cells=64),
        "zonal comparison": zonal_compare(mf.SA(2.0), lambda s: 1 + 0.5 * s, t, 6, 40, seeds=2, cells=32),
    }


def _views(runs):
    for label, sol in runs.items():
        for kind in VIEWS[type(sol).__name__]:
            if kind == "spacetime" and label == "sphere density":
                continue
            yield label, kind


def test_every_result_class_has_views():
    assert set(VIEWS) == {"ParticleSolution", "DensitySolution", "ZonalSolution", "CausalDensitySolution",
                          "Comparison", "ZonalComparison"}


def test_every_view_draws_labelled_axes(runs):
    for label, kind in _views(runs):
        drawn = runs[label].plot(kind)
        assert type(plot(runs[label], kind)) is type(drawn)
        axes = drawn.axes if hasattr(drawn, "savefig") else [drawn]
        assert any(ax.get_xlabel() or ax.name == "mollweide" for ax in axes), (label, kind)
        assert any(ax.has_data() or ax.images or ax.collections for ax in axes), (label, kind)
        plt.close("all")


def test_default_view_and_given_axes(runs):
    fig, ax = plt.subplots()
    assert runs["circle density"].plot(ax=ax) is ax            # "density", on the Axes given
    assert runs["circle density"].plot("energy").get_ylabel() == r"$E_\beta$"
    assert runs["circle particles"].plot("tokens", k=0).get_ylabel() == "θ"
    plt.close("all")


def test_views_refuse_what_the_data_cannot_give(runs):
    with pytest.raises(ValueError, match="kind must be one of"):
        runs["zonal"].plot("tokens")
    with pytest.raises(ValueError, match="S\\^1"):
        runs["sphere density"].plot("spacetime")
    with pytest.raises(IndexError, match="out of range"):
        runs["causal"].plot(k=3)
    no_energy = particles.solve(mf.SA(1.0), mf.uniform_sphere(4, 3, seed=0), [0.0, 0.1], energy=False)
    with pytest.raises(ValueError, match="no energy"):
        no_energy.plot("energy")
    with pytest.raises(ValueError, match="without ax"):
        plot(runs["comparison"], "distances", ax=plt.gca())
    plt.close("all")


def test_engines_name_the_backend_but_never_import_plotting():
    """The layering: ``results.plot`` imports the backend by name when called; no engine module
    imports meanfield.plotting, and only results.PLOT_BACKEND names it."""
    assert results.PLOT_BACKEND == "meanfield.plotting.views"
    for path in SOLVERS.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any("plotting" in n for n in names), path.name
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(
                    "meanfield.plotting"):
                assert path.name == "results.py" and node.value == results.PLOT_BACKEND, path.name
