"""
Interaction energy and exact solutions
======================================

E_β[μ] = (1/2β) ∬ e^{β<x,y>} dμ(x) dμ(y) is non-decreasing along SA and USA, for particles and
for the density PDE alike: the particles' energy exactly, the finite-volume density's (default flux
``upwind2``) up to O(βh²) for cells of width h, a dip that appears when a cluster moves between
cells. At β = 0 the circle dynamics has an exact solution: the wrapped Cauchy
density keeps its shape, and the length r(t) of its mean ∫ x dμ_t follows
r(t) = r_0 e^{t/2} / sqrt(1 - r_0^2 + r_0^2 e^t). Both claims are checked here.
"""
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.exact import wrapped_cauchy_density, wrapped_cauchy_radius
from meanfield.measures import perturbed_uniform
from meanfield.solvers import circle, particles

t = np.linspace(0.0, 10.0, 41)
beta = 3.0
tokens = particles.solve(mf.USA(beta=beta), mf.uniform_sphere(300, 2, seed=2), t)
cells = 256
density = circle.solve(mf.USA(beta=beta), perturbed_uniform(2, amplitude=0.4, degree=2, seed=2), t, cells=cells)
h = 2 * np.pi / cells
for name, e, tol in (("particles", tokens.energy, 1e-10), ("density", density.energy, beta * h**2)):
    assert np.all(np.diff(e) >= -tol * np.abs(e).max()), name
    print(f"{name}: E_beta from {e[0]:.4f} to {e[-1]:.4f}, largest dip {max(0.0, -np.diff(e).min()):.1e}")

# beta = 0: the wrapped Cauchy family is exact
r0 = 0.3
exact = circle.solve(mf.SA(beta=0.0), lambda x: wrapped_cauchy_density(np.arctan2(x[:, 1], x[:, 0]), r0), t,
                     cells=256)
r = np.array([np.linalg.norm(exact.rho[k] * exact.areas @ exact.points) for k in range(t.size)])
print("max |r_FV - r_exact| =", np.abs(r - wrapped_cauchy_radius(t, r0)).max())

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ax1.plot(t, tokens.energy, label="300 tokens")
ax1.plot(t, density.energy, label=f"density ({cells} cells, upwind2)")
ax1.set(xlabel="t", ylabel="E_β", title=f"USA, β = {beta:g}: E_β is non-decreasing")
ax1.legend()
ax2.plot(t, wrapped_cauchy_radius(t, r0), "k-", label="exact r(t)")
ax2.plot(t, r, "o", ms=3, label="finite volumes")
ax2.set(xlabel="t", ylabel="r(t), length of the mean", title="β = 0: wrapped Cauchy solution")
ax2.legend()
fig.tight_layout()
