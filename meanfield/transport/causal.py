"""Causal attention: tokens drawn from a density on [0, 1] × S^1, and their distance to it.

Token i of n sits at s_i = (i - 1/2)/n with an angle θ_i drawn from the slice ρ(s_i, ·).  The
distance between the tokens and a ``solvers.causal`` density is the mean over B bins of s of the
circle W_1 (radians) between the bin's tokens (weights equal) and the bin's average density
(atoms ρ_{k,j} h at the cell centres); the same mean compares two densities or two token sets:

    D = (1/B) Σ_b W_1(μ_b^n, ρ_b),   μ_b^n = tokens with s_i in bin b,  ρ_b = mean of its slices.

Why not W_1 on [0, 1] × S^1: the tokens never move in s, so s-marginals agree by construction, and
the coupling that pairs mass within bins shows W_1([0,1] × S^1) <= D + (bin width); D needs only
B one-dimensional problems (exact, O(n log n)) where the product space needs an n × (S N) one.
"""
import numpy as np

from ..checks import as_count, as_float_array
from .circle import level_median_w1

__all__ = ["causal_tokens", "binned_w1"]

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def causal_tokens(density, n, grid=4096, levels=None):
    """Angles θ_i (n,) of tokens i = 1..n at s_i = (i - 1/2)/n, θ_i = F_{s_i}^{-1}(u_i): the inverse
    distribution function of the slice ρ(s_i, ·) at the levels u_i, by default the low-discrepancy
    levels u_i = frac(i φ), φ = (√5 - 1)/2 (so the tokens of any bin of s fill their slices'
    quantiles evenly).

    Parameters
    ----------
    density : callable f(s (n, 1), θ (1, grid)) -> (n, grid), non-negative
    n : int
    grid : int
        Points of the θ grid on which each distribution function is tabulated (midpoint rule).
    levels : array (n,) in [0, 1), optional
        The levels u_i (default frac(i φ); ``meanfield.compare`` shifts them by one random U per
        draw, frac(i φ + U), or draws them i.i.d.).

    Returns
    -------
    array (n,) of angles in [0, 2π)

    Examples
    --------
    >>> theta = causal_tokens(lambda s, th: 1 + 0 * th, 4)
    >>> bool(np.all((theta >= 0) & (theta < 2 * np.pi)))
    True
    """
    n = as_count(n, "n")
    s = (np.arange(n) + 0.5)[:, None] / n
    theta = (np.arange(grid) + 0.5) * (2 * np.pi / grid)
    f = np.broadcast_to(as_float_array(density(s, theta[None, :]), "density(s, theta)"), (n, grid))
    if not np.all(np.isfinite(f)) or np.any(f < 0) or np.any(f.sum(axis=1) <= 0):
        raise ValueError("density must be finite, non-negative and of positive mass on every slice")
    cdf = np.cumsum(f, axis=1)
    cdf /= cdf[:, -1:]
    if levels is None:
        u = np.mod((np.arange(n) + 1) * GOLDEN, 1.0)
    else:
        u = as_float_array(levels, "levels")
        if u.shape != (n,) or np.any(~(u >= 0) | ~(u < 1)):
            raise ValueError(f"levels must be {n} numbers in [0, 1); got shape {u.shape}")
    edges = np.arange(grid + 1) * (2 * np.pi / grid)
    out = np.empty(n)
    for i in range(n):
        out[i] = np.interp(u[i], np.r_[0.0, cdf[i]], edges)
    return np.mod(out, 2 * np.pi)


def binned_w1(first, second, k=-1, bins=4):
    """D = mean over ``bins`` equal bins of s of the circle W_1 (radians) between two measures on
    [0, 1] × S^1, each either the tokens θ (n,) of a causal particle run (token i at
    s_i = (i - 1/2)/n, equal weights) or a ``solvers.causal`` density (its output k; a bin's
    measure is the mean of its slices, atoms ρ_{k,j} h at the cell centres).  Token counts and
    slice counts must be multiples of ``bins``; the two sides may have different n, slices or
    cells.

    Parameters
    ----------
    first, second : array (n,) of angles, or CausalDensitySolution
    k : int
        Output index of a density.
    bins : int
        B, the number of bins of s.

    Returns
    -------
    float
        (1/B) Σ_b W_1(first_b, second_b) in radians.

    Examples
    --------
    >>> theta = np.random.default_rng(0).uniform(0, 2 * np.pi, 8)
    >>> round(binned_w1(theta, theta + 0.1, bins=2), 12)       # every token of every bin turned by 0.1
    0.1
    """
    bins = as_count(bins, "bins")
    pairs = zip(_bin_measures(first, k, bins), _bin_measures(second, k, bins))
    return 2 * np.pi * sum(level_median_w1(*a, *b) for a, b in pairs) / bins


def _bin_measures(measure, k, bins):
    """[(positions in turns, weights summing to 1)] for each of the ``bins`` bins of s."""
    if hasattr(measure, "rho"):
        rho = measure.rho[k]
        S, N = rho.shape
        if S % bins:
            raise ValueError(f"the {S} slices of the density must split into {bins} equal bins")
        cells = (np.arange(N) + 0.5) / N
        return [(cells, mass / mass.sum()) for mass in (slab.mean(axis=0) for slab in np.split(rho, bins))]
    theta = as_float_array(measure, "theta")
    if theta.ndim != 1 or theta.size % bins:
        raise ValueError(f"the tokens ({theta.shape}) must split into {bins} equal bins")
    return [(u, np.full(u.size, 1.0 / u.size)) for u in np.split(np.mod(theta, 2 * np.pi) / (2 * np.pi), bins)]
