"""Hardmax attention (β = ∞, meanfield.solvers.hardmax): SA trajectories converge to it as β → ∞,
exponentially at the observed rate of the smallest score gap on a configuration without switches,
like 1/β across a switch; the field, the tie rule, the located switches, the model description."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import hardmax, particles


def configuration(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(3, 3)), rng.normal(size=(3, 3)), mf.uniform_sphere(6, 3, seed=seed)


def sa_errors(Q, K, x0, T, betas, reference):
    t = np.linspace(0, T, 6)
    return np.array([np.abs(particles.solve(mf.SA(b, Q, K), x0, t, method="adaptive", rtol=1e-12,
                                            atol=1e-14).x - reference.x).max() for b in betas])


def test_sa_converges_exponentially_without_switches():
    Q, K, x0 = configuration(11)           # no switch on [0, 0.5], smallest gap g = 0.366
    hm = hardmax.solve(mf.Hardmax(Q, K), x0, np.linspace(0, 0.5, 6), dt=0.005)
    assert hm.info["events"] == 0 and np.abs(hm.x[-1] - x0).max() > 0.3
    g = hm.info["min_gap"]
    errors = sa_errors(Q, K, x0, 0.5, [10, 20, 30], hm)
    rate = np.log(errors[1] / errors[2]) / 10          # error ~ C e^{-β κ}: κ -> g as β -> ∞ (Laplace)
    assert 0.9 * g < rate < 1.3 * g, (errors, rate, g)


def test_sa_converges_like_one_over_beta_across_a_switch():
    Q, K, x0 = configuration(38)
    hm = hardmax.solve(mf.Hardmax(Q, K), x0, np.linspace(0, 0.5, 6), dt=0.005)
    assert hm.info["events"] == 1 and hm.info["chattering"] == 0
    betas = np.array([10, 20, 40, 80])
    errors = sa_errors(Q, K, x0, 0.5, betas, hm)
    slope = np.polyfit(np.log(betas), np.log(errors), 1)[0]
    assert np.all(np.diff(errors) < 0) and -1.4 < slope < -0.7, (errors, slope)


def test_field_tie_rule_and_description():
    x = mf.uniform_sphere(7, 3, seed=2)
    Q = np.diag([1.0, -2.0, 0.5])
    model = mf.Hardmax(Q=Q, V=-1.0)
    W, gap = hardmax.attention_weights(model, x)
    scores = x @ Q @ x.T
    j = scores.argmax(axis=1)
    assert np.array_equal(W, np.eye(7)[j]) and np.all(gap > 0)
    v = hardmax.velocity(model, x)
    expected = -x[j] + np.sum(x[j] * x, axis=1, keepdims=True) * x
    assert np.max(np.abs(v - expected)) < 1e-15
    # an exact tie: the two tokens share the weight (the β → ∞ limit of the softmax)
    tied = mf.normalise(np.array([[1.0, 0, 0], [0.6, 0.8, 0], [0.6, -0.8, 0]]))
    W, _ = hardmax.attention_weights(mf.Hardmax(Q=-1.0), tied)
    assert np.allclose(W[0], [0, 0.5, 0.5])
    causal = hardmax.attention_weights(mf.Hardmax(Q=-1.0, causal=True), tied)[0]
    assert causal[0, 0] == 1.0 and np.allclose(causal[1], [1, 0, 0])
    assert mf.model_from_dict(model.to_dict()) == model and repr(model).startswith("Hardmax(Q=")
    assert np.allclose(hardmax.velocity(mf.Hardmax(), x), 0)        # Q^T K = I: each token attends to itself
    with pytest.raises(TypeError, match="hardmax.solve"):
        particles.solve(model, x, [0, 1])
    with pytest.raises(ValueError, match="tie"):
        mf.Hardmax(tie=-1.0)


def test_located_switch_time_is_step_independent():
    Q, K, x0 = configuration(38)
    times = [hardmax.solve(mf.Hardmax(Q, K), x0, [0, 0.5], dt=dt).info["switch_times"][0] for dt in (0.01, 0.003)]
    assert abs(times[0] - times[1]) < 1e-9
