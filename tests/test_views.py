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
                          "Comparison", "CausalComparison", "ZonalComparison"}


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


def test_engines_never_name_plotting():
    """The layering: ``sol.plot()`` draws with the function the interface layer registered, found
    through the ``meanfield.plotters`` entry point;
    no engine module imports meanfield.plotting or holds its name as a string to import."""
    from importlib.metadata import entry_points
    from meanfield.plotting import views
    assert [p.value for p in entry_points(group=results.PLOTTERS)] == ["meanfield.plotting.views:plot"]
    assert results._plotter == [views.plot]
    for path in SOLVERS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any("plotting" in n for n in names), path.name
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.strip().startswith("meanfield.plotting"), path.name   # a module name


def test_plot_loads_the_backend_in_a_fresh_interpreter(tmp_path):
    """``sol.plot()`` with only the engines imported: the entry point brings the backend in."""
    import subprocess
    import sys
    code = ("import matplotlib; matplotlib.use('Agg'); import sys, numpy as np, meanfield as mf;"
            "from meanfield.solvers import circle;"
            "sol = circle.solve(mf.SA(1.0), lambda x: 1 + 0 * x[:, 0], [0.0, 0.1], cells=16, progress=False);"
            "assert 'meanfield.plotting.views' not in sys.modules; print(sol.plot('energy').get_ylabel())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == r"$E_\beta$"


def test_register_plotter_refuses_what_cannot_draw():
    with pytest.raises(TypeError, match="callable"):
        results.register_plotter("meanfield.plotting.views")
