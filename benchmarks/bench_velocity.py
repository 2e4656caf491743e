"""Velocity evaluation: our blocked Numba kernel vs the dense NumPy reference (vs PyTorch CPU
when it is installed), SA, β = 1, n ∈ {256, 1024, 4096}, d ∈ {3, 64}; medians of repeated
runs, side by side, with the agreement of the results.  Wall-clock times and, in brackets,
the process CPU time (both use all cores: Numba threads, BLAS threads), which is the fairer
comparison on a shared machine.

    python benchmarks/bench_velocity.py            # the table (about a minute)
    python benchmarks/bench_velocity.py --large    # plus n = 10^5 tokens in d = 64 (a few minutes):
                                                   # time and peak memory of one evaluation
"""
import argparse
import resource
import time

import numpy as np

import meanfield as mf
from meanfield.solvers import particles, reference

try:
    import torch
except ImportError:
    torch = None


def median_time(f, repeats):
    """Median (wall, CPU) seconds of f()."""
    f()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu))


def torch_velocity(x, beta):
    xt = torch.from_numpy(x)
    p = torch.softmax(beta * xt @ xt.T, dim=1)
    v = p @ xt
    return (v - (v * xt).sum(1, keepdim=True) * xt).numpy()


def cell(t):
    return f"{t[0]:.4f} ({t[1]:.4f})"


def ratio(a, b):
    return f"{a[0] / b[0]:.1f} ({a[1] / b[1]:.1f})"


def table(repeats):
    model = mf.SA(beta=1.0)
    head = f"{'d':>3} {'n':>6} {'kernel [s] (cpu)':>18} {'numpy [s] (cpu)':>18} {'numpy/kernel (cpu)':>19}"
    head += f" {'torch [s] (cpu)':>18} {'torch/kernel (cpu)':>19}" if torch is not None else ""
    print(head + f" {'max |Δ| / max |X|':>18}")
    for d in (3, 64):
        for n in (256, 1024, 4096):
            x = mf.uniform_sphere(n, d, seed=n + d)
            ours = median_time(lambda: particles.velocity(model, x, summation="direct"), repeats)
            dense = median_time(lambda: reference.attention_field(model, x), repeats)
            ref = reference.attention_field(model, x)
            err = np.max(np.abs(particles.velocity(model, x, summation="direct") - ref)) / np.max(np.abs(ref))
            line = f"{d:>3} {n:>6} {cell(ours):>18} {cell(dense):>18} {ratio(dense, ours):>19}"
            if torch is not None:
                tt = median_time(lambda: torch_velocity(x, model.beta), repeats)
                line += f" {cell(tt):>18} {ratio(tt, ours):>19}"
            print(line + f" {err:>18.1e}")
    if torch is None:
        print("(PyTorch is not installed: no torch column)")


def large():
    n, d = 10**5, 64
    x = mf.uniform_sphere(n, d, seed=1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    v = particles.velocity(mf.SA(beta=1.0), x, summation="direct")
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"n = {n}, d = {d}: one SA velocity evaluation {wall:.1f} s, peak RSS {peak:.0f} MB "
          f"(+{peak - before:.0f} MB; tokens alone {x.nbytes / 2**20:.0f} MB, a dense n×n matrix would be "
          f"{n * n * 8 / 2**30:.0f} GB); finite: {bool(np.all(np.isfinite(v)))}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--large", action="store_true", help="also run n = 1e5 tokens in d = 64")
    args = parser.parse_args()
    table(args.repeats)
    if args.large:
        large()
