"""Work–precision of the adaptive S^2 finite volumes against uniform icosphere levels (issue 25).

Case (``bench_work_precision.py``'s S^2 case, the one of validation/sphere_levels.py): SA β = 3,
ρ_0 = ``perturbed_uniform(3, degree=2)``, T = 10, flux ``upwind2``; at T the solution is two
clusters (99.999 % of the mass, rms radius 1.3e-3 rad).

References: the refined-triangle particle reference (level-4 base, three rounds of depth 2, 64070
triangles), built by ``reference`` (about 30 min on 2 cores) and stored in
benchmarks/results/adaptive_sphere_reference.npz as its atoms at T merged in boxes of 1e-4 rad:
W1 and W2 against the whole of it ("w1_full", "w2_full", computed by ``remeasure``); and the same
reference read as two point masses, its cluster centres and basin masses from
benchmarks/results/work_precision_sphere.json ("w1", "w2": within the clusters' rms radius,
1.3e-3 rad, of the whole; the basin masses are certain to 4.8e-6).

Per run: W1 and W2 of the cell measure against it; the cluster masses (each cell's mass to the
nearest reference centre) and the distance of each FV cluster's centre (normalised mass-weighted
mean of its basin's cells) from the reference centre; and W2 split in two: "mass", W2 between the
reference and the reference centres carrying the FV basin masses (only the masses differ), and
"positions", W2 between the FV cell measure and the reference centres carrying the FV basin masses
(only where the mass sits differs).  Wall and CPU seconds of the solve (one run each, contenders one
after another in one process; the machine is a shared 2-core machine, so read ratios and CPU time).

    python benchmarks/bench_adaptive.py reference         # once
    python benchmarks/bench_adaptive.py run --uniform 3 4 --adaptive 3:5 3:6 3:7 [--bulk 5]
    python benchmarks/bench_adaptive.py remeasure         # W1, W2 against the whole reference
    python benchmarks/bench_adaptive.py table|plot
"""
import argparse
import json
import os
import time
from functools import lru_cache

import numpy as np

import meanfield as mf
from meanfield.geometry import great_circle_rows
from meanfield.measures import drop_negligible, merge_atoms, perturbed_uniform
from meanfield.solvers import adaptive, sphere

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
OUT = os.path.join(HERE, "adaptive_sphere.json")
MODEL, T = mf.SA(3.0), 10.0


REFERENCE = os.path.join(HERE, "adaptive_sphere_reference.npz")
KEEP = os.environ.get("MEANFIELD_BENCH_KEEP", os.path.join(HERE, "adaptive_sphere_final"))  # final measures
FULL_MERGE = 2e-4           # rad: merged again for W1 against the whole reference (moves W1 by 8e-5)
DROP = 1e-7                 # FV cells of total relative mass below this are dropped (W1 moves < 3.2e-7)
REFERENCE_MERGE = 1e-4     # rad: reference atoms in one box of this side merged (W1 moves by < 1.8e-4)


def build_reference(level=4, rounds=3, depth=2):
    """The refined-triangle particle reference of ``bench_work_precision.py``'s S^2 case (level-4
    base, three rounds of depth 2), its atoms at T merged in boxes of side REFERENCE_MERGE and
    stored in REFERENCE, so that W1 is measured against the clusters' own shape (rms radius
    1.3e-3 rad), not only their centres."""
    from meanfield.sampling import refined_triangles
    from meanfield.solvers import particles

    def flow(x, w):
        return particles.solve(MODEL, x, [0.0, T], weights=w, energy=False).x[-1]

    start = time.perf_counter()
    result = refined_triangles(perturbed_uniform(3, degree=2), flow, level=level, rounds=rounds, depth=depth)
    x, w = merge_atoms(result.final, result.weights, tol=REFERENCE_MERGE)
    np.savez_compressed(REFERENCE, points=x, weights=w, triangles=len(result.weights), level=level, rounds=rounds,
                        depth=depth, seconds=time.perf_counter() - start)
    print(f"{len(result.weights)} triangles -> {len(x)} atoms in {time.perf_counter() - start:.0f} s")


@lru_cache(maxsize=1)
def full_reference():
    """The stored reference atoms merged once more in boxes of side FULL_MERGE (each atom moves by
    at most sqrt(3)·FULL_MERGE; the mass-weighted mean move, printed, bounds the change of W1)."""
    with np.load(REFERENCE) as ref:
        x, w = ref["points"], ref["weights"]
    merged, weights, inverse = merge_atoms(x, w, tol=FULL_MERGE, return_inverse=True)
    print(f"reference: {len(x)} atoms -> {len(merged)}, W1 moved by at most "
          f"{w @ great_circle_rows(x, merged[inverse]):.1e}", flush=True)
    return merged, weights


def reference():
    """(centres (2, 3), basin masses (2,)) of the stored refined reference."""
    with open(os.path.join(HERE, "work_precision_sphere.json")) as fh:
        ref = json.load(fh)["reference"]
    return np.array(ref["centres"]), np.array(ref["basin_masses"])


def measure(points, masses, centres, ref_masses, full=False):
    """W1, W2 and their split into mass and position parts (module docstring)."""
    masses = masses / masses.sum()
    basin = np.argmax(points @ centres.T, axis=1)
    fv_masses = np.bincount(basin, masses, minlength=len(centres))
    mean = np.stack([masses[basin == c] @ points[basin == c] for c in range(len(centres))])
    fv_centres = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    offset = np.arccos(np.clip(np.sum(fv_centres * centres, axis=1), -1, 1))
    out = dict(w1=mf.wasserstein(points, masses, centres, ref_masses, p=1, method="emd"),
               w2=mf.wasserstein(points, masses, centres, ref_masses, p=2, method="emd"),
               w2_mass=mf.wasserstein(centres, fv_masses, centres, ref_masses, p=2, method="emd"),
               w2_positions=mf.wasserstein(points, masses, centres, fv_masses, p=2, method="emd"),
               w1_positions=mf.wasserstein(points, masses, centres, fv_masses, p=1, method="emd"),
               mass_error=float(np.abs(fv_masses - ref_masses).max()), centre_offset=offset.tolist())
    if full:
        x_ref, w_ref = full_reference()
        x, w = drop_negligible(points, masses, tol=DROP)
        out.update(w1_full=mf.wasserstein(x, w, x_ref, w_ref, p=1, method="emd"),
                   w2_full=mf.wasserstein(x, w, x_ref, w_ref, p=2, method="emd"))
    return out


def run_one(kind, base, finest, every=adaptive.DEFAULTS["every"], threshold=adaptive.DEFAULTS["threshold"], bulk=None,
            max_cells=adaptive.DEFAULTS["max_cells"]):
    rho0 = perturbed_uniform(3, degree=2)
    start, cpu = time.perf_counter(), time.process_time()
    if kind == "uniform":
        sol = sphere.solve(MODEL, rho0, [0.0, T], mesh=sphere.icosphere(base), energy=False)
        extra = dict(cells=int(sol.points.shape[0]))
    else:
        sol = adaptive.solve(MODEL, rho0, [0.0, T], base=base, finest=finest, every=every, threshold=threshold,
                              bulk=bulk, max_cells=max_cells)
        info = sol.info
        extra = dict(cells=int(sol.cells[-1]), max_cells=int(max(m["cells"] for m in info["meshes"])),
                     remeshes=info["remeshes"], checks=info["checks"], remesh_seconds=info["remesh_seconds"],
                     nsteps=info["nsteps"], nrejected=info["nrejected"], hmin=info["hmin"], hmax=info["hmax"],
                     energy_dips=info["energy_dips"], remesh_energy={k: v for k, v in info["remesh_energy"].items()
                                                                    if k != "changes"},
                     remesh_energy_total=float(np.sum(info["remesh_energy"]["changes"])),
                     energy=sol.energy.tolist())
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    points, weights = sol.measure()
    np.savez(_final(kind, base, finest, None if kind == "uniform" else base if bulk is None else bulk), points=points,
             weights=weights)
    centres, ref_masses = reference()
    row = dict(kind=kind, base=base, finest=finest, every=every, threshold=threshold,
               bulk=base if bulk is None else bulk, seconds=seconds,
               cpu_seconds=cpu, total_mass_error=float(abs(sol.mass[-1] - 1)),
               min_rho=float(sol.rho.min()), spacing=float(np.sqrt(4 * np.pi / (10 * 4 ** finest + 2))), **extra)
    row.update(measure(points, weights, centres, ref_masses))
    return row


def run(uniform, pairs, every, threshold, bulk=None, max_cells=adaptive.DEFAULTS["max_cells"]):
    os.makedirs(KEEP, exist_ok=True)
    data = json.load(open(OUT)) if os.path.exists(OUT) else dict(model=repr(MODEL), T=T, runs=[])
    todo = [("uniform", b, b) for b in uniform] + [("adaptive", b, f) for b, f in pairs]
    for kind, base, finest in todo:
        level = (base if bulk is None else bulk) if kind == "adaptive" else None
        row = run_one(kind, base, finest, every, threshold, level, max_cells)
        print(json.dumps(row), flush=True)
        key = _key(row)
        data["runs"] = [r for r in data["runs"] if _key(r) != key]
        data["runs"].append(row)
        with open(OUT, "w") as fh:
            json.dump(data, fh, indent=1)


def _final(kind, base, finest, bulk):
    return os.path.join(KEEP, f"{kind}_{base}_{finest}_{bulk}.npz")


def remeasure(part=0, parts=1):
    """Recompute the distances of every run (of the default criterion) from its stored final measure
    (KEEP) and the reference; with ``parts`` > 1, only every parts-th run from ``part`` on, so that
    several processes can share the work.  Each row is written back as soon as it is measured."""
    import fcntl
    centres, ref_masses = reference()
    rows = [r for r in json.load(open(OUT))["runs"] if _default_criterion(r)]
    for row in rows[part::parts]:
        path = _final(row["kind"], row["base"], row["finest"], row.get("bulk") if row["kind"] == "adaptive" else None)
        if not os.path.exists(path):
            continue
        with np.load(path) as fv:
            update = measure(fv["points"], fv["weights"], centres, ref_masses, full=True)
        print(row["kind"], row["base"], row["finest"], row.get("bulk"), update["w1_full"], flush=True)
        with open(OUT + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.load(open(OUT))
            for r in data["runs"]:
                if _key(r) == _key(row):
                    r.update(update)
            with open(OUT + ".tmp", "w") as fh:
                json.dump(data, fh, indent=1)
            os.replace(OUT + ".tmp", OUT)


def _key(run):
    return (run["kind"], run["base"], run["finest"], run.get("every", adaptive.DEFAULTS["every"]),
            run.get("threshold", adaptive.DEFAULTS["threshold"]), run.get("bulk", run["base"]))


def _default_criterion(run):
    return (run.get("threshold", adaptive.DEFAULTS["threshold"]) == adaptive.DEFAULTS["threshold"]
            and run.get("every", adaptive.DEFAULTS["every"]) == adaptive.DEFAULTS["every"])


def _hierarchy(data):
    """The runs in which every level of the hierarchy above the base is refined together: finest
    level L with bulk level L - 4 (3→7 without a bulk level, 3→8 bulk 4, 3→9 bulk 5), sorted by L."""
    runs = [r for r in data["runs"] if r["kind"] == "adaptive" and "bulk" in r and _default_criterion(r)
            and r["bulk"] == max(r["finest"] - 4, r["base"]) and r["finest"] >= 7]
    return sorted(runs, key=lambda r: r["finest"])


def _series(data):
    """[(name, runs sorted by finest level)]: uniform levels, then adaptive base-3 runs by bulk level
    (the default criterion only: other thresholds are kept in the JSON but not drawn)."""
    runs = [r for r in data["runs"] if "bulk" in r and _default_criterion(r)]    # rows of the current solver
    out = [("uniform icosphere", sorted((r for r in runs if r["kind"] == "uniform"), key=lambda r: r["finest"]))]
    for bulk in sorted({r["bulk"] for r in runs if r["kind"] == "adaptive"}):
        name = "adaptive, base 3" + ("" if bulk == 3 else f", bulk level {bulk}")
        out.append((name, sorted((r for r in runs if r["kind"] == "adaptive" and r["bulk"] == bulk),
                                 key=lambda r: r["finest"])))
    return [(name, rows) for name, rows in out if rows]


def table():
    data = json.load(open(OUT))
    print("| run | cells (final / most) | CPU [s] | wall [s] | W1 | W1 to the centres | W2 | W2 masses / positions | "
          "cluster-mass error | centre offsets [rad] |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for _, runs in _series(data):
        for r in runs:
            run = f"uniform level {r['base']}" if r["kind"] == "uniform" else \
                f"adaptive 3→{r['finest']}" + ("" if r["bulk"] == 3 else f", bulk {r['bulk']}")
            cells = f"{r['cells']}" + (f" / {r['max_cells']}" if "max_cells" in r else "")
            offsets = ", ".join(f"{o:.1e}" for o in r["centre_offset"])
            print(f"| {run} | {cells} | {r['cpu_seconds']:.3g} | {r['seconds']:.3g} | {r.get('w1_full', np.nan):.2e} | "
                  f"{r['w1']:.2e} | {r.get('w2_full', np.nan):.3f} | {r['w2_mass']:.3f} / {r['w2_positions']:.2e} | "
                  f"{r['mass_error']:.1e} | {offsets} |")
    for name, runs in _series(data) + [("whole hierarchy refined (bulk = finest - 4)", _hierarchy(data))]:
        for key in ("w1_full", "w1"):
            if len(runs) > 1 and all(key in r for r in runs):
                orders = [f"{a['finest']}→{b['finest']}: {np.log2(a[key] / b[key]):.2f}"
                          for a, b in zip(runs, runs[1:])]
                first, last = runs[0], runs[-1]
                overall = np.log2(first[key] / last[key]) / (last["finest"] - first["finest"])
                print(f"{name}: observed order of {key} in the finest cell size: {', '.join(orders)}; "
                      f"{first['finest']}→{last['finest']}: {overall:.2f}")

def plot():
    """W1 (against the whole reference) and W2 against CPU seconds:
    benchmarks/results/adaptive_work_precision.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from meanfield.plotting.ticks import log_ticks
    data = json.load(open(OUT))
    series = _series(data)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6), dpi=110)
    seconds = [r["cpu_seconds"] for _, runs in series for r in runs]
    styles = dict(zip([name for name, _ in series], (("C0", "s"), ("C3", "o"), ("C2", "^"), ("C1", "D"), ("C4", "v"))))
    for ax, key, label in zip(axes, ("w1_full", "w2"), ("$W_1$", "$W_2$")):
        for name, runs in series:
            colour, marker = styles[name]
            runs = [r for r in runs if key in r]
            if not runs:
                continue
            ax.loglog([r["cpu_seconds"] for r in runs], [r[key] for r in runs], marker=marker, color=colour,
                      label=name, lw=1.6, ms=7)
            for r in runs:
                ax.annotate(str(r["finest"]), (r["cpu_seconds"], r[key]), textcoords="offset points", xytext=(5, 4),
                            fontsize=9, color=colour)
            if key == "w2" and runs[0]["kind"] == "adaptive":
                ax.loglog([r["cpu_seconds"] for r in runs], [r["w2_mass"] for r in runs], ls=":", color=colour,
                          lw=1.4)
        path = [r for r in _hierarchy(data) if key in r]
        if key == "w1_full" and len(path) > 1:
            ax.loglog([r["cpu_seconds"] for r in path], [r[key] for r in path], ls="--", color="k", lw=1.2,
                      label="whole hierarchy refined (bulk = finest − 4)")
        if key == "w1_full":
            ax.axhline(5e-3, color="0.4", ls="--", lw=1.2, label=r"target $W_1 = 5\cdot 10^{-3}$")
        else:
            ax.plot([], [], ls=":", color="0.3", label="cluster-mass part (dotted)")
        log_ticks(ax.xaxis, [v for v in (2, 4, 10, 20, 40, 100, 200, 400)
                             if min(seconds) / 1.5 <= v <= max(seconds) * 1.5])
        ax.grid(True, which="both", alpha=0.3)
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * 3)          # headroom: the legend sits above the data
        ax.legend(fontsize=9, loc="upper right")
        ax.set(xlabel="CPU seconds of the solve (shared 2-core machine)",
               ylabel=f"{label}(FV, refined reference) at $T = 10$ (rad)",
               title=rf"$S^2$, SA $\beta = 3$, $T = 10$: {label} (labels: finest level)")
    fig.savefig(os.path.join(HERE, "adaptive_work_precision.png"), bbox_inches="tight")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("reference", "run", "remeasure", "table", "plot"))
    parser.add_argument("--uniform", type=int, nargs="*", default=[])
    parser.add_argument("--adaptive", nargs="*", default=[], help="base:finest pairs")
    parser.add_argument("--every", type=int, default=adaptive.DEFAULTS["every"])
    parser.add_argument("--threshold", type=float, default=adaptive.DEFAULTS["threshold"])
    parser.add_argument("--bulk", type=int, default=None,
                        help="level of the cells at least 0.1 of the mean density (default: base, i.e. none)")
    parser.add_argument("--max-cells", type=int, default=adaptive.DEFAULTS["max_cells"])
    parser.add_argument("--part", type=int, default=0, help="remeasure: this process's share (of --parts)")
    parser.add_argument("--parts", type=int, default=1)
    args = parser.parse_args()
    if args.what == "reference":
        build_reference()
    elif args.what == "remeasure":
        remeasure(args.part, args.parts)
    elif args.what == "run":
        pairs = [tuple(int(v) for v in p.split(":")) for p in args.adaptive]
        run(args.uniform, pairs, args.every, args.threshold, args.bulk, args.max_cells)
    elif args.what == "plot":
        plot()
    else:
        table()


if __name__ == "__main__":
    main()
