"""Time integration shared by the particle and finite-volume solvers.

``integrate`` advances y' = f(y) (or y' = f(t, y) with ``time_dependent=True``: the stages see
their own times) through the output times ``t_eval`` with

- fixed-step schemes ``euler``, ``rk4`` and ``ssprk3`` (Shu–Osher SSP-RK3): each interval
  [t_k, t_{k+1}] is cut into ceil((t_{k+1}-t_k)/dt) equal steps, so no step exceeds ``dt``
  (which matters when ``dt`` is a positivity bound);
- the adaptive Dormand–Prince 5(4) pair ``dopri5`` with the usual error controller.

- positivity-controlled steps (``positivity=True``, for ``euler`` and ``ssprk3``): the right-hand
  side returns ``(dy/dt, rate)``, where ``rate`` bounds the state's forward-Euler step, a stage
  y + h f(y) staying admissible (for finite volumes: every density ≥ 0) whenever h · rate ≤ 1.
  Each step takes h = min(dt, cfl / rate(y_n)), shortened so that the steps left in [t_k, t_{k+1}]
  are equal and end on t_{k+1} exactly; a step whose later stage needs a smaller h (h · rate > 1 at
  that stage) is rejected and retried with h = cfl / rate there, so every stage of every accepted
  step is admissible.  The step depends only on (t, y), so a resumed run repeats it exactly.

An optional ``project`` (e.g. x -> x/|x|) is applied after every step, and an optional
``kick(y, h, step)`` (a random increment: Euler–Maruyama with ``euler``) is added before it.  Long runs write a
checkpoint every ``checkpoint_every`` steps (atomically: temporary file + rename) and
resume from it; the resumed run repeats exactly the arithmetic of an uninterrupted one.
"""
import glob
import contextlib
import hashlib
import json
import os
import tempfile
import warnings

import numpy as np

from meanfield.atomic import write_file
from meanfield.checks import as_choice, as_count, as_positive
from meanfield.checks import as_restored_density
from meanfield.npzfile import NPZ_ERRORS

FIXED = ("euler", "rk4", "ssprk3")
ADAPTIVE = ("dopri5",)
SCHEMES = FIXED + ADAPTIVE
MAX_STEPS = 10 ** 7        # a run needing more steps is refused (fixed steps) or stopped (adaptive)
MIN_RTOL = 100 * np.finfo(float).eps   # the adaptive controller cannot reach a smaller rtol
COUNTERS = ("k", "j", "nfev", "nsteps", "nrejected")
POSITIVE = ("euler", "ssprk3")   # the schemes whose stages are forward-Euler steps
CFL = 0.9                        # default fraction of the positivity bound taken by a controlled step
TIME_STEP = 0.1                  # density solvers: largest controlled step TIME_STEP / speed_bound (or global bound)

# Dormand–Prince 5(4) tableau (FSAL not exploited for clarity of the error estimate).
_DP_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1])
_DP_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_DP_B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0])
_DP_E = _DP_B - np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])


def positivity_step(dt, bound, context):
    """The step of a positivity-preserving scheme: ``bound`` when dt is None, else dt if dt <= bound.

    Parameters
    ----------
    dt : float or None
        The requested step, or None for the largest step the bound allows.
    bound : float
        The largest step that keeps the density non-negative.
    context : str
        What the bound is for (e.g. the model and grid), named in the error.

    Returns
    -------
    float
        The step to take.

    Raises
    ------
    ValueError
        When dt > bound, or dt is not a positive number.

    Examples
    --------
    >>> from meanfield.solvers.stepping import positivity_step
    >>> positivity_step(None, 0.5, "a test"), positivity_step(0.1, 0.5, "a test")
    (0.5, 0.1)
    >>> positivity_step(1.0, 0.5, "a test")
    Traceback (most recent call last):
    ...
    ValueError: dt = 1 exceeds the positivity bound 0.5 for a test; use dt <= 0.5 (or leave dt=None)
    """
    if dt is None:
        return bound
    if as_positive(dt, "dt") > bound:
        raise ValueError(f"dt = {dt:g} exceeds the positivity bound {bound:.6g} for {context}; "
                         f"use dt <= {bound:.6g} (or leave dt=None)")
    return dt


def fixed_step(f, t, y, h, scheme):
    r"""One step of size h from (t, y) of an explicit fixed-step scheme for y' = f(t, y).

    Forward Euler, the classical Runge–Kutta scheme of order 4, or the strong-stability-preserving
    scheme of order 3 (a convex combination of forward-Euler steps), e.g. for ``"rk4"``

    .. math::

        y_{n+1} = y_n + \frac{h}{6}\,(k_1 + 2 k_2 + 2 k_3 + k_4).

    Parameters
    ----------
    f : callable
        ``f(t, y)``, the right-hand side.
    t : float
        The time of ``y``.
    y : ndarray
        The state.
    h : float
        The step.
    scheme : {"euler", "rk4", "ssprk3"}

    Returns
    -------
    y_new : ndarray
        The state at t + h.
    evaluations : int
        The number of calls of ``f`` (1, 4 or 3).

    Raises
    ------
    ValueError
        For an unknown scheme.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import fixed_step
    >>> y, n = fixed_step(lambda t, y: -y, 0.0, np.array([1.0]), 0.1, "rk4")
    >>> n, bool(abs(y[0] - np.exp(-0.1)) < 1e-6)
    (4, True)
    """
    if scheme == "euler":
        return y + h * f(t, y), 1
    if scheme == "rk4":
        k1 = f(t, y)
        k2 = f(t + 0.5 * h, y + 0.5 * h * k1)
        k3 = f(t + 0.5 * h, y + 0.5 * h * k2)
        k4 = f(t + h, y + h * k3)
        return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), 4
    if scheme == "ssprk3":
        y1 = y + h * f(t, y)
        y2 = 0.75 * y + 0.25 * (y1 + h * f(t + h, y1))
        return y / 3.0 + (2.0 / 3.0) * (y2 + h * f(t + 0.5 * h, y2)), 3
    raise ValueError(f"unknown scheme {scheme!r}")


def _dopri_step(f, t, y, h, k1):
    ks = [k1]
    for i in range(1, 7):
        incr = sum(a * k for a, k in zip(_DP_A[i], ks) if a != 0)
        ks.append(f(t + _DP_C[i] * h, y + h * incr))
    y_new = y + h * sum(b * k for b, k in zip(_DP_B, ks) if b != 0)
    err = h * sum(e * k for e, k in zip(_DP_E, ks) if e != 0)
    return y_new, err, ks[-1]


def _error_norm(err, y, y_new, rtol, atol):
    scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
    return float(np.sqrt(np.mean((err / scale) ** 2)))


def digest(y):
    """A fingerprint of an array's values (identifies a run's initial state in its checkpoint).

    Parameters
    ----------
    y : array_like
        Values, read as float64.

    Returns
    -------
    str
        The SHA-256 hex digest of the values' bytes.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import digest
    >>> digest(np.arange(3)) == digest([0.0, 1.0, 2.0]), len(digest(np.zeros(2)))
    (True, 64)
    """
    return hashlib.sha256(np.ascontiguousarray(y, dtype=np.float64).tobytes()).hexdigest()


class Checkpoint:
    """Where and how often to save the integrator state, and the run's identity.

    The folder must be writable when the Checkpoint is made (so no work is lost to a late
    failure); leftovers of interrupted saves of this checkpoint are removed.  Saves write a
    temporary file, fsync it and rename it onto ``path``: a reader sees the old or the new
    state, never a mix.  A save that fails later (full disk) warns and the run goes on.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file (an .npz file).
    every : int
        Save every this many steps (and at every output time).
    meta : dict, optional
        The run's settings; a checkpoint written with other settings is refused on resume.
    sizes : ndarray, optional
        The cell measures of a density run: a stored state that is negative, or whose mass
        ``y @ sizes`` differs from the initial state's beyond round-off, is refused on resume.

    Raises
    ------
    TypeError
        When ``path`` is not a path.
    ValueError
        When ``path`` is a folder or cannot be written, or ``every`` is not a positive count.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import Checkpoint, integrate
    >>> t = np.linspace(0.0, 1.0, 3)
    >>> Y, info = integrate(lambda y: -y, np.ones(1), t, dt=0.1, checkpoint=Checkpoint("run.npz", every=5))
    >>> Z, _ = integrate(lambda y: -y, np.ones(1), t, dt=0.1, checkpoint=Checkpoint("run.npz"), resume=True)
    >>> bool(np.array_equal(Y, Z))
    True
    """

    def __init__(self, path, every=100, meta=None, sizes=None):
        try:
            self.path = os.path.abspath(os.fspath(path))
        except TypeError:
            raise TypeError(f"checkpoint must be a path (str or os.PathLike); got {type(path).__name__}") from None
        self.every = as_count(every, "checkpoint_every")
        self.meta = json.dumps(meta or {}, sort_keys=True, default=str)
        self.sizes = sizes         # cell measures of a density run: stored states must keep y0's mass
        if os.path.isdir(self.path):
            raise ValueError(f"checkpoint {self.path} is a folder; give a file path such as run.npz")
        folder, base = os.path.split(self.path)
        self._prefix = f".{base}."
        try:
            os.makedirs(folder, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=folder, prefix=self._prefix, suffix=".tmp.npz")
            os.close(fd)
            os.remove(probe)
        except OSError as exc:
            raise ValueError(f"checkpoint {self.path} cannot be written ({exc.strerror or exc}); choose a "
                             f"writable location") from None
        for stale in glob.glob(os.path.join(glob.escape(folder), glob.escape(self._prefix) + "*.tmp.npz")):
            with contextlib.suppress(OSError):
                os.remove(stale)

    def save(self, state):
        try:
            write_file(self.path, lambda fh: np.savez(fh, meta=np.array(self.meta), **state),
                       prefix=self._prefix, suffix=".tmp.npz")
        except OSError as exc:
            warnings.warn(f"checkpoint not saved: {exc.strerror or exc}; the run goes on without it",
                          RuntimeWarning, stacklevel=2)

    def _read(self):
        try:
            with np.load(self.path, allow_pickle=False) as data:
                state = {k: data[k] for k in data.files}
            meta = str(state.pop("meta"))
            for key in ("t_eval", "y", "out", "start") + COUNTERS + ("t", "h", "hmin", "hmax"):
                state[key]
        except NPZ_ERRORS as exc:
            raise ValueError(f"checkpoint {self.path} is unreadable or corrupt ({type(exc).__name__}: {exc}); "
                             f"delete it to start afresh") from None
        return meta, state

    def load(self, t_eval, y0):
        if not os.path.exists(self.path):
            return None
        meta, state = self._read()
        if meta != self.meta:
            raise ValueError(f"checkpoint {self.path} was written by a different run (model, method, mesh or "
                             f"settings differ); delete it or choose another checkpoint path")
        if state["t_eval"].shape != t_eval.shape or np.any(state["t_eval"] != t_eval) \
                or state["y"].shape != y0.shape:
            raise ValueError(f"checkpoint {self.path} has other output times or state shape; "
                             f"delete it or choose another checkpoint path")
        if str(state.pop("start", "")) != digest(y0):
            raise ValueError(f"checkpoint {self.path} started from another initial state; "
                             f"delete it or choose another checkpoint path")
        self._check_state(state, t_eval)
        if self.sizes is not None:
            self._check_densities(state, y0)
        return state

    def _check_densities(self, state, y0):
        """Every stored density non-negative, finite and of the initial state's mass (``sizes`` given)."""
        mass = y0 @ self.sizes
        out = state["out"]
        try:
            as_restored_density(state["y"], self.sizes, mass, "the stored state")
            if out.shape[1:] == y0.shape:
                as_restored_density(out.reshape(-1, y0.shape[-1]), self.sizes,
                                    np.broadcast_to(mass, out.shape[:-1]).ravel(), "a stored output")
        except ValueError as exc:
            raise ValueError(f"checkpoint {self.path} is inconsistent ({exc}); delete it to start afresh") from None

    def _check_state(self, state, t_eval):
        """Counters within range, times inside t_eval, every stored state finite."""
        def bad(what):
            return ValueError(f"checkpoint {self.path} is inconsistent ({what}); delete it to start afresh")
        counters = {}
        for key in COUNTERS:
            value = state[key]
            if value.shape != () or value.dtype.kind not in "iu" or value < 0:
                raise bad(f"{key} = {value!r}")
            counters[key] = int(value)
        k = counters["k"]
        if not 1 <= k <= t_eval.size or state["out"].shape[:1] != (k,):   # out: states or observed values
            raise bad(f"output index k = {k}")
        t = float(state["t"])
        if not t_eval[0] <= t <= t_eval[-1]:
            raise bad(f"time t = {t}")
        if not (np.all(np.isfinite(state["y"])) and np.all(np.isfinite(state["out"]))):
            raise bad("NaN or inf in the stored state")


def integrate(f, y0, t_eval, *, scheme="rk4", dt=None, rtol=1e-8, atol=1e-10, project=None,
              checkpoint=None, resume=False, progress=None, time_dependent=False, kick=None, advance=None,
              observe=None, positivity=False, cfl=CFL, context=None):
    r"""Solve y' = f(y) (or f(t, y) if ``time_dependent``) from y(t_eval[0]) = y0; return
    (Y, info) with Y[k] = y(t_eval[k]).  ``kick(y, h, step)``, with the global step counter, is
    added to every fixed step before the projection (a reproducible noise increment).

    The run's position is (k, j, t): the next output index k, and within [t_{k-1}, t_k]
    the number j of fixed steps taken, or the time t reached by the adaptive scheme.
    progress: True (a bar over simulated time), False (none) or None (the default: a bar
    appears only once the solve has run ``AUTO_PROGRESS_DELAY`` seconds, on a terminal).

    ``advance(y, h, count)``, for a fixed-step scheme, replaces ``count`` consecutive calls of
    ``fixed_step`` + ``project`` by one call (a fused engine) and returns (y, evaluations).
    ``observe(y)``, if given, returns an array stored at each output time instead of y itself
    (Y[k] = observe(y(t_eval[k])), same shape at every k): statistics of long runs of large
    batches without holding every state in memory; info["state"] is then y(t_eval[-1]).

    ``positivity=True`` (``euler`` or ``ssprk3``): ``f`` returns ``(dy/dt, rate)`` and the steps are
    controlled by the rate (module docstring): ``dt`` is then the largest step allowed and ``cfl`` the
    fraction of the bound 1/rate taken; info gains the smallest and largest step taken, ``hmin``
    and ``hmax``; ``context`` (e.g. the model and grid) is named in the error of a step that
    underflows.

    .. math::

        Y_k = y(t_k), \qquad y(t_0) = y_0, \quad \dot y = f(y).

    Parameters
    ----------
    f : callable
        ``f(y)``, or ``f(t, y)`` when ``time_dependent`` (with ``positivity``: returning
        ``(dy/dt, rate)``).
    y0 : ndarray
        The initial state.
    t_eval : ndarray
        Increasing output times; the run starts at ``t_eval[0]``.
    scheme : {"euler", "rk4", "ssprk3", "dopri5"}
        Fixed-step schemes (step ``dt``) or the adaptive Dormand–Prince pair (``rtol``, ``atol``).
    dt : float, optional
        The fixed step (the largest step with ``positivity``).
    rtol, atol : float
        Tolerances of the adaptive scheme.
    project : callable, optional
        Applied to the state after every step (e.g. back onto the sphere).
    checkpoint : Checkpoint, optional
        Where to save the state; ``resume=True`` continues from it bit for bit.
    resume : bool
    progress : bool or None
    time_dependent : bool
    kick, advance, observe : callable, optional
        See above.
    positivity : bool
    cfl : float
        In (0, 1].
    context : str, optional

    Returns
    -------
    Y : ndarray
        ``Y[k] = y(t_eval[k])`` (or ``observe`` of it).
    info : dict
        Counters ``nfev``, ``nsteps``, ``nrejected`` (and ``hmin``, ``hmax``, ``state``, see above).

    Raises
    ------
    ValueError
        For an unknown scheme, bad tolerances, a ``dt`` needing more than ``MAX_STEPS`` steps,
        ``resume`` without ``checkpoint``, or a checkpoint of another run.
    RuntimeError
        When the adaptive scheme needs more than ``MAX_STEPS`` steps.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import integrate
    >>> Y, info = integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), dt=0.1)
    >>> round(float(Y[-1, 0]), 5), info["nsteps"]
    (0.36788, 10)
    """
    as_choice(scheme, "method", SCHEMES)
    if positivity:
        if scheme not in POSITIVE or kick is not None or advance is not None:
            raise ValueError(f"positivity-controlled steps need the scheme 'euler' or 'ssprk3' without kick or "
                             f"advance; got {scheme!r}")
        if not 0 < as_positive(cfl, "cfl") <= 1:
            raise ValueError(f"cfl must lie in (0, 1]; got {cfl!r}")
    rtol, atol = as_positive(rtol, "rtol"), as_positive(atol, "atol")
    if rtol < MIN_RTOL:
        raise ValueError(f"rtol = {rtol:g} is below 100 machine epsilons ({MIN_RTOL:.1e}), which no step size "
                         f"can reach in double precision; use rtol >= {MIN_RTOL:.1e}")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint=PATH (the file to resume from)")
    if scheme in FIXED and not (t_eval[-1] - t_eval[0]) / dt <= MAX_STEPS:
        where = "" if context is None else f" for {context}"
        raise ValueError(f"dt = {dt:g} would take more than {MAX_STEPS:.0e} steps to span t_eval "
                         f"({t_eval[0]:g} to {t_eval[-1]:g}){where}; shorten t_eval or choose a larger dt")
    project = project or (lambda y: y)
    observed = observe is not None
    observe = observe or (lambda y: y)
    rhs = f if time_dependent else (lambda t, y: f(y))
    y = np.array(y0, dtype=np.float64)
    start = digest(y) if checkpoint is not None else None
    first = np.asarray(observe(y))
    out = np.empty((t_eval.size,) + first.shape, dtype=first.dtype)
    out[0] = first
    state = dict(k=1, j=0, t=float(t_eval[0]), h=np.nan, nfev=0, nsteps=0, nrejected=0, hmin=np.inf, hmax=0.0)
    if checkpoint is not None and resume:
        saved = checkpoint.load(t_eval, y)
        if saved is not None:
            out[:int(saved["k"])] = saved["out"]
            y = saved["y"].copy()
            if not np.allclose(project(y), y, rtol=0, atol=1e-8):
                raise ValueError(f"checkpoint {checkpoint.path} holds a state off the constraint (e.g. "
                                 f"tokens that are not unit vectors); delete it to start afresh")
            state.update({key: saved[key].item() for key in state})

    def save(y):
        if checkpoint is not None:
            checkpoint.save(dict(t_eval=t_eval, y=y, out=out[:state["k"]], start=np.array(start),
                                 **{key: np.array(val) for key, val in state.items()}))

    every = checkpoint.every if checkpoint is not None else np.inf
    counter = [0]

    def step_taken(y, done, count=1):
        """Book-keeping after ``count`` accepted steps; checkpoints mid-interval."""
        state["nsteps"] += count
        if state["nsteps"] > MAX_STEPS:
            raise RuntimeError(f"more than {MAX_STEPS:.0e} steps before t = {t_eval[-1]:g}; shorten t_eval "
                               f"(resume from a checkpoint) or loosen rtol/atol")
        counter[0] += count
        if counter[0] >= every and not done:
            counter[0] = 0
            save(y)

    bar = _progress_bar(progress, t_eval)
    try:
        while state["k"] < t_eval.size:
            t0, t1 = t_eval[state["k"] - 1], t_eval[state["k"]]
            if positivity:
                y = _controlled_interval(rhs, y, t1, state, dt, cfl, scheme, project, bar, step_taken, context)
            elif scheme in FIXED:
                nsub = max(1, int(np.ceil((t1 - t0) / dt * (1 - 1e-12))))
                h = (t1 - t0) / nsub
                while state["j"] < nsub:
                    if advance is None:
                        count = 1
                        y_new, nf = fixed_step(rhs, t0 + state["j"] * h, y, h, scheme)
                        if kick is not None:
                            y_new = y_new + kick(y, h, state["nsteps"])
                        y = project(y_new)
                    else:
                        count = int(min(nsub - state["j"], every - counter[0]))
                        y, nf = advance(y, h, count)
                    state["j"] += count
                    state["nfev"] += nf
                    bar.update(h * count)
                    step_taken(y, state["j"] == nsub, count)
            else:
                y = _adaptive_interval(rhs, y, t1, state, rtol, atol, project, bar, step_taken)
            out[state["k"]] = observe(y)
            state.update(k=state["k"] + 1, j=0, t=float(t1))
            if counter[0] >= every:
                counter[0] = 0
                save(y)
        save(y)
    finally:
        bar.close()
    info = {key: int(state[key]) for key in ("nfev", "nsteps", "nrejected")}
    if positivity:
        info.update(hmin=float(state["hmin"]), hmax=float(state["hmax"]))
    if observed:
        info["state"] = y       # the state at t_eval[-1], which Y no longer holds
    return out, info


def _controlled_interval(f, y, t1, state, dt, cfl, scheme, project, bar, step_taken, context):
    """Positivity-controlled steps from state['t'] to t1 (module docstring)."""
    t = state["t"]
    while t < t1:
        k1, rate = f(t, y)
        state["nfev"] += 1
        h, last = _controlled_step(dt, cfl, rate, t1 - t, t, context)
        while True:
            y_new, rate = _positive_stages(f, t, y, h, k1, rate, scheme, state)
            if rate is None:
                break
            state["nrejected"] += 1                 # a later stage needs a smaller step
            h, last = _controlled_step(h, cfl, rate, t1 - t, t, context)
        y = project(y_new)
        t = t1 if last else t + h
        state.update(t=float(t), j=state["j"] + 1, hmin=min(state["hmin"], h), hmax=max(state["hmax"], h))
        bar.update(h)
        step_taken(y, t >= t1)
    return y


def _controlled_step(cap, cfl, rate, left, t, context=None):
    """(h, last): the largest h <= min(cap, cfl/rate) that cuts ``left`` into equal steps."""
    rate = float(rate)
    where = "" if context is None else f" ({context})"
    if not (np.isfinite(rate) and rate >= 0):
        raise ValueError(f"the positivity rate is {rate!r} at t = {t:g}{where}; the state is no longer finite")
    bound = cap if rate == 0 else min(cap, cfl / rate)
    if bound < 1e-14 * max(1.0, abs(t)):
        raise ValueError(f"positivity step size underflow at t = {t:g} (rate {rate:.3g}){where}: the field is too "
                         f"fast for an explicit step; use a smaller beta or rescale time")
    count = max(1, int(np.ceil(left / bound * (1 - 1e-12))))
    return left / count, count == 1


def _positive_stages(f, t, y, h, k1, rate, scheme, state):
    """One step of ``scheme`` from (t, y) with f(t, y) = (k1, rate); returns (y_new, None), or
    (None, rate) with the rate of the first later stage at which h · rate > 1 (the step is rejected)."""
    y1 = y + h * k1
    if scheme == "euler":
        return y1, None
    k2, rate = f(t + h, y1)
    state["nfev"] += 1
    if h * rate > 1.0:
        return None, rate
    y2 = 0.75 * y + 0.25 * (y1 + h * k2)
    k3, rate = f(t + 0.5 * h, y2)
    state["nfev"] += 1
    if h * rate > 1.0:
        return None, rate
    return y / 3.0 + (2.0 / 3.0) * (y2 + h * k3), None


def _adaptive_interval(f, y, t1, state, rtol, atol, project, bar, step_taken):
    """Dormand–Prince steps from state['t'] to t1; the step size is carried in state['h']."""
    t = state["t"]
    k1 = f(t, y)
    state["nfev"] += 1
    if not np.isfinite(state["h"]):
        state["h"] = _initial_step(f, t, y, k1, rtol, atol, state)
    while t < t1:
        h = state["h"]
        step = min(h, t1 - t)
        last = step >= t1 - t
        y_new, err, _ = _dopri_step(f, t, y, step, k1)
        state["nfev"] += 6
        norm = _error_norm(err, y, y_new, rtol, atol)
        if norm <= 1.0 and np.all(np.isfinite(y_new)):
            y = project(y_new)
            t = t1 if last else t + step
            bar.update(step)
            factor = 5.0 if norm == 0 else min(5.0, max(0.2, 0.9 * norm ** -0.2))
            state["h"] = max(h, step * factor) if last else step * factor
            state["t"] = t
            if t < t1:
                k1 = f(t, y)
                state["nfev"] += 1
            state["j"] += 1
            step_taken(y, t >= t1)
        else:
            state["nrejected"] += 1
            state["h"] = step * max(0.2, 0.9 * norm ** -0.2) if np.isfinite(norm) else 0.2 * step
            if state["h"] < 1e-14 * max(1.0, abs(t)):
                raise ValueError(f"adaptive step size underflow at t = {t:g}; the problem is too stiff for dopri5 "
                                 f"at rtol = {rtol:g}, atol = {atol:g}: loosen rtol/atol or use a fixed step")
    return y


def _initial_step(f, t, y, k1, rtol, atol, state):
    """Hairer–Nørsett–Wanner's starting step; 1e-6 wherever the estimate is not a finite positive number."""
    scale = atol + rtol * np.abs(y)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        d0 = np.sqrt(np.mean((y / scale) ** 2))
        d1 = np.sqrt(np.mean((k1 / scale) ** 2))
        h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        if not (np.isfinite(h0) and h0 > 0):
            h0 = 1e-6
        k2 = f(t + h0, y + h0 * k1)
        state["nfev"] += 1
        d2 = np.sqrt(np.mean(((k2 - k1) / scale) ** 2)) / h0
        h1 = max(1e-6, h0 * 1e-3) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** 0.2
    h = min(100 * h0, h1)
    return float(h) if np.isfinite(h) and h > 0 else 1e-6


class _NoBar:
    def update(self, _):
        pass

    def close(self):
        pass


class _TimeBar:
    """A tqdm bar over simulated time; summed step sizes may overshoot the total by
    round-off, so updates are clamped to what is left.  ``delay``: seconds before it shows;
    ``disable=None``: tqdm's rule, no bar when the output is not a terminal."""

    def __init__(self, t_eval, delay=0.0, disable=False):
        from tqdm.auto import tqdm
        self.bar = tqdm(total=float(t_eval[-1] - t_eval[0]), unit="t", desc="solve", delay=delay, disable=disable,
                        bar_format="{l_bar}{bar}| t={n:.3g}/{total:.3g} [{elapsed}<{remaining}]")

    def update(self, h):
        self.bar.update(max(0.0, min(h, self.bar.total - self.bar.n)))

    def close(self):
        self.bar.close()


AUTO_PROGRESS_DELAY = 3.0   # seconds a solve runs before progress=None shows its bar


def _progress_bar(progress, t_eval):
    if progress is None:
        return _TimeBar(t_eval, delay=AUTO_PROGRESS_DELAY, disable=None)
    return _TimeBar(t_eval) if progress else _NoBar()
