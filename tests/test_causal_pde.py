"""The causal mean-field PDE on [0, 1] × S^1 (meanfield.solvers.causal): fields against the circle
solver's field of each prefix average, per-slice mass and positivity through clustering, second
order in θ against a pseudo-spectral reference, particles against the density (W_1 decreasing in
n and in the grid), checkpoints, refusals."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.transport.causal import binned_w1, causal_tokens
from meanfield.solvers import causal, circle, particles, schemes

S = 8


def smooth(s, theta, h=0.0):
    """Cell averages over cells of width h (point values at h = 0) of a smooth density per slice."""
    return (1 + np.sinc(h / (2 * np.pi)) * 0.5 * np.cos(theta - 2 * np.pi * s)
            + np.sinc(h / np.pi) * 0.25 * np.sin(2 * theta + np.pi * s)) / (2 * np.pi)


@pytest.mark.parametrize("model", [mf.SA(2.0), mf.USA(1.5), mf.SA(3.0, V=-1.0), mf.USA(1.0, V=-1.0)])
def test_fields_are_circle_fields_of_prefix_averages(model):
    rho = np.random.default_rng(1).uniform(0.1, 2.0, (6, 64))
    u = causal.velocity(model, rho)
    P = causal.prefix_average(rho / rho.sum(axis=1, keepdims=True) / (2 * np.pi / 64))
    for k in range(6):
        assert np.max(np.abs(u[k] - circle.velocity(model, P[k]))) < 1e-13


def test_mass_per_slice_and_positivity_through_clustering():
    sol = causal.solve(mf.SA(9.0), lambda s, th: 1 + 0.5 * np.cos(3 * th + 6 * s), np.linspace(0, 15, 4),
                       slices=16, cells=64)
    assert np.max(np.abs(sol.mass - 1.0)) < 1e-13 and sol.rho.min() >= 0.0
    assert sol.rho[-1].max() > 10 * sol.rho[0].max()          # it did cluster


def pseudo_spectral(model, T, M=128, dt=5e-3):
    """Fourier coefficients (phases of the cell-centred grid removed) at T of the same S slices and
    prefix rule, the field by dense trapezoidal sums, ∂_θ spectrally, RK4."""
    theta = (np.arange(M) + 0.5) * 2 * np.pi / M
    f = smooth(causal.slice_positions(S)[:, None], theta[None, :])
    delta = theta[None, :] - theta[:, None]
    E = np.exp(model.beta * (np.cos(delta) - 1)) * (2 * np.pi / M)
    G = E * np.sin(delta)
    k = np.arange(M // 2 + 1)

    def rhs(f):
        P = causal.prefix_average(f)
        u = model.sign * ((P @ G.T) / (P @ E.T) if model.normalised else np.exp(model.beta) * (P @ G.T))
        return -np.fft.irfft(1j * k * np.fft.rfft(f * u, axis=1), n=M, axis=1)
    for _ in range(int(round(T / dt))):
        k1 = rhs(f)
        k2 = rhs(f + dt / 2 * k1)
        k3 = rhs(f + dt / 2 * k2)
        f = f + dt / 6 * (k1 + 2 * k2 + 2 * k3 + rhs(f + dt * k3))
    return np.fft.rfft(f, axis=1) / M * np.exp(-1j * k * np.pi / M)


@pytest.mark.parametrize("model", [mf.SA(2.0), mf.USA(1.0)])
def test_second_order_in_theta(model):
    T = 1.0
    c = pseudo_spectral(model, T)
    k = np.arange(c.shape[1])
    errors = []
    for N in (32, 64, 128):
        h = 2 * np.pi / N
        theta = (np.arange(N) + 0.5) * h
        start = smooth(causal.slice_positions(S)[:, None], theta[None, :], h)
        sol = causal.solve(model, start, [0, T])
        exact = np.real((c * np.sinc(k * h / (2 * np.pi)) * np.where(k == 0, 1, 2)) @ np.exp(1j * np.outer(k, theta)))
        errors.append(np.mean(np.abs(sol.rho[-1] - exact).sum(axis=1) * h))
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert orders[-1] > 1.75 and orders[0] > 1.6, (errors, orders)


def test_particles_converge_to_density():
    rho0 = lambda s, th: 1 + 0.6 * np.cos(th - 2 * np.pi * s) + 0.3 * np.sin(2 * th)   # noqa: E731
    model = mf.SA(3.0, causal=True)
    coarse, fine = (causal.solve(model, rho0, [0, 2.0], slices=S_, cells=N) for S_, N in ((16, 32), (32, 128)))
    dist = {}
    for n in (128, 512):
        x = particles.solve(model, mf.circle_points(causal_tokens(rho0, n)), [0, 2.0]).x[-1]
        dist[n] = [binned_w1(mf.circle_angles(x), p) for p in (coarse, fine)]
    assert dist[512][1] < 0.6 * dist[128][1]          # in n
    assert dist[512][1] < 0.7 * dist[512][0]          # in the grid


def test_checkpoint_resumes_bit_for_bit(tmp_path, monkeypatch):
    model = mf.USA(2.0, V=-1.0)
    start = smooth(causal.slice_positions(4)[:, None], causal.slice_positions(32)[None, :] * 2 * np.pi)
    full = causal.solve(model, start, [0, 0.5, 1.0])
    path = tmp_path / "c.npz"
    real, calls = schemes.SSPRK3.step, [0]

    def interrupted(*args):
        calls[0] += 1
        if calls[0] > 10:
            raise KeyboardInterrupt
        return real(*args)
    monkeypatch.setattr(schemes.SSPRK3, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        causal.solve(model, start, [0, 0.5, 1.0], checkpoint=path, checkpoint_every=3)
    monkeypatch.undo()
    resumed = causal.solve(model, start, [0, 0.5, 1.0], checkpoint=path, checkpoint_every=3, resume=True)
    assert full.info["nsteps"] > 10 and np.array_equal(full.rho, resumed.rho)
    saved = full.save(tmp_path / "sol")
    assert np.array_equal(type(full).load(saved).rho, full.rho) and type(full).load(saved).model.causal


def test_refusals():
    rho = np.ones((4, 16))
    with pytest.raises(ValueError, match="R\\^2"):
        causal.solve(mf.SA(1.0, Q=np.eye(3)), rho, [0, 1])
    with pytest.raises(ValueError, match="positivity bound"):
        causal.solve(mf.SA(1.0), rho, [0, 1], dt=1.0)
    with pytest.raises(ValueError, match="zero mass"):
        causal.solve(mf.SA(1.0), np.vstack([rho[:3], np.zeros(16)]), [0, 1])
    with pytest.raises(ValueError, match="non-negative"):
        causal.solve(mf.SA(1.0), -rho, [0, 1])
