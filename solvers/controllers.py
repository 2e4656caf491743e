r"""Step-size controllers: how a scheme's steps are chosen through one output interval [t_{k-1}, t_k].

Kept apart from the schemes (``schemes.py``), which only know how to take a step, and from the
loop (``stepping.integrate``), which owns output times, checkpoints and progress:

- ``FixedSteps``: [t_{k-1}, t_k] cut into ceil((t_k - t_{k-1})/dt) equal steps, so no step exceeds
  ``dt`` and the last ends on t_k exactly;
- ``PositivityControl``: the right-hand side returns ``(dy/dt, rate)``, ``rate`` bounding the state's
  forward-Euler step (y + h f(y) admissible, e.g. non-negative, whenever h · rate ≤ 1).  Each step
  takes h = min(dt, cfl / (s_0 · rate(y_n))), shortened so that the steps left in the interval are
  equal and end on t_k.  A ``ShuOsher`` scheme then checks every later stage k (its largest
  forward-Euler sub-step s_k h must satisfy s_k h · rate(y_k) ≤ 1) and a step failing a stage is
  rejected and retried with h = cfl / (s_k · rate(y_k)), so every stage of every accepted step is
  admissible.  Any other scheme (s_0 = 1) has a step whose result holds a negative entry rejected
  and retried with half the step.  The step depends only on (t, y), so a resumed run repeats it;
- ``ErrorControl``: an embedded pair's error estimate sets the step (the usual controller, factor
  0.9 · err^(-1/(q+1)) within [0.2, 5] for an estimate of order q);
- ``ImplicitControl``: the same for an implicit scheme (``schemes.MPRK22``, ``schemes.BackwardEuler``), with the L1 norm
  of the error relative to atol + rtol |y| (mass-weighted errors: the RMS norm, dominated by the few
  cells of a cluster, cut the steps 2×), the growth capped at ``GROWTH`` per step, no positivity check
  (the scheme keeps y >= 0 for every h) and, in the fast phase, steps of at most ``dt``: from the start
  until the first step at which the explicit bound cfl / rate(y) or the error-controlled step falls
  below ``dt``, or a density exceeds twice the mean (``clustered``) (from a
  near-uniform state the error estimate alone would step over the linear growth of the unstable modes
  and shift the clustering times; ``run.state["fast"]``);
- ``AutoSwitch`` (``scheme="auto"``): SSP-RK3 under ``PositivityControl`` or backward Euler under
  ``ImplicitControl``, switching by ``choose_scheme``.

A controller advances ``run.state`` (the integration counters, saved in checkpoints) and reports
each accepted step through ``run.accepted(y, h, done, count)``.
"""
import abc

import numpy as np

from .schemes import Auto, Scheme, ShuOsher

__all__ = ["Controller", "FixedSteps", "PositivityControl", "ErrorControl", "ImplicitControl", "AutoSwitch",
           "choose_scheme", "clustered"]

SAFETY = 0.9          # fraction of the step the error estimate allows that ImplicitControl takes
SHRINK = 0.2          # smallest step factor after a rejection
GROWTH = 5.0          # largest step factor between accepted implicit steps
SWITCH = 0.05         # auto: implicit once the explicit step is below this fraction of the implicit one ...
BACK = 0.1            # ... and explicit again once it is above this fraction
PATIENCE = 3          # ... for this many consecutive steps
COOLDOWN = 10         # ... (this many times more steps to return to the implicit scheme after going back)
SPLITS = 30           # fixed steps: halvings of a step whose implicit (Newton) solve fails before giving up


class Controller(abc.ABC):
    """Chooses the steps of a scheme through one output interval.

    To implement a new controller, define ``interval(run, y, t0, t1)``: advance ``y`` from
    ``run.state["t"]`` (or t0 plus ``run.state["j"]`` fixed steps, after a resume) to t1 with
    ``self.scheme``, calling ``run.f(t, y)`` for the right-hand side, ``run.project`` after every step
    and ``run.accepted(y, h, done, count=1)`` after every accepted step, updating the counters
    ``nfev``, ``nrejected``, ``j`` and ``t`` of ``run.state``; return y at t1.

    Parameters
    ----------
    scheme : Scheme
        The scheme whose steps it chooses.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import integrate
    >>> Y, info = integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), dt=0.25, scheme="euler")
    >>> info["nsteps"], float(Y[-1, 0]) == 0.75 ** 4
    (4, True)
    """

    def __init__(self, scheme: Scheme):
        self.scheme = scheme

    @abc.abstractmethod
    def interval(self, run, y: np.ndarray, t0: float, t1: float) -> np.ndarray:
        """y at t1 (class docstring)."""

    def saved(self) -> dict:
        """Arrays the controller keeps beyond ``run.state``, written into checkpoints (none here)."""
        return {}

    def restore(self, saved: dict) -> None:
        """Take back what ``saved`` wrote, from a checkpoint's contents (nothing here)."""
        return None


class FixedSteps(Controller):
    """Equal steps of at most ``dt`` ending on each output time.

    ``kick(y, h, step)``, with the global step counter, is added to every step before the
    projection (a reproducible noise increment); ``advance(y, h, count)`` replaces ``count``
    consecutive steps + projections by one call of a fused engine returning (y, evaluations).

    Parameters
    ----------
    scheme : Scheme
    dt : float
        The largest step.
    kick, advance : callable, optional
        See above.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.controllers import FixedSteps
    >>> from meanfield.solvers.schemes import RK4
    >>> FixedSteps(RK4(), 0.3).steps(0.0, 1.0)
    (4, 0.25)
    """

    def __init__(self, scheme: Scheme, dt: float, kick=None, advance=None):
        super().__init__(scheme)
        self.dt, self.kick, self.advance = dt, kick, advance

    def steps(self, t0: float, t1: float) -> tuple[int, float]:
        """(count, h): the equal steps of at most dt spanning [t0, t1]."""
        count = max(1, int(np.ceil((t1 - t0) / self.dt * (1 - 1e-12))))
        return count, (t1 - t0) / count

    def probe(self, f, t: float, y: np.ndarray):
        """One step of size dt from (t, y), discarded (what the work budget times): the fused engine's
        when there is one, else the scheme's (without kick or projection)."""
        return self.advance(y.copy(), self.dt, 1) if self.advance is not None else self.scheme.step(f, t, y, self.dt)

    def interval(self, run, y, t0, t1):
        state = run.state
        nsub, h = self.steps(t0, t1)
        while state["j"] < nsub:
            if self.advance is None:
                count = 1
                y_new, nf = self.whole_step(run.f, t0 + state["j"] * h, y, h)
                if self.kick is not None:
                    y_new = y_new + self.kick(y, h, state["nsteps"])
                y = run.project(y_new)
            else:
                count = int(min(nsub - state["j"], run.until_save()))
                y, nf = self.advance(y, h, count)
            state["j"] += count
            state["nfev"] += nf
            run.accepted(y, h * count, state["j"] == nsub, count)
        return y

    def whole_step(self, f, t: float, y: np.ndarray, h: float, depth: int = 0) -> tuple[np.ndarray, int]:
        """One step of size h: (y_new, nfev); an implicit scheme's step whose nonlinear solve failed (an
        infinite error estimate, ``schemes.BackwardEuler``) is taken as two halves, recursively (at most
        ``SPLITS`` times)."""
        y_new, nfev, err = self.scheme.step(f, t, y, h)
        if not self.scheme.implicit or err is None or np.all(np.isfinite(err)):
            return y_new, nfev
        if depth >= SPLITS:
            raise RuntimeError(f"{self.scheme.name}: the nonlinear solve of a step of {h:g} at t = {t:g} failed "
                               f"after {SPLITS} halvings of dt")
        first, n1 = self.whole_step(f, t, y, 0.5 * h, depth + 1)
        second, n2 = self.whole_step(f, t + 0.5 * h, first, 0.5 * h, depth + 1)
        return second, nfev + n1 + n2


class PositivityControl(Controller):
    """Steps bounded by the positivity rate (module docstring).

    Parameters
    ----------
    scheme : Scheme
        A ``ShuOsher`` scheme (every stage checked) or any other (results with a negative entry rejected).
    dt : float
        The largest step.
    cfl : float
        The fraction in (0, 1] of the bound 1/rate taken.
    context : str, optional
        Named in the error of a step that underflows (e.g. the model and grid).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import integrate
    >>> f = lambda y: (-2.0 * y, 2.0)                   # y + h f(y) >= 0 when 2 h <= 1
    >>> Y, info = integrate(f, np.ones(1), np.array([0.0, 1.0]), scheme="rk4", dt=1.0, positivity=True)
    >>> info["hmax"] <= 0.45, bool(Y[-1, 0] > 0)
    (True, True)
    """

    def __init__(self, scheme: Scheme, dt: float, cfl: float, context: str | None = None):
        super().__init__(scheme)
        self.dt, self.cfl, self.context = dt, cfl, context
        self.first = scheme.substeps[0] if isinstance(scheme, ShuOsher) else 1.0

    def interval(self, run, y, t0, t1):
        t = run.state["t"]
        while t < t1:
            y, t, _, _ = self.advance(run, y, t, t1)
        return y

    def advance(self, run, y: np.ndarray, t: float, t1: float, f=None) -> tuple[np.ndarray, float, float, float]:
        """One accepted step from (t, y) towards t1 (f: ``run.f`` unless given): (y, t, rate(y_n), h)."""
        state, f = run.state, f or run.f
        k1, rate = f(t, y)
        state["nfev"] += 1
        first = rate
        h, last = self._step(self.dt, rate * self.first, t1 - t, t)
        while True:
            y_new, nfev, rate = self._attempt(f, t, y, h, k1)
            state["nfev"] += nfev
            if rate is None:
                break
            state["nrejected"] += 1                 # a later stage (or the result) needs a smaller step
            h, last = self._step(h, rate, t1 - t, t)
        y = run.project(y_new)
        t = t1 if last else t + h
        state.update(t=float(t), j=state["j"] + 1, hmin=min(state["hmin"], h), hmax=max(state["hmax"], h))
        run.accepted(y, h, t >= t1)
        return y, t, first, h

    def _attempt(self, f, t, y, h, k1):
        """(y_new, nfev, None), or (None, nfev, rate) with the rate that the retried step must respect."""
        if isinstance(self.scheme, ShuOsher):
            return self.scheme.stages_within(f, t, y, h, k1)
        y_new, nfev, _ = self.scheme.step(lambda s, x: f(s, x)[0], t, y, h, k1)
        if np.all(y_new >= 0):
            return y_new, nfev, None
        return None, nfev, 2.0 * self.cfl / h           # retried with half the step

    def _step(self, cap, rate, left, t):
        """(h, last): the largest h <= min(cap, cfl/rate) that cuts ``left`` into equal steps."""
        rate = float(rate)
        where = "" if self.context is None else f" ({self.context})"
        if not (np.isfinite(rate) and rate >= 0):
            raise ValueError(f"the positivity rate is {rate!r} at t = {t:g}{where}; the state is no longer finite")
        bound = cap if rate == 0 else min(cap, self.cfl / rate)
        if bound < 1e-14 * max(1.0, abs(t)):
            raise ValueError(f"positivity step size underflow at t = {t:g} (rate {rate:.3g}){where}: the field is "
                             f"too fast for an explicit step; use a smaller beta or rescale time")
        count = max(1, int(np.ceil(left / bound * (1 - 1e-12))))
        return left / count, count == 1


class ErrorControl(Controller):
    """Steps chosen from an embedded pair's error estimate, within tolerances ``rtol`` and ``atol``;
    the step size is carried in ``run.state["h"]`` (and so in checkpoints).

    Parameters
    ----------
    scheme : Scheme
        An embedded pair (``adaptive = True``, with ``error_order``).
    rtol, atol : float
        The tolerances: a step is accepted when the RMS of error / (atol + rtol |y|) is at most 1.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import integrate
    >>> Y, info = integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), scheme="dopri5", rtol=1e-9)
    >>> bool(abs(Y[-1, 0] - np.exp(-1.0)) < 1e-8)
    True
    """

    def __init__(self, scheme: Scheme, rtol: float, atol: float):
        super().__init__(scheme)
        self.rtol, self.atol = rtol, atol
        self.exponent = 1.0 / (scheme.error_order + 1)

    def interval(self, run, y, t0, t1):
        state, f = run.state, run.f
        t = state["t"]
        k1 = f(t, y)
        state["nfev"] += 1
        if not np.isfinite(state["h"]):
            state["h"] = self._initial_step(f, t, y, k1, state)
        while t < t1:
            h = state["h"]
            step = min(h, t1 - t)
            last = step >= t1 - t
            y_new, nfev, err = self.scheme.step(f, t, y, step, k1)
            state["nfev"] += nfev
            norm = self._norm(err, y, y_new)
            if norm <= 1.0 and np.all(np.isfinite(y_new)):
                y = run.project(y_new)
                t = t1 if last else t + step
                factor = 5.0 if norm == 0 else min(5.0, max(0.2, 0.9 * norm ** -self.exponent))
                state["h"] = max(h, step * factor) if last else step * factor
                state["t"] = t
                if t < t1:
                    k1 = f(t, y)
                    state["nfev"] += 1
                state["j"] += 1
                run.accepted(y, step, t >= t1)
            else:
                state["nrejected"] += 1
                state["h"] = step * max(0.2, 0.9 * norm ** -self.exponent) if np.isfinite(norm) else 0.2 * step
                if state["h"] < 1e-14 * max(1.0, abs(t)):
                    raise ValueError(f"adaptive step size underflow at t = {t:g}; the problem is too stiff for "
                                     f"{self.scheme.name} at rtol = {self.rtol:g}, atol = {self.atol:g}: loosen "
                                     f"rtol/atol or use a fixed step")
        return y

    def _norm(self, err, y, y_new):
        scale = self.atol + self.rtol * np.maximum(np.abs(y), np.abs(y_new))
        return float(np.sqrt(np.mean((err / scale) ** 2)))

    def _initial_step(self, f, t, y, k1, state):
        """Hairer–Nørsett–Wanner's starting step; 1e-6 wherever the estimate is not a finite positive number."""
        scale = self.atol + self.rtol * np.abs(y)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            d0 = np.sqrt(np.mean((y / scale) ** 2))
            d1 = np.sqrt(np.mean((k1 / scale) ** 2))
            h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
            if not (np.isfinite(h0) and h0 > 0):
                h0 = 1e-6
            k2 = f(t + h0, y + h0 * k1)
            state["nfev"] += 1
            d2 = np.sqrt(np.mean(((k2 - k1) / scale) ** 2)) / h0
            h1 = max(1e-6, h0 * 1e-3) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** self.exponent
        h = min(100 * h0, h1)
        return float(h) if np.isfinite(h) and h > 0 else 1e-6


class ImplicitControl(Controller):
    """Steps of a linearly implicit scheme chosen from its embedded error estimate (module docstring);
    the step size is carried in ``run.state["h"]`` (and so in checkpoints).

    Each step from y_n: h = min(h_proposed, dt) in the fast phase, which lasts until the first step
    with cfl / rate(y_n) < dt, h_proposed < dt or ``clustered(y_n)``, rate(y_n) = max_i A(y_n)_ii the
    forward-Euler positivity rate of the upwind system (its linear part, which the scheme evaluates
    anyway), else h = h_proposed; the error norm e = Σ|error_i| / Σ(atol + rtol max(|y_i|, |y_new,i|));
    accepted when e <= 1, and the next step h · min(GROWTH, 0.9 e^{-1/(q+1)}) (at least 0.2 h after a
    rejection), q the estimate's order.

    Parameters
    ----------
    scheme : Scheme
        A linearly implicit embedded pair (``implicit = True``, ``adaptive = True``).
    rtol, atol : float
        The tolerances.
    cap : float or None
        ``dt``: the largest step in the fast phase (None: no cap).
    cfl : float
        The fraction of 1/rate that the explicit bound takes.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers.circle import CircleOperator
    >>> from meanfield.solvers.stepping import integrate
    >>> op = CircleOperator(mf.SA(3.0), 64, "upwind")
    >>> rho = np.full(64, 1 / (2 * np.pi)); rho[:8] *= 3; rho /= rho.sum() * 2 * np.pi / 64
    >>> Y, info = integrate(op, rho, np.array([0.0, 1e4]), scheme="mprk22", dt=0.1, positivity=True, rtol=1e-3)
    >>> bool(Y.min() >= 0), bool(abs(Y[-1].sum() * 2 * np.pi / 64 - 1) < 1e-12), info["hmax"] > 1e3
    (True, True, True)
    """

    def __init__(self, scheme: Scheme, rtol: float, atol: float, cap: float | None = None, cfl: float = 0.9):
        super().__init__(scheme)
        self.rtol, self.atol, self.cap, self.cfl = rtol, atol, cap, cfl
        self.exponent = 1.0 / (scheme.error_order + 1)
        if hasattr(scheme, "set_tolerances"):        # a nonlinear solve (BackwardEuler's Newton) to these tolerances
            scheme.set_tolerances(rtol, atol)

    def interval(self, run, y, t0, t1):
        t = run.state["t"]
        while t < t1:
            y, t, _ = self.advance(run, y, t, t1)
        return y

    def explicit_bound(self, run, y: np.ndarray) -> float:
        """cfl / rate(y), rate = max_i A(y)_ii: the explicit (forward-Euler) step bound of the upwind system."""
        matrix, nfev = self.scheme.linear_part(run.operator, y)
        run.state["nfev"] += nfev
        rate = float(matrix.diagonal().max(initial=0.0))
        return self.cfl / rate if rate > 0 else np.inf

    def advance(self, run, y: np.ndarray, t: float, t1: float) -> tuple[np.ndarray, float, float]:
        """One accepted step from (t, y) towards t1: (y, t, the explicit bound at y_n)."""
        state, op = run.state, run.operator
        bound = self.explicit_bound(run, y)
        if not np.isfinite(state["h"]):
            state["h"] = self._first_step(run, y, t1 - t)
        if self.cap is None or min(bound, state["h"]) < self.cap or clustered(y):
            state["fast"] = 0
        limit = self.cap if state["fast"] else np.inf
        while True:
            h = min(state["h"], limit)
            last = h >= t1 - t
            step = t1 - t if last else h
            y_new, nfev, err = self.scheme.step(op, t, y, step)
            state["nfev"] += nfev
            norm = self._norm(err, y, y_new)
            factor = SAFETY * norm ** -self.exponent if norm > 0 else GROWTH
            if norm <= 1.0 and np.all(np.isfinite(y_new)):
                break
            state["nrejected"] += 1
            state["h"] = step * max(SHRINK, min(1.0, factor)) if np.isfinite(norm) else SHRINK * step
            if state["h"] < 1e-14 * max(1.0, abs(t)):
                raise ValueError(f"implicit step size underflow at t = {t:g} with {self.scheme.name} at rtol = "
                                 f"{self.rtol:g}, atol = {self.atol:g}; loosen rtol/atol")
        y = run.project(y_new)
        t = t1 if last else t + step
        grown = step * min(GROWTH, factor)
        state.update(t=float(t), j=state["j"] + 1, h=max(h, grown) if last else grown,
                     hmin=min(state["hmin"], step), hmax=max(state["hmax"], step))
        run.accepted(y, step, t >= t1)
        return y, t, bound

    def _norm(self, err, y, y_new):
        return float(np.sum(np.abs(err)) / np.sum(self.atol + self.rtol * np.maximum(np.abs(y), np.abs(y_new))))

    def _first_step(self, run, y, left):
        """0.01 |y| / |A y| in the error norm (Hairer–Nørsett–Wanner's first guess), at most ``left``."""
        matrix, _ = self.scheme.linear_part(run.operator, y)
        scale = np.sum(self.atol + self.rtol * np.abs(y))
        speed = float(np.sum(np.abs(matrix @ y.ravel()))) / scale
        return left if speed <= 0 else min(left, 0.01 * float(np.sum(np.abs(y))) / scale / speed)


def clustered(y: np.ndarray) -> bool:
    """Whether the fast phase from a near-uniform state is over by the state itself: some density above
    twice the mean of the densities (a cluster has formed).

    Parameters
    ----------
    y : ndarray
        Cell densities.

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.controllers import clustered
    >>> clustered(np.ones(8) + 1e-8), clustered(np.r_[np.zeros(7), 1.0])
    (False, True)
    """
    return bool(y.max() > 2.0 * y.mean())


def choose_scheme(current: str, streak: int, h_explicit: float, h_implicit: float, capped: bool = False, *,
                  switch: float = SWITCH, back: float = BACK, patience: int = PATIENCE) -> tuple[str, int]:
    r"""The rule of ``scheme="auto"``: explicit while the cells set the pace, implicit once the dynamics slows.

    After each step, with r = h_explicit / h_implicit (h_explicit: the step the explicit scheme's
    positivity bound allows, min(dt, cfl / rate); h_implicit: the step the implicit scheme's error estimate allows
    to the tolerance):

    - from "explicit", a step counts towards the switch when the fast phase is over (``capped`` False:
      the explicit bound or h_implicit has been below the cap dt at least once, or a cluster has
      formed), and
      r < ``switch`` (1/20).  One MPRK22 step (two field evaluations, two assemblies and two sparse
      solves) costs about as much as 15 SSP-RK3 steps on S¹ with 2048 cells, so it pays once it
      replaces 20 or more of them;
    - from "implicit", a step counts towards going back when r > ``back`` (1/10: the fast phase of a
      merge, where the error allows less than ten explicit steps);
    - ``patience`` (3) consecutive counting steps switch (``AutoSwitch`` asks 30 to return to the
      implicit scheme after it went back); the gap between the thresholds keeps the choice from
      flickering.

    Parameters
    ----------
    current : {"explicit", "implicit"}
        The scheme in use.
    streak : int
        Consecutive counting steps before this one.
    h_explicit, h_implicit : float
        Positive steps (inf allowed for h_implicit).
    capped : bool
        Whether the run is still in the fast phase (the explicit bound and h_implicit have stayed above
        the cap dt).
    switch, back : float
        The thresholds on r, 0 < switch <= back.
    patience : int
        Consecutive steps needed, >= 1.

    Returns
    -------
    (str, int)
        The scheme for the next step and the new streak (0 after a switch).

    Raises
    ------
    ValueError
        For an unknown ``current``, thresholds out of order or non-positive steps.

    Examples
    --------
    >>> from meanfield.solvers.controllers import choose_scheme
    >>> state = ("explicit", 0)
    >>> for _ in range(3):                                 # the plateau: r = 1/33
    ...     state = choose_scheme(*state, 0.003, 0.1)
    >>> state
    ('implicit', 0)
    >>> choose_scheme("explicit", 2, 0.1, 10.0, capped=True)     # still the fast phase
    ('explicit', 0)
    >>> choose_scheme("implicit", 2, 0.003, 0.01)                # a fast merge: back to explicit
    ('explicit', 0)
    """
    if current not in ("explicit", "implicit"):
        raise ValueError(f"current must be 'explicit' or 'implicit'; got {current!r}")
    if not 0 < switch <= back or isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        raise ValueError(f"need 0 < switch <= back and an integer patience >= 1 (got {switch!r}, {back!r}, "
                         f"{patience!r})")
    if not (h_explicit > 0 and h_implicit > 0):
        raise ValueError(f"steps must be positive (got {h_explicit!r}, {h_implicit!r})")
    ratio = h_explicit / h_implicit
    counts = (not capped and ratio < switch) if current == "explicit" else ratio > back
    streak = streak + 1 if counts else 0
    if streak >= patience:
        return ("implicit" if current == "explicit" else "explicit"), 0
    return current, streak


class AutoSwitch(Controller):
    r"""``scheme="auto"``: SSP-RK3 under ``PositivityControl`` while the cells' bound is what the dynamics
    needs, backward Euler under ``ImplicitControl`` once it has slowed, switching by ``choose_scheme``.

    h_implicit is, while explicit, estimated free of charge from the SSP-RK3 step's first two stages:
    the implicit scheme's error estimate is the (backward) Euler step's local error ≈ (h²/2) y'', y'' ≈ (F(y + h F(y))
    - F(y)) / h, so h_implicit = 0.9 (2 Σ(atol + rtol |y|) / Σ|y''|)^{1/2}; while implicit it is the
    controller's next step, and h_explicit = min(dt, cfl / max_i A(y)_ii).  Steps of the explicit
    scheme shorter than half its bound (ending on an output time) do not count.  After a switch back to
    the explicit scheme, the return to the implicit one needs ``COOLDOWN`` (10) times ``PATIENCE``
    counting steps: the estimate from y'' misses the lagged field's part of the implicit error, and
    without it the choice flickered every few steps through a merge (also after a switch back in an
    earlier stretch of an adaptive engine: ``Auto.returned``).  The mode and streak
    are in ``run.state`` and the switches (t, 0 explicit / 1 implicit) in checkpoints, so a resumed
    run repeats the uninterrupted one's choices; ``switches`` lists (t, scheme name) in order.

    Parameters
    ----------
    auto : schemes.Auto
    rtol, atol : float
        The implicit scheme's tolerances.
    cap : float
        dt: the explicit scheme's largest step (and the implicit one's in the fast phase).
    cfl : float
    context : str, optional

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> rho = 1 + 0.5 * np.cos(circle.cell_angles(256) - 1.0)            # one cluster forms, then rests
    >>> sol = circle.solve(mf.SA(3.0), rho, [0.0, 200.0], cells=256, scheme="auto", progress=False)
    >>> [name for _, name in sol.info["switches"]]
    ['backward_euler']
    """

    NAMES = ("explicit", "implicit")

    def __init__(self, auto: Auto, rtol: float, atol: float, cap: float, cfl: float, context: str | None = None):
        super().__init__(auto)
        self.rtol, self.atol, self.cap, self.cfl = rtol, atol, cap, cfl
        self.explicit = PositivityControl(auto.explicit, cap, cfl, context)
        self.implicit = ImplicitControl(auto.implicit_scheme, rtol, atol, cap, cfl)
        self.later = [k for k in range(1, auto.explicit.stages) if auto.explicit.substeps[k] > 0]
        self.switches = []
        self.start = self.NAMES.index(auto.start)

    def interval(self, run, y, t0, t1):
        state = run.state
        t = state["t"]
        if state["mode"] < 0:
            state["mode"] = self.start
            state["fast"] = int(self.start == 0)
            state["streak"] = self.scheme.streak
        while t < t1:
            if state["mode"] == 0:
                y, t, counts = self._explicit_step(run, y, t, t1)
            else:
                y, t, bound = self.implicit.advance(run, y, t, t1)
                counts = (min(self.cap, bound), state["h"], False)
            if counts is None:
                continue
            returned = state["mode"] == 0 and (self.switches or self.scheme.returned)
            patience = PATIENCE * (COOLDOWN if returned else 1)
            mode, state["streak"] = choose_scheme(self.NAMES[state["mode"]], state["streak"], *counts,
                                                  switch=self.scheme.switch, back=self.scheme.back, patience=patience)
            if mode != self.NAMES[state["mode"]]:
                state["mode"] = self.NAMES.index(mode)
                if mode == "implicit":
                    state["h"] = counts[1]
                self.switches.append((float(t), state["mode"]))
        return y

    def _explicit_step(self, run, y, t, t1):
        """One SSP-RK3 step; (y, t, (h_explicit, h_implicit, capped)) or (y, t, None) for a short step."""
        calls = []

        def recorded(s, x):
            out = run.f(s, x)
            calls.append(out[0])
            return out
        y_old = y
        y, t, rate, h = self.explicit.advance(run, y, t, t1, recorded)
        bound = self.cfl / rate if rate > 0 else np.inf
        if not self.later or h < 0.5 * min(self.cap, bound):
            return y, t, None
        curvature = float(np.sum(np.abs(calls[-len(self.later)] - calls[0]))) / h
        scale = float(np.sum(self.atol + self.rtol * np.abs(y_old)))
        with np.errstate(over="ignore"):
            h_implicit = SAFETY * np.sqrt(2.0 * scale / curvature) if curvature > 0 else np.inf
        if min(bound, h_implicit) < self.cap or clustered(y):
            run.state["fast"] = 0
        return y, t, (min(self.cap, bound), h_implicit, bool(run.state["fast"]))

    def named_switches(self) -> list[tuple[float, str]]:
        """(t, scheme name) of every switch, in order."""
        names = (self.scheme.explicit.name, self.scheme.implicit_scheme.name)
        return [(t, names[int(mode)]) for t, mode in self.switches]

    def saved(self):
        return {"switches": np.array(self.switches, dtype=float).reshape(-1, 2)}

    def restore(self, saved):
        if "switches" in saved:
            self.switches = [(float(t), int(mode)) for t, mode in saved["switches"]]
