r"""Clusters of tokens and of densities on the sphere: the one definition the package uses.

**Definition.** At level ℓ and mass m, a *cluster* of a probability measure μ on S^{d-1} is a
connected part, of mass at least m, of the region where μ is denser than ℓ times the uniform
density 1/|S^{d-1}|.

- For a grid measure (``density_clusters``): the cells with ρ_i >= ℓ/|S^{d-1}|, neighbouring
  cells (centres within 1.5 mean cell widths) joined.
- For n tokens with weights w_i (``particle_clusters``): single linkage at the geodesic distance
  (``linkage_scale``), the spacing of n points spread at density ℓ/|S^{d-1}|: a gap emptier than
  ℓ times uniform separates two clusters,

  .. math::

      r(\ell, n) = \Big(\frac{|S^{d-1}|}{\ell n}\Big)^{1/(d-1)}.

Defaults: ℓ = ``LEVEL`` = 0.05 and m = ``MIN_MASS`` = 0.01 (``meanfield compare``); the
metastability experiment counts formed clusters with ℓ = 2 (denser than twice uniform, so
nothing counts during the linear phase); the plots ring clusters at ℓ = 20. All rest on
``cluster_labels`` / ``cluster_count``: connected components of the graph joining points at
geodesic distance < ``tol`` (single linkage), found with a k-d tree on the chord distance
2 sin(tol/2).

**Clusters below the grid.** A finite-volume scheme that carries clusters (the upwind fluxes)
stores a cluster much narrower than a cell as its mass split over two or three cells, the split
encoding where it sits inside them (the first moment is what the upwind flux transports). The
cell measure Σ m_i δ_{c_i} then stays about half a cell away from the cluster in W2, however
accurately the scheme moves it. ``point_mass_measure`` reads each such *unresolved* cluster (a
cluster whose mass-weighted rms radius about its centre is at most ``width`` mean cell widths) as
one point mass at its centre, and leaves every other cell as it is.
"""
import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from numba import njit, prange
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .checks import as_count, as_float_array, as_points, as_positive, as_probability
from .geometry import great_circle_rows
from .measures import as_measure, sphere_area
from .summaries import short_repr

__all__ = ["LEVEL", "MIN_MASS", "linkage_scale", "particle_clusters", "density_clusters", "point_mass_measure",
           "PointMassMeasure", "cluster_centres", "cluster_labels",
           "cluster_count", "pair_fraction", "gram_rank", "merge_statistics", "inner_product_histogram"]

LEVEL = 0.05       # fraction of the uniform density below which a region is empty
MIN_MASS = 0.01    # smallest mass counted as a cluster


def linkage_scale(n: int, d: int, level: float = LEVEL) -> float:
    r"""The spacing of n points spread at density level/|S^{d-1}|: the single-linkage distance of
    ``particle_clusters``.

    .. math::

        r = \Big(\frac{|S^{d-1}|}{\ell\, n}\Big)^{1/(d-1)}.

    Parameters
    ----------
    n : int
        Number of tokens.
    d : int
        Ambient dimension (the tokens live on S^{d-1}), d >= 2.
    level : float
        Density threshold ℓ as a multiple of the uniform density.

    Returns
    -------
    float
        r, a geodesic distance (radians).

    Raises
    ------
    ValueError
        If n, d or level is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.clusters import linkage_scale
    >>> bool(np.isclose(linkage_scale(1000, 2, level=0.05), 2 * np.pi / 50))
    True
    """
    n = as_count(n, "n")
    d = as_count(d, "d", minimum=2)
    level = as_positive(level, "level")
    return float((sphere_area(d) / (level * n)) ** (1.0 / (d - 1)))


def particle_clusters(x: ArrayLike, weights: ArrayLike | None = None, *, level: float = LEVEL,
                      min_mass: float = MIN_MASS) -> int | np.ndarray:
    r"""Number of clusters of tokens (see the module docstring for the definition): single linkage at
    ``linkage_scale(n, d, level)``, groups of mass >= m.

    .. math::

        \#\{\text{components of } \{(i, j): d(x_i, x_j) < r(\ell, n)\} \text{ of mass} \ge m\}.

    Parameters
    ----------
    x : array_like, shape (n, d) or (B, n, d)
        Tokens on S^{d-1}, or a batch of B systems.
    weights : array_like, shape (n,), optional
        Token masses (default 1/n).
    level : float
        The density level ℓ (multiple of uniform).
    min_mass : float
        The smallest cluster mass m, in [0, 1].

    Returns
    -------
    int or numpy.ndarray of shape (B,)
        Cluster count.

    Raises
    ------
    ValueError
        If x is not an array of unit vectors, or level or min_mass is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.clusters import particle_clusters
    >>> theta = np.concatenate([0.01 * np.arange(50), 3.0 + 0.01 * np.arange(50)])
    >>> particle_clusters(mf.circle_points(theta))
    2
    """
    x = as_points(x, "x", ndim=(2, 3))
    tol = linkage_scale(x.shape[-2], x.shape[-1], level)
    return cluster_count(x, tol=tol, weights=weights, min_mass=min_mass)


def density_clusters(sol: object, k: int = -1, *, level: float = LEVEL, min_mass: float = MIN_MASS) -> int:
    r"""Number of clusters of a grid density (see the module docstring for the definition).

    .. math::

        \#\{\text{components } C \text{ of } \{\rho_i \ge \ell/|S^{d-1}|\}:
        \textstyle\sum_{i \in C} \rho_i |C_i| \ge m\},

    cells joined within 1.5 mean cell widths (|S^{d-1}|/N)^{1/(d-1)}, masses relative to the total.

    Parameters
    ----------
    sol : DensitySolution
        Any object with ``points`` (N, d), ``areas`` (N,) and ``rho`` (m, N), or a solution on changing
        meshes (``cells`` per output, ``snapshot(k)``; ``meanfield.solvers.adaptive``).
    k : int
        Output index.
    level : float
        The density level ℓ (multiple of uniform).
    min_mass : float
        The smallest cluster mass m, in [0, 1].

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If level or min_mass is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> import meanfield as mf
    >>> centres = mf.circle_points(2 * np.pi * (np.arange(64) + 0.5) / 64)
    >>> rho = np.full(64, 0.001)
    >>> rho[[10, 11, 40]] = [4.0, 4.0, 2.0]                              # two clusters on a 64-cell circle
    >>> sol = SimpleNamespace(points=centres, areas=np.full(64, 2 * np.pi / 64), rho=rho[None])
    >>> from meanfield.clusters import density_clusters
    >>> density_clusters(sol)
    2
    """
    min_mass = _fraction_of_mass(min_mass)
    sol, k = _own_mesh(sol, k)
    mass, dense, labels, _ = _dense_components(sol, k, level)
    return int(np.sum(np.bincount(labels, weights=mass[dense]) >= min_mass)) if dense.any() else 0


def _own_mesh(sol, k):
    """(sol, k), or for a solution on changing meshes (``cells``, ``meanfield.solvers.adaptive``) output k
    on its own mesh (``snapshot(k)``, 0)."""
    if getattr(sol, "cells", None) is not None:
        return sol.snapshot(k), 0
    return sol, k


def _dense_components(sol, k, level):
    """Cell masses (normalised), the mask of cells with ρ_i >= level/|S^{d-1}|, the labels of
    their components (cells joined within 1.5 mean cell widths) and the mean cell width."""
    points, areas, rho = sol.points, sol.areas, np.clip(sol.rho[k], 0.0, None)
    d = points.shape[1]
    dense = rho >= as_positive(level, "level") / sphere_area(d)
    mass = rho * areas / np.sum(rho * areas)
    width = (sphere_area(d) / points.shape[0]) ** (1.0 / (d - 1))
    labels = cluster_labels(points[dense], tol=1.5 * width) if dense.any() else np.zeros(0, dtype=int)
    return mass, dense, labels, width


@dataclass(frozen=True, eq=False)
class PointMassMeasure:
    r"""Result of ``point_mass_measure``: a cell measure with its unresolved clusters read as point masses.

    .. math::

        W_2(\text{cell measure}, \text{this measure}) \le \text{moved} = \Big(\sum_k M_k r_k^2\Big)^{1/2}.

    Parameters
    ----------
    points : numpy.ndarray, shape (n, d)
        Atoms of the measure.
    weights : numpy.ndarray, shape (n,)
        Their masses (sum 1).
    centres : numpy.ndarray, shape (K, d)
        The unresolved clusters' centres.
    masses : numpy.ndarray, shape (K,)
        Their masses M_k.
    radii : numpy.ndarray, shape (K,)
        Their rms radii r_k about the centres.
    cells : int
        The number of cells they replace.
    moved : float
        The cost of the plan that collapses each cluster onto its centre.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> import meanfield as mf
    >>> centres = mf.circle_points(2 * np.pi * (np.arange(64) + 0.5) / 64)
    >>> rho = np.full(64, 0.001)
    >>> rho[[10, 11, 40]] = [4.0, 4.0, 2.0]                              # two clusters on a 64-cell circle
    >>> sol = SimpleNamespace(points=centres, areas=np.full(64, 2 * np.pi / 64), rho=rho[None])
    >>> from meanfield.clusters import point_mass_measure
    >>> measure = point_mass_measure(sol)
    >>> measure.cells, measure.masses.round(3)
    (3, array([0.199, 0.795]))
    """

    __repr__ = short_repr
    points: np.ndarray
    weights: np.ndarray
    centres: np.ndarray
    masses: np.ndarray
    radii: np.ndarray
    cells: int
    moved: float


def point_mass_measure(sol: object, k: int = -1, *, level: float = LEVEL, width: float = 2.0) -> "PointMassMeasure":
    r"""The cell measure of a grid solution with every unresolved cluster read as one point mass.

    A cluster is a component of the cells with ρ_i >= ``level``/|S^{d-1}| (cells joined within
    1.5 mean cell widths h = (|S^{d-1}|/N)^{1/(d-1)}). Its centre b and radius r are

    .. math::

        b = \frac{\sum_i m_i c_i}{|\sum_i m_i c_i|}, \qquad r = \Big(\frac{1}{M} \sum_i m_i\, d(c_i, b)^2\Big)^{1/2};

    it is unresolved when r <= ``width``·h, and is then replaced by M δ_b. Resolved clusters and the
    cells outside clusters keep their atoms m_i δ_{c_i}.

    Parameters
    ----------
    sol : DensitySolution
        Any object with ``points`` (N, d) cell centres on S^{d-1}, ``areas`` (N,) and ``rho`` (m, N), or
        a solution on changing meshes (``cells`` per output, ``snapshot(k)``).
    k : int
        Output index.
    level : float
        Density level (multiple of uniform) above which a cell belongs to a cluster.
    width : float
        Largest rms radius, in mean cell widths, of a cluster read as a point mass.

    Returns
    -------
    PointMassMeasure

    Raises
    ------
    ValueError
        If level or width is not positive.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> import meanfield as mf
    >>> centres = mf.circle_points(2 * np.pi * (np.arange(64) + 0.5) / 64)
    >>> rho = np.full(64, 0.001)
    >>> rho[[10, 11, 40]] = [4.0, 4.0, 2.0]                              # two clusters on a 64-cell circle
    >>> sol = SimpleNamespace(points=centres, areas=np.full(64, 2 * np.pi / 64), rho=rho[None])
    >>> from meanfield.clusters import point_mass_measure
    >>> measure = point_mass_measure(sol)
    >>> len(measure.points), round(measure.moved, 4)         # 61 cells and 2 point masses
    (63, 0.0438)
    """
    width = as_positive(width, "width")
    sol, k = _own_mesh(sol, k)
    mass, dense, labels, h = _dense_components(sol, k, level)
    cells = np.flatnonzero(dense)
    points = sol.points
    total, centres, square = _group_moments(points[cells], mass[cells], labels)
    radii = np.where(np.isfinite(square), np.sqrt(square / total), np.inf)
    point = radii <= width * h
    keep = np.ones(points.shape[0], dtype=bool)
    keep[cells[point[labels]]] = False
    return PointMassMeasure(points=np.concatenate([points[keep], centres[point]]),
                            weights=np.concatenate([mass[keep], total[point]]), centres=centres[point],
                            masses=total[point], radii=radii[point], cells=int(np.sum(~keep)),
                            moved=float(np.sqrt(np.sum(square[point]))))


def cluster_centres(x: ArrayLike, weights: ArrayLike | None = None, *, tol: float = 1e-2,
                    min_mass: float = MIN_MASS) -> tuple[np.ndarray, np.ndarray]:
    r"""Centres and masses of the single-linkage clusters of the tokens at geodesic scale ``tol`` whose
    mass is at least ``min_mass``, in the order of ``cluster_labels``.

    .. math::

        b_C = \frac{\sum_{i \in C} w_i x_i}{|\sum_{i \in C} w_i x_i|}, \qquad M_C = \sum_{i \in C} w_i.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors.
    weights : array_like, shape (n,), optional
        Masses (default 1/n; normalised).
    tol : float
        Linkage scale (radians).
    min_mass : float
        Smallest mass kept, in [0, 1].

    Returns
    -------
    centres : numpy.ndarray, shape (K, d)
    masses : numpy.ndarray, shape (K,)

    Raises
    ------
    ValueError
        If x, the weights, tol or min_mass are invalid.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.clusters import cluster_centres
    >>> x = mf.circle_points(np.array([-0.001, 0.001, 2.0]))
    >>> centres, masses = cluster_centres(x)
    >>> order = np.argsort(masses)
    >>> centres[order].round(6), masses[order].round(4)
    (array([[-0.416147,  0.909297],
           [ 1.      ,  0.      ]]), array([0.3333, 0.6667]))
    """
    x, w = as_measure(x, weights)
    min_mass = _fraction_of_mass(min_mass)
    total, centres, _ = _group_moments(x, w, cluster_labels(x, tol))
    keep = total >= min_mass
    return centres[keep], total[keep]


def _group_moments(x, w, labels):
    """Per group of ``labels``: mass M, centre b = Σ w_i x_i / |Σ w_i x_i|, and Σ w_i d(x_i, b)²
    (inf for a group whose weighted mean is 0, e.g. one around the whole sphere: it has no centre)."""
    total = np.bincount(labels, weights=w, minlength=labels.max(initial=-1) + 1)
    sums = np.stack([np.bincount(labels, weights=w * x[:, j], minlength=total.size) for j in range(x.shape[1])],
                    axis=1)
    norm = np.linalg.norm(sums, axis=1, keepdims=True)
    centres = sums / np.where(norm > 0, norm, 1.0)
    square = np.bincount(labels, weights=w * great_circle_rows(x, centres[labels]) ** 2, minlength=total.size)
    return total, centres, np.where(norm[:, 0] > 0, square, np.inf)


def cluster_labels(x: ArrayLike, tol: float = 1e-2) -> np.ndarray:
    r"""Labels 0..k-1 of the single-linkage clusters of x at geodesic scale ``tol``: the connected
    components of the graph joining points within tol, found on the chord distance.

    .. math::

        i \sim j \iff |x_i - x_j| \le 2 \sin(\mathrm{tol}/2).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors.
    tol : float
        Linkage scale (radians).

    Returns
    -------
    numpy.ndarray of int, shape (n,)

    Raises
    ------
    ValueError
        If x is not an array of unit vectors or tol <= 0.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.clusters import cluster_labels
    >>> labels = cluster_labels(mf.circle_points(np.array([0.0, 0.005, 1.0, 1.005, 3.0])))
    >>> sorted(set(labels.tolist())), bool(labels[0] == labels[1] != labels[2] == labels[3] != labels[4])
    ([0, 1, 2], True)
    """
    x = as_points(x, "x")
    tol = as_positive(tol, "tol")
    return _single_linkage(x, 2 * np.sin(min(tol, np.pi) / 2))


def _single_linkage(x, r):
    """Components of the graph joining points at chord distance <= r, in O(n log n) even for
    tight clusters: points sharing a box of side r/sqrt(d) are joined outright (the box has
    diameter r), and two boxes are joined if some pair of their points is within r, which can
    only happen when their representatives are within 3r."""
    d = x.shape[1]
    with np.errstate(over="ignore"):
        scaled = np.floor(x / (r / np.sqrt(d)))
    if not np.all(np.abs(scaled) < 2.0 ** 62):      # r below ~1e-18: box indices overflow int64
        return _tree_linkage(x, r)
    keys = scaled.astype(np.int64)
    _, first, box = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    box = box.ravel()
    reps = x[first]
    size = np.bincount(box)
    cand = cKDTree(reps).query_pairs(3 * r, output_type="ndarray")
    near = np.linalg.norm(reps[cand[:, 0]] - reps[cand[:, 1]], axis=1) <= r
    linked = [cand[near]]
    members = None
    for a, b in cand[~near & ((size[cand[:, 0]] > 1) | (size[cand[:, 1]] > 1))]:
        if members is None:
            order = np.argsort(box, kind="stable")
            members = np.split(order, np.cumsum(size)[:-1])
        dist, _ = cKDTree(x[members[b]]).query(x[members[a]], k=1, distance_upper_bound=r)
        if np.any(np.isfinite(dist)):
            linked.append(np.array([[a, b]]))
    edges = np.concatenate(linked)
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(len(first),) * 2)
    return connected_components(graph, directed=False)[1][box]


def _tree_linkage(x, r):
    """Components of the graph joining points at chord distance <= r, by a k-d tree alone
    (for scales so small that the boxes of ``_single_linkage`` cannot be indexed)."""
    pairs = cKDTree(x).query_pairs(r, output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(x.shape[0],) * 2)
    return connected_components(graph, directed=False)[1]


def cluster_count(x: ArrayLike, tol: float = 1e-2, weights: ArrayLike | None = None,
                  min_mass: float = 0.0) -> int | np.ndarray:
    r"""Number of single-linkage clusters of x (``cluster_labels``) whose mass is at least ``min_mass``
    under the probability weights, or one count per system of a batch.

    .. math::

        \#\{C: \textstyle\sum_{i \in C} w_i \ge m\}.

    Parameters
    ----------
    x : array_like, shape (n, d) or (B, n, d)
        Unit vectors.
    tol : float
        Linkage scale (radians).
    weights : array_like, shape (n,), optional
        Masses (default 1/n; given weights are divided by their total).
    min_mass : float
        Smallest mass counted, in [0, 1].

    Returns
    -------
    int or numpy.ndarray of shape (B,)

    Raises
    ------
    ValueError
        If x, tol, the weights or min_mass are invalid.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.clusters import cluster_count
    >>> x = mf.circle_points(np.array([0.0, 0.005, 1.0, 1.005, 3.0]))
    >>> cluster_count(x), cluster_count(x, min_mass=0.3)
    (3, 2)
    """
    x = as_points(x, "x", ndim=(2, 3))
    min_mass = _fraction_of_mass(min_mass)
    if x.ndim == 3:
        return np.array([cluster_count(xb, tol, weights, min_mass) for xb in x])
    n = x.shape[0]
    w = np.full(n, 1.0 / n) if weights is None else as_probability(weights, n)
    labels = cluster_labels(x, tol)
    mass = np.bincount(labels, weights=w)
    return int(np.sum(mass >= min_mass)) if min_mass > 0 else int(mass.size)


def _fraction_of_mass(min_mass):
    if isinstance(min_mass, bool) or not isinstance(min_mass, numbers.Real) or not 0 <= min_mass <= 1:
        raise ValueError(f"min_mass must be a number in [0, 1] (a fraction of the total mass); got {min_mass!r}")
    return float(min_mass)


def _threshold(threshold):
    t = float(as_float_array(threshold, "threshold"))
    if not -1.0 <= t < 1.0:
        raise ValueError(f"threshold must lie in [-1, 1) (inner products of unit vectors); got {t}")
    return t


@njit(parallel=True, cache=True, fastmath=True)
def _thresholded_gram(x, pair_threshold, rank_threshold, above, adjacency):
    """One pass over the pairs of each system b of x (B, n, d): above[b] = #{i != j: <x_bi, x_bj> >
    pair_threshold} and adjacency[b] = 1{<x_bi, x_bj> > rank_threshold} (diagonal included).
    fastmath lets the dot products vectorise (4× at d = 128); a reassociated sum moves by ~d ε,
    which flips a comparison only for a pair within ~1e-14 of a threshold."""
    n, d = x.shape[1], x.shape[2]
    for b in prange(x.shape[0]):
        count = 0
        for i in range(n):
            for j in range(i, n):
                dot = 0.0
                for k in range(d):
                    dot += x[b, i, k] * x[b, j, k]
                if j > i and dot > pair_threshold:
                    count += 2
                adjacency[b, i, j] = adjacency[b, j, i] = dot > rank_threshold
        above[b] = count


def _pair_pass(x, pair_threshold, rank_threshold):
    """(above (B,), adjacency (B, n, n), single) for x (n, d) or (B, n, d) (``_thresholded_gram``)."""
    x = as_points(x, "x", ndim=(2, 3))
    batch = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    n = batch.shape[1]
    above = np.empty(batch.shape[0], dtype=np.int64)
    adjacency = np.empty((batch.shape[0], n, n), dtype=np.bool_)
    _thresholded_gram(batch, _threshold(pair_threshold), _threshold(rank_threshold), above, adjacency)
    return above, adjacency, x.ndim == 2


def _fraction(above, n):
    if n < 2:
        raise ValueError("x needs at least two points per system for pairs")
    return float(above.sum() / (above.size * n * (n - 1)))


def _rank(adjacency):
    """Rank of each symmetric 0/1 matrix: the number of distinct rows where those partition the indices
    (bit-packed rows sorted, n <= 64), else ``numpy.linalg.matrix_rank`` (eigenvalues: symmetric)."""
    n = adjacency.shape[-1]
    ranks = np.full(adjacency.shape[0], -1, dtype=np.int64)
    if n <= 64:
        packed = np.zeros(adjacency.shape[:2] + (8,), dtype=np.uint8)
        packed[..., :(n + 7) // 8] = np.packbits(adjacency, axis=-1, bitorder="little")
        rows = np.sort(packed.view(np.uint64)[..., 0], axis=-1)
        first = np.ones(rows.shape, dtype=bool)
        first[:, 1:] = rows[:, 1:] != rows[:, :-1]
        covered = np.sum(np.where(first, np.bitwise_count(rows), 0), axis=-1)
        partition = covered == n          # distinct rows, each holding its own index, cover once
        ranks[partition] = np.sum(first[partition], axis=-1)
    rest = ranks < 0
    if rest.any():
        ranks[rest] = np.linalg.matrix_rank(adjacency[rest].astype(np.float64), hermitian=True)
    return ranks


def pair_fraction(x: ArrayLike, threshold: float = 0.999) -> float:
    r"""Fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ > ``threshold``, over all the systems.

    .. math::

        \frac{1}{B n (n-1)} \sum_b \sum_{i \ne j} \mathbf 1\{\langle x_{bi}, x_{bj}\rangle > \text{threshold}\}:

    the estimated probability that a given pair of tokens has merged (the statistic of the paper's
    phase diagrams, threshold 0.999). It is 1 exactly when every system is one cluster at that
    scale, but it is not P(one cluster).

    Parameters
    ----------
    x : array_like, shape (n, d) or (B, n, d)
        Unit vectors, n >= 2.
    threshold : float
        In [-1, 1).

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        If x is invalid or has fewer than two points, or threshold is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.clusters import pair_fraction
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> round(pair_fraction(x), 4)                   # 2 of the 6 ordered pairs
    0.3333
    """
    above, adjacency, _ = _pair_pass(x, threshold, threshold)
    return _fraction(above, adjacency.shape[-1])


def gram_rank(x: ArrayLike, threshold: float = 0.9999) -> int | np.ndarray:
    r"""Rank of the 0/1 matrix of inner products above ``threshold`` (diagonal included), per system.

    .. math::

        \operatorname{rank}\big(\mathbf 1\{\langle x_i, x_j\rangle > \text{threshold}\}\big)_{ij}.

    When the tokens form k tight clusters (inner products > threshold within, below it across) the
    matrix is block diagonal with k all-ones blocks, so the rank is k: the cluster count the paper
    logs (its median over the batch), threshold 0.9999. The rank is that of the distinct rows. When
    those are pairwise disjoint (the relation is a partition, the usual case) they are independent
    and the rank is their number, found by sorting bit-packed rows (n <= 64); other systems go to an
    SVD (``numpy.linalg.matrix_rank``).

    Parameters
    ----------
    x : array_like, shape (n, d) or (B, n, d)
        Unit vectors.
    threshold : float
        In [-1, 1).

    Returns
    -------
    int (one system) or numpy.ndarray of int, shape (B,)

    Raises
    ------
    ValueError
        If x is invalid or threshold is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.clusters import gram_rank
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> gram_rank(x), gram_rank(np.stack([x, x[[0, 0, 0]]]))
    (2, array([2, 1]))
    """
    _, adjacency, single = _pair_pass(x, threshold, threshold)
    ranks = _rank(adjacency)
    return int(ranks[0]) if single else ranks


def merge_statistics(x: ArrayLike, pair_threshold: float = 0.999,
                     rank_threshold: float = 0.9999) -> tuple[float, int | np.ndarray]:
    r"""``pair_fraction`` and ``gram_rank`` from one pass over the pairs: the two statistics of the
    paper's phase diagrams, at every output time of a run (e.g. as ``particles.solve(..., observe=...)``).

    .. math::

        \Big(\frac{1}{Bn(n-1)} \sum_b \sum_{i \ne j} \mathbf 1\{\langle x_{bi}, x_{bj}\rangle > p\},\
        \operatorname{rank} \mathbf 1\{\langle x_{bi}, x_{bj}\rangle > r\}\Big).

    Parameters
    ----------
    x : array_like, shape (n, d) or (B, n, d)
        Unit vectors, n >= 2.
    pair_threshold : float
        Threshold p of the pair fraction.
    rank_threshold : float
        Threshold r of the rank.

    Returns
    -------
    fraction : float
    rank : int or numpy.ndarray of shape (B,)

    Raises
    ------
    ValueError
        If x is invalid or a threshold is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.clusters import merge_statistics
    >>> fraction, rank = merge_statistics(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> round(fraction, 4), rank
    (0.3333, 2)
    """
    above, adjacency, single = _pair_pass(x, pair_threshold, rank_threshold)
    ranks = _rank(adjacency)
    return _fraction(above, adjacency.shape[-1]), (int(ranks[0]) if single else ranks)


def inner_product_histogram(x: ArrayLike, bins: int = 50, range: tuple[float, float] = (-1.0, 1.0),
                            max_pairs: int = 2_000_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Histogram (density) of the pairwise inner products ⟨x_i, x_j⟩, i < j.

    .. math::

        \{\langle x_i, x_j\rangle : i < j\}, \qquad \text{density: } \textstyle\sum_k h_k \Delta_k = 1.

    Above ``max_pairs`` pairs a uniform random subset of pairs is used (seeded).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors, n >= 2.
    bins : int
        Number of bins.
    range : tuple of float
        Range of the bins.
    max_pairs : int
        Largest number of pairs used.
    seed : int
        Seed of the subset.

    Returns
    -------
    density : numpy.ndarray, shape (bins,)
    edges : numpy.ndarray, shape (bins + 1,)

    Raises
    ------
    ValueError
        If x is invalid or has fewer than two points.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.clusters import inner_product_histogram
    >>> density, edges = inner_product_histogram(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), bins=2)
    >>> density, edges
    (array([0., 1.]), array([-1.,  0.,  1.]))
    """
    x = as_points(x, "x")
    bins = as_count(bins, "bins")
    n = x.shape[0]
    if n < 2:
        raise ValueError("x needs at least two points for pairwise inner products")
    total = n * (n - 1) // 2
    if total <= max_pairs:
        i, j = np.triu_indices(n, k=1)
    else:
        rng = np.random.default_rng(seed)
        i = rng.integers(0, n, max_pairs)
        j = (i + rng.integers(1, n, max_pairs)) % n
    dots = np.clip(np.einsum("kd,kd->k", x[i], x[j]), -1.0, 1.0)
    return np.histogram(dots, bins=bins, range=range, density=True)
