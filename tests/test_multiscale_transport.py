"""The coarse-to-fine exact transport ("multiscale") against the dense network simplex and
closed forms, on S^2: uniform, weighted and clustered measures, several levels of coarsening."""
import numpy as np
import pytest

from meanfield.transport import multiscale as ms
from meanfield.geometry import random_rotation, uniform_sphere
from meanfield.measures import perturbed_uniform
from meanfield.transport import wasserstein


def clustered(n, centres, spread, seed):
    """n points in Gaussian clumps of angular size `spread` around `centres` rows, projected."""
    rng = np.random.default_rng(seed)
    x = centres[rng.integers(0, centres.shape[0], n)] + spread * rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def both(x, a, y, b, p=2):
    value, info = wasserstein(x, a, y, b, p=p, method="multiscale", return_info=True)
    return value, info, wasserstein(x, a, y, b, p=p, method="emd")


@pytest.mark.parametrize("p", [1, 2, 3])
def test_matches_network_simplex_on_weighted_uniform_measures(p):
    rng = np.random.default_rng(p)
    x, y = uniform_sphere(700, 3, seed=rng), uniform_sphere(500, 3, seed=rng)
    b = rng.random(500)
    value, info, exact = both(x, None, y, b, p)
    assert info["method"] == "multiscale" and info["exact"] and info["rounds"] >= 1
    assert abs(value - exact) < 1e-10
    assert info["gap"] < 1e-9 * np.pi ** p


def test_matches_network_simplex_for_clustered_particles_against_a_smooth_density():
    """The regime of the comparisons: particles in a few tight clusters vs a smooth gridded measure."""
    rng = np.random.default_rng(7)
    x = clustered(900, uniform_sphere(3, 3, seed=rng), 0.02, seed=8)
    y = uniform_sphere(600, 3, seed=rng)
    b = perturbed_uniform(3, amplitude=0.8, degree=2, seed=1)(y)
    value, info, exact = both(x, None, y, b)
    assert abs(value - exact) < 1e-10


def test_matches_network_simplex_between_two_clustered_measures_with_repeated_atoms():
    rng = np.random.default_rng(3)
    centres = uniform_sphere(4, 3, seed=rng)
    x = np.repeat(clustered(200, centres, 0.01, seed=1), 3, axis=0)        # every atom three times
    y = clustered(500, centres @ random_rotation(3, seed=2).T, 0.05, seed=4)
    a = rng.random(600)
    a[::7] = 0.0                                                           # zero-weight atoms
    value, info, exact = both(x, a, y, None)
    assert abs(value - exact) < 1e-10


def test_two_coarse_levels_match_network_simplex(monkeypatch):
    monkeypatch.setattr(ms, "DIRECT", 2000)          # forces a coarse level below the first one
    rng = np.random.default_rng(11)
    x, y = uniform_sphere(800, 3, seed=rng), uniform_sphere(700, 3, seed=rng)
    value, info, exact = both(x, None, y, rng.random(700))
    assert info["levels"] >= 2
    assert abs(value - exact) < 1e-10


def test_a_rotated_measure_on_a_great_circle_moves_by_the_angle():
    """Equispaced atoms on a great circle, turned along it by α <= π/n: W_p = α for every p."""
    n, alpha = 64, 0.03
    R = random_rotation(3, seed=5)
    theta = 2 * np.pi * np.arange(n) / n
    ring = lambda t: np.column_stack([np.cos(t), np.sin(t), np.zeros_like(t)]) @ R.T   # noqa: E731
    for p in (1, 2):
        assert abs(wasserstein(ring(theta), None, ring(theta + alpha), None, p=p, method="multiscale") - alpha) < 1e-10


def test_a_dirac_against_many_atoms_is_the_mean_cost():
    rng = np.random.default_rng(2)
    y, b = uniform_sphere(3000, 3, seed=rng), rng.random(3000)
    x = uniform_sphere(1, 3, seed=rng)
    expected = np.sqrt(b @ np.arccos(np.clip(y @ x[0], -1, 1)) ** 2 / b.sum())
    assert abs(wasserstein(x, None, y, b, method="multiscale") - expected) < 1e-10


def test_symmetric_and_zero_for_identical_measures():
    rng = np.random.default_rng(4)
    x, y = uniform_sphere(400, 3, seed=rng), uniform_sphere(300, 3, seed=rng)
    a, b = rng.random(400), rng.random(300)
    assert abs(wasserstein(x, a, y, b, method="multiscale") - wasserstein(y, b, x, a, method="multiscale")) < 1e-10
    assert wasserstein(x, a, x, a, method="multiscale") < 1e-7         # W_2 is Hölder-1/2 in round-off


def test_the_seed_changes_the_hierarchy_not_the_value():
    rng = np.random.default_rng(6)
    x, y = uniform_sphere(500, 3, seed=rng), uniform_sphere(400, 3, seed=rng)
    values = [wasserstein(x, None, y, None, method="multiscale", seed=s) for s in range(3)]
    assert np.ptp(values) < 1e-12


def test_bad_inputs_raise_clear_errors():
    x, y = uniform_sphere(40, 3, seed=1), uniform_sphere(30, 3, seed=2)
    with pytest.raises(ValueError, match="non-negative"):
        wasserstein(x, -np.ones(40), y, None, method="multiscale")
    with pytest.raises(ValueError, match="unit vectors"):
        wasserstein(x, None, 3 * y, None, method="multiscale")
    with pytest.raises(ValueError, match="same sphere"):
        wasserstein(x, None, uniform_sphere(30, 4, seed=2), None, method="multiscale")
    with pytest.raises(ValueError, match="NaN"):
        wasserstein(x, None, y, np.full(30, np.nan), method="multiscale")
