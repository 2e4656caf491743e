"""Single-linkage clusters: the box-contracted algorithm against the brute-force graph."""
import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

import meanfield as mf
from meanfield import clusters


def brute_force_labels(x, tol):
    chord = np.linalg.norm(x[:, None] - x[None], axis=-1)
    return connected_components(chord <= 2 * np.sin(tol / 2), directed=False)[1]


def same_partition(a, b):
    return len(set(zip(a, b))) == len(set(a)) == len(set(b))


@pytest.mark.parametrize("d", [2, 3, 6])
def test_labels_match_brute_force_single_linkage(d):
    rng = np.random.default_rng(d)
    for trial in range(12):
        n = int(rng.integers(1, 300))
        x = mf.uniform_sphere(n, d, seed=trial)
        if trial % 2:
            centres = mf.uniform_sphere(int(rng.integers(1, 6)), d, seed=100 + trial)
            x = mf.normalise(centres[rng.integers(0, len(centres), n)]
                             + rng.uniform(0, 0.05) * rng.standard_normal((n, d)))
        tol = float(rng.choice([1e-3, 1e-2, 0.1, 0.3, 1.0]))
        assert same_partition(clusters.cluster_labels(x, tol), brute_force_labels(x, tol))


def test_tight_clusters_of_many_points():
    centres = mf.uniform_sphere(3, 3, seed=1)
    x = mf.normalise(np.repeat(centres, 20_000, axis=0)
                     + 1e-7 * np.random.default_rng(0).standard_normal((60_000, 3)))
    assert clusters.cluster_count(x, tol=1e-3) == 3


def test_pair_fraction_on_constructed_configurations():
    e = np.eye(4)
    # one system: 3 tokens at e1, 1 at e2 -> ordered pairs above: 3*2 = 6 of 4*3 = 12
    x = e[[0, 0, 0, 1]]
    assert clusters.pair_fraction(x) == pytest.approx(0.5)
    # tokens 1e-2 rad apart: <x,y> = cos(1e-2) = 0.99995 > 0.999, but not > 0.99999
    y = np.array([[1.0, 0.0], [np.cos(1e-2), np.sin(1e-2)]])
    assert clusters.pair_fraction(y) == 1.0 and clusters.pair_fraction(y, threshold=0.99999) == 0.0
    # a batch: all merged, orthonormal (none), and the 3+1 system -> (12 + 0 + 6) / 36
    batch = np.stack([e[[2, 2, 2, 2]], e, x])
    assert clusters.pair_fraction(batch) == pytest.approx(18 / 36)
    # the diagonal never counts, even when the threshold is below 1 and every point is distinct
    z = mf.uniform_sphere(10, 3, seed=0)
    gram = z @ z.T
    assert clusters.pair_fraction(z, threshold=0.2) == pytest.approx((np.sum(gram > 0.2) - 10) / 90)


def test_gram_rank_counts_tight_clusters():
    centres = mf.uniform_sphere(5, 8, seed=2)
    rng = np.random.default_rng(0)
    batch = []
    for k in (1, 3, 5):
        labels = np.concatenate([np.arange(k), rng.integers(0, k, 32 - k)])
        batch.append(mf.normalise(centres[labels] + 1e-4 * rng.standard_normal((32, 8))))
    assert list(clusters.gram_rank(np.stack(batch))) == [1, 3, 5]
    assert clusters.gram_rank(batch[1]) == 3
    assert clusters.gram_rank(np.eye(6)) == 6


def test_merge_statistics_match_dense_gram_reference():
    """One pass over the pairs (Numba) against the dense Gram matrix and numpy's SVD rank, on
    systems with pairs near both thresholds and relations that are not partitions (chains)."""
    rng = np.random.default_rng(1)
    for d, n in ((2, 32), (8, 32), (3, 70)):
        centres = mf.uniform_sphere(5, d, seed=rng, batch=60)
        labels = rng.integers(0, 5, (60, n))
        x = np.take_along_axis(centres, labels[..., None].repeat(d, -1), 1)
        x = mf.normalise(x + rng.normal(size=x.shape) * rng.choice([1e-4, 3e-3, 1e-2], size=(60, 1, 1)))
        g = x @ np.swapaxes(x, 1, 2)
        merged = (np.count_nonzero(g > 0.999) - np.count_nonzero(np.diagonal(g, axis1=1, axis2=2) > 0.999))
        fraction, ranks = clusters.merge_statistics(x)
        assert fraction == merged / (60 * n * (n - 1))
        np.testing.assert_array_equal(ranks, np.linalg.matrix_rank((g > 0.9999).astype(float)))
        assert clusters.pair_fraction(x) == fraction and clusters.merge_statistics(x[0])[1] == ranks[0]


def test_pair_statistics_reject_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        clusters.pair_fraction(np.eye(3), threshold=1.0)
    with pytest.raises(ValueError, match="two points"):
        clusters.pair_fraction(np.eye(3)[:1])
    with pytest.raises(ValueError, match="unit"):
        clusters.pair_fraction(2 * np.eye(3))


def test_gram_rank_fast_path_agrees_with_svd():
    rng = np.random.default_rng(5)
    x = mf.normalise(mf.uniform_sphere(6, 3, seed=1)[rng.integers(0, 6, (400, 20))]
                     + rng.uniform(0, 0.3, (400, 1, 1)) * rng.standard_normal((400, 20, 3)))
    for threshold in (0.9999, 0.99, 0.9, 0.5):
        svd = np.linalg.matrix_rank((np.einsum("bid,bjd->bij", x, x) > threshold).astype(float))
        assert np.array_equal(clusters.gram_rank(x, threshold), svd)
    # a chain 0~1~2 that is not transitive: rank 3 from the SVD, not the number of distinct rows
    chain = np.array([[1.0, 0.0], [np.cos(0.1), np.sin(0.1)], [np.cos(0.2), np.sin(0.2)]])
    assert clusters.gram_rank(chain, threshold=np.cos(0.15)) == 3


# ------------------------------------------------------------- the one cluster definition


def test_linkage_scale_is_the_spacing_at_the_level_density():
    from meanfield.clusters import linkage_scale
    assert linkage_scale(100, 2, level=1.0) == pytest.approx(2 * np.pi / 100)
    assert linkage_scale(400, 3, level=0.25) == pytest.approx(np.sqrt(4 * np.pi / 100))
    with pytest.raises(ValueError, match="level"):
        linkage_scale(10, 3, level=0.0)


def test_particles_and_density_give_the_same_count_for_the_same_measure():
    """Three bumps of mass 0.3, 0.3, 0.4 on the circle, with an empty gap between them: the grid
    measure and 3000 tokens sampled from it both have three clusters; merging two bumps gives two."""
    from meanfield.clusters import density_clusters, particle_clusters
    cells = 720
    theta = (np.arange(cells) + 0.5) * 2 * np.pi / cells
    centres, masses = np.array([1.0, 3.0, 5.0]), np.array([0.3, 0.3, 0.4])
    rho = sum(m * np.exp(-0.5 * ((theta - c) / 0.1) ** 2) / (np.sqrt(2 * np.pi) * 0.1) for c, m in zip(centres, masses))
    areas = np.full(cells, 2 * np.pi / cells)
    sol = _grid_solution(mf.circle_points(theta), areas, rho * areas)
    assert density_clusters(sol, 0) == 3
    rng = np.random.default_rng(0)
    which = rng.choice(3, size=3000, p=masses)
    tokens = mf.circle_points(centres[which] + 0.1 * rng.standard_normal(3000))
    assert particle_clusters(tokens) == 3
    merged = mf.circle_points(np.where(which == 1, 1.2, centres[which]) + 0.1 * rng.standard_normal(3000))
    assert particle_clusters(merged) == 2
    # a stray token (mass 1/3000 < MIN_MASS) is not a cluster, but counts at min_mass=0
    stray = np.vstack([tokens, mf.circle_points([2.0])])
    assert particle_clusters(stray) == 3 and particle_clusters(stray, min_mass=0.0) == 4


def _grid_solution(points, areas, masses):
    from meanfield.solvers.results import DensitySolution
    return DensitySolution(t=np.zeros(1), points=points, areas=areas, rho=(masses / areas)[None], mass=np.ones(1),
                           energy=np.zeros(1))


def test_point_mass_measure_reads_a_split_dirac_at_its_first_moment_on_the_circle():
    """A Dirac of mass 0.7 stored as (1 - a, a) of it in two neighbouring cells, and a bump of mass 0.3
    below the level: the Dirac becomes one atom at the normalised chord mean of the two cell centres,
    θ_i + h/2 + atan((2a - 1) tan(h/2)); the bump keeps its cells; W2 between the cell measure and
    the result is the cost of the collapse, ``moved``, exactly (on S^1 that plan is optimal)."""
    from meanfield.clusters import point_mass_measure
    cells, a, i = 256, 0.3, 40
    h = 2 * np.pi / cells
    theta = (np.arange(cells) + 0.5) * h
    bump = np.exp(2.0 * np.cos(theta - 4.0))
    masses = 0.3 * bump / bump.sum()
    masses[[i, i + 1]] += 0.7 * np.array([1 - a, a])
    sol = _grid_solution(mf.circle_points(theta), np.full(cells, h), masses)
    out = point_mass_measure(sol)
    assert out.centres.shape == (1, 2) and out.cells == 2
    a = masses[i + 1] / (masses[i] + masses[i + 1])       # the bump adds a little to both cells
    expected = theta[i] + h / 2 + np.arctan((2 * a - 1) * np.tan(h / 2))
    assert np.angle(out.centres[0] @ [1, 1j]) == pytest.approx(expected, abs=1e-14)
    assert out.masses[0] == pytest.approx(masses[i] + masses[i + 1], abs=1e-15)
    assert out.weights.sum() == pytest.approx(1.0, abs=1e-15) and len(out.points) == cells - 1
    w2 = mf.wasserstein(sol.points, masses, out.points, out.weights, p=2, method="circle")
    assert w2 == pytest.approx(out.moved, rel=1e-9)
    assert out.radii[0] < 0.5 * h


def test_point_mass_measure_on_the_sphere_recovers_a_dirac_inside_three_cells():
    """A Dirac at p split over the three generators around it with the weights that make p their
    normalised mean is read back at p to round-off; a smooth density (every cell above the level,
    one component around the sphere) is left as cells; bad parameters are refused."""
    from meanfield.clusters import point_mass_measure
    from meanfield.solvers.meshes.voronoi import icosphere
    mesh = icosphere(2)
    rng = np.random.default_rng(3)
    three = np.argsort(np.linalg.norm(mesh.points - mesh.points[17], axis=1))[[0, 1, 2]]
    lam = np.array([0.5, 0.3, 0.2])
    p = lam @ mesh.points[three]
    p /= np.linalg.norm(p)
    masses = np.full(len(mesh.areas), 1e-9 * rng.uniform(size=1))
    masses[three] += lam / lam.sum()
    masses /= masses.sum()
    out = point_mass_measure(_grid_solution(mesh.points, mesh.areas, masses))
    assert out.centres.shape == (1, 3) and np.allclose(out.centres[0], p, atol=1e-15)
    smooth = _grid_solution(mesh.points, mesh.areas, mesh.areas * (1 + 0.5 * mesh.points[:, 2]) / (4 * np.pi))
    kept = point_mass_measure(smooth, level=0.1)
    assert kept.cells == 0 and len(kept.points) == len(mesh.areas) and kept.moved == 0.0
    with pytest.raises(ValueError, match="width"):
        point_mass_measure(smooth, width=0.0)
    with pytest.raises(ValueError, match="level"):
        point_mass_measure(smooth, level=-1.0)


def test_point_mass_measure_of_two_merging_clusters_follows_the_particles():
    """upwind2 on 512 cells, SA(4), two half-mass one-cell Diracs, at the time the exact separation
    (``exact.two_dirac_angle``) is 1 (t = 157): the cell measure is 1.6 cells from the exact pair in W2,
    since each travelling cluster has spread over its cells (rms radius 1.6 h); read as point masses it
    is 0.24 cells away (256 / 512 / 1024 cells: 1.55 / 1.65 / 2.10 h against 0.67 / 0.24 / 0.72 h; what
    is left is the clusters' lag, 0.4-1.4 cells).  The two readings differ by at most ``moved``."""
    from meanfield.clusters import point_mass_measure
    from meanfield.exact import two_dirac_angle
    from meanfield.solvers import circle
    model, cells = mf.SA(4.0), 512
    h = 2 * np.pi / cells
    rho0 = np.zeros(cells)
    rho0[[cells // 2 - 1 - 81, cells // 2 + 81]] = 1.0           # separation 163 h ≈ 2
    phi0 = 163 * h
    fine = np.linspace(0.0, 200.0, 40001)
    T = fine[np.argmax(two_dirac_angle(model, fine, phi0) < 1.0)]
    sol = circle.solve(model, rho0, [0.0, T], cells=cells, flux="upwind2")
    phi = two_dirac_angle(model, np.array([0.0, T]), phi0)[-1]
    exact = mf.circle_points(np.pi + np.array([-phi / 2, phi / 2]))
    out = point_mass_measure(sol)
    assert len(out.centres) == 2 and out.masses[0] == pytest.approx(out.masses[1]) and out.masses.sum() > 0.999
    cell_w2 = mf.wasserstein(*sol.measure(), exact, [0.5, 0.5], p=2, method="circle")
    point_w2 = mf.wasserstein(out.points, out.weights, exact, [0.5, 0.5], p=2, method="circle")
    assert point_w2 < 0.25 * cell_w2 and point_w2 < 0.3 * h
    assert abs(cell_w2 - point_w2) <= out.moved


def test_cluster_centres_are_the_normalised_weighted_means_of_the_groups():
    """Three tight groups of weighted tokens on S^2 and one light stray token: the centres are
    Σ w x / |Σ w x| of each group, the masses their shares; the stray token is below min_mass."""
    from meanfield.clusters import cluster_centres
    rng = np.random.default_rng(4)
    poles = mf.uniform_sphere(3, 3, seed=5)
    which = np.repeat([0, 1, 2], 50)
    x = np.vstack([mf.normalise(poles[which] + 1e-3 * rng.standard_normal((150, 3))), -poles[:1]])
    w = np.concatenate([rng.uniform(1, 2, 150), [1e-3]])
    centres, masses = cluster_centres(x, w, tol=0.05, min_mass=1e-3)
    assert len(masses) == 3 and masses.sum() == pytest.approx(1 - w[-1] / w.sum())
    for c, m in zip(centres, masses):
        group = np.flatnonzero(np.linalg.norm(x[:150] - c, axis=1) < 0.05)
        mean = w[group] @ x[group]
        assert np.allclose(c, mean / np.linalg.norm(mean), atol=1e-15) and m == pytest.approx(w[group].sum() / w.sum())


def test_merge_atoms_returns_where_each_atom_went():
    from meanfield.measures import merge_atoms
    x = mf.normalise(np.array([[1.0, 0, 0], [1.0, 1e-9, 0], [0, 1.0, 0], [1.0, 2e-9, 0]]))
    merged, weights, inverse = merge_atoms(x, [1, 2, 3, 4], tol=1e-7, return_inverse=True)
    assert len(merged) == 2 and np.array_equal(merged[inverse[[0, 1, 3]]], np.repeat(x[:1], 3, axis=0))
    assert np.allclose(weights[inverse], [0.7, 0.7, 0.3, 0.7]) and np.allclose(merged[inverse[2]], x[2])
