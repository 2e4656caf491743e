"""Issue 28, a user's first hour: one test per defect, named after it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from meanfield import sampling
import meanfield.compare as compare
from meanfield.convergence import core as convergence
from meanfield.cli import compare as compare_cli, convergence as convergence_cli
from meanfield.cli import main as cli_main
from meanfield.solvers import _numba_env


def _run(code, **env):
    environ = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environ)


@pytest.fixture(scope="module")
def quiet_report(tmp_path_factory):
    """One small ``meanfield compare --quiet`` run: its folder and what it printed."""
    out = tmp_path_factory.mktemp("ux") / "report"
    run = _run("import sys; from meanfield.cli import main; sys.exit(main(['compare', '--n', '40', '--T', '0.5', "
               f"'--outputs', '2', '--seeds', '2', '--cells', '32', '--quiet', '--out', {str(out)!r}]))")
    assert run.returncode == 0, run.stderr[-3000:]
    return out, run.stdout


def test_report_w1_line_prints_the_formula_not_the_measured_w1(quiet_report):
    out, _ = quiet_report
    cmp = compare.Comparison.load(out)
    text = cmp.explanation()
    assert f"W1 ~ pi/(2n) = {np.pi / 80:.3g}" in text            # π/(2n) for n = 40
    assert f"pi (2n)^-1/2 = {np.pi / np.sqrt(80):.3g}" in text
    assert cmp.quantum_level_w1 == pytest.approx(np.pi / 80) and compare.quantum_level(40, 2) == cmp.quantum_level


def test_quiet_compare_still_prints_the_final_distances(quiet_report):
    out, printed = quiet_report
    numbers = json.loads((out / "report.json").read_text())
    assert printed.strip().splitlines() == [
        f"final W_1 = {numbers['summary']['w1_final']:.3g}, W_2 = {numbers['summary']['w2_final']:.3g} rad at t = 0.5 "
        "(mean of 2 draws)"]


def test_wrote_n_files_counts_every_file(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli_main(["compare", "--n", "30", "--T", "0.5", "--outputs", "2", "--seeds", "1", "--cells", "32",
                     "--out", str(out)]) == 0
    files = sorted(os.listdir(out))
    assert f"wrote {len(files)} files to {out}{os.sep}" in capsys.readouterr().out and "complete.json" in files


def test_comparison_load_reads_the_report_folder_and_its_json(quiet_report):
    out, _ = quiet_report
    numbers = json.loads((out / "report.json").read_text())
    for path in (out, out / "report.json", str(out / "report.json")):
        cmp = compare.Comparison.load(path)
        np.testing.assert_array_equal(cmp.w2, numbers["w2"])
        assert cmp.particles.x.shape == (2, 2, 40, 2) and cmp.density.rho.shape == (2, 32)
        assert cmp.info["n"] == 40 and cmp.grid_error.shape == (2,)


def _study(w, clustered):
    m, a, b = w.shape
    zeros = np.zeros
    return convergence.ConvergenceStudy(
        t=np.arange(m, dtype=float), n=np.array([100, 400, 1600])[:a], cells=np.array([64, 128, 256])[:b],
        h=2 * np.pi / np.array([64, 128, 256])[:b], w1=w, w2=w, grid_w1=zeros((m, b - 1)), grid_w2=zeros((m, b - 1)),
        particle_w1=zeros((m, a - 1)), particle_w2=zeros((m, a - 1)), clustered=np.array(clustered))


def test_convergence_prints_no_order_for_pairs_at_their_floor():
    """W_2 rows equal across n (as the old default printed with 'orders'): once clustered, every
    pair is below twice π(2n)^{-1/2} and no order comes out; before clustering the same numbers do."""
    w = np.tile([0.04, 0.02, 0.01], (2, 3, 1))
    study = _study(w, [False, True])
    orders = study.orders(p=2)
    assert np.all(np.isnan([orders["h"][1], orders["n"][1]])) and orders["h"][0] == pytest.approx(1.0)
    text = study.table()
    summary, tables = text.split("\n\n", 1)
    assert summary.startswith("What converges") and "expected:" in summary      # the orders first
    # W1 at t = 1 has pairs above the floor: its table, with * at the floor; W2 at t = 1: all at the floor, one line
    assert "2.000e-02*" in tables.split("W1 at t = 1")[1].split("W2 at t = 0")[0]
    line = next(ln for ln in tables.splitlines() if ln.startswith("W2 at t = 1"))
    assert "clusters formed: every pair at its floor, below 2 x pi (2n)^(-1/2)" in line and "no order" in line
    assert "(-1/1)" not in text and "pi/(2n)" in text                   # W1's floor written as pi/(2n)


def test_default_convergence_study_shows_first_order_w1_in_h_before_clustering():
    """The default study's t = 0 tables converge; W_1 against the grid has order ~1 for the most tokens."""
    import meanfield as mf
    res = convergence.study(mf.SA(4.0), mf.perturbed_uniform(2), [0.0], [1000, 4000], [256, 512, 1024])
    assert not res.clustered[0] and 0.7 < res.orders(1)["h"][0] < 1.2


@pytest.mark.parametrize("argv", [["--grids", "0"], ["--grids", "256", "-512"], ["--n", "0"], ["--beta", "nan"],
                                  ["--n", "100", "100"], ["--times", "1000"], ["--T", "-1"],
                                  ["--geometry", "sphere", "--sampling", "quantile"], ["--amplitude", "1.5"]])
def test_convergence_options_are_refused_with_usage_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        convergence_cli.options(argv)
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


def test_compare_quantile_sampling_on_the_sphere_is_refused_with_exit_2(tmp_path):
    with pytest.raises(SystemExit) as exc:
        compare_cli.options(["--sampling", "quantile", "--geometry", "sphere", "--out", str(tmp_path / "r")])
    assert exc.value.code == 2


def test_help_and_rejected_options_import_no_engine():
    code = ("import sys\nfrom meanfield.cli import main\nfor argv in {argv}:\n    try:\n        main(argv)\n"
            "    except SystemExit:\n        pass\n"
            "heavy = ('numba', 'ot', 'scipy.special', 'scipy.stats', 'matplotlib')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    for argv in ([["--help"]], [["compare", "--help"]], [["compare", "--beta", "nan"]], [["convergence", "--help"]],
                 [["convergence", "--n", "0", "5"]], [["compare", "--geometry", "sphere", "--mesh", "uniform",
                                                       "--finest", "5"]]):
        run = _run(code.format(argv=argv))
        assert run.stdout.strip().splitlines()[-1] == "[]", (argv, run.stdout, run.stderr[-2000:])


def test_import_meanfield_imports_neither_pot_nor_scipy_stats():
    run = _run("import sys, meanfield as mf, meanfield.transport, meanfield.solvers.noise, meanfield.compare.zonal\n"
               "print('ot' in sys.modules, 'scipy.stats' in sys.modules, mf.energy.__name__)")
    assert run.stdout.split() == ["False", "False", "energy"], run.stderr[-2000:]


def test_python_dash_m_meanfield_runs_the_command():
    run = subprocess.run([sys.executable, "-m", "meanfield", "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "compare" in run.stdout


def test_figures_and_sweep_accept_quiet_and_figures_help_lists_experiments(capsys):
    from meanfield import sweep
    from meanfield.cli import figures
    assert figures._parser().parse_args(["--quiet"]).quiet and sweep._parser().parse_args(["c.toml", "--quiet"]).quiet
    assert "kuramoto" in figures._parser().format_help() and "phase_diagram" in figures._parser().format_help()


def test_cli_choices_are_the_solvers_and_samplers_own():
    from meanfield.solvers import circle, sphere
    assert set(compare_cli.SAMPLINGS) == set(sampling.METHODS)
    assert set(compare_cli.FLUXES) == set(circle.FLUXES) | set(sphere.FLUXES)
    assert compare_cli.DEFAULTS["flux"] == compare.FLUX
    assert "{upwind2,upwind,muscl,tpfa}" in compare_cli._parser().format_help()
    for parser in (compare_cli._parser(), convergence_cli._parser()):
        assert all(a.help for a in parser._actions), [a.dest for a in parser._actions if not a.help]


def test_compare_reads_toml_config_without_tomllib(tmp_path):
    """Python 3.10 has no tomllib: compare_cli falls back to tomli, as sweep does."""
    pytest.importorskip("tomli")
    config = tmp_path / "c.toml"
    config.write_text("beta = 2.5\n")
    run = _run("import sys; sys.modules['tomllib'] = None\nfrom meanfield import compare_cli\n"
               f"print(compare_cli.options(['--config', {str(config)!r}, '--out', {str(tmp_path / 'r')!r}])['beta'])")
    assert run.stdout.strip() == "2.5", run.stderr[-2000:]


def test_numba_cache_of_an_installed_package_goes_to_the_user_cache(tmp_path, monkeypatch):
    site = tmp_path / "lib" / "site-packages" / "meanfield" / "solvers"
    site.mkdir(parents=True)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(_numba_env, "__file__", str(site / "_numba_env.py"))
    _numba_env.configure_cache()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "cache" / "meanfield" / "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))      # the user's choice wins
    _numba_env.configure_cache()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr(_numba_env, "__file__", str(tmp_path / "checkout" / "solvers" / "_numba_env.py"))
    (tmp_path / "checkout" / "solvers").mkdir(parents=True)
    _numba_env.configure_cache()                                         # a writable source checkout: beside the code
    assert "NUMBA_CACHE_DIR" not in os.environ


def test_threads_follow_a_cpu_quota_below_the_visible_cpus(tmp_path, monkeypatch):
    """A container that sees 8 CPUs under a quota of 1.5 CPUs runs 2 threads per library; no quota
    ("max"), a quota above the visible CPUs, or a variable the user set leaves the counts alone."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    for name in _numba_env.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    _numba_env.configure_threads(str(tmp_path))
    assert not any(name in os.environ for name in _numba_env.THREAD_VARIABLES)
    (tmp_path / "cpu.max").write_text("1600000 100000\n")             # 16 CPUs' worth: more than visible
    _numba_env.configure_threads(str(tmp_path))
    assert not any(name in os.environ for name in _numba_env.THREAD_VARIABLES)
    monkeypatch.setenv("MKL_NUM_THREADS", "7")
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    _numba_env.configure_threads(str(tmp_path))
    assert [os.environ[name] for name in _numba_env.THREAD_VARIABLES] == ["2", "2", "2", "7"]
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert _numba_env.cpu_quota(str(tmp_path / "v1")) is None
    (v1 / "cpu.cfs_quota_us").write_text("300000\n")
    assert _numba_env.cpu_quota(str(tmp_path / "v1")) == 3


@pytest.mark.parametrize("method", ["stratified", "weighted"])
def test_sphere_stratified_and_weighted_moments_converge_at_order_three_halves(method):
    """Uniform ρ on S^2 (its Knothe map is exact): the largest error of the means of x, y, z, z^2, xy
    (exact 0, 0, 0, 1/3, 0), rms over 12 draws, times n^{3/2} stays bounded from n = 1000 to 64000
    (observed 0.4-1.5); a shift common to all rows gave error x n = 0.56 at every n, i.e. 18 -> 141."""
    def error(n, seed):
        x, w = sampling.discretise(lambda p: np.full(len(p), 1 / (4 * np.pi)), n, 3, method, seed=seed)
        moments = [x[:, 0], x[:, 1], x[:, 2], x[:, 2] ** 2 - 1 / 3, x[:, 0] * x[:, 1]]
        return max(abs(w @ f) for f in moments)
    ns = np.array([1000, 8000, 64000])
    rms = np.array([np.sqrt(np.mean([error(n, s) ** 2 for s in range(12)])) for n in ns])
    order = -np.polyfit(np.log(ns), np.log(rms), 1)[0]
    assert order > 1.3 and np.all(rms * ns ** 1.5 < 4.0), (order, rms * ns ** 1.5)


def test_comparison_plot_draws_the_common_views(quiet_report):
    import matplotlib.pyplot as plt
    cmp = compare.Comparison.load(quiet_report[0])
    for kind in ("distances", "energy", "solution"):
        fig = cmp.plot(kind)
        assert fig.axes and fig.axes[0].has_data()
        plt.close(fig)
    with pytest.raises(ValueError, match="kind"):
        cmp.plot("histogram")


def test_figures_replot_redraws_a_stored_figure_from_its_json(tmp_path):
    import shutil
    from pathlib import Path

    from meanfield.cli import figures
    stored = Path(__file__).resolve().parent.parent / "validation" / "results"
    for name in ("high_dimension_pde", "kuramoto"):
        shutil.copy(stored / f"{name}.json", tmp_path)
    assert figures.main(["high_dimension_pde", "--replot", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "high_dimension_pde.png").stat().st_size > 10_000
    assert figures.main(["kuramoto", "--replot", "--out", str(tmp_path)]) == 2     # its script has no figure()


def test_results_print_short():
    """print() of a result names its arrays by shape: a 900-point measure is not dumped."""
    from types import SimpleNamespace

    import meanfield as mf
    from meanfield.clusters import point_mass_measure
    from meanfield.solvers.results import DensitySolution, ParticleSolution
    n = 900
    centres = mf.circle_points(2 * np.pi * (np.arange(n) + 0.5) / n)
    rho = np.full(n, 0.01)
    rho[[10, 11, 400]] = 50.0
    grid = SimpleNamespace(points=centres, areas=np.full(n, 2 * np.pi / n), rho=rho[None])
    results = [point_mass_measure(grid),
               ParticleSolution(t=np.linspace(0, 1, 3), x=np.tile(centres, (3, 1, 1))),
               DensitySolution(t=np.zeros(1), points=centres, areas=grid.areas, rho=rho[None], mass=np.ones(1),
                               energy=np.ones(1))]
    for result in results:
        text = repr(result)
        assert len(text) < 400 and "0.01" not in text.replace("0.01 ", ""), text
