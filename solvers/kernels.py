"""Fused Numba kernels for direct O(n m d) summation of the attention field.

For targets x_i and weighted sources (y_j, w_j), with scores s_ij = β <x_i, A y_j>
(A = Q^T K):

    Φ_i   = sum_j w_j e^{s_ij}                       (returned as log Φ_i)
    G_i   = sum_j w_j e^{s_ij} y_j
    X_i   = P_{x_i} V G_i / Φ_i        (SA)     or     P_{x_i} V G_i        (USA)

The sums stream over j in blocks with a running maximum (online log-sum-exp), so no
n×m matrix is stored and e^{s} never overflows: only e^{s - max} is formed, and the USA
factor e^{max} is applied once at the end.
"""
from . import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit, prange

BLOCK = 256


@njit(cache=True, fastmath=False, inline="always")
def _field_one(xi, yT, w, A, V, beta, normalised, general_A, general_V, scores, out):
    """Attention field at one target xi (d,) from sources yT (d, m), w (m,); returns log Φ."""
    d = xi.shape[0]
    m = w.shape[0]
    u = np.empty(d)
    if general_A:
        for c in range(d):
            acc = 0.0
            for k in range(d):
                acc += A[k, c] * xi[k]
            u[c] = beta * acc
    else:
        for c in range(d):
            u[c] = beta * A[0, 0] * xi[c]
    g = np.zeros(d)
    z = 0.0
    mx = -np.inf
    for j0 in range(0, m, BLOCK):
        nb = min(BLOCK, m - j0)
        for k in range(nb):
            scores[k] = 0.0
        for c in range(d):
            uc = u[c]
            for k in range(nb):
                scores[k] += uc * yT[c, j0 + k]
        bm = -np.inf
        for k in range(nb):
            if w[j0 + k] > 0.0 and scores[k] > bm:
                bm = scores[k]
        if bm == -np.inf:
            continue
        if bm > mx:
            scale = math.exp(mx - bm)
            z *= scale
            for c in range(d):
                g[c] *= scale
            mx = bm
        for k in range(nb):
            scores[k] = w[j0 + k] * math.exp(scores[k] - mx)
            z += scores[k]
        for c in range(d):
            acc = 0.0
            for k in range(nb):
                acc += scores[k] * yT[c, j0 + k]
            g[c] += acc
    # v = V g, scaled
    if normalised:
        factor = 1.0 / z
    else:
        factor = math.exp(mx)
    v = np.empty(d)
    if general_V:
        for c in range(d):
            acc = 0.0
            for k in range(d):
                acc += V[c, k] * g[k]
            v[c] = acc * factor
    else:
        for c in range(d):
            v[c] = V[0, 0] * g[c] * factor
    dot = 0.0
    for c in range(d):
        dot += v[c] * xi[c]
    for c in range(d):
        out[c] = v[c] - dot * xi[c]
    return mx + math.log(z)


@njit(parallel=True, cache=True)
def attention_field(x, yT, w, A, V, beta, normalised, general_A, general_V, out, log_phi):
    """Batched field: x (B, n, d) targets, yT (B, d, m) sources, w (B, m) weights.

    Writes X into ``out`` (B, n, d) and log Φ into ``log_phi`` (B, n).
    """
    B, n, d = x.shape
    for idx in prange(B * n):
        b = idx // n
        i = idx - b * n
        scores = np.empty(BLOCK)
        log_phi[b, i] = _field_one(x[b, i], yT[b], w[b], A, V, beta, normalised,
                                   general_A, general_V, scores, out[b, i])


@njit(parallel=True, cache=True)
def circle_angle_field(theta, src, w, beta, sign, normalised, out):
    """dθ_i/dt = sign · sum_j w_j e^{β cos(θ_i-θ_j)} sin(θ_j-θ_i) / (Z_i or 1), batched
    (B, n) targets and (B, m) sources; Z_i = sum_j w_j e^{β cos(θ_i-θ_j)}."""
    B, n = theta.shape
    m = src.shape[1]
    for idx in prange(B * n):
        b = idx // n
        i = idx - b * n
        ti = theta[b, i]
        z = 0.0
        g = 0.0
        for j in range(m):
            delta = src[b, j] - ti
            e = w[b, j] * math.exp(beta * (math.cos(delta) - 1.0))
            z += e
            g += e * math.sin(delta)
        if normalised:
            out[b, i] = sign * g / z
        else:
            out[b, i] = sign * g * math.exp(beta)
