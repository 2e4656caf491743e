"""Zonal densities on S^{d-1} as particles: sampling tokens in R^d, polar angles, and the comparison of
the particle system in dimension d with the zonal PDE (``meanfield.solvers.zonal``).

A zonal measure is determined by the law of the polar angle θ = arccos <x, e> (axis e = e_1 here):
given θ, x = cos θ e + sin θ w with w uniform on the unit sphere of e^⊥.  So

- sampling draws θ from the polar-angle marginal (inverse CDF, piecewise uniform in θ inside each
  cell of the grid) and w independently;
- particles and PDE are compared by the exact W_p between polar-angle marginals, a one-dimensional
  optimal transport problem (sorted quantiles, ``ot.wasserstein_1d``).  It is a lower bound for W_p on
  S^{d-1} (θ is 1-Lipschitz for the geodesic distance) and equals it between zonal measures.

``method="quantile"`` takes the polar angles at the n/2 mid-quantiles (each twice) with transverse
directions ±w: the configuration is then invariant under the rotation x ↦ 2<x, e>e - x, which
commutes with the dynamics (Q = K = I, V = ±I), so its mean stays on the axis for all times, as
the zonal PDE's does; i.i.d. draws instead carry a transverse mean of size n^{-1/2}.
"""
from dataclasses import dataclass, field

import numpy as np

from .checks import as_choice, as_count, as_float_array, as_points, as_seed, as_size, as_time_grid, as_weights
from .models import as_model
from .solvers import particles, zonal as zonal_solver
from .solvers.results import ZonalSolution, _Saveable

__all__ = ["polar_angles", "sample", "polar_wasserstein", "ZonalComparison", "compare"]

METHODS = ("iid", "quantile")
PROFILE_CELLS = 4096       # polar grid on which a callable profile is turned into a marginal


def polar_angles(x):
    """θ = arccos <x, e_1> of points x (..., d) on the sphere, computed as atan2(|x_⊥|, x_1) (accurate near
    the poles)."""
    x = as_float_array(x, "x")
    return np.arctan2(np.linalg.norm(x[..., 1:], axis=-1), x[..., 0])


def _marginal(source, d, k):
    """(edges (N+1,), cell masses (N,)) of the polar-angle marginal of a ZonalSolution or a profile f(s)."""
    if isinstance(source, ZonalSolution):
        if d is not None and as_count(d, "d", minimum=2) != source.d:
            raise ValueError(f"d = {d} differs from the solution's dimension {source.d}; leave d=None")
        return source.edges, np.clip(source.masses[k], 0.0, None)
    if not callable(source):
        raise TypeError(f"source must be a ZonalSolution or a callable profile f(s) of s = cos θ; "
                        f"got {type(source).__name__}")
    if d is None:
        raise ValueError("d is required to sample a profile f(s) (the marginal of θ has density ∝ f sin^{d-2} θ)")
    d = as_count(d, "d", minimum=2)
    _, edges = zonal_solver.polar_grid(PROFILE_CELLS)
    m = zonal_solver.cell_masses(source, d, PROFILE_CELLS)
    return edges, m


def sample(source, n, d=None, *, k=-1, method="iid", seed=None):
    """n tokens on S^{d-1} ⊂ R^d from a zonal measure with axis e_1.

    Parameters
    ----------
    source : ZonalSolution or callable
        A solution (its k-th output) or a profile f(s), s = cos θ (then ``d`` is required).
    n : int
        Number of tokens (even for method="quantile").
    d : int, optional
        Dimension (taken from a solution).
    k : int
        Output index of a solution.
    method : {"iid", "quantile"}
        i.i.d. polar angles, or the n/2 mid-quantiles u = (j + 1/2)/(n/2) each used twice with
        antithetic transverse directions ±w_j (see the module docstring).
    seed : int or Generator, optional
        For the transverse directions (and the i.i.d. angles).

    Returns
    -------
    x : (n, d) array of unit vectors; cos θ_i = x_i1.  Within a cell the angle is uniform.
    """
    n = as_count(n, "n")
    as_choice(method, "method", METHODS)
    edges, m = _marginal(source, d, k)
    d = source.d if isinstance(source, ZonalSolution) else d
    as_size(n, "n", 8 * (3 * d + 4))          # the tokens, their angles and transverse directions
    rng = np.random.default_rng(as_seed(seed))
    if method == "quantile":
        if n % 2:
            raise ValueError(f"method='quantile' pairs tokens (±w): n must be even; got {n}")
        u = np.repeat((np.arange(n // 2) + 0.5) / (n // 2), 2)
    else:
        u = rng.random(n)
    cdf = np.concatenate(([0.0], np.cumsum(m)))
    cdf /= cdf[-1]
    j = np.clip(np.searchsorted(cdf, u, side="right") - 1, 0, m.size - 1)
    frac = np.clip((u - cdf[j]) / np.where(m[j] > 0, m[j] / m.sum(), 1.0), 0.0, 1.0)
    theta = edges[j] + frac * (edges[j + 1] - edges[j])
    w = rng.standard_normal((n, d - 1))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    if method == "quantile":
        w[1::2] = -w[0::2]
    return np.concatenate([np.cos(theta)[:, None], np.sin(theta)[:, None] * w], axis=1)


def polar_wasserstein(theta_a, a, theta_b, b, p=1):
    """Exact W_p between the polar-angle measures Σ a_i δ_{θ_a,i} and Σ b_j δ_{θ_b,j} on [0, π] (weights
    normalised): (∫_0^1 |F_a^{-1}(q) - F_b^{-1}(q)|^p dq)^{1/p}, by ``ot.wasserstein_1d``."""
    theta_a, theta_b = as_float_array(theta_a, "theta_a"), as_float_array(theta_b, "theta_b")
    a = as_weights(a, theta_a.size, "a")
    b = as_weights(b, theta_b.size, "b")
    if p < 1:
        raise ValueError(f"p must be >= 1; got {p}")
    import ot   # imported where transport is computed: `import ot` loads every array backend it finds
    return float(ot.wasserstein_1d(theta_a, theta_b, a / a.sum(), b / b.sum(), p=p)) ** (1.0 / p)


@dataclass(eq=False, repr=False)
class ZonalComparison(_Saveable):
    """Particles in R^d vs the zonal PDE at the output times t (m,), over S draws of n tokens.

    Fields: t (m,); w1 (m, S) exact W_1 between polar-angle marginals (radians); mean_particles (m, S)
    and mean_pde (m,) the axial component <m, e> of the mean; pde (ZonalSolution); particles
    (ParticleSolution); info.  Like ``Comparison``: a compact repr, ``save``/``load`` (.npz) and
    ``to_xarray``/``to_netcdf``/``from_netcdf``."""
    t: np.ndarray
    w1: np.ndarray
    mean_particles: np.ndarray
    mean_pde: np.ndarray
    pde: object
    particles: object
    info: dict = field(default_factory=dict)


def compare(model, f0, t_eval, d, n, seeds=1, *, cells=512, method="quantile", dt=None):
    """Run the zonal PDE from the profile f0 and the particle system (RK4) from n tokens sampled from the
    PDE's initial grid measure (``sample``; seeds 0..S-1, one batched solve); return a ZonalComparison."""
    model = as_model(model)
    t_eval = as_time_grid(t_eval)
    d, n, seeds = as_count(d, "d", minimum=2), as_count(n, "n"), as_count(seeds, "seeds")
    pde = zonal_solver.solve(model, f0, t_eval, d, cells=cells)
    x0 = np.stack([sample(pde, n, k=0, method=method, seed=s) for s in range(seeds)])
    parts = particles.solve(model, as_points(x0, "x0", ndim=(3,)), t_eval, dt=dt, energy=False)
    theta = polar_angles(parts.x)                                   # (m, S, n)
    w1 = np.array([[polar_wasserstein(theta[k, s], np.ones(n), *pde.measure(k)) for s in range(seeds)]
                   for k in range(t_eval.size)])
    return ZonalComparison(t=t_eval, w1=w1, mean_particles=np.cos(theta).mean(axis=-1),
                           mean_pde=np.array([pde.mean(k) for k in range(t_eval.size)]), pde=pde,
                           particles=parts, info=dict(d=d, n=n, seeds=seeds, cells=cells, method=method,
                                                      dt=parts.info["dt"]))
