"""
The density PDE on the circle
=============================

On S^1 the density ρ(t, θ) solves ∂_t ρ + ∂_θ(ρ X[ρ]) = 0 with, for SA,
X[ρ] = (1/β) ∂_θ log Φ[ρ] and Φ[ρ](θ) = ∫ e^{β cos(θ - φ)} ρ(φ) dφ.
``meanfield.solvers.circle`` solves it with finite volumes (upwind fluxes, SSP-RK3 under the
positivity bound); particles drawn from the same ρ_0 follow it.
"""
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.measures import perturbed_uniform, sample_density
from meanfield.plotting import density_overlay, spacetime
from meanfield.solvers import circle, particles

model = mf.SA(beta=6.0)
rho0 = perturbed_uniform(2, amplitude=0.5, degree=3, seed=1)
t = np.linspace(0.0, 8.0, 41)
sol = circle.solve(model, rho0, t, cells=256)
tokens = particles.solve(model, sample_density(rho0, 400, 2, seed=0), t)
print(sol)
print("mass drift:", np.ptp(sol.mass), " min density:", sol.rho.min())

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
spacetime(sol, ax=ax1, particles=tokens, log=True)
density_overlay(sol, -1, particles=tokens, ax=ax2)
fig.tight_layout()
