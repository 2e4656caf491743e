"""Interaction energy E_β[μ] = (1/(2β)) ∬ e^{β<x,y>} dμ(x) dμ(y).

For μ = sum_i w_i δ_{x_i}: E_β = (1/(2β)) sum_i w_i Φ(x_i), Φ(x) = sum_j w_j e^{β<x,x_j>}, with
Φ evaluated by the same log-sum-exp kernels as the dynamics.  At β = 0 we return the limit
of E_β - (sum w)^2/(2β), namely (1/2)|sum_i w_i x_i|^2.
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
    """log(2β E_β) = log Σ_ij w_i w_j e^{β<x_i, x_j>} (β > 0), overflow-free for any β
    (probability weights, as in ``energy``).

    Parameters
    ----------
    x, beta, weights, summation
        As in ``energy``.

    Returns
    -------
    float
        log(2β E_β), computed with a log-sum-exp shift.
    """
    beta = as_beta(beta)
    return float(log_energies(beta, *_points_and_weights(x, weights), summation=summation)[0])


def energy(x: ArrayLike, beta: float, weights: ArrayLike | None = None, summation: str = "auto") -> float:
    """Interaction energy E_β = (1/2β) Σ_ij w_i w_j e^{β<x_i, x_j>} of μ = Σ_i w_i δ_{x_i}.

    Non-decreasing along SA and USA (non-increasing for V = -I). At β = 0 the limit of
    E_β - (Σ w)²/(2β) is returned, ½ |Σ_i w_i x_i|².

    Parameters
    ----------
    x : array (n, d)
        Points on S^{d-1}.
    beta : float
        Inverse temperature β >= 0.
    weights : array (n,), optional
        Masses w_i (default 1/n; given weights are divided by their total: μ is a probability
        measure).
    summation : {"auto", "direct", "fast"}
        How the double sum is evaluated (as in ``particles.velocity``).

    Returns
    -------
    float
        E_β of the weighted empirical measure.
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
