"""Work–precision of the finite-volume fluxes against converged particle references (issue 12).

Error: W2 (geodesic, radians) at the final time T between the grid measure Σ ρ_i |C_i| δ_{c_i} and
a particle reference started from a deterministic discretisation of ρ_0; work: wall-clock seconds
of ``circle.solve`` / ``sphere.solve`` (same process, same thread count, one run each; the
machine is shared, so times are indicative and the ratios between fluxes are what to read).

- S^1: SA β = 4, ρ_0 = ``perturbed_uniform(2)`` (the default of ``meanfield compare``), T = 20,
  cells 256 … 4096, against quantile particles θ_i = F_0^{-1}((i + 1/2)/n) (RK4), refined around
  the watersheds between clusters (``refined_quantiles``: plain quantiles misroute up to one
  particle's mass per watershed, W2 ≈ 0.02 between n = 8192 and 16384).
- S^2: SA β = 3, ρ_0 = ``perturbed_uniform(3, degree=2)`` (harmonics of degree ≤ 2), T = 10,
  icosphere levels 3 … 5, against weighted quasi-uniform particles (Fibonacci points x_i with
  weights ∝ ρ_0(x_i), RK4), W2 by exact EMD.

The reference's own error is estimated by comparing two particle numbers.  Results go to
benchmarks/results/work_precision_{circle,sphere}.json (written after every run, so a long job
can be watched) and the figure benchmarks/results/work_precision.png; the claims of the issue
("Must show") are asserted by ``check``.

    python benchmarks/bench_work_precision.py circle|sphere [--levels 3 4 5] [--fluxes ...]
    python benchmarks/bench_work_precision.py plot|table|check
"""
import argparse
import json
import os
import time

import numpy as np

import meanfield as mf
from meanfield.measures import perturbed_uniform
from meanfield.solvers import circle, particles, sphere
from meanfield.solvers.mesh import fibonacci_points, icosphere

METHOD = {"circle": "circle", "sphere": "emd"}
JUMP = 0.05        # rad: consecutive quantile particles further apart than this at T straddle a watershed
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CASES = {"circle": dict(model=mf.SA(4.0), T=20.0, sizes=(256, 512, 1024, 2048, 4096), refs=(4096, 8192)),
         "sphere": dict(model=mf.SA(3.0), T=10.0, sizes=(3, 4, 5), refs=(4000, 8000))}


def refined_quantiles(model, rho0, T, n, rounds=3, split=64, grid=1 << 18):
    """Quantile particles whose mass intervals are refined around watersheds.

    Particle i carries the mass w_i = q_{i+1} - q_i of the quantile interval [q_i, q_{i+1}] and
    starts at θ_i = F_0^{-1}((q_i + q_{i+1})/2).  Where two consecutive particles end more than
    ``JUMP`` apart at T (a watershed between clusters lies between them: all the interval's mass
    follows one particle, an error ~ π²/n in W2²), both intervals are split into ``split``, and
    the run is repeated, ``rounds`` times: the misrouted mass drops to ~1/(n split^rounds)."""
    edges = np.linspace(0.0, 2 * np.pi, grid + 1)
    mid = 0.5 * (edges[1:] + edges[:-1])
    cdf = np.concatenate([[0.0], np.cumsum(rho0(mf.circle_points(mid)))])
    cdf /= cdf[-1]
    q = np.linspace(0.0, 1.0, n + 1)
    for r in range(rounds + 1):
        w = np.diff(q)
        theta0 = np.interp(0.5 * (q[1:] + q[:-1]), cdf, edges)
        sol = particles.solve(model, mf.circle_points(theta0), [0.0, T], weights=w, energy=False)
        if r == rounds:
            return sol.x[-1], w
        theta = mf.circle_angles(sol.x[-1])
        gap = np.abs(np.angle(np.exp(1j * (np.roll(theta, -1) - theta))))
        cut = np.flatnonzero(gap > JUMP)
        refine = np.unique(np.concatenate([cut, (cut + 1) % w.size]))
        inner = [np.linspace(q[i], q[i + 1], split + 1)[1:-1] for i in refine]
        q = np.sort(np.concatenate([q] + inner))


def reference(geometry, rho0, n):
    """Particle reference at T: (points, weights)."""
    case = CASES[geometry]
    if geometry == "circle":
        return refined_quantiles(case["model"], rho0, case["T"], n)
    x = fibonacci_points(n)
    w = rho0(x)
    w = w / w.sum()
    sol = particles.solve(case["model"], x, [0.0, case["T"]], weights=w, energy=False)
    return sol.x[-1], w


def run(geometry, sizes, fluxes):
    case = CASES[geometry]
    d = 2 if geometry == "circle" else 3
    rho0 = perturbed_uniform(d, degree=3 if d == 2 else 2)
    path = os.path.join(HERE, f"work_precision_{geometry}.json")
    cache = os.path.join(HERE, f"work_precision_{geometry}_reference.npz")
    os.makedirs(HERE, exist_ok=True)
    if os.path.exists(path):           # later runs add to (and replace runs of) an earlier job
        out = _load(geometry)
        with np.load(cache) as data:
            x_ref, w_ref = data["x"], (data["w"] if "w" in data.files else None)
    else:
        out = dict(model=repr(case["model"]), T=case["T"], rho0=rho0.spec, runs=[])
        start = time.perf_counter()
        refs = {n: reference(geometry, rho0, n) for n in case["refs"]}
        (xa, wa), (xb, wb) = refs.values()
        out["reference"] = dict(n=list(case["refs"]), seconds=time.perf_counter() - start,
                                w2_between=mf.wasserstein(xa, wa, xb, wb, p=2, method=METHOD[geometry]))
        x_ref, w_ref = refs[case["refs"][0] if geometry == "sphere" else case["refs"][1]]
        out["reference"]["used"] = len(x_ref)
        np.savez(cache, x=x_ref, **({} if w_ref is None else {"w": w_ref}))
    print(out["reference"], flush=True)
    for size in sizes:
        for flux in fluxes:
            start = time.perf_counter()
            if geometry == "circle":
                sol = circle.solve(case["model"], rho0, [0.0, case["T"]], cells=size, flux=flux)
            else:
                sol = sphere.solve(case["model"], rho0, [0.0, case["T"]], mesh=icosphere(size), flux=flux,
                                   energy=False)
            seconds = time.perf_counter() - start
            points, weights = sol.measure()
            states = os.path.join(HERE, f"work_precision_{geometry}_{flux}_{size}.npy")
            np.save(states, weights)      # the final cell masses, to re-measure against other references
            w2 = mf.wasserstein(points, weights, x_ref, w_ref, p=2, method=METHOD[geometry])
            out["runs"] = [r for r in out["runs"] if (r["flux"], r["size"]) != (flux, size)]
            out["runs"].append(dict(flux=flux, size=size, cells=int(points.shape[0]), seconds=seconds, w2=w2,
                                    min_rho=float(sol.rho.min()), mass_error=float(np.max(np.abs(sol.mass - 1)))))
            print(out["runs"][-1], flush=True)
            with open(path, "w") as fh:
                json.dump(out, fh, indent=1)
    return out


def _load(geometry):
    with open(os.path.join(HERE, f"work_precision_{geometry}.json")) as fh:
        return json.load(fh)


def _series(data, flux):
    runs = sorted((r for r in data["runs"] if r["flux"] == flux), key=lambda r: r["cells"])
    return [r["cells"] for r in runs], [r["seconds"] for r in runs], [r["w2"] for r in runs], [r["size"] for r in runs]


def check():
    """The issue's "Must show" claims, as assertions on the stored numbers."""
    circ = _load("circle")
    at4096 = {r["flux"]: r["w2"] for r in circ["runs"] if r["cells"] == 4096}
    assert at4096["upwind2"] <= 2e-3, at4096
    assert circ["reference"]["w2_between"] < 0.25 * 2e-3      # the reference can certify the target
    sph = _load("sphere")
    cells, _, w2, levels = _series(sph, "upwind2")
    w2 = dict(zip(levels, w2))
    if sph["reference"]["w2_between"] > 0.035 / 4:
        print(f"S^2 not certified: the particle reference's own error ({sph['reference']['w2_between']:.3g}) "
              f"exceeds a quarter of the 0.035 target; upwind2 W2 by level: {w2}")
    else:
        assert w2[4] <= 0.035, w2
        assert np.log2(w2[3] / w2[5]) / 2 >= 1.0, w2
    print("S^1 checks passed:", at4096)


def table():
    """The stored runs as Markdown tables (for docs/finite_volumes.md)."""
    for geometry in ("circle", "sphere"):
        data = _load(geometry)
        ref = data["reference"]
        print(f"{'S^1' if geometry == 'circle' else 'S^2'}, {data['model']}, T = {data['T']:g}; reference "
              f"{ref['used']} particles ({ref['n'][0]} vs {ref['n'][1]} particles: W2 = {ref['w2_between']:.2g})\n")
        sizes = sorted({r["size"] for r in data["runs"]})
        print("| flux | " + " | ".join(f"{'cells' if geometry == 'circle' else 'level'} {n}" for n in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for flux in circle.FLUXES:
            cells = {r["size"]: r for r in data["runs"] if r["flux"] == flux}
            row = [f"{cells[n]['w2']:.2e} ({cells[n]['seconds']:.3g} s)" if n in cells else "—" for n in sizes]
            print(f"| {flux} | " + " | ".join(row) + " |")
        print()


def plot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), dpi=110)
    styles = {"upwind2": ("C3", "o"), "upwind": ("C0", "s"), "muscl": ("C2", "^"), "tpfa": ("C1", "v")}
    for ax, geometry, label in zip(axes, ("circle", "sphere"), ("cells", "level")):
        data = _load(geometry)
        for flux, (colour, marker) in styles.items():
            cells, seconds, w2, sizes = _series(data, flux)
            if not cells:
                continue
            ax.loglog(seconds, w2, marker=marker, color=colour, label=flux, lw=1.6, ms=7)
            for s, e, n in zip(seconds, w2, sizes):
                ax.annotate(str(n), (s, e), textcoords="offset points", xytext=(5, 4), fontsize=8, color=colour)
        ref = data["reference"]
        ax.axhline(ref["w2_between"], color="0.5", ls=":", lw=1.2,
                   label=f"particle reference {ref['n'][0]} vs {ref['n'][1]}")
        geo = "S^1" if geometry == "circle" else "S^2"
        ax.set_title(f"{geo}: {data['model']}, T = {data['T']:g} (labels: {label})")
        ax.set_xlabel("wall time of the solve [s] (shared 2-core machine)")
        ax.set_ylabel("W2(FV, particles) at T [rad]")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "work_precision.png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("circle", "sphere", "plot", "table", "check"))
    parser.add_argument("--sizes", type=int, nargs="+", help="cells (circle) or icosphere levels (sphere)")
    parser.add_argument("--fluxes", nargs="+", default=list(circle.FLUXES), choices=circle.FLUXES)
    args = parser.parse_args()
    if args.what == "plot":
        plot()
    elif args.what == "check":
        check()
    elif args.what == "table":
        table()
    else:
        run(args.what, args.sizes or CASES[args.what]["sizes"], args.fluxes)


if __name__ == "__main__":
    main()
