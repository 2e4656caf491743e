"""Interaction energy E_β[μ] = (1/(2β)) ∬ e^{β<x,y>} dμ(x) dμ(y).

For μ = sum_i w_i δ_{x_i}: E_β = (1/(2β)) sum_i w_i Φ(x_i), Φ(x) = sum_j w_j e^{β<x,x_j>}, with
Φ evaluated by the same log-sum-exp kernels as the dynamics.  At β = 0 we return the limit
of E_β - (sum w)^2/(2β), namely (1/2)|sum_i w_i x_i|^2.
"""
import numpy as np
from scipy.special import logsumexp

from .checks import as_beta, as_points

__all__ = ["energy", "log_energy"]


def _points_and_weights(x, weights):
    """Validated points (n, d) and weights (n,) (default 1/n)."""
    from solvers.particles import _check_weights
    x = as_points(x, "x")
    w = _check_weights(weights, x)
    return x, np.full(x.shape[0], 1.0 / x.shape[0]) if w is None else w[0]


def log_energy(x, beta, weights=None, summation="auto"):
    """log(2β E_β) = log sum_ij w_i w_j e^{β<x_i,x_j>} (β > 0), overflow-free for any β."""
    from solvers.particles import attention_field
    from .models import SA
    beta = as_beta(beta)
    x, w = _points_and_weights(x, weights)
    _, log_phi = attention_field(SA(beta), x[None], w[None], summation=summation)
    return float(logsumexp(log_phi[0], b=w))


def energy(x, beta, weights=None, summation="auto"):
    """E_β of sum_i w_i δ_{x_i} for points x (n, d) (weights default 1/n)."""
    beta = as_beta(beta)
    if beta == 0:
        x, w = _points_and_weights(x, weights)
        mean = w @ x
        return 0.5 * float(mean @ mean)
    return float(np.exp(log_energy(x, beta, weights, summation)) / (2.0 * beta))
