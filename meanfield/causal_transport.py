r"""Causal attention: tokens drawn from a density on [0, 1] × S^1, and their distance to it.

Token i of n sits at s_i = (i - 1/2)/n with an angle θ_i drawn from the slice ρ(s_i, ·). The
distance between the tokens and a ``solvers.causal`` density is the mean over B bins of s of the
circle W_1 (radians) between the bin's tokens (weights equal) and the bin's average density
(atoms ρ_{k,j} h at the cell centres):

.. math::

    D = \frac1B \sum_b W_1(\mu_b^n, \rho_b), \qquad \mu_b^n = \text{tokens with } s_i \text{ in bin } b, \quad
    \rho_b = \text{mean of its slices}.

Why not W_1 on [0, 1] × S^1: the tokens never move in s, so s-marginals agree by construction, and
the coupling that pairs mass within bins shows W_1([0,1] × S^1) <= D + (bin width); D needs only
B one-dimensional problems (exact, O(n log n)) where the product space needs an n × (S N) one.
"""
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from .checks import as_count, as_float_array
from .circle_transport import level_median_w1

__all__ = ["causal_tokens", "binned_w1"]

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def causal_tokens(density: Callable[[np.ndarray, np.ndarray], np.ndarray], n: int, grid: int = 4096) -> np.ndarray:
    r"""Angles of n causal tokens drawn deterministically from a density on [0, 1] × S^1.

    Token i = 1..n sits at s_i = (i - 1/2)/n, at the inverse distribution function of its slice
    ρ(s_i, ·) at a low-discrepancy level (so the tokens of any bin of s fill their slices' quantiles
    evenly):

    .. math::

        \theta_i = F_{s_i}^{-1}(u_i), \qquad u_i = \{i \varphi\}, \quad \varphi = (\sqrt5 - 1)/2.

    Parameters
    ----------
    density : callable
        f(s (n, 1), θ (1, grid)) -> (n, grid), non-negative, of positive mass on every slice.
    n : int
        Number of tokens.
    grid : int
        Points of the θ grid on which each distribution function is tabulated (midpoint rule).

    Returns
    -------
    numpy.ndarray, shape (n,)
        Angles in [0, 2π).

    Raises
    ------
    ValueError
        If the density is negative, not finite, or of zero mass on a slice.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.causal_transport import causal_tokens
    >>> theta = causal_tokens(lambda s, th: 1 + 0 * th, 4)
    >>> bool(np.all((theta >= 0) & (theta < 2 * np.pi)))
    True
    >>> (causal_tokens(lambda s, th: 1 + 0 * th, 2, grid=8) / np.pi).round(6)   # uniform: θ = 2π {iφ}
    array([1.236068, 0.472136])
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


def binned_w1(theta: ArrayLike, solution: object, k: int = -1, bins: int = 4) -> float:
    r"""Distance between the tokens of a causal particle run and a ``solvers.causal`` density: the mean
    over bins of s of the circle W_1 (radians), token i at s_i = (i - 1/2)/n (module docstring).

    .. math::

        D = \frac1B \sum_b W_1(\mu_b^n, \rho_b).

    Parameters
    ----------
    theta : array_like, shape (n,)
        Angles of the tokens, in the order of s.
    solution : CausalSolution
        Any object with ``rho`` (m, S, N): S slices of N cells at output m.
    k : int
        Output index.
    bins : int
        Number of bins B; n and S must be multiples of it.

    Returns
    -------
    float
        D in radians.

    Raises
    ------
    ValueError
        If the tokens or the slices do not split into ``bins`` equal bins.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from meanfield.causal_transport import binned_w1
    >>> uniform = SimpleNamespace(rho=np.ones((1, 4, 64)))            # 4 slices of 64 cells
    >>> theta = 2 * np.pi * np.tile((np.arange(16) + 0.5) / 16, 4)   # 16 equispaced tokens per bin
    >>> bool(np.isclose(binned_w1(theta, uniform), np.pi / 32))      # 2π/(4·16): a quarter of the spacing
    True
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
