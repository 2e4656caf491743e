"""Cost of one right-hand side of the sphere finite-volume solver: direct vs spherical-harmonic Φ.

For icosphere meshes of N ∈ {642, 2562, 10242, 40962} cells, β = 9, a clustered density, prints
side by side the median time of ``sphere.time_derivative`` with summation="direct" and "fast",
their ratio, the relative difference of the two right-hand sides, what "auto" picks, and the
mesh build time.  Usage: python benchmarks/bench_sphere.py [--beta 9] [--levels 3 4 5 6] [--model SA]
"""
import argparse
import time

import numpy as np

import meanfield as mf
from meanfield.solvers import particles, sphere
from meanfield.solvers.mesh import icosahedron_points, voronoi_mesh


def median_time(f, repeats):
    f()  # compile / warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beta", type=float, default=9.0)
    parser.add_argument("--levels", type=int, nargs="+", default=[3, 4, 5, 6])
    parser.add_argument("--model", choices=("SA", "USA"), default="SA")
    parser.add_argument("--flux", choices=sphere.FLUXES, default="upwind")
    args = parser.parse_args(argv)
    model = getattr(mf, args.model)(args.beta)
    print(f"one right-hand side, {model!r}, flux={args.flux}; medians in seconds")
    print(f"{'cells':>7} {'mesh':>7} {'direct':>9} {'fast':>9} {'speed-up':>9} {'rel. diff':>10} {'auto':>7}")
    for level in args.levels:
        t0 = time.perf_counter()
        mesh = voronoi_mesh(icosahedron_points(level), name=f"icosphere({level})")
        build = time.perf_counter() - t0
        rho = np.exp(4 * mesh.points @ np.array([0.0, 0.6, 0.8])) + np.exp(4 * mesh.points[:, 0])
        rho /= rho @ mesh.areas
        results, times = {}, {}
        for how in ("direct", "fast"):
            def rhs(how=how):
                results[how] = sphere.time_derivative(model, rho, mesh, flux=args.flux, summation=how)
            cost = 0.6 * 1e-8 * mesh.size ** 2        # rough direct cost: fewer repeats when slow
            times[how] = median_time(rhs, 1 if how == "direct" and cost > 2 else 7)
        diff = np.max(np.abs(results["fast"] - results["direct"])) / np.max(np.abs(results["direct"]))
        auto = particles.resolve_summation(model, 3, mesh.size, mesh.size)
        print(f"{mesh.size:>7} {build:>7.2f} {times['direct']:>9.4f} {times['fast']:>9.4f} "
              f"{times['direct'] / times['fast']:>8.1f}x {diff:>10.1e} {auto:>7}", flush=True)


if __name__ == "__main__":
    main()
