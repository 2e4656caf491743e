"""Self-attention dynamics on the sphere: the SA and USA models.

SA  (softmax):      dx_i/dt = P_{x_i} sum_j e^{β<Qx_i,Kx_j>} V x_j / sum_k e^{β<Qx_i,Kx_k>}
USA (unnormalised): dx_i/dt = P_{x_i} (1/n) sum_j e^{β<Qx_i,Kx_j>} V x_j

with P_x = I - x x^T.  Q, K, V are d×d matrices or scalars (multiples of the identity, so
``V=-1`` is the repulsive model in every dimension); ``None`` means the identity.
"""
from dataclasses import dataclass, field, replace

import numpy as np

from .checks import as_beta, as_float_array

__all__ = ["SA", "USA", "model_from_dict", "as_model"]


def _as_matrix(value, name):
    if value is None:
        return None
    arr = as_float_array(value, name)
    if arr.ndim == 0:
        return float(arr)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a scalar or a square (d, d) matrix; got shape {arr.shape}")
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class _Attention:
    beta: float = 1.0
    Q: object = None
    K: object = None
    V: object = None
    normalised: bool = field(init=False, default=True)

    def __post_init__(self):
        object.__setattr__(self, "beta", as_beta(self.beta))
        for name in "QKV":
            object.__setattr__(self, name, _as_matrix(getattr(self, name), name))

    @property
    def name(self):
        return type(self).__name__

    def _matrix(self, name, d):
        m = getattr(self, name)
        if m is None:
            return np.eye(d)
        if isinstance(m, float):
            return m * np.eye(d)
        if m.shape != (d, d):
            raise ValueError(f"{self.name}.{name} has shape {m.shape} but the points live in R^{d}")
        return np.asarray(m, dtype=np.float64)

    def interaction(self, d):
        """A = Q^T K, so that <Qx, Ky> = x^T A y; and V, both as (d, d) arrays."""
        Q, K, V = (self._matrix(n, d) for n in "QKV")
        return np.ascontiguousarray(Q.T @ K), np.ascontiguousarray(V)

    @property
    def attention_scalar(self):
        """a with Q^T K = a I if Q, K are scalars or None, else None."""
        if any(isinstance(getattr(self, n), np.ndarray) for n in "QK"):
            return None
        q = 1.0 if self.Q is None else self.Q
        k = 1.0 if self.K is None else self.K
        return q * k

    @property
    def value_scalar(self):
        """v with V = v I if V is a scalar or None, else None."""
        if isinstance(self.V, np.ndarray):
            return None
        return 1.0 if self.V is None else self.V

    @property
    def is_identity(self):
        """Q = K = V = I: the gradient-flow case of the energy E_β."""
        return self.attention_scalar == 1.0 and self.value_scalar == 1.0

    @property
    def is_isotropic(self):
        """Q^T K = I and V = ±I: the case the density solvers and fast summation treat."""
        return self.attention_scalar == 1.0 and self.value_scalar in (1.0, -1.0)

    @property
    def sign(self):
        """+1 for V = I (attractive), -1 for V = -I (repulsive)."""
        if not self.is_isotropic:
            raise ValueError(f"{self.name} has general Q, K, V; the sign is only defined for V = ±I")
        return self.value_scalar

    def with_beta(self, beta):
        return replace(self, beta=beta)

    def to_dict(self):
        """Plain description (for .npz files and reports)."""
        out = {"model": self.name, "beta": self.beta}
        for n in "QKV":
            m = getattr(self, n)
            out[n] = None if m is None else (m if isinstance(m, float) else np.asarray(m).tolist())
        return out

    def __eq__(self, other):
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(repr(self.to_dict()))

    def __repr__(self):
        extra = "".join(f", {n}={getattr(self, n)!r}" for n in "QKV" if getattr(self, n) is not None)
        return f"{self.name}(beta={self.beta:g}{extra})"


@dataclass(frozen=True, eq=False, repr=False)
class SA(_Attention):
    """Softmax self-attention: tokens move towards the attention-weighted mean."""

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "normalised", True)


@dataclass(frozen=True, eq=False, repr=False)
class USA(_Attention):
    """Unnormalised self-attention: weights e^{β<Qx,Ky>}/n without the softmax denominator."""

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "normalised", False)


def model_from_dict(spec):
    """Inverse of ``model.to_dict()``: needs "model" ("SA" or "USA") and "beta"; Q, K, V optional."""
    if not isinstance(spec, dict):
        raise TypeError(f"spec must be a dict such as model.to_dict(); got {type(spec).__name__}")
    name = spec.get("model")
    cls = {"SA": SA, "USA": USA}.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown model {spec.get('model')!r}; choose 'SA' or 'USA'")
    if "beta" not in spec:
        raise ValueError("spec has no 'beta'; a model description must give the inverse temperature")
    unknown = sorted(set(spec) - {"model", "beta", "Q", "K", "V"})
    if unknown:
        raise ValueError(f"spec has unknown key(s) {', '.join(map(repr, unknown))}; known: model, beta, Q, K, V")
    mats = {}
    for n in "QKV":
        m = spec.get(n)
        mats[n] = None if m is None else np.asarray(m, dtype=float) if np.ndim(m) else float(m)
    return cls(beta=spec["beta"], **mats)


def as_model(model):
    if not isinstance(model, _Attention):
        raise TypeError(f"model must be meanfield.SA(...) or meanfield.USA(...); got {type(model).__name__}")
    return model

