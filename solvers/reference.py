"""Plain NumPy reference implementations (dense n×m matrices), kept for tests and benchmarks."""
import numpy as np
from scipy.special import logsumexp


def attention_field(model, x, y=None, w=None):
    """X_i = P_{x_i} V sum_j w_j e^{β<Qx_i,Ky_j>} y_j / (Φ_i or 1) for x (n, d), sources y (m, d);
    causal models: the n × n scores masked to j <= i (-inf above the diagonal), USA divided by
    the prefix weights sum_{j<=i} w_j."""
    y = x if y is None else y
    m = y.shape[0]
    w = np.full(m, 1.0 / m) if w is None else w
    A, V = model.interaction(x.shape[1])
    s = model.beta * (x @ A @ y.T) + np.log(w)[None, :]
    if model.causal:
        s = np.where(np.tril(np.ones((x.shape[0], m), dtype=bool)), s, -np.inf)
    if model.normalised:
        p = np.exp(s - logsumexp(s, axis=1, keepdims=True))
        v = (p @ y) @ V.T
    else:
        v = (np.exp(s) @ y) @ V.T
        if model.causal:
            v /= np.cumsum(w)[:, None]
    return v - np.sum(v * x, axis=1, keepdims=True) * x


def log_potential(model, x, y, w):
    """log Φ(x_i) = log sum_j w_j e^{β<Qx_i,Ky_j>}."""
    A, _ = model.interaction(x.shape[1])
    return logsumexp(model.beta * (x @ A @ y.T) + np.log(w)[None, :], axis=1)


def energy(x, beta, w=None):
    """E_β = (1/2β) sum_ij w_i w_j e^{β<x_i,x_j>}; at β = 0, (1/2)|sum_i w_i x_i|^2."""
    n = x.shape[0]
    w = np.full(n, 1.0 / n) if w is None else w
    if beta == 0:
        mean = w @ x
        return 0.5 * mean @ mean
    return np.exp(logsumexp(beta * (x @ x.T), b=np.outer(w, w))) / (2 * beta)


def circle_angle_field(model, theta):
    """dθ_i/dt = (1/Z_i) sum_j e^{β cos(θ_i-θ_j)} sin(θ_j-θ_i), Z_i = softmax sum or n (causal:
    the sums over j <= i, and i instead of n)."""
    diff = theta[None, :] - theta[:, None]
    e = np.exp(model.beta * np.cos(diff))
    if model.causal:
        e = np.tril(e)
    count = np.arange(1, theta.size + 1) if model.causal else theta.size
    z = e.sum(axis=1) if model.normalised else count
    return model.sign * (e * np.sin(diff)).sum(axis=1) / z
