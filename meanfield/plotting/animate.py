"""Animated GIFs of solutions on S^1 and S^2: the density with the tokens on top.

Frames are drawn with the static plots of this package and written by matplotlib's Pillow
writer (no ffmpeg needed). On S^1 each frame shows ρ(θ) on a logarithmic axis with the tokens
as dots on the θ axis and their clusters as rings (area ∝ mass); on S^2 a Mollweide map of ρ
in logarithmic colours (one scale for the whole film, so frames compare), the tokens as dots,
their clusters as rings and the last stretch of each trajectory as a line.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..checks import as_count, as_positive
from ..geometry import circle_angles
from .circle import cluster_discs
from .sphere import draw_density, lonlat, draw_tokens
from .tokens import cluster_markers

if TYPE_CHECKING:
    from ..solvers.results import DensitySolution, ParticleSolution

__all__ = ["animate"]

MIN_WIDTH = 600        # pixels: readable in a talk


def _tokens(particles):
    """(t, x) of one system of a ParticleSolution (the first draw of a batch)."""
    x = np.asarray(particles.x)
    if x.ndim == 4:
        x = x[:, 0]
    if x.ndim != 3:
        raise ValueError(f"particles.x must have shape (m, n, d) or (m, B, n, d); got {x.shape}")
    return np.asarray(particles.t, dtype=float), x


def animate(path: str | Path, density: DensitySolution | None = None, particles: ParticleSolution | None = None,
            *, frames: int = 60, fps: float = 8.0, size: tuple = (8.0, 4.5), dpi: int = 100, tail: int = 8,
            decades: float = 4.0, title: str | None = None) -> Path:
    r"""Write an animated GIF of a density and/or tokens on S^1 or S^2; returns its path.

    Frames are spread evenly over the output times; the density is coloured on a logarithmic scale
    ``decades`` decades deep below the film's maximum:

    .. math::

        \rho \mapsto \log_{10} \max\big(\rho, 10^{-\text{decades}} \max_{t, i} \rho\big).

    Parameters
    ----------
    path : str or pathlib.Path
        Output file (``.gif``).
    density : DensitySolution, optional
        Finite-volume solution on S^1 or S^2; its output times are the film's clock.
    particles : ParticleSolution, optional
        Tokens on the same sphere (a batch shows its first draw); each frame shows the output
        nearest in time to the frame's. At least one of density and particles is needed.
    frames : int
        Number of frames, spread evenly over the output times (fewer if there are fewer).
    fps : float
        Frames per second.
    size : tuple of float
        Figure size in inches.
    dpi : int
        Resolution: the GIF is ``size[0] · dpi`` pixels wide, which must be at least 600.
    tail : int
        On S^2, each token's trajectory over the last ``tail`` frames is drawn as a line.
    decades : float
        Range of the logarithmic density scale below the film's maximum density.
    title : str, optional
        Title prefix (default: the model).

    Returns
    -------
    pathlib.Path
        The GIF written.

    Raises
    ------
    ValueError
        If neither a density nor particles is given, the GIF would be narrower than 600 px, the
        solutions do not live on one sphere S^1 or S^2, or a setting is out of range.

    Examples
    --------
    >>> import os, tempfile
    >>> import meanfield as mf
    >>> from meanfield.plotting import animate
    >>> from meanfield.solvers import circle
    >>> sol = circle.solve(mf.SA(beta=4.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0, 2.0], cells=64)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = animate(os.path.join(folder, "film.gif"), density=sol, frames=3, size=(6.0, 3.0))
    ...     print(path.name, path.stat().st_size > 0)
    film.gif True
    """
    if density is None and particles is None:
        raise ValueError("animate needs a density (DensitySolution), particles (ParticleSolution) or both")
    frames = as_count(frames, "frames")
    fps = as_positive(fps, "fps")
    decades = as_positive(decades, "decades")
    tail = as_count(tail, "tail", minimum=0)
    width = float(size[0]) * float(dpi)
    if width < MIN_WIDTH:
        raise ValueError(f"size[0] * dpi = {width:g} px; the GIF must be at least {MIN_WIDTH} px wide "
                         f"(raise size or dpi)")
    clock = np.asarray((density if density is not None else particles).t, dtype=float)
    d = (density.points if density is not None else _tokens(particles)[1]).shape[-1]
    if d not in (2, 3):
        raise ValueError(f"animate draws solutions on S^1 or S^2; got points in R^{d}")
    if density is not None and particles is not None and _tokens(particles)[1].shape[-1] != d:
        raise ValueError("density and particles must live on the same sphere")
    picks = np.unique(np.linspace(0, clock.size - 1, min(frames, clock.size)).round().astype(int))
    model = (density if density is not None else particles).model
    title = title if title is not None else (repr(model) if model is not None else "")

    import matplotlib.pyplot as plt
    from matplotlib.animation import PillowWriter

    path = Path(path)
    fig = plt.figure(figsize=size)
    draw = _circle_frame if d == 2 else _sphere_frame
    top = float(np.max(density.rho)) if density is not None else None
    writer = PillowWriter(fps=fps)
    with writer.saving(fig, str(path), dpi):
        for j, k in enumerate(picks):
            fig.clf()
            draw(fig, density, particles, clock, picks[max(0, j - tail):j + 1], top, decades)
            fig.suptitle(f"{title}   t = {clock[k]:.3g}".strip())
            writer.grab_frame()
    plt.close(fig)
    return path


def _nearest(particles, t):
    times, x = _tokens(particles)
    return x[int(np.argmin(np.abs(times - t)))]


def _circle_frame(fig, density, particles, clock, recent, top, decades):
    ax = fig.add_subplot()
    k = recent[-1]
    floor = top * 10.0 ** -decades if top is not None else None
    if density is not None:
        theta = circle_angles(density.points)
        order = np.argsort(theta)
        ax.plot(theta[order], np.maximum(density.rho[k, order], floor), color="C0", lw=1.5, label="density ρ")
        ax.set_yscale("log")
        ax.set_ylim(floor, 2 * top)
        ax.set_ylabel("density ρ (log scale)")
        base = floor * 1.5
        cluster_discs(ax, density, k, floor * 4)
    else:
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        base = 0.5
    if particles is not None:
        x = _nearest(particles, clock[k])
        centres, area = cluster_markers(x)
        ax.scatter(circle_angles(centres), np.full(len(centres), base), s=area, facecolors="none",
                   edgecolors="C3", linewidths=1.2, label="clusters of the tokens (area ∝ mass)", clip_on=False)
        ax.scatter(circle_angles(x), np.full(len(x), base), s=10, color="C3", edgecolors="k", linewidths=0.3,
                   label=f"{len(x)} tokens", clip_on=False)
    ax.set_xlim(0, 2 * np.pi)
    ax.set_xticks([0, np.pi / 2, np.pi, 3 * np.pi / 2, 2 * np.pi], ["0", "π/2", "π", "3π/2", "2π"])
    ax.set_xlabel("θ")
    ax.legend(loc="upper right", fontsize=8)


def _sphere_frame(fig, density, particles, clock, recent, top, decades):
    k = recent[-1]
    if density is not None:
        ax, _ = draw_density(density, k, "mollweide", fig.add_subplot(projection="mollweide"), None, 150, "viridis",
                             True, top * 10.0 ** -decades, top, True)
        colour = "w"
    else:
        ax = fig.add_subplot(projection="mollweide")
        ax.grid(True, alpha=0.3)
        ax.set_xticklabels([])
        colour = "C3"
    ax.set_title("")
    if particles is not None:
        if len(recent) > 1:
            path = np.stack([_nearest(particles, clock[j]) for j in recent])     # (frames, n, 3)
            lon, lat = lonlat(path)
            jump = np.abs(np.diff(lon, axis=0)) > np.pi      # do not draw across the map's edge
            lon[1:][jump] = np.nan
            ax.plot(lon, lat, "-", color=colour, lw=0.7, alpha=0.7)
        draw_tokens(ax, _nearest(particles, clock[k]), "mollweide", s=8, color=colour)
