"""Metastability from the density PDE on S^2: clusters of the fast phase and their merges to one, against particles.

Start.  ρ_0 ∝ 1 + A Σ_{k=1}^{K} cos(f_k <x, u_k> + φ_k)/√K (unit mass), A = 0.1, K = 12 random ridges (directions u_k
uniform, frequencies f_k uniform in [1, 3], phases φ_k uniform; seed 7): a near-uniform density whose perturbation
holds the low spherical-harmonic degrees.  SA at β = 5: the fast phase forms three clusters by t ≈ 10, which
merge one pair at a time to one cluster (at t ≈ 50 and t ≈ 700).

Runs.  The PDE with ``sphere.solve``'s default adaptive cells (explicit SSP-RK3, flux upwind2).  Particles from the
same ρ_0: n tokens by ``discretise(method="stratified")`` (the equal-mass Fibonacci lattice through the Knothe
map, so the sampling noise sits at the lattice scale, far below A), one system per seed of the lattice's jitter
and shift, adaptive Dormand–Prince.

Clusters (``meanfield.clusters``): the regions denser than twice the uniform density (level 2) holding at least
2 % of the mass, ``density_clusters`` on the cells and ``particle_clusters`` on the tokens; centres and masses of
those clusters by ``cluster_centres`` (single linkage at ``LINK`` rad, far below the clusters' separation).  A
merge is an output where the count drops, after the fast phase (t ≥ ``T_FAST``); its time is that output's
(outputs every 1.2 % in t).

The energy jump at a merge.  In the normalised energy of arXiv:2410.06833, Ê = 2β e^{-β} E_β =
∬ e^{β(<x, y> - 1)} dρ dρ, point clusters of masses m_a carry Ê = Σ m_a² + X, X = Σ_{a≠b} m_a m_b e^{β(<c_a, c_b>
- 1)}, so the merge of a and b raises Ê by 2 m_a m_b up to the cross terms.  Ê and the clusters are read at
the geometric middle of each plateau; the merging pair is the one whose summed mass is closest to a cluster's on
the next plateau.

Checks (all can fail): the PDE and every particle seed have the same number of clusters after the fast phase
and the same sequence of counts down to one cluster by T; each merge time of the PDE lies within 3 s + δ of
the particles' mean (s the standard deviation over the seeds: the scatter of one sampling of ρ_0, of which
the PDE is the n → ∞ limit; 3 s rather than 2 s because s is itself estimated from a few seeds; δ one output
spacing); every jump of Ê (PDE and each seed) within X_before +
X_after + 2 % of 2 m_a m_b.  ``--quick`` runs coarser cells (levels 2 to 6) to T = 100, the first merge only
(those cells keep the last two clusters apart past T = 1000).
"""
import time
import warnings

import numpy as np

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.clusters import cluster_centres, density_clusters, particle_clusters
from meanfield.solvers import adaptive, particles, sphere
from meanfield.validation.metastability import plateaus

BETA = 5.0
START = dict(amplitude=0.1, ridges=12, seed=7)
LEVEL = 2.0          # clusters: denser than twice the uniform density ...
MIN_MASS = 0.02      # ... holding at least this fraction of the mass
LINK = 0.2           # single linkage (rad) for centres and masses: far below the clusters' separation on plateaus
T_FAST = 10.0        # the fast phase is over (the clusters have formed) by then
QUICK = dict(base=2, finest=6, T=100.0)   # --quick: cells coarser than sphere.solve's (3, 9), to the first merge


def near_uniform(amplitude, ridges, seed):
    """ρ_0(x) = (1 + A Σ_k cos(f_k <x, u_k> + φ_k)/√K)/(4π): a callable of points (N, 3), of mass 1 + O(A) (the
    solvers and ``discretise`` normalise it)."""
    rng = np.random.default_rng(seed)
    u = mf.normalise(rng.normal(size=(ridges, 3)))
    frequency, phase = rng.uniform(1, 3, ridges), rng.uniform(0, 2 * np.pi, ridges)

    def rho0(x):
        return (1 + amplitude * np.cos(x @ u.T * frequency + phase).sum(axis=1) / np.sqrt(ridges)) / (4 * np.pi)
    return rho0


def output_times(T, outputs):
    """0, then ``outputs`` times geometrically spaced from 1 to T."""
    return np.concatenate([[0.0], np.geomspace(1.0, T, outputs)])


def normalised_energy(energy, beta):
    """Ê = 2β e^{-β} E_β = ∬ e^{β(<x, y> - 1)} dρ dρ."""
    return 2 * beta * np.exp(-beta) * np.asarray(energy, float)


def cell_clusters(snapshot):
    """(centres, masses) of a density's clusters: its cells with ρ ≥ LEVEL/(4π), masses as fractions of the total."""
    rho, areas, points = snapshot.rho[0], snapshot.areas, snapshot.points
    mass = rho * areas
    dense = rho >= LEVEL / (4 * np.pi)
    if not dense.any():
        return np.zeros((0, 3)), np.zeros(0)
    centres, masses = cluster_centres(points[dense], mass[dense], tol=LINK, min_mass=MIN_MASS)
    return centres, masses * mass[dense].sum() / mass.sum()


def cross_terms(centres, masses, beta):
    """X = Σ_{a≠b} m_a m_b e^{β(<c_a, c_b> - 1)}."""
    k = np.exp(beta * (centres @ centres.T - 1))
    return float(masses @ (k - np.eye(masses.size)) @ masses)


def merge_sequence(t, counts):
    """The plateaus after the fast phase, as (count, first output time, last output time) of each run of equal
    counts, and the merges: (time, count before, count after) at each drop."""
    runs = [r[:3] for r in plateaus(t, np.asarray(counts), int(np.searchsorted(t, T_FAST)))]
    merges = [(after[1], before[0], after[0]) for before, after in zip(runs[:-1], runs[1:]) if after[0] < before[0]]
    return runs, merges


def energy_jumps(t, energy, runs, clusters, beta):
    """At each drop of the count: Ê on both plateaus and the clusters there (at the plateaus' geometric middles,
    where the clusters sit far apart), the merging pair (the two clusters before whose summed mass is closest to a
    cluster's after) and its 2 m_a m_b, and the cross terms X_before + X_after.  ``clusters(k)`` -> (centres,
    masses)."""
    def middle(run):
        return int(np.argmin(np.abs(np.log(t[1:]) - 0.5 * np.log(run[1] * run[2])))) + 1
    jumps = []
    for before, after in zip(runs[:-1], runs[1:]):
        if after[0] >= before[0]:
            continue
        kb, ka = middle(before), middle(after)
        (cb, mb), (ca, ma) = clusters(kb), clusters(ka)
        a, b = np.triu_indices(mb.size, 1)
        pair = np.argmin(np.abs((mb[a] + mb[b])[:, None] - ma[None, :]).min(axis=1))
        m_a, m_b = float(mb[a[pair]]), float(mb[b[pair]])
        jumps.append(dict(time=after[1], jump=float(energy[ka] - energy[kb]), m_a=m_a, m_b=m_b,
                          predicted=2 * m_a * m_b, cross=cross_terms(cb, mb, beta) + cross_terms(ca, ma, beta)))
    return jumps


def pde_run(rho0, t, quick):
    """The PDE on adaptive cells (``sphere.solve``'s default; ``QUICK``'s under --quick)."""
    start = time.process_time()
    with warnings.catch_warnings():            # the pinned-cluster detector: one-cell clusters at rest
        warnings.simplefilter("ignore")
        if quick:
            sol = adaptive.solve(mf.SA(BETA), rho0, t, progress=False, budget=None, base=QUICK["base"],
                                 finest=QUICK["finest"])
        else:
            sol = sphere.solve(mf.SA(BETA), rho0, t, progress=False, budget=None)
    cpu = time.process_time() - start
    counts = [density_clusters(sol, k, level=LEVEL, min_mass=MIN_MASS) for k in range(t.size)]
    energy = normalised_energy(sol.energy, BETA)
    runs, merges = merge_sequence(t, counts)
    jumps = energy_jumps(t, energy, runs, lambda k: cell_clusters(sol.snapshot(k)), BETA)
    return dict(counts=counts, energy=energy, plateaus=runs, merges=merges, jumps=jumps, cpu_s=cpu,
                nsteps=int(sol.info["nsteps"]), remeshes=int(sol.info["remeshes"]), max_cells=int(max(sol.cells)))


def particle_runs(rho0, t, n, seeds):
    """Tokens from ρ_0 (``discretise(method="stratified")``), one system per seed, in one batched solve."""
    x0 = np.stack([mf.discretise(rho0, n, 3, method="stratified", seed=s)[0] for s in seeds])
    start = time.process_time()
    sol = particles.solve(mf.SA(BETA), x0, t, scheme="adaptive", rtol=1e-7, atol=1e-9, progress=False)
    cpu = time.process_time() - start
    out = []
    for b, seed in enumerate(seeds):
        x = sol.x[:, b]
        counts = [particle_clusters(x[k], level=LEVEL, min_mass=MIN_MASS) for k in range(t.size)]
        energy = normalised_energy(sol.energy[:, b], BETA)
        runs, merges = merge_sequence(t, counts)
        out.append(dict(seed=seed, counts=counts, energy=energy, plateaus=runs, merges=merges,
                        jumps=energy_jumps(t, energy, runs, lambda k, x=x: cluster_centres(x[k], tol=LINK,
                                                                                   min_mass=MIN_MASS),
                                           BETA)))
    return out, cpu


def merge_agreement(pde, runs, spacing):
    """Per merge: the PDE's time, the particles' mean and standard deviation over the seeds, the tolerance
    3 s + δ (δ = ``spacing`` times the mean time, one output spacing) and whether the PDE lies within it."""
    rows = []
    for k, (time_pde, before, after) in enumerate(pde["merges"]):
        times = np.array([r["merges"][k][0] for r in runs])
        mean, std = float(times.mean()), float(times.std(ddof=1)) if times.size > 1 else 0.0
        tol = 3 * std + spacing * mean
        rows.append(dict(count=[before, after], pde=time_pde, particles=times.tolist(), mean=mean, std=std,
                         tolerance=tol, within=abs(time_pde - mean) <= tol))
    return rows


def jump_within(jumps):
    """(every jump within X + 2 % of 2 m_a m_b, the margins |jump - 2 m_a m_b| - X - 2 % · 2 m_a m_b)."""
    off = [abs(j["jump"] - j["predicted"]) - j["cross"] - 0.02 * j["predicted"] for j in jumps]
    return bool(jumps) and max(off) <= 0, off


def main(argv=None):
    exp = Experiment("metastability_sphere", __doc__.splitlines()[0], argv)
    T, outputs, last = exp.size(QUICK["T"], 1000.0), exp.size(200, 600), exp.size(2, 1)
    tokens, seeds = exp.size(300, 1000), list(range(exp.size(2, 4)))
    t = output_times(T, outputs)
    rho0 = near_uniform(START["amplitude"], START["ridges"], START["seed"])
    pde = pde_run(rho0, t, exp.quick)
    runs, particle_cpu = particle_runs(rho0, t, tokens, seeds)
    for name, r in [("PDE", pde)] + [(f"tokens seed {r['seed']}", r) for r in runs]:
        print(f"{name}: plateaus {[p[0] for p in r['plateaus']]}, merges at {[round(m[0], 1) for m in r['merges']]}")
    first = [r["plateaus"][0][0] if r["plateaus"] else 0 for r in [pde] + runs]
    exp.check("clusters after the fast phase: the PDE's count equals every particle seed's, and exceeds 2",
              first[0] > 2 and len(set(first)) == 1, pde=first[0], particles=first[1:])
    sequences = [[p[0] for p in r["plateaus"]] for r in [pde] + runs]
    exp.check(f"the same sequence of cluster counts down to {last} cluster(s) by T = {T:g} (PDE and every seed)",
              sequences[0][-1] == last and all(s == sequences[0] for s in sequences), pde=sequences[0],
              particles=sequences[1:])
    spacing = float(t[-1] / t[-2] - 1)
    agreement = merge_agreement(pde, runs, spacing) if all(s == sequences[0] for s in sequences) else []
    exp.check("every PDE merge time within 3 s + one output spacing of the particles' mean (s: over the seeds)",
              bool(agreement) and all(a["within"] for a in agreement),
              pde=[a["pde"] for a in agreement], mean=[a["mean"] for a in agreement],
              tolerance=[a["tolerance"] for a in agreement])
    for name, r in [("PDE", pde)] + [(f"tokens seed {r['seed']}", r) for r in runs]:
        ok, off = jump_within(r["jumps"])
        exp.check(f"{name}: every jump of E-hat within X_before + X_after + 2 % of 2 m_a m_b", ok,
                  jumps=[j["jump"] for j in r["jumps"]], predicted=[j["predicted"] for j in r["jumps"]],
                  margin=off)
    results = dict(beta=BETA, start=START, level=LEVEL, min_mass=MIN_MASS, link=LINK, t_fast=T_FAST, T=T,
                   output_spacing=spacing, tokens=tokens, seeds=seeds, t=t,
                   cells="adaptive.solve(base=2, finest=6)" if exp.quick else "sphere.solve's default adaptive cells",
                   pde=pde, particles=runs, particle_cpu_s=particle_cpu, merges=agreement)
    exp.finish(figure(results), results)


def figure(results):
    """Cluster counts and Ê against t (PDE and every seed), and the merge times side by side."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter
    fig, axes = plt.subplots(1, 3, figsize=(24, 7.5), constrained_layout=True)
    t = np.asarray(results["t"], float)
    pde, runs = results["pde"], results["particles"]
    styles = [dict(color="C0", lw=3.5, label="PDE, adaptive cells")] + [
        dict(color=f"C{k + 1}", lw=1.8, ls="--", label=f"{results['tokens']} tokens, seed {r['seed']}")
        for k, r in enumerate(runs)]
    ax = axes[0]
    ax.axvspan(t[1], results["t_fast"], color="0.92", zorder=0)
    ax.text(1.1 * t[1], 2.0, "fast\nphase", ha="left", fontsize=14, color="0.4")
    for r, st in zip([pde] + runs, styles):
        ax.step(t[1:], np.asarray(r["counts"])[1:], where="post", **st)
    ax.set_xscale("log")
    ax.set(xlabel="t", ylabel=f"clusters (denser than {results['level']:g}× uniform, mass ≥ {results['min_mass']:g})",
           title=f"SA β = {results['beta']:g} on S², near-uniform ρ₀ (A = {results['start']['amplitude']:g}):\n"
                 "number of clusters")
    ax.set_yticks(range(0, max(max(r["counts"]) for r in [pde] + runs) + 1))
    ax.legend(fontsize=13, loc="upper right")
    ax = axes[1]
    for r, st in zip([pde] + runs, styles):
        ax.semilogx(t[1:], np.asarray(r["energy"], float)[1:], **st)
    for j in pde["jumps"]:
        ax.axvline(j["time"], color="0.6", lw=1, zorder=0)
        ax.annotate(f"jump {j['jump']:.3f}\n2 m_a m_b = {j['predicted']:.3f}", (j["time"], 0.03), xytext=(-6, 0),
                    textcoords="offset points", xycoords=("data", "axes fraction"), ha="right", fontsize=13)
    ax.set(xlabel="t", ylabel=r"$\hat E = 2\beta e^{-\beta} E_\beta$   ($\sum_a m_a^2$ on point clusters)",
           title="energy staircase: a jump of 2 m_a m_b at each merge")
    ax.legend(fontsize=13, loc="upper left")
    ax = axes[2]
    rows = results["merges"]
    for k, row in enumerate(rows):
        label = f"{row['count'][0]} → {row['count'][1]}"
        ax.errorbar([row["mean"]], [k], xerr=[row["tolerance"]], fmt="s", color="C1", ms=10, capsize=8, lw=2,
                    label="particles: mean ± (3 s + one output spacing)" if k == 0 else None)
        ax.plot(row["particles"], [k - 0.12] * len(row["particles"]), "|", color="C1", ms=22, mew=2,
                label="particles: each seed" if k == 0 else None)
        ax.plot([row["pde"]], [k + 0.12], "o", color="C0", ms=14, label="PDE" if k == 0 else None)
        ax.annotate(label, (row["pde"], k + 0.3), ha="center", fontsize=15)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ticks = [v for v in (20, 50, 100, 200, 500, 1000, 2000) if v <= 1.5 * max(r["mean"] + r["tolerance"] for r in rows)]
    ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
    ax.set_yticks(range(len(rows)), [f"merge {k + 1}" for k in range(len(rows))])
    ax.set_ylim(-0.6, len(rows) - 0.2)
    ax.set(xlabel="merge time t", title="merge times: PDE against the particles' seed spread")
    ax.legend(fontsize=13, loc="lower right")
    for a_ in axes:
        a_.title.set_fontsize(16)
        a_.xaxis.label.set_fontsize(15)
        a_.yaxis.label.set_fontsize(15)
        a_.tick_params(labelsize=13)
    return fig


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
