"""Input validation shared by the public API.

Every function raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) whose
message names the argument and says how to fix it, so that bad input never reaches a
Numba kernel.
"""
import numbers
import os

import numpy as np

UNIT_TOL = 1e-8


def as_float_array(value, name):
    """``value`` as a float64 array; TypeError for anything but real numbers (strings, complex,
    booleans, objects), ValueError for NaN/inf."""
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf":
            raise TypeError(f"got dtype {raw.dtype}")
        arr = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers ({exc})") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; all entries must be finite")
    return arr


def as_points(x, name="x", *, ndim=(2,), d=None, tol=UNIT_TOL, min_dim=2):
    """Points on the unit sphere: array of shape (..., n, d), rows of norm 1 within ``tol``.

    Points stored in a lower precision (float32, float16, integers are exact) are accepted
    within 16 ulps of that precision and renormalised in float64, x <- x/|x|."""
    raw_kind = np.asarray(x).dtype if hasattr(x, "dtype") else None
    arr = as_float_array(x, name)
    coarse = raw_kind is not None and raw_kind.kind == "f" and raw_kind.itemsize < 8
    if coarse:
        tol = max(tol, 16 * float(np.finfo(raw_kind).eps))
    if arr.ndim not in ndim:
        shapes = " or ".join({2: "(n, d)", 3: "(B, n, d)"}[k] for k in ndim)
        raise ValueError(f"{name} must have shape {shapes}; got shape {arr.shape}")
    if 0 in arr.shape[:-1]:
        raise ValueError(f"{name} is empty (shape {arr.shape}); give at least one point")
    if arr.shape[-1] < min_dim:
        raise ValueError(f"{name} must have d >= {min_dim} coordinates per point; got d = {arr.shape[-1]}")
    if d is not None and arr.shape[-1] != d:
        raise ValueError(f"{name} must have d = {d} coordinates per point; got {arr.shape[-1]}")
    err = np.max(np.abs(np.linalg.norm(arr, axis=-1) - 1.0))
    if err > tol:
        raise ValueError(
            f"{name} rows must be unit vectors (max | |x| - 1 | = {err:.3g} > {tol:g}); "
            f"normalise with x / np.linalg.norm(x, axis=-1, keepdims=True)")
    if coarse:
        arr = arr / np.linalg.norm(arr, axis=-1, keepdims=True)
    return np.ascontiguousarray(arr)


def as_weights(w, n, name="weights"):
    """Non-negative finite weights of length n with positive total (as given; see
    ``as_probability``)."""
    arr = as_float_array(w, name)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match the points; got {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative; min is {arr.min():.3g}")
    with np.errstate(over="ignore"):
        total = arr.sum()
    if not total > 0:
        raise ValueError(f"{name} must have positive total mass")
    if not np.isfinite(total):
        raise ValueError(f"{name} sum to more than the largest double; rescale them")
    return np.ascontiguousarray(arr)


def as_probability(w, n, name="weights"):
    """Weights of length n divided by their total: the probability measure sum_i w_i δ_{x_i}.

    Every public function that takes weights or a density treats them this way: only the
    relative sizes matter (docs/robustness.md).  Weights so small that w/Σw loses precision
    (subnormal totals) are rescaled by their maximum first."""
    arr = as_weights(w, n, name)
    arr = arr / arr.max()
    return arr / arr.sum()


def as_batch_weights(weights, x, name="weights"):
    """Probability weights for points x (n, d) or a batch (B, n, d): None, one row (n,) shared by
    every system, or one row per system (B, n); returned as (B, n), each row normalised to sum 1
    (None stays None)."""
    if weights is None:
        return None
    w = np.asarray(weights)
    if x.ndim == 3 and w.ndim == 2:
        if w.shape[0] != x.shape[0]:
            raise ValueError(f"{name} must have shape ({x.shape[1]},) or, one row per system of the batch, "
                             f"({x.shape[0]}, {x.shape[1]}); got {w.shape}")
        return np.stack([as_probability(row, x.shape[1], name) for row in w])
    return np.broadcast_to(as_probability(w, x.shape[-2], name), x.shape[:-1]).copy().reshape(-1, x.shape[-2])


def as_seed(seed, name="seed"):
    """A seed for ``np.random.default_rng``: None, an int >= 0, or a Generator / SeedSequence /
    BitGenerator."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be None, a non-negative integer or a numpy Generator; "
                        f"got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {seed}")
    return int(seed)


def as_beta(beta, name="beta"):
    """Inverse temperature: a finite real number >= 0."""
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(beta).__name__}")
    beta = float(beta)
    if not np.isfinite(beta) or beta < 0:
        raise ValueError(f"{name} must be finite and >= 0; got {beta}")
    return beta


def as_positive(value, name):
    """A finite real number > 0 (time steps, tolerances, horizons)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value}")
    return value


def as_count(value, name, minimum=1):
    """An integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def memory_bytes():
    """The machine's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def as_size(value, name, bytes_each):
    """A count (``as_count``) of items of ``bytes_each`` bytes that fits in the machine's memory:
    a request beyond it is refused up front, naming the argument, instead of a MemoryError
    (or an hour of swapping) deep inside numpy.

    Example
    -------
    >>> as_size(1000, "n", 8 * 3)
    1000
    """
    value = as_count(value, name)
    total, need = memory_bytes(), float(value) * bytes_each
    if total is not None and need > total:
        raise ValueError(f"{name} = {value} needs about {need / 2 ** 30:.3g} GiB of memory, more than this "
                         f"machine's {total / 2 ** 30:.3g} GiB; use a smaller {name} (or batches)")
    return value


def as_time_grid(t_eval, name="t_eval"):
    """Output times: a non-empty, finite, strictly increasing 1-D array."""
    arr = np.atleast_1d(as_float_array(t_eval, name))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of times; got shape {arr.shape}")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name} must be strictly increasing")
    return arr


def as_flag(value, name):
    """A boolean given as a bool (not a string such as "false", nor a number)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be true or false (a boolean); got {value!r} of type {type(value).__name__}")
    return bool(value)


def as_choice(value, name, choices):
    """One of the allowed strings (exact match: "sa" is not "SA")."""
    if not isinstance(value, str) and all(isinstance(c, str) for c in choices):
        raise TypeError(f"{name} must be a string; choose one of {', '.join(map(repr, choices))}; got {value!r}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
    return value


def as_density(values, name="rho0"):
    """Non-negative finite density values with positive total."""
    arr = as_float_array(values, name)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of cell densities; got shape {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative; min is {arr.min():.3g}")
    if not arr.sum() > 0:
        raise ValueError(f"{name} has zero mass; a density must integrate to a positive number")
    return np.ascontiguousarray(arr)
