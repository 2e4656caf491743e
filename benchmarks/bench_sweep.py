"""Sweep overheads and speed-up: the store's cost per task, resuming a finished sweep, and a small
phase diagram (meanfield.sweep.particle_clusters) in-process vs on a LocalCluster.

    python benchmarks/bench_sweep.py [--workers 2] [--repeat 3]

Prints medians over ``repeat`` runs (fresh stores) and the ratios.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

from meanfield import sweep

PHASE = {"model": ["SA"], "beta": [1.0, 4.0, 9.0], "d": [2, 3], "n": [32], "T": [15.0]}


def trivial(params, seed):
    return {"y": params["a"] + seed, "v": np.full(8, float(seed))}


def timed(call, repeat):
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as store:
            start = time.perf_counter()
            call(store)
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    tasks = 200
    grid = {"a": list(range(tasks // 4))}
    plain = timed(lambda s: [trivial({"a": a}, seed) for a in grid["a"] for seed in range(4)], args.repeat)
    stored = timed(lambda s: sweep.run(trivial, grid, 4, s), args.repeat)

    def resume():
        with tempfile.TemporaryDirectory() as store:
            sweep.run(trivial, grid, 4, store)
            start = time.perf_counter()
            sweep.run(trivial, grid, 4, store)
            return time.perf_counter() - start
    resumed = float(np.median([resume() for _ in range(args.repeat)]))
    print(f"store overhead, {tasks} trivial tasks in-process (median of {args.repeat}):")
    print(f"  plain loop {plain * 1e3:8.1f} ms   sweep.run {stored * 1e3:8.1f} ms   "
          f"= {(stored - plain) / tasks * 1e3:.2f} ms per task (write + read back)")
    print(f"  resuming the finished sweep (nothing to compute): {resumed * 1e3:.1f} ms "
          f"= {resumed / tasks * 1e3:.2f} ms per task")

    sweep.particle_clusters({"beta": 1.0, "n": 8, "d": 3, "T": 0.1}, 0)     # compile the kernels once
    seeds = 4
    here = timed(lambda s: sweep.run(sweep.particle_clusters, PHASE, seeds, s), args.repeat)
    start = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"NUMBA_NUM_THREADS": "1"}) as cluster, Client(cluster) as client:
        startup = time.perf_counter() - start
        timed(lambda s: sweep.run(sweep.particle_clusters, {**PHASE, "T": [0.1]}, args.workers, s, client=client),
              1)                                                          # warm the workers' imports
        dask = timed(lambda s: sweep.run(sweep.particle_clusters, PHASE, seeds, s, client=client), args.repeat)
    ntasks = 6 * seeds
    print(f"\nphase diagram: particle_clusters, {ntasks} tasks (beta 1/4/9, d 2/3, n = 32, T = 15), "
          f"median of {args.repeat}:")
    print(f"  in-process         {here:7.2f} s")
    print(f"  LocalCluster({args.workers})    {dask:7.2f} s   speed-up {here / dask:.2f}x "
          f"(cluster start {startup:.1f} s, not included)")
    print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
