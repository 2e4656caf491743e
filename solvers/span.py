"""Span reduction: n tokens in R^d, d > n, solved exactly in the n-dimensional span of x(0).

For Q^T K = a I and V = v I the drift of token i is a combination of the tokens,

    ẋ_i = P_{x_i} Σ_j A_ij(x) v x_j,    A_ij depending on the Gram matrix x xᵀ only,

so x_i(t) stays in S = span(x_1(0), ..., x_n(0)) and the dynamics is invariant under rotations.
Writing x(0) = c(0) Bᵀ with B (d × r) an orthonormal basis of S (``span_coordinates``,
r = min(n, d)), x(t) = c(t) Bᵀ where c solves the same equation in R^r: the whole run costs
what d = n does.  The same holds step by step for every scheme of ``particles.solve`` (each
stage is a combination of the tokens, and x/|x| commutes with B), so the reduced run equals
the full one to round-off.  General Q^T K or V move tokens out of S: refused.
"""
import numpy as np

from meanfield.checks import as_points
from meanfield.checks import as_flag
from meanfield.geometry import span_coordinates
from meanfield.models import as_model

from . import particles


def supports(model):
    r"""Whether the dynamics of ``model`` keeps tokens in the span of x(0): one head with constant
    weights Q^T K = a I and V = v I (SA or USA, causal or not).

    Then every drift is a combination of the tokens,

    .. math::

        \dot x_i = P_{x_i} \sum_j A_{ij}(x x^\top) \, v \, x_j \in \operatorname{span}(x_1, \dots, x_n).

    Parameters
    ----------
    model : SA, USA or MultiHead
        A model object (as ``meanfield.models``).

    Returns
    -------
    bool
        True for one head with constant Q^T K = a I and V = v I.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> supports(mf.SA(2.0)), supports(mf.USA(1.0, causal=True))
    (True, True)
    >>> supports(mf.SA(1.0, V=np.diag([1.0, 2.0, 3.0])))
    False
    """
    return (not getattr(model, "heads", None) and not model.is_time_dependent
            and model.attention_scalar is not None and model.value_scalar is not None)


def solve_in_span(model, x0, t_eval, *, lift=True, **options):
    r"""``particles.solve`` of tokens x0 (n, d) or (B, n, d) run in the span of x0.

    With x0 = c0 Bᵀ (``span_coordinates``, B of r = min(n, d) orthonormal columns) the run solves
    the same equation for the coordinates c in R^r and maps back:

    .. math::

        x(t) = c(t) B^\top, \qquad \dot c_i = P_{c_i} \sum_j A_{ij}(c c^\top) \, v \, c_j, \qquad c(0) = c_0.

    Parameters
    ----------
    model : SA or USA
        One head with Q^T K = a I and V = v I (``supports``).
    x0 : ndarray (n, d) or (B, n, d)
        Unit vectors; for d <= n nothing is gained (the basis is then a rotation of R^d).
    t_eval : array_like
        Output times.
    lift : bool
        True: the solution's tokens (``x`` or ``last``) are mapped back to R^d, x = c Bᵀ.
        False: they stay in span coordinates c (n, r); ``info["span_basis"]`` holds B.
    **options
        Passed to ``particles.solve`` (method, dt, observe, ...).  ``observe`` sees the
        coordinates c, so it should be a statistic of the Gram matrix (pair fractions, ranks).

    Returns
    -------
    ParticleSolution
        As ``particles.solve``; ``info["span_dimension"]`` = r.

    Raises
    ------
    ValueError
        If the model moves tokens out of their span (general Q^T K or V, several heads, time-dependent
        weights), x0 is not an array of unit vectors of shape (n, d) or (B, n, d), or ``particles.solve``
        refuses the options.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> x0 = mf.uniform_sphere(4, 500, seed=0)
    >>> full = particles.solve(mf.SA(2.0), x0, [0.0, 1.0], dt=0.05, energy=False)
    >>> reduced = solve_in_span(mf.SA(2.0), x0, [0.0, 1.0], dt=0.05, energy=False)
    >>> bool(np.max(np.abs(full.x - reduced.x)) < 1e-12)
    True
    """
    model = as_model(model, causal=True)
    lift = as_flag(lift, "lift")
    if not supports(model):
        raise ValueError(f"the span of the tokens is invariant only for Q^T K = a I and V = v I (constant); "
                         f"got {model!r}: solve in R^d with particles.solve")
    x0 = as_points(x0, "x0", ndim=(2, 3))
    c0, basis = span_coordinates(x0)
    sol = particles.solve(model, c0, t_eval, **options)
    sol.info["span_dimension"] = c0.shape[-1]
    if not lift:
        sol.info["span_basis"] = basis
        return sol
    bt = np.swapaxes(basis, -1, -2)
    if sol.x is not None:
        sol.x = sol.x @ bt
    if sol.last is not None:
        sol.last = sol.last @ bt
    return sol
