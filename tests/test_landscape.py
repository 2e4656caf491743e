"""The energy landscape on the torus: derivatives, known critical points and their Hessian signatures."""
import numpy as np
import pytest

from meanfield import landscape as L


@pytest.mark.parametrize("beta", [0.0, 0.5, 5.0, 20.0])
def test_gradient_and_hessian_match_finite_differences(beta):
    rng = np.random.default_rng(1)
    theta = rng.uniform(0, 2 * np.pi, 6)
    eps = 1e-5
    basis = np.eye(theta.size)
    fd_grad = np.array([(L.energy(theta + eps * e, beta) - L.energy(theta - eps * e, beta)) / (2 * eps) for e in basis])
    scale = np.exp(beta) / theta.size
    assert np.allclose(L.gradient(theta, beta), fd_grad, rtol=0, atol=1e-8 * scale)
    fd_hess = np.array([(L.gradient(theta + eps * e, beta) - L.gradient(theta - eps * e, beta)) / (2 * eps) for e in basis])
    h = L.hessian(theta, beta)
    assert np.allclose(h, fd_hess, rtol=0, atol=1e-8 * scale) and np.allclose(h, h.T)
    assert np.allclose(h.sum(axis=1), 0, atol=1e-13 * scale)          # rotation invariance: H 1 = 0


@pytest.mark.parametrize("n,beta", [(2, 1.0), (5, 0.0), (7, 12.0)])
def test_consensus_is_a_strict_maximum(n, beta):
    """All tokens equal: H = (e^β/n²)(11^T - nI), so the spectrum on 1^⊥ is -e^β/n (n - 1 times)."""
    theta = np.full(n, 0.7)
    assert np.allclose(L.gradient(theta, beta), 0)
    assert np.allclose(L.spectrum(theta, beta), -np.exp(beta) / n, rtol=1e-12)
    assert L.classify(theta, beta) == "maximum"
    if beta > 0:
        assert L.energy(theta, beta) == pytest.approx(np.exp(beta) / (2 * beta))


@pytest.mark.parametrize("beta", [0.0, 1.0, 30.0, 200.0])
def test_antipodal_pair_is_a_strict_saddle(beta):
    """θ = (0, π): h(π) = -e^{-β}, so the eigenvalue on 1^⊥ is e^{-β}/2 > 0 (resolved even at β = 200)."""
    theta = np.array([0.0, np.pi])
    assert np.allclose(L.gradient(theta, beta), 0, atol=1e-15 * np.exp(beta))
    assert L.spectrum(theta, beta) == pytest.approx([np.exp(-beta) / 2], rel=1e-12)
    assert L.classify(theta, beta) == "strict saddle"


def _circulant_spectrum(n, beta):
    """Regular n-gon: H is circulant, λ_p = (1/n²) Σ_{j=1}^{n-1} h(2πj/n)(cos(2πpj/n) - 1), p = 1..n-1."""
    u = 2 * np.pi * np.arange(1, n) / n
    h = (np.cos(u) - beta * np.sin(u) ** 2) * np.exp(beta * np.cos(u))
    return np.sort([h @ (np.cos(p * u) - 1) / n ** 2 for p in range(1, n)])


@pytest.mark.parametrize("n", [3, 4, 5, 8])
@pytest.mark.parametrize("beta", [0.0, 0.3, 4.0, 25.0])
def test_regular_polygons_are_critical_with_the_circulant_spectrum(n, beta):
    theta = L.regular_polygon(n) + 0.3
    assert np.allclose(L.gradient(theta, beta), 0, atol=1e-14 * np.exp(beta))
    expected = _circulant_spectrum(n, beta)
    assert np.allclose(L.spectrum(theta, beta), expected, rtol=1e-9, atol=1e-12 * np.max(np.abs(expected)))
    assert L.classify(theta, beta) == "strict saddle"


@pytest.mark.parametrize("n", [4, 6])
def test_regular_polygon_signature_at_beta_zero(n):
    """β = 0: E_0 = |mean|²/2; the n-gon (mean 0) has eigenvalues 1/(2n) twice (the mode p = ±1 creates a
    mean) and 0 for the n - 3 other modes; the equilateral triangle at β > 0: -h(2π/3)/3 > 0 twice."""
    eigs = L.spectrum(L.regular_polygon(n), 0.0)
    assert np.allclose(eigs, [0.0] * (n - 3) + [1 / (2 * n)] * 2, atol=1e-15)
    beta = 2.0
    h = (np.cos(2 * np.pi / 3) - beta * 0.75) * np.exp(beta * np.cos(2 * np.pi / 3))
    assert np.allclose(L.spectrum(L.regular_polygon(3), beta), [-h / 3] * 2)


def test_clusters_with_multiplicities_split_into_exact_blocks():
    """Two tokens at 0, one at π (β = 30): the splitting mode has eigenvalue -(2 e^β - e^{-β})/9 and the
    rigid mode (2·1 e^{-β}/9)(1/2 + 1) = e^{-β}/3 > 0: resolved although 1e-26 times smaller."""
    beta = 30.0
    theta = np.array([0.0, 0.0, np.pi])
    eigs = L.spectrum(theta, beta)
    assert eigs[0] == pytest.approx(-(2 * np.exp(beta) - np.exp(-beta)) / 9, rel=1e-12)
    assert eigs[1] == pytest.approx(np.exp(-beta) / 3, rel=1e-10)
    assert L.classify(theta, beta) == "strict saddle"


def test_critical_points_of_three_tokens():
    """n = 3, β = 1: the consensus (the only maximum), two tokens opposite the third, and the equilateral
    triangle; each found from many starts, duplicates merged up to rotation and permutation."""
    cps = L.critical_points(3, 1.0, random_starts=60)
    assert [cp.family for cp in cps] == ["consensus", "regular 2-gon x2,1", "regular 3-gon"]
    assert [cp.kind for cp in cps] == ["maximum", "strict saddle", "strict saddle"]
    assert all(cp.residual <= 1e-10 for cp in cps) and sum(cp.hits for cp in cps) > 60
    tri = cps[2]
    h = (np.cos(2 * np.pi / 3) - 0.75) * np.exp(np.cos(2 * np.pi / 3))
    assert tri.smallest_positive_eigenvalue == pytest.approx(-h / 3)
    assert cps[0].energy == pytest.approx(np.e / 2)


def test_large_beta_does_not_mistake_distant_tokens_for_critical_points():
    """At β = 30 far-apart tokens barely interact (forces ~e^{-60}); the relative residual still rejects
    them, so every point found is a true critical point (gradient small relative to its forces)."""
    for cp in L.critical_points(5, 30.0, random_starts=40):
        assert cp.residual <= 1e-10
        assert L.classify(cp.theta, 30.0) == cp.kind


def test_bad_input():
    with pytest.raises(ValueError, match="theta"):
        L.energy(np.zeros((2, 2)), 1.0)
    with pytest.raises(ValueError, match="beta"):
        L.gradient(np.zeros(3), -1.0)
    with pytest.raises(ValueError, match="n must be"):
        L.critical_points(1, 1.0)
    with pytest.raises(ValueError, match="multiplicities"):
        L.regular_polygon(3, [1, 0, 2])
