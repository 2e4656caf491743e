r"""Coarse-to-fine exact optimal transport on a sparse support, with a global optimality certificate.

Problem: for μ = Σ a_i δ_{x_i}, ν = Σ b_j δ_{y_j},

.. math::

    W_p^p(\mu, \nu) = \min_{\gamma \in \Pi(\mu, \nu)} \sum_{i,j} \gamma_{ij} c_{ij}, \qquad c_{ij} = d(x_i, y_j)^p
    \ \text{(geodesic)}.

The dense network simplex (``ot.emd2``) needs the n×m cost matrix; an optimal coupling, however,
has at most n + m - 1 atoms, all between nearby points. Following the multiscale strategy of
Schmitzer (SIAM J. Sci. Comput. 2016) and Oberman–Ruan (2015), it is found on a sparse set E of
candidate pairs:

1. Partition. The atoms of μ and ν go to their nearest of K ≈ (n + m)/16 centres (a seeded
   random subset of all atoms). The coarse measures put each cell's mass on its centre; their
   coupling Γ is computed the same way, recursively, down to a size ``ot.emd`` solves densely.
2. Candidates. E = {(i, j): x_i ∈ I, y_j ∈ J, Γ_IJ > 0} ∪ {(i, j): y_j among the 4 nearest atoms
   of ν to x_i, or x_i among the 4 nearest of μ to y_j}. E holds the support of the coupling
   Γ_IJ (a_i / A_I)(b_j / B_J), so the sparse problem is feasible.
3. Sparse solve. Restricted to E, the transport problem is solved exactly by POT's sparse
   network simplex (``ot.emd`` with a ``scipy.sparse.coo_array`` cost, POT >= 0.9.7), which also
   returns dual potentials u, v with u_i + v_j <= c_ij on E and equality on the plan's support.
4. Certificate. If u_i + v_j <= c_ij + τ holds for EVERY pair (τ = 1e-10 π^p; checked cell against
   cell, a pair of cells being skipped when the chord bound |x - y| >= |x - c_J| - r_J already
   proves it), (u, v - τ) is dual feasible for the full problem and the plan is optimal (LP duality):

   .. math::

       \sum_i a_i u_i + \sum_j b_j v_j - \tau \le W_p^p \le \sum_{i,j} \gamma_{ij} c_{ij}.

   Otherwise the violating pairs join E and step 3 is repeated (a few rounds in practice).

The value is exact up to round-off, like the dense network simplex: ``info["gap"]`` reports
the certified duality gap UB - LB on W_p^p. Memory is O(n + m + |E|), |E| ≈ 20 (n + m).
"""
import numpy as np
from numba import njit
from scipy.sparse import coo_array
from scipy.spatial import cKDTree

from .cost import geodesic_cost

__all__ = ["multiscale_wasserstein"]

CELL_SIZE = 16              # atoms (of μ and ν together) per coarse cell
NEIGHBOURS = 4              # nearest-neighbour candidates per atom, each way
DIRECT = 2_000_000          # n·m solved by the dense network simplex inside the recursion
MAX_ROUNDS = 50
TOLERANCE = 1e-10           # τ / π^p: dual feasibility accepted up to round-off (the simplex's
                            # potentials, sums along tree paths, carry errors ~1e-12 π^p)
MAX_ITER = 1_000_000_000    # network simplex iterations (POT's default 1e5 stops early)


def multiscale_wasserstein(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray, p: float,
                           seed: int | np.random.Generator | None = 0) -> tuple[float, dict]:
    r"""Exact W_p (radians) of Σ a_i δ_{x_i} and Σ b_j δ_{y_j} on a sparse support, certified optimal
    (steps 1–4 of the module docstring).

    .. math::

        W_p = \Big(\sum_{i,j} \gamma_{ij}\, d(x_i, y_j)^p\Big)^{1/p}, \qquad
        \text{gap} = \sum_{i,j} \gamma_{ij} c_{ij} - \Big(\sum_i a_i u_i + \sum_j b_j v_j - \tau\Big).

    Parameters
    ----------
    x : numpy.ndarray, shape (n, d)
        Unit vectors.
    a : numpy.ndarray, shape (n,)
        Non-negative weights (normalised here).
    y : numpy.ndarray, shape (m, d)
        Unit vectors.
    b : numpy.ndarray, shape (m,)
        Non-negative weights (normalised here).
    p : float
        Order p >= 1.
    seed : int, numpy.random.Generator or None
        Seed of the random coarse centres (the value does not depend on it).

    Returns
    -------
    value : float
        W_p for the certified optimal coupling γ.
    info : dict
        ``gap`` (certified UB - LB on W_p^p), ``rounds`` (sparse solves at the finest level),
        ``pairs`` (final size of E) and ``levels`` (depth of the coarse hierarchy).

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.transport.multiscale import multiscale_wasserstein
    >>> x, y = mf.uniform_sphere(60, 3, seed=0), mf.uniform_sphere(60, 3, seed=1)
    >>> w = np.full(60, 1 / 60)
    >>> value, info = multiscale_wasserstein(x, w, y, w, 2.0)
    >>> bool(np.isclose(value, mf.wasserstein(x, w, y, w, p=2, method="emd"))), info["gap"] < 1e-8
    (True, True)
    """
    keep_x, keep_y = a > 0, b > 0
    x, a, y, b = x[keep_x], a[keep_x] / a[keep_x].sum(), y[keep_y], b[keep_y] / b[keep_y].sum()
    stats = dict(levels=0, rounds=0, pairs=0)
    rows, cols, flow, cost, (u, v) = _sparse_optimum(x, a, y, b, p, np.random.default_rng(seed), stats, True)
    primal = float(flow @ cost)
    gap = max(primal - float(a @ u + b @ v - TOLERANCE * np.pi ** p), 0.0)
    return max(primal, 0.0) ** (1.0 / p), dict(gap=gap, rounds=stats["rounds"], pairs=int(stats["pairs"]),
                                               levels=stats["levels"])


def _sparse_optimum(x, a, y, b, p, rng, stats, certify):
    """An optimal coupling (rows, cols, masses, costs) and its potentials (u, v), on a sparse
    support; the coarse levels (certify=False) stop after the first sparse solve."""
    import ot   # imported where transport is computed: `import ot` loads every array backend it finds
    n, m = x.shape[0], y.shape[0]
    if not certify and n * m <= DIRECT:
        plan = ot.emd(a, b, geodesic_cost(x, y, p), numItermax=MAX_ITER)
        rows, cols = np.nonzero(plan)
        return rows, cols, plan[rows, cols], None, None
    stats["levels"] += 1
    centres = _centres(x, y, rng)
    tree = cKDTree(centres)
    lab_x, lab_y = tree.query(x)[1], tree.query(y)[1]
    K = centres.shape[0]
    A, B = np.bincount(lab_x, a, K), np.bincount(lab_y, b, K)
    I, J = np.flatnonzero(A > 0), np.flatnonzero(B > 0)
    coarse_rows, coarse_cols = _sparse_optimum(centres[I], A[I], centres[J], B[J], p, rng, stats, False)[:2]
    cells_x, cells_y = _Cells(x, lab_x, centres), _Cells(y, lab_y, centres)
    rows, cols = _block_pairs(cells_x.order, cells_x.start, cells_y.order, cells_y.start,
                              I[coarse_rows], J[coarse_cols])
    near_rows, near_cols = _neighbour_pairs(x, y)
    rows, cols = _union(n, m, (rows, near_rows), (cols, near_cols))
    for _ in range(MAX_ROUNDS):
        cost = _pair_cost_kernel(x, y, rows, cols, float(p))
        plan, log = ot.emd(a, b, coo_array((cost, (rows, cols)), shape=(n, m)), numItermax=MAX_ITER, log=True)
        if log["warning"] is not None:
            raise RuntimeError(f"multiscale transport: the sparse network simplex stopped: {log['warning']}")
        if not certify:
            return plan.row, plan.col, plan.data, None, None
        stats["rounds"] += 1
        stats["pairs"] = rows.size
        u, v = np.asarray(log["u"], float), np.asarray(log["v"], float)
        bad_rows, bad_cols = _violations(x, y, u, v, cells_x, cells_y, centres, p)
        if bad_rows.size == 0:
            support_rows, support_cols = plan.row.astype(np.int64), plan.col.astype(np.int64)
            return (support_rows, support_cols, plan.data,
                    _pair_cost_kernel(x, y, support_rows, support_cols, float(p)), (u, v))
        size = rows.size
        rows, cols = _union(n, m, (rows, bad_rows), (cols, bad_cols))
        if rows.size == size:
            raise RuntimeError("multiscale transport: the network simplex potentials violate u + v <= c "
                               "on its own pairs beyond round-off")
    raise RuntimeError(f"multiscale transport: no certified optimum after {MAX_ROUNDS} rounds")


def _centres(x, y, rng):
    atoms = np.concatenate([x, y])
    K = max(1, atoms.shape[0] // CELL_SIZE)
    return atoms[rng.choice(atoms.shape[0], K, replace=False)]


class _Cells:
    """Atoms grouped by cell: ``order`` lists them cell by cell, cell k is order[start[k]:start[k+1]];
    ``radius`` bounds the chord from the centre to any atom of the cell."""

    def __init__(self, points, labels, centres):
        K = centres.shape[0]
        self.order = np.argsort(labels, kind="stable")
        self.start = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=K))])
        chord = np.linalg.norm(points - centres[labels], axis=1)
        self.radius = np.zeros(K)
        np.maximum.at(self.radius, labels, chord)


def _neighbour_pairs(x, y):
    k_y, k_x = min(NEIGHBOURS, y.shape[0]), min(NEIGHBOURS, x.shape[0])
    near_y = cKDTree(y).query(x, k_y)[1].reshape(x.shape[0], k_y)
    near_x = cKDTree(x).query(y, k_x)[1].reshape(y.shape[0], k_x)
    rows = np.concatenate([np.repeat(np.arange(x.shape[0]), k_y), near_x.ravel()])
    cols = np.concatenate([near_y.ravel(), np.repeat(np.arange(y.shape[0]), k_x)])
    return rows, cols


def _union(n, m, rows, cols):
    """The pairs of all the lists, once each, sorted row-major."""
    key = np.sort(np.concatenate(rows).astype(np.int64) * m + np.concatenate(cols))
    key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    return key // m, key % m


@njit(cache=True)
def _geodesic(x, i, y, j):
    """d = 2 atan2(|x_i - y_j|, |x_i + y_j|)."""
    minus = 0.0
    plus = 0.0
    for k in range(x.shape[1]):
        minus += (x[i, k] - y[j, k]) ** 2
        plus += (x[i, k] + y[j, k]) ** 2
    return 2.0 * np.arctan2(np.sqrt(minus), np.sqrt(plus))


@njit(cache=True)
def _pair_cost_kernel(x, y, rows, cols, p):
    out = np.empty(rows.size)
    for e in range(rows.size):
        out[e] = _geodesic(x, rows[e], y, cols[e]) ** p
    return out


@njit(cache=True)
def _block_pairs(order_x, start_x, order_y, start_y, I, J):
    """All (i, j) with x_i in cell I_k and y_j in cell J_k, for each k."""
    total = 0
    for k in range(I.size):
        total += (start_x[I[k] + 1] - start_x[I[k]]) * (start_y[J[k] + 1] - start_y[J[k]])
    rows = np.empty(total, np.int64)
    cols = np.empty(total, np.int64)
    e = 0
    for k in range(I.size):
        for s in range(start_x[I[k]], start_x[I[k] + 1]):
            for t in range(start_y[J[k]], start_y[J[k] + 1]):
                rows[e] = order_x[s]
                cols[e] = order_y[t]
                e += 1
    return rows, cols


def _violations(x, y, u, v, cells_x, cells_y, centres, p):
    """All pairs with u_i + v_j > c_ij + τ. As θ >= 2 asin(chord/2), only cells of ν within the
    chord reach of cell I (from max u over I and max v overall) can hold one."""
    K = centres.shape[0]
    u_max, v_max = np.full(K, -np.inf), np.full(K, -np.inf)
    np.maximum.at(u_max, np.repeat(np.arange(K), np.diff(cells_x.start)), u[cells_x.order])
    np.maximum.at(v_max, np.repeat(np.arange(K), np.diff(cells_y.start)), v[cells_y.order])
    occupied_x, occupied_y = np.flatnonzero(np.isfinite(u_max)), np.flatnonzero(np.isfinite(v_max))
    theta = np.minimum(np.maximum(u_max[occupied_x] + v_max[occupied_y].max(), 0.0) ** (1.0 / p) + 1e-9, np.pi)
    reach = 2.0 * np.sin(0.5 * theta) + cells_x.radius[occupied_x] + cells_y.radius[occupied_y].max() + 1e-12
    lists = cKDTree(centres[occupied_y]).query_ball_point(centres[occupied_x], reach)
    counts = np.array([len(cells) for cells in lists], np.int64)
    if counts.sum() == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    pair_start = np.concatenate([[0], np.cumsum(counts)])
    pair_cells = occupied_y[np.concatenate([np.asarray(cells, np.int64) for cells in lists])]
    return _cell_violations(x, y, u, v, float(p), TOLERANCE * np.pi ** p, cells_x.order, cells_x.start, occupied_x,
                            cells_y.order, cells_y.start, centres, cells_y.radius, v_max, pair_start, pair_cells)


@njit(cache=True)
def _cell_violations(x, y, u, v, p, tol, order_x, start_x, cells, order_y, start_y, centres, radius_y,
                     v_max, pair_start, pair_cells):
    rows = []
    cols = []
    for k in range(cells.size):
        I = cells[k]
        for s in range(start_x[I], start_x[I + 1]):
            i = order_x[s]
            for q in range(pair_start[k], pair_start[k + 1]):
                J = pair_cells[q]
                chord = 0.0
                for e in range(x.shape[1]):
                    chord += (x[i, e] - centres[J, e]) ** 2
                gap = max(np.sqrt(chord) - radius_y[J], 0.0)
                if (2.0 * np.arcsin(min(0.5 * gap, 1.0))) ** p + tol >= u[i] + v_max[J]:
                    continue
                for t in range(start_y[J], start_y[J + 1]):
                    j = order_y[t]
                    if u[i] + v[j] > tol and _geodesic(x, i, y, j) ** p + tol < u[i] + v[j]:
                        rows.append(i)
                        cols.append(j)
    out_rows = np.empty(len(rows), np.int64)
    out_cols = np.empty(len(cols), np.int64)
    for k in range(len(rows)):
        out_rows[k] = rows[k]
        out_cols[k] = cols[k]
    return out_rows, out_cols
