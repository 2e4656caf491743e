"""Explicit against linearly implicit time stepping through the two-cluster plateau of SA β = 3 on S¹.

From the near-uniform start of ``validation/metastability.py`` (phases of seed 0) on 2048 cells, the
upwind finite-volume system is run

- explicitly: ``circle.solve(..., flux="upwind")`` (SSP-RK3, each step 0.9 of the positivity bound);
- implicitly: ``implicit.integrate_implicit`` with MPRK22 at rtol 1e-3 and 1e-4 (atol 1e-8), and at
  rtol 1e-3 with the explicit solver's step cap (``circle.step_cap``, 0.1) as max_step, the linear part
  -A(ρ)ρ of the same upwind system built from ``circle.velocity`` (the field frozen at ρ).

For each run (in stretches ending on each T, each stretch starting from the last state): CPU seconds
(time.process_time, this process) to T = 1e2 and 1e3 (implicit also to 1e4), steps per unit time in
the fast phase, on the plateau and after the merge, and the merge time: the first output (every 2
time units to 1e3) where the cells with ρ > 2/(2π) form one connected run after two.
Writes benchmarks/results/implicit.json.

    PYTHONPATH=. python benchmarks/bench_implicit.py [--quick]     # --quick: 512 cells
"""
import argparse
import json
import pathlib
import time

import numpy as np

import meanfield as mf
from meanfield.solvers import circle
from meanfield.solvers.implicit import donor_cell_matrix, integrate_implicit
from validation.metastability import near_uniform_density, perturbation_phases

BETA = 3.0
PHASES = 31            # perturbation modes of the validation's near-uniform start (n = 64 tokens)
WINDOWS = ((0, 50), (50, 400), (400, 1000), (1000, 1e4))


class RingUpwind:
    """-A(ρ) ρ of the cell-centred upwind flux on S¹ with the SA field frozen at ρ (until the circle
    Operator provides ``linear_part``)."""

    def __init__(self, model, cells):
        self.model, self.cells = model, cells
        j = np.arange(cells)
        self.donors, self.receivers = np.concatenate([j, j]), np.concatenate([(j + 1) % cells, (j - 1) % cells])

    def linear_part(self, rho):
        u = circle.velocity(self.model, rho)
        return donor_cell_matrix(np.full(self.cells, 2 * np.pi / self.cells), self.donors, self.receivers,
                                 np.concatenate([np.maximum(u, 0), np.maximum(-u, 0)]))


def cluster_runs(rho):
    """Connected runs of cells (cyclically) with ρ > 2/(2π)."""
    dense = rho > 2 / (2 * np.pi)
    if dense.all():
        return 1
    return int(np.sum(dense & ~np.roll(dense, 1)))


def merge_time(t, rhos):
    """The first output time with one cluster after an output with two (NaN if none)."""
    counts = np.array([cluster_runs(r) for r in rhos])
    two = np.flatnonzero(counts == 2)
    if two.size == 0:
        return float("nan")
    one = np.flatnonzero((counts == 1) & (np.arange(counts.size) > two[0]))
    return float(t[one[0]]) if one.size else float("nan")


def steps_per_unit_time(times):
    return {f"{a:g}-{b:g}": float(np.sum((times > a) & (times <= b)) / (b - a)) for a, b in WINDOWS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cells = 512 if args.quick else 2048
    model = mf.SA(BETA)
    rho0 = near_uniform_density(circle.cell_angles(cells), perturbation_phases(PHASES, 0))
    t_eval = np.concatenate([np.arange(0.0, 1000.0, 2.0), np.arange(1000.0, 1e4 + 1, 100.0)])
    results = dict(cells=cells, beta=BETA, runs={})

    def explicit(rho, t):
        sol = circle.solve(model, rho, t, cells=cells, flux="upwind", progress=False)
        return sol.rho, int(sol.info["nsteps"]), None

    def implicit(rtol, max_step=np.inf):
        def run(rho, t):
            sol = integrate_implicit(RingUpwind(model, cells), rho, t, rtol=rtol, atol=1e-8, max_step=max_step)
            return sol.y, sol.nsteps, sol
        return run

    runs = {"explicit (SSP-RK3, positivity steps)": (explicit, (1e2, 1e3))}
    runs |= {f"mprk22 rtol={rtol:g}": (implicit(rtol), (1e2, 1e3, 1e4)) for rtol in (1e-3, 1e-4)}
    cap = circle.step_cap(model, cells, "upwind")     # 0.1 for SA: resolves the linear growth from uniform
    runs[f"mprk22 rtol=0.001 max_step={cap:g}"] = (implicit(1e-3, cap), (1e2, 1e3, 1e4))
    for name, (solver, ends) in runs.items():
        rho, states, seconds, nsteps, record = rho0, [rho0[None]], 0.0, 0, {}
        step_times, step_sizes = [], []
        for a, b in zip((0.0,) + ends[:-1], ends):      # one run in stretches ending on each T
            start = time.process_time()
            y, count, sol = solver(rho, t_eval[(t_eval >= a) & (t_eval <= b)])
            seconds += time.process_time() - start
            nsteps += count
            states.append(y[1:])
            rho = y[-1]
            if sol is not None:
                step_times.append(sol.step_times)
                step_sizes.append(sol.step_sizes)
            record[f"T={b:g}"] = dict(cpu_s=round(seconds, 2), nsteps=nsteps)
        rhos = np.concatenate(states)
        mass = rhos.sum(axis=1) * 2 * np.pi / cells
        record |= dict(merge=merge_time(t_eval[:rhos.shape[0]], rhos), min=float(rhos.min()),
                       mass_error=float(np.abs(mass - mass[0]).max()))
        if step_times:
            times, sizes = np.concatenate(step_times), np.concatenate(step_sizes)
            record["steps_per_unit_time"] = steps_per_unit_time(times)
            record["median_step"] = {f"{a:g}-{b:g}": float(np.median(sizes[(times > a) & (times <= b)]))
                                     for a, b in WINDOWS if np.any((times > a) & (times <= b))}
        results["runs"][name] = record
        print(name, record, flush=True)
    out = pathlib.Path(__file__).parent / "results" / ("implicit_quick.json" if args.quick else "implicit.json")
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
