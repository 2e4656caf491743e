"""Marker sizes for tokens: one marker per cluster, its area proportional to the cluster's mass."""
import numpy as np
from numpy.typing import ArrayLike

from ..clusters import MIN_MASS, cluster_labels, linkage_scale
from ..geometry import normalise

__all__ = ["cluster_markers"]

AREA_PER_MASS = 900.0   # marker area (points²) of a cluster holding all the mass
SMALLEST = 25.0         # marker area of the lightest cluster
LEVEL = 20.0            # ringed clusters are denser than twenty times uniform (meanfield.clusters' level)
TIGHT = 0.95            # clusters whose mean has length >= TIGHT x mass (angular spread ≲ 18°) get a marker


def cluster_markers(x: ArrayLike, weights: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""One marker per tight cluster of tokens: its centre and an area proportional to its mass.

    The clusters are the package's (``meanfield.clusters`` at level ``LEVEL``: single linkage at
    ``linkage_scale(n, d, LEVEL)``, so that only groups clearly denser than uniform are ringed):

    .. math::

        b_C = \frac{\sum_{i \in C} w_i x_i}{|\sum_{i \in C} w_i x_i|}, \qquad
        \text{area}_C = \text{SMALLEST} + \text{AREA\_PER\_MASS} \cdot m_C.

    Only tight clusters (mean length >= TIGHT times the mass) holding at least ``MIN_MASS`` are
    returned: a spread-out group, like the single cluster of a near-uniform cloud, has no meaningful
    centre, and a few stray tokens are not a cluster.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Tokens (unit vectors).
    weights : array_like, shape (n,), optional
        Masses (default 1/n; normalised).

    Returns
    -------
    centres : numpy.ndarray, shape (K, d)
    areas : numpy.ndarray, shape (K,)
        Marker areas in points².

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.plotting.tokens import cluster_markers
    >>> x = mf.circle_points(np.concatenate([np.zeros(30), np.full(10, np.pi)]))
    >>> centres, areas = cluster_markers(x)
    >>> order = np.argsort(-areas)
    >>> centres[order].round(6) + 0.0, areas[order]          # 3/4 of the mass at θ = 0, 1/4 at π
    (array([[ 1.,  0.],
           [-1.,  0.]]), array([700., 250.]))
    """
    x = np.asarray(x, dtype=float)
    n, d = x.shape
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float) / np.sum(weights)
    labels = cluster_labels(x, tol=linkage_scale(n, d, LEVEL))
    mass = np.bincount(labels, weights=w)
    sums = np.zeros((mass.size, d))
    np.add.at(sums, labels, w[:, None] * x)
    tight = (np.linalg.norm(sums, axis=1) >= TIGHT * mass) & (mass >= MIN_MASS)
    return normalise(sums[tight]), SMALLEST + AREA_PER_MASS * mass[tight]
