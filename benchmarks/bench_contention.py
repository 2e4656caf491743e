"""Density solvers beside a busy process: quiet and contended, on 1 and 2 threads (issue 40).

Each density solver (S^2 level 4, S^2 level 5, the adaptive default of ``sphere.solve``, the circle)
runs SA β = 3 from ``perturbed_uniform(d, degree=2)`` in a server process of its own that imports,
compiles and warms up once (a short solve on each thread count) and then times solves on demand, so
no timed solve includes start-up, compilation or cache loading.  A solve on k threads sets Numba's
threads (``numba.set_num_threads``) and OpenBLAS's to k inside that process, whose thread pools were
made for the largest k.  "Busy" solves run beside one ``python -c "while True: pass"``, started a
moment (``SETTLE`` s) before the solve is asked for and killed after it ends.

The measurement protocol:

- every server is a block; a round runs each block's solves back to back: quiet and busy on 1 and 2
  threads, and a **control** (``control``), a second busy solve on 1 thread.  The order of the blocks and of the solves
  within a block is a random permutation in even rounds (``random.Random(seed)``, the seed is recorded)
  (rounds 1, 3, 5, ...; round 0 draws its own) and the same permutation reversed in the round after, so
  each solve is as often early as late (an even number of rounds balances them exactly);
- round 0 is a warm-up round: timed and kept in the JSON (``warmup``), left out of every ratio;
- a ratio a/b is computed per round (the two solves of one block, seconds apart), and reported as the
  median over the rounds with a distribution-free confidence interval of that median (order statistics of
  the binomial, at least ``LEVEL``): with 8 rounds, the 2nd and 7th smallest of the 8 ratios;
- the control ratio ``control/busy_1`` runs the same solve twice: its interval must contain 1, else the
  protocol has a bias of order or position, and the other ratios mean nothing more than it.

Ratios (``ratios``: ``[median, low, high]``):

- ``busy_2/busy_1``: the contended solve on 2 threads over the same on 1 thread (the target: <= 1);
- ``quiet_2/quiet_1``, ``busy_2/quiet_2``; ``control/busy_1`` (the control);
- with ``--baseline PYTHON``: every configuration also on another interpreter (an environment holding an
  earlier version of the package), its servers interleaved with the others, and the ratios
  ``<this>/<baseline>`` per configuration (a solve of each version in the same round).

The JSON also keeps every solve's wall and CPU seconds and its thread trials (``trials``: evaluations so
far, median seconds of an evaluation on the threads asked for and on one thread), which show what each
solve saw and chose.

    python benchmarks/bench_contention.py                      # 8 rounds + warm-up: ~6 min idle, 2 cores
    python benchmarks/bench_contention.py --baseline ../venv-old/bin/python           # ~12 min
    python benchmarks/bench_contention.py --rounds 4 --cases sphere4 circle

``--configs`` adds configurations for diagnosis (``nKbJ``: K Numba threads, J BLAS threads).
"""
import argparse
import json
import math
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
    "circle": ("circle", 4096, 5.0),
}
BUSY = [sys.executable, "-c", "while True: pass"]
SETTLE = 0.2                       # seconds the busy process runs before a solve is asked for
LEVEL = 0.90                       # confidence of the median's interval
CONTROL = "control"


def solver(name):
    """The solve of case ``name`` as a function of the final time."""
    import meanfield as mf
    from meanfield.measures import perturbed_uniform
    from meanfield.solvers import circle, sphere

    kind, size, T = CASES[name]
    model = mf.SA(3.0)
    if kind == "circle":
        return lambda t: circle.solve(model, perturbed_uniform(2, degree=2), [0.0, t], cells=size, energy=False,
                                      progress=False)
    mesh = None if size is None else sphere.icosphere(size)
    return lambda t: sphere.solve(model, perturbed_uniform(3, degree=2), [0.0, t], mesh=mesh, energy=False,
                                  progress=False)


def threads(config):
    """(Numba threads, BLAS threads) of a configuration "k" or "nKbJ"."""
    if config.startswith("n"):
        numba, blas = config[1:].split("b")
        return int(numba), int(blas)
    return int(config), int(config)


def blas_setter():
    """A function setting OpenBLAS's threads: threadpoolctl's where installed, else the package's own."""
    try:
        from threadpoolctl import ThreadpoolController
        controller = ThreadpoolController()
        return lambda k: controller.select(user_api="blas").limit(limits=k)
    except ImportError:
        from meanfield.solvers import threads as pools
        lib = pools.blas_library()
        return (lambda k: None) if lib is None else lib.set


def choices():
    """The list to which every ``ThreadChoice`` made from now on is appended (none in a version without)."""
    made = []
    try:
        from meanfield.solvers.threads import ThreadChoice
    except ImportError:
        return made
    init = ThreadChoice.__init__

    def watched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    ThreadChoice.__init__ = watched
    return made


def serve(name):
    """Answer lines "CONFIG" on stdin by a timed solve of case ``name`` on its threads: a JSON line on
    stdout with its wall and CPU seconds and its thread trials (``ThreadChoice.trials``, counts)."""
    import numba
    go, set_blas, made = solver(name), blas_setter(), choices()
    T = CASES[name][2]

    def on(config):
        numba_threads, blas_threads = threads(config)
        numba.set_num_threads(numba_threads)
        set_blas(blas_threads)

    for config in ("1", str(numba.config.NUMBA_NUM_THREADS)):       # compile, tables, first touch
        on(config)
        go(0.05)
    print("ready", flush=True)
    for line in sys.stdin:
        on(line.strip())
        made.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        go(T)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        trials = [{"evaluations": c.count, "trials": c.trials} for c in made if c.threads > 1]
        print(json.dumps({"wall": wall, "cpu": cpu, "choices": trials}), flush=True)


class Server:
    """One server process (``serve``) of an interpreter and a case."""

    def __init__(self, python, name, most):
        env = dict(os.environ, NUMBA_NUM_THREADS=str(most), OMP_NUM_THREADS=str(most),
                   OPENBLAS_NUM_THREADS=str(most), MKL_NUM_THREADS=str(most))
        self.process = subprocess.Popen([python, os.path.abspath(__file__), "serve", name], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=os.path.dirname(HERE))     # not the checkout: its package
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {name} server of {python} did not start")

    def solve(self, config, busy):
        """{"wall", "cpu", "choices"} of one solve on ``config`` (``serve``), beside a busy process when ``busy``."""
        hog = subprocess.Popen(BUSY) if busy else None
        try:
            if hog is not None:
                time.sleep(SETTLE)
            self.process.stdin.write(config + "\n")
            self.process.stdin.flush()
            answer = json.loads(self.process.stdout.readline())
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        return answer

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def median_interval(values, level=LEVEL):
    """(median, low, high): the sample median and the order statistics x_(k) <= x_(n+1-k) with the largest k
    whose interval holds the median with probability >= level (binomial(n, 1/2)); the range when none does.

    >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    (4.5, 2.0, 7.0)
    >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], level=0.95)
    (4.5, 1.0, 8.0)
    """
    x, n = sorted(values), len(values)
    k = 1
    while k + 1 <= n - k and 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n >= level:
        k += 1
    return statistics.median(x), x[k - 1], x[n - k]


def runs(configs):
    """The (label, config, busy) solves of one block."""
    solves = [(f"{'busy' if busy else 'quiet'}_{config}", config, busy) for config in configs for busy in (False, True)]
    return solves + [(CONTROL, configs[0], True)]


def machine(python):
    """The CPU, the thread pools of ``python``'s package and the load when the benchmark started."""
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
        info["threads"] = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True,
                                                    check=True, cwd=os.path.dirname(HERE)).stdout)
    except (subprocess.CalledProcessError, ValueError):
        pass
    return info


def ratios(times, args, engines):
    """[median, low, high] of each per-round ratio (module docstring)."""
    out = {}

    def add(key, a, b):
        if a in times and b in times:
            out[key] = median_interval([x / y for x, y in zip(times[a], times[b])])

    for case in args.cases:
        first = args.configs[0]
        for config in args.configs[1:]:
            for load in ("busy", "quiet"):
                add(f"{case}/{load}_{config}/{load}_{first}", f"{case}/{load}_{config}", f"{case}/{load}_{first}")
        for config in args.configs:
            add(f"{case}/busy_{config}/quiet_{config}", f"{case}/busy_{config}", f"{case}/quiet_{config}")
        add(f"{case}/{CONTROL}/busy_{first}", f"{case}/{CONTROL}", f"{case}/busy_{first}")
        if "baseline/" in engines:
            for label, _, _ in runs(args.configs)[:-1]:
                add(f"{case}/{label}/baseline", f"{case}/{label}", f"baseline/{case}/{label}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--configs", nargs="+", default=["1", "2"], help="the first is the reference")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds, after one warm-up round")
    parser.add_argument("--seed", type=int, default=None, help="of the orders (default: drawn and recorded)")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--baseline", help="another interpreter (an earlier version), run interleaved")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2")
    seed = random.SystemRandom().randrange(2 ** 32) if args.seed is None else args.seed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))     # kill the busy process on the way out
    engines = {"": sys.executable} if args.baseline is None else {"": sys.executable, "baseline/": args.baseline}
    started = time.time()
    info = machine(sys.executable)
    most = max(max(threads(c)) for c in args.configs)
    servers = {(engine, case): Server(python, case, most) for engine, python in engines.items() for case in args.cases}
    rng = random.Random(seed)
    times, cpu, warmup, trials = {}, {}, {}, {}
    try:
        for r in range(args.rounds + 1):
            if r % 2 == 1 or r == 0:     # a drawn order; the round after an odd one runs it reversed
                order = [(key, rng.sample(runs(args.configs), len(runs(args.configs)))) for key in servers]
                rng.shuffle(order)
            else:
                order = [(key, block[::-1]) for key, block in order[::-1]]
            for (engine, case), block in order:
                for label, config, busy in block:
                    if engine and label == CONTROL:
                        continue
                    answer = servers[engine, case].solve(config, busy)
                    wall, seconds = answer["wall"], answer["cpu"]
                    key = f"{engine}{case}/{label}"
                    if r == 0:
                        warmup[key] = wall
                    else:
                        times.setdefault(key, []).append(wall)
                        cpu.setdefault(key, []).append(seconds)
                        if answer["choices"]:
                            trials.setdefault(key, []).append(answer["choices"])
                    print(f"round {r}{' (warm-up)' if r == 0 else ''}: {key:34s} {wall:7.2f} s wall "
                          f"{seconds:7.2f} s CPU", flush=True)
    finally:
        for server in servers.values():
            server.close()
    medians = {key: statistics.median(v) for key, v in times.items()}
    table = ratios(times, args, engines)
    print(f"\n{'ratio (median of the per-round ratios)':44s} median  [{LEVEL:.0%} interval]")
    for key, (mid, low, high) in table.items():
        print(f"{key:44s} {mid:6.3f}  [{low:.3f}, {high:.3f}]")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": info, "cases": {k: CASES[k] for k in args.cases}, "configs": args.configs,
                   "rounds": args.rounds, "seed": seed, "level": LEVEL, "baseline": args.baseline,
                   "seconds": round(time.time() - started, 1), "warmup": warmup, "times": times, "cpu": cpu,
                   "medians": medians, "ratios": table, "trials": trials}, f, indent=1)
    print(f"wrote {args.out} ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        main()
