"""Plots of densities on S^1 (finite-volume solutions) with particles drawn over them.

- ``spacetime``: the heat map of ρ(t, θ), time across and the angle θ ∈ [0, 2π) up, with
  particle trajectories as lines;
- ``density_overlay``: ρ at one output time as a step function of θ against the histogram
  of particle angles at the nearest particle time (both densities against arc length).
"""
import numpy as np

from ..geometry import circle_angles

__all__ = ["spacetime", "density_overlay"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(7, 4))
    return ax


def _circle_solution(sol):
    if sol.points.ndim != 2 or sol.points.shape[1] != 2:
        raise ValueError("these plots are for solutions on S^1 (points of shape (N, 2)); use "
                         "meanfield.plotting.sphere for S^2")
    theta = circle_angles(sol.points)
    order = np.argsort(theta)
    return theta[order], sol.rho[:, order]


def _particle_angles(particles):
    """Angles θ ∈ [0, 2π) of a ParticleSolution on S^1, shape (m, n)."""
    x = np.asarray(particles.x)
    if x.ndim != 3 or x.shape[-1] != 2:
        raise ValueError(f"particles must be one ParticleSolution on S^1 with x of shape (m, n, 2); got {x.shape} "
                         f"(for a batch, pass one member, e.g. ParticleSolution(t=p.t, x=p.x[:, b], energy=None))")
    return circle_angles(x)


def trajectory_lines(t, angles):
    """(times, angles) of all trajectories θ_i(t) (angles of shape (m, n)) as one polyline:
    a NaN after each token, and a NaN wherever a token wraps around 2π (|Δθ| > π)."""
    t = np.asarray(t, dtype=float)
    m, n = angles.shape
    jump = np.abs(np.diff(angles, axis=0)) > np.pi
    rows_t, rows_a = [], []
    for i in range(n):
        cut = np.flatnonzero(jump[:, i]) + 1
        for seg_t, seg_a in zip(np.split(t, cut), np.split(angles[:, i], cut)):
            rows_t.extend([seg_t, [np.nan]])
            rows_a.extend([seg_a, [np.nan]])
    return np.concatenate(rows_t), np.concatenate(rows_a)


def _edges(theta):
    """Cell edges around the sorted centres θ (periodic: midpoints, wrapped at 2π)."""
    gaps = np.diff(np.concatenate([theta, [theta[0] + 2 * np.pi]]))
    right = theta + gaps / 2
    return np.concatenate([[right[-1] - 2 * np.pi], right])


def spacetime(sol, ax=None, particles=None, *, log=False, cmap="viridis", colorbar=True):
    """Heat map of ρ(t, θ) of a DensitySolution on S^1: t across, θ up; returns the Axes.

    particles: an optional ParticleSolution on S^1 whose trajectories θ_i(t) are drawn as
    white lines through its own output times (broken where they wrap around 2π).  log=True
    colours log10 ρ (clipped 8 decades below the maximum), which shows the tails between clusters.
    """
    ax = _axes(ax)
    theta, rho = _circle_solution(sol)
    values = rho.T
    label = "ρ"
    if log:
        values = np.log10(np.maximum(values, rho.max() * 1e-8))
        label = "log10 ρ"
    mesh = ax.pcolormesh(sol.t, theta, values, shading="nearest", cmap=cmap)
    if colorbar:
        ax.figure.colorbar(mesh, ax=ax, label=label)
    if particles is not None:
        times, angles = trajectory_lines(particles.t, _particle_angles(particles))
        ax.plot(times, angles, "-", color="white", lw=0.6, alpha=0.8, label="particles")
    ax.set_xlabel("t")
    ax.set_ylabel("θ")
    ax.set_ylim(0, 2 * np.pi)
    ax.set_yticks([0, np.pi / 2, np.pi, 3 * np.pi / 2, 2 * np.pi], ["0", "π/2", "π", "3π/2", "2π"])
    return ax


def density_overlay(sol, k=-1, particles=None, ax=None, *, bins=None):
    """ρ at output k of a DensitySolution on S^1 against a histogram of particle angles at the
    particle output time nearest to sol.t[k] (density=True: both integrate to 1 over [0, 2π));
    bins defaults to min(cells, sqrt(2 n)) equal arcs.  Returns the Axes."""
    if not -sol.t.size <= k < sol.t.size:
        raise IndexError(f"k = {k} is out of range for a solution with {sol.t.size} output times")
    ax = _axes(ax)
    theta, rho = _circle_solution(sol)
    ax.stairs(rho[k], _edges(theta), label=f"density ({theta.size} cells)", color="C0", linewidth=1.5)
    if particles is not None:
        angles = _particle_angles(particles)
        j = int(np.argmin(np.abs(np.asarray(particles.t) - sol.t[k])))
        n = angles.shape[1]
        count = bins if bins is not None else max(8, min(theta.size, int(np.sqrt(2 * n))))
        ax.hist(angles[j], bins=count, range=(0, 2 * np.pi), density=True, color="C1", alpha=0.5,
                label=f"{n} particles, t = {particles.t[j]:.3g}")
        ax.legend()
    ax.set_xlim(0, 2 * np.pi)
    ax.set_xticks([0, np.pi / 2, np.pi, 3 * np.pi / 2, 2 * np.pi], ["0", "π/2", "π", "3π/2", "2π"])
    ax.set_xlabel("θ")
    ax.set_ylabel("density")
    ax.set_title(f"t = {sol.t[k]:.3g}")
    return ax
