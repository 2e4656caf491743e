r"""Linear interpolation of cell values on S^1 and S^2 (``DensitySolution.at``).

- S^1, values f_i at the cell centres θ_i = (i + 1/2) h of the uniform grid, h = 2π/N,
  indices mod N (periodic):

  .. math::

      f(\theta) = (1 - s) f_i + s f_{i+1}, \qquad \theta = \theta_i + s h, \ s \in [0, 1).

  On cells of different widths (``meanfield.solvers.adaptive_circle``) the same between the actual
  centres.
- S^2, values f_i at the generators c_i: the Delaunay triangulation of the generators is the
  convex hull of the points (every hull facet has an empty circumcircle on the sphere). A point
  x lies in the cone of the facet (a, b, c) where x = λ_a a + λ_b b + λ_c c with all λ >= 0;

  .. math::

      f(x) = \frac{\sum_v \lambda_v f_v}{\sum_v \lambda_v},

  the barycentric interpolant on the flat triangle at the point where the ray through x meets it
  (gnomonic projection). It reproduces the data at the generators, constants exactly, affine
  functions of R^3 at the projected point, and is second order for smooth f (the projection
  moves x by O(h^2)).
"""
import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial import ConvexHull, cKDTree

from .checks import as_float_array, as_points
from .geometry import circle_angles

__all__ = ["periodic_linear", "SphericalTriangulation"]

INSIDE_TOL = 1e-12       # barycentric coordinates above -tol count as inside a facet
NEAREST = 3              # facets around this many nearest generators are tried first


def periodic_linear(values: ArrayLike, x: ArrayLike, centres: ArrayLike | None = None) -> np.ndarray:
    r"""Periodic linear interpolation of values at the cell centres of the uniform S^1 grid.

    .. math::

        f(\theta) = (1 - s) f_i + s f_{i+1}, \qquad \theta = (i + \tfrac12 + s) h, \ h = 2\pi/N,
        \text{ indices mod } N.

    Parameters
    ----------
    values : array_like, shape (N,)
        f_i at the centres (i + 1/2) h.
    x : array_like, shape (q, 2)
        Points of S^1.
    centres : array_like, shape (N, 2), optional
        Cell centres in increasing angle, for cells of different widths
        (``meanfield.solvers.adaptive_circle``): the interpolation is then between them.

    Returns
    -------
    numpy.ndarray, shape (q,)

    Raises
    ------
    ValueError
        If the values are not finite or x are not unit vectors of R^2.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.interpolation import periodic_linear
    >>> values = np.array([0.0, 1.0, 2.0, 3.0])                       # centres at π/4, 3π/4, ...
    >>> periodic_linear(values, mf.circle_points(np.array([np.pi / 2, 0.0])))
    array([0.5, 1.5])
    """
    values = as_float_array(values, "values")
    if centres is not None:
        return np.interp(circle_angles(as_points(x, "points", d=2)), circle_angles(centres), values, period=2 * np.pi)
    cells = values.size
    s = circle_angles(as_points(x, "points", d=2)) * cells / (2 * np.pi) - 0.5
    i = np.floor(s).astype(int)
    frac = s - i
    return (1.0 - frac) * values[i % cells] + frac * values[(i + 1) % cells]


class SphericalTriangulation:
    r"""The Delaunay triangulation of generators on S^2 (their convex hull), with point location.

    ``locate(x)`` returns the facet vertices (q, 3) and the normalised barycentric weights (q, 3) of
    each query point; ``interpolate(values, x)`` the linear interpolant

    .. math::

        f(x) = \frac{\sum_v \lambda_v f_v}{\sum_v \lambda_v}, \qquad
        x = \lambda_a a + \lambda_b b + \lambda_c c, \ \lambda \ge 0.

    Parameters
    ----------
    points : array_like, shape (N, 3)
        Generators on S^2, N >= 4.

    Raises
    ------
    ValueError
        If the points are not unit vectors of R^3 or fewer than 4.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.geometry import icosahedral_triangulation
    >>> from meanfield.interpolation import SphericalTriangulation
    >>> v, _ = icosahedral_triangulation(1)
    >>> tri = SphericalTriangulation(v)
    >>> x = np.array([[0.0, 0.6, 0.8]])
    >>> round(float(tri.interpolate(np.ones(len(v)), x)[0]), 12)         # constants are exact
    1.0
    >>> vertices, weights = tri.locate(x)
    >>> vertices.shape, round(float(weights.sum()), 12)
    ((1, 3), 1.0)
    """

    def __init__(self, points: ArrayLike):
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

    def locate(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
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

    def interpolate(self, values: ArrayLike, x: ArrayLike) -> np.ndarray:
        values = as_float_array(values, "values")
        if values.shape != (self.points.shape[0],):
            raise ValueError(f"values must have one entry per generator, shape ({self.points.shape[0]},); "
                             f"got {values.shape}")
        vertices, lam = self.locate(x)
        return np.sum(lam * values[vertices], axis=1)
