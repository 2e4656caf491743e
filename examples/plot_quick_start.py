"""
Quick start: tokens cluster on the sphere
=========================================

Softmax self-attention (SA) with Q = K = V = I moves n tokens on S^2 by

    dx_i/dt = P_{x_i} sum_j e^{β<x_i, x_j>} x_j / sum_k e^{β<x_i, x_k>},

the interaction energy E_β = (1/2β) ∬ e^{β<x,y>} dμ dμ increases along the flow, and the tokens
gather into a few clusters which slowly merge.
"""
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.clusters import cluster_count
from meanfield.solvers import particles

model = mf.SA(beta=4.0)
x0 = mf.uniform_sphere(200, 3, seed=0)
t = np.linspace(0.0, 15.0, 31)
sol = particles.solve(model, x0, t)
print(sol)

counts = [cluster_count(x, tol=1e-2) for x in sol.x]
print("clusters at t = 0, 5, 10, 15:", counts[0], counts[10], counts[20], counts[30])
assert np.all(np.diff(sol.energy) >= -1e-12 * sol.energy.max())   # E_β never decreases

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(sol.t, sol.energy)
ax1.set(xlabel="t", ylabel="E_β of the tokens", title="energy (non-decreasing)")
ax2.step(sol.t, counts, where="post")
ax2.set(xlabel="t", ylabel="clusters (geodesic scale 0.01)", yscale="log", title="cluster count")
fig.tight_layout()
