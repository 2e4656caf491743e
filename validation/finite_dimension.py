"""Γ_d -> Γ_∞: the 50 % boundary of the phase diagram for d = 2 … 16384, and d*(n, β).

Open problem 4 (paper.md §5): the phase-transition curve Γ_{∞,δ} = {(t, β): γ_β(t) = 1 - δ}
(δ = 1e-3, γ_β the equiangular ODE from γ = 0) is the d -> ∞ limit of the finite-d boundary; the
theorem's d*(n, β) (and its probability 1 - 2n² d^{-1/64}) is very pessimistic.  Here Γ_d is the
time t50(β) at which half of the ordered pairs of n i.i.d. uniform tokens on S^{d-1} have
<x_i, x_j> > 1 - δ (the statistic of the paper's diagrams, averaged over systems), for the ODE
(RK4, h = 0.2; h = 0.1 checked), SA, and

    d*(n, β) = the smallest d = 2^k of the grid from which on |t50_d(β) / t∞(β) - 1| <= 5 %

("from which on": Γ_d crosses Γ_∞ on its way, slower than it at small d where clusters are
metastable, earlier at large d where the initial inner products spread by ~1/√d and the closest
pairs escape γ ≈ 0 first).  Runs stop at T = 1.15 t∞(β): a t50 beyond T (censored) is more than
5 % away.

Exact and cheap at any d: for d >= n the tokens stay in the span of the initial ones
(solvers/span.py), and their coordinates in that span are drawn directly by Bartlett's
decomposition (``geometry.uniform_span_coordinates``: the same law as QR coordinates of
uniform points, tested), so d = 16384 costs what d = n does.  Below n the runs are in R^d.

Sizes (2 shared cores): n = 8, 16, 32, 64, 128 with 128/n systems per (n, d, β) (n(n-1)/2 · 128/n
≈ 64 n pairs); β = 1, 2, …, 9 for n <= 32 and β = 1, 3, 5, 7, 9 for n = 64, 128; d = 2, 4, …, 16384.

Checks: at d = 16384 every t50 lies within 3 % of Γ_∞; for β >= 4 the mean distance to Γ_∞ at
the largest d is below that at d = 8n (Γ_d lies after Γ_∞ for small d and crosses it, so a single
d, β can be close by accident); d* exists in the grid for every (n, β); at n = 32, β = 6 Γ_d lies
more than 3 % before Γ_∞ at d = 128 and within 1.5 % from d = 4096 on; RK4 h = 0.2 and 0.1 give
the same t50 to 0.2 %.  ``--recheck`` re-evaluates the checks on a stored JSON.
"""
import json
import sys

import numpy as np

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.geometry import uniform_span_coordinates
from meanfield.solvers import particles
from meanfield.theory import clustering_time

DELTA, DT, WINDOW, TOLERANCE, OUTPUTS = 1e-3, 0.2, 1.15, 0.05, 200


def half_merged_time(n, d, beta, systems, seed, dt=DT):
    """t50: the first time half of the ordered pairs of ``systems`` SA systems of n uniform tokens on
    S^{d-1} have merged (<x_i, x_j> > 1 - DELTA), RK4 step dt, up to WINDOW t∞(β); NaN if later.

    Found as the time at which the median pair inner product m(t) reaches 1 - DELTA (the same
    event), with log(1 - m) interpolated linearly in t: at large d every pair merges within one
    output interval, where the pair fraction jumps from 0 to 1 and interpolating it would misplace
    t50 by up to half an interval; 1 - m(t) decays smoothly, exponentially near the end."""
    t_inf = clustering_time(mf.SA(beta), n, DELTA)
    steps = int(np.ceil(WINDOW * t_inf / dt))
    every = max(1, -(-steps // OUTPUTS))
    t = dt * np.arange(0, steps + every, every)
    x0 = uniform_span_coordinates(n, d, seed=np.random.default_rng(seed), batch=systems)
    i, j = np.triu_indices(n, 1)

    def median_gap(y):
        return np.array(1.0 - np.median(np.einsum("...kd,...kd->...k", y[..., i, :], y[..., j, :])))
    sol = particles.solve(mf.SA(beta), x0, t, method="rk4", dt=dt, energy=False, observe=median_gap)
    return crossing(t, sol.observed, DELTA)


def crossing(t, gap, level):
    """First time the decreasing ``gap`` reaches ``level``, log-linear interpolation; NaN if never."""
    below = np.nonzero(gap <= level)[0]
    if below.size == 0:
        return float("nan")
    k = below[0]
    if k == 0:
        return float(t[0])
    a, b = np.log(gap[k - 1]), np.log(max(gap[k], 1e-300))
    return float(t[k - 1] + (a - np.log(level)) / (a - b) * (t[k] - t[k - 1]))


def first_within(dims, relative, tolerance=TOLERANCE):
    """The smallest d of ``dims`` (increasing) from which on every |relative| <= tolerance (NaN: not
    within); None if even the largest d is not."""
    ok = np.isfinite(relative) & (np.abs(relative) <= tolerance)
    if not ok[-1]:
        return None
    k = len(ok) - 1
    while k > 0 and ok[k - 1]:
        k -= 1
    return int(dims[k])


def _options(parser):
    parser.add_argument("--ns", type=int, nargs="+", default=None, help="token counts n (default 8 16 32 64 128)")
    parser.add_argument("--recheck", action="store_true",
                        help="re-evaluate the checks and redraw from OUT/finite_dimension.json (no rerun)")


def _floats(values):
    return np.asarray(values, dtype=float)


def figure(results):
    """t50(β) against Γ_∞ (n = 32), the relative distance against d, and d*(n, β)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(22, 7.5), constrained_layout=True)
    dims = [int(d) for d in results["dims"]]
    key = "n=32" if "n=32" in results["runs"] else next(iter(results["runs"]))
    run = results["runs"][key]
    betas, t_inf = _floats(run["beta"]), _floats(run["t_infinity"])
    colours = plt.cm.viridis(np.linspace(0, 0.95, len(dims)))
    ax = axes[0]
    for d, c in zip(dims, colours):
        ax.plot(_floats(run[f"d={d}"]["t50"]), betas, "-", color=c, lw=1.6, label=f"d = {d}")
    ax.plot(t_inf, betas, "k--", lw=2.6, label=r"$\Gamma_\infty$")
    ax.set_xscale("log")
    ax.set(xlabel=r"$t_{50}$ (half of the pairs merged)", ylabel=r"$\beta$",
           title=rf"$\Gamma_d \to \Gamma_\infty$, {key.replace('n=', 'n = ')} ({run['systems']} systems per point)")
    ax.legend(fontsize=9, ncol=2, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    ax = axes[1]
    shown = [b for b in (2.0, 4.0, 6.0, 7.0, 8.0, 9.0) if np.any(np.isclose(betas, b))]
    for b, c in zip(shown, plt.cm.plasma(np.linspace(0, 0.85, len(shown)))):
        j = int(np.argmin(np.abs(betas - b)))
        rel = [100 * _floats(run[f"d={d}"]["relative"])[j] for d in dims]
        ax.plot(dims, rel, "o-", color=c, ms=4, label=rf"$\beta = {b:g}$")
    ax.axhspan(-100 * TOLERANCE, 100 * TOLERANCE, color="tab:green", alpha=0.12, label="within 5 %")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="d", ylabel=r"$t_{50,d}/t_\infty - 1$ (%)", ylim=(-40, 40),
           title=f"distance of Γ_d from Γ∞ ({key.replace('n=', 'n = ')}; censored beyond +{100 * (WINDOW - 1):.0f} %)")
    ax.legend(fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax = axes[2]
    for (name, r), c in zip(results["runs"].items(), plt.cm.cividis(np.linspace(0, 0.9, len(results["runs"])))):
        star = [np.nan if s is None else s for s in r["d_star"]]
        ax.plot(_floats(r["beta"]), _floats(star), "o-", color=c, lw=1.8, ms=5, label=name.replace("n=", "n = "))
    ax.set_yscale("log", base=2)
    ax.set(xlabel=r"$\beta$", ylabel=r"$d^*(n, \beta)$",
           title="smallest d from which on Γ_d is within 5 % of Γ∞")
    ax.legend(fontsize=10)
    ax.grid(alpha=0.3, which="both")
    return fig


def _checks(exp, results):
    """The claims, from the results as ``main`` makes them or as the JSON stores them (``--recheck``)."""
    dims = [int(d) for d in results["dims"]]
    for name, run in results["runs"].items():
        n, betas = int(name.split("=")[1]), _floats(run["beta"])
        rel = np.array([_floats(run[f"d={d}"]["relative"]) for d in dims])          # (d, β)
        distance = np.where(np.isfinite(rel), np.abs(rel), np.inf)                  # censored: beyond WINDOW - 1
        tol = TOLERANCE if dims[-1] < 16384 else 0.03
        exp.check(f"n = {n}: at d = {dims[-1]} every t50 lies within {100 * tol:g} % of Γ∞",
                  np.all(distance[-1] <= tol), largest=float(np.max(distance[-1])))
        exp.check(f"n = {n}: every beta has a d* in the grid", all(s is not None for s in run["d_star"]),
                  d_star=run["d_star"])
        if 8 * n in dims[:-1]:
            k, big = dims.index(8 * n), betas >= 4.0
            exp.check(f"n = {n}, beta >= 4: Γ_d nearer to Γ∞ at d = {dims[-1]} than at d = 8n (mean over beta; Γ_d "
                      f"crosses Γ∞ near d = 8n at some beta)", np.mean(distance[-1, big]) < np.mean(distance[k, big]),
                      at_8n=rel[k, big], at_largest=rel[-1, big])
    run = results["runs"].get("n=32")
    if run is not None and 6.0 in _floats(run["beta"]) and {128, 4096, 16384} <= set(dims):
        j = int(np.argmin(np.abs(_floats(run["beta"]) - 6.0)))
        rel = {d: _floats(run[f"d={d}"]["relative"])[j] for d in dims}
        late = [rel[d] for d in dims if d >= 4096]
        exp.check("n = 32, beta = 6: Γ_d lies more than 3 % before Γ∞ at d = 128 and within 1.5 % of it from d = 4096 "
                  "on", rel[128] < -0.03 and np.all(np.abs(late) <= 0.015), at_128=rel[128], from_4096=late)
    n0, d0 = int(next(iter(results["runs"])).split("=")[1]), dims[-1]
    coarse = half_merged_time(n0, d0, 6.0, 8, [2, n0, d0])
    fine = half_merged_time(n0, d0, 6.0, 8, [2, n0, d0], dt=DT / 2)
    exp.check(f"RK4 h = {DT:g} and {DT / 2:g} give the same t50 to 0.2 % (n = {n0}, d = {d0}, beta = 6)",
              abs(coarse / fine - 1) <= 2e-3, coarse=coarse, fine=fine)


def main(argv=None):
    exp = Experiment("finite_dimension", __doc__.splitlines()[0], argv, options=_options)
    if exp.args.recheck:
        with open(exp.path(".json")) as fh:
            results = json.load(fh)["results"]
        _checks(exp, results)
        exp.finish(figure(results), results)
        return
    ns = exp.args.ns or exp.size([8], [8, 16, 32, 64, 128])
    dims = exp.size([4, 8, 64, 1024], [2 ** k for k in range(1, 15)])
    runs = {}
    for n in ns:
        step = 1.0 if n <= 32 else 2.0
        betas = exp.size(np.array([2.0, 6.0]), np.arange(1.0, 9.0 + 1e-9, step))
        systems = max(1, 128 // n)
        t_inf = np.array([clustering_time(mf.SA(b), n, DELTA) for b in betas])
        run = dict(beta=betas, systems=systems, t_infinity=t_inf)
        for d in dims:
            t50 = np.array([half_merged_time(n, d, b, systems, [1, n, d, int(round(10 * b))]) for b in betas])
            run[f"d={d}"] = dict(t50=t50, relative=t50 / t_inf - 1.0)
            print(f"  n = {n}, d = {d}: t50/t_inf - 1 = {np.round(t50 / t_inf - 1, 3)}")
        rel = np.array([run[f"d={d}"]["relative"] for d in dims])
        run["d_star"] = [first_within(dims, rel[:, j]) for j in range(betas.size)]
        runs[f"n={n}"] = run
    results = dict(delta=DELTA, dt=DT, window=WINDOW, tolerance=TOLERANCE, dims=dims, runs=runs,
                   method="RK4 (the ODE), SA; d >= n in span coordinates drawn by Bartlett's decomposition",
                   d_star_table={name: dict(zip([f"{b:g}" for b in r["beta"]], r["d_star"]))
                                 for name, r in runs.items()})
    _checks(exp, results)
    exp.finish(figure(results), results)


if __name__ == "__main__":
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
