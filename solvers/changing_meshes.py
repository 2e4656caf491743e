"""What the adaptive finite-volume solvers (S^1 and S^2) share once a run is done: the outputs on
meshes that change over time packed into one ``DensitySolution``, the energy change across the
remeshes, and the pinned clusters found on each stretch of outputs that share a mesh.
"""
from functools import partial

import numpy as np

from .energy_report import energy_dips, pinned_on_fixed_mesh
from .results import DensitySolution

__all__ = ["stretches", "remesh_energy", "pinned_on_stretches", "padded_solution"]


def stretches(meshes):
    """(first, stop) index ranges of consecutive outputs on the same mesh object.

    Example
    -------
    >>> a, b = object(), object()
    >>> list(stretches([a, a, b, a]))
    [(0, 2), (2, 3), (3, 4)]
    """
    first = 0
    for k in range(1, len(meshes) + 1):
        if k == len(meshes) or meshes[k] is not meshes[first]:
            yield first, k
            first = k


def remesh_energy(jumps, sign):
    """info["remesh_energy"]: the relative changes δ = (E_after - E_before)/|E_before| across the
    remeshes, the largest drop max(-s δ) and rise max(s δ) (s = ``sign`` of the dynamics: +1 when
    E_β should rise), 0.0 when there are none."""
    drops = [-sign * j for j in jumps]
    return dict(changes=[float(j) for j in jumps], largest_drop=max([0.0] + drops),
                largest_rise=max([0.0] + [-d for d in drops]))


def pinned_on_stretches(t, meshes, rhos, adjacency, points, areas, field, size):
    """Cells pinned (``energy_report.pinned_on_fixed_mesh``) on every stretch of at least two
    outputs on one mesh; returns [(mesh, cell indices)].  ``adjacency(mesh)``, ``points(mesh)``,
    ``areas(mesh)`` and ``size(mesh)`` describe a mesh, ``field(mesh, rho)`` is the particle field
    (N, d) of densities ``rho`` at its cells."""
    found = []
    for first, stop in stretches(meshes):
        if stop - first < 2:
            continue
        mesh = meshes[first]
        block = np.array(rhos[first:stop])
        cells = pinned_on_fixed_mesh(t[first:stop], block * areas(mesh), adjacency(mesh), points(mesh),
                                     partial(_field_at, field, mesh, block), size(mesh))
        if len(cells):
            found.append((mesh, cells))
    return found


def _field_at(field, mesh, block, k):
    return field(mesh, block[k])


def padded_solution(t, points, areas, rhos, energy, model, info, sign=1.0):
    """A DensitySolution of outputs on changing meshes: lists of each output's cell centres,
    measures and densities, zero-padded to the largest mesh, with ``cells`` the sizes; with
    ``energy`` (m,) also info["energy_dips"]."""
    size = max(len(r) for r in rhos)
    m = len(rhos)
    pts, ars, rho = np.zeros((m, size, points[0].shape[1])), np.zeros((m, size)), np.zeros((m, size))
    for k in range(m):
        n = len(rhos[k])
        pts[k, :n], ars[k, :n], rho[k, :n] = points[k], areas[k], rhos[k]
    if energy is not None:
        info["energy_dips"] = energy_dips(energy, sign)
    return DensitySolution(t=t, points=pts, areas=ars, rho=rho, mass=np.einsum("kn,kn->k", rho, ars), energy=energy,
                           model=model, info=info, cells=np.array([len(r) for r in rhos]))
