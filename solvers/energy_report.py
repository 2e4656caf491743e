"""What a finite-volume run says about its energy: dips of E_β between outputs, and clusters pinned
in one cell although their particle velocity moves them.

For V = I the mean-field dynamics raises E_β (V = -I lowers it); a discrete scheme that moves
one-cell clusters cannot keep its cell-measure E_β monotone (docs/finite_volumes.md), and one that
keeps it monotone (the potential-difference fluxes ``muscl``, ``tpfa``) pins such clusters.  A run
reports the first as ``info["energy_dips"]`` and warns about the second.
"""
import warnings

import numpy as np
import scipy.sparse

__all__ = ["energy_dips", "PinnedClusterWarning", "clusters_in_cells", "pinned_cells", "pinned_on_fixed_mesh",
           "detector_times", "PINNING_FLUXES", "mesh_adjacency",
           "ring_adjacency", "warn_pinned"]

DIP_TOL = 1e-9     # relative changes below this are the energy evaluation's own error (spectral sums: 1e-10)
PINNING_FLUXES = ("muscl", "tpfa")     # the potential-difference fluxes, which keep E_β monotone and pin
DETECTOR_SAMPLES = 33                  # states the pinning detector sees at least, however sparse t_eval


def detector_times(t_eval, flux, samples=DETECTOR_SAMPLES):
    r"""The times a run with ``flux`` stops at: ``t_eval``, and for the fluxes that pin
    (``PINNING_FLUXES``) equispaced times as well, so that ``pinned_on_fixed_mesh`` sees a cluster
    stay in its cell however sparse the outputs are (with t_eval = [0, T] no cluster exists at the
    first output, and a streak needs two).

    .. math::

        \{t_k\} \cup \{t_0 + j (t_m - t_0)/(S - 1)\}_{j=0}^{S-1}
        \quad (\text{times within } 10^{-9} (t_m - t_0) \text{ of an output dropped}).

    Parameters
    ----------
    t_eval : ndarray
        The output times (increasing).
    flux : str
        The run's flux.
    samples : int
        S, the equispaced times added.

    Returns
    -------
    times : ndarray
        The stops, increasing, containing ``t_eval``.
    outputs : ndarray of int
        The index of each output in ``times``.

    Examples
    --------
    >>> import numpy as np
    >>> times, outputs = detector_times(np.array([0.0, 8.0]), "muscl", samples=5)
    >>> times.tolist(), outputs.tolist()
    ([0.0, 2.0, 4.0, 6.0, 8.0], [0, 4])
    >>> detector_times(np.array([0.0, 8.0]), "upwind2")[0].tolist()
    [0.0, 8.0]
    """
    if flux not in PINNING_FLUXES or t_eval.size < 2:
        return t_eval, np.arange(t_eval.size)
    extra = np.linspace(t_eval[0], t_eval[-1], samples)
    gap = np.min(np.abs(extra[:, None] - t_eval[None, :]), axis=1)
    times = np.union1d(t_eval, extra[gap > 1e-9 * (t_eval[-1] - t_eval[0])])
    return times, np.searchsorted(times, t_eval)


class PinnedClusterWarning(UserWarning):
    """Mass stuck in a cluster one to three cells wide whose particle velocity is not zero.

    Issued by the density solvers (``warn_pinned``) when ``pinned_on_fixed_mesh`` finds such
    cells; the solution's ``info["pinned"]`` lists them.

    Examples
    --------
    >>> import warnings
    >>> from meanfield.solvers.energy_report import PinnedClusterWarning, warn_pinned
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_pinned([3], "t = 1", "muscl")
    >>> caught[0].category is PinnedClusterWarning
    True
    """


def energy_dips(energy, sign=1.0, tol=DIP_TOL):
    """Count and size of the steps of E_β against the dynamics' direction between outputs.

    With s = ``sign`` (+1 for V = I, where E_β should not decrease; -1 for V = -I), a dip at
    output k is δ_k = -s (E_{k+1} - E_k) / |E_k| > tol.

    Parameters
    ----------
    energy : (m,) E_β at the output times (NaN entries are skipped: no energy for that model).
    sign : +1 or -1, the direction in which the dynamics moves E_β.
    tol : relative changes at most this are round-off of the energy evaluation.

    Returns
    -------
    dict(count=number of dips, largest=the largest relative dip δ_k (0.0 if none)).

    Examples
    --------
    >>> energy_dips([1.0, 1.1, 1.09, 1.2])    # one dip, of 0.01/1.1
    {'count': 1, 'largest': 0.009090909090909097}
    """
    e = np.asarray(energy, dtype=float)
    if e.size < 2 or not np.all(np.isfinite(e)):
        return dict(count=0, largest=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dip = -sign * np.diff(e) / np.abs(e[:-1])
    dip = dip[np.isfinite(dip) & (dip > tol)]
    return dict(count=int(dip.size), largest=float(dip.max()) if dip.size else 0.0)


def clusters_in_cells(masses, adjacency, points, min_mass=1e-3, alone=1e-2):
    """The clusters a grid holds in one cell and its neighbours.

    Cell i carries a cluster when it is a local maximum of the mass, its group (i and its
    neighbours) holds G_i ≥ ``min_mass`` and the ring beyond the group holds less than ``alone`` · G_i:
    the cluster is at most about three cells wide.

    Parameters
    ----------
    masses : (N,) cell masses.
    adjacency : (N, N) scipy sparse matrix, non-zero where two cells are neighbours or equal.
    points : (N, d) cell centres.

    Returns
    -------
    carries : (N,) bool.
    centres : (N, d) the normalised mass-weighted mean of each group's centres.
    group : (N,) G_i.

    Examples
    --------
    >>> import numpy as np
    >>> masses = np.zeros(16); masses[5] = 1.0              # one cluster in cell 5 of a ring
    >>> theta = 2 * np.pi * (np.arange(16) + 0.5) / 16
    >>> points = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    >>> carries, centres, group = clusters_in_cells(masses, ring_adjacency(16), points)
    >>> np.flatnonzero(carries), bool(np.allclose(centres[5], points[5]))
    (array([5]), True)
    """
    group = adjacency @ masses
    reach = (adjacency @ adjacency) != 0
    ring = reach @ masses - group
    peak = masses >= (adjacency.multiply(masses[None, :])).max(axis=1).toarray().ravel()
    centres = adjacency @ (masses[:, None] * points)
    norm = np.linalg.norm(centres, axis=1, keepdims=True)
    centres = np.divide(centres, norm, out=np.zeros_like(centres), where=norm > 0)
    return peak & (group >= min_mass) & (ring < alone * group), centres, group


def pinned_cells(carries, centres, speed, size, elapsed):
    """Cells whose cluster stayed put although its particle velocity should have moved it.

    Pinned: the cell carries a cluster (``clusters_in_cells``) at two consecutive outputs, the
    velocity |X̄| of the group (mass-weighted mean of the particle field) would have carried it
    further than the cell's size, |X̄| · elapsed > size, and the group's centre moved less than a
    quarter of that.

    Parameters
    ----------
    carries : (2, N) bool, at the two outputs.
    centres : (2, N, d) group centres at the two outputs.
    speed : (N,) |X̄_i| at the later output.
    size : (N,) cell sizes (width on S^1, sqrt(area) on S^2).
    elapsed : time between the two outputs.

    Returns
    -------
    (K,) indices of the pinned cells.

    Examples
    --------
    >>> c = np.array([[[1.0, 0.0], [0.0, 1.0]]] * 2)
    >>> pinned_cells(np.ones((2, 2), dtype=bool), c, np.array([0.2, 0.0]), np.ones(2), 20.0)
    array([0])
    """
    moved = np.arccos(np.clip(np.sum(centres[0] * centres[1], axis=1), -1.0, 1.0))
    travel = np.asarray(speed) * elapsed
    return np.flatnonzero(carries[0] & carries[1] & (travel > np.asarray(size)) & (moved < 0.25 * travel))


def pinned_on_fixed_mesh(t, masses, adjacency, points, velocity, size):
    """The cells pinned during a run on one mesh.

    A cell is pinned when it carries a cluster (``clusters_in_cells``) through consecutive outputs
    t_a … t_b while the travel its group's velocity asks for, Σ_k |X̄(t_k)| (t_k - t_{k-1}), exceeds
    the cell's size and the group's centre moved less than a quarter of it (``pinned_cells`` for the
    whole streak).

    Parameters
    ----------
    t : (m,) output times.
    masses : (m, N) cell masses.
    adjacency : (N, N) sparse, non-zero for neighbours and on the diagonal.
    points : (N, d) cell centres.
    velocity : callable k -> (N, d) particle field at the cells at output k (called only where
        a cluster is carried at outputs k - 1 and k).
    size : (N,) cell sizes.

    Returns
    -------
    (K,) sorted indices of the pinned cells.

    Examples
    --------
    >>> import numpy as np
    >>> theta = 2 * np.pi * (np.arange(16) + 0.5) / 16
    >>> points = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    >>> masses = np.zeros((3, 16)); masses[:, 5] = 1.0      # a cluster that stays in cell 5
    >>> pull = lambda k: np.tile([0.0, 1.0], (16, 1))      # while its velocity asks it to move
    >>> pinned_on_fixed_mesh(np.array([0.0, 1.0, 2.0]), masses, ring_adjacency(16), points, pull, np.full(16, 0.4))
    array([5])
    """
    carries, start, _ = clusters_in_cells(masses[0], adjacency, points)
    travel = np.zeros(len(size))
    found = [np.zeros(0, dtype=np.int64)]
    for k in range(1, len(t)):
        current, centres, group = clusters_in_cells(masses[k], adjacency, points)
        streak = carries & current
        if np.any(streak):
            mean = adjacency @ (masses[k][:, None] * velocity(k))
            travel += np.linalg.norm(mean, axis=1) / np.maximum(group, 1e-300) * (t[k] - t[k - 1])
            found.append(pinned_cells(np.stack([streak, streak]), np.stack([start, centres]), travel, size, 1.0))
        travel[~streak] = 0.0
        start = np.where(streak[:, None], start, centres)
        carries = current
    return np.unique(np.concatenate(found))


def mesh_adjacency(cell_ptr, neighbours):
    """The sparse adjacency matrix, neighbours and diagonal, of CSR neighbour lists.

    Parameters
    ----------
    cell_ptr : array_like of int, shape (N + 1,)
    neighbours : array_like of int
        Cell i's neighbours are ``neighbours[cell_ptr[i]:cell_ptr[i+1]]``.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (N, N)
        1 where two cells are neighbours or equal.

    Examples
    --------
    >>> from meanfield.solvers.energy_report import mesh_adjacency
    >>> mesh_adjacency([0, 1, 2], [1, 0]).toarray()
    array([[1., 1.],
           [1., 1.]])
    """
    n = len(cell_ptr) - 1
    rows = np.concatenate([np.repeat(np.arange(n), np.diff(cell_ptr)), np.arange(n)])
    cols = np.concatenate([np.asarray(neighbours), np.arange(n)])
    return scipy.sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))


def ring_adjacency(n):
    """``mesh_adjacency`` of n cells on a circle, each with its two neighbours.

    Parameters
    ----------
    n : int

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n, n)

    Examples
    --------
    >>> from meanfield.solvers.energy_report import ring_adjacency
    >>> ring_adjacency(4).toarray()
    array([[1., 1., 0., 1.],
           [1., 1., 1., 0.],
           [0., 1., 1., 1.],
           [1., 0., 1., 1.]])
    """
    cols = (np.arange(n)[:, None] + np.array([-1, 1])) % n
    return mesh_adjacency(np.arange(0, 2 * n + 1, 2), cols.ravel())


def warn_pinned(cells, where, flux):
    """Issue a PinnedClusterWarning naming the pinned cells (nothing if there are none).

    Parameters
    ----------
    cells : sequence of int
        From ``pinned_on_fixed_mesh``.
    where : str
        Where the run was (for the message).
    flux : str
        The flux that pinned them.

    Returns
    -------
    None

    Examples
    --------
    >>> from meanfield.solvers.energy_report import warn_pinned
    >>> warn_pinned([], "t = 1", "muscl")      # no cells: no warning
    """
    if len(cells):
        advice = ("the potential-difference fluxes 'muscl' and 'tpfa' do this; use flux='upwind2'"
                  if flux in ("muscl", "tpfa") else "a finer mesh (or adaptive cells) carries them")
        warnings.warn(f"{len(cells)} one-cell cluster(s) pinned ({where}) with flux={flux!r}: their particle "
                      f"velocity would have moved them more than a cell, but the scheme kept them in place "
                      f"({advice})", PinnedClusterWarning, stacklevel=3)
