"""Fast (spectral) vs direct summation of the SA velocity on S^1 and S^2, β = 9.

For n ∈ {10^3, 10^4, 10^5, 10^6} uniform tokens: the median wall time of one velocity
evaluation with summation="direct" and "fast", side by side, their ratio and agreement
(max_i |X_fast - X_direct|, the field's natural scale being |X| <= 1), and the growth
exponents fitted to the largest sizes.  Direct summation at n = 10^6 is not run: its time is
extrapolated from the fitted exponent (and marked so).

    python benchmarks/bench_fast.py               # the table (a few minutes: direct at 10^5)
    python benchmarks/bench_fast.py --run         # plus 10^6 tokens on S^2 to T = 10 (RK4, dt = 0.1)
"""
import argparse
import time

import numpy as np

import meanfield as mf
from meanfield.solvers import particles
from meanfield.solvers.kernels import spectral

BETA = 9.0
SIZES = (10**3, 10**4, 10**5, 10**6)
DIRECT_MAX = 10**5


def median_time(f, repeats):
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def slope(ns, ts):
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def table(d):
    model = mf.SA(BETA)
    print(f"\nS^{d - 1} (d = {d}), SA, beta = {BETA:g}: truncation degree {spectral.degree(BETA, d)}")
    print(f"{'n':>8} {'direct [s]':>12} {'fast [s]':>10} {'direct/fast':>12} {'max |X_f - X_d|':>16} "
          f"{'recomputed':>11}")   # recomputed: targets per evaluation handed to direct summation
    fast_t, direct_t = {}, {}
    for n in SIZES:
        x = mf.uniform_sphere(n, d, seed=n)[None]
        stats = {}
        fast_t[n], vf = median_time(lambda: particles.attention_field(model, x, summation="fast", stats=stats)[0],
                                    5 if n < 10**6 else 3)
        if n <= DIRECT_MAX:
            direct_t[n], vd = median_time(lambda: particles.attention_field(model, x, summation="direct")[0],
                                          5 if n < DIRECT_MAX else 1)
            err = f"{np.max(np.abs(vf - vd)):.1e}"
            dt = f"{direct_t[n]:.4f}"
        else:
            ns = sorted(direct_t)
            extrapolated = direct_t[ns[-1]] * (n / ns[-1]) ** slope(ns, [direct_t[k] for k in ns])
            direct_t[n] = extrapolated
            dt, err = f"~{extrapolated:.0f} (extr.)", "-"
        print(f"{n:>8} {dt:>12} {fast_t[n]:>10.4f} {direct_t[n] / fast_t[n]:>12.0f} {err:>16} "
              f"{stats['recomputed'] // stats['fast']:>11}")
    measured = [k for k in SIZES if k <= DIRECT_MAX]
    big = [k for k in SIZES if k >= 10**4]
    direct_exponent = slope(measured, [direct_t[k] for k in measured])
    print(f"fitted exponents (least squares in log-log): direct {direct_exponent:.2f} "
          f"(n = {measured[0]:.0e}..{measured[-1]:.0e}), fast {slope(big, [fast_t[k] for k in big]):.2f} "
          f"(n = {big[0]:.0e}..{big[-1]:.0e})")


def run_million():
    n, T, dt = 10**6, 10.0, 0.1
    x0 = mf.uniform_sphere(n, 3, seed=0)
    t0 = time.perf_counter()
    sol = particles.solve(mf.SA(BETA), x0, np.linspace(0, T, 6), dt=dt, summation="fast")
    wall = time.perf_counter() - t0
    print(f"\n10^6 tokens on S^2, SA beta = {BETA:g}, RK4 dt = {dt} to T = {T:g}: {wall:.0f} s wall, "
          f"{sol.info['nfev']} velocity evaluations ({wall / sol.info['nfev']:.2f} s each incl. energies), "
          f"{sol.info['recomputed']} target evaluations recomputed directly")
    print("energy E_beta at t = 0, 2, ..., 10:", " ".join(f"{e:.6g}" for e in sol.energy),
          "(non-decreasing:", bool(np.all(np.diff(sol.energy) >= -1e-10 * sol.energy[1:])), ")")
    print("max | |x| - 1 |:", f"{np.max(np.abs(np.linalg.norm(sol.x[-1], axis=1) - 1)):.1e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="also integrate 10^6 tokens on S^2 to T = 10")
    args = parser.parse_args()
    for d in (2, 3):
        table(d)
    if args.run:
        run_million()
