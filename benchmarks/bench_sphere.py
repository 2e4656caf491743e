"""Time to T of the S^2 finite-volume solver: the default path against direct quadrature and an older build.

The case of issue 24: SA β = 3, the smooth degree-2 ``perturbed_uniform(3, degree=2)`` start, T = 10,
flux "upwind2", on icosphere levels 3–6 (642 … 40,962 cells).  Contenders, each in its own
process with the same thread count (``--threads``, default 2):

- ``auto``: the default path (harmonic table + BLAS, fused Numba stage, steps from the actual
  outflows); the whole solve to T is timed (median of ``--repeats``);
- ``direct``: ``summation="direct"`` (log-sum-exp quadrature at every cell: N² kernel terms per
  stage), same steps; its time per step is measured over the first ``--probe`` steps and its time
  to T extrapolated with the step count of ``auto`` (marked "extrapolated");
- ``baseline`` (``--baseline PATH``: a checkout of an older build with its own ``.venv``, e.g. the
  commit before issue 24): its default path at its fixed step (the global positivity bound), time
  per step over the first ``--probe`` steps, extrapolated to T likewise.

Prints one row per level and contender (time to T, time per step, steps) and the ratios to
``auto``, and the cost exponent of ``auto`` in N between the levels; ``--json FILE`` stores them.
Usage: python benchmarks/bench_sphere.py [--levels 3 4 5 6] [--baseline ../wt/baseline] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

CASE = """
import json, sys, time
import numpy as np, meanfield as mf
from meanfield.measures import perturbed_uniform
from meanfield.solvers import sphere
level, T, how, probe, repeats = {level}, {T}, {how!r}, {probe}, {repeats}
mesh = sphere.icosphere(level)
rho0 = perturbed_uniform(3, degree=2)
kw = dict(summation="direct") if how == "direct" else {{}}
sphere.solve(mf.SA(3.0), rho0, [0.0, 0.01], mesh=sphere.icosphere(2), **kw)   # compile
if how == "auto":
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sol = sphere.solve(mf.SA(3.0), rho0, np.linspace(0.0, T, 11), mesh=mesh, progress=False)
        times.append(time.perf_counter() - t0)
    steps = sol.info["nsteps"]
    out = dict(total=float(np.median(times)), steps=steps, per_step=float(np.median(times)) / steps,
               nrejected=sol.info["nrejected"], hmin=sol.info["hmin"], hmax=sol.info["hmax"],
               field=sol.info["field"], extrapolated=False)
else:
    dt = sphere.max_step(mf.SA(3.0), mesh)
    t0 = time.perf_counter()
    sol = sphere.solve(mf.SA(3.0), rho0, [0.0, probe * dt], mesh=mesh, dt=dt, progress=False, energy=False, **kw)
    per_step = (time.perf_counter() - t0) / sol.info["nsteps"]
    out = dict(per_step=per_step, fixed_steps=int(np.ceil(T / dt)), extrapolated=True)
print(json.dumps(out))
"""


def run(python, level, T, how, probe, repeats, threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    code = CASE.format(level=level, T=T, how=how, probe=probe, repeats=repeats)
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[3, 4, 5, 6])
    parser.add_argument("--T", type=float, default=10.0)
    parser.add_argument("--probe", type=int, default=6, help="steps timed for the extrapolated contenders")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-direct", action="store_true", help="skip summation='direct'")
    parser.add_argument("--baseline", help="a checkout of an older build with its own .venv")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    contenders = {"auto": sys.executable}
    if not args.no_direct:
        contenders["direct"] = sys.executable
    if args.baseline:
        contenders["baseline"] = os.path.join(args.baseline, ".venv", "bin", "python")
    rows = {}
    print(f"S^2 upwind2, SA beta = 3, perturbed_uniform(3, degree=2), T = {args.T:g}, {args.threads} threads")
    print(f"{'level':>5} {'cells':>6} {'contender':>9} {'time to T [s]':>14} {'per step [ms]':>14} {'steps':>6}  ratio")
    for level in args.levels:
        cells = 10 * 4 ** level + 2
        for name, python in contenders.items():
            how = {"auto": "auto", "direct": "direct", "baseline": "fixed"}[name]
            r = run(python, level, args.T, how, args.probe, args.repeats, args.threads)
            if r["extrapolated"]:
                steps = rows[(level, "auto")]["steps"] if name == "direct" else r["fixed_steps"]
                r.update(steps=steps, total=r["per_step"] * steps)
            rows[(level, name)] = r
            ratio = r["total"] / rows[(level, "auto")]["total"]
            mark = " (extrapolated)" if r["extrapolated"] else ""
            print(f"{level:>5} {cells:>6} {name:>9} {r['total']:>14.2f} {1e3 * r['per_step']:>14.2f} {r['steps']:>6}  "
                  f"{ratio:.1f}{mark}", flush=True)
    auto = [(10 * 4 ** lv + 2, rows[(lv, "auto")]["total"]) for lv in args.levels]
    exponents = [float(np.log(t1 / t0) / np.log(n1 / n0)) for (n0, t0), (n1, t1) in zip(auto, auto[1:])]
    print("cost exponent of auto in N between successive levels:", ", ".join(f"{e:.2f}" for e in exponents))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(T=args.T, threads=args.threads, exponents=exponents,
                           rows=[dict(level=lv, contender=name, **r) for (lv, name), r in rows.items()]), fh, indent=1)


if __name__ == "__main__":
    main()
