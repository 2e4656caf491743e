"""Spherical Voronoi meshes of S^2 for the finite-volume solver.

Cell i is the Voronoi region of the generator c_i: the points closer (geodesically) to c_i
than to any other generator.  The face between neighbours i and j is an arc of the great
circle bisecting c_i and c_j, so it is orthogonal to the generator-to-generator arc and a
two-point flux across it is consistent.  For an edge e = (i, j), i < j:

    lengths[e]    = geodesic length of the shared face
    distances[e]  = d(c_i, c_j) = atan2(|c_i × c_j|, <c_i, c_j>)
    normals[e, 0] = w × c_i,  normals[e, 1] = w × c_j,   w = c_i × c_j / |c_i × c_j|

(the unit tangent of the arc from c_i to c_j, at c_i and at c_j: both point from i to j).
Cell areas are sums of the exact areas of the spherical triangles (c_i, v_a, v_b) over the
cell's face arcs (v_a, v_b), tan(E/2) = |<a, b × c>| / (1 + <a,b> + <b,c> + <c,a>), so the
areas of a mesh sum to 4π to round-off.

Generators: ``icosphere(level)`` (vertices of the level-times subdivided icosahedron,
10·4^level + 2 cells), ``fibonacci(n)`` (the golden-angle spiral, any n), or any points via
``voronoi_mesh``; ``lloyd=k`` moves the generators k times to the centroids of their cells
(centroidal Voronoi tessellation).
"""
import os
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np
from scipy.spatial import SphericalVoronoi

from meanfield.atomic import write_file
from meanfield.checks import as_count, as_float_array, as_points
from meanfield.npzfile import NPZ_ERRORS, npz_path
from meanfield.geometry import edge_midpoints, icosahedral_triangulation

__all__ = ["Mesh", "icosphere", "fibonacci", "voronoi_mesh"]


@dataclass(frozen=True, eq=False)
class Mesh:
    """A spherical Voronoi mesh; all arrays are read-only.

    Build one with ``icosphere``, ``fibonacci`` or ``voronoi_mesh``.  ``size`` is N,
    ``perimeters`` (N,) the cells' perimeters and ``spacing`` a typical cell width; ``save`` and
    ``load`` write and read an .npz file.

    Parameters
    ----------
    points : ndarray, shape (N, 3)
        Generators (the cell centres), unit vectors.
    areas : ndarray, shape (N,)
        Cell areas |C_i|, summing to 4π.
    edges : ndarray, shape (E, 2)
        Cell pairs i < j sharing a face.
    lengths : ndarray, shape (E,)
        Face lengths |f_ij|.
    distances : ndarray, shape (E,)
        Geodesic distances d_ij between the generators.
    normals : ndarray, shape (E, 2, 3)
        Unit face normals from i to j, at c_i and at c_j.
    cell_ptr, cell_edges, cell_neighbours : ndarray
        Neighbour lists in CSR form: cell i's faces are ``cell_edges[cell_ptr[i]:cell_ptr[i+1]]``
        and its neighbours ``cell_neighbours[...]`` in the same order.
    name : str
        How the mesh was built.

    Raises
    ------
    ValueError
        For arrays of inconsistent shapes, non-finite or non-positive areas and lengths.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> mesh = icosphere(1)
    >>> mesh.size, bool(np.isclose(mesh.areas.sum(), 4 * np.pi))
    (42, True)
    """
    points: np.ndarray
    areas: np.ndarray
    edges: np.ndarray
    lengths: np.ndarray
    distances: np.ndarray
    normals: np.ndarray
    cell_ptr: np.ndarray
    cell_edges: np.ndarray
    cell_neighbours: np.ndarray
    name: str = "voronoi"

    def __post_init__(self):
        for name, value in _checked_mesh_arrays(self).items():
            value = np.ascontiguousarray(value)
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def size(self):
        """Number of cells N."""
        return self.points.shape[0]

    @property
    def perimeters(self):
        """Cell perimeters Σ_faces |face| (N,)."""
        return np.bincount(self.edges.ravel(), np.repeat(self.lengths, 2), minlength=self.size)

    @property
    def spacing(self):
        """Mesh size h = sqrt(4π / N), the side of a cell of average area."""
        return float(np.sqrt(4 * np.pi / self.size))

    def __repr__(self):
        return f"Mesh({self.name}: {self.size} cells, {self.edges.shape[0]} faces)"

    def save(self, path):
        """Store the mesh in one .npz file, atomically (reload with ``Mesh.load``); returns its path
        (".npz" appended if missing, as numpy does)."""
        path = npz_path(path)
        arrays = {f.name: np.asarray(getattr(self, f.name)) for f in fields(self)}
        write_file(path, lambda fh: np.savez_compressed(fh, **arrays))
        return path

    @classmethod
    def load(cls, path):
        """A mesh saved by ``save``; ValueError naming the file if it is unreadable or inconsistent."""
        try:
            with np.load(path, allow_pickle=False) as data:
                values = {f.name: data[f.name] for f in fields(cls)}
            values["name"] = str(values["name"])
            return cls(**values)
        except NPZ_ERRORS + (TypeError,) as exc:
            raise ValueError(f"{os.fspath(path)} is not a valid saved Mesh ({type(exc).__name__}: {exc})") from None


def _checked_mesh_arrays(mesh):
    """The mesh's arrays as float64 / int64, after checking what the Numba kernels rely on:
    unit generators, positive finite areas and distances, edges i < j within range, and
    CSR lists that index existing edges and cells (an index out of range would crash), list
    every edge under both its cells and agree with ``edges`` (a permuted list would solve silently
    with the wrong neighbours)."""
    points = as_points(mesh.points, "points", d=3)
    n = points.shape[0]
    if n < 4:
        raise ValueError(f"a mesh needs at least 4 cells; got {n}")
    if not isinstance(mesh.name, str):
        raise TypeError(f"name must be a string; got {type(mesh.name).__name__}")
    out = dict(points=points)

    def integers(name, shape):
        arr = np.asarray(getattr(mesh, name))
        if arr.dtype.kind not in "iu" or arr.shape != shape:
            raise ValueError(f"{name} must be an integer array of shape {shape}; got {arr.dtype} {arr.shape}")
        out[name] = arr.astype(np.int64)
        return out[name]

    def reals(name, shape, positive):
        arr = as_float_array(getattr(mesh, name), name)
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape}; got {arr.shape}")
        if positive and not np.all(arr > 0):
            raise ValueError(f"{name} must be positive; min is {arr.min():.3g}")
        out[name] = arr
        return arr

    reals("areas", (n,), True)
    edges = np.asarray(mesh.edges)
    e = edges.shape[0] if edges.ndim == 2 else -1
    edges = integers("edges", (max(e, 0), 2))
    if e < 1 or np.any(edges[:, 0] < 0) or np.any(edges[:, 0] >= edges[:, 1]) or np.any(edges[:, 1] >= n):
        raise ValueError(f"edges must be pairs i < j of cell indices in [0, {n}); some are out of range")
    reals("lengths", (e,), False)
    if np.any(out["lengths"] < 0):
        raise ValueError("lengths must be non-negative")
    reals("distances", (e,), True)
    reals("normals", (e, 2, 3), False)
    ptr = integers("cell_ptr", (n + 1,))
    if ptr[0] != 0 or np.any(np.diff(ptr) < 0) or ptr[-1] != 2 * e:
        raise ValueError(f"cell_ptr must increase from 0 to 2 * (number of edges) = {2 * e}")
    cell_edges = integers("cell_edges", (2 * e,))
    neighbours = integers("cell_neighbours", (2 * e,))
    if np.any((cell_edges < 0) | (cell_edges >= e)) or np.any((neighbours < 0) | (neighbours >= n)):
        raise ValueError("cell_edges / cell_neighbours hold indices out of range")
    owner = np.repeat(np.arange(n), np.diff(ptr))
    ends = edges[cell_edges]
    if np.any((ends[:, 0] != owner) & (ends[:, 1] != owner)):
        raise ValueError("cell_edges lists, under some cell, a face that does not touch it")
    if np.unique(cell_edges * n + owner).size != 2 * e:
        raise ValueError("cell_edges must list every edge once under each of its two cells; some are "
                         "missing or repeated")
    if np.any(neighbours != ends.sum(axis=1) - owner):
        raise ValueError("cell_neighbours must hold, beside each face in cell_edges, the cell across it "
                         "(the other end of that edge in edges); some do not")
    return out


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _triangle_areas(a, b, c):
    """Exact areas of the spherical triangles (a, b, c), rows of unit vectors (Van Oosterom–Strackee)."""
    triple = np.abs(np.einsum("ij,ij->i", a, np.cross(b, c)))
    denom = 1.0 + np.einsum("ij,ij->i", a, b) + np.einsum("ij,ij->i", b, c) + np.einsum("ij,ij->i", c, a)
    return 2.0 * np.arctan2(triple, denom)


def _arc(a, b):
    """Geodesic distances between rows of a and b, accurate for tiny and near-π angles."""
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), np.einsum("ij,ij->i", a, b))


def _faces(sv):
    """The directed face arcs (cell, vertex a, vertex b) of every Voronoi region, in CSR order."""
    counts = np.fromiter((len(r) for r in sv.regions), dtype=np.int64, count=len(sv.regions))
    start = np.arange(counts.size)
    cell = np.repeat(start, counts)
    va = np.concatenate([np.asarray(r, dtype=np.int64) for r in sv.regions])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    nxt = np.arange(va.size) + 1
    nxt[offsets[1:] - 1] = offsets[:-1]
    return cell, va, va[nxt]


def voronoi_faces(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The spherical Voronoi diagram of unit generators as a list of face arcs: the vertices, and for
    every arc (a, b) of a cell's boundary the cell and its two end vertices, in the cell's
    counter-clockwise order (what ``assemble_mesh`` reads).

    Parameters
    ----------
    points : numpy.ndarray, shape (N, 3)
        Distinct unit generators (not checked).

    Returns
    -------
    vertices : numpy.ndarray, shape (V, 3)
        Unit vertices of the diagram.
    cell, va, vb : numpy.ndarray of int, shape (F,)
        For each face arc: its cell and its start and end vertex.

    Raises
    ------
    ValueError
        For duplicate or degenerate generators (from scipy's ``SphericalVoronoi``).

    Examples
    --------
    >>> from meanfield.solvers.meshes.voronoi import icosahedron_points, voronoi_faces
    >>> vertices, cell, va, vb = voronoi_faces(icosahedron_points(0))
    >>> vertices.shape, cell.size                 # 20 triangles' centres; 12 pentagons' 60 arcs
    ((20, 3), 60)
    """
    sv = SphericalVoronoi(points, radius=1.0, center=np.zeros(3))
    sv.sort_vertices_of_regions()
    vertices = _unit(sv.vertices)
    cell, va, vb = _faces(sv)
    return vertices, cell, va, vb


def _centroids(points, vertices, cell, va, vb):
    """∫_cell x dσ normalised.  The divergence theorem on the cone over the cell gives
    ∫_cell x dσ = (1/2) Σ_faces θ_ab n_ab, with θ_ab the face's angle and n_ab the unit normal
    of its plane on the generator's side."""
    a, b = vertices[va], vertices[vb]
    cr = np.cross(a, b)
    norm = np.linalg.norm(cr, axis=1)
    keep = norm > 0
    side = np.sign(np.einsum("ij,ij->i", cr, points[cell]))
    contrib = np.zeros_like(a)
    contrib[keep] = (0.5 * np.arctan2(norm[keep], np.einsum("ij,ij->i", a, b)[keep]) * side[keep]
                     / norm[keep])[:, None] * cr[keep]
    moment = np.zeros_like(points)
    np.add.at(moment, cell, contrib)
    return _unit(moment)


def voronoi_mesh(points, lloyd=0, name="voronoi"):
    r"""The spherical Voronoi mesh of distinct generators, after Lloyd iterations.

    Each Lloyd iteration moves every generator to its cell's normalised centroid,

    .. math::

        c_i \leftarrow \frac{\int_{C_i} x \, d\sigma}{\left|\int_{C_i} x \, d\sigma\right|}.

    Parameters
    ----------
    points : array_like, shape (N, 3)
        Distinct unit vectors, N >= 4.
    lloyd : int
        Number of centroidal (Lloyd) iterations.
    name : str

    Returns
    -------
    Mesh

    Raises
    ------
    ValueError
        For fewer than 4 points, points that are not unit vectors, or repeated points.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.meshes.voronoi import voronoi_mesh
    >>> mesh = voronoi_mesh(mf.uniform_sphere(50, 3, seed=0))
    >>> mesh.size, bool(np.isclose(mesh.areas.sum(), 4 * np.pi))
    (50, True)
    """
    points = as_points(points, "points", d=3)
    lloyd = as_count(lloyd, "lloyd", minimum=0)
    if points.shape[0] < 4:
        raise ValueError(f"a spherical Voronoi mesh needs at least 4 generators; got {points.shape[0]}")
    points = _unit(points)
    try:
        vertices, cell, va, vb = voronoi_faces(points)
        for _ in range(lloyd):
            points = _centroids(points, vertices, cell, va, vb)
            vertices, cell, va, vb = voronoi_faces(points)
    except ValueError as exc:  # duplicate or degenerate generators
        raise ValueError(f"points do not define a spherical Voronoi mesh: {exc}") from None
    return assemble_mesh(points, vertices, cell, va, vb, name)


def assemble_mesh(points: np.ndarray, vertices: np.ndarray, cell: np.ndarray, va: np.ndarray, vb: np.ndarray,
                  name: str) -> Mesh:
    """The finite-volume ``Mesh`` of a spherical Voronoi diagram given as face arcs (``voronoi_faces``):
    the exact cell areas, and each face once, with its two cells, its length and its normal.

    Parameters
    ----------
    points : numpy.ndarray, shape (N, 3)
        The unit generators.
    vertices, cell, va, vb : numpy.ndarray
        As returned by ``voronoi_faces(points)``.
    name : str
        The mesh's name.

    Returns
    -------
    Mesh

    Raises
    ------
    ValueError
        When the faces do not pair up (degenerate generators).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import assemble_mesh, icosahedron_points, voronoi_faces
    >>> points = icosahedron_points(1)
    >>> mesh = assemble_mesh(points, *voronoi_faces(points), "icosahedron(1)")
    >>> mesh.size, bool(np.isclose(mesh.areas.sum(), 4 * np.pi))
    (42, True)
    """
    n = points.shape[0]
    areas = np.bincount(cell, _triangle_areas(points[cell], vertices[va], vertices[vb]), minlength=n)
    # Each face arc appears twice, as (a, b) in one cell and (b, a) in its neighbour.
    lo, hi = np.minimum(va, vb), np.maximum(va, vb)
    key = lo * vertices.shape[0] + hi
    order = np.argsort(key, kind="stable")
    if order.size % 2 or np.any(key[order[0::2]] != key[order[1::2]]):
        raise ValueError("the Voronoi faces do not pair up; the generators are degenerate")
    first, second = cell[order[0::2]], cell[order[1::2]]
    length = _arc(vertices[lo[order[0::2]]], vertices[hi[order[0::2]]])
    real = (length > 0) & (first != second)   # drop zero-length faces of co-circular generators
    i, j = np.minimum(first, second)[real], np.maximum(first, second)[real]
    length = length[real]
    # Sort the faces by cell pair (should a face be split by a duplicated vertex, its arcs add).
    pair = i * n + j
    uniq, inv = np.unique(pair, return_inverse=True)
    length = np.bincount(inv, length)
    edges = np.stack([uniq // n, uniq % n], axis=1)
    ci, cj = points[edges[:, 0]], points[edges[:, 1]]
    axis = _unit(np.cross(ci, cj))
    normals = np.stack([np.cross(axis, ci), np.cross(axis, cj)], axis=1)
    # CSR neighbour lists: each edge listed under both of its cells.
    owner = np.concatenate([edges[:, 0], edges[:, 1]])
    other = np.concatenate([edges[:, 1], edges[:, 0]])
    eid = np.concatenate([np.arange(edges.shape[0])] * 2)
    order = np.lexsort((other, owner))
    cell_ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))])
    return Mesh(points=np.ascontiguousarray(points), areas=areas, edges=edges, lengths=length,
                distances=_arc(ci, cj), normals=np.ascontiguousarray(normals), cell_ptr=cell_ptr,
                cell_edges=eid[order], cell_neighbours=other[order], name=name)


def icosahedron_points(level):
    """Vertices of the icosahedron subdivided ``level`` times (each triangle into four, new
    vertices projected to the sphere): 10·4^level + 2 points, those of ``icosahedral_triangulation``
    without building its finest triangles (at level 9, 5.2 million of them)."""
    level = as_count(level, "level", minimum=0)
    if level == 0:
        return icosahedral_triangulation(0)[0]
    return edge_midpoints(*icosahedral_triangulation(level - 1))[0]


def fibonacci_points(n):
    """The golden-angle (Fibonacci) spiral: z_k = 1 - (2k+1)/n, longitude k·π(3 - √5)."""
    n = as_count(n, "n", minimum=4)
    k = np.arange(n)
    z = 1.0 - (2.0 * k + 1.0) / n
    r = np.sqrt(1.0 - z * z)
    phi = k * np.pi * (3.0 - np.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def icosphere(level, lloyd=0):
    r"""The Voronoi mesh on the vertices of the icosahedron subdivided ``level`` times.

    .. math::

        N = 10 \cdot 4^{\text{level}} + 2

    cells (level 0: 12 pentagons; level 6: 40,962 cells).  Cached: the same (level, lloyd) returns
    the same read-only Mesh.

    Parameters
    ----------
    level : int
        >= 0.
    lloyd : int
        Lloyd iterations (``voronoi_mesh``).

    Returns
    -------
    Mesh

    Examples
    --------
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> icosphere(2).size, icosphere(2) is icosphere(2)
    (162, True)
    """
    return _cached("icosphere", as_count(level, "level", minimum=0), as_count(lloyd, "lloyd", minimum=0))


def fibonacci(n, lloyd=0):
    r"""The Voronoi mesh on the n-point Fibonacci spiral (any n >= 4), cached like ``icosphere``.

    .. math::

        z_k = 1 - \frac{2k + 1}{n}, \qquad \varphi_k = k \pi (3 - \sqrt 5), \qquad k = 0, \dots, n - 1.

    Parameters
    ----------
    n : int
    lloyd : int

    Returns
    -------
    Mesh

    Examples
    --------
    >>> from meanfield.solvers.meshes.voronoi import fibonacci
    >>> fibonacci(100).size
    100
    """
    return _cached("fibonacci", as_count(n, "n", minimum=4), as_count(lloyd, "lloyd", minimum=0))


@lru_cache(maxsize=16)
def _cached(kind, size, lloyd):
    points = icosahedron_points(size) if kind == "icosphere" else fibonacci_points(size)
    name = f"{kind}({size})" + (f", lloyd={lloyd}" if lloyd else "")
    return voronoi_mesh(points, lloyd=lloyd, name=name)
