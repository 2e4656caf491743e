"""Long contexts (theory.equiangular_layer, long_context_limit): the closed form of one attention
layer on an equiangular configuration against the layer run on explicit tokens (the BLAS softmax
engine, and sparse tokens for large n); the three regimes' limits and rates."""
import numpy as np
import pytest

from meanfield.cli import figures
from meanfield.theory import equiangular_layer, long_context_limit

LC = figures.load_script("long_context")


@pytest.mark.parametrize("rho, beta, n", [(0.5, 3.0, 40), (0.9, 20.0, 17), (0.0, 2.0, 30), (0.3, 0.0, 5)])
def test_closed_form_equals_the_layer_on_explicit_tokens(rho, beta, n):
    a, pairs = LC.dense_layer(rho, beta, n)
    a_closed, cos_closed = equiangular_layer(rho, beta, n)
    assert abs(a / a_closed - 1) < 1e-12 and np.max(np.abs(pairs / cos_closed - 1)) < 1e-12
    assert np.allclose(LC.sparse_layer(rho, beta, n), (a_closed, cos_closed), rtol=1e-12, atol=0)


def test_long_context_regimes():
    n = np.array([1e5, 1e6])
    for gamma, (L, limit), exponent in ((1.0, (0.0, 1.0), -0.5), (2.0, (0.5, 0.8), -1.0), (4.0, (1.0, 0.5), -1.0)):
        assert long_context_limit(0.5, gamma) == (L, limit)
        a, cos = equiangular_layer(0.5, gamma * np.log(n), n)
        sim = LC.sparse_layer(0.5, gamma * np.log(1e6), 10 ** 6)
        assert np.allclose(sim, (a[1], cos[1]), rtol=1e-12, atol=0)
        assert np.log(abs(a[1] - L) / abs(a[0] - L)) / np.log(10) == pytest.approx(exponent, abs=0.01)
        assert abs(cos[1] - limit) < 10 * abs(a[1] - L)
    with pytest.raises(ValueError):
        equiangular_layer(1.0, 1.0, 10)
