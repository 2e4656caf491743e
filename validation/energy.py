"""Energy: E_β(t) increases along SA and USA, and dE/dt equals the dissipation, for particles and PDE.

E_β[μ] = (1/(2β)) ∬ e^{β<x,y>} dμ(x) dμ(y).  Along the continuity equation ∂_t μ + div(μ X[μ]) = 0,
dE/dt = ∫ <∇_S (Φ/β), X> dμ with Φ = ∫ e^{β<·,y>} dμ(y); since X = ∇_S Φ/β (USA) and
X = ∇_S Φ/(βΦ) (SA),

    USA: dE/dt = ∫ |X|² dμ,        SA: dE/dt = ∫ Φ |X|² dμ,

both >= 0.  For particles (μ = (1/n) Σ δ_{x_i}) these are identities of the ODE; for the
finite-volume solver on S^1 they hold up to the O(h) consistency error of the scheme, with
∫ |X|² dμ ≈ Σ_i ρ_i u_i² h.  We differentiate the computed E_β(t) in time (fourth-order central
differences) and compare with the dissipation evaluated from the fields.

Checks: E_β(t) non-decreasing for particles (SA, USA on S^2) and for the FV solutions (both
fluxes, over ten e-folds of the fastest linear mode, while clusters form); particle dE/dt =
dissipation to 1e-6 relative; FV mismatch decreasing at first order in h while the density is
resolved (two e-folds).  (Much later, when one-cell clusters travel across cells, the upwind
energy can dip at the 1e-4 relative level: see metastability.json.)
"""
import numpy as np

import meanfield as mf
from meanfield import theory
from meanfield.cli.figures import Experiment, max_relative_decrease
from meanfield.solvers import circle, particles

BETAS = (1.0, 4.0)


def time_derivative(f, h):
    """Fourth-order central differences of samples f (m,) at spacing h, on the interior points 2..m-3."""
    return (f[:-4] - 8 * f[1:-3] + 8 * f[3:-1] - f[4:]) / (12 * h)


def particle_dissipation(model, xs):
    """(1/n) Σ_i w_i |X_i|² along a trajectory xs (m, n, d): w = 1 (USA) or Φ_i (SA)."""
    X, log_phi = particles.attention_field(model, xs)
    weight = np.exp(log_phi) if model.normalised else 1.0
    return np.mean(weight * np.sum(X ** 2, axis=-1), axis=-1)


def density_dissipation(model, sol):
    """Σ_i ρ_i u_i² h (USA), Σ_i Φ_i ρ_i u_i² h (SA) at every output of a circle DensitySolution."""
    theta = circle.cell_angles(sol.rho.shape[1])
    kernel = np.exp(model.beta * (np.cos(theta[:, None] - theta[None, :]) - 1.0))
    out = []
    for rho in sol.rho:
        u = circle.velocity(model, rho)
        weight = np.exp(model.beta) * (kernel @ (rho * sol.areas)) if model.normalised else 1.0
        out.append(float(np.sum(weight * rho * u ** 2 * sol.areas)))
    return np.array(out)


def main(argv=None):
    exp = Experiment("energy", __doc__.splitlines()[0], argv)
    n = exp.size(32, 128)
    outputs = exp.size(201, 401)
    x0 = mf.uniform_sphere(n, 3, seed=7)
    results = dict(n=n, particles={}, fv={})
    particle_runs = {}
    for beta in BETAS:
        for Model in (mf.SA, mf.USA):
            model = Model(beta)
            h = min(0.01, particles.default_dt(model, 3))   # output spacing: resolves USA's e^β speed-up
            t = h * np.arange(outputs)
            sol = particles.solve(model, x0, t, dt=h / 4)
            rate = time_derivative(sol.energy, h)
            diss = particle_dissipation(model, sol.x)
            mismatch = float(np.max(np.abs(rate - diss[2:-2])) / np.max(diss))
            label = f"{model.name} beta={beta:g}"
            dip = max_relative_decrease(sol.energy)
            exp.check(f"particles {label}: E_beta non-decreasing", dip <= 1e-13, max_relative_decrease=dip)
            exp.check(f"particles {label}: dE/dt = dissipation", mismatch <= 1e-6, relative_mismatch=mismatch)
            particle_runs[label] = (t, sol.energy, rate, diss)
            results["particles"][label] = dict(t=t, energy=sol.energy, dE_dt=rate, dissipation=diss, mismatch=mismatch)

    grids = exp.size([64, 128], [128, 256, 512])
    fv_runs = {}

    def rho0(x):
        theta = mf.circle_angles(x)
        return 1 + 0.6 * np.cos(theta) + 0.3 * np.cos(3 * theta + 1.0)

    for beta in BETAS:
        for Model in (mf.SA, mf.USA):
            model = Model(beta)
            label = f"{model.name} beta={beta:g}"
            # time unit: one e-fold of the fastest linear mode; the density concentrates within a few
            growth = max(theory.growth_rate(model, 2, l) for l in range(1, 4 * theory.most_unstable_mode(model, 2)))
            t_fv = np.linspace(0.0, 10.0 / growth, 201)
            smooth = t_fv <= 2.0 / growth          # the identity is compared while the density is resolved
            mismatches = []
            for cells in grids:
                for flux in ("upwind", "muscl"):
                    sol = circle.solve(model, rho0, t_fv, cells=cells, flux=flux)
                    dec = max_relative_decrease(sol.energy)
                    exp.check(f"FV {label}, {flux}, {cells} cells: E_beta non-decreasing up to t={t_fv[-1]:.3g}",
                              dec <= 1e-13, max_relative_decrease=dec, max_density=sol.rho[-1].max())
                    if flux == "upwind":
                        rate = time_derivative(sol.energy[smooth], t_fv[1])
                        diss = density_dissipation(model, sol)[smooth]
                        mismatches.append(float(np.max(np.abs(rate - diss[2:-2])) / np.max(diss)))
                        fv_runs[label, cells] = (t_fv, sol.energy)
            order = float(np.polyfit(np.log(grids), np.log(mismatches), 1)[0])
            exp.check(f"FV {label}: dE/dt - dissipation = O(h) for t <= {t_fv[smooth][-1]:.3g}", order <= -0.7,
                      mismatch=mismatches, observed_order=-order)
            results["fv"][label] = dict(cells=grids, t=t_fv, identity_window=float(t_fv[smooth][-1]),
                                        mismatch=mismatches, observed_order=-order)

    import matplotlib.pyplot as plt
    from meanfield.plotting.ticks import log_ticks
    fig, axes = plt.subplots(2, 2, figsize=(15, 11), constrained_layout=True)
    axes = axes.ravel()
    for c, (label, (t, energy, rate, diss)) in enumerate(particle_runs.items()):
        shown = label.replace(" beta=", ", β = ")
        axes[0].plot(t[1:], energy[1:] / energy[0], color=f"C{c}", lw=2, label=shown)
        axes[2].semilogy(t, diss, color=f"C{c}", lw=1.5, zorder=1, label=f"{shown}: dissipation (line)")
        axes[2].semilogy(t[2:-2], rate, "o", mfc="none", ms=5, markevery=max(1, rate.size // 12), color=f"C{c}",
                         zorder=2, label=f"{shown}: $dE_\\beta/dt$ (circles)")
    for c, beta in enumerate(BETAS):
        for k, name in enumerate(("SA", "USA")):
            t_fv, energy = fv_runs[f"{name} beta={beta:g}", grids[-1]]
            axes[1].plot(t_fv[1:], energy[1:] / energy[0], lw=2, color=f"C{2 * c + k}", label=f"{name}, β = {beta:g}")
    axes[0].set(xlabel="$t$", ylabel=r"$E_\beta(t) / E_\beta(0)$", xscale="log",
                title=f"particles on $S^2$ (n = {n}): $E_\\beta(t)$ never decreases\n"
                      "(each run ends at its own time: outputs spaced by its model's step)")
    axes[1].set(xlabel="$t$", ylabel=r"$E_\beta(t) / E_\beta(0)$", xscale="log",
                title=f"finite volumes on $S^1$ ({grids[-1]} cells, upwind): $E_\\beta(t)$\n"
                      "(each run to 10 e-folds of its fastest linear mode)")
    axes[2].set(xlabel="$t$", ylabel="rate",
                title=r"particles: $dE_\beta/dt$ vs $\int|X|^2 d\mu$ (USA), $\int\Phi|X|^2 d\mu$ (SA)")
    for label, r in results["fv"].items():
        axes[3].loglog(r["cells"], r["mismatch"], "o-", lw=2,
                       label=f"{label.replace(' beta=', ', β = ')} (order {r['observed_order']:.2f})")
    axes[3].loglog(grids, results["fv"][f"SA beta={BETAS[0]:g}"]["mismatch"][0] * grids[0] / np.array(grids), "k:",
                   label=r"$\propto h$")
    axes[3].set(xlabel="cells", ylabel=r"max $|dE_\beta/dt$ - dissipation$|$ / max dissipation",
                title="FV (upwind) on $S^1$: consistency of the energy identity")
    log_ticks(axes[3].xaxis, grids)
    for a in axes:
        a.legend(fontsize=10)
        a.title.set_fontsize(13)
        a.xaxis.label.set_fontsize(12)
        a.yaxis.label.set_fontsize(12)
    exp.finish(fig, results)


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
