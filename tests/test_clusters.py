"""Single-linkage clusters: the box-contracted algorithm against the brute-force graph."""
import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

import meanfield as mf
from meanfield import clusters


def brute_force_labels(x, tol):
    chord = np.linalg.norm(x[:, None] - x[None], axis=-1)
    return connected_components(chord <= 2 * np.sin(tol / 2), directed=False)[1]


def same_partition(a, b):
    return len(set(zip(a, b))) == len(set(a)) == len(set(b))


@pytest.mark.parametrize("d", [2, 3, 6])
def test_labels_match_brute_force_single_linkage(d):
    rng = np.random.default_rng(d)
    for trial in range(12):
        n = int(rng.integers(1, 300))
        x = mf.uniform_sphere(n, d, seed=trial)
        if trial % 2:
            centres = mf.uniform_sphere(int(rng.integers(1, 6)), d, seed=100 + trial)
            x = mf.normalise(centres[rng.integers(0, len(centres), n)]
                             + rng.uniform(0, 0.05) * rng.standard_normal((n, d)))
        tol = float(rng.choice([1e-3, 1e-2, 0.1, 0.3, 1.0]))
        assert same_partition(clusters.cluster_labels(x, tol), brute_force_labels(x, tol))


def test_tight_clusters_of_many_points():
    centres = mf.uniform_sphere(3, 3, seed=1)
    x = mf.normalise(np.repeat(centres, 20_000, axis=0)
                     + 1e-7 * np.random.default_rng(0).standard_normal((60_000, 3)))
    assert clusters.cluster_count(x, tol=1e-3) == 3
