r"""The result of a comparison (``Comparison``: the distances, energies, cluster counts and both
solutions, with a table, an explanation and its JSON numbers) and the reading of a report folder
(``read_report``); report folders are written by ``meanfield.cli.report.write_report``."""
import os
from dataclasses import dataclass, field

import numpy as np

from .. import atomic
from ..solvers.export import RESULT_KINDS
from ..solvers.results import DensitySolution, ParticleSolution, Saveable
from .distances import quantum_level

__all__ = ["Comparison", "read_report"]


@dataclass(eq=False, repr=False)
class Comparison(Saveable):
    r"""Particles vs density at the output times t, over S independent draws of tokens (result of
    ``compare``).

    .. math::

        w_p[k, s] = W_p\Big(\mu^{n, s}_{t_k}, \sum_i \rho_i(t_k) |C_i| \delta_{c_i}\Big), \quad p = 1, 2.

    ``save(path)`` / ``Comparison.load(path)`` keep everything (both solutions included) in one
    .npz file; ``to_xarray()`` / ``to_netcdf(path)`` / ``Comparison.from_netcdf(path)`` do the
    same through xarray (particle arrays prefixed ``particles_``, density arrays ``density_``).

    Parameters
    ----------
    t : numpy.ndarray, shape (m,)
        Output times.
    w1, w2 : numpy.ndarray, shape (m, S)
        Wasserstein distances (radians) between each draw's empirical measure and the grid measure.
    energy_particles : numpy.ndarray, shape (m, S)
        E_β of the tokens.
    energy_density : numpy.ndarray, shape (m,)
        E_β of the density.
    clusters_particles : numpy.ndarray, shape (m, S)
        Cluster counts of the tokens.
    clusters_density : numpy.ndarray, shape (m,)
        Cluster counts of the density.
    particles : ParticleSolution
        x of shape (m, S, n, d).
    density : DensitySolution
        On the sphere's adaptive cells (the default) on changing meshes: ``density.cells`` per output,
        ``density.snapshot(k)`` output k on its own mesh, ``density.measure(k)`` its cell measure.
    info : dict
        Settings, methods, ``grid`` (the density's cells: ``describe_grid``), ``timings`` (wall seconds of
        particles, density (its grid reference included), grid_reference, transport), ``cpu_seconds``
        (the same parts in CPU seconds), and for attractive isotropic models lambda_star, mode l*,
        horizon t_n.
    weights : numpy.ndarray, shape (S, n), optional
        Weights of the tokens (None: 1/n).
    grid_error : numpy.ndarray, shape (m,), optional
        W_2(ρ_h, ρ_{2h}) (None when not computed).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import compare
    >>> c = compare(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], n=64, seeds=2, cells=64)
    >>> c.w1.shape, c.energy_density.shape
    ((2, 2), (2,))
    >>> bool(c.w2.max() < 0.2), c.grid_error.shape
    (True, (2,))
    """
    t: np.ndarray
    w1: np.ndarray
    w2: np.ndarray
    energy_particles: np.ndarray
    energy_density: np.ndarray
    clusters_particles: np.ndarray
    clusters_density: np.ndarray
    particles: object
    density: object
    info: dict = field(default_factory=dict)
    weights: np.ndarray = None
    grid_error: np.ndarray = None

    @property
    def iid_prediction(self):
        """n^{-1/2} e^{λ* t} capped at π (the diameter bounds W_p): the predicted distance for
        i.i.d. tokens (m,); None for models without an unstable mode."""
        rate = self.info.get("lambda_star")
        if rate is None:
            return None
        return np.minimum(np.exp(rate * self.t) / np.sqrt(self.info["n"]), np.pi)

    @property
    def energy_gap(self):
        """(mean over draws of E_β(μ^n) - E_β(ρ)) / E_β(ρ) at each output time (m,)."""
        return self.energy_particles.mean(axis=1) / self.energy_density - 1.0

    @property
    def quantum_level(self):
        """π (2n)^{-1/2}: W_2 of moving half a token's mass 1/(2n) across the diameter π. Once clusters
        have formed W_2 ≈ D sqrt(δm) for a cluster-mass error δm at distance D, and n tokens (of
        weight ~1/n each) cannot fix a cluster's mass better than that: W_2 has this floor."""
        return quantum_level(self.info["n"], 2)

    @property
    def quantum_level_w1(self):
        """π/(2n): W_1 ≈ D δm of the same half token's mass δm = 1/(2n) moved across the diameter D = π,
        the W_1 counterpart of ``quantum_level``."""
        return quantum_level(self.info["n"], 1)

    def table(self):
        """The comparison as a plain-text table (means ± standard deviations over the draws)."""
        s = self.w1.shape[1]
        head = (f"{'t':>7} {'W1':>19} {'W2':>19} {'E particles':>12} {'E density':>12} {'gap':>8} "
                f"{'clusters:':>9} {'tokens':>7} {'density':>7}")
        lines = [head, "-" * len(head)]
        for k, t in enumerate(self.t):
            c = self.clusters_particles[k]
            cl = f"{c[0]}" if np.all(c == c[0]) else f"{c.min()}-{c.max()}"
            lines.append(f"{t:7.3g} {_pm(self.w1[k], s):>19} {_pm(self.w2[k], s):>19} "
                         f"{self.energy_particles[k].mean():12.6g} {self.energy_density[k]:12.6g} "
                         f"{100 * self.energy_gap[k]:7.2f}% {'':>9} {cl:>7} {self.clusters_density[k]:>7}")
        return "\n".join(lines)

    def to_dict(self):
        """JSON-ready numbers: settings, per-draw series and a summary."""
        return dict(
            info=self.info,
            t=self.t.tolist(),
            w1=self.w1.tolist(), w2=self.w2.tolist(),
            energy_particles=self.energy_particles.tolist(), energy_density=self.energy_density.tolist(),
            energy_gap=self.energy_gap.tolist(),
            clusters_particles=self.clusters_particles.tolist(),
            clusters_density=self.clusters_density.tolist(),
            grid_error=None if self.grid_error is None else self.grid_error.tolist(),
            iid_prediction=None if self.iid_prediction is None else self.iid_prediction.tolist(),
            summary=dict(w1_final=float(self.w1[-1].mean()), w2_final=float(self.w2[-1].mean()),
                         w2_max=float(self.w2.mean(axis=1).max()),
                         energy_gap_max=float(np.abs(self.energy_gap).max()),
                         clusters_particles_final=self.clusters_particles[-1].tolist(),
                         clusters_density_final=int(self.clusters_density[-1]),
                         grid_error_final=None if self.grid_error is None else float(self.grid_error[-1])),
        )

    def explanation(self):
        """A few lines setting the final W_2 against the two reference lines."""
        info, w2 = self.info, float(self.w2[-1].mean())
        lines = [f"final W2 = {w2:.3g} rad with {info['sampling']} sampling of n = {info['n']} tokens"]
        if self.grid_error is not None:
            against = info.get("grid", {}).get("reference")
            lines.append(f"grid error estimate W2(rho_h, rho_2h) = {self.grid_error[-1]:.3g} rad "
                         + (f"against {against} " if against else "")
                         + f"(final W2 / grid error = {w2 / max(self.grid_error[-1], 1e-300):.2f})")
        lines.append(f"after clustering W2 ~ D sqrt(dm) and W1 ~ D dm for a cluster-mass error dm at distance D: "
                     f"half a token's mass (dm = 1/2n) across the diameter (D = pi) gives W2 ~ pi (2n)^-1/2 = "
                     f"{self.quantum_level:.3g} and W1 ~ pi/(2n) = {self.quantum_level_w1:.3g} "
                     f"(measured: W2 {w2:.3g}, W1 {float(self.w1[-1].mean()):.3g})")
        if info.get("lambda_star") is not None:
            lines.append(f"i.i.d. tokens: n^-1/2 e^(lambda* t) with lambda* = {info['lambda_star']:.3f} (mode l* = "
                         f"{info['mode']}) reaches 1 at the horizon t_n = log(n)/(2 lambda*) = {info['horizon']:.2f}; "
                         f"past it i.i.d. draws cannot track the PDE")
        return "\n".join(lines)

    def final_line(self):
        """One line: the final W_1 and W_2 (mean over the draws) and the time they were measured at."""
        return (f"final W_1 = {float(self.w1[-1].mean()):.3g}, W_2 = {float(self.w2[-1].mean()):.3g} rad "
                f"at t = {float(self.t[-1]):g} ({_draws(self.w1.shape[1])})")

    @classmethod
    def load(cls, path):
        """Read a comparison back: a .npz file written by ``save``, or a report folder written by
        ``meanfield compare`` / ``write_report`` (the folder itself or its report.json).

        Parameters
        ----------
        path : str or os.PathLike
            A .npz file, a report folder, or the report.json inside one.

        Returns
        -------
        Comparison
            (a ``compare.causal.CausalComparison`` for a report of ``meanfield compare --causal``)
        """
        report = read_report(path)
        if report is None:
            return super().load(path)
        folder, numbers = report
        if numbers.get("info", {}).get("causal"):          # a result class registers its name (``Saveable``)
            return RESULT_KINDS["CausalComparison"].from_report(folder, numbers)
        particles = ParticleSolution.load(os.path.join(folder, "particles.npz"))
        density = DensitySolution.load(os.path.join(folder, "density.npz"))
        grid_error = numbers.get("grid_error")
        return cls(t=np.array(numbers["t"], dtype=float), w1=np.array(numbers["w1"]), w2=np.array(numbers["w2"]),
                   energy_particles=np.array(numbers["energy_particles"]),
                   energy_density=np.array(numbers["energy_density"]),
                   clusters_particles=np.array(numbers["clusters_particles"], dtype=int),
                   clusters_density=np.array(numbers["clusters_density"], dtype=int),
                   particles=particles, density=density, info=numbers["info"], weights=particles.weights,
                   grid_error=None if grid_error is None else np.array(grid_error, dtype=float))


def read_report(path) -> tuple[str, dict] | None:
    """(folder, numbers of its report.json) for a report folder or its report.json, the folder checked
    against its marker first (``atomic.verify_folder``); None for any other path (a .npz file written by
    ``save``).

    Parameters
    ----------
    path : str or os.PathLike
        A report folder, the report.json inside one, or any other path.

    Returns
    -------
    tuple of (str, dict) or None

    Examples
    --------
    >>> from meanfield.compare import read_report
    >>> read_report("comparison.npz") is None
    True
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    if os.path.basename(path) != "report.json":
        return None
    return os.path.dirname(path), atomic.read_json(path)


def _draws(s):
    return "one draw" if s == 1 else f"mean of {s} draws"


def _pm(values, s):
    return f"{values.mean():.3e}" + (f" ± {values.std(ddof=1):.1e}" if s > 1 else "")
