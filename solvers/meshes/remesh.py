"""Adaptive spherical Voronoi meshes from the nested icosahedral vertices, and the conservative
transfer of cell masses between two such meshes.

**Generators.**  The vertices of the icosahedron subdivided k times are the first n_k = 10·4^k + 2
vertices of the one subdivided k + 1 times, so every vertex v of the finest level L has a *birth
level* b(v) = min{k : v is a vertex of level k}.  An adaptive generator set keeps every vertex of
the base level L_0 and a vertex born at level k > L_0 where the wanted level is at least k: with
ℓ_i the wanted level of cell i of the current mesh, radius R_i (the largest distance from c_i to
its Voronoi vertices) and h_k = sqrt(4π/n_k) the spacing of level k,

    v is a generator  ⟺  b(v) ≤ L_0  or  d(v, c_i) ≤ R_i + b·h_{b(v)} for some i with ℓ_i ≥ b(v),

b the buffer in cells.  The region of level ≥ k therefore covers that of level ≥ k + 1 with a margin
of b·h_{k+1}: the mesh is graded.  The mesh is ``voronoi_mesh`` of the generators.

**Transfer.**  For every old cell C_i and new cell D_j that overlap, the intersection P_ij is
computed exactly (the old polygon clipped by the half-spaces <x, d_j - d_k> ≥ 0 of the new cell's
neighbours k; arcs are straight under central projection), with its area |P_ij| and first moment
∫_{P_ij} x dσ = (1/2) Σ_edges θ_e n_e (n_e the inward unit normal of edge e's plane).  The old
density is reconstructed linearly, ρ_i + α_i <g_i, x> (g_i the least-squares gradient of
``reconstruction``, tangent at c_i, α_i ∈ [0, 1] the Barth–Jespersen factor keeping the values at
C_i's vertices between the extremes of ρ over C_i and its neighbours), and

    I_ij = max(0, ρ_i |P_ij| + α_i <g_i, ∫_{P_ij} x dσ>),   M_ij = m_i I_ij / Σ_k I_ik,
    ρ'_j = Σ_i M_ij / |D_j|.

The shares M_ij / m_i do not change when cell i's ρ_i and g_i are scaled together, and they are computed
scaled by the power of two that brings ρ_i + ‖α_i g_i‖_∞ to [1/2, 1): the same bits for densities of normal size, and
the integrals of an emptied region's cells (ρ ~ 1e-320, subnormal, on long runs) over small intersections do not
round to zero.  Each old cell gives away exactly its mass m_i, only to new cells that overlap it (no mass moves
farther than the two cells), and never a negative amount: total mass is conserved to round-off
and ρ' ≥ 0.  A uniform density stays uniform to round-off (g = 0, Σ_i |P_ij| = |D_j|).  A cell
whose polygon is unchanged (the same generator with the same neighbours: a Voronoi cell is the
intersection of its bisector half-spaces) keeps its mass exactly, without being intersected: a remesh
changes a band of cells where the levels move, and only that band is clipped (the unchanged cells
cover the rest of the sphere on both meshes, so no changed cell overlaps an unchanged one).
"""
from .. import _numba_env  # noqa: F401

from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

import numpy as np
from numba import njit
from scipy.spatial import cKDTree

from meanfield.checks import as_count
from meanfield.geometry import normalise

from . import reconstruction
from .voronoi import Mesh, assemble_mesh, icosahedron_points, voronoi_faces

__all__ = ["AdaptiveMesh", "level_size", "hierarchy", "adaptive_mesh", "wanted_levels", "downstream", "select",
           "transfer"]

MAX_POLYGON = 128          # vertices of a clipped polygon (an old cell has <= ~12, each clip adds <= 1)


def level_size(level):
    r"""The number of vertices of the icosahedron subdivided k times.

    .. math::

        n_k = 10 \cdot 4^k + 2.

    Parameters
    ----------
    level : int

    Returns
    -------
    int

    Examples
    --------
    >>> from meanfield.solvers.meshes.remesh import level_size
    >>> [level_size(k) for k in range(4)]
    [12, 42, 162, 642]
    """
    return 10 * 4 ** int(level) + 2


def _spacing(level):
    """h_k = sqrt(4π / n_k), the side of a level-k cell of average area."""
    return float(np.sqrt(4 * np.pi / level_size(level)))


def _chord(arc):
    return 2.0 * np.sin(0.5 * np.minimum(arc, np.pi))


@lru_cache(maxsize=4)
def hierarchy(finest):
    """The nested icosahedral vertices up to level L = ``finest``, with their birth levels.

    Vertex v is born at level k when it is a vertex of the level-k icosphere but not of the
    level-(k-1) one (indices n_{k-1} <= v < n_k, ``level_size``).  Cached.

    Parameters
    ----------
    finest : int
        L >= 0.

    Returns
    -------
    vertices : ndarray, shape (n_L, 3)
    birth : ndarray, shape (n_L,)
    trees : dict
        k -> ``scipy.spatial.cKDTree`` of the vertices born at level k (k >= 1).

    Examples
    --------
    >>> from meanfield.solvers.meshes.remesh import hierarchy
    >>> vertices, birth, trees = hierarchy(2)
    >>> vertices.shape, int(birth[0]), int(birth[-1]), sorted(trees)
    ((162, 3), 0, 2, [1, 2])
    """
    finest = as_count(finest, "finest", minimum=0)
    vertices = normalise(icosahedron_points(finest))   # normalised as voronoi_mesh does
    vertices.setflags(write=False)
    sizes = np.array([level_size(k) for k in range(finest + 1)])
    birth = np.searchsorted(sizes, np.arange(vertices.shape[0]), side="right")
    birth.setflags(write=False)
    trees = {k: cKDTree(vertices[sizes[k - 1]:sizes[k]], balanced_tree=False, compact_nodes=False)
             for k in range(1, finest + 1)}         # built in half the time, queried as fast
    return vertices, birth, trees


@dataclass(frozen=True, eq=False)
class AdaptiveMesh:
    """A Voronoi mesh on a subset of the nested icosahedral vertices (``adaptive_mesh`` builds one).

    Parameters
    ----------
    mesh : meanfield.solvers.meshes.voronoi.Mesh
    index : ndarray, shape (N,)
        Sorted indices of the generators among the vertices of level ``finest``.
    finest : int
    vertices : ndarray, shape (V, 3)
        The Voronoi vertices.
    polygon_ptr : ndarray, shape (N + 1,)
    polygon : ndarray, shape (K,)
        Each cell's Voronoi vertices in order (CSR).
    radius : ndarray, shape (N,)
        The largest distance from a generator to its cell's vertices.
    levels : ndarray, shape (N,)
        The cell levels round(log_4((4π/|C_i| - 2)/10)).

    Examples
    --------
    >>> from meanfield.solvers.meshes.remesh import adaptive_mesh, level_size
    >>> a = adaptive_mesh(range(level_size(1)), 2)
    >>> a.size, int(a.levels.min()), int(a.levels.max())
    (42, 1, 1)
    """
    mesh: Mesh
    index: np.ndarray
    finest: int
    vertices: np.ndarray
    polygon_ptr: np.ndarray
    polygon: np.ndarray
    radius: np.ndarray
    levels: np.ndarray

    @property
    def size(self):
        return self.mesh.size


def adaptive_mesh(index, finest):
    """The AdaptiveMesh of the generators ``hierarchy(finest)[0][index]``.

    Parameters
    ----------
    index : array_like of int
        Indices among the vertices of level ``finest`` (sorted and made unique).
    finest : int

    Returns
    -------
    AdaptiveMesh

    Examples
    --------
    >>> from meanfield.solvers.meshes.remesh import adaptive_mesh, level_size
    >>> adaptive_mesh(range(level_size(0)), 3).size
    12
    """
    vertices_all = hierarchy(finest)[0]
    index = np.unique(np.asarray(index, dtype=np.int64))
    points = vertices_all[index]
    vertices, cell, va, vb = voronoi_faces(points)
    mesh = assemble_mesh(points, vertices, cell, va, vb, f"adaptive(finest={finest}, {index.size} cells)")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(cell, minlength=index.size))])
    radius = np.zeros(index.size)
    np.maximum.at(radius, cell, np.arccos(np.clip(np.einsum("ij,ij->i", points[cell], vertices[va]), -1, 1)))
    levels = np.rint(np.log((4 * np.pi / mesh.areas - 2) / 10) / np.log(4)).astype(np.int64)
    return AdaptiveMesh(mesh=mesh, index=index, finest=int(finest), vertices=vertices, polygon_ptr=ptr,
                        polygon=va, radius=radius, levels=levels)


def wanted_levels(rho, areas, base, finest, threshold):
    r"""The level each cell asks for: mass equidistribution.

    .. math::

        \ell_i = \operatorname{clip}\left(L_0 + \left\lceil \log_4 \frac{\rho_i}{\theta \bar\rho} \right\rceil,
        L_0, L\right), \qquad \bar\rho = \frac{1}{4\pi} \sum_i \rho_i |C_i|,

    the coarsest level at which a cell of density ρ_i holds at most θ times the mass of a
    base-level cell of the mean density (a cell's mass, not its density, sets its size).

    Parameters
    ----------
    rho : array_like, shape (N,)
        Cell densities.
    areas : array_like, shape (N,)
    base, finest : int
        L_0 and L.
    threshold : float
        θ.

    Returns
    -------
    ndarray of int, shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.remesh import wanted_levels
    >>> areas = np.full(4, np.pi)
    >>> wanted_levels(np.array([1.0, 1.0, 1.0, 40.0]), areas, 2, 5, 2.0)
    array([2, 2, 2, 3])
    """
    rho = np.asarray(rho, dtype=float)
    mean = float(rho @ areas) / (4 * np.pi)
    with np.errstate(divide="ignore"):
        ratio = np.log(np.maximum(rho, 1e-300) / (threshold * mean)) / np.log(4.0)
    return np.clip(base + np.ceil(ratio), base, finest).astype(np.int64)


def downstream(mesh, levels, velocity, lead):
    r"""Each cell's level carried along the field: cell i's level ℓ_i is passed from cell to
    neighbouring cell in the direction of its velocity u_i, over the distance |u_i| ``lead``.

    A carried level moves from cell a to a neighbour b when the arc a → b points along the carried
    direction, (x_b - x_a) · d > ½ |x_b - x_a| (within 60° of it), and some distance is left; b keeps
    the highest level offered (ties: the most distance left), with the distance left reduced by the
    arc d(a, b) and the direction projected on b's tangent plane.  A cell whose carried distance
    runs out still receives the level (the swept region is rounded out to whole cells), so every
    cell within |u_i| ``lead`` downstream of cell i, along the field, gets at least ℓ_i.

    Parameters
    ----------
    mesh : Mesh
        The cells (``points``, and the neighbour lists ``cell_ptr``/``cell_neighbours``).
    levels : array_like of int, shape (N,)
        ℓ_i, the level each cell wants.
    velocity : array_like, shape (N, 3)
        u_i, the field at the generators (tangent vectors).
    lead : float
        τ ≥ 0, the time ahead: the distance carried is |u_i| τ.

    Returns
    -------
    ndarray of int64, shape (N,)
        ℓ' ≥ ℓ.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> mesh = icosphere(2)
    >>> levels = np.zeros(mesh.size, dtype=np.int64)
    >>> pole = int(np.argmax(mesh.points[:, 2])); levels[pole] = 5
    >>> east = np.cross([0.0, 0.0, 1.0], mesh.points)                  # rotation about the z axis
    >>> out = downstream(mesh, levels, 0.5 * east, 0.0)
    >>> int((out == 5).sum())                                          # no lead: unchanged
    1
    >>> levels[:] = 0; start = int(np.argmin(np.abs(mesh.points[:, 2]))); levels[start] = 5
    >>> out = downstream(mesh, levels, 0.5 * east, 0.8)               # 0.4 rad along the equator
    >>> ahead = mesh.points[out == 5] @ east[start] - mesh.points[start] @ east[start]
    >>> int((out == 5).sum()) > 2, bool(np.all(ahead >= -1e-12))
    (True, True)
    """
    levels = np.array(levels, dtype=np.int64)
    velocity = np.asarray(velocity, dtype=float)
    points = mesh.points
    speed = np.linalg.norm(velocity, axis=1)
    left = speed * lead
    if not np.any((left > 0) & (levels > 0)):
        return levels
    direction = velocity / np.where(speed > 0, speed, 1.0)[:, None]
    a = np.repeat(np.arange(points.shape[0]), np.diff(mesh.cell_ptr))
    b = np.asarray(mesh.cell_neighbours)
    step = points[b] - points[a]
    chord = np.linalg.norm(step, axis=1)
    arc = 2 * np.arcsin(np.minimum(chord / 2, 1.0))
    while True:
        go = (left[a] > 0) & (levels[a] > 0) & (np.einsum("ij,ij->i", step, direction[a]) > 0.5 * chord)
        offer = np.flatnonzero(go & ((levels[a] > levels[b]) | ((levels[a] == levels[b])
                                                                 & (left[a] - arc > left[b]))))
        if offer.size == 0:
            return levels
        order = offer[np.lexsort((left[a[offer]], levels[a[offer]], b[offer]))]   # best offer last per cell
        last = np.r_[b[order][1:] != b[order][:-1], True]
        src, dst = a[order[last]], b[order[last]]
        carried = direction[src] - np.einsum("ij,ij->i", direction[src], points[dst])[:, None] * points[dst]
        levels[dst], left[dst] = levels[src], left[src] - arc[order[last]]
        direction[dst] = carried / np.maximum(np.linalg.norm(carried, axis=1), 1e-300)[:, None]


def select(amesh, levels, base, buffer):
    """The graded generator set that resolves each cell of ``amesh`` at its wanted level.

    Cell i asks for level ``levels[i]``: the vertices born at that level or coarser within its
    reach, with a buffer of ``buffer`` cells of each level around the finer region (module
    docstring); the base-level vertices are always kept.

    Parameters
    ----------
    amesh : AdaptiveMesh
    levels : array_like of int, shape (N,)
        From ``wanted_levels``.
    base : int
    buffer : int

    Returns
    -------
    ndarray of int
        Sorted indices among the vertices of level ``amesh.finest``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.remesh import adaptive_mesh, level_size, select
    >>> a = adaptive_mesh(range(level_size(1)), 2)
    >>> bool(np.array_equal(select(a, np.full(a.size, 1), 1, 1), np.arange(level_size(1))))
    True
    """
    _, birth, trees = hierarchy(amesh.finest)
    chosen = [np.arange(level_size(base))]
    points = amesh.mesh.points
    for k in range(base + 1, amesh.finest + 1):
        cells = np.flatnonzero(levels >= k)
        if cells.size == 0:
            break
        radius = _chord(amesh.radius[cells] + buffer * _spacing(k))
        hits = _flatten(trees[k].query_ball_point(points[cells], radius, return_sorted=False))[1]
        chosen.append(hits + level_size(k - 1))
    keep = np.zeros(level_size(amesh.finest), dtype=bool)
    keep[np.concatenate(chosen)] = True
    return np.flatnonzero(keep)


def _flatten(found):
    """The lists of a ball query as (owner, member) index arrays."""
    counts = np.fromiter(map(len, found), dtype=np.int64, count=len(found))
    members = np.fromiter(chain.from_iterable(found), dtype=np.int64, count=int(counts.sum()))
    return np.repeat(np.arange(len(found)), counts), members


def _pairs(old, new, cells_old, cells_new):
    """The pairs (old cell, new cell) among ``cells_old`` x ``cells_new`` whose bounding caps meet:
    d(c_i, d_j) ≤ R_i + R_j (every overlapping pair is one of them)."""
    po, pn = old.mesh.points[cells_old], new.mesh.points[cells_new]
    ro, rn = old.radius[cells_old], new.radius[cells_new]
    a, b = _flatten(cKDTree(pn).query_ball_point(po, _chord(2 * ro)))
    c, d = _flatten(cKDTree(po).query_ball_point(pn, _chord(2 * rn)))
    key = np.unique(np.concatenate([a, d]) * pn.shape[0] + np.concatenate([b, c]))
    i, j = key // pn.shape[0], key % pn.shape[0]
    arc = np.arccos(np.clip(np.einsum("ij,ij->i", po[i], pn[j]), -1, 1))
    keep = arc <= ro[i] + rn[j] + 1e-12
    return np.ascontiguousarray(cells_old[i[keep]]), np.ascontiguousarray(cells_new[j[keep]])


@njit(cache=True)
def _same_neighbours(ci, cj, old_ptr, old_neighbours, old_index, new_ptr, new_neighbours, new_index):
    """For each pair (ci[p], cj[p]) of cells with the same generator: whether their neighbours are
    the same generators (then the two Voronoi cells are the same polygon)."""
    same = np.zeros(ci.shape[0], dtype=np.bool_)
    for p in range(ci.shape[0]):
        i, j = ci[p], cj[p]
        if old_ptr[i + 1] - old_ptr[i] != new_ptr[j + 1] - new_ptr[j]:
            continue
        found = True
        for q in range(old_ptr[i], old_ptr[i + 1]):
            g = old_index[old_neighbours[q]]
            found = False
            for r in range(new_ptr[j], new_ptr[j + 1]):
                if new_index[new_neighbours[r]] == g:
                    found = True
                    break
            if not found:
                break
        same[p] = found
    return same


def _unchanged(old, new):
    """The cells (old, new) that are the same Voronoi polygon on both meshes: the same generator
    (the vertex indices are nested, so they mean the same point on both) and the same neighbours."""
    _, ci, cj = np.intersect1d(old.index, new.index, assume_unique=True, return_indices=True)
    same = _same_neighbours(ci, cj, old.mesh.cell_ptr, old.mesh.cell_neighbours, old.index,
                            new.mesh.cell_ptr, new.mesh.cell_neighbours, new.index)
    return ci[same], cj[same]


@njit(cache=True)
def _intersections(pi, pj, vertices, polygon_ptr, polygon, centres_old, centres, cell_ptr, neighbours, area, moment):
    """|P| and ∫_P x dσ of P = C_i ∩ D_j for each pair (old polygon clipped by the new cell's
    bisector half-spaces, Sutherland–Hodgman with great-circle edges).  The edge normals take the
    old polygon's orientation, so that the two sides of a degenerate sliver cancel."""
    a = np.empty((MAX_POLYGON, 3))
    b = np.empty((MAX_POLYGON, 3))
    for p in range(pi.shape[0]):
        i = pi[p]
        j = pj[p]
        m = polygon_ptr[i + 1] - polygon_ptr[i]
        for k in range(m):
            a[k] = vertices[polygon[polygon_ptr[i] + k]]
        c = np.cross(a[0], a[1])     # the old polygon's orientation, kept by the clipping
        side = c[0] * centres_old[i, 0] + c[1] * centres_old[i, 1] + c[2] * centres_old[i, 2]
        orientation = 1.0 if side > 0 else -1.0
        for q in range(cell_ptr[j], cell_ptr[j + 1]):
            n = centres[j] - centres[neighbours[q]]
            mm = 0
            for k in range(m):
                u = a[k]
                v = a[(k + 1) % m]
                du = u[0] * n[0] + u[1] * n[1] + u[2] * n[2]
                dv = v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
                if du >= 0.0:
                    b[mm] = u
                    mm += 1
                if (du >= 0.0) != (dv >= 0.0):
                    x = u + (du / (du - dv)) * (v - u)
                    b[mm] = x / np.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])
                    mm += 1
                if mm > MAX_POLYGON - 2:
                    raise ValueError("a clipped polygon has too many vertices")
            m = mm
            a[:m] = b[:m]
            if m < 3:
                break
        area[p] = 0.0
        moment[p, :] = 0.0
        if m < 3:
            continue
        for k in range(m):
            u = a[k]
            v = a[(k + 1) % m]
            c = np.cross(u, v)
            s = np.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
            if s > 0.0:
                theta = np.arctan2(s, u[0] * v[0] + u[1] * v[1] + u[2] * v[2])
                moment[p] += (0.5 * theta * orientation / s) * c
            if 1 <= k < m - 1:
                w = a[0]
                triple = abs(w[0] * c[0] + w[1] * c[1] + w[2] * c[2])
                denom = 1.0 + (w[0] * u[0] + w[1] * u[1] + w[2] * u[2]) + (u[0] * v[0] + u[1] * v[1] + u[2] * v[2]) \
                    + (v[0] * w[0] + v[1] * w[1] + v[2] * w[2])
                area[p] += 2.0 * np.arctan2(triple, denom)


def _limited_gradient(amesh, rho):
    """(α_i g_i): the least-squares gradient of ``reconstruction`` times the Barth–Jespersen factor
    that keeps ρ_i + α_i <g_i, v> within [min, max] of ρ over the cell and its neighbours at every
    Voronoi vertex v of the cell."""
    mesh = amesh.mesh
    weights, _, _ = reconstruction.geometry(mesh)
    owner = np.repeat(np.arange(mesh.size), np.diff(mesh.cell_ptr))
    diff = rho[mesh.cell_neighbours] - rho[owner]
    g = np.stack([np.bincount(owner, weights[:, a] * diff, minlength=mesh.size) for a in range(3)], axis=1)
    lo = np.minimum(rho, np.minimum.reduceat(rho[mesh.cell_neighbours], mesh.cell_ptr[:-1]))
    hi = np.maximum(rho, np.maximum.reduceat(rho[mesh.cell_neighbours], mesh.cell_ptr[:-1]))
    vowner = np.repeat(np.arange(mesh.size), np.diff(amesh.polygon_ptr))
    step = np.einsum("ij,ij->i", g[vowner], amesh.vertices[amesh.polygon])
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(step > 0, (hi - rho)[vowner] / step, np.where(step < 0, (lo - rho)[vowner] / step, np.inf))
    alpha = np.ones(mesh.size)
    np.minimum.at(alpha, vowner, room)
    return np.clip(alpha, 0.0, 1.0)[:, None] * g


def transfer(old, new, rho):
    """The densities on ``new`` of the old cell densities ``rho`` (module docstring).

    Parameters
    ----------
    old, new : AdaptiveMesh (the same ``finest``, or any two meshes with polygons).
    rho : (N_old,) non-negative cell densities on ``old``.

    Returns
    -------
    rho_new : (N_new,) cell densities on ``new``: Σ ρ'_j |D_j| = Σ ρ_i |C_i| to round-off, ρ' ≥ 0.

    Examples
    --------
    >>> from meanfield.solvers.meshes.remesh import adaptive_mesh, level_size, transfer
    >>> a, b = adaptive_mesh(range(level_size(2)), 3), adaptive_mesh(range(level_size(3)), 3)
    >>> r = transfer(a, b, np.full(a.size, 1 / (4 * np.pi)))
    >>> bool(np.allclose(r, 1 / (4 * np.pi), rtol=1e-12))
    True
    """
    rho = np.asarray(rho, dtype=float)
    masses = rho * old.mesh.areas
    kept_old, kept_new = _unchanged(old, new)
    moved = np.zeros(new.size)
    moved[kept_new] = masses[kept_old]
    changed_old = np.setdiff1d(np.arange(old.size), kept_old, assume_unique=True)
    changed_new = np.setdiff1d(np.arange(new.size), kept_new, assume_unique=True)
    if changed_old.size == 0:
        return moved / new.mesh.areas
    i, j = _pairs(old, new, changed_old, changed_new)
    area = np.empty(i.size)
    moment = np.empty((i.size, 3))
    _intersections(i, j, old.vertices, old.polygon_ptr, old.polygon, old.mesh.points, new.mesh.points,
                   new.mesh.cell_ptr, new.mesh.cell_neighbours, area, moment)
    slope = _limited_gradient(old, rho)
    exponent = np.frexp(rho + np.abs(slope).max(axis=1))[1]       # per old cell: its shares are scale-free
    value, slope = np.ldexp(rho, -exponent), np.ldexp(slope, -exponent[:, None])
    integral = np.maximum(value[i] * area + np.einsum("ij,ij->i", slope[i], moment), 0.0)
    total = np.bincount(i, integral, minlength=old.size)
    share = np.where(total[i] > 0, integral / np.where(total[i] > 0, total[i], 1.0), 0.0)
    lost = (total[changed_old] == 0) & (masses[changed_old] > 0)
    if np.any(lost):                    # an old cell with mass but no overlap: impossible up to round-off
        raise RuntimeError(f"{int(lost.sum())} old cells overlap no new cell; the meshes do not cover the sphere")
    moved += np.bincount(j, masses[i] * share, minlength=new.size)
    return moved / new.mesh.areas
