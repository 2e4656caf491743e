"""Cone collapse and Wendel's theorem (paper.md §3.6): tokens in an open hemisphere collapse to a point.

Cone collapse: if <x_i(0), w> > 0 for all i, then r(t) = min_i <x_i(t), w> is non-decreasing,
since d/dt <x_i, w> = Z_i^{-1} Σ_j e^{β<x_i,x_j>} (<x_j, w> - <x_i,x_j><x_i,w>) >= 0 at the
minimising i; and α(t) = min_i <x_i(t), x*> (x* the limit point) obeys
α' >= (1 - α)/(2 n e^{2β}), so 1 - α(t) <= C e^{-t/(2 n e^{2β})}.  The runs (SA and USA, S^2
and S^7, n tokens uniform on a hemisphere, RK4 + renormalisation) measure r(t) and the decay
rate of 1 - α(t), fitted on its tail, against that bound and against the local rates near
consensus, 2 (SA) and 2 e^β (USA) for 1 - <x_i, x_j> (paper.md §3.7-3.8).

Wendel: n i.i.d. uniform points on S^{d-1} lie in one open hemisphere with probability
2^{-(n-1)} Σ_{k<d} C(n-1, k) (1 when d >= n).  Monte Carlo for n = 32: a sample is in an open
hemisphere iff the linear programme max s subject to <x_i, w> >= s, |w_k| <= 1 has s > 0.  Only
the d where the sample can tell are tested: at least 10 expected hits and 10 expected misses
(d = 10..22 with 1000 samples; for d <= 9, p < 0.006, and zero hits would pass any test).  There
an error of the size of the classic slips (Σ_{k<=d} for Σ_{k<d}: p shifts by up to 0.14; a
sampler one dimension short) is 6-9 standard errors.

Checks: r(t) non-decreasing (to 1e-12) in every run; the measured rate is within 1e-3 of the
local rate (measured: 1e-5; a velocity 1 % off fails; the theorem's bound 1/(2 n e^{2β}) is
100-25000 times smaller than the rate, so it is recorded, not checked); the Monte-Carlo
frequencies agree with Wendel's formula to four binomial standard errors for every tested d, and
their squared z-scores sum to less than the 0.999 quantile of χ² with as many degrees of freedom.
"""
import numpy as np
from scipy.optimize import linprog
from scipy.special import comb

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.solvers import particles

MODELS = {"SA": mf.SA, "USA": mf.USA}
RATE_RTOL = 1e-3   # measured rates agree with the local rates to ~1e-5


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


def collapse_run(model, n, d, seed, T, dt):
    """Hemisphere start (w = e_d) evolved by RK4: (t, r(t) = min_i <x_i, w>, 1 - α(t), tail rate of
    1 - α), α(t) = min_i <x_i(t), x*>, x* the normalised mean at T."""
    w = np.zeros(d)
    w[-1] = 1.0
    t = np.linspace(0.0, T, 400)
    sol = particles.solve(model, hemisphere_start(n, d, w, seed), t, method="rk4", dt=dt, energy=False)
    x_star = mf.normalise(np.mean(sol.x[-1], axis=0))
    one_minus_alpha = 1.0 - np.min(sol.x @ x_star, axis=1)
    # 1 - <x_i, x*> ~ |x_i - x*|^2 / 2 decays at the rate of 1 - <x_i, x_j>
    return t, np.min(sol.x @ w, axis=1), one_minus_alpha, tail_rate(t, one_minus_alpha)


def testable_dims(n, samples, dims):
    """The d of ``dims`` where ``samples`` draws expect >= 10 hits and >= 10 misses."""
    return [d for d in dims if samples * min(wendel(n, d), 1 - wendel(n, d)) >= 10]


def wendel_frequencies(n, dims, samples, rng):
    """Monte-Carlo frequency of 'n i.i.d. uniform points in one open hemisphere' for each d."""
    return np.array([sum(in_open_hemisphere(mf.uniform_sphere(n, d, seed=rng)) for _ in range(samples)) / samples
                     for d in dims])


def wendel_agreement(freq, exact, samples):
    """(max |z|, Σ z², whether max |z| <= 4 and Σ z² <= the 0.999 quantile of χ²_k), z the binomial
    z-scores of the frequencies against the probabilities ``exact`` (k = len(freq))."""
    from scipy.stats import chi2
    z = (np.asarray(freq) - exact) / np.sqrt(exact * (1 - exact) / samples)
    total = float(np.sum(z ** 2))
    return float(np.max(np.abs(z))), total, bool(np.max(np.abs(z)) <= 4 and total <= chi2.ppf(0.999, z.size))


def main(argv=None):
    exp = Experiment("cone_collapse", __doc__.splitlines()[0], argv)
    n = exp.size(8, 16)
    cases = [("SA", 3, 1.0), ("SA", 3, 3.0), ("SA", 8, 1.0), ("USA", 3, 1.0), ("USA", 8, 0.5)]
    runs = {}
    for k, (name, d, beta) in enumerate(cases):
        model = MODELS[name](beta)
        local = 2.0 if name == "SA" else 2.0 * np.exp(beta)
        T = exp.size(1.0, 1.5) * 20.0 / local + (30.0 if name == "SA" and beta > 2 else 12.0)
        t, r, one_minus_alpha, rate = collapse_run(model, n, d, 10 + k, T, min(0.02, 0.1 / local))
        bound = 1.0 / (2 * n * np.exp(2 * beta))
        drop = float(max(0.0, -np.min(np.diff(r))))
        label = f"{name} d={d} beta={beta:g}"
        exp.check(f"{label}: r(t) = min_i <x_i, w> non-decreasing", drop <= 1e-12, largest_decrease=drop)
        exp.check(f"{label}: decay rate within 1e-3 of the local rate", abs(rate / local - 1) <= RATE_RTOL,
                  rate=rate, local_rate=local, bound=bound, rate_over_bound=rate / bound)
        runs[label] = dict(t=t, r=r, one_minus_alpha=one_minus_alpha, rate=rate, bound=bound, local_rate=local)

    wn = 32
    samples = exp.size(100, 1000)
    dims = testable_dims(wn, samples, range(2, wn + 1))
    freq = wendel_frequencies(wn, dims, samples, np.random.default_rng(7))
    exact = np.array([wendel(wn, d) for d in dims])
    worst, chi_square, ok = wendel_agreement(freq, exact, samples)
    exp.check("Monte Carlo agrees with Wendel's formula (|z| <= 4 for every tested d, chi-square at 0.999)", ok,
              dims=dims, frequency=freq, wendel=exact, max_abs_z=worst, chi_square=chi_square)

    results = dict(n=n, runs=runs, wendel=dict(n=wn, d=dims, samples=samples, frequency=freq, exact=exact))
    exp.finish(figure(results), results)


def figure(results):
    """r(t) and 1 - α(t) of the hemisphere runs, and the Wendel frequencies against the formula."""
    import matplotlib.pyplot as plt
    runs, w = results["runs"], results["wendel"]
    fig, axes = plt.subplots(1, 3, figsize=(20, 7), constrained_layout=True)
    colours = plt.cm.tab10(np.arange(len(runs)))
    for (label, run), c in zip(runs.items(), colours):
        axes[0].plot(run["t"], run["r"], color=c, lw=2, label=label)
        axes[1].semilogy(run["t"], np.maximum(run["one_minus_alpha"], 1e-17), color=c, lw=2,
                         label=f"{label}: rate {run['rate']:.4g} (local {run['local_rate']:.4g}, "
                               f"bound {run['bound']:.1e})")
    axes[0].set(xlabel="t", ylabel="r(t) = min_i <x_i(t), w>",
                title=f"hemisphere starts, n = {results['n']}:\nr(t) never decreases")
    axes[0].set_xscale("symlog", linthresh=1.0)
    axes[0].legend(fontsize=10)
    axes[1].set(xlabel="t", ylabel="1 − α(t) = 1 − min_i <x_i(t), x*>", ylim=(1e-16, 2),
                title="collapse to x*: measured rate vs the local rate\n(and the theorem's bound 1/(2n e^{2β}))")
    axes[1].legend(fontsize=9, loc="lower left")
    ax = axes[2]
    freq, samples = np.asarray(w["frequency"]), w["samples"]
    exact = np.asarray(w["exact"])
    ax.errorbar(w["d"], freq, yerr=2 * np.sqrt(exact * (1 - exact) / samples), fmt="o", ms=6, capsize=3,
                label=f"Monte Carlo ({samples} samples per d, ±2 s.e.)")
    fine = np.arange(2, w["n"] + 1)
    ax.plot(fine, [wendel(w["n"], d) for d in fine], "k-", lw=2, label="Wendel: 2^{-(n-1)} Σ_{k<d} C(n-1, k)")
    ax.plot(fine, [wendel(w["n"], d + 1) for d in fine], "k:", lw=1.5,
            label="the slip Σ_{k≤d} (what the test must reject)")
    ax.set(xlabel="d", ylabel="P(all points in one open hemisphere)", ylim=(-0.02, 1.02),
           title=f"Wendel's theorem, n = {w['n']}: tested where {samples} samples\nexpect ≥ 10 hits and 10 misses")
    ax.legend(fontsize=10, loc="lower right")
    for a in axes:
        a.title.set_fontsize(12)
        a.xaxis.label.set_fontsize(12)
        a.yaxis.label.set_fontsize(12)
    return fig


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
