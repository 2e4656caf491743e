"""The full model's field and right-hand side on S^2 (random Q, K, V) against the isotropic path at the
same β‖Q^T K‖_2, measured side by side.

``rhs`` (default): icosphere level ``--level`` (default 5: 10,242 cells), a smooth non-uniform density,
SA.  In one process per b = β‖Q^T K‖_2 (``--threads``, default 2), the contenders are called in turn,
round after round (``--repeats`` rounds after one warm-up round), so that the load of a shared machine
falls on all of them alike; wall seconds per call, median and minimum over the rounds:

- ``field``: ``GeneralField(model, mesh.points)(masses)``, Gaussian Q, K, V scaled to β‖Q^T K‖_2 = b
  (tables built once, outside the timing; their build time is reported apart);
- ``stage``: the same with the slopes at both ends of every edge (``GeneralField.stage``);
- ``balanced``: ``sphere.balanced_field(SA(b), rho, mesh)``, the isotropic engine's field per stage;
- ``rhs``: one right-hand side of the finite volumes, ``SphereOperator(model, mesh)(rho)`` (flux
  upwind2: field, slopes, reconstruction, face speeds, fluxes), for the general model;
- ``rhs_isotropic``: the same for SA(b).

Prints one row per contender and the ratios field / balanced and rhs / rhs_isotropic.

``adaptive``: one adaptive S^2 solve (``adaptive.solve``, base 3, ``--finest``, ``--bulk``) of SA with
V = Q^T K = A symmetric, ‖A‖_2 = 1, β = b (A = (Q^T K + K^T Q)/2 for Gaussian Q, K, or with ``--sigma s``
the near-isotropic A ∝ I + s (G + G^T)/2, whose dynamics stay close to the isotropic one's) against
SA(b), from the same ρ_0 to the same T, alternating general and isotropic ``--repeats`` times; wall and
CPU seconds, right-hand sides, remeshes (and the seconds spent remeshing) and cells.

``--out FILE.json`` writes the rows.
Usage: python benchmarks/bench_general_field.py [rhs|adaptive] [--level 5] [--beta-norms 3 10 30]
       [--repeats 7] [--out benchmarks/results/general_field.json]
"""
import argparse
import json
import os
import subprocess
import sys

RHS = """
import json, time
import numpy as np, meanfield as mf
from meanfield.solvers import general_field, sphere, sphere_fv
level, b, repeats = {level}, {b}, {repeats}
mesh = sphere.icosphere(level)
rho = np.exp(1.5 * mesh.points[:, 2] - mesh.points[:, 0] ** 2)
rho /= rho @ mesh.areas
masses = rho * mesh.areas
rng = np.random.default_rng(0)
Q, K, V = rng.normal(size=(3, 3, 3))
model = mf.SA(b / np.linalg.norm(Q.T @ K, 2), Q=Q, K=K, V=V)
t0 = time.perf_counter()
field = general_field.GeneralField(model, mesh.points, summation="expansion")
build = time.perf_counter() - t0
general, isotropic = sphere_fv.SphereOperator(model, mesh), sphere_fv.SphereOperator(mf.SA(b), mesh)
ends, normals = mesh.edges.ravel(), mesh.normals.reshape(-1, 3)
calls = dict(field=lambda: field(masses), stage=lambda: field.stage(masses, ends, normals),
             balanced=lambda: sphere.balanced_field(mf.SA(b), rho, mesh),
             rhs=lambda: general(rho), rhs_isotropic=lambda: isotropic(rho))
wall = {{name: [] for name in calls}}
for k in range(repeats + 1):
    for name, call in calls.items():
        t0 = time.perf_counter()
        call()
        if k:
            wall[name].append(time.perf_counter() - t0)
print(json.dumps(dict(b=b, level=level, cells=int(mesh.size), degree=field.info["degree"][0],
                      recomputed=field.info["recomputed"][0], build=build,
                      median={{k: float(np.median(v)) for k, v in wall.items()}},
                      minimum={{k: float(np.min(v)) for k, v in wall.items()}})))
"""

ADAPTIVE = """
import json, time
import numpy as np, meanfield as mf
from meanfield.solvers import adaptive
b, finest, bulk, T, repeats, sigma = {b}, {finest}, {bulk}, {T}, {repeats}, {sigma}
Q, K = np.random.default_rng(0).normal(size=(2, 3, 3))
A = (Q.T @ K + K.T @ Q) / 2 if sigma is None else np.eye(3) + sigma * (Q + Q.T) / 2
A /= np.linalg.norm(A, 2)
models = dict(general=mf.SA(b, Q=A, V=A), isotropic=mf.SA(b))
rho0 = lambda x: 1 + 0.5 * x[:, 2] + 0.3 * x[:, 0] * x[:, 1]
adaptive.solve(mf.SA(1.0, Q=A, V=A), rho0, [0.0, 0.1], base=3, finest=4, progress=False)      # compile
runs = []
for k in range(repeats):
    for name, model in models.items():
        c0, w0 = time.process_time(), time.perf_counter()
        sol = adaptive.solve(model, rho0, [0.0, T / 2, T], base=3, finest=finest, bulk=bulk, progress=False)
        runs.append(dict(model=name, wall=time.perf_counter() - w0, cpu=time.process_time() - c0,
                         nfev=sol.info["nfev"], remeshes=sol.info["remeshes"],
                         remesh_seconds=sol.info["remesh_seconds"],
                         cells=[m["cells"] for m in sol.info["meshes"]][-1],
                         most=max(m["cells"] for m in sol.info["meshes"])))
print(json.dumps(dict(b=b, finest=finest, bulk=bulk, T=T, sigma=sigma, runs=runs)))
"""


def _run(code, threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def rhs(args):
    rows = []
    print(f"{'b':>5} {'contender':>14} {'median s':>9} {'min s':>9}")
    for b in args.beta_norms:
        row = _run(RHS.format(level=args.level, b=b, repeats=args.repeats), args.threads)
        for name in row["median"]:
            print(f"{b:>5g} {name:>14} {row['median'][name]:>9.4f} {row['minimum'][name]:>9.4f}")
        for num, den in (("field", "balanced"), ("rhs", "rhs_isotropic")):
            row[f"{num}/{den}"] = row["median"][num] / row["median"][den]
            print(f"{b:>5g} {num}/{den}: {row[f'{num}/{den}']:.2f} (medians), "
                  f"{row['minimum'][num] / row['minimum'][den]:.2f} (minima); L = {row['degree']}, "
                  f"tables built in {row['build']:.2f} s")
        rows.append(row)
    return rows


def adaptive(args):
    rows = []
    for b in args.beta_norms:
        row = _run(ADAPTIVE.format(b=b, finest=args.finest, bulk=args.bulk, T=args.T, repeats=args.repeats,
                                   sigma=args.sigma), args.threads)
        for r in row["runs"]:
            print(f"{b:>5g} {r['model']:>10} wall {r['wall']:7.1f} s  CPU {r['cpu']:7.1f} s  nfev {r['nfev']:5d}  "
                  f"remeshes {r['remeshes']:3d} ({r['remesh_seconds']:.1f} s)  cells at T {r['cells']:6d} "
                  f"(most {r['most']})")
        wall = {name: sum(r["wall"] for r in row["runs"] if r["model"] == name) for name in ("general", "isotropic")}
        nfev = {name: sum(r["nfev"] for r in row["runs"] if r["model"] == name) for name in wall}
        row["general/isotropic"] = wall["general"] / wall["isotropic"]
        row["per_rhs general/isotropic"] = row["general/isotropic"] * nfev["isotropic"] / nfev["general"]
        print(f"{b:>5g} general/isotropic wall ratio {row['general/isotropic']:.2f}, per right-hand side "
              f"{row['per_rhs general/isotropic']:.2f}")
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=("rhs", "adaptive"), default="rhs")
    parser.add_argument("--level", type=int, default=5)
    parser.add_argument("--beta-norms", type=float, nargs="+", default=[3.0, 10.0, 30.0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--finest", type=int, default=7)
    parser.add_argument("--bulk", type=int, default=4)
    parser.add_argument("--T", type=float, default=6.0)
    parser.add_argument("--sigma", type=float, default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = rhs(args) if args.what == "rhs" else adaptive(args)
    if args.out:
        stored = {}
        if os.path.exists(args.out):
            with open(args.out) as fh:
                stored = json.load(fh)
        key = args.what if args.what == "rhs" or args.sigma is None else f"adaptive_sigma{args.sigma:g}"
        stored[key] = dict(rows=rows, level=args.level, threads=args.threads, repeats=args.repeats,
                                 machine="loaded (2 cores shared by several processes)")
        with open(args.out, "w") as fh:
            json.dump(stored, fh, indent=1)


if __name__ == "__main__":
    main()
