"""Short ``repr``s for result dataclasses of the analysis and mathematics layers: the class, its
scalars and the shapes of its arrays, never the arrays themselves (``print`` of a 900-point measure
is one line). The engines' results have their own (``meanfield.solvers.export.summary``)."""
from dataclasses import fields

import numpy as np

__all__ = ["short_repr"]


def short_repr(obj: object) -> str:
    """One line naming a dataclass's fields: arrays by shape, nested results by class, scalars and
    short tuples by value.

    Parameters
    ----------
    obj : dataclass instance

    Returns
    -------
    str

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> import numpy as np
    >>> from meanfield.summaries import short_repr
    >>> @dataclass
    ... class Atoms:
    ...     points: np.ndarray
    ...     moved: float
    >>> short_repr(Atoms(points=np.zeros((900, 3)), moved=0.25))
    'Atoms(points: (900, 3), moved=0.25)'
    """
    parts = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, np.ndarray):
            parts.append(f"{f.name}: {value.shape}")
        elif isinstance(value, (int, float, str, bool, np.number)) or value is None:
            parts.append(f"{f.name}={value:.4g}" if isinstance(value, (float, np.floating)) else f"{f.name}={value!r}")
        elif isinstance(value, tuple) and len(value) <= 8:
            parts.append(f"{f.name}={value!r}")
        elif isinstance(value, (list, tuple, dict)):
            parts.append(f"{f.name}: {type(value).__name__} of {len(value)}")
        else:
            parts.append(f"{f.name}: {type(value).__name__}")
    return f"{type(obj).__name__}({', '.join(parts)})"
