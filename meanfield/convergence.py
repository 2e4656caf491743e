"""Particles and densities converging to each other: ``meanfield convergence``.

For one model and initial density ρ_0, solve the particle system for several token counts n
(tokens from ``meanfield.sampling.discretise``, "stratified" by default) and the finite-volume
PDE on several grids (cells on S^1, icosphere levels on S^2), and tabulate

    W_p(μ^n_t, ρ^h_t)     for every n, every grid h and every output time t   (p = 1, 2),

with the observed orders: in h, the least-squares slope of log W_p(μ^{n_max}_t, ρ^h_t) against
log h (h the mean cell width, (|S^{d-1}|/N)^{1/(d-1)}), and in n, minus the slope of
log W_p(μ^n_t, ρ^{h_min}_t) against log n. A slope only measures the varied discretisation
while the other one's error is smaller, so the local orders between neighbours are reported
too, and the self-convergence of each discretisation alone: W_p(ρ^h_t, ρ^{h/2}_t) for the grids
and W_p(μ^n_t, μ^{n'}_t) between consecutive token counts.

Once clusters have formed, a cluster-mass error δm moves mass δm across a distance D between
clusters: W_1 ≈ D δm but W_2 ≈ D sqrt(δm), so W_2 converges at half the order of W_1 (and
n equal-mass tokens cannot represent a cluster mass better than 1/(2n)): W_1 is the metric to
read orders from, W_2 the one to compare with the reports.
"""
import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import atomic
from .checks import as_choice, as_count, as_time_grid
from .compare import GEOMETRIES, MERGE_TOL, density_solver, initial_tokens
from .measures import merge_atoms, perturbed_uniform, sphere_area
from .models import SA, USA, as_model
from .sampling import METHODS
from .transport import wasserstein

__all__ = ["ConvergenceStudy", "study", "observed_order", "main"]


@dataclass(eq=False)
class ConvergenceStudy:
    """W_p between particles and densities over a grid of resolutions.

    Fields: t (m,) output times; n (a,) token counts; cells (b,) grid sizes; h (b,) mean cell
    widths; w1, w2 (m, a, b) W_p(μ^{n_i}_t, ρ^{h_j}_t) in radians; grid_w1, grid_w2 (m, b-1)
    W_p(ρ^{h_j}_t, ρ^{h_{j+1}}_t); particle_w1, particle_w2 (m, a-1) W_p(μ^{n_i}_t, μ^{n_{i+1}}_t);
    info (settings, methods, timings).
    """
    t: np.ndarray
    n: np.ndarray
    cells: np.ndarray
    h: np.ndarray
    w1: np.ndarray
    w2: np.ndarray
    grid_w1: np.ndarray
    grid_w2: np.ndarray
    particle_w1: np.ndarray
    particle_w2: np.ndarray
    info: dict = field(default_factory=dict)

    def orders(self, p=1):
        """Least-squares orders at each output time (m,) (NaN where undefined): "h" and "n" of
        W_p(particles, density) on the most tokens / the finest grid, "grid" of W_p(ρ_h, ρ_{h/2})
        against h and "particles" of W_p(μ^n, μ^{n'}) (next n' > n) against n."""
        w, g, q = (self.w1, self.grid_w1, self.particle_w1) if p == 1 else (self.w2, self.grid_w2, self.particle_w2)
        steps = range(self.t.size)
        return dict(h=np.array([observed_order(self.h, w[k, -1, :]) for k in steps]),
                    n=np.array([-observed_order(self.n, w[k, :, -1]) for k in steps]),
                    grid=np.array([observed_order(self.h[:-1], g[k]) for k in steps]),
                    particles=np.array([-observed_order(self.n[:-1], q[k]) for k in steps]))

    def table(self):
        """Plain-text tables of W_1 and W_2 at every output time, with the observed orders."""
        lines = []
        for p, w in ((1, self.w1), (2, self.w2)):
            orders = self.orders(p)
            for k, t in enumerate(self.t):
                lines.append(f"W{p} at t = {t:g}   (rows: n tokens, columns: cells)")
                lines.append(f"{'n':>7} " + " ".join(f"{c:>10d}" for c in self.cells) + f" {'order h':>8}")
                for i, n in enumerate(self.n):
                    lines.append(f"{n:>7d} " + " ".join(f"{v:10.3e}" for v in w[k, i])
                                 + f" {observed_order(self.h, w[k, i]):8.2f}")
                local = [-observed_order(self.n[i:i + 2], w[k, i:i + 2, -1]) for i in range(self.n.size - 1)]
                lines.append(f"{'order n':>7} (finest grid) {orders['n'][k]:.2f}, local "
                             + ", ".join(f"{o:.2f}" for o in local))
                grid = self.grid_w1 if p == 1 else self.grid_w2
                lines.append(f"{'grid':>7} W{p}(rho_h, rho_h/2) " + " ".join(f"{v:.2e}" for v in grid[k])
                             + f", order {orders['grid'][k]:.2f}")
                own = self.particle_w1 if p == 1 else self.particle_w2
                lines.append(f"{'tokens':>7} W{p}(mu_n, mu_2n) " + " ".join(f"{v:.2e}" for v in own[k])
                             + f", order {orders['particles'][k]:.2f}")
                lines.append("")
        return "\n".join(lines)

    def to_dict(self):
        """JSON-ready numbers."""
        return dict(info=self.info, t=self.t.tolist(), n=self.n.tolist(), cells=self.cells.tolist(),
                    h=self.h.tolist(), w1=self.w1.tolist(), w2=self.w2.tolist(), grid_w1=self.grid_w1.tolist(),
                    grid_w2=self.grid_w2.tolist(), particle_w1=self.particle_w1.tolist(),
                    particle_w2=self.particle_w2.tolist(),
                    orders={f"w{p}": {k: v.tolist() for k, v in self.orders(p).items()} for p in (1, 2)})


def observed_order(h, err):
    """Least-squares slope of log err against log h (NaN with fewer than two positive errors)."""
    h, err = np.asarray(h, dtype=float), np.asarray(err, dtype=float)
    ok = err > 0
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(h[ok]), np.log(err[ok]), 1)[0])


def study(model, rho0, t_eval, ns, grids, *, geometry="circle", sampling="stratified", seed=0, flux="upwind",
          transport="auto", progress=False):
    """W_p(particles_n, density_h) for every n in ``ns`` and every grid in ``grids`` (cells on
    the circle, icosphere levels on the sphere), at the times t_eval. One draw of tokens per n
    (``compare.initial_tokens`` with ``sampling`` and ``seed``). Returns a ``ConvergenceStudy``."""
    model = as_model(model)
    as_choice(geometry, "geometry", tuple(GEOMETRIES))
    as_choice(sampling, "sampling", METHODS)
    d = GEOMETRIES[geometry]
    t_eval = as_time_grid(t_eval)
    ns = sorted(as_count(n, "n") for n in ns)
    grids = sorted(as_count(g, "grid", minimum=0) for g in grids)
    if len(ns) < 2 or len(grids) < 2:
        raise ValueError("a convergence study needs at least two token counts and two grids")
    from meanfield.solvers import particles
    clock, timings = time.perf_counter(), {}
    tokens = []
    for n in ns:
        x0, w = initial_tokens(rho0, n, d, sampling, seed, 1)
        sol = particles.solve(model, x0[0], t_eval, energy=False, weights=None if w is None else w[0],
                              progress=progress)
        tokens.append([merge_atoms(xk, None if w is None else w[0], tol=MERGE_TOL) for xk in sol.x])
    timings["particles"] = time.perf_counter() - clock
    clock = time.perf_counter()
    densities = [density_solver(geometry, model, rho0, t_eval, cells=g, level=g, flux=flux, progress=progress)
                 for g in grids]
    timings["density"] = time.perf_counter() - clock
    clock = time.perf_counter()
    m, a, b = t_eval.size, len(ns), len(grids)
    w1, w2 = np.empty((m, a, b)), np.empty((m, a, b))
    g1, g2 = np.empty((m, b - 1)), np.empty((m, b - 1))
    q1, q2 = np.empty((m, a - 1)), np.empty((m, a - 1))
    methods = set()
    for k in range(m):
        for i in range(a - 1):
            q1[k, i] = wasserstein(*tokens[i][k], *tokens[i + 1][k], p=1, method=transport)
            q2[k, i] = wasserstein(*tokens[i][k], *tokens[i + 1][k], p=2, method=transport)
        for j, dens in enumerate(densities):
            y, yw = dens.measure(k)
            for i, atoms in enumerate(tokens):
                w1[k, i, j], info = wasserstein(*atoms[k], y, yw, p=1, method=transport, return_info=True)
                w2[k, i, j] = wasserstein(*atoms[k], y, yw, p=2, method=transport)
                methods.add(info["method"])
            if j + 1 < b:
                finer = densities[j + 1].measure(k)
                g1[k, j] = wasserstein(y, yw, *finer, p=1, method=transport)
                g2[k, j] = wasserstein(y, yw, *finer, p=2, method=transport)
    timings["transport"] = time.perf_counter() - clock
    cells = np.array([dens.points.shape[0] for dens in densities])
    h = (sphere_area(d) / cells) ** (1.0 / (d - 1))
    info = dict(geometry=geometry, model=model.to_dict(), model_name=repr(model), sampling=sampling, seed=seed,
                flux=flux, grids=grids, transport_methods=sorted(methods), rho0=getattr(rho0, "spec", None),
                timings={k: round(v, 2) for k, v in timings.items()})
    return ConvergenceStudy(t=t_eval, n=np.array(ns), cells=cells, h=h, w1=w1, w2=w2, grid_w1=g1, grid_w2=g2,
                            particle_w1=q1, particle_w2=q2, info=info)


def figure(result):
    """W_1 against the cell width h (one line per n) and against n (one line per grid) at the
    last output time, log-log, with reference slopes."""
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    k = -1
    for i, n in enumerate(result.n):
        left.loglog(result.h, result.w1[k, i], "o-", label=f"n = {n}")
    left.loglog(result.h[:-1], result.grid_w1[k], "k--", label=r"$W_1(\rho_h, \rho_{h/2})$")
    ref = result.w1[k, -1, -1] * (result.h / result.h[-1])
    left.loglog(result.h, ref, ":", color="grey", label="slope 1")
    left.set_xlabel("mean cell width h (radians)")
    left.set_ylabel(r"$W_1$(particles, density) (radians)")
    left.set_title(f"t = {result.t[k]:g}: against the grid")
    left.legend(fontsize=8)
    for j, c in enumerate(result.cells):
        right.loglog(result.n, result.w1[k, :, j], "s-", label=f"{c} cells")
    right.loglog(result.n[:-1], result.particle_w1[k], "k--", label=r"$W_1(\mu^n, \mu^{n'})$, next $n'$")
    right.loglog(result.n, result.w1[k, 0, -1] * result.n[0] / result.n, ":", color="grey", label="slope -1")
    right.set_xlabel("tokens n")
    right.set_ylabel(r"$W_1$ (radians)")
    right.set_title(f"t = {result.t[k]:g}: against the tokens ({result.info['sampling']})")
    right.legend(fontsize=8)
    fig.suptitle(f"{result.info['model_name']} on {result.info['geometry']}: particles vs density")
    return fig


# --- command line -------------------------------------------------------------------------------

DEFAULTS = {"circle": dict(beta=4.0, T=20.0, n=[500, 1000, 2000, 4000], grids=[256, 512, 1024, 2048], degree=3),
            "sphere": dict(beta=3.0, T=10.0, n=[250, 500, 1000], grids=[2, 3, 4], degree=2)}


def _parser():
    p = argparse.ArgumentParser(
        prog="meanfield convergence",
        description="W_1 and W_2 between particles (n tokens) and the density PDE (grid h) at several times, "
                    "over a grid of n and cells (circle) or icosphere levels (sphere), with the observed orders "
                    "in n and in h: a table, convergence.json and convergence.png.")
    add = p.add_argument
    add("--geometry", choices=tuple(GEOMETRIES), default="circle")
    add("--model", choices=("SA", "USA"), default="SA")
    add("--beta", type=float, help="inverse temperature (default 4 on the circle, 3 on the sphere)")
    add("--T", type=float, help="final time (default 20 on the circle, 10 on the sphere)")
    add("--times", type=int, default=3, help="output times 0 and T/2^(times-1), ..., T/2, T (default 3)")
    add("--n", type=int, nargs="+", help="token counts (default 500 1000 2000 4000; sphere 250 500 1000)")
    add("--grids", type=int, nargs="+", help="cells (circle; default 256 ... 2048) or icosphere levels "
                                            "(sphere; default 2 3 4)")
    add("--sampling", choices=METHODS, default="stratified")
    add("--amplitude", type=float, default=0.6)
    add("--degree", type=int, help="perturbation modes l = 1..degree (default 3 circle, 2 sphere)")
    add("--seed", type=int, default=0)
    add("--out", metavar="DIR", default="meanfield-convergence")
    add("--quiet", action="store_true")
    return p


def main(argv=None):
    """``meanfield convergence [options]``: run the study, print the tables, write the JSON and plot."""
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        out = atomic.check_folder(args.out, "out")        # before the study, not after it
    except ValueError as exc:
        parser.error(str(exc))
    base = DEFAULTS[args.geometry]
    beta = base["beta"] if args.beta is None else args.beta
    T = base["T"] if args.T is None else args.T
    d = GEOMETRIES[args.geometry]
    if T <= 0 or args.times < 1:
        parser.error("T must be > 0 and times >= 1")
    model = (SA if args.model == "SA" else USA)(beta=beta)
    rho0 = perturbed_uniform(d, amplitude=args.amplitude, degree=args.degree or base["degree"], seed=args.seed)
    t_eval = np.concatenate([[0.0], T / 2.0 ** np.arange(args.times - 1, -1, -1)])
    clock = time.perf_counter()
    result = study(model, rho0, t_eval, args.n or base["n"], args.grids or base["grids"], geometry=args.geometry,
                   sampling=args.sampling, seed=args.seed, progress=not args.quiet)
    import matplotlib.pyplot as plt
    fig = figure(result)

    def write(folder):
        with open(os.path.join(folder, "convergence.json"), "w") as fh:
            json.dump(result.to_dict(), fh, indent=1)
        fig.savefig(os.path.join(folder, "convergence.png"), dpi=130)

    try:        # all at once: a kill leaves the previous results whole (meanfield.atomic.replace_folder)
        atomic.replace_folder(out, write, "out")
    except OSError as exc:
        print(f"meanfield convergence: {exc}", file=sys.stderr)
        return 1
    finally:
        plt.close(fig)
    if not args.quiet:
        methods = "/".join(result.info["transport_methods"])
        print(f"{args.geometry}, {model!r}, {args.sampling} tokens, W_p by {methods}")
        print(result.table())
        print(f"wrote convergence.json and convergence.png to {args.out}/ in {time.perf_counter() - clock:.1f} s")
    return 0
