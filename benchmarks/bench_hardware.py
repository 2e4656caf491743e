"""meanfield against JAX, PyTorch and NumPy on this machine, as fractions of this machine's peak.

One command (about 4 minutes on a quiet 2-core machine; every contender that is installed):

    python benchmarks/bench_hardware.py                        # 2 threads, 3 rounds
    python benchmarks/bench_hardware.py --threads 1 --rounds 5 --json out.json
    python benchmarks/bench_hardware.py --phase-d 8,32 --velocities "" --contenders meanfield,jax,jax_einsum

1. The hardware: the CPU model, the widest vector unit (``meanfield.solvers.kernels.tiles``), the
   DGEMM peak (numpy matmul of 2048 × 2048 matrices, 1 and all threads, best of 5) measured in a
   process with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (machines may pin OpenBLAS to an older
   kernel; the kernel that ran is read from threadpoolctl), and the memory bandwidth (a copy of
   256 MB: bytes read + written per second, best of 5, one thread).
2. The paper's phase workload (B = 2048 systems of n = 32 tokens, SA β = 4, forward Euler dt = 0.1
   with renormalisation) at d = 2, 8, 32, 64, 128, and single SA velocities (β = 1) at n = 1024 …
   16384 tokens, d = 3 and 64, for meanfield, JAX (jit + vmap, and batched einsum), PyTorch and
   NumPy (``bench_contenders`` holds the contenders' code).  Each contender runs every case in its
   own process with the same thread count; the rounds are interleaved (the order of the contenders
   rotates) and each figure is the median over rounds of the per-process median of ``--repeats``
   runs after a warm-up run (JIT compilation excluded).  The phase workload runs ``--steps`` = 300
   steps (the paper's run); NumPy and PyTorch, 3 to 15 times slower, run ``--slow-steps`` = 3 and
   their times are scaled to 300 steps.

Printed beside every ratio (contender time / meanfield time, > 1: meanfield faster): meanfield's
fraction of the DGEMM peak at the same thread count, counting the floor of 2·2·n²·d flops per system
and field evaluation (the score and value products).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np

from bench_contenders import RUNNERS, initial, nominal_flops

CONTENDERS = ("meanfield", "jax", "jax_einsum", "torch", "numpy")
PHASE_D = (2, 8, 32, 64, 128)
VELOCITY = ((1024, 3), (4096, 3), (16384, 3), (1024, 64), (4096, 64), (16384, 64))
PAPER_STEPS = 300
PINNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SLOW = ("torch", "numpy")        # phase: ``--slow-steps`` steps, scaled


def cpu_model():
    """The CPU's model name (/proc/cpuinfo, else the platform's processor string)."""
    try:
        with open("/proc/cpuinfo") as fh:
            found = re.search(r"^model name\s*:\s*(.+)$", fh.read(), re.M)
        if found:
            return found.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def dgemm_worker(threads):
    """In a fresh process: GFLOP/s of numpy's 2048 × 2048 matmul (best of 5) and the BLAS that ran."""
    from threadpoolctl import threadpool_info, threadpool_limits
    n = 2048
    a, b = np.random.default_rng(0).random((2, n, n))
    with threadpool_limits(threads, user_api="blas"):
        a @ b
        runs = [_timed(lambda: a @ b, cpu=True) for _ in range(5)]
        blas = [dict(api=i.get("internal_api"), version=i.get("version"), kernel=i.get("architecture"),
                     threads=i.get("num_threads")) for i in threadpool_info() if i.get("user_api") == "blas"]
    return dict(gflops=2.0 * n ** 3 / min(w for w, _ in runs) / 1e9,
                cpu_gflops=2.0 * n ** 3 / min(c for _, c in runs) / 1e9, blas=blas)


def bandwidth_worker():
    """In a fresh process: GB/s of a 256 MB copy (read + write), best of 5, one thread."""
    src = np.ones(2 ** 25)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
    return dict(gbytes_per_second=2.0 * src.nbytes / best / 1e9)


def _timed(run, cpu=False):
    """Wall seconds of run() (and its CPU seconds, all threads, with ``cpu``)."""
    t0, c0 = time.perf_counter(), time.process_time()
    run()
    wall = time.perf_counter() - t0
    return (wall, time.process_time() - c0) if cpu else wall


def contender_worker(name, cases, repeats):
    """In a fresh process: every case for one contender (warm-up, then the median of ``repeats``)."""
    rows = []
    for case in cases:
        try:
            run = RUNNERS[name](case, initial(case))
        except ImportError:
            return dict(missing=True)
        result = run()
        check = None
        if "check_steps" in case:       # the result after the slow contenders' steps, to compare with theirs
            check = RUNNERS[name](dict(case, steps=case["check_steps"]), initial(case))()
            check = np.asarray(check).ravel()[:64].tolist()
        runs = [_timed(run, cpu=True) for _ in range(repeats)]
        while case["kind"] == "velocity" and len(runs) < 5 and sum(w for w, _ in runs) < 1.0:
            runs.append(_timed(run, cpu=True))                  # short velocities: up to 5 runs or 1 s
        rows.append(dict(seconds=float(np.median([w for w, _ in runs])),
                         cpu_seconds=float(np.median([c for _, c in runs])),
                         result=np.asarray(result).ravel()[:64].tolist(), check=check))
    info = {}
    if name == "meanfield":
        from meanfield.solvers.kernels import tiles
        info = dict(vector_unit=tiles.CHOICE)
    return dict(rows=rows, info=info)


def spawn(args, threads, unpin=False):
    """Run this script with ``args`` in a fresh process with ``threads`` threads; its JSON answer."""
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), BENCH_THREADS=str(threads),
               XLA_FLAGS=f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}",
               JAX_PLATFORMS="cpu")
    if unpin:
        for name in PINNING:
            env.pop(name, None)
    out = subprocess.run([sys.executable, __file__] + args, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine():
    """CPU, cores, vector unit and tiles of this machine, and the OpenBLAS pinning of the environment."""
    from meanfield.solvers.kernels import tiles
    return dict(cpu=cpu_model(), cores=os.cpu_count(), vector_unit=tiles.UNIT, vector_doubles=tiles.WIDTH,
                tiles=tiles.CHOICE, pinned={k: os.environ.get(k) for k in PINNING})


def hardware_round(threads):
    """One round's DGEMM rates at 1 and ``threads`` threads (OpenBLAS unpinned) and bandwidth."""
    dgemm = {str(t): spawn(["--dgemm", str(t)], t, unpin=True) for t in sorted({1, threads})}
    return dict(dgemm=dgemm, bandwidth=spawn(["--bandwidth"], 1)["gbytes_per_second"])


def peaks(rounds):
    """The best DGEMM rate (wall and per CPU second) per thread count and the best bandwidth over
    the rounds (the least disturbed run: a conservative peak), and the OpenBLAS kernels that ran."""
    best = {t: dict(gflops=max(r["dgemm"][t]["gflops"] for r in rounds),
                    cpu_gflops=max(r["dgemm"][t]["cpu_gflops"] for r in rounds),
                    blas=rounds[0]["dgemm"][t]["blas"]) for t in rounds[0]["dgemm"]}
    return dict(dgemm=best, bandwidth_gbytes_per_second=max(r["bandwidth"] for r in rounds))


def cases(steps, slow_steps, phase_d=PHASE_D, velocities=VELOCITY):
    """The workloads: phase cases per contender group (fast contenders run ``steps``), velocities."""
    phase = [dict(kind="phase", B=2048, n=32, d=d, beta=4.0, steps=steps, dt=0.1) for d in phase_d]
    slow = [dict(c, steps=slow_steps) for c in phase]
    velocity = [dict(kind="velocity", n=n, d=d, beta=1.0) for n, d in velocities]
    return phase, slow, velocity


def per_run(case, seconds):
    """Seconds per 300 steps (phase) or per evaluation (velocity)."""
    return seconds * PAPER_STEPS / case["steps"] if case["kind"] == "phase" else seconds


def measure(threads, rounds, repeats, steps, slow_steps, contenders, phase_d=PHASE_D, velocities=VELOCITY):
    """Interleaved rounds of every contender over every case; after each round, the table so far
    (per case the median seconds), meanfield's info, the load range and the peaks.  meanfield also
    returns its phase results after ``slow_steps`` steps (untimed), which the slow contenders'
    results are compared with."""
    phase, slow, velocity = cases(steps, slow_steps, phase_d, velocities)
    jobs = {}
    for name in contenders:
        if phase:
            jobs[(name, "phase")] = (slow if name in SLOW else
                                     [dict(c, check_steps=slow_steps) for c in phase] if name == "meanfield" else phase)
        if velocity and name != "jax_einsum":                     # for one velocity it is ``jax``
            jobs[(name, "velocity")] = velocity
    keys = list(jobs) + [("hardware", "")]
    times = {key: [] for key in keys}
    cpu = {key: [] for key in keys}
    answers, checks, info, loads, rates = {}, {}, {}, [], []
    for r in range(rounds):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            loads.append(os.getloadavg()[0])
            if key[0] == "hardware":
                rates.append(hardware_round(threads))
                continue
            got = spawn(["--worker", key[0], "--cases", json.dumps(jobs[key]), "--repeats", str(repeats)], threads)
            if got.get("missing"):
                continue
            times[key].append([per_run(c, row["seconds"]) for c, row in zip(jobs[key], got["rows"])])
            cpu[key].append([per_run(c, row["cpu_seconds"]) for c, row in zip(jobs[key], got["rows"])])
            answers[key] = [np.array(row["result"]) for row in got["rows"]]
            checks[key] = [np.array(row["check"] if row.get("check") is not None else np.nan) for row in got["rows"]]
            info.update(got["info"])
            print(f"  round {r + 1}/{rounds}: {key[0]} {key[1]} done", file=sys.stderr, flush=True)
        yield tabulate(phase, velocity, keys, times, cpu, answers, checks), info, [min(loads), max(loads)], peaks(rates)


def tabulate(phase, velocity, keys, times, cpu, answers, checks):
    """Per case: median seconds (wall, CPU) over the rounds, all rounds' seconds, agreement with
    meanfield after the same number of steps (the slow contenders' phase results against meanfield's
    ``checks``)."""
    table = []
    for kind, group in (("phase", phase), ("velocity", velocity)):
        for i, case in enumerate(group):
            seconds = {name: float(np.median([t[i] for t in times[(name, k)]]))
                       for (name, k) in keys if k == kind and times[(name, k)]}
            cpu_seconds = {name: float(np.median([t[i] for t in cpu[(name, k)]]))
                           for (name, k) in keys if k == kind and cpu[(name, k)]}
            agree = {}
            for (name, k) in keys:
                if k == kind and (name, k) in answers:
                    ours = (checks if kind == "phase" and name in SLOW else answers)[("meanfield", kind)][i]
                    agree[name] = float(np.max(np.abs(answers[(name, k)][i] - ours)))
            case = dict(case, steps=PAPER_STEPS) if kind == "phase" else case
            table.append(dict(case=case, seconds=seconds, cpu_seconds=cpu_seconds, max_difference=agree,
                              all_seconds={name: [t[i] for t in times[(name, k)]]
                                           for (name, k) in keys if k == kind and times[(name, k)]}))
    return table


def describe(case):
    if case["kind"] == "phase":
        return f"phase d={case['d']:<3}"
    return f"velocity n={case['n']:<5} d={case['d']:<3}"


def rate(row, peak):
    """Add to a table row meanfield's GFLOP/s (floor 2·2·n²·d per system and evaluation), its fraction
    of the DGEMM ``peak`` (at the contenders' thread count), wall-clock and per CPU second, and the
    ratios contender / meanfield."""
    ours = row["seconds"]["meanfield"]
    gflops = nominal_flops(row["case"]) / ours / 1e9
    cpu_gflops = nominal_flops(row["case"]) / row["cpu_seconds"]["meanfield"] / 1e9
    row.update(meanfield_gflops=gflops, fraction_of_peak=gflops / peak["gflops"],
               meanfield_cpu_gflops=cpu_gflops, cpu_fraction_of_peak=cpu_gflops / peak["cpu_gflops"],
               ratios={name: t / ours for name, t in row["seconds"].items()})


def report(table):
    """One line per case: seconds, ratios to meanfield and meanfield's fraction of the DGEMM peak."""
    for row in table:
        case, seconds = row["case"], row["seconds"]
        ours = seconds["meanfield"]
        gflops = row["meanfield_gflops"]
        others = " | ".join(f"{name} {t:.3g}s ({t / ours:.2f}x)" for name, t in seconds.items() if name != "meanfield")
        print(f"{describe(case)} meanfield {ours:.3g}s = {gflops:.1f} GFLOP/s = {100 * row['fraction_of_peak']:.0f}% "
              f"of peak ({100 * row['cpu_fraction_of_peak']:.0f}% per CPU second) | {others}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per process after the warm-up "
                        "(velocities: at least 5)")
    parser.add_argument("--steps", type=int, default=PAPER_STEPS, help="phase steps of meanfield and JAX per run")
    parser.add_argument("--slow-steps", type=int, default=3, help="phase steps of NumPy and PyTorch per run")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--phase-d", default=",".join(map(str, PHASE_D)),
                        help="the phase workload's dimensions (comma-separated; empty: none)")
    parser.add_argument("--velocities", default=",".join(f"{n}x{d}" for n, d in VELOCITY),
                        help="single velocities as NxD (comma-separated; empty: none)")
    parser.add_argument("--json", help="the results file (default benchmarks/results/hardware_<vector unit>.json)")
    parser.add_argument("--worker")
    parser.add_argument("--cases")
    parser.add_argument("--dgemm", type=int)
    parser.add_argument("--bandwidth", action="store_true")
    args = parser.parse_args()
    if args.dgemm:
        print(json.dumps(dgemm_worker(args.dgemm)))
        return
    if args.bandwidth:
        print(json.dumps(bandwidth_worker()))
        return
    if args.worker:
        print(json.dumps(contender_worker(args.worker, json.loads(args.cases), args.repeats)))
        return
    started = time.perf_counter()
    host = machine()
    print(f"{host['cpu']}, {host['cores']} cores, {host['tiles']}; {args.threads} threads per contender, "
          f"{args.rounds} interleaved rounds (the DGEMM peak and the bandwidth measured in each), phase per "
          f"{PAPER_STEPS} steps, (ratio) = time / meanfield's, > 1: meanfield faster", flush=True)
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                     f"hardware_{host['vector_unit']}.json")
    phase_d = tuple(int(d) for d in args.phase_d.split(",") if d)
    velocities = tuple(tuple(int(v) for v in nd.split("x")) for nd in args.velocities.split(",") if nd)
    for done, (table, info, loads, host["peak"]) in enumerate(measure(
            args.threads, args.rounds, args.repeats, args.steps, args.slow_steps, tuple(args.contenders.split(",")),
            phase_d, velocities)):
        best = host["peak"]["dgemm"]
        for row in table:
            rate(row, best[str(args.threads)])
        with open(path, "w") as fh:                  # after every round: an interrupted run keeps its rounds
            json.dump(dict(machine=host, meanfield=info, threads=args.threads, rounds=done + 1,
                           repeats=args.repeats, steps=args.steps, slow_steps=args.slow_steps, load=loads,
                           seconds=time.perf_counter() - started, cases=table), fh, indent=1)
    kernels = ", ".join(sorted({b["kernel"] for p in best.values() for b in p["blas"]}))
    print("DGEMM peak (best round; OpenBLAS kernel " + kernels + "): " + ", ".join(
        f"{p['gflops']:.1f} GFLOP/s ({p['cpu_gflops']:.1f} per CPU second) on {t} thread(s)" for t, p in best.items())
        + f"; memory bandwidth {host['peak']['bandwidth_gbytes_per_second']:.1f} GB/s")
    report(table)
    print(f"written {path} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
