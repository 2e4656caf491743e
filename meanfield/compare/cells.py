"""The density's cells in a comparison: on S^1 a number of cells, on S^2 a uniform icosphere or
adaptive cells (``sphere_cells``), the coarser cells of the grid-error reference (``coarser_cells``),
the settings checked before any solve (``check_density_settings``) and the description of the cells
a comparison used (``grid_info``, ``describe_grid``)."""
import numpy as np

from ..checks import as_choice, as_count
from ..geometry import GEOMETRIES
from ..solvers import circle, sphere
from ..solvers.adaptive import check_levels

__all__ = ["sphere_cells", "coarser_cells", "check_density_settings", "grid_info", "describe_grid", "FLUX",
           "LEVEL", "ADAPTIVE", "MESHES", "MAX_LEVEL", "MAX_FINEST"]

MAX_LEVEL = 8              # finest icosphere the command accepts (655,362 cells)
MAX_FINEST = 9             # finest adaptive level accepted (the level tested in ``solvers.adaptive``)
MESHES = ("adaptive", "uniform")   # the density's cells on S^2
LEVEL = 4                  # icosphere level of mesh="uniform" (2562 cells)
# adaptive cells on S^2 by default (mesh="adaptive"): the most accurate setting whose whole command fits the
# budget of the uniform level-4 run it replaced (measured in docs/comparison.md)
ADAPTIVE = dict(base=3, finest=8, bulk=4)
# the solvers' default flux (second order, clusters still transported): on the default circle and sphere
# comparisons it has 2.8x and 2.0x less grid error than first-order "upwind" (docs/comparison.md)
FLUX = "upwind2"


def sphere_cells(mesh=None, level=None, base=None, finest=None, bulk=None):
    r"""The density's cells on S^2, resolved and checked: a uniform icosphere or adaptive cells.

    ``mesh=None`` means "uniform" when ``level`` is given and "adaptive" otherwise, so that ``level``
    alone keeps its meaning (``icosphere(level)``).  Adaptive cells (``meanfield.solvers.adaptive``)
    run from level ``base`` where the density is thin to ``finest`` in the clusters, with every cell
    at least ``bulk`` where the density is at least a tenth of its mean (the smooth phase, where the
    cluster masses are decided):

    .. math::

        \text{base} \le \text{bulk} \le \text{finest} \le 9.

    Parameters
    ----------
    mesh : {"adaptive", "uniform"}, optional
        The kind of cells (default: "uniform" if ``level`` is given, else "adaptive").
    level : int, optional
        ``icosphere(level)`` for mesh="uniform" (default ``LEVEL`` = 4), at most ``MAX_LEVEL``.
    base, finest, bulk : int, optional
        The adaptive levels (defaults ``ADAPTIVE``: 3, 8, 4; ``bulk`` by default 4 clipped to
        [base, finest]).

    Returns
    -------
    dict
        ``{"mesh": "uniform", "level": L}`` or ``{"mesh": "adaptive", "base": .., "finest": .., "bulk": ..}``.

    Raises
    ------
    ValueError
        For a level out of range, levels out of order, or settings of the other kind of cells
        (``level`` with mesh="adaptive", ``base``/``finest``/``bulk`` with mesh="uniform").
    TypeError
        For levels that are not integers.

    Examples
    --------
    >>> from meanfield.compare import sphere_cells
    >>> sphere_cells()
    {'mesh': 'adaptive', 'base': 3, 'finest': 8, 'bulk': 4}
    >>> sphere_cells(level=3)
    {'mesh': 'uniform', 'level': 3}
    >>> sphere_cells(base=2, finest=3)
    {'mesh': 'adaptive', 'base': 2, 'finest': 3, 'bulk': 3}
    """
    given = [name for name, value in (("base", base), ("finest", finest), ("bulk", bulk)) if value is not None]
    if mesh is None:
        mesh = "uniform" if level is not None else "adaptive"
    as_choice(mesh, "mesh", MESHES)
    if mesh == "uniform":
        if given:
            raise ValueError(f"{'/'.join(given)} set adaptive cells; mesh 'uniform' is icosphere(level): "
                             f"drop {'/'.join(given)} or use mesh 'adaptive'")
        level = as_count(LEVEL if level is None else level, "level", minimum=0)
        if level > MAX_LEVEL:
            raise ValueError(f"level must be <= {MAX_LEVEL} (icosphere({MAX_LEVEL}) has {10 * 4 ** MAX_LEVEL + 2} "
                             f"cells); got {level}")
        return dict(mesh="uniform", level=level)
    if level is not None:
        raise ValueError("level selects a uniform icosphere(level): use mesh 'uniform' (or level alone), or set "
                         "adaptive cells by base/finest/bulk")
    base = as_count(ADAPTIVE["base"] if base is None else base, "base", minimum=0)
    finest = as_count(ADAPTIVE["finest"] if finest is None else finest, "finest", minimum=0)
    if finest > MAX_FINEST:
        raise ValueError(f"finest must be <= {MAX_FINEST} (the finest level of adaptive cells tested); got {finest}")
    base, finest, bulk = check_levels(base, finest, min(max(ADAPTIVE["bulk"], base), finest) if bulk is None else bulk)
    return dict(mesh="adaptive", base=base, finest=finest, bulk=bulk)


def coarser_cells(cells):
    """The cells of the grid-error reference: one level less everywhere, or None when there is none.

    A uniform ``icosphere(level)`` gives ``icosphere(level - 1)``.  Adaptive cells give base, bulk and
    finest each one less: the refinement criterion measures a cell's mass in units of a base cell, so
    lowering ``base`` by one lowers the level every cell asks for by one, and with ``bulk`` and
    ``finest`` one less the reference is the same run with every cell one level coarser, the
    h → 2h of the uniform estimate (keeping ``base`` would coarsen only the bulk and the clusters).

    Parameters
    ----------
    cells : dict
        As returned by ``sphere_cells``.

    Returns
    -------
    dict or None
        The coarser cells (None for level 0 or base 0).

    Examples
    --------
    >>> from meanfield.compare import coarser_cells, sphere_cells
    >>> coarser_cells(sphere_cells())
    {'mesh': 'adaptive', 'base': 2, 'finest': 7, 'bulk': 3}
    >>> coarser_cells(sphere_cells(level=4)), coarser_cells(sphere_cells(level=0))
    ({'mesh': 'uniform', 'level': 3}, None)
    """
    if cells["mesh"] == "uniform":
        return None if cells["level"] < 1 else dict(cells, level=cells["level"] - 1)
    if cells["base"] < 1:
        return None
    return dict(cells, **{name: cells[name] - 1 for name in ("base", "finest", "bulk")})


def check_density_settings(geometry, model, cells=512, level=None, flux=FLUX, *, grid=None, base=None, finest=None,
                           bulk=None):
    """Refuse, before any computation, what the density solver would refuse after the particle
    solve: the model, the grid (cells; on the sphere the cells of ``sphere_cells``: an icosphere
    level <= MAX_LEVEL, or adaptive levels base <= bulk <= finest <= MAX_FINEST) and the flux,
    checked against the solver module's own list of flux names.

    Parameters
    ----------
    geometry : {"circle", "sphere"}
    model : SA or USA
    cells : int
        Cells of the circle grid (geometry="circle").
    level : int, optional
        Icosphere level (geometry="sphere"; implies grid="uniform").
    flux : str
        One of ``circle.FLUXES`` or ``sphere.FLUXES``.
    grid, base, finest, bulk : optional
        The cells on the sphere (``sphere_cells``; ``grid`` is its ``mesh``, as ``compare``'s).

    Returns
    -------
    dict or None
        The sphere's cells (``sphere_cells``), None on the circle.

    Raises
    ------
    ValueError or TypeError
        Naming the offending argument (also ``grid``, ``base``, ``finest`` or ``bulk`` on the circle).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import check_density_settings
    >>> check_density_settings("sphere", mf.SA(4.0), finest=2)
    Traceback (most recent call last):
    ...
    ValueError: finest = 2 must be at least base = 3
    """
    as_choice(geometry, "geometry", tuple(GEOMETRIES))
    if geometry == "circle":
        given = [name for name, value in (("grid", grid), ("base", base), ("finest", finest), ("bulk", bulk))
                 if value is not None]
        if given:
            raise ValueError(f"{'/'.join(given)} set the density's cells on the sphere; on the circle use cells")
        as_choice(flux, "flux", circle.FLUXES)
        circle.max_step(model, as_count(cells, "cells"), flux)
        return None
    as_choice(flux, "flux", sphere.FLUXES)
    spec = sphere_cells(grid, level, base, finest, bulk)
    # the model's checks; adaptive cells: on icosphere(0), as adaptive.solve does (base may be fine)
    sphere.max_step(model, sphere.icosphere(spec["level"] if spec["mesh"] == "uniform" else 0), flux)
    return spec


def grid_info(density, d: int, coarse_cells: dict | None) -> dict:
    """``info["grid"]`` of a comparison, read from the density itself (so that a precomputed one is
    described as it is): cells (the largest mesh), the mesh, and on changing meshes the cells of every
    output, the adaptive levels, the remeshes and every mesh used (t, cells, finest level).

    Parameters
    ----------
    density : DensitySolution
        The density of the comparison (on changing meshes: ``density.cells`` per output).
    d : int
        The dimension of the ambient space (2: the circle, 3: the sphere).
    coarse_cells : dict or None
        The cells of the grid-error reference (``coarser_cells``), None when there is none.

    Returns
    -------
    dict
        What ``describe_grid`` reads.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import sphere
    >>> from meanfield.compare.cells import grid_info
    >>> sol = sphere.solve(mf.SA(1.0), lambda x: 1 + 0 * x[:, 0], [0.0, 0.1], mesh=sphere.icosphere(1))
    >>> grid_info(sol, 3, {"mesh": "uniform", "level": 0})
    {'cells': 42, 'mesh': 'icosphere(1)', 'reference': 'icosphere(0)'}
    """
    if d != 3:
        return dict(cells=int(density.points.shape[0]))
    reference = None if coarse_cells is None else (
        f"icosphere({coarse_cells['level']})" if coarse_cells["mesh"] == "uniform" else
        "adaptive " + ", ".join(f"{k} {coarse_cells[k]}" for k in ("base", "finest", "bulk")))
    if density.cells is None:
        return dict(cells=int(density.points.shape[0]), mesh=density.info.get("mesh"), reference=reference)
    info = density.info
    return dict(cells=int(np.max(density.cells)), mesh="adaptive", base=info.get("base"), finest=info.get("finest"),
                bulk=info.get("bulk"), cells_per_output=[int(c) for c in density.cells],
                remeshes=info.get("remeshes"), meshes=info.get("meshes"), reference=reference)


def describe_grid(grid):
    """One line describing ``Comparison.info["grid"]``: the cells of the density and, on adaptive cells,
    how many at the first output, at most and at the last, and the number of remeshes.

    Parameters
    ----------
    grid : dict
        ``info["grid"]`` of a ``Comparison``.

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield.compare import describe_grid
    >>> describe_grid({"cells": 2562, "mesh": "icosphere(4)"})
    'icosphere(4), 2562 cells'
    >>> describe_grid({"cells": 2702, "mesh": "adaptive", "base": 3, "finest": 8, "bulk": 4,
    ...                "cells_per_output": [2702, 1500, 993], "remeshes": 20})
    'adaptive cells (levels 3-8, bulk 4): 2702 at t = 0, 2702 at most, 993 at T, 20 remeshes'
    """
    if grid.get("mesh") != "adaptive":
        return (f"{grid['mesh']}, " if grid.get("mesh") else "") + f"{grid['cells']} cells"
    counts = grid["cells_per_output"]
    return (f"adaptive cells (levels {grid['base']}-{grid['finest']}, bulk {grid['bulk']}): {counts[0]} at t = 0, "
            f"{grid['cells']} at most, {counts[-1]} at T, {grid['remeshes']} remeshes")
