r"""Optimal-transport distances on the sphere S^{d-1} with the geodesic cost.

.. math::

    W_p(\mu, \nu) = \Big( \min_{\gamma \in \Pi(\mu, \nu)} \int d(x, y)^p \, d\gamma(x, y) \Big)^{1/p},
    \qquad d(x, y) = \arccos\langle x, y\rangle = 2 \operatorname{atan2}(|x - y|, |x + y|)

(the second form keeps full accuracy for nearly equal or antipodal points), for weighted point
measures :math:`\mu = \sum_i a_i \delta_{x_i}`, :math:`\nu = \sum_j b_j \delta_{y_j}`. Methods:

- ``"circle"`` (d = 2, exact). With positions in turns s = θ/2π ∈ [0, 1):
  p = 1, the level median (Rabin–Delon–Gousseau / Cabrelli–Molter), O((n+m) log(n+m)):

  .. math::

      W_1 = 2\pi \int_0^1 |F(s) - \alpha| \, ds, \qquad F = F_\mu - F_\nu, \ \alpha \text{ a median of } F;

  p > 1: the shift formula (Delon–Salomon–Sobolevski), convex in α, evaluated exactly and
  minimised by golden-section search (``meanfield.transport.circle``; POT's binary search was
  replaced because it could return costs above the largest possible one):

  .. math::

      W_p^p = (2\pi)^p \min_\alpha \int_0^1 |F_\mu^{-1}(q) - F_\nu^{-1}(q - \alpha)|^p \, dq.

- ``"emd"`` (any d, exact): network simplex ``ot.emd2`` on the n×m matrix d(x_i, y_j)^p.
  Cost on 2 cores about 0.1 s at 1000², 1 s at 2000², 2 s at 3000² for uniform samples
  (clustered, degenerate measures take several times longer), with 16·n·m bytes of work space;
  ``"auto"`` uses it up to n·m = 2.5·10^7.
- ``"sliced"`` (any d, approximate): the spherical sliced Wasserstein distance SSW_p (Bonet et
  al., ICLR 2023, ``ot.sliced_wasserstein_sphere``) over ``n_projections`` random great circles
  (seeded, so repeatable). It is a different quantity: zero for μ = ν and following W_p's
  trends, but its value is not W_p (about half of it for two independent uniform samples);
  it costs O(n_projections (n+m) log(n+m)) time and O(n_projections (n+m)) memory: slower than
  the exact solver below a few thousand points, it is there for sizes whose n×m cost matrix is
  too large. ``"auto"`` falls back to it beyond the exact size, and says so (info["exact"] is False).
- ``"multiscale"`` (any d, exact): coarse-to-fine transport on a sparse set of candidate pairs,
  solved by POT's sparse network simplex and certified optimal over all n·m pairs by a dual
  check (``meanfield.transport.multiscale``); memory O(n + m + pairs), ``info["gap"]`` is the
  certified duality gap on W_p^p. Exact with little memory, but POT 0.9.7's sparse solver
  makes it slower than ``"emd"`` (minutes at 10^4 atoms), so ``"auto"`` does not pick it.

Weights are validated (finite, non-negative, positive total) and divided by their totals,
so μ and ν need not be normalised. All values are in radians.
"""
import numbers

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from ..checks import as_choice, as_count, as_seed
from .circle import circle_wp_cost, level_median_w1
from .cost import geodesic_cost
from ..geometry import circle_angles, great_circle
from ..measures import as_measure
from .multiscale import multiscale_wasserstein

__all__ = ["wasserstein", "geodesic_cost", "series_method", "EXACT_LIMIT"]

METHODS = ("auto", "circle", "emd", "multiscale", "sliced")
EXACT_LIMIT = 25_000_000          # largest n·m for the exact network simplex in "auto"
EMD_MAX_ITER = 1_000_000_000
LP_MAX_P = 10.0                   # beyond, the network simplex's tolerances swamp the spread of d^p
UNDERFLOW = 1e-290


def _as_power(p):
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"p must be a real number >= 1; got {p!r}")
    if not (np.isfinite(p) and p >= 1):
        raise ValueError(f"p must be >= 1 (W_p is a metric only for p >= 1); got {p}")
    return float(p)


def wasserstein(x: ArrayLike, a: ArrayLike | None, y: ArrayLike, b: ArrayLike | None, p: float = 2,
                method: str = "auto", *, return_info: bool = False, n_projections: int = 200,
                seed: int | np.random.Generator | None = 0) -> float | tuple[float, dict]:
    r"""Geodesic Wasserstein distance W_p (radians) between two weighted point measures on S^{d-1}.

    .. math::

        W_p(\mu, \nu) = \Big( \min_{\gamma \in \Pi(\mu, \nu)} \sum_{i,j} \gamma_{ij}\, d(x_i, y_j)^p \Big)^{1/p},
        \qquad \mu = \sum_i a_i \delta_{x_i}, \ \nu = \sum_j b_j \delta_{y_j}.

    **Argument order differs from POT.** Here each measure comes as (points, weights):
    ``wasserstein(x, a, y, b)``. POT's solvers take the weights first and a cost matrix,
    ``ot.emd2(a, b, M)`` with :math:`M_{ij} = d(x_i, y_j)^p`, and return :math:`W_p^p`, not :math:`W_p`;
    this function builds the geodesic cost itself and returns the distance, in radians.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Atoms of μ, unit vectors.
    a : array_like, shape (n,), or None
        Weights of μ (None: uniform); divided by their total.
    y : array_like, shape (m, d)
        Atoms of ν, unit vectors of the same d.
    b : array_like, shape (m,), or None
        Weights of ν (None: uniform); divided by their total.
    p : float
        Order p >= 1 (at most 10 for the linear-programming solvers).
    method : {"auto", "circle", "emd", "multiscale", "sliced"}
        "auto": exact "circle" for d = 2, exact "emd" while n·m <= ``EXACT_LIMIT``, else the
        approximate "sliced" (see the module docstring). For a series of distances, resolve "auto" once
        with ``series_method`` and pass its answer to every call: "auto" per call could switch method
        between the terms of the series.
    return_info : bool
        Also return a dict: info["method"] says which method ran, info["exact"] whether the value is
        W_p itself (for "multiscale", info["gap"] is the certified duality gap on W_p^p).
    n_projections : int
        Great circles of the "sliced" method.
    seed : int, numpy.random.Generator or None
        Random source of the "sliced" and "multiscale" methods.

    Returns
    -------
    float or (float, dict)
        W_p in radians, or (W_p, info) with ``return_info=True``.

    Raises
    ------
    ValueError
        If the points are not unit vectors, the weights are invalid, x and y live on different
        spheres, p < 1 or too large for the solver, or method="circle" with d != 2.
    TypeError
        If p is not a real number.
    RuntimeError
        If the network simplex stops before the optimum.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> x = mf.circle_points(np.array([0.0, np.pi / 2]))
    >>> round(mf.wasserstein(x, [0.5, 0.5], x[:1], None, p=1), 6)    # half the mass moves a quarter turn
    0.785398
    >>> y = mf.uniform_sphere(30, 3, seed=1)
    >>> w, info = mf.wasserstein(y, None, y[::-1], None, p=2, return_info=True)
    >>> round(w, 12), info["method"], info["exact"]
    (0.0, 'emd', True)
    """
    x, a = as_measure(x, a, "x")
    y, b = as_measure(y, b, "y")
    if y.shape[1] != x.shape[1]:
        raise ValueError(f"x and y must live on the same sphere; got d = {x.shape[1]} and d = {y.shape[1]}")
    p = _as_power(p)
    as_choice(method, "method", METHODS)
    d = x.shape[1]
    method = series_method(method, d, x.shape[0] * y.shape[0])
    if method != "circle" and p > LP_MAX_P and min(np.count_nonzero(a), np.count_nonzero(b)) > 1:
        raise ValueError(f"p = {p:g} is too large for the {method!r} solver: costs d^p spread over "
                         f"more orders of magnitude than its tolerances resolve (measured: wrong in the 4th "
                         f"digit at p = 20); use p <= {LP_MAX_P:g}")
    if method == "circle" and d != 2:
        raise ValueError(f"method='circle' needs points on S^1 (d = 2); got d = {d}: use 'emd' or 'sliced'")
    info = dict(method=method, exact=method != "sliced", p=p, n=x.shape[0], m=y.shape[0])
    if np.count_nonzero(a) == 1 or np.count_nonzero(b) == 1:
        info.update(method="atom", exact=True)
        value = _to_atom(x, a, y, b, p)
    elif method == "circle":
        value = _circle(circle_angles(x) / (2 * np.pi), a, circle_angles(y) / (2 * np.pi), b, p)
    elif method == "emd":
        value = _emd(x, a, y, b, p)
    elif method == "multiscale":
        value, details = multiscale_wasserstein(x, a, y, b, p, seed=seed)
        info.update(details, seed=seed)
    else:
        n_projections = as_count(n_projections, "n_projections")
        seed = as_seed(seed)
        info.update(n_projections=n_projections, seed=seed)
        import ot   # imported where transport is computed: `import ot` loads every array backend it finds
        value = 2 * np.pi * float(ot.sliced_wasserstein_sphere(x, y, a, b, n_projections=n_projections,
                                                               p=p, seed=seed))
    return (value, info) if return_info else value


def series_method(method: str, d: int, largest: int) -> str:
    r"""The one transport method of a series of distances: ``method`` itself, or for ``"auto"`` the method
    ``wasserstein`` picks for the series' largest problem, so that a series (W_p over output times, over
    token counts, ...) never mixes exact and approximate values.

    .. math::

        \text{auto} \mapsto \begin{cases} \text{circle} & d = 2, \\
        \text{emd} & d > 2,\ \max n m \le \texttt{EXACT\_LIMIT}, \\
        \text{sliced} & \text{otherwise.} \end{cases}

    Parameters
    ----------
    method : {"auto", "circle", "emd", "multiscale", "sliced"}
        The method asked for.
    d : int
        Dimension of the ambient space (points on S^{d-1}).
    largest : int
        The largest n·m (atoms of one measure times atoms of the other) of the series.

    Returns
    -------
    str
        A method other than ``"auto"``, to pass to every ``wasserstein`` call of the series.

    Raises
    ------
    ValueError
        If ``method`` is not one of the methods.

    Examples
    --------
    >>> from meanfield.transport.sphere import series_method
    >>> series_method("auto", 3, 5000 * 2562), series_method("auto", 3, 5000 * 10242)
    ('emd', 'sliced')
    >>> series_method("auto", 2, 10**9), series_method("emd", 3, 10**9)
    ('circle', 'emd')
    """
    as_choice(method, "method", METHODS)
    if method != "auto":
        return method
    return "circle" if d == 2 else "emd" if largest <= EXACT_LIMIT else "sliced"


def _to_atom(x, a, y, b, p):
    """W_p when one measure is a single atom z: every plan sends all mass to (or from) z, so
    W_p = (sum_j b_j d(z, y_j)^p)^{1/p}, summed in log space (exact for any p, no under/overflow)."""
    if np.count_nonzero(a) != 1:
        x, a, y, b = y, b, x, a
    theta = great_circle(x[np.flatnonzero(a)], y)[0]
    keep = (b > 0) & (theta > 0)
    if not keep.any():
        return 0.0
    return float(np.exp(logsumexp(p * np.log(theta[keep]), b=b[keep]) / p))


def _circle(u, a, v, b, p):
    """W_p on S^1 for positions u, v in turns [0, 1) and probability weights a, b; radians.
    ValueError if W_p^p (in turns) underflows double precision while W_1 > 0."""
    w1 = level_median_w1(u, a, v, b)
    if p == 1:
        return 2 * np.pi * w1
    cost = circle_wp_cost(u, a, v, b, p)
    if cost < UNDERFLOW and w1 > 0:
        raise ValueError(f"p = {p:g} is too large for these distances: W_p^p underflows double precision "
                         f"(W_1 = {2 * np.pi * w1:.3g} rad); use a smaller p")
    return 2 * np.pi * cost ** (1.0 / p)


def _emd(x, a, y, b, p):
    """Exact W_p by the network simplex on the cost (d/D)^p, D the largest distance (so nothing
    overflows): W_p = D · (min cost)^{1/p}; zero-weight atoms are dropped first.  If the optimal
    scaled cost underflows although W_1 > 0, a ValueError says so (W_p >= W_1 > 0)."""
    keep_x, keep_y = a > 0, b > 0
    x, a, y, b = x[keep_x], a[keep_x], y[keep_y], b[keep_y]
    theta = great_circle(x, y)
    scale = float(theta.max())
    if scale == 0.0:
        return 0.0
    cost = _emd_cost(a, b, (theta / scale) ** p)
    if cost < UNDERFLOW and p > 1 and _emd_cost(a, b, theta) > 0:
        raise ValueError(f"p = {p:g} is too large: d^p underflows double precision for these distances "
                         f"(largest {scale:.3g} rad); use a smaller p")
    return scale * cost ** (1.0 / p)


def _emd_cost(a, b, matrix):
    import ot
    cost, log = ot.emd2(a / a.sum(), b / b.sum(), matrix, numItermax=EMD_MAX_ITER, log=True)
    if log["warning"] is not None:
        raise RuntimeError(f"ot.emd2 did not reach the optimum: {log['warning']}")
    return float(max(cost, 0.0))
