"""Watershed-refined atoms (``meanfield.sampling.refined_triangles`` on S^2, ``refined_quantiles``
on S^1), with synthetic flows whose watersheds are known: every point goes to the pole of its
side of a plane."""
import numpy as np
import pytest

from meanfield.geometry import icosahedral_triangulation
from meanfield.measures import perturbed_uniform
from meanfield.sampling import refined_quantiles, refined_triangles, triangle_integrals
from meanfield.solvers.meshes.voronoi import icosahedron_points

NORMAL = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])


def two_poles(x, w):
    """F(x) = ±n by the side of the plane <x, n> = 0 (a watershed along a great circle)."""
    return np.where((x @ NORMAL > 0)[:, None], NORMAL, -NORMAL)


def uniform(x):
    return np.full(len(x), 1.0 / (4 * np.pi))


def test_triangulation_and_quadrature():
    """The triangulation's vertices are the icosphere's generators, triangles counter-clockwise;
    the quadrature integrates the normalised ρ_0 to 1 (measured error 2e-16 at level 2)."""
    v, t = icosahedral_triangulation(2)
    assert np.array_equal(v, icosahedron_points(2)) and t.shape == (320, 3)
    assert np.all(np.einsum("ij,ij->i", v[t[:, 0]], np.cross(v[t[:, 1]], v[t[:, 2]])) > 0)
    points = icosahedron_points(6)                                    # the finest level without its triangles
    assert np.array_equal(points, icosahedral_triangulation(6)[0]) and points.shape == (40962, 3)
    for rho in (uniform, perturbed_uniform(3, degree=2)):
        mass, moment = triangle_integrals(rho, v, t)
        assert abs(mass.sum() - 1.0) < 1e-12 and np.all(mass > 0)
    assert np.abs(moment.sum(axis=0) - [0.0, 0.0, 0.0]).max() > 1e-3        # ρ_0 is not centred


def test_subdivision_by_packed_keys_equals_the_argsort_path_and_shares_every_edge(monkeypatch):
    """The half-edge keys sorted with their indices packed in (levels <= 9) and by argsort (from
    level 10 on, forced here) give the same vertices and triangles; every edge of the result is
    shared by exactly two triangles, once in each direction; V - E + F = 2."""
    import meanfield.geometry as geometry
    v, t = icosahedral_triangulation(4)
    monkeypatch.setattr(geometry, "_PACKED_BITS", 0)
    w, u = icosahedral_triangulation(4)
    assert np.array_equal(v, w) and np.array_equal(t, u)
    start, end = t.ravel(), np.roll(t, -1, axis=1).ravel()
    directed = start * len(v) + end
    assert np.unique(directed).size == directed.size                 # no directed edge twice
    assert np.array_equal(np.sort(directed), np.sort(end * len(v) + start))   # each reversed once
    assert len(v) - directed.size // 2 + len(t) == 2
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-15)


def test_watershed_triangles_are_split_and_masses_add_up():
    rho = perturbed_uniform(3, degree=2)
    result = refined_triangles(rho, two_poles, level=2, rounds=1, depth=2)
    first = result.previous
    v, t = first.vertices, first.triangles
    side = v @ NORMAL > 0
    straddles = side[t].any(axis=1) & ~side[t].all(axis=1)
    cut = first.spread > 0.05
    assert np.array_equal(cut, straddles) and 0 < cut.sum() < len(t)
    assert result.counts == (320, 320 + 15 * cut.sum()) and result.split == (cut.sum(),)
    for r in (first, result):
        assert abs(r.weights.sum() - 1.0) < 1e-12 and abs(r.mass - 1.0) < 1e-12
    kept = len(t) - cut.sum()
    assert np.allclose(result.weights[:kept], first.weights[~cut], rtol=1e-13, atol=0)   # untouched
    children = result.weights[kept:].reshape(-1, 16).sum(axis=1)              # 4^depth per parent
    assert np.abs(children - first.weights[cut]).max() < 1e-13                 # measured 5e-15


def test_misrouted_mass_falls_with_refinement():
    """Uniform ρ, F = ±n by the side of the cap <x, n> > 0.3 (mass 0.35): a cut triangle's image
    spreads over π, so error_bound² = π² × (mass of the cut triangles), which bounds the
    misrouted mass |Σ_{F(x_T) = n} w_T - 0.35|; it falls as h: the bound by 2^(-1/2) a round."""
    def cap(x, w):
        return np.where((x @ NORMAL > 0.3)[:, None], NORMAL, -NORMAL)

    r = refined_triangles(uniform, cap, level=1, rounds=3)
    bounds = []
    while r is not None:
        assert abs(r.weights[r.final @ NORMAL > 0].sum() - 0.35) <= (r.error_bound / np.pi) ** 2
        bounds.append(r.error_bound)
        r = r.previous
    ratios = np.array(bounds[:-1]) / np.array(bounds[1:])
    assert np.all(np.abs(ratios - 2 ** -0.5) < 0.02), ratios                  # measured 0.707-0.718


def test_quantiles_split_the_intervals_at_the_watersheds():
    """S^1, uniform ρ, F = ±e by the side of the diameter at angle 0.3: the two watersheds each
    split the two intervals beside them into ``split``; the mass sent to e is 1/2 to within the
    two cut intervals' masses, 2/(n split^rounds)."""
    e = np.array([np.cos(0.3 + np.pi / 2), np.sin(0.3 + np.pi / 2)])

    def sides(x, w):
        return np.where((x @ e > 0)[:, None], e, -e)

    n, split = 50, 8
    for rounds in (1, 2):
        final, w = refined_quantiles(lambda x: np.ones(len(x)), sides, n, rounds=rounds, split=split)
        assert len(w) == n + 4 * (split - 1) * rounds and abs(w.sum() - 1.0) < 1e-14
        assert abs(w[final @ e > 0].sum() - 0.5) <= 2.0 / (n * split ** rounds) + 1e-14


def test_bad_input():
    with pytest.raises(TypeError, match="callable"):
        refined_triangles(np.ones(3), two_poles)
    with pytest.raises(ValueError, match="jump"):
        refined_triangles(uniform, two_poles, jump=0.0)
    with pytest.raises(ValueError, match="level"):
        refined_triangles(uniform, two_poles, level=-1)
    with pytest.raises(ValueError, match="final time"):
        refined_triangles(uniform, lambda x, w: x[:, :2], level=1)
