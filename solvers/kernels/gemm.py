"""Direct summation at BLAS speed (d <= 1024): score tiles and value tiles as matrix products.

For queries u_i = β A^T x_i (so that s_ij = <u_i, y_j> = β <x_i, A y_j>) and weighted sources
(y_j, w_j), with the running maxima M_i over the sources with w_j > 0:

    z_i = sum_j w_j e^{s_ij - M_i},   G_i = sum_j w_j e^{s_ij - M_i} y_j
    returned:  G_i / z_i  (SA)   or   G_i e^{M_i}  (USA),   and   log Φ_i = M_i + log z_i

Targets are cut into tiles of R rows and sources into blocks of C (``tiles``), both padded
(padding sources have weight 0).  One parallel job per target tile runs through the blocks:

    S^T = Y_k U^T                      (C × R, BLAS dgemm)
    online log-sum-exp over the block   (element-wise along the R targets: vectorises)
    G  <- G e^{M_old - M_new} + E Y_k   (R × d, BLAS dgemm with E = the block's w_j e^{s - M})

For d < ``BLAS_MIN_D`` both products are the register tiles ``tiles.tile_product`` (in-order FMA chains) instead:
a dgemm call with an inner dimension of a few costs more than the product.

With the causal mask (targets and sources the same tokens) a target tile runs only through the
blocks with j0 <= its last target (about half the work) and drops the sources j > i of the block
it straddles; USA then divides by the prefix weight W_i = sum_{j<=i} w_j.

Every product has R C d <= ``small.BLAS_MAX_WORK``, which OpenBLAS runs on the calling thread,
so the jobs never start threads of their own.  Memory: O((n + m) d) for the padded copies
plus O(R C) per thread.  The tiling depends on d only and no loop is reassociated, so equal
inputs give equal bits on a given machine, whatever the thread count.
"""
from .. import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit, prange

from .direct import FASTMATH, exp_nonpositive
from ..small import BLAS_MAX_WORK, NO_MASK, first_target, weighted_exponentials
from .tiles import tile_product

MAX_D = 1024     # above, the tiles (R C d <= BLAS_MAX_WORK) become too thin for dgemm
BLAS_MIN_D = 16  # below, a dgemm call costs more than the product: register tiles (tiles.tile_product)
ROWS = 32        # largest target tile
COLUMNS = 128    # largest source block


def supports(d):
    """Whether this engine handles dimension d (d <= MAX_D; measured 4-6× faster than ``kernels``
    at d = 3 to 64, one thread, so it replaces them there).

    Parameters
    ----------
    d : int
        The dimension.

    Returns
    -------
    bool

    Examples
    --------
    >>> from meanfield.solvers.kernels import gemm
    >>> gemm.supports(3), gemm.supports(2048)
    (True, False)
    """
    return d <= MAX_D


def tiles(d, n=ROWS, m=COLUMNS):
    r"""(R, C): target tile and source block for n targets, m sources in R^d, multiples of 8 with
    R C d <= BLAS_MAX_WORK, no larger than n, m rounded up (small systems are not padded to 128).

    .. math::

        R\, C\, d \le \mathtt{BLAS\_MAX\_WORK}, \qquad R \le 32, \quad C \le 128.

    Parameters
    ----------
    d : int
        The dimension.
    n, m : int
        Numbers of targets and sources (default: the largest tile and block).

    Returns
    -------
    R, C : int

    Examples
    --------
    >>> from meanfield.solvers.kernels import gemm
    >>> gemm.tiles(3), gemm.tiles(3, 5, 20), gemm.tiles(1024)
    ((32, 128), (8, 24), (8, 32))
    """
    R = min(ROWS, -(-n // 8) * 8, max(8, BLAS_MAX_WORK // (COLUMNS * d) // 8 * 8))
    return R, min(COLUMNS, -(-m // 8) * 8, BLAS_MAX_WORK // (R * d) // 8 * 8)


def _padded(a, size, dtype=np.float64):
    """a (B, k, ...) as (B, ceil(k / size), size, ...) of ``dtype``, the missing rows zero."""
    B, k = a.shape[:2]
    count = -(-k // size)
    out = np.zeros((B, count * size) + a.shape[2:], dtype)
    out[:, :k] = a
    return out.reshape((B, count, size) + a.shape[2:])


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _tiled_sums(U, Y, YT, W, normalised, causal, G, log_phi):
    """U (B, T, R, d) target tiles, Y (B, K, C, d) source blocks (YT: each transposed, (B, K, d, C))
    with weights W (B, K, C): writes G (B, T, R, d) = G_i / z_i or G_i e^{M_i} and log_phi (B, T, R)
    = M_i + log z_i; ``causal``: sums over sources j <= target i only.
    U and Y may be float32 (single-precision products); the sums are float64 in any case.
    Below ``BLAS_MIN_D`` the products are ``tiles.tile_product`` instead of dgemm calls."""
    B, T, R, d = U.shape
    K, C = Y.shape[1], Y.shape[2]
    loops = d < BLAS_MIN_D
    for job in prange(B * T):
        b = job // T
        i0 = (job - b * T) * R
        u = U[b, job - b * T]
        g = G[b, job - b * T]
        uT = np.ascontiguousarray(u.T)
        ST = np.empty((C, R), U.dtype)
        E = np.empty((R, d), U.dtype)
        ET = np.empty((d, R), U.dtype)
        mx = np.full(R, -np.inf)
        top = np.empty(R)
        scale = np.empty(R)
        z = np.zeros(R)
        for t in range(R):
            for c in range(d):
                g[t, c] = 0.0
        blocks = min(K, (i0 + R - 1) // C + 1) if causal else K
        for k in range(blocks):
            y = Y[b, k]
            w = W[b, k]
            shift = k * C - i0 if causal else NO_MASK
            if loops:
                tile_product(y.T, uT, ST, False)          # S^T[j, t] = <y_j, u_t>
            else:
                np.dot(y, u.T, ST)
            for t in range(R):
                top[t] = mx[t]
            for j in range(C):
                if w[j] > 0.0:
                    for t in range(np.uint64(first_target(j, shift, R)), np.uint64(R)):
                        top[t] = max(top[t], ST[j, t])
            for t in range(R):
                scale[t] = exp_nonpositive(mx[t] - top[t]) if top[t] > mx[t] else 1.0
                z[t] *= scale[t]
                mx[t] = top[t]
            weighted_exponentials(ST, w, mx, z, shift)
            if loops:
                tile_product(YT[b, k].T, ST, ET, False)   # E^T[c, t] = sum_j y_jc e_jt
                for c in range(d):
                    for t in range(R):
                        E[t, c] = ET[c, t]
            else:
                np.dot(ST.T, y, E)                   # E[t, c] = sum_j e_jt y_jc
            for t in range(R):
                s = scale[t]
                for c in range(d):
                    g[t, c] = g[t, c] * s + E[t, c]
        for t in range(R):
            f = 1.0 / z[t] if normalised else math.exp(mx[t])
            for c in range(d):
                g[t, c] *= f
            log_phi[b, job - b * T, t] = mx[t] + math.log(z[t])


def softmax_sums(U, y, w, normalised, dtype=np.float64, causal=False):
    r"""(G, log Φ) for queries U (B, n, d), sources y (B, m, d), weights w (B, m) >= 0:
    G_i = sum_j w_j e^{<u_i, y_j>} y_j / Φ_i (``normalised``) or without the division, and
    log Φ_i = log sum_j w_j e^{<u_i, y_j>}, by the tiled products described above; the
    products in ``dtype`` (float64 or float32), the sums and the results in float64.
    ``causal`` (n = m): the sums over j <= i only, and G_i / W_i, W_i = sum_{j<=i} w_j, unnormalised.

    .. math::

        G_i = \frac{\sum_j w_j e^{\langle u_i, y_j \rangle} y_j}{\Phi_i}, \qquad
        \log \Phi_i = \log \sum_j w_j e^{\langle u_i, y_j \rangle}.

    Parameters
    ----------
    U : ndarray, shape (B, n, d)
        Queries u_i = β A^T x_i.
    y : ndarray, shape (B, m, d)
        Sources.
    w : ndarray, shape (B, m)
        Weights >= 0.
    normalised : bool
        Divide by Φ_i (SA) or not (USA).
    dtype : {numpy.float64, numpy.float32}
        The precision of the products.
    causal : bool

    Returns
    -------
    G : ndarray, shape (B, n, d)
    log_phi : ndarray, shape (B, n)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.gemm import softmax_sums
    >>> y = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> G, log_phi = softmax_sums(y, y, np.full((1, 2), 0.5), True)
    >>> np.round(G[0], 4)
    array([[0.7311, 0.2689],
           [0.2689, 0.7311]])
    """
    B, n, d = U.shape
    R, C = tiles(d, n, y.shape[1])
    Up = _padded(U, R, dtype)
    G = np.empty(Up.shape)
    log_phi = np.empty(Up.shape[:3])
    Yp = _padded(y, C, dtype)
    _tiled_sums(Up, Yp, np.ascontiguousarray(np.swapaxes(Yp, 2, 3)), _padded(w, C), normalised, causal, G, log_phi)
    G = G.reshape(B, -1, d)[:, :n]
    if causal and not normalised:
        G = G / np.cumsum(w, axis=1)[:, :, None]
    return G, log_phi.reshape(B, -1)[:, :n]
