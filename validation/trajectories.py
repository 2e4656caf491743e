"""Trajectories on the circle and on S^2: tokens gather into clusters (SA, β = 1 and β = 9).

n tokens i.i.d. uniform on S^{d-1} follow the SA dynamics
dx_i/dt = P_{x_i} Σ_j e^{β<x_i,x_j>} x_j / Σ_k e^{β<x_i,x_k>}  (RK4 + renormalisation).
At β = 1 they reach a single cluster quickly; at β = 9 they first form several clusters
(the fast phase) which then sit still for a long time (metastability).  The figure shows
θ_i(t) on the circle and the paths on S^2; an animated GIF (Pillow writer) shows the
β = 9 tokens on S^2.

Checks: one cluster at T for β = 1 (circle and sphere); several clusters at T_mid for β = 9;
E_β(t) non-decreasing along every run; |x_i| = 1 to round-off.
"""
import numpy as np

import meanfield as mf
from meanfield.clusters import cluster_count
from meanfield.figures import Experiment, max_relative_decrease
from meanfield.plotting import animate
from meanfield.solvers import particles

TOL = 1e-2            # geodesic cluster scale
BETAS = (1.0, 9.0)


def _sphere_axes(ax):
    u, v = np.mgrid[0:2 * np.pi:30j, 0:np.pi:16j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", linewidth=0.4)
    ax.set_box_aspect((1, 1, 1))
    ax.set_axis_off()


def _animate(exp, sol, frames):
    """GIF of the tokens on S^2 (``meanfield.plotting.animate``: Mollweide map, 800 px wide,
    clusters ringed by mass, trajectories as lines)."""
    return animate(exp.path(".gif"), particles=sol, frames=frames)


def main(argv=None):
    exp = Experiment("trajectories", __doc__.splitlines()[0], argv)
    n = exp.size(16, 40)
    T = exp.size(12.0, 30.0)
    t_mid = exp.size(6.0, 15.0)
    steps = exp.size(121, 301)
    t = np.linspace(0.0, T, steps)
    t = np.union1d(t, [t_mid])
    k_mid = int(np.searchsorted(t, t_mid))
    runs = {}
    for d in (2, 3):
        x0 = mf.uniform_sphere(n, d, seed=2023 + d)
        for beta in BETAS:
            sol = particles.solve(mf.SA(beta), x0, t, method="rk4", dt=0.02)
            runs[d, beta] = sol
            counts = [cluster_count(sol.x[k], TOL) for k in range(t.size)]
            dip = max_relative_decrease(sol.energy)
            exp.check(f"d={d} beta={beta:g}: E_beta(t) non-decreasing", dip <= 1e-12, max_relative_decrease=dip)
            norm_err = float(np.max(np.abs(np.linalg.norm(sol.x, axis=-1) - 1)))
            exp.check(f"d={d} beta={beta:g}: tokens stay on the sphere", norm_err <= 1e-12, max_norm_error=norm_err)
            runs[d, beta].info["clusters"] = counts
        exp.check(f"d={d}: beta=1 forms a single cluster by T={T:g}", runs[d, 1.0].info["clusters"][-1] == 1,
                  clusters=runs[d, 1.0].info["clusters"][-1])
        mid = runs[d, 9.0].info["clusters"][k_mid]
        exp.check(f"d={d}: beta=9 has several clusters at t={t_mid:g}", 2 <= mid <= n // 2, clusters=mid)

    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(11, 10))
    grid = fig.add_gridspec(2, 2, height_ratios=(1, 1.7), hspace=0.15)
    for col, beta in enumerate(BETAS):
        ax = fig.add_subplot(grid[0, col])
        theta = mf.circle_angles(runs[2, beta].x)
        ax.plot(t, theta, ".", ms=1.2, color="C0")
        ax.set(xlabel="t", ylabel="θ_i(t)", ylim=(0, 2 * np.pi),
               title=f"circle, SA β = {beta:g}, n = {n}: {runs[2, beta].info['clusters'][-1]} cluster(s) at T")
        ax3 = fig.add_subplot(grid[1, col], projection="3d")
        _sphere_axes(ax3)
        x = runs[3, beta].x
        for i in range(n):
            ax3.plot(*x[:, i].T, color="C0", linewidth=0.8)
        ax3.scatter(*x[0].T, s=8, color="0.4", depthshade=False, label="t = 0")
        ax3.scatter(*x[-1].T, s=30, color="C3", depthshade=False, label=f"t = {T:g}")
        ax3.set_title(f"S², SA β = {beta:g}: {runs[3, beta].info['clusters'][-1]} cluster(s) at T")
        ax3.legend(loc="lower left", fontsize=8)
    gif = _animate(exp, runs[3, 9.0], frames=exp.size(6, 60))
    results = {f"d{d}_beta{beta:g}": dict(t=t, clusters=sol.info["clusters"], energy=sol.energy,
                                          final_angles_or_points=sol.x[-1])
               for (d, beta), sol in runs.items()}
    results.update(n=n, T=T, t_mid=t_mid, tol=TOL, gif=gif.name, gif_bytes=gif.stat().st_size)
    exp.finish(fig, results)


if __name__ == "__main__":
    import sys
    from meanfield.figures import run_script
    sys.exit(run_script(__file__))
