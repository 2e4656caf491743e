"""High dimension (d >= n): pairwise inner products concentrate on the equiangular curve ρ(t).

Derivation of the limit curve.  Suppose all pairwise inner products equal ρ: <x_i, x_k> = ρ
(i ≠ k).  With attention weights a_ij (SA: e^{β<x_i,x_j>}/Z_i, Z_i = e^β + (n-1)e^{βρ};
USA: e^{β<x_i,x_j>}/n),

    <x_i', x_k> = Σ_j a_ij (<x_j, x_k> - <x_i, x_j><x_i, x_k>),

where j = i gives ρ - ρ = 0, j = k gives a (1 - ρ²) and the n - 2 others a (ρ - ρ²), with
a = e^{βρ}/Z (SA) or e^{βρ}/n (USA).  So <x_i', x_k> = a (1-ρ)(1 + (n-1)ρ); adding the
symmetric term <x_i, x_k'>:

    SA:  dρ/dt = 2 e^{βρ} (1-ρ)(1+(n-1)ρ) / (e^β + (n-1) e^{βρ}),
    USA: dρ/dt = (2/n) e^{βρ} (1-ρ)(1+(n-1)ρ).

The same computation shows that equal inner products stay equal, so an exactly equiangular
start (orthonormal tokens, ρ(0) = 0) follows the curve exactly.  For n i.i.d. uniform tokens
on S^{d-1}, <x_i, x_j>(0) = O(d^{-1/2}) and, as d → ∞ (n, β, T fixed), every inner product
converges to ρ(t) with ρ(0) = 0 (the d ≥ n regime of the paper, Theorem 4.1 and §6): the
fluctuations around the curve stay O(d^{-1/2}).  We use ``meanfield.theory.equiangular_curve``.

Cost: for d >= n the velocity of x_i is a combination of x_i and the x_j, so the tokens stay
in the n-dimensional span of the initial ones and the dynamics only sees their Gram matrix.
Writing x_i(0) in an orthonormal basis of that span (a QR factorisation) gives an exactly
equivalent system in R^n, whatever d is; a check compares it with the full R^d run.

The dynamics, not the start.  The maximal deviation max_{t, i<j} |<x_i, x_j>(t) - ρ(t)| is
dominated by the initial spread: the t = 0 inner products alone fall like d^{-1/2}, and a solver
whose dynamics were wrong by a few per cent passes that test (β off by 2 %: 0.0244 against
0.0243 at d = 32768).  What only the dynamics decides is the mean inner product
m(t) = mean_{i<j} <x_i, x_j>(t): the linearisation of the Gram dynamics at an equiangular
configuration commutes with the permutations of the tokens, so the mean (the projection on
the invariant all-equal direction) evolves to first order in the deviations δ = O(d^{-1/2}) like
the equiangular curve itself.  Hence m(t) - ρ(t; m(0)), with ρ(·; m(0)) the curve started from
the measured m(0), is of second order, O(1/d): slope -1 in d, where an error in the dynamics
leaves a floor (β off by 2 %: slopes -0.35 (SA) and -0.07 (USA), measured).

Checks: orthonormal starts follow the curve to 1e-8 (SA and USA); the maximal deviation
max_{t <= T, i < j} |<x_i, x_j>(t) - ρ(t)| of random starts decreases with d like d^{-1/2};
max_t |m(t) - ρ(t; m(0))| (worst run) falls like d^{-1} (fitted slope in [-1.3, -0.7]).
"""
import numpy as np

import meanfield as mf
from meanfield.clusters import inner_product_histogram
from meanfield.cli.figures import Experiment
from meanfield.theory import equiangular_curve
from meanfield.solvers import particles

N = 32
BETA = 2.0
T = 6.0
DT = 0.02          # RK4 step of the random runs (its error, ~1e-7, is far below the deviations)
DT_EXACT = 0.0025  # RK4 step of the exact equiangular check


def _gram(x):
    """Pairwise inner products <x_i, x_j>, i < j, of tokens x (..., n, d): shape (..., n(n-1)/2)."""
    i, j = np.triu_indices(x.shape[-2], k=1)
    return np.einsum("...kd,...kd->...k", x[..., i, :], x[..., j, :])


def _span_coordinates(x):
    """Coordinates (B, n, n) of tokens x (B, n, d), d >= n, in an orthonormal basis of their span
    (x^T = Q R, so x = R^T Q^T and the Gram matrices agree)."""
    r = np.linalg.qr(np.swapaxes(x, -1, -2), mode="r")
    return mf.normalise(np.swapaxes(r, -1, -2))


def _orthonormal_tokens(n, d, seed):
    """n orthonormal unit vectors in R^d (a random frame): the equiangular start with ρ(0) = 0."""
    return mf.random_rotation(d, seed=seed)[:n]


def mean_deviation(model, curve_model, n, d, seeds, t, dt=DT):
    """max over t and over ``seeds`` runs of |m(t) - ρ(t; m(0))|: the mean inner product m(t) of n
    i.i.d. uniform tokens in R^d evolved by ``model`` (span coordinates, RK4 step dt), against the
    equiangular curve of ``curve_model`` started from m(0).  O(1/d) when the two models agree."""
    x0 = _span_coordinates(mf.uniform_sphere(n, d, seed=d, batch=seeds))
    return trajectory_mean_deviation(particles.solve(model, x0, t, dt=dt, energy=False).x, curve_model, t)


def trajectory_mean_deviation(x, curve_model, t):
    """max_{t, b} |m_b(t) - ρ(t; m_b(0))| for trajectories x (m, B, n, d), m_b the mean inner product."""
    mean = _gram(x).mean(axis=-1)                                     # (m, B)
    return max(float(np.max(np.abs(mean[:, b] - equiangular_curve(curve_model, x.shape[-2], t, rho0=mean[0, b]))))
               for b in range(mean.shape[1]))


def second_order_slope(deviations, dims):
    """(slope of log deviation against log d, whether it lies in [-1.3, -0.7], i.e. O(1/d))."""
    slope = float(np.polyfit(np.log(dims), np.log(deviations), 1)[0])
    return slope, -1.3 <= slope <= -0.7


def main(argv=None):
    exp = Experiment("high_dimension", __doc__.splitlines()[0], argv)
    dims = exp.size([32, 128, 512, 2048], [32 * 4 ** k for k in range(6)])
    seeds = exp.size(4, 16)
    t = np.linspace(0.0, T, exp.size(31, 61))
    bins = np.linspace(-0.4, 1.0, 71)
    results = dict(n=N, beta=BETA, T=T, dims=dims, seeds=seeds, t=t)
    curves, heat = {}, {}
    for Model in (mf.SA, mf.USA):
        model = Model(BETA)
        rho = equiangular_curve(model, N, t)
        curves[model.name] = rho
        exact = particles.solve(model, _orthonormal_tokens(N, N, seed=1), t, dt=DT_EXACT, energy=False)
        exact_err = float(np.max(np.abs(_gram(exact.x) - rho[:, None])))
        exp.check(f"{model.name}: orthonormal tokens follow the equiangular curve", exact_err <= 1e-8,
                  max_error=exact_err)
        x0 = mf.uniform_sphere(N, 2 * N, seed=0, batch=1)
        full = particles.solve(model, x0, t, dt=DT, energy=False)
        reduced = particles.solve(model, _span_coordinates(x0), t, dt=DT, energy=False)
        span_err = float(np.max(np.abs(_gram(full.x) - _gram(reduced.x))))
        exp.check(f"{model.name}: the run in span coordinates equals the run in R^d", span_err <= 1e-10,
                  max_gram_difference=span_err)
        deviation, mean_dev = [], []
        for d in dims:
            x0 = _span_coordinates(mf.uniform_sphere(N, d, seed=d, batch=seeds))
            sol = particles.solve(model, x0, t, dt=DT, energy=False)
            deviation.append(float(np.max(np.abs(_gram(sol.x) - rho[:, None, None]))))
            mean_dev.append(trajectory_mean_deviation(sol.x, model, t))
            if d in (dims[0], dims[-1]):
                heat[model.name, d] = np.array([np.mean([inner_product_histogram(sol.x[k, b], bins=bins.size - 1,
                                                                                 range=(bins[0], bins[-1]))[0]
                                                         for b in range(seeds)], axis=0)
                                                for k in range(t.size)])
        slope = float(np.polyfit(np.log(dims), np.log(deviation), 1)[0])
        exp.check(f"{model.name}: max deviation from the curve decreases with d",
                  np.all(np.diff(deviation) < 0) if exp.quick else deviation[-1] < deviation[0] / 4,
                  deviation=deviation)
        exp.check(f"{model.name}: deviation ~ d^(-1/2)", -0.7 <= slope <= -0.3, slope=slope)
        mean_slope, ok = second_order_slope(mean_dev, dims)
        exp.check(f"{model.name}: the mean inner product follows the curve from its own start to O(1/d)", ok,
                  slope=mean_slope, deviation=mean_dev)
        results[model.name] = dict(curve=rho, max_deviation=deviation, slope=slope, exact_start_error=exact_err,
                                  span_coordinates_error=span_err, mean_deviation=mean_dev, mean_slope=mean_slope)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(18, 10), constrained_layout=True)
    for row, name in enumerate(("SA", "USA")):
        for col, d in enumerate((dims[0], dims[-1])):
            ax = axes[row, col]
            mid = 0.5 * (t[1:] + t[:-1])
            t_edges = np.concatenate([[t[0] - (mid[0] - t[0])], mid, [t[-1] + (t[-1] - mid[-1])]])
            mesh = ax.pcolormesh(t_edges, bins, np.log10(heat[name, d].T + 1e-3), cmap="Greys", shading="flat",
                                 rasterized=True)
            fig.colorbar(mesh, ax=ax, label="log10(density + 1e-3)")
            ax.plot(t, curves[name], "r--", lw=1.5, label="ρ(t), d → ∞")
            ax.set(xlabel="t", ylabel="<x_i(t), x_j(t)>",
                   title=f"{name}, β = {BETA:g}, n = {N}, d = {d}:\nhistogram of inner products")
            ax.legend(loc="lower right")
        ax = axes[row, 2]
        dev = results[name]["max_deviation"]
        ax.loglog(dims, dev, "o-", label=f"max deviation (slope {results[name]['slope']:.2f})")
        ax.loglog(dims, dev[0] * (np.array(dims) / dims[0]) ** -0.5, "k:", label="d^(-1/2)")
        mdev = results[name]["mean_deviation"]
        ax.loglog(dims, mdev, "s-", label=f"mean inner product m: max_t |m(t) − ρ(t; m(0))| "
                                          f"(slope {results[name]['mean_slope']:.2f})")
        ax.loglog(dims, mdev[0] * (np.array(dims) / dims[0]) ** -1.0, "k--", label="d^(-1)")
        ax.set(xlabel="d", ylabel="deviation from the equiangular curve", ylim=(min(mdev) / 100, 2),
               title=f"{name}: concentration as d grows")
        ax.legend(fontsize=9, loc="lower left")
    results["histogram_bins"] = bins
    results["histograms"] = {f"{name}_d{d}": h for (name, d), h in heat.items()}
    exp.finish(fig, results)


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
