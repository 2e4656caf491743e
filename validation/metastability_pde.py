"""Metastability from the density PDE on S^1: lifetimes of two clusters and the energy staircase, against particles.

Lifetimes.  ρ_0 = two wrapped Gaussian bumps of width w = 0.05 and equal mass at ±φ/2, φ = 2π/3
(gap g = 1 - cos φ = 3/2), on 256 cells; SA at β = 4 … 6 (L ≈ 57 … 790).  Both bumps collapse to near-Diracs by
t_c = 10; the two clusters then close like two Diracs (``dirac_merge_time`` of
``metastable_lifetimes``: two Diracs on any sphere move in the great circle through them, so its
reduction is the S^1 one, tested here against two- and three-token runs on S^1).  Merge criterion
(as in ``metastable_lifetimes``): L is the time at which the angle between the barycentres of the
mass in the half-circles (-π, 0) and (0, π) (the initial clusters' sides of their bisector) has
halved, linearly interpolated between outputs.  The same criterion is applied to the PDE's cells
and to particles started from the same ρ_0 (n = 64 tokens at the quantiles (k + 1/2)/n of the cell
density).  The two-Dirac prediction is t_c + dirac_merge_time(β, φ(t_c) → φ_0/2).

The law is fitted as log(βL) = a + cβ (least squares, 95 % intervals from Student's t): the
two-Dirac reduction's Laplace asymptote is L ≈ e^{βg}/(2β sin²φ), so log(βL) is linear in β up to
O(1/β) with slope g, while log L carries a -log β that a plain fit folds into c (11 % at these βg
in ``metastable_lifetimes``).

The PDE is run with the positivity-controlled SSP-RK3 steps and the first-order upwind flux (a
one-cell cluster moves with its particle velocity), the semi-discrete system the implicit schemes
integrate.  Beside it, for β = 7 … 11 (L ≈ 3·10³ … 8·10⁵), the same system with ``scheme="auto"``
(SSP-RK3 through the collapse, then backward Euler, default rtol 1e-3): the fully implicit step
evaluates the field at the new state, so a cluster narrower than a cell drifts at its true speed
(a step that freezes the field moves it by about dt/(1 + dt) of its drift: ``frozen_field_drift``
measures both).  On a fixed grid a cluster whose pull from the other is weaker than its own
self-attraction across one cell is pinned (a stationary state of the upwind system, which the
explicit solver relaxes to as well: 256 cells pin the clusters at β = 9), so these runs take
256 · 2^(β - 7) cells.

Energy staircase.  ρ_0 = (1 + A Σ_{l=1}^{8} cos(lθ + φ_l)/8)/(2π), A = 0.1, random phases, SA
β = 8: a few clusters form by t ≈ 15 and merge one pair at a time.  The normalised energy of
arXiv:2410.06833 (paper.md §6.2), Ê = ∬ e^{β(cos(θ - θ') - 1)} dρ dρ = 2β e^{-β} E_β, equals
Σ_a m_a² on k point clusters of mass fractions m_a up to the cross terms
X = Σ_{a≠b} m_a m_b e^{β(cos φ_ab - 1)}, so the merge of a and b raises it by 2 m_a m_b (the
reference code's 2 m_a m_b / n² for token counts).  A plateau's energy is read at the geometric
middle of its time span; its clusters (centres, masses) from cells with ρ > 2/(2π) (single linkage
at 1.5 cells) or tokens (single linkage at 0.05 rad), and the merging pair is the closest pair at
the plateau's last output.

Checks: every PDE lifetime within 1 % of the particles' and of the two-Dirac prediction; the
fitted slopes c of the PDE and of the particles agree within their 95 % intervals (the intervals
overlap) over >= 4 β; the backward Euler lifetimes (β = 7 … 11) within 1 % of the two-Dirac
prediction and their slope within the 95 % interval of the two-Dirac fit over the same β (particles
are not run there: 64 tokens to t ≈ 10⁶ take the explicit adaptive particle solver millions of steps);
backward Euler keeps the explicit drift of collapsed clusters; the staircase: the PDE and the particles
go through the same cluster counts, every merge of the PDE within 10 % of the particles' time, and every
jump of Ê (PDE and particles) within X_before + X_after + 2 % of 2 m_a m_b.
"""
import time
import warnings

import numpy as np
from scipy import stats

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.clusters import cluster_centres, cluster_labels
from meanfield.solvers import circle, particles
from meanfield.validation.metastability import plateaus
from meanfield.validation.metastable_lifetimes import crossing, dirac_merge_time

CELLS = 256          # PDE cells (h = 0.0245)
WIDTH = 0.05         # standard deviation of each initial bump (radians)
PHI = 2 * np.pi / 3  # initial angle between the two clusters (gap 1 - cos φ = 3/2)
T_COLLAPSE = 10.0    # the bumps have collapsed to near-Diracs by then
TOKENS = 64          # particles quantised from ρ_0 (lifetimes)
FLUX = "upwind"      # first order: one-cell clusters travel at their particle speed
TOL = 0.05           # token clusters: single linkage at this geodesic scale
STAIRCASE = dict(beta=8.0, amplitude=0.1, modes=8, seed=1, tokens=256)


def two_bumps(cells, phi=PHI, width=WIDTH):
    """Cell densities of two wrapped Gaussians of equal mass at ±φ/2 (unit mass)."""
    theta = circle.cell_angles(cells)
    rho = sum(np.exp(-np.angle(np.exp(1j * (theta - c))) ** 2 / (2 * width ** 2)) for c in (phi / 2, -phi / 2))
    return rho / (rho.sum() * 2 * np.pi / cells)


def near_uniform_start(cells, amplitude, modes, seed):
    """Cell densities (1 + A Σ_{l<=modes} cos(lθ + φ_l)/modes)/(2π), phases φ_l uniform from ``seed``."""
    theta = circle.cell_angles(cells)
    phases = np.random.default_rng(seed).uniform(0, 2 * np.pi, modes)
    return (1 + amplitude * np.cos(np.outer(theta, np.arange(1, modes + 1)) + phases).sum(axis=1) / modes) / (2 * np.pi)


def quantile_angles(rho, n):
    """The n points θ with CDF(θ) = (k + 1/2)/n of the piecewise-constant cell density ``rho`` on [0, 2π)."""
    rho = np.asarray(rho, float)
    h = 2 * np.pi / rho.size
    cdf = np.concatenate([[0.0], np.cumsum(rho)]) / rho.sum()
    q = (np.arange(n) + 0.5) / n
    k = np.searchsorted(cdf, q, side="right") - 1
    return (k + (q - cdf[k]) / (cdf[k + 1] - cdf[k])) * h


def pair_angle(theta, weights):
    """Angle between the barycentres of the mass in (-π, 0) and in (0, π): ``theta`` (N,) or (m, N) angles,
    ``weights`` of the same shape (or (N,)); returns (m,) or a float."""
    z = np.asarray(weights) * np.exp(1j * np.asarray(theta))
    upper = np.sin(theta) > 0
    a = np.angle(np.sum(np.where(upper, z, 0), axis=-1))
    b = np.angle(np.sum(np.where(upper, 0, z), axis=-1))
    return np.abs(np.angle(np.exp(1j * (a - b))))


def lifetime_times(L):
    """Output times for a run whose lifetime is about L: dense over the collapse, then 1200 to 1.4 L + 20."""
    return np.concatenate([np.linspace(0.0, T_COLLAPSE, 41), np.linspace(T_COLLAPSE, 1.4 * L + 20, 1200)[1:]])


def measured_lifetime(t, angle):
    """(L, φ_c): the time the angle falls to half its start, and the angle at t_c."""
    return crossing(t, angle, angle[0] / 2), float(np.interp(T_COLLAPSE, t, angle))


def implicit_cells(beta):
    """Cells of the backward Euler runs: CELLS up to β = 7, doubled per unit of β above (pinning, module docstring)."""
    return CELLS * 2 ** max(0, int(np.ceil(beta - 7.0)))


def pde_lifetime(beta, scheme="ssprk3", T=None, model=mf.SA, cells=CELLS):
    """(L, φ_c, steps, final angle) of the PDE of ``model(beta)`` from ``two_bumps`` (L = inf if no merge by T)."""
    rho0 = two_bumps(cells)
    t = lifetime_times(dirac_merge_time(beta, PHI, PHI / 2)) if T is None else \
        np.concatenate([np.linspace(0.0, T_COLLAPSE, 41), np.geomspace(T_COLLAPSE, T, 1500)[1:]])
    with warnings.catch_warnings():              # the pinned-cluster detector: see the module docstring
        warnings.simplefilter("ignore")
        sol = circle.solve(model(beta), rho0, t, cells=cells, flux=FLUX, scheme=scheme, energy=False,
                           progress=False, budget=None)
    angle = pair_angle(circle.cell_angles(cells), sol.rho)
    return (*measured_lifetime(t, angle), int(sol.info["nsteps"]), float(angle[-1]))


def particle_lifetime(beta):
    """(L, φ_c) of TOKENS tokens quantised from ``two_bumps``."""
    theta0 = quantile_angles(two_bumps(CELLS), TOKENS)
    t = lifetime_times(dirac_merge_time(beta, PHI, PHI / 2))
    sol = particles.solve_angles(mf.SA(beta), theta0, t, method="adaptive", rtol=1e-9, atol=1e-12, progress=False)
    return measured_lifetime(t, pair_angle(sol.theta, np.full(TOKENS, 1.0 / TOKENS)))


def lifetime_runs(betas, pde_model=mf.SA):
    """Per β: the PDE's (of ``pde_model(β)``) and the particles' (SA) lifetimes and the two-Dirac prediction (SA)
    from each's φ_c."""
    rows = []
    for beta in betas:
        L_pde, phi_pde, steps, _ = pde_lifetime(beta, model=pde_model)
        L_par, phi_par = particle_lifetime(beta)
        rows.append(dict(beta=beta, pde=L_pde, particles=L_par, pde_steps=steps, phi_c_pde=phi_pde,
                         phi_c_particles=phi_par, dirac=T_COLLAPSE + dirac_merge_time(beta, phi_pde, PHI / 2),
                         dirac_particles=T_COLLAPSE + dirac_merge_time(beta, phi_par, PHI / 2)))
        r = rows[-1]
        print(f"beta={beta:g}: L pde {L_pde:.5g}, particles {L_par:.5g}, two-Dirac {r['dirac']:.5g}")
    return rows


def implicit_runs(betas):
    """Per β: the PDE with scheme="auto" (SSP-RK3, then backward Euler; default tolerances) on ``implicit_cells(β)``
    cells, its lifetime (inf: no merge by 1.4 × the two-Dirac time) against the two-Dirac prediction from its φ_c."""
    rows = []
    for beta in betas:
        start = time.process_time()
        L, phi_c, steps, end = pde_lifetime(beta, scheme="auto", cells=implicit_cells(beta))
        rows.append(dict(beta=beta, cells=implicit_cells(beta), implicit=L, steps=steps, angle_at_end=end,
                         dirac=T_COLLAPSE + dirac_merge_time(beta, phi_c, PHI / 2),
                         cpu_s=round(time.process_time() - start, 1)))
        print(f"beta={beta:g}: backward Euler L {L:.5g} ({steps} steps, {rows[-1]['cells']} cells), two-Dirac "
              f"{rows[-1]['dirac']:.5g}")
    return rows


def frozen_field_drift(beta, steps, span=60.0, scheme="implicit_euler"):
    """How far fixed steps of ``scheme`` of each size in ``steps`` carry the two clusters of ``two_bumps`` after their
    collapse, as a fraction of the SSP-RK3 solution's drift over ``span``: {dt: fraction}.  A one-cell cluster's
    drift is the slow shift of its mass between two cells, relaxing at rate λ ≈ 1, so a frozen-field step
    ("implicit_euler") moves it by about dt/(1 + λ dt) of dt's drift, a backward Euler step by all of it."""
    rho = two_bumps(CELLS)
    theta = circle.cell_angles(CELLS)
    kw = dict(cells=CELLS, flux=FLUX, energy=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = circle.solve(mf.SA(beta), rho, [0.0, 3 * T_COLLAPSE], **kw).rho[-1]
        ref = circle.solve(mf.SA(beta), start, [0.0, span], **kw).rho
        drift = pair_angle(theta, ref[-1]) - pair_angle(theta, ref[0])
        out = {}
        for dt in steps:
            y = circle.solve(mf.SA(beta), start, [0.0, span], scheme=scheme, dt=dt, **kw).rho
            out[dt] = float((pair_angle(theta, y[-1]) - pair_angle(theta, y[0])) / drift)
    return out


def law_fit(betas, lifetimes):
    """Least squares log(β L) = a + c β: (a, c, 95 % half-width of c)."""
    b = np.asarray(betas, float)
    fit = stats.linregress(b, np.log(b * np.asarray(lifetimes, float)))
    return float(fit.intercept), float(fit.slope), float(stats.t.ppf(0.975, b.size - 2) * fit.stderr)


def intervals_overlap(fit_a, fit_b):
    """Whether the 95 % intervals c ± half-width of two ``law_fit`` results overlap."""
    return abs(fit_a[1] - fit_b[1]) <= fit_a[2] + fit_b[2]


# ------------------------------------------------------------------------------- the energy staircase

def normalised_energy(energy, beta):
    """Ê = 2β e^{-β} E_β = ∬ e^{β(cos(θ - θ') - 1)} dρ dρ (the normalisation of arXiv:2410.06833)."""
    return 2 * beta * np.exp(-beta) * np.asarray(energy, float)


def density_clusters(rho):
    """(angles, masses) of the clusters of a cell density: cells with ρ > 2/(2π), single linkage at 1.5 cells."""
    h = 2 * np.pi / rho.size
    cells = np.flatnonzero(rho > 2 / (2 * np.pi))
    if cells.size == 0:
        return np.zeros(0), np.zeros(0)
    theta = circle.cell_angles(rho.size)[cells]
    labels = cluster_labels(mf.circle_points(theta), 1.5 * h)
    m = rho[cells] * h
    masses = np.bincount(labels, weights=m)
    z = np.bincount(labels, weights=m * np.cos(theta)) + 1j * np.bincount(labels, weights=m * np.sin(theta))
    centres = np.angle(z)
    return centres, masses


def token_clusters(theta):
    """(angles, masses) of the token clusters at scale TOL."""
    centres, masses = cluster_centres(mf.circle_points(theta), tol=TOL)
    return np.arctan2(centres[:, 1], centres[:, 0]), masses


def cross_energy(angles, masses, beta):
    """X = Σ_{a≠b} m_a m_b e^{β(cos φ_ab - 1)} of point clusters."""
    k = np.exp(beta * (np.cos(angles[:, None] - angles[None, :]) - 1))
    return float(masses @ (k - np.eye(angles.size)) @ masses)


def staircase(t, energy, clusters, beta):
    """Plateaus and merges of one run: ``energy`` (m,) normalised, ``clusters(k)`` -> (angles, masses) at output k.
    Returns (plateau list, merge list); a merge records the time, Ê on both plateaus, the merging pair's masses
    (closest pair at the last output before), 2 m_a m_b and the cross terms X of both plateaus."""
    counts = np.array([clusters(k)[0].size for k in range(t.size)])
    first = int(np.argmax(t >= 2 * T_COLLAPSE))            # clusters formed
    runs = [r for r in plateaus(t, counts, first) if r[0] >= 1]
    plats = []
    for count, t0, t1, ended in runs:
        mid = int(np.argmin(np.abs(np.log(t[first:]) - 0.5 * (np.log(max(t0, t[first])) + np.log(t1))))) + first
        angles, masses = clusters(mid)
        plats.append(dict(count=count, start=t0, end=t1, ended=ended, energy=float(energy[mid]), t_mid=float(t[mid]),
                          masses=masses, angles=angles, cross=cross_energy(angles, masses, beta)))
    merges = []
    for before, after in zip(plats[:-1], plats[1:]):
        if after["count"] != before["count"] - 1:
            continue
        last = int(np.searchsorted(t, before["end"]))
        angles, masses = clusters(last)
        gaps = np.abs(np.angle(np.exp(1j * (angles[:, None] - angles[None, :])))) + 10 * np.eye(angles.size)
        a, b = np.unravel_index(np.argmin(gaps), gaps.shape)
        merges.append(dict(time=after["start"], count=before["count"], jump=after["energy"] - before["energy"],
                           m_a=float(masses[a]), m_b=float(masses[b]), predicted=2 * float(masses[a] * masses[b]),
                           cross=before["cross"] + after["cross"]))
    return plats, merges


def staircase_runs(beta, amplitude, modes, seed, tokens, T, outputs):
    """The PDE (SSP-RK3 and "auto") and particles from the same near-uniform ρ_0: t, Ê, counts, plateaus, merges."""
    rho0 = near_uniform_start(CELLS, amplitude, modes, seed)
    t = np.concatenate([[0.0], np.geomspace(0.5, T, outputs)])
    runs = {}
    for scheme in ("ssprk3", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sol = circle.solve(mf.SA(beta), rho0, t, cells=CELLS, flux=FLUX, scheme=scheme, progress=False,
                               budget=None)
        rho, energy = sol.rho, normalised_energy(sol.energy, beta)
        plats, merges = staircase(t, energy, lambda k, rho=rho: density_clusters(rho[k]), beta)
        runs[f"pde {scheme}"] = dict(energy=energy, plateaus=plats, merges=merges,
                                     counts=[len(density_clusters(r)[0]) for r in rho], steps=sol.info["nsteps"])
    sol = particles.solve_angles(mf.SA(beta), quantile_angles(rho0, tokens), t, method="adaptive", rtol=1e-8,
                                 atol=1e-10, progress=False)
    energy = normalised_energy(sol.energy, beta)
    plats, merges = staircase(t, energy, lambda k: token_clusters(sol.theta[k]), beta)
    runs["particles"] = dict(energy=energy, plateaus=plats, merges=merges,
                             counts=[len(token_clusters(th)[0]) for th in sol.theta])
    for name, r in runs.items():
        print(f"staircase {name}: counts {[p['count'] for p in r['plateaus']]}, merges at "
              f"{[round(m['time'], 1) for m in r['merges']]}, jumps {[round(m['jump'], 4) for m in r['merges']]} "
              f"vs 2 m_a m_b {[round(m['predicted'], 4) for m in r['merges']]}")
    return t, runs


def check_staircase(exp, runs):
    """The staircase claims of the module docstring."""
    pde, par = runs["pde ssprk3"], runs["particles"]
    same = [p["count"] for p in pde["plateaus"]] == [p["count"] for p in par["plateaus"]]
    exp.check("staircase: the PDE and the particles go through the same cluster counts", same and pde["merges"],
              pde=[p["count"] for p in pde["plateaus"]], particles=[p["count"] for p in par["plateaus"]])
    if same:
        ratio = [a["time"] / b["time"] for a, b in zip(pde["merges"], par["merges"])]
        exp.check("staircase: every PDE merge within 10 % of the particles' time",
                  all(abs(r - 1) <= 0.1 for r in ratio), pde_over_particles=ratio)
    for name in ("pde ssprk3", "particles"):
        m = runs[name]["merges"]
        off = [abs(x["jump"] - x["predicted"]) - x["cross"] - 0.02 * x["predicted"] for x in m]
        exp.check(f"staircase ({name}): every jump of E-hat within X_before + X_after + 2 % of 2 m_a m_b",
                  bool(m) and max(off) <= 0, jumps=[x["jump"] for x in m], predicted=[x["predicted"] for x in m],
                  cross_terms=[x["cross"] for x in m])


def lifetimes_agree(rows, rtol=0.01):
    """(largest relative difference of the PDE's lifetimes from the particles' and the two-Dirac ones, <= rtol)."""
    worst = max(max(abs(r["pde"] / r["particles"] - 1), abs(r["pde"] / r["dirac"] - 1)) for r in rows)
    return worst, worst <= rtol


def main(argv=None):
    exp = Experiment("metastability_pde", __doc__.splitlines()[0], argv)
    betas = exp.size([3.0, 3.5, 4.0, 4.5], [4.0, 4.5, 5.0, 5.5, 6.0])
    implicit_betas = exp.size([3.0, 3.5, 4.0, 4.5], [7.0, 8.0, 9.0, 10.0, 11.0])
    rows = lifetime_runs(betas)
    worst, ok = lifetimes_agree(rows)
    exp.check("every PDE lifetime within 1 % of the particles' and of the two-Dirac prediction", ok,
              worst_relative_difference=worst, pde=[r["pde"] for r in rows], particles=[r["particles"] for r in rows],
              dirac=[r["dirac"] for r in rows])
    fits = {name: law_fit(betas, [r[name] for r in rows]) for name in ("pde", "particles", "dirac")}
    exp.check(f"log(beta L) = a + c beta: PDE and particle slopes agree within their 95 % intervals "
              f"({len(betas)} beta)", len(betas) >= 4 and intervals_overlap(fits["pde"], fits["particles"]),
              pde=fits["pde"][1:], particles=fits["particles"][1:], dirac=fits["dirac"][1:])
    implicit = implicit_runs(implicit_betas)
    worst = max(abs(r["implicit"] / r["dirac"] - 1) for r in implicit)
    exp.check("every backward Euler lifetime within 1 % of the two-Dirac prediction", worst <= 0.01,
              worst_relative_difference=worst, implicit=[r["implicit"] for r in implicit],
              dirac=[r["dirac"] for r in implicit])
    fits["implicit"] = law_fit(implicit_betas, [r["implicit"] for r in implicit])
    fits["dirac_implicit"] = law_fit(implicit_betas, [r["dirac"] for r in implicit])
    exp.check(f"log(beta L) = a + c beta: backward Euler and two-Dirac slopes agree within their 95 % intervals "
              f"({len(implicit_betas)} beta)",
              len(implicit_betas) >= 4 and intervals_overlap(fits["implicit"], fits["dirac_implicit"]),
              implicit=fits["implicit"][1:], dirac=fits["dirac_implicit"][1:])
    drift = frozen_field_drift(12.0, [1.0, 10.0, 30.0])
    drift_be = frozen_field_drift(12.0, [1.0, 10.0, 30.0], scheme="backward_euler")
    print("drift over 60 time units as a fraction of SSP-RK3's, by dt: implicit Euler", drift, "backward Euler",
          drift_be)
    exp.check("backward Euler keeps the explicit drift of collapsed clusters (within 2 % for dt = 1, 10, 30)",
              all(abs(v - 1) < 0.02 for v in drift_be.values()), fractions=list(drift_be.values()))
    S = STAIRCASE
    t, runs = staircase_runs(S["beta"], S["amplitude"], S["modes"], S["seed"], exp.size(128, S["tokens"]),
                             exp.size(40.0, 2500.0), exp.size(60, 240))
    check_staircase(exp, runs)
    results = dict(cells=CELLS, width=WIDTH, phi=PHI, tokens=TOKENS, flux=FLUX, t_collapse=T_COLLAPSE, lifetimes=rows,
                   fits={k: dict(intercept=v[0], rate_c=v[1], ci95=v[2]) for k, v in fits.items()},
                   implicit=implicit,
                   frozen_field_drift=dict(beta=12.0, span=60.0, fraction=drift, backward_euler=drift_be,
                                           one_over_one_plus_dt={k: 1 / (1 + k) for k in drift}),
                   staircase=dict(S, tokens=exp.size(128, S["tokens"]), t=t, runs=runs))
    exp.finish(figure(results), results)


def figure(results):
    """Lifetimes against β (PDE, particles, two-Dirac, backward Euler), their ratios, and the energy staircase."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(24, 7.5), constrained_layout=True)
    rows, implicit, fits = results["lifetimes"], results["implicit"], results["fits"]
    b = np.array([r["beta"] for r in rows])
    ax = axes[0]
    grid = np.linspace(min(b.min(), min(r["beta"] for r in implicit)) - 0.5,
                       max(r["beta"] for r in implicit) + 0.5, 100)
    ax.semilogy(grid, [dirac_merge_time(x, PHI, PHI / 2) for x in grid], "k-", lw=1,
                label="two Diracs from φ = 2π/3 at t = 0")
    ax.semilogy(b, [r["dirac"] for r in rows], "kx", ms=12, mew=2, label="two-Dirac prediction from φ(t_c), t_c = 10")
    kinds = (("pde", "o", "C0", "PDE, SSP-RK3"), ("particles", "s", "C1", f"{results['tokens']} tokens"))
    for key, mk, c, what in kinds:
        f, pde = fits[key], key == "pde"
        ax.semilogy(b, [r[key] for r in rows], mk, ms=11 if pde else 7, color=c, mfc="none" if pde else c, mew=2,
                    label=f"{what}: c = {f['rate_c']:.4f} ± {f['ci95']:.4f}")
    ab = np.array([r["beta"] for r in implicit])
    La = np.array([float(r["implicit"]) for r in implicit])
    done = np.isfinite(La)
    f = fits["implicit"]
    ax.semilogy(ab[done], La[done], "^", ms=11, color="C3", label=f'PDE, scheme="auto" (backward Euler, '
                f'256·2^(β-7) cells): c = {f["rate_c"]:.4f} ± {f["ci95"]:.4f}')
    ax.semilogy(ab[done], [r["dirac"] for r, d in zip(implicit, done) if d], "k+", ms=12, mew=2,
                label="two-Dirac prediction for those runs")
    ax.set(xlabel="β", ylabel="lifetime L (time until the clusters' angle halves)",
           title=f"SA on S¹, two clusters at φ = 2π/3, {results['cells']} cells: lifetime vs β\n"
                 f"(fit log(βL) = a + cβ, 95 % intervals; gap 1 − cos φ = 3/2)")
    ax.set_ylim(top=ax.get_ylim()[1] * 60)              # room for the legend above the points
    ax.legend(fontsize=10, loc="upper left")
    ax = axes[1]
    pct = lambda x: 100 * (np.asarray(x, float) - 1)      # noqa: E731
    ax.plot(b, pct([r["pde"] / r["dirac"] for r in rows]), "o-", ms=9, label="PDE (SSP-RK3) / two-Dirac")
    ax.plot(b, pct([r["particles"] / r["dirac_particles"] for r in rows]), "s-", ms=7, label="particles / two-Dirac")
    ax.plot(b, pct([r["pde"] / r["particles"] for r in rows]), "d--", ms=7, label="PDE / particles")
    ax.plot(ab[done], pct(La[done] / np.array([r["dirac"] for r in implicit])[done]), "^-", ms=10, color="C3",
            label='PDE "auto" (backward Euler) / two-Dirac')
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_yscale("symlog", linthresh=1.0)
    ticks = [-1, -0.5, 0, 0.5, 1, 3, 10, 30, 100, 300]
    ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
    ax.set(xlabel="β", ylabel="merge time ratio − 1  (%; linear within ±1 %, logarithmic beyond)", ylim=(-1.2, 600),
           title="merge times against each other and the two-Dirac reduction")
    ax.legend(fontsize=11, loc="center right")
    ax = axes[2]
    st = results["staircase"]
    t = np.asarray(st["t"], float)
    for (name, r), style in zip(st["runs"].items(), ("-", ":", "--")):
        ax.semilogx(t[1:], np.asarray(r["energy"], float)[1:], style, lw=2.5 if style == "-" else 2,
                    label={"pde ssprk3": f"PDE, SSP-RK3 ({results['cells']} cells)", "pde auto": 'PDE, scheme="auto"',
                           "particles": f"{st['tokens']} tokens from the same ρ₀"}[name])
    for m in st["runs"]["pde ssprk3"]["merges"]:
        ax.annotate(f"jump {m['jump']:.3f}\n2 m_a m_b = {m['predicted']:.3f}", (m["time"], 0.0), xytext=(0, 8),
                    textcoords="offset points", xycoords=("data", "axes fraction"), ha="center", fontsize=10)
        ax.axvline(m["time"], color="0.7", lw=0.8, zorder=0)
    ax.set(xlabel="t", ylabel=r"$\hat E = 2\beta e^{-\beta} E_\beta$   ($\sum_a m_a^2$ on point clusters)",
           title=f"energy staircase, SA β = {st['beta']:g}, near-uniform ρ₀ (A = {st['amplitude']:g})")
    ax.legend(fontsize=11, loc="upper left")
    for a_ in axes:
        a_.title.set_fontsize(13)
    return fig


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
