"""Causal attention: tokens drawn from a density on [0, 1] × S^1, and their distance to it.

Token i of n sits at s_i = (i - 1/2)/n with an angle θ_i drawn from the slice ρ(s_i, ·).  The
distance between the tokens and a ``solvers.causal`` density is the mean over B bins of s of the
circle W_1 (radians) between the bin's tokens (weights equal) and the bin's average density
(atoms ρ_{k,j} h at the cell centres):

    D = (1/B) Σ_b W_1(μ_b^n, ρ_b),   μ_b^n = tokens with s_i in bin b,  ρ_b = mean of its slices.

Why not W_1 on [0, 1] × S^1: the tokens never move in s, so s-marginals agree by construction, and
the coupling that pairs mass within bins shows W_1([0,1] × S^1) <= D + (bin width); D needs only
B one-dimensional problems (exact, O(n log n)) where the product space needs an n × (S N) one.
"""
import numpy as np

from .checks import as_count, as_float_array
from .circle_transport import level_median_w1

__all__ = ["causal_tokens", "binned_w1"]

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def causal_tokens(density, n, grid=4096):
    """Angles θ_i (n,) of tokens i = 1..n at s_i = (i - 1/2)/n, θ_i = F_{s_i}^{-1}(u_i): the inverse
    distribution function of the slice ρ(s_i, ·) at the low-discrepancy levels u_i = frac(i φ),
    φ = (√5 - 1)/2 (so the tokens of any bin of s fill their slices' quantiles evenly).

    Parameters
    ----------
    density : callable f(s (n, 1), θ (1, grid)) -> (n, grid), non-negative
    n : int
    grid : int
        Points of the θ grid on which each distribution function is tabulated (midpoint rule).

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
    u = np.mod((np.arange(n) + 1) * GOLDEN, 1.0)
    edges = np.arange(grid + 1) * (2 * np.pi / grid)
    out = np.empty(n)
    for i in range(n):
        out[i] = np.interp(u[i], np.r_[0.0, cdf[i]], edges)
    return np.mod(out, 2 * np.pi)


def binned_w1(theta, solution, k=-1, bins=4):
    """D = mean over ``bins`` bins of s of the circle W_1 (radians) between the tokens θ (n,) of
    a causal particle run (token i at s_i = (i - 1/2)/n) and the ``solvers.causal`` density
    ``solution`` at output k (module docstring).  n and the number of slices must be multiples of
    ``bins``.

    Returns
    -------
    float
    """
    theta = as_float_array(theta, "theta")
    bins = as_count(bins, "bins")
    rho = solution.rho[k]
    S, N = rho.shape
    if theta.ndim != 1 or theta.size % bins or S % bins:
        raise ValueError(f"the tokens ({theta.shape}) and the slices ({S}) must split into {bins} equal bins")
    cells = (np.arange(N) + 0.5) / N
    total = 0.0
    for tokens, slab in zip(np.split(np.mod(theta, 2 * np.pi) / (2 * np.pi), bins), np.split(rho, bins)):
        mass = slab.mean(axis=0)
        total += level_median_w1(tokens, np.full(tokens.size, 1.0 / tokens.size), cells, mass / mass.sum())
    return 2 * np.pi * total / bins
