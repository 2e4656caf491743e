"""Linear interpolation of cell values on S^1 and S^2 (``DensitySolution.at``).

- S^1, values f_i at the cell centres θ_i = (i + 1/2) h of the uniform grid, h = 2π/N:
  f(θ) = (1 - s) f_i + s f_{i+1} with θ = θ_i + s h, s ∈ [0, 1), indices mod N (periodic); on cells
  of different widths (``meanfield.solvers.adaptive_circle``) the same between the actual centres.
- S^2, values f_i at the generators c_i: the Delaunay triangulation of the generators is the
  convex hull of the points (every hull facet has an empty circumcircle on the sphere). A point
  x lies in the cone of the facet (a, b, c) where x = λ_a a + λ_b b + λ_c c with all λ >= 0;
  f(x) = sum λ_v f_v / sum λ_v, the barycentric interpolant on the flat triangle at the point
  where the ray through x meets it (gnomonic projection). It reproduces the data at the
  generators, constants exactly, affine functions of R^3 at the projected point, and is second
  order for smooth f (the projection moves x by O(h^2)).
"""
import numpy as np
from scipy.spatial import ConvexHull, cKDTree

from .checks import as_float_array, as_points
from .geometry import circle_angles

__all__ = ["periodic_linear", "SphericalTriangulation"]

INSIDE_TOL = 1e-12       # barycentric coordinates above -tol count as inside a facet
NEAREST = 3              # facets around this many nearest generators are tried first


def periodic_linear(values, x, centres=None):
    """Periodic linear interpolation at the points x (q, 2) of values on the uniform S^1 grid, or,
    given ``centres`` (N, 2) in increasing angle (cells of different widths), between them."""
    values = as_float_array(values, "values")
    if centres is not None:
        return np.interp(circle_angles(as_points(x, "points", d=2)), circle_angles(centres), values, period=2 * np.pi)
    cells = values.size
    s = circle_angles(as_points(x, "points", d=2)) * cells / (2 * np.pi) - 0.5
    i = np.floor(s).astype(int)
    frac = s - i
    return (1.0 - frac) * values[i % cells] + frac * values[(i + 1) % cells]


class SphericalTriangulation:
    """The Delaunay triangulation of generators on S^2 (their convex hull), with point location.

    ``locate(x)`` returns the facet vertices (q, 3) and the normalised barycentric weights
    (q, 3) of each query point; ``interpolate(values, x)`` the linear interpolant."""

    def __init__(self, points):
        self.points = as_points(points, "points", d=3)
        if self.points.shape[0] < 4:
            raise ValueError("a triangulation of S^2 needs at least 4 generators")
        self.facets = ConvexHull(self.points).simplices
        # λ = M^{-1} x with M = [a b c] (columns): one 3×3 inverse per facet
        self.inverse = np.linalg.inv(np.transpose(self.points[self.facets], (0, 2, 1)))
        order = np.argsort(self.facets.ravel(), kind="stable")
        self.ptr = np.searchsorted(self.facets.ravel()[order], np.arange(self.points.shape[0] + 1))
        self.incident = order // 3
        self.tree = cKDTree(self.points)

    def _coordinates(self, facet, x):
        return np.einsum("qij,qj->qi", self.inverse[facet], x)

    def locate(self, x):
        x = as_points(x, "points", d=3)
        q = x.shape[0]
        facet = np.full(q, -1)
        lam = np.zeros((q, 3))
        _, near = self.tree.query(x, k=min(NEAREST, self.points.shape[0]))
        for v in np.atleast_2d(near.T):
            for r in range(int(np.max(self.ptr[v + 1] - self.ptr[v]))):
                todo = np.flatnonzero((facet < 0) & (self.ptr[v] + r < self.ptr[v + 1]))
                if todo.size == 0:
                    continue
                cand = self.incident[self.ptr[v[todo]] + r]
                c = self._coordinates(cand, x[todo])
                ok = np.all(c >= -INSIDE_TOL, axis=1)
                facet[todo[ok]], lam[todo[ok]] = cand[ok], c[ok]
        for i in np.flatnonzero(facet < 0):          # rare: search every facet
            c = self.inverse @ x[i]
            best = int(np.argmax(c.min(axis=1)))
            facet[i], lam[i] = best, c[best]
        lam = np.clip(lam, 0.0, None)
        return self.facets[facet], lam / lam.sum(axis=1, keepdims=True)

    def interpolate(self, values, x):
        values = as_float_array(values, "values")
        if values.shape != (self.points.shape[0],):
            raise ValueError(f"values must have one entry per generator, shape ({self.points.shape[0]},); "
                             f"got {values.shape}")
        vertices, lam = self.locate(x)
        return np.sum(lam * values[vertices], axis=1)
