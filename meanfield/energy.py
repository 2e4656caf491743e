r"""Interaction energy of a measure on the sphere.

.. math::

    E_\beta[\mu] = \frac{1}{2\beta} \iint e^{\beta\langle x, y\rangle}\, d\mu(x)\, d\mu(y).

For :math:`\mu = \sum_i w_i \delta_{x_i}`, :math:`E_\beta = \frac{1}{2\beta} \sum_i w_i \Phi(x_i)` with
:math:`\Phi(x) = \sum_j w_j e^{\beta\langle x, x_j\rangle}` evaluated by the same log-sum-exp kernels as the
dynamics. At β = 0 we return the limit of :math:`E_\beta - (\sum_i w_i)^2 / (2\beta)`, namely
:math:`\frac12 \lVert \sum_i w_i x_i \rVert^2`.
"""
import numpy as np
from numpy.typing import ArrayLike

from .checks import as_batch_weights, as_beta, as_points
from .solvers.particles import energies, log_energies

__all__ = ["energy", "log_energy"]


def _points_and_weights(x, weights):
    """Validated points (1, n, d) and weights (1, n) (default 1/n)."""
    x = as_points(x, "x")
    w = as_batch_weights(weights, x)
    return x[None], np.full((1, x.shape[0]), 1.0 / x.shape[0]) if w is None else w


def log_energy(x: ArrayLike, beta: float, weights: ArrayLike | None = None, summation: str = "auto") -> float:
    r"""Logarithm of 2β E_β, overflow-free for any β > 0.

    .. math::

        \log(2\beta E_\beta) = \log \sum_{i,j} w_i w_j e^{\beta\langle x_i, x_j\rangle},

    evaluated with a log-sum-exp shift (probability weights, as in ``energy``).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Points on S^{d-1}.
    beta : float
        Inverse temperature β > 0.
    weights : array_like, shape (n,), optional
        Masses w_i (default 1/n; divided by their total).
    summation : {"auto", "direct", "fast"}
        How the double sum is evaluated (as in ``particles.velocity``).

    Returns
    -------
    float
        log(2β E_β).

    Raises
    ------
    ValueError
        If x is not an array of unit vectors, the weights are invalid, or β < 0.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> round(mf.log_energy(x, beta=1000.0), 6)       # log e^β: no overflow
    1000.0
    """
    beta = as_beta(beta)
    return float(log_energies(beta, *_points_and_weights(x, weights), summation=summation)[0])


def energy(x: ArrayLike, beta: float, weights: ArrayLike | None = None, summation: str = "auto") -> float:
    r"""Interaction energy of the weighted empirical measure μ = Σ_i w_i δ_{x_i}.

    .. math::

        E_\beta = \frac{1}{2\beta} \sum_{i,j} w_i w_j e^{\beta\langle x_i, x_j\rangle}.

    Non-decreasing along SA and USA (non-increasing for V = -I). At β = 0 the limit of
    :math:`E_\beta - (\sum_i w_i)^2/(2\beta)` is returned, :math:`\frac12 \lVert \sum_i w_i x_i \rVert^2`.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Points on S^{d-1}.
    beta : float
        Inverse temperature β >= 0.
    weights : array_like, shape (n,), optional
        Masses w_i (default 1/n; given weights are divided by their total: μ is a probability
        measure).
    summation : {"auto", "direct", "fast"}
        How the double sum is evaluated (as in ``particles.velocity``).

    Returns
    -------
    float
        E_β of the weighted empirical measure.

    Raises
    ------
    ValueError
        If x is not an array of unit vectors, the weights are invalid, β < 0, or E_β exceeds the
        largest double (use ``log_energy``).

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> round(mf.energy(x, beta=1.0), 6)              # (e + e^{-1}) / 4
    0.77154
    >>> round(mf.energy(x[:1], beta=0.0), 6)          # one atom at β = 0: |x|^2 / 2
    0.5
    """
    beta = as_beta(beta)
    points, w = _points_and_weights(x, weights)
    if beta == 0:
        return float(energies(beta, points, w, summation=summation)[0])
    # exp(log(2βE) - log(2β)): finite whenever E itself is (e.g. β = 710, E ≈ 1.6e305)
    log_e = log_energies(beta, points, w, summation=summation)[0] - np.log(2.0 * beta)
    if log_e > np.log(np.finfo(float).max):
        raise ValueError(f"E_beta = exp({log_e:.6g}) exceeds the largest double at beta = {beta:g}; "
                         f"use meanfield.log_energy")
    return float(np.exp(log_e))
