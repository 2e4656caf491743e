"""Causal particles and the causal PDE converging to each other: ``meanfield convergence --causal``.

For one causal model and initial density ρ_0(s, θ), solve the causal particle system for several
token counts n (``compare.causal``'s stratified levels) and the causal PDE (``solvers.causal``) on
several grids S × N (slices × cells, refined together), and tabulate

    D(μ^n_t, ρ^h_t)    for every n, every grid and every output time,

D the mean over B bins of s of the circle W_1 (``transport.causal.binned_w1``), with the observed
orders of ``convergence.ConvergenceStudy`` (h = 2π/N the cell width in θ): in h on the most tokens,
in n on the finest grid, and the self-convergence of each discretisation alone, D(ρ_h, ρ_{h/2})
and D(μ^n, μ^{n'}).  Once clusters have formed (the s-averaged finest density has a part denser
than twice uniform) each bin's n/B tokens fix its cluster masses only to B/(2n): pairs below
twice π B/(2n) are at their floor and give no order (``ConvergenceStudy.at_floor`` with ``bins``).

W_2 is not computed: D is a W_1, the metric whose floor falls like 1/n.  No refined reference
(``sampling.refined_quantiles``) is used: its weighted atoms would change causal attention
itself (token i's field is normalised over the weights of the tokens before it), so a causal
reference would have to be refined in s as well as in θ.
"""
import time

import numpy as np

from ..compare.causal import check_causal_settings, initial_causal_tokens, slice_density, theta_marginal
from ..transport.causal import binned_w1
from ..checks import as_count, as_time_grid
from ..clusters import density_clusters
from .core import CLUSTER_LEVEL, ConvergenceStudy
from ..geometry import circle_angles
from ..solvers import causal, particles

__all__ = ["causal_study", "grid_shape", "ASPECT"]

ASPECT = 4                 # a grid given as N cells in θ has N/ASPECT slices in s


def grid_shape(grid):
    """(S, N) from a grid given as N (θ cells; S = N/``ASPECT`` slices) or as a pair (S, N).

    Parameters
    ----------
    grid : int or (int, int)
        N, or (S, N).

    Returns
    -------
    slices, cells : int

    Raises
    ------
    ValueError
        When a count is not a positive integer.

    Examples
    --------
    >>> from meanfield.convergence.causal import grid_shape
    >>> grid_shape(128), grid_shape((16, 64))
    ((32, 128), (16, 64))
    """
    if np.ndim(grid) == 0:
        cells = as_count(grid, "grid")
        return max(cells // ASPECT, 1), cells
    slices, cells = grid
    return as_count(slices, "slices"), as_count(cells, "cells")


def causal_study(model, rho0, t_eval, ns, grids, *, bins=4, sampling="stratified", seed=0, progress=None):
    """D(particles_n, density_h) for every n in ``ns`` and every grid in ``grids`` (N, or (S, N)),
    at the times t_eval (module docstring).  One draw of tokens per n.

    Parameters
    ----------
    model : SA or USA (Q = K = I, V = ±I; run causally)
    rho0 : callable
        f(s, θ) or f(points) (``compare.causal.slice_density``).
    t_eval : array (m,)
    ns : list of int
        Token counts, multiples of ``bins``, at least two different.
    grids : list of int or (int, int)
        Grids N (N/4 slices) or (S, N), refined in order, at least two different.
    bins : int
        B, the bins of s of D.
    sampling : {"stratified", "iid"}
    seed : int

    Returns
    -------
    ConvergenceStudy
        ``w1`` (m, a, b) the distances D, ``bins`` = B, ``h`` = 2π/N, ``cells`` = S·N; W_2 fields NaN.

    Examples
    --------
    >>> import meanfield as mf
    >>> r = causal_study(mf.SA(3.0), lambda s, th: 1 + 0.6 * np.cos(th - 2 * np.pi * s), [0, 0.5], [32, 128],
    ...                  [(8, 32), (16, 64)])
    >>> r.w1.shape, bool(r.w1[-1, -1, -1] < r.w1[-1, 0, -1])
    ((2, 2, 2), True)
    """
    t_eval = as_time_grid(t_eval)
    given_n, given_grids = [as_count(n, "n") for n in ns], [grid_shape(g) for g in grids]
    ns, shapes = sorted(set(given_n)), sorted(set(given_grids), key=lambda g: (g[1], g[0]))
    if len(ns) < 2 or len(shapes) < 2 or len(ns) < len(given_n) or len(shapes) < len(given_grids):
        raise ValueError(f"a convergence study needs at least two different token counts and two different grids, "
                         f"none repeated; got n = {given_n}, grids = {given_grids}")
    for n in ns:
        for slices, cells in shapes:
            model = check_causal_settings(model, n, slices, cells, bins, sampling)
    f = slice_density(rho0)
    clock, timings = time.perf_counter(), {}
    tokens = []
    for n in ns:
        x0 = initial_causal_tokens(f, n, sampling, seed, 1)[0]
        sol = particles.solve(model, x0, t_eval, energy=False, progress=progress)
        tokens.append([circle_angles(x) for x in sol.x])
    timings["particles"] = time.perf_counter() - clock
    clock = time.perf_counter()
    densities = [causal.solve(model, f, t_eval, slices=S, cells=N, progress=progress) for S, N in shapes]
    timings["density"] = time.perf_counter() - clock
    clock = time.perf_counter()
    m, a, b = t_eval.size, len(ns), len(shapes)
    w1 = np.array([[[binned_w1(tokens[i][k], densities[j], k, bins) for j in range(b)] for i in range(a)]
                   for k in range(m)])
    g1 = np.array([[binned_w1(densities[j], densities[j + 1], k, bins) for j in range(b - 1)] for k in range(m)])
    q1 = np.array([[binned_w1(tokens[i][k], tokens[i + 1][k], bins=bins) for i in range(a - 1)] for k in range(m)])
    timings["transport"] = time.perf_counter() - clock
    finest = theta_marginal(densities[-1])
    clustered = np.array([density_clusters(finest, k, level=CLUSTER_LEVEL) > 0 for k in range(m)])
    info = dict(geometry="circle", causal=True, model=model.to_dict(), model_name=repr(model), sampling=sampling,
                seed=seed, flux="upwind2", bins=bins, grids=[list(g) for g in shapes],
                grid_labels=[f"{S}×{N}" for S, N in shapes], distance=f"mean over {bins} bins of s of the circle W_1",
                transport_methods=["circle W_1 per bin"], rho0=getattr(f, "spec", None),
                timings={k: round(v, 2) for k, v in timings.items()})
    return ConvergenceStudy(t=t_eval, n=np.array(ns), cells=np.array([S * N for S, N in shapes]),
                            h=np.array([2 * np.pi / N for _, N in shapes]), w1=w1, w2=np.full(w1.shape, np.nan),
                            grid_w1=g1, grid_w2=np.full(g1.shape, np.nan), particle_w1=q1,
                            particle_w2=np.full(q1.shape, np.nan), info=info, clustered=clustered, bins=bins)
