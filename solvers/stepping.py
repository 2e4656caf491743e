"""Time integration shared by the particle and finite-volume solvers: one loop for every scheme.

``integrate`` advances y' = f(y) (or y' = f(t, y) with ``time_dependent=True``: the stages see
their own times) through the output times ``t_eval``, hitting each exactly, with a scheme
(``schemes.py``: a registered name, a ``Scheme`` subclass or an instance) whose steps a controller
chooses (``controllers.py``):

- fixed steps for a scheme without error estimate: each interval [t_k, t_{k+1}] is cut into
  ceil((t_{k+1}-t_k)/dt) equal steps, so no step exceeds ``dt`` (which matters when ``dt`` is a
  positivity bound);
- error control for an embedded pair (``dopri5``), with ``rtol`` and ``atol``;
- positivity control (``positivity=True``): the right-hand side returns ``(dy/dt, rate)`` and the
  steps follow the rate, every stage of a Shu–Osher scheme (``euler``, ``ssprk3``) checked;
- an implicit scheme (``implicit_euler``, ``mprk22``, ``backward_euler``) needs ``f`` to be the engine's
  ``contract.Operator`` (its ``linear_part``): with ``positivity=True`` an embedded pair gets error
  control (``controllers.ImplicitControl``; ``dt`` then caps the steps only in the fast phase), else
  fixed steps of ``dt``, of any size; ``scheme="auto"`` (``positivity=True``) switches between SSP-RK3
  and backward Euler (``controllers.AutoSwitch``, ``info["switches"]``).

The loop owns what every run needs: output times, a checkpoint every ``checkpoint_every`` steps
(atomically: temporary file + rename) from which a resumed run repeats exactly the arithmetic of an
uninterrupted one, and one progress report per run (``meanfield.progress``, which a caller may pass
across several calls).  An optional ``project`` (e.g. x -> x/|x|) is applied after every step, and an
optional ``kick(y, h, step)`` (a random increment: Euler–Maruyama with ``euler``) is added before it.
"""
import glob
import contextlib
import hashlib
import json
import os
import tempfile
import time
import warnings

import numpy as np

from meanfield.atomic import write_file
from meanfield.budget import as_budget, check_fixed_steps, over_budget
from meanfield.checks import as_count, as_positive, as_restored_density
from meanfield.npzfile import NPZ_ERRORS
from meanfield.progress import Progress

from .controllers import AutoSwitch, ErrorControl, FixedSteps, ImplicitControl, PositivityControl
from .schemes import Auto, as_scheme

MAX_STEPS = 10 ** 7        # a run needing more steps is refused (fixed steps) or stopped (adaptive)
MIN_RTOL = 100 * np.finfo(float).eps   # the adaptive controller cannot reach a smaller rtol
COUNTERS = ("k", "j", "nfev", "nsteps", "nrejected")
CFL = 0.9                        # default fraction of the positivity bound taken by a controlled step
TIME_STEP = 0.1                  # density solvers: largest controlled step TIME_STEP / speed_bound (or global bound)
IMPLICIT_RTOL = 1e-3             # density solvers: default tolerances of the error-controlled implicit schemes
IMPLICIT_ATOL = 1e-8

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


def takes_operator(scheme: "str | type | object") -> bool:
    """Whether a scheme steps the engine's Operator itself: linearly implicit (``implicit_euler``,
    ``mprk22``) or ``auto``.  A density solve then passes its Operator to ``integrate`` (not a plain
    right-hand side), takes a fixed ``dt`` of any size, and leaves the budget to ``integrate``.

    Parameters
    ----------
    scheme : str, Scheme subclass or Scheme

    Returns
    -------
    bool

    Examples
    --------
    >>> from meanfield.solvers.stepping import takes_operator
    >>> takes_operator("ssprk3"), takes_operator("mprk22"), takes_operator("auto")
    (False, True, True)
    """
    scheme = as_scheme(scheme)
    return bool(scheme.implicit or isinstance(scheme, Auto))


def with_tolerances(meta: dict, scheme: "str | type | object", rtol: float, atol: float) -> dict:
    """A checkpoint's run identity ``meta`` with ``rtol`` and ``atol`` added when the scheme uses them
    (``takes_operator``), so that a run resumes only with the tolerances it was started with.

    Parameters
    ----------
    meta : dict
        The run's identity (changed in place).
    scheme : str, Scheme subclass or Scheme
    rtol, atol : float

    Returns
    -------
    dict
        ``meta``.

    Examples
    --------
    >>> from meanfield.solvers.stepping import with_tolerances
    >>> with_tolerances({}, "ssprk3", 1e-3, 1e-8), with_tolerances({}, "mprk22", 1e-3, 1e-8)
    ({}, {'rtol': 0.001, 'atol': 1e-08})
    """
    if takes_operator(scheme):
        meta.update(rtol=float(rtol), atol=float(atol))
    return meta


def next_stretch(scheme: "str | type | object", info: dict) -> tuple[object, float | None]:
    """The scheme of an adaptive engine's next stretch (between remeshes) after one that returned
    ``info``, and the implicit scheme's step there (None while explicit): "auto" goes on with the
    member it ended with, and remembers whether it has gone back to the explicit member (``Auto.returned``:
    its return to the implicit one is then slower, ``controllers.AutoSwitch``); the implicit step itself
    restarts on the new mesh.

    Parameters
    ----------
    scheme : str, Scheme subclass or Scheme
    info : dict
        ``integrate``'s info of the last stretch.

    Returns
    -------
    (scheme, float or None)

    Examples
    --------
    >>> from meanfield.solvers.stepping import next_stretch
    >>> next_stretch("auto", {"switches": [(3.0, "backward_euler")], "h": 2.5})
    (Auto(start='implicit'), 2.5)
    >>> next_stretch("auto", {"switches": [(3.0, "backward_euler"), (4.0, "ssprk3")], "streak": 7})
    (Auto(returned=True, streak=7), None)
    >>> next_stretch("ssprk3", {})
    (SSPRK3(), None)
    """
    scheme = as_scheme(scheme)
    if isinstance(scheme, Auto):
        switches = info.get("switches") or []
        implicit = switches[-1][1] == scheme.implicit_scheme.name if switches else scheme.start == "implicit"
        returned = scheme.returned or any(name == scheme.explicit.name for _, name in switches)
        return (Auto(start="implicit" if implicit else "explicit", switch=scheme.switch, back=scheme.back,
                     returned=returned, streak=info.get("streak", 0)), info.get("h") if implicit else None)
    return scheme, info.get("h")


def stretch_state(scheme: "str | type | object", step: float | None, switches: list) -> dict:
    """What an adaptive engine's checkpoint keeps of its time scheme between stretches (``next_stretch``):
    the member of "auto" in use, the implicit scheme's step and the switches so far, as arrays.

    Parameters
    ----------
    scheme : str, Scheme subclass or Scheme
        The scheme of the next stretch (an ``Auto`` carries its member in ``start``).
    step : float or None
        The implicit scheme's step (None while explicit).
    switches : list of (float, str)
        (t, scheme name) of the switches of "auto" so far.

    Returns
    -------
    dict
        ``stretch_mode`` (-1: not "auto", 0: explicit, 1: implicit; +2 once it has gone back to the
        explicit member, ``Auto.returned``), ``stretch_streak`` (``Auto.streak``), ``stretch_step`` (NaN
        for None), ``switch_t`` and ``switch_names``; ``restored_stretch`` reads them back.

    Examples
    --------
    >>> from meanfield.solvers.stepping import next_stretch, restored_stretch, stretch_state
    >>> scheme, step = next_stretch("auto", {"switches": [(3.0, "backward_euler")], "h": 2.5})
    >>> restored_stretch("auto", stretch_state(scheme, step, [(3.0, "backward_euler")]))
    (Auto(start='implicit'), 2.5, [(3.0, 'backward_euler')])
    """
    scheme = as_scheme(scheme)
    mode = int(scheme.start == "implicit") + 2 * scheme.returned if isinstance(scheme, Auto) else -1
    streak = scheme.streak if isinstance(scheme, Auto) else 0
    return dict(stretch_mode=np.array(mode), stretch_streak=np.array(streak),
                stretch_step=np.array(np.nan if step is None else float(step)),
                switch_t=np.array([t for t, _ in switches], dtype=float),
                switch_names=np.array([name for _, name in switches], dtype="U16"))


def restored_stretch(scheme: "str | type | object", saved: dict) -> tuple[object, float | None, list]:
    """The scheme, implicit step and switches of ``stretch_state`` read back from a checkpoint's arrays
    ``saved`` for a run of ``scheme`` (a checkpoint without them: the scheme as given, no step, no switches).

    Parameters
    ----------
    scheme : str, Scheme subclass or Scheme
        The run's scheme.
    saved : dict
        The checkpoint's arrays.

    Returns
    -------
    (scheme, float or None, list of (float, str))

    Raises
    ------
    ValueError
        When the stored member does not fit the scheme, or the step is not a positive number.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import restored_stretch
    >>> restored_stretch("ssprk3", {})
    ('ssprk3', None, [])
    >>> restored_stretch("mprk22", {"stretch_mode": np.array(-1), "stretch_step": np.array(0.5)})
    ('mprk22', 0.5, [])
    """
    if "stretch_mode" not in saved:
        return scheme, None, []
    mode, step = int(saved["stretch_mode"]), float(saved["stretch_step"])
    streak = int(saved.get("stretch_streak", 0))
    auto = isinstance(as_scheme(scheme), Auto)
    if mode not in ((0, 1, 2, 3) if auto else (-1,)) or not (np.isnan(step) or (np.isfinite(step) and step > 0)) \
            or streak < 0:
        raise ValueError(f"the stored time scheme (member {mode}, step {step!r}) does not fit scheme "
                         f"{as_scheme(scheme).name!r}")
    if auto:
        auto = as_scheme(scheme)
        scheme = Auto(start=("explicit", "implicit")[mode % 2], switch=auto.switch, back=auto.back,
                      returned=mode >= 2, streak=streak)
    switches = [(float(t), str(name)) for t, name in zip(saved.get("switch_t", ()), saved.get("switch_names", ()))]
    return scheme, None if np.isnan(step) else step, switches


def fixed_step(f, t, y, h, scheme):
    """One step of size h from (t, y) of an explicit scheme for y' = f(t, y) (``schemes.as_scheme``).

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
    scheme : str, Scheme subclass or Scheme
        E.g. ``"euler"``, ``"rk4"``, ``"ssprk3"``.

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
    y_new, nfev, _ = as_scheme(scheme).step(f, t, y, h)
    return y_new, nfev


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
    >>> import os, tempfile
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import Checkpoint, integrate
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> t = np.linspace(0.0, 1.0, 3)
    >>> Y, info = integrate(lambda y: -y, np.ones(1), t, dt=0.1, checkpoint=Checkpoint(path, every=5))
    >>> Z, _ = integrate(lambda y: -y, np.ones(1), t, dt=0.1, checkpoint=Checkpoint(path), resume=True)
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
              observe=None, positivity=False, cfl=CFL, context=None, budget=None, first_step=None):
    r"""Solve y' = f(y) (or f(t, y) if ``time_dependent``) from y(t_eval[0]) = y0; return
    (Y, info) with Y[k] = y(t_eval[k]).

    .. math::

        Y_k = y(t_k), \qquad y(t_0) = y_0, \quad \dot y = f(y).

    The run's position is (k, j, t): the next output index k, and within [t_{k-1}, t_k] the number
    j of steps taken and the time t reached.  ``positivity=True``: ``f`` returns ``(dy/dt, rate)`` and
    ``controllers.PositivityControl`` chooses the steps (``dt`` is then the largest step allowed and
    ``cfl`` the fraction of the bound 1/rate taken; info gains the smallest and largest step taken,
    ``hmin`` and ``hmax``; ``context`` is named in the error of a step that underflows).  Otherwise a
    scheme with an error estimate gets ``controllers.ErrorControl`` and any other ``FixedSteps``.

    An implicit scheme (``implicit = True``: ``"implicit_euler"``, ``"mprk22"``, ``"backward_euler"``) takes ``f``
    the engine's Operator (``contract.Operator``, with ``linear_part``); with ``positivity=True`` an
    embedded pair's steps follow its error estimate to ``rtol``/``atol`` (``controllers.ImplicitControl``:
    the L1 norm, growth at most 5× per step, no positivity check since every step keeps y >= 0, and
    ``dt`` caps the steps only while the explicit bound cfl / rate exceeds it), otherwise fixed steps
    of ``dt``, of any size.  ``scheme="auto"`` (``positivity=True``) starts with SSP-RK3 under
    positivity control and switches to backward Euler under error control when the explicit step falls below
    1/20 of the implicit one for 3 steps, back when it exceeds 1/10 for 3 steps
    (``controllers.choose_scheme``); ``info["switches"]`` lists (t, scheme name) of each switch.

    Parameters
    ----------
    f : callable
        ``f(y)``, or ``f(t, y)`` when ``time_dependent`` (with ``positivity``: returning
        ``(dy/dt, rate)``).
    y0 : ndarray
        The initial state.
    t_eval : ndarray
        Increasing output times; the run starts at ``t_eval[0]``.
    scheme : str, Scheme subclass or Scheme
        A name of ``schemes.SCHEMES`` (``"euler"``, ``"rk4"``, ``"ssprk3"``, ``"dopri5"``,
        ``"implicit_euler"``, ``"mprk22"``, ``"backward_euler"``, ``"auto"``), or a scheme (``schemes.as_scheme``).
    dt : float, optional
        The fixed step (the largest step with ``positivity``); unused by an error-controlled pair.
    rtol, atol : float
        Tolerances of an error-controlled pair (the RMS norm for ``dopri5``, the L1 norm for the implicit
        schemes).
    project : callable, optional
        Applied to the state after every step (e.g. back onto the sphere).
    checkpoint : Checkpoint, optional
        Where to save the state; ``resume=True`` continues from it bit for bit.
    resume : bool
    progress : bool, None or meanfield.progress.Progress
        True (always report), False (never) or None (the default: report once the solve has run a
        few seconds; a bar on a terminal, log lines elsewhere); or a ``Progress`` of a longer run, which
        this call advances and leaves open.
    time_dependent : bool
    kick : callable, optional
        ``kick(y, h, step)``, with the global step counter, added to every fixed step before the
        projection (a reproducible noise increment).
    advance : callable, optional
        ``advance(y, h, count)``, for fixed steps, replaces ``count`` consecutive steps + projections
        by one call (a fused engine) and returns (y, evaluations).
    observe : callable, optional
        ``observe(y)`` returns an array stored at each output time instead of y itself (same shape at
        every k): statistics of long runs without holding every state; info["state"] is then
        y(t_eval[-1]).
    positivity : bool
    cfl : float
        In (0, 1].
    context : str, optional
        The run (e.g. the model and grid), named in errors.
    budget : float, optional
        Seconds of wall-clock time: past them, the run saves its checkpoint after the step under way and
        raises RuntimeError (``resume=True`` then continues it bit for bit); a run of fixed steps whose
        step count times the measured cost of one step (``FixedSteps.probe``) exceeds it is refused
        before it starts (``meanfield.budget.check_fixed_steps``: runs of at most 1000 steps are not
        timed).  None (default): no limit.
    first_step : float, optional
        The first step of an error-controlled scheme (as ``solve_ivp``'s); None: Hairer–Nørsett–Wanner's
        guess.  The adaptive engines pass the last step of the previous mesh.

    Returns
    -------
    Y : ndarray
        ``Y[k] = y(t_eval[k])`` (or ``observe`` of it).
    info : dict
        Counters ``nfev``, ``nsteps``, ``nrejected`` (and ``hmin``, ``hmax``, ``state``, ``switches``,
        see above).

    Raises
    ------
    ValueError
        For an unknown scheme, bad tolerances, a ``dt`` needing more than ``MAX_STEPS`` steps,
        ``resume`` without ``checkpoint``, a checkpoint of another run, or a fixed-step run that does
        not fit in ``budget``.
    TypeError
        For a scheme that is neither a name nor a ``Scheme``, or an implicit scheme with an ``f`` that
        has no ``linear_part``.
    RuntimeError
        When the run needs more than ``MAX_STEPS`` steps, or passes its ``budget``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.stepping import integrate
    >>> Y, info = integrate(lambda y: -y, np.ones(1), np.array([0.0, 1.0]), dt=0.1)
    >>> round(float(Y[-1, 0]), 5), info["nsteps"]
    (0.36788, 10)
    """
    scheme = as_scheme(scheme)
    if scheme.implicit or isinstance(scheme, Auto):
        _check_operator(f, scheme, time_dependent)
    controller = _controller(scheme, dt, rtol, atol, positivity, cfl, kick, advance, context, t_eval)
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint=PATH (the file to resume from)")
    run = _Run(f if time_dependent else (lambda t, y: f(y)), project or (lambda y: y), checkpoint, t_eval,
               as_budget(budget), context or "this integration")
    run.operator = f
    if first_step is not None:
        run.state["h"] = as_positive(first_step, "first_step")
    if scheme.implicit:
        run.f = f              # a linearly implicit scheme steps with the Operator itself
    observed = observe is not None
    observe = observe or (lambda y: y)
    y = np.array(y0, dtype=np.float64)
    if isinstance(controller, FixedSteps):
        check_fixed_steps(run.budget, t_eval, controller.dt, lambda: controller.probe(run.f, float(t_eval[0]), y), 1,
                          run.what)
    elif isinstance(controller, PositivityControl):    # steps of at most dt: a lower bound on the steps needed
        check_fixed_steps(run.budget, t_eval, controller.dt, lambda: run.f(float(t_eval[0]), y),
                          controller.scheme.stages, run.what)
    if not isinstance(controller, (ErrorControl, ImplicitControl, AutoSwitch)) \
            and not (t_eval[-1] - t_eval[0]) / dt <= MAX_STEPS:    # error-controlled steps: dt is a cap only
        where = "" if context is None else f" for {context}"
        raise ValueError(f"dt = {dt:g} would take more than {MAX_STEPS:.0e} steps to span t_eval "
                         f"({t_eval[0]:g} to {t_eval[-1]:g}){where}; shorten t_eval or choose a larger dt")
    start = digest(y) if checkpoint is not None else None
    first = np.asarray(observe(y))
    out = np.empty((t_eval.size,) + first.shape, dtype=first.dtype)
    out[0] = first
    state = run.state
    if checkpoint is not None and resume:
        saved = checkpoint.load(t_eval, y)
        if saved is not None:
            out[:int(saved["k"])] = saved["out"]
            y = saved["y"].copy()
            if not np.allclose(run.project(y), y, rtol=0, atol=1e-8):
                raise ValueError(f"checkpoint {checkpoint.path} holds a state off the constraint (e.g. "
                                 f"tokens that are not unit vectors); delete it to start afresh")
            state.update({key: saved[key].item() for key in state if key in saved})
            controller.restore(saved)
    if checkpoint is not None:
        run.save = lambda y: checkpoint.save(dict(t_eval=t_eval, y=y, out=out[:state["k"]], start=np.array(start),
                                                  **{key: np.array(val) for key, val in state.items()},
                                                  **controller.saved()))
    run.reached = state["t"]
    own = not isinstance(progress, Progress)
    run.bar = Progress(float(t_eval[-1] - t_eval[0]), "solve", progress) if own else progress
    if own:
        run.bar.update(state["t"] - float(t_eval[0]))     # a resumed run's bar starts where it stopped
    try:
        while state["k"] < t_eval.size:
            t0, t1 = t_eval[state["k"] - 1], t_eval[state["k"]]
            y = controller.interval(run, y, t0, t1)
            out[state["k"]] = observe(y)
            state.update(k=state["k"] + 1, j=0, t=float(t1))
            if run.counter >= run.every or run.stop is not None:
                run.counter = 0
                run.save(y)
            if run.stop is not None and state["k"] < t_eval.size:
                raise run.stop
        run.save(y)
    finally:
        if own:
            run.bar.close()
    info = {key: int(state[key]) for key in ("nfev", "nsteps", "nrejected")}
    if positivity:
        info.update(hmin=float(state["hmin"]), hmax=float(state["hmax"]))
    if isinstance(controller, AutoSwitch):
        info["switches"] = controller.named_switches()
        info["streak"] = int(state["streak"])      # carried into an adaptive engine's next stretch
    if isinstance(controller, ImplicitControl) or (isinstance(controller, AutoSwitch) and state["mode"] == 1):
        info["h"] = float(state["h"])             # the implicit scheme's next step
    if observed:
        info["state"] = y       # the state at t_eval[-1], which Y no longer holds
    return out, info


def _check_operator(f, scheme, time_dependent):
    """An implicit scheme (or auto) needs the engine's Operator, autonomous."""
    if not callable(getattr(f, "linear_part", None)):
        raise TypeError(f"the scheme {scheme.name!r} is linearly implicit: f must be an engine Operator with "
                        f"linear_part(y) (meanfield.solvers.contract.Operator), not a plain "
                        f"{type(f).__name__}; use an explicit scheme for a plain right-hand side")
    if time_dependent:
        raise ValueError(f"the scheme {scheme.name!r} steps an autonomous Operator: time_dependent=True is not "
                         f"supported")


def _controller(scheme, dt, rtol, atol, positivity, cfl, kick, advance, context, t_eval):
    """The controller of a run, its settings checked."""
    rtol, atol = as_positive(rtol, "rtol"), as_positive(atol, "atol")
    if rtol < MIN_RTOL:
        raise ValueError(f"rtol = {rtol:g} is below 100 machine epsilons ({MIN_RTOL:.1e}), which no step size "
                         f"can reach in double precision; use rtol >= {MIN_RTOL:.1e}")
    if isinstance(scheme, Auto) or (scheme.implicit and positivity):
        if not positivity or dt is None or kick is not None or advance is not None:
            raise ValueError(f"the scheme {scheme.name!r} chooses its own steps: call it with positivity=True and "
                             f"dt (the step cap of the fast phase), without kick or advance")
        if not 0 < as_positive(cfl, "cfl") <= 1:
            raise ValueError(f"cfl must lie in (0, 1]; got {cfl!r}")
        if isinstance(scheme, Auto):
            return AutoSwitch(scheme, rtol, atol, as_positive(dt, "dt"), cfl, context)
        if not scheme.adaptive:
            raise ValueError(f"the scheme {scheme.name!r} has no error estimate: give a fixed dt (any size), or use "
                             f"'backward_euler' or 'mprk22' for steps chosen by the error")
        return ImplicitControl(scheme, rtol, atol, as_positive(dt, "dt"), cfl)
    if not scheme.adaptive or positivity or scheme.implicit:
        if dt is None:
            raise ValueError(f"the scheme {scheme.name!r} takes fixed or positivity-controlled steps: give dt")
    if positivity:
        if kick is not None or advance is not None:
            raise ValueError("positivity-controlled steps take no kick or advance")
        if not 0 < as_positive(cfl, "cfl") <= 1:
            raise ValueError(f"cfl must lie in (0, 1]; got {cfl!r}")
        return PositivityControl(scheme, dt, cfl, context)
    if scheme.adaptive and not scheme.implicit:
        return ErrorControl(scheme, rtol, atol)
    return FixedSteps(scheme, dt, kick, advance)


class _Run:
    """What a controller sees of the run: the right-hand side, the projection, the counters
    (``state``, saved in checkpoints), and ``accepted`` for the book-keeping of each accepted step."""

    def __init__(self, f, project, checkpoint, t_eval, budget, what):
        self.f, self.project, self.t_eval = f, project, t_eval
        self.budget, self.what, self.start = budget, what, time.perf_counter()
        self.path = None if checkpoint is None else checkpoint.path
        self.state = dict(k=1, j=0, t=float(t_eval[0]), h=np.nan, nfev=0, nsteps=0, nrejected=0, hmin=np.inf,
                          hmax=0.0, mode=-1, streak=0, fast=1)
        self.every = checkpoint.every if checkpoint is not None else np.inf
        self.counter = 0
        self.bar = self.stop = None
        self.operator = None
        self.reached = float(t_eval[0])

    def save(self, y):
        """Save the run's state (replaced by the checkpoint's writer when the run has one)."""

    def until_save(self):
        """Steps left before the next checkpoint (inf without one)."""
        return self.every - self.counter

    def accepted(self, y, h, done, count=1):
        """Book-keeping after ``count`` accepted steps spanning h: progress, counters, mid-interval checkpoints,
        the budget."""
        self.bar.update(h)
        self.reached += h
        self.state["nsteps"] += count
        if self.state["nsteps"] > MAX_STEPS:
            raise RuntimeError(f"more than {MAX_STEPS:.0e} steps before t = {self.t_eval[-1]:g}; shorten t_eval "
                               f"(resume from a checkpoint) or loosen rtol/atol")
        self.counter += count
        stop = None if self.budget is None else over_budget(self.start, self.budget, self.what, self.reached,
                                                            self.path)
        if (self.counter >= self.every or stop is not None) and not done:
            self.counter = 0
            self.save(y)
        if stop is not None:
            if done:                    # the interval's end: the loop stores the output, then saves
                self.stop = stop
            else:
                raise stop
