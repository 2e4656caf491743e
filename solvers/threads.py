"""Threads of the density solvers: table products that stay fast beside other work.

A stage of the S^2 finite volumes spends most of its time in two products with the harmonic table,
C = T^T W and S = T C (``sphere_fv``).  Handed to a multi-threaded OpenBLAS, each product is split
evenly between its threads, which spin while they wait for one another: beside one other busy process a
thread that shares its core arrives late, and its partner spins on the core the latecomer needs, so
on two threads the products run several times slower than on one.

``table_product`` computes the same products in blocks of rows of a fixed size (set by the matrix
size alone), each block by single-threaded BLAS, pulled one at a time by the calling thread and
``threads - 1`` helper threads that sleep while they wait.  A thread that runs late takes fewer
blocks instead of holding up the others, and no thread spins.  The blocks do not depend on the
number of threads, so the result is the same for any thread count: that of single-threaded BLAS
(with OpenBLAS's kernels, to the bit: a block of rows is computed as it is within the whole product).

The number of threads is BLAS's: what ``OPENBLAS_NUM_THREADS``, ``threadpoolctl`` or
``openblas_set_num_threads`` set for NumPy's OpenBLAS (``blas_threads``), 1 below ``PARALLEL_WORK``
multiply–adds.  Where NumPy's BLAS is not an OpenBLAS found at run time (``blas_library``; e.g.
MKL, Apple's Accelerate), the products are the plain NumPy ones.

Pulled blocks help the products; the Numba passes between them (``prange`` loops split evenly, as
OpenMP's static schedule does) and the wake-ups of sleeping threads still cost a solve on two threads
beside a busy process more than the second thread brings.  So a solve also measures its own
evaluations (``solving`` and ``evaluation``, ``ThreadChoice``): it times blocks of ``BLOCK``
evaluations on the threads asked for and on one thread, runs on the faster, and compares again after
``FIRST`` evaluations, then after twice as many each time the choice stands (at most ``LONGEST``);
Numba's thread count is set when the choice changes, not around each evaluation (a call costs
microseconds, a few percent of a small stage).  On a quiet machine the second thread wins and the
trial blocks on one thread cost a few evaluations in a thousand; beside a busy process that slows the
threads asked for, the solve runs on one thread.
Every density engine's result is the same on any number of threads (the blocks above; ``prange``
loops that write disjoint entries), so the choice changes the time, never the bits.
"""
from __future__ import annotations

from . import _numba_env  # noqa: F401  (before numba)

import ctypes
import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache

import numba
import numpy as np

from .kernels.harmonics import sphere_basis

__all__ = ["blas_library", "blas_threads", "single_threaded_blas", "row_blocks", "table_product", "report",
           "ThreadChoice", "solving", "evaluation", "PARALLEL_WORK", "ALIGN", "MAX_BLOCKS", "BLOCK", "DECISIVE",
           "FIRST", "LONGEST"]

PARALLEL_WORK = 1 << 21    # products of fewer multiply-adds run on one thread
ALIGN = 16                 # block edges are multiples of this many rows
MAX_BLOCKS = 8             # blocks per product (fewer for short matrices: at least 4 ALIGN rows each)
BLOCK = 4                  # evaluations per timed block of ``ThreadChoice``
DECISIVE = 1.25            # a first trial whose first two blocks differ by this factor stops there
FIRST = 64                 # evaluations on the chosen threads before the next comparison ...
LONGEST = 1024             # ... doubled while the choice stands, up to this
_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "")
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))     # its wheels' libraries: numpy.libs, numpy/.dylibs


class _OpenBLAS:
    """The thread controls of one loaded OpenBLAS library."""

    def __init__(self, path, get, set_):
        self.path, self._get, self._set = path, get, set_

    def get(self):
        return int(self._get())

    def set(self, n):
        self._set(int(n))


def _loaded_openblas():
    """Paths of the OpenBLAS libraries mapped into this process (Linux), NumPy's first."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    paths = sorted(p for p in paths if os.path.isabs(p))
    return sorted(paths, key=lambda p: not p.startswith(_NUMPY))


@lru_cache(maxsize=1)
def blas_library() -> _OpenBLAS | None:
    """NumPy's OpenBLAS, with its thread count get/set functions; None where it is not found.

    Found among the libraries mapped into the process (``/proc/self/maps``): the OpenBLAS inside
    NumPy's package (``numpy.libs``), else the only OpenBLAS loaded.

    Returns
    -------
    object with ``path``, ``get()`` and ``set(n)``, or None

    Examples
    --------
    >>> from meanfield.solvers import threads
    >>> lib = threads.blas_library()
    >>> lib is None or lib.get() >= 1
    True
    """
    paths = _loaded_openblas()
    if not paths or (len(paths) > 1 and not paths[0].startswith(_NUMPY)):
        return None
    try:
        lib = ctypes.CDLL(paths[0])
    except OSError:
        return None
    for prefix, suffix in itertools.product(_PREFIXES, _SUFFIXES):
        get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
        set_ = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
        if get is not None and set_ is not None:
            get.restype, get.argtypes = ctypes.c_int, []
            set_.restype, set_.argtypes = None, [ctypes.c_int]
            return _OpenBLAS(paths[0], get, set_)
    return None


_ASKED = []      # the BLAS threads asked for when the enclosing ``single_threaded_blas`` blocks began


def blas_threads() -> int:
    """The threads NumPy's OpenBLAS was asked to use: its setting, or, inside ``single_threaded_blas``,
    its setting when the outermost such block began (1 where it is not found).

    Returns
    -------
    int

    Examples
    --------
    >>> from meanfield.solvers import threads
    >>> threads.blas_threads() >= 1
    True
    """
    if _ASKED:
        return _ASKED[-1]
    lib = blas_library()
    return 1 if lib is None else max(1, lib.get())


@contextmanager
def single_threaded_blas():
    """Run the block with NumPy's OpenBLAS on one thread, then restore its thread count.

    Inside, ``blas_threads`` still reports the threads asked for, which ``table_product`` uses.  A
    solve runs in such a block (``sphere.solve``): OpenBLAS's own threads, which spin for a while
    after each multi-threaded call, then stay asleep.  OpenBLAS's thread count is the process's:
    BLAS calls of other Python threads during the block also run on one thread.

    Returns
    -------
    context manager

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers import threads
    >>> before = threads.blas_threads()
    >>> with threads.single_threaded_blas():
    ...     lib = threads.blas_library()
    ...     (lib is None or lib.get() == 1, threads.blas_threads() == before)
    (True, True)
    >>> threads.blas_threads() == before
    True
    """
    lib = blas_library()
    before = None if lib is None else lib.get()
    _ASKED.append(blas_threads())
    if before is not None and before != 1:
        lib.set(1)
    try:
        yield
    finally:
        _ASKED.pop()
        if before is not None and before != 1:
            lib.set(before)


def row_blocks(n: int) -> np.ndarray:
    """Edges of the row blocks of an n-row product: at most ``MAX_BLOCKS`` blocks of a multiple of
    ``ALIGN`` rows (the last block: the rest); they depend on n alone.

    Parameters
    ----------
    n : int

    Returns
    -------
    ndarray of int
        0 = e_0 < e_1 < ... < e_k = n.

    Examples
    --------
    >>> from meanfield.solvers.threads import row_blocks
    >>> row_blocks(484).tolist()
    [0, 64, 128, 192, 256, 320, 384, 448, 484]
    >>> row_blocks(10).tolist()
    [0, 10]
    """
    size = max(4 * ALIGN, -(-n // MAX_BLOCKS))
    size = -(-size // ALIGN) * ALIGN
    return np.append(np.arange(0, n, size), n)


_TEAM = {}
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_TEAM.clear)       # a forked child has none of the parent's threads


def _helpers(n):
    """A pool of n helper threads (kept for the process)."""
    pool = _TEAM.get(n)
    if pool is None:
        pool = _TEAM[n] = ThreadPoolExecutor(n, thread_name_prefix="meanfield-blocks")
    return pool


def _run(task, count, workers):
    """task(0), ..., task(count - 1), pulled one at a time by this thread and ``workers - 1`` helpers;
    a helper that has not started when the tasks run out is cancelled rather than waited for."""
    tasks = itertools.count()

    def pull():
        for k in tasks:             # next() on a count is atomic under the GIL
            if k >= count:
                return
            task(k)

    pool = _helpers(workers - 1)
    futures = [pool.submit(pull) for _ in range(workers - 1)]
    try:
        pull()
    finally:
        for future in futures:
            if not future.cancel():
                future.result()


def table_product(T: np.ndarray, W: np.ndarray, weights: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    r"""S = T diag(w) T^T W in row blocks, on ``blas_threads()`` threads (module docstring).

    .. math::

        C = \operatorname{diag}(w)\, T^T W, \qquad S = T C

    Parameters
    ----------
    T : ndarray, shape (N, B)
        C-contiguous (the harmonic table).
    W : ndarray, shape (N, c)
    weights : ndarray, shape (B,)
    out : ndarray, shape (N, c), optional

    Returns
    -------
    ndarray, shape (N, c)
        Equal for any thread count, to the bit; that of single-threaded BLAS.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.threads import table_product
    >>> rng = np.random.default_rng(0)
    >>> T, W, w = rng.random((300, 40)), rng.random((300, 3)), rng.random(40)
    >>> bool(np.allclose(table_product(T, W, w), T @ (w[:, None] * (T.T @ W))))
    True
    """
    n, b = T.shape
    coef = np.empty((b, W.shape[1]))
    out = np.empty((n, W.shape[1])) if out is None else out
    workers = min(blas_threads(), _CHOICES[-1].current) if _CHOICES else blas_threads()
    workers = workers if n * b * W.shape[1] >= PARALLEL_WORK else 1
    with single_threaded_blas():
        if workers == 1:
            np.matmul(T.T, W, out=coef)
            coef *= weights[:, None]
            return np.matmul(T, coef, out=out)
        cols, rows = row_blocks(b), row_blocks(n)

        def analysis(k):
            np.matmul(T[:, cols[k]:cols[k + 1]].T, W, out=coef[cols[k]:cols[k + 1]])

        def synthesis(k):
            np.matmul(T[rows[k]:rows[k + 1]], coef, out=out[rows[k]:rows[k + 1]])

        _run(analysis, cols.size - 1, workers)
        coef *= weights[:, None]
        _run(synthesis, rows.size - 1, workers)
    return out


class ThreadChoice:
    """Between the threads asked for and one thread, the faster for a solve's evaluations, by timing them.

    The evaluations run in turns: a trial of timed blocks of ``BLOCK`` evaluations, alternating the two
    settings (one block each; the first time, a second block each unless the first two blocks' medians
    differ by ``DECISIVE`` or more), then ``period`` evaluations on the
    setting whose evaluations took less time (the median: robust to an evaluation that met a warm-up or a
    preemption).  ``period`` starts at ``FIRST`` and doubles, up
    to ``LONGEST``, each time a trial keeps the choice; a trial that changes it starts again at
    ``FIRST``.  Timing whole evaluations measures what the machine gives the solve now, whatever
    slows it: another process on a core, the wake-up of sleeping threads, an even split of a pass.

    Parameters
    ----------
    threads : int
        The threads asked for (Numba's); with 1 there is nothing to choose and every evaluation runs
        on one thread.

    Attributes
    ----------
    choice : int
        ``threads`` or 1: the setting between trials.
    current : int
        The setting of the last evaluation (Numba's while the solve runs, ``solving``).
    trials : list of (int, float, float)
        (evaluations so far, median seconds per evaluation on ``threads``, on one thread) of each trial.

    Examples
    --------
    >>> from meanfield.solvers.threads import ThreadChoice
    >>> choice = ThreadChoice(2)
    >>> for _ in range(200):                       # evaluations that take 1 s on one thread, 3 s on two
    ...     k = choice.next()
    ...     choice.record(k, 1.0 if k == 1 else 3.0)
    >>> choice.choice, choice.trials[0][1:]
    (1, (3.0, 1.0))
    """

    def __init__(self, threads: int):
        self.threads = max(1, int(threads))
        self.choice = self.current = self.threads
        self.period = FIRST
        self.count = 0
        self._left = FIRST
        self.trials = []
        self._plan = self._trial([self.threads, 1, self.threads, 1]) if self.threads > 1 else []
        self._times = {self.threads: [], 1: []}

    @staticmethod
    def _trial(order):
        return [k for k in order for _ in range(BLOCK)]

    def next(self) -> int:
        """The threads of the next evaluation.

        Returns
        -------
        int
        """
        if self._plan:
            return self._plan[0]
        return self.choice

    def record(self, threads: int, seconds: float) -> None:
        """Book one evaluation run on ``threads`` that took ``seconds``.

        Parameters
        ----------
        threads : int
        seconds : float
        """
        self.count += 1
        if not self._plan:
            self._left -= 1
            if self.threads > 1 and self._left <= 0:
                other = 1 if self.choice == self.threads else self.threads
                self._plan = self._trial([other, self.choice])
            return
        if threads != self._plan[0]:            # not the evaluation the trial asked for
            return
        self._plan.pop(0)
        self._times[threads].append(seconds)
        if len(self._plan) == 2 * BLOCK and min(map(len, self._times.values())) == BLOCK:
            many, one = (float(np.median(self._times[k])) for k in (self.threads, 1))
            if max(many, one) >= DECISIVE * min(many, one):     # a clear winner: the second pair is not run
                self._plan = []
        if self._plan:
            return
        many, one = (float(np.median(self._times[k])) for k in (self.threads, 1))
        self.trials.append((self.count, many, one))
        choice = self.threads if many <= one else 1
        self.period = min(2 * self.period, LONGEST) if choice == self.choice else FIRST
        self.choice, self._left = choice, self.period
        self._times = {self.threads: [], 1: []}


_CHOICES = []      # the ThreadChoice of each enclosing ``solving`` block


@contextmanager
def solving():
    """A solve: OpenBLAS held on one thread (``single_threaded_blas``) and a ``ThreadChoice`` for the
    evaluations inside (``evaluation``) between Numba's threads and one.

    Numba's thread count (``numba.set_num_threads``, the calling thread's) follows the choice for the
    whole solve, changed only when the choice changes, and is restored when the solve ends.

    Returns
    -------
    context manager
        Yields the ``ThreadChoice``.

    Examples
    --------
    >>> import numba
    >>> from meanfield.solvers import threads
    >>> before = numba.get_num_threads()
    >>> with threads.solving() as choice:
    ...     with threads.evaluation():
    ...         pass
    >>> choice.count, numba.get_num_threads() == before
    (1, True)
    """
    with single_threaded_blas():
        before = numba.get_num_threads()
        choice = ThreadChoice(before)
        _CHOICES.append(choice)
        try:
            yield choice
        finally:
            _CHOICES.pop()
            if choice.current != before:
                numba.set_num_threads(before)


@contextmanager
def evaluation(timed: bool = True):
    """One evaluation of a density engine on the threads its solve chose (``solving``); outside a
    solve, on the threads as they are.

    Numba's threads (``numba.set_num_threads``, touched only when the setting changes: each call costs
    microseconds, as much as the serial stage of a small mesh) and the workers of ``table_product``
    follow the choice.

    Parameters
    ----------
    timed : bool
        Whether the evaluation counts in the comparison (the right-hand sides: evaluations of one kind,
        which cost the same); other work (a matrix of the implicit schemes, an energy) runs on the
        chosen threads untimed.

    Returns
    -------
    context manager

    Examples
    --------
    >>> import numba
    >>> from meanfield.solvers import threads
    >>> with threads.evaluation():
    ...     numba.get_num_threads() >= 1
    True
    """
    choice = _CHOICES[-1] if _CHOICES else None
    if choice is None or choice.threads == 1:
        yield
        return
    k = choice.next() if timed else choice.choice
    if k != choice.current:
        numba.set_num_threads(k)
        choice.current = k
    start = time.perf_counter()
    yield
    if timed:
        choice.record(k, time.perf_counter() - start)


def report() -> dict:
    """The thread settings the density solvers run with: Numba's threading layer and threads, the
    BLAS library and its threads.

    Returns
    -------
    dict

    Examples
    --------
    >>> from meanfield.solvers import threads
    >>> sorted(threads.report())
    ['blas', 'blas_threads', 'numba_threads', 'threading_layer', 'wait_policy']
    """
    sphere_basis(np.eye(3), 1)          # a parallel kernel has run: the threading layer is chosen
    lib = blas_library()
    return {"threading_layer": numba.threading_layer(), "numba_threads": numba.get_num_threads(),
            "wait_policy": os.environ.get("OMP_WAIT_POLICY"), "blas": None if lib is None else lib.path,
            "blas_threads": blas_threads()}
