"""The circle and the Kuramoto model: β = 0 against the exact order parameter; β > 0 reaches one cluster.

On S^1, x = (cos θ, sin θ), SA and USA read dθ_i/dt = (1/Z_i) Σ_j e^{β cos(θ_i-θ_j)} sin(θ_j-θ_i).
At β = 0 (Z_i = n) this is the Kuramoto model of identical oscillators with unit coupling,
dθ_i/dt = (1/n) Σ_j sin(θ_j - θ_i).  Its mean-field limit maps the wrapped Cauchy family into
itself, with order parameter r(t) = |∫ e^{iθ} dμ_t| = r0 e^{t/2}/sqrt(1 - r0² + r0² e^t)
(``exact.wrapped_cauchy_radius``).  Particles: z_j = e^{iθ_j} solve the Riccati equation
z' = (R - R̄ z²)/2 (R the mean of the z_j), a Möbius flow, so n equally spaced points pushed by
the disc automorphism z -> (z + r0)/(1 + r0 z) (a quadrature of the wrapped Cauchy law) stay a
Möbius image of the n-th roots of unity; their order parameter differs from r(t) by O(1/n).
The finite-volume solver starts from the wrapped Cauchy density itself.

For β > 0, i.i.d. uniform starts reach a single cluster (r -> 1) for SA and USA: almost every
start synchronises, only slower as β grows (metastable multi-cluster states).

Checks: the β = 0 angle field is the Kuramoto field; max_t |r_n(t) - r(t)| decays like 1/n
(observed order within 0.8..1.2) and the upwind FV r(t) converges at first order; every β > 0 run ends in one
cluster with r(T) > 1 - 1e-6.
"""
import numpy as np

import meanfield as mf
from meanfield import exact
from meanfield.clusters import cluster_count
from meanfield.cli.figures import Experiment
from meanfield.solvers import circle, particles

R0 = 0.1


def kuramoto_field(theta):
    """Identical Kuramoto oscillators, unit coupling: (1/n) Σ_j sin(θ_j - θ_i)."""
    return np.sin(theta[None, :] - theta[:, None]).mean(axis=1)


def mobius_angles(n, r0):
    """Angles of the equally spaced points e^{2πi(j+1/2)/n} pushed by z -> (z + r0)/(1 + r0 z)."""
    z = np.exp(2j * np.pi * (np.arange(n) + 0.5) / n)
    return np.angle((z + r0) / (1 + r0 * z))


def order_parameter(theta):
    """r = |mean_j e^{iθ_j}| along the last axis."""
    return np.abs(np.mean(np.exp(1j * theta), axis=-1))


def main(argv=None):
    exp = Experiment("kuramoto", __doc__.splitlines()[0], argv)
    T0 = exp.size(12.0, 20.0)
    t0 = np.linspace(0.0, T0, exp.size(61, 201))
    sizes = exp.size([16, 64, 256], [16, 64, 256, 1024, 4096])
    theta = np.random.default_rng(0).uniform(0, 2 * np.pi, 50)
    field_err = max(float(np.max(np.abs(particles.angle_velocity(Model(0.0), theta) - kuramoto_field(theta))))
                    for Model in (mf.SA, mf.USA))
    exp.check("beta=0 SA and USA angle fields are the Kuramoto field", field_err <= 1e-14, max_difference=field_err)

    r_exact = exact.wrapped_cauchy_radius(t0, R0)
    r_particles, errors = {}, []
    for n in sizes:
        sol = particles.solve_angles(mf.SA(0.0), mobius_angles(n, R0), t0, method="rk4", dt=0.01)
        r_particles[n] = order_parameter(sol.theta)
        errors.append(float(np.max(np.abs(r_particles[n] - r_exact))))
    order = float(-np.polyfit(np.log(sizes), np.log(errors), 1)[0])
    exp.check("particles: max |r_n(t) - r(t)| = O(1/n)", 0.8 <= order <= 1.2, errors=errors, observed_order=order)
    grids = exp.size([128, 512], [256, 1024])
    r_fv, fv_errors = {}, []
    for cells in grids:
        fv = circle.solve(mf.SA(0.0), lambda x: exact.wrapped_cauchy_density(mf.circle_angles(x), R0), t0,
                          cells=cells, flux="upwind")
        r_fv[cells] = np.abs((fv.rho * fv.areas) @ (fv.points[:, 0] + 1j * fv.points[:, 1]))
        fv_errors.append(float(np.max(np.abs(r_fv[cells] - r_exact))))
    fv_order = float(np.log(fv_errors[0] / fv_errors[1]) / np.log(grids[1] / grids[0]))
    exp.check("finite volumes (upwind): r(t) converges to the formula at first order", 0.8 <= fv_order <= 1.3,
              errors=fv_errors, cells=grids, observed_order=fv_order)

    n, seeds = exp.size((16, 8), (32, 16))
    cases = exp.size([(mf.SA, 1.0, 60.0), (mf.USA, 1.0, 60.0)],
                     [(mf.SA, 0.5, 100.0), (mf.SA, 1.0, 100.0), (mf.SA, 2.0, 500.0), (mf.SA, 4.0, 1e4),
                      (mf.USA, 0.5, 100.0), (mf.USA, 1.0, 100.0), (mf.USA, 2.0, 500.0)])
    theta0 = np.random.default_rng(1).uniform(0, 2 * np.pi, (seeds, n))
    sync = {}
    for Model, beta, T in cases:
        model = Model(beta)
        t = np.concatenate([[0.0], np.geomspace(0.1, T, 61)])
        sol = particles.solve_angles(model, theta0, t, method="adaptive", rtol=1e-9, atol=1e-11)
        r = order_parameter(sol.theta)                                    # (m, seeds)
        single = np.array([cluster_count(sol.x[k], 1e-2) == 1 for k in range(t.size)])
        label = f"{model.name} beta={beta:g}"
        exp.check(f"{label}: all {seeds} random starts end in one cluster by T={T:g}", np.all(single[-1]),
                  fraction=float(np.mean(single[-1])), min_final_r=float(r[-1].min()))
        exp.check(f"{label}: r(T) > 1 - 1e-6", np.all(r[-1] > 1 - 1e-6), min_final_r=float(r[-1].min()))
        sync[label] = dict(t=t, r=r, fraction_single=single.mean(axis=1))

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(15, 10.5), constrained_layout=True)
    axes = axes.ravel()
    ax = axes[0]
    ax.plot(t0, r_exact, "k-", lw=3, alpha=0.4, label="exact r(t) (wrapped Cauchy)")
    for n_ in sizes:
        ax.plot(t0, r_particles[n_], "--", label=f"particles, n = {n_}")
    for cells in grids:
        ax.plot(t0, r_fv[cells], ":", lw=2, label=f"finite volumes, {cells} cells")
    ax.set(xlabel="t", ylabel="r(t)", title=f"β = 0 (Kuramoto): order parameter from r0 = {R0}")
    ax.legend(fontsize=10)
    ax = axes[1]
    ax.loglog(sizes, errors, "o-", label=f"max_t |r_n - r| (order {order:.2f})")
    ax.loglog(sizes, errors[0] * sizes[0] / np.array(sizes), "k:", label="1/n")
    ax.set(xlabel="n", ylabel="max error", title="particles vs the exact order parameter")
    ax.legend()
    for c, (label, s) in enumerate(sync.items()):
        axes[2].semilogx(s["t"][1:], s["r"][1:], color=f"C{c}", lw=0.8, alpha=0.6)
        axes[2].plot([], [], color=f"C{c}", lw=2, label=label)
        axes[3].semilogx(s["t"][1:], s["fraction_single"][1:], color=f"C{c}", lw=2.5, label=label)
    axes[2].set(xlabel="t", ylabel="order parameter r(t) = |mean of e^{iθ}|",
                title=f"β > 0: r(t) of each of {seeds} random starts, n = {n}")
    axes[2].legend(fontsize=10)
    axes[3].set(xlabel="t", ylabel="fraction of the runs in one cluster", ylim=(-0.02, 1.02),
                title=f"β > 0: synchronisation, {seeds} random starts, n = {n}")
    axes[3].legend(fontsize=10)
    for a in axes:
        a.title.set_fontsize(13)
        a.xaxis.label.set_fontsize(12)
        a.yaxis.label.set_fontsize(12)
    exp.finish(fig, dict(r0=R0, t=t0, exact=r_exact, sizes=sizes, errors=errors, observed_order=order,
                         particles={str(k): v for k, v in r_particles.items()}, fv=dict(cells=grids, errors=fv_errors,
                                                                                       observed_order=fv_order),
                         synchronisation=sync, n=n, seeds=seeds))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
