"""Kernel density estimates on S^1 and S^2 from weighted tokens: ``mf.kde``.

    ρ̂(y) = sum_i w_i K_κ(<x_i, y>),   sum_i w_i = 1,

with the von Mises kernel on S^1, K_κ(t) = e^{κ(t-1)} / (2π I_0(κ) e^{-κ}), and the von
Mises–Fisher kernel on S^2, K_κ(t) = κ e^{κ(t-1)} / (2π (1 - e^{-2κ})); both integrate to 1
against arc length / area, so ρ̂ is a probability density (written overflow-free for any κ).

Bandwidth h (radians), concentration κ = 1/h^2 (for small h the kernels are Gaussians of
standard deviation h along each tangent direction). Default: the normal-reference rule of
Silverman for a q = d - 1 dimensional sample,

    h = σ̂ (4 / ((q + 2) n_eff))^{1/(q+4)},    n_eff = 1 / sum_i w_i^2,

with σ̂ = sqrt(-2 log R̄) the circular (spherical) standard deviation, R̄ = |sum_i w_i x_i|,
capped at the uniform measure's root-mean-square geodesic distance to a point (π/√3 on S^1,
sqrt(π^2/2 - 2) on S^2). The rule is optimal for one Gaussian-like bump and oversmooths
several well-separated clusters (σ̂ then measures their spread): pass ``bandwidth`` there.
"""
import numpy as np
from scipy.special import ive

from .checks import as_points, as_positive
from .measures import as_measure

__all__ = ["kde", "silverman_bandwidth"]

CHUNK = 1 << 22          # entries of the (targets × tokens) kernel matrix evaluated at once
UNIFORM_SPREAD = {2: np.pi / np.sqrt(3.0), 3: np.sqrt(np.pi ** 2 / 2.0 - 2.0)}


def silverman_bandwidth(x, weights=None):
    """The default bandwidth (radians) of ``kde`` for tokens x (n, d), d = 2 or 3."""
    x, w = as_measure(x, weights)
    d = _dimension(x)
    q = d - 1
    r = min(float(np.linalg.norm(w @ x)), 1.0)
    spread = UNIFORM_SPREAD[d] if r <= 0 else min(np.sqrt(-2.0 * np.log(r)), UNIFORM_SPREAD[d])
    n_eff = 1.0 / float(np.sum(w * w))
    return float(spread * (4.0 / ((q + 2) * n_eff)) ** (1.0 / (q + 4)))


def _dimension(x):
    d = x.shape[1]
    if d not in (2, 3):
        raise ValueError(f"kde works on S^1 (d = 2) and S^2 (d = 3); got points with d = {d}")
    return d


def kde(x, weights=None, bandwidth=None):
    """Kernel density estimate of the tokens x (n, d) on S^1 or S^2.

    Parameters
    ----------
    x : array (n, d), d = 2 or 3
        Unit vectors.
    weights : array (n,), optional
        Non-negative weights (default 1/n), normalised.
    bandwidth : float, optional
        Kernel width h in radians (κ = 1/h^2); default ``silverman_bandwidth(x, weights)``.

    Returns
    -------
    callable
        ρ̂(points (N, d)) -> densities (N,) against arc length / area, integrating to 1; usable as
        ``rho0`` of ``circle.solve`` / ``sphere.solve`` and of ``discretise``. Its ``bandwidth`` and
        ``kappa`` attributes record the kernel.
    """
    x, w = as_measure(x, weights)
    d = _dimension(x)
    h = silverman_bandwidth(x, w) if bandwidth is None else as_positive(bandwidth, "bandwidth")
    kappa = 1.0 / (h * h)
    if d == 2:
        scale = 1.0 / (2 * np.pi * ive(0, kappa))
    else:
        scale = kappa / (2 * np.pi * -np.expm1(-2.0 * kappa))
    keep = w > 0
    x, w = x[keep], w[keep]

    def density(points):
        y = as_points(points, "points", d=d)
        out = np.empty(y.shape[0])
        step = max(1, CHUNK // x.shape[0])
        for start in range(0, y.shape[0], step):
            t = y[start:start + step] @ x.T
            out[start:start + step] = np.exp(kappa * (np.minimum(t, 1.0) - 1.0)) @ w
        return scale * out

    density.bandwidth, density.kappa = h, kappa
    return density
