"""Discretising a density on S^1 or S^2 into a weighted point measure sum_i w_i δ_{x_i}.

``discretise(rho, n, d, method)`` turns a density ρ (against surface measure) into n points
and weights summing to 1, ready as ``x0, weights`` of the particle solver. Methods:

- ``"iid"``: n independent draws, equal weights (``measures.sample_density`` for a callable).
  The harmonic coefficients of the empirical measure are off by O(n^{-1/2}).
- ``"quantile"`` (S^1): θ_i = F^{-1}((i + 1/2)/n), equal weights; deterministic. Every
  interval between consecutive points holds mass 1/n, so W_1 = O(1/n) and the moments of
  smooth functions are exact to O(n^{-2}).
- ``"stratified"``: equal-mass strata, one point in each, equal weights.
  S^1: θ_i = F^{-1}((i + U_i)/n), U_i i.i.d. uniform (jittered quantiles).
  S^2: the rank-1 Fibonacci lattice of the unit square, (u_k, v_k) = ((k + U)/n, {k/φ + V})
  (φ the golden ratio, one random shift (U, V) per draw), pushed through the Knothe map of ρ:
  z = cos(colatitude) from the marginal CDF of ρ in z, longitude from the conditional CDF
  given z. For ρ uniform these are the spherical Fibonacci points.
- ``"weighted"``: quasi-uniform points with weights ρ(x_i) |S|/n, normalised: S^1 equispaced
  angles (k + U)·2π/n (the periodic trapezoidal rule, spectrally accurate for smooth ρ);
  S^2 the (shifted) spherical Fibonacci points.

``rho`` may be a callable of points (N, d) -> densities, an array of cell densities (S^1: the
uniform grid of ``meanfield.solvers.circle``, cell i = [ih, (i+1)h); S^2: pass ``mesh=``, any
object with ``.points`` generators and ``.areas``), or a ``DensitySolution`` (output ``k``).
Cell data are the piecewise-constant density ρ_i on each cell (a Voronoi cell on S^2 is the set
of points nearest its generator). Inverse CDFs are exact for piecewise-constant densities; a
callable is first tabulated at cell midpoints (S^1: 2^16 cells; S^2: 512 colatitude rows × 1024
longitudes with exact cell areas, within about 5e-3 rad of ρ in W_1).
"""
import numpy as np
from scipy.spatial import cKDTree

from .checks import as_choice, as_count, as_density, as_points, as_seed
from .geometry import circle_angles, circle_points, from_spherical
from .measures import CIRCLE_GRID, _density_values, inverse_cdf, sample_density

__all__ = ["discretise", "METHODS", "RANDOMISED"]

METHODS = ("iid", "quantile", "stratified", "weighted")
RANDOMISED = ("iid", "stratified", "weighted")     # methods that use the seed
SPHERE_ROWS = 512                                  # colatitude rows of the S^2 raster (2x as many longitudes)
GOLDEN = (1.0 + np.sqrt(5.0)) / 2.0


def discretise(rho, n, d, method="iid", seed=None, *, k=-1, mesh=None):
    """n points x (n, d) and weights w (n,), sum w = 1, discretising the density ρ on S^{d-1}.

    Parameters
    ----------
    rho : callable, array or DensitySolution
        A callable of points (N, d) -> non-negative densities; an array of cell densities (the
        uniform S^1 grid, or the cells of ``mesh`` on S^2); or a DensitySolution (its output k).
    n : int
        Number of points.
    d : int
        Ambient dimension: 2 (S^1) or 3 (S^2).
    method : {"iid", "quantile", "stratified", "weighted"}
        See the module docstring. "quantile" is for S^1 only and ignores the seed.
    seed : None, int or numpy Generator
        Randomness of "iid", "stratified" (jitter / lattice shift) and "weighted" (shift).
    k : int
        Output index when ``rho`` is a DensitySolution.
    mesh : object with ``points`` (N, 3) and ``areas`` (N,), optional
        The cells of an array ``rho`` on S^2.

    Returns
    -------
    x : ndarray (n, d)
        Unit vectors.
    w : ndarray (n,)
        Non-negative weights summing to 1 (equal, 1/n, except for "weighted").
    """
    n = as_count(n, "n")
    d = as_count(d, "d", minimum=2)
    if d not in (2, 3):
        raise ValueError(f"discretise works on S^1 (d = 2) and S^2 (d = 3); got d = {d}")
    as_choice(method, "method", METHODS)
    if method == "quantile" and d != 2:
        raise ValueError("method='quantile' is the inverse CDF on S^1; on S^2 use 'stratified' (equal-mass "
                         "Fibonacci lattice through the Knothe map) or 'weighted'")
    rng = np.random.default_rng(as_seed(seed))
    if callable(rho) and method == "iid":
        return sample_density(rho, n, d, seed=rng), np.full(n, 1.0 / n)
    if method == "weighted":
        x = _quasi_uniform(n, d, rng)
        if callable(rho):
            w = _density_values(rho, x, "rho")
        else:
            w = (_circle_table(rho, k) if d == 2 else _sphere_table(rho, k, mesh)).density(x)
        if not w.sum() > 0:
            raise ValueError(f"rho vanishes at all {n} quasi-uniform points; use more points or an "
                             f"equal-weight method")
        return x, w / w.sum()
    table = _circle_table(rho, k) if d == 2 else _sphere_table(rho, k, mesh)
    if method == "iid":
        u = rng.random((n, d - 1))
    elif method == "quantile":
        u = ((np.arange(n) + 0.5) / n)[:, None]
    elif d == 2:
        u = ((np.arange(n) + rng.random(n)) / n)[:, None]
    else:
        u = _fibonacci_lattice(n, rng.random(2))
    return table.transport(u), np.full(n, 1.0 / n)


def _fibonacci_lattice(n, shift):
    """((k + U)/n, {k/φ + V}) for k < n: the rank-1 lattice behind the spherical Fibonacci points."""
    k = np.arange(n)
    return np.stack([(k + shift[0]) / n, np.mod(k / GOLDEN + shift[1], 1.0)], axis=1)


def _quasi_uniform(n, d, rng):
    """Equispaced angles (k + U)·2π/n on S^1; the shifted spherical Fibonacci points on S^2."""
    if d == 2:
        return circle_points(2 * np.pi * (np.arange(n) + rng.random()) / n)
    u, v = _fibonacci_lattice(n, rng.random(2)).T
    return _from_height(1.0 - 2.0 * u, 2 * np.pi * v)    # the Knothe map of the uniform density


def _from_height(z, phi):
    """Points of S^2 at height z = cos(colatitude) and longitude phi."""
    r = np.sqrt(np.clip(1.0 - z * z, 0.0, None))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def _solution_cells(rho, k):
    """(points, areas, cell densities) of a DensitySolution-like object at output k."""
    rows = np.asarray(rho.rho)
    if not isinstance(k, (int, np.integer)) or not -rows.shape[0] <= k < rows.shape[0]:
        raise ValueError(f"k must be an output index in [-{rows.shape[0]}, {rows.shape[0]}); got {k!r}")
    values = np.clip(rows[k], 0.0, None)
    return np.asarray(rho.points), np.asarray(rho.areas), as_density(values, "rho (the solution at output k)")


def _is_solution(rho):
    return all(hasattr(rho, a) for a in ("points", "areas", "rho"))


class _CircleTable:
    """A piecewise-constant density on N equal arcs [ih, (i+1)h) of S^1, h = 2π/N."""

    def __init__(self, values):
        self.values = values
        self.h = 2 * np.pi / values.size

    def density(self, x):
        i = np.minimum((circle_angles(x) / self.h).astype(int), self.values.size - 1)
        return self.values[i] / (self.values.sum() * self.h)

    def transport(self, u):
        """Points at the quantile levels u (n, 1)."""
        return circle_points(self.h * inverse_cdf(self.values, u[:, 0]))


def _circle_table(rho, k):
    if callable(rho):
        h = 2 * np.pi / CIRCLE_GRID
        return _CircleTable(_density_values(rho, circle_points(h * (np.arange(CIRCLE_GRID) + 0.5)), "rho"))
    if _is_solution(rho):
        points, areas, values = _solution_cells(rho, k)
        cells = values.size
        centres = circle_points(2 * np.pi * (np.arange(cells) + 0.5) / cells)
        if points.shape != (cells, 2) or not np.allclose(points, centres, atol=1e-9):
            raise ValueError("a DensitySolution on S^1 must live on the uniform grid of meanfield.solvers.circle")
        return _CircleTable(values)
    return _CircleTable(as_density(rho, "rho"))


class _SphereTable:
    """A piecewise-constant density on a colatitude × longitude raster of S^2: R rows
    [θ_j, θ_{j+1}], θ_j = jπ/R, times 2R columns of width π/R; cell (j, c) has area
    (cos θ_j - cos θ_{j+1}) π/R and mass ρ(midpoint) × area.

    Knothe map: u picks the row from the row masses' CDF and, within the row (where the
    density is uniform in z = cos θ on each cell), z linearly; v picks the longitude from the
    row's own CDF over its columns. Uniform (u, v) give exact draws from the raster density.
    """

    def __init__(self, density):
        rows = SPHERE_ROWS
        edges = np.linspace(0.0, np.pi, rows + 1)
        self.z = np.cos(edges)
        width = np.pi / rows
        theta, phi = np.meshgrid(edges[:-1] + 0.5 * width, width * (np.arange(2 * rows) + 0.5), indexing="ij")
        values = density(from_spherical(theta.ravel(), phi.ravel())).reshape(theta.shape)
        self.mass = values * ((self.z[:-1] - self.z[1:]) * width)[:, None]
        self.width = width
        self.row_mass = self.mass.sum(axis=1)
        self.density = density

    def transport(self, uv):
        """Points for the levels uv (n, 2) in [0, 1)^2."""
        row_pos = inverse_cdf(self.row_mass, uv[:, 0])
        j = np.minimum(row_pos.astype(int), self.row_mass.size - 1)
        z = self.z[j] + (row_pos - j) * (self.z[j + 1] - self.z[j])
        cols = self.mass.shape[1]
        cdf = np.cumsum(self.mass.ravel())             # rows one after another: monotone
        start = cdf[j * cols] - self.mass[j, 0]
        level = start + uv[:, 1] * self.row_mass[j]
        c = np.clip(np.searchsorted(cdf, level, side="right") - j * cols, 0, cols - 1)
        below = cdf[j * cols + c] - self.mass[j, c]
        frac = np.clip((level - below) / np.where(self.mass[j, c] > 0, self.mass[j, c], 1.0), 0.0, 1.0)
        return _from_height(z, self.width * (c + frac))


def _voronoi_density(points, values):
    """The piecewise-constant density equal to values[i] on the Voronoi cell of generator i."""
    tree = cKDTree(points)
    return lambda x: values[tree.query(x)[1]]


def _sphere_table(rho, k, mesh):
    if callable(rho):
        return _SphereTable(lambda x: _density_values(rho, x, "rho"))
    if _is_solution(rho):
        points, _, values = _solution_cells(rho, k)
    else:
        if mesh is None:
            raise ValueError("an array rho on S^2 needs mesh= (the Mesh, or anything with .points and .areas, "
                             "whose cells carry the values)")
        points = as_points(np.asarray(mesh.points), "mesh.points", d=3)
        values = as_density(rho, "rho")
        if values.shape != (points.shape[0],):
            raise ValueError(f"rho must have one value per cell of the mesh, shape ({points.shape[0]},); "
                             f"got {values.shape}")
    return _SphereTable(_voronoi_density(points, values))
