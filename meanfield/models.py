r"""Self-attention dynamics on the sphere: the SA and USA models.

.. math::

    \text{SA:} \quad \dot x_i = P_{x_i}
    \frac{\sum_j e^{\beta\langle Qx_i, Kx_j\rangle} V x_j}{\sum_k e^{\beta\langle Qx_i, Kx_k\rangle}},
    \qquad
    \text{USA:} \quad \dot x_i = P_{x_i} \frac1n \sum_j e^{\beta\langle Qx_i, Kx_j\rangle} V x_j,

with :math:`P_x = I - x x^\top`. ``causal=True`` masks the attention (Karagodin–Polyanskiy–Rigollet,
arXiv:2411.04990): token i attends to the tokens j <= i only (the order of the points), the sums
run over j, k <= i, and USA divides by i instead of n (docs/causal.md says why).

Q, K, V are d×d matrices or scalars (multiples of the identity, so
``V=-1`` is the repulsive model in every dimension); ``None`` means the identity. Any of
β, Q, K, V may also be a callable of t (weights that depend on the layer); ``model.at(t)`` is
then the constant model at time t.

The full Transformer block (paper eqs. ``multihead`` and ``albert``),

.. math::

    \dot x_i = P_{x_i} \Big( \sum_h [\text{head } h\text{'s attention average of } V_h x_j] + W \sigma(A x_i + b) \Big),

is ``MultiHead([head, ...], feedforward=FeedForward(W, A, b, activation))``.
"""
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import erfc

from .checks import as_beta, as_float_array

__all__ = ["SA", "USA", "Hardmax", "MultiHead", "FeedForward", "model_from_dict", "as_model"]


def _as_matrix(value, name):
    if value is None:
        return None
    arr = as_float_array(value, name)
    if arr.ndim == 0:
        return float(arr)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a scalar or a square (d, d) matrix, d >= 1; got shape {arr.shape}")
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
    causal: bool = False

    def __post_init__(self):
        if not isinstance(self.causal, (bool, np.bool_)):
            raise TypeError(f"causal must be True or False; got {self.causal!r}")
        object.__setattr__(self, "causal", bool(self.causal))
        if not callable(self.beta):
            object.__setattr__(self, "beta", as_beta(self.beta))
        for name in "QKV":
            value = getattr(self, name)
            if not callable(value):
                object.__setattr__(self, name, _as_matrix(value, name))
        shapes = {n: getattr(self, n).shape for n in "QKV" if isinstance(getattr(self, n), np.ndarray)}
        if len(set(shapes.values())) > 1:
            raise ValueError("Q, K and V must act on the same R^d; got shapes "
                             + ", ".join(f"{n} {shape}" for n, shape in shapes.items()))

    @property
    def is_time_dependent(self):
        """Whether any of β, Q, K, V is a callable of t."""
        return any(callable(getattr(self, n)) for n in ("beta", "Q", "K", "V"))

    def at(self, t):
        """The constant model at time t: each callable weight evaluated (and validated) at t."""
        if not self.is_time_dependent:
            return self
        values = {}
        for n in ("beta", "Q", "K", "V"):
            value = getattr(self, n)
            values[n] = value(t) if callable(value) else value
        try:
            return type(self)(**values, causal=self.causal)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.name} weights at t = {t:g}: {exc}") from None

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
        """Plain description (for .npz files and reports); a callable weight is named, not stored.
        "causal" appears only for causal models (the descriptions of the others are unchanged)."""
        out = {"model": self.name, "beta": _describe(self.beta)}
        for n in "QKV":
            m = getattr(self, n)
            out[n] = None if m is None else _describe(m) if callable(m) or isinstance(m, float) \
                else np.asarray(m).tolist()
        if self.causal:
            out["causal"] = True
        return out

    def __eq__(self, other):
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(repr(self.to_dict()))

    def __repr__(self):
        extra = "".join(f", {n}={_describe(getattr(self, n))!r}" for n in "QKV" if getattr(self, n) is not None)
        beta = self.beta if callable(self.beta) else f"{self.beta:g}"
        causal = ", causal=True" if self.causal else ""
        return f"{self.name}(beta={_describe(beta)}{extra}{causal})"


@dataclass(frozen=True, eq=False, repr=False)
class SA(_Attention):
    r"""Softmax self-attention: tokens move towards the attention-weighted mean.

    .. math::

        \dot x_i = P_{x_i}
        \frac{\sum_j e^{\beta\langle Qx_i, Kx_j\rangle} V x_j}{\sum_k e^{\beta\langle Qx_i, Kx_k\rangle}}.

    Parameters
    ----------
    beta : float or callable
        Inverse temperature β >= 0, or a callable of t.
    Q, K, V : None, float, array_like (d, d) or callable
        Query, key and value matrices; a scalar is a multiple of the identity (``V=-1`` is the
        repulsive model in any dimension), None the identity, a callable a weight depending on t.
    causal : bool
        Token i attends to the tokens j <= i only (the order of the points).

    Raises
    ------
    ValueError
        If β < 0, a matrix is not square, has NaN or inf entries, or the matrices differ in size.
    TypeError
        If causal is not a bool.

    Examples
    --------
    >>> import meanfield as mf
    >>> mf.SA(beta=4.0)
    SA(beta=4)
    >>> model = mf.SA(beta=1.0, V=-1)
    >>> model.is_isotropic, model.sign
    (True, -1.0)
    >>> mf.SA(beta=lambda t: 1.0 + t).at(2.0)
    SA(beta=3)
    """

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "normalised", True)


@dataclass(frozen=True, eq=False, repr=False)
class USA(_Attention):
    r"""Unnormalised self-attention: weights e^{β⟨Qx, Ky⟩}/n without the softmax denominator.

    .. math::

        \dot x_i = P_{x_i} \frac1n \sum_j e^{\beta\langle Qx_i, Kx_j\rangle} V x_j.

    Parameters
    ----------
    beta : float or callable
        Inverse temperature β >= 0, or a callable of t.
    Q, K, V : None, float, array_like (d, d) or callable
        Query, key and value matrices; a scalar is a multiple of the identity (``V=-1`` is the
        repulsive model in any dimension), None the identity, a callable a weight depending on t.
    causal : bool
        Token i attends to the tokens j <= i only (the order of the points).

    Raises
    ------
    ValueError
        If β < 0, a matrix is not square, has NaN or inf entries, or the matrices differ in size.
    TypeError
        If causal is not a bool.

    Examples
    --------
    >>> import meanfield as mf
    >>> model = mf.USA(beta=2.0, causal=True)
    >>> model, model.normalised
    (USA(beta=2, causal=True), False)
    >>> model.to_dict()
    {'model': 'USA', 'beta': 2.0, 'Q': None, 'K': None, 'V': None, 'causal': True}
    """

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "normalised", False)


@dataclass(frozen=True, eq=False, repr=False, init=False)
class Hardmax(_Attention):
    r"""The β → ∞ limit of SA (paper §9.3, ``e:maineq``): each token moves towards the mean of the tokens
    it attends to most.

    .. math::

        \dot x_i = P_{x_i} \frac{1}{|C_i|} \sum_{j \in C_i} V x_j, \qquad
        C_i = \operatorname{argmax}_j \langle Q x_i, K x_j\rangle \quad (j \le i \text{ if causal}).

    Ties: j ∈ C_i when ⟨Q x_i, K x_j⟩ >= max_k ⟨Q x_i, K x_k⟩ - ``tie`` (absolute), and the tied tokens
    share the weight equally, which is the β → ∞ limit of the softmax weights at an exact tie. With
    QᵀK = I every token attends to itself only and nothing moves. Integrated by
    ``meanfield.solvers.hardmax.solve`` (event-aware steps: the field jumps where C_i changes).
    ``beta`` is fixed at inf.

    Parameters
    ----------
    Q, K, V : None, float or array_like (d, d)
        Constant query, key and value matrices (scalars: multiples of the identity; None: identity).
    tie : float
        Tolerance in [0, 1e-3) under which inner products count as tied.
    causal : bool
        Token i attends to the tokens j <= i only.

    Raises
    ------
    ValueError
        If tie is out of range or a weight is a callable of t.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> model = mf.Hardmax(Q=np.diag([1.0, -1.0]))
    >>> model.beta, model.is_isotropic
    (inf, False)
    """
    tie: float = 1e-12

    def __init__(self, Q: object = None, K: object = None, V: object = None, *, tie: float = 1e-12,
                 causal: bool = False):
        for name, value in (("beta", 1.0), ("Q", Q), ("K", K), ("V", V), ("tie", tie), ("causal", causal)):
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "beta", np.inf)
        object.__setattr__(self, "normalised", True)
        if not isinstance(self.tie, (int, float)) or not 0 <= self.tie < 1e-3:
            raise ValueError(f"tie must be a number in [0, 1e-3); got {self.tie!r}")
        if self.is_time_dependent:
            raise ValueError("Hardmax weights must be constant matrices or scalars")

    def to_dict(self):
        out = super().to_dict()
        out.pop("beta")
        out["tie"] = float(self.tie)
        return out

    def __repr__(self):
        extra = [f"{n}={_describe(getattr(self, n))!r}" for n in "QKV" if getattr(self, n) is not None]
        extra += [f"tie={self.tie:g}"] if self.tie != 1e-12 else []
        extra += ["causal=True"] if self.causal else []
        return f"Hardmax({', '.join(extra)})"


ACTIVATIONS = ("relu", "gelu", "tanh")


def _describe(value):
    """A float as itself; a callable weight by name (it cannot be stored in a file)."""
    if callable(value):
        return f"callable {getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
    return float(value) if isinstance(value, (float, int)) else value


@dataclass(frozen=True, eq=False)
class FeedForward:
    r"""Perceptron term of the Transformer block (paper eq. ``albert``), projected onto the tangent space
    like the attention.

    .. math::

        x \mapsto P_x\, W \sigma(A x + b), \qquad \sigma \in \{\mathrm{relu}, \mathrm{gelu}, \tanh\},
        \quad \mathrm{gelu}(z) = z \Phi(z).

    Parameters
    ----------
    W : array_like (d, m) or callable
        Output weights (a callable of t for a time-dependent term).
    A : array_like (m, d) or callable
        Input weights.
    b : array_like (m,) or callable
        Biases.
    activation : {"relu", "gelu", "tanh"}
        σ (Φ in "gelu" is the normal distribution function).

    Raises
    ------
    ValueError
        If the activation is unknown or the shapes do not fit together.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> ff = mf.FeedForward(W=np.eye(2), A=np.eye(2), b=[0.0, -1.0], activation="relu")
    >>> ff.field(np.array([[0.6, 0.8]]))
    array([[0.6, 0. ]])
    """
    W: object
    A: object
    b: object
    activation: str = "relu"

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}; got {self.activation!r}")
        if not self.is_time_dependent:
            self._validated()

    @property
    def is_time_dependent(self):
        return any(callable(getattr(self, n)) for n in "WAb")

    def _validated(self):
        W, A, b = (as_float_array(getattr(self, n), n) for n in "WAb")
        if W.ndim != 2 or A.ndim != 2 or b.ndim != 1 or A.shape != (W.shape[1], W.shape[0]) \
                or b.shape != (A.shape[0],):
            raise ValueError(f"FeedForward needs W (d, m), A (m, d), b (m,); got W {W.shape}, A {A.shape}, "
                             f"b {b.shape}")
        return W, A, b

    def at(self, t):
        """The constant term at time t."""
        if not self.is_time_dependent:
            return self
        return FeedForward(*(getattr(self, n)(t) if callable(getattr(self, n)) else getattr(self, n)
                             for n in "WAb"), activation=self.activation)

    def field(self, x):
        """W σ(A x + b) for points x (..., d), before the tangent projection."""
        W, A, b = self._validated()
        if W.shape[0] != x.shape[-1]:
            raise ValueError(f"FeedForward.W has {W.shape[0]} rows but the points live in R^{x.shape[-1]}")
        z = x @ A.T + b
        if self.activation == "relu":
            s = np.maximum(z, 0.0)
        elif self.activation == "tanh":
            s = np.tanh(z)
        else:
            s = 0.5 * z * erfc(-z / np.sqrt(2.0))
        return s @ W.T

    def to_dict(self):
        out = {"activation": self.activation}
        for n in "WAb":
            m = getattr(self, n)
            out[n] = _describe(m) if callable(m) else np.asarray(m, dtype=float).tolist()
        return out


@dataclass(frozen=True, eq=False)
class MultiHead:
    r"""Several attention heads (SA or USA, each with its own β, Q, K, V) and an optional feed-forward term.

    .. math::

        \dot x_i = P_{x_i} \Big( \sum_h X_h[\mu](x_i) + W \sigma(A x_i + b) \Big).

    Parameters
    ----------
    heads : sequence of SA or USA
        The heads (at least one).
    feedforward : FeedForward, optional
        The perceptron term.

    Raises
    ------
    ValueError
        If there is no head.
    TypeError
        If a head is not SA/USA or feedforward is not a FeedForward.

    Examples
    --------
    >>> import meanfield as mf
    >>> model = mf.MultiHead([mf.SA(beta=1.0), mf.USA(beta=2.0, V=-1)])
    >>> model
    MultiHead([SA(beta=1), USA(beta=2, V=-1.0)])
    >>> model.is_isotropic
    True
    """
    heads: tuple
    feedforward: object = None

    def __post_init__(self):
        heads = tuple(self.heads) if isinstance(self.heads, (list, tuple)) else None
        if not heads:
            raise ValueError("MultiHead needs a non-empty list of SA/USA heads")
        for h in heads:
            if not isinstance(h, _Attention):
                raise TypeError(f"every head must be meanfield.SA(...) or meanfield.USA(...); "
                                f"got {type(h).__name__}")
        if self.feedforward is not None and not isinstance(self.feedforward, FeedForward):
            raise TypeError(f"feedforward must be meanfield.FeedForward(...) or None; "
                            f"got {type(self.feedforward).__name__}")
        object.__setattr__(self, "heads", heads)

    name = "MultiHead"

    @property
    def is_time_dependent(self):
        return any(h.is_time_dependent for h in self.heads) or bool(
            self.feedforward is not None and self.feedforward.is_time_dependent)

    @property
    def is_isotropic(self):
        """Every head has Q^T K = I and V = ±I, and there is no feed-forward term."""
        return self.feedforward is None and all(h.is_isotropic for h in self.heads)

    def at(self, t):
        if not self.is_time_dependent:
            return self
        ff = None if self.feedforward is None else self.feedforward.at(t)
        return MultiHead(tuple(h.at(t) for h in self.heads), ff)

    def to_dict(self):
        return {"model": "MultiHead", "heads": [h.to_dict() for h in self.heads],
                "feedforward": None if self.feedforward is None else self.feedforward.to_dict()}

    def __eq__(self, other):
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(repr(self.to_dict()))

    def __repr__(self):
        ff = "" if self.feedforward is None else f", feedforward=FeedForward({self.feedforward.activation!r})"
        return f"MultiHead([{', '.join(map(repr, self.heads))}]{ff})"


def model_from_dict(spec: dict) -> "SA | USA | Hardmax | MultiHead":
    r"""Rebuild a model from its description: the inverse of ``model.to_dict()``.

    .. math::

        \texttt{model\_from\_dict}(m.\texttt{to\_dict}()) = m.

    Parameters
    ----------
    spec : dict
        "model" ("SA", "USA", "Hardmax" or "MultiHead") and, for SA/USA, "beta" and optionally
        "Q", "K", "V" and "causal"; for MultiHead "heads" and "feedforward".

    Returns
    -------
    SA, USA, Hardmax or MultiHead

    Raises
    ------
    TypeError
        If spec is not a dict.
    ValueError
        If the model is unknown, "beta" is missing, a key is unknown, or the weights were callables
        (which cannot be rebuilt).

    Examples
    --------
    >>> import meanfield as mf
    >>> mf.model_from_dict({"model": "SA", "beta": 4.0, "V": -1.0})
    SA(beta=4, V=-1.0)
    >>> model = mf.MultiHead([mf.SA(beta=1.0)])
    >>> mf.model_from_dict(model.to_dict()) == model
    True
    """
    if not isinstance(spec, dict):
        raise TypeError(f"spec must be a dict such as model.to_dict(); got {type(spec).__name__}")
    if spec.get("model") == "MultiHead":
        ff = spec.get("feedforward")
        return MultiHead([model_from_dict(h) for h in spec["heads"]],
                         None if ff is None else FeedForward(ff["W"], ff["A"], ff["b"], ff["activation"]))
    name = spec.get("model")
    if name == "Hardmax":
        return Hardmax(**{n: None if spec.get(n) is None else np.asarray(spec[n], dtype=float) if np.ndim(spec[n])
                          else float(spec[n]) for n in "QKV"}, tie=spec.get("tie", 1e-12),
                       causal=spec.get("causal", False))
    cls = {"SA": SA, "USA": USA}.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown model {spec.get('model')!r}; choose 'SA', 'USA' or 'MultiHead'")
    if "beta" not in spec:
        raise ValueError("spec has no 'beta'; a model description must give the inverse temperature")
    unknown = sorted(set(spec) - {"model", "beta", "Q", "K", "V", "causal"})
    if unknown:
        raise ValueError(f"spec has unknown key(s) {', '.join(map(repr, unknown))}; known: model, beta, Q, K, V, "
                         f"causal")
    if any(isinstance(spec.get(n), str) for n in ("beta", "Q", "K", "V")):
        raise ValueError(f"{spec['model']} with time-dependent weights ({spec}) cannot be rebuilt from its "
                         f"description; pass the model again")
    mats = {}
    for n in "QKV":
        m = spec.get(n)
        mats[n] = None if m is None else np.asarray(m, dtype=float) if np.ndim(m) else float(m)
    return cls(beta=spec["beta"], **mats, causal=spec.get("causal", False))


def as_model(model: object, *, multihead: bool = False, time_dependent: bool = False, causal: bool = False,
             name: str = "model") -> "SA | USA | MultiHead":
    """Check that ``model`` is an attention model a computation accepts, and return it.

    SA/USA always; MultiHead only where ``multihead``; weights depending on t only where
    ``time_dependent`` (the particle solver); causal models (or heads) only where ``causal`` (the
    particle solver and ``solvers.causal``): elsewhere a clear error.

    Parameters
    ----------
    model : object
        The model to check.
    multihead : bool
        Accept MultiHead.
    time_dependent : bool
        Accept callable weights.
    causal : bool
        Accept causal attention.
    name : str
        Name of the argument in error messages.

    Returns
    -------
    SA, USA or MultiHead
        ``model`` itself.

    Raises
    ------
    TypeError
        If model is not an accepted kind (Hardmax never: it has its own integrator).
    ValueError
        If model is time-dependent or causal where that is not supported.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.models import as_model
    >>> as_model(mf.SA(beta=1.0))
    SA(beta=1)
    >>> as_model(mf.SA(beta=1.0, causal=True))
    Traceback (most recent call last):
    ...
    ValueError: model SA(beta=1, causal=True) is causal ...
    """
    kinds = (_Attention, MultiHead) if multihead else (_Attention,)
    if isinstance(model, Hardmax):
        raise TypeError(f"{name}: Hardmax (β = ∞) has its own integrator, meanfield.solvers.hardmax.solve")
    if not isinstance(model, kinds):
        allowed = "meanfield.SA(...), meanfield.USA(...)" + (" or meanfield.MultiHead(...)" if multihead else "")
        if isinstance(model, MultiHead):
            raise TypeError(f"{name}: MultiHead models are supported by the particle, circle and sphere solvers only; "
                            f"here {name} must be {allowed}")
        raise TypeError(f"{name} must be {allowed}; got {type(model).__name__}")
    if model.is_time_dependent and not time_dependent:
        raise ValueError(f"{name} {model!r} has weights that depend on t; only meanfield.solvers.particles "
                         f"supports them (use model.at(t) for the model at one time)")
    if not causal and any(h.causal for h in getattr(model, "heads", (model,))):
        raise ValueError(f"{name} {model!r} is causal (token i attends to j <= i); only meanfield.solvers.particles "
                         f"and meanfield.solvers.causal (the density on [0, 1] x S^1) support causal attention")
    return model

