"""Module-level task functions for tests/test_sweep.py (Dask workers import them by name)."""
import os
import time

import numpy as np


def polynomial(params, seed):
    """Cheap outputs that depend on the parameters and the seed in a checkable way."""
    a = params["a"]
    return {"y": a * a + seed, "v": np.arange(3.0) * a + seed,
            "noise": np.random.default_rng(seed).standard_normal(), "label": f"a={a}"}


def slow(params, seed):
    """polynomial after a pause of params['pause'] seconds (for killing a sweep mid-way)."""
    time.sleep(params["pause"])
    return polynomial(params, seed)


def kill_worker_once(params, seed):
    """Kills the process running it the first time it runs with params['victim'] true (the
    flag file params['flag'] records that it happened), then behaves like polynomial."""
    if params["victim"] and not os.path.exists(params["flag"]):
        with open(params["flag"], "w") as fh:
            fh.write(str(os.getpid()))
        os._exit(1)
    time.sleep(0.05)
    return polynomial(params, seed)


def fail_while_flagged(params, seed):
    """Raises for a == 2 while the file params['flag'] exists."""
    if params["a"] == 2 and os.path.exists(params["flag"]):
        raise ValueError("a = 2 is flagged")
    return polynomial(params, seed)


def bad_output(params, seed):
    return {"y": object()}


def numba_threads(params, seed):
    """The number of threads a Numba parallel kernel would use in this task."""
    import numba
    return {"threads": numba.get_num_threads()}


def exits(params, seed):
    """Calls sys.exit for a == 2 (a task must not stop the sweep that way)."""
    if params["a"] == 2:
        raise SystemExit(3)
    return polynomial(params, seed)


def reserved_names(params, seed):
    """Outputs named like numpy.savez's own keywords."""
    return {"file": params["a"], "allow_pickle": seed, "args": 1.5}


def scalar(params, seed):
    """A task returning a bare number (stored as {"value": x})."""
    return float(params["a"] * 10 + seed)
