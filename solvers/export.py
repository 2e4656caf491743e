"""Compact summaries and xarray / netCDF conversion of result objects (dataclasses of arrays).

A result object's array fields become data variables on named dimensions (``t`` the output
times, ``draw`` independent systems of a batch, ``token``, ``cell``, ``coord`` the ambient
coordinates); its ``model`` and ``info`` become JSON attributes; a nested result object (the
``particles`` and ``density`` of a ``Comparison``) is stored with its field name as prefix, so
one Dataset — and one netCDF file — holds everything needed to rebuild the object.

xarray is an optional dependency (``pip install "meanfield-attention[xarray]"``); netCDF files
are written by whichever engine xarray finds (netCDF4, h5netcdf, or SciPy's netCDF3 writer,
which stores 64-bit integers as 32-bit ones when they fit), atomically, with the SHA-256 of their
content as an attribute that ``from_netcdf`` verifies.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from meanfield.atomic import write_file
from meanfield.models import model_from_dict

__all__ = ["summary", "flatten", "unflatten", "to_xarray", "from_xarray", "to_netcdf", "from_netcdf", "require"]

#: The result classes by name (``ParticleSolution`` -> the class), filled by ``results.Saveable``'s
#: subclasses as they are defined: this module serves them and never imports them.
RESULT_KINDS: dict[str, type] = {}

#: dimension names of the known array fields, by number of dimensions
DIMS: dict[str, dict[int, tuple[str, ...]]] = {
    "t": {1: ("t",)},
    "x": {3: ("t", "token", "coord"), 4: ("t", "draw", "token", "coord")},
    "theta": {1: ("cell",), 2: ("t", "token"), 3: ("t", "draw", "token")},
    "edges": {1: ("edge",)},
    "masses": {2: ("t", "cell")},
    "energy": {1: ("t",), 2: ("t", "draw")},
    "points": {2: ("cell", "coord"), 3: ("t", "cell", "coord")},
    "areas": {1: ("cell",), 2: ("t", "cell")},
    "cells": {1: ("t",)},
    "rho": {2: ("t", "cell")},
    "mass": {1: ("t",)},
    "w1": {2: ("t", "draw")},
    "w2": {2: ("t", "draw")},
    "energy_particles": {2: ("t", "draw")},
    "energy_density": {1: ("t",)},
    "mean_particles": {2: ("t", "draw")},
    "mean_pde": {1: ("t",)},
    "clusters_particles": {2: ("t", "draw")},
    "clusters_density": {1: ("t",)},
}
META = ("model", "info")


def require(module: str, what: str):
    """Import an optional dependency, or say which extra provides it.

    Parameters
    ----------
    module : str
        The module to import.
    what : str
        The feature that needs it (for the message).

    Returns
    -------
    module

    Raises
    ------
    ImportError
        Naming the ``pip install "meanfield-attention[...]"`` extra that provides the module.

    Examples
    --------
    >>> from meanfield.solvers.export import require
    >>> require("json", "this example").__name__
    'json'
    """
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{what} needs {module}: pip install \"meanfield-attention[{module}]\"") from exc


def _is_result(value) -> bool:
    return is_dataclass(value) and not isinstance(value, type)


def _dims(name: str, array: np.ndarray) -> tuple[str, ...]:
    known = DIMS.get(name, {}).get(array.ndim)
    return known if known is not None else tuple(f"{name}_{i}" for i in range(array.ndim))


def summary(obj) -> str:
    """A few lines describing a result object: its model, method, time range and array shapes.

    Never the arrays themselves: this is the results' ``repr``.

    Parameters
    ----------
    obj : result object
        A dataclass of arrays (ParticleSolution, DensitySolution, Comparison, ...).

    Returns
    -------
    str

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.results import ParticleSolution
    >>> print(ParticleSolution(t=np.linspace(0, 1, 3), x=np.zeros((3, 4, 2))))
    ParticleSolution()
      t: 3 output times in [0, 1]
      x (3, 4, 2)
    """
    name = type(obj).__name__
    head = [name]
    model = getattr(obj, "model", None)
    if model is not None:
        head.append(repr(model))
    info = getattr(obj, "info", None) or {}
    for key in ("model_name", "method", "flux", "mesh", "geometry", "n", "seeds"):
        if isinstance(info.get(key), (str, int, float)):
            head.append(f"{key}={info[key]}")
    lines = [f"{head[0]}({', '.join(head[1:])})"]
    t = getattr(obj, "t", None)
    if t is not None and np.size(t):
        lines.append(f"  t: {np.size(t)} output times in [{np.min(t):.6g}, {np.max(t):.6g}]")
    shapes = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in META or f.name == "t" or value is None:
            continue
        if _is_result(value):
            lines.append(f"  {f.name}: {summary(value).splitlines()[0]}")
        elif isinstance(value, np.ndarray):
            shapes.append(f"{f.name} {value.shape}")
        elif isinstance(value, (list, tuple)):
            shapes.append(f"{f.name} [{len(value)}]")
    for k in range(0, len(shapes), 4):
        lines.append("  " + ", ".join(shapes[k:k + 4]))
    return "\n".join(lines)


def flatten(obj) -> tuple[dict, dict]:
    """Every array of a result object and of its nested results, and its metadata as JSON text.

    Parameters
    ----------
    obj : result object

    Returns
    -------
    variables : dict
        name -> (dims, array); nested results' names are prefixed by their field name.
    attrs : dict
        name -> JSON text: the kinds, models and info.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.export import flatten
    >>> from meanfield.solvers.results import ParticleSolution
    >>> variables, attrs = flatten(ParticleSolution(t=np.zeros(1), x=np.zeros((1, 4, 2))))
    >>> variables["x"][0], attrs["kind"]
    (('t', 'token', 'coord'), 'ParticleSolution')
    """
    variables: dict[str, Any] = {}
    attrs: dict[str, str] = {}
    _collect(obj, "", variables, attrs)
    return variables, attrs


def unflatten(cls, arrays: dict, attrs: dict):
    """Rebuild a result object from ``flatten``'s output.

    Parameters
    ----------
    cls : type
        The result class.
    arrays : dict
        name -> array.
    attrs : dict
        name -> JSON text, from ``flatten``.

    Returns
    -------
    cls instance

    Raises
    ------
    ValueError
        When the attributes hold another kind of result.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.export import flatten, unflatten
    >>> from meanfield.solvers.results import ParticleSolution
    >>> variables, attrs = flatten(ParticleSolution(t=np.zeros(1), x=np.ones((1, 4, 2))))
    >>> unflatten(ParticleSolution, {k: a for k, (_, a) in variables.items()}, attrs).x.shape
    (1, 4, 2)
    """
    return _rebuild(cls, arrays, attrs, "")


def _collect(obj, prefix: str, variables: dict, attrs: dict) -> None:
    attrs[prefix + "kind"] = type(obj).__name__
    for f in fields(obj):
        value = getattr(obj, f.name)
        key = prefix + f.name
        if value is None:
            continue
        if f.name == "model":
            attrs[key] = json.dumps(value.to_dict())
        elif f.name == "info":
            attrs[key] = json.dumps(value, default=str)
        elif _is_result(value):
            _collect(value, key + "_", variables, attrs)
        else:
            array = np.asarray(value)
            variables[key] = (_dims(f.name, array), array)


def to_xarray(obj):
    """The result object as an ``xarray.Dataset`` (layout in the module docstring).

    Parameters
    ----------
    obj : result object

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ImportError
        When xarray is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.export import to_xarray
    >>> from meanfield.solvers.results import ParticleSolution
    >>> ds = to_xarray(ParticleSolution(t=np.arange(2.0), x=np.zeros((2, 4, 3))))
    >>> dict(ds.sizes)
    {'t': 2, 'token': 4, 'coord': 3}
    """
    xr = require("xarray", "to_xarray")
    variables, attrs = flatten(obj)
    t = variables.pop("t")
    return xr.Dataset(variables, coords={"t": t}, attrs=attrs)


def _rebuild(cls, data, attrs, prefix: str):
    kind = attrs.get(prefix + "kind")
    if kind != cls.__name__:
        raise ValueError(f"the dataset holds a {kind}, not a {cls.__name__}")
    kwargs = {}
    for f in fields(cls):
        key = prefix + f.name
        if f.name == "model" and key in attrs:
            kwargs[f.name] = model_from_dict(json.loads(attrs[key]))
        elif f.name == "info" and key in attrs:
            kwargs[f.name] = json.loads(attrs[key])
        elif key + "_kind" in attrs:
            kwargs[f.name] = _rebuild(_result_class(attrs[key + "_kind"]), data, attrs, key + "_")
        elif key in data:
            kwargs[f.name] = np.asarray(getattr(data[key], "values", data[key]))
    return cls(**kwargs)


def _result_class(kind: str):
    cls = RESULT_KINDS.get(kind)
    if not isinstance(cls, type):
        raise ValueError(f"unknown result kind {kind!r} in the dataset")
    return cls


def from_xarray(cls, dataset):
    """Rebuild a result object from ``to_xarray``'s Dataset.

    Parameters
    ----------
    cls : type
        The result class.
    dataset : xarray.Dataset

    Returns
    -------
    cls instance

    Raises
    ------
    TypeError
        When ``dataset`` is not a Dataset.
    ValueError
        When it holds another kind of result.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.export import from_xarray, to_xarray
    >>> from meanfield.solvers.results import ParticleSolution
    >>> sol = ParticleSolution(t=np.arange(2.0), x=np.zeros((2, 4, 3)))
    >>> from_xarray(ParticleSolution, to_xarray(sol)).x.shape
    (2, 4, 3)
    """
    xr = require("xarray", "from_xarray")
    if not isinstance(dataset, xr.Dataset):
        raise TypeError(f"dataset must be an xarray.Dataset, got {type(dataset).__name__}")
    return unflatten(cls, {name: dataset[name] for name in dataset.variables}, dict(dataset.attrs))


#: the global attribute holding the SHA-256 of a netCDF file's content (``content_digest``)
DIGEST = "meanfield_sha256"


def content_digest(dataset) -> str:
    """SHA-256 of a Dataset's variables (names, dimensions, shapes and values in canonical dtypes:
    integers as int64, reals as float64, booleans as uint8, so that a netCDF3 writer's int32 and
    int8 encodings give the same digest) and of its attributes, ``DIGEST`` excluded."""
    digest = hashlib.sha256()
    for name in sorted(dataset.variables):
        values = np.asarray(dataset[name].values)
        kind = values.dtype.kind
        canonical = {"b": np.uint8, "i": np.int64, "u": np.int64, "f": np.float64, "c": np.complex128}.get(kind)
        data = np.ascontiguousarray(values, dtype=canonical).tobytes() if canonical else str(values.tolist()).encode()
        header = [name, list(dataset[name].dims), list(values.shape), {"u": "i"}.get(kind, kind)]
        digest.update(json.dumps(header).encode())
        digest.update(data)
    attrs = {key: str(value) for key, value in dataset.attrs.items() if key != DIGEST}
    digest.update(json.dumps(attrs, sort_keys=True).encode())
    return digest.hexdigest()


def to_netcdf(obj, path) -> None:
    """Write ``to_xarray(obj)`` to a netCDF file, atomically, with a digest of its content.

    The SHA-256 of the content (``content_digest``) goes into the global attribute
    ``meanfield_sha256``, checked on load (the SciPy netCDF3 engine has no checksums of its own).

    Parameters
    ----------
    obj : result object
    path : str or path

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> from meanfield.solvers.export import from_netcdf, to_netcdf
    >>> from meanfield.solvers.results import ParticleSolution
    >>> path = os.path.join(tempfile.mkdtemp(), "run.nc")
    >>> to_netcdf(ParticleSolution(t=np.arange(2.0), x=np.zeros((2, 4, 3))), path)
    >>> from_netcdf(ParticleSolution, path).t
    array([0., 1.])
    """
    dataset = to_xarray(obj)
    dataset.attrs[DIGEST] = content_digest(dataset)
    write_file(path, lambda fh: dataset.to_netcdf(fh.name))


def from_netcdf(cls, path, verify=True):
    """Read a result object written by ``to_netcdf``.

    Parameters
    ----------
    cls : type
        The result class.
    path : str or path
    verify : bool
        Check the content against its stored digest.

    Returns
    -------
    cls instance

    Raises
    ------
    ValueError
        Naming the file, if it cannot be read or (``verify``) its content does not match its digest.

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> from meanfield.solvers.export import from_netcdf, to_netcdf
    >>> from meanfield.solvers.results import DensitySolution
    >>> sol = DensitySolution(t=np.zeros(1), points=np.eye(2), areas=np.ones(2), rho=np.ones((1, 2)),
    ...                       mass=np.ones(1), energy=np.ones(1))
    >>> path = os.path.join(tempfile.mkdtemp(), "rho.nc")
    >>> to_netcdf(sol, path)
    >>> from_netcdf(DensitySolution, path).rho
    array([[1., 1.]])
    """
    xr = require("xarray", "from_netcdf")
    path = os.fspath(path)
    try:
        with xr.open_dataset(path) as dataset:
            dataset = dataset.load()
        if verify and dataset.attrs.get(DIGEST) != content_digest(dataset):
            raise ValueError("its content does not match its stored SHA-256 (damaged, altered, or written "
                             "without one; from_netcdf(path, verify=False) reads it anyway)")
        return from_xarray(cls, dataset)
    except ImportError:
        raise
    except Exception as exc:        # the netCDF parsers raise many kinds on damaged bytes
        raise ValueError(f"{path} is not a readable {cls.__name__} netCDF file ({type(exc).__name__}: "
                         f"{exc})") from None
