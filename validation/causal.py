"""Causal attention: token 1 fixed, one cluster for V = I, Rényi centres, particles vs the causal PDE.

Causal attention (Karagodin–Polyanskiy–Rigollet, arXiv:2411.04990): token i attends to the tokens
j <= i only (``SA(..., causal=True)``).  Their theorem: with V = I and any Q, K the tokens converge
to one cluster; token 1 sees only itself and never moves.  Their Figure 2 (n = 200, d = 2,
β = 64, Q = K = V = I) shows meta-stable clusters forming at "Rényi centres" that barely move.
We use the greedy definition of the centres (their exact definition could not be confirmed):
in the order of the sequence, token i is a centre if it is at geodesic distance >= δ = 4 β^{-1/2}
from every earlier centre.  The mean-field limit is the causal PDE on [0, 1] × S^1
(``solvers.causal``): its distance to the particles is the mean over 4 bins of s of the circle W_1
(``transport.causal.binned_w1``).

Checks: max_t |x_1(t) - x_1(0)| <= 1e-14 (random Q, K, V = I, S^2); every seed ends in one cluster
(distance 1e-3) for random Q, K and V = I; in the Figure 2 setting the centres' median drift is
below 5 % of the other tokens' median drift; particles vs PDE: the distance decreases with n on the
finest grid and with the grid at the largest n.
"""
import numpy as np

import meanfield as mf
from meanfield.transport.causal import binned_w1, causal_tokens
from meanfield.clusters import cluster_count
from meanfield.cli.figures import Experiment
from meanfield.solvers import causal, particles


def greedy_centres(x, delta):
    """Indices of the greedy Rényi centres: i is a centre if its geodesic distance to every
    earlier centre is >= delta (tokens x (n, d) in sequence order)."""
    centres = []
    for i in range(x.shape[0]):
        if all(np.arccos(np.clip(x[i] @ x[c], -1.0, 1.0)) >= delta for c in centres):
            centres.append(i)
    return np.array(centres)


def start_density(s, theta):
    return 1 + 0.6 * np.cos(theta - 2 * np.pi * s) + 0.3 * np.sin(2 * theta)


def main(argv=None):
    exp = Experiment("causal", __doc__.splitlines()[0], argv)

    # token 1 and one cluster: random Q, K, V = I on S^2
    # one of 6 seeds at n = 64 sits in a two-cluster metastable state from t ≈ 100 to t ≈ 450
    seeds, n_small, T_small = exp.size((3, 32, 60.0), (6, 64, 1000.0))
    t_small = np.linspace(0, T_small, 31)
    counts, drift_one = [], 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        model = mf.SA(1.0, Q=rng.normal(size=(3, 3)), K=rng.normal(size=(3, 3)), causal=True)
        sol = particles.solve(model, mf.uniform_sphere(n_small, 3, seed=seed), t_small)
        drift_one = max(drift_one, float(np.abs(sol.x[:, 0] - sol.x[0, 0]).max()))
        counts.append([cluster_count(x, 1e-3) for x in sol.x])
    exp.check("token 1 never moves (V = I, random Q, K)", drift_one <= 1e-14, max_drift=drift_one)
    exp.check(f"one cluster at T = {T_small:g} for every seed (random Q, K, V = I)",
              all(c[-1] == 1 for c in counts), final_clusters=[c[-1] for c in counts])

    # their Figure 2 setting
    n_fig, T_fig = exp.size((100, 10.0), (200, 30.0))
    beta = 64.0
    delta = 4 / np.sqrt(beta)
    theta0 = np.random.default_rng(0).uniform(0, 2 * np.pi, n_fig)
    t_fig = np.linspace(0, T_fig, 61)
    fig2 = particles.solve(mf.SA(beta, causal=True), mf.circle_points(theta0), t_fig)
    centres = greedy_centres(fig2.x[0], delta)
    others = np.setdiff1d(np.arange(n_fig), centres)
    drift = np.arccos(np.clip(np.sum(fig2.x[-1] * fig2.x[0], axis=1), -1.0, 1.0))
    ratio = float(np.median(drift[centres]) / np.median(drift[others]))
    exp.check("Figure 2: the greedy Renyi centres drift < 5 % of the other tokens (medians)", ratio < 0.05,
              centres=len(centres), centre_median=float(np.median(drift[centres])),
              other_median=float(np.median(drift[others])), ratio=ratio,
              clusters_at_T=cluster_count(fig2.x[-1], 1e-2))

    # particles vs the causal PDE
    model = mf.SA(3.0, causal=True)
    T = 2.0
    sizes = exp.size([128, 512], [128, 512, 2048])
    grids = exp.size([(16, 32), (32, 128)], [(16, 32), (32, 128), (64, 256)])
    pdes = [causal.solve(model, start_density, [0, T], slices=S, cells=N) for S, N in grids]
    w1 = np.empty((len(sizes), len(grids)))
    for a, n in enumerate(sizes):
        x = particles.solve(model, mf.circle_points(causal_tokens(start_density, n)), [0, T]).x[-1]
        w1[a] = [binned_w1(mf.circle_angles(x), p) for p in pdes]
    exp.check("particles vs PDE: distance decreases with n (finest grid)", bool(np.all(np.diff(w1[:, -1]) < 0)),
              distances=w1[:, -1], n=sizes)
    exp.check("particles vs PDE: distance decreases with the grid (largest n)", bool(np.all(np.diff(w1[-1]) < 0)),
              distances=w1[-1], grids=grids)
    mass_error = float(max(np.abs(p.mass - 1).max() for p in pdes))
    exp.check("PDE: every slice keeps unit mass, density >= 0", mass_error <= 1e-13 and
              min(p.rho.min() for p in pdes) >= 0, mass_error=mass_error)

    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from meanfield.plotting.ticks import log_ticks
    fig, axes = plt.subplots(2, 3, figsize=(19, 11), constrained_layout=True)
    ax = axes[0, 0]
    angles = np.unwrap(mf.circle_angles(fig2.x), axis=0)
    ax.plot(t_fig, angles[:, others], color="0.6", lw=0.6)
    ax.plot(t_fig, angles[:, centres], color="C3", lw=2.5)
    ax.plot([], [], color="C3", lw=2.5, label=rf"{len(centres)} greedy Rényi centres ($\delta = 4\beta^{{-1/2}}$)")
    ax.plot([], [], color="0.6", label="other tokens")
    ax.set(xlabel="$t$", ylabel=r"angle $\theta_i(t)$ (unwrapped)",
           title=rf"causal SA, $n = {n_fig}$, $d = 2$, $\beta = 64$ (their Fig. 2)")
    ax.legend(fontsize=10, loc="upper right")
    ax = axes[0, 1]
    ax.semilogy(others + 1, np.maximum(drift[others], 1e-16), ".", color="0.5", label="other tokens")
    ax.semilogy(centres + 1, np.maximum(drift[centres], 1e-16), "o", color="C3", ms=8, label="centres")
    ax.set(xlabel="token index $i$", ylabel=rf"drift $|\theta_i(T) - \theta_i(0)|$, $T = {T_fig:g}$",
           title=f"centres barely move: median ratio {ratio:.1e}")
    ax.legend(fontsize=10)
    ax = axes[0, 2]
    for k, c in enumerate(counts):
        ax.semilogy(t_small, c, "-", lw=2, label=f"seed {k}")
    ax.set(xlabel="$t$", ylabel=r"clusters (distance $10^{-3}$)",
           title=rf"random $Q, K$, $V = I$, $S^2$, $n = {n_small}$, $\beta = 1$: one cluster")
    ax.legend(fontsize=10)
    ax = axes[1, 0]
    last = pdes[-1]
    image = ax.pcolormesh(last.theta, last.s, last.rho[-1], shading="nearest",
                          norm=LogNorm(vmin=max(last.rho[-1].min(), 1e-4), vmax=last.rho[-1].max()))
    fig.colorbar(image, ax=ax, label=r"density $\rho(T, s, \theta)$")
    ax.set(xlabel=r"$\theta$", ylabel="position in the sequence $s$",
           title=rf"causal PDE, SA $\beta = 3$, $T = {T:g}$, {grids[-1][0]} × {grids[-1][1]} cells")
    ax = axes[1, 1]
    for b, (S, N) in enumerate(grids):
        ax.loglog(sizes, w1[:, b], "o-", lw=2, ms=8, label=f"PDE {S} × {N}")
    ax.loglog(sizes, w1[0, -1] * sizes[0] / np.array(sizes), "k:", label=r"$\propto 1/n$")
    ax.set(xlabel="tokens $n$", ylabel=r"mean over 4 $s$-bins of $W_1$ (rad)", title="particles vs the causal PDE")
    log_ticks(ax.xaxis, sizes)
    ax.legend(fontsize=10)
    ax = axes[1, 2]
    x = particles.solve(model, mf.circle_points(causal_tokens(start_density, sizes[-1])), [0, T]).x[-1]
    s_tokens = (np.arange(sizes[-1]) + 0.5) / sizes[-1]
    ax.scatter(mf.circle_angles(x), s_tokens, s=3, color="k")
    ax.set(xlabel=r"$\theta_i(T)$", ylabel="$s_i = (i - 1/2)/n$", xlim=(0, 2 * np.pi), ylim=(0, 1),
           title=f"the tokens at $T = {T:g}$, $n = {sizes[-1]}$")
    for a in axes.ravel():
        a.title.set_fontsize(13)
    exp.finish(fig, dict(token_one_drift=drift_one, clusters=dict(t=t_small, counts=counts, n=n_small),
                         figure2=dict(n=n_fig, beta=beta, delta=delta, T=T_fig, centres=centres, drift=drift,
                                      ratio=ratio, definition="greedy: a centre is at distance >= delta from "
                                                              "every earlier centre"),
                         particles_vs_pde=dict(n=sizes, grids=grids, distances=w1, T=T)))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
