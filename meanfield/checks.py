"""Input validation shared by the public API.

Every function raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) whose
message names the argument and says how to fix it, so that bad input never reaches a
Numba kernel.
"""
import numbers
import os
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

UNIT_TOL = 1e-8


def as_float_array(value: ArrayLike, name: str) -> np.ndarray:
    """``value`` as a float64 array of finite real numbers.

    Parameters
    ----------
    value : array_like
        Real numbers (integers and floats of any precision).
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray
        float64, same shape.

    Raises
    ------
    TypeError
        For anything but real numbers (strings, complex, booleans, objects).
    ValueError
        For NaN or inf entries.

    Examples
    --------
    >>> from meanfield.checks import as_float_array
    >>> as_float_array([1, 2], "x")
    array([1., 2.])
    >>> as_float_array([1.0, float("nan")], "x")
    Traceback (most recent call last):
    ...
    ValueError: x contains NaN or inf; all entries must be finite
    """
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


def as_points(x: ArrayLike, name: str = "x", *, ndim: tuple[int, ...] = (2,), d: int | None = None,
              tol: float = UNIT_TOL, min_dim: int = 2) -> np.ndarray:
    r"""Points on the unit sphere: an array of shape (..., n, d) whose rows have norm 1 within ``tol``.

    .. math::

        \max_i \big| |x_i| - 1 \big| \le \mathrm{tol}.

    Points stored in a lower precision (float32, float16; integers are exact) are accepted within
    16 ulps of that precision and renormalised in float64, x ← x/|x|.

    Parameters
    ----------
    x : array_like
        The points.
    name : str
        Name of the argument in error messages.
    ndim : tuple of int
        Accepted numbers of axes (2: (n, d); 3: a batch (B, n, d)).
    d : int, optional
        Required number of coordinates.
    tol : float
        Tolerance on the norms (float64 input).
    min_dim : int
        Smallest accepted d.

    Returns
    -------
    numpy.ndarray
        C-contiguous float64 points.

    Raises
    ------
    TypeError
        If x is not an array of real numbers.
    ValueError
        If x has the wrong shape, is empty, not finite, or its rows are not unit vectors.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.checks import as_points
    >>> as_points(np.array([[0.6, 0.8]], dtype=np.float32)).dtype
    dtype('float64')
    >>> as_points([[1.0, 1.0]])
    Traceback (most recent call last):
    ...
    ValueError: x rows must be unit vectors (max | |x| - 1 | = 0.414 > 1e-08); ...
    """
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


def as_weights(w: ArrayLike, n: int, name: str = "weights") -> np.ndarray:
    r"""Non-negative finite weights of length n with positive, finite total (returned as given; see
    ``as_probability``).

    .. math::

        w_i \ge 0, \qquad 0 < \textstyle\sum_i w_i < \infty.

    Parameters
    ----------
    w : array_like, shape (n,)
        Weights.
    n : int
        Number of points they belong to.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray
        float64 weights, shape (n,).

    Raises
    ------
    ValueError
        If the shape is not (n,), a weight is negative or not finite, or the total is zero or overflows.

    Examples
    --------
    >>> from meanfield.checks import as_weights
    >>> as_weights([1, 3], 2)
    array([1., 3.])
    """
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


def as_probability(w: ArrayLike, n: int, name: str = "weights") -> np.ndarray:
    r"""Weights of length n divided by their total: the probability measure Σ_i w_i δ_{x_i}.

    .. math::

        w_i \leftarrow \frac{w_i / \max_j w_j}{\sum_k w_k / \max_j w_j}.

    Every public function that takes weights or a density treats them this way: only the relative
    sizes matter (docs/robustness.md). Dividing by the maximum first keeps full precision for
    weights so small that their total is subnormal.

    Parameters
    ----------
    w : array_like, shape (n,)
        Non-negative weights with positive total.
    n : int
        Number of points.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray
        Shape (n,), summing to 1.

    Raises
    ------
    ValueError
        As ``as_weights``.

    Examples
    --------
    >>> from meanfield.checks import as_probability
    >>> as_probability([1e-320, 3e-320], 2)
    array([0.25, 0.75])
    """
    arr = as_weights(w, n, name)
    arr = arr / arr.max()
    return arr / arr.sum()


def as_batch_weights(weights: ArrayLike | None, x: np.ndarray, name: str = "weights") -> np.ndarray | None:
    r"""Probability weights for points x (n, d) or a batch (B, n, d), one row per system.

    .. math::

        w_{b,i} \leftarrow w_{b,i} / \textstyle\sum_k w_{b,k}.

    Parameters
    ----------
    weights : array_like or None
        None, one row (n,) shared by every system, or one row per system (B, n).
    x : numpy.ndarray
        The points, (n, d) or (B, n, d).
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray or None
        Shape (B, n) (B = 1 for unbatched points), each row summing to 1; None stays None.

    Raises
    ------
    ValueError
        If the shape does not match the points or a row is not valid (``as_weights``).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.checks import as_batch_weights
    >>> as_batch_weights([1.0, 3.0], np.zeros((2, 2, 3)))
    array([[0.25, 0.75],
           [0.25, 0.75]])
    """
    if weights is None:
        return None
    w = np.asarray(weights)
    if x.ndim == 3 and w.ndim == 2:
        if w.shape[0] != x.shape[0]:
            raise ValueError(f"{name} must have shape ({x.shape[1]},) or, one row per system of the batch, "
                             f"({x.shape[0]}, {x.shape[1]}); got {w.shape}")
        return np.stack([as_probability(row, x.shape[1], name) for row in w])
    return np.broadcast_to(as_probability(w, x.shape[-2], name), x.shape[:-1]).copy().reshape(-1, x.shape[-2])


def as_seed(seed: object, name: str = "seed") -> int | np.random.Generator | np.random.SeedSequence | None:
    """A seed for ``numpy.random.default_rng``: None, an int >= 0, or a Generator / SeedSequence /
    BitGenerator.

    Parameters
    ----------
    seed : object
        The seed to check.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    int, numpy.random.Generator, SeedSequence, BitGenerator or None
        The seed, an int as a Python int.

    Raises
    ------
    TypeError
        For other kinds of object (booleans, floats, strings).
    ValueError
        For negative integers.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.checks import as_seed
    >>> as_seed(np.int64(3)), as_seed(None)
    (3, None)
    """
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be None, a non-negative integer or a numpy Generator; "
                        f"got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {seed}")
    return int(seed)


def as_beta(beta: float, name: str = "beta") -> float:
    """Inverse temperature: a finite real number β >= 0.

    Parameters
    ----------
    beta : float
        β.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If beta is not a real number (booleans included).
    ValueError
        If beta is negative or not finite.

    Examples
    --------
    >>> from meanfield.checks import as_beta
    >>> as_beta(4)
    4.0
    >>> as_beta(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: beta must be finite and >= 0; got -1.0
    """
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(beta).__name__}")
    beta = float(beta)
    if not np.isfinite(beta) or beta < 0:
        raise ValueError(f"{name} must be finite and >= 0; got {beta}")
    return beta


def as_positive(value: float, name: str) -> float:
    """A finite real number > 0 (time steps, tolerances, horizons).

    Parameters
    ----------
    value : float
        The number.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If value is not a real number.
    ValueError
        If value is not finite or <= 0.

    Examples
    --------
    >>> from meanfield.checks import as_positive
    >>> as_positive(0.5, "dt")
    0.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value}")
    return value


def as_count(value: int, name: str, minimum: int = 1) -> int:
    """An integer >= minimum.

    Parameters
    ----------
    value : int
        The integer (numpy integers accepted; booleans and floats not).
    name : str
        Name of the argument in error messages.
    minimum : int
        Smallest accepted value.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If value is not an integer.
    ValueError
        If value < minimum.

    Examples
    --------
    >>> from meanfield.checks import as_count
    >>> as_count(3, "n")
    3
    >>> as_count(2.0, "n")
    Traceback (most recent call last):
    ...
    TypeError: n must be an integer; got float
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def memory_bytes() -> int | None:
    r"""The machine's physical memory in bytes (None where the system does not say).

    .. math::

        \text{page size} \times \text{number of physical pages}.

    Returns
    -------
    int or None

    Examples
    --------
    >>> from meanfield.checks import memory_bytes
    >>> total = memory_bytes()
    >>> total is None or total > 0
    True
    """
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def available_bytes() -> int | None:
    r"""The memory a new allocation can get without swapping: ``MemAvailable`` of /proc/meminfo (Linux),
    else the physical memory (``memory_bytes``); None where the system says neither.

    .. math::

        \text{available} \le \text{physical memory}.

    Returns
    -------
    int or None

    Examples
    --------
    >>> from meanfield.checks import available_bytes, memory_bytes
    >>> free = available_bytes()
    >>> free is None or 0 < free <= memory_bytes()
    True
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return memory_bytes()


def as_size(value: int, name: str, bytes_each: float) -> int:
    r"""A count (``as_count``) of items of ``bytes_each`` bytes that fits in the machine's memory.

    A request beyond it is refused up front, naming the argument, instead of a MemoryError (or an
    hour of swapping) deep inside numpy:

    .. math::

        \text{value} \times \text{bytes\_each} \le \text{available memory}.

    Parameters
    ----------
    value : int
        The count.
    name : str
        Name of the argument in error messages.
    bytes_each : float
        Memory one item needs.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If value is not an integer.
    ValueError
        If value < 1 or the items would not fit in memory.

    Examples
    --------
    >>> from meanfield.checks import as_size
    >>> as_size(1000, "n", 8 * 3)
    1000
    """
    value = as_count(value, name)
    total, need = available_bytes(), float(value) * bytes_each
    if total is not None and need > total:
        raise ValueError(f"{name} = {value} needs about {need / 2 ** 30:.3g} GiB of memory, more than the "
                         f"{total / 2 ** 30:.3g} GiB available; use a smaller {name} (or batches)")
    return value


def as_time_grid(t_eval: ArrayLike, name: str = "t_eval") -> np.ndarray:
    r"""Output times: a non-empty, finite, strictly increasing 1-D array.

    .. math::

        t_0 < t_1 < \dots < t_{m-1}.

    Parameters
    ----------
    t_eval : array_like
        Times (a number is a grid of one time).
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray
        float64, 1-D.

    Raises
    ------
    ValueError
        If the times are empty, not 1-D, not finite or not strictly increasing.

    Examples
    --------
    >>> from meanfield.checks import as_time_grid
    >>> as_time_grid(2)
    array([2.])
    >>> as_time_grid([0, 1, 1])
    Traceback (most recent call last):
    ...
    ValueError: t_eval must be strictly increasing
    """
    arr = np.atleast_1d(as_float_array(t_eval, name))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of times; got shape {arr.shape}")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name} must be strictly increasing")
    return arr


def as_flag(value: object, name: str) -> bool:
    """A boolean given as a bool (not a string such as "false", nor a number).

    Parameters
    ----------
    value : object
        The flag.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        If value is not a bool (or numpy bool).

    Examples
    --------
    >>> from meanfield.checks import as_flag
    >>> as_flag(True, "quiet")
    True
    >>> as_flag("false", "quiet")
    Traceback (most recent call last):
    ...
    TypeError: quiet must be true or false (a boolean); got 'false' of type str
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be true or false (a boolean); got {value!r} of type {type(value).__name__}")
    return bool(value)


def as_choice(value: str, name: str, choices: Sequence[str]) -> str:
    """One of the allowed strings (exact match: "sa" is not "SA").

    Parameters
    ----------
    value : str
        The choice.
    name : str
        Name of the argument in error messages.
    choices : sequence of str
        Allowed values.

    Returns
    -------
    str
        value.

    Raises
    ------
    TypeError
        If value is not a string (where the choices are strings).
    ValueError
        If value is not among the choices.

    Examples
    --------
    >>> from meanfield.checks import as_choice
    >>> as_choice("SA", "model", ("SA", "USA"))
    'SA'
    >>> as_choice("sa", "model", ("SA", "USA"))
    Traceback (most recent call last):
    ...
    ValueError: unknown model 'sa'; choose one of 'SA', 'USA'
    """
    if not isinstance(value, str) and all(isinstance(c, str) for c in choices):
        raise TypeError(f"{name} must be a string; choose one of {', '.join(map(repr, choices))}; got {value!r}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}")
    return value


def as_density(values: ArrayLike, name: str = "rho0") -> np.ndarray:
    r"""Cell densities: a non-empty 1-D array of non-negative finite values with positive total.

    .. math::

        \rho_k \ge 0, \qquad \textstyle\sum_k \rho_k > 0.

    Parameters
    ----------
    values : array_like, shape (N,)
        Densities of the N cells.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray
        C-contiguous float64, shape (N,).

    Raises
    ------
    ValueError
        If the values are not 1-D, empty, negative, not finite or of zero total.

    Examples
    --------
    >>> from meanfield.checks import as_density
    >>> as_density([0.0, 2.0, 1.0])
    array([0., 2., 1.])
    """
    arr = as_float_array(values, name)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of cell densities; got shape {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative; min is {arr.min():.3g}")
    if not arr.sum() > 0:
        raise ValueError(f"{name} has zero mass; a density must integrate to a positive number")
    return np.ascontiguousarray(arr)


def unit_mass(rho: ArrayLike, sizes: ArrayLike, name: str = "rho0") -> np.ndarray:
    r"""Cell densities rescaled to unit mass by their relative sizes (each row of a 2-D array apart).

    .. math::

        \rho_i \leftarrow \frac{\rho_i / \max_k \rho_k}{\sum_k (\rho_k / \max_j \rho_j)\, |C_k|}.

    Only the shape of ρ matters (as for ``discretise`` and ``as_probability``): dividing by the
    maximum first keeps every finite non-negative ρ with positive mass finite and exact to
    round-off, from subnormal values (5e-324) to the largest double (1.8e308), where ``ρ / Σ ρ |C|``
    would give NaN, inf or a mass off by the subnormals' lost digits.

    Parameters
    ----------
    rho : array_like, shape (N,) or (S, N)
        Cell densities (finite, non-negative, every row with a positive value).
    sizes : array_like, shape (N,)
        The cells' measures |C_k| (widths, areas, or fractions of the whole).
    name : str
        Name of the argument in error messages.

    Returns
    -------
    numpy.ndarray
        Same shape as ``rho``, with ``unit_mass(rho, sizes) @ sizes == 1`` to round-off.

    Raises
    ------
    ValueError
        If ``rho`` holds NaN, inf or negative values, or a row of zero mass.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.checks import unit_mass
    >>> sizes = np.full(4, np.pi / 2)
    >>> for rho in ([1e308, 1e308, 0.0, 0.0], [5e-324, 5e-324, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]):
    ...     print(unit_mass(rho, sizes) @ sizes, unit_mass(rho, sizes)[0])
    1.0 0.3183098861837907
    1.0 0.3183098861837907
    1.0 0.3183098861837907
    """
    rho = as_float_array(rho, name)
    if rho.ndim not in (1, 2) or rho.shape[-1] == 0:
        raise ValueError(f"{name} must be a non-empty array of cell densities; got shape {rho.shape}")
    if not np.all(np.isfinite(rho)) or np.any(rho < 0):
        bad = "NaN" if np.any(np.isnan(rho)) else "inf" if np.any(np.isinf(rho)) else "negative values"
        raise ValueError(f"{name} must be finite and non-negative; it holds {bad}")
    top = rho.max(axis=-1, keepdims=True)
    if np.any(top <= 0):
        raise ValueError(f"{name} has zero mass" + (" in some slices" if rho.ndim > 1 else "")
                         + "; a density must integrate to a positive number")
    shape = rho / top
    return shape / (shape @ as_float_array(sizes, "sizes"))[..., None]


MASS_RTOL = 1e-9        # a restored density's mass may differ from the run's by this (round-off of long runs)


def as_restored_density(rho: ArrayLike, sizes: ArrayLike, mass: float | ArrayLike, name: str = "rho") -> np.ndarray:
    r"""Cell densities read back from a file (a checkpoint): finite, non-negative, one value per cell,
    and of the run's mass to round-off, so that a damaged or crafted state is refused before a run
    resumes from it.

    .. math::

        \rho_i \ge 0, \qquad \Big|\sum_i \rho_i |C_i| - m\Big| \le 10^{-9}\, m
        \quad (\text{each row of a 2-D array}).

    Parameters
    ----------
    rho : array_like, shape (N,) or (S, N)
        The restored densities.
    sizes : array_like, shape (N,)
        The cells' measures.
    mass : float or array_like, shape (S,)
        The run's mass (of each row).
    name : str
        What ``rho`` is, for the error message.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValueError
        Naming ``name`` and what is wrong.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.checks import as_restored_density
    >>> sizes = np.full(4, np.pi / 2)
    >>> rho = np.full(4, 1 / (2 * np.pi))
    >>> bool(np.all(as_restored_density(rho, sizes, 1.0) == rho))
    True
    >>> as_restored_density(2 * rho, sizes, 1.0)
    Traceback (most recent call last):
    ...
    ValueError: rho has mass 2 where the run's is 1
    """
    sizes = np.asarray(sizes, dtype=float)
    arr = np.asarray(rho)
    if arr.dtype.kind != "f" or arr.ndim not in (1, 2) or arr.shape[-1:] != sizes.shape:
        raise ValueError(f"{name} has shape {arr.shape} and dtype {arr.dtype}, not float densities on "
                         f"{sizes.size} cells")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds NaN or inf")
    if np.any(arr < 0):
        raise ValueError(f"{name} holds negative densities (min {arr.min():.3g})")
    have, want = arr @ sizes, np.asarray(mass, dtype=float)
    if not np.all(np.abs(have - want) <= MASS_RTOL * want):
        worst = np.ravel(have)[np.argmax(np.ravel(np.abs(have - want)))]
        raise ValueError(f"{name} has mass {worst:.10g} where the run's is {float(np.max(want)):.10g}")
    return arr


def as_index(k: int, size: int, name: str = "k") -> int:
    r"""An index into ``size`` items, Python style (negative counts from the end), checked.

    .. math::

        -\text{size} \le k < \text{size}.

    Parameters
    ----------
    k : int
        The index.
    size : int
        The number of items.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``k`` is not an integer.
    ValueError
        If it is out of range.

    Examples
    --------
    >>> from meanfield.checks import as_index
    >>> as_index(-1, 4), as_index(2, 4)
    (-1, 2)
    >>> as_index(99, 4)
    Traceback (most recent call last):
    ...
    ValueError: k = 99 is out of range for 4 outputs (0..3, or -4..-1 from the end)
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(k).__name__}")
    if not -size <= k < size:
        raise ValueError(f"{name} = {k} is out of range for {size} outputs (0..{size - 1}, or -{size}..-1 "
                         f"from the end)")
    return int(k)
