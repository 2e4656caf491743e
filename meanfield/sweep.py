"""Parameter sweeps: ``func(params, seed)`` over a grid × seeds, on Dask or in-process, with every
finished task kept in a resumable store::

    from meanfield import sweep
    res = sweep.run(sweep.particle_clusters, {"beta": [1, 4, 9], "n": [64], "d": [3], "T": [20]},
                    seeds=8, store="runs/phase", client="local")
    res.select(beta=4).get("clusters")          # that output over the matching tasks
    params, mean = res.aggregate("clusters")    # mean over seeds, one row per parameter set
    sweep.load("runs/phase")                    # the same results, read from the store alone

``run(func, grid, seeds, store, client=None, *, workers=None, progress=False) -> SweepResult``

- ``func(params, seed) -> dict`` of scalars/arrays: a module-level function (its
  ``module:qualname`` is part of each task's identity, so lambdas and local functions are
  refused); with Dask, the workers must be able to import or unpickle it.
- ``grid``: a dict name -> list of values (Cartesian product, first name slowest) or a list of
  parameter dicts. Values are JSON scalars (str, int, float, bool, None) or lists of them;
  ``1`` and ``1.0`` are different parameters. "seed" is reserved.
- ``seeds``: an int S (seeds 0..S-1) or a list of distinct non-negative ints.
- ``store``: a folder. ``tasks/<key>.npz`` holds one finished task (its outputs and its
  params, seed, function and run time), written atomically (temporary file + rename) as soon as
  the result reaches this process; ``sweep.json`` lists the tasks in grid order. A store
  belongs to one function; the grid and the seeds may grow between runs.
- ``client``: None (run here, one task after another), ``"local"`` (a LocalCluster of
  ``workers`` single-threaded processes, default one per core), a scheduler address
  ``"tcp://host:port"``, or a ``distributed.Client``. On Dask workers each task runs with one
  Numba thread (the tasks are the parallelism).

Tasks run params-major, seeds fastest. A task's key is a hash of (module:qualname, params,
seed): rerunning ``run`` on a store computes only the tasks without a file, so a killed sweep
resumes where it stopped and a lost worker only costs its running task (Dask recomputes it).
A task that raises does not stop the others; ``run`` then raises ``SweepError`` naming the
failed tasks, and everything that finished is in the store.

Command line: ``meanfield sweep config.toml`` (see ``main`` and examples/sweep.toml).
"""
import argparse
import contextlib
import hashlib
import json
import numbers
import os
import sys
import signal
import time
import traceback
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from .atomic import write_file
from .checks import as_count, as_positive
from .npzfile import NPZ_ERRORS
from .progress import Progress

__all__ = ["run", "load", "task_key", "SweepResult", "SweepError", "CorruptTask", "TaskTimeout",
           "particle_clusters", "gpu_resources", "main"]

FORMAT = 1
MANIFEST = "sweep.json"
TASKS = "tasks"


class SweepError(RuntimeError):
    """Some tasks raised; the others finished and are in the store.

    Parameters
    ----------
    message : str
        The failed tasks.

    Examples
    --------
    >>> from meanfield.sweep import SweepError
    >>> isinstance(SweepError("2 of 8 tasks failed"), RuntimeError)
    True
    """


# --------------------------------------------------------------------------- tasks and identity

@dataclass(frozen=True)
class _Task:
    key: str
    params: dict
    seed: int


def _func_id(func):
    """'module:qualname' of a module-level function (the stable part of a task's identity)."""
    if not callable(func):
        raise TypeError(f"func must be a function func(params, seed); got {type(func).__name__}")
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    if not module or not qualname:
        raise TypeError("func must be a plain module-level function (a functools.partial or callable "
                        "object has no qualified name to identify its tasks); wrap it in a def")
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise ValueError(f"func {qualname!r} is not a module-level function; define it with def at the top "
                         f"level of a module so that its name identifies its tasks (and workers can import it)")
    return f"{module}:{qualname}"


def _canonical(value, name):
    """value as plain JSON types (NumPy scalars and arrays become numbers and lists)."""
    try:
        text = json.dumps(value, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"grid parameter {name!r} = {value!r} is not a finite JSON value ({exc}); use "
                         f"numbers, strings, booleans, None or lists of them") from None
    return json.loads(text)


def _json_default(value):
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a JSON type")


def _param_sets(grid):
    """The list of parameter dicts: a Cartesian product of a dict of lists, or a list of dicts."""
    if isinstance(grid, dict):
        if not grid:
            raise ValueError("grid is empty; give at least one parameter, e.g. {'beta': [1.0, 4.0]}")
        for name, values in grid.items():
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise TypeError(f"grid[{name!r}] must be a list of values; got {type(values).__name__} "
                                f"(write [{values!r}] for a single value)")
        columns = {name: list(values) for name, values in grid.items()}
        for name, values in columns.items():
            if not values:
                raise ValueError(f"grid[{name!r}] is an empty list; give at least one value")
        sets = [dict(zip(columns, combo)) for combo in product(*columns.values())]
    elif isinstance(grid, (list, tuple)):
        if not grid:
            raise ValueError("grid is an empty list; give at least one parameter dict")
        if not all(isinstance(p, dict) for p in grid):
            raise TypeError("grid must be a dict of lists or a list of dicts of parameters")
        sets = [dict(p) for p in grid]
    else:
        raise TypeError(f"grid must be a dict name -> list of values or a list of parameter dicts; "
                        f"got {type(grid).__name__}")
    out = []
    for params in sets:
        for name in params:
            if not isinstance(name, str):
                raise TypeError(f"grid parameter names must be strings; got {name!r}")
            if name == "seed":
                raise ValueError("'seed' is reserved for the seeds argument; rename the grid parameter")
        out.append({name: _canonical(value, name) for name, value in params.items()})
    return out


def _seed_list(seeds):
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        return list(range(as_count(seeds, "seeds")))
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise TypeError(f"seeds must be an int (the number of seeds) or a list of ints; got {type(seeds).__name__}")
    out = []
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
            raise ValueError(f"seeds must be non-negative integers; got {s!r}")
        out.append(int(s))
    if not out:
        raise ValueError("seeds is empty; give at least one seed")
    if len(set(out)) != len(out):
        raise ValueError("seeds contains duplicates; each seed must appear once")
    return out


def task_key(func_id: str, params: dict, seed: int) -> str:
    r"""The task's identity: a hash of (function, params, seed) that does not depend on dict order.

    .. math::

        \text{key} = \mathrm{SHA256}\big(\mathrm{json}([\text{func\_id}, \text{params}, \text{seed}],
        \text{sorted keys})\big)[:24].

    Parameters
    ----------
    func_id : str
        ``module:qualname`` of the task function.
    params : dict
        The parameter set (JSON values).
    seed : int
        The seed.

    Returns
    -------
    str
        24 hexadecimal digits.

    Examples
    --------
    >>> from meanfield.sweep import task_key
    >>> key = task_key("meanfield.sweep:particle_clusters", {"beta": 1.0, "n": 8}, 0)
    >>> len(key), key == task_key("meanfield.sweep:particle_clusters", {"n": 8, "beta": 1.0}, 0)
    (24, True)
    """
    text = json.dumps([func_id, params, seed], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _tasks(func_id, grid, seeds, func=None):
    tasks = [_Task(task_key(func_id, p, s), p, s) for p in _param_sets(grid) for s in _seed_list(seeds)]
    if len({t.key for t in tasks}) != len(tasks):
        raise ValueError("grid contains the same parameter set twice; each (params, seed) must be unique")
    _check_parameter_names(func, func_id, tasks)
    return tasks


def _check_parameter_names(func, func_id, tasks):
    """Where ``func.parameters`` declares its names (a dict: "required" and "optional" tuples), every
    parameter set must hold all required names and nothing else: a typo (``tool`` for ``tol``)
    is refused before any task runs instead of being silently ignored."""
    declared = getattr(func, "parameters", None)
    if declared is None:
        return
    required, optional = set(declared["required"]), set(declared["optional"])
    for names in {frozenset(t.params) for t in tasks}:
        unknown, missing = sorted(names - required - optional), sorted(required - names)
        if unknown or missing:
            what = (f"unknown parameter(s) {', '.join(unknown)}" if unknown else
                    f"missing parameter(s) {', '.join(missing)}")
            raise ValueError(f"grid: {what} for {func_id}, which takes {', '.join(sorted(required))} and "
                             f"optionally {', '.join(sorted(optional))}")


# --------------------------------------------------------------------------- running one task

def _as_outputs(out, func_id):
    """func's return value as a dict name -> NumPy array (numbers, booleans, strings); a scalar
    return value x is stored as ``{"value": x}``."""
    if isinstance(out, (numbers.Number, np.generic)) or (isinstance(out, np.ndarray) and out.ndim == 0):
        out = {"value": out}
    if not isinstance(out, dict) or not out:
        raise TypeError(f"{func_id} must return a non-empty dict of scalars or arrays; "
                        f"got {type(out).__name__}")
    arrays = {}
    for name, value in out.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"{func_id} returned output name {name!r}; use identifiers not starting with '_'")
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufcU":
            raise TypeError(f"{func_id} returned {name!r} of dtype {arr.dtype}; outputs must be numbers, "
                            f"booleans or strings (scalars or arrays)")
        arrays[name] = arr
    return arrays


def _single_numba_thread():
    """One Numba thread per task on Dask workers (the tasks are the parallelism)."""
    numba = sys.modules.get("numba")
    if numba is None:
        os.environ["NUMBA_NUM_THREADS"] = "1"
    else:
        numba.set_num_threads(1)


class TaskTimeout(Exception):
    """A task ran longer than the sweep's ``timeout``.

    Parameters
    ----------
    message : str
        The task and its limit.

    Examples
    --------
    >>> from meanfield.sweep import TaskTimeout
    >>> str(TaskTimeout("task ran past 60 s"))
    'task ran past 60 s'
    """


@contextlib.contextmanager
def _time_limit(seconds):
    """Raise TaskTimeout in this (main) thread after ``seconds`` (POSIX SIGALRM; interrupts
    Python code, and compiled code when it returns to the interpreter).  None: no limit."""
    if seconds is None:
        yield
        return

    def expire(signum, frame):
        raise TaskTimeout(f"task exceeded timeout = {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _execute(func, params, seed, on_worker, timeout=None):
    """Run one task: (outputs, seconds)."""
    if on_worker:
        _single_numba_thread()
    start = time.perf_counter()
    with _time_limit(timeout):
        outputs = _as_outputs(func(dict(params), seed), _func_id(func))
    return outputs, time.perf_counter() - start


# --------------------------------------------------------------------------- the store

def _task_path(store, key):
    return os.path.join(store, TASKS, key + ".npz")


def _write_npz(fh, arrays):
    """The .npz format (a zip of .npy members) written member by member, so that any output
    name works (``np.savez`` reserves the keyword names ``file`` and ``allow_pickle``)."""
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)


def _write_task(store, func_id, task, outputs, seconds):
    meta = dict(key=task.key, func=func_id, params=task.params, seed=task.seed, seconds=seconds)
    write_file(_task_path(store, task.key),
                  lambda fh: _write_npz(fh, dict(_task=np.array(json.dumps(meta)), **outputs)))


class CorruptTask(ValueError):
    """A task file that cannot be read or does not belong to its key and function (``load`` skips it
    with a warning; rerunning the sweep recomputes it).

    Parameters
    ----------
    message : str
        The file and what is wrong with it.

    Examples
    --------
    >>> from meanfield.sweep import CorruptTask
    >>> isinstance(CorruptTask("tasks/abc.npz: truncated"), ValueError)
    True
    """


def _read_task(path, expect=None):
    """(meta, outputs) of a task file, read in full (every member's checksum is verified).

    ``expect``: (func_id, task) that the file must hold.  CorruptTask names the file otherwise."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["_task"]))
            outputs = {name: data[name] for name in data.files if name != "_task"}
        fields_ok = isinstance(meta, dict) and {"key", "func", "params", "seed", "seconds"} <= set(meta)
    except NPZ_ERRORS as exc:
        raise CorruptTask(f"task file {path} is unreadable ({type(exc).__name__}: {exc})") from None
    if not fields_ok:
        raise CorruptTask(f"task file {path} lacks its task description")
    key = os.path.basename(path)[:-len(".npz")]
    if meta["key"] != key:
        raise CorruptTask(f"task file {path} holds task {meta['key']}, not {key}")
    if expect is not None:
        func_id, task = expect
        if (meta["func"], meta["params"], meta["seed"]) != (func_id, task.params, task.seed):
            raise CorruptTask(f"task file {path} holds {meta['func']} {meta['params']} seed {meta['seed']}, "
                              f"not the task of its key")
    return meta, outputs


def _finished(store, func_id, tasks):
    """key -> (meta, outputs) of the tasks whose files are valid; invalid files are renamed to
    <key>.npz.corrupt (kept for inspection) with a warning naming them, so that their tasks run again."""
    done = {}
    for task in tasks:
        path = _task_path(store, task.key)
        if not os.path.exists(path):
            continue
        try:
            done[task.key] = _read_task(path, (func_id, task))
        except CorruptTask as exc:
            warnings.warn(f"{exc}; moved to {path}.corrupt and recomputing it", RuntimeWarning, stacklevel=3)
            os.replace(path, path + ".corrupt")
    return done


def _read_manifest(store):
    path = os.path.join(store, MANIFEST)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as fh:
            manifest = json.load(fh)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("tasks"), list):
            raise ValueError("not a manifest")
    except ValueError as exc:
        raise ValueError(f"{path} is corrupt ({exc}); delete it: the task files are enough to rebuild it "
                         f"on the next run") from None
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path} has store format {manifest.get('format')!r}; this version reads {FORMAT}")
    return manifest


def _open_store(store, func_id, tasks):
    """Create or extend the store's manifest with ``tasks`` (existing tasks keep their place)."""
    store = os.fspath(store)
    os.makedirs(os.path.join(store, TASKS), exist_ok=True)
    manifest = _read_manifest(store)
    if manifest is None:
        manifest = dict(format=FORMAT, func=func_id, tasks=[])
        for name in sorted(os.listdir(os.path.join(store, TASKS))):
            if name.endswith(".npz") and not name.startswith("."):
                try:
                    other = _read_task(os.path.join(store, TASKS, name))[0]["func"]
                except CorruptTask:
                    continue
                if other != func_id:
                    raise ValueError(f"store {store!r} has no {MANIFEST} but holds results of {other}, not "
                                     f"{func_id}; use another store folder for another function")
    if manifest["func"] != func_id:
        raise ValueError(f"store {store!r} holds results of {manifest['func']}, not {func_id}; "
                         f"use another store folder for another function")
    known = {entry["key"] for entry in manifest["tasks"]}
    new = [dict(key=t.key, params=t.params, seed=t.seed) for t in tasks if t.key not in known]
    if new:
        manifest["tasks"].extend(new)
        text = json.dumps(manifest, indent=1)
        write_file(os.path.join(store, MANIFEST), lambda fh: fh.write(text.encode()))
    return store


@contextlib.contextmanager
def _locked(store):
    """Hold an exclusive lock on the store (``.lock``, fcntl.flock) while a run writes to it, so
    two processes never compute the same tasks or overwrite each other's manifest.  Where fcntl
    does not exist (Windows) the store is not locked."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        os.makedirs(store, exist_ok=True)
        lock = open(os.path.join(store, ".lock"), "a+")
    except OSError as exc:
        raise ValueError(f"store {store!r} cannot be written ({exc.strerror or exc}); choose a writable "
                         f"folder") from None
    with lock as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise RuntimeError(f"store {store!r} is in use by {holder}; wait for that sweep to finish or use "
                               f"another store") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"process {os.getpid()}")
        fh.flush()
        try:
            yield
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- results

_MISSING = object()


@dataclass(eq=False)
class SweepResult:
    r"""Finished tasks of a sweep, in grid order (params-major, seeds fastest).

    ``get(name)`` stacks one output over the tasks, ``select(**where)`` keeps the matching tasks,
    ``aggregate(name, reduce)`` reduces an output over the seeds of each parameter set, ``table()``
    and ``to_dataframe()`` give the scalar columns:

    .. math::

        \text{aggregate}(y)_P = \text{reduce}\{y_{P, s} : s \in \text{seeds}\}.

    Parameters
    ----------
    params : list of dict
        The parameter set of each task.
    seeds : numpy.ndarray, shape (T,)
        The seed of each task.
    keys : list of str
        Task hashes (``task_key``).
    outputs : list of dict
        name -> array, per task.
    seconds : numpy.ndarray, shape (T,)
        Run time of each task.
    info : dict
        Store, function, counts.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield import sweep
    >>> folder = tempfile.TemporaryDirectory()
    >>> grid = {"beta": [1.0, 9.0], "n": [8], "d": [3], "T": [2.0]}
    >>> res = sweep.run(sweep.particle_clusters, grid, seeds=2, store=folder.name)
    >>> res.get("clusters").shape, res.select(beta=9.0).seeds.tolist()
    ((4,), [0, 1])
    >>> sets, mean = res.aggregate("min_inner")
    >>> [p["beta"] for p in sets], mean.shape
    ([1.0, 9.0], (2,))
    >>> folder.cleanup()
    """
    params: list
    seeds: np.ndarray
    keys: list
    outputs: list
    seconds: np.ndarray
    info: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.keys)

    def __repr__(self):
        sets = len({json.dumps(p, sort_keys=True) for p in self.params})
        lines = [f"SweepResult({len(self)} tasks: {sets} parameter sets x {len(set(self.seeds.tolist()))} seeds)"]
        if self.info.get("func"):
            lines.append(f"  func: {self.info['func']}" + (f", store: {self.info['store']}" if self.info.get("store")
                                                           else ""))
        names = sorted({k for p in self.params for k in p})
        lines.append(f"  parameters: {', '.join(names) or '-'}")
        if self.outputs:
            lines.append("  outputs: " + ", ".join(f"{k} {v.shape}" for k, v in self.outputs[0].items()))
        return "\n".join(lines)

    @property
    def names(self):
        """Output names (those of the first task)."""
        return list(self.outputs[0]) if self.outputs else []

    def param(self, name):
        """Values of one parameter over the tasks, (T,)."""
        if not any(name in p for p in self.params):
            raise KeyError(f"no parameter {name!r}; parameters: {sorted({k for p in self.params for k in p})}")
        return np.array([p.get(name) for p in self.params])

    def get(self, name):
        """One output stacked over the tasks: shape (T,) + its shape."""
        missing = [k for k, out in zip(self.keys, self.outputs) if name not in out]
        if missing or not self.outputs:
            raise KeyError(f"output {name!r} missing from {len(missing) or 'all'} task(s); outputs: {self.names}")
        values = [out[name] for out in self.outputs]
        if len({v.shape for v in values}) > 1:
            raise ValueError(f"output {name!r} has different shapes across tasks; use "
                             f"[out[{name!r}] for out in result.outputs]")
        return np.stack(values)

    def select(self, **where):
        """The tasks whose parameters (or ``seed``) equal the given values."""
        def keep(p, s):
            return all((s if name == "seed" else p.get(name, _MISSING)) == value
                       for name, value in where.items())
        idx = [i for i, (p, s) in enumerate(zip(self.params, self.seeds)) if keep(p, s)]
        return SweepResult([self.params[i] for i in idx], self.seeds[idx], [self.keys[i] for i in idx],
                           [self.outputs[i] for i in idx], self.seconds[idx], dict(self.info))

    def aggregate(self, name, reduce=np.mean):
        """(parameter sets, values): ``reduce(stacked, axis=0)`` of output ``name`` over the seeds of
        each parameter set, sets in order of first appearance."""
        groups = {}
        for p, out in zip(self.params, self.outputs):
            groups.setdefault(json.dumps(p, sort_keys=True), (p, []))[1].append(out[name])
        sets = [p for p, _ in groups.values()]
        return sets, np.array([reduce(np.stack(v), axis=0) for _, v in groups.values()])

    def table(self):
        """Columns name -> (T,) array: the parameters, ``seed`` and every scalar output."""
        cols = {}
        for p in self.params:
            for name in p:
                cols.setdefault(name, None)
        cols = {name: self.param(name) for name in cols}
        cols["seed"] = self.seeds
        for name in self.names:
            if all(name in out and out[name].ndim == 0 for out in self.outputs):
                cols[name] = self.get(name)
        return cols

    def to_dataframe(self):
        """``table()`` as a ``pandas.DataFrame`` (one row per task; pandas is optional:
        ``pip install "meanfield-attention[pandas]"``), plus each task's run time ``seconds``.
        Array-valued outputs are left out; reach them with ``get``."""
        from .solvers.export import require
        pd = require("pandas", "SweepResult.to_dataframe")
        return pd.DataFrame({**self.table(), "seconds": self.seconds})


def _result(entries, info):
    """SweepResult from (meta, outputs) pairs."""
    return SweepResult(params=[m["params"] for m, _ in entries],
                       seeds=np.array([m["seed"] for m, _ in entries], dtype=np.int64),
                       keys=[m["key"] for m, _ in entries], outputs=[o for _, o in entries],
                       seconds=np.array([m["seconds"] for m, _ in entries], dtype=float), info=info)


def load(store: str | os.PathLike) -> "SweepResult":
    """All finished tasks of a store, in the order of its manifest; ``info['pending']`` counts the
    listed tasks without a result yet.

    Parameters
    ----------
    store : str or os.PathLike
        The folder given to ``run``.

    Returns
    -------
    SweepResult

    Raises
    ------
    ValueError
        If the folder is not a sweep store.

    Examples
    --------
    >>> import tempfile
    >>> from meanfield import sweep
    >>> folder = tempfile.TemporaryDirectory()
    >>> grid = {"beta": [1.0, 9.0], "n": [8], "d": [3], "T": [2.0]}
    >>> res = sweep.run(sweep.particle_clusters, grid, seeds=2, store=folder.name)
    >>> again = sweep.load(folder.name)
    >>> len(again), again.info["pending"], again.keys == res.keys
    (4, 0, True)
    >>> folder.cleanup()
    """
    store = os.fspath(store)
    manifest = _read_manifest(store)
    if manifest is None:
        raise ValueError(f"{store!r} is not a sweep store (no {MANIFEST}); give the folder passed to run()")
    folder = os.path.join(store, TASKS)
    on_disk = {name[:-4] for name in os.listdir(folder) if name.endswith(".npz") and not name.startswith(".")}
    listed = [entry["key"] for entry in manifest["tasks"]]
    # tasks written by a run whose manifest update was overtaken by a concurrent run come last
    order = [k for k in listed if k in on_disk] + sorted(on_disk - set(listed))
    entries, corrupt = [], []
    for k in order:
        try:
            entries.append(_read_task(_task_path(store, k)))
        except CorruptTask as exc:
            warnings.warn(f"{exc}; skipped (rerun the sweep to recompute it)", RuntimeWarning, stacklevel=2)
            corrupt.append(_task_path(store, k))
    info = dict(store=store, func=manifest["func"], pending=len(set(listed) - on_disk) + len(corrupt),
                corrupt=corrupt)
    return _result(entries, info)


# --------------------------------------------------------------------------- running the sweep

@contextlib.contextmanager
def _dask_client(client, workers):
    """A distributed.Client for ``client`` (None stays None); clusters started here are closed."""
    if client is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("client= needs Dask: pip install 'meanfield-attention[dist]' (or run with client=None, "
                          "in this process)") from None
    if isinstance(client, Client):
        yield client
    elif client == "local":
        n = as_count(workers, "workers") if workers is not None else _cores()
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          env={"NUMBA_NUM_THREADS": "1"}) as cluster, Client(cluster) as c:
            yield c
    elif isinstance(client, str):
        with Client(client, timeout="20s") as c:
            yield c
    else:
        raise TypeError(f"client must be None, 'local', a scheduler address 'tcp://host:port' or a "
                        f"distributed.Client; got {type(client).__name__}")


def _cores():
    """The CPUs this process may use: its affinity mask, capped by the cgroup CPU quota."""
    from .solvers._numba_env import cpu_quota
    seen = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(seen, cpu_quota() or seen)


def _run_here(func, todo, timeout):
    for task in todo:
        try:
            yield task, _execute(func, task.params, task.seed, False, timeout), None
        except (Exception, SystemExit) as exc:  # noqa: BLE001  (reported with the task, the sweep goes on)
            yield task, None, exc


def _run_dask(client, func, todo, needs):
    from distributed import as_completed
    futures = {}
    for task in todo:
        fut = client.submit(_execute, func, task.params, task.seed, True, key=f"meanfield-sweep-{task.key}",
                            pure=False, resources=needs.get(task.key))
        futures[fut.key] = (fut, task)
    for fut in as_completed([f for f, _ in futures.values()]):
        _, task = futures.pop(fut.key)
        try:
            yield task, fut.result(), None
        except (Exception, SystemExit) as exc:  # noqa: BLE001  (reported with the task, the sweep goes on)
            yield task, None, exc
        fut.release()


def run(func: Callable[[dict, int], dict | float], grid: dict | list[dict], seeds: int | list[int],
        store: str | os.PathLike, client: object = None, *, workers: int | None = None, progress: bool = False,
        timeout: float | None = None, resources: dict | Callable[[dict], dict] | None = None) -> SweepResult:
    r"""Run ``func(params, seed)`` for every parameter set of ``grid`` and every seed, skipping the
    tasks already in ``store``.

    .. math::

        \{\text{func}(P, s) : P \in \text{grid}, \ s \in \text{seeds}\} \setminus \text{store}.

    Parameters
    ----------
    func : callable
        A module-level function ``func(params, seed) -> dict`` of scalars/arrays (or a bare
        number, stored as ``{"value": x}``). If it has an attribute ``parameters =
        dict(required=(...), optional=(...))`` (as ``particle_clusters`` does), a parameter set
        with an unknown or a missing name is refused before any task runs.
    grid : dict or list of dicts
        name -> list of values (Cartesian product, first name slowest), or explicit parameter
        sets. Values are JSON scalars or lists of them.
    seeds : int or list of int
        S (seeds 0..S-1) or distinct non-negative seeds.
    store : str or os.PathLike
        Folder keeping every finished task (written atomically); rerunning resumes.
    client : None, "local", "tcp://host:port" or distributed.Client
        Where to run: here, one task after another, or on Dask.
    workers : int, optional
        Worker processes of a ``"local"`` cluster (default one per core).
    progress : bool
        A progress report over the tasks (a bar on a terminal, log lines elsewhere).
    timeout : float, optional
        Seconds after which a task fails (in-process runs only, POSIX).
    resources : dict or callable, optional
        Dask worker resources a task needs, e.g. ``{"GPU": 1}`` to run each task on a worker
        started with ``dask worker ADDR --resources GPU=1`` (one task per GPU at a time), or a
        function ``resources(params) -> dict or None`` (``gpu_resources`` asks for a GPU where a
        task's params say ``device="cuda..."``).  Dask clients only; a cluster where no worker
        offers what a task asks for is refused before anything runs (Dask would wait forever).

    Returns
    -------
    SweepResult
        All the grid's tasks, params-major and seeds fastest (``get``, ``select``,
        ``aggregate``, ``table``, ``to_dataframe``).

    Raises
    ------
    SweepError
        Naming the failed tasks if any raised; everything that finished is in the store.
    ValueError
        If the function, grid, seeds, store or timeout are invalid (before any task runs).

    Examples
    --------
    >>> import tempfile
    >>> from meanfield import sweep
    >>> folder = tempfile.TemporaryDirectory()
    >>> grid = {"beta": [1.0, 9.0], "n": [8], "d": [3], "T": [2.0]}
    >>> res = sweep.run(sweep.particle_clusters, grid, seeds=2, store=folder.name)
    >>> len(res), res.info["computed"]
    (4, 4)
    >>> sweep.run(sweep.particle_clusters, grid, seeds=3, store=folder.name).info["computed"]   # resumes
    2
    >>> folder.cleanup()
    """
    func_id = _func_id(func)
    tasks = _tasks(func_id, grid, seeds, func)
    if timeout is not None:
        timeout = as_positive(timeout, "timeout")
        if client is not None:
            raise ValueError("timeout works for in-process runs (client=None); on Dask use the cluster's limits")
    needs = _resources(resources, tasks, client)
    with _locked(os.fspath(store)):
        return _run_locked(func, func_id, tasks, store, client, workers, progress, timeout, needs)


def gpu_resources(params):
    """The Dask resources of a task that runs on a GPU: ``{"GPU": 1}`` when its params say
    ``device="cuda"`` (or "cuda:k"), else None (any worker).  For ``run(..., resources=gpu_resources)``.

    Parameters
    ----------
    params : mapping
        A task's parameters; only its "device" entry is read.

    Returns
    -------
    dict or None
        ``{"GPU": 1}`` for a CUDA task, None otherwise.

    Examples
    --------
    >>> gpu_resources({"beta": 4.0, "backend": "torch", "device": "cuda"}), gpu_resources({"beta": 4.0})
    ({'GPU': 1}, None)
    """
    device = params.get("device")
    return {"GPU": 1} if isinstance(device, str) and device.split(":")[0] == "cuda" else None


def _resources(resources, tasks, client):
    """task key -> the Dask resources it asks for (empty: none asked for), checked."""
    if resources is None:
        return {}
    if client is None:
        raise ValueError("resources= places tasks on Dask workers; give a client (or leave resources=None)")
    pick = resources if callable(resources) else (lambda params: resources)
    needs = {}
    for task in tasks:
        need = pick(dict(task.params))
        if need is None:
            continue
        if not isinstance(need, dict) or not all(isinstance(k, str) and isinstance(v, numbers.Real) and v > 0
                                                  for k, v in need.items()):
            raise ValueError(f"resources must be a dict name -> positive amount, e.g. {{'GPU': 1}} (or a function "
                             f"returning one); got {need!r} for params {task.params}")
        needs[task.key] = need
    return needs


def _check_workers(client, needs):
    """Refuse a cluster where no worker offers the resources some task asks for."""
    offered = [w.get("resources", {}) for w in client.scheduler_info()["workers"].values()]
    for need in {json.dumps(n, sort_keys=True): n for n in needs.values()}.values():
        if not any(all(have.get(k, 0) >= v for k, v in need.items()) for have in offered):
            raise ValueError(f"no worker of the Dask cluster offers the resources {need} that some tasks ask for "
                             f"(workers offer {offered}); start one with `dask worker ADDR --resources "
                             f"{','.join(f'{k}={v}' for k, v in need.items())}`")


def _run_locked(func, func_id, tasks, store, client, workers, progress, timeout, needs):
    store = _open_store(store, func_id, tasks)
    finished = _finished(store, func_id, tasks)
    todo = [t for t in tasks if t.key not in finished]
    failures = []
    start = time.perf_counter()
    with _dask_client(client, workers) as dask_client:
        if needs and todo:
            _check_workers(dask_client, needs)
        stream = _run_here(func, todo, timeout) if dask_client is None else _run_dask(dask_client, func, todo, needs)
        with Progress(len(tasks), "sweep", progress, unit="tasks", initial=len(finished)) as bar:
            for task, result, exc in stream:
                if exc is None:
                    try:
                        _write_task(store, func_id, task, *result)
                    except OSError as err:      # e.g. a full disk: this task fails, the others go on
                        exc = err
                if exc is not None:
                    failures.append((task, exc))
                    continue
                bar.update(1)
        where = "in-process" if dask_client is None else str(dask_client.scheduler.address)
    if failures:
        task, exc = failures[0]
        lines = [f"  params={t.params} seed={t.seed}: {type(e).__name__}: {e}" for t, e in failures[:10]]
        more = f"\n  ... and {len(failures) - 10} more" if len(failures) > 10 else ""
        raise SweepError(f"{len(failures)} of {len(tasks)} tasks of {func_id} failed (the other results are "
                         f"in {store!r}; fix and rerun to compute only the missing ones):\n"
                         + "\n".join(lines) + more) from exc
    info = dict(store=store, func=func_id, computed=len(todo), reused=len(finished), client=where,
                seconds=time.perf_counter() - start)
    return _result([finished.get(t.key) or _read_task(_task_path(store, t.key)) for t in tasks], info)


# --------------------------------------------------------------------------- a standard task

def particle_clusters(params: dict, seed: int) -> dict:
    r"""A standard sweep task: tokens i.i.d. uniform on S^{d-1} (``seed``) evolved to time T; their
    clusters and energy.

    .. math::

        \text{min\_inner} = \min_{i,j} \langle x_i(T), x_j(T)\rangle \quad (1 \text{ means consensus}).

    Parameters
    ----------
    params : dict
        beta, n, d, T, and optionally model ("SA" | "USA", default "SA"), method ("rk4"),
        dt (default: the solver's), tol (geodesic cluster scale, default 1e-2), backend ("numba" or
        "torch") and device (of the torch backend: "cpu", "cuda", ...; see ``gpu_resources``).
    seed : int
        Seed of the initial tokens.

    Returns
    -------
    dict
        clusters (count at T), energy0 and energy (E_β at 0 and T), min_inner.

    Raises
    ------
    ValueError
        If the model is unknown or a parameter is invalid.

    Examples
    --------
    >>> from meanfield.sweep import particle_clusters
    >>> out = particle_clusters({"beta": 1.0, "n": 8, "d": 3, "T": 20.0}, seed=0)
    >>> out["clusters"], out["min_inner"] > 0.99, out["energy"] > out["energy0"]
    (1, True, True)
    """
    # imported here, as the other commands do: `meanfield sweep` and the store load no engine (Numba)
    from .clusters import cluster_count
    from .energy import energy
    from .geometry import uniform_sphere
    from .models import SA, USA
    from meanfield.solvers.particles import solve

    models = {"SA": SA, "USA": USA}
    name = params.get("model", "SA")
    if name not in models:
        raise ValueError(f"unknown model {name!r}; choose 'SA' or 'USA'")
    model = models[name](params["beta"])
    x0 = uniform_sphere(params["n"], params["d"], seed=seed)
    sol = solve(model, x0, [0.0, params["T"]], method=params.get("method", "rk4"), dt=params.get("dt"),
                energy=False, backend=params.get("backend", "numba"), device=params.get("device"))
    x = sol.final
    return dict(clusters=cluster_count(x, params.get("tol", 1e-2)), energy0=energy(x0, model.beta),
                energy=energy(x, model.beta), min_inner=float(np.min(x @ x.T)))


particle_clusters.parameters = dict(required=("beta", "n", "d", "T"),
                                    optional=("model", "method", "dt", "tol", "backend", "device"))


# --------------------------------------------------------------------------- command line

ALLOWED_FUNCTIONS = ("meanfield.sweep:particle_clusters",)   # what a TOML may name without --allow-any-function
CONFIG_KEYS = {"function": str, "grid": dict, "seeds": (int, list), "store": str, "timeout": (int, float),
               "dask": dict}
DASK_KEYS = {"scheduler": str, "workers": int}


def _import_function(spec, allow_any=False):
    """'package.module:function' -> the function.  A sweep TOML is data, not code: it may name
    only the functions of ``ALLOWED_FUNCTIONS`` unless ``allow_any`` (the user's explicit
    --allow-any-function) says the config is trusted.  Nothing is added to sys.path: the
    module must be importable already (installed, or on PYTHONPATH)."""
    import importlib
    if not isinstance(spec, str):
        raise ValueError(f"function must be a string 'package.module:function'; got {spec!r}")
    module, sep, qualname = spec.partition(":")
    if not sep or not module or not qualname:
        raise ValueError(f"function must look like 'package.module:function'; got {spec!r}")
    if spec not in ALLOWED_FUNCTIONS and not allow_any:
        raise ValueError(f"function {spec!r} is not one of the built-in sweep tasks ({', '.join(ALLOWED_FUNCTIONS)}); "
                         f"a config naming other code runs it, so pass --allow-any-function if you trust this "
                         f"config (see docs/robustness.md)")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"function {spec!r} cannot be imported ({exc}); the module must be installed or on "
                         f"PYTHONPATH (the config's folder is not searched)") from None
    if not callable(obj):
        raise ValueError(f"function {spec!r} is a {type(obj).__name__}, not a function")
    return obj


def _check_keys(table, known, where):
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    for key, kind in known.items():
        if key in table and (isinstance(table[key], bool) or not isinstance(table[key], kind)):
            raise ValueError(f"{where}: '{key}' has the wrong type ({type(table[key]).__name__}); "
                             f"see examples/sweep.toml")


def _read_config(path):
    """The TOML config, with its keys and their types checked (a typo such as 'stroe' is an error)."""
    try:
        import tomllib
    except ImportError:                 # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            config = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    _check_keys(config, CONFIG_KEYS, path)
    _check_keys(config.get("dask", {}), DASK_KEYS, f"{path} [dask]")
    for key in ("function", "grid"):
        if key not in config:
            raise ValueError(f"{path}: missing '{key}' (see examples/sweep.toml)")
    return config


def _config_scheduler(dask_config, allowed, path):
    """The config's ``[dask] scheduler``: 'local' or 'none' as they are; a network address only with
    the user's --allow-scheduler.  Connecting to a scheduler sends it the tasks and runs in this
    process whatever it sends back (Dask unpickles results), so a config cannot choose one alone."""
    scheduler = dask_config.get("scheduler", "local")
    if scheduler not in ("local", "none") and not allowed:
        raise ValueError(f"{path} names the scheduler {scheduler!r}; connecting to it would send it your tasks and "
                         f"run in this process whatever it sends back (Dask unpickles results), so a config alone "
                         f"cannot choose one: pass --allow-scheduler if you trust that address, or give it with "
                         f"--scheduler (see docs/robustness.md)")
    return scheduler


def _parser():
    p = argparse.ArgumentParser(prog="meanfield sweep", description=(
        "Run func(params, seed) over a parameter grid and seeds, on a Dask cluster (a local one by default) "
        "or in this process, into a resumable store: rerunning computes only the missing tasks."))
    p.add_argument("config", help="TOML file: function = 'module:name', store, seeds, [grid] (see examples/sweep.toml)")
    p.add_argument("--scheduler", help="'local' (default: a LocalCluster), 'none' (in-process) or tcp://host:port")
    p.add_argument("--workers", type=int, help="workers of the local cluster (default: one per core)")
    p.add_argument("--store", help="store folder (overrides the config's 'store')")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no table: the one-line summary only")
    p.add_argument("--allow-scheduler", action="store_true",
                   help="trust the config's [dask] scheduler address (by default only 'local' or 'none' "
                        "are taken from a config; an address must come from --scheduler or this flag)")
    p.add_argument("--allow-any-function", action="store_true",
                   help="trust the config: let it name any importable function (by default only the built-in "
                        f"tasks {', '.join(ALLOWED_FUNCTIONS)})")
    return p


def _settings(parser, args):
    """Everything the run needs, checked before any task runs; argparse errors (exit 2) otherwise."""
    try:
        config = _read_config(args.config)
        func = _import_function(config["function"], args.allow_any_function)
        grid, seeds = config["grid"], config.get("seeds", 1)
        _tasks(_func_id(func), grid, seeds, func)
        dask_config = config.get("dask", {})
        scheduler = args.scheduler or _config_scheduler(dask_config, args.allow_scheduler, args.config)
        if scheduler not in ("local", "none") and not scheduler.startswith(("tcp://", "tls://", "inproc://")):
            raise ValueError(f"scheduler must be 'local', 'none' or an address tcp://host:port; got {scheduler!r}")
        workers = args.workers or dask_config.get("workers")
        if workers is not None:
            as_count(workers, "workers")
        timeout = config.get("timeout")
        if timeout is not None:
            as_positive(timeout, "timeout")
        store = args.store or config.get("store", os.path.splitext(os.path.basename(args.config))[0] + "-store")
        if os.path.exists(store) and not os.path.isdir(store):
            raise ValueError(f"store {store!r} exists and is not a folder")
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    client = None if scheduler == "none" else scheduler
    if timeout is not None and client is not None:
        parser.error("timeout needs an in-process run: use --scheduler none")
    return func, grid, seeds, store, client, workers, timeout


def _summary(res, limit=40):
    """Lines of a table: one row per parameter set, the mean over seeds of each scalar output."""
    scalar = [n for n in res.names if all(n in out and out[n].ndim == 0 and out[n].dtype.kind in "biuf"
                                          for out in res.outputs)]
    if not scalar:
        return [f"outputs {res.names} are not numeric scalars; read them with sweep.load(store).get(name)"]
    sets, _ = res.aggregate(scalar[0])
    means = {n: res.aggregate(n)[1] for n in scalar}
    names = list(dict.fromkeys(k for p in sets for k in p))
    header = names + [f"mean {n}" for n in scalar]
    rows = [[str(p.get(k, "")) for k in names] + [f"{means[n][i]:.6g}" for n in scalar] for i, p in enumerate(sets)]
    widths = [max(len(h), *(len(r[c]) for r in rows)) for c, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more parameter sets (sweep.load(store) has them all)")
    return lines


def main(argv: list[str] | None = None) -> int:
    r"""``meanfield sweep config.toml [--scheduler ADDR] [--workers N] [--store DIR] [--no-progress]
    [--quiet] [--allow-scheduler] [--allow-any-function]``: run the sweep a TOML file describes (examples/sweep.toml)
    and print a summary.

    Parameters
    ----------
    argv : list of str, optional
        The command line after ``meanfield sweep`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 1 when some tasks failed.

    Raises
    ------
    SystemExit
        With status 2 (argparse) for a bad config or options, before any task runs.

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.sweep import main
    >>> config = ('function = "meanfield.sweep:particle_clusters"\n'
    ...           'seeds = 2\n'
    ...           '[grid]\nbeta = [1.0]\nn = [8]\nd = [3]\nT = [2.0]\n')
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "sweep.toml")
    ...     _ = open(path, "w").write(config)
    ...     status = main([path, "--scheduler", "none", "--store", os.path.join(folder, "store"), "--quiet"])
    2 tasks of meanfield.sweep:particle_clusters in ... (2 computed, 0 reused; ...)
    >>> status
    0
    """
    parser = _parser()
    args = parser.parse_args(argv)
    func, grid, seeds, store, client, workers, timeout = _settings(parser, args)
    if client == "local":
        try:
            import distributed  # noqa: F401
        except ImportError:
            print("meanfield sweep: Dask is not installed (pip install 'meanfield-attention[dist]'); "
                  "running in-process", file=sys.stderr)
            client = None
    try:
        res = run(func, grid, seeds, store, client=client, workers=workers,
                  progress=not (args.no_progress or args.quiet),
                  timeout=timeout, resources=None if client in (None, "local") else gpu_resources)
    except SweepError as exc:
        print(f"meanfield sweep: {exc}", file=sys.stderr)
        traceback.print_exception(exc.__cause__, file=sys.stderr)
        return 1
    except (ValueError, RuntimeError) as exc:       # an unwritable or busy store, a corrupt manifest
        parser.error(str(exc))
    print(f"{len(res)} tasks of {res.info['func']} in {res.info['store']} ({res.info['computed']} computed, "
          f"{res.info['reused']} reused; {res.info['client']}, {res.info['seconds']:.1f} s)")
    if not args.quiet:
        print("\n".join(_summary(res)))
    return 0
