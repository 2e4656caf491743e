"""Time to T of the density solvers: the fast path against the reference path, side by side.

Every contender runs in its own process (``--worker``) with the same thread count (``--threads``,
default 1, set through NUMBA_NUM_THREADS, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS), one after the
other at each size.  A worker first solves to T/20 (compilation, tables), then times ``--repeat``
solves to T in CPU seconds of its own process (``time.process_time``: all its threads, not the other
jobs of a shared machine; with one thread this is the wall time an idle machine would show, up to
cache contention from the other jobs).  The tables print the median time to T, the number of steps,
the time per step, the ratio of the reference contender's median to each contender's, and the cost
exponent in N of the time per step (least squares of log time against log N, per contender).

Geometries (one function each, chosen with ``--geometry``):

- circle: SA β = 3, ρ0 ∝ 1 + 0.5 cos 3θ + 0.2 sin(7θ + 1) (smooth), default flux, 512 ... 16384 cells
  to T = 2, and the issue's case, 4096 cells to T = 20 (``--headline``).  Contenders: ``new``
  (summation "auto", steps from the positivity rate: the default), ``direct`` (the FFT field head by
  head, same controlled steps) and ``fixed`` (the FFT field with fixed steps at the global bound: the
  method before issue 24, whose unfused Python-level stage is no longer callable).
- zonal: SA β = 3 on S^2 (d = 3), f0(s) = e^{2s}, 512 ... 4096 cells, T = 0.5.  Contenders: ``new``
  (summation "auto": the Gegenbauer series, controlled steps), ``direct`` (the O(N²) kernel tables, same
  controlled steps) and ``fixed`` (the tables with fixed steps at the global bound: the method before).

    python benchmarks/bench_density.py --geometry circle [--headline] [--quick] [--repeat 3] [--threads 1]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

CIRCLE_SIZES = (512, 1024, 2048, 4096, 8192, 16384)
ZONAL_SIZES = (512, 1024, 2048, 4096)
CONTENDERS = {"circle": ("new", "direct", "fixed"), "zonal": ("new", "direct", "fixed")}
REFERENCE = {"circle": "direct", "zonal": "direct"}


def circle_case(cells, contender, T=2.0):
    """(solve(T) -> solution, T) for one circle contender."""
    import meanfield as mf
    from meanfield.solvers import circle
    model = mf.SA(3.0)
    theta = circle.cell_angles(cells)
    rho0 = 1.0 + 0.5 * np.cos(3 * theta) + 0.2 * np.sin(7 * theta + 1.0)
    options = {"new": dict(summation="auto"), "direct": dict(summation="direct"),
               "fixed": dict(summation="direct", dt=circle.max_step(model, cells))}[contender]
    return (lambda T: circle.solve(model, rho0, [0.0, T], progress=False, **options)), T


def zonal_case(cells, contender, T=0.5):
    """(solve(T) -> solution, T) for one zonal contender."""
    import meanfield as mf
    from meanfield.solvers import zonal
    model = mf.SA(3.0)
    options = {"new": dict(summation="auto"), "direct": dict(summation="direct"),
               "fixed": dict(summation="direct", dt=zonal.max_step(model, cells))}[contender]
    return (lambda T: zonal.solve(model, lambda s: np.exp(2.0 * s), [0.0, T], 3, cells=cells, progress=False,
                                  **options)), T


CASES = {"circle": circle_case, "zonal": zonal_case}


def worker(geometry, cells, contender, T, repeat):
    """Warm up, time ``repeat`` solves to T, print a JSON line."""
    solve, T = CASES[geometry](cells, contender, T)
    solve(T / 20)
    seconds = []
    for _ in range(repeat):
        start = time.process_time()
        sol = solve(T)
        seconds.append(time.process_time() - start)
    print(json.dumps(dict(seconds=seconds, steps=sol.info["nsteps"], T=T, summation=sol.info.get("summation"),
                          degree=sol.info.get("degree"), mass_error=float(np.max(np.abs(sol.mass - 1.0))),
                          min_rho=float(sol.rho.min()))))


def run_worker(geometry, cells, contender, T, repeat, threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, __file__, "--worker", geometry, str(cells), contender, str(T), str(repeat)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(geometry, sizes, T, repeat, threads):
    """Every contender at every size, each in its own process; prints the table, returns the records."""
    contenders, reference = CONTENDERS[geometry], REFERENCE[geometry]
    print(f"{geometry}: T = {T:g}, medians of {repeat} solves, {threads} thread(s), one process per contender")
    print(f"{'N':>6} {'contender':<9} {'steps':>7} {'CPU s to T':>11} {'ms/step':>9} {f'{reference}/it':>10} "
          f"{'summation':>10} {'K':>5} {'mass err':>9} {'min rho':>9}")
    records = {}
    for cells in sizes:
        runs = {c: run_worker(geometry, cells, c, T, repeat, threads) for c in contenders}
        for c in contenders:
            run = runs[c]
            seconds = float(np.median(run["seconds"]))
            ratio = float(np.median(runs[reference]["seconds"])) / seconds
            records[(cells, c)] = dict(seconds=seconds, steps=run["steps"], ratio=ratio)
            print(f"{cells:>6} {c:<9} {run['steps']:>7} {seconds:>11.3f} {1e3 * seconds / run['steps']:>9.4f} "
                  f"{ratio:>10.2f} {str(run['summation']):>10} {str(run['degree']):>5} {run['mass_error']:>9.1e} "
                  f"{run['min_rho']:>9.1e}", flush=True)
    if len(sizes) > 1:
        print("cost exponent in N of the time per step (least squares over the sizes):")
        for c in contenders:
            n = np.array(sizes, dtype=float)
            per_step = np.array([records[(s, c)]["seconds"] / records[(s, c)]["steps"] for s in sizes])
            print(f"  {c:<9} {np.polyfit(np.log(n), np.log(per_step), 1)[0]:.2f}")
    return records


def circle(args):
    if args.headline:
        return table("circle", (4096,), 20.0, args.repeat, args.threads)
    return table("circle", CIRCLE_SIZES[:4] if args.quick else CIRCLE_SIZES, 2.0, args.repeat, args.threads)


def zonal(args):
    return table("zonal", ZONAL_SIZES[:2] if args.quick else ZONAL_SIZES, 0.5, args.repeat, args.threads)


GEOMETRIES = {"circle": circle, "zonal": zonal}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--geometry", choices=sorted(GEOMETRIES) + ["all"], default="all")
    parser.add_argument("--quick", action="store_true", help="the smaller sizes only")
    parser.add_argument("--headline", action="store_true", help="circle: 4096 cells to T = 20 only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the records here (docs/performance.md quotes this file)")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        geometry, cells, contender, T, repeat = args.worker
        worker(geometry, int(cells), contender, float(T), int(repeat))
        return
    results = {}
    for name in (sorted(GEOMETRIES) if args.geometry == "all" else [args.geometry]):
        records = GEOMETRIES[name](args)
        results[name] = {f"{cells}.{c}": record for (cells, c), record in records.items()}
        print()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": args.threads, "repeat": args.repeat, "load": list(os.getloadavg()), **results},
                      fh, indent=1)


if __name__ == "__main__":
    main()
