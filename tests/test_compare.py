"""Particles against the density PDE (the mean-field limit), the cluster counts, and the
``meanfield compare`` command end to end."""
import json

import numpy as np
import pytest

import meanfield as mf
import meanfield.compare as cmp
from meanfield.cli.report import write_report
from meanfield.clusters import density_clusters, particle_clusters
from meanfield.cli import compare as compare_cli
from meanfield.cli import main as cli_main
from meanfield.measures import perturbed_uniform
from meanfield.transport import wasserstein
from meanfield.solvers.results import DensitySolution, ParticleSolution

T_EVAL = np.array([0.0, 2.5, 5.0])


@pytest.fixture(scope="module")
def beta4():
    """SA, β = 4 on S^1 from the default perturbed-uniform ρ_0: eight draws each of n = 1000 and
    n = 10000 tokens against the 4096-cell solution, and the solutions on 16, 32 and 64 cells."""
    model, rho0 = mf.SA(4.0), perturbed_uniform(2)
    fine = cmp.density_solver("circle", model, rho0, T_EVAL, cells=4096)
    runs = {n: cmp.compare(model, rho0, T_EVAL, n=n, seeds=8, density=fine, seed=1, sampling="iid")
            for n in (1000, 10000)}
    coarse = {cells: cmp.density_solver("circle", model, rho0, T_EVAL, cells=cells) for cells in (16, 32, 64)}
    return runs, coarse, fine


def test_w2_at_t5_decreases_as_tokens_grow(beta4):
    """Tenfold n, means over eight draws. By t = 5 clusters have formed and the mass each one
    captures is off by δm ~ n^{-1/2}: that costs W_1 ~ δm D ~ n^{-1/2} (ratio 10^{-1/2} = 0.32)
    but W_2 ~ sqrt(δm) D ~ n^{-1/4} (ratio 0.56). At t = 0, i.i.d. sampling: W_2 ~ n^{-1/2}.
    Over draw seeds 0-9 the ratios were W_2(t=5) 0.37-0.68, W_1(t=5) 0.24-0.40, W_2(t=0) 0.26-0.35."""
    runs, _, _ = beta4
    small, large = runs[1000], runs[10000]
    assert large.w2[-1].mean() < 0.85 * small.w2[-1].mean()
    assert large.w1[-1].mean() < 0.5 * small.w1[-1].mean()
    assert large.w2[0].mean() < 0.45 * small.w2[0].mean()


def test_w2_at_t5_decreases_as_cells_grow(beta4):
    runs, coarse, fine = beta4
    particles = runs[10000].particles.x[-1]
    w2 = {cells: np.mean([wasserstein(x, None, *sol.measure(-1)) for x in particles])
          for cells, sol in coarse.items()}
    assert w2[16] > w2[32] > w2[64]
    # beyond 64 cells the grid error (0.12 at 64, 0.02 at 512) drops below the particles' own
    # error at n = 10^4 (0.14-0.19 over draw seeds 0-9), which then sets W_2: the curve flattens
    assert runs[10000].w2[-1].mean() < w2[16]
    grid_error = [wasserstein(*sol.measure(-1), *fine.measure(-1)) for sol in coarse.values()]
    assert grid_error[0] > grid_error[1] > grid_error[2]


def test_particle_and_grid_energies_agree_within_one_percent(beta4):
    runs, _, fine = beta4
    large = runs[10000]
    # at t = 0 (sampling: the self-interaction e^β/(2βn) = 0.05 % and noise) and at t = 5
    # (clusters formed): |gap| <= 0.5 % over draw seeds 0-9. During the fastest growth (t = 2.5)
    # the amplified sampling noise moves the particles' energy by up to 1.4 % at n = 10^4
    # (up to 5 % at n = 10^3)
    assert np.all(np.abs(large.energy_gap[[0, -1]]) < 0.01)
    assert np.all(np.abs(large.energy_gap) < 0.02)
    np.testing.assert_array_equal(large.energy_density, fine.energy)
    # E_β rises along the flow (attractive SA) for the density and for every draw
    assert np.all(np.diff(large.energy_density) > 0) and np.all(np.diff(large.energy_particles, axis=0) > 0)
    # the independent energy routine on one draw reproduces the stored particle energy
    assert np.isclose(mf.energy(large.particles.x[-1, 0], 4.0), large.energy_particles[-1, 0], rtol=1e-12)


def test_comparison_records_methods_and_serialises(beta4):
    runs, _, _ = beta4
    c = runs[1000]
    assert c.w1.shape == c.w2.shape == c.energy_particles.shape == c.clusters_particles.shape == (3, 8)
    assert c.info["transport_methods"] == ["circle"] and c.info["n"] == 1000
    numbers = json.loads(json.dumps(c.to_dict()))
    assert numbers["summary"]["w2_final"] == pytest.approx(c.w2[-1].mean())
    assert len(c.table().splitlines()) == 2 + T_EVAL.size
    head, rule, first = c.table().splitlines()[:3]
    # one header per cluster column, each right-aligned over its own numbers
    assert head.endswith("tokens density") and first.rstrip().endswith(f"{c.clusters_density[0]:>7}")
    assert head.index("tokens") + len("tokens") == len(first.rstrip()) - 8


def test_sampling_choices_reference_lines_and_the_iid_horizon():
    """quantile is deterministic (one draw), weighted tokens carry their weights into W_p, energy and
    clusters; the report carries W_2(ρ_h, ρ_2h) and n^{-1/2} e^{λ* t} with t_n = log(n)/(2λ*)."""
    model, rho0, t = mf.SA(4.0), perturbed_uniform(2), np.array([0.0, 1.0, 2.0])
    q = cmp.compare(model, rho0, t, n=400, seeds=3, cells=128, sampling="quantile")
    assert q.w2.shape == (3, 1) and q.info["seeds"] == 1 and q.info["sampling"] == "quantile"
    lam = mf.growth_rate(model, 2, 3)
    assert q.info["mode"] == 3 and q.info["lambda_star"] == pytest.approx(lam)
    assert q.info["horizon"] == pytest.approx(np.log(400) / (2 * lam))
    np.testing.assert_allclose(q.iid_prediction, np.exp(lam * t) / 20.0)
    coarse = cmp.density_solver("circle", model, rho0, t, cells=64)
    np.testing.assert_allclose(q.grid_error, [wasserstein(*q.density.measure(k), *coarse.measure(k)) for k in range(3)])
    assert "horizon" in q.explanation() and "grid error" in q.explanation()
    w = cmp.compare(model, rho0, t, n=400, seeds=2, cells=128, sampling="weighted", density=q.density)
    assert w.weights.shape == (2, 400) and w.grid_error is None
    x, b = w.particles.x[-1, 1], w.weights[1]
    assert w.w2[-1, 1] == pytest.approx(wasserstein(x, b, *w.density.measure(-1)), abs=1e-6)
    assert w.energy_particles[-1, 1] == pytest.approx(mf.energy(x, 4.0, weights=b), rel=1e-10)
    # deterministic samples start far closer to ρ_0 than i.i.d. ones
    i = cmp.compare(model, rho0, t, n=400, seeds=2, density=q.density, sampling="iid")
    assert q.w1[0, 0] < 0.2 * i.w1[0].mean()
    assert cmp.compare(mf.SA(4.0, V=-1.0), rho0, t[:2], n=50, seeds=1, cells=64).iid_prediction is None


# --- cluster counts ---------------------------------------------------------------------------------

def test_particle_clusters_count_separated_groups():
    rng = np.random.default_rng(0)
    centres = np.array([0.3, 2.0, 4.1])
    theta = np.repeat(centres, 300) + 1e-3 * rng.standard_normal(900)
    assert particle_clusters(mf.circle_points(theta)) == 3
    assert particle_clusters(mf.circle_points(2 * np.pi * np.arange(900) / 900)) == 1
    x = mf.uniform_sphere(900, 3, seed=1)
    poles = mf.normalise(np.concatenate([x[:450] * 1e-3 + [0, 0, 1], x[450:] * 1e-3 - [0, 0, 1]]))
    np.testing.assert_array_equal(particle_clusters(np.stack([poles, x])), [2, 1])


def test_density_clusters_count_bumps_above_the_level():
    cells = 256
    theta = 2 * np.pi * (np.arange(cells) + 0.5) / cells
    gap = np.abs((theta[:, None] - np.array([1.0, 3.0, 5.0]) + np.pi) % (2 * np.pi) - np.pi)
    rho = np.exp(-(gap / 0.1) ** 2).sum(axis=1)
    rho = np.stack([np.full(cells, 1.0), rho])
    areas = np.full(cells, 2 * np.pi / cells)
    rho /= (rho @ areas)[:, None]
    sol = DensitySolution(t=np.array([0.0, 1.0]), points=mf.circle_points(theta), areas=areas, rho=rho,
                          mass=rho @ areas, energy=np.zeros(2), model=mf.SA(1.0))
    assert density_clusters(sol, 0) == 1
    assert density_clusters(sol, 1) == 3


# --- the command line ---------------------------------------------------------------------------------

def test_cli_circle_end_to_end(tmp_path, capsys):
    out = tmp_path / "report"
    assert cli_main(["compare", "--n", "60", "--T", "1", "--outputs", "3", "--seeds", "2", "--cells", "64",
                     "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "W2" in printed and "SA(beta=4)" in printed
    for name in ("report.json", "particles.npz", "density.npz", "solution.png", "wasserstein.png", "energy.png"):
        assert (out / name).stat().st_size > 0
    numbers = json.loads((out / "report.json").read_text())
    assert np.array(numbers["w2"]).shape == (3, 2) and numbers["options"]["cells"] == 64
    particles = ParticleSolution.load(out / "particles.npz")
    assert particles.x.shape == (3, 2, 60, 2)
    np.testing.assert_allclose(particles.energy, numbers["energy_particles"])
    assert DensitySolution.load(out / "density.npz").rho.shape == (3, 64)


def test_cli_sphere_end_to_end(tmp_path):
    out = tmp_path / "sphere"
    assert compare_cli.main(["--geometry", "sphere", "--level", "1", "--n", "40", "--T", "0.5", "--outputs", "2",
                     "--seeds", "1", "--model", "USA", "--beta", "1", "--out", str(out), "--quiet"]) == 0
    numbers = json.loads((out / "report.json").read_text())
    assert numbers["info"]["transport_methods"] == ["emd"] and numbers["info"]["grid"]["cells"] == 42
    assert numbers["info"]["grid"]["mesh"] == "icosphere(1)"
    assert numbers["info"]["model"]["model"] == "USA"
    assert (out / "solution.png").stat().st_size > 0


def test_config_file_and_command_line_precedence(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('beta = 2.5\nn = 50\ngeometry = "sphere"\n')
    opts = compare_cli.options(["--config", str(config), "--n", "40"])
    assert opts["beta"] == 2.5 and opts["n"] == 40 and opts["geometry"] == "sphere" and opts["T"] == 20.0
    assert opts["outputs"] == 6 and opts["mesh"] == "adaptive" and opts["seeds"] == 2
    assert (opts["base"], opts["finest"], opts["bulk"], opts["level"]) == (3, 8, 4, None)
    assert compare_cli.options([])["outputs"] == 41
    assert compare_cli.options([])["n"] == 2000 and compare_cli.options([])["sampling"] == "stratified"
    config.write_text("temperature = 3\n")
    with pytest.raises(SystemExit):
        compare_cli.options(["--config", str(config)])
    with pytest.raises(SystemExit):
        compare_cli.options(["--T", "0"])


def test_compare_refuses_mismatched_inputs(beta4):
    _, _, fine = beta4
    with pytest.raises(ValueError, match="same output times"):
        cmp.compare(mf.SA(4.0), perturbed_uniform(2), [0.0, 1.0], n=10, seeds=1, density=fine)
    with pytest.raises(ValueError, match="unknown geometry"):
        cmp.compare(mf.SA(4.0), perturbed_uniform(2), [0.0, 1.0], n=10, geometry="torus")


# ---------------------------------------------------------------------------------------------------
# the sphere's density on adaptive cells (the default of compare(geometry="sphere") and of the command)

def bumps(x):
    """Two narrow bumps of unequal mass on S^2 (at +z and +x) over a faint floor: clustered from the start."""
    return np.exp(20 * (x[:, 2] - 1)) + 0.5 * np.exp(20 * (x[:, 0] - 1)) + 1e-4


@pytest.fixture(scope="module")
def adaptive_sphere():
    return cmp.compare(mf.SA(4.0), bumps, [0.0, 1.0, 2.0], n=120, seeds=2, geometry="sphere", base=1, finest=4,
                       bulk=2, progress=False)


def test_sphere_compare_runs_on_adaptive_cells_by_default(adaptive_sphere):
    c = adaptive_sphere
    assert np.isfinite(c.w1).all() and np.isfinite(c.w2).all() and (c.w1 <= c.w2 + 1e-12).all()
    assert np.isfinite(c.grid_error).all() and c.grid_error.shape == (3,)
    grid = c.info["grid"]
    assert (grid["mesh"], grid["base"], grid["finest"], grid["bulk"]) == ("adaptive", 1, 4, 2)
    assert grid["cells_per_output"] == c.density.cells.tolist() and grid["cells"] == max(grid["cells_per_output"])
    assert len(set(grid["cells_per_output"])) > 1 and grid["remeshes"] == len(grid["meshes"]) - 1 >= 1
    assert grid["reference"] == "adaptive base 0, finest 3, bulk 1"       # every level one less
    assert c.clusters_density.tolist() == [density_clusters(c.density.snapshot(k), 0) for k in range(3)]
    assert "adaptive cells (levels 1-4, bulk 2)" in cmp.describe_grid(grid)
    assert set(c.info["cpu_seconds"]) == set(c.info["timings"]) >= {"particles", "density", "transport"}
    # the same call with level alone is the uniform icosphere, as before
    u = cmp.compare(mf.SA(4.0), bumps, [0.0, 1.0], n=40, seeds=1, geometry="sphere", level=1, progress=False)
    assert u.density.cells is None and u.info["grid"]["mesh"] == "icosphere(1)" and u.info["grid"]["cells"] == 42


def test_adaptive_sphere_comparison_saves_loads_and_reports(adaptive_sphere, tmp_path):
    c = adaptive_sphere
    back = cmp.Comparison.load(c.save(tmp_path / "c.npz"))
    np.testing.assert_array_equal(back.density.cells, c.density.cells)
    np.testing.assert_array_equal(back.density.rho, c.density.rho)
    np.testing.assert_array_equal(back.w1, c.w1)
    assert back.info["grid"] == json.loads(json.dumps(c.info["grid"]))
    paths = write_report(c, tmp_path / "report")
    assert {"solution.png", "wasserstein.png", "energy.png"} <= {p.rsplit("/", 1)[-1] for p in paths}
    folder = cmp.Comparison.load(tmp_path / "report")
    np.testing.assert_array_equal(folder.density.cells, c.density.cells)
    for k in range(3):                          # each output's measure on its own mesh
        (x, w), (_, v) = folder.density.measure(k), c.density.measure(k)
        assert x.shape == (c.density.cells[k], 3)
        np.testing.assert_allclose(w, v)
    # a precomputed adaptive density is described as it is
    again = cmp.compare(mf.SA(4.0), bumps, [0.0, 1.0, 2.0], n=40, seeds=1, geometry="sphere", density=c.density,
                        progress=False)
    assert again.info["grid"]["cells_per_output"] == c.density.cells.tolist() and again.grid_error is None


def test_adaptive_density_tracks_clustered_particles_closer_than_uniform_cells_of_the_same_count():
    """Two narrow bumps contracting (SA β = 4, T = 2): 1000 stratified tokens against the density on
    adaptive cells (levels 2 to 5, at most ~660 cells) and on icosphere(3) (642 cells), the same tokens.
    The adaptive cells put their finest level under the mass: W_1 at T is 0.024 against 0.072 (measured);
    the particles' own floor is about 0.02. A refinement that missed the clusters, a transfer that spread
    them, or a comparison read off the wrong mesh would lose the factor."""
    runs = {name: cmp.compare(mf.SA(4.0), bumps, [0.0, 1.0, 2.0], n=1000, seeds=1, geometry="sphere",
                              grid_reference=False, progress=False, **kwargs)
            for name, kwargs in (("adaptive", dict(base=2, finest=5, bulk=2)), ("uniform", dict(level=3)))}
    adaptive, uniform = runs["adaptive"], runs["uniform"]
    assert adaptive.info["grid"]["cells"] <= 1.1 * uniform.info["grid"]["cells"]       # comparable cells
    np.testing.assert_allclose(adaptive.particles.x, uniform.particles.x)            # the same tokens
    assert adaptive.w1[-1, 0] < 0.5 * uniform.w1[-1, 0]
    assert adaptive.w2[-1, 0] < uniform.w2[-1, 0]


@pytest.mark.parametrize("argv, expected", [
    ([], dict(mesh="adaptive", base=3, finest=8, bulk=4, level=None)),
    (["--level", "3"], dict(mesh="uniform", level=3, base=None, finest=None, bulk=None)),
    (["--mesh", "uniform"], dict(mesh="uniform", level=4, finest=None)),
    (["--finest", "6", "--bulk", "5"], dict(mesh="adaptive", base=3, finest=6, bulk=5)),
    (["--base", "2", "--finest", "3"], dict(mesh="adaptive", base=2, finest=3, bulk=3)),    # default bulk clipped
    (["--mesh", "adaptive", "--base", "1"], dict(mesh="adaptive", base=1, finest=8, bulk=4)),
])
def test_cli_mesh_options_parse(argv, expected, tmp_path):
    opts = compare_cli.options(["--geometry", "sphere", *argv, "--out", str(tmp_path / "r")])
    assert {name: opts[name] for name in expected} == expected


@pytest.mark.parametrize("argv, message", [
    (["--geometry", "sphere", "--mesh", "uniform", "--finest", "5"], "finest set adaptive cells"),
    (["--geometry", "sphere", "--mesh", "adaptive", "--level", "3"], "level selects a uniform icosphere"),
    (["--geometry", "sphere", "--finest", "10"], "finest must be <= 9"),
    (["--geometry", "sphere", "--base", "4", "--finest", "3"], "finest = 3 must be at least base = 4"),
    (["--geometry", "sphere", "--finest", "5", "--bulk", "6"], "bulk = 6 must lie between"),
    (["--geometry", "sphere", "--bulk", "-1"], "bulk must be"),
    (["--geometry", "sphere", "--level", "9"], "level must be <= 8"),
    (["--geometry", "sphere", "--mesh", "hexagonal"], "invalid choice"),
    (["--finest", "5"], "with geometry circle use cells"),
])
def test_cli_bad_mesh_options_are_refused_before_any_solve(argv, message, tmp_path, capsys, monkeypatch):
    from meanfield.solvers import adaptive, particles
    monkeypatch.setattr(particles, "solve", lambda *a, **k: pytest.fail("particles ran before the check"))
    monkeypatch.setattr(adaptive, "solve", lambda *a, **k: pytest.fail("the density ran before the check"))
    with pytest.raises(SystemExit) as exc:
        compare_cli.options([*argv, "--out", str(tmp_path / "r")])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_config_file_sets_the_sphere_cells(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('geometry = "sphere"\nmesh = "uniform"\nlevel = 3\n')
    opts = compare_cli.options(["--config", str(config), "--out", str(tmp_path / "r")])
    assert (opts["mesh"], opts["level"], opts["finest"]) == ("uniform", 3, None)
    config.write_text('geometry = "sphere"\nfinest = 6\nbulk = 5\n')
    opts = compare_cli.options(["--config", str(config), "--out", str(tmp_path / "r")])
    assert (opts["mesh"], opts["base"], opts["finest"], opts["bulk"]) == ("adaptive", 3, 6, 5)
    config.write_text('geometry = "sphere"\nfinest = 6.5\n')
    with pytest.raises(SystemExit):
        compare_cli.options(["--config", str(config), "--out", str(tmp_path / "r")])


def test_compare_refuses_cells_of_the_other_kind():
    with pytest.raises(ValueError, match="level selects a uniform"):
        cmp.compare(mf.SA(4.0), bumps, [0.0, 1.0], n=10, seeds=1, geometry="sphere", grid="adaptive", level=3)
    with pytest.raises(ValueError, match="bulk set adaptive cells"):
        cmp.compare(mf.SA(4.0), bumps, [0.0, 1.0], n=10, seeds=1, geometry="sphere", grid="uniform", bulk=3)
    with pytest.raises(ValueError, match="mesh must be one of|mesh"):
        cmp.sphere_cells(mesh="voronoi")
    assert cmp.coarser_cells(cmp.sphere_cells(base=0, finest=2)) is None
    with pytest.raises(ValueError, match="finest set the density's cells on the sphere"):
        cmp.compare(mf.SA(4.0), perturbed_uniform(2), [0.0, 1.0], n=10, seeds=1, finest=5)


def test_cli_sphere_adaptive_end_to_end(tmp_path, capsys):
    out = tmp_path / "adaptive"
    assert compare_cli.main(["--geometry", "sphere", "--base", "1", "--finest", "3", "--n", "40", "--T", "0.5",
                             "--outputs", "2", "--seeds", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "adaptive cells (levels 1-3, bulk 3)" in printed and "against adaptive base 0, finest 2, bulk 2" in printed
    numbers = json.loads((out / "report.json").read_text())
    assert numbers["info"]["grid"]["mesh"] == "adaptive" and numbers["options"]["finest"] == 3
    assert (out / "solution.png").stat().st_size > 0
    assert cmp.Comparison.load(out).density.cells.tolist() == numbers["info"]["grid"]["cells_per_output"]


def test_a_precomputed_density_of_another_problem_is_refused():
    from meanfield.compare import compare
    from meanfield.solvers import circle
    rho0 = mf.perturbed_uniform(2, seed=0)
    t = [0.0, 0.5]
    density = circle.solve(mf.SA(2.0), rho0, t, cells=64)
    with pytest.raises(ValueError, match="solved for SA\\(beta=2\\)"):
        compare(mf.SA(3.0), rho0, t, n=32, seeds=1, cells=64, density=density, progress=False)
    with pytest.raises(ValueError, match="rho0"):
        compare(mf.SA(2.0), mf.perturbed_uniform(2, seed=1), t, n=32, seeds=1, cells=64, density=density,
                progress=False)
    c = compare(mf.SA(2.0), rho0, t, n=32, seeds=2, cells=64, density=density, progress=False)
    import matplotlib.pyplot as plt
    assert c.plot().axes[0].get_yscale() == "log"          # no kind: the distances, as documented
    plt.close("all")
