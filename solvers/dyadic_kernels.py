"""Numba kernels of the finite-volume stage on cells of different widths on S^1: the flux pass and
the SA field in log space where Φ is tiny.

Cells C_i of widths w_i, centres c_i, gaps g_i = (w_i + w_{i+1})/2 between consecutive centres.
The fluxes are ``circle_kernels.flux_pass``'s, with the differences divided by the actual distances:

- slopes σ_i = minmod((ρ_{i+1} - ρ_i)/g_i, (ρ_i - ρ_{i-1})/g_{i-1}) per unit angle and face states
  ρ_i ± σ_i w_i/2 (between the neighbours' values: ≥ 0 and ≤ 2ρ_i, so the positivity rate keeps its
  bound); upwind2 face velocities u_i ± (w_i/2) u'_i clipped to the speed bound; the cell is
  unresolved when w_i² |ρ''_i| > ``UNRESOLVED`` · max of the three densities, ρ''_i the divided second
  difference 2((ρ_{i+1} - ρ_i)/g_i - (ρ_i - ρ_{i-1})/g_{i-1})/(g_{i-1} + g_i) (on equal cells exactly
  the uniform grid's ρ_{i+1} - 2ρ_i + ρ_{i-1});
- muscl, tpfa: face velocity (P_{i+1} - P_i)/g_i;
- dρ_i/dt = -(F_{i+1/2} - F_{i-1/2})/w_i and the forward-Euler positivity rate max_i out_i/(w_i ρ_i).

Each flux leaves one cell and enters its neighbour, so Σ_i w_i dρ_i/dt = 0 to round-off.
"""
from . import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit

from .circle_kernels import UNRESOLVED, face_fluxes


@njit(cache=True)
def flux_pass(rho, widths, gaps, u, slope, pot, bound, flux, work, out):
    """out_i = -(F_{i+1/2} - F_{i-1/2})/w_i; returns the positivity rate (module docstring).
    ``flux`` as ``circle_kernels.FLUX_CODES``; work: (5, N) scratch."""
    n = rho.shape[0]
    east, west, coarse, fluxes, outflow = work[0], work[1], work[2], work[3], work[4]
    for i in range(n):
        im = i - 1 if i > 0 else n - 1
        ip = i + 1 if i + 1 < n else 0
        outflow[i] = 0.0
        if flux == 1 or flux == 3:
            continue
        dl = (rho[i] - rho[im]) / gaps[im]
        dr = (rho[ip] - rho[i]) / gaps[i]
        half = 0.0
        if dl * dr > 0.0:
            half = 0.5 * widths[i] * (dl if abs(dl) < abs(dr) else dr)
        if flux == 2:
            east[i] = rho[i] + half
            west[i] = rho[i] - half
            continue
        du = 0.5 * widths[i] * slope[i]
        east[i] = (rho[i] + half) * max(min(u[i] + du, bound), 0.0)
        west[i] = (rho[i] - half) * min(max(u[i] - du, -bound), 0.0)
        curvature = 2.0 * (dr - dl) / (gaps[im] + gaps[i]) * widths[i] * widths[i]
        coarse[i] = abs(curvature) > UNRESOLVED * max(rho[im], rho[i], rho[ip])
    face_fluxes(flux, rho, u, east, west, coarse, pot, 1.0 / gaps, fluxes, outflow)
    rate = 0.0
    for i in range(n):
        out[i] = (fluxes[i - 1 if i > 0 else n - 1] - fluxes[i]) / widths[i]
        if outflow[i] > 0.0:
            rate = max(rate, outflow[i] / (rho[i] * widths[i])) if rho[i] > 0.0 else np.inf
    return rate


@njit(cache=True)
def log_space(masses, angles, beta, targets, log_phi, vel):
    """log Φ~_i = log Σ_j m_j e^{β(cos(c_i - c_j) - 1)} and Σ_j w_ij sin(c_j - c_i), w_ij ∝ m_j
    e^{β cos(c_i - c_j)}, at the cells ``targets``, by a direct log-sum-exp over all sources."""
    n = masses.shape[0]
    for k in range(targets.shape[0]):
        i = targets[k]
        top = -np.inf
        for j in range(n):
            if masses[j] > 0.0:
                top = max(top, math.log(masses[j]) + beta * (math.cos(angles[i] - angles[j]) - 1.0))
        z = 0.0
        g = 0.0
        for j in range(n):
            if masses[j] > 0.0:
                e = math.exp(math.log(masses[j]) + beta * (math.cos(angles[i] - angles[j]) - 1.0) - top)
                z += e
                g += e * math.sin(angles[j] - angles[i])
        log_phi[k] = top + math.log(z)
        vel[k] = g / z
