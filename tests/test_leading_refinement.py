"""Leading refinement: the wanted levels carried downstream over |u| · interval, so that a moving
cluster finds refined cells ahead of it (solvers/meshes/dyadic.py ``downstream``,
solvers/meshes/remesh.py ``downstream``, solvers/adaptive_circle.py, solvers/adaptive.py)."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.measures import perturbed_uniform
from meanfield.solvers import adaptive, adaptive_circle, circle
from meanfield.solvers.meshes import dyadic, remesh
from meanfield.solvers.meshes.voronoi import icosphere

BETA, PHI, MASS_A, T = 6.0, 1.4, 0.45, 15.0       # two clusters merging at T (separation 0.08 rad, moving)
CELLS, FINEST = 128, 2048


def _two_bumps(phi):
    """Two von Mises bumps of masses 0.45 / 0.55 at ±phi/2 on a small floor."""
    def rho0(x):
        th = np.arctan2(x[:, 1], x[:, 0])
        return (MASS_A * np.exp(20 * (np.cos(th - phi / 2) - 1))
                + (1 - MASS_A) * np.exp(20 * (np.cos(th + phi / 2) - 1)) + 1e-3)
    return rho0


def _clusters(theta, w, sep=0.03):
    """The angles of the two heaviest cells more than ``sep`` apart."""
    i = np.argmax(w)
    far = np.abs(np.angle(np.exp(1j * (theta - theta[i])))) > sep
    return np.array([theta[i], theta[np.argmax(np.where(far, w, 0))]])


def _errors(sol, ref):
    """W1 between the adaptive and the reference cell measures, and the cluster-mass error: the
    largest difference of the masses within a quarter of the separation (at most 0.02 rad) of each
    reference cluster."""
    (p, w), (x, v) = sol.measure(), ref.measure()
    th, tr = np.arctan2(p[:, 1], p[:, 0]), np.arctan2(x[:, 1], x[:, 0])
    centres = _clusters(tr, v)
    radius = min(0.25 * abs(np.angle(np.exp(1j * (centres[0] - centres[1])))), 0.02)
    err = [abs(w[np.abs(np.angle(np.exp(1j * (th - c)))) <= radius].sum()
               - v[np.abs(np.angle(np.exp(1j * (tr - c)))) <= radius].sum()) for c in centres]
    return float(mf.wasserstein(p, w, x, v, p=1, method="circle")), max(err)


@pytest.fixture(scope="module")
def merge():
    """The merge in progress at T: the fine uniform reference (circle.solve on the finest cells)
    and the adaptive run with and without the leading refinement."""
    model, rho0 = mf.SA(BETA), _two_bumps(PHI)
    ref = circle.solve(model, rho0, [0.0, T], cells=FINEST, progress=False)
    led = adaptive_circle.solve(model, rho0, [0.0, T], cells=CELLS, finest_cells=FINEST, progress=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(adaptive_circle, "downstream", lambda mesh, levels, reach: levels)
        unled = adaptive_circle.solve(model, rho0, [0.0, T], cells=CELLS, finest_cells=FINEST, progress=False)
    return ref, led, unled


def test_dyadic_downstream_carries_levels_forward_only_by_the_reach():
    mesh = dyadic.uniform_mesh(16, 3)                               # base width π/8 ≈ 0.39
    levels = np.zeros(16, dtype=np.int64)
    levels[4] = 3
    assert dyadic.downstream(mesh, levels, np.zeros(16)).tolist() == levels.tolist()
    ahead = dyadic.downstream(mesh, levels, np.full(16, 0.5))      # 0.5 rad: the next two cells
    assert np.flatnonzero(ahead == 3).tolist() == [4, 5, 6]
    behind = dyadic.downstream(mesh, levels, np.full(16, -0.5))
    assert np.flatnonzero(behind == 3).tolist() == [2, 3, 4]
    levels[:] = 0
    levels[15] = 2                                                  # across θ = 0
    assert np.flatnonzero(dyadic.downstream(mesh, levels, np.full(16, 0.1)) == 2).tolist() == [0, 15]
    assert np.all(dyadic.downstream(mesh, levels, np.full(16, 100.0)) == 2)   # longer than the circle


def test_no_lead_is_the_criterion_as_before():
    mesh = dyadic.uniform_mesh(8, 2)
    rho, u = np.array([8.0, 1, 1, 1, 1, 1, 1, 1]), np.full(8, 0.5)
    assert adaptive_circle.wanted_levels(rho, u, mesh, 2.0, 0.01, 1).tolist() == [2, 0, 0, 0, 0, 0, 0, 0]
    assert adaptive_circle.wanted_levels(rho, u, mesh, 2.0, 0.01, 1, lead=0.5).tolist() == [2, 2, 0, 0, 0, 0, 0, 0]


def test_merge_in_progress_keeps_cluster_mass_in_refined_cells(merge):
    """Against circle.solve on the finest cells: the leading refinement cuts W1 sevenfold (2.9e-3 →
    4.1e-4) and the cluster-mass error from 1.2e-2 to ~1e-4; without it the moving clusters' fronts
    run onto cells 2-8× coarser."""
    ref, led, unled = merge
    w1, dm = _errors(led, ref)
    w1_before, dm_before = _errors(unled, ref)
    assert w1 < 6e-4 and w1_before > 5 * w1
    assert dm < 2e-4 and dm_before > 20 * dm
    assert abs(led.mass[-1] - 1) < 1e-12 and led.rho.min() >= 0
    assert led.cells[-1] < 1.2 * unled.cells[-1]                    # the extra cells: a few per cluster


def test_clusters_at_rest_unchanged():
    """Two clusters far apart (at rest at T): the lead changes nothing measurable (the same W1
    against the uniform solution on the finest cells, within 1 %)."""
    model, rho0 = mf.SA(BETA), _two_bumps(2.0)
    ref = circle.solve(model, rho0, [0.0, 8.0], cells=1024, progress=False)
    led = adaptive_circle.solve(model, rho0, [0.0, 8.0], cells=64, finest_cells=1024, progress=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(adaptive_circle, "downstream", lambda mesh, levels, reach: levels)
        unled = adaptive_circle.solve(model, rho0, [0.0, 8.0], cells=64, finest_cells=1024, progress=False)
    assert _errors(led, ref)[0] <= 1.01 * _errors(unled, ref)[0]


def test_sphere_wanted_region_extends_downstream_of_a_moving_cluster():
    """A level-5 cell on the equator under a rotation about the z axis: the carried level reaches
    |u| τ along the equator, eastwards only, within a narrow band; nothing is carried without lead."""
    mesh = icosphere(3)
    pts = mesh.points
    east = np.cross([0.0, 0.0, 1.0], pts)
    start = int(np.argmin(np.abs(pts[:, 2]) + 0.1 * np.abs(pts[:, 0] - 1)))      # near (1, 0, 0)
    levels = np.zeros(mesh.size, dtype=np.int64)
    levels[start] = 5
    assert np.array_equal(remesh.downstream(mesh, levels, east, 0.0), levels)
    out = remesh.downstream(mesh, levels, 0.5 * east, 0.6)        # |u| τ = 0.3 rad
    marked = pts[out == 5]
    lon = np.angle(np.exp(1j * (np.arctan2(marked[:, 1], marked[:, 0]) - np.arctan2(pts[start, 1], pts[start, 0]))))
    spacing = np.sqrt(mesh.areas.mean())
    assert lon.min() >= -1e-12 and 0.3 - spacing <= lon.max() <= 0.3 + 2 * spacing
    assert np.abs(marked[:, 2] - pts[start, 2]).max() < 0.3 * np.tan(np.pi / 3) + spacing
    assert np.all(out >= levels)


def test_adaptive_sphere_short_run_keeps_mass_and_positivity():
    sol = adaptive.solve(mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 3.0], base=2, finest=4, bulk=2,
                         threshold=0.8, progress=False)
    assert abs(sol.mass[-1] - 1) < 1e-12 and sol.rho.min() >= 0
    assert sol.info["remeshes"] >= 1
