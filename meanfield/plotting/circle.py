"""Plots of densities on S^1 (finite-volume solutions) with particles drawn over them.

- ``spacetime``: the heat map of ρ(t, θ), time across and the angle θ ∈ [0, 2π) up, with
  particle trajectories as lines;
- ``density_overlay``: ρ at one output time as a step function of θ against the histogram
  of particle angles at the nearest particle time (both densities against arc length).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..geometry import circle_angles
from ..clusters import point_mass_measure
from .tokens import AREA_PER_MASS, SMALLEST

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..solvers.results import DensitySolution, ParticleSolution

__all__ = ["spacetime", "density_overlay", "cluster_discs"]


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


def spacetime(sol: DensitySolution, ax: Axes | None = None, particles: ParticleSolution | None = None, *,
              log: bool = False, cmap: str = "viridis", colorbar: bool = True) -> Axes:
    r"""Heat map of ρ(t, θ) of a DensitySolution on S^1: t across, θ up; returns the Axes.

    .. math::

        (t, \theta) \mapsto \rho(t, \theta) \quad \text{or, with } \texttt{log}, \quad
        \log_{10} \max(\rho, 10^{-8} \max \rho).

    Parameters
    ----------
    sol : DensitySolution
        A solution on S^1.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure).
    particles : ParticleSolution, optional
        Tokens on S^1 whose trajectories θ_i(t) are drawn as white lines through their own output
        times (broken where they wrap around 2π).
    log : bool
        Colour log10 ρ (clipped 8 decades below the maximum), which shows the tails between clusters.
    cmap : str
        Colour map.
    colorbar : bool
        Draw a colour bar.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If the solution or the particles do not live on S^1.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.solvers import circle, particles
    >>> rho0 = mf.perturbed_uniform(2, seed=0)
    >>> sol = circle.solve(mf.SA(beta=4.0), rho0, [0.0, 1.0, 2.0], cells=64)
    >>> tokens = particles.solve(mf.SA(beta=4.0), mf.sample_density(rho0, 40, 2, seed=0), [0.0, 1.0, 2.0])
    >>> from meanfield.plotting.circle import spacetime
    >>> ax = spacetime(sol, particles=tokens, log=True)
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('t', 'θ')
    >>> plt.close(ax.figure)
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


def cluster_discs(ax: Axes, sol: DensitySolution, k: int, y: float) -> None:
    r"""Draw the clusters of a density on S^1 that are narrower than its cells (``point_mass_measure``) as
    discs at height ``y`` of ``ax`` (θ on the horizontal axis), area ∝ mass, each labelled with its mass.

    .. math::

        \text{area} = 25 + 900\, M \ \text{points}^2.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Axes with θ ∈ [0, 2π) horizontally.
    sol : DensitySolution
        A solution on S^1 (or any object with ``points``, ``areas`` and ``rho``).
    k : int
        Output index.
    y : float
        Height of the discs, in data coordinates.

    Returns
    -------
    None
        The discs and labels are added to ``ax``.

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib.pyplot as plt
    >>> from types import SimpleNamespace
    >>> import meanfield as mf
    >>> from meanfield.plotting.circle import cluster_discs
    >>> rho = np.full(64, 0.001)
    >>> rho[[10, 40]] = [7.0, 3.0]
    >>> grid = SimpleNamespace(points=mf.circle_points(2 * np.pi * (np.arange(64) + 0.5) / 64),
    ...                        areas=np.full(64, 2 * np.pi / 64), rho=rho[None])
    >>> fig, ax = plt.subplots()
    >>> cluster_discs(ax, grid, -1, 0.0)
    >>> sorted(t.get_text() for t in ax.texts)
    ['M = 0.3', 'M = 0.7']
    >>> plt.close(fig)
    """
    measure = point_mass_measure(sol, k)
    if not measure.masses.size:
        return
    theta = circle_angles(measure.centres)
    ax.scatter(theta, np.full(theta.size, y), s=SMALLEST + AREA_PER_MASS * measure.masses, color="C0",
               edgecolors="k", linewidths=0.8, alpha=0.6, zorder=3, clip_on=False,
               label="clusters of the density (area ∝ mass)")
    for angle, mass in zip(theta, measure.masses):
        ax.annotate(f"M = {mass:.2g}", (angle, y), xytext=(8, 8), textcoords="offset points", fontsize=8)


def density_overlay(sol: DensitySolution, k: int = -1, particles: ParticleSolution | None = None,
                    ax: Axes | None = None, *, bins: int | None = None) -> Axes:
    r"""ρ at output k of a DensitySolution on S^1 against a histogram of particle angles at the particle
    output time nearest to sol.t[k]; both integrate to 1 over [0, 2π). A cluster narrower than its cells
    (``meanfield.clusters.point_mass_measure``: mass M at angle θ_c) shows as a spike whose height says
    little about its mass, so each is also drawn as a disc on the θ axis, area ∝ M, labelled with M:

    .. math::

        \int_0^{2\pi} \rho_k \, d\theta = 1 = \int_0^{2\pi} \text{histogram}, \qquad
        \text{disc area} = 25 + 900\, M \ \text{points}^2.

    Parameters
    ----------
    sol : DensitySolution
        A solution on S^1.
    k : int
        Output index.
    particles : ParticleSolution, optional
        Tokens on S^1.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure).
    bins : int, optional
        Histogram bins (default min(cells, √(2n)), at least 8, equal arcs).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    IndexError
        If k is out of range.
    ValueError
        If the solution or the particles do not live on S^1.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.solvers import circle, particles
    >>> rho0 = mf.perturbed_uniform(2, seed=0)
    >>> sol = circle.solve(mf.SA(beta=4.0), rho0, [0.0, 1.0, 2.0], cells=64)
    >>> tokens = particles.solve(mf.SA(beta=4.0), mf.sample_density(rho0, 40, 2, seed=0), [0.0, 1.0, 2.0])
    >>> from meanfield.plotting.circle import density_overlay
    >>> ax = density_overlay(sol, -1, tokens)
    >>> ax.get_title()
    't = 2'
    >>> plt.close(ax.figure)
    """
    if not -sol.t.size <= k < sol.t.size:
        raise IndexError(f"k = {k} is out of range for a solution with {sol.t.size} output times")
    ax = _axes(ax)
    theta, rho = _circle_solution(sol)
    ax.stairs(rho[k], _edges(theta), label=f"density ({theta.size} cells)", color="C0", linewidth=1.5)
    cluster_discs(ax, sol, k, 0.5 * float(np.max(rho[k])))
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
