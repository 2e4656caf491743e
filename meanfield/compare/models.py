r"""The attention models a comparison takes: the named families, model files, and which energy is shown.

- ``random_weights``: the family of ``validation/phase_diagram_random.py``,
  Q = I, K = I + σ G/√d, V = I + σ H/√d (G, H i.i.d. N(0, 1) from a seed);
- ``load_model_file``: a TOML file with ``kind`` ("SA" or "USA"), ``beta`` and optional ``Q``, ``K``, ``V``
  (nested lists of numbers, or numbers), read as data;
- ``particle_energy`` and ``energy_note``: the energy of the tokens that matches the density solver's —
  E_β' for an isotropic kernel (Q^T K = c I, V = ±I: β' = cβ), E_V = (1/2β) ∬ e^{β⟨Qx, Ky⟩} dμ dμ where
  V = ±Q^T K is symmetric (the flow is then a gradient flow of it), NaN otherwise — and why.
"""
from __future__ import annotations

import os

try:
    import tomllib
except ModuleNotFoundError:      # Python 3.10: the same parser, as the package tomli
    import tomli as tomllib

import numpy as np
from numpy.typing import ArrayLike

from ..energy import energy
from ..models import SA, USA, as_model
from ..solvers import general_field
from ..solvers.full_model import energy_direction, isotropic_equivalent

__all__ = ["random_weights", "load_model_file", "model_from_options", "particle_energy", "energy_note",
           "ATTENTIONS"]

ATTENTIONS = ("identity", "random")
KINDS = {"SA": SA, "USA": USA}
FILE_KEYS = ("kind", "beta", "Q", "K", "V")


def random_weights(d: int, sigma: float, seed: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""(Q, K, V) = (I, I + σ G/√d, I + σ H/√d), G and H with i.i.d. N(0, 1) entries drawn from ``seed``.

    .. math::

        Q^\top K = I + \frac{\sigma}{\sqrt d} G, \qquad V = I + \frac{\sigma}{\sqrt d} H,

    (``validation/phase_diagram_random.py``'s family: the perturbation has operator norm O(σ) whatever d).

    Parameters
    ----------
    d : int
        The dimension.
    sigma : float
        σ >= 0.
    seed : int, sequence of int or numpy.random.Generator
        Passed to ``numpy.random.default_rng``.

    Returns
    -------
    Q, K, V : ndarray, shape (d, d)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.compare.models import random_weights
    >>> Q, K, V = random_weights(3, 0.0, 1)
    >>> bool(np.array_equal(K, np.eye(3)) and np.array_equal(V, np.eye(3)))
    True
    """
    rng = np.random.default_rng(seed)
    G, H = rng.standard_normal((2, d, d)) / np.sqrt(d)
    return np.eye(d), np.eye(d) + sigma * G, np.eye(d) + sigma * H


def load_model_file(path: str | os.PathLike) -> SA | USA:
    """The SA/USA model of a TOML model file: ``kind``, ``beta`` and optional ``Q``, ``K``, ``V``.

    Example file::

        kind = "SA"
        beta = 2.0
        Q = [[1.0, 0.0], [0.0, 1.0]]
        K = [[1.0, 0.3], [0.3, 2.0]]
        V = [[1.0, 0.3], [0.3, 2.0]]

    Parameters
    ----------
    path : str or PathLike

    Returns
    -------
    SA or USA

    Raises
    ------
    OSError
        If the file cannot be read.
    ValueError
        For TOML that does not parse, unknown keys, a missing or unknown kind or beta, or matrices the
        model refuses (not square, NaN, inf, different sizes).

    Examples
    --------
    >>> import tempfile, os
    >>> from meanfield.compare.models import load_model_file
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "model.toml")
    ...     with open(path, "w") as f:
    ...         _ = f.write('kind = "USA"\\nbeta = 1.5\\nV = [[1.0, 0.0], [0.0, 2.0]]\\n')
    ...     model = load_model_file(path)
    >>> model.beta, model.V.tolist()
    (1.5, [[1.0, 0.0], [0.0, 2.0]])
    """
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"model file {os.fspath(path)!r} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise ValueError(f"model file {os.fspath(path)!r}: unknown keys {unknown}; a model file has "
                         f"{', '.join(FILE_KEYS)}")
    if data.get("kind") not in KINDS or "beta" not in data:
        raise ValueError(f"model file {os.fspath(path)!r} needs kind = \"SA\" or \"USA\" and beta; got kind = "
                         f"{data.get('kind')!r}, beta {'given' if 'beta' in data else 'missing'}")
    try:
        return KINDS[data["kind"]](beta=data["beta"], **{n: data[n] for n in "QKV" if n in data})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model file {os.fspath(path)!r}: {exc}") from None


def model_from_options(kind: str, beta: float, d: int, *, repulsive: bool = False, model_file: str | None = None,
                       attention: str = "identity", sigma: float = 0.3, seed: object = 0) -> SA | USA:
    """The model of the command-line options of ``meanfield compare`` / ``meanfield convergence``.

    ``model_file`` (``load_model_file``) wins over everything else; ``attention="random"`` is
    ``kind(beta, Q, K, V)`` with ``random_weights(d, sigma, seed)`` (V negated with ``repulsive``);
    ``"identity"`` is ``kind(beta)`` (V = -I with ``repulsive``).

    Parameters
    ----------
    kind : {"SA", "USA"}
    beta : float
    d : int
        The dimension of the geometry (2 on the circle, 3 on the sphere).
    repulsive : bool
    model_file : str, optional
    attention : {"identity", "random"}
    sigma : float
    seed : int

    Returns
    -------
    SA or USA

    Raises
    ------
    ValueError
        For an unknown attention or kind, σ < 0, or a bad model file.

    Examples
    --------
    >>> from meanfield.compare.models import model_from_options
    >>> model_from_options("SA", 2.0, 2, repulsive=True)
    SA(beta=2, V=-1.0)
    >>> model_from_options("SA", 2.0, 2, attention="random", sigma=0.3, seed=1).is_isotropic
    False
    """
    if model_file is not None:
        return load_model_file(model_file)
    if attention not in ATTENTIONS or kind not in KINDS:
        raise ValueError(f"attention must be one of {ATTENTIONS} and kind one of {tuple(KINDS)}; got "
                         f"{attention!r}, {kind!r}")
    if attention == "identity":
        return KINDS[kind](beta=beta, V=-1.0 if repulsive else None)
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0; got {sigma!r}")
    Q, K, V = random_weights(d, sigma, seed)
    return KINDS[kind](beta=beta, Q=Q, K=K, V=-V if repulsive else V)


def particle_energy(model: SA | USA, x: ArrayLike, weights: ArrayLike | None = None,
                    summation: str = "auto") -> float:
    """The energy of the tokens that the density solver reports for ``model`` (``energy_note``).

    Parameters
    ----------
    model : SA or USA
    x : array_like, shape (n, d)
        Unit vectors.
    weights : array_like, shape (n,), optional
        Token weights (default 1/n), divided by their total.
    summation : {"auto", "direct", "fast"}

    Returns
    -------
    float
        E_β' (isotropic kernels), E_V (V = ±Q^T K symmetric) or NaN.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.compare.models import particle_energy
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> bool(np.isclose(particle_energy(mf.SA(1.0, Q=2.0), x), np.exp(2.0) / 4))
    True
    """
    model = as_model(model)
    x = np.asarray(x, dtype=float)
    reduced = isotropic_equivalent(model, x.shape[1])
    if reduced is not None:
        return energy(x, reduced.beta, weights=weights, summation=summation)
    w = np.full(x.shape[0], 1.0 / x.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    return general_field.energy(model, x, w / w.sum(), "expansion" if summation == "fast" else summation)[0]


def energy_note(model: SA | USA, d: int) -> str:
    """Which energy a comparison shows for ``model`` on S^{d-1}, and why.

    Parameters
    ----------
    model : SA or USA
    d : int

    Returns
    -------
    str

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.compare.models import energy_note
    >>> energy_note(mf.SA(2.0), 2)
    'E_beta, non-decreasing (the flow is its gradient ascent)'
    >>> energy_note(mf.SA(2.0, Q=1.5), 2)
    "E_beta' with beta' = 3 (Q^T K = 1.5 I, V = I: the isotropic kernel at beta' = c beta), non-decreasing"
    >>> energy_note(mf.SA(2.0, V=np.diag([1.0, 2.0])), 2)
    'none (NaN): not a gradient flow: V is neither Q^T K nor -Q^T K'
    """
    model = as_model(model)
    reduced = isotropic_equivalent(model, d)
    if reduced is not None:
        A = model.interaction(d)[0]
        sign = reduced.sign
        trend = "non-decreasing" if sign > 0 else "non-increasing"
        if A[0, 0] == 1:                 # the model itself is isotropic: Q^T K = I
            return f"E_beta, {trend} (the flow is its gradient {'ascent' if sign > 0 else 'descent'})"
        return (f"E_beta' with beta' = {reduced.beta:g} (Q^T K = {A[0, 0]:g} I, V = {'-' if sign < 0 else ''}I: the "
                f"isotropic kernel at beta' = c beta), {trend}")
    sign, reason = energy_direction(model, d)
    if sign == 0:
        return f"none (NaN): {reason}"
    return f"E_V = (1/2 beta) sum m_i m_j exp(beta <Q x_i, K x_j>), {reason}"
