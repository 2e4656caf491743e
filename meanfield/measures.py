"""Probability measures on S^{d-1}: weighted point measures, i.i.d. tokens drawn from a
density, and the perturbed-uniform initial densities of the comparisons.

A density ρ is taken against surface measure σ (|S^1| = 2π, |S^2| = 4π) and given as a
callable of points (N, d) -> (N,) values; it need not be normalised for sampling.
"""
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import eval_chebyt, eval_gegenbauer, gammaln

from .checks import as_count, as_float_array, as_points, as_positive, as_probability, as_seed, as_size
from .geometry import circle_points, uniform_sphere

__all__ = ["sphere_area", "as_measure", "sample_density", "inverse_cdf", "merge_atoms", "drop_negligible",
           "perturbed_uniform", "zonal_harmonic"]

CIRCLE_GRID = 1 << 16      # cells of the inverse-CDF grid on S^1
BOUND_PROBES = 1 << 15     # random points used to bound ρ for rejection on S^d, d >= 2
BOUND_MARGIN = 1.25


def sphere_area(d: int) -> float:
    r"""Surface area of the unit sphere S^{d-1} ⊂ R^d.

    .. math::

        |S^{d-1}| = \frac{2 \pi^{d/2}}{\Gamma(d/2)}.

    Parameters
    ----------
    d : int
        Ambient dimension (d >= 2).

    Returns
    -------
    float
        The area (2π for the circle, 4π for S^2).

    Raises
    ------
    ValueError
        If d is not an integer >= 2.

    Examples
    --------
    >>> from meanfield.measures import sphere_area
    >>> round(sphere_area(2), 6), round(sphere_area(3), 6)
    (6.283185, 12.566371)
    """
    d = as_count(d, "d", minimum=2)
    return float(2.0 * np.exp(0.5 * d * np.log(np.pi) - gammaln(0.5 * d)))


def as_measure(x: ArrayLike, weights: ArrayLike | None = None, name: str = "x") -> tuple[np.ndarray, np.ndarray]:
    r"""Validated (points, probability weights) of the point measure μ = Σ_i w_i δ_{x_i}.

    .. math::

        w_i \leftarrow w_i / \textstyle\sum_j w_j \quad (w = 1/n \text{ when not given}).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors.
    weights : array_like, shape (n,), optional
        Non-negative weights with positive total (None: uniform).
    name : str
        Name of x in error messages.

    Returns
    -------
    points : numpy.ndarray, shape (n, d)
    weights : numpy.ndarray, shape (n,)
        Summing to 1.

    Raises
    ------
    ValueError
        If x is not an array of unit vectors, or the weights are negative, non-finite, of the wrong
        length or of zero total.

    Examples
    --------
    >>> from meanfield.measures import as_measure
    >>> x, w = as_measure([[1.0, 0.0], [0.0, 1.0]], [1.0, 3.0])
    >>> w
    array([0.25, 0.75])
    """
    x = as_points(x, name)
    n = x.shape[0]
    if weights is None:
        return x, np.full(n, 1.0 / n)
    return x, as_probability(weights, n, name=f"weights of {name}")


def merge_atoms(x: ArrayLike, weights: ArrayLike | None = None, tol: float = 1e-7,
                return_inverse: bool = False) -> tuple[np.ndarray, ...]:
    r"""Merge the atoms of Σ_i w_i δ_{x_i} that fall in one box of side ``tol`` of R^d onto the first of them.

    Coordinates are rounded to multiples of tol; each atom moves by at most √d·tol, so W_p changes by
    at most that. Collapsed clusters of tokens become single atoms, which makes exact optimal
    transport much cheaper.

    .. math::

        |x_i - x_{\mathrm{merged}(i)}| \le \sqrt{d}\, \mathrm{tol}.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors.
    weights : array_like, shape (n,), optional
        Non-negative weights (None: uniform); divided by their total.
    tol : float
        Side of the boxes.
    return_inverse : bool
        Also return the index of the merged atom each x_i went to.

    Returns
    -------
    points : numpy.ndarray, shape (k, d)
    weights : numpy.ndarray, shape (k,)
    inverse : numpy.ndarray, shape (n,)
        Only with ``return_inverse``.

    Raises
    ------
    ValueError
        If x or the weights are invalid (as in ``as_measure``).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.measures import merge_atoms
    >>> x = np.array([[1.0, 0.0], [1.0, 1e-9], [0.0, 1.0]])
    >>> points, weights = merge_atoms(x)
    >>> points.shape, weights.round(4)
    ((2, 2), array([0.3333, 0.6667]))
    """
    x, w = as_measure(x, weights)
    _, first, inverse = np.unique(np.round(x / tol).astype(np.int64), axis=0, return_index=True,
                                  return_inverse=True)
    inverse = inverse.ravel()
    merged = x[first], np.bincount(inverse, weights=w, minlength=first.size)
    return (*merged, inverse) if return_inverse else merged


def drop_negligible(x: ArrayLike, weights: ArrayLike | None, tol: float = 1e-14) -> tuple[np.ndarray, np.ndarray]:
    r"""Drop the lightest atoms of a point measure, of total mass at most ``tol`` times the total, and
    scale the others to keep the total.

    Moving the dropped mass δ (relative) onto the other atoms costs at most δ π^p in W_p^p on the
    sphere, so (tol = 1e-14: 3e-14 in W_1, 3e-7 in W_2)

    .. math::

        |W_p(\mu, \nu) - W_p(\mu', \nu)| \le \pi\, \delta^{1/p}.

    A clustered cell measure keeps only its clusters' cells, which makes exact transport much cheaper.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors.
    weights : array_like, shape (n,)
        Non-negative weights with positive total.
    tol : float
        The relative mass that may be dropped.

    Returns
    -------
    points : numpy.ndarray, shape (k, d)
    weights : numpy.ndarray, shape (k,)
        The k heaviest atoms, weights summing to 1.

    Raises
    ------
    ValueError
        If x or the weights are invalid (as in ``as_measure``).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.measures import drop_negligible
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


def density_values(rho: Callable[[np.ndarray], np.ndarray], points: np.ndarray, name: str) -> np.ndarray:
    """A density callable evaluated at points, checked: one finite, non-negative value per point.

    Parameters
    ----------
    rho : callable
        Points (N, d) -> densities (N,).
    points : numpy.ndarray, shape (N, d)
    name : str
        The argument's name in the error messages.

    Returns
    -------
    numpy.ndarray, shape (N,)

    Raises
    ------
    TypeError
        When ``rho`` is not callable.
    ValueError
        When it returns the wrong shape, a non-finite or a negative value.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.measures import density_values
    >>> density_values(lambda x: 1 + x[:, 0], np.array([[1.0, 0.0], [-1.0, 0.0]]), "rho0")
    array([2., 0.])
    >>> density_values(lambda x: x[:, 0], np.array([[-1.0, 0.0]]), "rho0")
    Traceback (most recent call last):
    ...
    ValueError: rho0 must be non-negative; it takes the value -1
    """
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


def sample_density(rho: Callable[[np.ndarray], np.ndarray], n: int, d: int,
                   seed: int | np.random.Generator | None = None, batch: int | None = None) -> np.ndarray:
    r"""n i.i.d. tokens with density ρ (against surface measure) on S^{d-1}.

    S^1: exact inverse CDF of the piecewise-constant density with the midpoint values of ρ on
    2^16 cells (within about a cell, 1e-4 rad, of ρ in W_1),

    .. math::

        \theta_i = F^{-1}(u_i), \qquad F(\theta) = \int_0^\theta \rho \Big/ \int_0^{2\pi} \rho, \quad u_i \sim U[0, 1).

    d >= 3: rejection from uniform proposals against M = 1.25 max ρ over 2^15 random probes, exact
    whenever M >= sup ρ; a proposal with ρ > M exposes a low bound and restarts the draw with
    M = 1.25 × that value.

    Parameters
    ----------
    rho : callable
        Density: points (N, d) -> non-negative values (N,); need not be normalised.
    n : int
        Number of tokens.
    d : int
        Ambient dimension (d >= 2).
    seed : int, numpy.random.Generator or None
        Random source.
    batch : int, optional
        Number of independent draws.

    Returns
    -------
    numpy.ndarray
        Shape (n, d), or (batch, n, d).

    Raises
    ------
    TypeError
        If rho is not callable.
    ValueError
        If rho returns negative values, the wrong shape, or has zero mass.

    Examples
    --------
    >>> import meanfield as mf
    >>> rho = mf.perturbed_uniform(2, amplitude=0.5, seed=0)
    >>> mf.sample_density(rho, 100, 2, seed=0).shape
    (100, 2)
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
    mass = density_values(rho, circle_points(left + 0.5 * h), "rho") * h
    return circle_points(h * inverse_cdf(mass, rng.random(n), "rho"))


def relative(values):
    """``values / max(values)`` (unchanged if none is positive): the same density up to a constant
    factor, whose sums cannot overflow even for values near the largest double (1.8e308)."""
    top = np.max(values, initial=0.0)
    return values / top if top > 0 else values


def inverse_cdf(mass: np.ndarray, u: np.ndarray, name: str = "rho") -> np.ndarray:
    r"""Quantiles of the piecewise-constant density with masses m_k on N unit bins [k, k+1).

    .. math::

        F^{-1}(u) = k + \frac{u M - \sum_{j<k} m_j}{m_k}, \qquad \sum_{j<k} m_j \le u M < \sum_{j \le k} m_j,
        \quad M = \sum_j m_j.

    Bins of zero mass are never hit.

    Parameters
    ----------
    mass : numpy.ndarray, shape (N,)
        Non-negative masses (any total > 0).
    u : numpy.ndarray
        Quantile levels in [0, 1).
    name : str
        Name of the density in error messages.

    Returns
    -------
    numpy.ndarray
        Positions in [0, N), shape of u.

    Raises
    ------
    ValueError
        If the masses have zero total.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.measures import inverse_cdf
    >>> inverse_cdf(np.array([1.0, 0.0, 3.0]), np.array([0.0, 0.5, 0.75]))
    array([0.        , 2.33333333, 2.66666667])
    """
    mass = relative(mass)
    cdf = np.cumsum(mass)
    if not cdf[-1] > 0:
        raise ValueError(f"{name} has zero mass")
    u = u * cdf[-1]
    k = np.minimum(np.searchsorted(cdf, u, side="right"), mass.size - 1)
    below = cdf[k] - mass[k]
    return k + np.clip((u - below) / mass[k], 0.0, 1.0)


def _sample_rejection(rho, n, d, rng):
    probe_values = density_values(rho, uniform_sphere(BOUND_PROBES, d, seed=rng), "rho")
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
            values = density_values(rho, proposals, "rho") / scale
            seen = max(seen, values.max())
            if seen > bound:
                break
            keep = proposals[rng.random(values.size) * bound < values]
            accepted.append(keep)
            total += keep.shape[0]
        if seen <= bound:
            return np.concatenate(accepted)[:n]
        bound = BOUND_MARGIN * seen


def zonal_harmonic(l: int, d: int, t: ArrayLike) -> np.ndarray:
    r"""The zonal harmonic of degree l on S^{d-1}, normalised so that Z_l(1) = 1.

    .. math::

        Z_l(t) = \frac{C_l^{(d-2)/2}(t)}{C_l^{(d-2)/2}(1)} \quad (d \ge 3), \qquad Z_l = T_l \quad (d = 2),

    (Legendre P_l for d = 3). x ↦ Z_l(⟨x, u⟩) is a degree-l spherical harmonic with zero mean and
    |Z_l| <= 1.

    Parameters
    ----------
    l : int
        Degree (>= 0).
    d : int
        Ambient dimension (>= 2).
    t : array_like
        Points of [-1, 1].

    Returns
    -------
    numpy.ndarray
        Z_l(t).

    Raises
    ------
    ValueError
        If l or d is not an integer in range.

    Examples
    --------
    >>> from meanfield.measures import zonal_harmonic
    >>> zonal_harmonic(2, 3, [1.0, 0.0])          # Legendre P_2(t) = (3t^2 - 1)/2
    array([ 1. , -0.5])
    """
    l = as_count(l, "l", minimum=0)
    d = as_count(d, "d", minimum=2)
    if d == 2:
        return eval_chebyt(l, t)
    alpha = 0.5 * (d - 2)
    return eval_gegenbauer(l, alpha, t) / eval_gegenbauer(l, alpha, 1.0)


def perturbed_uniform(d: int, amplitude: float = 0.6, degree: int = 3,
                      seed: int | np.random.Generator | None = 0) -> Callable[[np.ndarray], np.ndarray]:
    r"""A seeded positive density on S^{d-1}: the uniform one plus a few random zonal harmonics.

    .. math::

        \rho(x) = \frac{1}{|S^{d-1}|}\Big(1 + \varepsilon \sum_{l=1}^{L} c_l Z_l(\langle x, u_l\rangle)\Big),
        \qquad \sum_l |c_l| = 1,

    with random unit directions u_l and random coefficients c_l, so that ∫ ρ dσ = 1 and
    ρ >= (1 - ε)/|S^{d-1}| > 0.

    Parameters
    ----------
    d : int
        Ambient dimension (>= 2).
    amplitude : float
        ε in (0, 1).
    degree : int
        L, the highest degree (>= 1).
    seed : int, numpy.random.Generator or None
        Random source of u_l and c_l.

    Returns
    -------
    callable
        ρ: points (N, d) -> densities (N,), with a ``spec`` dict of its settings.

    Raises
    ------
    ValueError
        If amplitude is not in (0, 1), or d or degree is not a valid integer.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> rho = mf.perturbed_uniform(2, amplitude=0.5, degree=2, seed=0)
    >>> theta = 2 * np.pi * (np.arange(1000) + 0.5) / 1000
    >>> round(float(rho(mf.circle_points(theta)).mean() * 2 * np.pi), 6)     # probability density
    1.0
    """
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
