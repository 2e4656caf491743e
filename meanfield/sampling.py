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
  S^2: the rank-1 Fibonacci lattice of the unit square jittered within its rows,
  (u_k, v_k) = ((k + U_k)/n, {k/φ + V}) (φ the golden ratio, U_k i.i.d. uniform, one random
  shift V per draw), pushed through the Knothe map of ρ: z = cos(colatitude) from the marginal
  CDF of ρ in z, longitude from the conditional CDF given z. For ρ uniform these are jittered
  spherical Fibonacci points; low moments are off by O(n^{-3/2}) (one shift U common to all k
  would leave O(1/n) in the z-moments: (1 - 2U)/n in the mean of z).
- ``"weighted"``: quasi-uniform points with weights ρ(x_i) |S|/n, normalised: S^1 equispaced
  angles (k + U)·2π/n (the periodic trapezoidal rule, spectrally accurate for smooth ρ);
  S^2 the spherical Fibonacci points of the midpoint lattice ((k + 1/2)/n, {k/φ + V}), one
  random longitude shift V per draw (moments off by O(n^{-3/2}) as well).

``rho`` may be a callable of points (N, d) -> densities, an array of cell densities (S^1: the
uniform grid of ``meanfield.solvers.circle``, cell i = [ih, (i+1)h); S^2: pass ``mesh=``, any
object with ``.points`` generators and ``.areas``), or a ``DensitySolution`` (output ``k``).
Cell data are the piecewise-constant density ρ_i on each cell (a Voronoi cell on S^2 is the set
of points nearest its generator). Inverse CDFs are exact for piecewise-constant densities; a
callable is first tabulated at cell midpoints (S^1: 2^16 cells; S^2: 512 colatitude rows × 1024
longitudes with exact cell areas, within about 5e-3 rad of ρ in W_1).

References that stay converged once clusters separate: ``refined_triangles`` (S^2) and
``refined_quantiles`` (S^1) put one weighted atom on each cell of a triangulation / of the
quantile intervals and refine, over a few runs of a given flow, the cells that the flow tears
apart (those a watershed between clusters crosses, whose mass would all follow one atom).
"""
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial import cKDTree

from .checks import as_choice, as_count, as_density, as_points, as_seed, as_size
from .geometry import circle_angles, circle_points, from_spherical, great_circle_rows, icosahedral_triangulation
from .measures import CIRCLE_GRID, density_values, inverse_cdf, relative, sample_density
from .summaries import short_repr

__all__ = ["discretise", "refined_quantiles", "refined_triangles", "TriangleRefinement", "triangle_integrals",
           "METHODS", "RANDOMISED"]

METHODS = ("iid", "quantile", "stratified", "weighted")
RANDOMISED = ("iid", "stratified", "weighted")     # methods that use the seed
SPHERE_ROWS = 512                                  # colatitude rows of the S^2 raster (2x as many longitudes)
GOLDEN = (1.0 + np.sqrt(5.0)) / 2.0


def discretise(rho: Callable[[np.ndarray], np.ndarray] | ArrayLike | object, n: int, d: int, method: str = "iid",
               seed: int | np.random.Generator | None = None, *, k: int = -1,
               mesh: object | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""n points and weights summing to 1 discretising the density ρ on S^1 or S^2.

    .. math::

        \rho\, d\sigma \approx \sum_{i=1}^n w_i \delta_{x_i}, \qquad \sum_i w_i = 1;
        \qquad \text{"quantile": } \theta_i = F^{-1}\big((i + \tfrac12)/n\big), \ w_i = \tfrac1n.

    Parameters
    ----------
    rho : callable, array_like or DensitySolution
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
    x : numpy.ndarray, shape (n, d)
        Unit vectors.
    w : numpy.ndarray, shape (n,)
        Non-negative weights summing to 1 (equal, 1/n, except for "weighted").

    Raises
    ------
    ValueError
        If d is not 2 or 3, the method is unknown or "quantile" on S^2, ρ is invalid (negative,
        zero mass, wrong shape), an array on S^2 has no mesh, or k is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> x, w = mf.discretise(np.ones(8), 4, 2, method="quantile")    # uniform cells on S^1
    >>> (mf.circle_angles(x) / np.pi).round(6), w
    (array([0.25, 0.75, 1.25, 1.75]), array([0.25, 0.25, 0.25, 0.25]))
    >>> x, w = mf.discretise(mf.perturbed_uniform(3, seed=0), 50, 3, method="stratified", seed=0)
    >>> x.shape, round(float(w.sum()), 12)
    ((50, 3), 1.0)
    """
    d = as_count(d, "d", minimum=2)
    n = as_size(n, "n", 8 * (4 * d + 4))      # points, levels, weights and the transport's temporaries
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
            w = density_values(rho, x, "rho")
        else:
            w = (_circle_table(rho, k) if d == 2 else _sphere_table(rho, k, mesh)).density(x)
        w = relative(w)
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
        u = _fibonacci_lattice(n, rng.random(n), rng.random())
    return table.transport(u), np.full(n, 1.0 / n)


def _fibonacci_lattice(n, jitter, shift):
    """((k + jitter_k)/n, {k/φ + shift}) for k < n: the rank-1 lattice behind the spherical Fibonacci
    points, each point at its own height ``jitter`` (n,) (or one scalar for all) within its row."""
    k = np.arange(n)
    return np.stack([(k + jitter) / n, np.mod(k / GOLDEN + shift, 1.0)], axis=1)


def _quasi_uniform(n, d, rng):
    """Equispaced angles (k + U)·2π/n on S^1; the midpoint spherical Fibonacci points, turned by a
    random longitude, on S^2."""
    if d == 2:
        return circle_points(2 * np.pi * (np.arange(n) + rng.random()) / n)
    u, v = _fibonacci_lattice(n, 0.5, rng.random()).T
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
    """A piecewise-constant density on N equal arcs [ih, (i+1)h) of S^1, h = 2π/N, or on the arcs
    of ``widths`` (N,) laid end to end from the angle ``start``."""

    def __init__(self, values, widths=None, start=0.0):
        self.values = relative(values)
        self.h = 2 * np.pi / values.size
        self.widths, self.start = widths, start
        if widths is not None:
            self.edges = start + np.concatenate([[0.0], np.cumsum(widths)])

    def density(self, x):
        if self.widths is None:
            i = np.minimum((circle_angles(x) / self.h).astype(int), self.values.size - 1)
            return self.values[i] / (self.values.sum() * self.h)
        theta = (circle_angles(x) - self.start) % (2 * np.pi) + self.start
        i = np.clip(np.searchsorted(self.edges, theta, side="right") - 1, 0, self.values.size - 1)
        return self.values[i] / (self.values @ self.widths)

    def transport(self, u):
        """Points at the quantile levels u (n, 1)."""
        if self.widths is None:
            return circle_points(self.h * inverse_cdf(self.values, u[:, 0]))
        position = inverse_cdf(self.values * self.widths, u[:, 0])
        k = np.minimum(position.astype(int), self.values.size - 1)
        return circle_points(self.edges[k] + (position - k) * self.widths[k])


def uniform_circle_grid(points):
    """Whether the S^1 cell centres ``points`` (N, 2) are those of the uniform grid (i + 1/2) 2π/N."""
    if points.ndim != 2 or points.shape[1] != 2:
        return False
    centres = circle_points(2 * np.pi * (np.arange(points.shape[0]) + 0.5) / points.shape[0])
    return bool(np.allclose(points, centres, atol=1e-9))


def _circle_table(rho, k):
    if callable(rho):
        h = 2 * np.pi / CIRCLE_GRID
        return _CircleTable(density_values(rho, circle_points(h * (np.arange(CIRCLE_GRID) + 0.5)), "rho"))
    if _is_solution(rho):
        points, areas, values = _solution_cells(rho, k)
        if uniform_circle_grid(points):
            return _CircleTable(values)
        theta = circle_angles(points)
        start = theta[0] - areas[0] / 2
        edges = start + np.concatenate([[0.0], np.cumsum(areas)])
        if not (abs(edges[-1] - start - 2 * np.pi) < 1e-9 and np.allclose(theta, edges[:-1] + areas / 2, atol=1e-9)):
            raise ValueError("a DensitySolution on S^1 must live on arcs that tile the circle in increasing angle "
                             "(meanfield.solvers.circle or adaptive_circle)")
        return _CircleTable(values, areas, start)
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
        values = relative(density(from_spherical(theta.ravel(), phi.ravel())).reshape(theta.shape))
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
        return _SphereTable(lambda x: density_values(rho, x, "rho"))
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


def refined_quantiles(rho: Callable[[np.ndarray], np.ndarray],
                      flow: Callable[[np.ndarray, np.ndarray], np.ndarray], n: int, rounds: int = 3, split: int = 64,
                      jump: float = 0.05, grid: int = 1 << 18) -> tuple[np.ndarray, np.ndarray]:
    r"""Atoms of the density ρ on S^1 on quantile intervals, refined where a flow tears them apart.

    Atom i carries the mass of the quantile interval [q_i, q_{i+1}] (q = 0, 1/n, ..., 1 to start),
    placed at the middle quantile, F the CDF of ρ from ``grid`` midpoints:

    .. math::

        w_i = q_{i+1} - q_i, \qquad \theta_i = F^{-1}\big((q_i + q_{i+1})/2\big).

    Each round calls ``flow(x, w)`` (as in ``refined_triangles``) and splits into ``split``
    equal-mass intervals both neighbours of every pair of consecutive atoms that end more than
    ``jump`` radians apart (a watershed between clusters lies between them, and the mass of its
    interval all follows one atom: an error ~ π²/n in W_2² per watershed).

    Parameters
    ----------
    rho : callable
        Points (N, 2) -> non-negative densities.
    flow : callable
        flow(x (N, 2), w (N,)) -> positions (N, 2) at the final time.
    n : int
        Initial number of intervals (>= 2).
    rounds : int
        Number of refinements (``rounds + 1`` calls of ``flow``).
    split : int
        Sub-intervals of a refined interval.
    jump : float
        Final gap (radians) between neighbours beyond which both are refined.
    grid : int
        Cells of the CDF table.

    Returns
    -------
    x : numpy.ndarray, shape (N, 2)
        The atoms at the end of the last flow.
    w : numpy.ndarray, shape (N,)
        Their weights, summing to 1.

    Raises
    ------
    TypeError
        If rho or flow is not callable.
    ValueError
        If a count or jump is invalid, or flow returns points of the wrong shape or off the sphere.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.sampling import refined_quantiles
    >>> rho = lambda x: np.ones(len(x))
    >>> x, w = refined_quantiles(rho, lambda x, w: x, 8, rounds=1, jump=1.0, grid=1024)  # no gap > 1: no split
    >>> x.shape, w.round(4)
    ((8, 2), array([0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125]))
    >>> x, w = refined_quantiles(rho, lambda x, w: x, 8, rounds=1, split=4, jump=0.5, grid=1024)  # all split
    >>> x.shape
    (32, 2)
    """
    if not callable(rho) or not callable(flow):
        raise TypeError("rho and flow must be callables (see the docstring)")
    n, rounds, split = as_count(n, "n", minimum=2), as_count(rounds, "rounds", minimum=0), as_count(split, "split")
    _check_jump(jump)
    edges = np.linspace(0.0, 2 * np.pi, as_count(grid, "grid") + 1)
    cdf = np.concatenate([[0.0], np.cumsum(density_values(rho, circle_points(0.5 * (edges[1:] + edges[:-1])), "rho"))])
    cdf /= cdf[-1]
    q = np.linspace(0.0, 1.0, n + 1)
    for r in range(rounds + 1):
        w = np.diff(q)
        final = _flowed(flow, circle_points(np.interp(0.5 * (q[1:] + q[:-1]), cdf, edges)), w)
        if r == rounds:
            return final, w
        theta = circle_angles(final)
        gap = np.abs(np.angle(np.exp(1j * (np.roll(theta, -1) - theta))))
        cut = np.flatnonzero(gap > jump)
        refine = np.unique(np.concatenate([cut, (cut + 1) % w.size]))
        inner = [np.linspace(q[i], q[i + 1], split + 1)[1:-1] for i in refine]
        q = np.sort(np.concatenate([q] + inner))


def _flowed(flow, x, w):
    """flow(x, w), checked to be one finite unit vector of the same sphere per row of x (a flow
    that returns NaN or points off the sphere is named, not passed on as atoms)."""
    y = flow(x, w)
    if np.shape(y) != x.shape:
        raise ValueError(f"flow(x, w) must return the {x.shape[0]} points at the final time, shape {x.shape}; "
                         f"got {np.shape(y)}")
    return as_points(y, "flow(x, w)", d=x.shape[1])


def _check_jump(jump):
    if not np.isfinite(jump) or jump <= 0:
        raise ValueError(f"jump must be a positive angle in radians; got {jump!r}")


@dataclass(frozen=True)
class TriangleRefinement:
    r"""Result of ``refined_triangles``: one atom per spherical triangle.

    .. math::

        \text{error\_bound} = \Big(\sum_T w_T r_T^2\Big)^{1/2}, \qquad r_T = \max_k d(F(v_k), F(x_T)).

    Parameters
    ----------
    points : numpy.ndarray, shape (n, 3)
        The atoms x_T at t = 0.
    weights : numpy.ndarray, shape (n,)
        Their masses w_T (sum 1).
    final : numpy.ndarray, shape (n, 3)
        The atoms at the end of the flow.
    vertices : numpy.ndarray, shape (V, 3)
        Vertices of the triangulation.
    triangles : numpy.ndarray, shape (n, 3)
        Triangles, rows of vertex indices.
    spread : numpy.ndarray, shape (n,)
        The geodesic radius r_T of each triangle's image at the end of the last flow.
    mass : float
        The raw quadrature ∫ρ dσ before normalisation.
    counts : tuple of int
        The triangles per flow (rounds + 1 entries).
    split : tuple of int
        The triangles split after each flow (rounds entries).
    previous : TriangleRefinement or None
        The refinement of the round before (None after the first flow).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.sampling import refined_triangles
    >>> r = refined_triangles(lambda x: np.ones(len(x)), lambda x, w: x, level=0, rounds=0)
    >>> r.counts, round(r.error_bound, 3)            # the identity flow: spread = the triangles' radii
    ((20,), 0.652)
    """

    __repr__ = short_repr
    points: np.ndarray
    weights: np.ndarray
    final: np.ndarray
    vertices: np.ndarray
    triangles: np.ndarray
    spread: np.ndarray
    mass: float
    counts: tuple
    split: tuple
    previous: "TriangleRefinement | None" = None

    @property
    def error_bound(self):
        """sqrt(Σ_T w_T r_T²): bounds W_2 between the atoms at the end and the flow of ρ when the
        flow map F is affine on each triangle (then F(T) is the triangle F(v_0)F(v_1)F(v_2), within
        r_T of F(x_T)); the misrouted mass of triangles cut by a watershed dominates it."""
        return float(np.sqrt(np.sum(self.weights * self.spread ** 2)))


def refined_triangles(rho: Callable[[np.ndarray], np.ndarray],
                      flow: Callable[[np.ndarray, np.ndarray], np.ndarray], level: int = 4, rounds: int = 3,
                      jump: float = 0.05, depth: int = 1, order: int = 6) -> "TriangleRefinement":
    r"""Atoms of the density ρ on S^2 on spherical triangles, refined where a flow tears them apart.

    The icosahedral triangulation of ``level`` (20·4^level triangles) is refined ``rounds`` times.
    Each triangle T carries an atom of mass w_T at its ρ-barycentre x_T,

    .. math::

        w_T = \int_T \rho\, d\sigma, \qquad
        x_T = \frac{\int_T \rho(y)\, y\, d\sigma(y)}{\big|\int_T \rho(y)\, y\, d\sigma(y)\big|},

    the integrals mapping the flat triangle abc onto T by y = P/|P|, P = a + s(b - a) + t(c - a),
    dσ = det(a, b, c) |P|^{-3} ds dt, collapsed to the square (s, t) = (u(1 - v), uv) and summed by
    ``order`` × ``order`` Gauss–Legendre nodes (``triangle_integrals``). Each round calls
    ``flow(x, w)`` on the atoms (weights w_T) together with the triangles' vertices as tracers
    (weight 0), and splits into four (edge midpoints projected to the sphere), ``depth`` times over
    (4^depth children), every triangle whose image spreads over more than ``jump``:
    r_T = max_k d(F(v_k), F(x_T)) > jump, where a watershed between clusters crosses T (or F
    stretches it). The mass a cut triangle sends to the wrong side falls with its size h:
    W_2 ~ √h per watershed curve, a factor 2^(-depth/2) per round.

    Parameters
    ----------
    rho : callable
        Points (N, 3) -> non-negative densities against surface measure.
    flow : callable
        flow(x (N, 3), w (N,)) -> positions (N, 3) at the final time of the dynamics driven by
        Σ w_i δ_{x_i} (rows with w_i = 0 are carried as tracers); e.g. for the particle solver
        ``lambda x, w: particles.solve(model, x, [0, T], weights=w, energy=False).x[-1]``.
    level : int
        Base subdivision.
    rounds : int
        Number of refinements (``rounds + 1`` calls of ``flow``).
    jump : float
        Geodesic spread (radians) of a triangle's image beyond which it is split.
    depth : int
        Subdivisions of a split triangle per round.
    order : int
        Gauss–Legendre nodes per direction of the quadrature.

    Returns
    -------
    TriangleRefinement

    Raises
    ------
    TypeError
        If rho or flow is not callable.
    ValueError
        If a count or jump is invalid, or flow returns points of the wrong shape or off the sphere.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.sampling import refined_triangles
    >>> pole = np.array([0.0, 0.0, 1.0])
    >>> collapse = lambda x, w: np.where(x[:, 2:] > 0, pole, -pole)       # two clusters at the poles
    >>> r = refined_triangles(lambda x: np.ones(len(x)), collapse, level=0, rounds=1)
    >>> r.counts, r.split                   # the 10 triangles the equator (the watershed) crosses are split
    ((20, 50), (10,))
    """
    if not callable(rho) or not callable(flow):
        raise TypeError("rho and flow must be callables (see the docstring)")
    level = as_count(level, "level", minimum=0)
    rounds = as_count(rounds, "rounds", minimum=0)
    depth = as_count(depth, "depth")
    order = as_count(order, "order")
    _check_jump(jump)
    vertices, triangles = icosahedral_triangulation(level)
    midpoints = {}
    counts, split, previous = [], [], None
    for r in range(rounds + 1):
        mass, moment = triangle_integrals(rho, vertices, triangles, order)
        x = moment / np.linalg.norm(moment, axis=1, keepdims=True)
        total = mass.sum()
        w = mass / total
        y = _flowed(flow, np.vstack([x, vertices]), np.concatenate([w, np.zeros(len(vertices))]))
        final, corners = y[:len(x)], y[len(x):][triangles]
        spread = great_circle_rows(corners, final[:, None, :]).max(axis=1)
        counts.append(len(triangles))
        previous = TriangleRefinement(points=x, weights=w, final=final, vertices=vertices, triangles=triangles,
                                      spread=spread, mass=float(total), counts=tuple(counts), split=tuple(split),
                                      previous=previous)
        if r == rounds:
            return previous
        cut = spread > jump
        split.append(int(cut.sum()))
        for _ in range(depth):                  # the children come last: split them again
            vertices, triangles = _split_triangles(vertices, triangles, cut, midpoints)
            cut = np.arange(len(triangles)) >= len(triangles) - 4 * int(cut.sum())


def triangle_integrals(rho: Callable[[np.ndarray], np.ndarray], vertices: np.ndarray, triangles: np.ndarray,
                       order: int = 6) -> tuple[np.ndarray, np.ndarray]:
    r"""Mass and first moment of ρ over spherical triangles, by the collapsed Gauss–Legendre rule of
    ``refined_triangles``.

    .. math::

        \int_T \rho\, d\sigma, \qquad \int_T \rho(y)\, y\, d\sigma(y), \qquad
        d\sigma = \det(a, b, c)\, |P|^{-3}\, ds\, dt.

    Parameters
    ----------
    rho : callable
        Points (N, 3) -> non-negative densities.
    vertices : numpy.ndarray, shape (V, 3)
        Unit vectors.
    triangles : numpy.ndarray, shape (n, 3)
        Rows of vertex indices (a, b, c).
    order : int
        Gauss–Legendre nodes per direction.

    Returns
    -------
    mass : numpy.ndarray, shape (n,)
    moment : numpy.ndarray, shape (n, 3)

    Raises
    ------
    ValueError
        If rho returns negative values or the wrong shape.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.geometry import icosahedral_triangulation
    >>> from meanfield.sampling import triangle_integrals
    >>> v, tri = icosahedral_triangulation(1)
    >>> mass, moment = triangle_integrals(lambda x: np.ones(len(x)), v, tri)
    >>> round(float(mass.sum() / (4 * np.pi)), 10)              # the area of the sphere
    1.0
    """
    nodes, weights = np.polynomial.legendre.leggauss(order)
    nodes, weights = 0.5 * (nodes + 1.0), 0.5 * weights
    u, v = np.meshgrid(nodes, nodes, indexing="ij")
    s, t = (u * (1.0 - v)).ravel(), (u * v).ravel()
    jac = (np.outer(weights, weights) * u).ravel()          # ds dt = u du dv
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    det = np.abs(np.einsum("ij,ij->i", a, np.cross(b, c)))
    P = a[:, None] + s[None, :, None] * (b - a)[:, None] + t[None, :, None] * (c - a)[:, None]
    norm = np.linalg.norm(P, axis=2)
    y = P / norm[..., None]
    f = density_values(rho, y.reshape(-1, 3), "rho").reshape(norm.shape) * (jac / norm ** 3) * det[:, None]
    return f.sum(axis=1), np.einsum("nk,nkj->nj", f, y)


def _split_triangles(vertices, triangles, cut, midpoints):
    """Triangles with ``cut`` replaced by their four children (a, m_ab, m_ca), (b, m_bc, m_ab),
    (c, m_ca, m_bc), (m_ab, m_bc, m_ca); ``midpoints`` maps vertex pairs to the index of their
    projected midpoint across calls, so neighbours split later share it."""
    new = []
    n = len(vertices)

    def midpoint(i, j):
        nonlocal n
        key = (i, j) if i < j else (j, i)
        if key not in midpoints:
            midpoints[key] = n
            new.append(vertices[i] + vertices[j])
            n += 1
        return midpoints[key]

    children = []
    for a, b, c in triangles[cut].tolist():
        ab, bc, ca = midpoint(a, b), midpoint(b, c), midpoint(c, a)
        children += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
    if new:
        new = np.array(new)
        vertices = np.vstack([vertices, new / np.linalg.norm(new, axis=1, keepdims=True)])
    return vertices, np.vstack([triangles[~cut], np.array(children, dtype=triangles.dtype).reshape(-1, 3)])
