"""The validation scripts (``meanfield figures``): every experiment runs at --quick size and its
claims hold; the constructions they compare against are checked independently."""
import json

import numpy as np
import pytest

import meanfield as mf
from meanfield import cli, exact
from meanfield.cli import figures

EXPERIMENTS = ["trajectories", "high_dimension", "phase_diagram", "metastability", "kuramoto", "repulsive",
               "energy", "landscape", "high_dimension_pde", "euclidean", "noise", "cone_collapse",
               "mean_field_limit", "causal", "hardmax", "long_context", "phase_diagram_paper", "finite_dimension",
               "phase_diagram_random",
               "metastable_lifetimes", "repulsive_generic", "full_model", "metastability_pde", "metastability_sphere"]


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    """Run every experiment once at --quick size through the command line; name -> JSON record."""
    out = tmp_path_factory.mktemp("figures")
    assert cli.main(["figures", *EXPERIMENTS, "--quick", "--out", str(out)]) == 0
    records = {}
    for name in EXPERIMENTS:
        assert (out / f"{name}.png").stat().st_size > 10_000
        with open(out / f"{name}.json") as fh:
            records[name] = json.load(fh)
    records["_out"] = out
    return records


def test_every_script_is_listed_and_found(capsys):
    assert set(EXPERIMENTS) <= set(figures.scripts())
    assert figures.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = figures.scripts()
    assert len(lines) == len(names)
    column = max(map(len, names)) + 2                   # every description starts in one column
    assert all(line.startswith(name) and line[len(name):column].strip() == "" and line[column] != " "
               for line, name in zip(lines, names))


def test_unknown_experiment_is_refused(capsys):
    assert figures.main(["no_such_experiment", "--quick"]) == 2
    assert "no_such_experiment" in capsys.readouterr().err


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_quick_run_passes_its_checks_and_records_its_command(quick_results, name):
    record = quick_results[name]
    assert record["passed"] and record["quick"]
    assert record["checks"] and all(c["passed"] for c in record["checks"])
    assert record["command"].startswith(f"meanfield figures {name} --quick")


def test_trajectories_writes_a_talk_sized_gif(quick_results):
    gif = quick_results["_out"] / "trajectories.gif"
    assert gif.read_bytes()[:6] == b"GIF89a" and gif.stat().st_size < 2_000_000
    assert figures.load_script("trajectories").gif_width(gif) >= 600


def test_trajectories_unwrapped_angles_end_together():
    traj = figures.load_script("trajectories")
    t = np.linspace(0, 1, 50)[:, None]
    theta = np.stack([0.1 - 0.3 * t[:, 0], 0.1 + 0 * t[:, 0]], axis=1) % (2 * np.pi)   # one path crosses 0
    x = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    out = traj.unwrapped_angles(x)
    assert np.max(np.abs(np.diff(out, axis=0))) < 0.1                       # continuous in time
    assert abs(out[-1, 0] - (0.1 - 0.3)) < 1e-12 and abs(out[-1, 1] - 0.1) < 1e-12


def test_cone_collapse_wendel_and_hemisphere_test():
    cc = figures.load_script("cone_collapse")
    assert cc.wendel(32, 2) == pytest.approx(1.49e-8, rel=1e-2)
    assert cc.wendel(32, 16) == pytest.approx(0.5, abs=1e-12) and cc.wendel(32, 32) == 1.0
    w = np.array([0.0, 0.0, 1.0])
    x = cc.hemisphere_start(20, 3, w, seed=1)
    assert np.all(x @ w > 0) and np.allclose(np.linalg.norm(x, axis=1), 1)
    assert cc.in_open_hemisphere(x)
    assert not cc.in_open_hemisphere(np.vstack([np.eye(3), -np.eye(3)]))
    t = np.linspace(0, 10, 200)
    assert cc.tail_rate(t, np.exp(-2.5 * t)) == pytest.approx(2.5, rel=1e-10)


def test_quick_numbers(quick_results):
    hd = quick_results["high_dimension"]["results"]
    for name in ("SA", "USA"):
        assert -0.7 <= hd[name]["slope"] <= -0.3
        assert hd[name]["exact_start_error"] <= 1e-8
    meta = quick_results["metastability"]["results"]["particles"]
    for entry in meta.values():
        assert entry["early"] == [entry["l_star"]] * len(entry["early"])
    for row in quick_results["repulsive"]["results"]["table"]:
        assert max(row["energy_gap"]) <= 1e-6
    assert 0.8 <= quick_results["kuramoto"]["results"]["observed_order"] <= 1.2


def test_failed_claim_raises_and_is_recorded(tmp_path):
    import matplotlib.pyplot as plt
    exp = figures.Experiment("demo", "a claim that fails", ["--out", str(tmp_path)])
    exp.check("one equals two", 1 == 2, value=np.float64(1.0))
    with pytest.raises(figures.CheckFailed, match="one equals two"):
        exp.finish(plt.figure(), dict(array=np.arange(3), bad=np.inf))
    record = json.loads((tmp_path / "demo.json").read_text())
    assert record["passed"] is False and record["results"] == {"array": [0, 1, 2], "bad": "inf"}


def test_default_output_folder_is_left_out_of_the_command(tmp_path):
    default = figures.DEFAULT_OUT.resolve()
    assert figures._command("x", ["--quick", "--out", str(default)]) == "meanfield figures x --quick"
    assert figures._command("x", ["--out", str(tmp_path)]) == f"meanfield figures x --out {tmp_path}"


# ------------------------------------------------------------------ the scripts' own constructions

def test_repulsive_reference_configurations():
    rep = figures.load_script("repulsive")
    for d in (3, 4, 8):
        g = rep.simplex(d) @ rep.simplex(d).T
        assert np.allclose(g[~np.eye(d + 1, dtype=bool)], -1.0 / d, atol=1e-14)
        assert np.allclose(np.sum(rep.simplex(d), axis=0), 0, atol=1e-14)
    ico = rep.icosahedron()
    assert ico.shape == (12, 3)
    assert rep.min_angle(ico) == pytest.approx(np.degrees(np.arccos(1 / np.sqrt(5))), abs=1e-10)
    # every optimal configuration is balanced, hence a critical point of the repulsive flow
    for (_, n, d), x in rep.optimal_configurations().items():
        assert x.shape == (n, d)
        assert np.max(np.abs(mf.velocity(mf.USA(3.0, V=-1), x))) <= 1e-13


def test_high_dimension_span_coordinates_keep_the_gram_matrix():
    hd = figures.load_script("high_dimension")
    x = mf.uniform_sphere(8, 50, seed=3, batch=2)
    y = hd._span_coordinates(x)
    assert y.shape == (2, 8, 8)
    assert np.allclose(np.einsum("bid,bjd->bij", x, x), np.einsum("bid,bjd->bij", y, y), atol=1e-14)


def test_kuramoto_mobius_start_is_a_wrapped_cauchy_quadrature():
    kur = figures.load_script("kuramoto")
    theta = kur.mobius_angles(400, 0.3)
    assert kur.order_parameter(theta) == pytest.approx(0.3, abs=1e-12)
    # empirical CDF of the pushed points against the exact wrapped Cauchy CDF
    sorted_theta = np.sort(theta)
    cdf = exact.wrapped_cauchy_cdf(sorted_theta, 0.3)
    assert np.max(np.abs(cdf - (np.arange(400) + 0.5) / 400)) <= 1e-12


def test_metastability_initial_data():
    meta = figures.load_script("metastability")
    phases = meta.perturbation_phases(10, seed=0)
    theta = np.linspace(0, 2 * np.pi, 4096, endpoint=False)
    rho = meta.near_uniform_density(theta, phases)
    assert np.mean(rho) * 2 * np.pi == pytest.approx(1.0, abs=1e-14)
    angles = meta.near_uniform_angles(64, phases)
    assert np.max(np.abs(angles - 2 * np.pi * np.arange(64) / 64)) <= 10 * meta.EPS
    runs = meta.plateaus(np.arange(6.0), np.array([9, 4, 4, 3, 3, 3]), 1)
    assert runs == [(4, 1.0, 2.0, True), (3, 3.0, 5.0, False)]


def test_phase_diagram_boundary_and_grids():
    pd = figures.load_script("phase_diagram")
    assert pd.boundary(np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.25, 0.75])) == pytest.approx(1.5)
    assert np.isnan(pd.boundary(np.array([0.0, 1.0]), np.array([0.0, 0.4])))
    t = pd.output_times(30.0, 200, 0.1)           # step times nearest linspace(0, 30, 200), all distinct
    assert t[-1] == pytest.approx(30.0) and np.all(np.diff(t) > 0.09)
    assert np.allclose(t / 0.1, np.round(t / 0.1), atol=1e-9)
    assert pd.paper_step("USA", 9.0) == pytest.approx(0.1 / (3 * np.exp(8.5)))
    # exact P(<x, y> > s) for uniform pairs: on the circle arccos(s)/π, on S^2 (1 - s)/2
    assert pd.uniform_pair_probability(2, 0.999) == pytest.approx(np.arccos(0.999) / np.pi, rel=1e-12)
    assert pd.uniform_pair_probability(3, 0.999) == pytest.approx(0.0005, rel=1e-12)
    edges = pd._cell_edges([0.0, 1.0, 3.0])
    assert np.allclose(edges, [-0.5, 0.5, 2.0, 4.0])


def test_metastability_pde_constructions():
    mp = figures.load_script("metastability_pde")
    from meanfield.solvers import circle
    rho = mp.two_bumps(256)
    assert np.sum(rho) * 2 * np.pi / 256 == pytest.approx(1.0, abs=1e-14)
    assert np.allclose(rho, rho[::-1], atol=1e-15 * rho.max())           # mirror-symmetric about θ = 0
    theta = mp.quantile_angles(np.ones(16), 8)                           # uniform: the midpoints of 8 arcs
    assert np.allclose(theta, 2 * np.pi * (np.arange(8) + 0.5) / 8, atol=1e-14)
    assert mp.pair_angle(np.array([0.7, -0.7 + 2 * np.pi]), np.array([0.5, 0.5])) == pytest.approx(1.4, abs=1e-14)
    # Ê of the cell measure = Σ m_a² + the cross terms X of its point clusters (one cell each)
    cells, beta = 64, 5.0
    rho = np.zeros(cells)
    rho[[3, 20, 40]] = np.array([0.5, 0.3, 0.2]) * cells / (2 * np.pi)
    angles, masses = circle.cell_angles(cells)[[3, 20, 40]], np.array([0.5, 0.3, 0.2])
    e_hat = mp.normalised_energy(circle.energy(rho, beta), beta)
    assert e_hat == pytest.approx(np.sum(masses ** 2) + mp.cross_energy(angles, masses, beta), rel=1e-12)
    found = mp.density_clusters(rho)
    assert np.allclose(np.sort(found[1]), [0.2, 0.3, 0.5], atol=1e-14)
    c = mp.law_fit([1.0, 2.0, 3.0, 4.0], np.exp([1.5, 2.5, 3.5, 4.5]) / np.array([1.0, 2.0, 3.0, 4.0]))
    assert c[1] == pytest.approx(1.0, abs=1e-12) and c[2] <= 1e-10
    assert mp.intervals_overlap((0, 1.0, 0.1), (0, 1.15, 0.06))
    assert not mp.intervals_overlap((0, 1.0, 0.1), (0, 1.2, 0.06))


@pytest.mark.parametrize("tokens, m_a", [([0.0, 1.3], 0.5), ([0.0, 0.0, 1.3], 2 / 3)])
def test_two_dirac_reduction_against_tokens_on_the_circle(tokens, m_a):
    """The S¹ two-Dirac quadrature against two (equal masses) or three tokens, two of them coincident
    (masses 2/3, 1/3: they stay together exactly), integrated by the particle solver."""
    from meanfield.solvers import particles
    mp, ml = figures.load_script("metastability_pde"), figures.load_script("metastable_lifetimes")
    beta, phi = 4.0, 1.3
    predicted = ml.dirac_merge_time(beta, phi, phi / 2, m_a, 1 - m_a)
    t = np.linspace(0.0, 1.5 * predicted, 3001)
    sol = particles.solve_angles(mf.SA(beta), np.array(tokens), t, method="adaptive", rtol=1e-11, atol=1e-13,
                                 progress=False)
    gap = sol.theta[:, -1] - sol.theta[:, 0]
    assert mp.crossing(t, gap, phi / 2) == pytest.approx(predicted, rel=1e-5)
