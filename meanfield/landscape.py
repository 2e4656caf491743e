r"""The energy landscape of n tokens on the circle: E_β on the torus (S^1)^n and its critical points.

.. math::

    E_\beta(\theta) &= \frac{1}{2\beta n^2} \sum_{i,j} e^{\beta\cos(\theta_i - \theta_j)}
    \qquad \Big(\beta = 0: \text{ the limit } \frac{1}{2n^2} \sum_{i,j} \cos(\theta_i - \theta_j)\Big),\\
    \partial_k E_\beta &= \frac{1}{n^2} \sum_j g(\theta_j - \theta_k), \qquad g(u) = \sin u\, e^{\beta\cos u},\\
    \partial_k \partial_l E_\beta &= \frac{h(\theta_k - \theta_l)}{n^2} \ (k \ne l), \qquad
    h(u) = (\cos u - \beta \sin^2 u)\, e^{\beta\cos u},\\
    \partial_k^2 E_\beta &= -\sum_{j \ne k} \frac{h(\theta_k - \theta_j)}{n^2}.

The USA dynamics on the circle is the gradient ascent θ' = n ∇E_β. E_β is invariant under
rotations θ ↦ θ + c1 (so H1 = 0 always), permutations and the reflection θ ↦ -θ. Open problem 1
of the paper (§5): for β > 0, is every critical point other than the consensus (the global maximum,
E = e^β/(2β)) a strict saddle, i.e. does its Hessian restricted to 1^⊥ have a positive eigenvalue?

``critical_points`` finds critical points by Newton's method on ∇E_β = 0 in the gauge θ_0 = 0
(the Hessian restricted to the other n - 1 angles), from random starts and from symmetric ones
(the k vertices of a regular k-gon carrying the multiplicities of every composition of n into k
parts), keeps those with |∇E_β| below a tolerance, removes duplicates up to rotation and
permutation, and classifies each by the spectrum of H on 1^⊥:
"maximum" (all eigenvalues < -tol), "strict saddle" (one > tol), "degenerate" (none > tol, one in
[-tol, tol]); the spectrum is computed blockwise over clusters of coinciding tokens (``spectrum``) and
tol is relative to each block's largest eigenvalue.
"""
from dataclasses import dataclass, field
from itertools import chain, combinations

import numpy as np
from numpy.typing import ArrayLike

from .budget import BUDGET, as_budget, check_work, seconds_per_call
from .checks import as_beta, as_count, as_float_array, as_positive, as_seed
from .summaries import short_repr

__all__ = ["energy", "gradient", "hessian", "spectrum", "classify", "CriticalPoint", "critical_points",
           "regular_polygon", "cluster_structure", "cluster_newton", "continuation"]

KINDS = ("maximum", "strict saddle", "degenerate")
COINCIDE = 1e-9        # tokens closer than this (radians) are one cluster in residuals and spectra


def _angles(theta):
    theta = as_float_array(theta, "theta")
    if theta.ndim != 1 or theta.size < 2:
        raise ValueError(f"theta must be a 1-D array of n >= 2 angles; got shape {theta.shape}")
    return theta


def _differences(theta):
    """u_kl = θ_k - θ_l."""
    return theta[:, None] - theta[None, :]


def energy(theta: ArrayLike, beta: float) -> float:
    r"""The interaction energy of n tokens at angles θ on the circle.

    .. math::

        E_\beta(\theta) = \frac{1}{2\beta n^2} \sum_{i,j} e^{\beta\cos(\theta_i - \theta_j)}, \qquad
        E_0(\theta) = \frac{1}{2n^2} \sum_{i,j} \cos(\theta_i - \theta_j) \ \text{(the limit's finite part)}.

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles, n >= 2.
    beta : float
        β >= 0.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If theta is not a 1-D array of n >= 2 angles, β < 0, or E_β exceeds the largest double.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.landscape import energy
    >>> bool(np.isclose(energy([0.0, 0.0], 2.0), np.exp(2.0) / 4))      # consensus: e^β / (2β)
    True
    >>> energy([0.0, np.pi], 0.0)
    0.0
    """
    theta, beta = _angles(theta), as_beta(beta)
    c = np.cos(_differences(theta))
    n = theta.size
    if beta == 0:
        return float(c.sum() / (2 * n * n))
    with np.errstate(over="ignore"):
        scaled = np.sum(np.exp(beta * (c - 1.0))) / (2 * beta * n * n)
    if not np.isfinite(scaled):             # E_β ~ 1/(2β) for subnormal β
        raise ValueError(f"E_beta exceeds the largest double at beta = {beta:g} (it grows like 1/(2 beta) as beta "
                         f"-> 0); use beta = 0 (the limit's finite part) or a larger beta")
    return float(_times_exp_beta(scaled, beta, "E_beta"))


def _times_exp_beta(scaled, beta, what):
    """e^β · scaled, through logarithms beyond β = 700 (where e^β alone overflows although the
    product may fit); ValueError naming beta where the product exceeds the largest double."""
    if beta <= 700.0:
        return np.exp(beta) * scaled
    with np.errstate(divide="ignore"):
        log_size = beta + np.log(np.abs(scaled))
    if np.any(log_size > np.log(np.finfo(float).max)):
        raise ValueError(f"{what} exceeds the largest double at beta = {beta:g}; use a smaller beta")
    return np.sign(scaled) * np.exp(log_size)


def _scaled_gradient(theta, beta):
    """e^{-β} ∇E_β: (1/n²) Σ_j sin(θ_j - θ_k) e^{β(cos(θ_j - θ_k) - 1)}."""
    u = -_differences(theta)
    return np.sum(np.sin(u) * np.exp(beta * (np.cos(u) - 1.0)), axis=1) / theta.size ** 2


def _residual(theta, beta, tol=COINCIDE):
    """max_k |Σ_j' sin(u_kj) e^{β cos u_kj}| / Σ_j' e^{β cos u_kj}, u_kj = θ_j - θ_k, the sums over the tokens
    j not coinciding with k (circular distance > tol): how far the forces on each token are from
    cancelling, relative to their sizes (0 at a critical point; of order 1 for tokens that are merely
    too far apart to interact at large β, which an absolute test would accept)."""
    u = -_differences(theta)
    apart = np.abs(np.mod(u + np.pi, 2 * np.pi) - np.pi) > tol
    weight = np.where(apart, np.exp(beta * (np.cos(u) - 1.0)), 0.0)
    force = np.abs(np.sum(weight * np.sin(u), axis=1))
    size = weight.sum(axis=1)
    return float(np.max(np.where(size > 0, force / np.where(size > 0, size, 1.0), 0.0)))


def _scaled_hessian(theta, beta):
    """e^{-β} ∇²E_β: off-diagonal h(θ_k - θ_l) e^{-β}/n², rows summing to zero."""
    u = _differences(theta)
    c, s = np.cos(u), np.sin(u)
    h = (c - beta * s * s) * np.exp(beta * (c - 1.0)) / theta.size ** 2
    np.fill_diagonal(h, 0.0)
    np.fill_diagonal(h, -h.sum(axis=1))
    return h


def gradient(theta: ArrayLike, beta: float) -> np.ndarray:
    r"""The gradient of E_β on the torus.

    .. math::

        \partial_k E_\beta = \frac{1}{n^2} \sum_j \sin(\theta_j - \theta_k)\, e^{\beta\cos(\theta_j - \theta_k)}.

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles, n >= 2.
    beta : float
        β >= 0.

    Returns
    -------
    numpy.ndarray, shape (n,)

    Raises
    ------
    ValueError
        If theta or β is invalid, or the gradient exceeds the largest double.

    Examples
    --------
    >>> from meanfield.landscape import gradient, regular_polygon
    >>> gradient(regular_polygon(3), 1.0).round(12) + 0.0                # a critical point
    array([0., 0., 0.])
    """
    theta, beta = _angles(theta), as_beta(beta)
    return _times_exp_beta(_scaled_gradient(theta, beta), beta, "the gradient")


def hessian(theta: ArrayLike, beta: float) -> np.ndarray:
    r"""The Hessian of E_β on the torus.

    .. math::

        H_{kl} = \frac{h(\theta_k - \theta_l)}{n^2} \ (k \ne l), \qquad H_{kk} = -\sum_{j \ne k} H_{kj}, \qquad
        h(u) = (\cos u - \beta \sin^2 u)\, e^{\beta\cos u}.

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles, n >= 2.
    beta : float
        β >= 0.

    Returns
    -------
    numpy.ndarray, shape (n, n)
        Symmetric, rows summing to 0 (rotation invariance).

    Raises
    ------
    ValueError
        If theta or β is invalid, or the Hessian exceeds the largest double.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.landscape import hessian
    >>> hessian([0.0, 0.0], 0.0)
    array([[-0.25,  0.25],
           [ 0.25, -0.25]])
    """
    theta, beta = _angles(theta), as_beta(beta)
    return _times_exp_beta(_scaled_hessian(theta, beta), beta, "the Hessian")


def _complement_basis(v):
    """An orthonormal basis (k, k-1) of the orthogonal complement of the vector v (k,)."""
    q, _ = np.linalg.qr(np.column_stack([v, np.eye(v.size)[:, :-1]]))
    return q[:, 1:]


def _blocks(theta, beta, tol):
    """The Hessian's spectrum on 1^⊥ in two exact blocks, for clusters of coinciding angles (gap < tol).

    With k clusters at φ_a of multiplicities m_a, H = -L_w (w_ij = h(θ_i - θ_j)/n²) splits into
    - splitting modes (zero sum inside one cluster a, zero elsewhere): eigenvalue
      -(m_a h(0) + Σ_{b≠a} m_b h(φ_a - φ_b))/n², m_a - 1 times;
    - rigid cluster motions v = P c: the generalised problem (P^T H P) c = λ diag(m) c, i.e. the
      cluster Laplacian with weights m_a m_b h(φ_a - φ_b)/n² scaled by diag(m)^{-1/2}, minus rotation.
    Computing the second block from the cluster weights keeps the small inter-cluster eigenvalues
    (e^{β cos φ}) apart from the intra-cluster ones (e^β), which share no floating-point scale at large β.
    Returns (splitting eigenvalues, rigid-motion eigenvalues), each scaled by e^{-β}."""
    pos, mult = cluster_structure(theta, tol)
    n = theta.size
    u = pos[:, None] - pos[None, :]
    c, s = np.cos(u), np.sin(u)
    h = (c - beta * s * s) * np.exp(beta * (c - 1.0)) / n ** 2          # e^{-β} h(φ_a - φ_b)/n²
    hm = h * mult[None, :]
    split = -(hm.sum(axis=1))                                          # includes m_a h(0) on the diagonal
    splitting = np.repeat(split, mult - 1)
    weights = h * np.outer(mult, mult)
    np.fill_diagonal(weights, 0.0)
    lap = weights - np.diag(weights.sum(axis=1))
    root = np.sqrt(mult.astype(float))
    reduced = lap / np.outer(root, root)
    if pos.size == 1:
        return splitting, np.empty(0)
    q = _complement_basis(root)
    return splitting, np.linalg.eigvalsh(q.T @ reduced @ q)


def spectrum(theta: ArrayLike, beta: float, tol: float = COINCIDE) -> np.ndarray:
    r"""Eigenvalues (ascending, n - 1) of the Hessian of E_β on 1^⊥ (the rotation direction removed),
    computed blockwise over clusters of coinciding angles (circular gaps < tol).

    .. math::

        \operatorname{spec}\big(\nabla^2 E_\beta(\theta)|_{\mathbf 1^\perp}\big).

    With clusters at φ_a of multiplicities m_a, the splitting modes inside cluster a have eigenvalue
    -(m_a h(0) + Σ_{b≠a} m_b h(φ_a - φ_b))/n² (m_a - 1 times), and the rigid cluster motions solve a
    k × k problem with weights m_a m_b h(φ_a - φ_b)/n²: this keeps the small inter-cluster eigenvalues
    apart from the intra-cluster ones, which share no floating-point scale at large β.

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles, n >= 2.
    beta : float
        β >= 0.
    tol : float
        Angles closer than this (radians) coincide.

    Returns
    -------
    numpy.ndarray, shape (n - 1,)

    Raises
    ------
    ValueError
        If theta or β is invalid.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.landscape import hessian, spectrum
    >>> theta = np.array([0.0, 0.3, 2.0, 4.0])
    >>> full = np.linalg.eigvalsh(hessian(theta, 1.0))              # one zero: the rotation
    >>> bool(np.allclose(np.sort(np.delete(full, np.argmin(np.abs(full)))), spectrum(theta, 1.0)))
    True
    """
    theta, beta = _angles(theta), as_beta(beta)
    splitting, rigid = _blocks(theta, beta, tol)
    return np.exp(beta) * np.sort(np.concatenate([splitting, rigid]))


def _kind(splitting, rigid, rtol):
    """(kind, smallest positive eigenvalue or NaN, scaled like the blocks) from the two blocks, each
    against rtol times its own largest |eigenvalue|."""
    positive, bottom = [], []
    for eigs in (splitting, rigid):
        if eigs.size:
            tol = rtol * np.max(np.abs(eigs))
            positive.extend(eigs[eigs > tol])
            bottom.append(eigs.max() < -tol)
    if positive:
        return "strict saddle", float(min(positive))
    return ("maximum" if all(bottom) else "degenerate"), float("nan")


def classify(theta: ArrayLike, beta: float, rtol: float = 1e-8, tol: float = COINCIDE) -> str:
    r"""The kind of a critical point from the Hessian's spectrum on 1^⊥ (blocks as in ``spectrum``).

    .. math::

        \text{"maximum"}: \lambda_{\max} < -\text{tol}; \quad \text{"strict saddle"}: \lambda_{\max} > \text{tol}; \quad
        \text{"degenerate"}: |\lambda_{\max}| \le \text{tol},

    tol = rtol times the largest |eigenvalue| of each block.

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles of a critical point, n >= 2.
    beta : float
        β >= 0.
    rtol : float
        Relative tolerance.
    tol : float
        Angles closer than this (radians) coincide.

    Returns
    -------
    str
        "maximum", "strict saddle" or "degenerate".

    Raises
    ------
    ValueError
        If theta or β is invalid.

    Examples
    --------
    >>> from meanfield.landscape import classify, regular_polygon
    >>> classify([0.0, 0.0, 0.0], 1.0), classify(regular_polygon(3), 1.0)
    ('maximum', 'strict saddle')
    """
    theta, beta = _angles(theta), as_beta(beta)
    return _kind(*_blocks(theta, beta, tol), rtol)[0]


def regular_polygon(k: int, multiplicities: ArrayLike | None = None) -> np.ndarray:
    r"""Angles of the k vertices of a regular k-gon, vertex j repeated multiplicities[j] times.

    .. math::

        \varphi_j = 2\pi j / k, \qquad j = 0, \dots, k - 1.

    Parameters
    ----------
    k : int
        Number of vertices (>= 1).
    multiplicities : array_like of int, shape (k,), optional
        Positive multiplicities (default all 1).

    Returns
    -------
    numpy.ndarray
        The angles, sum(multiplicities) of them.

    Raises
    ------
    ValueError
        If the multiplicities are not k positive integers.

    Examples
    --------
    >>> from meanfield.landscape import regular_polygon
    >>> (regular_polygon(2, [2, 1]) / 3.141592653589793).round(6)
    array([0., 0., 1.])
    """
    k = as_count(k, "k")
    reps = np.ones(k, dtype=int) if multiplicities is None else np.asarray(multiplicities, dtype=int)
    if reps.shape != (k,) or np.any(reps < 1):
        raise ValueError(f"multiplicities must be {k} positive integers; got {multiplicities!r}")
    return np.repeat(2 * np.pi * np.arange(k) / k, reps)


def cluster_structure(theta: ArrayLike, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    r"""Positions and multiplicities of the groups of coinciding angles (circular gaps < tol), in
    increasing angle, the first group placed at 0.

    .. math::

        \theta \mapsto \{(\varphi_a - \varphi_0, m_a)\}_a.

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles, n >= 2.
    tol : float
        Largest gap inside a group (radians).

    Returns
    -------
    positions : numpy.ndarray, shape (k,)
    multiplicities : numpy.ndarray of int, shape (k,)

    Raises
    ------
    ValueError
        If theta is not a 1-D array of n >= 2 finite angles.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.landscape import cluster_structure
    >>> pos, mult = cluster_structure([1.0, 1.0, 1.0 + np.pi])
    >>> pos.round(6), mult
    (array([0.      , 3.141593]), array([2, 1]))
    """
    theta = np.sort(np.mod(_angles(theta), 2 * np.pi))
    groups = [[theta[0]]]
    for a in theta[1:]:
        if a - groups[-1][-1] < tol:
            groups[-1].append(a)
        else:
            groups.append([a])
    if len(groups) > 1 and theta[0] + 2 * np.pi - groups[-1][-1] < tol:     # a group across 0
        groups[0] = groups.pop() + groups[0]
    first = np.array([g[0] for g in groups])
    return np.mod(first - first[0], 2 * np.pi), np.array([len(g) for g in groups])


def _family(theta, tol=1e-6):
    """A readable name, the same for every rotation: consensus, regular k-gon (with multiplicities), or
    k clusters (multiplicities, gaps to the next cluster), listed from the rotation that puts the largest
    multiplicities first."""
    pos, mult = cluster_structure(theta, tol)
    k = pos.size
    if k == 1:
        return "consensus"
    gaps = np.diff(np.concatenate([pos, [2 * np.pi]]))
    r = min(range(k), key=lambda j: (tuple(-np.roll(mult, -j)), tuple(np.round(np.roll(gaps, -j), 6))))
    mult, gaps = np.roll(mult, -r), np.roll(gaps, -r)
    m = "" if np.all(mult == 1) else " x" + ",".join(map(str, mult))
    if np.allclose(gaps, 2 * np.pi / k, atol=1e-5):
        return f"regular {k}-gon{m}"
    return f"{k} clusters{m} gaps " + ",".join(f"{g:.3f}" for g in gaps)


def _same_up_to_symmetry(a, b, tol):
    """Equal as multisets on the circle up to a rotation (tried: each point of b onto a's first point)."""
    sa = np.sort(np.mod(a - a[0] + tol, 2 * np.pi))          # + tol: angles just below 2π sort first
    for j in range(b.size):
        sb = np.sort(np.mod(b - b[j] + tol, 2 * np.pi))
        if np.all(np.abs(sa - sb) < tol):
            return True
    return False


@dataclass(eq=False)
class CriticalPoint:
    r"""One critical point of E_β up to rotation and permutation.

    .. math::

        \nabla E_\beta(\theta) = 0, \qquad \theta_0 = 0.

    Parameters
    ----------
    theta : numpy.ndarray, shape (n,)
        Angles (theta[0] = 0).
    energy : float
        E_β(θ).
    residual : float
        Relative size of the uncancelled forces.
    eigenvalues : numpy.ndarray, shape (n - 1,)
        The Hessian on 1^⊥, ascending (``spectrum``).
    kind : str
        "maximum", "strict saddle" or "degenerate".
    smallest_positive_eigenvalue : float
        NaN if none.
    family : str
        A readable name (consensus, regular k-gon, k clusters ...).
    hits : int
        How many starts converged to it.
    info : dict
        Settings (β, rtol).

    Examples
    --------
    >>> from meanfield.landscape import critical_points
    >>> top = critical_points(3, 1.0, random_starts=5)[0]
    >>> top.family, top.kind, top.hits > 0
    ('consensus', 'maximum', True)
    """

    __repr__ = short_repr
    theta: np.ndarray
    energy: float
    residual: float
    eigenvalues: np.ndarray
    kind: str
    smallest_positive_eigenvalue: float
    family: str
    hits: int = 1
    info: dict = field(default_factory=dict)


def _compositions(n, k):
    """Every composition of n into k positive parts."""
    for cuts in combinations(range(1, n), k - 1):
        yield np.diff(np.concatenate([[0], cuts, [n]]))


def symmetric_starts(n):
    """Regular k-gons (k = 1..n) carrying every composition of n into k multiplicities."""
    return list(_polygons(n))


def _polygons(n):
    """``symmetric_starts(n)``, one at a time (there are 2^(n-1))."""
    return (regular_polygon(k, mult) for k in range(1, n + 1) for mult in _compositions(n, k))


def _newton(theta, beta, gtol, max_iter):
    """Newton on ∇E_β = 0 with θ_0 fixed (least squares on the reduced Hessian, steps capped at half a
    radian); returns (θ mod 2π, relative residual ``_residual``)."""
    theta = theta - theta[0]
    for _ in range(max_iter):
        if _residual(theta, beta) <= gtol:
            break
        g = _scaled_gradient(theta, beta)
        h = _scaled_hessian(theta, beta)[1:, 1:]
        step = np.linalg.lstsq(h, -g[1:], rcond=None)[0]
        theta[1:] += min(1.0, 0.5 / max(np.max(np.abs(step)), 1e-300)) * step
    return np.mod(theta, 2 * np.pi), _residual(theta, beta)


def critical_points(n: int, beta: float, random_starts: int = 200, *, symmetric: bool = True,
                    seed: int | np.random.Generator | None = 0, gtol: float = 1e-10, max_iter: int = 60,
                    rtol: float = 1e-8, tol: float = 1e-6, budget: float | None = BUDGET,
                    cluster_starts: int = 0) -> list["CriticalPoint"]:
    r"""Critical points of E_β on (S^1)^n by Newton's method from random and symmetric starts.

    .. math::

        \nabla E_\beta(\theta) = 0 \quad \text{in the gauge } \theta_0 = 0.

    Parameters
    ----------
    n : int
        Number of tokens, n >= 2.
    beta : float
        β >= 0.
    random_starts : int
        Starts with i.i.d. uniform angles (seeded by ``seed``).
    symmetric : bool
        Also start from ``symmetric_starts(n)`` (regular k-gons with multiplicities), each slightly
        perturbed (1e-3 rad, seeded) as well as exact.
    seed : int, numpy.random.Generator or None
        Random source of the starts.
    gtol : float
        Convergence: for every token |∂_k E_β| <= gtol Σ_j e^{β cos(θ_j - θ_k)}/n² over the tokens j
        not coinciding with k (the forces cancel relative to their sizes).
    max_iter : int
        Newton iterations per start.
    rtol : float
        Classification tolerance (``classify``).
    tol : float
        Two points are the same up to rotation and permutation when their sorted rotated angles agree
        within tol.
    budget : float or None
        Seconds (default one hour; None: no limit). There are ``random_starts`` + 2^n symmetric
        starts (2^(n-1) compositions, exact and perturbed); a search whose starts times ``max_iter``
        times the measured cost of one Newton iteration exceeds the budget is refused before it
        starts (``meanfield.budget``): without ``symmetric=False``, n = 100 would need 10^30 starts.
    cluster_starts : int
        If > 0, also search every multiplicity pattern (each composition of n into k >= 2 parts, in
        cyclic order) with ``cluster_newton`` on the k cluster angles, from the regular k-gon and from
        ``cluster_starts`` random sorted angles: the method that stays well conditioned at large β.

    Returns
    -------
    list of CriticalPoint
        By decreasing energy; ``info["found_by"]`` names the kinds of start that reached each
        ("random", "symmetric", "clusters").

    Raises
    ------
    ValueError
        If an argument is out of range or the search would exceed the budget.

    Examples
    --------
    >>> from meanfield.landscape import critical_points
    >>> points = critical_points(3, 1.0, random_starts=10)
    >>> [(p.family, p.kind) for p in points]
    [('consensus', 'maximum'), ('regular 2-gon x2,1', 'strict saddle'), ('regular 3-gon', 'strict saddle')]
    """
    n, beta = as_count(n, "n", minimum=2), as_beta(beta)
    random_starts = as_count(random_starts, "random_starts", minimum=0)
    cluster_starts = as_count(cluster_starts, "cluster_starts", minimum=0)
    gtol, rtol, tol = as_positive(gtol, "gtol"), as_positive(rtol, "rtol"), as_positive(tol, "tol")
    budget = as_budget(budget)
    rng = np.random.default_rng(as_seed(seed))
    starts = [("random", s) for s in rng.uniform(0, 2 * np.pi, (random_starts, n))]
    count = len(starts) + (2.0 ** n if symmetric else 0)
    count += 2.0 ** (n - 1) * (1 + cluster_starts) if cluster_starts else 0     # the cluster search's starts
    if symmetric:           # generated lazily: 2^(n-1) compositions do not fit in memory for large n
        starts = chain(starts, (("symmetric", s) for s in _polygons(n)),
                       (("symmetric", s + 1e-3 * rng.standard_normal(n)) for s in _polygons(n)))
    if budget is not None:      # a start costs at most max_iter Newton iterations: time one
        probe = np.linspace(0.0, 2 * np.pi, n, endpoint=False) + 0.1 * np.sin(np.arange(n))
        check_work(budget, count, max_iter * seconds_per_call(lambda: _newton(probe.copy(), beta, 0.0, 1)),
                   f"critical_points({n}, {beta:g}) from {count:.3g} starts", "Newton starts",
                   " (or symmetric=False, or fewer random_starts)")
    found = []
    for method, start in starts:
        theta, residual = _newton(np.array(start, dtype=float), beta, gtol, max_iter)
        if residual <= gtol:
            _add(found, theta, residual, beta, rtol, tol, method)
    if cluster_starts:
        for theta in _cluster_search(n, beta, cluster_starts, rng):
            residual = _residual(theta, beta)
            if residual <= gtol:
                _add(found, theta, residual, beta, rtol, tol, "clusters")
    return sorted(found, key=lambda cp: -cp.energy)


def _add(found, theta, residual, beta, rtol, tol, method):
    """Merge the critical point theta into the list ``found`` (a new CriticalPoint, or one more hit and
    method for the one it equals up to rotation and permutation)."""
    for cp in found:
        if _same_up_to_symmetry(cp.theta, theta, tol):
            cp.hits += 1
            cp.info["found_by"].add(method)
            return cp
    splitting, rigid = _blocks(theta, beta, COINCIDE)
    kind, positive = _kind(splitting, rigid, rtol)
    cp = CriticalPoint(theta=theta, energy=energy(theta, beta), residual=residual,
                       eigenvalues=np.exp(beta) * np.sort(np.concatenate([splitting, rigid])),
                       kind=kind, smallest_positive_eigenvalue=np.exp(beta) * positive,
                       family=_family(theta, tol), info=dict(beta=beta, rtol=rtol, found_by={method}))
    found.append(cp)
    return cp


def _cluster_search(n, beta, random_starts, rng):
    """Token angles (n,) of the k-cluster critical points ``cluster_newton`` reaches, for every
    composition of n into k >= 2 parts, from the regular k-gon and ``random_starts`` random sorted angles."""
    for k in range(2, n + 1):
        for mult in _compositions(n, k):
            starts = [2 * np.pi * np.arange(k) / k] + [np.sort(rng.uniform(0, 2 * np.pi, k))
                                                       for _ in range(random_starts)]
            for start in starts:
                pos, _ = cluster_newton(start, mult, beta)
                if pos is not None:
                    yield np.repeat(pos, mult)


def continuation(theta, betas, gtol=1e-12):
    """Follow the cluster critical point theta (a critical point of E_β at β = betas[0]) along the β of
    ``betas`` with ``cluster_newton``, each solve started from the previous one.

    The clusters of theta (tokens closer than ``COINCIDE``) give the pattern: k angles φ_a with
    multiplicities m_a, and at each β the k forces Σ_b m_b sin(φ_b - φ_a) e^{β cos(φ_b - φ_a)} are
    solved to zero again.

    Parameters
    ----------
    theta : array (n,)
        Token angles of a critical point made of clusters (at β = betas[0], or near it).
    betas : sequence of float
        The β to visit, in order (each >= 0).
    gtol : float
        Convergence of each Newton solve (``cluster_newton``).

    Returns
    -------
    (list of token angles (n,) at the β reached, one per β until the branch is lost; the β at which
    it was lost (Newton failed or two clusters met: a fold or a merger), or None if it lasted)

    Raises
    ------
    ValueError
        A β < 0 or not finite, or angles that are not a 1-D array of finite numbers.

    Examples
    --------
    >>> path, lost = continuation(np.repeat([0.0, 2.1, 4.2], [2, 2, 1]), [10.0, 20.0, 30.0])
    >>> len(path), lost
    (3, None)
    """
    pos, mult = cluster_structure(theta, COINCIDE)
    path = []
    for beta in betas:
        pos, _ = cluster_newton(pos, mult, beta, gtol=gtol)
        if pos is None:
            return path, float(beta)
        path.append(np.repeat(pos, mult))
    return path, None

def _cluster_system(pos, mult, beta):
    """The forces on k clusters at angles pos with multiplicities mult, and their Jacobian, each row
    scaled by its own size: F_a = Σ_b m_b sin(u_ab) w_ab / Σ_b m_b w_ab, u_ab = φ_b - φ_a,
    w_ab = e^{β(cos u_ab - c_a)} (c_a = max_{b≠a} cos u_ab, a log-sum-exp shift; the sums over b ≠ a),
    J_ab = m_b h(u_ab) w_ab / Σ_b m_b w_ab (b ≠ a), J_aa = -Σ_{b≠a} J_ab, h(u) = cos u - β sin² u.
    The scale of a row is frozen at the iterate, so F = 0 exactly where the clusters' forces cancel."""
    u = pos[None, :] - pos[:, None]
    c = np.cos(u)
    np.fill_diagonal(c, -np.inf)
    shift = c.max(axis=1, keepdims=True)
    w = np.exp(beta * (c - shift)) * mult[None, :]
    size = w.sum(axis=1)
    force = np.sum(np.sin(u) * w, axis=1) / size
    jac = (np.cos(u) - beta * np.sin(u) ** 2) * w / size[:, None]
    np.fill_diagonal(jac, 0.0)
    np.fill_diagonal(jac, -jac.sum(axis=1))
    return force, jac


def cluster_newton(positions, multiplicities, beta, gtol=1e-12, max_iter=100, gap=1e-6):
    """Critical points of E_β made of k clusters: Newton on the k cluster angles (the first fixed).

    k clusters of m_a coinciding tokens at φ_a are a critical point of E_β on (S^1)^n iff the forces
    Σ_b m_b sin(φ_b - φ_a) e^{β cos(φ_b - φ_a)} on every cluster vanish (inside a cluster sin 0 = 0).
    Each equation is divided by its own size (``_cluster_system``), so at large β, where the forces
    between far clusters are ~e^{-2β} of those inside one, the k-dimensional system stays well
    conditioned, which Newton on all n angles (``critical_points``) is not: there the intra-cluster
    curvature ~e^β swamps the inter-cluster one and least squares drops it.

    Parameters
    ----------
    positions : array (k,)
        Starting angles of the clusters.
    multiplicities : array of k positive ints
        Tokens per cluster (n = their sum).
    beta : float
        β >= 0.
    gtol : float
        Convergence: max_a |F_a| <= gtol (forces relative to their sizes).
    max_iter : int
        Newton iterations (steps capped at half a radian).
    gap : float
        A run whose clusters come closer than ``gap`` radians has left the pattern: rejected.

    Returns
    -------
    (angles (k,) mod 2π with the first at 0, or None if Newton did not converge on the pattern;
    the final relative force max_a |F_a|)

    Raises
    ------
    ValueError
        positions and multiplicities not k angles and k positive integers, or β < 0 or not finite.

    Examples
    --------
    >>> pos, res = cluster_newton([0.0, 2.0, 4.0], [3, 1, 1], 30.0)
    >>> bool(res <= 1e-12 and np.all(np.diff(np.sort(pos)) > 1.0))
    True
    """
    pos = as_float_array(positions, "positions").copy()
    mult = np.asarray(multiplicities)
    if pos.ndim != 1 or mult.shape != pos.shape or not np.issubdtype(mult.dtype, np.integer) or np.any(mult < 1):
        raise ValueError(f"positions and multiplicities must be k angles and k positive integers; got "
                         f"{pos.shape} and {multiplicities!r}")
    beta = as_beta(beta)
    if pos.size == 1:
        return np.zeros(1), 0.0
    mult = mult.astype(float)
    pos -= pos[0]
    res = np.inf
    for _ in range(max_iter + 1):
        force, jac = _cluster_system(pos, mult, beta)
        res = float(np.max(np.abs(force)))
        if res <= gtol:
            break
        step = np.linalg.lstsq(jac[1:, 1:], -force[1:], rcond=None)[0]
        pos[1:] += min(1.0, 0.5 / max(np.max(np.abs(step)), 1e-300)) * step
    pos = np.mod(pos, 2 * np.pi)
    gaps = np.diff(np.concatenate([np.sort(pos), [2 * np.pi]]))
    if not res <= gtol or gaps.min() < gap:
        return None, res
    return pos, res
