"""Plain NumPy reference implementations (dense n×m matrices), kept for tests and benchmarks."""
import numpy as np
from scipy.special import logsumexp


def attention_field(model, x, y=None, w=None):
    r"""The attention field by dense n × m matrices: X_i = P_{x_i} V sum_j w_j e^{β<Qx_i,Ky_j>} y_j / (Φ_i or 1).

    .. math::

        X_i = P_{x_i} V \frac{\sum_j w_j e^{\beta \langle Q x_i, K y_j \rangle} y_j}{\Phi_i}, \qquad
        \Phi_i = \sum_j w_j e^{\beta \langle Q x_i, K y_j \rangle}

    (SA; USA without the division), P_x = I - x x^T.  Causal models: the n × n scores masked to
    j <= i (-inf above the diagonal), USA divided by the prefix weights sum_{j<=i} w_j.

    Parameters
    ----------
    model : meanfield.models.Model
    x : ndarray, shape (n, d)
        Targets (unit vectors).
    y : ndarray, shape (m, d), optional
        Sources (default: x).
    w : ndarray, shape (m,), optional
        Source weights (default: uniform 1/m).

    Returns
    -------
    ndarray, shape (n, d)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.models import SA
    >>> from meanfield.solvers.reference import attention_field
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> np.round(attention_field(SA(beta=1.0), x), 4)
    array([[0.    , 0.2689],
           [0.2689, 0.    ]])
    """
    y = x if y is None else y
    m = y.shape[0]
    w = np.full(m, 1.0 / m) if w is None else w
    A, V = model.interaction(x.shape[1])
    s = model.beta * (x @ A @ y.T) + np.log(w)[None, :]
    if model.causal:
        s = np.where(np.tril(np.ones((x.shape[0], m), dtype=bool)), s, -np.inf)
    if model.normalised:
        p = np.exp(s - logsumexp(s, axis=1, keepdims=True))
        v = (p @ y) @ V.T
    else:
        v = (np.exp(s) @ y) @ V.T
        if model.causal:
            v /= np.cumsum(w)[:, None]
    return v - np.sum(v * x, axis=1, keepdims=True) * x


def log_potential(model, x, y, w):
    r"""The log-partition functions log Φ(x_i) by a dense n × m log-sum-exp.

    .. math::

        \log \Phi(x_i) = \log \sum_j w_j e^{\beta \langle Q x_i, K y_j \rangle}.

    Parameters
    ----------
    model : meanfield.models.Model
    x : ndarray, shape (n, d)
        Targets.
    y : ndarray, shape (m, d)
        Sources.
    w : ndarray, shape (m,)
        Source weights.

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.models import SA
    >>> from meanfield.solvers.reference import log_potential
    >>> x = np.array([[1.0, 0.0]])
    >>> float(log_potential(SA(beta=2.0), x, x, np.ones(1))[0])
    2.0
    """
    A, _ = model.interaction(x.shape[1])
    return logsumexp(model.beta * (x @ A @ y.T) + np.log(w)[None, :], axis=1)


def energy(x, beta, w=None):
    r"""The interaction energy E_β of weighted tokens by a dense n × n log-sum-exp.

    .. math::

        E_\beta = \frac{1}{2\beta} \sum_{i,j} w_i w_j e^{\beta \langle x_i, x_j \rangle},
        \qquad E_0 = \frac12 \Big\| \sum_i w_i x_i \Big\|^2.

    Parameters
    ----------
    x : ndarray, shape (n, d)
        Tokens.
    beta : float
        β >= 0.
    w : ndarray, shape (n,), optional
        Weights (default: uniform 1/n).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.reference import energy
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> float(energy(x, 1.0)) == float(np.e / 2), float(energy(x, 0.0))
    (True, 0.5)
    """
    n = x.shape[0]
    w = np.full(n, 1.0 / n) if w is None else w
    if beta == 0:
        mean = w @ x
        return 0.5 * mean @ mean
    return np.exp(logsumexp(beta * (x @ x.T), b=np.outer(w, w))) / (2 * beta)


def circle_angle_field(model, theta):
    r"""The angular velocities of tokens on the circle by dense n × n sums.

    .. math::

        \dot\theta_i = \frac{\pm 1}{Z_i} \sum_j e^{\beta \cos(\theta_i - \theta_j)} \sin(\theta_j - \theta_i),

    Z_i = sum_j e^{β cos(θ_i-θ_j)} (SA) or n (USA), the sign that of the model's value matrix
    (causal: the sums over j <= i, and i instead of n).

    Parameters
    ----------
    model : meanfield.models.Model
    theta : ndarray, shape (n,)
        Angles.

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.models import SA
    >>> from meanfield.solvers.reference import circle_angle_field
    >>> np.round(circle_angle_field(SA(beta=1.0), np.array([0.0, np.pi / 2])), 4)
    array([ 0.2689, -0.2689])
    """
    diff = theta[None, :] - theta[:, None]
    e = np.exp(model.beta * np.cos(diff))
    if model.causal:
        e = np.tril(e)
    count = np.arange(1, theta.size + 1) if model.causal else theta.size
    z = e.sum(axis=1) if model.normalised else count
    return model.sign * (e * np.sin(diff)).sum(axis=1) / z
