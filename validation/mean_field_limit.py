"""The mean-field limit: W_p(μ^n_t, ρ_t) against the number of tokens n, on S^1 and S^2.

For n ∈ {100, 300, 1000, 3000, 10000}, several independent draws of n i.i.d. tokens from the
perturbed-uniform ρ_0 (``meanfield.measures.perturbed_uniform``), SA at β = 4: the particle
system against a fine finite-volume solution ρ_t (S^1: 8192 cells; S^2: icosphere(4), 2562
cells), compared by exact geodesic W_1 and W_2 (``meanfield.compare``). At each output time
we fit log W = a + s log n by least squares over all draws and give the 95 % confidence
interval of the slope s (Student t).

What to expect:
- t = 0: i.i.d. sampling, s = -1/2 on S^1; on S^2 E W_2 ~ sqrt(log n / n), a slope a little
  above -1/2 over this range of n.
- While the flow is smooth the error is transported and amplified, the rate stays n^{-1/2}.
- Once clusters have formed, W_1 keeps s = -1/2, but W_2 tends to s = -1/4: the mass each
  cluster captures fluctuates by δm ~ n^{-1/2} and moving δm across a distance D costs
  W_2^2 ~ δm D^2 (W_1 ~ δm D).
- On S^2 the 2562-cell grid has its own error (reported as W_2(icosphere(4), icosphere(5)) in the
  JSON); the largest n come close to it.

Checks: at t = 0 the W_1 slope on the circle is -1/2 within its 95 % interval (widened to ±0.1);
at every output time both distances fall with n (slope <= -0.2) and the mean over draws at the
largest n is below that at the smallest.  --quick: the circle only, n <= 1000, four draws.
"""
import sys
import time

import numpy as np
from scipy import stats

import meanfield as mf
from meanfield.compare import compare, density_solver
from meanfield.cli.figures import Experiment
from meanfield.measures import perturbed_uniform
from meanfield.transport import wasserstein

CASES = {
    "circle": dict(d=2, times=[0.0, 2.0, 4.0, 6.0, 10.0], draws=8, grid=dict(cells=8192), transport="circle"),
    "sphere": dict(d=3, times=[0.0, 2.0, 4.0], draws=4, grid=dict(level=4), transport="emd"),
}
NS = [100, 300, 1000, 3000, 10000]
BETA = 4.0


def slope(ns, w):
    """Least-squares slope of log W against log n over all draws (w: (len(ns), draws)) and its
    95 % confidence half-width."""
    x = np.repeat(np.log(ns), w.shape[1])
    fit = stats.linregress(x, np.log(w.ravel()))
    half = stats.t.ppf(0.975, x.size - 2) * fit.stderr
    return dict(slope=float(fit.slope), ci95=float(half), intercept=float(fit.intercept))


def run_case(geometry, ns, draws, progress, grid_error=True):
    case = CASES[geometry]
    model, rho0 = mf.SA(BETA), perturbed_uniform(case["d"])
    t_eval = np.array(case["times"])
    clock = time.perf_counter()
    ref = density_solver(geometry, model, rho0, t_eval, progress=progress, **case["grid"])
    out = dict(model=repr(model), rho0=rho0.spec, times=case["times"], ns=ns, draws=draws,
               grid=dict(case["grid"], cells=int(ref.points.shape[0])), transport=case["transport"],
               w1=[], w2=[], energy_gap=[], density_seconds=round(time.perf_counter() - clock, 1))
    for n in ns:
        clock = time.perf_counter()
        c = compare(model, rho0, t_eval, n=n, seeds=draws, geometry=geometry, density=ref, seed=n, sampling="iid",
                    transport=case["transport"], progress=progress)
        out["w1"].append(c.w1.T.tolist())                  # [n][draw][t]
        out["w2"].append(c.w2.T.tolist())
        out["energy_gap"].append(c.energy_gap.tolist())
        print(f"{geometry} n = {n:5d}: W2 " + " ".join(f"{v:.2e}" for v in c.w2.mean(axis=1))
              + f"   ({time.perf_counter() - clock:.0f} s)", flush=True)
    w1, w2 = np.array(out["w1"]), np.array(out["w2"])    # (len(ns), draws, m)
    out["slopes"] = {f"{t:g}": dict(W1=slope(ns, w1[:, :, k]), W2=slope(ns, w2[:, :, k]))
                     for k, t in enumerate(t_eval)}
    if geometry == "sphere" and grid_error:
        finer = density_solver(geometry, model, rho0, t_eval, level=case["grid"]["level"] + 1)
        out["grid_error_w2"] = [wasserstein(*ref.measure(k), *finer.measure(k), method="emd")
                                for k in range(t_eval.size)]
    return out


def figure(results):
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(results), 2, figsize=(13, 5.2 * len(results)), squeeze=False,
                             constrained_layout=True)
    for row, (geometry, res) in zip(axes, results.items()):
        ns = np.array(res["ns"])
        for ax, name in zip(row, ("w1", "w2")):
            w = np.array(res[name])
            for k, t in enumerate(res["times"]):
                s = res["slopes"][f"{t:g}"][name.upper()]
                ax.errorbar(ns, w[:, :, k].mean(axis=1), yerr=w[:, :, k].std(axis=1, ddof=1), marker="o",
                            ms=4, capsize=2, lw=1.6, label=f"t = {t:g}: slope {s['slope']:.2f} ± {s['ci95']:.2f}")
            for power, style in ((-0.5, "k--"), (-0.25, "k:")):
                ref = w[0, :, 0].mean() * (ns / ns[0]) ** power
                ax.plot(ns, ref, style, lw=1.0, label=f"$n^{{{power:g}}}$")
            if "grid_error_w2" in res and name == "w2":
                ax.axhline(max(res["grid_error_w2"]), color="grey", lw=1.0, label="grid error (max over t)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("tokens n", fontsize=12)
            ax.set_ylabel(f"$W_{name[1]}$(particles, density)", fontsize=12)
            ax.set_title(f"{geometry}, {res['model']}, {res['grid']['cells']} cells, {res['draws']} draws",
                         fontsize=12)
            ax.legend(fontsize=9)
    return fig


def _options(parser):
    parser.add_argument("--geometry", choices=("circle", "sphere", "both"), default=None,
                        help="default: both (--quick: circle)")
    parser.add_argument("--progress", action="store_true")


def main(argv=None):
    exp = Experiment("mean_field_limit", __doc__.splitlines()[0], argv, options=_options)
    ns = [n for n in NS if n <= 1000] if exp.quick else NS
    geometry = exp.args.geometry or exp.size("circle", "both")
    geometries = ("circle", "sphere") if geometry == "both" else (geometry,)
    clock = time.perf_counter()
    results = {g: run_case(g, ns, exp.size(4, CASES[g]["draws"]), exp.args.progress, not exp.quick)
               for g in geometries}
    for g, res in results.items():
        for t, s in res["slopes"].items():
            for name in ("W1", "W2"):
                exp.check(f"{g} t = {t}: {name} falls with n (slope <= -0.2)", s[name]["slope"] <= -0.2,
                          slope=s[name]["slope"], ci95=s[name]["ci95"])
        w1 = np.array(res["w1"]).mean(axis=1)        # (len(ns), m)
        w2 = np.array(res["w2"]).mean(axis=1)
        exp.check(f"{g}: mean W1 and W2 at the largest n below those at the smallest, at every time",
                  np.all(w1[-1] < w1[0]) and np.all(w2[-1] < w2[0]), w1_ratio=w1[-1] / w1[0],
                  w2_ratio=w2[-1] / w2[0])
        if g == "circle":
            s0 = res["slopes"]["0"]["W1"]
            exp.check("circle t = 0: W1 slope is -1/2 (i.i.d. sampling)",
                      abs(s0["slope"] + 0.5) <= max(s0["ci95"], 0.1), slope=s0["slope"], ci95=s0["ci95"])
    exp.finish(figure(results), dict(results=results, beta=BETA, paper_size=False,
                                     seconds=round(time.perf_counter() - clock, 1)))


if __name__ == "__main__":
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
