"""Limited linear reconstruction of cell densities on a spherical Voronoi mesh.

For cell i with generator c_i and a face k shared with neighbour j, let t_k be the unit tangent at
c_i of the geodesic towards c_j and d_k = d(c_i, c_j).  The face's crossing point is the arc's
midpoint (Voronoi faces bisect it), at the tangent offset r_k = (d_k/2) t_k, and the neighbour
sits at δ_k = d_k t_k (the logarithmic map of c_j at c_i).  The gradient g_i is the least-squares
fit in the tangent plane,

    g_i = A_i^{-1} Σ_k δ_k (ρ_j - ρ_i),    A_i = Σ_k δ_k δ_k^T + c_i c_i^T

(exact for densities linear in the tangent coordinates; the c_i c_i^T term only makes A_i
invertible and keeps g_i tangent), and the face values

    ρ_ik = ρ_i + α_i <g_i, r_k>,

with the Barth–Jespersen factor α_i ∈ [0, 1], the largest for which every ρ_ik lies between the
smallest and the largest of ρ_i and its neighbours and below 2 ρ_i.  So ρ_ik ≥ 0, and a face value
is at most twice the cell's (the positivity bound of the reconstructed fluxes uses that).

A cell is *unresolved* when the linear fit misses a neighbour by more than ``UNRESOLVED`` times
the largest of the values involved, max_k |ρ_j - ρ_i - <g_i, δ_k>| > UNRESOLVED · max(ρ_i, ρ_j):
a smooth profile w cells wide misses by O(1/w²) of it, a cluster one or two cells wide by O(1).
"""
from .. import _numba_env  # noqa: F401

from functools import lru_cache

import numpy as np
from numba import njit

UNRESOLVED = 0.5


@lru_cache(maxsize=16)
def geometry(mesh):
    r"""The reconstruction geometry of a mesh (cached per Mesh object).

    Parameters
    ----------
    mesh : meanfield.solvers.meshes.voronoi.Mesh

    Returns
    -------
    weights : (K, 3) for the K = 2E (cell, face) slots in the mesh's CSR order, so that
        g_i = Σ_k weights[k] (ρ_j - ρ_i) over cell i's slots k.
    offsets : (K, 3) the face-midpoint offsets r_k = (d_k/2) t_k.
    slots : (E, 2) edge e = (i, j) is slot slots[e, 0] of cell i and slots[e, 1] of cell j.

    .. math::

        g_i = \sum_k \mathrm{weights}_k\, (\rho_j - \rho_i), \qquad
        \mathrm{weights}_k = A_i^{-1} \delta_k, \qquad r_k = \tfrac12 \delta_k.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> from meanfield.solvers.meshes.reconstruction import geometry
    >>> mesh = icosphere(1)
    >>> weights, offsets, slots = geometry(mesh)
    >>> weights.shape, offsets.shape, slots.shape
    ((240, 3), (240, 3), (120, 2))
    """
    n = mesh.size
    e = mesh.cell_edges
    owner = np.repeat(np.arange(n), np.diff(mesh.cell_ptr))
    first = mesh.edges[e, 0] == owner
    tangent = np.where(first[:, None], mesh.normals[e, 0], -mesh.normals[e, 1])
    delta = mesh.distances[e][:, None] * tangent
    moment = np.einsum("ka,kb->kab", delta, delta)
    A = np.zeros((n, 3, 3))
    np.add.at(A, owner, moment)
    A += np.einsum("ia,ib->iab", mesh.points, mesh.points)
    weights = np.einsum("kab,kb->ka", np.linalg.inv(A)[owner], delta)
    offsets = 0.5 * delta
    slots = np.empty((mesh.edges.shape[0], 2), dtype=np.int64)
    slots[e[first], 0] = np.flatnonzero(first)
    slots[e[~first], 1] = np.flatnonzero(~first)
    for a in (weights, offsets, slots):
        a.setflags(write=False)
    return weights, offsets, slots


@njit(cache=True)
def face_values(rho, cell_ptr, neighbours, weights, offsets, out, unresolved):
    r"""Limited face values out[k] = ρ_i + α_i <g_i, r_k> and the unresolved flags (see the module).

    .. math::

        \rho_{ik} = \rho_i + \alpha_i \langle g_i, r_k \rangle, \qquad \alpha_i \in [0, 1].

    Parameters
    ----------
    rho : ndarray, shape (N,)
        Cell densities.
    cell_ptr, neighbours : ndarray of int
        The mesh's neighbour lists in CSR form (``Mesh.cell_ptr``, ``Mesh.cell_neighbours``).
    weights, offsets : ndarray, shape (K, 3)
        From ``geometry``.
    out : ndarray, shape (K,)
        Receives the face values.
    unresolved : ndarray of bool, shape (N,)
        Receives the unresolved flags.

    Returns
    -------
    None

    Examples
    --------
    A constant density has every face value equal to it:

    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> from meanfield.solvers.meshes.reconstruction import face_values, geometry
    >>> mesh = icosphere(1)
    >>> weights, offsets, _ = geometry(mesh)
    >>> out, unresolved = np.empty(weights.shape[0]), np.empty(mesh.size, dtype=bool)
    >>> face_values(np.full(mesh.size, 0.5), mesh.cell_ptr, mesh.cell_neighbours, weights, offsets, out, unresolved)
    >>> bool(np.all(out == 0.5)), bool(unresolved.any())
    (True, False)
    """
    for i in range(rho.shape[0]):
        g0 = 0.0
        g1 = 0.0
        g2 = 0.0
        lo = rho[i]
        hi = rho[i]
        for k in range(cell_ptr[i], cell_ptr[i + 1]):
            d = rho[neighbours[k]] - rho[i]
            g0 += weights[k, 0] * d
            g1 += weights[k, 1] * d
            g2 += weights[k, 2] * d
            lo = min(lo, rho[neighbours[k]])
            hi = max(hi, rho[neighbours[k]])
        hi = min(hi, 2.0 * rho[i])
        alpha = 1.0
        miss = False
        for k in range(cell_ptr[i], cell_ptr[i + 1]):
            step = g0 * offsets[k, 0] + g1 * offsets[k, 1] + g2 * offsets[k, 2]
            if step > 0.0:
                alpha = min(alpha, (hi - rho[i]) / step)
            elif step < 0.0:
                alpha = min(alpha, (lo - rho[i]) / step)
            rj = rho[neighbours[k]]
            if abs(rj - rho[i] - 2.0 * step) > UNRESOLVED * max(rho[i], rj):
                miss = True
        alpha = max(alpha, 0.0)
        unresolved[i] = miss
        for k in range(cell_ptr[i], cell_ptr[i + 1]):
            step = g0 * offsets[k, 0] + g1 * offsets[k, 1] + g2 * offsets[k, 2]
            out[k] = max(rho[i] + alpha * step, 0.0)   # >= lo >= 0 up to round-off
