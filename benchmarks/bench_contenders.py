"""meanfield against what users would otherwise write: NumPy, PyTorch (CPU) and JAX (CPU), side by side.

Each contender runs in its own process (several OpenMP / thread-pool runtimes in one process
distort every figure) with the same thread count, in interleaved rounds (the order rotates
every round), and every process reports the median of its repeats after a warm-up call
(JIT compilation excluded); the table gives the median over rounds and the ratio to meanfield.
PyTorch and JAX are optional: a contender that is not installed is skipped.

Workloads:
  phase     the paper's phase-diagram integrator: B = 2048 systems of n = 32 tokens in R^d, SA with β = 4,
            forward Euler dt = 0.1 with renormalisation, ``steps`` = 300 steps (seconds per run)
  velocity  one SA velocity, β = 1, n tokens in R^d (seconds per evaluation; meanfield: the gemm engine)

JAX is run twice: ``jax`` (jit of the per-system field, vmapped over the systems) and
``jax_einsum`` (jit of the field written with batched einsums); for one velocity they coincide.
GFLOP/s are nominal: 4 n² d flops per field evaluation and system (the score and value products,
2 flops per multiply-add), the same count for every contender, whatever it actually computes.
On a shared machine the CPU seconds of each process (all its threads; ``time.process_time``) are
printed too: nominal flops per CPU second are GFLOP/s per busy core, less sensitive to the load.

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

CONTENDERS = ("meanfield", "numpy", "torch", "jax", "jax_einsum")
PHASE = [dict(kind="phase", B=2048, n=32, d=d, beta=4.0, steps=300, dt=0.1) for d in (2, 8, 32, 64, 128)]
VELOCITY = [dict(kind="velocity", n=n, d=d, beta=1.0) for n, d in ((1024, 3), (4096, 3), (16384, 3), (4096, 64),
                                                                   (16384, 64))]


def nominal_flops(case):
    """4 n² d flops per field evaluation and system (score and value products)."""
    evaluations = case["B"] * case["steps"] if case["kind"] == "phase" else 1
    return 4.0 * case["n"] ** 2 * case["d"] * evaluations


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


def jax_runner(case, x, einsum=False):
    """JAX jit: the field of one system (n, d), vmapped over the systems, or (``einsum``) the
    field of the whole batch (B, n, d) as batched einsums; the steps in a ``fori_loop``."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    beta = case["beta"]

    def field(y):                                         # y (n, d), or (B, n, d) with einsum
        if einsum:
            p = jax.nn.softmax(beta * jnp.einsum("bid,bjd->bij", y, y), axis=-1)
            v = jnp.einsum("bij,bjd->bid", p, y)
        else:
            p = jax.nn.softmax(beta * (y @ y.T), axis=-1)
            v = p @ y
        return v - jnp.sum(v * y, axis=-1, keepdims=True) * y

    xj = jnp.asarray(x)
    if case["kind"] == "velocity":
        f = jax.jit(field if not einsum else lambda y: field(y[None])[0])
        return lambda: np.asarray(f(xj).block_until_ready())
    batch_field = field if einsum else jax.vmap(field)

    def body(_, y):
        y = y + case["dt"] * batch_field(y)
        return y / jnp.linalg.norm(y, axis=-1, keepdims=True)

    run = jax.jit(lambda y: jax.lax.fori_loop(0, case["steps"], body, y))
    return lambda: np.asarray(run(xj).block_until_ready())


RUNNERS = dict(meanfield=meanfield_runner, numpy=numpy_runner, torch=torch_runner, jax=jax_runner,
               jax_einsum=lambda case, x: jax_runner(case, x, einsum=True))


def worker(name, case, repeats):
    """In a fresh process: warm up, time ``repeats`` runs, print the median and the result's
    checksum (to compare the contenders' answers)."""
    try:
        run = RUNNERS[name](case, initial(case))
    except ImportError:
        print(json.dumps(dict(missing=True)))
        return
    result = run()
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps(dict(seconds=float(np.median(times)), cpu_seconds=float(np.median(cpu)),
                          result=np.asarray(result).ravel()[:64].tolist())))


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


def compare(cases, rounds, repeats, threads, contenders=CONTENDERS):
    """Interleaved rounds: every round runs every contender once per case, in rotated order
    (``jax_einsum`` only for the phase workload: for one velocity it is ``jax``)."""
    rows = []
    for case in cases:
        names = [c for c in contenders if case["kind"] == "phase" or c != "jax_einsum"]
        times = {name: [] for name in names}
        cpu = {name: [] for name in names}
        answers = {}
        loads = []
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                loads.append(os.getloadavg()[0])
                got = measure(name, case, repeats, threads)
                if got.get("missing"):
                    continue
                times[name].append(got["seconds"])
                cpu[name].append(got["cpu_seconds"])
                answers[name] = np.array(got["result"])
        med = {name: float(np.median(t)) for name, t in times.items() if t}
        med_cpu = {name: float(np.median(cpu[name])) for name in med}
        ref = answers["meanfield"]
        gflops = {name: nominal_flops(case) / t / 1e9 for name, t in med.items()}
        line = f"{describe(case):<38} load {min(loads):.1f}-{max(loads):.1f}" + "".join(
            f" | {name} {med[name]:.4g}s {gflops[name]:.1f}GF/s ({med[name] / med['meanfield']:.2f}x)"
            for name in med)
        agree = max(float(np.max(np.abs(a - ref))) for a in answers.values())
        print(line + f" | max |Δ| {agree:.1e}", flush=True)
        print(" " * 38 + " CPU seconds (all threads): " + " | ".join(
            f"{name} {med_cpu[name]:.4g}s {nominal_flops(case) / med_cpu[name] / 1e9:.1f}GF/s per busy core "
            f"({med_cpu[name] / med_cpu['meanfield']:.2f}x)" for name in med), flush=True)
        rows.append(dict(case=case, median_seconds=med, median_cpu_seconds=med_cpu, gflops=gflops, rounds=rounds,
                         threads=threads,
                         max_difference=agree, load=[min(loads), max(loads)],
                         all_seconds={k: v for k, v in times.items() if v}))
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
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated, e.g. meanfield,jax")
    parser.add_argument("--steps", type=int, help="Euler steps of the phase workload (default 300)")
    parser.add_argument("--json", help="also write the table to this JSON file")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.case), args.repeats)
        return
    cases = [c for c in PHASE + VELOCITY if args.only in (None, c["kind"])
             and (args.select is None or args.select in describe(c))]
    if args.steps:
        cases = [dict(c, steps=args.steps) if c["kind"] == "phase" else c for c in cases]
    print(f"{args.threads} threads per contender, {args.rounds} interleaved rounds, median of "
          f"{args.repeats} runs per process; (ratio) = time / meanfield's time, > 1 means meanfield is faster")
    rows = compare(cases, args.rounds, args.repeats, args.threads, tuple(args.contenders.split(",")))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
