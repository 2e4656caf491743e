"""Hardmax: SA trajectories converge to the β = ∞ dynamics (paper §9.3), which clusters.

Hardmax attention, dx_i/dt = P_{x_i} (1/|C_i|) Σ_{j∈C_i} V x_j with C_i = argmax_j <Q x_i, K x_j>
(``meanfield.Hardmax``; ties share the weight), is integrated by ``solvers.hardmax.solve``: RK4
on the pieces where the sets C_i are fixed, switching times located by bisection, chattering steps
where a trajectory slides along a switching surface.  SA with the same Q, K, V (V = I) is integrated
by the adaptive Dormand–Prince pair at rtol 1e-12, from the same six tokens on S^2.

Checks: (1) on a configuration whose sets never switch on [0, 0.5], max_t |x^β - x^∞| decays like
e^{-κβ} with κ within 10 % .. 30 % above the smallest score gap g along the hardmax trajectory (the
softmax weight outside C_i is e^{-β gap}; Laplace's principle gives κ → g); (2) on one with a
switch, the error decays like 1/β (observed exponent in [-1.4, -0.7]: SA smooths the jump over a
time O(1/β)); (3) from random starts (random Q, K, V = I) the hardmax tokens end in at most n/2
clusters (distance 1e-3) at T.
"""
import numpy as np

import meanfield as mf
from meanfield.clusters import cluster_count
from meanfield.cli.figures import Experiment
from meanfield.solvers import hardmax, particles

T_CONVERGENCE = 0.5
NO_SWITCH_SEED = 11   # six tokens on S^2, Q, K ~ N(0, 1): no switch on [0, 0.5], smallest gap 0.37
SWITCH_SEED = 38      # one switch, at t = 0.495


def configuration(seed, n=6, d=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(d, d)), rng.normal(size=(d, d)), mf.uniform_sphere(n, d, seed=seed)


def beta_errors(seed, betas):
    """(hardmax solution, max over output times and tokens of |x^β - x^∞| for each β)."""
    Q, K, x0 = configuration(seed)
    t = np.linspace(0, T_CONVERGENCE, 11)
    hm = hardmax.solve(mf.Hardmax(Q, K), x0, t, dt=0.005)
    errors = [float(np.abs(particles.solve(mf.SA(b, Q, K), x0, t, method="adaptive", rtol=1e-12, atol=1e-14).x
                           - hm.x).max()) for b in betas]
    return hm, np.array(errors)


def main(argv=None):
    exp = Experiment("hardmax", __doc__.splitlines()[0], argv)
    smooth_betas = np.array(exp.size([10, 20, 30], [10, 15, 20, 25, 30, 35]), dtype=float)
    switch_betas = np.array(exp.size([10, 20, 40], [10, 20, 40, 80, 160]), dtype=float)
    hm, smooth = beta_errors(NO_SWITCH_SEED, smooth_betas)
    g = hm.info["min_gap"]
    rate = float(np.log(smooth[-2] / smooth[-1]) / (smooth_betas[-1] - smooth_betas[-2]))
    exp.check("no switch: hardmax switches nothing on [0, 0.5]", hm.info["events"] == 0, events=hm.info["events"])
    exp.check("no switch: error ~ e^{-kappa beta} with g < kappa < 1.3 g (g = smallest score gap)",
              0.9 * g < rate < 1.3 * g, kappa=rate, gap=g, errors=smooth)
    hm_switch, jump = beta_errors(SWITCH_SEED, switch_betas)
    slope = float(np.polyfit(np.log(switch_betas), np.log(jump), 1)[0])
    exp.check("one switch: it is located (no chattering)", hm_switch.info["events"] == 1
              and hm_switch.info["chattering"] == 0, events=hm_switch.info["events"],
              switch_times=hm_switch.info["switch_times"])
    exp.check("one switch: error ~ 1/beta (exponent in [-1.4, -0.7])", -1.4 <= slope <= -0.7 and
              bool(np.all(np.diff(jump) < 0)), exponent=slope, errors=jump)

    n, seeds, T = exp.size((8, 2, 20.0), (16, 4, 40.0))
    t = np.linspace(0, T, 41)
    counts, info = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(100 + seed)
        Q, K = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
        sol = hardmax.solve(mf.Hardmax(Q, K), mf.uniform_sphere(n, 3, seed=100 + seed), t, dt=0.05)
        counts.append([cluster_count(x, 1e-3) for x in sol.x])
        info.append(dict(events=sol.info["events"], chattering=sol.info["chattering"]))
    final = [c[-1] for c in counts]
    exp.check(f"random Q, K, V = I: at most n/2 = {n // 2} clusters at T = {T:g}", max(final) <= n // 2,
              clusters=final, runs=info)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.8), constrained_layout=True)
    ax = axes[0]
    ax.semilogy(smooth_betas, smooth, "o-", ms=8, lw=2, label="max |x^β − x^∞|")
    ax.semilogy(smooth_betas, smooth[-1] * np.exp(-g * (smooth_betas - smooth_betas[-1])), "k:",
                label=f"e^(−g β), g = {g:.3f} (smallest gap)")
    ax.set(xlabel="β", ylabel="max error on [0, 0.5]", title=f"no switch: exponential, κ = {rate:.3f}")
    ax = axes[1]
    ax.loglog(switch_betas, jump, "s-", ms=8, lw=2, color="C1", label="max |x^β − x^∞|")
    ax.loglog(switch_betas, jump[0] * switch_betas[0] / switch_betas, "k:", label="1/β")
    ax.set(xlabel="β", ylabel="max error on [0, 0.5]", title=f"one switch: algebraic, exponent {slope:.2f}")
    ax = axes[2]
    for k, c in enumerate(counts):
        ax.plot(t, c, "-", lw=2, drawstyle="steps-post", label=f"seed {k}: {info[k]['events']} switches")
    ax.set(xlabel="t", ylabel="clusters (distance 1e-3)", ylim=(0, n + 1),
           title=f"hardmax from random starts, n = {n}, S², random Q, K")
    for a in axes:
        a.legend(fontsize=10)
        a.title.set_fontsize(13)
    exp.finish(fig, dict(no_switch=dict(betas=smooth_betas, errors=smooth, gap=g, kappa=rate),
                         switch=dict(betas=switch_betas, errors=jump, exponent=slope,
                                     switch_times=hm_switch.info["switch_times"]),
                         clusters=dict(n=n, T=T, t=t, counts=counts, runs=info)))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
