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


def test_pair_fraction_on_constructed_configurations():
    e = np.eye(4)
    # one system: 3 tokens at e1, 1 at e2 -> ordered pairs above: 3*2 = 6 of 4*3 = 12
    x = e[[0, 0, 0, 1]]
    assert clusters.pair_fraction(x) == pytest.approx(0.5)
    # tokens 1e-2 rad apart: <x,y> = cos(1e-2) = 0.99995 > 0.999, but not > 0.99999
    y = np.array([[1.0, 0.0], [np.cos(1e-2), np.sin(1e-2)]])
    assert clusters.pair_fraction(y) == 1.0 and clusters.pair_fraction(y, threshold=0.99999) == 0.0
    # a batch: all merged, orthonormal (none), and the 3+1 system -> (12 + 0 + 6) / 36
    batch = np.stack([e[[2, 2, 2, 2]], e, x])
    assert clusters.pair_fraction(batch) == pytest.approx(18 / 36)
    # the diagonal never counts, even when the threshold is below 1 and every point is distinct
    z = mf.uniform_sphere(10, 3, seed=0)
    gram = z @ z.T
    assert clusters.pair_fraction(z, threshold=0.2) == pytest.approx((np.sum(gram > 0.2) - 10) / 90)


def test_gram_rank_counts_tight_clusters():
    centres = mf.uniform_sphere(5, 8, seed=2)
    rng = np.random.default_rng(0)
    batch = []
    for k in (1, 3, 5):
        labels = np.concatenate([np.arange(k), rng.integers(0, k, 32 - k)])
        batch.append(mf.normalise(centres[labels] + 1e-4 * rng.standard_normal((32, 8))))
    assert list(clusters.gram_rank(np.stack(batch))) == [1, 3, 5]
    assert clusters.gram_rank(batch[1]) == 3
    assert clusters.gram_rank(np.eye(6)) == 6


def test_pair_statistics_reject_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        clusters.pair_fraction(np.eye(3), threshold=1.0)
    with pytest.raises(ValueError, match="two points"):
        clusters.pair_fraction(np.eye(3)[:1])
    with pytest.raises(ValueError, match="unit"):
        clusters.pair_fraction(2 * np.eye(3))


def test_gram_rank_fast_path_agrees_with_svd():
    rng = np.random.default_rng(5)
    x = mf.normalise(mf.uniform_sphere(6, 3, seed=1)[rng.integers(0, 6, (400, 20))]
                     + rng.uniform(0, 0.3, (400, 1, 1)) * rng.standard_normal((400, 20, 3)))
    for threshold in (0.9999, 0.99, 0.9, 0.5):
        svd = np.linalg.matrix_rank((np.einsum("bid,bjd->bij", x, x) > threshold).astype(float))
        assert np.array_equal(clusters.gram_rank(x, threshold), svd)
    # a chain 0~1~2 that is not transitive: rank 3 from the SVD, not the number of distinct rows
    chain = np.array([[1.0, 0.0], [np.cos(0.1), np.sin(0.1)], [np.cos(0.2), np.sin(0.2)]])
    assert clusters.gram_rank(chain, threshold=np.cos(0.15)) == 3
