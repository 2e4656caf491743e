"""meanfield against what users would otherwise write: NumPy, PyTorch (CPU) and JAX (CPU), side by side.

Each contender runs in its own process (several OpenMP / thread-pool runtimes in one process
distort every figure) with the same thread count, in interleaved rounds (the order rotates
every round), and every process reports the median of its repeats after a warm-up call
(JIT compilation excluded); the table gives the median over rounds and the ratio to meanfield.
PyTorch and JAX are optional: a contender that is not installed is skipped.

Workloads:
  phase     the paper's phase-diagram integrator: B systems of n tokens in R^d, SA with β,
            forward Euler dt = 0.1 with renormalisation, ``steps`` steps (seconds per run)
  velocity  one SA velocity, β = 1, n tokens in R^d (seconds per evaluation; meanfield: the gemm engine)

    python benchmarks/bench_contenders.py                     # all workloads, 3 rounds
    python benchmarks/bench_contenders.py --only phase --rounds 5 --threads 2
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

CONTENDERS = ("meanfield", "numpy", "torch", "jax")
PHASE = [dict(kind="phase", B=2048, n=32, d=d, beta=4.0, steps=10, dt=0.1) for d in (32, 128)]
VELOCITY = [dict(kind="velocity", n=n, d=d, beta=1.0) for n, d in ((1024, 3), (4096, 3), (4096, 64),
                                                                   (16384, 64))]


def initial(case):
    rng = np.random.default_rng(7)
    shape = (case["B"], case["n"], case["d"]) if case["kind"] == "phase" else (case["n"], case["d"])
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# --- the contenders: each returns a function running the workload once -------------------------

def meanfield_runner(case, x):
    import meanfield as mf
    from meanfield.solvers import particles
    model = mf.SA(beta=case["beta"])
    if case["kind"] == "velocity":
        return lambda: particles.velocity(model, x, summation="direct")
    t = np.array([0.0, case["steps"] * case["dt"]])
    return lambda: particles.solve(model, x, t, method="euler", dt=case["dt"], energy=False).x[-1]


def numpy_runner(case, x):
    beta = case["beta"]

    def field(y):
        s = beta * (y @ np.swapaxes(y, -1, -2))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        v = (p @ y) / p.sum(axis=-1, keepdims=True)
        return v - np.sum(v * y, axis=-1, keepdims=True) * y

    if case["kind"] == "velocity":
        return lambda: field(x)

    def run():
        y = x
        for _ in range(case["steps"]):
            y = y + case["dt"] * field(y)
            y = y / np.linalg.norm(y, axis=-1, keepdims=True)
        return y
    return run


def torch_runner(case, x):
    import torch
    torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
    beta = case["beta"]
    xt = torch.from_numpy(x)

    def field(y):
        p = torch.softmax(beta * (y @ y.transpose(-1, -2)), dim=-1)
        v = p @ y
        return v - (v * y).sum(-1, keepdim=True) * y

    if case["kind"] == "velocity":
        return lambda: field(xt).numpy()

    def run():
        with torch.no_grad():
            y = xt
            for _ in range(case["steps"]):
                y = y + case["dt"] * field(y)
                y = y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)
            return y.numpy()
    return run


def jax_runner(case, x):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    beta = case["beta"]

    def field(y):
        p = jax.nn.softmax(beta * (y @ jnp.swapaxes(y, -1, -2)), axis=-1)
        v = p @ y
        return v - jnp.sum(v * y, axis=-1, keepdims=True) * y

    xj = jnp.asarray(x)
    if case["kind"] == "velocity":
        f = jax.jit(field)
        return lambda: np.asarray(f(xj).block_until_ready())

    def body(_, y):
        y = y + case["dt"] * field(y)
        return y / jnp.linalg.norm(y, axis=-1, keepdims=True)

    run = jax.jit(lambda y: jax.lax.fori_loop(0, case["steps"], body, y))
    return lambda: np.asarray(run(xj).block_until_ready())


RUNNERS = dict(meanfield=meanfield_runner, numpy=numpy_runner, torch=torch_runner, jax=jax_runner)


def worker(name, case, repeats):
    """In a fresh process: warm up, time ``repeats`` runs, print the median and the result's
    checksum (to compare the contenders' answers)."""
    try:
        run = RUNNERS[name](case, initial(case))
    except ImportError:
        print(json.dumps(dict(missing=True)))
        return
    result = run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    print(json.dumps(dict(seconds=float(np.median(times)), result=np.asarray(result).ravel()[:64].tolist())))


def measure(name, case, repeats, threads):
    env = dict(os.environ, BENCH_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               XLA_FLAGS=f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, __file__, "--worker", name, "--case", json.dumps(case),
                          "--repeats", str(repeats)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def describe(case):
    if case["kind"] == "phase":
        return f"phase B={case['B']} n={case['n']} d={case['d']} {case['steps']} steps"
    return f"velocity n={case['n']} d={case['d']}"


def compare(cases, rounds, repeats, threads):
    """Interleaved rounds: every round runs every contender once per case, in rotated order."""
    rows = []
    for case in cases:
        times = {name: [] for name in CONTENDERS}
        answers = {}
        for r in range(rounds):
            order = CONTENDERS[r % len(CONTENDERS):] + CONTENDERS[:r % len(CONTENDERS)]
            for name in order:
                got = measure(name, case, repeats, threads)
                if got.get("missing"):
                    continue
                times[name].append(got["seconds"])
                answers[name] = np.array(got["result"])
        med = {name: float(np.median(t)) for name, t in times.items() if t}
        ref = answers["meanfield"]
        line = f"{describe(case):<40}" + "".join(
            f" {name:>9} {med[name]:9.4f}s ({med[name] / med['meanfield']:5.2f}x)" for name in med)
        agree = max(float(np.max(np.abs(a - ref))) for a in answers.values())
        print(line + f"   max |Δ| {agree:.1e}", flush=True)
        rows.append(dict(case=case, median_seconds=med, rounds=rounds, threads=threads, max_difference=agree))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker")
    parser.add_argument("--case")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=("phase", "velocity"))
    parser.add_argument("--select", help="only the cases whose description contains this text, e.g. 'd=64'")
    parser.add_argument("--json", help="also write the table to this JSON file")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.case), args.repeats)
        return
    cases = [c for c in PHASE + VELOCITY if args.only in (None, c["kind"])
             and (args.select is None or args.select in describe(c))]
    print(f"{args.threads} threads per contender, {args.rounds} interleaved rounds, median of "
          f"{args.repeats} runs per process; (ratio) = time / meanfield's time, > 1 means meanfield is faster")
    rows = compare(cases, args.rounds, args.repeats, args.threads)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
