"""Cost of the circle finite-volume solver per step, relative to one FFT pair of the same size.

One SSP-RK3 step = 3 evaluations of dρ/dt; each evaluation needs the circulant convolutions of
the cell masses (one rfft, then one inverse FFT per kernel: 1 for USA and MUSCL-SA, 2 for
upwind-SA) and O(N) flux loops.  The irreducible work is taken as one rfft + irfft pair of
length N (scipy.fft, as the solver uses).  Times are CPU seconds of this process
(time.process_time: all its threads, not other jobs on a shared machine; for the single-threaded
FFTs and flux loops this equals wall-clock time on an idle machine).  The pair, one evaluation
and one step are timed in turn within each repeat, and the medians over repeats of the times and
of the per-repeat ratios are printed.

A second table times SA at β = 200 on a concentrated density, where the cells with tiny Φ are
evaluated by direct log-sum-exp (the price of keeping relative accuracy there).

    python benchmarks/bench_circle.py [--quick]
"""
import argparse
import time

import numpy as np
import scipy.fft

import meanfield as mf
from meanfield.solvers import circle
from meanfield.solvers.stepping import fixed_step

SIZES = (256, 1024, 4096, 16384)


def interleaved(funcs, repeat, number):
    """CPU seconds per call of each function, shape (repeat, len(funcs)), timed in turn."""
    for func in funcs:
        func()
    times = np.empty((repeat, len(funcs)))
    for r in range(repeat):
        for k, func in enumerate(funcs):
            start = time.process_time()
            for _ in range(number):
                func()
            times[r, k] = (time.process_time() - start) / number
    return times


def unit_mass(rho):
    return rho / (rho.sum() * 2 * np.pi / rho.size)


def fft_pair(rho):
    return lambda: scipy.fft.irfft(scipy.fft.rfft(rho), n=rho.size)


def smooth_table(repeat):
    print("Smooth density, beta = 4: time per evaluation of drho/dt and per SSP-RK3 step (3 evaluations)")
    print(f"{'model':<6}{'flux':<8}{'N':>7}{'FFT pair us':>13}{'eval us':>10}{'step us':>10}"
          f"{'eval/pair':>11}{'step/pair':>11}")
    for cells in SIZES:
        theta = circle.cell_angles(cells)
        rho = unit_mass(1.0 + 0.5 * np.cos(3 * theta) + 0.2 * np.sin(7 * theta + 1.0))
        number = max(2, 40000 // cells)
        for model in (mf.SA(4.0), mf.USA(4.0)):
            for flux in circle.FLUXES:
                op = circle.CircleOperator(model, cells, flux, summation="direct")
                dt = circle.max_step(model, cells, flux)
                times = interleaved([fft_pair(rho), lambda: op(rho), lambda: fixed_step(lambda t, r: op(r)[0], 0.0, rho, dt, "ssprk3")],
                                    repeat, number)
                pair, evaluation, step = np.median(times, axis=0) * 1e6
                ratios = np.median(times[:, 1:] / times[:, :1], axis=0)
                print(f"{model.name:<6}{flux:<8}{cells:>7}{pair:>13.1f}{evaluation:>10.1f}{step:>10.1f}"
                      f"{ratios[0]:>11.2f}{ratios[1]:>11.2f}")


def log_space_table(repeat):
    print()
    print("SA, beta = 200, two bumps e^{60(cos(theta - c) - 1)}: cells with tiny Phi done in log space")
    print("(CPU time summed over threads: the direct sums run multi-threaded above 4M terms)")
    print(f"{'flux':<8}{'N':>7}{'log-space cells':>17}{'FFT pair us':>13}{'eval us':>11}{'eval/pair':>11}")
    for cells in SIZES:
        theta = circle.cell_angles(cells)
        rho = unit_mass(np.exp(60 * (np.cos(theta - 1) - 1)) + np.exp(60 * (np.cos(theta - 4) - 1)))
        for flux in circle.FLUXES:
            op = circle.CircleOperator(mf.SA(200.0), cells, flux, summation="direct")
            times = interleaved([fft_pair(rho), lambda: op(rho)], max(3, repeat // 3), 2 if cells < 4096 else 1)
            pair, evaluation = np.median(times, axis=0) * 1e6
            print(f"{flux:<8}{cells:>7}{op.log_space_cells:>17}{pair:>13.1f}{evaluation:>11.1f}"
                  f"{np.median(times[:, 1] / times[:, 0]):>11.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    repeat = 5 if args.quick else 15
    smooth_table(repeat)
    log_space_table(repeat)


if __name__ == "__main__":
    main()
