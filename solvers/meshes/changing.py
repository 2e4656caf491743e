"""What the adaptive finite-volume solvers (S^1 and S^2) share once a run is done: the outputs on
meshes that change over time packed into one ``DensitySolution``, the energy change across the
remeshes, and the pinned clusters found on each stretch of outputs that share a mesh.
"""
from functools import partial

import numpy as np

from ..energy_report import energy_dips, pinned_on_fixed_mesh
from ..results import DensitySolution

__all__ = ["stretches", "remesh_energy", "pinned_on_stretches", "padded_solution"]


def stretches(meshes):
    """(first, stop) index ranges of consecutive outputs on the same mesh object.

    Outputs first, ..., stop - 1 share one mesh (compared by identity, ``is``) and the output at
    ``stop`` (if any) is on another.

    Parameters
    ----------
    meshes : sequence
        The mesh object of each output, in order.

    Returns
    -------
    generator of (int, int)
        The (first, stop) pairs, covering 0, ..., len(meshes) - 1 in order.

    Examples
    --------
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
    r"""info["remesh_energy"]: the relative changes δ = (E_after - E_before)/|E_before| across the
    remeshes, the largest drop max(-s δ) and rise max(s δ) (s = ``sign`` of the dynamics: +1 when
    E_β should rise), 0.0 when there are none.

    .. math::

        \text{drop} = \max\big(0, \max_r (-s \, \delta_r)\big), \qquad
        \text{rise} = \max\big(0, \max_r s \, \delta_r\big).

    Parameters
    ----------
    jumps : sequence of float
        δ_r, the relative energy change across each remesh, in order.
    sign : float
        s = +1 when the dynamics should raise E_β, -1 when it should lower it.

    Returns
    -------
    dict
        ``changes`` (the δ_r as floats), ``largest_drop`` and ``largest_rise`` (both >= 0).

    Examples
    --------
    >>> remesh_energy([0.01, -0.002], 1.0)
    {'changes': [0.01, -0.002], 'largest_drop': 0.002, 'largest_rise': 0.01}
    >>> remesh_energy([], -1.0)
    {'changes': [], 'largest_drop': 0.0, 'largest_rise': 0.0}
    """
    drops = [-sign * j for j in jumps]
    return dict(changes=[float(j) for j in jumps], largest_drop=max([0.0] + drops),
                largest_rise=max([0.0] + [-d for d in drops]))


def pinned_on_stretches(t, meshes, rhos, adjacency, points, areas, field, size):
    """Cells pinned (``energy_report.pinned_on_fixed_mesh``) on every stretch of at least two
    outputs on one mesh; returns [(mesh, cell indices)].  ``adjacency(mesh)``, ``points(mesh)``,
    ``areas(mesh)`` and ``size(mesh)`` describe a mesh, ``field(mesh, rho)`` is the particle field
    (N, d) of densities ``rho`` at its cells.

    On a stretch the cell masses are ρ_{k,i} |C_i| (``areas``); a cell is pinned when it carries a
    cluster whose velocity asks it to travel farther than the cell's size while it stays put.

    Parameters
    ----------
    t : ndarray, shape (m,)
        Output times.
    meshes : sequence of m mesh objects
        The mesh of each output (``stretches``).
    rhos : sequence of m ndarrays
        Each output's cell densities on its mesh.
    adjacency, points, areas, size : callable
        mesh -> its (N, N) sparse adjacency (with the diagonal), (N, d) cell centres, (N,) cell
        measures and (N,) cell sizes (lengths compared with the travel).
    field : callable
        (mesh, rho) -> the particle field (N, d) at the cells.

    Returns
    -------
    list of (mesh, ndarray of int)
        The meshes with pinned cells and the sorted indices of those cells.

    Examples
    --------
    >>> from meanfield.solvers.meshes.dyadic import uniform_mesh
    >>> from meanfield.solvers.energy_report import ring_adjacency
    >>> mesh = uniform_mesh(16, 0)
    >>> rho = np.zeros(16); rho[5] = 1 / mesh.widths[5]          # a cluster that stays in cell 5
    >>> centres = lambda m: np.column_stack([np.cos(m.angles), np.sin(m.angles)])
    >>> pull = lambda m, r: np.tile([0.0, 1.0], (m.size, 1))   # while its velocity asks it to move
    >>> found = pinned_on_stretches(np.array([0.0, 1.0, 2.0]), [mesh] * 3, [rho] * 3,
    ...                             lambda m: ring_adjacency(m.size), centres, lambda m: m.widths, pull,
    ...                             lambda m: m.widths)
    >>> [(m is mesh, cells.tolist()) for m, cells in found]
    [(True, [5])]
    """
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
    r"""A DensitySolution of outputs on changing meshes: lists of each output's cell centres,
    measures and densities, zero-padded to the largest mesh, with ``cells`` the sizes; with
    ``energy`` (m,) also info["energy_dips"].

    The padding carries zero density and zero measure, so the masses are those of the meshes:

    .. math::

        M_k = \sum_{i < N_k} \rho_{k,i} \, |C_{k,i}|.

    Parameters
    ----------
    t : ndarray, shape (m,)
        Output times.
    points : sequence of m ndarrays, shapes (N_k, d)
        Each output's cell centres.
    areas : sequence of m ndarrays, shapes (N_k,)
        Each output's cell measures.
    rhos : sequence of m ndarrays, shapes (N_k,)
        Each output's cell densities.
    energy : ndarray, shape (m,), or None
        E_β at the outputs (None: not computed).
    model : SA, USA or MultiHead
        The model solved.
    info : dict
        The run's info, updated in place (``energy_dips``).
    sign : float
        +1 when the dynamics should raise E_β, -1 when it should lower it (``energy_report.energy_dips``).

    Returns
    -------
    DensitySolution
        ``points`` (m, N, d), ``areas`` and ``rho`` (m, N) with N = max N_k, ``mass`` (m,), ``cells`` (m,) = N_k.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers.meshes.dyadic import uniform_mesh, select
    >>> coarse = uniform_mesh(2, 1)
    >>> meshes = [coarse, select(coarse, [1, 0], buffer=0)]
    >>> centres = [np.column_stack([np.cos(m.angles), np.sin(m.angles)]) for m in meshes]
    >>> rhos = [np.full(m.size, 1 / (2 * np.pi)) for m in meshes]
    >>> sol = padded_solution(np.array([0.0, 1.0]), centres, [m.widths for m in meshes], rhos, None, mf.SA(1.0), {})
    >>> sol.cells.tolist(), sol.rho.shape, np.round(sol.mass, 12).tolist()
    ([2, 3], (2, 3), [1.0, 1.0])
    """
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
