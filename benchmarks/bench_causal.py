"""Cost of causal attention: particles at n = 10^4 (causal against full attention) and the causal
PDE on 256 × 512 cells to T = 20.

Particles: one field evaluation and one RK4 step of n tokens on S^1 and S^2 (SA, β = 4), direct
summation (the ``gemm`` engine), causal and full attention.  Each contender runs in its own
process (same thread count, the default of Numba), in alternation over ``--rounds`` rounds, and
reports the median wall time of its repeats; the ratio causal/full is taken within each round
and its median printed (the machine may be shared: ratios measured side by side are the numbers
to quote, not the seconds).

PDE: ``solvers.causal.solve`` for SA β = 4, V = I, from a smooth density, 256 slices × 512 cells,
T = 20 at the default (positivity) step; wall time, steps and the time per step.

    python benchmarks/bench_causal.py [--quick] [--rounds 3] [--part particles|pde]
"""
import argparse
import json
import subprocess
import sys
import time

import numpy as np


def contender(kind, n, d, repeat):
    """Median seconds of one field evaluation and one RK4 step for causal or full attention."""
    import meanfield as mf
    from meanfield.solvers import particles
    model = mf.SA(4.0, causal=kind == "causal")
    x = mf.uniform_sphere(n, d, seed=1)[None]
    particles.field(model, x, summation="direct")
    evals, steps = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        particles.field(model, x, summation="direct")
        evals.append(time.perf_counter() - start)
        start = time.perf_counter()
        particles.solve(model, x[0], [0, 0.05], dt=0.05, summation="direct", energy=False)
        steps.append(time.perf_counter() - start)
    return float(np.median(evals)), float(np.median(steps))


def pde(slices, cells, T):
    import meanfield as mf
    from meanfield.solvers import causal
    rho0 = lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s) + 0.2 * np.sin(3 * th)   # noqa: E731
    causal.solve(mf.SA(4.0), rho0, [0, 0.01], slices=8, cells=32)                       # compile
    start = time.perf_counter()
    sol = causal.solve(mf.SA(4.0), rho0, [0, T], slices=slices, cells=cells)
    seconds = time.perf_counter() - start
    return dict(seconds=seconds, steps=sol.info["nsteps"], per_step=seconds / sol.info["nsteps"],
                mass_error=float(np.abs(sol.mass - 1).max()), min_density=float(sol.rho.min()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--part", choices=("particles", "pde", "all"), default="all")
    parser.add_argument("--contender", nargs=4, metavar=("KIND", "N", "D", "REPEAT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.contender:
        kind, n, d, repeat = args.contender
        print(json.dumps(contender(kind, int(n), int(d), int(repeat))))
        return 0
    n = 2000 if args.quick else 10 ** 4
    repeat = 3
    if args.part != "pde":
        particle_table(n, repeat, args.rounds)
    if args.part != "particles":
        slices, cells, T = (64, 128, 2.0) if args.quick else (256, 512, 20.0)
        res = pde(slices, cells, T)
        print(f"Causal PDE, SA beta = 4, {slices} x {cells} cells, T = {T:g}: {res['seconds']:.1f} s wall, "
              f"{res['steps']} SSP-RK3 steps ({1e3 * res['per_step']:.1f} ms per step); per-slice mass error "
              f"{res['mass_error']:.1e}, min density {res['min_density']:.2e}")
    return 0


def particle_table(n, repeat, rounds):
    """Causal against full attention, d = 2 and 3: each contender in its own process, in turn."""
    print(f"Particles, SA beta = 4, n = {n}: median seconds (field evaluation, RK4 step), each in its own process")
    print(f"{'d':>3}{'round':>7}{'full eval':>11}{'causal eval':>13}{'ratio':>7}{'full step':>11}{'causal step':>13}"
          f"{'ratio':>7}")
    for d in (2, 3):
        ratios = []
        for r in range(rounds):
            out = {}
            for kind in ("full", "causal"):
                run = subprocess.run([sys.executable, __file__, "--contender", kind, str(n), str(d), str(repeat)],
                                     capture_output=True, text=True, check=True)
                out[kind] = json.loads(run.stdout.strip().splitlines()[-1])
            ratio = (out["causal"][0] / out["full"][0], out["causal"][1] / out["full"][1])
            ratios.append(ratio)
            print(f"{d:>3}{r:>7}{out['full'][0]:>11.4f}{out['causal'][0]:>13.4f}{ratio[0]:>7.2f}"
                  f"{out['full'][1]:>11.4f}{out['causal'][1]:>13.4f}{ratio[1]:>7.2f}")
        med = np.median(np.array(ratios), axis=0)
        print(f"d = {d}: median ratio causal/full: evaluation {med[0]:.2f}, RK4 step {med[1]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
