"""Numba transforms for sums of zonal kernels on S^1 and S^2, O((n + m) · modes · C).

A zonal kernel with the expansion k(<x, y>) = sum_l κ_l (2l+1) P_l(<x, y>) (on S^1:
sum_k κ_k e^{ik(θ-φ)}) turns S_ic = sum_j W_jc k(<x_i, y_j>) into an *analysis* of the
weighted sources followed by a *synthesis* at the targets.

Circle, with e = y_0 + i y_1 = e^{iφ}:

    analysis    A[k, 2c] + i A[k, 2c+1] = sum_j W_jc e_j^k                (k = 0..K)
    synthesis   S_ic = sum_k Re(e_i^k) A[k, 2c] + Im(e_i^k) A[k, 2c+1]

(with A scaled by κ_0, 2κ_k in between, this is sum_k κ_k e^{ik(θ-φ)}).

Sphere, with z = y_2 and e = y_0 + i y_1 = sin θ e^{iφ}: the addition theorem
(2l+1) P_l(<x, y>) = sum_{m=0}^{l} ε_m q_lm(z_x) q_lm(z_y) Re(e_x^m conj(e_y^m)), ε_0 = 1,
ε_m = 2, holds for the polynomials q_lm = P_l^m / sin^m θ normalised by

    q_00 = 1,   q_mm = sqrt((2m+1)/(2m)) q_{m-1,m-1},   q_{m+1,m} = sqrt(2m+3) z q_mm,
    q_lm = a_lm (z q_{l-1,m} - b_lm q_{l-2,m}),
    a_lm = sqrt((4l²-1)/(l²-m²)),  b_lm = sqrt(((l-1)²-m²)/(4(l-1)²-1))

(the fully normalised associated Legendre recurrence times sqrt(4π)/sin^m θ; using the
powers e^m instead of sin^m θ e^{imφ} avoids angles and poles).  Then

    analysis    A[m, l, 2c] + i A[m, l, 2c+1] = sum_j W_jc q_lm(z_j) e_j^m
    synthesis   S_ic = sum_{m <= l} q_lm(z_i) (Re(e_i^m) A[m, l, 2c] + Im(e_i^m) A[m, l, 2c+1])

and scaling A[m, l] by ε_m κ_l in between gives S_ic = sum_j W_jc k(<x_i, y_j>).

Points are processed in groups of ``LANES`` (the SIMD direction); the analysis splits the
sources into a number of chunks that depends only on m (not on the thread count), so the
result is deterministic.  Powers e^m below ``TINY`` are flushed to zero: their terms are
below 1e-200 of the sum and would otherwise turn subnormal.
"""
from .. import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit, prange

from .direct import FASTMATH   # FMA only, no reassociation: cached and fresh code agree to the bit

LANES = 64
CHUNK = 2048      # sources per analysis chunk (at most MAX_CHUNKS chunks)
MAX_CHUNKS = 32
TINY = 1e-200


def _chunks(m):
    count = int(min(MAX_CHUNKS, max(1, -(-m // CHUNK))))
    return np.linspace(0, m, count + 1).astype(np.int64)


# ----------------------------------------------------------------------------- circle

@njit(cache=True, fastmath=FASTMATH)
def _circle_analysis_chunk(y, W, j0, j1, A):
    K = A.shape[0] - 1
    C = W.shape[1]
    er = np.empty(LANES)
    ei = np.empty(LANES)
    for g in range(j0, j1, LANES):
        P = min(LANES, j1 - g)
        for p in range(P):
            er[p] = 1.0
            ei[p] = 0.0
        for k in range(K + 1):
            if k > 0:
                for p in range(P):
                    re = er[p] * y[g + p, 0] - ei[p] * y[g + p, 1]
                    ei[p] = er[p] * y[g + p, 1] + ei[p] * y[g + p, 0]
                    er[p] = re
            for c in range(C):
                sr = 0.0
                si = 0.0
                for p in range(P):
                    sr += W[g + p, c] * er[p]
                    si += W[g + p, c] * ei[p]
                A[k, 2 * c] += sr
                A[k, 2 * c + 1] += si


@njit(parallel=True, cache=True)
def _circle_analysis(y, W, bounds, parts):
    for q in prange(bounds.size - 1):
        _circle_analysis_chunk(y, W, bounds[q], bounds[q + 1], parts[q])


def circle_analysis(y, W, K):
    r"""The analysis of weighted sources on the circle: A (K+1, 2C) with A[k, 2c] + i A[k, 2c+1] = sum_j W_jc e_j^k.

    .. math::

        A_{k, 2c} + i A_{k, 2c+1} = \sum_j W_{jc}\, (y_{j0} + i y_{j1})^k, \qquad k = 0, \dots, K.

    Parameters
    ----------
    y : ndarray, shape (m, 2)
        Sources (unit vectors), C-contiguous float64.
    W : ndarray, shape (m, C)
        Weights, C-contiguous float64.
    K : int
        The largest frequency.

    Returns
    -------
    ndarray, shape (K + 1, 2C)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.harmonics import circle_analysis
    >>> circle_analysis(np.array([[0.0, 1.0]]), np.ones((1, 1)), 2)
    array([[ 1.,  0.],
           [ 0.,  1.],
           [-1.,  0.]])
    """
    bounds = _chunks(y.shape[0])
    parts = np.zeros((bounds.size - 1, K + 1, 2 * W.shape[1]))
    _circle_analysis(y, W, bounds, parts)
    return parts.sum(axis=0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def circle_synthesis(x, A, S):
    r"""The synthesis at targets on the circle: S[i, c] = sum_k Re(e_i^k) A[k, 2c] + Im(e_i^k) A[k, 2c+1].

    .. math::

        S_{ic} = \sum_{k=0}^{K} \operatorname{Re}(e_i^k) A_{k, 2c} + \operatorname{Im}(e_i^k) A_{k, 2c+1},
        \qquad e_i = x_{i0} + i x_{i1}.

    Parameters
    ----------
    x : ndarray, shape (n, 2)
        Targets (unit vectors).
    A : ndarray, shape (K + 1, 2C)
        Coefficients (``circle_analysis``, scaled).
    S : ndarray, shape (n, C)
        Receives the sums.

    Returns
    -------
    None

    Examples
    --------
    sum_{k<=2} cos(k(θ - φ)) for a source and a target a quarter turn apart:

    >>> import numpy as np
    >>> from meanfield.solvers.kernels.harmonics import circle_analysis, circle_synthesis
    >>> A = circle_analysis(np.array([[0.0, 1.0]]), np.ones((1, 1)), 2)
    >>> S = np.empty((2, 1))
    >>> circle_synthesis(np.array([[1.0, 0.0], [0.0, 1.0]]), A, S)
    >>> S[:, 0] + 0.0
    array([0., 3.])
    """
    n = x.shape[0]
    K = A.shape[0] - 1
    C = S.shape[1]
    for grp in prange((n + LANES - 1) // LANES):
        g = grp * LANES
        P = min(LANES, n - g)
        er = np.ones(LANES)
        ei = np.zeros(LANES)
        acc = np.zeros((C, LANES))
        for k in range(K + 1):
            if k > 0:
                for p in range(P):
                    re = er[p] * x[g + p, 0] - ei[p] * x[g + p, 1]
                    ei[p] = er[p] * x[g + p, 1] + ei[p] * x[g + p, 0]
                    er[p] = re
            for c in range(C):
                ar = A[k, 2 * c]
                ai = A[k, 2 * c + 1]
                for p in range(P):
                    acc[c, p] += er[p] * ar + ei[p] * ai
        for p in range(P):
            for c in range(C):
                S[g + p, c] = acc[c, p]


# ----------------------------------------------------------------------------- sphere

@njit(cache=True)
def legendre_tables(L):
    r"""Recurrence coefficients of the normalised polynomials q_lm: diag[m], a[m, l] = a_lm, b[m, l] = b_lm.

    .. math::

        \mathrm{diag}_m = \sqrt{\frac{2m+1}{2m}}, \qquad
        a_{lm} = \sqrt{\frac{4l^2 - 1}{l^2 - m^2}}, \qquad
        b_{lm} = \sqrt{\frac{(l-1)^2 - m^2}{4(l-1)^2 - 1}}

    (a[m, m+1] = sqrt(2m + 3); see the module docstring).

    Parameters
    ----------
    L : int
        The largest degree.

    Returns
    -------
    diag : ndarray, shape (L + 1,)
    a, b : ndarray, shape (L + 1, L + 1)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.kernels.harmonics import legendre_tables
    >>> diag, a, b = legendre_tables(2)
    >>> np.round(diag, 4), round(float(a[0, 1]) ** 2, 12)
    (array([1.    , 1.2247, 1.118 ]), 3.0)
    """
    diag = np.ones(L + 1)
    a = np.zeros((L + 1, L + 1))
    b = np.zeros((L + 1, L + 1))
    for m in range(1, L + 1):
        diag[m] = math.sqrt((2.0 * m + 1.0) / (2.0 * m))
    for m in range(L + 1):
        if m + 1 <= L:
            a[m, m + 1] = math.sqrt(2.0 * m + 3.0)
        for l in range(m + 2, L + 1):
            a[m, l] = math.sqrt((4.0 * l * l - 1.0) / (l * l - m * m))
            b[m, l] = math.sqrt(((l - 1.0) ** 2 - m * m) / (4.0 * (l - 1.0) ** 2 - 1.0))
    return diag, a, b


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _next_power(pts, g, P, er, ei, qmm, d):
    """e^m = e^{m-1} e and q_mm = d q_{m-1,m-1} for the group's points (tiny powers flushed)."""
    for p in range(P):
        re = er[p] * pts[g + p, 0] - ei[p] * pts[g + p, 1]
        im = er[p] * pts[g + p, 1] + ei[p] * pts[g + p, 0]
        small = abs(re) + abs(im) < TINY
        er[p] = 0.0 if small else re
        ei[p] = 0.0 if small else im
        qmm[p] *= d


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _legendre_next(pts, g, P, m, l, a, b, qmm, q0, q1, q2):
    """q0 <- q_lm(z) at the points pts[g:g+P] from q_{l-1,m} (q1) and q_{l-2,m} (q2):
    q_mm, then q_{m+1,m} = a_{m,m+1} z q_mm, then q_lm = a_lm (z q_{l-1,m} - b_lm q_{l-2,m})."""
    if l == m:
        for p in range(P):
            q0[p] = qmm[p]
    elif l == m + 1:
        for p in range(P):
            q0[p] = a[m, l] * pts[g + p, 2] * q1[p]
    else:
        alm = a[m, l]
        blm = b[m, l]
        for p in range(P):
            q0[p] = alm * (pts[g + p, 2] * q1[p] - blm * q2[p])


@njit(cache=True, fastmath=FASTMATH)
def _sphere_analysis_chunk(y, W, j0, j1, diag, a, b, A):
    L = A.shape[0] - 1
    C = W.shape[1]
    er = np.empty(LANES)
    ei = np.empty(LANES)
    qmm = np.empty(LANES)
    q0 = np.empty(LANES)
    q1 = np.empty(LANES)
    q2 = np.empty(LANES)
    U = np.empty((2 * C, LANES))
    for g in range(j0, j1, LANES):
        P = min(LANES, j1 - g)
        for p in range(P):
            er[p] = 1.0
            ei[p] = 0.0
            qmm[p] = 1.0
        for m in range(L + 1):
            if m > 0:
                _next_power(y, g, P, er, ei, qmm, diag[m])
            for c in range(C):
                for p in range(P):
                    U[2 * c, p] = W[g + p, c] * er[p]
                    U[2 * c + 1, p] = W[g + p, c] * ei[p]
            for l in range(m, L + 1):
                _legendre_next(y, g, P, m, l, a, b, qmm, q0, q1, q2)
                for k in range(2 * C):
                    s = 0.0
                    for p in range(P):
                        s += q0[p] * U[k, p]
                    A[m, l, k] += s
                q2, q1, q0 = q1, q0, q2


@njit(parallel=True, cache=True)
def _sphere_analysis(y, W, bounds, diag, a, b, parts):
    for q in prange(bounds.size - 1):
        _sphere_analysis_chunk(y, W, bounds[q], bounds[q + 1], diag, a, b, parts[q])


def sphere_analysis(y, W, L):
    r"""The analysis of weighted sources on the sphere: A (L+1, L+1, 2C), A[m, l] for m <= l.

    .. math::

        A_{m, l, 2c} + i A_{m, l, 2c+1} = \sum_j W_{jc}\, q_{lm}(y_{j2})\, (y_{j0} + i y_{j1})^m.

    Parameters
    ----------
    y : ndarray, shape (m, 3)
        Sources (unit vectors), C-contiguous float64.
    W : ndarray, shape (m, C)
        Weights, C-contiguous float64.
    L : int
        The largest degree.

    Returns
    -------
    ndarray, shape (L + 1, L + 1, 2C)

    Examples
    --------
    At the north pole only the order m = 0 is seen, q_00 = 1 and q_10 = sqrt(3):

    >>> import numpy as np
    >>> from meanfield.solvers.kernels.harmonics import sphere_analysis
    >>> A = sphere_analysis(np.array([[0.0, 0.0, 1.0]]), np.ones((1, 1)), 1)
    >>> np.round(A[0, :, 0], 4), float(abs(A[1]).max())
    (array([1.    , 1.7321]), 0.0)
    """
    diag, a, b = legendre_tables(L)
    bounds = _chunks(y.shape[0])
    parts = np.zeros((bounds.size - 1, L + 1, L + 1, 2 * W.shape[1]))
    _sphere_analysis(y, W, bounds, diag, a, b, parts)
    return parts.sum(axis=0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _sphere_synthesis(x, A, diag, a, b, S):
    n = x.shape[0]
    L = A.shape[0] - 1
    C = S.shape[1]
    for grp in prange((n + LANES - 1) // LANES):
        g = grp * LANES
        P = min(LANES, n - g)
        er = np.ones(LANES)
        ei = np.zeros(LANES)
        qmm = np.ones(LANES)
        q0 = np.empty(LANES)
        q1 = np.empty(LANES)
        q2 = np.empty(LANES)
        T = np.empty((2 * C, LANES))
        acc = np.zeros((C, LANES))
        for m in range(L + 1):
            if m > 0:
                _next_power(x, g, P, er, ei, qmm, diag[m])
            for k in range(2 * C):
                for p in range(P):
                    T[k, p] = 0.0
            for l in range(m, L + 1):
                _legendre_next(x, g, P, m, l, a, b, qmm, q0, q1, q2)
                for k in range(2 * C):
                    coef = A[m, l, k]
                    for p in range(P):
                        T[k, p] += q0[p] * coef
                q2, q1, q0 = q1, q0, q2
            for c in range(C):
                for p in range(P):
                    acc[c, p] += er[p] * T[2 * c, p] + ei[p] * T[2 * c + 1, p]
        for p in range(P):
            for c in range(C):
                S[g + p, c] = acc[c, p]


def sphere_synthesis(x, A, S):
    r"""The synthesis at targets on the sphere, into S (n, C).

    .. math::

        S_{ic} = \sum_{m \le l} q_{lm}(x_{i2}) \big(\operatorname{Re}(e_i^m) A_{m, l, 2c}
        + \operatorname{Im}(e_i^m) A_{m, l, 2c+1}\big), \qquad e_i = x_{i0} + i x_{i1}.

    Parameters
    ----------
    x : ndarray, shape (n, 3)
        Targets (unit vectors).
    A : ndarray, shape (L + 1, L + 1, 2C)
        Coefficients (``sphere_analysis``, scaled by ε_m κ_l for a kernel sum).
    S : ndarray, shape (n, C)
        Receives the sums.

    Returns
    -------
    None

    Examples
    --------
    Unscaled, the transforms give sum_l (2l+1) P_l(<x, y>) (addition theorem), 1 + 3 = 4 at <x, y> = 1:

    >>> import numpy as np
    >>> from meanfield.solvers.kernels.harmonics import sphere_analysis, sphere_synthesis
    >>> pole = np.array([[0.0, 0.0, 1.0]])
    >>> A = sphere_analysis(pole, np.ones((1, 1)), 1)
    >>> S = np.empty((1, 1))
    >>> sphere_synthesis(pole, A, S)
    >>> round(float(S[0, 0]), 12)
    4.0
    """
    diag, a, b = legendre_tables(A.shape[0] - 1)
    _sphere_synthesis(x, A, diag, a, b, S)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _sphere_basis(x, diag, a, b, T):
    L = diag.size - 1
    for i in prange(x.shape[0]):
        z = x[i, 2]
        er = 1.0
        ei = 0.0
        qmm = 1.0
        col = 0
        for m in range(L + 1):
            if m > 0:
                re = er * x[i, 0] - ei * x[i, 1]
                im = er * x[i, 1] + ei * x[i, 0]
                small = abs(re) + abs(im) < TINY
                er = 0.0 if small else re
                ei = 0.0 if small else im
                qmm *= diag[m]
            q1 = 0.0
            q2 = 0.0
            for l in range(m, L + 1):
                if l == m:
                    q0 = qmm
                elif l == m + 1:
                    q0 = a[m, l] * z * q1
                else:
                    q0 = a[m, l] * (z * q1 - b[m, l] * q2)
                if m == 0:
                    T[i, col] = q0
                    col += 1
                else:
                    T[i, col] = q0 * er
                    T[i, col + 1] = q0 * ei
                    col += 2
                q2 = q1
                q1 = q0


def sphere_basis(x, L):
    """The real basis of the sphere transforms at the points x (n, 3), as a table.

    Column b of T is q_lm(z) Re(e^m) or q_lm(z) Im(e^m) (e = x_0 + i x_1; Im only for m > 0), so
    that (2l+1) P_l(<x, y>) = Σ_{b of degree l} ε_m T_b(x) T_b(y) and a zonal kernel sum is
    S = T diag(ε_m κ_l) T^T W: two matrix products (BLAS) in place of the transforms.

    Parameters
    ----------
    x : (n, 3) unit vectors.
    L : int, the largest degree.

    Returns
    -------
    T : (n, (L+1)^2) float64, the basis at the points; ``basis_indices(L)`` gives the l and m of
        each column.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]])
    >>> T = sphere_basis(x, 3)
    >>> l, m = basis_indices(3)
    >>> P3 = lambda t: (5 * t**3 - 3 * t) / 2
    >>> bool(np.isclose(np.sum(np.where(m == 0, 1, 2) * (l == 3) * T[0] * T[1]), 7 * P3(x[0] @ x[1])))
    True
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    diag, a, b = legendre_tables(L)
    T = np.empty((x.shape[0], (L + 1) ** 2))
    _sphere_basis(x, diag, a, b, T)
    return T


def basis_indices(L):
    """(degrees, orders): l and m of each column of ``sphere_basis(x, L)``, ((L+1)^2,) each.

    Parameters
    ----------
    L : int
        The largest degree.

    Returns
    -------
    degrees, orders : ndarray of int, shape ((L + 1)^2,)

    Examples
    --------
    >>> from meanfield.solvers.kernels.harmonics import basis_indices
    >>> basis_indices(1)
    (array([0, 1, 1, 1]), array([0, 0, 1, 1]))
    """
    degrees = np.concatenate([np.arange(L + 1)] + [np.repeat(np.arange(m, L + 1), 2) for m in range(1, L + 1)])
    orders = np.concatenate([np.zeros(L + 1, dtype=np.int64)] + [np.full(2 * (L + 1 - m), m) for m in range(1, L + 1)])
    return degrees, orders
