"""W_2 on S^2 at mesh-like sizes: the coarse-to-fine sparse solver ("multiscale") against the
dense network simplex ("emd"), accuracy and time side by side.

Cases: n equal-weight particles (uniform, or in 5 tight clusters as after clustering) against
m weighted atoms (a smooth perturbed-uniform density on i.i.d. points, standing in for the
cell centres of an FV solution). Each contender runs in its own process (same thread count),
in interleaved rounds; medians are printed, with the difference of the two values.
Run: python benchmarks/bench_transport_sphere.py [rounds]
"""
import json
import subprocess
import sys

import numpy as np

CASES = [(1000, 642, "uniform"), (2000, 2562, "uniform"), (2000, 2562, "clustered"), (4000, 2562, "clustered")]
CHILD = """
import json, sys, time
import numpy as np
from meanfield.geometry import uniform_sphere
from meanfield.measures import perturbed_uniform
from meanfield.transport import wasserstein
n, m, kind, method = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = np.random.default_rng(0)
if kind == "uniform":
    x = uniform_sphere(n, 3, seed=rng)
else:
    c = uniform_sphere(5, 3, seed=rng)
    x = c[rng.integers(0, 5, n)] + 0.03 * rng.standard_normal((n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
y = uniform_sphere(m, 3, seed=rng)
b = perturbed_uniform(3, amplitude=0.8, degree=2, seed=1)(y)
wasserstein(x[:50], None, y[:40], None, method=method)          # compile outside the clock
clock = time.perf_counter()
value = wasserstein(x, None, y, b, method=method)
print(json.dumps(dict(value=value, time=time.perf_counter() - clock)))
"""


def run(n, m, kind, method):
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(m), kind, method],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(rounds=3):
    print(f"{'n':>6} {'m':>6} {'case':>10} {'emd s':>8} {'multiscale s':>13} {'ratio':>7} {'|ΔW2|':>9}")
    for n, m, kind in CASES:
        times = {"emd": [], "multiscale": []}
        values = {}
        for _ in range(rounds):
            for method in times:
                result = run(n, m, kind, method)
                times[method].append(result["time"])
                values[method] = result["value"]
        te, tm = np.median(times["emd"]), np.median(times["multiscale"])
        diff = abs(values["emd"] - values["multiscale"])
        assert diff < 1e-8, f"multiscale differs from emd by {diff}"
        print(f"{n:6d} {m:6d} {kind:>10} {te:8.2f} {tm:13.2f} {te / tm:6.1f}x {diff:9.1e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
