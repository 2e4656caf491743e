"""The PyTorch backend (``backend="torch"``) against the Numba engines, on the CPU, side by side.

Every (case, contender) runs in a fresh process with the same thread count (Numba, OpenMP,
OpenBLAS and PyTorch intra-op threads all set to ``--threads``), in interleaved rounds (the order
of the contenders rotates every round); a process times ``--repeats`` runs after a warm-up run
(compilation excluded) and reports its median and a checksum of its answer.  The table gives the
median over rounds and the ratio torch / numba (> 1: the Numba engine is faster).

Contenders: ``numba`` (the default backend: ``small`` for the phase workload, ``gemm`` for one
velocity), ``torch`` (backend="torch", device="cpu", float64) and ``torch32`` (the same with
dtype=float32).  Workloads:

  phase     the paper's phase-diagram integrator: B = 2048 systems of n = 32 tokens in R^d, SA β = 4,
            forward Euler dt = 0.1 with renormalisation, 10 steps (``particles.solve``)
  velocity  one SA velocity, β = 1, n tokens in R^d (``particles.velocity``, direct summation)

    python benchmarks/bench_torch_backend.py --rounds 3 --threads 2 [--json FILE]

On a machine with CUDA, ``--device cuda --large`` times the GPU on the paper's phase-diagram workload
(300 steps) and one velocity at n = 65536, d = 128 (the Numba contender still runs on ``--threads`` cores).
"""
import argparse
import json
import os
import subprocess
import sys
import timeit

import numpy as np

CASES = ([dict(kind="phase", B=2048, n=32, d=d, beta=4.0, steps=10, dt=0.1) for d in (32, 128)]
         + [dict(kind="velocity", n=n, d=d, beta=1.0) for n, d in ((4096, 3), (16384, 64))])
LARGE = ([dict(kind="phase", B=2048, n=32, d=d, beta=4.0, steps=300, dt=0.1) for d in (32, 128)]
         + [dict(kind="velocity", n=65536, d=128, beta=1.0)])      # the paper's size; the GPU velocity
CONTENDERS = {"numba": dict(backend="numba"), "torch": dict(backend="torch", dtype="float64"),
              "torch32": dict(backend="torch", dtype="float32")}


def label(case):
    if case["kind"] == "phase":
        return f"phase B={case['B']} n={case['n']} d={case['d']}, {case['steps']} Euler steps"
    return f"velocity n={case['n']} d={case['d']}"


def workload(case, options, device, threads):
    """A function running ``case`` once with the meanfield options of one contender."""
    import meanfield as mf
    from meanfield.solvers import particles
    kw = dict(backend=options["backend"])
    if options["backend"] == "torch":
        import torch
        torch.set_num_threads(threads)
        kw.update(device=device, dtype=np.dtype(options["dtype"]))
    rng = np.random.default_rng(7)
    shape = (case["B"], case["n"], case["d"]) if case["kind"] == "phase" else (case["n"], case["d"])
    x = rng.standard_normal(shape)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    model = mf.SA(case["beta"])
    if case["kind"] == "velocity":
        return lambda: particles.velocity(model, x, summation="direct", **kw)
    t = [0.0, case["steps"] * case["dt"]]
    return lambda: particles.solve(model, x, t, method="euler", dt=case["dt"], energy=False, progress=False,
                                   **kw).x[-1]


def child(case, name, device, threads, repeats):
    """Run in a fresh process: warm up, then the median of ``repeats`` timed runs (JSON on stdout)."""
    run = workload(case, CONTENDERS[name], device, threads)
    answer = np.asarray(run()).ravel()[:256]
    median = float(np.median(timeit.repeat(run, number=1, repeat=repeats)))
    print(json.dumps(dict(seconds=median, answer=answer.tolist())))


def spawn(case, name, device, threads, repeats):
    env = dict(os.environ, **{key: str(threads) for key in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                                           "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    out = subprocess.run([sys.executable, __file__, "--child", name, "--case", json.dumps(case), "--device", device,
                          "--threads", str(threads), "--repeats", str(repeats)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--large", action="store_true",
                        help="the full workloads instead (300 steps; one velocity at n = 65536, d = 128): for a GPU")
    parser.add_argument("--json", help="write the medians and ratios to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.case), args.child, args.device, args.threads, args.repeats)
    names = list(CONTENDERS)
    print(f"{args.threads} threads per process, {args.rounds} interleaved rounds, median of {args.repeats} runs "
          f"per process, torch on {args.device}; ratio = time / numba's time")
    rows = []
    for case in LARGE if args.large else CASES:
        seconds, answers = {n: [] for n in names}, {}
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                got = spawn(case, name, args.device, args.threads, args.repeats)
                seconds[name].append(got["seconds"])
                answers[name] = np.array(got["answer"])
        median = {n: float(np.median(s)) for n, s in seconds.items()}
        ratio = {n: median[n] / median["numba"] for n in names}
        gap = {n: float(np.max(np.abs(answers[n] - answers["numba"]))) for n in names if n != "numba"}
        print(f"{label(case):<44}" + "".join(f"  {n} {median[n]:8.4f} s ({ratio[n]:5.2f}x)" for n in names)
              + "   max |Δ| " + ", ".join(f"{n} {g:.1e}" for n, g in gap.items()), flush=True)
        rows.append(dict(case=case, median_seconds=median, ratio_to_numba=ratio, max_difference=gap,
                         rounds=args.rounds, repeats=args.repeats, threads=args.threads, device=args.device))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
