"""Progress of a long run: a tqdm bar on a terminal, periodic log lines elsewhere.

One ``Progress`` reports one run, however many pieces it is computed in (an adaptive solve
integrates once per stretch between remeshes and passes the same reporter to each piece).
``show`` chooses when it speaks:

=========  ====================================================================================
``show``   what the run prints (to standard error)
=========  ====================================================================================
``None``   after ``delay`` seconds: a tqdm bar on a terminal; otherwise (scripts, notebooks, CI
           logs) one plain line every ``interval`` seconds, e.g.
           ``solve: t=3.2/10 (32%), 12 s elapsed, ~25 s left``, and a last line at the end
``True``   the same from the start
``False``  nothing
=========  ====================================================================================

Inside ``with quiet():`` (the commands' ``--quiet``), ``show=None`` reports nothing.
"""
import contextlib
import sys
import time

__all__ = ["Progress", "track", "quiet", "DELAY", "INTERVAL"]

DELAY = 2.0        # seconds a run lasts before show=None reports anything
INTERVAL = 10.0    # seconds between two log lines outside a terminal
_QUIET = [False]   # inside ``quiet()``: show=None reports nothing


class Progress:
    """The progress of one run towards ``total`` (simulated time, or a count of tasks).

    Parameters
    ----------
    total : float
        The amount of work: the simulated time span, or the number of tasks.
    desc : str
        The run's name, first on every line.
    show : bool or None
        None (default): only once the run has lasted ``delay`` seconds; True: always; False: never.
    unit : str
        ``"t"`` (default) writes ``t=3.2/10``; any other unit writes ``3/10 figures``.
    delay, interval : float, optional
        Seconds before a ``show=None`` run reports, and between two log lines (default: the module's
        ``DELAY`` and ``INTERVAL``).
    stream : file, optional
        Where to write; standard error (read when the reporter is made) by default.
    initial : float
        Work already done (a resumed run): counted in the share, not in the rate of the time estimate.

    Examples
    --------
    >>> import io
    >>> from meanfield.progress import Progress
    >>> out = io.StringIO()             # not a terminal: log lines
    >>> with Progress(2.0, "demo", show=True, interval=0.0, stream=out) as progress:
    ...     progress.update(0.5)
    >>> print(out.getvalue().splitlines()[0].split(",")[0])
    demo: t=0.5/2 (25%)
    """

    def __init__(self, total: float, desc: str = "solve", show: bool | None = None, unit: str = "t",
                 delay: float | None = None, interval: float | None = None, stream=None, initial: float = 0.0):
        self.total, self.desc, self.unit = float(total), desc, unit
        self.interval = INTERVAL if interval is None else float(interval)
        self.n = self.initial = min(float(initial), self.total)
        self.stream = sys.stderr if stream is None else stream
        self.start = time.monotonic()
        self.delay = 0.0 if show else DELAY if delay is None else float(delay)
        self.bar = None
        self.lines = 0
        self.last = -float("inf")
        self.enabled = bool(show) or (show is None and not _QUIET[0])
        if self.enabled and _is_terminal(self.stream):
            from tqdm import tqdm
            counting = unit != "t"
            fmt = ("{l_bar}{bar}| {n:.0f}/{total:.0f} " + unit if counting else
                   "{l_bar}{bar}| t={n:.3g}/{total:.3g}") + " [{elapsed}<{remaining}]"
            self.bar = tqdm(total=self.total, initial=self.n, desc=desc, delay=self.delay, file=self.stream,
                            bar_format=fmt)

    def update(self, amount: float) -> None:
        """Advance by ``amount`` (clamped to what is left: summed step sizes overshoot by round-off).

        Examples
        --------
        >>> from meanfield.progress import Progress
        >>> p = Progress(1.0, show=False)
        >>> p.update(0.75); p.update(0.5); p.n
        1.0
        """
        amount = max(0.0, min(float(amount), self.total - self.n))
        if amount == 0:
            return
        self.n += amount
        if self.bar is not None:
            self.bar.update(amount)
        elif self.enabled:
            now = time.monotonic()
            if now - self.start >= self.delay and now - self.last >= self.interval:
                self._line(now)

    def _line(self, now, final=False):
        self.last, self.lines = now, self.lines + 1
        elapsed = now - self.start
        amount = f"t={self.n:.3g}/{self.total:.3g}" if self.unit == "t" else \
            f"{self.n:.0f}/{self.total:.0f} {self.unit}"
        share = self.n / self.total if self.total > 0 else 1.0
        if final:
            tail = f"{'done' if share >= 1 - 1e-9 else 'stopped'} in {elapsed:.0f} s"
        elif self.n > self.initial:
            tail = f"{elapsed:.0f} s elapsed, ~{elapsed * (self.total - self.n) / (self.n - self.initial):.0f} s left"
        else:
            tail = f"{elapsed:.0f} s elapsed"
        print(f"{self.desc}: {amount} ({100 * share:.0f}%), {tail}", file=self.stream, flush=True)

    def close(self) -> None:
        """End the report: close the bar, or write a last line ("done", or "stopped" short of the total)
        if any line was written.

        Examples
        --------
        >>> from meanfield.progress import Progress
        >>> Progress(1.0, show=False).close()
        """
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.lines and self.enabled:
            self._line(time.monotonic(), final=True)
            self.enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def track(items, desc: str, show: bool | None = None, unit: str = "items"):
    """Iterate over ``items`` (a sized collection), reporting the count done as ``Progress`` does.

    Parameters
    ----------
    items : sequence
        What to iterate over (``len`` gives the total).
    desc : str
        The run's name, first on every line.
    show : bool or None
        As for ``Progress``.
    unit : str
        What is counted, e.g. ``"figures"``.

    Returns
    -------
    generator
        The items, in order, each counted once the loop body that used it has run.

    Examples
    --------
    >>> from meanfield.progress import track
    >>> [k * k for k in track(range(4), "squares", show=False)]
    [0, 1, 4, 9]
    """
    with Progress(len(items), desc, show, unit=unit) as report:
        for item in items:
            yield item
            report.update(1)


@contextlib.contextmanager
def quiet():
    """Within this context, runs left at the default ``show=None`` report nothing (``--quiet`` of the
    commands); ``show=True`` still reports.

    Returns
    -------
    contextlib.AbstractContextManager
        The context (entering it yields None).

    Examples
    --------
    >>> import io
    >>> from meanfield.progress import Progress, quiet
    >>> with quiet():
    ...     Progress(1.0, delay=0.0).enabled, Progress(1.0, show=True, stream=io.StringIO()).enabled
    (False, True)
    """
    before = _QUIET[0]
    _QUIET[0] = True
    try:
        yield
    finally:
        _QUIET[0] = before


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
