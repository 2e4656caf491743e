r"""The engine contract: the semi-discrete system dy/dt = F(y) of one engine on one discretisation.

Every engine (a geometry and its discretisation) hands the time integration an ``Operator``; the
schemes and controllers of ``stepping`` see nothing else of it.  The density engines implement it
with one class each (``circle.CircleOperator``, ``dyadic_operator.DyadicOperator`` for the adaptive
circle, ``sphere.SphereOperator`` on a fixed mesh, which the adaptive S^2 engine builds afresh on
each of its meshes, ``zonal.ZonalOperator``, ``causal.CausalOperator``); the particle engines follow
the same contract for their state (``particles.ParticleOperator``).

To implement a new engine, subclass ``Operator`` and give it

- ``positive``: True when the states are non-negative cell densities (or masses): the positivity
  controller then keeps every stage admissible;
- ``__call__(y) -> (dy/dt, rate)``: the right-hand side and the forward-Euler rate, a number with
  y + h F(y) admissible (for densities: every value >= 0) whenever h · rate <= 1 (0.0 where no step
  size limits admissibility, as for particles);
- ``step_bound()``: the largest step allowed a priori (the global speed bound: the largest fixed
  step a solve accepts);
- ``energy(y)``: E_β of the state's measure (NaN where the dynamics is not a gradient flow of it);
- ``measure(y) -> (points, weights)``: the state as a weighted point measure (cell centres and cell
  masses, or the particles and their weights);
- ``linear_part(y)``: the transport matrix A of the field frozen at y, first-order upwind fluxes,
  so that -A @ y equals F(y) for flux="upwind" (the implicit and IMEX schemes use it; engines
  without one raise NotImplementedError, the default);
- ``project(y)``: the map back onto the state space after a step (identity by default; x/|x| for
  particles on the sphere).

A solve then builds its operator and calls ``stepping.integrate(operator, y0, t_eval,
scheme=scheme, dt=operator.step_bound() ...)``; the engine's ``solve`` carries its numerics only.

The first-order upwind matrix of every density engine has one form (``upwind_matrix``): for a face
e between cells i and j with size |f_e| and normal speeds a_e at c_i and b_e at c_j (positive from i
to j), the mass flow from i to j is |f_e| (ρ_i a_e^+ + ρ_j b_e^-), and

.. math::

    \frac{d\rho_i}{dt} = -\frac{1}{|C_i|} \sum_{e \ni i} \pm |f_e| (\rho_i a_e^+ + \rho_j b_e^-)
    = -(A\rho)_i,

so A has a non-negative diagonal, non-positive off-diagonal entries and zero column sums in the
cell-size weighting, ``sizes @ A == 0`` (the total mass Σ_i |C_i| ρ_i is conserved); (I + hA) is
then an M-matrix, with a non-negative inverse, for every h >= 0, so an implicit Euler step
(I + hA) y_{n+1} = y_n keeps densities non-negative and the mass exact.
"""
from __future__ import annotations

import abc

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike

__all__ = ["Operator", "upwind_matrix", "scheme_keyword", "scheme_name", "with_scheme", "DENSITY_SCHEME",
           "PARTICLE_SCHEME", "CHECKPOINT_EVERY"]

#: The default ``scheme=`` of the density solvers: SSP-RK3, positivity-controlled when ``dt=None``.
DENSITY_SCHEME = "ssprk3"
#: The default ``scheme=`` of the particle solvers.
PARTICLE_SCHEME = "rk4"
#: The default ``checkpoint_every`` of every solver: time steps between checkpoints.
CHECKPOINT_EVERY = 100


class Operator(abc.ABC):
    """The semi-discrete system dy/dt = F(y) of one engine on one discretisation.

    See the module docstring for what each method must do ("To implement a new engine ...").

    Attributes
    ----------
    positive : bool
        True for density engines: states are non-negative cell densities and ``__call__``'s rate
        bounds the admissible forward-Euler step.

    Examples
    --------
    A linear decay y' = -y written against the contract:

    >>> import numpy as np, scipy.sparse
    >>> from meanfield.solvers.contract import Operator
    >>> class Decay(Operator):
    ...     positive = True
    ...     def __call__(self, y):
    ...         return -y, 1.0                # y + h(-y) = (1 - h) y >= 0 for h <= 1
    ...     def step_bound(self):
    ...         return 1.0
    ...     def energy(self, y):
    ...         return float("nan")
    ...     def measure(self, y):
    ...         return np.zeros((y.size, 1)), y
    ...     def linear_part(self, y):
    ...         return scipy.sparse.identity(y.size, format="csr")
    >>> op = Decay()
    >>> y = np.array([1.0, 2.0])
    >>> bool(np.array_equal(-op.linear_part(y) @ y, op(y)[0])), op.project(y) is y
    (True, True)
    """

    positive: bool = True

    @abc.abstractmethod
    def __call__(self, y: np.ndarray) -> tuple[np.ndarray, float]:
        """(dy/dt, rate): the right-hand side at y and the forward-Euler rate (y + h F(y) is
        admissible whenever h · rate <= 1)."""

    @abc.abstractmethod
    def step_bound(self) -> float:
        """The largest step allowed a priori (the largest fixed step a solve accepts)."""

    @abc.abstractmethod
    def energy(self, y: np.ndarray) -> float:
        """E_β of the state's measure, NaN where the dynamics is not its gradient flow."""

    @abc.abstractmethod
    def measure(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(points, weights): the state as a weighted point measure."""

    def linear_part(self, y: np.ndarray) -> scipy.sparse.csr_matrix:
        """The first-order upwind transport matrix A of the field frozen at y: -A @ y = F(y) for
        flux="upwind" (``upwind_matrix``).  Engines without one raise NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} has no linear part (explicit schemes only)")

    def project(self, y: np.ndarray) -> np.ndarray:
        """The state mapped back onto the state space after a step (the identity here)."""
        return y


def upwind_matrix(left: ArrayLike, right: ArrayLike, a: ArrayLike, b: ArrayLike, faces: ArrayLike,
                  sizes: ArrayLike) -> scipy.sparse.csr_matrix:
    r"""The first-order upwind transport matrix of normal speeds on the faces of a cell complex.

    .. math::

        (A\rho)_i = \frac{1}{|C_i|} \sum_{e = (i, j)} |f_e| (\rho_i a_e^+ + \rho_j b_e^-)
        - \frac{1}{|C_i|} \sum_{e = (j, i)} |f_e| (\rho_j a_e^+ + \rho_i b_e^-),

    the face e = (i, j) carrying the mass flow |f_e| (ρ_i a_e^+ + ρ_j b_e^-) from cell i to cell j
    (a_e: the normal speed at c_i, b_e: at c_j, both positive from i to j), so that
    dρ/dt = -Aρ.  A has a non-negative diagonal, non-positive off-diagonal entries and
    ``sizes @ A == 0`` (mass conservation).

    Parameters
    ----------
    left, right : array_like of int, shape (E,)
        The cells i and j of each face.
    a, b : array_like, shape (E,)
        The normal speeds at c_i and at c_j, positive from i to j.
    faces : array_like, shape (E,)
        |f_e|: face sizes (lengths on S^2, 1 on a line of cells).
    sizes : array_like, shape (N,)
        |C_i|: cell sizes (areas on S^2, widths on a line of cells).

    Returns
    -------
    scipy.sparse.csr_matrix, shape (N, N)

    Examples
    --------
    Speed 1 around a ring of four cells of width 1/2: the donor-cell scheme ρ_i' = -2(ρ_i - ρ_{i-1}).

    >>> import numpy as np
    >>> from meanfield.solvers.contract import upwind_matrix
    >>> i = np.arange(4)
    >>> A = upwind_matrix(i, (i + 1) % 4, np.ones(4), np.ones(4), np.ones(4), np.full(4, 0.5))
    >>> A.toarray()
    array([[ 2.,  0.,  0., -2.],
           [-2.,  2.,  0.,  0.],
           [ 0., -2.,  2.,  0.],
           [ 0.,  0., -2.,  2.]])
    >>> bool(np.abs(np.full(4, 0.5) @ A).max() == 0)
    True
    """
    left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    out_i = np.asarray(faces, dtype=float) * np.maximum(np.asarray(a, dtype=float), 0.0)    # coefficient of ρ_i
    in_j = np.asarray(faces, dtype=float) * np.minimum(np.asarray(b, dtype=float), 0.0)     # of ρ_j (<= 0)
    sizes = np.asarray(sizes, dtype=float)
    rows = np.concatenate([left, left, right, right])
    cols = np.concatenate([left, right, left, right])
    vals = np.concatenate([out_i / sizes[left], in_j / sizes[left], -out_i / sizes[right], -in_j / sizes[right]])
    n = sizes.size
    return scipy.sparse.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()


def scheme_keyword(scheme: object, method: object, default: object) -> object:
    """The time scheme of a particle solve from ``scheme=`` and its alias ``method=``.

    ``scheme=`` is the keyword of every solver; the particle solvers also take ``method=`` (the API
    contract's name in ``particles.solve``) for the same thing.

    Parameters
    ----------
    scheme : str, Scheme class or instance
        The ``scheme=`` argument (``default`` when not given).
    method : str, Scheme class or instance, or None
        The ``method=`` argument (None when not given).
    default : str
        The solver's default scheme.

    Returns
    -------
    str, Scheme class or instance

    Raises
    ------
    TypeError
        When both are given and differ.

    Examples
    --------
    >>> from meanfield.solvers.contract import scheme_keyword
    >>> scheme_keyword("rk4", "euler", "rk4"), scheme_keyword("euler", None, "rk4")
    ('euler', 'euler')
    """
    if method is None:
        return scheme
    if scheme is not default and scheme != default and scheme != method:
        raise TypeError(f"the time scheme was given twice, as scheme={scheme!r} and method={method!r}; pass one "
                        f"(scheme= is the name every solver takes)")
    return method


def scheme_name(scheme: object) -> str:
    """The name a result's ``info["method"]`` records for a time scheme: the registered name, or
    the ``name`` of a scheme class or instance (else its class name).

    Parameters
    ----------
    scheme : str, Scheme class or instance

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield.solvers.contract import scheme_name
    >>> class Heun:
    ...     name = "heun"
    >>> scheme_name("ssprk3"), scheme_name(Heun), scheme_name(Heun())
    ('ssprk3', 'heun', 'heun')
    """
    if isinstance(scheme, str):
        return scheme
    return str(getattr(scheme, "name", getattr(scheme, "__name__", type(scheme).__name__)))


def with_scheme(meta: dict, scheme: object, default: object = DENSITY_SCHEME) -> dict:
    """A checkpoint's run identity ``meta`` with the time scheme added where it is not the default.

    A checkpoint resumes only a run with the same ``meta``: a run with another scheme is then refused,
    and checkpoints of runs with the default scheme, written before solvers took ``scheme=``, still
    resume.

    Parameters
    ----------
    meta : dict
        The run's identity (changed in place).
    scheme : str, Scheme class or instance
    default : str
        The solver's default scheme.

    Returns
    -------
    dict
        ``meta``.

    Examples
    --------
    >>> from meanfield.solvers.contract import with_scheme
    >>> with_scheme({"solver": "circle"}, "ssprk3"), with_scheme({"solver": "circle"}, "euler")
    ({'solver': 'circle'}, {'solver': 'circle', 'scheme': 'euler'})
    """
    if scheme_name(scheme) != scheme_name(default):
        meta["scheme"] = scheme_name(scheme)
    return meta
