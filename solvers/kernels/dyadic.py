"""Numba kernels of the finite-volume stage on cells of different widths on S^1: the flux pass and
the SA field in log space where Φ is tiny.

Cells C_i of widths w_i, centres c_i, gaps g_i = (w_i + w_{i+1})/2 between consecutive centres.
The fluxes are ``kernels.circle.flux_pass``'s, with the differences divided by the actual distances:

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
from .. import _numba_env  # noqa: F401

import math

import numpy as np
from numba import njit

from .circle import UNRESOLVED, face_fluxes


@njit(cache=True)
def flux_pass(rho, widths, gaps, u, slope, pot, bound, flux, work, out):
    r"""out_i = -(F_{i+1/2} - F_{i-1/2})/w_i; returns the positivity rate (module docstring).
    ``flux`` as ``kernels.circle.FLUX_CODES``; work: (5, N) scratch.

    .. math::

        \text{out}_i = -\frac{F_{i+1/2} - F_{i-1/2}}{w_i}, \qquad
        \text{rate} = \max_i \frac{\text{outflow}_i}{w_i \rho_i},

    outflow_i the flux leaving cell i through its two faces (the rate is infinite when an empty cell
    would lose mass).

    Parameters
    ----------
    rho : ndarray, shape (N,)
        Cell densities.
    widths, gaps : ndarray, shape (N,)
        w_i and g_i = (w_i + w_{i+1})/2 (cyclic).
    u, slope, pot : ndarray, shape (N,)
        u, u' and P at the centres (upwind2 and upwind read u, u'; muscl and tpfa read P).
    bound : float
        Speed bound the upwind2 face velocities are clipped to.
    flux : int
        ``kernels.circle.FLUX_CODES``.
    work : ndarray, shape (5, N)
        Scratch.
    out : ndarray, shape (N,)
        Output: dρ_i/dt.

    Returns
    -------
    float
        The forward-Euler positivity rate: a stage of step dt keeps ρ ≥ 0 when dt · rate ≤ 1.

    Examples
    --------
    >>> from meanfield.solvers.meshes.dyadic import select, uniform_mesh
    >>> mesh = select(uniform_mesh(4, 1), [1, 0, 0, 0], buffer=0)       # widths π/4, π/4, π/2, π/2, π/2
    >>> rho, ones, zero, out = 1 + 0.5 * np.cos(mesh.angles), np.ones(5), np.zeros(5), np.empty(5)
    >>> rate = flux_pass(rho, mesh.widths, mesh.gaps, ones, zero, zero, 1.0, 1, np.empty((5, 5)), out)
    >>> round(rate, 6) == round(4 / np.pi, 6), bool(abs(out @ mesh.widths) < 1e-15)   # u/w_min; mass kept
    (True, True)
    """
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
            rate = max(rate, outflow[i] / widths[i] / rho[i]) if rho[i] > 0.0 else np.inf   # ρw may underflow
    return rate


@njit(cache=True)
def log_space(masses, angles, beta, targets, log_phi, vel):
    r"""log Φ~_i = log Σ_j m_j e^{β(cos(c_i - c_j) - 1)} and Σ_j w_ij sin(c_j - c_i), w_ij ∝ m_j
    e^{β cos(c_i - c_j)}, at the cells ``targets``, by a direct log-sum-exp over all sources.

    .. math::

        \log \tilde\Phi_i = \log \sum_j m_j e^{\beta(\cos(c_i - c_j) - 1)}, \qquad
        v_i = \frac{\sum_j m_j e^{\beta \cos(c_i - c_j)} \sin(c_j - c_i)}{\sum_j m_j e^{\beta \cos(c_i - c_j)}},

    each sum shifted by its largest exponent, so it holds where Φ~ itself underflows.

    Parameters
    ----------
    masses : ndarray, shape (N,)
        m_j >= 0, the cell masses (empty cells are skipped).
    angles : ndarray, shape (N,)
        c_j, the cell centres.
    beta : float
        β >= 0.
    targets : ndarray of int, shape (T,)
        The cells i where the sums are wanted.
    log_phi, vel : ndarray, shape (T,)
        Outputs: log Φ~_i and v_i.

    Returns
    -------
    None
        ``log_phi`` and ``vel`` are written in place.

    Examples
    --------
    >>> masses, angles = np.array([1.0, 1e-300]), np.array([0.0, np.pi])
    >>> log_phi, vel = np.empty(1), np.empty(1)
    >>> log_space(masses, angles, 1000.0, np.array([1]), log_phi, vel)     # Φ~ = e^{-2000} + 1e-300
    >>> round(float(log_phi[0]), 4), round(float(vel[0]), 12)
    (-690.7755, 0.0)
    """
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
