"""Self-attention without layer normalisation: tokens in R^d ("The emergence of clusters in
self-attention dynamics", Geshkovski–Letrouit–Polyanskiy–Rigollet, arXiv:2305.05465).

The raw dynamics  ẋ_i = Σ_j P_ij(x) V x_j,  P_ij = softmax_j(β<Q x_i, K x_j>)  grows like e^{tV};
the rescaled tokens z_i = e^{-tV} x_i solve the bounded system

    ż_i = Σ_j P_ij(e^{tV} z) V (z_j - z_i)

which is what we integrate (RK4 by default; the softmax is shifted by its row maximum, so the
scores may grow like e^{2 t λ_max(V)} without overflow).  Limits (2305.05465, paper.md §5 item 7):
V = I — the z_i converge to the vertices of a convex polytope ("leaders"); V with a simple
positive top eigenvalue — the components along its eigenvector converge to at most three values
(hyperplanes).  Only the softmax (SA) model is defined here.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import expm

from meanfield.budget import BUDGET
from meanfield.checks import as_choice, as_float_array, as_positive, as_time_grid
from meanfield.models import SA, as_model

from .contract import PARTICLE_SCHEME, scheme_keyword, scheme_name
from .results import ParticleSolution
from .stepping import integrate

__all__ = ["solve", "velocity", "tokens"]

DEFAULT_DT = 0.01    # the fixed step when dt=None


def _propagator(V, t):
    """e^{tV} (d, d)."""
    return expm(t * V)


def _field(beta, A, V, t, z):
    """ż for rescaled tokens z (B, n, d) at time t (A = Q^T K)."""
    x = z @ _propagator(V, t).T
    scores = beta * np.einsum("bid,de,bje->bij", x, A, x)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ z - z) @ V.T


def _setup(model, z):
    model = as_model(model)
    if not model.normalised:
        raise ValueError("the Euclidean dynamics is defined for the softmax model SA (USA has no "
                         "rescaled form z = e^{-tV} x); got USA")
    z = as_float_array(z, "x0")
    if z.ndim not in (2, 3) or 0 in z.shape:
        raise ValueError(f"x0 must have shape (n, d) or (B, n, d); got {z.shape}")
    A, V = model.interaction(z.shape[-1])
    return model, z, A, V


def velocity(model, z, t=0.0):
    r"""ż_i of the rescaled tokens z = e^{-tV} x at time t.

    .. math::

        \dot z_i = \sum_j P_{ij}(e^{tV} z) \, V (z_j - z_i), \qquad
        P_{ij}(x) = \operatorname{softmax}_j \beta \langle Q x_i, K x_j\rangle.

    Parameters
    ----------
    model : SA
        Any Q, K, V.
    z : array_like, shape (n, d) or (B, n, d)
        Rescaled tokens (any norm).
    t : float

    Returns
    -------
    ndarray, shape like z

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import euclidean
    >>> z = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> bool(np.allclose(euclidean.velocity(mf.SA(0.0), z), [[-0.5, 1.0], [0.5, -1.0]]))   # β = 0: the mean
    True
    """
    model, z, A, V = _setup(model, z)
    return _field(model.beta, A, V, float(t), z[None] if z.ndim == 2 else z).reshape(z.shape)


def solve(model: SA, x0: ArrayLike, t_eval: ArrayLike, *, scheme: str | type | object = PARTICLE_SCHEME,
          dt: float | None = None, progress: bool | None = None, budget: float | None = BUDGET,
          method: str | None = None) -> ParticleSolution:
    r"""Integrate the rescaled tokens z(t) = e^{-tV} x(t) of self-attention in R^d.

    .. math::

        \dot x_i = \sum_j P_{ij}(x) V x_j \quad\Longleftrightarrow\quad
        \dot z_i = \sum_j P_{ij}(e^{tV} z) \, V (z_j - z_i),

    from z(t_0) = x0, with RK4 (default) or Euler at fixed step ``dt``.

    Parameters
    ----------
    model : SA
        Any Q, K, V (only the softmax model is defined here).
    x0 : array_like, shape (n, d) or (B, n, d)
        Initial tokens (points of R^d, any norm).
    t_eval : array_like
        Increasing output times.
    scheme : {"rk4", "euler"}, or a Scheme class or instance
        The time scheme (``stepping.integrate``).
    dt : float, optional
        The step (default 0.01).
    progress : bool or None
        A progress bar (None: after a few seconds on a terminal).
    budget : float or None
        Seconds (default one hour; None: no limit): a run whose step count times the measured cost
        of a step exceeds it is refused before it starts (``meanfield.budget``).
    method : str, optional
        The same as ``scheme`` (as ``particles.solve``); pass one of the two.

    Returns
    -------
    ParticleSolution
        ``x`` (m, n, d) or (m, B, n, d) holds z (``tokens(model, t, z)`` gives the raw x); ``energy``
        is None (no energy is monotone here in general).

    Raises
    ------
    ValueError
        For non-finite tokens, bad times, scheme or step, or a run that does not fit in ``budget``.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import euclidean
    >>> x0 = np.random.default_rng(0).normal(size=(5, 2))
    >>> sol = euclidean.solve(mf.SA(1.0), x0, [0.0, 1.0], progress=False)
    >>> sol.x.shape
    (2, 5, 2)
    """
    model, z0, A, V = _setup(model, x0)
    t_eval = as_time_grid(t_eval)
    method = scheme_keyword(scheme, method, PARTICLE_SCHEME)
    if isinstance(method, str):
        as_choice(method, "scheme", ("rk4", "euler"))
    dt = DEFAULT_DT if dt is None else as_positive(dt, "dt")
    batched = z0[None] if z0.ndim == 2 else z0
    rhs = lambda t, z: _field(model.beta, A, V, t, z)      # noqa: E731
    zs, info = integrate(rhs, batched, t_eval, scheme=method, dt=dt, time_dependent=True, progress=progress,
                         context=f"this solve of {model!r} ({batched.shape[-2]} tokens to t = {t_eval[-1]:g})",
                         budget=budget)
    info.update(method=scheme_name(method), dt=dt, variables="rescaled z = exp(-tV) x")
    return ParticleSolution(t=t_eval, x=zs.reshape((t_eval.size,) + z0.shape), energy=None, model=model,
                            info=info)


def tokens(model, t, z):
    """The raw tokens at time t.

    .. math::

        x = e^{tV} z.

    Parameters
    ----------
    model : SA
    t : float
    z : array_like, shape (..., d)

    Returns
    -------
    ndarray, shape like z

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import euclidean
    >>> bool(np.allclose(euclidean.tokens(mf.SA(1.0), 1.0, np.ones((2, 3))), np.e))    # V = I
    True
    """
    model = as_model(model)
    z = as_float_array(z, "z")
    _, V = model.interaction(z.shape[-1])
    return z @ _propagator(V, float(t)).T
