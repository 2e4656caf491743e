"""Metastability on the circle: a fast phase forms l* clusters, then long plateaus and pairwise merges.

From a near-uniform start — n equally spaced angles displaced by ε Σ_{l<n/2} cos(lθ + φ_l)
with random phases, or the matching density (1/2π)(1 + ε Σ_l l sin(lθ + φ_l)) for the
finite-volume solver — every Fourier mode grows at its linear rate λ_l (``theory.growth_rate``)
and the fastest one, l* = ``theory.most_unstable_mode`` ≈ sqrt(2β), wins: after the fast phase
t_lin = log(1/ε)/λ_{l*} the tokens sit in l* clusters.  These attract each other only through
the tails e^{β(cos φ - 1)}, so the cluster count then stays constant over long plateaus and
drops by pairwise merges, each plateau longer than the last: two time scales.  SA particles
(adaptive Dormand–Prince in angle form) and the upwind finite-volume solver on S^1 both show it.

Checks (for the β in 2..12 below; λ_{l*} leads the next mode by 2-30%): at t = 2 t_lin
every run has exactly l* clusters (particles and FV); the clusters form at t_lin within 25%;
plateaus last longer than the fast phase; the time to reach a single cluster grows with β.
"""
import numpy as np

import meanfield as mf
from meanfield import theory
from meanfield.clusters import density_clusters, particle_clusters
from meanfield.figures import Experiment, max_relative_decrease
from meanfield.solvers import circle, particles

EPS = 1e-8        # size of the initial perturbation
LEVEL = 2.0       # clusters (meanfield.clusters): regions denser than twice uniform, so none in the linear phase


def perturbation_phases(count, seed):
    """Random phases φ_l, l = 1..count, of the initial perturbation."""
    return np.random.default_rng(seed).uniform(0, 2 * np.pi, count)


def near_uniform_angles(n, phases):
    """θ_i = 2πi/n + ε Σ_l cos(l θ_i^0 + φ_l): equally spaced tokens displaced along every mode."""
    th0 = 2 * np.pi * np.arange(n) / n
    l = np.arange(1, phases.size + 1)
    return th0 + EPS * np.cos(np.outer(th0, l) + phases).sum(axis=1)


def near_uniform_density(theta, phases):
    """(1/2π)(1 + ε Σ_l l sin(lθ + φ_l)): the density of the displaced tokens (to first order in ε)."""
    l = np.arange(1, phases.size + 1)
    return (1 + EPS * (l * np.sin(np.outer(theta, l) + phases)).sum(axis=1)) / (2 * np.pi)


def plateaus(t, counts, start):
    """Maximal runs of a constant count from index ``start`` on, as (count, t_begin, t_end, ended)."""
    runs = []
    for k in range(start, t.size):
        if runs and runs[-1][0] == counts[k]:
            runs[-1][2] = t[k]
        else:
            if runs:
                runs[-1][3] = True
            runs.append([int(counts[k]), float(t[k]), float(t[k]), False])
    return [tuple(r) for r in runs]


def main(argv=None):
    exp = Experiment("metastability", __doc__.splitlines()[0], argv)
    betas = exp.size([2.0, 4.0, 8.0], [2.0, 3.0, 4.0, 6.0, 8.0, 12.0])
    fv_betas = exp.size([4.0], [4.0, 8.0])
    n = exp.size(32, 64)
    seeds = exp.size(2, 4)
    T = exp.size(120.0, 1e4)
    T_fv = exp.size(70.0, 2e3)
    cells = exp.size(128, 256)
    t = np.concatenate([[0.0], np.geomspace(1.0, T, exp.size(100, 241))])
    results = dict(n=n, eps=EPS, cluster_level=LEVEL, T=T, seeds=seeds, betas=betas, t=t, particles={}, fv={})
    per_beta = {}
    for beta in betas:
        model = mf.SA(beta)
        l_star = theory.most_unstable_mode(model, 2)
        rates = np.array([theory.growth_rate(model, 2, l) for l in range(1, 3 * l_star + 3)])
        t_lin = np.log(1 / EPS) / rates[l_star - 1]
        phases = np.stack([perturbation_phases(n // 2 - 1, seed) for seed in range(seeds)])
        theta0 = np.stack([near_uniform_angles(n, p) for p in phases])
        sol = particles.solve_angles(model, theta0, t, method="adaptive", rtol=1e-8, atol=1e-10)
        counts = np.array([particle_clusters(sol.x[k], level=LEVEL)
                           for k in range(t.size)])     # (m, seeds)
        early = counts[np.searchsorted(t, 2 * t_lin)]
        t_form = np.array([t[np.argmax(counts[:, s] <= 2 * l_star)] for s in range(seeds)])
        runs = [plateaus(t, counts[:, s], int(np.searchsorted(t, t_form[s]))) for s in range(seeds)]
        t_one = np.array([t[np.argmax(counts[:, s] == 1)] if np.any(counts[:, s] == 1) else np.inf
                          for s in range(seeds)])
        longest = np.array([max(e - b for k, b, e, _ in r if k > 1) for r in runs])
        second = np.sort(rates)[-2]
        exp.check(f"beta={beta:g}: {l_star} = l* clusters at t = 2 t_lin in every particle run",
                  np.all(early == l_star), early=early, l_star=l_star, gap_to_next_mode=1 - second / rates.max())
        exp.check(f"beta={beta:g}: clusters form at t_lin within 25%", np.all(np.abs(t_form / t_lin - 1) <= 0.25),
                  t_form=t_form, t_lin=t_lin)
        exp.check(f"beta={beta:g}: plateaus outlast the fast phase", np.all(longest >= 2 * t_form),
                  longest_plateau=longest, t_form=t_form)
        per_beta[beta] = dict(counts=counts, t_one=t_one, runs=runs)
        results["particles"][f"beta{beta:g}"] = dict(l_star=l_star, rates=rates, t_lin=t_lin, early=early,
                                                     t_form=t_form, t_single=t_one, plateaus=runs,
                                                     counts=counts)
    t_one_median = np.array([np.median(per_beta[b]["t_one"]) for b in betas])
    exp.check("the time to a single cluster grows with beta (inf: not by T)",
              np.all(np.diff(np.minimum(t_one_median, T * 10)) >= 0), t_single_median=t_one_median)

    fv_runs = {}
    t_fv = t[t <= T_fv]
    for beta in fv_betas:
        model = mf.SA(beta)
        l_star = theory.most_unstable_mode(model, 2)
        t_lin = np.log(1 / EPS) / theory.growth_rate(model, 2, l_star)
        rho0 = near_uniform_density(circle.cell_angles(cells), perturbation_phases(n // 2 - 1, 0))
        sol = circle.solve(model, rho0, t_fv, cells=cells)
        counts = np.array([density_clusters(sol, k, level=LEVEL) for k in range(t_fv.size)])
        early = int(counts[np.searchsorted(t_fv, 2 * t_lin)])
        exp.check(f"FV beta={beta:g}: l* = {l_star} clusters at t = 2 t_lin", early == l_star, early=early)
        mass_err = float(np.max(np.abs(sol.mass - 1)))     # round-off accumulates over ~1e5 steps
        exp.check(f"FV beta={beta:g}: mass conserved, density non-negative",
                  mass_err <= 1e-10 and sol.rho.min() >= 0, mass_error=mass_err, min_density=sol.rho.min(),
                  steps=sol.info["nsteps"])
        fv_runs[beta] = (sol, counts, t_lin)
        dip = max_relative_decrease(sol.energy)   # upwind: one-cell clusters crossing cells dip E slightly
        results["fv"][f"beta{beta:g}"] = dict(cells=cells, t=t_fv, counts=counts, early=early,
                                              energy_max_relative_decrease=dip,
                                              plateaus=plateaus(t_fv, counts, int(np.searchsorted(t_fv, t_lin))))

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(17, 5), constrained_layout=True)
    ax = axes[0]
    for c, beta in enumerate(betas):
        counts = per_beta[beta]["counts"]
        ax.semilogx(t[1:], counts[1:, 0], "-", color=f"C{c}", label=f"particles β = {beta:g} (l* = "
                    f"{results['particles'][f'beta{beta:g}']['l_star']})")
        ax.axvline(results["particles"][f"beta{beta:g}"]["t_lin"], color=f"C{c}", ls=":", lw=0.8)
        if beta in fv_runs:
            ax.semilogx(t_fv[1:], fv_runs[beta][1][1:], "--", color=f"C{c}", lw=2, label=f"FV, β = {beta:g}")
    ax.set(xlabel="t", ylabel="number of clusters", ylim=(0, 2 * max(r["l_star"] for r in
                                                                      results["particles"].values()) + 1),
           title=f"SA on S¹, n = {n}: clusters vs log t (dotted: t_lin)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for beta in betas:
        for r in per_beta[beta]["runs"]:
            for k, b, e, ended in r:
                if k > 1 and e - b >= 0.1 * results["particles"][f"beta{beta:g}"]["t_lin"]:   # not transients
                    ax.semilogy(beta, e - b, "o" if ended else "^", mfc=None if ended else "none",
                                color=plt.cm.viridis(min(k, 8) / 8))
    ax.set(xlabel="β", ylabel="plateau length", title="plateau lengths (colour: cluster count; ^: still on at T)")
    ax = axes[2]
    sol, counts, t_lin = fv_runs[fv_betas[-1]]
    theta = circle.cell_angles(cells)
    for k in np.unique(np.searchsorted(t_fv, [t_lin, 2 * t_lin, 10 * t_lin, t_fv[-1]])):
        k = min(k, t_fv.size - 1)
        ax.semilogy(theta, np.maximum(sol.rho[k], 1e-12), label=f"t = {t_fv[k]:.0f}: {counts[k]} clusters")
    ax.set(xlabel="θ", ylabel="ρ(t, θ)", ylim=(1e-8, None),
           title=f"FV density, SA β = {fv_betas[-1]:g}, {cells} cells (upwind)")
    ax.legend(fontsize=8)
    exp.finish(fig, results)


if __name__ == "__main__":
    import sys
    from meanfield.figures import run_script
    sys.exit(run_script(__file__))
