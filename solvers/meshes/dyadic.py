"""Dyadic meshes of the circle, their graded selection from wanted levels, and the conservative
transfer of cell masses between two of them.

**Cells.**  The base grid has N_0 cells of width h_0 = 2π/N_0; a cell of level ℓ ∈ [0, L] is one of
the 2^ℓ equal parts of a base cell, of width h_ℓ = h_0 2^{-ℓ}.  In units of the finest width
h_L = 2π/(N_0 2^L) every cell is an integer interval [e_i, e_i + s_i) with s_i = 2^{L-ℓ_i} and
s_i | e_i: two meshes are nested cell by cell (a cell of one lies inside a cell of the other, or
is a union of its cells), so the overlaps of a transfer are whole cells.

**Selection.**  Given the level ℓ_i each current cell wants, every finest unit gets the target
τ(x) = max{ℓ_i : x within ``buffer`` level-ℓ_i widths of cell i}; then, for ℓ = L, ..., 1, the
region τ ≥ ℓ widened by ``buffer`` level-(ℓ-1) widths gets τ ≥ ℓ - 1 (grading: neighbouring cells
differ by at most one level once buffer ≥ 1).  The mesh splits, level by level from the base grid,
every cell whose span has max τ above its level.

**Transfer.**  With the old density reconstructed linearly in each old cell i,
ρ_i + σ_i (θ - c_i), σ_i the minmod of the divided differences to its neighbours (so the
reconstruction stays ≥ 0 and between the neighbours' values), an old cell split into new cells
D_j gives D_j the mass

    M_ij = m_i I_ij / Σ_k I_ik,   I_ij = max(0, |D_j| (ρ_i + σ_i (c_j - c_i))),

and new cells that are unions of old cells get the sum of their masses.  Each old cell gives away
exactly its mass m_i, only to new cells inside it: total mass is conserved to round-off, ρ' ≥ 0,
no mass moves farther than the old cell, a uniform density stays uniform (σ = 0) and a linear
density is transferred exactly (I_ij is its integral over D_j).
"""
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from meanfield.checks import as_count

__all__ = ["DyadicMesh", "uniform_mesh", "select", "downstream", "transfer", "minmod_slopes"]


@dataclass(frozen=True, eq=False)
class DyadicMesh:
    r"""Cells [e_i, e_i + s_i) in units of the finest width 2π/(base 2^depth), ``edges`` increasing
    from 0, ``sizes`` powers of two dividing the edges, Σ sizes = base 2^depth.

    Cell i is the arc of angles

    .. math::

        C_i = \Big[\frac{2\pi e_i}{N_0 2^L}, \frac{2\pi (e_i + s_i)}{N_0 2^L}\Big), \qquad
        s_i = 2^{L - \ell_i}, \qquad \sum_i s_i = N_0 2^L,

    with N_0 = ``base``, L = ``depth`` and ℓ_i the cell's level (``levels``).

    Parameters
    ----------
    base : int
        N_0, the number of base (level-0) cells.
    depth : int
        L, the finest level: the finest width is 2π/(N_0 2^L).
    edges : ndarray of int64, shape (N,)
        Left edges e_i in finest units, increasing from 0.
    sizes : ndarray of int64, shape (N,)
        Cell sizes s_i in finest units, powers of two dividing the edges.

    Examples
    --------
    >>> mesh = DyadicMesh(2, 1, np.array([0, 2, 3]), np.array([2, 1, 1]))
    >>> mesh.size, mesh.units, mesh.levels.tolist(), round(float(mesh.widths.sum()), 6)
    (3, 4, [0, 1, 1], 6.283185)
    """
    base: int
    depth: int
    edges: np.ndarray
    sizes: np.ndarray

    @property
    def size(self):
        """The number of cells N."""
        return int(self.edges.size)

    @property
    def units(self):
        """base · 2^depth, the number of finest-width units around the circle."""
        return self.base << self.depth

    @cached_property
    def widths(self):
        """|C_i| = s_i 2π/(N_0 2^L)."""
        return self.sizes * (2 * np.pi / self.units)

    @cached_property
    def angles(self):
        """Cell centres c_i = (e_i + s_i/2) 2π/(N_0 2^L) ∈ (0, 2π)."""
        return (self.edges + 0.5 * self.sizes) * (2 * np.pi / self.units)

    @cached_property
    def levels(self):
        """ℓ_i = L - log2 s_i."""
        return self.depth - np.log2(self.sizes).astype(np.int64)

    @cached_property
    def gaps(self):
        """Distances between consecutive centres, (|C_i| + |C_{i+1}|)/2, i = 0..N-1 (cyclic)."""
        return 0.5 * (self.widths + np.roll(self.widths, -1))

    def per_unit(self, values):
        """Cell values repeated over each cell's finest units, shape (base 2^depth,)."""
        return np.repeat(values, self.sizes)


def uniform_mesh(base, depth, level=0):
    r"""Every cell at ``level``: base 2^level equal cells.

    .. math::

        e_i = i \, 2^{L - \ell}, \qquad s_i = 2^{L - \ell}, \qquad i = 0, \dots, N_0 2^\ell - 1.

    Parameters
    ----------
    base : int
        N_0, the number of base cells (>= 1).
    depth : int
        L >= 0, the finest level of the mesh's finest grid.
    level : int
        ℓ in [0, L], the level of every cell.

    Returns
    -------
    DyadicMesh
        N_0 2^ℓ cells of width 2π/(N_0 2^ℓ).

    Raises
    ------
    ValueError
        If base is not a positive integer or depth not an integer >= 0.

    Examples
    --------
    >>> mesh = uniform_mesh(4, 2)
    >>> mesh.size, mesh.units, mesh.levels.tolist()
    (4, 16, [0, 0, 0, 0])
    >>> uniform_mesh(4, 2, level=1).size
    8
    """
    base, depth = as_count(base, "cells"), as_count(depth, "depth", minimum=0)
    size = 1 << (depth - level)
    edges = np.arange(0, base << depth, size, dtype=np.int64)
    return DyadicMesh(base, depth, edges, np.full(edges.size, size, dtype=np.int64))


def _dilate(mask, radius):
    """The periodic mask widened by ``radius`` units on each side."""
    if radius <= 0 or not mask.any():
        return mask
    n = mask.size
    radius = min(radius, n)
    padded = np.concatenate([mask[n - radius:], mask, mask[:radius]]).astype(np.int64)
    total = np.concatenate([[0], np.cumsum(padded)])
    return total[2 * radius + 1:] - total[:n] > 0


def select(mesh, wanted, buffer):
    r"""The graded DyadicMesh whose cells have at least the levels ``wanted`` (one per cell of
    ``mesh``) with ``buffer`` cells of each level around the finer ones (module docstring).

    Every finest unit x gets the target level

    .. math::

        \tau(x) = \max\{\ell_i : \operatorname{dist}(x, C_i) \le b \, h_{\ell_i}\},

    b = ``buffer``, h_ℓ the level-ℓ width; it is then graded (τ ≥ ℓ widened by b level-(ℓ-1) widths
    gets τ ≥ ℓ - 1) and every cell whose span has max τ above its level is split.

    Parameters
    ----------
    mesh : DyadicMesh
        The current mesh.
    wanted : array_like of int, shape (mesh.size,)
        The level each cell of ``mesh`` wants (clipped to [0, depth]).
    buffer : int
        b >= 0, cells of each level around the finer ones (neighbours differ by one level at most
        when b >= 1).

    Returns
    -------
    DyadicMesh
        The new mesh, on the same finest grid.

    Examples
    --------
    >>> coarse = uniform_mesh(4, 2)
    >>> select(coarse, [2, 0, 0, 0], buffer=0).levels.tolist()
    [2, 2, 2, 2, 0, 0, 0]
    >>> select(coarse, [2, 0, 0, 0], buffer=1).levels.tolist()
    [2, 2, 2, 2, 2, 2, 1, 0, 1, 2, 2]
    """
    depth, n = mesh.depth, mesh.units
    wanted = np.clip(np.asarray(wanted, dtype=np.int64), 0, depth)
    target = np.zeros(n, dtype=np.int64)
    for level in np.unique(wanted[wanted > 0]):
        target = np.maximum(target, level * _dilate(mesh.per_unit(wanted == level), buffer << (depth - level)))
    for level in range(depth, 1, -1):
        widened = _dilate(target >= level, buffer << (depth - level + 1))
        target = np.maximum(target, (level - 1) * widened)
    edges = np.arange(0, n, 1 << depth, dtype=np.int64)
    for level in range(depth):
        size = 1 << (depth - level)
        sizes = np.diff(np.append(edges, n))
        split = (sizes == size) & (np.maximum.reduceat(target, edges) > level)
        if not split.any():
            continue
        edges = np.sort(np.concatenate([edges, edges[split] + size // 2]))
    return DyadicMesh(mesh.base, depth, edges, np.diff(np.append(edges, n)))


def downstream(mesh, levels, reach):
    r"""Each cell's level carried downstream: every cell meeting the arc that cell i sweeps when
    moved by ``reach[i]`` radians (forward for reach > 0, backward for reach < 0) gets at least ℓ_i.

    .. math::

        \ell'_j = \max\{\ell_i : C_j \cap (C_i + [\min(0, r_i), \max(0, r_i)]) \neq \emptyset\},

    the arcs rounded out to whole finest units (an arc longer than the circle covers it).

    Parameters
    ----------
    mesh : DyadicMesh
        The cells.
    levels : array_like of int, shape (mesh.size,)
        ℓ_i, the level each cell wants.
    reach : array_like of float, shape (mesh.size,)
        r_i, the signed distance (radians) cell i's level is carried.

    Returns
    -------
    ndarray of int64, shape (mesh.size,)
        ℓ' ≥ ℓ.

    Examples
    --------
    >>> mesh = uniform_mesh(8, 1)                   # base cells of width π/4
    >>> downstream(mesh, [2, 0, 0, 0, 0, 0, 0, 1], [1.0, 0, 0, 0, 0, 0, 0, -0.1]).tolist()
    [2, 2, 2, 0, 0, 0, 1, 1]
    >>> downstream(mesh, [0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0.1]).tolist()     # across θ = 0
    [1, 0, 0, 0, 0, 0, 0, 1]
    """
    levels, reach = np.asarray(levels, dtype=np.int64), np.asarray(reach, dtype=float)
    n = mesh.units
    steps = np.minimum(np.ceil(np.abs(reach) * (n / (2 * np.pi))), n).astype(np.int64)
    start = mesh.edges - np.where(reach < 0, steps, 0)
    stop = mesh.edges + mesh.sizes + np.where(reach > 0, steps, 0)
    target = np.zeros(n, dtype=np.int64)
    for level in np.unique(levels[levels > 0]):
        mine = levels == level
        count = np.zeros(3 * n + 1, dtype=np.int64)          # arcs in [-n, 2n] units: three turns, folded
        np.add.at(count, start[mine] + n, 1)
        np.add.at(count, stop[mine] + n, -1)
        covered = np.cumsum(count[:-1]).reshape(3, n).sum(axis=0) > 0
        target = np.maximum(target, level * covered)
    return np.maximum(levels, np.maximum.reduceat(target, mesh.edges))


def minmod_slopes(rho, mesh):
    r"""The minmod slopes σ_i of cell densities on a DyadicMesh, per unit angle, g the centre gaps (cyclic).

    .. math::

        \sigma_i = \operatorname{minmod}\Big(\frac{\rho_{i+1} - \rho_i}{g_i},
        \frac{\rho_i - \rho_{i-1}}{g_{i-1}}\Big), \qquad
        \operatorname{minmod}(a, b) = \begin{cases} a & ab > 0, \ |a| < |b| \\
        b & ab > 0, \ |a| \ge |b| \\ 0 & ab \le 0. \end{cases}

    Parameters
    ----------
    rho : ndarray, shape (N,)
        Cell densities.
    mesh : DyadicMesh
        The mesh of ``rho`` (its ``gaps`` g_i between consecutive centres).

    Returns
    -------
    ndarray, shape (N,)
        σ_i: the linear reconstruction ρ_i + σ_i (θ - c_i) stays between the neighbours' values.

    Examples
    --------
    >>> mesh = uniform_mesh(4, 2)
    >>> sigma = minmod_slopes(np.array([1.0, 2.0, 4.0, 3.0]), mesh)
    >>> (sigma * mesh.gaps).tolist()         # in units of the cell width: 0 at the extrema
    [0.0, 1.0, 0.0, -1.0]
    """
    right = (np.roll(rho, -1) - rho) / mesh.gaps
    left = np.roll(right, 1)
    return np.where(left * right > 0, np.where(np.abs(left) < np.abs(right), left, right), 0.0)


def transfer(old, new, rho):
    r"""Cell densities on ``new`` from those on ``old`` (module docstring): conservative, ≥ 0, local.

    An old cell i split into new cells D_j gives D_j

    .. math::

        M_{ij} = m_i \frac{I_{ij}}{\sum_k I_{ik}}, \qquad
        I_{ij} = \max\big(0, |D_j| (\rho_i + \sigma_i (c_j - c_i))\big),

    m_i = ρ_i |C_i| and σ_i the ``minmod_slopes``; a new cell that is a union of old cells gets the
    sum of their masses.

    Parameters
    ----------
    old, new : DyadicMesh
        Meshes on the same finest grid (equal ``units``).
    rho : ndarray, shape (old.size,)
        Cell densities on ``old``.

    Returns
    -------
    ndarray, shape (new.size,)
        Cell densities on ``new``, with the same total mass to round-off, ≥ 0.

    Raises
    ------
    ValueError
        If the meshes have different finest grids.

    Examples
    --------
    >>> old = uniform_mesh(4, 2)
    >>> new = select(old, [2, 0, 0, 0], buffer=1)
    >>> rho = np.array([1.0, 2.0, 4.0, 3.0])
    >>> moved = transfer(old, new, rho)
    >>> bool(np.isclose(moved @ new.widths, rho @ old.widths)), transfer(new, old, moved).tolist()
    (True, [1.0, 2.0, 4.0, 3.0])
    """
    if old.units != new.units:
        raise ValueError(f"meshes of different finest grids ({old.units} and {new.units} units)")
    masses = rho * old.widths
    owner = np.searchsorted(old.edges, new.edges, side="right") - 1      # the old cell holding each new edge
    inside = new.sizes <= old.sizes[owner]                               # new cell within one old cell
    out = np.empty(new.size)
    if (~inside).any():                                                  # unions of old cells: sum their masses
        firsts = np.searchsorted(old.edges, new.edges[~inside])
        lasts = np.searchsorted(old.edges, new.edges[~inside] + new.sizes[~inside])
        bounds = np.column_stack([firsts, lasts]).ravel()
        out[~inside] = np.add.reduceat(np.append(masses, 0.0), bounds)[::2]
    if inside.any():
        i, j = owner[inside], np.flatnonzero(inside)
        slope = minmod_slopes(rho, old)
        share = np.maximum(0.0, new.widths[j] * (rho[i] + slope[i] * (new.angles[j] - old.angles[i])))
        norm = np.bincount(i, share, minlength=old.size)
        out[j] = np.where(norm[i] > 0, masses[i] * share / np.where(norm[i] > 0, norm[i], 1.0),
                          masses[i] * new.sizes[j] / old.sizes[i])
    return out / new.widths
