"""Noise (McKean–Vlasov): the noisy Kuramoto transition at D_c = 1/2 and its stationary states.

With Brownian noise σ on S^1 (generator (σ²/2) Δ, D = σ²/2) the density solves
∂_t ρ + ∂_θ(ρ u) = D ∂²_θ ρ (``circle.solve(..., diffusion=D)``; particles: ``particles.solve(...,
noise=σ)``).  At β = 0 (SA = USA = the Kuramoto model, unit coupling) u(θ) = r sin(ψ - θ) with
r e^{iψ} = ∫ e^{iθ} dρ.  The first Fourier mode of the uniform state grows at λ_1 - D = 1/2 - D
(``growth_rate(model, 2, 1, diffusion=D)``), so the uniform state loses stability at D_c = 1/2.
Below it the stationary states are von Mises densities ρ ∝ exp((r/D) cos(θ - ψ)) with
r = I_1(r/D)/I_0(r/D) (self-consistency), which has a root r > 0 iff D < 1/2.

Checks: FV growth rates of the first mode against 1/2 - D (β = 0) and λ_1(β) - D (SA, β = 1), the
critical noise D_c within 2 %; the long-time FV profile at D < 1/2 against the self-consistent von
Mises law (r to 2e-3, L1 to 5e-3); noisy particles (Euler–Maruyama) against both: time-averaged
order parameter within 1.5/sqrt(n) of r, and their empirical measure W1-close to the FV profile.
"""
import numpy as np
from scipy.optimize import brentq
from scipy.special import ive

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.solvers import circle, particles


def self_consistent_r(D):
    """The root r > 0 of r = I_1(r/D)/I_0(r/D) (0 if D >= 1/2)."""
    if D >= 0.5:
        return 0.0
    return brentq(lambda r: ive(1, r / D) / ive(0, r / D) - r, 1e-9, 1 - 1e-12)


def von_mises(theta, kappa):
    return np.exp(kappa * (np.cos(theta) - 1)) / (2 * np.pi * ive(0, kappa))


def first_mode_rate(model, D, cells, eps=1e-4, T=2.0):
    theta = circle.cell_angles(cells)
    sol = circle.solve(model, lambda x: 1 + eps * x[:, 0], np.linspace(0, T, 5), cells=cells, diffusion=D,
                       flux="muscl")
    return float(np.polyfit(sol.t, np.log(np.abs(sol.rho @ np.cos(theta))), 1)[0])


def main(argv=None):
    exp = Experiment("noise", __doc__.splitlines()[0], argv)
    cells = exp.size(256, 512)
    ds = np.linspace(0.1, 0.9, exp.size(3, 9))
    rates = {}
    for label, model in (("beta=0", mf.SA(0.0)), ("SA beta=1", mf.SA(1.0))):
        measured = np.array([first_mode_rate(model, D, cells) for D in ds])
        theory = np.array([mf.growth_rate(model, 2, 1, diffusion=D) for D in ds])
        k = int(np.flatnonzero(np.diff(np.sign(measured)))[0])
        critical = float(ds[k] - measured[k] * (ds[k + 1] - ds[k]) / (measured[k + 1] - measured[k]))
        expected = mf.growth_rate(model, 2, 1)
        exp.check(f"{label}: first-mode rates = lambda_1 - D", np.max(np.abs(measured - theory)) < 5e-3,
                  max_error=float(np.max(np.abs(measured - theory))))
        exp.check(f"{label}: critical noise D_c = lambda_1 = {expected:.4f} within 2 %",
                  abs(critical / expected - 1) < 0.02, measured=critical)
        rates[label] = dict(D=ds, measured=measured, theory=theory, critical=critical, expected=expected)

    D, T = 0.25, exp.size(30.0, 60.0)
    r_star = self_consistent_r(D)
    theta = circle.cell_angles(cells)
    fv = circle.solve(mf.SA(0.0), lambda x: 1 + 0.1 * x[:, 0], [0, T], cells=cells, diffusion=D, flux="muscl")
    rho = fv.rho[-1]
    h = 2 * np.pi / cells
    r_fv = float(abs(h * rho @ np.exp(1j * theta)))
    l1 = float(h * np.sum(np.abs(rho - von_mises(theta, r_star / D))))
    exp.check(f"FV stationary state at D = {D}: order parameter = self-consistent r", abs(r_fv - r_star) < 2e-3,
              fv=r_fv, theory=r_star)
    exp.check("FV stationary profile = von Mises exp((r/D) cos θ) in L1", l1 < 5e-3, l1=l1)

    n = exp.size(400, 2000)
    sigma = np.sqrt(2 * D)
    t = np.linspace(0, T, 61)
    x0 = mf.circle_points(np.random.default_rng(0).uniform(0, 2 * np.pi, n))
    sol = particles.solve(mf.SA(0.0), x0, t, method="euler", dt=0.01, noise=sigma, seed=1, energy=False)
    z = sol.x[..., 0] + 1j * sol.x[..., 1]
    r_t = np.abs(z.mean(axis=1))
    late = t >= T / 2
    r_particles = float(r_t[late].mean())
    exp.check(f"particles (n = {n}): time-averaged r within 1.5/sqrt(n) of the self-consistent r",
              abs(r_particles - r_star) < 1.5 / np.sqrt(n), particles=r_particles, theory=r_star)
    psi = np.angle(z[-1].mean())
    aligned = np.angle(z[-1] * np.exp(-1j * psi))
    w1 = mf.wasserstein(mf.circle_points(aligned), None, fv.points, rho * h, p=1)
    exp.check("particles vs FV stationary profile: W1 < 2/sqrt(n)", w1 < 2 / np.sqrt(n), w1=w1)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5), constrained_layout=True)
    ax = axes[0]
    for c, (label, r) in enumerate(rates.items()):
        ax.plot(r["D"], r["theory"], "-", color=f"C{c}", label=f"{label}: λ_1 − D (theory)")
        ax.plot(r["D"], r["measured"], "o", color=f"C{c}", label=f"{label}: FV, D_c = {r['critical']:.4f}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="diffusion D = σ²/2", ylabel="growth rate of the first mode",
           title="Loss of stability of the uniform state")
    ax.legend(fontsize=9)
    ax = axes[1]
    centred = np.argsort(np.angle(np.exp(1j * theta)))           # θ in (-π, π], the peak in the middle
    wrapped = np.angle(np.exp(1j * theta))[centred]
    ax.plot(wrapped, von_mises(wrapped, r_star / D), "k-", lw=3, alpha=0.4, label=f"von Mises, r = {r_star:.4f}")
    ax.plot(wrapped, rho[centred], "C1--", label=f"FV at t = {T:g} ({cells} cells)")
    ax.hist(aligned, bins=48, range=(-np.pi, np.pi), density=True, alpha=0.35, color="C0",
            label=f"particles, n = {n} (aligned)")
    ax.set(xlabel="θ − ψ", ylabel="density", title=f"Stationary state, β = 0, D = {D}")
    ax.legend(fontsize=9)
    ax = axes[2]
    ax.plot(t, r_t, "C0-", label=f"particles, n = {n}")
    ax.axhline(r_star, color="k", ls=":", label="self-consistent r")
    ax.set(xlabel="t", ylabel="order parameter r(t)", title="Noisy Kuramoto particles relax to r")
    ax.legend(fontsize=9)
    exp.finish(fig, dict(rates=rates, D=D, T=T, cells=cells, r_theory=r_star, r_fv=r_fv, l1=l1, n=n,
                         r_particles=r_particles, w1=w1, t=t, r_t=r_t))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
