"""Maps of densities on S^2 (finite-volume solutions) and particles drawn over them.

A Voronoi cell is the set of points nearest to its generator, so sampling each pixel's
nearest generator draws the piecewise-constant solution exactly, cell boundaries included.
Projections: "mollweide" (equal-area world map; longitude and latitude in radians) and
"ortho" (the hemisphere facing ``center``, seen from outside).  Colours are logarithmic by
default (the solutions concentrate into near-Diracs): ``log=True`` spans the panel's range of
densities, at most ``DECADES`` decades below its maximum, each panel with its own scale and
colour bar unless vmin/vmax are given.  A cluster of the density narrower than its cells (most
clusters past the collapse sit in cells far below a pixel) would draw as nothing: such clusters
(``meanfield.clusters.point_mass_measure``) are drawn as discs in the top colour, ringed in white, with
an area proportional to their mass.  Tokens are drawn as white dots, and their clusters
(``meanfield.clusters``) as rings whose area is proportional to the cluster's mass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial import cKDTree

from ..checks import as_choice, as_float_array, as_points
from ..clusters import point_mass_measure
from ..geometry import normalise
from ..solvers.results import ParticleSolution
from .tokens import AREA_PER_MASS, SMALLEST, cluster_markers

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..solvers.results import DensitySolution, ParticleSolution

__all__ = ["density_map", "particles_on_density"]

PROJECTIONS = ("mollweide", "ortho")
DECADES = 4.0      # largest range of the logarithmic colour scale below the maximum


def colour_norm(values, log=True, vmin=None, vmax=None, decades=DECADES):
    """The matplotlib Normalize for densities ``values``: when ``log``, a LogNorm from the
    smallest positive value (but at most ``decades`` decades below the maximum) to the maximum,
    or over [vmin, vmax]; else linear."""
    from matplotlib.colors import LogNorm, Normalize
    top = float(np.nanmax(values)) if vmax is None else float(vmax)
    if not log:
        return Normalize(vmin=vmin, vmax=vmax)
    top = top if top > 0 else 1.0
    if vmin is None or vmin <= 0:
        positive = np.asarray(values)[np.asarray(values) > 0]
        bottom = max(top * 10.0 ** -decades, float(positive.min()) if positive.size else 0.0)
        bottom = bottom if bottom < top else top / 10.0
    else:
        bottom = float(vmin)
    return LogNorm(vmin=bottom, vmax=top, clip=True)


def _axes(ax, projection):
    import matplotlib.pyplot as plt
    if ax is None:
        fig = plt.figure(figsize=(8, 4.5) if projection == "mollweide" else (5, 5))
        return fig.add_subplot(projection="mollweide" if projection == "mollweide" else None)
    if (projection == "mollweide") != (ax.name == "mollweide"):
        raise ValueError(f"ax has projection {ax.name!r} but projection={projection!r} was asked; create it "
                         f"with fig.add_subplot(projection='mollweide') for Mollweide maps, a plain Axes for 'ortho'")
    return ax


def lonlat(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Longitude and latitude (radians) of unit vectors, the coordinates of the Mollweide maps:

    .. math::

        \lambda = \operatorname{atan2}(x_2, x_1), \qquad \varphi = \arcsin x_3.

    Parameters
    ----------
    x : numpy.ndarray, shape (..., 3)
        Unit vectors.

    Returns
    -------
    lon, lat : numpy.ndarray, shape (...)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.plotting.sphere import lonlat
    >>> lon, lat = lonlat(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    >>> (lon / np.pi).round(2).tolist(), (lat / np.pi).round(2).tolist()
    ([0.5, 0.0], [0.0, 0.5])
    """
    return np.arctan2(x[..., 1], x[..., 0]), np.arcsin(np.clip(x[..., 2], -1.0, 1.0))


def _ortho_frame(center):
    """An orthonormal frame (e1, e2, center): the screen axes and the viewing direction."""
    c = normalise(center)
    helper = np.array([0.0, 0.0, 1.0]) if abs(c[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    e1 = normalise(np.cross(helper, c))
    return e1, np.cross(c, e1), c


def _snapshot(sol, k):
    """(sol, k) checked; on meshes that change over time, output k alone on its own mesh."""
    if not -sol.t.size <= k < sol.t.size:
        raise IndexError(f"k = {k} is out of range for a solution with {sol.t.size} output times")
    if sol.points.shape[-1] != 3:
        raise ValueError("these maps are for solutions on S^2 (points of shape (N, 3))")
    return (sol, k) if sol.cells is None else (sol.snapshot(k), 0)


def _center(sol, k, center):
    if center is None:
        return sol.points[int(np.argmax(sol.rho[k]))]
    c = as_float_array(center, "center")
    if c.shape != (3,) or not np.linalg.norm(c) > 0:
        raise ValueError("center must be a nonzero vector of R^3 (the direction the hemisphere faces)")
    return c


def density_map(sol: DensitySolution, k: int = -1, projection: str = "mollweide", ax: Axes | None = None, *,
                center: ArrayLike | None = None, resolution: int = 400, cmap: str = "viridis",
                colorbar: bool = True, vmin: float | None = None, vmax: float | None = None,
                log: bool = True, clusters: bool = True) -> Axes:
    r"""Draw the density ρ at output ``k`` of a sphere DensitySolution; returns the Axes.

    Each pixel shows the density of its nearest generator (its cell); with ``log`` the colours are
    logarithmic over ``DECADES`` decades below the maximum. With ``clusters``, every cluster too narrow
    for its cells (``point_mass_measure``: mass M, centre b) is drawn as a disc at b in the colour map's
    top colour, ringed in white, so that mass is seen where it is however small its cells:

    .. math::

        \text{pixel } y \mapsto \rho_{i(y)}, \qquad i(y) = \operatorname{argmin}_i |y - c_i|, \qquad
        \text{disc area} = 25 + 900\, M \ \text{points}^2.

    Parameters
    ----------
    sol : DensitySolution
        A solution on S^2 (points of shape (N, 3)).
    k : int
        Output index.
    projection : {"mollweide", "ortho"}
        Equal-area world map, or the hemisphere around ``center``. ``ax`` must match (Mollweide
        axes for "mollweide").
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure).
    center : array_like, shape (3,), optional
        Direction the "ortho" hemisphere faces (default: the cell of largest density).
    resolution : int
        Pixels across the map.
    cmap : str
        Colour map.
    colorbar : bool
        Draw a colour bar.
    vmin, vmax : float, optional
        Colour range (default: this panel's own).
    log : bool
        Logarithmic colours (values below the range are shown in the lowest colour), or linear.
    clusters : bool
        Draw the clusters narrower than their cells as discs (area proportional to mass).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If the solution is not on S^2, the projection is unknown or does not match ``ax``, or
        ``center`` is not a nonzero vector of R^3.
    IndexError
        If k is out of range.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> sol = sphere.solve(mf.SA(beta=2.0), mf.perturbed_uniform(3, seed=0), [0.0, 0.5], mesh=sphere.icosphere(2))
    >>> from meanfield.plotting.sphere import density_map
    >>> ax = density_map(sol, resolution=60)
    >>> ax.name, ax.get_title()
    ('mollweide', 't = 0.5')
    >>> plt.close(ax.figure)
    >>> ax = density_map(sol, projection="ortho", resolution=60, colorbar=False)
    >>> plt.close(ax.figure)
    """
    return draw_density(sol, k, projection, ax, center, resolution, cmap, colorbar, vmin, vmax, log, clusters)[0]


def draw_density(sol, k: int, projection: str, ax, center, resolution: int, cmap: str, colorbar: bool,
                 vmin: float | None, vmax: float | None, log: bool = True, clusters: bool = True):
    """Draw output ``k`` of a density on S^2 (``density_map``'s work, also the frames of ``animate``),
    and return the ortho frame on which tokens are then drawn.

    Parameters
    ----------
    sol, k, projection, ax, center, resolution, cmap, colorbar, vmin, vmax, log, clusters
        As for ``density_map`` (all given; ``ax`` may be None: a new figure).

    Returns
    -------
    ax : matplotlib.axes.Axes
    frame : tuple of numpy.ndarray or None
        The ortho frame (e1, e2, center), None on a Mollweide map.

    Examples
    --------
    >>> import matplotlib.pyplot as plt, meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> from meanfield.plotting.sphere import draw_density
    >>> sol = sphere.solve(mf.SA(1.0), lambda x: 1 + x[:, 2] ** 2, [0.0], mesh=sphere.icosphere(2))
    >>> ax, frame = draw_density(sol, 0, "ortho", None, [0, 0, 1], 50, "viridis", False, None, None)
    >>> [v.shape for v in frame]
    [(3,), (3,), (3,)]
    >>> plt.close("all")
    """
    as_choice(projection, "projection", PROJECTIONS)
    sol, k = _snapshot(sol, k)
    rho = sol.rho[k]
    ax = _axes(ax, projection)
    tree = cKDTree(sol.points)
    frame = None
    if projection == "mollweide":
        lon = np.linspace(-np.pi, np.pi, 2 * resolution + 1)
        lat = np.linspace(-np.pi / 2, np.pi / 2, resolution + 1)
        lon_c, lat_c = np.meshgrid(0.5 * (lon[1:] + lon[:-1]), 0.5 * (lat[1:] + lat[:-1]))
        x = np.stack([np.cos(lat_c) * np.cos(lon_c), np.cos(lat_c) * np.sin(lon_c), np.sin(lat_c)], axis=-1)
        values = rho[tree.query(x.reshape(-1, 3))[1]].reshape(lon_c.shape)
        image = ax.pcolormesh(lon, lat, values, shading="flat", cmap=cmap, rasterized=True,
                              norm=colour_norm(rho, log, vmin, vmax))
        ax.set_xticklabels([])
        ax.grid(True, alpha=0.3)
    else:
        frame = e1, e2, c = _ortho_frame(_center(sol, k, center))
        u = np.linspace(-1.0, 1.0, resolution)
        uu, vv = np.meshgrid(u, u)
        r2 = uu ** 2 + vv ** 2
        inside = r2 <= 1.0
        x = (uu[inside, None] * e1 + vv[inside, None] * e2 + np.sqrt(1.0 - r2[inside])[:, None] * c)
        values = np.full(uu.shape, np.nan)
        values[inside] = rho[tree.query(x)[1]]
        image = ax.imshow(np.ma.masked_invalid(values), origin="lower", extent=(-1, 1, -1, 1), cmap=cmap,
                          norm=colour_norm(rho, log, vmin, vmax), interpolation="nearest")
        ax.add_patch(_circle())
        ax.set_aspect("equal")
        ax.set_axis_off()
    if clusters:
        _cluster_discs(ax, sol, k, projection, frame, image.cmap(1.0))
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.7, label="density ρ" + (" (log scale)" if log else ""))
    ax.set_title(f"t = {sol.t[k]:.3g}")
    return ax, frame


def _cluster_discs(ax, sol, k, projection, frame, colour):
    """The density's clusters narrower than their cells as discs of area SMALLEST + AREA_PER_MASS · M."""
    measure = point_mass_measure(sol, k)
    if measure.masses.size:
        xy, front = _screen(measure.centres, projection, frame)
        ax.scatter(xy[front, 0], xy[front, 1], s=SMALLEST + AREA_PER_MASS * measure.masses[front], color=colour,
                   edgecolors="w", linewidths=1.2, zorder=3)


def _screen(points, projection, frame):
    """Map coordinates of points (n, 3) on a Mollweide map or an ortho view (``frame``), and which are
    visible (the front hemisphere of the ortho view)."""
    if projection == "mollweide":
        return np.stack(lonlat(points), axis=-1), np.ones(len(points), dtype=bool)
    e1, e2, c = frame
    return np.stack([points @ e1, points @ e2], axis=-1), points @ c > 0


def _circle():
    from matplotlib.patches import Circle
    return Circle((0, 0), 1.0, fill=False, color="k", lw=0.8)


def _particle_points(particles, t):
    if isinstance(particles, ParticleSolution):
        x = particles.x
        if x.ndim != 3:
            raise ValueError("particles holds a batch of runs; pass one run's points (n, 3) instead")
        return x[int(np.argmin(np.abs(particles.t - t)))]
    return as_points(particles, "particles", d=3)


def particles_on_density(sol: DensitySolution, k: int, particles: ArrayLike | ParticleSolution,
                         ax: Axes | None = None, *, projection: str = "mollweide",
                         center: ArrayLike | None = None, s: float = 6, color: str = "w", resolution: int = 400,
                         cmap: str = "viridis", colorbar: bool = True, vmin: float | None = None,
                         vmax: float | None = None, log: bool = True, clusters: bool = True) -> Axes:
    r"""``density_map`` of output ``k`` (same keywords) with the tokens drawn on top; returns the Axes.

    Tokens are dots of area ``s``; with ``clusters`` each cluster (``meanfield.clusters``) is also
    ringed, the ring's area proportional to the cluster's mass (``cluster_markers``):

    .. math::

        \text{area} = 25 + 900\, m_C \ \text{points}^2.

    With projection="ortho" only the tokens on the visible hemisphere are drawn.

    Parameters
    ----------
    sol : DensitySolution
        A solution on S^2.
    k : int
        Output index.
    particles : array_like (n, 3) or ParticleSolution
        Points, or a run (its output nearest to time sol.t[k]).
    ax : matplotlib.axes.Axes, optional
        Where to draw.
    projection, center, resolution, cmap, colorbar, vmin, vmax, log
        As in ``density_map``.
    s : float
        Area of the token dots (points²).
    color : str
        Colour of the dots and rings.
    clusters : bool
        Ring the clusters.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        As ``density_map``; also for points that are not unit vectors of R^3, or a batch of runs.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> sol = sphere.solve(mf.SA(beta=2.0), mf.perturbed_uniform(3, seed=0), [0.0, 0.5], mesh=sphere.icosphere(2))
    >>> from meanfield.plotting.sphere import particles_on_density
    >>> ax = particles_on_density(sol, -1, mf.uniform_sphere(50, 3, seed=0), resolution=60)
    >>> len(ax.collections) >= 2                      # the map and the tokens
    True
    >>> plt.close(ax.figure)
    """
    x = _particle_points(particles, sol.t[k])
    ax, frame = draw_density(sol, k, projection, ax, center, resolution, cmap, colorbar, vmin, vmax, log)
    draw_tokens(ax, x, projection, frame, s=s, color=color, clusters=clusters)
    return ax


def draw_tokens(ax, x, projection="mollweide", frame=None, *, s=6, color="w", clusters=True):
    """Tokens x (n, 3) as dots on a Mollweide or ortho map (``frame`` from the ortho view), and
    with ``clusters`` one ring per cluster, area proportional to its mass."""
    if clusters:
        centres, area = cluster_markers(x)
        xy, front = _screen(centres, projection, frame)
        ax.scatter(xy[front, 0], xy[front, 1], s=area[front], facecolors="none", edgecolors=color, linewidths=1.2,
                   zorder=4)
    xy, front = _screen(x, projection, frame)
    ax.scatter(xy[front, 0], xy[front, 1], s=s, c=color, edgecolors="k", linewidths=0.3)
