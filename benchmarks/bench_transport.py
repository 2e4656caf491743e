"""Cost of the Wasserstein distances (``meanfield.wasserstein``), side by side in one run.

S^1: the exact circle algorithms (level median for W_1, binary search for W_2) against the
network simplex on the same points. S^2: the exact network simplex against the sliced
spherical distance (200 great circles), with the ratio SSW_2 / W_2 of their values.
Medians of a few repeats; run: python benchmarks/bench_transport.py
"""
import time

import numpy as np

from meanfield.geometry import uniform_sphere
from meanfield.transport import wasserstein


def median_time(f, repeats):
    times = []
    for _ in range(repeats):
        clock = time.perf_counter()
        f()
        times.append(time.perf_counter() - clock)
    return float(np.median(times))


def circle():
    print("S^1, n = m uniform random points, weighted target")
    print(f"{'n':>7} {'W1 circle':>11} {'W2 circle':>11} {'W2 emd':>10} {'emd/circle':>11}")
    for n in (1000, 3000, 10000, 100000):
        x, y = uniform_sphere(n, 2, seed=1), uniform_sphere(n, 2, seed=2)
        b = np.random.default_rng(3).random(n)
        t1 = median_time(lambda: wasserstein(x, None, y, b, p=1), 5)
        t2 = median_time(lambda: wasserstein(x, None, y, b, p=2), 5)
        if n <= 3000:
            te = median_time(lambda: wasserstein(x, None, y, b, p=2, method="emd"), 1)
            emd = f"{te:10.3f} {te / t2:10.0f}x"
        else:
            emd = f"{'-':>10} {'-':>11}"
        print(f"{n:7d} {t1:11.4f} {t2:11.4f} {emd}")


def sphere():
    print("\nS^2, n = m uniform random points")
    print(f"{'n':>7} {'W2 emd':>10} {'sliced':>10} {'emd/sliced':>11} {'SSW2/W2':>8}")
    for n in (500, 1000, 2000, 3000):
        x, y = uniform_sphere(n, 3, seed=1), uniform_sphere(n, 3, seed=2)
        te = median_time(lambda: wasserstein(x, None, y, None, method="emd"), 3 if n <= 1000 else 1)
        ts = median_time(lambda: wasserstein(x, None, y, None, method="sliced"), 3)
        ratio = wasserstein(x, None, y, None, method="sliced") / wasserstein(x, None, y, None, method="emd")
        print(f"{n:7d} {te:10.3f} {ts:10.3f} {te / ts:10.1f}x {ratio:8.2f}")


if __name__ == "__main__":
    circle()
    sphere()
