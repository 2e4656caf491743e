"""PyTorch backend of the particle solver: the direct field and the fixed steps on a torch device.

For B systems of n tokens x_i (B, n, d) with weights w_j >= 0, scores s_ij = β <x_i, A x_j>
(A = Q^T K) and a causal mask (j <= i) when asked for:

    M_i = max_{j: w_j > 0} s_ij,   e_ij = w_j e^{s_ij - M_i},   z_i = sum_j e_ij,   G_i = sum_j e_ij x_j
    X_i = P_{x_i} V G_i / z_i  (SA)   or   P_{x_i} V G_i e^{M_i} / W_i  (USA; W_i = 1, or sum_{j<=i} w_j if causal)
    log Φ_i = M_i + log z_i

the formulas of ``small`` and ``kernels``, written as batched matrix products (``torch.matmul``), so
that they run on a CUDA device when there is one (``device=None``) and on the CPU otherwise.  The
score matrix is formed in blocks of at most ``BLOCK`` entries (whole systems at a time where they
fit, else blocks of targets), so memory stays O(BLOCK + B n d) for any n.

``Field`` holds one SA/USA head on a device; ``Field.advance`` takes forward Euler or RK4 steps with
each stage's field evaluated at the renormalised stage and x <- x/|x| after each step (the scheme of
``stepping.fixed_step`` with ``project=normalise``), the state staying on the device.

Precision: float64 throughout by default.  ``dtype=float32`` forms the scores, exponentials and the
value products in single precision (what GPUs are fast at); the shifts e^{M}, the sums z, the
projection and the state stay float64, so resume and the USA factor e^{M} (beyond float32's range
for β |A| > 88) are unaffected.

PyTorch is optional (``pip install "meanfield-attention[gpu]"``, docs/gpu.md); it is imported
when a ``Field`` is made, and a missing install is reported with that command.
"""
import numpy as np

BLOCK = 1 << 25       # score entries formed at once (256 MiB in float64)
PRECISIONS = (np.float64, np.float32)


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("backend='torch' needs PyTorch: pip install \"meanfield-attention[gpu]\" (or a CUDA build "
                          "of torch, see docs/gpu.md); or use the default backend='numba'") from None
    return torch


def available():
    """Whether PyTorch can be imported (``backend="torch"`` works on the CPU at least).

    Returns
    -------
    bool
        True when ``import torch`` succeeds.

    Examples
    --------
    >>> from meanfield.solvers.torch_backend import available
    >>> isinstance(available(), bool)
    True
    """
    try:
        _torch()
    except ImportError:
        return False
    return True


def as_device(device=None):
    """The torch device of a run: ``None`` -> "cuda" when a CUDA device is available, else "cpu";
    otherwise "cpu", "cuda" or "cuda:k" (refused when CUDA is not available).

    Parameters
    ----------
    device : None, str or torch.device
        None (CUDA when available, else the CPU), "cpu", "cuda" or "cuda:k".

    Returns
    -------
    torch.device

    Raises
    ------
    ImportError
        PyTorch is not installed (the message says how to install it).
    ValueError
        A device that is not the CPU or CUDA, CUDA when it is not available, or a CUDA index beyond
        the machine's devices.

    Examples
    --------
    Without PyTorch the example checks nothing (``as_device`` would raise ImportError):

    >>> from meanfield.solvers.torch_backend import as_device, available
    >>> str(as_device("cpu")) if available() else "cpu"
    'cpu'
    """
    torch = _torch()
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:k' (or None: CUDA when available); "
                         f"got {device!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device {device!r}: backend='torch' runs on 'cpu' or 'cuda' (float64 needs them); "
                         f"got a {dev.type!r} device")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: CUDA is not available to this PyTorch "
                             f"({torch.__version__}); use device='cpu' or None, or install a CUDA build (docs/gpu.md)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


class Field:
    """One SA/USA head on a torch device: X[μ] and log Φ of batches, and fixed steps.

    X_i = P_{x_i} V G_i / z_i (SA) or P_{x_i} V G_i e^{M_i} (USA), with the shifted sums of the
    module docstring.

    Parameters
    ----------
    beta : float
    A, V : ndarray
        A = Q^T K and V as (d, d) matrices, or as (1, 1) arrays [[a]], [[v]] for a I and v I.
    normalised : bool
        True for SA (softmax), False for USA.
    causal : bool
        Token i attends to the tokens j <= i only.
    device : None, str or torch.device
        See ``as_device``.
    dtype : np.float64 or np.float32
        Precision of the scores, exponentials and value products (module docstring).

    Raises
    ------
    ImportError
        PyTorch is not installed.
    ValueError
        A device refused by ``as_device``.

    Examples
    --------
    Two tokens a quarter turn apart, β = 1, SA: X_1 = P_{x_1} x_2 e^0 / (e^1 + e^0) = (0, 1/(1 + e))
    (checked only where PyTorch is installed):

    >>> import numpy as np
    >>> from meanfield.solvers.torch_backend import Field, available
    >>> ok = True
    >>> if available():
    ...     f = Field(1.0, np.eye(1), np.eye(1), True, False, device="cpu")
    ...     x = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    ...     X, log_phi = f.numpy(x, np.full((1, 2), 0.5))
    ...     ok = bool(np.allclose(X[0, 0], [0.0, 1 / (1 + np.e)]))
    >>> ok
    True
    """

    def __init__(self, beta, A, V, normalised, causal, device=None, dtype=np.float64):
        torch = _torch()
        self.torch = torch
        self.device = as_device(device)
        self.dtype = torch.float32 if np.dtype(dtype) == np.float32 else torch.float64
        self.beta = float(beta)
        self.normalised, self.causal = bool(normalised), bool(causal)
        A, V = np.asarray(A, dtype=np.float64), np.asarray(V, dtype=np.float64)
        self.A = None if A.shape == (1, 1) else self.tensor(self.beta * A).to(self.dtype)   # β A
        self.a = float(A[0, 0])
        self.V = None if V.shape == (1, 1) else self.tensor(V)
        self.v = float(V[0, 0])

    def tensor(self, array):
        """A float64 tensor on the device holding a copy of ``array``."""
        return self.torch.from_numpy(np.array(array, dtype=np.float64)).to(self.device)

    def __call__(self, x, w):
        """(X, log Φ) for x (B, n, d) and w (B, n), float64 tensors on the device."""
        B, n, d = x.shape
        xs = x.to(self.dtype)
        U = xs @ self.A if self.A is not None else xs       # queries (β) A^T x_i
        # S_ij = <U_i, x_j> = β <A^T x_i, x_j> = β <x_i, A x_j>  (times β a for A = a I)
        absent = (w <= 0)[:, None, :] if bool((w <= 0).any()) else None
        systems = max(1, BLOCK // (n * n))
        targets = n if systems > 1 else max(1, BLOCK // n)
        rows = [[self._block(xs[b0:b0 + systems], U[b0:b0 + systems, i0:i0 + targets], w[b0:b0 + systems],
                             None if absent is None else absent[b0:b0 + systems], i0)
                 for i0 in range(0, n, targets)] for b0 in range(0, B, systems)]
        G, z, M = (rows[0][0][k] if len(rows) == 1 and len(rows[0]) == 1 else
                   self.torch.cat([self.torch.cat([block[k] for block in row], dim=1) for row in rows])
                   for k in range(3))
        log_phi = M + self.torch.log(z)
        factor = self.v if self.V is None else 1.0
        if self.normalised:
            scale = factor / z
        else:
            scale = factor * self.torch.exp(M)
            if self.causal:
                scale = scale / self.torch.cumsum(w, dim=1)
        out = G @ self.V.T if self.V is not None else G      # scaled in place: G is not needed again
        out.mul_(scale[..., None])
        return out.addcmul_(x, (out * x).sum(-1, keepdim=True), value=-1.0), log_phi   # P_x: out - <out, x> x

    def _block(self, xs, U, w, absent, i0):
        """(G (b, t, d), z, M (b, t)): the sums of targets i0.. (U (b, t, d)) over all sources xs (b, n, d)."""
        torch = self.torch
        S = U @ xs.transpose(1, 2)                                     # (b, t, n)
        if self.A is None:
            S.mul_(self.beta * self.a)
        future = None
        if self.causal:
            j = torch.arange(xs.shape[1], device=self.device)
            i = torch.arange(i0, i0 + U.shape[1], device=self.device)
            future = j[None, :] > i[:, None]
        hidden = absent if future is None else (future if absent is None else absent | future)
        shift = (S if hidden is None else S.masked_fill(hidden, -np.inf)).amax(dim=-1, keepdim=True)
        E = S.sub_(shift)             # in place: S is not needed again; <= 0 wherever it is not hidden
        if hidden is not None:
            E.clamp_(max=0.0)         # hidden sources may score above the shift: keep e^{...} <= 1 finite
        E.exp_().mul_(w.to(S.dtype)[:, None, :])
        if future is not None:
            E.masked_fill_(future, 0.0)
        return (E @ xs).to(torch.float64), E.sum(-1, dtype=torch.float64), shift[..., 0].to(torch.float64)

    def numpy(self, x, w):
        """(X, log Φ) as float64 arrays for arrays x (B, n, d) and w (B, n)."""
        X, log_phi = self(self.tensor(x), self.tensor(w))
        return X.cpu().numpy(), log_phi.cpu().numpy()

    def advance(self, y, w, h, count, rk4):
        """``count`` steps of size h of every system of y (B, n, d) (a float64 tensor), each stage's
        field at the renormalised stage, each step followed by renormalisation:

        Euler:  y <- N(y + h X(N(y)));   RK4: k1 = X(N(y)), k2 = X(N(y + h/2 k1)),
        k3 = X(N(y + h/2 k2)), k4 = X(N(y + h k3)), y <- N(y + h/6 (k1 + 2 k2 + 2 k3 + k4))."""
        for _ in range(count):
            k = self(normalise(y), w)[0]
            if rk4:
                total = k
                for c in (0.5 * h, 0.5 * h, h):
                    k = self(normalise(y + c * k), w)[0]
                    total = total + (2.0 if c != h else 1.0) * k
                y = normalise(y + (h / 6.0) * total)
            else:
                y = normalise(y + h * k)
        return y


def normalise(y):
    """y / |y| along the last axis (a tensor): N(y)_i = y_i / |y_i|.

    Parameters
    ----------
    y : torch.Tensor, shape (..., d)
        Nonzero vectors along the last axis.

    Returns
    -------
    torch.Tensor
        The unit vectors, same shape.

    Examples
    --------
    (Run only where PyTorch is installed; the result is the same either way.)

    >>> from meanfield.solvers.torch_backend import available, normalise
    >>> y = [[0.6, 0.8]]
    >>> if available():
    ...     import torch
    ...     y = normalise(torch.tensor([[3.0, 4.0]], dtype=torch.float64)).tolist()
    >>> y
    [[0.6, 0.8]]
    """
    return y / y.norm(dim=-1, keepdim=True)


def stepper(field, w, rk4):
    """``advance(y, h, count)`` for ``stepping.integrate``: ``field.advance`` on the batch y (B, n, d)
    (an array), weights w (B, n); returns (y, field evaluations) with y an array again.

    Parameters
    ----------
    field : Field
        The head, on its device.
    w : ndarray, shape (B, n)
        Weights of the tokens of each system.
    rk4 : bool
        RK4 (4 field evaluations a step), else forward Euler (1).

    Returns
    -------
    callable
        ``advance(y, h, count)`` -> (y after ``count`` steps of size h, an array (B, n, d); the
        number of field evaluations).

    Examples
    --------
    Three RK4 steps take 12 evaluations and keep the tokens on the sphere (checked only where
    PyTorch is installed):

    >>> import numpy as np
    >>> from meanfield.solvers.torch_backend import Field, available, stepper
    >>> result = (12, True)
    >>> if available():
    ...     f = Field(1.0, np.eye(1), np.eye(1), True, False, device="cpu")
    ...     advance = stepper(f, np.full((1, 2), 0.5), rk4=True)
    ...     y, evaluations = advance(np.array([[[1.0, 0.0], [0.0, 1.0]]]), 0.1, 3)
    ...     result = (evaluations, bool(np.allclose(np.linalg.norm(y, axis=-1), 1)))
    >>> result
    (12, True)
    """
    weights = field.tensor(w)

    def advance(y, h, count):
        out = field.advance(field.tensor(y), weights, float(h), count, rk4)
        return out.cpu().numpy(), (4 if rk4 else 1) * count
    return advance
