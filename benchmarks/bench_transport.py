"""Cost of the Wasserstein distances (``meanfield.wasserstein``), side by side in one run.

S^1: the exact circle algorithms (level median for W_1, the search over the cut of
``meanfield.transport.circle`` for W_2) against the network simplex on the same points, and
against POT's ``ot.binary_search_circle`` (which it replaced) in a process of its own.
S^2: the exact network simplex against the sliced spherical distance (200 great circles), with
the ratio SSW_2 / W_2 of their values.  Medians of a few repeats; run:
python benchmarks/bench_transport.py
"""
import subprocess
import sys
import time
from functools import partial

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


SIZES = (1000, 3000, 10000, 100000)


def _circle_case(n):
    x, y = uniform_sphere(n, 2, seed=1), uniform_sphere(n, 2, seed=2)
    return x, y, np.random.default_rng(3).random(n)


def pot_binary_search():
    """Median seconds of POT's binary search for W_2 on the circle at each size (own process)."""
    import ot
    from meanfield.geometry import circle_angles
    for n in SIZES:
        x, y, b = _circle_case(n)
        u, v = circle_angles(x) / (2 * np.pi), circle_angles(y) / (2 * np.pi)
        print(median_time(partial(ot.binary_search_circle, u, v, None, b / b.sum(), p=2, eps=1e-12), 5))


def circle():
    pot = subprocess.run([sys.executable, __file__, "pot"], capture_output=True, text=True, check=True)
    pot = [float(line) for line in pot.stdout.split()]
    print("S^1, n = m uniform random points, weighted target")
    print(f"{'n':>7} {'W1 circle':>11} {'W2 circle':>11} {'W2 POT bs':>10} {'POT/circle':>11} {'W2 emd':>10} "
          f"{'emd/circle':>11}")
    for n, t_pot in zip(SIZES, pot):
        x, y, b = _circle_case(n)
        t1 = median_time(partial(wasserstein, x, None, y, b, p=1), 5)
        wasserstein(x, None, y, b, p=2)                     # compile the merge kernel first
        t2 = median_time(partial(wasserstein, x, None, y, b, p=2), 5)
        if n <= 3000:
            te = median_time(partial(wasserstein, x, None, y, b, p=2, method="emd"), 1)
            emd = f"{te:10.3f} {te / t2:10.0f}x"
        else:
            emd = f"{'-':>10} {'-':>11}"
        print(f"{n:7d} {t1:11.4f} {t2:11.4f} {t_pot:10.4f} {t_pot / t2:10.1f}x {emd}")


def sphere():
    print("\nS^2, n = m uniform random points")
    print(f"{'n':>7} {'W2 emd':>10} {'sliced':>10} {'emd/sliced':>11} {'SSW2/W2':>8}")
    for n in (500, 1000, 2000, 3000):
        x, y = uniform_sphere(n, 3, seed=1), uniform_sphere(n, 3, seed=2)
        te = median_time(partial(wasserstein, x, None, y, None, method="emd"), 3 if n <= 1000 else 1)
        ts = median_time(partial(wasserstein, x, None, y, None, method="sliced"), 3)
        ratio = wasserstein(x, None, y, None, method="sliced") / wasserstein(x, None, y, None, method="emd")
        print(f"{n:7d} {te:10.3f} {ts:10.3f} {te / ts:10.1f}x {ratio:8.2f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["pot"]:
        pot_binary_search()
    else:
        circle()
        sphere()
