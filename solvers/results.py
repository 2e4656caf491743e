"""Result objects returned by the solvers: .npz save/load, compact repr, xarray and netCDF, plots.

Every result carries ``info``, a dict whose common keys (``INFO``) mean the same in every solver:

=============  =====================================================================================
key            meaning
=============  =====================================================================================
nsteps         accepted time steps (int)
nfev           right-hand side evaluations (int)
nrejected      rejected steps: positivity or error control (int)
hmin, hmax     the smallest and largest accepted step (controlled steps only)
dt             the fixed step, or None for controlled steps
max_dt         the largest step allowed (a priori bound or cap)
method         the time scheme (particle solvers; the density solvers use "ssprk3" unless told)
flux           the finite-volume flux (density solvers)
cells          the number of cells (density solvers; per output on changing meshes: ``.cells``)
summation      how the field's sums were computed
energy_dips    where the discrete energy fell (``energy_report.energy_dips``)
pinned         cells holding a cluster the scheme cannot move (``energy_report``)
=============  =====================================================================================

Each solver adds its own keys (documented in its ``solve``).
"""
import json
from importlib.metadata import entry_points
from dataclasses import dataclass, field

import numpy as np

from meanfield.checks import as_index
from meanfield.atomic import write_file
from meanfield.npzfile import NPZ_ERRORS, npz_path
from meanfield.geometry import circle_angles, circle_points
from meanfield.interpolation import SphericalTriangulation, periodic_linear
from meanfield.sampling import discretise, uniform_circle_grid

from . import export

#: The common keys of a result's ``info`` and their meaning (module docstring).
INFO = {"nsteps": "accepted time steps", "nfev": "right-hand side evaluations",
        "nrejected": "rejected steps (positivity or error control)", "hmin": "smallest accepted step (controlled)",
        "hmax": "largest accepted step (controlled)", "dt": "the fixed step, or None for controlled steps",
        "max_dt": "the largest step allowed", "method": "the time scheme", "flux": "the finite-volume flux",
        "cells": "the number of cells", "summation": "how the field's sums were computed",
        "energy_dips": "where the discrete energy fell", "pinned": "cells holding a cluster the scheme cannot move"}

#: The entry-point group under which a distribution names the function that draws results
#: (``meanfield`` names ``meanfield.plotting.views:plot``).  The engines import no plotting code:
#: the interface layer registers itself (``register_plotter``), and ``plot`` loads the entry point
#: the first time a plot is asked for (as pandas finds its plotting backends).
PLOTTERS = "meanfield.plotters"
_plotter = []                    # the registered drawing function (at most one)


def register_plotter(func) -> None:
    """Install the function that draws result objects: ``func(obj, kind, ax=None, **kwargs)``.

    The interface layer calls this when it is imported (``meanfield.plotting.views`` registers its
    ``plot``); ``Saveable.plot`` calls the registered function, loading the ``meanfield.plotters``
    entry point first when none is registered.  A later registration replaces an earlier one.

    Parameters
    ----------
    func : callable
        ``func(obj, kind, ax=None, **kwargs)`` returning the Axes or Figure drawn.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        When ``func`` is not callable.

    Examples
    --------
    >>> from meanfield.solvers.results import register_plotter
    >>> import meanfield.plotting.views as views     # registers views.plot on import
    >>> register_plotter(views.plot)                  # the same, explicitly
    """
    if not callable(func):
        raise TypeError(f"the plotter must be callable; got {type(func).__name__}")
    _plotter[:] = [func]


def _draw(obj, kind, ax, kwargs):
    if not _plotter:
        for point in entry_points(group=PLOTTERS):
            point.load()                 # importing the backend registers it
            if _plotter:
                break
    if not _plotter:
        raise RuntimeError("no plotting backend: import meanfield.plotting.views (matplotlib), or reinstall "
                           "meanfield so that its 'meanfield.plotters' entry point is declared")
    return _plotter[0](obj, kind, ax=ax, **kwargs)


class Saveable:
    """The base of every result object: dataclass fields that are arrays (or None) plus the model
    and info, stored in one .npz file, shown by a compact repr, converted to an ``xarray.Dataset``
    or a netCDF file (xarray optional; layout in ``meanfield.solvers.export``) and drawn by ``plot``.

    A subclass is registered by its class name in ``export.RESULT_KINDS``, so that a saved result
    that nests it (a ``Comparison`` holds a ``ParticleSolution``) can be read back.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.results import ParticleSolution, Saveable
    >>> issubclass(ParticleSolution, Saveable)
    True
    >>> from meanfield.solvers.export import RESULT_KINDS
    >>> RESULT_KINDS["ParticleSolution"] is ParticleSolution
    True
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        export.RESULT_KINDS[cls.__name__] = cls

    def __repr__(self):
        return export.summary(self)

    def save(self, path):
        """Write every array and the model/info (JSON) to one compressed .npz file (".npz" is
        appended if missing, as numpy does), atomically (``meanfield.atomic.write_file``: a failed
        save leaves an earlier file of that name intact); returns the file's path."""
        path = npz_path(path)
        variables, attrs = export.flatten(self)
        arrays = {name: array for name, (_, array) in variables.items()}
        write_file(path, lambda fh: np.savez_compressed(fh, _meta=np.array(json.dumps(attrs)), **arrays))
        return path

    @classmethod
    def load(cls, path):
        """Read a result written by ``save`` (the same path, with or without ".npz")."""
        path = npz_path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                attrs = json.loads(str(data["_meta"]))
                arrays = {k: data[k] for k in data.files if k != "_meta"}
        except NPZ_ERRORS as exc:
            raise ValueError(f"{path} is not a readable saved result ({type(exc).__name__}: {exc})") from None
        if attrs.get("kind") != cls.__name__:
            raise ValueError(f"{path} holds a {attrs.get('kind')}, not a {cls.__name__}")
        return export.unflatten(cls, arrays, attrs)

    def to_xarray(self):
        """The result as an ``xarray.Dataset``: arrays on named dimensions (``t``, ``draw``,
        ``token``, ``cell``, ``coord``), model and info as JSON attributes."""
        return export.to_xarray(self)

    @classmethod
    def from_xarray(cls, dataset):
        """Rebuild the result from ``to_xarray``'s Dataset."""
        return export.from_xarray(cls, dataset)

    def to_netcdf(self, path):
        """Write the result to a netCDF file (``to_xarray().to_netcdf(path)``, atomically, with a SHA-256
        of the content that ``from_netcdf`` checks)."""
        export.to_netcdf(self, path)

    def plot(self, kind=None, ax=None, **kwargs):
        """Draw a common view of the result with matplotlib; returns the Axes (a Figure for a Comparison).

        The views of each result class are in ``meanfield.plotting.views.VIEWS`` (the first kind is
        the default): ParticleSolution "tokens", "energy"; DensitySolution "density", "spacetime"
        (S^1), "energy"; ZonalSolution "density", "spacetime", "energy"; CausalDensitySolution
        "density"; Comparison "distances", "solution", "energy"; ZonalComparison "distances", "mean".

        Parameters
        ----------
        kind : str, optional
            The view (default: the class's first).
        ax : matplotlib.axes.Axes, optional
            Where to draw (default: a new figure; Mollweide axes for maps on S^2).
        **kwargs
            ``k``: the output index of the views of one time (default -1, the last); the other
            options of the underlying ``meanfield.plotting`` function.

        Returns
        -------
        matplotlib.axes.Axes or matplotlib.figure.Figure

        Raises
        ------
        ValueError
            For a kind this result does not have, or one its data cannot give (no energy, a
            space-time view on S^2).

        Examples
        --------
        >>> import numpy as np, meanfield as mf
        >>> from meanfield.solvers import circle
        >>> sol = circle.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 1.0], cells=128, progress=False)
        >>> sol.plot("spacetime").get_xlabel()
        't'
        >>> import matplotlib.pyplot as plt
        >>> plt.close("all")
        """
        return _draw(self, kind, ax, kwargs)

    @classmethod
    def from_netcdf(cls, path, verify=True):
        """Read a result written by ``to_netcdf``; a file whose content does not match its stored
        SHA-256 is refused (ValueError naming it) unless ``verify=False``."""
        return export.from_netcdf(cls, path, verify)


@dataclass(eq=False, repr=False)
class ParticleSolution(Saveable):
    """Particle trajectories: ``x[k]`` are the tokens at time ``t[k]`` (``particles.solve``).

    Methods: ``measure(k, draw)`` the empirical measure at output k, ``final`` the last tokens,
    ``plot(kind)`` ("tokens", "energy"), ``save``/``load``, ``to_xarray``, ``to_netcdf``.

    Parameters
    ----------
    t : ndarray, shape (m,)
        Output times.
    x : ndarray, shape (m, n, d) or (m, B, n, d), or None
        The tokens (None when the run used ``observe``).
    energy : ndarray, shape (m,) or (m, B), optional
        E_β of the empirical measure (NaN, with the reason in ``info["energy"]``, for models
        where E_β is not the dynamics' energy).
    model : SA, USA, MultiHead or Hardmax
    info : dict
        The common keys of ``INFO`` (method, nsteps, nfev, nrejected, dt, ...), summation, engine.
    theta : ndarray, optional
        Unwrapped angles (m, ...) of the circle's angle form (``solve_angles``).
    observed : ndarray, optional
        observe(x(t_k)) (m, ...) for ``solve(..., observe=f)``.
    last : ndarray, optional
        The tokens at t[-1] when ``x`` is None.
    weights : ndarray, optional
        Token weights (n,) or (B, n) (None: 1/n).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import particles
    >>> sol = particles.solve(mf.SA(1.0), mf.uniform_sphere(8, 3, seed=0), [0.0, 1.0], progress=False)
    >>> points, weights = sol.measure()
    >>> points.shape, float(weights.sum())
    ((8, 3), 1.0)
    """
    t: np.ndarray
    x: np.ndarray
    energy: np.ndarray = None
    model: object = None
    info: dict = field(default_factory=dict)
    theta: np.ndarray = None
    observed: np.ndarray = None
    last: np.ndarray = None
    weights: np.ndarray = None

    @property
    def final(self):
        return self.last if self.x is None else self.x[-1]

    def measure(self, k=-1, draw=0):
        """(points (n, d), weights (n,)) of the tokens at output k as a probability measure
        (weights 1/n unless the solve had weights); ``draw`` picks the system of a batch."""
        x = self.x[k]
        w = self.weights
        if x.ndim == 3:
            x = x[draw]
            w = None if w is None else np.broadcast_to(w, self.x.shape[1:3])[draw]
        n = x.shape[0]
        w = np.full(n, 1.0 / n) if w is None else np.asarray(w, dtype=float) / np.sum(w)
        return x, w


@dataclass(eq=False, repr=False)
class DensitySolution(Saveable):
    """Finite-volume solution: ``rho[k, i]`` is the density (against surface measure) in cell i.

    Returned by ``circle.solve``, ``sphere.solve`` and ``adaptive.solve``.  Methods:
    ``measure(k)`` the cell measure, ``at(points, k)`` the interpolated density, ``sample(n, k)``
    tokens discretising it, ``snapshot(k)``, ``plot(kind)`` ("density", "spacetime", "energy"),
    ``save``/``load``, ``to_xarray``, ``to_netcdf``.

    On meshes that change over time (``meanfield.solvers.adaptive``) ``cells`` (m,) holds the
    number of cells N_k of output k, and points (m, N, d), areas (m, N), rho (m, N) hold output k in
    their first N_k rows (N = max N_k; the rest is zero padding); ``snapshot(k)`` is output k on its
    own mesh, and ``measure``, ``at`` and ``sample`` read output k's mesh.

    Parameters
    ----------
    t : ndarray, shape (m,)
    points : ndarray, shape (N, d)
        Cell centres (d = 2: the circle; d = 3: the sphere).
    areas : ndarray, shape (N,)
        Cell measures |C_i|.
    rho : ndarray, shape (m, N)
    mass : ndarray, shape (m,)
        Σ_i ρ_i |C_i|.
    energy : ndarray, shape (m,)
        The discrete E_β.
    model : SA, USA or MultiHead
    info : dict
        The common keys of ``INFO`` (flux, cells, nsteps, nfev, nrejected, dt, max_dt, ...).
    cells : ndarray, shape (m,), optional
        Cells of each output on changing meshes.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import circle
    >>> sol = circle.solve(mf.SA(3.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 1.0], cells=128, progress=False)
    >>> points, weights = sol.measure()
    >>> points.shape, round(float(weights.sum()), 12)
    ((128, 2), 1.0)
    """
    t: np.ndarray
    points: np.ndarray
    areas: np.ndarray
    rho: np.ndarray
    mass: np.ndarray
    energy: np.ndarray
    model: object = None
    info: dict = field(default_factory=dict)
    cells: np.ndarray = None

    def snapshot(self, k=-1):
        """Output k alone, as a one-output DensitySolution on its own (fixed) mesh."""
        k = as_index(k, self.t.size)
        if self.cells is None:
            points, areas, rho = self.points, self.areas, self.rho[k]
        else:
            n = int(self.cells[k])
            points, areas, rho = self.points[k, :n], self.areas[k, :n], self.rho[k, :n]
        energy = None if self.energy is None else np.atleast_1d(self.energy[k])
        return DensitySolution(t=np.atleast_1d(self.t[k]), points=points, areas=areas, rho=rho[None],
                               mass=np.atleast_1d(self.mass[k]), energy=energy, model=self.model, info=self.info)

    def measure(self, k=-1):
        """(points, weights) of the k-th output as a probability measure: the cell masses
        rho_i |cell_i|, clipped at 0 and normalised (ready for optimal transport)."""
        k = as_index(k, self.t.size)
        if self.cells is not None:
            return self.snapshot(k).measure()
        w = np.clip(self.rho[k], 0.0, None) * self.areas
        return self.points, w / w.sum()

    def at(self, points, k=-1):
        """The density of output k at arbitrary points (q, d): periodic linear interpolation
        between cell centres on S^1, linear interpolation on the Delaunay triangulation of the
        generators (their convex hull) on S^2 (``meanfield.interpolation``)."""
        k = as_index(k, self.t.size)
        if self.cells is not None:
            return self.snapshot(k).at(points)
        if self.points.shape[1] == 2:
            return periodic_linear(self.rho[k], points, None if uniform_circle_grid(self.points) else self.points)
        return SphericalTriangulation(self.points).interpolate(self.rho[k], points)

    @property
    def theta(self) -> np.ndarray:
        """The cell centres' angles on S^1, θ_i in [0, 2π), shape (N,) (or (m, N) on changing cells):
        ``circle_angles(points)``, the name ``CausalDensitySolution.theta`` and
        ``ParticleSolution.theta`` give the circle too.

        Raises
        ------
        ValueError
            On S^2 (points with three coordinates).

        Examples
        --------
        >>> import numpy as np, meanfield as mf
        >>> from meanfield.solvers import circle
        >>> sol = circle.solve(mf.SA(1.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 0.1], cells=8, progress=False)
        >>> sol.theta.shape, bool(np.allclose(sol.theta, circle.cell_angles(8)))
        ((8,), True)
        """
        if self.points.shape[-1] != 2:
            raise ValueError("theta is the angle of a circle's cells; this solution lives on S^2 (use points)")
        return circle_angles(self.points)

    def sample(self, n, k=-1, method="stratified", seed=None):
        """n tokens (points (n, d), weights (n,)) discretising output k: ``meanfield.sampling.discretise``
        of the piecewise-constant cell density, method "stratified" (default), "iid", "quantile"
        (S^1) or "weighted"; distinct points, ready as ``x0, weights`` of ``particles.solve``."""
        if self.cells is not None:
            return self.snapshot(k).sample(n, method=method, seed=seed)
        return discretise(self, n, self.points.shape[1], method=method, seed=seed, k=k)


@dataclass(eq=False, repr=False)
class ZonalSolution(Saveable):
    """Zonal finite-volume solution on S^{d-1} (``zonal.solve``).

    ``masses[k, i]`` is the mass of the polar-angle cell i (θ in [edges[i], edges[i+1]], centre
    theta[i]) at time t[k].  ``rho`` = masses/areas is the density against surface measure (it
    overflows near the poles in high dimension, where |C_i| underflows: use the masses there);
    ``measure(k)`` the polar-angle marginal, ``mean(k)`` the component of the mean along the axis,
    ``plot(kind)`` ("density", "spacetime", "energy").

    Parameters
    ----------
    t : ndarray, shape (m,)
    theta : ndarray, shape (N,)
    edges : ndarray, shape (N + 1,)
    areas : ndarray, shape (N,)
        Cell measures |C_i| on S^{d-1}.
    masses : ndarray, shape (m, N)
    mass : ndarray, shape (m,)
    energy : ndarray, shape (m,)
        The discrete E_β.
    d : int
    model : SA or USA
    info : dict
        The common keys of ``INFO`` (flux, cells, nsteps, nfev, nrejected, dt, max_dt, ...).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import zonal
    >>> sol = zonal.solve(mf.SA(2.0), lambda s: 1 + 0.5 * s, [0.0, 1.0], d=16, cells=64, progress=False)
    >>> sol.masses.shape, sol.mean(-1) > sol.mean(0) > 0
    ((2, 64), True)
    """
    t: np.ndarray
    theta: np.ndarray
    edges: np.ndarray
    areas: np.ndarray
    masses: np.ndarray
    mass: np.ndarray
    energy: np.ndarray
    d: int = 2
    model: object = None
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.d = int(self.d)

    @property
    def rho(self):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.masses > 0, self.masses / self.areas, 0.0)

    def measure(self, k=-1):
        """(theta, weights) of the k-th output's polar-angle marginal: the cell masses at the cell
        centres, clipped at 0 and normalised."""
        w = np.clip(self.masses[k], 0.0, None)
        return self.theta, w / w.sum()

    def mean(self, k=-1):
        """<m, e> = Σ_i m_i cos θ_i, the component of the mean along the axis (the mean is <m, e> e)."""
        theta, w = self.measure(k)
        return float(w @ np.cos(theta))


@dataclass(eq=False, repr=False)
class CausalDensitySolution(Saveable):
    """The causal mean-field density on [0, 1] × S^1 (``causal.solve``).

    ``rho[k, j, i]`` is the density of slice s_j in cell θ_i at time t[k], each slice a probability
    density in θ; ``plot()`` draws ρ(s, θ) at an output.

    Parameters
    ----------
    t : ndarray, shape (m,)
    s : ndarray, shape (S,)
        Slice centres.
    theta : ndarray, shape (N,)
        Cell centres.
    rho : ndarray, shape (m, S, N)
    mass : ndarray, shape (m, S)
        Mass per slice.
    info : dict
        The common keys of ``INFO`` (flux, cells, nsteps, nfev, dt, max_dt), slices.
    model : SA or USA

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import causal
    >>> sol = causal.solve(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s), [0, 1], slices=8, cells=32)
    >>> sol.rho.shape
    (2, 8, 32)
    """
    t: np.ndarray
    s: np.ndarray
    theta: np.ndarray
    rho: np.ndarray
    mass: np.ndarray
    info: dict = field(default_factory=dict)
    model: object = None

    @property
    def points(self) -> np.ndarray:
        """The cell centres on S^1 as points (N, 2), (cos θ_i, sin θ_i): the name ``DensitySolution``
        gives them.

        Examples
        --------
        >>> import numpy as np, meanfield as mf
        >>> from meanfield.solvers import causal
        >>> sol = causal.solve(mf.SA(1.0), lambda s, th: 1 + 0 * th, [0, 0.1], slices=2, cells=8)
        >>> sol.points.shape, bool(np.allclose(mf.circle_angles(sol.points), sol.theta))
        ((8, 2), True)
        """
        return circle_points(self.theta)
