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

__all__ = ["DyadicMesh", "uniform_mesh", "select", "transfer", "minmod_slopes"]


@dataclass(frozen=True, eq=False)
class DyadicMesh:
    """Cells [e_i, e_i + s_i) in units of the finest width 2π/(base 2^depth), ``edges`` increasing
    from 0, ``sizes`` powers of two dividing the edges, Σ sizes = base 2^depth."""
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
    """Every cell at ``level``: base 2^level equal cells."""
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
    """The graded DyadicMesh whose cells have at least the levels ``wanted`` (one per cell of
    ``mesh``) with ``buffer`` cells of each level around the finer ones (module docstring)."""
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


def minmod_slopes(rho, mesh):
    """σ_i = minmod((ρ_{i+1} - ρ_i)/g_i, (ρ_i - ρ_{i-1})/g_{i-1}), g the centre gaps (cyclic)."""
    right = (np.roll(rho, -1) - rho) / mesh.gaps
    left = np.roll(right, 1)
    return np.where(left * right > 0, np.where(np.abs(left) < np.abs(right), left, right), 0.0)


def transfer(old, new, rho):
    """Cell densities on ``new`` from those on ``old`` (module docstring): conservative, ≥ 0, local."""
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
