r"""Sparse solves (I + hA) x = b for the transport matrices of the density engines: x >= 0 with the
mass of b, for every step h (the linear algebra of the linearly implicit schemes ``schemes.ImplicitEuler``
and ``schemes.MPRK22``).

With the first-order upwind flux, every density engine's semi-discrete system has the form

.. math::

    \frac{d\rho}{dt} = -A(\rho)\,\rho,

A(ρ) = ``Operator.linear_part(ρ)`` (``contract.upwind_matrix``) the transport matrix of the field
frozen at ρ.  If c_ji ≥ 0 is the rate at which mass leaves cell j for its neighbour i per unit
density of j and w_i > 0 the cell measures,

.. math::

    A_{ij} = -c_{ji}/w_i \ (i \ne j), \qquad A_{jj} = \sum_i c_{ji}/w_j, \qquad \sum_i w_i A_{ij} = 0:

a non-negative diagonal, non-positive off-diagonal entries and zero column sums in the mass
weighting, w^T A = 0.  For every h > 0, W(I + hA), W = diag(w), then has a positive diagonal,
non-positive off-diagonal entries, and each diagonal entry w_j (1 + h A_jj) exceeds the sum
h w_j A_jj of the moduli of the rest of its column by w_j: a strictly column-diagonally dominant
Z-matrix, hence a non-singular M-matrix, with a non-negative inverse.  So

- **positivity**: ρ ≥ 0 implies (I + hA)^{-1} ρ = (W(I + hA))^{-1} W ρ ≥ 0, for every h;
- **conservation**: w^T (I + hA) x = w^T x, so the solution of (I + hA) x = ρ has the mass w^T ρ.

The solve never needs w: any A with this sign pattern and some positive w with w^T A = 0 qualifies.

Gaussian elimination of a column-diagonally-dominant M-matrix needs no row exchanges, and with
diagonal pivots it keeps the sign pattern in floating point: the multipliers and the off-diagonal
entries of the factors are ≤ 0, so the triangular solves only add non-negative numbers and the
computed solution is ≥ 0 exactly, not only to round-off.  The mass w^T x differs from w^T b by the
LU's backward error, ε h max|A| relative at worst (measured: 3e-14 at h = 1e4 on 2048 cells of S¹,
SA β = 3).

- On S¹ the matrix is cyclic tridiagonal: a dedicated O(N) elimination in the natural order (the
  corners' fill gathered in one border row and column), 0.05 ms at 2048 cells, against 0.6-3 ms for
  SuperLU on the same matrix.
- Otherwise (S², the neighbour graph of a Voronoi mesh, six neighbours per cell; the zonal and
  causal grids) ``scipy.sparse.linalg.splu`` (SuperLU) with a symmetric minimum-degree ordering,
  diagonal pivots and SymmetricMode; on icosphere(5) (10242 cells) one factorisation and solve takes
  about 30 ms, with 4x the non-zeros of A in the factors.  ``spsolve`` runs the same SuperLU without
  these options (its row exchanges may mix signs).  Krylov solvers give neither positivity nor
  conservation to round-off, and I + hA grows ill-conditioned like h max|A|: unpreconditioned
  BiCGSTAB took 30x longer than SuperLU at h = 0.1 on icosphere(5) and broke down at h = 1e3 (mass
  off by 70 %).
"""
from __future__ import annotations

from typing import Callable

from . import _numba_env  # noqa: F401

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
from numba import njit

__all__ = ["m_matrix_solve", "m_matrix_factor"]


def m_matrix_solve(matrix: scipy.sparse.sparray | scipy.sparse.spmatrix, h: float, rhs: np.ndarray) -> np.ndarray:
    r"""x = (I + h A)^{-1} b for a transport matrix A, non-negative and with the mass of b.

    A must have a non-negative diagonal, non-positive off-diagonal entries and w^T A = 0 for some
    w > 0 (module docstring); then x ≥ 0 for b ≥ 0 and every h > 0.  Elimination with diagonal pivots
    (an O(N) pass when A is cyclic tridiagonal, as on S¹; SuperLU with a symmetric minimum-degree
    ordering otherwise) keeps the factors' sign pattern, so x ≥ 0 holds in floating point, and
    w^T x = w^T b up to the LU's backward error.

    Parameters
    ----------
    matrix : scipy sparse matrix, shape (N, N)
        A.
    h : float
        h > 0.
    rhs : ndarray, shape (N,)
        b.

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.contract import upwind_matrix
    >>> from meanfield.solvers.implicit import m_matrix_solve
    >>> A = upwind_matrix([0, 1], [1, 2], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], np.ones(3))   # 0 -> 1 -> 2
    >>> x = m_matrix_solve(A, 1e4, np.array([1.0, 0.0, 0.0]))
    >>> bool(x.min() >= 0), bool(abs(x.sum() - 1) < 1e-15), bool(x[2] > 0.999)
    (True, True, True)
    """
    return m_matrix_factor(matrix, h)(rhs)


def m_matrix_factor(matrix: scipy.sparse.sparray | scipy.sparse.spmatrix,
                    h: float) -> Callable[[np.ndarray], np.ndarray]:
    r"""The solve b ↦ (I + h A)^{-1} b of ``m_matrix_solve``, factored once for many right-hand sides.

    The same elimination and the same guarantees as ``m_matrix_solve`` (x ≥ 0 in floating point for
    b ≥ 0, the mass of b to the LU's backward error); the preconditioner of ``schemes.BackwardEuler``'s
    Newton–Krylov iteration and its Picard sweep share one factorisation.

    Parameters
    ----------
    matrix : scipy sparse matrix, shape (N, N)
        A, with the sign pattern of ``m_matrix_solve``.
    h : float
        h > 0.

    Returns
    -------
    callable
        ``solve(b)`` for b of shape (N,), returning x of shape (N,) (the same bits as
        ``m_matrix_solve(matrix, h, b)``).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.contract import upwind_matrix
    >>> from meanfield.solvers.implicit import m_matrix_factor, m_matrix_solve
    >>> A = upwind_matrix([0, 1], [1, 2], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], np.ones(3))
    >>> solve = m_matrix_factor(A, 2.0)
    >>> b = np.array([1.0, 0.0, 0.0])
    >>> bool(np.array_equal(solve(b), m_matrix_solve(A, 2.0, b))), bool(solve(b).min() >= 0)
    (True, True)
    """
    bands = _cyclic_bands(matrix, h)
    if bands is not None:         # O(N) per solve: the elimination is repeated rather than stored
        return lambda rhs: _cyclic_tridiagonal_solve(*bands, np.ascontiguousarray(rhs, dtype=float))
    n = matrix.shape[0]
    system = (scipy.sparse.identity(n, format="csc") + h * scipy.sparse.csc_array(matrix)).tocsc()
    lu = scipy.sparse.linalg.splu(system, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                  options=dict(SymmetricMode=True))
    return lu.solve


def _cyclic_bands(matrix, h):
    """(lower, diagonal, upper) of I + hA when A is cyclic tridiagonal (S¹: A_{i,i±1 mod N}), else None."""
    coo = scipy.sparse.coo_array(matrix)
    n = coo.shape[0]
    if n < 3:
        return None
    offset = (coo.col - coo.row) % n
    if not np.all((offset == 0) | (offset == 1) | (offset == n - 1)):
        return None
    bands = [h * np.bincount(coo.row[offset == k], coo.data[offset == k], minlength=n) for k in (n - 1, 0, 1)]
    bands[1] += 1.0
    return bands


@njit(cache=True)
def _cyclic_tridiagonal_solve(lower, diag, upper, rhs):
    """Solve M x = b, M[i, i-1] = lower[i], M[i, i] = diag[i], M[i, i+1] = upper[i] (indices mod N).

    Gaussian elimination in the natural order with diagonal pivots (cells 0..N-2, then the border cell
    N-1, which collects the fill of the two corners): for an M-matrix every multiplier and every
    off-diagonal entry of the factors is <= 0, so the substitutions only add non-negative terms."""
    n = rhs.size
    last = n - 1
    d = diag[:last].copy()
    up = upper[:last].copy()
    up[last - 1] = 0.0
    border = np.zeros(last)              # the factors' last column, rows 0..N-2
    border[0] += lower[0]
    border[last - 1] += upper[last - 1]
    d_last = diag[last]
    s = upper[last]                      # the last row's entry in the column being eliminated
    mult = np.empty(last)
    mult_last = np.empty(last)
    for k in range(last):
        mult_last[k] = s / d[k]
        if k + 1 < last:
            mult[k] = lower[k + 1] / d[k]
            d[k + 1] -= mult[k] * up[k]
            border[k + 1] -= mult[k] * border[k]
            s = (lower[last] if k + 1 == last - 1 else 0.0) - mult_last[k] * up[k]
        d_last -= mult_last[k] * border[k]
    y = rhs.copy()
    for k in range(last):
        if k + 1 < last:
            y[k + 1] -= mult[k] * y[k]
        y[last] -= mult_last[k] * y[k]
    x = np.empty(n)
    x[last] = y[last] / d_last
    x[last - 1] = (y[last - 1] - border[last - 1] * x[last]) / d[last - 1]
    for k in range(last - 2, -1, -1):
        x[k] = (y[k] - up[k] * x[k + 1] - border[k] * x[last]) / d[k]
    return x
