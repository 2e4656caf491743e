"""The state of an adaptive circle run read back from its checkpoint, checked before the run resumes.

A file that was damaged or crafted can hold valid arrays that no run could have produced: a
density of mass 2, NaN, an output index past the end (1 of 4 outputs returned), k = 0 or a time
past the horizon (a run that never progresses).  ``restored_run`` refuses each of them with the
reason; the caller names the file.
"""
import json

import numpy as np

from meanfield.checks import as_restored_density

from .meshes.dyadic import DyadicMesh

__all__ = ["restored_run", "dyadic_cells"]

COUNTERS = ("nfev", "nsteps", "nrejected", "checks")


def _scalar(state, key, kind):
    value = np.asarray(state[key])
    if value.shape != () or value.dtype.kind not in kind:
        raise ValueError(f"{key} = {value!r} is not a scalar of kind {kind!r}")
    return value.item()


def dyadic_cells(edges: np.ndarray, base: int, depth: int) -> DyadicMesh:
    r"""The dyadic mesh of ``base`` cells refined at most ``depth`` times whose left edges are ``edges``,
    checked: integer edges increasing from 0, every cell a power-of-two number of finest units
    that divides its left edge.

    .. math::

        0 = e_0 < e_1 < \dots < e_{N-1} < N_0 2^L, \qquad s_i = e_{i+1} - e_i = 2^{L - \ell_i},
        \qquad s_i \mid e_i.

    Parameters
    ----------
    edges : ndarray of int
        Left edges in finest units.
    base, depth : int
        N_0 and L.

    Returns
    -------
    DyadicMesh

    Raises
    ------
    ValueError
        Naming what is wrong.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.restored import dyadic_cells
    >>> dyadic_cells(np.array([0, 2, 3]), 2, 1).levels.tolist()
    [0, 1, 1]
    >>> dyadic_cells(np.array([0, 3]), 2, 1)
    Traceback (most recent call last):
    ...
    ValueError: cell edges [0 3] are not a dyadic mesh of 2 cells refined 1 times
    """
    edges = np.asarray(edges)
    units = base << depth
    if edges.ndim != 1 or edges.size < base or edges.dtype.kind not in "iu" or edges[0] != 0 \
            or edges[-1] >= units or np.any(np.diff(edges) <= 0):
        raise ValueError(f"cell edges {edges} are not a dyadic mesh of {base} cells refined {depth} times")
    edges = edges.astype(np.int64)
    sizes = np.diff(np.append(edges, units))
    if np.any(sizes & (sizes - 1)) or np.any(sizes > 1 << depth) or np.any(edges % sizes):
        raise ValueError(f"cell edges {edges} are not a dyadic mesh of {base} cells refined {depth} times")
    return DyadicMesh(base, depth, edges, sizes)


def restored_run(state: dict, t_eval: np.ndarray, base: int, depth: int) -> tuple:
    r"""The position, meshes and densities of a checkpointed adaptive circle run, each checked.

    A run saves while ``1 <= k < len(t_eval)`` with ``t_eval[k-1] <= t <= t_eval[k]``, and once
    more when it ends (k = len(t_eval), t = t_eval[-1]), with k stored outputs, and unit mass (to
    round-off) in every density:

    .. math::

        \Big|\sum_i \rho_i |C_i| - 1\Big| \le 10^{-9}, \qquad \rho_i \ge 0.

    Parameters
    ----------
    state : dict
        The arrays of the checkpoint file.
    t_eval : ndarray
        The run's output times.
    base, depth : int
        The run's base cells and finest level.

    Returns
    -------
    tuple
        (t, k, threshold, mesh, rho, out, jumps, meshes, counters), as ``adaptive_circle`` keeps them.

    Raises
    ------
    ValueError, KeyError, TypeError
        Naming what is wrong (the caller adds the file's name).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.restored import restored_run
    >>> rho = np.full(4, 1 / (2 * np.pi))
    >>> state = dict(t=np.array(0.5), k=np.array(1), threshold=np.array(2.0), edges=np.arange(0, 16, 4),
    ...              rho=rho, out_sizes=np.array([4]), out_edges=np.arange(0, 16, 4), out_rho=rho,
    ...              jumps=np.zeros(0), meshes=np.array("[]"),
    ...              counters=np.array('{"nfev": 3, "nsteps": 1, "nrejected": 0, "checks": 0, '
    ...                                '"hmin": 0.1, "hmax": 0.1}'))
    >>> restored_run(state, np.array([0.0, 1.0]), 4, 2)[:3]
    (0.5, 1, 2.0)
    >>> state["rho"] = 2 * rho
    >>> restored_run(state, np.array([0.0, 1.0]), 4, 2)
    Traceback (most recent call last):
    ...
    ValueError: rho has mass 2 where the run's is 1
    """
    t, k = float(_scalar(state, "t", "f")), int(_scalar(state, "k", "iu"))
    if not 1 <= k <= t_eval.size:
        raise ValueError(f"output index k = {k} outside 1..{t_eval.size}")
    end = t_eval[min(k, t_eval.size - 1)]           # a finished run (k = len(t_eval)) is at t_eval[-1]
    if not t_eval[k - 1] <= t <= end:
        raise ValueError(f"time t = {t} outside [t_eval[{k - 1}], t_eval[{min(k, t_eval.size - 1)}]] = "
                         f"[{t_eval[k - 1]}, {end}]")
    threshold = float(_scalar(state, "threshold", "f"))
    if not 0 < threshold < np.inf:
        raise ValueError(f"threshold = {threshold}")
    mesh = dyadic_cells(state["edges"], base, depth)
    rho = as_restored_density(state["rho"], mesh.widths, 1.0, "rho")
    sizes = np.asarray(state["out_sizes"])
    if sizes.shape != (k,) or sizes.dtype.kind not in "iu" or np.any(sizes < base) \
            or not state["out_edges"].shape == state["out_rho"].shape == (int(sizes.sum()),):
        raise ValueError(f"{sizes.size} stored outputs of {sizes.tolist()} cells where k = {k}")
    out, first = [], 0
    for n in sizes.tolist():
        cells = dyadic_cells(state["out_edges"][first:first + n], base, depth)
        out.append((cells, as_restored_density(state["out_rho"][first:first + n], cells.widths, 1.0,
                                               f"output {len(out)}")))
        first += n
    jumps = np.asarray(state["jumps"])
    if jumps.dtype.kind != "f" or not np.all(np.isfinite(jumps)):
        raise ValueError("jumps are not finite numbers")
    meshes, counters = json.loads(str(state["meshes"])), json.loads(str(state["counters"]))
    if not isinstance(meshes, list) or not isinstance(counters, dict) or any(
            not isinstance(counters.get(key), int) or counters[key] < 0 for key in COUNTERS):
        raise ValueError(f"counters {counters}")
    return t, k, threshold, mesh, rho, out, jumps.tolist(), meshes, counters
