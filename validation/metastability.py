"""Metastability on the circle: a fast phase forms l* clusters, then long plateaus and pairwise merges.

From a near-uniform start — n equally spaced angles displaced by ε Σ_{l<n/2} cos(lθ + φ_l)
with random phases, or the matching density (1/2π)(1 + ε Σ_l l sin(lθ + φ_l)) for the
finite-volume solver — every Fourier mode grows at its linear rate λ_l (``theory.growth_rate``)
and the fastest one, l* = ``theory.most_unstable_mode`` ≈ sqrt(2β), wins: after the fast phase
t_lin = log(1/ε)/λ_{l*} the tokens sit in l* clusters.  These attract each other only through
the tails e^{β(cos φ - 1)}, so the cluster count then stays constant over long plateaus and
drops by pairwise merges, each plateau longer than the last: two time scales.  SA particles
(adaptive Dormand–Prince in angle form) and the upwind finite-volume solver on S^1 both show it.

Checks (for the β in 2..12 below; λ_{l*} leads the next mode by 2-30%): at t = 2 t_lin
every run has exactly l* clusters (particles and FV); the clusters form at t_lin within 25%;
plateaus last longer than the fast phase; the time to reach a single cluster grows with β, over
the β whose runs reach one cluster by T (none does at β >= 6 by T = 1e4: the lifetimes at large β
are measured from prepared caps in ``metastable_lifetimes``).

Starts (second figure, ``metastability_starts.png``): the same SA dynamics from i.i.d. uniform
tokens and from lattice starts, on S^1 (equally spaced angles) and S^2 (Fibonacci points), each
displaced by ε-size noise.  I.i.d. starts carry an O(n^{-1/2}) perturbation in every mode, so the
fast phase is shorter and the first plateau may hold fewer clusters than l*; on S^2 the most
unstable degree does not fix the count.  Checks, per geometry and start: E_β never decreases;
the longest multi-cluster plateau outlasts the fast phase (the time t_form at which at most n/4
clusters are left) at every β ≥ 4; the time to a single cluster rises with β (rank correlation ≥ 0.8,
runs still clustered at T ranked last; checked only where at least three β reach one cluster by
T); on S^1 from i.i.d. starts the median count on the first
plateau (the first count held for at least t_form) is within 1 of l*.  Plateaus still on at T
are right-censored: drawn as lower bounds, never fitted.  The lifetime law log L = a + c β is
fitted per geometry on the completed two-cluster plateaus of both starts (with its 95 % interval,
when there are three or more).
"""
import numpy as np

import meanfield as mf
from meanfield import theory
from meanfield.clusters import cluster_count
from meanfield.cli.figures import Experiment, max_relative_decrease
from meanfield.geometry import circle_points
from meanfield.solvers import circle, particles
from meanfield.solvers.meshes.voronoi import fibonacci_points

EPS = 1e-8        # size of the initial perturbation
TOL = 0.05        # geodesic cluster scale (below the initial spacing 2π/n)
MIN_MASS = 0.02   # FV clusters: connected regions of density > 2/(2π) with at least this mass


def perturbation_phases(count, seed):
    """Random phases φ_l, l = 1..count, of the initial perturbation."""
    return np.random.default_rng(seed).uniform(0, 2 * np.pi, count)


def near_uniform_angles(n, phases):
    """θ_i = 2πi/n + ε Σ_l cos(l θ_i^0 + φ_l): equally spaced tokens displaced along every mode."""
    th0 = 2 * np.pi * np.arange(n) / n
    l = np.arange(1, phases.size + 1)
    return th0 + EPS * np.cos(np.outer(th0, l) + phases).sum(axis=1)


def near_uniform_density(theta, phases):
    """(1/2π)(1 + ε Σ_l l sin(lθ + φ_l)): the density of the displaced tokens (to first order in ε)."""
    l = np.arange(1, phases.size + 1)
    return (1 + EPS * (l * np.sin(np.outer(theta, l) + phases)).sum(axis=1)) / (2 * np.pi)


def density_clusters(sol, k):
    """Clusters of the k-th FV output: connected groups of cells with ρ > 2/(2π) (twice the uniform
    density, so none during the linear phase) holding mass >= MIN_MASS."""
    rho = sol.rho[k]
    keep = rho > 2 / (2 * np.pi)
    if not np.any(keep):
        return 0
    mass = rho[keep] * sol.areas[keep]
    h = 2 * np.pi / rho.size
    return cluster_count(sol.points[keep], 1.5 * h, weights=mass / mass.sum(), min_mass=MIN_MASS)


def plateaus(t, counts, start):
    """Maximal runs of a constant count from index ``start`` on, as (count, t_begin, t_end, ended)."""
    runs = []
    for k in range(start, t.size):
        if runs and runs[-1][0] == counts[k]:
            runs[-1][2] = t[k]
        else:
            if runs:
                runs[-1][3] = True
            runs.append([int(counts[k]), float(t[k]), float(t[k]), False])
    return [tuple(r) for r in runs]


def lifetime_law(betas, lengths):
    """Least-squares fit log L = a + c β over completed plateaus: (a, c, 95 % half-width of c).
    NaN half-width when fewer than three plateaus or a single β."""
    from scipy import stats
    betas, lengths = np.asarray(betas, float), np.asarray(lengths, float)
    if betas.size < 3 or np.unique(betas).size < 2:
        return float("nan"), float("nan"), float("nan")
    fit = stats.linregress(betas, np.log(lengths))
    return float(fit.intercept), float(fit.slope), float(stats.t.ppf(0.975, betas.size - 2) * fit.stderr)


def rises_with_beta(betas, times):
    """Whether the times to a single cluster (inf: not reached by T) rise with β: the finite ones
    strictly increasing in β, and every β that reached one cluster below every β that did not.
    None when fewer than two β reached it (nothing to compare: the claim is then not checked, as
    at β >= 6 here, where nothing merges by T; ``metastable_lifetimes`` measures it there)."""
    order = np.argsort(betas)
    times = np.asarray(times, float)[order]
    finite = np.isfinite(times)
    if finite.sum() < 2:
        return None
    last = np.flatnonzero(finite)[-1]
    return bool(np.all(finite[:last + 1]) and np.all(np.diff(times[finite]) > 0))


def starts(geometry, start, n, seeds, rng):
    """Initial tokens (seeds, n, d): i.i.d. uniform, or the lattice (equally spaced angles on S^1,
    Fibonacci points on S^2) displaced by Gaussian noise of size EPS and renormalised."""
    d = 2 if geometry == "S1" else 3
    if start == "iid":
        return mf.uniform_sphere(n, d, seed=rng, batch=seeds)
    lattice = circle_points(2 * np.pi * np.arange(n) / n) if d == 2 else fibonacci_points(n)
    return mf.normalise(lattice[None] + EPS * rng.standard_normal((seeds, n, d)))


def start_runs(betas, n, seeds, t):
    """Cluster counts (m, seeds), plateaus, energies and times to one cluster for SA from i.i.d.
    and lattice starts on S^1 and S^2 (adaptive Dormand–Prince)."""
    runs = {}
    for geometry in ("S1", "S2"):
        for start in ("iid", "lattice"):
            rng = np.random.default_rng([len(geometry), len(start)])
            for beta in betas:
                sol = particles.solve(mf.SA(beta), starts(geometry, start, n, seeds, rng), t, method="adaptive",
                                      rtol=1e-8, atol=1e-10)
                counts = np.array([[cluster_count(sol.x[k, s], TOL) for s in range(seeds)] for k in range(t.size)])
                t_form = np.array([t[np.argmax(counts[:, s] <= n // 4)] for s in range(seeds)])
                plats = [plateaus(t, counts[:, s], int(np.searchsorted(t, t_form[s]))) for s in range(seeds)]
                t_one = np.array([t[np.argmax(counts[:, s] == 1)] if np.any(counts[:, s] == 1) else np.inf
                                  for s in range(seeds)])
                first = np.array([next((k for k, b0, e, _ in p if e - b0 >= tf), p[-1][0])
                                  for p, tf in zip(plats, t_form)])
                runs[geometry, start, beta] = dict(t=t, counts=counts, t_form=t_form, plateaus=plats, t_single=t_one,
                                                   energy=sol.energy, first=first,
                                                   energy_dip=max(max_relative_decrease(sol.energy[:, s])
                                                                  for s in range(seeds)))
    return runs


def check_starts(exp, runs, betas, T):
    """The claims of the module docstring for the start comparison; returns the lifetime fits."""
    from scipy.stats import spearmanr
    fits = {}
    for geometry in ("S1", "S2"):
        pairs = []
        for start in ("iid", "lattice"):
            key = f"{geometry} {start}"
            rs = [runs[geometry, start, b] for b in betas]
            exp.check(f"{key}: E_beta never decreases", max(r["energy_dip"] for r in rs) <= 1e-7,
                      largest_relative_dip=max(r["energy_dip"] for r in rs))
            longest = [max([e - b0 for p in r["plateaus"] for k, b0, e, _ in p if k > 1] or [0.0]) for r in rs]
            late = [i for i, b in enumerate(betas) if b >= 4]
            exp.check(f"{key}: at beta >= 4 the longest multi-cluster plateau outlasts the fast phase",
                      all(longest[i] >= 2 * np.max(rs[i]["t_form"]) for i in late),
                      longest=[longest[i] for i in late], t_form=[float(np.max(rs[i]["t_form"])) for i in late])
            median_one = np.array([np.median(np.minimum(r["t_single"], 10 * T)) for r in rs])
            median_one = np.where(median_one >= 10 * T, np.inf, median_one)
            if np.isfinite(median_one).sum() >= 3:      # else too few beta reach one cluster by T to rank
                rho = spearmanr(betas, np.minimum(median_one, 10 * T)).statistic
                exp.check(f"{key}: the time to a single cluster rises with beta (rank correlation >= 0.8)",
                          rho >= 0.8, rank_correlation=rho, t_single_median=median_one)
            if (geometry, start) == ("S1", "iid"):
                l_star = [theory.most_unstable_mode(mf.SA(b), 2) for b in betas]
                first = [float(np.median(r["first"])) for r in rs]
                exp.check("S1 iid: the median count on the first plateau is within 1 of l*",
                          all(abs(f - ls) <= 1 for f, ls in zip(first, l_star)), first=first, l_star=l_star)
            pairs += [(b, e - b0) for b, r in zip(betas, rs) for p in r["plateaus"] for k, b0, e, ended in p
                      if ended and k == 2]
        a, c, half = lifetime_law([p_[0] for p_ in pairs], [p_[1] for p_ in pairs])
        fits[geometry] = dict(intercept=a, rate_c=c, ci95=half, plateaus=len(pairs),
                              betas=sorted({p_[0] for p_ in pairs}))
    return fits


def starts_figure(runs, betas, fits, n, seeds):
    """Cluster counts on S^1 and S^2 from both starts, two-cluster plateau lengths (censored ones
    open) with the fitted laws, and the energy staircase on S^2."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(16, 11), constrained_layout=True)
    styles = {"iid": "-", "lattice": "--"}
    for ax, geometry in zip(axes[0], ("S1", "S2")):
        for c, beta in enumerate(betas):
            for start in ("iid", "lattice"):
                r = runs[geometry, start, beta]
                ax.semilogx(r["t"][1:], np.median(r["counts"][1:], axis=1), styles[start], color=f"C{c}",
                            label=f"β = {beta:g}, {start}")
        ax.set(xlabel="t", ylabel=f"median number of clusters ({seeds} runs)", yscale="log",
               title=f"SA on {'S¹' if geometry == 'S1' else 'S²'}, n = {n}: i.i.d. (solid), lattice (dashed) starts")
        ax.legend(fontsize=8, ncol=2)
    ax = axes[1, 0]
    kinds = [("S1", "iid", "o"), ("S1", "lattice", "s"), ("S2", "iid", "D"), ("S2", "lattice", "v")]
    jitter = np.random.default_rng(0)
    for c, (geometry, start, mk) in enumerate(kinds):
        for ended in (True, False):
            pts = [(b, e - b0) for b in betas for p in runs[geometry, start, b]["plateaus"] for k, b0, e, done in p
                   if k == 2 and done == ended]
            if pts:
                b_, l_ = map(np.array, zip(*pts))
                ax.scatter(b_ + jitter.uniform(-0.15, 0.15, b_.size), l_, marker=mk, s=50,
                           facecolors=f"C{c}" if ended else "none", edgecolors=f"C{c}",
                           label=f"{geometry} {start}: {'ended' if ended else 'still on at T (lower bound)'}")
    for geometry, ls in (("S1", "k--"), ("S2", "k:")):
        f = fits[geometry]
        if np.isfinite(f["rate_c"]):              # drawn over the β of the plateaus it was fitted on
            grid = np.linspace(min(f["betas"]), max(f["betas"]), 50)
            ax.plot(grid, np.exp(f["intercept"] + f["rate_c"] * grid), ls,
                    label=f"{geometry}: L ∝ e^{{cβ}}, c = {f['rate_c']:.2f} ± {f['ci95']:.2f} (95 %)")
    ax.set(yscale="log", xlabel="β", ylabel="two-cluster plateau length (time)",
           title="two-cluster plateaus (open: right-censored at T)")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    for c, beta in enumerate(betas):
        for start in ("iid", "lattice"):
            r = runs["S2", start, beta]
            top = np.exp(beta) / (2 * beta)              # E_β of a single cluster
            ax.semilogx(r["t"][1:], r["energy"][1:, 0] / top, styles[start], color=f"C{c}",
                        label=f"β = {beta:g}, {start}")
    ax.set(xlabel="t", ylabel="E_β(t) / E_β(one cluster)  (≈ 1/k on k equal clusters)", ylim=(0, 1.05),
           title="energy staircase on S² (first run): flat on plateaus, a step up at each merge")
    ax.legend(fontsize=8, ncol=2)
    for a_ in axes.ravel():
        a_.title.set_fontsize(12)
    return fig


def main(argv=None):
    exp = Experiment("metastability", __doc__.splitlines()[0], argv)
    betas = exp.size([2.0, 4.0, 8.0], [2.0, 3.0, 4.0, 6.0, 8.0, 12.0])
    fv_betas = exp.size([4.0], [4.0, 8.0])
    n = exp.size(32, 64)
    seeds = exp.size(2, 4)
    T = exp.size(120.0, 1e4)
    T_fv = exp.size(70.0, 2e3)
    cells = exp.size(128, 256)
    t = np.concatenate([[0.0], np.geomspace(1.0, T, exp.size(100, 241))])
    results = dict(n=n, eps=EPS, tol=TOL, T=T, seeds=seeds, betas=betas, t=t, particles={}, fv={})
    per_beta = {}
    for beta in betas:
        model = mf.SA(beta)
        l_star = theory.most_unstable_mode(model, 2)
        rates = np.array([theory.growth_rate(model, 2, l) for l in range(1, 3 * l_star + 3)])
        t_lin = np.log(1 / EPS) / rates[l_star - 1]
        phases = np.stack([perturbation_phases(n // 2 - 1, seed) for seed in range(seeds)])
        theta0 = np.stack([near_uniform_angles(n, p) for p in phases])
        sol = particles.solve_angles(model, theta0, t, method="adaptive", rtol=1e-8, atol=1e-10)
        counts = np.array([cluster_count(sol.x[k], TOL) for k in range(t.size)])     # (m, seeds)
        early = counts[np.searchsorted(t, 2 * t_lin)]
        t_form = np.array([t[np.argmax(counts[:, s] <= 2 * l_star)] for s in range(seeds)])
        runs = [plateaus(t, counts[:, s], int(np.searchsorted(t, t_form[s]))) for s in range(seeds)]
        t_one = np.array([t[np.argmax(counts[:, s] == 1)] if np.any(counts[:, s] == 1) else np.inf
                          for s in range(seeds)])
        longest = np.array([max(e - b for k, b, e, _ in r if k > 1) for r in runs])
        second = np.sort(rates)[-2]
        exp.check(f"beta={beta:g}: {l_star} = l* clusters at t = 2 t_lin in every particle run",
                  np.all(early == l_star), early=early, l_star=l_star, gap_to_next_mode=1 - second / rates.max())
        exp.check(f"beta={beta:g}: clusters form at t_lin within 25%", np.all(np.abs(t_form / t_lin - 1) <= 0.25),
                  t_form=t_form, t_lin=t_lin)
        exp.check(f"beta={beta:g}: plateaus outlast the fast phase", np.all(longest >= 2 * t_form),
                  longest_plateau=longest, t_form=t_form)
        per_beta[beta] = dict(counts=counts, t_one=t_one, runs=runs, energy=sol.energy)
        results["particles"][f"beta{beta:g}"] = dict(l_star=l_star, rates=rates, t_lin=t_lin, early=early,
                                                     t_form=t_form, t_single=t_one, plateaus=runs,
                                                     counts=counts)
    t_one_median = np.array([np.median(per_beta[b]["t_one"]) for b in betas])
    rises = rises_with_beta(betas, t_one_median)
    if rises is not None:
        exp.check("the time to a single cluster rises with beta, over the beta that reach one cluster by T "
                  "(which come before those that do not)", rises, t_single_median=t_one_median)

    fv_runs = {}
    t_fv = t[t <= T_fv]
    for beta in fv_betas:
        model = mf.SA(beta)
        l_star = theory.most_unstable_mode(model, 2)
        t_lin = np.log(1 / EPS) / theory.growth_rate(model, 2, l_star)
        rho0 = near_uniform_density(circle.cell_angles(cells), perturbation_phases(n // 2 - 1, 0))
        sol = circle.solve(model, rho0, t_fv, cells=cells, flux="upwind")
        counts = np.array([density_clusters(sol, k) for k in range(t_fv.size)])
        early = int(counts[np.searchsorted(t_fv, 2 * t_lin)])
        exp.check(f"FV beta={beta:g}: l* = {l_star} clusters at t = 2 t_lin", early == l_star, early=early)
        mass_err = float(np.max(np.abs(sol.mass - 1)))     # round-off accumulates over ~1e5 steps
        exp.check(f"FV beta={beta:g}: mass conserved, density non-negative",
                  mass_err <= 1e-10 and sol.rho.min() >= 0, mass_error=mass_err, min_density=sol.rho.min(),
                  steps=sol.info["nsteps"])
        fv_runs[beta] = (sol, counts, t_lin)
        dip = max_relative_decrease(sol.energy)   # upwind: one-cell clusters crossing cells dip E slightly
        results["fv"][f"beta{beta:g}"] = dict(cells=cells, t=t_fv, counts=counts, early=early,
                                              energy_max_relative_decrease=dip,
                                              plateaus=plateaus(t_fv, counts, int(np.searchsorted(t_fv, t_lin))))

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(16, 11), constrained_layout=True)
    axes = axes.ravel()
    ax = axes[0]
    for c, beta in enumerate(betas):
        counts = per_beta[beta]["counts"]
        ax.semilogx(t[1:], counts[1:, 0], "-", color=f"C{c}", label=f"particles β = {beta:g} (l* = "
                    f"{results['particles'][f'beta{beta:g}']['l_star']})")
        ax.axvline(results["particles"][f"beta{beta:g}"]["t_lin"], color=f"C{c}", ls=":", lw=0.8)
        if beta in fv_runs:
            fv_counts = fv_runs[beta][1][1:].astype(float)     # 0 before any part of ρ is dense: not drawn
            ax.semilogx(t_fv[1:], np.where(fv_counts > 0, fv_counts, np.nan), "--", color=f"C{c}", lw=2,
                        label=f"FV, β = {beta:g} (from the first cluster on)")
    ax.set(xlabel="t", ylabel="number of clusters", ylim=(0, 2 * max(r["l_star"] for r in
                                                                      results["particles"].values()) + 1),
           title=f"SA on S¹, n = {n}: clusters vs log t (dotted: t_lin)")
    ax.legend(fontsize=9)
    ax = axes[1]
    done, cut = [], []            # (β, length, count) of completed and of right-censored plateaus
    for beta in betas:
        t_lin = results["particles"][f"beta{beta:g}"]["t_lin"]
        for r in per_beta[beta]["runs"]:
            for k, b, e, ended in r:
                if k > 1 and e - b >= 0.1 * t_lin:                   # not transients
                    (done if ended else cut).append((beta, e - b, k))
    from matplotlib.colors import BoundaryNorm
    most = max([k for *_, k in done + cut] + [2])
    cmap = plt.get_cmap("viridis", most - 1)               # one colour per cluster count 2..most
    norm = BoundaryNorm(np.arange(1.5, most + 1), cmap.N)
    jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(done) + len(cut))
    if done:
        b_, l_, k_ = map(np.array, zip(*done))
        sc = ax.scatter(b_ + jitter[:len(done)], l_, c=k_, cmap=cmap, norm=norm, s=45, edgecolors="k",
                        label="completed plateau (length)")
    if cut:
        b_, l_, k_ = map(np.array, zip(*cut))
        sc = ax.scatter(b_ + jitter[len(done):], l_, c=k_, cmap=cmap, norm=norm, s=70, marker="^",
                        edgecolors="k", label="still on at T: lower bound only")
    # the law is fitted on one kind of plateau, the two-cluster one before the last merge: mixing
    # cluster counts, or keeping only the plateaus that ended (at large β the long ones are
    # censored and only the short early ones end), biases the fit towards c = 0
    pairs = [(b_, l_) for b_, l_, k_ in done if k_ == 2]
    a, c, half = lifetime_law([p_[0] for p_ in pairs], [p_[1] for p_ in pairs])
    results["lifetime_law"] = dict(intercept=a, rate_c=c, ci95=half, completed=done, censored=cut)
    if np.isfinite(c):
        grid = np.linspace(min(betas), max(betas), 50)
        ax.plot(grid, np.exp(a + c * grid), "k--", lw=1.5,
                label=f"two-cluster plateaus that ended: L ∝ e^{{cβ}}, c = {c:.2f} ± {half:.2f} (95 %)")
    ax.set_yscale("log")
    ax.set(xlabel="β", ylabel="plateau length (time)", title="metastable plateaus: lifetime against β")
    ax.legend(fontsize=9, loc="upper left")
    fig.colorbar(sc, ax=ax, label="clusters during the plateau", ticks=np.arange(2, most + 1))
    ax = axes[3]
    for c_, beta in enumerate(betas):
        e = per_beta[beta]["energy"]                                # (m, seeds)
        top = np.exp(beta) / (2 * beta)                              # E_β of a single cluster
        ax.semilogx(t[1:], e[1:, 0] / top, color=f"C{c_}", lw=2, label=f"β = {beta:g}")
    for k in (1, 2, 3, 4, 5):
        ax.axhline(1 / k, color="0.8", lw=0.8, zorder=0)
    ax.set(xlabel="t", ylabel=r"$E_\beta(t)\, /\, E_\beta$(one cluster)   (1/k on k equal clusters: grey)",
           ylim=(0, 1.05), title="energy staircase (first run of each β): flat on plateaus, a step up at each merge")
    ax.legend(fontsize=9)
    ax = axes[2]
    sol, counts, t_lin = fv_runs[fv_betas[-1]]
    theta = circle.cell_angles(cells)
    for k in np.unique(np.searchsorted(t_fv, [t_lin, 2 * t_lin, 10 * t_lin, t_fv[-1]])):
        k = min(k, t_fv.size - 1)
        ax.semilogy(theta, np.maximum(sol.rho[k], 1e-12), label=f"t = {t_fv[k]:.0f}: {counts[k]} clusters")
    ax.set(xlabel="θ", ylabel="ρ(t, θ)", ylim=(1e-8, None),
           title=f"FV density, SA β = {fv_betas[-1]:g}, {cells} cells (upwind)")
    ax.legend(fontsize=9)
    for a_ in axes:
        a_.title.set_fontsize(12)
    start_betas = exp.size([2.0, 4.0, 8.0], [2.0, 3.0, 4.0, 6.0, 8.0, 12.0])
    runs = start_runs(start_betas, n, seeds, np.concatenate([[0.0], np.geomspace(0.5, T, exp.size(60, 161))]))
    fits = check_starts(exp, runs, start_betas, T)
    second = starts_figure(runs, start_betas, fits, n, seeds)
    second.savefig(exp.path("_starts.png"), dpi=110 if exp.quick else 130, bbox_inches="tight")
    plt.close(second)
    results["starts"] = dict(betas=start_betas, t=runs["S1", "iid", start_betas[0]]["t"], lifetime_law=fits, runs={
        f"{g} {s_} beta{b:g}": dict(first_plateau=r["first"], t_form=r["t_form"], t_single=r["t_single"],
                                    plateaus=r["plateaus"], median_counts=np.median(r["counts"], axis=1),
                                    energy_max_relative_decrease=r["energy_dip"])
        for (g, s_, b), r in runs.items()})
    c = results["lifetime_law"]["rate_c"]
    if not exp.quick:
        exp.check("two-cluster plateau lifetimes grow exponentially with beta (c > 0 with 95 % confidence)",
                  np.isfinite(c) and c - results["lifetime_law"]["ci95"] > 0, rate_c=c,
                  ci95=results["lifetime_law"]["ci95"])
    exp.finish(fig, results)


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
