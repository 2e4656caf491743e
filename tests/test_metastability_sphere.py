"""The constructions of validation/metastability_sphere.py, checked on cases with known answers (the script itself
runs at --quick size in tests/test_validation.py)."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.cli import figures
from meanfield.solvers.meshes.voronoi import icosphere

ms = figures.load_script("metastability_sphere")


def test_near_uniform_start_is_a_small_perturbation_of_the_uniform_density():
    mesh = icosphere(4)
    rho = ms.near_uniform(0.1, 12, 7)(mesh.points)
    assert np.all(np.abs(rho * 4 * np.pi - 1) <= 0.1 * np.sqrt(12))       # |Σ cos| / √K <= √K
    assert 0.01 < np.std(rho * 4 * np.pi) < 0.1
    assert np.array_equal(rho, ms.near_uniform(0.1, 12, 7)(mesh.points))   # the seed fixes it


def test_cross_terms_of_point_clusters():
    c = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])
    m = np.array([0.5, 0.3, 0.2])
    beta = 2.0
    expected = 2 * (0.5 * 0.3 * np.exp(-2 * beta) + 0.5 * 0.2 * np.exp(-beta) + 0.3 * 0.2 * np.exp(-beta))
    assert ms.cross_terms(c, m, beta) == pytest.approx(expected, rel=1e-14)


def test_merge_sequence_skips_the_fast_phase():
    t = np.array([0.0, 2.0, 5.0, 12.0, 20.0, 40.0, 80.0, 160.0])
    counts = [0, 5, 7, 3, 3, 2, 2, 1]
    runs, merges = ms.merge_sequence(t, counts)
    assert [r[0] for r in runs] == [3, 2, 1]
    assert merges == [(40.0, 3, 2), (160.0, 2, 1)]


def test_energy_jumps_of_exact_point_clusters():
    """Ê = Σ m_a² + X on point clusters: three clusters, then a and b merged; the jump equals 2 m_a m_b plus the
    change of the cross terms, and the merging pair is found by its summed mass."""
    beta = 6.0
    before = (np.eye(3), np.array([0.5, 0.3, 0.2]))
    after = (mf.normalise(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])), np.array([0.5, 0.5]))   # b and c merged
    t = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])
    counts = [3, 3, 3, 2, 2, 2]
    which = lambda k: before if counts[k] == 3 else after       # noqa: E731
    energy = np.array([float(which(k)[1] @ which(k)[1]) + ms.cross_terms(*which(k), beta) for k in range(t.size)])
    runs = [(3, 10.0, 20.0), (2, 30.0, 50.0)]
    (jump,) = ms.energy_jumps(t, energy, runs, which, beta)
    assert (jump["m_a"], jump["m_b"]) == (0.3, 0.2) and jump["predicted"] == pytest.approx(0.12, rel=1e-14)
    assert jump["jump"] == pytest.approx(0.12 + ms.cross_terms(*after, beta) - ms.cross_terms(*before, beta),
                                         rel=1e-12)
    assert abs(jump["jump"] - jump["predicted"]) <= jump["cross"]
    assert ms.jump_within([jump])[0] and not ms.jump_within([dict(jump, predicted=0.2)])[0]


def test_merge_agreement_tolerance_is_three_deviations_plus_an_output_spacing():
    pde = dict(merges=[(100.0, 3, 2)])
    runs = [dict(merges=[(x, 3, 2)]) for x in (90.0, 100.0, 110.0)]
    (row,) = ms.merge_agreement(pde, runs, 0.01)
    assert row["mean"] == 100.0 and row["std"] == pytest.approx(10.0)
    assert row["tolerance"] == pytest.approx(31.0) and row["within"]
    (row,) = ms.merge_agreement(dict(merges=[(132.0, 3, 2)]), runs, 0.01)
    assert not row["within"]
