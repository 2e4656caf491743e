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
  0.9 · err^(-1/(q+1)) within [0.2, 5] for an estimate of order q).

A controller advances ``run.state`` (the integration counters, saved in checkpoints) and reports
each accepted step through ``run.accepted(y, h, done, count)``.
"""
import abc

import numpy as np

from .schemes import Scheme, ShuOsher

__all__ = ["Controller", "FixedSteps", "PositivityControl", "ErrorControl"]


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
                y_new, nf, _ = self.scheme.step(run.f, t0 + state["j"] * h, y, h)
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
        state, f = run.state, run.f
        t = state["t"]
        while t < t1:
            k1, rate = f(t, y)
            state["nfev"] += 1
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
        return y

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
