r"""Time schemes for y' = f(t, y), as registered classes (like scipy's ``OdeSolver`` methods).

A scheme knows how to take one step; *when* to step (fixed steps, positivity control, error
control), output times, checkpoints and progress belong to the controllers and to
``stepping.integrate``, which take a scheme by name, class or instance (``as_scheme``):

==================  =================  =====  ======  ==========================================
name                class              order  stages  notes
==================  =================  =====  ======  ==========================================
``euler``           ``ForwardEuler``   1      1       Shu–Osher (SSP, coefficient 1)
``ssprk3``          ``SSPRK3``         3      3       Shu–Osher (SSP, coefficient 1)
``rk4``             ``RK4``            4      4       classical Runge–Kutta, not SSP
``dopri5``          ``DormandPrince``  5      7       embedded 5(4) pair (error control)
``implicit_euler``  ``ImplicitEuler``  1      1       linearly implicit, positive for every h
``mprk22``          ``MPRK22``         2      2       linearly implicit, positive for every h,
                                                      embedded estimate (error control)
``backward_euler``  ``BackwardEuler``  1      --      fully implicit (Newton–Krylov), positive for
                                                      every h, error estimate (error control)
``auto``            ``Auto``           --     --      SSP-RK3 while fast, backward Euler once slow
==================  =================  =====  ======  ==========================================

Strong-stability-preserving schemes are written in Shu–Osher form (Shu & Osher 1988; Gottlieb,
Ketcheson & Shu 2011): with y_0 = y_n,

.. math::

    y_{i+1} = \sum_{k \le i} \alpha_{ik}\Big(y_k + h\,\frac{\beta_{ik}}{\alpha_{ik}}\,F(y_k)\Big),
    \qquad y_{n+1} = y_s,

every stage a convex combination of forward-Euler sub-steps of size h β_ik/α_ik, so a state that
a forward-Euler step of size h' keeps admissible (e.g. non-negative) stays admissible whenever
every sub-step is at most h'.

The linearly implicit schemes (``implicit = True``) step the density engines' system
dρ/dt = -A(ρ)ρ, A = ``Operator.linear_part(ρ)`` the first-order upwind transport of the field frozen
at ρ: every stage solves (I + h A') x = ρ_n with a matrix A' of the transport sign pattern, an
M-matrix (``implicit.m_matrix_solve``), so the densities stay non-negative and the mass exact for
every step h, and the step is chosen by the error, not by the cells (docs/implicit.md).

``BackwardEuler`` is fully implicit: it solves the step's nonlinear equation z - ρ_n + h A(z) z = 0 with the
field at the new state (Newton–Krylov, each iteration preconditioned by such an M-matrix solve), and ends every
step with one of these solves, so it keeps the same guarantees.
"""
import abc
from fractions import Fraction
from typing import Callable, NamedTuple

import numpy as np
import scipy.sparse

import scipy.sparse.linalg

from .implicit import m_matrix_factor, m_matrix_solve

_SQRT_EPS = float(np.sqrt(np.finfo(float).eps))
GMRES_RTOL = 1e-3        # BackwardEuler: GMRES's relative residual per Newton iteration (inexact Newton)
GMRES_RESTART = 30       # ... and its Krylov space (one cycle: P^{-1} J is the identity plus a low rank)

__all__ = ["StepResult", "Scheme", "ShuOsher", "ForwardEuler", "SSPRK3", "RK4", "DormandPrince", "LinearlyImplicit",
           "ImplicitEuler", "MPRK22", "BackwardEuler", "transport", "Auto", "SCHEMES", "as_scheme"]


class StepResult(NamedTuple):
    """What one step returns: the new state, the number of calls of f, and an error estimate.

    Parameters
    ----------
    y : ndarray
        The state at t + h.
    nfev : int
        Calls of f made by the step (a ``k1`` passed in not counted).
    error : ndarray, optional
        The local error estimate of an embedded pair.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.schemes import StepResult
    >>> StepResult(np.ones(2), 1).error is None
    True
    """

    y: np.ndarray
    nfev: int
    error: np.ndarray | None = None


class Scheme(abc.ABC):
    r"""An explicit one-step scheme for y' = f(t, y): the protocol every scheme implements.

    To implement a new scheme, subclass ``Scheme`` (or ``ShuOsher`` for a strong-stability-preserving
    scheme given by its Shu–Osher arrays, which then needs nothing else) and define

    - ``name`` (str): the name stored in checkpoints and results;
    - ``order`` (int): the order of accuracy of ``step``; ``stages`` (int): calls of f per step;
    - ``step(f, t, y, h, k1=None)``: one step from (t, y) of size h, returning a ``StepResult``
      ``(y_new, nfev, error)``; ``k1``, when given, is f(t, y) already computed (the controllers pass
      it when they had to evaluate f at y to choose h) and must not be counted in ``nfev``;
    - ``adaptive = True`` and ``error_order`` (int) for an embedded pair whose ``step`` returns
      ``error`` (an estimate of the local error, same shape as y): the error controller then picks h;
    - ``implicit = True`` for a linearly implicit scheme (``LinearlyImplicit``): ``f`` is then the
      engine's ``Operator`` and the scheme uses ``f.linear_part``; its states stay admissible for
      every h, so no controller bounds its step by the positivity rate.

    ``step`` must be a pure function of its arguments (no state kept between steps), so that a run
    resumed from a checkpoint repeats the arithmetic of an uninterrupted one.  The controllers use
    nothing else: fixed steps call ``step``; the positivity controller gives non-Shu–Osher schemes
    a step h ≤ cfl/rate and rejects a result with a negative entry; ``ShuOsher`` schemes get a
    check of each stage's forward-Euler sub-step instead.  Register the class in ``SCHEMES`` to make
    its name a valid ``scheme=`` string; unregistered classes and instances are accepted as they are.

    Examples
    --------
    Heun's method (the explicit trapezoidal rule) in six lines:

    >>> import numpy as np
    >>> from meanfield.solvers.schemes import Scheme, StepResult
    >>> class Heun(Scheme):
    ...     name, order, stages = "heun", 2, 2
    ...     def step(self, f, t, y, h, k1=None):
    ...         fresh = k1 is None
    ...         k1 = f(t, y) if fresh else k1
    ...         k2 = f(t + h, y + h * k1)
    ...         return StepResult(y + 0.5 * h * (k1 + k2), 1 + fresh)
    >>> y, nfev, _ = Heun().step(lambda t, y: -y, 0.0, np.ones(1), 0.1)
    >>> nfev, round(float(y[0]), 6)
    (2, 0.905)
    """

    name: str = ""
    order: int = 0
    stages: int = 0
    adaptive: bool = False
    error_order: int | None = None
    implicit: bool = False

    @abc.abstractmethod
    def step(self, f: Callable, t: float, y: np.ndarray, h: float, k1: np.ndarray | None = None) -> StepResult:
        """One step of size h from (t, y); see the class docstring."""

    def __repr__(self):
        return f"{type(self).__name__}()"


def _weight(coefficient):
    """(operation, value) applying a Shu–Osher coefficient: 0 (identity), 1 (divide: a coefficient 1/m
    is applied as x / m, correctly rounded, as hand-written schemes do) or 2 (multiply)."""
    if coefficient == 1:
        return 0, 1.0
    if isinstance(coefficient, Fraction) and coefficient.numerator == 1:
        return 1, float(coefficient.denominator)
    return 2, float(coefficient)


class ShuOsher(Scheme):
    r"""An explicit SSP scheme given by its Shu–Osher arrays ``alpha`` and ``beta`` (module docstring).

    Subclasses set ``alpha`` and ``beta``: s rows, row i holding α_ik, β_ik for k = 0..i (lower
    triangular; give exact ``fractions.Fraction`` entries where possible: a coefficient 1/m is applied
    as a division by m).  Each row of alpha sums to 1, α ≥ 0, β ≥ 0, and β_ik > 0 only where
    α_ik > 0.  The stage times c_k follow from the arrays.  ``substeps[k]`` is the largest
    forward-Euler sub-step, in units of h, taken from stage k: the positivity controller keeps
    h · substeps[k] · rate(y_k) ≤ 1 at every stage (``stages_within``).

    Examples
    --------
    Heun's SSP-RK2, y_1 = y + h F(y), y_2 = ½ y + ½ (y_1 + h F(y_1)):

    >>> from fractions import Fraction as Fr
    >>> import numpy as np
    >>> from meanfield.solvers.schemes import ShuOsher
    >>> class SSPRK2(ShuOsher):
    ...     name, order = "ssprk2", 2
    ...     alpha = [[1], [Fr(1, 2), Fr(1, 2)]]
    ...     beta = [[1], [0, Fr(1, 2)]]
    >>> scheme = SSPRK2()
    >>> scheme.stages, [float(c) for c in scheme.c], scheme.substeps
    (2, [0.0, 1.0], [1.0, 1.0])
    >>> y = scheme.step(lambda t, y: -y, 0.0, np.ones(1), 0.1).y
    >>> round(float(y[0]), 6)
    0.905
    """

    alpha: list = []
    beta: list = []
    _derived: dict = {}         # per class: what __init__ derives from the arrays (computed once)

    def __init__(self):
        cls = type(self)
        if cls not in ShuOsher._derived:
            ShuOsher._derived[cls] = self._derive()
        self.c, self.stages, self.substeps, self._rows, self._times = ShuOsher._derived[cls]

    def _derive(self):
        """The stage times, the sub-steps and the rows of the arrays, checked (once per class)."""
        alpha, beta = self.alpha, self.beta
        s = len(alpha)
        if s == 0 or len(beta) != s or any(len(alpha[i]) != i + 1 or len(beta[i]) != i + 1 for i in range(s)):
            raise ValueError(f"{type(self).__name__}: alpha and beta must be lower-triangular rows of lengths "
                             f"1, 2, ..., s")
        for i in range(s):
            if any(a < 0 for a in alpha[i]) or any(b < 0 for b in beta[i]) \
                    or any(b > 0 and a == 0 for a, b in zip(alpha[i], beta[i])) or abs(sum(alpha[i]) - 1) > 1e-14:
                raise ValueError(f"{type(self).__name__}: row {i} of the Shu–Osher arrays is not a convex "
                                 f"combination of forward-Euler steps (alpha >= 0 summing to 1, beta >= 0, "
                                 f"beta > 0 only where alpha > 0)")
        c = [Fraction(0)]
        for i in range(s - 1):
            c.append(sum(Fraction(a) * c[k] + Fraction(b) for k, (a, b) in enumerate(zip(alpha[i], beta[i]))))
        substeps = [max((float(Fraction(beta[i][k]) / Fraction(alpha[i][k])) for i in range(k, s)
                         if beta[i][k] > 0), default=0.0) for k in range(s)]
        # row i: (k, sub-step β_ik/α_ik or None, operation and value applying α_ik) for every α_ik > 0
        rows = [[(k, float(Fraction(b) / Fraction(a)) if b else None) + _weight(a)
                 for k, (a, b) in enumerate(zip(alpha[i], beta[i])) if a != 0] for i in range(s)]
        return c, s, substeps, rows, [float(ck) for ck in c]

    def _stage(self, i, ys, ks, h):
        """y_{i+1} = Σ_k α_ik (y_k + h β_ik/α_ik F(y_k)), left to right."""
        total = None
        for k, ratio, operation, value in self._rows[i]:
            x = ys[k] if ratio is None else ys[k] + (h * ratio) * ks[k]
            x = x if operation == 0 else x / value if operation == 1 else value * x
            total = x if total is None else total + x
        return total

    def step(self, f, t, y, h, k1=None):
        ys, ks, nfev = [y], [], 0
        for i in range(self.stages):
            if i == 0 and k1 is not None:
                ks.append(k1)
            else:
                ks.append(f(t + self._times[i] * h, ys[i]) if self.substeps[i] > 0 else None)
                nfev += ks[i] is not None
            ys.append(self._stage(i, ys, ks, h))
        return StepResult(ys[-1], nfev)

    def stages_within(self, f, t, y, h, k1):
        """A positivity-checked step: f returns (F, rate); f(t, y) = (k1, rate) is known and h ·
        substeps[0] · rate ≤ 1 holds.  Returns (y_new, nfev, None), or (None, nfev, r) with r =
        substeps[k] · rate(y_k) of the first later stage k at which h · r > 1 (the step is rejected).

        Examples
        --------
        >>> import numpy as np
        >>> from meanfield.solvers.schemes import SSPRK3
        >>> f = lambda t, y: (-y, 1.0)
        >>> y, nfev, r = SSPRK3().stages_within(f, 0.0, np.ones(1), 0.5, -np.ones(1))
        >>> nfev, r, bool(np.array_equal(y, SSPRK3().step(lambda t, y: -y, 0.0, np.ones(1), 0.5).y))
        (2, None, True)
        """
        ys, ks, nfev = [y], [k1], 0
        for i in range(self.stages):
            if i > 0:
                ks.append(None)
                if self.substeps[i] > 0:
                    ks[i], rate = f(t + self._times[i] * h, ys[i])
                    nfev += 1
                    rate = rate * self.substeps[i]
                    if h * rate > 1.0:
                        return None, nfev, rate
            ys.append(self._stage(i, ys, ks, h))
        return ys[-1], nfev, None


class ForwardEuler(ShuOsher):
    """Forward Euler, y_{n+1} = y_n + h f(t_n, y_n): order 1, one stage.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.schemes import ForwardEuler
    >>> ForwardEuler().step(lambda t, y: -y, 0.0, np.ones(1), 0.1).y
    array([0.9])
    """

    name, order = "euler", 1
    alpha = [[1]]
    beta = [[1]]


class SSPRK3(ShuOsher):
    r"""Shu and Osher's strong-stability-preserving scheme of order 3 (SSP coefficient 1):

    .. math::

        y_1 = y_n + h F(y_n), \quad y_2 = \tfrac34 y_n + \tfrac14 (y_1 + h F(y_1)), \quad
        y_{n+1} = \tfrac13 y_n + \tfrac23 (y_2 + h F(y_2)).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.schemes import SSPRK3
    >>> y = SSPRK3().step(lambda t, y: -y, 0.0, np.ones(1), 0.1).y
    >>> bool(abs(y[0] - np.exp(-0.1)) < 1e-5)
    True
    """

    name, order = "ssprk3", 3
    alpha = [[1], [Fraction(3, 4), Fraction(1, 4)], [Fraction(1, 3), 0, Fraction(2, 3)]]
    beta = [[1], [0, Fraction(1, 4)], [0, 0, Fraction(2, 3)]]


class RK4(Scheme):
    r"""The classical Runge–Kutta scheme of order 4 (not SSP):

    .. math::

        y_{n+1} = y_n + \frac{h}{6}\,(k_1 + 2 k_2 + 2 k_3 + k_4).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.schemes import RK4
    >>> y, nfev, _ = RK4().step(lambda t, y: -y, 0.0, np.array([1.0]), 0.1)
    >>> nfev, bool(abs(y[0] - np.exp(-0.1)) < 1e-6)
    (4, True)
    """

    name, order, stages = "rk4", 4, 4

    def step(self, f, t, y, h, k1=None):
        fresh = k1 is None
        k1 = f(t, y) if fresh else k1
        k2 = f(t + 0.5 * h, y + 0.5 * h * k1)
        k3 = f(t + 0.5 * h, y + 0.5 * h * k2)
        k4 = f(t + h, y + h * k3)
        return StepResult(y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), 3 + fresh)


class DormandPrince(Scheme):
    """The Dormand–Prince 5(4) embedded pair: a step of order 5 and an error estimate of order 4
    (FSAL not exploited, so the error estimate is plain).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.schemes import DormandPrince
    >>> y, nfev, err = DormandPrince().step(lambda t, y: -y, 0.0, np.array([1.0]), 0.1)
    >>> nfev, bool(abs(y[0] - np.exp(-0.1)) < 1e-9), bool(abs(err[0]) < 1e-7)
    (7, True, True)
    """

    name, order, stages, adaptive, error_order = "dopri5", 5, 7, True, 4
    C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1])
    A = [
        [],
        [1 / 5],
        [3 / 40, 9 / 40],
        [44 / 45, -56 / 15, 32 / 9],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
        [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
    ]
    B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0])
    E = B - np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])

    def step(self, f, t, y, h, k1=None):
        fresh = k1 is None
        ks = [f(t, y) if fresh else k1]
        for i in range(1, 7):
            incr = sum(a * k for a, k in zip(self.A[i], ks) if a != 0)
            ks.append(f(t + self.C[i] * h, y + h * incr))
        y_new = y + h * sum(b * k for b, k in zip(self.B, ks) if b != 0)
        err = h * sum(e * k for e, k in zip(self.E, ks) if e != 0)
        return StepResult(y_new, 6 + fresh, err)


class LinearlyImplicit(Scheme):
    """A linearly implicit scheme for y' = -A(y) y, A = ``f.linear_part(y)``, f the engine's Operator.

    To implement a new one, subclass it, set ``name``, ``order``, ``stages`` (linear solves per
    step), ``adaptive`` and ``error_order`` (``step`` returns an embedded error estimate), and define
    ``step(f, t, y, h, k1=None)`` (``k1`` is ignored) returning a ``StepResult`` whose ``nfev`` counts
    evaluations of the linear part.  ``implicit = True``: the controller (``controllers.ImplicitControl``)
    bounds the step by the error only; the scheme keeps y >= 0 for every h.

    The linear part of the last state stepped from is kept, so a rejected step retried from the same
    array (the same object, unchanged) does not evaluate it again; the kept matrix is a function of
    that state only, so a resumed run repeats the arithmetic of an uninterrupted one.

    Examples
    --------
    >>> from meanfield.solvers.schemes import MPRK22
    >>> scheme = MPRK22()
    >>> scheme.name, scheme.order, scheme.adaptive, scheme.implicit
    ('mprk22', 2, True, True)
    """

    implicit = True

    def __init__(self):
        self._frozen = (None, None)

    def linear_part(self, f, y: np.ndarray) -> tuple[scipy.sparse.csr_matrix, int]:
        """(A(y), evaluations): ``f.linear_part(y)``, or the kept one (0 evaluations) for the same ``y``."""
        if self._frozen[0] is y:
            return self._frozen[1], 0
        matrix = f.linear_part(y)
        self._frozen = (y, matrix)
        return matrix, 1


class ImplicitEuler(LinearlyImplicit):
    r"""Implicit Euler with the field lagged (Bailo–Carrillo–Hu 2020): (I + h A(y_n)) y_{n+1} = y_n.
    Order 1, one sparse solve; positive and conservative for every h (``implicit.m_matrix_solve``); no
    error estimate (fixed steps).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.contract import upwind_matrix
    >>> from meanfield.solvers.schemes import ImplicitEuler
    >>> class Drain:                       # cell 0 drains into cell 1 at rate 1: y' = -A y
    ...     def linear_part(self, y):
    ...         return upwind_matrix([0], [1], [1.0], [0.0], [1.0], np.ones(2))
    >>> ImplicitEuler().step(Drain(), 0.0, np.array([1.0, 0.0]), 1.0).y
    array([0.5, 0.5])
    """

    name, order, stages = "implicit_euler", 1, 1

    def step(self, f, t, y, h, k1=None):
        matrix, nfev = self.linear_part(f, y)
        return StepResult(m_matrix_solve(matrix, h, y.ravel()).reshape(y.shape), nfev)


class MPRK22(LinearlyImplicit):
    r"""The modified Patankar–Runge–Kutta scheme MPRK22(1) (Kopecz–Meister 2018) with its embedded
    implicit Euler step: order 2, positive and conservative for every h.

    For the production–destruction form of dy/dt = -A(y) y (p_ij = -A_ij y_j the flow from j into i)
    its two stages are, with this linear-in-y production, two linear solves:

    .. math::

        (I + h A_n)\,y^{(2)} = y_n, \qquad
        \Bigl(I + \frac{h}{2}\bigl(A_n D + A(y^{(2)})\bigr)\Bigr) y_{n+1} = y_n, \qquad
        D = \operatorname{diag}(y_n / y^{(2)}).

    A_n D keeps A_n's sign pattern and zero weighted column sums, so both matrices are M-matrices of
    the form of ``implicit.m_matrix_solve``.  D_j ≤ 1 + h (A_n)_jj in exact arithmetic
    ((M^{-1})_jj ≥ 1/M_jj for an M-matrix M): it is clipped to that bound, and set to 1 where y^(2)_j
    underflows to 0 (any D ≥ 0 keeps both properties).  Error estimate y_{n+1} - y^(2), of order 1
    (``error_order``): the local error of the implicit Euler step.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.contract import upwind_matrix
    >>> from meanfield.solvers.schemes import MPRK22
    >>> class Drain:                       # y' = -A y: y_0(t) = e^{-t}
    ...     def linear_part(self, y):
    ...         return upwind_matrix([0], [1], [1.0], [0.0], [1.0], np.ones(2))
    >>> step = MPRK22().step(Drain(), 0.0, np.array([1.0, 0.0]), 0.1)
    >>> step.nfev, bool(abs(step.y[0] - np.exp(-0.1)) < 2e-4), float(step.y.sum())
    (2, True, 1.0)
    """

    name, order, stages, adaptive, error_order = "mprk22", 2, 2, True, 1

    def step(self, f, t, y, h, k1=None):
        a_n, nfev = self.linear_part(f, y)
        flat = y.ravel()                            # states of several dimensions (causal: slices x cells)
        euler = m_matrix_solve(a_n, h, flat)
        bound = 1.0 + h * a_n.diagonal()
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(euler > 0, np.minimum(flat / euler, bound), 1.0)
        euler = euler.reshape(y.shape)
        combined = 0.5 * (a_n @ scipy.sparse.diags_array(ratio) + f.linear_part(euler))
        y_new = m_matrix_solve(combined, h, flat).reshape(y.shape)
        return StepResult(y_new, nfev + 1, y_new - euler)


def transport(op, z: np.ndarray, matrix: scipy.sparse.sparray | scipy.sparse.spmatrix | None = None) -> np.ndarray:
    """A(z) z, minus the first-order upwind right-hand side at z: ``-op(z)[0]`` when the engine's own flux is
    ``"upwind"`` (one field evaluation), else ``op.linear_part(z) @ z`` (any density engine), or
    ``matrix @ z`` when A(z) is at hand (the same product, without assembling it again).

    Parameters
    ----------
    op : contract.Operator
    z : ndarray
        Cell densities, any shape the engine takes.
    matrix : scipy sparse matrix, optional
        ``op.linear_part(z)``, used where the flux is not ``"upwind"``.

    Returns
    -------
    ndarray, shape of z

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> from meanfield.solvers.schemes import transport
    >>> rho = 1 + 0.5 * np.cos(circle.cell_angles(64))
    >>> fast, slow = circle.CircleOperator(mf.SA(2.0), 64, "upwind"), circle.CircleOperator(mf.SA(2.0), 64)
    >>> bool(np.allclose(transport(fast, rho), transport(slow, rho), rtol=0, atol=1e-12))
    True
    """
    if getattr(op, "flux", None) == "upwind":
        return -op(z)[0]
    if matrix is None:
        matrix = op.linear_part(z)
    return (matrix @ z.ravel()).reshape(z.shape)


class BackwardEuler(LinearlyImplicit):
    r"""Fully implicit (backward) Euler for the first-order upwind system dy/dt = -A(y) y, solved by
    Newton–Krylov iterations: order 1, positive and conservative for every h, error-controlled.

    The step solves G(z) = z - y_n + h A(z) z = 0, the field evaluated at the new state (unlike
    ``ImplicitEuler``, whose field is frozen at y_n: a cluster collapsed to one or two cells then drifts
    by about h/(1 + h) of its true drift per step, docs/implicit.md).  Newton iteration k from z_k ≥ 0:

    - P_k = I + h A(z_k) is factored once (``implicit.m_matrix_factor``, an M-matrix); its solve of y_n,
      p_k = P_k^{-1} y_n (a Picard sweep: ≥ 0, the mass of y_n), gives the preconditioned residual
      P_k^{-1} G(z_k) = z_k - p_k for free;
    - GMRES solves P_k^{-1} J δ = p_k - z_k (left preconditioning), J v = v + h (F(z_k + εv) - F(z_k))/ε,
      F(z) = A(z) z (``transport``: generic through the Operator contract), a finite-difference
      Jacobian-vector product: P_k^{-1} J is the identity plus the field's dependence on the density,
      a few smooth harmonics, so GMRES needs few iterations;
    - z_{k+1} = max(z_k + δ, 0) (negative iterates are clipped before the field sees them: the solution
      is ≥ 0, so this only brings the iterate closer; only the difference quotients' states z + εv,
      perturbed by about √eps |z|, may dip below 0 in empty cells, which SA's normalisation, a sum over
      the whole mass, does not notice);
    - converged when η_k |δ_k| ≤ ``kappa`` (Hairer–Wanner's test, η_k = θ_k/(1 - θ_k), θ_k the ratio of
      successive updates; η_0 = 1), |·| the L1 norm relative to Σ(atol + rtol |y_n|).

    The accepted state is the Picard sweep from the last iterate, y_{n+1} = (I + h A(z_K))^{-1} y_n:
    ≥ 0 in floating point with the mass of y_n to the LU's backward error whatever Newton did, and
    equal to the backward Euler solution up to the (contracting) Picard map of Newton's error.  A step
    whose Newton iteration diverges (θ ≥ 1) or has not converged after ``max_iter`` iterations returns
    an infinite error estimate: ``controllers.ImplicitControl`` rejects it and retries a smaller step
    (fixed steps are split in halves, ``controllers.FixedSteps``).

    Error estimate: the local error of backward Euler ≈ -(h²/2) y'', estimated by
    ((y_n - y_{n+1}) - h F(y_n))/2 (the halved difference with forward Euler) and filtered by the same
    factorisation, (I + h A)^{-1}·(Shampine's filter: stiff components do not force small steps);
    order 1 (``error_order``).  ``nfev`` counts evaluations of F and of the linear part.

    Parameters
    ----------
    rtol, atol : float
        The tolerances that scale the Newton test (``controllers.ImplicitControl`` sets its own; the
        defaults, for fixed steps, solve to about 1e-7 of the state).
    kappa : float
        The Newton test's fraction of the tolerance.
    max_iter : int
        Newton iterations allowed per step.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.contract import upwind_matrix
    >>> from meanfield.solvers.schemes import BackwardEuler
    >>> class Drain:                       # cell 0 drains into cell 1 at rate 1 + y_0: nonlinear
    ...     def linear_part(self, y):
    ...         return upwind_matrix([0], [1], [1.0 + y[0]], [0.0], [1.0], np.ones(2))
    >>> step = BackwardEuler().step(Drain(), 0.0, np.array([1.0, 0.0]), 1.0)
    >>> z = step.y[0]                      # z - 1 + (1 + z) z = 0: z = sqrt(2) - 1
    >>> bool(abs(z - (np.sqrt(2) - 1)) < 1e-7), float(step.y.sum())
    (True, 1.0)
    """

    name, order, stages, adaptive, error_order = "backward_euler", 1, 1, True, 1

    def __init__(self, rtol: float = 1e-6, atol: float = 1e-12, kappa: float = 0.05, max_iter: int = 8):
        super().__init__()
        self.rtol, self.atol, self.kappa, self.max_iter = rtol, atol, kappa, max_iter
        self.iterations = [0, 0]        # Newton iterations and GMRES iterations of the last step (diagnostics)

    def set_tolerances(self, rtol: float, atol: float) -> None:
        """The error controller's tolerances, which scale the Newton test."""
        self.rtol, self.atol = rtol, atol

    @staticmethod
    def _newton_update(force, solve, z, f_z, h, rhs):
        """(δ, GMRES products): P⁻¹Jδ = rhs by GMRES, Jv = v + h (F(z + εv) - F(z))/ε, ε = √eps (1 + |z|)/|v|."""
        size, calls = 1.0 + float(np.linalg.norm(z)), [0]

        def product(v):
            calls[0] += 1
            norm = float(np.linalg.norm(v))
            if norm == 0:
                return np.zeros_like(v)
            eps = _SQRT_EPS * size / norm
            return solve(v + (h / eps) * (force(z + eps * v) - f_z))
        operator = scipy.sparse.linalg.LinearOperator((z.size, z.size), product)
        delta, _ = scipy.sparse.linalg.gmres(operator, rhs, rtol=GMRES_RTOL, atol=0.0, restart=GMRES_RESTART,
                                             maxiter=1)
        return delta, calls[0]

    def step(self, f, t, y, h, k1=None):
        shape, y_n = y.shape, y.ravel()
        scale = float(np.sum(self.atol + self.rtol * np.abs(y_n)))
        matrix, nfev = self.linear_part(f, y)
        force = lambda z: transport(f, z.reshape(shape)).ravel()       # noqa: E731
        z, f_n, previous, eta, converged, krylov = y_n, None, None, 1.0, False, 0
        for k in range(self.max_iter + 1):
            if k > 0:
                matrix = f.linear_part(z.reshape(shape))
                nfev += 1
            solve = m_matrix_factor(matrix, h)
            picard = solve(y_n)
            if converged or k == self.max_iter:
                break
            # the same evaluation as the Jacobian's (their difference is taken at h/ε); with another flux than
            # "upwind" it is A(z) z, whose A(z) was just assembled for the preconditioner
            f_z = transport(f, z.reshape(shape), matrix).ravel()
            nfev += int(getattr(f, "flux", None) == "upwind")
            if k == 0:
                f_n = f_z
            delta, calls = self._newton_update(force, solve, z, f_z, h, picard - z)
            nfev += calls
            krylov += calls
            update = float(np.sum(np.abs(delta))) / scale
            if not np.isfinite(update):
                break
            if previous is not None:
                theta = update / previous if previous > 0 else 0.0
                if theta >= 1.0:
                    break
                eta = theta / (1.0 - theta)
            z, previous = np.maximum(z + delta, 0.0), update
            converged = eta * update <= self.kappa
        self.iterations = [k, krylov]
        if not converged:
            return StepResult(picard.reshape(shape), nfev, np.full(shape, np.inf))
        error = solve(0.5 * ((y_n - picard) - h * f_n))
        return StepResult(picard.reshape(shape), nfev, error.reshape(shape))


class Auto(Scheme):
    """``scheme="auto"``: SSP-RK3 with positivity control while the cells' step bound is what the
    dynamics needs, backward Euler (``BackwardEuler``: the field evaluated at the new state, so collapsed
    clusters drift at their true speed) with error control once the dynamics has slowed (``controllers.AutoSwitch``
    states the rule); ``start`` is the member the run begins with (the adaptive engines pass on the one
    a stretch ended with).

    It is a pair, not a one-step scheme: ``step`` refuses; ``stepping.integrate`` runs it with
    ``AutoSwitch``.

    Parameters
    ----------
    start : {"explicit", "implicit"}
    switch, back : float
        The thresholds of ``controllers.choose_scheme`` on h_explicit / h_implicit (defaults 1/20 and
        1/10: an implicit step costs 20-45 SSP-RK3 steps where the field is cheap beside the sparse
        solves, as on S¹; the S² engines, where a step costs about 5-6 SSP-RK3 steps, pass 1/10 and 1/4).
    returned : bool
        Whether the run has already gone back from the implicit member to the explicit one (the adaptive
        engines pass it on from stretch to stretch): a switch to the implicit member then needs
        ``controllers.COOLDOWN`` times more steps, as after a switch back within one stretch.
    streak : int
        Consecutive steps that already met the switch rule when the run begins (the adaptive engines pass
        on a stretch's count: their stretches between remeshes can be shorter than the patience the rule
        asks for, so a count restarted at every stretch would never reach it).

    Examples
    --------
    >>> from meanfield.solvers.schemes import Auto
    >>> auto = Auto()
    >>> auto.explicit, auto.implicit_scheme, auto.start
    (SSPRK3(), BackwardEuler(), 'explicit')
    """

    name, order, stages = "auto", 2, 3

    def __init__(self, start: str = "explicit", switch: float = 0.05, back: float = 0.1, returned: bool = False,
                 streak: int = 0):
        if start not in ("explicit", "implicit"):
            raise ValueError(f"start must be 'explicit' or 'implicit'; got {start!r}")
        if not 0 < switch <= back:
            raise ValueError(f"need 0 < switch <= back; got {switch!r}, {back!r}")
        if int(streak) != streak or streak < 0:
            raise ValueError(f"streak must be a count >= 0; got {streak!r}")
        self.explicit, self.implicit_scheme, self.start = SSPRK3(), BackwardEuler(), start
        self.switch, self.back, self.returned, self.streak = switch, back, bool(returned), int(streak)

    def step(self, f, t, y, h, k1=None):
        raise TypeError("scheme='auto' switches between SSP-RK3 and backward Euler step by step: run it through "
                        "stepping.integrate, not step by step")

    def __repr__(self):
        settings = [f"start={self.start!r}"] if self.start != "explicit" else []
        settings += [f"switch={self.switch!r}, back={self.back!r}"] if (self.switch, self.back) != (0.05, 0.1) else []
        settings += ["returned=True"] if self.returned else []
        settings += [f"streak={self.streak}"] if self.streak else []
        return f"Auto({', '.join(settings)})"


SCHEMES: dict[str, type[Scheme]] = {cls.name: cls for cls in (ForwardEuler, SSPRK3, RK4, DormandPrince, ImplicitEuler,
                                                              MPRK22, BackwardEuler, Auto)}


def as_scheme(scheme: "str | type[Scheme] | Scheme") -> Scheme:
    """The scheme named by a registered name, a ``Scheme`` subclass or an instance (as
    ``solve_ivp(method=...)``).

    Parameters
    ----------
    scheme : str, Scheme subclass or Scheme
        A name of ``SCHEMES``, a class (instantiated without arguments) or an instance (returned).

    Returns
    -------
    Scheme

    Raises
    ------
    ValueError
        For an unknown name (the message lists the registered names).
    TypeError
        For anything else.

    Examples
    --------
    >>> from meanfield.solvers.schemes import RK4, as_scheme
    >>> as_scheme("ssprk3"), as_scheme(RK4).name
    (SSPRK3(), 'rk4')
    >>> as_scheme("rk45")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown scheme 'rk45'; choose one of 'euler', 'ssprk3', ..., or pass a Scheme subclass
    """
    if isinstance(scheme, Scheme):
        return scheme
    if isinstance(scheme, type) and issubclass(scheme, Scheme):
        return scheme()
    if isinstance(scheme, str):
        if scheme in SCHEMES:
            return SCHEMES[scheme]()
        names = ", ".join(repr(name) for name in SCHEMES)
        raise ValueError(f"unknown scheme {scheme!r}; choose one of {names}, or pass a Scheme subclass")
    raise TypeError(f"scheme must be a name ({', '.join(SCHEMES)}), a Scheme subclass or a Scheme; "
                    f"got {type(scheme).__name__}")
