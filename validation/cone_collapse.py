"""Cone collapse and Wendel's theorem (paper.md §3.6): tokens in an open hemisphere collapse to a point.

Cone collapse: if <x_i(0), w> > 0 for all i, then r(t) = min_i <x_i(t), w> is non-decreasing,
since d/dt <x_i, w> = Z_i^{-1} Σ_j e^{β<x_i,x_j>} (<x_j, w> - <x_i,x_j><x_i,w>) >= 0 at the
minimising i; and α(t) = min_i <x_i(t), x*> (x* the limit point) obeys
α' >= (1 - α)/(2 n e^{2β}), so 1 - α(t) <= C e^{-t/(2 n e^{2β})}.  The runs (SA and USA, S^2
and S^7, n tokens uniform on a hemisphere, RK4 + renormalisation) measure r(t) and the decay
rate of 1 - α(t), fitted on its tail, against that bound and against the local rates near
consensus, 2 (SA) and 2 e^β (USA) for 1 - <x_i, x_j> (paper.md §3.7-3.8).

Wendel: n i.i.d. uniform points on S^{d-1} lie in one open hemisphere with probability
2^{-(n-1)} Σ_{k<d} C(n-1, k) (1 when d >= n).  Monte Carlo for n = 32, d = 2..32: a sample is in
an open hemisphere iff the linear programme max s subject to <x_i, w> >= s, |w_k| <= 1 has s > 0.

Checks: r(t) non-decreasing (to 1e-12) in every run; the measured rate exceeds the bound
1/(2 n e^{2β}) and is within 10 % of the local rate; the Monte-Carlo frequencies agree with
Wendel's formula to four binomial standard errors for every d.
"""
import numpy as np
from scipy.optimize import linprog
from scipy.special import comb

import meanfield as mf
from meanfield.figures import Experiment
from meanfield.solvers import particles

MODELS = {"SA": mf.SA, "USA": mf.USA}


def hemisphere_start(n, d, w, seed):
    """n i.i.d. uniform points reflected into the open hemisphere <x, w> > 0."""
    x = mf.uniform_sphere(n, d, seed=seed)
    side = x @ w
    return x - 2 * np.minimum(side, 0)[:, None] * w[None, :]


def wendel(n, d):
    """P(n i.i.d. uniform points on S^{d-1} lie in one open hemisphere) = 2^{-(n-1)} Σ_{k<d} C(n-1, k)."""
    k = np.arange(min(d, n))
    return float(np.sum(comb(n - 1, k, exact=False)) / 2.0 ** (n - 1))


def in_open_hemisphere(x):
    """Whether some w has <x_i, w> > 0 for every row x_i: the LP max s s.t. <x_i, w> >= s, |w| <= 1
    (box) has a positive optimum."""
    n, d = x.shape
    cost = np.zeros(d + 1)
    cost[-1] = -1.0
    res = linprog(cost, A_ub=np.hstack([-x, np.ones((n, 1))]), b_ub=np.zeros(n),
                  bounds=[(-1.0, 1.0)] * d + [(None, 1.0)], method="highs")
    return bool(res.status == 0 and -res.fun > 1e-9)


def tail_rate(t, u, lo=1e-10, hi=1e-4):
    """Exponential decay rate of u(t) fitted (least squares on log u) where lo <= u <= hi."""
    keep = (u >= lo) & (u <= hi)
    if keep.sum() < 3:
        return float("nan")
    return float(-np.polyfit(t[keep], np.log(u[keep]), 1)[0])


def main(argv=None):
    exp = Experiment("cone_collapse", __doc__.splitlines()[0], argv)
    n = exp.size(8, 16)
    cases = [("SA", 3, 1.0), ("SA", 3, 3.0), ("SA", 8, 1.0), ("USA", 3, 1.0), ("USA", 8, 0.5)]
    runs = {}
    for k, (name, d, beta) in enumerate(cases):
        w = np.zeros(d)
        w[-1] = 1.0
        x0 = hemisphere_start(n, d, w, seed=10 + k)
        model = MODELS[name](beta)
        local = 2.0 if name == "SA" else 2.0 * np.exp(beta)
        T = exp.size(1.0, 1.5) * 20.0 / local + (30.0 if name == "SA" and beta > 2 else 12.0)
        t = np.linspace(0.0, T, 400)
        sol = particles.solve(model, x0, t, method="rk4", dt=min(0.02, 0.1 / local), energy=False)
        r = np.min(sol.x @ w, axis=1)
        x_star = mf.normalise(np.mean(sol.x[-1], axis=0))
        one_minus_alpha = 1.0 - np.min(sol.x @ x_star, axis=1)
        # 1 - <x_i, x*> ~ |x_i - x*|^2 / 2 decays at the rate of 1 - <x_i, x_j>
        rate = tail_rate(t, one_minus_alpha)
        bound = 1.0 / (2 * n * np.exp(2 * beta))
        drop = float(max(0.0, -np.min(np.diff(r))))
        label = f"{name} d={d} beta={beta:g}"
        exp.check(f"{label}: r(t) = min_i <x_i, w> non-decreasing", drop <= 1e-12, largest_decrease=drop)
        exp.check(f"{label}: decay rate of 1 - alpha above the bound 1/(2 n e^(2 beta))", rate >= bound,
                  rate=rate, bound=bound)
        exp.check(f"{label}: decay rate within 10 % of the local rate", abs(rate / local - 1) <= 0.10,
                  rate=rate, local_rate=local)
        runs[label] = dict(t=t, r=r, one_minus_alpha=one_minus_alpha, rate=rate, bound=bound, local_rate=local)

    wn = 32
    dims = list(range(2, 33)) if not exp.quick else [2, 8, 16, 24, 32]
    samples = exp.size(40, 300)
    rng = np.random.default_rng(7)
    freq, exact = [], []
    for d in dims:
        hits = sum(in_open_hemisphere(mf.uniform_sphere(wn, d, seed=rng)) for _ in range(samples))
        freq.append(hits / samples)
        exact.append(wendel(wn, d))
    freq, exact = np.array(freq), np.array(exact)
    se = np.sqrt(exact * (1 - exact) / samples)
    worst = float(np.max(np.abs(freq - exact) - 4 * se))
    exp.check("Monte Carlo agrees with Wendel's formula to 4 standard errors for every d", worst <= 1e-12,
              frequency=freq, wendel=exact, four_standard_errors=4 * se)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(19, 5.8), constrained_layout=True)
    colours = plt.cm.tab10(np.arange(len(runs)))
    for (label, run), c in zip(runs.items(), colours):
        axes[0].plot(run["t"], run["r"], color=c, lw=2, label=label)
        axes[1].semilogy(run["t"], np.maximum(run["one_minus_alpha"], 1e-17), color=c, lw=2,
                         label=f"{label}: rate {run['rate']:.3g} (local {run['local_rate']:.3g}, "
                               f"bound {run['bound']:.1e})")
    axes[0].set(xlabel="t", ylabel="r(t) = min_i <x_i(t), w>", title=f"hemisphere starts, n = {n}: r(t) never decreases")
    axes[0].set_xscale("symlog", linthresh=1.0)
    axes[0].legend(fontsize=10)
    axes[1].set(xlabel="t", ylabel="1 − α(t) = 1 − min_i <x_i(t), x*>", ylim=(1e-16, 2),
                title="collapse to x*: measured rate vs the bound 1/(2n e^{2β})")
    axes[1].legend(fontsize=9, loc="lower left")
    ax = axes[2]
    ax.errorbar(dims, np.maximum(freq, 1e-9), yerr=2 * se, fmt="o", ms=5, capsize=3,
                label=f"Monte Carlo ({samples} samples per d, ±2 s.e.)")
    fine = np.arange(2, 33)
    ax.semilogy(fine, [wendel(wn, d) for d in fine], "k-", lw=2, label="Wendel: 2^{-(n-1)} Σ_{k<d} C(n-1, k)")
    ax.set(xlabel="d", ylabel="P(all points in one open hemisphere)", ylim=(1e-9, 2),
           title=f"Wendel's theorem, n = {wn} (points at 1e-9: none observed)")
    ax.legend(fontsize=10, loc="lower right")
    for a in axes:
        a.title.set_fontsize(12)
        a.xaxis.label.set_fontsize(12)
        a.yaxis.label.set_fontsize(12)
    exp.finish(fig, dict(n=n, runs=runs, wendel=dict(n=wn, d=dims, samples=samples, frequency=freq, exact=exact)))


if __name__ == "__main__":
    import sys
    from meanfield.figures import run_script
    sys.exit(run_script(__file__))
