"""Probability measures on S^{d-1}: weighted point measures, i.i.d. tokens drawn from a
density, and the perturbed-uniform initial densities of the comparisons.

A density ρ is taken against surface measure σ (|S^1| = 2π, |S^2| = 4π) and given as a
callable of points (N, d) -> (N,) values; it need not be normalised for sampling.
"""
import numpy as np
from scipy.special import eval_chebyt, eval_gegenbauer, gammaln

from .checks import as_count, as_float_array, as_points, as_positive, as_probability, as_seed, as_size
from .geometry import circle_points, uniform_sphere

__all__ = ["sphere_area", "as_measure", "sample_density", "inverse_cdf", "merge_atoms", "drop_negligible",
           "perturbed_uniform", "zonal_harmonic"]

CIRCLE_GRID = 1 << 16      # cells of the inverse-CDF grid on S^1
BOUND_PROBES = 1 << 15     # random points used to bound ρ for rejection on S^d, d >= 2
BOUND_MARGIN = 1.25


def sphere_area(d):
    """|S^{d-1}| = 2 π^{d/2} / Γ(d/2)."""
    d = as_count(d, "d", minimum=2)
    return float(2.0 * np.exp(0.5 * d * np.log(np.pi) - gammaln(0.5 * d)))


def as_measure(x, weights=None, name="x"):
    """(points, probability weights) of sum_i w_i δ_{x_i}: points (n, d) unit vectors, weights
    non-negative with positive total (None = uniform 1/n), divided by their total."""
    x = as_points(x, name)
    n = x.shape[0]
    if weights is None:
        return x, np.full(n, 1.0 / n)
    return x, as_probability(weights, n, name=f"weights of {name}")


def merge_atoms(x, weights=None, tol=1e-7, return_inverse=False):
    """sum_i w_i δ_{x_i} with the atoms in one box of side ``tol`` of R^d (coordinates rounded to
    multiples of tol) merged onto the first of them: (points, weights), and with
    ``return_inverse`` the index of the merged atom each x_i went to. Each atom moves by at most
    sqrt(d)·tol, so W_p changes by at most that; collapsed clusters of tokens become single atoms,
    which makes exact optimal transport much cheaper."""
    x, w = as_measure(x, weights)
    _, first, inverse = np.unique(np.round(x / tol).astype(np.int64), axis=0, return_index=True,
                                  return_inverse=True)
    inverse = inverse.ravel()
    merged = x[first], np.bincount(inverse, weights=w, minlength=first.size)
    return (*merged, inverse) if return_inverse else merged


def drop_negligible(x, weights, tol=1e-14):
    """sum_i w_i δ_{x_i} without its lightest atoms of total mass at most ``tol`` times the total,
    the others scaled to keep the total: (points, weights).

    Moving the dropped mass δ (relative) onto the other atoms costs at most δ π^p in W_p^p on the
    sphere, so W_p changes by at most π δ^{1/p} (tol = 1e-14: 3e-14 in W_1, 3e-7 in W_2).  A clustered
    cell measure keeps only its clusters' cells, which makes exact transport much cheaper.

    Parameters
    ----------
    x : (n, d) points.
    weights : (n,) non-negative weights.
    tol : float, the relative mass that may be dropped.

    Returns
    -------
    points : (k, d), weights : (k,), the k heaviest atoms.

    Examples
    --------
    >>> import numpy as np
    >>> x, w = drop_negligible(np.eye(3), np.array([0.5, 0.5, 1e-20]))
    >>> x.shape, w.tolist()
    ((2, 3), [0.5, 0.5])
    """
    x, w = as_measure(x, weights)
    order = np.argsort(w)
    cumulative = np.cumsum(w[order])
    total = cumulative[-1]
    drop = order[:int(np.searchsorted(cumulative, tol * total, side="right"))]
    if drop.size == 0:
        return x, w
    keep = np.ones(w.size, dtype=bool)
    keep[drop] = False
    return x[keep], w[keep] * (total / w[keep].sum())


def _density_values(rho, points, name):
    if not callable(rho):
        raise TypeError(f"{name} must be a callable of points (N, d) -> densities (N,); "
                        f"got {type(rho).__name__}")
    values = as_float_array(rho(points), f"{name}(points)")
    if values.shape != (points.shape[0],):
        raise ValueError(f"{name} must return one density per point, shape ({points.shape[0]},); "
                         f"got {values.shape}")
    if np.any(values < 0):
        raise ValueError(f"{name} must be non-negative; it takes the value {values.min():.3g}")
    return values


def sample_density(rho, n, d, seed=None, batch=None):
    """n i.i.d. tokens with density ρ on S^{d-1}: shape (n, d), or (batch, n, d).

    S^1: exact inverse CDF of the piecewise-constant density with the midpoint values of ρ on
    2^16 cells (within about a cell, 1e-4 rad, of ρ in W_1). d >= 3: rejection from uniform
    proposals against M = 1.25 max ρ over 2^15 random probes, exact whenever M >= sup ρ; a
    proposal with ρ > M exposes a low bound and restarts the draw with M = 1.25 × that value.
    """
    d = as_count(d, "d", minimum=2)
    count = 1 if batch is None else as_count(batch, "batch")
    n = as_size(n, "n", 24 * d * count)         # proposals, their normals and the accepted points
    rng = np.random.default_rng(as_seed(seed))
    draw = _sample_circle if d == 2 else _sample_rejection
    x = draw(rho, n * count, d, rng)
    return x.reshape((n, d) if batch is None else (count, n, d))


def _sample_circle(rho, n, d, rng):
    h = 2 * np.pi / CIRCLE_GRID
    left = h * np.arange(CIRCLE_GRID)
    mass = _density_values(rho, circle_points(left + 0.5 * h), "rho") * h
    return circle_points(h * inverse_cdf(mass, rng.random(n), "rho"))


def relative(values):
    """``values / max(values)`` (unchanged if none is positive): the same density up to a constant
    factor, whose sums cannot overflow even for values near the largest double (1.8e308)."""
    top = np.max(values, initial=0.0)
    return values / top if top > 0 else values


def inverse_cdf(mass, u, name="rho"):
    """F^{-1}(u) for the piecewise-constant density with masses ``mass`` on N unit bins [k, k+1):
    positions in [0, N) for the quantile levels u in [0, 1) (bins of zero mass are never hit)."""
    mass = relative(mass)
    cdf = np.cumsum(mass)
    if not cdf[-1] > 0:
        raise ValueError(f"{name} has zero mass")
    u = u * cdf[-1]
    k = np.minimum(np.searchsorted(cdf, u, side="right"), mass.size - 1)
    below = cdf[k] - mass[k]
    return k + np.clip((u - below) / mass[k], 0.0, 1.0)


def _sample_rejection(rho, n, d, rng):
    probe_values = _density_values(rho, uniform_sphere(BOUND_PROBES, d, seed=rng), "rho")
    scale = probe_values.max()          # work with rho / scale: no overflow for huge densities
    if not scale > 0:
        raise ValueError("rho vanishes at every probe point; give a density with positive mass")
    probe_values = probe_values / scale
    bound = BOUND_MARGIN
    while True:
        acceptance = probe_values.mean() / bound
        accepted, total, seen = [], 0, 0.0
        while total < n:
            size = min(int(1.2 * (n - total) / acceptance) + 256, 1 << 20)
            proposals = uniform_sphere(size, d, seed=rng)
            values = _density_values(rho, proposals, "rho") / scale
            seen = max(seen, values.max())
            if seen > bound:
                break
            keep = proposals[rng.random(values.size) * bound < values]
            accepted.append(keep)
            total += keep.shape[0]
        if seen <= bound:
            return np.concatenate(accepted)[:n]
        bound = BOUND_MARGIN * seen


def zonal_harmonic(l, d, t):
    """Z_l(t) on S^{d-1}, normalised so Z_l(1) = 1: Chebyshev T_l (d = 2), Legendre P_l (d = 3),
    Gegenbauer C_l^{(d-2)/2}(t)/C_l^{(d-2)/2}(1) in general. x -> Z_l(<x, u>) is a degree-l
    spherical harmonic with zero mean and |Z_l| <= 1."""
    l = as_count(l, "l", minimum=0)
    d = as_count(d, "d", minimum=2)
    if d == 2:
        return eval_chebyt(l, t)
    alpha = 0.5 * (d - 2)
    return eval_gegenbauer(l, alpha, t) / eval_gegenbauer(l, alpha, 1.0)


def perturbed_uniform(d, amplitude=0.6, degree=3, seed=0):
    """The density ρ(x) = (1 + ε sum_{l=1}^{L} c_l Z_l(<x, u_l>)) / |S^{d-1}| with random unit
    directions u_l and random coefficients c_l normalised to sum |c_l| = 1 (seeded), so that
    ∫ ρ dσ = 1 and ρ >= (1 - ε)/|S^{d-1}| > 0.  Returns a callable of points (N, d)."""
    d = as_count(d, "d", minimum=2)
    eps = as_positive(amplitude, "amplitude")
    if eps >= 1:
        raise ValueError(f"amplitude must be < 1 so that the density stays positive; got {eps}")
    degree = as_count(degree, "degree")
    rng = np.random.default_rng(as_seed(seed))
    directions = uniform_sphere(degree, d, seed=rng)
    coeffs = rng.uniform(-1.0, 1.0, degree)
    coeffs /= np.abs(coeffs).sum()
    area = sphere_area(d)

    def rho(x):
        x = as_points(x, "x", d=d)
        t = np.clip(x @ directions.T, -1.0, 1.0)
        wave = sum(c * zonal_harmonic(l + 1, d, t[:, l]) for l, c in enumerate(coeffs))
        return (1.0 + eps * wave) / area

    rho.spec = dict(kind="perturbed_uniform", d=d, amplitude=eps, degree=degree, seed=seed)
    return rho
