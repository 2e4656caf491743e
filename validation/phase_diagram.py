"""Phase diagrams in the (t, β) plane: the fraction of token pairs merged, per dimension d.

The paper's experiment (paper.md §4, Fig. C; its code ``phase-diagrams.py``): for each d and each
β of linspace(0.1, 9, 90), 2048 independent systems of n = 32 tokens i.i.d. uniform on S^{d-1}
evolve under SA to T = 30 (explicit Euler, step 0.1, renormalisation after each step) or USA to
T = 1 (step 0.1 / max(√β e^{β-1/2}, 1)); at 200 output times the statistic is the fraction, over
all systems and ordered pairs i != j, of <x_i, x_j> > 0.999 (``meanfield.clusters.pair_fraction``),
and the median over the systems of the rank of 1{<x_i, x_j> > 0.9999} (``gram_rank``, the
cluster count).  Each (model, d, β) is one task of the resumable sweep engine
(``meanfield.sweep.run``; ``--store DIR`` keeps the tasks, ``--client local`` runs them on Dask);
a task streams the statistics from the run (``particles.solve(..., observe=...)``) and never
keeps the 200 snapshots of positions.  ``--backend torch [--device cuda]`` runs the particles with
PyTorch (on a GPU where there is one; equal to the Numba engine to round-off).

Drawn as the paper draws it: pcolormesh on the true (t, β) grid, linear and log colour scales,
with the d -> ∞ curve Γ_{∞,δ} = {(t, β): γ_β(t) = 1 - δ}, δ = 1e-3 (``theory.clustering_time``),
for n = 32 and n = 128.  The second figure measures the distance of the empirical 50 % boundary
Γ_d (the time at which half the pairs have merged) from Γ_∞ as d grows (open problem 4).

Output times are the step times nearest linspace(0, T, 200), so every step is exactly the
paper's step.  The integrator differs from the authors' in one respect: their Euler step moves
along the unprojected drift Σ_j A_ij x_j, ours along its tangential part P_{x_i} Σ_j A_ij x_j
(both followed by x <- x/|x|, both first order for the same ODE; the effective step differs by a
factor 1/(1 + dt <x_i, Σ_j A_ij x_j>) >= 1/1.1 for SA).

Checks: at t = 0 the fraction equals the exact P(<x, y> > 0.999) for independent uniform points
(the unordered pairs of one draw are pairwise independent, so the binomial standard error is
exact); every pair has merged by T at the smallest β for every d (SA); at d = 128 the 50 % boundary is within 10 %
of Γ_{∞,1e-3} in
t for β ∈ [4, 5.5], lies at or before it (to 3 %) for β ∈ [4, 6.5], and its time grows with β.
Finite d merges earlier than d = ∞: random inner products spread by ~1/√d, and the pairs that
start closer escape γ ≈ 0 at rate ∝ e^{β<x_i,x_j>}, so the gap widens with β.  (The authors'
unprojected Euler step runs ~9 % slower than the ODE at β = 6, which hides part of that gap in
their figure; ours follows the ODE to 0.6 %: orthonormal start, n = 32, β = 6, γ = 0.999 at
t = 16.1 against 16.0.)
"""
import os
import sys
import tempfile

import numpy as np
from scipy.special import betainc

import meanfield as mf
from meanfield import sweep
from meanfield.clusters import merge_statistics
from meanfield.cli.figures import Experiment, validation_dir
from meanfield.solvers import particles
from meanfield.theory import clustering_time

THRESHOLD = 0.999          # the paper's merge threshold for a pair
RANK_THRESHOLD = 0.9999    # the paper's threshold for the cluster count (rank)
DELTA = 1e-3
MODELS = {"SA": mf.SA, "USA": mf.USA}
ENGINE_OPTIONS = True      # ``meanfield figures phase_diagram --backend torch --device cuda`` forwards them here


def paper_step(name, beta):
    """The authors' Euler step: 0.1 for SA, 0.1 / max(√β e^{β-1/2}, 1) for USA."""
    if name == "SA":
        return 0.1
    return 0.1 / max(np.sqrt(beta) * np.exp(beta - 0.5), 1.0)


def output_times(T, m, dt):
    """The step times k dt nearest linspace(0, T, m) when T / (m - 1) > dt; else linspace(0, T, m)
    itself (the solver then shortens the step to T / (m - 1): USA at small beta)."""
    t = np.linspace(0.0, T, m)
    return dt * np.round(t / dt) if T / (m - 1) > dt else t


def pair_statistics(params, seed):
    """Sweep task: ``batch`` systems of n i.i.d. uniform tokens on S^{d-1} (random stream (seed, d))
    under ``model``(β) with the paper's Euler step; at ``times`` output times the fraction of
    merged pairs and the median cluster count (rank), streamed from the run (``observe``: no
    snapshot of the positions is kept)."""
    name, n, d, batch, beta = params["model"], params["n"], params["d"], params["batch"], params["beta"]
    dt = paper_step(name, beta)
    t = output_times(params["T"], params["times"], dt)
    x = mf.uniform_sphere(n, d, seed=np.random.default_rng([seed, d]), batch=batch)

    def statistics(y):
        fraction, ranks = merge_statistics(y, THRESHOLD, RANK_THRESHOLD)
        return np.array([fraction, np.median(ranks)])

    sol = particles.solve(MODELS[name](beta), x, t, method="euler", dt=dt, energy=False, observe=statistics,
                          backend=params.get("backend", "numba"), device=params.get("device"))
    return dict(t=t, pair_fraction=sol.observed[:, 0], median_clusters=sol.observed[:, 1], dt=dt)


def uniform_pair_probability(d, s=THRESHOLD):
    """P(<x, y> > s) for independent uniform x, y on S^{d-1}: (1/2) I_{1-s²}((d-1)/2, 1/2) (s >= 0)."""
    return 0.5 * betainc((d - 1) / 2.0, 0.5, 1.0 - s * s)


def boundary(t, fraction, level=0.5):
    """First time at which ``fraction`` reaches ``level`` (linear interpolation); NaN if never."""
    above = np.nonzero(fraction >= level)[0]
    if above.size == 0:
        return float("nan")
    k = above[0]
    if k == 0:
        return float(t[0])
    return float(t[k - 1] + (level - fraction[k - 1]) / (fraction[k] - fraction[k - 1]) * (t[k] - t[k - 1]))


def gamma_infinity(name, n, betas):
    """t*(β) on Γ_{∞,δ} for each β."""
    return np.array([clustering_time(MODELS[name](b), n, DELTA) for b in betas])


def _options(parser):
    parser.add_argument("--store", default=None, help="sweep store folder to keep and resume (default: temporary)")
    parser.add_argument("--client", default=None, help="Dask: 'local' or a scheduler address (default: in-process)")
    parser.add_argument("--dims", type=int, nargs="+", default=None,
                        help="dimensions d (default: the paper's 2 4 8 16 32 64 128; --quick: 2 128)")
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=None,
                        help="models (default: SA and USA)")
    parser.add_argument("--usa-dims", type=int, nargs="*", default=None,
                        help="dimensions for USA (default: those of --dims; --quick 2)")
    parser.add_argument("--usa-beta-max", type=float, default=None,
                        help="largest beta for USA (default 9, --quick 3: its step shrinks like e^-beta)")
    parser.add_argument("--systems", type=int, default=None,
                        help="systems per (d, beta) (default: the paper's 2048; --quick 16)")
    parser.add_argument("--systems-for", nargs="*", default=[], metavar="D:SYSTEMS",
                        help="per-dimension overrides of --systems, e.g. 64:32 128:32")
    parser.add_argument("--backend", choices=particles.BACKENDS, default="numba",
                        help="particle engine: numba (default, CPU) or torch (PyTorch: CUDA when available)")
    parser.add_argument("--device", default=None,
                        help="torch device ('cpu', 'cuda', 'cuda:1'; default: CUDA when available); with a "
                             "scheduler address, --device cuda runs the tasks on workers offering the resource GPU")


def _cell_edges(values):
    """Cell edges around the points ``values`` (midpoints; half cells at the ends) for pcolormesh."""
    v = np.asarray(values, dtype=float)
    mid = 0.5 * (v[1:] + v[:-1])
    return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])


def _draw(name, dims, betas, t, frac, overlays, log, n, systems):
    """One panel per d: pcolormesh of the fraction on the true (t, β) grid with the Γ_∞ curves; the
    colour bar in the first empty slot of the grid (else beside the panels)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm, Normalize
    cols = min(4, len(dims))
    rows = -(-len(dims) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(4.6 * cols, 9.0), 4.0 * rows), squeeze=False, sharey=True,
                             constrained_layout=True)
    floor = 1e-4
    norm = LogNorm(floor, 1.0) if log else Normalize(0.0, 1.0)
    for ax, d in zip(axes.flat, dims):
        z = frac[d].T                                   # (β, t)
        mesh = ax.pcolormesh(_cell_edges(t[d]), _cell_edges(betas), np.maximum(z, floor) if log else z,
                             cmap="RdBu_r", norm=norm, shading="flat", rasterized=True)
        for (m, (fine, curve)), style in zip(overlays.items(), ["k-", "k--"]):
            ax.plot(curve, fine, style, lw=1.8, label=rf"$\Gamma_\infty$, $n = {m}$")
        ax.set_xlim(0, t[d][-1])
        ax.set_ylim(betas[0], betas[-1])
        ax.set_title(f"$d = {d}$", fontsize=13)
        ax.set_xlabel("$t$", fontsize=12)
    for ax in axes[:, 0]:
        ax.set_ylabel(r"$\beta$", fontsize=12)
    for ax in axes.flat[len(dims):]:
        ax.axis("off")
    axes.flat[0].legend(loc="upper left", fontsize=10, framealpha=0.8)
    scale = "log" if log else "linear"
    if len(dims) < axes.size:       # an empty slot: the colour bar goes there, next to the panels
        cb = fig.colorbar(mesh, cax=axes.flat[len(dims)].inset_axes([0.05, 0.0, 0.07, 1.0]))
    else:
        cb = fig.colorbar(mesh, ax=axes, shrink=0.95 if rows > 1 else 1.0, aspect=30 if rows > 1 else 15, pad=0.01)
    cb.set_label(rf"fraction of pairs with $\langle x_i, x_j\rangle > {THRESHOLD}$ ({scale} scale)", fontsize=11)
    sizes = sorted({systems[d] for d in dims})
    fig.suptitle(rf"{name}: fraction of pairs merged, $n = {n}$, {' or '.join(map(str, sizes))} systems per $\beta$ "
                 f"(paper: 2048)", fontsize=14)
    return fig


def figure(results):
    """The main figure (SA, linear scale; USA alone if SA was not run) from the stored results
    (``meanfield figures phase_diagram --replot``)."""
    name = "SA" if "SA" in results else "USA"
    r = results[name]
    dims = [int(d) for d in r["dims"]]
    t = {d: np.asarray(r[f"d={d}"]["t"]) for d in dims}
    frac = {d: np.asarray(r[f"d={d}"]["pair_fraction"]) for d in dims}
    overlays = {int(key.split("=")[1]): (np.asarray(c["beta"]), np.asarray(c["t"]))
                for key, c in r["gamma_infinity_curves"].items()}
    systems = {int(key.split("=")[1]): int(v) for key, v in results["systems"].items()}
    return _draw(name, dims, np.asarray(r["beta"]), t, frac, overlays, False, int(results["n"]), systems)


def main(argv=None):
    exp = Experiment("phase_diagram", __doc__.splitlines()[0], argv, options=_options)
    exp.n = 32
    exp.batch = exp.args.systems or exp.size(16, 2048)
    m = exp.size(60, 200)
    betas = np.round(np.linspace(0.1, 9.0, 90), 10)          # the paper's grid (steps of 0.1)
    if exp.quick:
        betas = betas[np.isin(np.round(betas, 6), [0.1, 2.0, 4.0, 5.0, 6.0, 9.0])]
    dims = exp.args.dims or exp.size([2, 128], [2, 4, 8, 16, 32, 64, 128])
    names = exp.args.models or ["SA", "USA"]
    usa_dims = exp.args.usa_dims if exp.args.usa_dims is not None else exp.size([2], dims)
    T = {"SA": 30.0, "USA": 1.0}
    runs = {name: (dims if name == "SA" else usa_dims) for name in names}
    beta_max = exp.args.usa_beta_max or exp.size(3.0, 9.0)
    grids = {"SA": betas, "USA": betas[betas <= beta_max + 1e-9]}
    exp.systems = systems = {d: exp.batch for name in names for d in runs[name]}
    systems.update({int(k): int(v) for k, v in (item.split(":") for item in exp.args.systems_for)})
    engine = {} if exp.args.backend == "numba" else dict(backend="torch", **(
        {} if exp.args.device is None else dict(device=exp.args.device)))   # numba tasks keep their store keys
    if exp.args.device is not None and exp.args.backend != "torch":
        raise ValueError("phase_diagram: --device places the torch backend; add --backend torch")
    grid = [dict(model=name, d=d, beta=float(b), n=exp.n, batch=systems[d], T=T[name], times=m, **engine)
            for name in names for d in runs[name] for b in grids[name]]
    if exp.args.client is not None:   # Dask workers import this script as the module 'phase_diagram'
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(validation_dir()),
                                                                  os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as scratch:
        res = sweep.run(pair_statistics, grid, seeds=[0], store=exp.args.store or scratch, client=exp.args.client,
                        resources=None if exp.args.client in (None, "local") else sweep.gpu_resources)

    import matplotlib.pyplot as plt
    results = dict(n=exp.n, systems={f"d={d}": b for d, b in systems.items()}, output_times=m, threshold=THRESHOLD,
                   rank_threshold=RANK_THRESHOLD,
                   delta=DELTA, beta=betas, paper_size={f"d={d}": b == 2048 and m == 200 for d, b in systems.items()},
                   integrator="Euler with renormalisation (projected drift), SA dt = 0.1, "
                              "USA dt = 0.1 / max(sqrt(beta) e^(beta - 1/2), 1)",
                   sweep=dict(tasks=len(res), seconds=float(res.seconds.sum()), client=res.info.get("client"),
                              backend=exp.args.backend, device=exp.args.device))
    extra = {}
    for name in names:
        betas = grids[name]
        t, frac, clusters, bnd, dist = {}, {}, {}, {}, {}
        fine = np.linspace(betas[0], betas[-1], 200)
        overlays = {n: (fine, gamma_infinity(name, n, fine)) for n in (32, 128)}
        t_inf = gamma_infinity(name, exp.n, betas)
        for d in runs[name]:
            rows = [res.select(model=name, d=d, beta=float(b), batch=systems[d]) for b in betas]
            t[d] = rows[0].get("t")[0]
            frac[d] = np.stack([r.get("pair_fraction")[0] for r in rows], axis=1)          # (m, β)
            clusters[d] = np.stack([r.get("median_clusters")[0] for r in rows], axis=1)
            bnd[d] = np.array([boundary(t[d], frac[d][:, j]) for j in range(betas.size)])
            p0 = uniform_pair_probability(d)
            # every beta starts from the same draw; its n(n-1)/2 unordered pairs are pairwise independent
            se = np.sqrt(p0 * (1 - p0) / (systems[d] * exp.n * (exp.n - 1) / 2))
            exp.check(f"{name} d = {d}: fraction at t = 0 is the exact P(<x,y> > {THRESHOLD}) of uniform pairs",
                      abs(frac[d][0].mean() - p0) <= 4 * se + 1e-12, measured=float(frac[d][0].mean()), exact=p0,
                      four_standard_errors=4 * se)
            if name == "SA":
                exp.check(f"SA d = {d}: every pair merged by T at the smallest beta",
                          frac[d][-1, 0] >= 0.99, fraction=float(frac[d][-1, 0]))
            else:   # USA speeds up with beta: t*(beta) on Γ∞ falls from 4.9 (beta = 0.1) to 0.69 (beta = 9)
                exp.check(f"USA d = {d}: more pairs merged by T at the largest beta than at the smallest",
                          frac[d][-1, -1] > frac[d][-1, 0], largest=float(frac[d][-1, -1]),
                          smallest=float(frac[d][-1, 0]))
            # Γ_d against Γ_∞ (n = 32): relative distance in t where both lie inside the window
            both = np.isfinite(bnd[d]) & (t_inf <= t[d][-1])
            rel = np.abs(bnd[d] - t_inf) / t_inf
            dist[d] = dict(max_relative=float(np.max(rel[both])) if both.any() else float("nan"),
                           median_relative=float(np.median(rel[both])) if both.any() else float("nan"),
                           betas_compared=int(both.sum()))
        if max(runs[name]) >= 64 and name == "SA":
            d = max(runs[name])
            near = (betas >= 4.0) & (betas <= 5.5 + 1e-9)
            wide = (betas >= 4.0) & (betas <= 6.5 + 1e-9)
            rel = (bnd[d] - t_inf) / t_inf
            exp.check(f"SA d = {d}: the 50 % boundary is within 10 % of Γ∞ (n = {exp.n}) in t for beta in [4, 5.5]",
                      np.all(np.abs(rel[near]) <= 0.10), relative_distance=rel[near], beta=betas[near])
            exp.check(f"SA d = {d}: for beta in [4, 6.5] the boundary lies at or before Γ∞ (to 3 %): finite d "
                      f"merges earlier", np.all(rel[wide] <= 0.03), relative_distance=rel[wide], beta=betas[wide])
            grows = np.diff(bnd[d][wide])
            exp.check(f"SA d = {d}: the boundary time grows with beta on [4, 6.5]", np.all(grows > 0),
                      increments=grows)
        results[name] = dict(
            {f"d={d}": dict(t=t[d], pair_fraction=frac[d], median_clusters=clusters[d], boundary_t=bnd[d],
                            distance_to_gamma_infinity=dist[d]) for d in runs[name]},
            T=T[name], dims=runs[name], beta=betas, gamma_infinity_n32=t_inf,
            gamma_infinity_curves={f"n={n}": dict(beta=b, t=c) for n, (b, c) in overlays.items()})
        extra[name] = (betas, t, frac, clusters, bnd, dist, overlays)

    main_name = "SA" if "SA" in names else names[0]
    betas, t, frac, clusters, bnd, dist, overlays = extra[main_name]
    fig = _draw(main_name, runs[main_name], betas, t, frac, overlays, False, exp.n, exp.systems)
    for name in names:
        betas, t, frac, clusters, bnd, dist, overlays = extra[name]
        for log in (False, True):
            if name == main_name and not log:
                continue
            f = _draw(name, runs[name], betas, t, frac, overlays, log, exp.n, exp.systems)
            f.savefig(exp.path(f"_{name.lower()}{'_log' if log else ''}.png"), dpi=110 if exp.quick else 130)
            plt.close(f)
    _boundary_figure(exp, extra).savefig(exp.path("_boundary.png"), dpi=110 if exp.quick else 130)
    plt.close("all")
    exp.finish(fig, results)


def _boundary_figure(exp, extra):
    """Γ_d (empirical 50 % boundaries) against Γ_∞, and their distance as d grows; median cluster counts at T."""
    import matplotlib.pyplot as plt
    names = list(extra)
    fig, axes = plt.subplots(len(names), 3, figsize=(17, 4.8 * len(names)), squeeze=False, constrained_layout=True)
    for row, name in zip(axes, names):
        betas, t, frac, clusters, bnd, dist, overlays = extra[name]
        dims = list(t)
        colours = plt.cm.viridis(np.linspace(0, 0.9, len(dims)))
        for d, c in zip(dims, colours):
            row[0].plot(bnd[d], betas, "-", color=c, lw=1.6, label=f"Γ_d, d = {d}")
            row[2].plot(betas, clusters[d][-1], "o-", ms=3, color=c, label=f"d = {d}")
        row[0].plot(overlays[32][1], overlays[32][0], "k-", lw=2.4, label="Γ∞, n = 32")
        row[0].plot(overlays[128][1], overlays[128][0], "k--", lw=1.6, label="Γ∞, n = 128")
        row[0].set(xlim=(0, t[dims[0]][-1]), ylim=(betas[0], betas[-1]), xlabel="t (half of the pairs merged)",
                   ylabel="β", title=f"{name}: empirical boundaries Γ_d and Γ∞ (δ = {DELTA:g})")
        row[0].legend(fontsize=9, loc="upper left")
        rel = [dist[d]["median_relative"] for d in dims]
        worst = [dist[d]["max_relative"] for d in dims]
        row[1].loglog(dims, rel, "o-", lw=2, label="median over β")
        row[1].loglog(dims, worst, "s--", lw=1.5, label="max over β")
        row[1].set(xlabel="d", ylabel="|t_d(β) − t∞(β)| / t∞(β)",
                   title=f"{name}: distance of Γ_d from Γ∞ (n = 32)")
        row[1].set_xticks(dims, [str(d) for d in dims])
        row[1].legend(fontsize=10)
        row[1].grid(True, which="both", alpha=0.3)
        row[2].set(xlabel="β", ylabel="median cluster count at T",
                   title=f"{name}: rank of 1{{<x_i,x_j> > {RANK_THRESHOLD}}} at T = {t[dims[0]][-1]:g}")
        row[2].set_yscale("log")
        row[2].set_yticks([1, 2, 4, 8, 16, 32], ["1", "2", "4", "8", "16", "32"])
        row[2].minorticks_off()
        row[2].legend(fontsize=9, ncol=2)
        if not any(np.isfinite(bnd[d]).any() for d in dims):      # nothing to draw: say why
            most = max(float(np.max(frac[d])) for d in dims)
            for ax in row[:2]:
                ax.cla()
                ax.set_axis_off()
                ax.text(0.5, 0.5, f"{name}: no 50 % boundary to draw —\nat most {100 * most:.0f} % of the pairs have "
                        f"merged by T = {t[dims[0]][-1]:g}\n(β ≤ {betas[-1]:g}, d = {', '.join(map(str, dims))})",
                        ha="center", va="center", fontsize=13, transform=ax.transAxes)
    for ax in axes.flat:
        ax.title.set_fontsize(12)
        ax.xaxis.label.set_fontsize(12)
        ax.yaxis.label.set_fontsize(12)
    return fig


if __name__ == "__main__":
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
