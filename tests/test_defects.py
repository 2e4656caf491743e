"""Regressions for the defects of the fault and fuzz audit (issue 16), one test per reproduction,
named after the failure it guards against.  The report-folder and sweep-store fault injection
is in test_faults.py, the fuzz suite in test_fuzz.py."""
import os
import re
import sys
import time

import numpy as np
import pytest

import meanfield as mf
from meanfield import sweep
from meanfield.compare import core as compare
from meanfield.cli import compare as compare_cli
from meanfield.clusters import cluster_count
from meanfield.solvers import circle, particles, sphere, stepping
from meanfield.solvers.meshes.voronoi import Mesh
from meanfield.solvers.results import ParticleSolution
from meanfield.theory import equiangular_curve, funk_hecke, growth_rate, log_ive, most_unstable_mode

sys.path.insert(0, os.path.dirname(__file__))
import sweep_tasks  # noqa: E402

X3 = mf.uniform_sphere(12, 3, seed=3)
T = [0.0, 0.2]


def exits_with_usage_error(call):
    """call() stops like argparse does on bad options: SystemExit with status 2."""
    with pytest.raises(SystemExit) as info:
        call()
    assert info.value.code == 2


# --------------------------------------------------------------------------- 1. meshes

def _mesh_fields(mesh, **change):
    fields = {name: np.array(getattr(mesh, name)) for name in
              ("points", "areas", "edges", "lengths", "distances", "normals", "cell_ptr", "cell_edges",
               "cell_neighbours")}
    fields.update(change)
    return fields


def test_mesh_with_out_of_range_index_is_refused_instead_of_segfaulting(tmp_path):
    mesh = sphere.icosphere(1)
    edges = np.array(mesh.edges)
    edges[3, 1] = 10 ** 6
    with pytest.raises(ValueError, match="edges"):
        Mesh(**_mesh_fields(mesh, edges=edges))
    cell_edges = np.array(mesh.cell_edges)
    cell_edges[0] = -5
    with pytest.raises(ValueError, match="cell_edges"):
        Mesh(**_mesh_fields(mesh, cell_edges=cell_edges))
    path = tmp_path / "bad.npz"
    np.savez(path, name="bad", **_mesh_fields(mesh, edges=edges))
    with pytest.raises(ValueError, match="bad.npz"):
        Mesh.load(path)


def test_mesh_with_non_unit_points_is_refused():
    mesh = sphere.icosphere(0)
    with pytest.raises(ValueError, match="points"):
        Mesh(**_mesh_fields(mesh, points=2 * np.array(mesh.points)))


def test_saved_mesh_round_trips(tmp_path):
    mesh = sphere.icosphere(1)
    mesh.save(tmp_path / "m.npz")
    back = Mesh.load(tmp_path / "m.npz")
    assert np.array_equal(back.edges, mesh.edges) and back.name == mesh.name


# --------------------------------------------------------------------------- 2. typed TOML options

@pytest.mark.parametrize("line, name", [
    ('model = "sa"', "model"), ('model = "SAA"', "model"), ('repulsive = "false"', "repulsive"),
    ('quiet = "no"', "quiet"), ("outputs = 2.9", "outputs"), ("stroe = 1", "stroe"), ("n = true", "n"),
    ('beta = "4"', "beta"), ("T = nan", "T"), ("amplitude = 1.5", "amplitude"), ("level = 12", "level"),
])
def test_compare_toml_with_wrong_type_or_unknown_key_is_refused(tmp_path, capsys, line, name):
    config = tmp_path / "c.toml"
    config.write_text(line + ("\ngeometry = \"sphere\"\n" if name == "level" else "\n"))
    exits_with_usage_error(lambda: compare_cli.options(["--config", str(config), "--out", str(tmp_path / "r")]))
    assert name in capsys.readouterr().err


def test_sweep_toml_with_a_typo_is_refused(tmp_path, capsys):
    config = tmp_path / "s.toml"
    config.write_text('function = "meanfield.sweep:particle_clusters"\nstroe = "x"\n[grid]\nbeta = [1.0]\n')
    exits_with_usage_error(lambda: sweep.main([str(config)]))
    assert "stroe" in capsys.readouterr().err


# --------------------------------------------------------------------------- 4. work lost to late checks

def test_out_pointing_to_a_file_is_refused_before_computing(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    exits_with_usage_error(lambda: compare_cli.options(["--out", str(tmp_path / "f")]))
    assert "is a file" in capsys.readouterr().err
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    exits_with_usage_error(lambda: compare_cli.options(["--out", str(tmp_path / "mine")]))
    assert "not a meanfield report" in capsys.readouterr().err


# a flux name of the circle solver that the sphere solver does not know (muscl, before the flux
# vocabularies were unified), else a made-up one: the check follows the solver modules' own lists
CIRCLE_ONLY_FLUX = next(f for f in circle.FLUXES + ("no-such-flux",) if f not in sphere.FLUXES)


def test_compare_sphere_with_muscl_flux_is_refused_up_front(tmp_path, capsys):
    exits_with_usage_error(lambda: compare_cli.options(["--geometry", "sphere", "--flux", CIRCLE_ONLY_FLUX,
                                                    "--out", str(tmp_path / "r")]))
    assert "flux" in capsys.readouterr().err
    exits_with_usage_error(lambda: compare_cli.options(["--T", "nan", "--out", str(tmp_path / "r")]))
    assert "T must be" in capsys.readouterr().err


def test_density_settings_are_checked_before_the_particle_solve(monkeypatch):
    monkeypatch.setattr(particles, "solve", lambda *a, **k: pytest.fail("particles ran before the check"))
    rho0 = mf.perturbed_uniform(3)
    for kwargs, name in ((dict(flux=CIRCLE_ONLY_FLUX), "flux"), (dict(level=-1), "level")):
        with pytest.raises(ValueError, match=name):
            compare.compare(mf.SA(1.0), rho0, T, n=8, seeds=1, geometry="sphere", **kwargs)
    with pytest.raises(ValueError, match="cells"):
        compare.compare(mf.SA(1.0), mf.perturbed_uniform(2), T, n=8, seeds=1, cells=4)


def test_unwritable_checkpoint_is_refused_before_computing(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="cannot be written"):
        particles.solve(mf.SA(1.0), X3, T, checkpoint=tmp_path / "file" / "c.npz")
    with pytest.raises(ValueError, match="is a folder"):
        particles.solve(mf.SA(1.0), X3, T, checkpoint=tmp_path)


def test_failed_checkpoint_save_warns_and_keeps_the_run(tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(stepping.np, "savez", full_disk)
    with pytest.warns(RuntimeWarning, match="No space left"):
        sol = particles.solve(mf.SA(1.0), X3, T, checkpoint=tmp_path / "c.npz", checkpoint_every=10 ** 6)
    assert np.all(np.isfinite(sol.x)) and sol.x.shape == (2, 12, 3)
    assert os.listdir(tmp_path) == []          # no partial temporary file left behind


# --------------------------------------------------------------------------- 5. sweep store (see also test_faults)

def test_task_file_of_another_task_is_recomputed(tmp_path):
    sweep.run(sweep_tasks.polynomial, {"a": [1, 2]}, 1, tmp_path)
    keys = [sweep.task_key("sweep_tasks:polynomial", {"a": a}, 0) for a in (1, 2)]
    path = [tmp_path / "tasks" / f"{k}.npz" for k in keys]
    path[1].write_bytes(path[0].read_bytes())           # a's result under b's key
    with pytest.warns(RuntimeWarning, match=keys[1]):
        res = sweep.run(sweep_tasks.polynomial, {"a": [1, 2]}, 1, tmp_path)
    assert res.info["computed"] == 1 and res.get("y").tolist() == [1, 4]


def test_deleted_manifest_does_not_let_another_function_take_over(tmp_path):
    sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path)
    os.remove(tmp_path / "sweep.json")
    with pytest.raises(ValueError, match="holds results of sweep_tasks:polynomial"):
        sweep.run(sweep_tasks.slow, {"a": [1], "pause": [0.0]}, 1, tmp_path)


def test_second_process_on_a_store_is_refused(tmp_path):
    with sweep._locked(str(tmp_path)):
        with pytest.raises(RuntimeError, match="in use by process"):
            sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path)
    assert len(sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path)) == 1


def test_outputs_named_like_savez_keywords_are_stored(tmp_path):
    res = sweep.run(sweep_tasks.reserved_names, {"a": [7]}, 1, tmp_path)
    assert res.get("file").tolist() == [7] and res.get("allow_pickle").tolist() == [0]
    assert sweep.load(tmp_path).get("args").tolist() == [1.5]


def test_system_exit_in_a_task_does_not_abort_the_sweep(tmp_path):
    with pytest.raises(sweep.SweepError, match="SystemExit"):
        sweep.run(sweep_tasks.exits, {"a": [1, 2, 3]}, 1, tmp_path)
    assert len(sweep.load(tmp_path)) == 2


def test_task_timeout_fails_the_task_not_the_sweep(tmp_path):
    start = time.perf_counter()
    with pytest.raises(sweep.SweepError, match="timeout"):
        sweep.run(sweep_tasks.slow, {"a": [1], "pause": [30.0]}, 1, tmp_path, timeout=0.2)
    assert time.perf_counter() - start < 10
    with pytest.raises(ValueError, match="timeout"):
        sweep.run(sweep_tasks.slow, {"a": [1], "pause": [0.0]}, 1, tmp_path, timeout=-1)


# --------------------------------------------------------------------------- 6. hangs

def test_adaptive_solve_with_tiny_tolerances_is_refused_not_hung():
    with pytest.raises(ValueError, match="rtol"):
        particles.solve(mf.SA(1.0), X3, T, method="adaptive", rtol=1e-200, atol=1e-200)
    sol = particles.solve(mf.SA(1.0), X3, T, method="adaptive", rtol=1e-10, atol=1e-200)
    assert np.all(np.isfinite(sol.x))


def test_adaptive_solve_has_a_step_cap(monkeypatch):
    monkeypatch.setattr(stepping, "MAX_STEPS", 50)
    with pytest.raises(RuntimeError, match="more than"):
        particles.solve(mf.SA(1.0), X3, [0.0, 1e6], method="adaptive", rtol=1e-12)


def test_fixed_step_runs_of_days_are_refused():
    with pytest.raises(ValueError, match="steps"):
        particles.solve(mf.SA(1.0), X3, [0.0, 1e9], dt=0.01)


def test_most_unstable_mode_at_huge_beta_returns_quickly():
    start = time.perf_counter()
    l_star = most_unstable_mode(mf.SA(1e20), 3)
    assert time.perf_counter() - start < 1.0
    assert abs(l_star / np.sqrt(2e20) - 1) < 1e-3


@pytest.mark.parametrize("beta", [0.5, 3.0, 9.0, 40.0, 200.0])
@pytest.mark.parametrize("d", [2, 3, 7])
def test_most_unstable_mode_matches_the_exhaustive_search(beta, d):
    model = mf.USA(beta)
    rates = [growth_rate(model, d, l) for l in range(1, int(4 * np.sqrt(2 * beta + 1)) + 9)]
    assert most_unstable_mode(model, d) == int(np.argmax(rates)) + 1


# --------------------------------------------------------------------------- 7. silent wrong numbers

def test_wasserstein_of_two_diracs_at_large_p_is_their_distance():
    x, y = mf.circle_points(np.array([0.0])), mf.circle_points(np.array([0.05]))
    for p in (1, 2, 200, 1e4):
        assert mf.wasserstein(x, None, y, None, p=p) == pytest.approx(0.05, rel=1e-12)
    x3, y3 = np.c_[x, [[0.0]]], np.c_[y, [[0.0]]]
    assert mf.wasserstein(x3, None, y3, None, p=200) == pytest.approx(0.05, rel=1e-12)


def test_wasserstein_at_large_p_is_right_or_refused():
    """W_p is non-decreasing in p and below the largest distance; where d^p underflows the answer
    is an error naming p, never 0 or inf."""
    x, y = mf.uniform_sphere(30, 2, seed=0), mf.uniform_sphere(40, 2, seed=1)
    values = [mf.wasserstein(x, None, y, None, p=p) for p in (1, 2, 10, 50, 200)]
    assert np.all(np.diff(values) > 0) and values[-1] < np.pi
    near = mf.normalise(x + 1e-3)
    with pytest.raises(ValueError, match="p = "):
        mf.wasserstein(x, None, near, None, p=400)
    with pytest.raises(ValueError, match="p = "):
        mf.wasserstein(mf.uniform_sphere(5, 3, seed=0), None, mf.uniform_sphere(6, 3, seed=1), None, p=20)


def test_growth_rate_in_high_dimension_is_finite():
    rate = growth_rate(mf.SA(1.0), 300, 1)
    # c_1/c_0 = I_{ν+1}(1)/I_ν(1) with ν = 149: ≈ 1/(2ν + 2) (1 + O(1/ν)), so λ_1 ≈ (d-1)/(2ν+2) = 299/300
    assert np.isfinite(rate) and rate == pytest.approx(299 / 300, rel=1e-2)
    assert most_unstable_mode(mf.SA(1.0), 300) == 1 and np.isfinite(funk_hecke(1.0, 300, 5))


def test_log_bessel_beyond_scipy_range_matches_the_asymptotics():
    """log_ive where scipy's ive fails (x >= 1e10): I_ν(x) e^{-x} → 1/sqrt(2πx); Debye at ν ≥ 30
    agrees with ive where both work."""
    assert log_ive(0.5, 1e12) == pytest.approx(-0.5 * np.log(2 * np.pi * 1e12), abs=1e-12)
    assert log_ive(1e10, 1e20) == pytest.approx(-0.5 * np.log(2 * np.pi * 1e20) - 0.5e20 / 1e20, rel=1e-9)
    assert np.isfinite(log_ive(200.0, 1.0))


def test_cluster_count_at_tiny_tol_does_not_overflow():
    x = np.vstack([X3, X3[:4]])
    assert cluster_count(x, tol=1e-19) == 12 and cluster_count(x, tol=1e-300) == 12
    with pytest.raises(ValueError, match="min_mass"):
        cluster_count(X3, min_mass=np.nan)


def test_sa_velocity_with_subnormal_weights_is_finite():
    w = np.full(12, 5e-324)
    v = particles.velocity(mf.SA(1.0), X3, weights=w)
    assert np.all(np.isfinite(v)) and np.allclose(v, particles.velocity(mf.SA(1.0), X3))


def test_energy_at_beta_710_is_finite():
    e = mf.energy(X3, 710.0)
    assert np.isfinite(e) and np.log(e) == pytest.approx(mf.log_energy(X3, 710.0) - np.log(1420.0), rel=1e-14)


def test_general_qkv_energy_is_nan_with_a_reason():
    sol = particles.solve(mf.SA(1.0, V=np.diag([1.0, 2.0, 3.0])), X3, T)
    assert np.all(np.isnan(sol.energy)) and "Q^T K = I" in sol.info["energy"]


def test_unstable_particle_step_is_refused():
    with pytest.raises(ValueError, match="dt = 50.*stability"):
        particles.solve(mf.USA(5.0), X3, [0.0, 100.0], dt=50.0)


# --------------------------------------------------------------------------- 8. weights are probability measures

def test_weights_are_normalised_everywhere():
    w = np.random.default_rng(0).random(12)
    for scale in (1.0, 15.6, 1e-200):
        assert np.allclose(particles.velocity(mf.USA(2.0), X3, weights=scale * w),
                           particles.velocity(mf.USA(2.0), X3, weights=w / w.sum()), rtol=1e-13, atol=0)
        assert mf.energy(X3, 2.0, weights=scale * w) == pytest.approx(mf.energy(X3, 2.0, weights=w / w.sum()),
                                                                       rel=1e-13)
        assert mf.wasserstein(X3, scale * w, X3[::-1], None) == pytest.approx(
            mf.wasserstein(X3, w / w.sum(), X3[::-1], None), rel=1e-12)
    a = particles.solve(mf.USA(1.0), X3, T, weights=15.6 * w).x
    b = particles.solve(mf.USA(1.0), X3, T, weights=w).x
    assert np.allclose(a, b, atol=1e-14)
    rho = np.random.default_rng(1).random(16) + 0.1
    assert np.allclose(circle.solve(mf.SA(1.0), 15.6 * rho, T).rho, circle.solve(mf.SA(1.0), rho, T).rho)


# --------------------------------------------------------------------------- 9. identity of resumed runs

def test_sphere_checkpoint_of_another_mesh_of_the_same_size_is_refused(tmp_path):
    ico, fib = sphere.icosphere(1), sphere.fibonacci(42)
    assert ico.size == fib.size
    rho0 = np.ones(42)
    path = tmp_path / "s.npz"
    sphere.solve(mf.SA(1.0), rho0, T, mesh=ico, dt=0.01, checkpoint=path, checkpoint_every=5)
    fib_named = Mesh(**_mesh_fields(fib), name=ico.name)
    with pytest.raises(ValueError, match="different run"):
        sphere.solve(mf.SA(1.0), rho0, T, mesh=fib_named, dt=0.01, checkpoint=path, resume=True)


def _checkpoint_run(tmp_path, **kw):
    return particles.solve(mf.SA(1.0), X3, [0.0, 0.5, 1.0], dt=0.05, checkpoint=tmp_path / "c.npz",
                           checkpoint_every=3, **kw)


def _rewrite(path, **change):
    with np.load(path) as data:
        state = {k: data[k] for k in data.files}
    state.update(change)
    np.savez(path, **state)


@pytest.mark.parametrize("change, words", [
    (lambda s: dict(y=np.full_like(s["y"], np.nan)), "NaN"),
    (lambda s: dict(y=2 * s["y"]), "constraint"),
    (lambda s: dict(nsteps=np.array(-4)), "nsteps"),
    (lambda s: dict(k=np.array(9)), "output index"),
])
def test_inconsistent_checkpoint_state_is_refused(tmp_path, change, words):
    _checkpoint_run(tmp_path)
    path = tmp_path / "c.npz"
    with np.load(path) as data:
        _rewrite(path, **change({k: data[k] for k in data.files}))
    with pytest.raises(ValueError, match=words):
        _checkpoint_run(tmp_path, resume=True)


def test_corrupted_checkpoint_is_named(tmp_path):
    _checkpoint_run(tmp_path)
    path = tmp_path / "c.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"\0" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="c.npz is unreadable or corrupt"):
        _checkpoint_run(tmp_path, resume=True)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="c.npz is unreadable or corrupt"):
        _checkpoint_run(tmp_path, resume=True)


def test_stale_checkpoint_temporary_files_are_removed(tmp_path):
    stale = tmp_path / ".c.npz.abc123.tmp.npz"
    stale.write_bytes(b"half a file")
    _checkpoint_run(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["c.npz"]


# --------------------------------------------------------------------------- 10. code execution surfaces

def test_sweep_toml_naming_arbitrary_code_is_refused(tmp_path, capsys):
    config = tmp_path / "s.toml"
    config.write_text('function = "subprocess:call"\n[grid]\nargs = [["touch", "pwned"]]\n')
    exits_with_usage_error(lambda: sweep.main([str(config), "--scheduler", "none"]))
    assert "--allow-any-function" in capsys.readouterr().err and not (tmp_path / "pwned").exists()


def test_sweep_does_not_import_modules_beside_the_config(tmp_path, capsys):
    (tmp_path / "beside_config.py").write_text("open(__file__ + '.ran', 'w').close()\n"
                                               "def f(params, seed):\n    return {'y': 1}\n")
    config = tmp_path / "s.toml"
    config.write_text('function = "beside_config:f"\n[grid]\na = [1]\n')
    path_before = list(sys.path)
    exits_with_usage_error(lambda: sweep.main([str(config), "--scheduler", "none", "--allow-any-function"]))
    assert "cannot be imported" in capsys.readouterr().err
    assert sys.path == path_before and not (tmp_path / "beside_config.py.ran").exists()


# --------------------------------------------------------------------------- 11. smaller ones

def test_normalise_of_a_zero_vector_is_refused():
    with pytest.raises(ValueError, match="zero vector"):
        mf.normalise(np.zeros((2, 3)))
    assert np.allclose(mf.normalise([[1e300, 1e300]]), [[2 ** -0.5, 2 ** -0.5]])


def test_circle_angles_of_3d_points_is_refused():
    with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
        mf.circle_angles(X3)


def test_model_from_dict_without_beta_is_refused():
    with pytest.raises(ValueError, match="beta"):
        mf.model_from_dict({"model": "SA"})
    assert mf.model_from_dict(mf.USA(3.0, V=-1).to_dict()) == mf.USA(3.0, V=-1)


def test_equiangular_curve_with_one_token_is_refused():
    with pytest.raises(ValueError, match="n must be >= 2"):
        equiangular_curve(mf.SA(1.0), 1, [0.0, 1.0])


@pytest.mark.parametrize("values", [lambda x: np.ones(len(x)) + 0j, lambda x: np.array(["1.0"] * len(x))])
def test_rho0_returning_complex_or_strings_is_refused(values):
    with pytest.raises(TypeError, match="rho0"):
        circle.solve(mf.SA(1.0), values, T, cells=16)
    with pytest.raises(TypeError, match="rho0"):
        sphere.solve(mf.SA(1.0), values, T, mesh=sphere.icosphere(0))


def test_float32_unit_vectors_are_accepted():
    x32 = X3.astype(np.float32)
    assert np.allclose(mf.energy(x32, 1.0), mf.energy(X3, 1.0), rtol=1e-6)
    with pytest.raises(ValueError, match="unit vectors"):
        mf.energy(1.01 * x32, 1.0)


def test_resume_without_a_checkpoint_is_refused():
    with pytest.raises(ValueError, match="resume=True needs checkpoint"):
        particles.solve(mf.SA(1.0), X3, T, resume=True)


def test_solution_saved_without_extension_loads_from_the_same_name(tmp_path):
    sol = particles.solve(mf.SA(1.0), X3, T)
    written = sol.save(tmp_path / "x")
    assert written.endswith("x.npz")
    back = ParticleSolution.load(tmp_path / "x")
    assert np.array_equal(back.x, sol.x) and back.model == sol.model


def test_messages_name_the_right_argument(tmp_path):
    with pytest.raises(ValueError, match="seed"):
        mf.sample_density(mf.perturbed_uniform(2), 10, 2, seed=-1)
    with pytest.raises(ValueError, match="beta = 800"):
        particles.solve(mf.USA(800.0), X3, T)


# =========================================================================== issue 29: the second audit

def _flips(data, count=38, start=40):
    """``count`` copies of ``data`` with one byte inverted, at spread positions past the first ``start``."""
    positions = np.linspace(start, len(data) - 1, count).astype(int)
    return [data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:] for i in positions]


def test_zonal_solver_at_huge_beta_refuses_instead_of_returning_nan():
    from meanfield.solvers import zonal
    for beta, d in [(1e12, 3), (1e300, 10), (1e300, 10 ** 6), (1e5, 10 ** 6)]:
        with pytest.raises(ValueError, match=rf"beta = {re.escape(f'{beta:g}')} .* d = {d}\b"):
            zonal.solve(mf.SA(beta), lambda s: 1 + .3 * s, [0, .5], d, cells=64)
    assert 1e9 < zonal.max_beta(3) < 2.0 ** 30 and 1e4 < zonal.max_beta(10 ** 6) < 1e5
    sol = zonal.solve(mf.SA(1e9), lambda s: 1 + .3 * s, [0, .01], 3, cells=16)     # just inside: finite
    assert np.all(np.isfinite(sol.masses)) and np.allclose(sol.mass, 1.0)
    with pytest.raises(ValueError, match="beta = 1e"):
        zonal.velocity(mf.SA(1e12), np.full(16, 1 / 16), 3)


def test_failed_save_on_a_full_disk_keeps_the_earlier_file(tmp_path, monkeypatch):
    sol = particles.solve(mf.SA(1.0), X3, T)
    path = sol.save(tmp_path / "run")
    before = open(path, "rb").read()
    real = np.savez_compressed

    def full_disk(fh, **arrays):
        real(fh, **arrays)                  # the bytes go out, then the disk is full
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np, "savez_compressed", full_disk)
    with pytest.raises(OSError, match=r"run\.npz.*No space left"):
        particles.solve(mf.SA(2.0), X3, T).save(tmp_path / "run")
    assert open(path, "rb").read() == before and os.listdir(tmp_path) == ["run.npz"]
    with pytest.raises(OSError, match="m.npz"):
        sphere.icosphere(0).save(tmp_path / "m")


def test_saved_files_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        path = particles.solve(mf.SA(1.0), X3, T).save(tmp_path / "run")
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_corrupted_compressed_npz_is_named_not_a_raw_zlib_error(tmp_path):
    sol = particles.solve(mf.SA(1.0), X3, T)
    saved = {"result": (sol.save(tmp_path / "r"), ParticleSolution.load),
             "mesh": (sphere.icosphere(1).save(tmp_path / "m"), Mesh.load)}
    for name, (path, load) in saved.items():
        data = open(path, "rb").read()
        for k, flipped in enumerate(_flips(data)):
            bad = tmp_path / f"{name}{k}.npz"
            bad.write_bytes(flipped)
            try:
                load(bad)                   # a flip in padding or unused header bytes: the same content
            except ValueError as exc:
                assert str(bad) in str(exc), exc


def test_crafted_compressed_checkpoint_is_named_on_resume(tmp_path):
    path = tmp_path / "c.npz"
    particles.solve(mf.SA(1.0), X3, [0.0, 0.4], dt=0.1, checkpoint=path, checkpoint_every=1)
    with np.load(path) as data:
        state = {k: data[k] for k in data.files}
    np.savez_compressed(path, **state)
    for flipped in _flips(path.read_bytes(), count=20):
        path.write_bytes(flipped)
        try:
            particles.solve(mf.SA(1.0), X3, [0.0, 0.4], dt=0.1, checkpoint=path, resume=True)
        except ValueError as exc:
            assert str(path) in str(exc), exc


def test_netcdf_byte_flips_are_detected_and_name_the_file(tmp_path):
    pytest.importorskip("xarray")
    sol = particles.solve(mf.SA(1.0), X3, T)
    path = tmp_path / "r.nc"
    sol.to_netcdf(path)
    assert np.array_equal(ParticleSolution.from_netcdf(path).x, sol.x)
    for k, flipped in enumerate(_flips(path.read_bytes(), count=20, start=0)):
        bad = tmp_path / f"bad{k}.nc"
        bad.write_bytes(flipped)
        try:
            back = ParticleSolution.from_netcdf(bad)
        except ValueError as exc:
            assert str(bad) in str(exc), exc
        else:                               # the flip hit padding: the same numbers
            assert np.array_equal(back.x, sol.x) and np.array_equal(back.energy, sol.energy)
    import xarray as xr
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds.attrs.pop("meanfield_sha256")
    ds.to_netcdf(tmp_path / "plain.nc")
    with pytest.raises(ValueError, match="plain.nc.*SHA-256"):
        ParticleSolution.from_netcdf(tmp_path / "plain.nc")
    assert np.array_equal(ParticleSolution.from_netcdf(tmp_path / "plain.nc", verify=False).x, sol.x)


def test_mesh_with_permuted_neighbours_is_refused(tmp_path):
    mesh = sphere.icosphere(1)
    permuted = np.random.default_rng(0).permutation(np.array(mesh.cell_neighbours))
    with pytest.raises(ValueError, match="cell_neighbours"):
        Mesh(**_mesh_fields(mesh, cell_neighbours=permuted))
    np.savez(tmp_path / "perm.npz", name="perm", **_mesh_fields(mesh, cell_neighbours=permuted))
    with pytest.raises(ValueError, match="perm.npz.*cell_neighbours"):
        Mesh.load(tmp_path / "perm.npz")
    repeated = np.array(mesh.cell_edges)
    repeated[1] = repeated[0]
    with pytest.raises(ValueError, match="cell_edges"):
        Mesh(**_mesh_fields(mesh, cell_edges=repeated))


def test_huge_beta_gives_a_clear_error_not_a_numpy_traceback():
    from meanfield.solvers.kernels import spectral
    with pytest.raises(ValueError, match="beta = 1e\\+308"):
        spectral.kernel_coefficients(1e308, 2)
    assert particles.resolve_summation(mf.SA(1e308), 2, 5000, 5000) == "direct"
    with pytest.raises(ValueError, match="beta <= "):
        particles.velocity(mf.SA(1e300), X3, summation="fast")
    with pytest.raises(ValueError, match="beta = 1e\\+300 is beyond what the sphere solver"):
        sphere.solve(mf.SA(1e300), np.ones(42), T, mesh=sphere.icosphere(1))
    with pytest.raises(ValueError) as info:
        compare.compare(mf.SA(1e308), mf.perturbed_uniform(2, seed=1), [0.0, 0.1], n=8, seeds=1, cells=32)
    assert "Maximum allowed dimension" not in str(info.value) and "beta=1e+308" in str(info.value)


def test_huge_densities_are_discretised_by_their_relative_sizes():
    from meanfield.sampling import discretise
    for method, d in [("stratified", 3), ("stratified", 2), ("quantile", 2), ("weighted", 3), ("iid", 3)]:
        huge = discretise(lambda x: 7e307 * (1.5 + x[:, 0]), 50, d, method, seed=1)
        plain = discretise(lambda x: 1.5 + x[:, 0], 50, d, method, seed=1)
        assert np.allclose(huge[0], plain[0]) and np.allclose(huge[1], plain[1]) and np.isclose(huge[1].sum(), 1)


def test_sizes_beyond_memory_are_refused_naming_n():
    from meanfield.sampling import discretise
    from meanfield.compare.zonal import sample
    with pytest.raises(ValueError, match="n = 10000000000 needs about"):
        discretise(lambda x: 1 + 0 * x[:, 0], 10 ** 10, 2)
    with pytest.raises(ValueError, match="n = 10000000000 needs about"):
        sample(lambda s: 1 + 0 * s, 10 ** 10, 2)
    with pytest.raises(ValueError, match="n = 10000000000"):
        mf.uniform_sphere(10 ** 10, 3)


@pytest.mark.parametrize("bad", ["nan", "twice", "complex"])
@pytest.mark.parametrize("which", ["quantiles", "triangles"])
def test_flow_returning_nan_or_off_sphere_points_is_named(bad, which):
    from meanfield.sampling import refined_quantiles, refined_triangles
    flow = {"nan": lambda x, w: x * np.nan, "twice": lambda x, w: 2 * x, "complex": lambda x, w: x + 0j}[bad]
    with pytest.raises((ValueError, TypeError), match=r"flow\(x, w\)"):
        if which == "quantiles":
            refined_quantiles(lambda x: 1 + 0.5 * x[:, 0], flow, 16, rounds=1)
        else:
            refined_triangles(lambda x: 1 + 0.5 * x[:, 0], flow, level=1, rounds=1)


def test_runs_beyond_the_work_budget_are_refused_with_an_estimate():
    mesh = sphere.icosphere(1)
    with pytest.raises(ValueError, match=r"(?s)would take about .* more than budget = 3600 s.*budget=None"):
        sphere.solve(mf.SA(1.0), np.ones(42), [0.0, 1.0], mesh=mesh, diffusion=1e6, dt=1e-9)
    clock = time.perf_counter()             # controlled steps, not known up front: stopped at the budget
    with pytest.raises(RuntimeError, match="passed its budget of 0.5 s"):
        sphere.solve(mf.SA(1.0), np.ones(42), [0.0, 1.0], mesh=mesh, diffusion=1e6, budget=0.5)
    assert time.perf_counter() - clock < 20
    with pytest.raises(ValueError, match="budget = 1 s"):
        circle.solve(mf.SA(1.0), np.linspace(1, 2, 64), [0.0, 1e5], dt=circle.max_step(mf.SA(1.0), 64), budget=1)
    with pytest.raises(ValueError, match="budget = 3600 s"):   # ~8e8 steps: ~100 h at 0.5 ms, far from the edge
        particles.solve(mf.SA(1.0, V=lambda t: -np.eye(3) * (1 + t)), X3, [0.0, 1e4])
    from meanfield import landscape
    clock = time.perf_counter()
    with pytest.raises(ValueError, match="1.27e\\+30 starts.*budget"):
        landscape.critical_points(100, 0.0, random_starts=3)
    assert time.perf_counter() - clock < 30


def test_adaptive_run_stops_at_its_budget(tmp_path):
    clock = time.perf_counter()
    with pytest.raises(RuntimeError, match="passed its budget of 1 s.*resume=True"):
        particles.solve(mf.SA(1.0), X3, [0.0, 1e6], method="adaptive", budget=1.0,
                        checkpoint=tmp_path / "c.npz", checkpoint_every=2)
    assert time.perf_counter() - clock < 20 and (tmp_path / "c.npz").exists()


def test_time_dependent_default_step_follows_the_field_over_the_run():
    model = mf.SA(1.0, V=lambda t: -np.eye(3) * (1 + t))
    sol = particles.solve(model, X3[:4], [0.0, 3.0], energy=False)
    assert sol.info["dt"] == particles.block_dt(model.at(3.0), 3) < particles.block_dt(model.at(0.0), 3)


def test_sweep_grid_with_unknown_or_missing_parameter_is_refused(tmp_path, capsys):
    grid = dict(beta=[1.0], n=[4], d=[3], T=[0.1])
    with pytest.raises(ValueError, match="unknown parameter.*tool"):
        sweep.run(sweep.particle_clusters, dict(grid, tool=[0.1]), 1, tmp_path / "s")
    with pytest.raises(ValueError, match="missing parameter.*T"):
        sweep.run(sweep.particle_clusters, dict(beta=[1.0], n=[4], d=[3]), 1, tmp_path / "s")
    assert not (tmp_path / "s").exists()
    config = tmp_path / "s.toml"
    config.write_text('function = "meanfield.sweep:particle_clusters"\nseeds = 1\n[grid]\nbeta = [1.0]\nn = [4]\n'
                      'd = [3]\nT = [0.1]\nevil = ["x"]\n')
    exits_with_usage_error(lambda: sweep.main([str(config), "--scheduler", "none", "--no-progress"]))
    assert "evil" in capsys.readouterr().err


def test_unwritable_store_names_the_path(tmp_path, monkeypatch, capsys):
    real = os.makedirs
    read_only = str(tmp_path / "ro")

    def refuse(path, *args, **kwargs):
        if os.fspath(path).startswith(read_only):
            raise OSError(30, "Read-only file system")
        return real(path, *args, **kwargs)
    monkeypatch.setattr(sweep.os, "makedirs", refuse)
    with pytest.raises(ValueError, match=r"store '.*ro/s' cannot be written \(Read-only file system\)"):
        sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path / "ro" / "s")
    config = tmp_path / "s.toml"
    config.write_text(f'function = "meanfield.sweep:particle_clusters"\nstore = "{read_only}/s"\n[grid]\n'
                      f'beta = [1.0]\nn = [4]\nd = [3]\nT = [0.1]\n')
    exits_with_usage_error(lambda: sweep.main([str(config), "--scheduler", "none", "--no-progress"]))
    assert "Read-only file system" in capsys.readouterr().err
