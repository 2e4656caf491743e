"""Optimal-transport distances on the sphere S^{d-1} with the geodesic cost.

    W_p(μ, ν) = ( min over couplings γ of μ, ν of ∫ d(x, y)^p dγ(x, y) )^{1/p},
    d(x, y) = arccos<x, y> = 2 atan2(|x - y|, |x + y|)   (the second form keeps full accuracy
                                                           for nearly equal or antipodal points)

for weighted point measures μ = sum_i a_i δ_{x_i}, ν = sum_j b_j δ_{y_j}. Methods:

- ``"circle"`` (d = 2, exact). With positions in turns s = θ/2π ∈ [0, 1):
  p = 1, the level median: W_1 = 2π ∫_0^1 |F(s) - α| ds, F = F_μ - F_ν, α a median of F
  under ds (Rabin–Delon–Gousseau / Cabrelli–Molter), O((n+m) log(n+m));
  p > 1: W_p^p = (2π)^p min_α ∫_0^1 |F_μ^{-1}(q) - F_ν^{-1}(q - α)|^p dq, convex in the shift α
  (Delon–Salomon–Sobolevski), evaluated exactly and minimised by golden-section search
  (``meanfield.circle_transport``; POT's binary search was replaced because it could return
  costs above the largest possible one).
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
  check (``meanfield.multiscale_transport``); memory O(n + m + pairs), ``info["gap"]`` is the
  certified duality gap on W_p^p. Exact with little memory, but POT 0.9.7's sparse solver
  makes it slower than ``"emd"`` (minutes at 10^4 atoms), so ``"auto"`` does not pick it.

Weights are validated (finite, non-negative, positive total) and divided by their totals,
so μ and ν need not be normalised. All values are in radians.
"""
import numbers

import numpy as np
from scipy.special import logsumexp

from .checks import as_choice, as_count, as_seed
from .circle_transport import circle_wp_cost, level_median_w1
from .geometry import circle_angles, great_circle
from .measures import as_measure
from .multiscale_transport import multiscale_wasserstein

__all__ = ["wasserstein", "geodesic_cost", "EXACT_LIMIT"]

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


def geodesic_cost(x, y, p=1.0):
    """The matrix d(x_i, y_j)^p of great-circle distances, for x (n, d), y (m, d)."""
    theta = great_circle(x, y)
    if p != 1:
        theta **= p
    return theta


def wasserstein(x, a, y, b, p=2, method="auto", *, return_info=False, n_projections=200, seed=0):
    """Geodesic W_p (radians) between sum_i a_i δ_{x_i} and sum_j b_j δ_{y_j} on S^{d-1}.

    x (n, d), y (m, d) unit vectors; a, b weights (None = uniform), normalised internally.
    method: "auto" (exact "circle" for d = 2, exact "emd" while n·m <= EXACT_LIMIT, else the
    approximate "sliced"), "circle", "emd", "multiscale" or "sliced" (see the module docstring). Returns
    W_p as a float, or (W_p, info) with ``return_info=True``; info["method"] says which method
    ran and info["exact"] whether the value is W_p itself (for "multiscale", info["gap"] is the
    certified duality gap on W_p^p).

    The arguments come as (points, weights) per measure, ``wasserstein(x, a, y, b)``: POT's solvers
    take the weights first and a cost matrix, ``ot.emd2(a, b, M)`` with M_ij = d(x_i, y_j)^p, and
    return W_p^p, not W_p (here: the distance itself, in radians).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.geometry import circle_points
    >>> x = circle_points(np.array([0.0, np.pi / 2]))
    >>> round(wasserstein(x, [0.5, 0.5], x[:1], None, p=1), 6)    # half the mass moves a quarter turn
    0.785398
    """
    x, a = as_measure(x, a, "x")
    y, b = as_measure(y, b, "y")
    if y.shape[1] != x.shape[1]:
        raise ValueError(f"x and y must live on the same sphere; got d = {x.shape[1]} and d = {y.shape[1]}")
    p = _as_power(p)
    as_choice(method, "method", METHODS)
    d = x.shape[1]
    if method == "auto":
        method = "circle" if d == 2 else "emd" if x.shape[0] * y.shape[0] <= EXACT_LIMIT else "sliced"
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
