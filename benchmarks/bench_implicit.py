"""Time to T for explicit, implicit and scheme="auto" runs through the metastable plateaus of SA β = 3.

Cases from near-uniform starts (``validation/metastability.py``: perturbation ε = 1e-8 along 31 modes, seed 0,
on S¹; on S² the density 1 + ε Σ of 31 random sine ridges, seed 0):

- ``s1``: ``circle.solve(flux="upwind")`` on 2048 cells.
- ``s2``: the default adaptive S² solver (``sphere.solve``, mesh=None, flux "upwind2": the explicit scheme
  integrates it, the implicit one its first-order part); ``--level L``: the fixed mesh icosphere(L).
- ``s2-plateau``: what sets the implicit step on the S² plateau (``s2_plateau``): the error estimate
  against the true local error, and the clusters' drift against the explicit solver's.
- ``table``: the time-to-T table (T = 1e2, 1e4, 1e6) of the recorded runs, Markdown on standard output and
  under "table" in the results file.

Each case runs (``--runs``) the explicit scheme (SSP-RK3 with positivity steps) to ``--explicit-T``, the
implicit one (``"backward_euler"`` under error control) and ``"auto"`` to ``--T``; outputs every 2 time units to
3e3, then 20 per decade.  Runs are recorded one by one (a later call adds to or replaces runs of the same
name): CPU seconds (time.process_time, this process) in all and when the run passed 1e2, 1e3, … and each output
time (``Milestones``), steps, the switches of auto, the smallest density and mass error, and the merge times:
the outputs where the number of clusters (connected regions of density above twice the uniform one holding
>= 2 % of the mass, ``validation.metastability``) drops.  Where an explicit run stops short of T, the table
projects its time at the CPU rate of its last half (its step is set by the cells, not by the dynamics).
Writes benchmarks/results/implicit.json.

    PYTHONPATH=. python benchmarks/bench_implicit.py --case s1 --T 1e6 --explicit-T 1e4
    PYTHONPATH=. python benchmarks/bench_implicit.py --case s2 --level 4 --T 1e6 --explicit-T 1e3
    PYTHONPATH=. python benchmarks/bench_implicit.py --case s2 --T 1e6 --explicit-T 1e3
    PYTHONPATH=. python benchmarks/bench_implicit.py --case table
    PYTHONPATH=. python benchmarks/bench_implicit.py --case s2-plateau
"""
import argparse
import json
import pathlib
import time

import numpy as np

import meanfield as mf
from meanfield.clusters import cluster_count
from meanfield.progress import Progress
from meanfield.solvers import circle, sphere
from validation.metastability import EPS, MIN_MASS, near_uniform_density, perturbation_phases

BETA = 3.0
PHASES = 31
DENSE = 3e3            # outputs every 2 time units up to here
MILESTONES = (1e2, 1e3, 1e4, 1e5, 1e6)     # times at which each run's CPU seconds are recorded
RESULTS = pathlib.Path(__file__).parent / "results" / "implicit.json"


def output_times(T):
    """Every 2 time units to min(T, 3e3) (the merges of these cases), then 20 per decade to T."""
    dense = np.arange(0.0, min(T, DENSE) + 1e-9, 2.0)
    if T <= DENSE:
        return dense
    return np.concatenate([dense, np.geomspace(DENSE, T, int(20 * np.log10(T / DENSE)) + 1)[1:]])


def clusters(points, rho, areas, uniform):
    """Clusters: connected groups (single linkage at 1.5 cell widths) of cells with ρ > 2 × uniform."""
    keep = (rho > 2 * uniform) & (areas > 0)
    if not np.any(keep):
        return 0
    mass = rho[keep] * areas[keep]
    width = 1.5 * np.sqrt(areas[keep].max()) if points.shape[1] == 3 else 1.5 * areas[keep].max()
    return cluster_count(points[keep], width, weights=mass / mass.sum(), min_mass=MIN_MASS)


def merges(t, counts):
    """(t, clusters after) at each output where the cluster count drops, after its first maximum."""
    counts = np.asarray(counts)
    if counts.size == 0 or counts.max() == 0:
        return []
    start = int(np.argmax(counts))
    return [(float(t[k]), int(counts[k])) for k in range(start + 1, counts.size) if 0 < counts[k] < counts[k - 1]]


def record(sol, t, seconds, uniform):
    points = sol.points if sol.points.ndim == 3 else np.broadcast_to(sol.points, (t.size,) + sol.points.shape)
    areas = sol.areas if np.ndim(sol.areas) == 2 else np.broadcast_to(sol.areas, (t.size,) + np.shape(sol.areas))
    counts = [clusters(points[k], sol.rho[k], areas[k], uniform) for k in range(t.size)]
    out = dict(T=float(t[-1]), cpu_s=round(seconds, 2), nsteps=int(sol.info["nsteps"]),
               merges=merges(t, counts), clusters_at_end=int(counts[-1]), min=float(np.min(sol.rho)),
               mass_error=float(np.abs(sol.mass - sol.mass[0]).max()))
    out.update({key: sol.info[key] for key in ("nrejected", "nfev", "remeshes", "checks") if key in sol.info})
    if "switches" in sol.info:
        out["switches"] = [(round(s, 3), name) for s, name in sol.info["switches"]]
    return out


class Milestones:
    """The CPU seconds (``time.process_time``) at which a solve's progress passes each time in ``MILESTONES``
    and, for projections, at each output time: ``Progress.update`` wrapped for the duration of one run (the
    solvers report every step to their progress reporter, shown or not)."""

    def __init__(self, span, checkpoints):
        self.span, self.checkpoints, self.passed, self.next = span, np.sort(np.asarray(checkpoints, float)), {}, 0
        self.start = time.process_time()

    def __enter__(self):
        self.update = Progress.update
        clock = self

        def update(progress, amount):
            clock.update(progress, amount)
            if progress.total != clock.span:          # not the run's own reporter (one for all stretches)
                return
            while clock.next < clock.checkpoints.size and clock.checkpoints[clock.next] <= progress.n * (1 + 1e-12):
                clock.passed[float(clock.checkpoints[clock.next])] = time.process_time() - clock.start
                clock.next += 1
        Progress.update = update
        return self

    def __exit__(self, *exc):
        Progress.update = self.update


def run(solve, t, uniform, name, case):
    """One run, recorded at once into the case's entry of the results file (runs of other calls kept),
    with the CPU seconds at which it passed each of ``MILESTONES`` and each output time."""
    with Milestones(float(t[-1] - t[0]), np.union1d(t[1:], [m for m in MILESTONES if m <= t[-1]])) as clock:
        sol = solve(t)
    seconds = time.process_time() - clock.start
    result = record(sol, t, seconds, uniform)
    result["cpu_at"] = {f"{m:g}": round(clock.passed[m], 2) for m in MILESTONES if m in clock.passed}
    result["cpu_trace"] = [[float(s), round(c, 3)] for s, c in sorted(clock.passed.items())]
    print(name, json.dumps({k: v for k, v in result.items() if k != "cpu_trace"}), flush=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    entry = results.setdefault(case, {"note": "CPU seconds of one process on a loaded shared 2-core machine"})
    entry.setdefault("runs", {})[name] = result
    RESULTS.write_text(json.dumps(results, indent=1))
    return result


def schedule(solve, names, case, uniform, T, explicit_T, kinds, rtol=None, explicit=None):
    """The runs of a case that ``kinds`` names: the explicit scheme (SSP-RK3, with the options ``explicit``) to
    ``explicit_T``, backward Euler and auto (with ``rtol`` when given) to ``T``; ``solve(t, scheme, **options)``,
    each run named by ``names[kind]`` with "{rtol}" replaced by ", rtol=…" or nothing."""
    tolerance, named = ({}, "") if rtol is None else ({"rtol": rtol}, f", rtol={rtol:g}")
    for kind, scheme, end, options in (("explicit", "ssprk3", explicit_T, explicit or {}),
                                       ("implicit", "backward_euler", T, tolerance), ("auto", "auto", T, tolerance)):
        if end > 0 and kind in kinds:
            run(lambda t, scheme=scheme, options=options: solve(t, scheme, **options), output_times(end), uniform,
                names[kind].format(rtol=named), case)


def s1(T, explicit_T, kinds, rtol=None):
    cells = 2048
    rho0 = near_uniform_density(circle.cell_angles(cells), perturbation_phases(PHASES, 0))
    model = mf.SA(BETA)

    def solve(t, scheme, **options):
        return circle.solve(model, rho0, t, cells=cells, flux="upwind", scheme=scheme, progress=False, energy=False,
                            budget=None, **options)
    schedule(solve, {"explicit": "explicit (SSP-RK3, positivity steps)", "implicit": "implicit (backward Euler{rtol})",
                     "auto": "auto{rtol}"}, "s1", 1 / (2 * np.pi), T, explicit_T, kinds, rtol)
    return dict(cells=cells, beta=BETA, flux="upwind")


def s2_density():
    """The near-uniform start on S²: 1 + ε Σ of 31 random sine ridges (seed 0)."""
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(PHASES, 3))
    phases = rng.uniform(0, 2 * np.pi, PHASES)

    def rho0(x):
        return 1 + EPS * np.sin(x @ directions.T * 3.0 + phases).sum(axis=1)
    return rho0


def s2(T, explicit_T, kinds, level=None, rtol=None, flux=None):
    """The default adaptive cells, or icosphere(level) (runs named "... icosphere(level)"); ``flux``: the
    explicit run's flux instead of the default "upwind2" (named in the run)."""
    rho0 = s2_density()
    model = mf.SA(BETA)
    mesh = None if level is None else sphere.icosphere(level)
    where = "adaptive default" if level is None else f"icosphere({level})"
    fluxed = "" if flux is None else f", flux={flux}"

    def solve(t, scheme, **options):
        return sphere.solve(model, rho0, t, scheme=scheme, mesh=mesh, progress=False, energy=False, budget=None,
                            **options)
    schedule(solve, {"explicit": f"explicit (SSP-RK3, {where}{fluxed})",
                     "implicit": f"implicit (backward Euler, {where}{{rtol}})",
                     "auto": ("auto" if level is None else f"auto, {where}") + "{rtol}"},
             "s2", 1 / (4 * np.pi), T, explicit_T, kinds, rtol, None if flux is None else {"flux": flux})
    return dict(mesh="adaptive (default); icosphere(level) for the runs so named", beta=BETA, flux="upwind2")


def s2_plateau(t_state=50.0, span=100.0):
    """What sets MPRK22's step on the S² plateau: from the state of the default adaptive run ("auto") at
    ``t_state`` (two clusters formed, the implicit member active), on that state's cells (``voronoi_mesh`` of its
    generators) and the first-order upwind system:

    - the error estimate ‖y_{n+1} - y^(2)‖ (the controller's norm, rtol 1e-3) of one step h against the
      true local error (64 substeps), and the change of the state over h;
    - the drift of the densest cluster's centroid over ``span`` from MPRK22 and backward Euler under error
      control at several rtol, against SSP-RK3 with positivity steps (the explicit solver of the same system).
    """
    from meanfield.solvers import sphere_fv
    from meanfield.solvers.controllers import ImplicitControl
    from meanfield.solvers.meshes.voronoi import voronoi_mesh
    from meanfield.solvers.schemes import MPRK22
    from meanfield.solvers.stepping import integrate
    model = mf.SA(BETA)
    sol = sphere.solve(model, s2_density(), [0.0, t_state], scheme="auto", progress=False, energy=False, budget=None)
    cells = int(sol.cells[-1])
    mesh = voronoi_mesh(sol.points[-1, :cells])
    order = np.argmax(mesh.points @ sol.points[-1, :cells].T, axis=1)       # the generators in mesh order
    y = sol.rho[-1, :cells][order]
    op = sphere_fv.SphereOperator(model, mesh, "upwind")
    norm = ImplicitControl(MPRK22(), 1e-3, 1e-8)._norm
    local = []
    for h in (0.5, 2.0, 8.0, 32.0):
        one = MPRK22().step(op, 0.0, y, h)
        ref = y
        for _ in range(64):
            ref = MPRK22().step(op, 0.0, ref, h / 64).y
        local.append(dict(h=h, estimate=norm(one.error, y, one.y), true_error=norm(one.y - ref, y, one.y),
                          change=norm(ref - y, y, ref)))
        print("local", local[-1], flush=True)
    weights = y * mesh.areas
    near = mesh.points @ mesh.points[np.argmax(weights)] > 0.5

    def centroid(r):
        c = (r[near] * mesh.areas[near]) @ mesh.points[near]
        return c / np.linalg.norm(c)
    start = centroid(y)
    t = np.array([0.0, span])
    drift = {}
    for name, kw in [("ssprk3", dict(scheme="ssprk3", cfl=0.9))] + \
            [(f"mprk22 rtol={r:g}", dict(scheme="mprk22", rtol=r)) for r in (1e-4, 1e-3, 1e-2)] + \
            [(f"backward_euler rtol={r:g}", dict(scheme="backward_euler", rtol=r)) for r in (1e-3, 1e-2)]:
        begin = time.process_time()
        Y, info = integrate(op, y, t, dt=sphere_fv.step_cap(model, mesh, "upwind"), positivity=True, progress=False,
                            **kw)
        drift[name] = dict(drift=float(np.arccos(np.clip(centroid(Y[-1]) @ start, -1, 1))), nsteps=info["nsteps"],
                           nrejected=info["nrejected"], hmax=info["hmax"], cpu_s=round(time.process_time() - begin, 2))
        print(name, drift[name], flush=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["s2_plateau"] = dict(t_state=t_state, span=span, cells=cells, max_density=float(y.max()),
                                 local_error=local, centroid_drift=drift,
                                 note="CPU seconds of one process on a loaded shared 2-core machine")
    RESULTS.write_text(json.dumps(results, indent=1))


TABLE = (("S¹, 2048 cells", "s1", "s1", {"explicit": "explicit (SSP-RK3, positivity steps)",
                                          "implicit": "implicit (backward Euler)", "auto": "auto"}),
         ("S², icosphere(4)", "s2", "s2_level4", {"explicit": "explicit (SSP-RK3, icosphere(4))",
                                                  "explicit, upwind": "explicit (SSP-RK3, icosphere(4), flux=upwind)",
                                                  "implicit": "implicit (backward Euler, icosphere(4))",
                                                  "auto": "auto, icosphere(4)",
                                                  "auto, rtol 1e-4": "auto, icosphere(4), rtol=0.0001"}),
         ("S², adaptive cells", "s2", "s2_adaptive", {"explicit": "explicit (SSP-RK3, adaptive default)",
                                                      "implicit": "implicit (backward Euler, adaptive default)",
                                                      "auto": "auto", "auto, rtol 1e-4": "auto, rtol=0.0001"}))


def projected(result, T):
    """CPU seconds to reach T: measured when the run passed T, else its time at its end plus (T - end) at the
    CPU rate of the run's last half (the explicit schemes' step is set by the cells, so that rate holds on),
    with a flag saying which."""
    if f"{T:g}" in result["cpu_at"]:
        return result["cpu_at"][f"{T:g}"], False
    trace = np.array(result["cpu_trace"])
    end, cpu_end = trace[-1]
    half = trace[np.searchsorted(trace[:, 0], end / 2)]
    rate = (cpu_end - half[1]) / (end - half[0])
    return float(cpu_end + rate * (T - end)), True


def power(T):
    """10⁴ for 1e4; other numbers as they are."""
    k = np.log10(T)
    return f"10{str(int(k)).translate(str.maketrans('0123456789-', '⁰¹²³⁴⁵⁶⁷⁸⁹⁻'))}" if k == int(k) else f"{T:g}"


def duration(seconds, source):
    """Seconds, minutes or hours to 3 digits, the number followed by its ``source`` marker (a key of the results
    file) for docs/performance.md."""
    for unit, size in (("s", 1), ("min", 60), ("h", 3600)):
        if seconds < 100 * size or unit == "h":
            scale = "" if size == 1 else f" scale={1 / size!r}"
            return f"{seconds / size:.3g}<!-- from: benchmarks/results/implicit.json:{source}{scale} --> {unit}"


def table(Ts=(1e2, 1e4, 1e6)):
    """The time-to-T table from the recorded runs (``TABLE``), stored under "table" in the results file and
    printed as Markdown with the source of each number (docs/performance.md): CPU seconds to each T (projected
    ones marked "≈") and the merge times of each run."""
    results = json.loads(RESULTS.read_text())
    rows, lines = {}, ["| case | run | " + " | ".join(f"T = {power(T)}" for T in Ts) + " | merges (t) |",
                       "|---" * (len(Ts) + 3) + "|"]
    for label, case, key, runs in TABLE:
        for kind, name in runs.items():
            result = results.get(case, {}).get("runs", {}).get(name)
            if result is None or "cpu_trace" not in result:
                continue
            times = [projected(result, T) for T in Ts]
            row = rows[f"{key}_{kind.replace(',', '').replace(' ', '_')}"] = dict(
                case=label, run=name, reached=result["T"], steps=result["nsteps"],
                cpu_s={f"{T:g}": round(c, 2) for T, (c, _) in zip(Ts, times)},
                projected=[f"{T:g}" for T, (_, p) in zip(Ts, times) if p], merges=[m for m, _ in result["merges"]])
            source = f"table.rows.{key}_{kind.replace(',', '').replace(' ', '_')}"
            merges = ", ".join(f"{m:.5g}<!-- from: benchmarks/results/implicit.json:{source}.merges.{j} -->"
                               for j, m in enumerate(row["merges"])) or "none"
            cells = [("≈ " if p else "") + duration(c, f"{source}.cpu_s.{T:g}") for T, (c, p) in zip(Ts, times)]
            lines.append(f"| {label} | {kind} | " + " | ".join(cells) + f" | {merges} (to {power(row['reached'])}) |")
    results["table"] = dict(rows=rows, note="CPU seconds (one process); ≈: projected from the run's last half")
    RESULTS.write_text(json.dumps(results, indent=1))
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("s1", "s2", "s2-plateau", "table"), required=True)
    parser.add_argument("--T", type=float, default=1e6)
    parser.add_argument("--explicit-T", type=float, default=1e3, help="0: skip the explicit run")
    parser.add_argument("--level", type=int, default=None, help="s2: icosphere(level) instead of adaptive cells")
    parser.add_argument("--rtol", type=float, default=None,
                        help="the implicit and auto runs' rtol (default: the solvers'); named in the run")
    parser.add_argument("--flux", default=None, help="s2: the explicit run's flux (default: the solver's)")
    parser.add_argument("--runs", default="explicit,implicit,auto",
                        help="which runs, comma-separated: explicit (to --explicit-T), implicit, auto (to --T)")
    args = parser.parse_args()
    if args.case == "s2-plateau":
        return s2_plateau()
    if args.case == "table":
        return table()
    kinds = args.runs.split(",")
    settings = s1(args.T, args.explicit_T, kinds, args.rtol) if args.case == "s1" else \
        s2(args.T, args.explicit_T, kinds, args.level, args.rtol, args.flux)
    results = json.loads(RESULTS.read_text())
    results[args.case].update(settings)
    RESULTS.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
