"""Density solvers beside a busy process: quiet and contended, on 1 and 2 threads (issue 40).

Each density solver (S^2 level 4, S^2 level 5, the adaptive default of ``sphere.solve``, the circle)
runs SA β = 3 from ``perturbed_uniform(d, degree=2)`` in its own process on k threads
(``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` set to k), once on the machine
as it is ("quiet") and once beside one busy process (``python -c "while True: pass"``, started before
the solve's process and killed after it).  Each process compiles and warms up on a short solve, then
times the solve; rounds interleave the cases and configurations (in a shuffled order per round) and
the JSON keeps every time, the medians and the ratios:

- ``busy_2/busy_1``: the contended solve on 2 threads over the same on 1 thread (the target: <= 1);
- ``busy_2/quiet_2``: how much one busy process slows the 2-thread solve.

    python benchmarks/bench_contention.py      # 48 solves (estimated 4 min on a quiet 2-core machine)
    python benchmarks/bench_contention.py --rounds 5 --cases sphere4 adaptive

Extra configurations for diagnosis: ``--configs 1 2 n2b1`` (``nKbJ``: k Numba threads, j BLAS threads).
``--baseline PYTHON`` also runs every solve with another interpreter (an environment holding an earlier
version of the package), interleaved with the others, and adds the ratios ``<this>/<baseline>`` of each
configuration:

    python benchmarks/bench_contention.py --baseline ../venv-old/bin/python
"""
import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
OUT = os.path.join(HERE, "contention.json")
CASES = {                          # name: (solver, level or cells, T)
    "sphere4": ("sphere", 4, 10.0),
    "sphere5": ("sphere", 5, 2.0),
    "adaptive": ("adaptive", None, 3.0),
    "circle": ("circle", 4096, 10.0),
}
BUSY = [sys.executable, "-c", "while True: pass"]


def run_case(name):
    """Solve case ``name`` once short (compile, tables) and once timed; return the timed wall seconds."""
    import meanfield as mf
    from meanfield.measures import perturbed_uniform
    from meanfield.solvers import circle, sphere

    solver, size, T = CASES[name]
    model = mf.SA(3.0)
    if solver == "circle":
        def go(t):
            return circle.solve(model, perturbed_uniform(2, degree=2), [0.0, t], cells=size, energy=False,
                                progress=False)
    else:
        mesh = None if size is None else sphere.icosphere(size)

        def go(t):
            return sphere.solve(model, perturbed_uniform(3, degree=2), [0.0, t], mesh=mesh, energy=False,
                                progress=False)
    go(0.05)
    start = time.perf_counter()
    go(T)
    return time.perf_counter() - start


def threads(config):
    """(Numba threads, BLAS threads) of a configuration "k" or "nKbJ"."""
    if config.startswith("n"):
        numba, blas = config[1:].split("b")
        return int(numba), int(blas)
    return int(config), int(config)


def child_env(config):
    numba, blas = threads(config)
    env = dict(os.environ, NUMBA_NUM_THREADS=str(numba), OMP_NUM_THREADS=str(numba), OPENBLAS_NUM_THREADS=str(blas),
               MKL_NUM_THREADS=str(blas))
    return env


def measure(name, config, busy, python=sys.executable):
    """Wall seconds of ``run_case(name)`` in a fresh process of ``python``, beside a busy process when ``busy``."""
    hog = subprocess.Popen(BUSY) if busy else None
    try:
        out = subprocess.run([python, __file__, "child", name], env=child_env(config), check=True,
                             capture_output=True, text=True).stdout
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return float(out.split()[-1])


def machine():
    """The CPU, the thread pools and the load when the benchmark started."""
    info = {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "load_average": os.getloadavg()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    probe = ("import json, meanfield.solvers.sphere, numba; from meanfield.solvers import threads; "
             "print(json.dumps(threads.report()))")
    try:
        info["threads"] = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                                    check=True).stdout)
    except (subprocess.CalledProcessError, ValueError):
        pass
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--configs", nargs="+", default=["1", "2"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--baseline", help="another interpreter (an earlier version), run interleaved")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))     # kill the busy process on the way out
    pythons = {"": sys.executable} if args.baseline is None else {"": sys.executable, "baseline/": args.baseline}
    times = {f"{engine}{case}/{'busy' if busy else 'quiet'}_{config}": [] for engine in pythons
             for case in args.cases for config in args.configs for busy in (False, True)}
    started = time.time()
    info = machine()
    rng = random.Random(0)
    for r in range(args.rounds):
        runs = [(engine, case, config, busy) for engine in pythons for case in args.cases for config in args.configs
                for busy in (False, True)]
        rng.shuffle(runs)
        for engine, case, config, busy in runs:
            key = f"{engine}{case}/{'busy' if busy else 'quiet'}_{config}"
            times[key].append(measure(case, config, busy, pythons[engine]))
            print(f"round {r + 1}: {key:33s} {times[key][-1]:7.2f} s", flush=True)
    medians = {key: statistics.median(v) for key, v in times.items()}
    ratios = {}
    for case in args.cases:
        for config in args.configs:
            if config != "1":
                ratios[f"{case}/busy_{config}/busy_1"] = medians[f"{case}/busy_{config}"] / medians[f"{case}/busy_1"] \
                    if "1" in args.configs else None
                ratios[f"{case}/quiet_{config}/quiet_1"] = \
                    medians[f"{case}/quiet_{config}"] / medians[f"{case}/quiet_1"] if "1" in args.configs else None
            ratios[f"{case}/busy_{config}/quiet_{config}"] = medians[f"{case}/busy_{config}"] / \
                medians[f"{case}/quiet_{config}"]
            if args.baseline is not None:
                for load in ("quiet", "busy"):
                    key = f"{case}/{load}_{config}"
                    ratios[f"{key}/baseline"] = medians[key] / medians[f"baseline/{key}"]
    print(f"\n{'ratio':36s} value")
    for key, value in ratios.items():
        if value is not None:
            print(f"{key:36s} {value:5.2f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": info, "cases": {k: CASES[k] for k in args.cases}, "rounds": args.rounds,
                   "baseline": args.baseline,
                   "seconds": round(time.time() - started, 1), "times": times, "medians": medians,
                   "ratios": ratios}, f, indent=1)
    print(f"wrote {args.out} ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        print(run_case(sys.argv[2]))
    else:
        main()
