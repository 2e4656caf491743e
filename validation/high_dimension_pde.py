"""The mean-field PDE in high dimension: zonal PDE vs particles for d = 3, 16, 128, and clustering time vs d.

Initial data: zonal von Mises–Fisher profiles ρ_0 ∝ e^{κ_d <x, e>} on S^{d-1}, with κ_d chosen so that the
mean is <m, e> = S0 in every dimension (κ_d ≈ S0 d for large d: the polar coordinate s = <x, e>
concentrates at S0 with spread ~d^{-1/2}).

(a) Particles vs PDE.  For d = 3, 16, 128 the zonal PDE (``meanfield.solvers.zonal``, 512 polar cells)
and n tokens in R^d sampled from the same ρ_0 (mid-quantile polar angles, antithetic transverse
directions, ``meanfield.compare.zonal.sample``) run side by side (SA, β = 4, RK4); their distance is the exact
W_1 between polar-angle marginals.  Check: it decreases with n in every dimension.

(c) Convergence in n in d = 128.  One zonal PDE run (4096 cells: with 1024 its error near the pole,
~2e-3 at t = 4, is the floor n = 10^4 reaches) and n tokens for n = 300, 1000, 3000,
10^4 (mid-quantile sampling as in (a); RK4, dt = 0.1, which changes W_1 by < 1e-5 against dt = 0.05), up to
t = 4; the PDE's marginal is taken uniform in θ inside each cell (each cell as K = 32 sub-atoms, so the
grid adds at most h/(4K) = 6e-6 to W_1 instead of the h/4 of atoms at the centres).  Check: max_t W_1
decreases with n at observed order (slope of log W_1 against log n) between 0.8 and 1.2: for SA each
token's own term e^β/n in its softmax sum, absent from the mean field, is an O(1/n) bias.  The cost of one
velocity evaluation is measured for n = 1000, 3000 and 10^4 (BLAS-tiled direct sums, ``solvers.kernels.gemm``).

(b) Clustering time vs d.  T_d = the first time |mean|² = <m, e>² reaches 1 - δ on the PDE.  As d → ∞
two independent tokens have <x, y> → s s' (the transverse parts become orthogonal), so the pairwise
inner products all equal ρ = <m, e>² and follow the equiangular curve with n → ∞ tokens:
SA ρ' = 2ρ(1 - ρ), USA ρ' = 2 e^{βρ} ρ(1 - ρ) (``theory.equiangular_curve`` with n = 10^9, from
ρ(0) = S0²).  Check: |T_d - T_∞| decreases with d and is small at the largest d; the whole curve
<m, e>²(t) approaches the equiangular one.
"""
import time

import numpy as np
from scipy.optimize import brentq

import meanfield as mf
from meanfield.compare import zonal
from meanfield.cli.figures import Experiment
from meanfield.solvers import particles, zonal as zfv
from meanfield.theory import equiangular_curve

S0 = 0.3          # initial axial mean <m, e>
BETA = 4.0
DELTA = 0.05      # clustered when |mean|² >= 1 - DELTA
LIMIT_N = 10 ** 9  # equiangular curve with "n = ∞" (relative error ~1/(n ρ))
SUB_ATOMS = 32    # (c): each PDE cell as this many equal atoms, uniform in θ


def _vmf(kappa, s0):
    """f(s) = e^{κ(s - s0)}, capped at e^700 (reached only for s > s0 + 700/κ, where the cell measures
    sin^{d-2} θ make the mass below e^{-900} for the d that need the cap)."""
    return lambda t: np.exp(np.minimum(kappa * (t - s0), 700.0))


def vmf_profile(d, s0=S0, cells=512):
    """The von Mises–Fisher profile whose grid measure on S^{d-1} has mean s0 (κ by bisection)."""
    s = np.cos(zfv.polar_grid(cells)[0])

    def mean(kappa):
        return zfv.cell_masses(_vmf(kappa, s0), d, cells) @ s - s0

    kappa = brentq(mean, 1e-6, 2.0 * d + 10.0)      # κ ≈ s0 d / (1 - s0²) for large d
    return _vmf(kappa, s0), kappa


def clustering_time(t, rho):
    """First t where rho(t) >= 1 - DELTA, linearly interpolated (NaN if never)."""
    k = np.flatnonzero(rho >= 1 - DELTA)
    if k.size == 0 or k[0] == 0:
        return float("nan")
    k = k[0]
    return float(t[k - 1] + (1 - DELTA - rho[k - 1]) * (t[k] - t[k - 1]) / (rho[k] - rho[k - 1]))


def cell_marginal(sol, k):
    """(angles, weights): the k-th polar-angle marginal of a ZonalSolution spread uniformly in θ over each cell
    (SUB_ATOMS equal atoms per cell), the law that ``zonal.sample`` draws from."""
    width = np.diff(sol.edges)[:, None]
    angles = sol.edges[:-1, None] + (np.arange(SUB_ATOMS) + 0.5) / SUB_ATOMS * width
    return angles.ravel(), np.repeat(np.clip(sol.masses[k], 0.0, None) / SUB_ATOMS, SUB_ATOMS)


def velocity_cost(model, pde, n, repeats=1):
    """Seconds for one particle velocity evaluation with n tokens sampled from the PDE (best of ``repeats``)."""
    x = zonal.sample(pde, n, k=0, method="quantile", seed=0)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        particles.velocity(pde.model, x)
        best = min(best, time.perf_counter() - start)
    return best


def convergence_in_n(exp, model, d):
    """(c): one PDE run, particles for several n; returns the record for the JSON."""
    f0, _ = vmf_profile(d)
    t = np.linspace(0.0, exp.size(2.0, 4.0), exp.size(5, 9))
    pde = zfv.solve(model, f0, t, d, cells=exp.size(256, 4096))
    sizes = exp.size([64, 256], [300, 1000, 3000, 10000])
    w1 = []
    for n in sizes:
        x0 = zonal.sample(pde, n, k=0, method="quantile", seed=0)
        start = time.perf_counter()
        parts = particles.solve(model, x0, t, dt=0.1, energy=False)
        theta = zonal.polar_angles(parts.x)
        w1.append([zonal.polar_wasserstein(theta[k], np.ones(n), *cell_marginal(pde, k), p=1) for k in range(t.size)])
        print(f"(c) d={d} n={n}: W1 over time {np.round(w1[-1], 5)} ({time.perf_counter() - start:.0f} s)")
    w1 = np.array(w1)
    worst = w1.max(axis=1)
    order = -float(np.polyfit(np.log(sizes), np.log(worst), 1)[0])
    exp.check(f"(c) d={d}: max_t W_1 to the PDE decreases with n", np.all(np.diff(worst) < 0), max_over_time=worst)
    exp.check(f"(c) d={d}: observed order in n between 0.8 and 1.2 (O(1/n) self-interaction bias)",
              0.8 < order < 1.2, order=order)
    evaluations = 4 * int(round(t[-1] / 0.1))
    costs = {n: velocity_cost(model, pde, n) for n in exp.size([256, 1000], [1000, 3000, 10000])}
    for n, c in costs.items():
        print(f"(c) one velocity evaluation, n={n}, d={d}: {c:.3f} s; a run ({evaluations} evaluations) "
              f"{c * evaluations:.0f} s")
    return dict(t=t, sizes=sizes, w1=w1, max_over_time=worst, order=order, cells=pde.info["cells"], dt=0.1,
                velocity_seconds={str(n): c for n, c in costs.items()}, evaluations_per_run=evaluations)


def main(argv=None):
    exp = Experiment("high_dimension_pde", __doc__.splitlines()[0], argv)
    model = mf.SA(BETA)
    dims = [3, 16, 128]
    sizes = exp.size([64, 256], [250, 1000])
    T = exp.size(3.0, 6.0)
    t = np.linspace(0.0, T, exp.size(7, 13))
    comparisons = {}
    for d in dims:
        f0, kappa = vmf_profile(d)
        errs = []
        for n in sizes:
            cmp = zonal.compare(model, f0, t, d, n, seeds=1, cells=512, dt=0.05)
            errs.append(cmp.w1[:, 0])
            print(f"d={d} n={n}: W1 over time {np.round(cmp.w1[:, 0], 4)}")
        comparisons[d] = dict(kappa=kappa, w1=np.array(errs), mean_pde=cmp.mean_pde,
                              mean_particles=cmp.mean_particles[:, 0])
        final = [e[-1] for e in errs]
        worst = [float(e.max()) for e in errs]
        exp.check(f"d={d}: the W_1 distance to the PDE decreases with n", np.all(np.diff(worst) < 0),
                  max_over_time=worst, final=final)

    convergence = convergence_in_n(exp, model, 128)

    dims_b = exp.size([3, 16, 128, 512], [3, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    tb = np.linspace(0.0, exp.size(6.0, 8.0), exp.size(121, 321))
    limit = equiangular_curve(model, LIMIT_N, tb, rho0=S0 ** 2)
    t_limit = clustering_time(tb, limit)
    times, gaps, curves = [], [], {}
    for d in dims_b:
        f0, _ = vmf_profile(d)
        sol = zfv.solve(model, f0, tb, d, cells=exp.size(256, 512))
        rho = np.array([sol.mean(k) for k in range(tb.size)]) ** 2
        curves[d] = rho
        times.append(clustering_time(tb, rho))
        gaps.append(float(np.max(np.abs(rho - limit))))
        print(f"d={d}: clustering time {times[-1]:.4f} (limit {t_limit:.4f}), max |<m,e>^2 - rho| {gaps[-1]:.4f}")
    rel = np.abs(np.array(times) - t_limit) / t_limit
    exp.check("|T_d - T_inf| decreases with d", np.all(np.diff(rel) < 0), relative_gap=rel)
    exp.check("T_d within 3 % of the equiangular limit at the largest d", rel[-1] < 0.03, relative_gap=float(rel[-1]))
    exp.check("the curve <m,e>^2(t) approaches the equiangular curve", gaps[-1] < gaps[0] / 4, max_gap=gaps)

    results = dict(beta=BETA, s0=S0, delta=DELTA, sizes=sizes, t=t, comparisons=comparisons,
                   convergence=convergence, dims=dims_b, clustering_time=times, clustering_time_limit=t_limit,
                   relative_gap=rel, curve_gap=gaps, t_curves=tb,
                   curves={str(d): c for d, c in curves.items()}, limit_curve=limit)
    exp.finish(figure(results), results)


def figure(results):
    """The four panels, 2 x 2, from the results (as ``main`` records them in the JSON: ``meanfield figures
    high_dimension_pde --replot`` redraws the stored figure from it)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(13, 10), constrained_layout=True)
    axes = axes.ravel()
    ax = axes[0]
    colors = ["C0", "C1", "C3", "C2", "C4"]
    for colour, (d, comparison) in zip(colors, results["comparisons"].items()):
        for j, n in enumerate(results["sizes"]):
            ax.semilogy(results["t"], comparison["w1"][j], "-o" if j else "--s", ms=3, color=colour,
                        label=f"$d = {d}$, $n = {n}$")
    ax.set(xlabel="$t$", ylabel="$W_1$ of the polar-angle marginals (rad)",
           title=rf"particles in $\mathbb{{R}}^d$ vs the zonal PDE (SA, $\beta = {results['beta']:g}$, "
                 rf"$\langle m, e\rangle(0) = {results['s0']:g}$)")
    ax.legend(fontsize=8)
    ax = axes[1]
    conv = results["convergence"]
    sizes = np.asarray(conv["sizes"], dtype=float)
    ax.loglog(sizes, conv["max_over_time"], "o-", label=r"max over $t \leq 4$ of $W_1$")
    ax.loglog(sizes, np.asarray(conv["w1"])[:, -1], "s--", label="$W_1$ at $t = 4$")
    ax.loglog(sizes, conv["max_over_time"][0] * sizes[0] / sizes, "k:", label=r"$\propto 1/n$")
    ax.set(xlabel="tokens $n$", ylabel="$W_1$ of the polar-angle marginals (rad)",
           title=f"$d = 128$: particles → zonal PDE (observed order {conv['order']:.2f})")
    ax.legend(fontsize=8)
    ax = axes[2]
    curves = results["curves"]
    for j, (d, curve) in enumerate(curves.items()):
        ax.plot(results["t_curves"], curve, color=plt.cm.plasma(j / len(curves)), lw=1.2, label=f"$d = {d}$")
    ax.plot(results["t_curves"], results["limit_curve"], "k--", lw=2, label=r"equiangular, $d \to \infty$")
    ax.axhline(1 - results["delta"], color="grey", lw=0.8, ls=":")
    ax.set(xlabel="$t$", ylabel=r"$|\mathrm{mean}|^2 = \langle m, e\rangle^2$",
           title=r"zonal PDE: squared mean vs the $d \to \infty$ curve")
    ax.legend(fontsize=8, ncol=2)
    ax = axes[3]
    ax.semilogx(results["dims"], results["clustering_time"], "o-", label="zonal PDE $T_d$")
    ax.axhline(results["clustering_time_limit"], color="k", ls="--",
               label=f"equiangular limit {results['clustering_time_limit']:.3f}")
    ax.set(xlabel="$d$", ylabel=rf"time for $|\mathrm{{mean}}|^2 \geq {1 - results['delta']:g}$",
           title="clustering time vs dimension")
    ax.legend()
    return fig


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
