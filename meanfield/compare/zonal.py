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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..checks import as_choice, as_count, as_float_array, as_points, as_seed, as_size, as_time_grid, as_weights
from ..models import SA, USA, as_model
from ..solvers import particles, zonal as zonal_solver
from ..solvers.results import ZonalSolution, Saveable

__all__ = ["polar_angles", "sample", "polar_wasserstein", "ZonalComparison", "compare"]

METHODS = ("iid", "quantile")
PROFILE_CELLS = 4096       # polar grid on which a callable profile is turned into a marginal


def polar_angles(x: ArrayLike) -> np.ndarray:
    r"""Polar angles of points of the sphere about the axis e_1.

    .. math::

        \theta = \arccos\langle x, e_1\rangle = \operatorname{atan2}(|x_\perp|, x_1)

    (the second form is accurate near the poles).

    Parameters
    ----------
    x : array_like, shape (..., d)
        Points on the sphere.

    Returns
    -------
    numpy.ndarray
        θ in [0, π], shape x.shape[:-1].

    Raises
    ------
    ValueError
        If x is not finite.

    Examples
    --------
    >>> from meanfield.compare.zonal import polar_angles
    >>> polar_angles([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]]).round(6)
    array([0.      , 1.570796, 3.141593])
    """
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


def sample(source: ZonalSolution | Callable[[np.ndarray], np.ndarray], n: int, d: int | None = None, *,
           k: int = -1, method: str = "iid", seed: int | np.random.Generator | None = None) -> np.ndarray:
    r"""n tokens on S^{d-1} ⊂ R^d from a zonal measure with axis e_1.

    Given θ drawn from the polar-angle marginal (inverse CDF, uniform in θ inside each cell), the token is

    .. math::

        x = \cos\theta\, e_1 + \sin\theta\, w, \qquad w \text{ uniform on the unit sphere of } e_1^\perp.

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
    numpy.ndarray, shape (n, d)
        Unit vectors; cos θ_i = x_i1.

    Raises
    ------
    TypeError
        If source is neither a ZonalSolution nor a callable.
    ValueError
        If d is missing for a profile or disagrees with the solution, the method is unknown, or n is
        odd for method="quantile".

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.compare.zonal import sample
    >>> x = sample(lambda s: 1.0 + 0.0 * s, 6, d=3, method="quantile", seed=0)   # uniform on S^2
    >>> x.shape, round(float(x.mean(axis=0)[1:].max()), 12)       # antithetic pairs: no transverse mean
    ((6, 3), 0.0)
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


def polar_wasserstein(theta_a: ArrayLike, a: ArrayLike, theta_b: ArrayLike, b: ArrayLike, p: float = 2) -> float:
    r"""Exact W_p between the polar-angle measures Σ a_i δ_{θ_a,i} and Σ b_j δ_{θ_b,j} on [0, π] (weights
    normalised), by ``ot.wasserstein_1d``.

    .. math::

        W_p = \Big(\int_0^1 |F_a^{-1}(q) - F_b^{-1}(q)|^p \, dq\Big)^{1/p}.

    Parameters
    ----------
    theta_a : array_like, shape (n,)
        Angles of the first measure.
    a : array_like, shape (n,)
        Its non-negative weights.
    theta_b : array_like, shape (m,)
        Angles of the second measure.
    b : array_like, shape (m,)
        Its non-negative weights.
    p : float
        Order p >= 1.

    Returns
    -------
    float
        W_p in radians.

    Raises
    ------
    ValueError
        If the weights are invalid or p < 1.

    Examples
    --------
    >>> from meanfield.compare.zonal import polar_wasserstein
    >>> round(polar_wasserstein([0.0, 1.0], [1, 1], [0.5], [1], p=1), 6)
    0.5
    """
    theta_a, theta_b = as_float_array(theta_a, "theta_a"), as_float_array(theta_b, "theta_b")
    a = as_weights(a, theta_a.size, "a")
    b = as_weights(b, theta_b.size, "b")
    if p < 1:
        raise ValueError(f"p must be >= 1; got {p}")
    import ot   # imported where transport is computed: `import ot` loads every array backend it finds
    return float(ot.wasserstein_1d(theta_a, theta_b, a / a.sum(), b / b.sum(), p=p)) ** (1.0 / p)


@dataclass(eq=False, repr=False)
class ZonalComparison(Saveable):
    r"""Particles in R^d vs the zonal PDE at the output times t, over S draws of n tokens (result of
    ``compare``).

    .. math::

        w_1[k, s] = W_1\big(\theta_\# \mu^{n, s}_{t_k}, \theta_\# \rho_{t_k}\big), \qquad
        \theta = \arccos\langle x, e_1\rangle.

    Like ``Comparison``: a compact repr, ``save``/``load`` (.npz) and ``to_xarray``/``to_netcdf``/``from_netcdf``.

    Parameters
    ----------
    t : numpy.ndarray, shape (m,)
        Output times.
    w1 : numpy.ndarray, shape (m, S)
        Exact W_1 between polar-angle marginals (radians).
    mean_particles : numpy.ndarray, shape (m, S)
        The axial component ⟨m, e⟩ of the tokens' mean.
    mean_pde : numpy.ndarray, shape (m,)
        The same for the PDE.
    pde : ZonalSolution
    particles : ParticleSolution
    info : dict
        Settings.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare.zonal import compare
    >>> c = compare(mf.SA(beta=1.0), lambda s: 1.0 + 0.5 * s, [0.0, 0.5], d=3, n=40, cells=64)
    >>> c.w1.shape, bool(c.w1.max() < 0.1)
    ((2, 1), True)
    """
    t: np.ndarray
    w1: np.ndarray
    mean_particles: np.ndarray
    mean_pde: np.ndarray
    pde: object
    particles: object
    info: dict = field(default_factory=dict)


def compare(model: SA | USA, f0: Callable[[np.ndarray], np.ndarray], t_eval: ArrayLike, d: int, n: int,
            seeds: int = 1, *, cells: int = 512, sampling: str = "quantile",
            dt: float | None = None) -> "ZonalComparison":
    r"""The zonal PDE from the profile f0 against the particle system (RK4) from n tokens sampled from
    the PDE's initial grid measure (``sample``; seeds 0..S-1, one batched solve).

    .. math::

        W_1\big(\theta_\# \mu^n_t, \theta_\# \rho_t\big) \ \text{at each output time}, \qquad
        \langle m, e_1\rangle \text{ of both}.

    Parameters
    ----------
    model : SA or USA
        With QᵀK = I and V = ±I.
    f0 : callable
        Initial profile f(s), s = cos θ.
    t_eval : array_like
        Increasing output times.
    d : int
        Dimension (>= 2).
    n : int
        Tokens per draw.
    seeds : int
        Number of draws S.
    cells : int
        Polar cells of the PDE.
    sampling : {"quantile", "iid"}
        How the tokens are drawn (``sample``'s ``method``); "quantile", the deterministic draw, by
        default, as ``meanfield.compare`` draws "stratified" tokens: tokens compared with a density.
    dt : float, optional
        Step of the particle solver.

    Returns
    -------
    ZonalComparison

    Raises
    ------
    ValueError
        If an argument is invalid (see ``zonal.solve``, ``sample`` and ``particles.solve``).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare.zonal import compare
    >>> c = compare(mf.SA(beta=1.0), lambda s: 1.0 + 0.5 * s, [0.0, 0.5], d=3, n=40, seeds=2, cells=64)
    >>> c.mean_particles.shape, bool(abs(c.mean_particles[-1] - c.mean_pde[-1]).max() < 0.05)
    ((2, 2), True)
    """
    model = as_model(model)
    t_eval = as_time_grid(t_eval)
    d, n, seeds = as_count(d, "d", minimum=2), as_count(n, "n"), as_count(seeds, "seeds")
    pde = zonal_solver.solve(model, f0, t_eval, d, cells=cells)
    x0 = np.stack([sample(pde, n, k=0, method=sampling, seed=s) for s in range(seeds)])
    parts = particles.solve(model, as_points(x0, "x0", ndim=(3,)), t_eval, dt=dt, energy=False)
    theta = polar_angles(parts.x)                                   # (m, S, n)
    w1 = np.array([[polar_wasserstein(theta[k, s], np.ones(n), *pde.measure(k), p=1) for s in range(seeds)]
                   for k in range(t_eval.size)])
    return ZonalComparison(t=t_eval, w1=w1, mean_particles=np.cos(theta).mean(axis=-1),
                           mean_pde=np.array([pde.mean(k) for k in range(t_eval.size)]), pde=pde,
                           particles=parts, info=dict(d=d, n=n, seeds=seeds, cells=cells, sampling=sampling,
                                                      dt=parts.info["dt"]))
