"""One field evaluation on S^2 for random Q, K, V (the expansion of ``solvers.general_field``) against
the isotropic path at the same β‖Q^T K‖_2.

Icosphere level ``--level`` (default 5: 10,242 cells), a smooth non-uniform cell measure, SA.
Contenders, each in its own process with the same thread count (``--threads``, default 2), CPU and
wall seconds per evaluation as the median of ``--repeats`` after one warm-up call:

- ``general``: ``GeneralField(model, mesh.points)(masses)`` for Gaussian Q, K, V scaled to
  β‖Q^T K‖_2 = b (tables built once, outside the timing; their build time is reported apart);
- ``stage``: the same with the slopes at both ends of every edge along its normal
  (``GeneralField.stage``: 1 + 3 + 9 weight columns), what a second-order face extrapolation needs;
- ``balanced``: ``sphere.balanced_field(SA(b), rho, mesh)``, what the isotropic engine evaluates per
  stage (harmonic table + two BLAS products with 10 weight columns, the well-balanced correction);
- ``cell``: ``sphere.cell_field(SA(b), rho, mesh)`` (the isotropic point-mass field by
  ``particles.attention_field``: spectral transforms).

Prints one row per b and contender and the ratios general / balanced and stage / balanced.
Usage: python benchmarks/bench_general_field.py [--level 5] [--beta-norms 3 10] [--repeats 5]
"""
import argparse
import json
import os
import subprocess
import sys

CASE = """
import json, time
import numpy as np, meanfield as mf
from meanfield.solvers import general_field, sphere
level, b, how, repeats = {level}, {b}, {how!r}, {repeats}
mesh = sphere.icosphere(level)
rho = np.exp(1.5 * mesh.points[:, 2] - mesh.points[:, 0] ** 2)
rho /= rho @ mesh.areas
masses = rho * mesh.areas
build = 0.0
if how in ("general", "stage"):
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(3, 3, 3))
    model = mf.SA(b / np.linalg.norm(Q.T @ K, 2), Q=Q, K=K, V=V)
    general_field.GeneralField(model, sphere.icosphere(1).points, summation="expansion")(
        np.full(42, 1 / 42))                                             # compile
    t0 = time.perf_counter()
    field = general_field.GeneralField(model, mesh.points, summation="expansion")
    build = time.perf_counter() - t0
    call = lambda: field(masses)
    if how == "stage":
        ends, normals = mesh.edges.ravel(), mesh.normals.reshape(-1, 3)
        call = lambda: field.stage(masses, ends, normals)
elif how == "balanced":
    call = lambda: sphere.balanced_field(mf.SA(b), rho, mesh)
else:
    call = lambda: sphere.cell_field(mf.SA(b), rho, mesh)
call()
cpu, wall = [], []
for _ in range(repeats):
    c0, w0 = time.process_time(), time.perf_counter()
    call()
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - w0)
out = dict(cpu=float(np.median(cpu)), wall=float(np.median(wall)), build=build)
if how in ("general", "stage"):
    out["degree"] = field.info["degree"][0]
    out["recomputed"] = field.info["recomputed"][0]
print(json.dumps(out))
"""


def run(level, b, how, repeats, threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    code = CASE.format(level=level, b=b, how=how, repeats=repeats)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=5)
    parser.add_argument("--beta-norms", type=float, nargs="+", default=[3.0, 10.0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"{'b':>5} {'contender':>9} {'CPU s':>9} {'wall s':>9} {'build s':>8} {'L':>4} {'direct':>6}")
    for b in args.beta_norms:
        rows = {how: run(args.level, b, how, args.repeats, args.threads)
                for how in ("general", "stage", "balanced", "cell")}
        for how, r in rows.items():
            print(f"{b:>5g} {how:>9} {r['cpu']:>9.4f} {r['wall']:>9.4f} {r['build']:>8.3f} "
                  f"{r.get('degree', ''):>4} {r.get('recomputed', ''):>6}")
        for how in ("general", "stage"):
            print(f"{b:>5g} {how}/balanced CPU ratio {rows[how]['cpu'] / rows['balanced']['cpu']:.2f}, "
                  f"wall ratio {rows[how]['wall'] / rows['balanced']['wall']:.2f}")


if __name__ == "__main__":
    main()
