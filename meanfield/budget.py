"""Work budgets: a run estimated to take longer than ``budget`` seconds is refused before it starts.

The estimate is the number of units of work (time steps, Newton starts) times the measured cost
of one unit (the minimum of two timed calls, so that a first call's compilation does not count).
Runs whose work cannot be counted up front (adaptive steps) are stopped when they reach the
budget instead (``deadline``), with a message that says how to resume from a checkpoint.
``budget=None`` lifts the limit.
"""
import time

import numpy as np

from .checks import as_positive

__all__ = ["BUDGET", "as_budget", "seconds_per_call", "check_work", "deadline", "step_count", "check_fixed_steps",
           "ssprk3_within_budget"]

BUDGET = 3600.0     # seconds: the default budget of the solvers and of landscape.critical_points
MIN_STEPS = 1000    # fixed-step runs of at most this many steps are not timed (they cost nothing extra)


def as_budget(budget):
    """None (no limit) or a positive number of seconds."""
    return None if budget is None else as_positive(budget, "budget")


def seconds_per_call(call, repeat=2):
    """The shortest of ``repeat`` timed calls of ``call()`` (the first may compile kernels)."""
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


def check_work(budget, count, seconds_each, what, unit="steps", hint=", with checkpoint=PATH to be able to resume it"):
    """Refuse ``count`` units of work of ``seconds_each`` seconds each when they exceed ``budget``.

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

    Raises
    ------
    ValueError
        Naming ``budget``, with the estimate and the override.

    Example
    -------
    >>> check_work(60.0, 1000, 0.01, "a solve")      # 10 s: admitted
    """
    if budget is None:
        return
    estimate = count * seconds_each
    if estimate > budget:
        raise ValueError(f"{what} would take about {_duration(estimate)} ({count:.3g} {unit} at {seconds_each:.2g} s "
                         f"each, measured), more than budget = {budget:g} s; pass budget=None (or a larger budget) "
                         f"to run it anyway{hint}")


def deadline(f, budget, what):
    """``f`` (called as f(*args)) that raises RuntimeError once ``budget`` seconds have passed since this
    call (None: ``f`` itself): the stop for runs whose work is not known up front."""
    if budget is None:
        return f
    end = time.monotonic() + budget

    def limited(*args):
        if time.monotonic() > end:
            raise RuntimeError(f"{what} ran past budget = {budget:g} s; rerun with resume=True on its checkpoint "
                               f"(and a larger budget, or budget=None) to continue from where it was saved")
        return f(*args)
    return limited


def step_count(t_eval, dt):
    """The fixed steps ``stepping.integrate`` takes through ``t_eval`` with steps of at most ``dt``
    (each interval cut into ceil(length/dt) equal steps)."""
    lengths = np.diff(np.asarray(t_eval, dtype=float))
    return float(np.sum(np.maximum(1.0, np.ceil(lengths / dt * (1 - 1e-12)))))


def check_fixed_steps(budget, t_eval, dt, call, evaluations, what):
    """``check_work`` for a fixed-step run through ``t_eval``: ``step_count(t_eval, dt)`` steps, each
    ``evaluations`` times the measured cost of ``call()`` (one step, or one field evaluation).  Runs
    of at most ``MIN_STEPS`` steps are admitted without timing a step (for them to exceed an hour a
    step would have to take 3.6 s)."""
    steps = step_count(t_eval, dt)
    if budget is not None and steps > MIN_STEPS:
        check_work(budget, steps, evaluations * seconds_per_call(call), what)


def ssprk3_within_budget(rhs, budget, t_eval, dt, y0, what):
    """The right-hand side of an SSP-RK3 density solve held to ``budget``: with steps controlled by the
    state (``dt`` None) it stops the run once the budget has passed (``deadline``); with fixed steps of
    ``dt`` the run is refused up front when three evaluations of ``rhs(y0)`` per step exceed it
    (``check_fixed_steps``)."""
    budget = as_budget(budget)
    if dt is None:
        return deadline(rhs, budget, what)
    check_fixed_steps(budget, t_eval, dt, lambda: rhs(y0), 3, what)
    return rhs
