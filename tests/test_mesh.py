"""Spherical Voronoi meshes: counts, exact areas, face geometry, neighbour lists, Lloyd, caching."""
import math

import numpy as np
import pytest
from scipy.spatial import SphericalVoronoi, cKDTree

from meanfield.solvers.meshes import voronoi as M
from meanfield.solvers.meshes.voronoi import Mesh, fibonacci, icosphere, voronoi_mesh


@pytest.mark.parametrize("level", range(5))
def test_icosphere_cell_count_and_total_area(level):
    m = icosphere(level)
    assert m.size == 10 * 4 ** level + 2
    assert abs(math.fsum(m.areas) - 4 * np.pi) < 1e-12
    # Euler's formula for the Voronoi tiling: V - E + F = 2 with 3 faces per vertex (2E = 3V)
    assert m.edges.shape[0] == 3 * (m.size - 2)


def test_level6_has_40962_cells_and_exact_total_area():
    m = icosphere(6)
    assert m.size == 40962
    assert abs(math.fsum(m.areas) - 4 * np.pi) < 1e-12


@pytest.mark.parametrize("n", [4, 100, 1001, 5000])
def test_fibonacci_any_n(n):
    m = fibonacci(n)
    assert m.size == n
    assert abs(math.fsum(m.areas) - 4 * np.pi) < 1e-12
    if n >= 100:  # quasi-uniform: largest / smallest cell area ≈ 1.12
        assert m.areas.max() / m.areas.min() < 1.2


def test_level0_cells_are_regular_pentagons():
    m = icosphere(0)
    np.testing.assert_allclose(m.areas, 4 * np.pi / 12, rtol=1e-14)
    assert np.all(np.diff(m.cell_ptr) == 5)
    # dodecahedron edge seen from the centre: arccos(sqrt(5)/3)
    np.testing.assert_allclose(m.lengths, np.arccos(np.sqrt(5) / 3), rtol=1e-13)
    np.testing.assert_allclose(m.distances, np.arctan(2.0), rtol=1e-13)


@pytest.mark.parametrize("build", [lambda: icosphere(3), lambda: fibonacci(777)])
def test_areas_match_scipy(build):
    m = build()
    sv = SphericalVoronoi(m.points)
    np.testing.assert_allclose(m.areas, sv.calculate_areas(), rtol=1e-10)


@pytest.mark.parametrize("build", [lambda: icosphere(3), lambda: fibonacci(600, lloyd=2)])
def test_face_geometry(build):
    m = build()
    i, j = m.edges.T
    ci, cj = m.points[i], m.points[j]
    assert np.all(i < j)
    np.testing.assert_allclose(m.distances, np.arccos(np.clip(np.sum(ci * cj, 1), -1, 1)), atol=1e-7)
    n0, n1 = m.normals[:, 0], m.normals[:, 1]
    np.testing.assert_allclose(np.linalg.norm(n0, axis=1), 1, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(n1, axis=1), 1, atol=1e-14)
    assert np.max(np.abs(np.sum(n0 * ci, 1))) < 1e-14 and np.max(np.abs(np.sum(n1 * cj, 1))) < 1e-14
    # the geodesic from c_i leaves along n0 and arrives at c_j along n1
    d = m.distances[:, None]
    np.testing.assert_allclose(np.cos(d) * ci + np.sin(d) * n0, cj, atol=1e-13)
    np.testing.assert_allclose(np.cos(d) * cj - np.sin(d) * n1, ci, atol=1e-13)
    # a cell is (to O(h^2)) the union of triangles of height d/2 over its faces
    pyramids = np.bincount(m.edges.ravel(), np.repeat(m.lengths * m.distances / 4, 2), minlength=m.size)
    np.testing.assert_allclose(pyramids, m.areas, rtol=1e-2)


def test_neighbour_lists_are_symmetric_and_contain_the_nearest_generator():
    m = icosphere(3)
    pairs = set()
    for c in range(m.size):
        lo, hi = m.cell_ptr[c], m.cell_ptr[c + 1]
        for e, nb in zip(m.cell_edges[lo:hi], m.cell_neighbours[lo:hi]):
            assert set(m.edges[e]) == {c, nb}
            pairs.add((c, nb))
    assert all((b, a) in pairs for a, b in pairs)
    assert len(pairs) == 2 * m.edges.shape[0]
    _, nearest = cKDTree(m.points).query(m.points, k=2)
    assert all((a, b) in pairs for a, b in nearest)
    np.testing.assert_allclose(m.perimeters, [sum(m.lengths[m.cell_edges[m.cell_ptr[c]:m.cell_ptr[c + 1]]])
                                              for c in range(m.size)], rtol=1e-14)


def _refined_moment(a, b, c, k):
    """∫ x dσ over the spherical triangles (a, b, c) by splitting each into k^2 small ones
    (projected barycentric grid), each weighted by its exact area at its projected centroid."""
    def node(s, t):
        q = (1 - (s + t) / k) * a + (s / k) * b + (t / k) * c
        return q / np.linalg.norm(q, axis=1, keepdims=True)
    total = np.zeros_like(a)
    for s in range(k):
        for t in range(k - s):
            tris = [(node(s, t), node(s + 1, t), node(s, t + 1))]
            if s + t < k - 1:
                tris.append((node(s + 1, t), node(s + 1, t + 1), node(s, t + 1)))
            for q0, q1, q2 in tris:
                mid = q0 + q1 + q2
                total += M._triangle_areas(q0, q1, q2)[:, None] * mid / np.linalg.norm(mid, axis=1, keepdims=True)
    return total


def test_centroid_formula_and_lloyd():
    m = icosphere(0)
    vertices, cell, va, vb = M.voronoi_faces(m.points)
    np.testing.assert_allclose(M._centroids(m.points, vertices, cell, va, vb), m.points, atol=1e-14)
    m = fibonacci(50)
    vertices, cell, va, vb = M.voronoi_faces(m.points)
    moment = np.zeros_like(m.points)
    np.add.at(moment, cell, _refined_moment(m.points[cell], vertices[va], vertices[vb], 24))
    moment /= np.linalg.norm(moment, axis=1, keepdims=True)
    # the quadrature itself is second order: 2.5e-7 off at k = 24
    np.testing.assert_allclose(M._centroids(m.points, vertices, cell, va, vb), moment, atol=1e-6)
    # Lloyd iterations bring the generators to the centroids of their cells
    gaps = []
    for it in (0, 3, 10):
        mm = fibonacci(400, lloyd=it)
        v, cl, a_, b_ = M.voronoi_faces(mm.points)
        gaps.append(np.max(np.linalg.norm(M._centroids(mm.points, v, cl, a_, b_) - mm.points, axis=1)))
    assert gaps[0] > gaps[1] > gaps[2]


def test_cached_read_only_and_save_load(tmp_path):
    assert icosphere(2) is icosphere(2)
    assert icosphere(2, lloyd=1) is not icosphere(2)
    m = icosphere(2)
    with pytest.raises(ValueError):
        m.areas[0] = 1.0
    path = tmp_path / "mesh.npz"
    m.save(path)
    back = Mesh.load(path)
    assert back.name == m.name == "icosphere(2)"
    for name in ("points", "areas", "edges", "lengths", "distances", "normals", "cell_ptr", "cell_edges",
                 "cell_neighbours"):
        np.testing.assert_array_equal(getattr(back, name), getattr(m, name))


def test_bad_input():
    with pytest.raises(ValueError, match="level"):
        icosphere(-1)
    with pytest.raises(TypeError, match="level"):
        icosphere(2.5)
    with pytest.raises(ValueError, match="n must be >= 4"):
        fibonacci(3)
    with pytest.raises(ValueError, match="lloyd"):
        fibonacci(100, lloyd=-2)
    with pytest.raises(ValueError, match="unit vectors"):
        voronoi_mesh(np.ones((10, 3)))
    x = fibonacci(20).points
    with pytest.raises(ValueError, match="Voronoi"):
        voronoi_mesh(np.vstack([x, x[:1]]))


def test_icosphere_is_exported_by_the_solver():
    from meanfield.solvers import sphere
    assert sphere.icosphere(1).size == 42
