"""Checkpoints of adaptive S^2 runs: the whole state of ``adaptive.solve`` between two checks.

An adaptive run alternates controlled integrations on one mesh with remeshing checks; at a check
the state is the time, the output index, the current generator set and densities, the criterion's
threshold, the counters, the mesh history and every output so far (its generator set and its
densities).  Each mesh is stored by its generator indices among the finest icosahedral vertices,
from which ``remesh.adaptive_mesh`` rebuilds it exactly, so a resumed run repeats the arithmetic of
an uninterrupted one (the controlled step depends only on (t, ρ), and every integration starts
afresh at a check).  Files are written through ``stepping.Checkpoint`` (temporary file, fsync,
rename) and read back with every field checked.
"""
import os

import numpy as np

from meanfield.checks import as_restored_density
from meanfield.npzfile import NPZ_ERRORS

from .remesh import adaptive_mesh, level_size

__all__ = ["save", "load"]

COUNTERS = ("nfev", "nsteps", "nrejected", "checks")
STRETCH = ("stretch_mode", "stretch_streak", "stretch_step", "switch_t", "switch_names")  # stepping.stretch_state


def save(checkpoint, start, t, k, amesh, rho, threshold, counters, meshes, jumps, out, remesh_seconds, stretch=None):
    """Write the state of an adaptive run at a check of its criterion to ``checkpoint``.

    Parameters
    ----------
    checkpoint : stepping.Checkpoint
        Where to write (atomically) and the run's identity (its ``meta``).
    start : str
        The digest (``stepping.digest``) of the initial densities.
    t : float
        The time of the check.
    k : int
        The index of the next output time.
    amesh : remesh.AdaptiveMesh
        The current mesh (stored as its generator indices).
    rho : ndarray, shape (N,)
        The current cell densities.
    threshold : float
        The criterion's θ.
    counters : dict
        nfev, nsteps, nrejected, checks, hmin, hmax.
    meshes : list of dict
        t, cells and finest level of every mesh used so far.
    jumps : list of float
        Relative changes of E_β across the remeshes so far.
    out : list of (AdaptiveMesh, ndarray)
        The outputs so far.
    remesh_seconds : float
        Time spent remeshing so far.
    stretch : dict, optional
        The time scheme's state between stretches (``stepping.stretch_state``: the member of "auto" in
        use, the implicit step, the switches), stored as it is.

    Returns
    -------
    None

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from meanfield.solvers.meshes import adaptive_state
    >>> from meanfield.solvers.meshes.remesh import adaptive_mesh, level_size
    >>> from meanfield.solvers.stepping import Checkpoint
    >>> amesh = adaptive_mesh(np.arange(level_size(1)), 1)
    >>> rho = np.full(amesh.size, 1 / (4 * np.pi))
    >>> counters = dict(nfev=3, nsteps=1, nrejected=0, checks=1, hmin=0.1, hmax=0.1)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     ckpt = Checkpoint(os.path.join(folder, "run.npz"), meta={"run": 1})
    ...     adaptive_state.save(ckpt, "x", 0.1, 1, amesh, rho, 2.0, counters, [], [], [(amesh, rho)], 0.0)
    ...     state = adaptive_state.load(ckpt, "x", np.array([0.0, 1.0]), 1)
    >>> state["t"], state["k"], state["amesh"].size, state["counters"]["nsteps"]
    (0.1, 1, 42, 1)
    """
    sizes = np.array([a.size for a, _ in out])
    checkpoint.save(dict(
        start=np.array(start), t=np.array(float(t)), k=np.array(int(k)), index=amesh.index, rho=rho,
        threshold=np.array(float(threshold)), remesh_seconds=np.array(float(remesh_seconds)),
        **{key: np.array(int(counters[key])) for key in COUNTERS},
        hmin=np.array(float(counters["hmin"])), hmax=np.array(float(counters["hmax"])),
        mesh_t=np.array([m["t"] for m in meshes]), mesh_cells=np.array([m["cells"] for m in meshes]),
        mesh_finest=np.array([m["finest"] for m in meshes]), jumps=np.array(jumps, dtype=float),
        out_sizes=sizes, out_index=np.concatenate([a.index for a, _ in out]),
        out_rho=np.concatenate([r for _, r in out]), **(stretch or {})))


def load(checkpoint, start, t_eval, finest):
    """The state saved in ``checkpoint``, with its meshes rebuilt (one object per generator set).

    Parameters
    ----------
    checkpoint : stepping.Checkpoint
        The file and the run's identity (its ``meta`` must equal the file's).
    start : str
        The digest of this run's initial densities (must equal the file's).
    t_eval : ndarray
        The run's output times.
    finest : int
        The finest icosahedral level (the generator indices refer to its vertices).

    Returns
    -------
    dict or None
        t, k, amesh, rho, threshold, counters, meshes, jumps, out, remesh_seconds (as ``save``
        takes them) and stretch (the arrays of ``stepping.stretch_state``, empty if none were
        saved); None if there is no file.

    Raises
    ------
    ValueError
        For a file of another run or another initial state, or a damaged or inconsistent one
        (the message names the file).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from meanfield.solvers.meshes import adaptive_state
    >>> from meanfield.solvers.stepping import Checkpoint
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     ckpt = Checkpoint(os.path.join(folder, "run.npz"))
    ...     print(adaptive_state.load(ckpt, "x", np.array([0.0, 1.0]), 3))
    None
    """
    path = checkpoint.path
    if not os.path.exists(path):
        return None

    def bad(what):
        return ValueError(f"checkpoint {path} is {what}; delete it to start afresh")

    try:
        with np.load(path, allow_pickle=False) as data:
            state = {key: data[key] for key in data.files}
        meta = str(state.pop("meta"))
        for key in ("start", "t", "k", "index", "rho", "threshold", "remesh_seconds", "hmin", "hmax", "mesh_t",
                    "mesh_cells", "mesh_finest", "jumps", "out_sizes", "out_index", "out_rho") + COUNTERS:
            state[key]
    except NPZ_ERRORS as exc:
        raise bad(f"unreadable or corrupt ({type(exc).__name__}: {exc})") from None
    if meta != checkpoint.meta:
        raise ValueError(f"checkpoint {path} was written by a different run (model, flux, output times or "
                         f"settings differ); delete it or choose another checkpoint path")
    if str(state["start"]) != start:
        raise ValueError(f"checkpoint {path} started from another initial state; delete it or choose another "
                         f"checkpoint path")
    t, k, sizes = float(state["t"]), int(state["k"]), state["out_sizes"]
    vertices = level_size(finest)
    if not (t_eval[0] <= t <= t_eval[-1] and 1 <= k < t_eval.size and sizes.shape == (k,)
            and state["out_index"].shape == state["out_rho"].shape == (int(sizes.sum()),)
            and state["index"].shape == state["rho"].shape and state["index"].size >= level_size(0)
            and state["out_index"].min() >= 0 and max(state["out_index"].max(), state["index"].max()) < vertices
            and np.all(np.isfinite(state["rho"])) and np.all(state["rho"] >= 0)
            and np.all(np.isfinite(state["out_rho"])) and float(state["threshold"]) > 0
            and all(int(state[key]) >= 0 for key in COUNTERS)):
        raise bad("inconsistent (times, sizes, indices or densities out of range)")
    built = {}

    def mesh(index):
        key = index.tobytes()
        if key not in built:
            built[key] = adaptive_mesh(index, finest)
        return built[key]

    bounds = np.concatenate([[0], np.cumsum(sizes)])
    out = [(mesh(state["out_index"][a:b]), state["out_rho"][a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    try:                        # unit mass to round-off: a crafted ρ×2 would resume with mass 2
        for i, (cells, rho) in enumerate(out + [(mesh(state["index"]), state["rho"])]):
            as_restored_density(rho, cells.mesh.areas, 1.0, "rho" if i == len(out) else f"output {i}")
    except ValueError as exc:
        raise bad(f"inconsistent ({exc})") from None
    counters = {key: int(state[key]) for key in COUNTERS}
    counters.update(hmin=float(state["hmin"]), hmax=float(state["hmax"]))
    meshes = [dict(t=float(a), cells=int(b), finest=int(c))
              for a, b, c in zip(state["mesh_t"], state["mesh_cells"], state["mesh_finest"])]
    return dict(t=t, k=k, amesh=mesh(state["index"]), rho=state["rho"], threshold=float(state["threshold"]),
                counters=counters, meshes=meshes, jumps=state["jumps"].tolist(), out=out,
                remesh_seconds=float(state["remesh_seconds"]),
                stretch={key: state[key] for key in STRETCH if key in state})
