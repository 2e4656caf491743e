r"""Kernel density estimates on S^1 and S^2 from weighted tokens: ``mf.kde``.

.. math::

    \hat\rho(y) = \sum_i w_i K_\kappa(\langle x_i, y\rangle), \qquad \sum_i w_i = 1,

with the von Mises kernel on S^1 and the von Mises–Fisher kernel on S^2,

.. math::

    K_\kappa(t) = \frac{e^{\kappa(t-1)}}{2\pi I_0(\kappa) e^{-\kappa}} \ (S^1), \qquad
    K_\kappa(t) = \frac{\kappa\, e^{\kappa(t-1)}}{2\pi (1 - e^{-2\kappa})} \ (S^2);

both integrate to 1 against arc length / area, so ρ̂ is a probability density (written
overflow-free for any κ). Bandwidth h (radians), concentration κ = 1/h² (for small h the kernels
are Gaussians of standard deviation h along each tangent direction). Default: the normal-reference
rule of Silverman for a q = d - 1 dimensional sample,

.. math::

    h = \hat\sigma \Big(\frac{4}{(q + 2)\, n_{\mathrm{eff}}}\Big)^{1/(q+4)}, \qquad n_{\mathrm{eff}} = 1 / \sum_i w_i^2,

with :math:`\hat\sigma = \sqrt{-2 \log \bar R}` the circular (spherical) standard deviation,
:math:`\bar R = \lVert \sum_i w_i x_i \rVert`, capped at the uniform measure's root-mean-square
geodesic distance to a point (π/√3 on S^1, √(π²/2 - 2) on S^2). The rule is optimal for one
Gaussian-like bump and oversmooths several well-separated clusters (σ̂ then measures their
spread): pass ``bandwidth`` there.
"""
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ive

from .checks import as_points, as_positive
from .measures import as_measure

__all__ = ["kde", "silverman_bandwidth"]

CHUNK = 1 << 22          # entries of the (targets × tokens) kernel matrix evaluated at once
UNIFORM_SPREAD = {2: np.pi / np.sqrt(3.0), 3: np.sqrt(np.pi ** 2 / 2.0 - 2.0)}


def silverman_bandwidth(x: ArrayLike, weights: ArrayLike | None = None) -> float:
    r"""The default bandwidth (radians) of ``kde``: Silverman's normal-reference rule on S^{d-1}.

    .. math::

        h = \min\big(\sqrt{-2\log \bar R}, \sigma_{\mathrm{unif}}\big)
        \Big(\frac{4}{(q + 2)\, n_{\mathrm{eff}}}\Big)^{1/(q+4)}, \qquad
        q = d - 1, \ n_{\mathrm{eff}} = 1 / \sum_i w_i^2.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors, d = 2 or 3.
    weights : array_like, shape (n,), optional
        Non-negative weights (default 1/n), normalised.

    Returns
    -------
    float
        h in radians.

    Raises
    ------
    ValueError
        If d is not 2 or 3, or x or the weights are invalid.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.density_estimation import silverman_bandwidth
    >>> x = mf.circle_points(np.array([0.0, 0.0]))                 # R = 1: no spread
    >>> silverman_bandwidth(x) == 0
    True
    >>> x = mf.circle_points(2 * np.pi * np.arange(8) / 8)         # R = 0: the uniform spread
    >>> round(silverman_bandwidth(x), 6)
    1.267532
    """
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


def kde(x: ArrayLike, weights: ArrayLike | None = None,
        bandwidth: float | None = None) -> Callable[[np.ndarray], np.ndarray]:
    r"""Kernel density estimate of the tokens x on S^1 or S^2 (von Mises / von Mises–Fisher kernels).

    .. math::

        \hat\rho(y) = \sum_i w_i K_\kappa(\langle x_i, y\rangle), \qquad \kappa = 1/h^2.

    Parameters
    ----------
    x : array_like, shape (n, d), d = 2 or 3
        Unit vectors.
    weights : array_like, shape (n,), optional
        Non-negative weights (default 1/n), normalised.
    bandwidth : float, optional
        Kernel width h in radians; default ``silverman_bandwidth(x, weights)``.

    Returns
    -------
    callable
        ρ̂(points (N, d)) -> densities (N,) against arc length / area, integrating to 1; usable as
        ``rho0`` of ``circle.solve`` / ``sphere.solve`` and of ``discretise``. Its ``bandwidth`` and
        ``kappa`` attributes record the kernel.

    Raises
    ------
    ValueError
        If d is not 2 or 3, x or the weights are invalid, or the bandwidth is not positive.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> rho = mf.kde(mf.circle_points(np.array([0.0, np.pi])), bandwidth=0.3)
    >>> theta = 2 * np.pi * (np.arange(2000) + 0.5) / 2000
    >>> round(float(rho(mf.circle_points(theta)).sum() * 2 * np.pi / 2000), 6)    # integrates to 1
    1.0
    >>> rho.kappa
    11.11111111111111
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
