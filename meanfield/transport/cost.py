"""The cost of transport on the sphere: the geodesic (great-circle) distance to a power, apart from
the solvers that use it (``sphere.wasserstein``, ``multiscale.multiscale_wasserstein``), as POT keeps
``ot.dist`` apart from ``ot.emd2``."""
import numpy as np

from ..geometry import great_circle

__all__ = ["geodesic_cost"]


def geodesic_cost(x: np.ndarray, y: np.ndarray, p: float = 2.0) -> np.ndarray:
    r"""The matrix of great-circle distances raised to the power p.

    .. math::

        C_{ij} = d(x_i, y_j)^p, \qquad d(x, y) = 2 \operatorname{atan2}(|x - y|, |x + y|).

    Parameters
    ----------
    x : numpy.ndarray, shape (n, d)
        Unit vectors (not checked).
    y : numpy.ndarray, shape (m, d)
        Unit vectors (not checked).
    p : float
        Power of the distance.

    Returns
    -------
    numpy.ndarray
        Shape (n, m).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import geodesic_cost
    >>> x = np.array([[1.0, 0.0]])
    >>> y = np.array([[0.0, 1.0], [-1.0, 0.0]])
    >>> geodesic_cost(x, y, p=2).round(4)
    array([[2.4674, 9.8696]])
    """
    theta = great_circle(x, y)
    if p != 1:
        theta **= p
    return theta
