"""
The density PDE on the sphere S^2
=================================

``meanfield.solvers.sphere`` solves ∂_t ρ + div(ρ X[ρ]) = 0 on spherical Voronoi cells of an
icosphere. The solution concentrates into a few near-Dirac clusters, so the maps use a
logarithmic colour scale; tokens drawn from the same ρ_0 are shown on top.
"""
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.measures import perturbed_uniform, sample_density
from meanfield.plotting import particles_on_density
from meanfield.solvers import particles, sphere

model = mf.SA(beta=5.0)
rho0 = perturbed_uniform(3, amplitude=0.6, degree=2, seed=0)
t = np.linspace(0.0, 6.0, 4)
sol = sphere.solve(model, rho0, t, mesh=sphere.icosphere(3))
tokens = particles.solve(model, sample_density(rho0, 300, 3, seed=0), t)
print(sol)

fig = plt.figure(figsize=(12, 3.6))
for j, k in enumerate((0, 3)):
    ax = fig.add_subplot(1, 2, j + 1, projection="mollweide")
    particles_on_density(sol, k, tokens, ax=ax, resolution=200)
    ax.set_title(f"t = {sol.t[k]:g}")
fig.tight_layout()
