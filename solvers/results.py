"""Result objects returned by the solvers: .npz save/load, compact repr, xarray and netCDF."""
import json
from dataclasses import dataclass, field

import numpy as np

from meanfield.atomic import write_file
from meanfield.npzfile import NPZ_ERRORS, npz_path
from meanfield.interpolation import SphericalTriangulation, periodic_linear
from meanfield.sampling import discretise, uniform_circle_grid

from . import export


class _Saveable:
    """Dataclass fields that are arrays (or None) plus the model and info, stored in one .npz
    file, shown by a compact repr, converted to an ``xarray.Dataset`` or a netCDF file (xarray
    optional; layout in ``meanfield.solvers.export``)."""

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

    @classmethod
    def from_netcdf(cls, path, verify=True):
        """Read a result written by ``to_netcdf``; a file whose content does not match its stored
        SHA-256 is refused (ValueError naming it) unless ``verify=False``."""
        return export.from_netcdf(cls, path, verify)


@dataclass(eq=False, repr=False)
class ParticleSolution(_Saveable):
    """Particle trajectories: x[k] are the tokens at time t[k].

    Fields: t (m,), x (m, n, d) or (m, B, n, d), energy (m,) or (m, B) — E_β of the
    empirical measure (NaN, with the reason in info["energy"], for models where E_β is not the
    dynamics' energy) —, theta (angles, for the circle angle form), model, info (method, steps,
    evaluations); with ``solve(..., observe=f)``: x is None, observed (m, ...) = f(x(t_k)) and
    last the tokens at t[-1].
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
class DensitySolution(_Saveable):
    """Finite-volume solution: rho[k, i] is the density (against surface measure) in cell i.

    Fields: t (m,), points (N, d) cell centres, areas (N,) cell measures, rho (m, N),
    mass (m,) = sum_i rho_i |cell_i|, energy (m,) the discrete E_β, model, info.

    On meshes that change over time (``meanfield.solvers.adaptive``) ``cells`` (m,) holds the
    number of cells N_k of output k, and points (m, N, d), areas (m, N), rho (m, N) hold output k in
    their first N_k rows (N = max N_k; the rest is zero padding); ``snapshot(k)`` is output k on its
    own mesh, and ``measure``, ``at`` and ``sample`` read output k's mesh.
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
        if self.cells is not None:
            return self.snapshot(k).measure()
        w = np.clip(self.rho[k], 0.0, None) * self.areas
        return self.points, w / w.sum()

    def at(self, points, k=-1):
        """The density of output k at arbitrary points (q, d): periodic linear interpolation
        between cell centres on S^1, linear interpolation on the Delaunay triangulation of the
        generators (their convex hull) on S^2 (``meanfield.interpolation``)."""
        if self.cells is not None:
            return self.snapshot(k).at(points)
        if self.points.shape[1] == 2:
            return periodic_linear(self.rho[k], points, None if uniform_circle_grid(self.points) else self.points)
        return SphericalTriangulation(self.points).interpolate(self.rho[k], points)

    def sample(self, n, k=-1, method="stratified", seed=None):
        """n tokens (points (n, d), weights (n,)) discretising output k: ``meanfield.sampling.discretise``
        of the piecewise-constant cell density, method "stratified" (default), "iid", "quantile"
        (S^1) or "weighted"; distinct points, ready as ``x0, weights`` of ``particles.solve``."""
        if self.cells is not None:
            return self.snapshot(k).sample(n, method=method, seed=seed)
        return discretise(self, n, self.points.shape[1], method=method, seed=seed, k=k)


@dataclass(eq=False, repr=False)
class ZonalSolution(_Saveable):
    """Zonal finite-volume solution on S^{d-1}: masses[k, i] is the mass of the polar-angle cell i
    (θ ∈ [edges[i], edges[i+1]], centre theta[i]) at time t[k].

    Fields: t (m,), theta (N,), edges (N+1,), areas (N,) the cell measures |C_i| on S^{d-1},
    masses (m, N), mass (m,), energy (m,) the discrete E_β, d, model, info.  ``rho`` = masses/areas
    is the density against surface measure (it overflows near the poles in high dimension, where
    |C_i| underflows: use the masses there).
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
class CausalDensitySolution(_Saveable):
    """The causal mean-field density on [0, 1] × S^1 (``meanfield.solvers.causal``).

    Fields: t (m,), s (S,) slice centres, theta (N,) cell centres, rho (m, S, N) cell densities
    (each slice a probability density in θ), mass (m, S) per slice, model, info."""
    t: np.ndarray
    s: np.ndarray
    theta: np.ndarray
    rho: np.ndarray
    mass: np.ndarray
    info: dict = field(default_factory=dict)
    model: object = None
