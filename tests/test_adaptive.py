"""Adaptive S^2 finite volumes: conservative transfer, uniform state, agreement with uniform meshes,
energy report (solvers/adaptive.py, solvers/meshes/remesh.py, solvers/energy_report.py)."""
import warnings

import numpy as np
import pytest

import meanfield as mf
from meanfield.measures import perturbed_uniform
from meanfield.solvers import adaptive, sphere
from meanfield.solvers.energy_report import PinnedClusterWarning, energy_dips, pinned_cells
from meanfield.solvers.meshes.remesh import adaptive_mesh, level_size, select, transfer, wanted_levels
from meanfield.solvers.results import DensitySolution

AXIS = np.array([0.2, 0.3, 0.93]) / np.linalg.norm([0.2, 0.3, 0.93])


def _two_meshes(base=2, finest=4):
    """A base-level mesh and a graded mesh refined to ``finest`` around AXIS."""
    coarse = adaptive_mesh(np.arange(level_size(base)), finest)
    levels = np.where(coarse.mesh.points @ AXIS > 0.8, finest, base)
    return coarse, adaptive_mesh(select(coarse, levels, base, 2), finest)


def test_selection_is_graded_and_nested():
    """The refined set keeps the base vertices, adds finer ones only near AXIS, and its cells'
    levels change by at most one between neighbours."""
    coarse, fine = _two_meshes()
    assert np.all(np.isin(np.arange(level_size(2)), fine.index))
    assert fine.levels.max() == 4 and fine.levels.min() == 2
    assert np.all(fine.mesh.points[fine.levels == 4] @ AXIS > 0.5)   # cap of 37° + cell radius + 2 cells
    jump = np.abs(np.diff(fine.levels[fine.mesh.edges], axis=1))
    assert jump.max() <= 1
    assert abs(fine.mesh.areas.sum() - 4 * np.pi) < 1e-12


def test_transfer_conserves_mass_over_100_remeshes_and_stays_positive():
    """Back and forth 100 times between a coarse and a refined mesh (each transfer moves mass
    between different cells): total mass to round-off, densities ≥ 0, and a clustered density
    stays near its cluster (each transfer moves mass by at most one cell)."""
    coarse, fine = _two_meshes()
    rho = np.exp(30 * (coarse.mesh.points @ AXIS - 1)) + 1e-3 * (coarse.mesh.points[:, 0] > 0.9)
    rho /= rho @ coarse.mesh.areas
    meshes = [coarse, fine]
    for k in range(100):
        rho = transfer(meshes[k % 2], meshes[(k + 1) % 2], rho)
        assert rho.min() >= 0
    assert abs(rho @ coarse.mesh.areas - 1) < 1e-13
    masses = rho * coarse.mesh.areas
    assert masses[coarse.mesh.points @ AXIS > 0.7].sum() > 0.9     # measured 0.946: the reconstruction's diffusion


def test_transfer_moves_mass_at_most_one_cell():
    """All of a one-cell Dirac's mass lands in the new cells that overlap its cell."""
    coarse, fine = _two_meshes()
    i = int(np.argmax(coarse.mesh.points @ AXIS))
    rho = np.zeros(coarse.size)
    rho[i] = 1 / coarse.mesh.areas[i]
    moved = transfer(coarse, fine, rho) * fine.mesh.areas
    reach = coarse.radius[i] + fine.radius
    distance = np.arccos(np.clip(fine.mesh.points @ coarse.mesh.points[i], -1, 1))
    assert moved[distance > reach].sum() == 0 and abs(moved.sum() - 1) < 1e-14


def test_transfer_of_an_emptied_region_at_subnormal_densities():
    """Cells of an emptied region hold ρ ~ 1e-320 (subnormal) on long runs; their integrals over small intersections
    used to round to zero ("old cells overlap no new cell", the S² run to T = 1e4).  Each old cell's shares are
    scale-free: a cluster beside a subnormal tail moves with mass to round-off and ρ ≥ 0, and the tail alone moves as
    2^-1060 times the same tail at normal scale (to the 14 bits the subnormal densities carry)."""
    coarse, fine = _two_meshes()
    x = coarse.mesh.points @ AXIS
    tail = np.ldexp(np.random.default_rng(2).uniform(1, 2, coarse.size), -1060)     # exact subnormals
    rho = np.where(x > 0.8, np.exp(30 * (x - 1)), tail)
    for old, new in ((coarse, fine), (fine, coarse)):
        moved = transfer(old, new, rho)
        assert moved.min() >= 0 and abs(moved @ new.mesh.areas - rho @ old.mesh.areas) < 1e-15
        tail_only = np.where(rho < 1e-300, rho, 0.0)
        scaled = np.ldexp(transfer(old, new, np.ldexp(tail_only, 1060)), -1060)
        error = np.abs(transfer(old, new, tail_only) - scaled) * new.mesh.areas
        assert np.all(error <= 1e-2 * scaled * new.mesh.areas + 4 * 2.0 ** -1074)   # measured 3e-3: 14-bit inputs
        rho = moved


def test_transfer_keeps_uniform_and_unchanged_cells_and_is_second_order_for_linear_data():
    coarse, fine = _two_meshes()
    uniform = np.full(coarse.size, 1 / (4 * np.pi))
    assert np.abs(transfer(coarse, fine, uniform) * 4 * np.pi - 1).max() < 1e-13
    rho = np.random.default_rng(0).uniform(0.5, 1.5, coarse.size)
    assert np.array_equal(transfer(coarse, coarse, rho).round(12), rho.round(12))
    # a linear density: the limited reconstruction is exact away from the limiter's extremes
    g = np.array([0.3, -0.2, 0.5])
    linear = 2 + coarse.mesh.points @ g
    moved = transfer(coarse, fine, linear)
    exact = 2 + fine.mesh.points @ g
    assert np.mean(np.abs(moved - exact)) < 5e-3     # measured 3.3e-3 (the limiter at the extremes)


def test_unchanged_cells_keep_their_mass_and_the_rest_matches_clipping_every_cell(monkeypatch):
    """Cells with the same generator and neighbours are the same polygon (areas equal to 1e-12) and
    keep their mass exactly; the transfer equals the one that clips every pair of overlapping cells
    (the slow path, forced by finding no unchanged cell) to round-off."""
    from meanfield.solvers.meshes import remesh
    coarse, fine = _two_meshes()
    rho = np.exp(3 * (coarse.mesh.points @ AXIS)) * np.random.default_rng(1).uniform(0.5, 1.5, coarse.size)
    moved = transfer(coarse, fine, rho)
    kept_old, kept_new = remesh._unchanged(coarse, fine)
    assert kept_old.size > 0.6 * coarse.size                          # the cells away from the refined cap
    assert np.all(coarse.mesh.points[kept_old] @ AXIS < 0.9)
    assert np.allclose(fine.mesh.areas[kept_new], coarse.mesh.areas[kept_old], rtol=1e-12, atol=0)
    assert np.array_equal(moved[kept_new], rho[kept_old] * coarse.mesh.areas[kept_old] / fine.mesh.areas[kept_new])
    monkeypatch.setattr(remesh, "_unchanged", lambda old, new: (np.empty(0, np.int64), np.empty(0, np.int64)))
    clipped = transfer(coarse, fine, rho)
    masses = rho @ coarse.mesh.areas
    assert np.abs((clipped - moved) * fine.mesh.areas).max() < 1e-14 * masses


def test_uniform_state_at_rest_on_an_adaptive_mesh():
    """upwind2's well-balanced field: the uniform density is steady to round-off on a graded mesh
    (SA and USA), and the adaptive solver keeps it through its remeshes."""
    _, fine = _two_meshes()
    uniform = np.full(fine.size, 1 / (4 * np.pi))
    for model in (mf.SA(5.0), mf.USA(2.0)):
        drift = sphere.time_derivative(model, uniform, fine.mesh)
        assert np.abs(drift).max() * 4 * np.pi < 1e-12
    sol = adaptive.solve(mf.SA(3.0), lambda x: np.ones(len(x)), [0.0, 0.5], base=2, finest=3, threshold=0.5)
    assert sol.cells[-1] == level_size(3)
    assert np.abs(sol.rho[-1] * 4 * np.pi - 1).max() < 1e-12


def test_nothing_refined_is_the_fixed_mesh_solver():
    """finest == base: the mesh is icosphere(base) itself and the run is sphere.solve's, bit for bit
    (the same stage and the same positivity-controlled steps)."""
    model, rho0, t = mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 0.5, 1.0]
    sol = adaptive.solve(model, rho0, t, base=2, finest=2)
    fixed = sphere.solve(model, rho0, t, mesh=sphere.icosphere(2))
    assert np.array_equal(sol.points[-1], fixed.points) and np.array_equal(sol.areas[-1], fixed.areas)
    assert sol.info["remeshes"] == 0 and sol.info["nsteps"] == fixed.info["nsteps"]
    assert np.array_equal(sol.rho, fixed.rho) and np.allclose(sol.energy, fixed.energy, rtol=1e-12, atol=0)


def test_adaptive_run_agrees_with_the_uniform_fine_level():
    """Concentrating SA(3) flow from a degree-2 start, T = 3: refined to level 3 where the mass
    is, the adaptive run (base 2) is closer to uniform level 3 than uniform level 2 is."""
    model, rho0, t = mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 3.0]
    sol = adaptive.solve(model, rho0, t, base=2, finest=3, bulk=2, threshold=1.0)
    fine = sphere.solve(model, rho0, t, mesh=sphere.icosphere(3), energy=False)
    coarse = sphere.solve(model, rho0, t, mesh=sphere.icosphere(2), energy=False)
    assert 162 < sol.cells[-1] < 642
    far = mf.wasserstein(*coarse.measure(), *fine.measure(), p=1, method="emd")
    near = mf.wasserstein(*sol.measure(), *fine.measure(), p=1, method="emd")
    assert near < 0.5 * far, (near, far)
    assert sol.rho.min() >= 0 and np.abs(sol.mass - 1).max() < 1e-13


def test_solution_on_changing_meshes_measures_samples_saves(tmp_path):
    sol = adaptive.solve(mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 1.0, 2.0], base=2, finest=4, bulk=2,
                         threshold=0.8, every=2)
    assert sol.info["remeshes"] >= 1 and sol.cells[0] != sol.cells[-1]
    points, weights = sol.measure(0)
    assert points.shape == (sol.cells[0], 3) and abs(weights.sum() - 1) < 1e-12
    assert sol.at(points[:3], k=0).shape == (3,)
    x, w = sol.sample(50, k=-1, seed=1)
    assert x.shape == (50, 3)
    back = DensitySolution.load(sol.save(tmp_path / "adaptive"))
    assert np.array_equal(back.cells, sol.cells) and np.array_equal(back.rho, sol.rho)
    assert np.array_equal(back.measure(1)[1], sol.measure(1)[1])
    changes = sol.info["remesh_energy"]["changes"]
    assert len(changes) == sol.info["remeshes"] and all(abs(c) < 0.05 for c in changes)
    import matplotlib.pyplot as plt
    from meanfield.plotting.sphere import density_map
    ours = density_map(sol, -1, resolution=40).collections[0].get_array()
    own = density_map(sol.snapshot(2), 0, resolution=40).collections[0].get_array()
    assert np.array_equal(ours, own)        # the map of output k is that of its own mesh
    plt.close("all")


def test_energy_dips_and_pinned_cells():
    assert energy_dips([1.0, 1.1, 1.2]) == dict(count=0, largest=0.0)
    assert energy_dips([1.0, 0.9, 1.2])["count"] == 1
    assert energy_dips([1.0, 0.9, 1.2], sign=-1)["count"] == 1
    assert energy_dips([1.0, 1.0 - 1e-12]) == dict(count=0, largest=0.0)   # round-off of the evaluation
    centres = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]] * 2)
    carries = np.ones((2, 3), dtype=bool)
    assert pinned_cells(carries, centres, np.array([0.2, 0.0, 0.001]), np.ones(3), 10.0).tolist() == [0]


def test_muscl_pins_one_cell_clusters_and_warns_upwind2_does_not():
    """Two half-mass one-cell clusters 40° apart (SA β = 9, level 2, no refinement): their particle
    velocities, ≈ 0.07, are far below βh/2, the pull a potential-difference flux needs to move a
    one-cell cluster, but carry them a cell (0.28) in 6 time units.  muscl keeps them in their
    cells and warns; upwind2 merges them (higher E_β) and does not warn."""
    mesh = sphere.icosphere(2)
    first = int(np.argmax(mesh.points @ AXIS))
    angle = np.arccos(np.clip(mesh.points @ mesh.points[first], -1, 1))
    cells = [first, int(np.argmin(np.abs(angle - np.radians(40))))]
    rho0 = np.full(mesh.size, 1e-9)
    rho0[cells] = 1.0 / mesh.areas[cells]
    t = [0.0, 6.0, 12.0]
    with pytest.warns(PinnedClusterWarning):
        sol = adaptive.solve(mf.SA(9.0), rho0, t, flux="muscl", base=2, finest=2)
    assert 0 < len(sol.info["pinned"]) and set(sol.info["pinned"]) <= set(cells)   # base generators keep their indices
    assert sol.info["energy_dips"]["count"] == 0            # muscl: E_β monotone
    pinned_energy = sol.energy[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PinnedClusterWarning)
        sol = adaptive.solve(mf.SA(9.0), rho0, t, base=2, finest=2)
    assert sol.info["pinned"] == [] and sol.energy[-1] > 1.2 * pinned_energy


def test_bad_input():
    with pytest.raises(ValueError, match="finest"):
        adaptive.solve(mf.SA(1.0), perturbed_uniform(3), [0.0, 1.0], base=3, finest=2)
    with pytest.raises(ValueError, match="icosphere"):
        adaptive.solve(mf.SA(1.0), np.ones(10), [0.0, 1.0], base=2, finest=3)
    with pytest.raises(ValueError, match="flux"):
        adaptive.solve(mf.SA(1.0), perturbed_uniform(3), [0.0, 1.0], flux="nope", base=1, finest=1)
    with pytest.raises(ValueError, match="threshold"):
        adaptive.solve(mf.SA(1.0), perturbed_uniform(3), [0.0, 1.0], base=1, finest=2, threshold=-1)
    for bad in (dict(cfl=1.5), dict(cfl=0.0), dict(diffusion=-1.0), dict(budget=0.0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            adaptive.solve(mf.SA(1.0), perturbed_uniform(3), [0.0, 1.0], base=1, finest=2, **bad)
    with pytest.raises(ValueError, match="fixed mesh"):
        sphere.solve(mf.SA(1.0), perturbed_uniform(3), [0.0, 1.0], max_dt=0.01)
    assert wanted_levels(np.ones(4), np.full(4, np.pi), 2, 5, 2.0).tolist() == [2] * 4


def test_circle_reports_dips_and_warns_when_muscl_pins():
    """The issue's case: USA β = 2 from perturbed_uniform(2), T = 8, 256 cells.  Particles and
    upwind2 merge to one cluster (E_β = 1.8471); muscl keeps E_β monotone (no dip) by pinning
    and ends 48 % low (0.955), and says so."""
    from meanfield.solvers import circle
    t = np.linspace(0.0, 8.0, 9)
    with pytest.warns(PinnedClusterWarning):
        sol = circle.solve(mf.USA(2.0), perturbed_uniform(2), t, cells=256, flux="muscl")
    assert sol.info["energy_dips"]["count"] == 0 and sol.info["pinned"]
    assert abs(sol.energy[-1] - 0.955) < 5e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error", PinnedClusterWarning)
        sol = circle.solve(mf.USA(2.0), perturbed_uniform(2), t, cells=256)
    assert sol.info["pinned"] == [] and abs(sol.energy[-1] - 1.8471) < 2e-3
    assert set(sol.info["energy_dips"]) == {"count", "largest"}


def test_checkpoint_resume_repeats_the_uninterrupted_run_bit_for_bit(tmp_path):
    """The checkpoint holds the state at the last check before T; resuming from it recomputes
    the rest and gives the outputs of the uninterrupted run exactly, meshes included."""
    args = (mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 0.5, 1.0, 1.5])
    kw = dict(base=2, finest=4, bulk=3, threshold=0.8, every=2, energy=False, checkpoint_every=1)
    path = tmp_path / "run.npz"
    full = adaptive.solve(*args, checkpoint=path, **kw)
    assert full.info["checks"] >= 3 and path.exists()
    again = adaptive.solve(*args, checkpoint=path, resume=True, **kw)
    assert np.array_equal(again.cells, full.cells) and np.array_equal(again.rho, full.rho)
    assert np.array_equal(again.points, full.points)
    for key in ("nsteps", "nfev", "checks", "remeshes", "meshes"):
        assert again.info[key] == full.info[key], key
    with pytest.raises(ValueError, match="different run"):
        adaptive.solve(*args, checkpoint=path, resume=True, **dict(kw, threshold=0.9))
    with pytest.raises(ValueError, match="another initial state"):
        adaptive.solve(args[0], perturbed_uniform(3, degree=2, seed=1), args[2], checkpoint=path, resume=True, **kw)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="corrupt"):
        adaptive.solve(*args, checkpoint=path, resume=True, **kw)
    with pytest.raises(ValueError, match="needs checkpoint"):
        adaptive.solve(*args, resume=True, **kw)


def test_bulk_level_resolves_the_smooth_phase_and_lazy_checks_skip_remeshes():
    """bulk = 3 puts every cell of at least a tenth of the mean density on level 3 at t = 0 (the
    smooth degree-2 start is dense everywhere); checks that find nothing to refine keep the mesh."""
    model, rho0 = mf.SA(3.0), perturbed_uniform(3, degree=2)
    amesh, rho, _ = adaptive.initial_mesh(rho0, base=2, finest=4, bulk=3)
    assert amesh.size == level_size(3) and amesh.levels.min() == 3
    sol = adaptive.solve(model, rho0, [0.0, 2.0], base=2, finest=4, bulk=3, every=2)
    assert sol.info["bulk"] == 3 and sol.info["remeshes"] < sol.info["checks"]
    assert sol.rho.min() >= 0 and np.abs(sol.mass - 1).max() < 1e-13
    with pytest.raises(ValueError, match="bulk"):
        adaptive.solve(model, rho0, [0.0, 1.0], base=2, finest=3, bulk=4)
    with pytest.raises(ValueError, match="max_cells"):      # level 3 everywhere cannot fit in 500 cells
        adaptive.solve(model, rho0, [0.0, 1.0], base=2, finest=4, bulk=3, max_cells=500)
    # default bulk: base + 2, at most finest
    assert adaptive.initial_mesh(rho0, base=2, finest=3)[0].size == level_size(3)


def test_sphere_solve_defaults_to_adaptive_cells():
    """sphere.solve(mesh=None) is adaptive.solve with its defaults (base 3, finest 9, bulk 5); an
    array rho0 on icosphere(4) is moved onto the first mesh, and the uniform state stays at rest."""
    sol = sphere.solve(mf.SA(1.0), np.ones(level_size(4)), [0.0, 0.01])
    assert sol.cells is not None and sol.cells.tolist() == [level_size(5)] * 2
    assert (sol.info["base"], sol.info["finest"], sol.info["bulk"]) == (3, 9, 5)
    np.testing.assert_allclose(sol.rho[-1] * 4 * np.pi, 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="icosphere"):
        sphere.solve(mf.SA(1.0), np.ones(100), [0.0, 0.01])


def test_diffusion_cfl_and_budget_on_adaptive_cells(tmp_path):
    """The options sphere.solve forwards: with nothing refined, diffusion and cfl give sphere.solve's
    run bit for bit; a run past its budget stops at a check after saving, and resuming finishes it
    as the uninterrupted run."""
    model, rho0, t = mf.SA(2.0), perturbed_uniform(3, degree=2), [0.0, 0.5]
    sol = adaptive.solve(model, rho0, t, base=2, finest=2, diffusion=0.05, cfl=0.5)
    fixed = sphere.solve(model, rho0, t, mesh=sphere.icosphere(2), diffusion=0.05, cfl=0.5)
    assert np.array_equal(sol.rho, fixed.rho) and sol.info["nsteps"] == fixed.info["nsteps"]
    assert sol.info["diffusion"] == 0.05 and sol.info["cfl"] == 0.5
    args = (mf.SA(3.0), rho0, [0.0, 0.5, 1.0])
    kw = dict(base=2, finest=4, bulk=3, threshold=0.8, every=2, energy=False)
    full = adaptive.solve(*args, **kw)
    path = tmp_path / "run.npz"
    with pytest.raises(RuntimeError, match="budget"):
        adaptive.solve(*args, checkpoint=path, budget=1e-9, **kw)
    again = adaptive.solve(*args, checkpoint=path, resume=True, **kw)
    assert np.array_equal(again.rho, full.rho) and again.info["nsteps"] == full.info["nsteps"]


def test_lazy_check_evaluates_the_lead_field_only_when_it_can_change_the_mesh():
    """Leading refinement only raises levels to levels some cell wants: where every cell wants at most
    the mesh's coarsest level (the near-uniform phase on the bulk level) the check keeps the mesh
    without evaluating the field, as the check with the field does; on a clustered state it asks for
    the field and gives the eager check's set."""
    model = mf.SA(3.0)
    settings = dict(base=2, finest=4, buffer=2, max_cells=20000, bulk=3)
    calls = []

    def lead(mesh, rho):
        def sweep():
            calls.append(1)
            return 0.25 * adaptive._field((model,), rho, mesh, "auto")
        return sweep
    near_uniform = perturbed_uniform(3, amplitude=1e-3, degree=2)
    amesh, rho, threshold = adaptive.initial_mesh(near_uniform, base=2, finest=4, bulk=3)
    assert amesh.levels.min() == amesh.levels.max() == 3
    kept = adaptive._refined(amesh, rho, settings, threshold, lazy=True, sweep=lead(amesh.mesh, rho))
    eager = adaptive._refined(amesh, rho, settings, threshold, lazy=True, sweep=lead(amesh.mesh, rho)())
    assert len(calls) == 1 and np.array_equal(kept[0], amesh.index) and np.array_equal(eager[0], amesh.index)
    calls.clear()
    peak = np.exp(8 * (amesh.mesh.points[:, 2] - 1))                    # a cluster at the pole: level 4 wanted
    lazy = adaptive._refined(amesh, peak, settings, threshold, lazy=True, sweep=lead(amesh.mesh, peak))
    eager = adaptive._refined(amesh, peak, settings, threshold, lazy=True, sweep=lead(amesh.mesh, peak)())
    assert len(calls) == 2 and lazy[0].max() >= level_size(3) and np.array_equal(lazy[0], eager[0])
