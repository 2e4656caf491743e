"""Marker sizes for tokens: one marker per cluster, its area proportional to the cluster's mass."""
import numpy as np

from ..clusters import MIN_MASS, cluster_labels, linkage_scale
from ..geometry import normalise

__all__ = ["cluster_markers"]

AREA_PER_MASS = 900.0   # marker area (points²) of a cluster holding all the mass
SMALLEST = 25.0         # marker area of the lightest cluster
LEVEL = 20.0            # ringed clusters are denser than twenty times uniform (meanfield.clusters' level)
TIGHT = 0.95            # clusters whose mean has length >= TIGHT x mass (angular spread ≲ 18°) get a marker


def cluster_markers(x, weights=None):
    """(centres, areas): the clusters of tokens x (n, d) by the package's definition
    (``meanfield.clusters`` at level ``LEVEL``: single linkage at ``linkage_scale(n, d, LEVEL)``,
    so that only groups clearly denser than uniform are ringed), each cluster's centre
    the normalised mean of its tokens, and a marker area SMALLEST + AREA_PER_MASS · mass.
    Only tight clusters (mean length >= TIGHT times the mass) holding at least ``MIN_MASS`` are
    returned: a spread-out group, like the single cluster of a near-uniform cloud, has no
    meaningful centre, and a few stray tokens are not a cluster."""
    x = np.asarray(x, dtype=float)
    n, d = x.shape
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float) / np.sum(weights)
    labels = cluster_labels(x, tol=linkage_scale(n, d, LEVEL))
    mass = np.bincount(labels, weights=w)
    sums = np.zeros((mass.size, d))
    np.add.at(sums, labels, w[:, None] * x)
    tight = (np.linalg.norm(sums, axis=1) >= TIGHT * mass) & (mass >= MIN_MASS)
    return normalise(sums[tight]), SMALLEST + AREA_PER_MASS * mass[tight]
