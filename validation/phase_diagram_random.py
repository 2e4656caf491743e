"""Phase diagrams with random weights: Q^T K = I + σ G/√d, V = I + σ H/√d (d = 32, 128).

The authors' ``phase-diagrams.py`` has options for random Q^T K and V (paper.md §4, §5.7); the
paper's figures use Q = K = V = I.  This script follows a one-parameter family through that
point:

    Q = I,   K = I + σ G/√d,   V = I + σ H/√d,   G, H with i.i.d. N(0, 1) entries,

one draw of (G, H) per d (seed (3, d)), shared by every σ and β, so that σ moves along a fixed
direction.  Why 1/√d: the spectral norm of G/√d tends to 2 and the eigenvalues of the symmetric
part (G + Gᵀ)/(2√d) fill [-√2, √2] (semicircle law), so the perturbation has size O(σ) in
operator norm whatever d is — without the scaling it would grow like σ√d and swamp the identity
at large d.  For σ < 1/√2 the symmetric part of V stays positive definite (eigenvalues
1 ± √2 σ to leading order) and that of Q^T K too: the attractive regime, a small perturbation of
the paper's setting.  The scores of a pair of nearly orthogonal tokens move by σ<x_i, G x_j>/√d
= O(σ/√d), but V changes the contraction rates along different directions by O(σ).

Settings: n = 32 tokens i.i.d. uniform on S^{d-1}, SA, T = 30, 100 output times, the paper's
statistic (fraction of ordered pairs with <x_i, x_j> > 0.999), σ = 0, 0.1, 0.3.  Reduced for 2
shared cores: 8 systems per β (paper: 2048) and 18 values of β in [0.1, 9] (paper: 90); each β
a fresh draw, seeded (4, d, k), identical for every σ.  Integrator: the package's projected
Euler with the paper's step h = 0.1 (or h = 0.1/k, the largest that ``particles.max_step``
allows when |V|(1 + β|Q^T K|) is large): within 2.5 % of the ODE at σ = 0 (phase_diagram_paper).

Checks: the t = 0 fraction is the exact P(<x, y> > 0.999) of uniform pairs; at σ = 0 the 50 %
boundary lies within 10 % of Γ_{∞,1e-3} (n = 32) for β ∈ [2, 5] at d = 128; at β = 0.1 every pair
has merged by T for every σ and d; the boundary moves continuously with σ (its mean shift over
β ∈ [1, 6] is smaller at σ = 0.1 than at 0.3; the shifts themselves are in the JSON).
"""
import sys

import numpy as np

import meanfield as mf
from meanfield.clusters import pair_fraction
from meanfield.cli.figures import Experiment
from meanfield.compare.models import random_weights
from meanfield.solvers import particles
from meanfield.theory import clustering_time
from meanfield.validation.phase_diagram import _cell_edges, boundary, uniform_pair_probability

N, T, DT, THRESHOLD, DELTA = 32, 30.0, 0.1, 0.999, 1e-3
SIGMAS = (0.0, 0.1, 0.3)


def merged_fraction(model, x0, t):
    """Fraction of merged ordered pairs at the times t (multiples of 0.1) of ``model``'s run from x0,
    projected Euler with step 0.1/k, k the smallest integer that ``max_step`` allows."""
    k = int(np.ceil(DT / particles.max_step(model, x0.shape[-1], "euler") - 1e-12))
    sol = particles.solve(model, x0, t, method="euler", dt=DT / max(k, 1), energy=False,
                          observe=lambda y: np.array(pair_fraction(y, THRESHOLD)))
    return sol.observed


def _floats(values):
    return np.asarray(values, dtype=float)


def figure(results):
    """One diagram per (d, σ) with Γ_∞ (n = 32) and the 50 % boundary of σ = 0 for comparison."""
    import matplotlib.pyplot as plt
    dims, sigmas = [int(d) for d in results["dims"]], [float(s) for s in results["sigmas"]]
    betas, t = _floats(results["beta"]), _floats(results["t"])
    fig, axes = plt.subplots(len(dims), len(sigmas), figsize=(6.2 * len(sigmas), 6.4 * len(dims)), squeeze=False,
                             sharex=True, sharey=True, constrained_layout=True)
    curve = results["gamma_infinity_n32"]
    for row, d in zip(axes, dims):
        for ax, s in zip(row, sigmas):
            r = results[f"d={d}"][f"sigma={s:g}"]
            mesh = ax.pcolormesh(_cell_edges(t), _cell_edges(betas), _floats(r["pair_fraction"]).T, cmap="RdBu_r",
                                 vmin=0, vmax=1, shading="flat", rasterized=True)
            ax.plot(_floats(curve["t"]), _floats(curve["beta"]), "k-", lw=2, label=r"$\Gamma_\infty$, $n = 32$")
            ax.plot(_floats(results[f"d={d}"]["sigma=0"]["t50"]), betas, color="gold", lw=2,
                    label=r"50 % boundary, $\sigma = 0$")
            if s:
                ax.plot(_floats(r["t50"]), betas, color="lime", lw=2, ls="--",
                        label=rf"50 % boundary, $\sigma = {s:g}$")
            ax.set_title(rf"$d = {d}$, $\sigma = {s:g}$", fontsize=13)
            ax.set(xlim=(0, t[-1]), ylim=(betas[0], betas[-1]))
            ax.legend(loc="upper left", fontsize=9, framealpha=0.85)
        row[0].set_ylabel(r"$\beta$", fontsize=12)
    for ax in axes[-1]:
        ax.set_xlabel("$t$", fontsize=12)
    cb = fig.colorbar(mesh, ax=axes, shrink=0.8, pad=0.01)
    cb.set_label(rf"fraction of pairs with $\langle x_i, x_j\rangle > {THRESHOLD}$", fontsize=12)
    fig.suptitle(rf"SA with $Q^\top K = I + \sigma G/\sqrt{{d}}$, $V = I + \sigma H/\sqrt{{d}}$: n = {N}, "
                 f"{results['systems']} systems per β (paper: 2048), projected Euler h = 0.1", fontsize=15)
    return fig


def main(argv=None):
    exp = Experiment("phase_diagram_random", __doc__.splitlines()[0], argv)
    systems = exp.size(4, 8)
    dims = exp.size([32], [32, 128])
    betas = exp.size(np.array([0.1, 2.0, 4.0, 6.0]), np.round(np.linspace(0.1, 9.0, 18), 10))
    t = DT * np.round(np.linspace(0.0, T, exp.size(61, 101)) / DT)
    fine = np.linspace(betas[0], betas[-1], 200)
    t_inf = np.array([clustering_time(mf.SA(b), N, DELTA) for b in betas])
    results = dict(n=N, T=T, systems=systems, dims=dims, sigmas=SIGMAS, beta=betas, t=t, threshold=THRESHOLD,
                   family="Q = I, K = I + sigma G/sqrt(d), V = I + sigma H/sqrt(d); G, H iid N(0,1), seed (3, d)",
                   gamma_infinity_n32=dict(beta=fine, t=[clustering_time(mf.SA(b), N, DELTA) for b in fine]))
    for d in dims:
        starts = [mf.uniform_sphere(N, d, seed=np.random.default_rng([4, d, k]), batch=systems)
                  for k in range(betas.size)]
        p0 = uniform_pair_probability(d, THRESHOLD)
        results[f"d={d}"] = {}
        for s in SIGMAS:
            Q, K, V = random_weights(d, s, [3, d])
            frac = np.stack([merged_fraction(mf.SA(b, Q=Q, K=K, V=V), x0, t) for b, x0 in zip(betas, starts)], axis=1)
            t50 = np.array([boundary(t, frac[:, j]) for j in range(betas.size)])
            results[f"d={d}"][f"sigma={s:g}"] = dict(
                pair_fraction=frac, t50=t50, relative_to_gamma_infinity=t50 / t_inf - 1, norm_QK=np.linalg.norm(K, 2),
                norm_V=np.linalg.norm(V, 2), min_eig_sym_V=np.linalg.eigvalsh((V + V.T) / 2)[0])
            exp.check(f"d = {d}, sigma = {s:g}: every pair merged by T at beta = {betas[0]:g}", frac[-1, 0] >= 0.99,
                      fraction=float(frac[-1, 0]))
        f0 = float(np.mean(results[f"d={d}"]["sigma=0"]["pair_fraction"][0]))
        se = np.sqrt(p0 * (1 - p0) / (systems * betas.size * N * (N - 1) / 2))
        exp.check(f"d = {d}: fraction at t = 0 is the exact P(<x,y> > {THRESHOLD})", abs(f0 - p0) <= 4 * se + 1e-12,
                  measured=f0, exact=p0)
        base = results[f"d={d}"]["sigma=0"]["t50"]
        window = (betas >= 1.0) & (betas <= 6.0)
        shifts = {s: results[f"d={d}"][f"sigma={s:g}"]["t50"] / base - 1 for s in SIGMAS[1:]}
        for s, v in shifts.items():
            results[f"d={d}"][f"sigma={s:g}"]["shift_from_sigma_0"] = v
        small, large = (float(np.mean(np.abs(shifts[s][window]))) for s in SIGMAS[1:])
        exp.check(f"d = {d}: the boundary moves continuously with sigma: mean |shift| over beta in [1, 6] smaller at "
                  f"sigma = 0.1 than at 0.3", small < large, sigma_01=small, sigma_03=large)
    if 128 in dims:
        rel = results["d=128"]["sigma=0"]["relative_to_gamma_infinity"]
        near = (betas >= 2.0) & (betas <= 5.0)
        exp.check("d = 128, sigma = 0: the 50 % boundary within 10 % of Γ∞ (n = 32) for beta in [2, 5]",
                  np.all(np.abs(rel[near]) <= 0.10), relative=rel[near])
    exp.finish(figure(results), results)


if __name__ == "__main__":
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
