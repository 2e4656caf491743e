r"""The attention field of arbitrary Q, K, V on a weighted point measure (a cell measure) on S^1 and S^2.

.. math::

    X(x) = P_x \frac{1}{Z(x)} \sum_j m_j e^{\beta \langle Q x, K y_j \rangle} V y_j, \qquad
    \Phi(x) = \sum_j m_j e^{\beta \langle Q x, K y_j \rangle},

with Z = Φ (SA) or 1 (USA), P_x = I - x x^T, the sources y_j (cell generators) carrying the masses
m_j; a ``MultiHead`` adds its heads' fields and its projected feed-forward term.

The kernel e^{β x^T A y}, A = Q^T K, is not zonal, but for a fixed target x it is zonal in y:

.. math::

    e^{\beta \langle A^T x, y \rangle} = e^{b(x)} \, e^{b(x) (\langle u(x), y \rangle - 1)}, \qquad
    b(x) = \beta |A^T x|, \quad u(x) = A^T x / |A^T x|,

so the Funk–Hecke expansion of the isotropic kernel (``spectral``) applies target by target with its
own inverse temperature b(x) <= β‖A‖_2 and pole u(x):

.. math::

    \sum_j W_{jc} e^{b(x_i)(\langle u_i, y_j \rangle - 1)}
    = \sum_{l \le L} \kappa_l(b_i) \sum_{m} \varepsilon_m T_{lm}(u_i) \sum_j T_{lm}(y_j) W_{jc}

(on S^1 the Fourier series with κ_k = e^{-b} I_k(b)), i.e. S = T_κ(U) (T(Y)^T W): two BLAS products
per evaluation with a source table T(Y) (N, (L+1)^2) and a target table T_κ(U) whose rows are the
harmonics at u_i weighted by ε_m κ_l(b_i), both built once per model and point set.  The degree L is
the isotropic one at β‖A‖_2 (``spectral.degree``: the tail of the expansion below 1e-17 of the
kernel's largest value); it bounds every target's tail since b_i <= β‖A‖_2.  The weight columns
W = m (1, y) give Φ and G = Σ m_j e^{...} y_j; the field is P_x V G / Φ (SA) or P_x V G (USA).
This is exact Funk–Hecke algebra, not a fitted expansion: no quadrature of the kernel, no
coefficient matrix, and the same cost per evaluation as the isotropic path.

Accuracy.  As in ``spectral.attention_field``: the shifted sums have an absolute error of at most
δ Σ_j m_j, δ = ``spectral.roundoff(β‖A‖_2, d)``; a target whose relative error bound
(1 + √d) δ Σ m / (S_0 - δ Σ m) exceeds ``rtol`` (SA where Φ(x) is tiny next to the total mass: far
from the clusters at large β) is recomputed by direct log-sum-exp quadrature
(``particles.attention_field(summation="direct")``, Numba-parallel, O(N M d)).  USA sums are scaled
by e^{b(x)} <= e^{β‖A‖_2}.

In an engine: ``GeneralField(model, mesh.points)`` once per mesh (it builds the tables), then per
stage ``field(rho * areas)`` for the cell velocities and log Φ, or ``field.stage(masses, cells,
tangents)`` for the velocities with their slopes along the face normals (second-order face values);
``uniform_field`` (exact) minus the field of the discrete uniform density is the quadrature error a
well-balanced scheme subtracts (the uniform state is not at rest unless V A^T x ∥ x); ``energy`` gives
E_A where the flow is a gradient flow.

Examples
--------
>>> import numpy as np, meanfield as mf
>>> from meanfield.solvers import general_field
>>> from meanfield.solvers.meshes import voronoi as mesh
>>> cells = mesh.icosphere(2)
>>> rng = np.random.default_rng(0)
>>> model = mf.SA(2.0, Q=rng.normal(size=(3, 3)), K=rng.normal(size=(3, 3)), V=rng.normal(size=(3, 3)))
>>> field = general_field.GeneralField(model, cells.points, summation="expansion")
>>> X, log_phi = field(cells.areas / (4 * np.pi))
>>> X.shape, log_phi.shape, field.info["summation"]
((162, 3), (1, 162), ['expansion'])
"""
from __future__ import annotations

from . import _numba_env  # noqa: F401

import numpy as np
from numba import njit, prange
from numpy.typing import ArrayLike
from scipy.special import gammaln, ive, logsumexp

from meanfield.checks import as_choice, as_float_array
from meanfield.models import SA, USA, MultiHead, as_model

from . import particles
from .kernels import harmonics, spectral

__all__ = ["GeneralField", "attention_field", "uniform_field", "energy", "gradient_sign", "kernel_weights", "degree",
           "basis", "SUMMATIONS"]

SUMMATIONS = ("auto", "direct", "expansion")
RTOL = spectral.RTOL
#: harmonic tables up to this size (bytes, sources and targets together) are stored per head; larger ones
#: are rebuilt in blocks of BLOCK_BYTES at each evaluation
TABLE_BYTES = 1 << 29
BLOCK_BYTES = 1 << 25
#: tables of at most this many entries are applied by serial Numba loops, not BLAS: on small meshes waking
#: BLAS threads costs more than the products
SERIAL_ENTRIES = 1 << 19


def _heads(model):
    return getattr(model, "heads", (model,))


def degree(beta_norm: float, d: int, tolerance: float = spectral.TRUNCATION) -> int:
    r"""Truncation degree of the expansion of e^{β x^T A y} on S^{d-1} for β‖A‖_2 = ``beta_norm``.

    .. math::

        L = \min\{L : \textstyle\sum_{l > L} \varepsilon_l \kappa_l(b) \le \text{tolerance}\},
        \qquad b = \beta \lVert A \rVert_2,

    (ε_l = 2 on S^1, 2l + 1 on S^2): the isotropic kernel's tail at b relative to its largest value,
    which bounds the tail at every target's b(x) = β|A^T x| <= b.  At the default tolerance this is
    ``spectral.degree(b, d)``, the isotropic engines' degree.

    Parameters
    ----------
    beta_norm : float
        β‖A‖_2 >= 0, at most ``spectral.MAX_BETA``.
    d : {2, 3}
        The dimension (S^1 or S^2).
    tolerance : float
        The tail allowed, in (0, 1).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If the tolerance is not in (0, 1).

    Examples
    --------
    >>> from meanfield.solvers import general_field
    >>> general_field.degree(30.0, 3), general_field.degree(30.0, 2), general_field.degree(30.0, 3, 1e-8)
    (52, 51, 34)
    """
    tolerance = _tolerance(tolerance)
    if tolerance == spectral.TRUNCATION:
        return spectral.degree(float(beta_norm), d)
    top = int(12 * np.sqrt(beta_norm) + 2 * beta_norm ** (1 / 3) + 64)
    kappa = kernel_weights([beta_norm], top, d)[0]
    weight = kappa * (np.where(np.arange(top + 1) == 0, 1.0, 2.0) if d == 2 else 2.0 * np.arange(top + 1) + 1.0)
    tail = np.cumsum(weight[::-1])[::-1]                    # tail[l] = the sum over degrees >= l
    return int(np.argmax(tail <= tolerance)) - 1


def _tolerance(value):
    value = float(as_float_array(value, "tolerance"))
    if not 0 < value < 1:
        raise ValueError(f"tolerance must be in (0, 1); got {value:g}")
    return value


def kernel_weights(b: ArrayLike, L: int, d: int) -> np.ndarray:
    r"""κ_0..κ_L of e^{b_i(⟨u, y⟩ - 1)} for each b_i: e^{-b} I_k(b) on S^1, e^{-b} i_l(b) on S^2.

    Miller's backward recurrence (as ``spectral.kernel_coefficients``), vectorised over b: the
    ratios ρ_k = κ_k/κ_{k-1} = b / (2(k + s) + b ρ_{k+1}) (s = 0 on S^1, 1/2 on S^2) from a degree
    far beyond L, normalised by the value at ⟨u, y⟩ = 1,

    .. math::

        \kappa_0 + 2 \sum_{k \ge 1} \kappa_k = 1 \ (S^1), \qquad \sum_{l \ge 0} (2l + 1) \kappa_l = 1 \ (S^2).

    Parameters
    ----------
    b : array_like, shape (n,)
        Inverse temperatures b_i >= 0.
    L : int
        The largest degree kept.
    d : {2, 3}
        The dimension.

    Returns
    -------
    ndarray, shape (n, L + 1)

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import ive
    >>> from meanfield.solvers import general_field
    >>> kappa = general_field.kernel_weights([0.0, 1.0, 5.0], 20, 2)
    >>> bool(np.allclose(kappa, ive(np.arange(21), np.array([[0.0], [1.0], [5.0]]))))
    True
    """
    b = np.asarray(b, dtype=np.float64)
    top = int(12 * np.sqrt(b.max(initial=0.0)) + 2 * b.max(initial=0.0) ** (1 / 3) + 64) + L
    shift = 0.0 if d == 2 else 0.5
    ratio = np.zeros((b.size, top + 2))
    for k in range(top, 0, -1):
        ratio[:, k] = b / (2 * (k + shift) + b * ratio[:, k + 1])
    ratio[:, 0] = 1.0
    t = np.cumprod(ratio[:, :top + 1], axis=1)
    k = np.arange(top + 1)
    total = t @ (np.where(k == 0, 1.0, 2.0) if d == 2 else 2.0 * k + 1.0)
    return t[:, :L + 1] / total[:, None]


def basis(x: ArrayLike, L: int) -> np.ndarray:
    r"""The real harmonic basis of degree <= L at unit vectors x: Fourier on S^1, spherical on S^2.

    On S^1 the columns are 1, Re e^k, Im e^k (k = 1..L, e = x_0 + i x_1 = e^{iθ}), on S^2 those of
    ``harmonics.sphere_basis``; in both cases

    .. math::

        k(\langle x, y \rangle) = \sum_b \varepsilon_b \kappa_{l(b)} T_b(x) T_b(y)

    for the kernel with coefficients κ (``kernel_weights``), ε_b = 1 for order 0 and 2 otherwise.

    Parameters
    ----------
    x : array_like, shape (n, 2) or (n, 3)
        Unit vectors.
    L : int
        The largest degree.

    Returns
    -------
    ndarray, shape (n, 2L + 1) or (n, (L + 1)^2)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import general_field
    >>> np.round(general_field.basis([[0.0, 1.0]], 2), 12)
    array([[ 1.,  0., -1.,  1.,  0.]])
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.shape[1] == 3:
        return harmonics.sphere_basis(x, L)
    powers = np.cumprod(np.repeat((x[:, 0] + 1j * x[:, 1])[:, None], L, axis=1), axis=1)
    return np.column_stack([np.ones(x.shape[0]), powers.real, powers.imag])


def _basis_layout(L, d):
    """(degree, ε) of each column of ``basis(x, L)``."""
    if d == 3:
        degrees, orders = harmonics.basis_indices(L)
        return degrees, np.where(orders == 0, 1.0, 2.0)
    k = np.arange(1, L + 1)
    return np.concatenate([[0], k, k]), np.concatenate([[1.0], np.full(2 * L, 2.0)])


@njit(parallel=True, cache=True)
def _weigh_columns(T, kappa, degrees, eps):
    """T[i, b] *= ε_b κ[i, l(b)] in place: the synthesis table from the basis at the poles."""
    for i in prange(T.shape[0]):
        for b in range(T.shape[1]):
            T[i, b] *= eps[b] * kappa[i, degrees[b]]


@njit(cache=True)
def _pair_slopes(cells, t, x, S, V, A, first, second, factor, ok, beta, normalised, slopes, trusted):
    """slopes[k] += f'(0) of ``GeneralField.stage`` at the pair (i = cells[k], t = t[k]) from the sums
    S = (Φ, G, the entries H_ab, a <= b, at (first, second)) and factor = Φ (SA) or e^{b} (USA):
    t^T V H A^T t = p^T H q, t^T V G = <p, G>, t^T A G = <q, G>, <V G, x> = <r, G> with p = V^T t,
    q = A^T t, r = V^T x_i; trusted[k] &= ok[i].  Serial: one pass costs less than waking threads."""
    d = t.shape[1]
    p = np.empty(d)
    q = np.empty(d)
    for k in range(cells.size):
        i = cells[k]
        if not ok[i]:
            trusted[k] = False
            continue
        radial = 0.0
        tv = 0.0
        ta = 0.0
        for a in range(d):
            pa = 0.0
            qa = 0.0
            ra = 0.0
            for c in range(d):
                pa += V[c, a] * t[k, c]
                qa += A[c, a] * t[k, c]
                ra += V[c, a] * x[i, c]
            p[a] = pa
            q[a] = qa
            tv += pa * S[i, 1 + a]
            ta += qa * S[i, 1 + a]
            radial += ra * S[i, 1 + a]
        quad = 0.0
        for c in range(first.size):
            a = first[c]
            b = second[c]
            quad += S[i, 1 + d + c] * (p[a] * q[b] + p[b] * q[a] if a != b else p[a] * q[a])
        value = beta * quad - radial
        if normalised:
            value = value / factor[i] - beta * tv * ta / (factor[i] * factor[i])
        else:
            value *= factor[i]
        slopes[k] += value


@njit(cache=True)
def _serial_sums(sources, targets, W):
    """targets @ (sources.T @ W) in serial loops (small tables)."""
    coef = np.zeros((sources.shape[1], W.shape[1]))
    for j in range(sources.shape[0]):
        for b in range(sources.shape[1]):
            t = sources[j, b]
            for c in range(W.shape[1]):
                coef[b, c] += t * W[j, c]
    out = np.zeros((targets.shape[0], W.shape[1]))
    for i in range(targets.shape[0]):
        for b in range(targets.shape[1]):
            t = targets[i, b]
            for c in range(W.shape[1]):
                out[i, c] += t * coef[b, c]
    return out


def _quadratic(d):
    """The entries (a, b), a <= b, of the symmetric y y^T: the second-moment columns of ``stage``."""
    first, second = np.triu_indices(d)
    return first.astype(np.int64), second.astype(np.int64)


class _HeadExpansion:
    """One head's tables: T(Y) (M, P) at the sources and T_κ(U) (N, P) at the targets' poles, stored
    when both fit in ``TABLE_BYTES``, else rebuilt block by block at each evaluation (``BLOCK_BYTES``);
    tables of at most ``SERIAL_ENTRIES`` entries in all are applied by serial loops."""

    def __init__(self, A, beta, targets, sources, tolerance):
        d = targets.shape[1]
        self.norm = float(np.linalg.norm(A, 2))
        self.degree = degree(beta * self.norm, d, tolerance)
        poles = targets @ A
        length = np.linalg.norm(poles, axis=1)
        self.shift = beta * length                   # b_i = β |A^T x_i|
        self.poles = np.where(length[:, None] > 0, poles / np.where(length > 0, length, 1.0)[:, None], targets)
        self.points = sources
        self.kappa = kernel_weights(self.shift, self.degree, d)
        self.delta = spectral.roundoff(beta * self.norm, d) + tolerance
        modes = (self.degree + 1) ** 2 if d == 3 else 2 * self.degree + 1
        self.stored = (targets.shape[0] + sources.shape[0]) * modes * 8 <= TABLE_BYTES
        self.rows = max(64, BLOCK_BYTES // (8 * modes))
        if self.stored:
            self.sources = self._source_table(slice(None))
            self.targets = self._target_table(slice(None))

    def _source_table(self, rows):
        return basis(self.points[rows], self.degree)

    def _target_table(self, rows):
        T = basis(self.poles[rows], self.degree)
        _weigh_columns(T, self.kappa[rows], *_basis_layout(self.degree, self.poles.shape[1]))
        return T

    def sums(self, W):
        """S (N, C): Σ_j W_jc e^{β x_i^T A y_j - b_i}."""
        if self.stored:
            if self.targets.size + self.sources.size <= SERIAL_ENTRIES:
                return _serial_sums(self.sources, self.targets, np.ascontiguousarray(W))
            return self.targets @ (self.sources.T @ W)
        coef = sum(self._source_table(slice(j, j + self.rows)).T @ W[j:j + self.rows]
                   for j in range(0, W.shape[0], self.rows))
        out = np.empty((self.poles.shape[0], W.shape[1]))
        for i in range(0, out.shape[0], self.rows):
            out[i:i + self.rows] = self._target_table(slice(i, i + self.rows)) @ coef
        return out


class GeneralField:
    r"""The attention field X[μ] at fixed targets of the measures μ = Σ_j m_j δ_{y_j} on fixed sources.

    .. math::

        X(x_i) = \sum_h P_{x_i} \frac{\sum_j m_j e^{\beta_h \langle Q_h x_i, K_h y_j\rangle} V_h y_j}{Z_h(x_i)}
        + P_{x_i} W \sigma(A x_i + b),

    Z_h = Φ_h (SA heads) or 1 (USA heads); the tables of the expansion (module docstring) are built
    once here, so that each call costs two BLAS products per head (plus direct quadrature at the
    targets where the expansion is not trusted).

    Parameters
    ----------
    model : SA, USA or MultiHead
        Constant, non-causal weights; any Q, K, V.
    targets : array_like, shape (N, d)
        Unit vectors x_i, d = 2 or 3 for the expansion (any d with ``summation="direct"``).
    sources : array_like, shape (M, d), optional
        Unit vectors y_j (default: the targets, e.g. cell generators).
    summation : {"auto", "direct", "expansion"}
        "expansion": the harmonic tables (d in {2, 3}, β‖Q^T K‖_2 <= ``spectral.MAX_BETA``);
        "direct": log-sum-exp quadrature; "auto": the expansion where it applies and costs less than
        direct sums, per head.  Tables up to ``TABLE_BYTES`` are stored, larger ones rebuilt in blocks
        at each call.
    rtol : float
        The relative error bound above which a target is recomputed directly.
    tolerance : float
        The truncation tolerance (tail of the expansion relative to the kernel's largest value,
        ``degree``); the default 1e-17 is the isotropic engines'.

    Attributes
    ----------
    info : dict
        "summation" (per head), "degree" (per head, None for direct), "tables" ("stored", "blocked" or
        None, per head), "tolerance" (the truncation
        tolerance, relative to the kernel's largest value), "rtol", "recomputed" (targets summed
        directly by the last call, per head).

    Raises
    ------
    TypeError, ValueError
        For a model that is not SA/USA/MultiHead, causal or time-dependent weights, points that are
        not arrays of shape (n, d), or a summation that does not apply.
    FloatingPointError
        (on a call) Where a USA field overflows double precision.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import general_field
    >>> theta = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    >>> x = np.column_stack([np.cos(theta), np.sin(theta)])
    >>> field = general_field.GeneralField(mf.USA(1.0, Q=[[1.0, 0.5], [0.0, 1.0]]), x)
    >>> X, log_phi = field(np.full(64, 1 / 64))
    >>> field.info["degree"], bool(np.abs(np.sum(X * x, axis=1)).max() < 1e-15)
    ([16], True)
    """

    def __init__(self, model: SA | USA | MultiHead, targets: ArrayLike, sources: ArrayLike | None = None,
                 summation: str = "auto", rtol: float = RTOL, tolerance: float = spectral.TRUNCATION):
        self.model = as_model(model, multihead=True)
        self.targets = _points(targets, "targets")
        self.sources = self.targets if sources is None else _points(sources, "sources")
        d = self.targets.shape[1]
        if self.sources.shape[1] != d:
            raise ValueError(f"targets and sources must live in the same R^d; got {d} and {self.sources.shape[1]}")
        summation = as_choice(summation, "summation", SUMMATIONS)
        tolerance = _tolerance(tolerance)
        self.rtol = float(as_float_array(rtol, "rtol"))
        if not self.rtol > 0:
            raise ValueError(f"rtol must be > 0; got {self.rtol:g}")
        self.interactions = [h.interaction(d) for h in _heads(self.model)]
        self.expansions = []
        for head, (A, _) in zip(_heads(self.model), self.interactions):
            how = _resolve(head, A, d, self.targets.shape[0], self.sources.shape[0], summation)
            self.expansions.append(_HeadExpansion(A, head.beta, self.targets, self.sources, tolerance)
                                   if how == "expansion" else None)
        self.info = {"summation": ["direct" if e is None else "expansion" for e in self.expansions],
                     "degree": [None if e is None else e.degree for e in self.expansions],
                     "tables": [None if e is None else "stored" if e.stored else "blocked" for e in self.expansions],
                     "tolerance": float(tolerance), "rtol": self.rtol,
                     "recomputed": [0] * len(self.expansions)}

    def __call__(self, masses: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(X (N, d), log Φ (heads, N)) of the measure Σ_j m_j δ_{y_j}; masses (M,) non-negative."""
        m = self._masses(masses)
        X = np.zeros(self.targets.shape)
        log_phi = np.empty((len(self.expansions), self.targets.shape[0]))
        for h, head in enumerate(_heads(self.model)):
            v, log_phi[h], _ = self._head(h, head, m)
            X += v
        return X + _feedforward(self.model, self.targets), log_phi

    def stage(self, masses: ArrayLike, cells: ArrayLike, tangents: ArrayLike
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""The field and its slopes along geodesics: what a second-order face extrapolation needs.

        For each pair (i_k, t_k) of a target and a unit tangent t ⟂ x_i, the derivative at s = 0 of
        f(s) = ⟨X(x(s)), t(s)⟩ along x(s) = x cos s + t sin s, t(s) = x'(s), summed over the heads:

        .. math::

            f'(0) = \frac{\beta\, t^T V H A^T t - \langle V G, x\rangle}{\Phi}
                    - \beta \frac{(t^T V G)(t^T A G)}{\Phi^2} \ \text{(SA)}, \qquad
            f'(0) = \beta\, t^T V H A^T t - \langle V G, x\rangle \ \text{(USA)},

        with Φ, G = Σ m_j k y_j, H = Σ m_j k y_j y_j^T at x_i (k = e^{β x^T A y}, ∇_x k = β A y k),
        from one expansion of 1 + d + d(d + 1)/2 weight columns per head (H is symmetric).

        Parameters
        ----------
        masses : array_like, shape (M,)
            Non-negative masses.
        cells : array_like of int, shape (K,)
            Target indices i_k.
        tangents : array_like, shape (K, d)
            Unit tangents t_k at x_{i_k}.

        Returns
        -------
        X : ndarray, shape (N, d)
        log_phi : ndarray, shape (heads, N)
        slopes : ndarray, shape (K,)
            f'(0), 0 where not trusted.
        trusted : ndarray of bool, shape (K,)
            Where every head's expansion is trusted at x_{i_k} (elsewhere the field was summed directly
            and the slope is not available: use a first-order value).

        Raises
        ------
        ValueError
            For a head summed directly, a feed-forward term, or cells/tangents of the wrong shape.

        Examples
        --------
        >>> import numpy as np, meanfield as mf
        >>> from meanfield.solvers import general_field
        >>> theta = np.linspace(0, 2 * np.pi, 32, endpoint=False)
        >>> x = np.column_stack([np.cos(theta), np.sin(theta)])
        >>> field = general_field.GeneralField(mf.SA(1.0), x, summation="expansion")
        >>> rho = 1 + 0.5 * np.cos(theta)
        >>> X, log_phi, slopes, trusted = field.stage(rho / rho.sum(), [0], [[0.0, 1.0]])
        >>> bool(trusted[0]), bool(slopes[0] < 0)              # the peak at θ = 0 attracts
        (True, True)
        """
        if getattr(self.model, "feedforward", None) is not None:
            raise ValueError("GeneralField.stage does not differentiate a feed-forward term")
        m = self._masses(masses)
        cells = np.asarray(cells)
        t = as_float_array(tangents, "tangents")
        n, d = self.targets.shape
        if cells.ndim != 1 or cells.dtype.kind not in "iu" or np.any(cells < 0) or np.any(cells >= n) \
                or t.shape != (cells.size, d):
            raise ValueError(f"cells must be K target indices in [0, {n}) and tangents a (K, {d}) array; got "
                             f"{cells.shape} {cells.dtype} and {t.shape}")
        cells, t = np.ascontiguousarray(cells, dtype=np.int64), np.ascontiguousarray(t)
        X = np.zeros(self.targets.shape)
        log_phi = np.empty((len(self.expansions), n))
        slopes = np.zeros(cells.size)
        trusted = np.ones(cells.size, dtype=bool)
        for h, head in enumerate(_heads(self.model)):
            if self.expansions[h] is None:
                raise ValueError(f"head {h} is summed directly; the slopes need the expansion")
            v, log_phi[h], (S, ok) = self._head(h, head, m, second=True)
            X += v
            A, V = self.interactions[h]
            factor = np.ascontiguousarray(S[:, 0]) if head.normalised else np.exp(self.expansions[h].shift)
            _pair_slopes(cells, t, self.targets, S, np.ascontiguousarray(V), np.ascontiguousarray(A), *_quadratic(d),
                         factor, ok, head.beta, head.normalised, slopes, trusted)
        return X, log_phi, np.where(trusted, slopes, 0.0), trusted

    def _masses(self, masses):
        m = as_float_array(masses, "masses")
        if m.shape != (self.sources.shape[0],) or np.any(m < 0):
            raise ValueError(f"masses must be {self.sources.shape[0]} non-negative numbers, one per source; "
                             f"got shape {m.shape}")
        return m

    def kernel_sums(self, h: int, W: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        r"""Head h's shifted kernel sums of arbitrary weight columns, and the shifts.

        .. math::

            S_{ic} = \sum_j W_{jc} e^{\beta \langle Q x_i, K y_j \rangle - b_i}, \qquad b_i = \beta |A^T x_i|,

        e.g. W = m (1, y, y y^T) for Φ, G and the second moments that the derivatives of the field need
        (∇_x e^{β x^T A y} = β A y e^{β x^T A y}).  Absolute error <= ``spectral.roundoff(β‖A‖_2, d)``
        Σ_j |W_jc| (no direct fallback here).

        Parameters
        ----------
        h : int
            The head (0 for a single SA/USA model), summed by the expansion.
        W : array_like, shape (M, C)
            Weights per source.

        Returns
        -------
        S : ndarray, shape (N, C)
        shift : ndarray, shape (N,)
            b_i.

        Raises
        ------
        ValueError
            If head h is summed directly or W has the wrong number of rows.

        Examples
        --------
        >>> import numpy as np, meanfield as mf
        >>> from meanfield.solvers import general_field
        >>> x = np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]])
        >>> field = general_field.GeneralField(mf.SA(2.0, Q=np.diag([1.0, 2.0, 3.0])), x, summation="expansion")
        >>> S, shift = field.kernel_sums(0, np.eye(2))
        >>> A = np.diag([1.0, 2.0, 3.0])
        >>> bool(np.allclose(S * np.exp(shift)[:, None], np.exp(2.0 * x @ A @ x.T), rtol=1e-13))
        True
        """
        expansion = self.expansions[h]
        if expansion is None:
            raise ValueError(f"head {h} is summed directly (info['summation']); kernel sums need the expansion")
        W = as_float_array(W, "W")
        if W.ndim != 2 or W.shape[0] != self.sources.shape[0]:
            raise ValueError(f"W must have one row per source ({self.sources.shape[0]}); got shape {W.shape}")
        return expansion.sums(W), expansion.shift

    def _head(self, h, head, m, second=False):
        """(X, log Φ, (S, trusted)) of head h: the sums S of m (1, y) (and the entries a <= b of y y^T,
        ``_quadratic``, with ``second``) by the expansion, direct quadrature at the targets where they are
        not trusted; S is None when the head is summed directly."""
        expansion = self.expansions[h]
        if expansion is None:
            return (*_direct(head, self.targets, self.sources, m), None)
        x, y = self.targets, self.sources
        columns = [m, m[:, None] * y]
        if second:
            a, b = _quadratic(y.shape[1])
            columns.append(m[:, None] * y[:, a] * y[:, b])
        S = expansion.sums(np.column_stack(columns))
        floor = expansion.delta * m.sum()
        trusted = S[:, 0] - floor > (1.0 + np.sqrt(x.shape[1])) * floor / self.rtol
        G = np.einsum("nc,ac->na", S[:, 1:x.shape[1] + 1], self.interactions[h][1])     # no BLAS threads
        X = G - np.sum(G * x, axis=1, keepdims=True) * x
        if head.normalised:
            X /= np.where(trusted, S[:, 0], 1.0)[:, None]
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                X *= np.exp(expansion.shift)[:, None]
            if not np.all(np.isfinite(X)):
                raise FloatingPointError(f"USA velocity overflows double precision at beta |Q^T K| = "
                                         f"{head.beta * expansion.norm:g}; use SA, a smaller beta, or rescale time")
        with np.errstate(divide="ignore"):
            log_phi = np.log(np.where(trusted, S[:, 0], 1.0)) + expansion.shift
        redo = np.flatnonzero(~trusted)
        self.info["recomputed"][h] = int(redo.size)
        if redo.size:
            X[redo], log_phi[redo] = _direct(head, x[redo], y, m)
        return X, log_phi, (S, trusted)


def _feedforward(model, x):
    """P_x W σ(A x + b) of a MultiHead's feed-forward term at x (0 without one)."""
    ff = getattr(model, "feedforward", None)
    if ff is None:
        return 0.0
    f = ff.field(x)
    return f - np.sum(f * x, axis=1, keepdims=True) * x


def _points(x, name):
    x = as_float_array(x, name)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] == 0:
        raise ValueError(f"{name} must be an (n, d) array of unit vectors, n >= 1, d >= 2; got shape {x.shape}")
    if not np.allclose(np.linalg.norm(x, axis=1), 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"{name} must be unit vectors (|x| = 1 to 1e-12)")
    return np.ascontiguousarray(x)


def _resolve(head, A, d, n, m, summation):
    """"direct" or "expansion" for one head (``GeneralField``'s ``summation``)."""
    beta_norm = head.beta * float(np.linalg.norm(A, 2))
    applies = d in (2, 3) and beta_norm <= spectral.MAX_BETA
    if summation == "expansion" and not applies:
        raise ValueError(f"summation='expansion' needs points on S^1 or S^2 and beta |Q^T K|_2 <= "
                         f"{spectral.MAX_BETA:.4g}; got d = {d}, beta |Q^T K|_2 = {beta_norm:g}: use 'direct'")
    if summation != "auto":
        return summation
    if not applies:
        return "direct"
    L = degree(beta_norm, d)
    modes = (L + 1) ** 2 if d == 3 else 2 * L + 1
    return "expansion" if 2 * (n + m) * modes * (d + 1) < n * m * (3 * d + 20) else "direct"


def _direct(head, x, y, m):
    """Direct log-sum-exp quadrature (``particles.attention_field``) of one head: (X, log Φ)."""
    X, log_phi = particles.attention_field(head, x[None], m[None], sources=y[None], summation="direct")
    return X[0], log_phi[0]


def attention_field(model: SA | USA | MultiHead, targets: ArrayLike, sources: ArrayLike, masses: ArrayLike,
                    summation: str = "auto") -> tuple[np.ndarray, np.ndarray, dict]:
    r"""One evaluation of ``GeneralField``: the field of Σ_j m_j δ_{y_j} at the targets, with its info.

    .. math::

        X(x_i) = \sum_h P_{x_i} \frac{1}{Z_h(x_i)} \sum_j m_j e^{\beta_h \langle Q_h x_i, K_h y_j\rangle} V_h y_j.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Any Q, K, V (constant, not causal).
    targets : array_like, shape (N, d)
        Unit vectors.
    sources : array_like, shape (M, d)
        Unit vectors.
    masses : array_like, shape (M,)
        Non-negative masses.
    summation : {"auto", "direct", "expansion"}
        As in ``GeneralField``.

    Returns
    -------
    X : ndarray, shape (N, d)
    log_phi : ndarray, shape (heads, N)
    info : dict
        ``GeneralField.info``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import general_field
    >>> y = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> X, log_phi, info = general_field.attention_field(mf.SA(1.0, V=2.0), y, y, [0.5, 0.5], "direct")
    >>> np.round(X, 4)
    array([[0.    , 0.5379, 0.    ],
           [0.5379, 0.    , 0.    ]])
    """
    field = GeneralField(model, targets, sources, summation)
    X, log_phi = field(masses)
    return X, log_phi, field.info


def uniform_field(model: SA | USA | MultiHead, targets: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    r"""The exact field of the uniform probability measure σ on S^{d-1}, for any Q, K, V.

    With w = β A^T x, b = |w| and the Funk–Hecke integrals c_l(b) = Γ(d/2) (2/b)^{d/2-1} I_{l+d/2-1}(b),

    .. math::

        \Phi(x) = \int e^{\langle w, y\rangle} d\sigma(y) = c_0(b), \qquad
        \int e^{\langle w, y\rangle} y \, d\sigma(y) = c_1(b) \frac{w}{b},

    so X(x) = P_x V ŵ c_1/c_0 (SA) or P_x V ŵ c_1 (USA), ŵ = w/b: not zero unless V A^T x is parallel
    to x (the uniform state is stationary for Q^T K = c I, V = v I).  The discrete uniform state's field
    minus this one is the quadrature error that a well-balanced scheme removes.

    Parameters
    ----------
    model : SA, USA or MultiHead
        Constant, non-causal weights (the feed-forward term is added as in ``GeneralField``).
    targets : array_like, shape (N, d)
        Unit vectors.

    Returns
    -------
    X : ndarray, shape (N, d)
    log_phi : ndarray, shape (heads, N)

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import general_field
    >>> x = np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]])
    >>> X, log_phi = general_field.uniform_field(mf.SA(2.0), x)
    >>> bool(np.abs(X).max() < 1e-16), bool(np.allclose(np.exp(log_phi), np.sinh(2.0) / 2.0))
    (True, True)
    """
    model = as_model(model, multihead=True)
    x = _points(targets, "targets")
    d = x.shape[1]
    X = np.zeros(x.shape)
    log_phi = np.empty((len(_heads(model)), x.shape[0]))
    for h, head in enumerate(_heads(model)):
        A, V = head.interaction(d)
        w = head.beta * (x @ A)
        b = np.linalg.norm(w, axis=1)
        direction = w / np.where(b > 0, b, 1.0)[:, None]
        nu = d / 2 - 1
        with np.errstate(divide="ignore"):
            log_scale = gammaln(d / 2) + nu * (np.log(2.0) - np.log(b)) + b   # Γ(d/2) (2/b)^ν e^b
            log_c0 = np.where(b > 0, log_scale + np.log(ive(nu, b)), 0.0)
            log_c1 = np.where(b > 0, log_scale + np.log(ive(nu + 1, b)), -np.inf)
        G = direction @ V.T
        G -= np.sum(G * x, axis=1, keepdims=True) * x
        X += G * np.exp(log_c1 - log_c0 if head.normalised else log_c1)[:, None]
        log_phi[h] = log_c0
    return X + _feedforward(model, x), log_phi


def energy(model: SA | USA | MultiHead, points: ArrayLike, masses: ArrayLike,
           summation: str = "auto", field: GeneralField | None = None) -> tuple[float, str]:
    r"""The interaction energy of Σ_j m_j δ_{y_j} whose gradient flow the model is, or NaN with the reason.

    .. math::

        E_A[\mu] = \frac{1}{2\beta} \sum_{i,j} m_i m_j e^{\beta \langle A y_i, y_j \rangle}, \qquad A = Q^T K,

    non-decreasing along the flow when V = A is symmetric (SA for a Z-weighted metric, USA for W_2),
    non-increasing when V = -A (the repulsive case); a ``MultiHead`` of USA heads with these
    properties has Σ_h E_{A_h}.  At β = 0 the limit of E_A - (Σ m)²/(2β), (1/2) Σ_ij m_i m_j ⟨A y_i, y_j⟩.
    The double sum is Σ_i m_i Φ(y_i) from the field's log Φ (log-sum-exp: no overflow before E itself
    exceeds double precision).

    Parameters
    ----------
    model : SA, USA or MultiHead
    points : array_like, shape (M, d)
        Unit vectors.
    masses : array_like, shape (M,)
        Non-negative masses.
    summation : {"auto", "direct", "expansion"}
        As in ``GeneralField``.
    field : GeneralField, optional
        A field of ``model`` with these points as targets and sources, whose tables are reused (an
        engine's, built once per mesh); ``summation`` is then the field's.

    Returns
    -------
    energy : float
        E (NaN when the flow is not a gradient flow of it).
    reason : str
        "non-decreasing ..." / "non-increasing ..." or why E is NaN.

    Raises
    ------
    ValueError
        If ``field`` is not a field of these points (targets and sources).

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import general_field
    >>> A = np.diag([2.0, 1.0, 0.5])
    >>> y = np.array([[1.0, 0.0, 0.0]])
    >>> E, why = general_field.energy(mf.USA(1.0, Q=A, V=A), y, [1.0])
    >>> bool(np.isclose(E, np.exp(2.0) / 2)), why
    (True, 'non-decreasing: V = Q^T K is symmetric')
    >>> general_field.energy(mf.SA(1.0, V=A), y, [1.0])[1]
    'not a gradient flow: V is neither Q^T K nor -Q^T K'
    """
    model = as_model(model, multihead=True)
    y = _points(points, "points")
    m = as_float_array(masses, "masses")
    heads = _heads(model)
    sign, reason = gradient_sign(model, y.shape[1])
    if sign == 0:
        return float("nan"), reason
    if field is None:
        field = GeneralField(model, y, y, summation)
    elif field.sources is not field.targets or field.targets.shape != y.shape or not np.array_equal(field.targets, y):
        raise ValueError("field must have the points as its targets and sources (GeneralField(model, points))")
    if any(h.beta == 0 for h in heads):
        total = 0.0
        for h, (head, (A, _)) in enumerate(zip(heads, field.interactions)):
            mean = m @ y
            total += 0.5 * mean @ A @ mean if head.beta == 0 else np.exp(_log_double_sum(field, h, m)) / (2 * head.beta)
        return float(total), reason
    log_terms = [_log_double_sum(field, h, m) - np.log(2 * head.beta) for h, head in enumerate(heads)]
    with np.errstate(over="ignore"):
        value = np.exp(logsumexp(log_terms))
    if not np.isfinite(value):
        raise FloatingPointError(f"the energy overflows double precision (log E = {logsumexp(log_terms):.4g})")
    return float(value), reason


def _log_double_sum(field, h, m):
    """log Σ_ij m_i m_j e^{β <A y_i, y_j>} of head h, from its log Φ."""
    _, log_phi, _ = field._head(h, _heads(field.model)[h], m)
    return float(logsumexp(log_phi, b=m))


def gradient_sign(model, d: int) -> tuple[int, str]:
    r"""Whether the flow of ``model`` on S^{d-1} is a gradient flow of E_V, and in which direction.

    With A = Q^T K symmetric and V = ±A for every head (USA heads only when there are several), the
    field is ± the gradient of

    .. math::

        E_V[\mu] = \frac{1}{2\beta} \iint e^{\beta \langle V x, y\rangle}\, d\mu(x)\, d\mu(y)

    (Wasserstein for USA, the 1/Z-weighted metric for SA), so E_V is non-decreasing (+1) or
    non-increasing (-1) along it; otherwise (0) there is no such energy.

    Parameters
    ----------
    model : SA, USA or MultiHead
        The model.
    d : int
        The dimension of the points.

    Returns
    -------
    sign : int
        +1, -1 or 0.
    reason : str
        Why, in words (reported as ``info["energy_reason"]``).

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.general_field import gradient_sign
    >>> A = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> gradient_sign(mf.USA(1.0, Q=A, V=A), 2)[0], gradient_sign(mf.SA(1.0, V=np.diag([1.0, 3.0])), 2)[0]
    (1, 0)
    """
    heads = _heads(model)
    if getattr(model, "feedforward", None) is not None:
        return 0, "not a gradient flow: the feed-forward term has no interaction energy"
    if len(heads) > 1 and any(h.normalised for h in heads):
        return 0, "not a gradient flow: several heads with SA's normalisations (each head has its own metric)"
    signs = set()
    for h in heads:
        A, V = h.interaction(d)
        scale = max(np.abs(A).max(), np.abs(V).max(), 1.0)
        if np.abs(A - A.T).max() > 1e-12 * scale:
            return 0, "not a gradient flow: Q^T K is not symmetric"
        signs.add(1 if np.abs(V - A).max() <= 1e-12 * scale else -1 if np.abs(V + A).max() <= 1e-12 * scale else 0)
    if signs != {1} and signs != {-1}:
        return 0, "not a gradient flow: V is neither Q^T K nor -Q^T K" + (" for every head" if len(heads) > 1 else "")
    sign = signs.pop()
    return sign, ("non-decreasing: V = Q^T K is symmetric" if sign > 0 else
                  "non-increasing: V = -Q^T K with Q^T K symmetric")
