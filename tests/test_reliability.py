"""Regressions for the reliability and security audit of issue 38: ρ₀ at the ends of the double range,
checkpoint validation, guards on time, memory and underflow, the pinning detector.  The sweep's
scheduler refusal is in test_sweep.py, report-folder markers in test_faults.py."""
import warnings

import numpy as np
import pytest

import meanfield as mf
from meanfield.compare import Comparison, compare
from meanfield.solvers import adaptive, adaptive_circle, causal, circle, hardmax, particles, sphere, zonal
from meanfield.solvers.span import solve_in_span
from meanfield.solvers.meshes.voronoi import icosphere

T0 = [0.0, 0.01]
MODEL = mf.SA(1.0)


# --------------------------------------------------------------------------- 3. ρ₀ at the ends of the double range

def _shape(x):
    return 1 + 0.5 * x[:, 0]


ENGINES = {      # name: (solve(rho0 callable of the shape times scale), solve(array of the shape times scale))
    "circle": (lambda f: circle.solve(MODEL, f, T0, cells=32),
               lambda a: circle.solve(MODEL, a, T0), lambda: _shape(mf.circle_points(circle.cell_angles(32)))),
    "sphere": (lambda f: sphere.solve(MODEL, f, T0, mesh=icosphere(1)),
               lambda a: sphere.solve(MODEL, a, T0, mesh=icosphere(1)), lambda: _shape(icosphere(1).points)),
    "adaptive": (lambda f: adaptive.solve(MODEL, f, T0, base=1, finest=2),
                 lambda a: adaptive.solve(MODEL, a, T0, base=1, finest=2), lambda: _shape(icosphere(1).points)),
    "adaptive_circle": (lambda f: adaptive_circle.solve(MODEL, f, T0, cells=16, finest_cells=64),
                        lambda a: adaptive_circle.solve(MODEL, a, T0, cells=16, finest_cells=64),
                        lambda: _shape(mf.circle_points(circle.cell_angles(16)))),
    "causal": (lambda f: causal.solve(MODEL, lambda s, th: _on_slices(f, s, th), T0, slices=4, cells=16),
               lambda a: causal.solve(MODEL, np.tile(a, (4, 1)), T0, slices=4, cells=16),
               lambda: _shape(mf.circle_points(circle.cell_angles(16)))),
    "zonal": (lambda f: zonal.solve(MODEL, lambda s: f(np.column_stack([s, np.sqrt(1 - s * s)])), T0, d=3, cells=16),
              lambda a: zonal.solve(MODEL, a, T0, d=3),
              lambda: _shape(np.column_stack([np.cos(zonal.polar_grid(16)[0]), np.zeros(16)]))),
}


def _on_slices(f, s, theta):
    """f of points (N, 2) as a causal rho0(s (S, 1), θ (1, N)): the same start on every slice."""
    cos, sin = np.broadcast_arrays(np.cos(theta) + 0 * s, np.sin(theta) + 0 * s)
    return f(np.column_stack([cos.ravel(), sin.ravel()])).reshape(cos.shape)


def _scaled(scale):
    return lambda x: scale * _shape(x)


def _first(sol):
    rho = np.asarray(sol.rho[0] if not hasattr(sol, "masses") else sol.masses[0], dtype=float)
    return rho, np.ravel(np.asarray(sol.mass)[0]) if hasattr(sol, "mass") else np.array([rho.sum()])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_rho0_is_rescaled_by_relative_sizes_at_the_ends_of_the_double_range(engine):
    """ρ₀ = c·f for c from 5e-324 to 1e308, callable or array: unit mass, finite densities, the answer
    for f itself (exactly where c is a power of two, to the subnormals' precision at 1e-310)."""
    by_callable, by_array, shape = ENGINES[engine]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_c, _ = _first(by_callable(_shape))
        ref_a, _ = _first(by_array(shape()))
        for scale, rtol in ((1e308, 1e-13), (2.0 ** -1000, 1e-13), (1e-310, 1e-9), (5e-324, None)):
            for solve, f, ref in ((by_callable, _scaled(scale), ref_c), (by_array, scale * shape(), ref_a)):
                rho, mass = _first(solve(f))
                assert np.all(np.isfinite(rho)) and np.all(rho >= 0), (engine, scale)
                assert np.allclose(mass, 1.0, rtol=1e-12, atol=0), (engine, scale, mass)
                if rtol is not None:
                    assert np.allclose(rho, ref, rtol=rtol, atol=0), (engine, scale)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("bad", [np.nan, np.inf, 0.0, -1.0])
def test_rho0_nan_inf_zero_or_negative_is_refused(engine, bad):
    _, by_array, shape = ENGINES[engine]
    a = shape() * (bad if bad == 0.0 else 1.0)
    if bad != 0.0:
        a[0] = bad
    with pytest.raises(ValueError, match="rho0|f0"):
        by_array(a)


# --------------------------------------------------------------------------- 4. checkpoint loaders

X0 = mf.uniform_sphere(8, 3, seed=1)
RUNS = {         # name: (run(path, resume), the key of the stored density or points)
    "circle": (lambda p, r: circle.solve(MODEL, _shape, [0.0, 0.05, 0.1], cells=32, checkpoint=p, resume=r,
                                         checkpoint_every=2), "y"),
    "sphere": (lambda p, r: sphere.solve(MODEL, _shape, [0.0, 0.05, 0.1], mesh=icosphere(1), checkpoint=p,
                                         resume=r, checkpoint_every=2), "y"),
    "zonal": (lambda p, r: zonal.solve(MODEL, lambda s: 1 + 0.5 * s, [0.0, 0.05, 0.1], d=3, cells=16, checkpoint=p,
                                       resume=r, checkpoint_every=2), "y"),
    "causal": (lambda p, r: causal.solve(MODEL, lambda s, th: 1 + 0.5 * np.cos(th) + 0 * s, [0.0, 0.05, 0.1],
                                         slices=4, cells=16, checkpoint=p, resume=r, checkpoint_every=2), "y"),
    "particles": (lambda p, r: particles.solve(MODEL, X0, [0.0, 0.05, 0.1], dt=0.01, checkpoint=p,
                                                         resume=r, checkpoint_every=2), "y"),
    "adaptive_circle": (lambda p, r: adaptive_circle.solve(MODEL, _shape, [0.0, 0.3, 0.6], cells=16, finest_cells=64,
                                                           interval=0.1, checkpoint=p, checkpoint_every=1, resume=r),
                        "rho"),
    "adaptive": (lambda p, r: adaptive.solve(MODEL, _shape, [0.0, 0.3, 0.6], base=1, finest=2, interval=0.1,
                                             checkpoint=p, checkpoint_every=1, resume=r), "rho"),
}


def _crafted(path, fault, key):
    data = path.read_bytes()
    if fault == "flip":
        flipped = bytearray(data)
        for i in range(len(data) // 3, len(data), 61):
            flipped[i] ^= 0x5A
        path.write_bytes(bytes(flipped))
        return
    if fault == "truncate":
        path.write_bytes(data[: len(data) // 2])
        return
    with np.load(path, allow_pickle=False) as npz:
        state = {k: npz[k] for k in npz.files}
    if fault == "double":
        state[key] = state[key] * 2
    elif fault == "nan":
        state[key] = state[key].copy()
        state[key].flat[0] = np.nan
    elif fault in ("k99", "k0"):
        state["k"] = np.array(99 if fault == "k99" else 0, dtype=state["k"].dtype)
    elif fault == "t1e6":
        state["t"] = np.array(1e6)
    np.savez(path, **state)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One checkpoint of each engine's run, written once."""
    folder = tmp_path_factory.mktemp("checkpoints")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (run, _) in RUNS.items():
            run(folder / f"{name}.npz", False)
    return folder


FAULTS = ["flip", "truncate", "double", "nan", "k99", "k0", "t1e6"]


@pytest.mark.parametrize("engine", sorted(RUNS))
def test_a_clean_checkpoint_resumes_to_the_same_answer(tmp_path, checkpoints, engine):
    run, _ = RUNS[engine]
    path = tmp_path / "run.npz"
    path.write_bytes((checkpoints / f"{engine}.npz").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh, resumed = run(tmp_path / "fresh.npz", False), run(path, True)
    for a, b in zip(fresh.rho if hasattr(fresh, "rho") else [fresh.x], resumed.rho if hasattr(resumed, "rho")
                    else [resumed.x]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("engine", sorted(RUNS))
def test_damaged_or_crafted_checkpoint_is_refused_naming_the_file(tmp_path, checkpoints, engine, fault):
    """Byte flips and truncations (the npz error list), and crafted valid files no run could have
    written (ρ×2, NaN, k = 99, k = 0, t = 1e6): refused on resume, naming the file."""
    run, key = RUNS[engine]
    path = tmp_path / "run.npz"
    path.write_bytes((checkpoints / f"{engine}.npz").read_bytes())
    _crafted(path, fault, key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="checkpoint") as err:
            run(path, True)
    assert str(path) in str(err.value), err.value


# --------------------------------------------------------------------------- 5. underflow, time and memory guards

def test_flux_pass_survives_a_density_whose_mass_underflows():
    """ρ_i = 5e-324 in a cell of width < 1/2: ρ_i w_i rounds to 0; the positivity rate divides by it."""
    from meanfield.solvers.meshes.dyadic import uniform_mesh
    from meanfield.solvers.kernels.dyadic import flux_pass
    mesh = uniform_mesh(16, 0)
    rho = np.ones(16)
    rho[3] = 5e-324
    out = np.empty(16)
    rate = flux_pass(rho, mesh.widths, mesh.gaps, np.ones(16), np.zeros(16), np.zeros(16), 1.0, 1,
                     np.empty((5, 16)), out)
    assert np.isfinite(rate) and np.all(np.isfinite(out))


def test_adaptive_circle_runs_through_merges_to_t_2000():
    """SA β = 3 from a near-uniform start on S^1: clusters form and merge, the emptied cells' densities
    fall through the subnormals (a ZeroDivisionError past t ≈ 810 before the guard); mass stays 1 and
    the energy E_β, a Lyapunov function of the flow, never decreases."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = adaptive_circle.solve(mf.SA(3.0), mf.perturbed_uniform(2, seed=0), np.linspace(0, 2000, 11), cells=64,
                                    finest_cells=1024, budget=None)
    assert np.allclose(sol.mass, 1.0, rtol=0, atol=1e-10)
    assert all(np.all(np.isfinite(r)) and np.all(r >= 0) for r in sol.rho)
    assert np.all(np.diff(sol.energy) >= -1e-9 * np.abs(sol.energy[1:]))
    assert sol.cells[-1] < sol.cells[0]


@pytest.mark.slow
def test_adaptive_sphere_runs_through_merges_to_t_2000():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = adaptive.solve(mf.SA(3.0), mf.perturbed_uniform(3, seed=0), np.linspace(0, 2000, 5), base=1, finest=3,
                             budget=None)
    assert np.allclose(sol.mass, 1.0, rtol=0, atol=1e-10)
    assert all(np.all(np.isfinite(r)) and np.all(r >= 0) for r in sol.rho)
    assert np.all(np.diff(sol.energy) >= -1e-9 * np.abs(sol.energy[1:]))


@pytest.mark.parametrize("call, words", [
    (lambda: hardmax.solve(mf.Hardmax(1.0), X0, [0.0, 1.0], dt=1e-300), "cannot advance"),
    (lambda: hardmax.solve(mf.Hardmax(1.0), X0, [1e20, 1e20 + 1e4], dt=1.0), "cannot advance"),
    (lambda: hardmax.solve(mf.Hardmax(1.0), X0, [0.0, 1e6], dt=1e-3), "steps"),
    (lambda: adaptive_circle.solve(MODEL, _shape, [0.0, 1.0], cells=16, finest_cells=64, interval=1e-300), "interval"),
    (lambda: adaptive_circle.solve(MODEL, _shape, [0.0, 1.0], cells=16, finest_cells=64, interval=1e-9), "stretches"),
    (lambda: adaptive.solve(MODEL, _shape, [0.0, 1.0], base=1, finest=2, interval=1e-300), "interval"),
    (lambda: adaptive.solve(MODEL, _shape, [0.0, 1.0], base=2, finest=20), "MAX_FINEST"),
    (lambda: causal.solve(MODEL, lambda s, th: 1 + 0 * s * th, [0.0, 1.0], slices=10 ** 7, cells=256), "GiB"),
    (lambda: compare(MODEL, mf.perturbed_uniform(2), [0.0, 1.0], n=10 ** 9), "GiB"),
    (lambda: compare(MODEL, mf.perturbed_uniform(2), [0.0, 1.0], causal=True, slices=10 ** 7), "GiB"),
    (lambda: compare(MODEL, mf.perturbed_uniform(2), [0.0, 1.0], causal=True, transport="bogus"),
     "transport"),
])
def test_runs_that_cannot_finish_or_fit_are_refused_up_front(call, words):
    start = __import__("time").perf_counter()
    with pytest.raises(ValueError, match=words):
        call()
    assert __import__("time").perf_counter() - start < 30


def test_command_line_prints_refusals_as_one_line(tmp_path, capsys):
    from meanfield.cli import main
    status = main(["compare", "--n", str(10 ** 9), "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith("meanfield") and "GiB" in err, err


# --------------------------------------------------------------------------- 7. smaller items

@pytest.mark.parametrize("call", [
    lambda: particles.solve(MODEL, X0, [0.0, 0.1], dt=0.05, energy="no"),
    lambda: sphere.solve(MODEL, _shape, [0.0, 0.01], mesh=icosphere(1), energy="no"),
    lambda: adaptive.solve(MODEL, _shape, [0.0, 0.01], base=1, finest=2, energy="no"),
    lambda: adaptive_circle.solve(MODEL, _shape, [0.0, 0.01], cells=16, finest_cells=64, energy="no"),
    lambda: solve_in_span(MODEL, X0, [0.0, 0.1], dt=0.05, lift="no"),
])
def test_strings_are_not_read_as_booleans(call):
    with pytest.raises(TypeError, match="energy|lift"):
        call()


def test_density_output_index_out_of_range_is_named():
    sol = circle.solve(MODEL, _shape, T0, cells=32)
    points = mf.circle_points(np.array([0.1, 2.0]))
    with pytest.raises(ValueError, match="k = 99"):
        sol.at(points, k=99)
    with pytest.raises(ValueError, match="k = -3"):
        sol.measure(k=-3)
    assert np.array_equal(sol.at(points, k=-1), sol.at(points, k=1))


def test_mesh_with_a_garbled_array_header_is_named(tmp_path):
    """A flipped byte in an array header (uncompressed file): tokenize.TokenError / SyntaxError are
    in the npz error list, so the loader names the file."""
    from meanfield.solvers.meshes.voronoi import Mesh
    path = tmp_path / "m.npz"
    icosphere(1).save(path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    np.savez(path, **arrays)
    data = path.read_bytes()
    for old, new in ((b"'shape': (", b"'shape': (("), (b"'descr': '", b"'descr': '''")):
        path.write_bytes(data.replace(old, new, 1))
        with pytest.raises(ValueError, match=str(path)):
            Mesh.load(path)


def test_truncated_report_json_is_named(tmp_path):
    from meanfield import atomic
    folder = atomic.replace_folder(tmp_path / "r", lambda tmp: open(f"{tmp}/report.json", "w").write('{"t": [0'))
    with pytest.raises(ValueError, match="report.json"):
        Comparison.load(folder)


# --------------------------------------------------------------------------- 6. the pinning detector

@pytest.mark.parametrize("flux", ["muscl", "tpfa", "upwind2"])
def test_pinning_is_reported_on_the_circle_however_sparse_the_outputs(flux):
    """The issue's case with t_eval = [0, 8]: no cluster exists at the first output, so the detector
    needs states in between; the pinning fluxes are run through them and report, upwind2 does not pin."""
    from meanfield.solvers.energy_report import PinnedClusterWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = circle.solve(mf.USA(2.0), mf.perturbed_uniform(2), [0.0, 8.0], cells=256, flux=flux)
    warned = any(w.category is PinnedClusterWarning for w in caught)
    if flux == "upwind2":
        assert sol.info["pinned"] == [] and not warned and abs(sol.energy[-1] - 1.8471) < 2e-3
    else:
        assert sol.info["pinned"] and warned and sol.energy[-1] < 0.6 * 1.8471
    assert sol.t.tolist() == [0.0, 8.0] and sol.rho.shape == (2, 256)


@pytest.mark.parametrize("flux", ["muscl", "tpfa", "upwind2"])
def test_pinning_is_reported_on_the_sphere_however_sparse_the_outputs(flux):
    """Two one-cell clusters 40° apart on icosphere(2), SA β = 9, outputs [0, 12] only: the particle
    velocity (≈ 0.07) carries them a cell in 6 time units; muscl and tpfa hold them and say so."""
    mesh = icosphere(2)
    first = int(np.argmax(mesh.points @ (np.array([0.2, 0.3, 0.93]) / np.linalg.norm([0.2, 0.3, 0.93]))))
    angle = np.arccos(np.clip(mesh.points @ mesh.points[first], -1, 1))
    cells = [first, int(np.argmin(np.abs(angle - np.radians(40))))]
    rho0 = np.full(mesh.size, 1e-9)
    rho0[cells] = 1.0 / mesh.areas[cells]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = sphere.solve(mf.SA(9.0), rho0, [0.0, 12.0], mesh=mesh, flux=flux)
    if flux == "upwind2":
        assert sol.info["pinned"] == []
    else:
        assert sol.info["pinned"] and set(sol.info["pinned"]) <= set(cells)
    assert sol.rho.shape == (2, mesh.size)


@pytest.mark.parametrize("solve", [
    lambda m: circle.solve(m, _shape, T0, cells=16),
    lambda m: adaptive_circle.solve(m, _shape, T0, cells=16, finest_cells=64),
])
def test_subnormal_beta_is_refused_and_tiny_beta_is_the_beta_zero_dynamics(solve):
    """β = 5e-324 gave NaN densities on the adaptive circle and E_β = inf on both; β = 1e-300 (normal)
    moves the density as β = 0 does."""
    with pytest.raises(ValueError, match="subnormal"):
        solve(mf.SA(5e-324))
    tiny, zero = solve(mf.SA(1e-300)), solve(mf.SA(0.0))
    assert np.allclose(tiny.rho[-1], zero.rho[-1], rtol=1e-12, atol=0) and np.all(np.isfinite(tiny.energy))


def test_adaptive_circle_refuses_beta_beyond_its_bessel_coefficients():
    """SA β = 1e20 gave NaN densities: scipy's ive(k, β) stops at 2^30."""
    with pytest.raises(ValueError, match="2\\^30"):
        adaptive_circle.solve(mf.SA(1e20), _shape, T0, cells=16, finest_cells=64)
    sol = adaptive_circle.solve(mf.SA(1e9), _shape, T0, cells=16, finest_cells=64)
    assert np.allclose(sol.mass, 1.0) and all(np.all(np.isfinite(r)) for r in sol.rho)


def test_controlled_runs_whose_least_step_count_exceeds_the_budget_are_refused():
    """Controlled steps are at most step_cap: T / cap steps at least, timed, refused up front."""
    start = __import__("time").perf_counter()
    with pytest.raises(ValueError, match="budget"):
        sphere.solve(mf.USA(4.0), _shape, [0.0, 2e4], mesh=icosphere(1), budget=5)
    with pytest.raises(ValueError, match="budget"):
        circle.solve(MODEL, _shape, [0.0, 1e5], cells=64, budget=5)
    assert __import__("time").perf_counter() - start < 10
