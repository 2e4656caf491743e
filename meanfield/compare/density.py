"""The density side of a comparison: the finite-volume solution on the cells of ``cells``."""
from ..checks import as_count
from ..solvers import adaptive, circle, sphere
from .cells import FLUX, sphere_cells

__all__ = ["density_solver"]


def density_solver(geometry, model, rho0, t_eval, *, cells=512, level=None, mesh=None, base=None, finest=None,
                   bulk=None, flux=FLUX, progress=None):
    """The finite-volume solution on S^1 (``cells`` cells) or S^2 (the cells of ``sphere_cells``: adaptive
    by default, ``icosphere(level)`` when ``level`` is given or mesh="uniform").

    Parameters
    ----------
    geometry : {"circle", "sphere"}
    model : SA or USA
    rho0 : callable
        Points (N, d) -> densities.
    t_eval : array_like
        Output times.
    cells : int
        Cells on the circle.
    level, mesh, base, finest, bulk : optional
        The cells on the sphere (``sphere_cells``).
    flux : str
        The flux.
    progress : bool or None
        A progress report (``meanfield.progress``): one per solve, adaptive runs included.

    Returns
    -------
    DensitySolution
        On changing meshes (``cells`` per output) for adaptive cells.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import density_solver
    >>> sol = density_solver("sphere", mf.SA(3.0), mf.perturbed_uniform(3, seed=0), [0.0, 0.5], base=1, finest=2)
    >>> sol.cells.shape, density_solver("sphere", mf.SA(3.0), mf.perturbed_uniform(3), [0.0], level=1).cells
    ((2,), None)
    """
    if geometry == "circle":
        return circle.solve(model, rho0, t_eval, cells=as_count(cells, "cells"), flux=flux, progress=progress)
    spec = sphere_cells(mesh, level, base, finest, bulk)
    if spec["mesh"] == "uniform":
        return sphere.solve(model, rho0, t_eval, mesh=sphere.icosphere(spec["level"]), flux=flux, progress=progress)
    return adaptive.solve(model, rho0, t_eval, flux=flux, base=spec["base"], finest=spec["finest"], bulk=spec["bulk"],
                          progress=progress)
