"""What a finite-volume run says about its energy: dips of E_β between outputs, and clusters pinned
in one cell although their particle velocity moves them.

For V = I the mean-field dynamics raises E_β (V = -I lowers it); a discrete scheme that moves
one-cell clusters cannot keep its cell-measure E_β monotone (docs/finite_volumes.md), and one that
keeps it monotone (the potential-difference fluxes ``muscl``, ``tpfa``) pins such clusters.  A run
reports the first as ``info["energy_dips"]`` and warns about the second.
"""
import warnings

import numpy as np

__all__ = ["energy_dips", "PinnedClusterWarning", "pinned_cells"]

DIP_TOL = 1e-9     # relative changes below this are the energy evaluation's own error (spectral sums: 1e-10)


class PinnedClusterWarning(UserWarning):
    """Mass stuck in a one-cell cluster whose particle velocity is not zero."""


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

    Example
    -------
    >>> energy_dips([1.0, 1.1, 1.09, 1.2])
    {'count': 1, 'largest': 0.00909090909090911}
    """
    e = np.asarray(energy, dtype=float)
    if e.size < 2 or not np.all(np.isfinite(e)):
        return dict(count=0, largest=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dip = -sign * np.diff(e) / np.abs(e[:-1])
    dip = dip[np.isfinite(dip) & (dip > tol)]
    return dict(count=int(dip.size), largest=float(dip.max()) if dip.size else 0.0)


def pinned_cells(masses, neighbours_mass, speed, size, elapsed, min_mass=1e-3, alone=1e-2):
    """Cells holding a one-cell cluster that its particle velocity should have moved out.

    Cell i holds a one-cell cluster when m_i ≥ ``min_mass`` and its neighbours hold less than
    ``alone`` · m_i together; it is pinned when it held one at two consecutive outputs and the
    particle velocity |X_i| at the cell would have carried the cluster further than the cell's
    size in between: |X_i| · elapsed > size_i.

    Parameters
    ----------
    masses : (2, N) cell masses at the two outputs (on the same cells).
    neighbours_mass : (2, N) the total mass of each cell's neighbours at the two outputs.
    speed : (N,) |X_i| at the later output.
    size : (N,) cell sizes (width on S^1, sqrt(area) on S^2).
    elapsed : time between the two outputs.

    Returns
    -------
    (K,) indices of the pinned cells.

    Example
    -------
    >>> pinned_cells(np.array([[0.5, 0.0], [0.5, 0.0]]), np.zeros((2, 2)), np.array([0.1, 0.0]), np.ones(2), 20.0)
    array([0])
    """
    masses, neighbours_mass = np.asarray(masses), np.asarray(neighbours_mass)
    single = (masses >= min_mass) & (neighbours_mass < alone * masses)
    return np.flatnonzero(single[0] & single[1] & (np.asarray(speed) * elapsed > np.asarray(size)))


def warn_pinned(cells, where, flux):
    """A PinnedClusterWarning naming the pinned cells (nothing if there are none)."""
    if len(cells):
        warnings.warn(f"{len(cells)} one-cell cluster(s) pinned ({where}) with flux={flux!r}: their particle "
                      f"velocity would have moved them more than a cell, but the scheme kept them in place (the "
                      f"potential-difference fluxes 'muscl' and 'tpfa' do this); use flux='upwind2'",
                      PinnedClusterWarning, stacklevel=3)
