"""Work budgets: a run estimated to take longer than ``budget`` seconds is refused before it starts.

The estimate is the number of units of work (time steps, Newton starts) times the measured cost
of one unit (the minimum of two timed calls, so that a first call's compilation does not count).
Runs whose work cannot be counted up front (controlled or adaptive steps) are stopped when they pass
the budget instead (``over_budget``: ``stepping.integrate`` saves the run's checkpoint first), with a
message that says how to resume from it.
``budget=None`` lifts the limit.
"""
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from .checks import as_positive, available_bytes

__all__ = ["BUDGET", "as_budget", "seconds_per_call", "check_work", "over_budget", "step_count",
           "check_fixed_steps"]

BUDGET = 3600.0     # seconds: the default budget of the solvers and of landscape.critical_points
MIN_STEPS = 1000    # fixed-step runs of at most this many steps are not timed (they cost nothing extra)


def as_budget(budget: float | None) -> float | None:
    """A work budget: None (no limit) or a positive number of seconds.

    Parameters
    ----------
    budget : float or None
        Seconds.

    Returns
    -------
    float or None

    Raises
    ------
    TypeError
        If budget is not a real number or None.
    ValueError
        If budget is not finite and positive.

    Examples
    --------
    >>> from meanfield.budget import as_budget
    >>> as_budget(60), as_budget(None)
    (60.0, None)
    """
    return None if budget is None else as_positive(budget, "budget")


def seconds_per_call(call: Callable[[], object], repeat: int = 2) -> float:
    r"""The shortest of ``repeat`` timed calls of ``call()`` (the first may compile kernels).

    .. math::

        \min_{r < \text{repeat}} \text{wall time of call } r.

    Parameters
    ----------
    call : callable
        Called without arguments.
    repeat : int
        Number of timed calls.

    Returns
    -------
    float
        Seconds.

    Examples
    --------
    >>> from meanfield.budget import seconds_per_call
    >>> seconds_per_call(lambda: sum(range(100))) < 1.0
    True
    """
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def _duration(seconds):
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def check_work(budget: float | None, count: float, seconds_each: float, what: str, unit: str = "steps",
               hint: str = ", with checkpoint=PATH to be able to resume it") -> None:
    r"""Refuse ``count`` units of work of ``seconds_each`` seconds each when they exceed ``budget``.

    .. math::

        \text{count} \times \text{seconds\_each} > \text{budget} \implies \text{ValueError}.

    Parameters
    ----------
    budget : float or None
        Seconds allowed (None: no limit).
    count : float
        Units of work the run needs.
    seconds_each : float
        Measured seconds per unit.
    what : str
        The run, for the message.
    unit : str
        The units' name.
    hint : str
        Ends the message (how to run it safely anyway).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``budget``, with the estimate and the override.

    Examples
    --------
    >>> from meanfield.budget import check_work
    >>> check_work(60.0, 1000, 0.01, "a solve")      # 10 s: admitted
    >>> check_work(60.0, 10_000, 0.01, "a solve")
    Traceback (most recent call last):
    ...
    ValueError: a solve would take about 1.67 min (1e+04 steps at 0.01 s each, measured), more than budget = 60 s; ...
    """
    if budget is None:
        return
    estimate = count * seconds_each
    if estimate > budget:
        raise ValueError(f"{what} would take about {_duration(estimate)} ({count:.3g} {unit} at {seconds_each:.2g} s "
                         f"each, measured), more than budget = {budget:g} s; pass budget=None (or a larger budget) "
                         f"to run it anyway{hint}")


def over_budget(start: float, budget: float | None, what: str, t: float, checkpoint: str | None = None
                ) -> RuntimeError | None:
    r"""The error that stops a run checked between chunks of work once ``budget`` seconds have passed
    since ``start`` (``time.perf_counter``), or None while it has time left (and always with no budget).

    .. math::

        \text{now} - \text{start} > \text{budget} \implies \text{RuntimeError}.

    The caller saves its checkpoint and raises it: the adaptive solvers check between stretches of
    integration, where their state is complete.

    Parameters
    ----------
    start : float
        ``time.perf_counter()`` when the run began.
    budget : float or None
        Seconds.
    what : str
        The run, for the message.
    t : float
        The run's time reached, for the message.
    checkpoint : str, optional
        The checkpoint the run can be resumed from.

    Returns
    -------
    RuntimeError or None

    Examples
    --------
    >>> import time
    >>> from meanfield.budget import over_budget
    >>> over_budget(time.perf_counter(), 60.0, "a run", 1.5) is None
    True
    >>> over_budget(time.perf_counter() - 2.0, 1.0, "a run", 1.5, "run.npz")
    RuntimeError('a run passed its budget of 1 s at t = 1.5; resume=True on run.npz continues it')
    """
    if budget is None or time.perf_counter() - start <= budget:
        return None
    advice = (f"resume=True on {checkpoint} continues it" if checkpoint is not None else
              "pass checkpoint=PATH to be able to resume, or a larger budget (None: no limit)")
    return RuntimeError(f"{what} passed its budget of {budget:g} s at t = {t:g}; {advice}")


def step_count(t_eval: ArrayLike, dt: float) -> float:
    r"""The fixed steps ``stepping.integrate`` takes through ``t_eval`` with steps of at most ``dt``: each
    interval cut into equal steps.

    .. math::

        \sum_k \max\big(1, \lceil (t_{k+1} - t_k)/\Delta t \rceil\big).

    Parameters
    ----------
    t_eval : array_like
        Output times.
    dt : float
        Largest step.

    Returns
    -------
    float

    Examples
    --------
    >>> from meanfield.budget import step_count
    >>> step_count([0.0, 1.0, 1.05], 0.1)
    11.0
    """
    lengths = np.diff(np.asarray(t_eval, dtype=float))
    return float(np.sum(np.maximum(1.0, np.ceil(lengths / dt * (1 - 1e-12)))))


def check_fixed_steps(budget: float | None, t_eval: ArrayLike, dt: float, call: Callable[[], object],
                      evaluations: float, what: str) -> None:
    r"""``check_work`` for a fixed-step run through ``t_eval``: ``step_count(t_eval, dt)`` steps, each
    ``evaluations`` times the measured cost of ``call()``.

    .. math::

        \text{steps} \times \text{evaluations} \times \text{seconds\_per\_call(call)} \le \text{budget}.

    Runs of at most ``MIN_STEPS`` steps are admitted without timing a step (for them to exceed an hour
    a step would have to take 3.6 s).

    Parameters
    ----------
    budget : float or None
        Seconds allowed.
    t_eval : array_like
        Output times.
    dt : float
        Largest step.
    call : callable
        One step, or one field evaluation.
    evaluations : float
        Calls of ``call`` per step.
    what : str
        The run, for the message.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        If the estimate exceeds the budget.

    Examples
    --------
    >>> import time
    >>> from meanfield.budget import check_fixed_steps
    >>> check_fixed_steps(3600.0, [0.0, 1.0], 0.01, lambda: time.sleep(1), 1, "a solve")   # 100 steps: not timed
    >>> check_fixed_steps(1.0, [0.0, 1.0], 1e-4, lambda: time.sleep(0.001), 1, "a solve")
    Traceback (most recent call last):
    ...
    ValueError: a solve would take about ...
    """
    steps = step_count(t_eval, dt)
    if budget is not None and steps > MIN_STEPS:
        check_work(budget, steps, evaluations * seconds_per_call(call), what)


MAX_STEPS = 10 ** 7      # a run cut into more steps (or remeshing stretches) than this is refused up front


def check_advance(t_eval: ArrayLike, step: float, name: str, what: str, unit: str = "steps",
                  limit: float = MAX_STEPS) -> None:
    r"""Refuse, before a run starts, a largest step that cannot advance t in double precision anywhere
    in ``t_eval`` (``t + step == t``: the loop would never end) or that cuts ``t_eval`` into more than
    ``limit`` pieces, with the estimate.

    .. math::

        \max_k |t_k| + \Delta t > \max_k |t_k|, \qquad
        \sum_k \lceil (t_{k+1} - t_k)/\Delta t \rceil \le \text{limit}.

    Parameters
    ----------
    t_eval : array_like
        Output times.
    step : float
        The largest step (``dt``, or the adaptive solvers' ``interval``).
    name : str
        The argument's name.
    what : str
        The run, for the message.
    unit : str
        What the pieces are called.
    limit : float
        The most pieces accepted.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        Naming ``name``, its value and the estimate.

    Examples
    --------
    >>> from meanfield.budget import check_advance
    >>> check_advance([0.0, 1.0], 0.01, "dt", "this run")
    >>> check_advance([0.0, 1.0], 1e-300, "dt", "this run")
    Traceback (most recent call last):
    ...
    ValueError: dt = 1e-300 cannot advance t at t = 1 (t + dt == t in double precision), so this run would ...
    >>> check_advance([0.0, 1.0], 1e-9, "dt", "this run")
    Traceback (most recent call last):
    ...
    ValueError: dt = 1e-09 cuts t_eval into 1e+09 steps, more than 1e+07 (this run); use a larger dt ...
    """
    t_eval = np.asarray(t_eval, dtype=float)
    top = float(np.max(np.abs(t_eval)))
    if not top + step > top:
        raise ValueError(f"{name} = {step:g} cannot advance t at t = {top:g} (t + {name} == t in double precision), "
                         f"so {what} would never end; use a larger {name}")
    count = step_count(t_eval, step)
    if count > limit:
        raise ValueError(f"{name} = {step:g} cuts t_eval into {count:.3g} {unit}, more than {limit:.0e} ({what}); "
                         f"use a larger {name} (or fewer output times, or split the run and resume from a checkpoint)")


def check_memory(nbytes: float, what: str) -> None:
    r"""Refuse, before allocating, arrays of ``nbytes`` bytes in all that exceed the memory available
    now (``checks.available_bytes``), with the estimate: a MemoryError deep inside numpy, an hour of
    swapping, or the kernel's OOM killer (which may kill another process) is worse.

    .. math::

        \text{nbytes} \le \text{MemAvailable}.

    Parameters
    ----------
    nbytes : float
        The estimated size of the arrays.
    what : str
        What needs them, for the message (the sizes that set it).

    Returns
    -------
    None

    Raises
    ------
    ValueError
        With the estimate and the memory available.

    Examples
    --------
    >>> from meanfield.budget import check_memory
    >>> check_memory(8e3, "a small run")
    >>> check_memory(1e30, "slices = 10^25")
    Traceback (most recent call last):
    ...
    ValueError: slices = 10^25 needs about 9.31e+20 GiB of memory, more than the ... GiB available; ...
    """
    free = available_bytes()
    if free is not None and nbytes > free:
        raise ValueError(f"{what} needs about {nbytes / 2 ** 30:.3g} GiB of memory, more than the "
                         f"{free / 2 ** 30:.3g} GiB available; use smaller sizes (or fewer output times)")
