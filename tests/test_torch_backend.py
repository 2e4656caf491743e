"""The PyTorch backend (``backend="torch"``, ``meanfield.solvers.torch_backend``) against the Numba
engines, on the CPU: fields, log Φ and whole trajectories equal to 1e-12 in float64 (SA, USA, causal,
general Q, K, V, weights, batches, Euler and RK4), float32 to single precision, ``observe``, the
blocked score matrix, bit-exact resume, and clear errors.  Skipped without PyTorch (except the
test of the message a missing PyTorch gives)."""
import sys

import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import particles, torch_backend

T = np.linspace(0.0, 2.0, 5)
RNG = np.random.default_rng(7)
Q, K, V = (RNG.normal(size=(4, 4)) / 2 for _ in range(3))
MODELS = {
    "SA": mf.SA(3.0),
    "USA": mf.USA(1.5),
    "SA repulsive": mf.SA(2.0, V=-1.0),
    "SA general QKV": mf.SA(1.5, Q=Q, K=K, V=V),
    "USA general QKV": mf.USA(1.0, Q=Q, K=K, V=V),
    "SA causal": mf.SA(2.0, Q=Q, K=K, causal=True),
    "USA causal": mf.USA(1.0, causal=True),
}


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def weights(B, n, zeros=False):
    w = RNG.random((B, n)) + 0.1
    if zeros:
        w[:, 3] = 0.0            # a massless token: it moves but pulls nobody (the shift skips it)
    return w / w.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("n", [9, 150])      # the ``small`` engine and the tiled ones
def test_field_equals_numba(torch, name, n):
    model = MODELS[name]
    x = mf.uniform_sphere(n, 4, seed=3, batch=2)
    w = weights(2, n, zeros=True)
    X, log_phi = particles._torch_field(model, 4, "cpu", np.float64).numpy(x, w)
    ref, ref_log_phi = particles.attention_field(model, x, w, summation="direct")
    assert np.max(np.abs(X - ref)) <= 1e-12 * max(1.0, np.max(np.abs(ref)))
    assert np.max(np.abs(log_phi - ref_log_phi)) <= 1e-12 * max(1.0, np.max(np.abs(ref_log_phi)))
    assert np.max(np.abs(np.sum(X * x, axis=-1))) < 1e-14 * max(1.0, np.max(np.abs(ref)))   # tangent


def test_velocity_backend_equals_numba(torch):
    x = mf.uniform_sphere(40, 3, seed=1)
    model = MODELS["SA general QKV"]
    assert np.max(np.abs(particles.velocity(mf.SA(4.0), x, backend="torch", device="cpu")
                         - particles.velocity(mf.SA(4.0), x, summation="direct"))) < 1e-12
    x4 = mf.uniform_sphere(40, 4, seed=1)
    assert np.max(np.abs(particles.velocity(model, x4, backend="torch")
                         - particles.velocity(model, x4))) < 1e-12


def test_blocks_of_systems_and_targets_change_nothing_but_round_off(torch, monkeypatch):
    """The score matrix formed a few systems, or a few targets, at a time (``BLOCK``) gives the field of
    the whole batch at once; causal masks and massless tokens keep their place across target blocks."""
    x = mf.uniform_sphere(12, 3, seed=4, batch=5)
    w = weights(5, 12, zeros=True)
    for model in (MODELS["SA causal"].__class__(2.0, causal=True), MODELS["USA causal"], mf.SA(2.0)):
        whole = particles._torch_field(model, 3, "cpu", np.float64).numpy(x, w)
        for block in (2 * 12 * 12, 12 * 5, 1):         # two systems at a time; 5 targets; 1 target
            monkeypatch.setattr(torch_backend, "BLOCK", block)
            parts = particles._torch_field(model, 3, "cpu", np.float64).numpy(x, w)
            monkeypatch.undo()
            for a, b in zip(whole, parts):
                assert np.max(np.abs(a - b)) < 1e-14


@pytest.mark.parametrize("method", ["euler", "rk4"])
@pytest.mark.parametrize("name", ["SA", "USA", "SA general QKV", "USA causal"])
def test_trajectories_equal_numba(torch, name, method):
    model = MODELS[name]
    x0 = mf.uniform_sphere(16, 4, seed=5, batch=3)
    w = weights(3, 16)
    numba = particles.solve(model, x0, T, method=method, dt=0.05, weights=w, progress=False)
    torch_run = particles.solve(model, x0, T, method=method, dt=0.05, weights=w, progress=False, backend="torch",
                                device="cpu")
    assert torch_run.info["engine"] == "torch" and torch_run.info["device"] == "cpu"
    assert torch_run.info["nfev"] == numba.info["nfev"]
    assert np.max(np.abs(torch_run.x - numba.x)) < 1e-12
    np.testing.assert_array_equal(np.isnan(torch_run.energy), np.isnan(numba.energy))
    finite = np.isfinite(numba.energy)
    assert np.max(np.abs(torch_run.energy[finite] - numba.energy[finite]), initial=0.0) < 1e-12


def test_single_system_beyond_the_small_engine(torch):
    x0 = mf.uniform_sphere(140, 3, seed=2)           # n > small.SMALL_N: the Numba ``gemm`` engine
    numba = particles.solve(mf.SA(4.0), x0, T, dt=0.1, progress=False, summation="direct")
    torch_run = particles.solve(mf.SA(4.0), x0, T, dt=0.1, progress=False, backend="torch")
    assert numba.info["engine"] == "kernels"
    assert np.max(np.abs(torch_run.x - numba.x)) < 1e-12


def test_float32_to_single_precision(torch):
    """Single-precision scores and products: relative field error of a few float32 epsilons times
    (1 + β |A|) (the scores' rounding enters the exponentials); the USA factor e^{M} is float64, so
    β |A| = 100 > 88 (beyond float32's exponent range) stays finite."""
    x = mf.uniform_sphere(50, 5, seed=8, batch=2)
    eps = np.finfo(np.float32).eps
    for model in (mf.SA(4.0), mf.USA(100.0), mf.SA(2.0, Q=np.diag([1.0, 2, 0.5, 1, 1]), causal=True)):
        single = particles.velocity(model, x, backend="torch", dtype=np.float32)
        double = particles.velocity(model, x)
        scale = np.max(np.abs(double))
        assert np.all(np.isfinite(single))
        assert 0 < np.max(np.abs(single - double)) <= 20 * eps * (1 + 2 * model.beta) * scale
    sol = particles.solve(mf.SA(2.0), x, T, dt=0.1, backend="torch", dtype=np.float32, progress=False)
    ref = particles.solve(mf.SA(2.0), x, T, dt=0.1, progress=False)
    assert sol.info["dtype"] == "float32" and sol.x.dtype == np.float64
    assert np.max(np.abs(sol.x - ref.x)) < 1e-5
    assert np.max(np.abs(np.linalg.norm(sol.x, axis=-1) - 1)) < 1e-15   # the state stays float64 on the sphere


def test_observe_streams_the_statistics(torch):
    x0 = mf.uniform_sphere(10, 3, seed=9, batch=4)

    def spread(y):
        return np.min(np.einsum("bid,bjd->bij", y, y), axis=(1, 2))

    full = particles.solve(mf.SA(5.0), x0, T, method="euler", dt=0.1, progress=False)
    streamed = particles.solve(mf.SA(5.0), x0, T, method="euler", dt=0.1, progress=False, backend="torch",
                               observe=spread)
    assert streamed.x is None
    assert np.max(np.abs(streamed.observed - np.stack([spread(y) for y in full.x]))) < 1e-12
    assert np.max(np.abs(streamed.last - full.x[-1])) < 1e-12
    assert np.max(np.abs(streamed.energy - full.energy)) < 1e-12


class Interrupted(Exception):
    pass


def test_checkpoint_resumes_bit_for_bit(torch, monkeypatch, tmp_path):
    x0 = mf.uniform_sphere(12, 3, seed=10, batch=2)
    path = tmp_path / "run.npz"

    def solve(**kw):
        return particles.solve(mf.USA(1.0, Q=np.diag([1.0, 2.0, 0.5])), x0, T, dt=0.05, backend="torch",
                               progress=False, **kw)

    full = solve()
    real = torch_backend.Field.advance
    taken = [0]

    def stop(self, y, w, h, count, rk4):
        if taken[0] + count > 25:
            raise Interrupted
        taken[0] += count
        return real(self, y, w, h, count, rk4)
    monkeypatch.setattr(torch_backend.Field, "advance", stop)
    with pytest.raises(Interrupted):
        solve(checkpoint=path, checkpoint_every=7)
    monkeypatch.undo()
    resumed = solve(checkpoint=path, checkpoint_every=7, resume=True)
    np.testing.assert_array_equal(resumed.x, full.x)
    assert resumed.info["nsteps"] == full.info["nsteps"]
    # the checkpoint is the torch backend's: the Numba engine refuses it (its steps differ in round-off)
    with pytest.raises(ValueError, match="different run"):
        particles.solve(mf.USA(1.0, Q=np.diag([1.0, 2.0, 0.5])), x0, T, dt=0.05, checkpoint=path, resume=True,
                        progress=False)


@pytest.mark.parametrize("options, match", [
    (dict(noise=0.1, method="euler"), "noise"),
    (dict(method="adaptive"), "adaptive"),
    (dict(summation="fast"), "fast"),
    (dict(engine="small"), "Numba engine"),
    (dict(device="tpu"), "device"),
    (dict(device=3), "device"),
])
def test_unsupported_options_are_refused(torch, options, match):
    with pytest.raises(ValueError, match=match):
        particles.solve(mf.SA(1.0), mf.uniform_sphere(5, 3, seed=0), T, backend="torch", **options)


def test_unsupported_models_are_refused(torch):
    x0 = mf.uniform_sphere(5, 3, seed=0)
    two_heads = mf.MultiHead([mf.SA(1.0), mf.SA(2.0, V=-1.0)])
    with pytest.raises(ValueError, match="one SA/USA head"):
        particles.solve(two_heads, x0, T, backend="torch")
    with pytest.raises(ValueError, match="one SA/USA head"):
        particles.solve(mf.SA(lambda t: 1.0 + t), x0, T, backend="torch")
    with pytest.raises(TypeError, match="Hardmax"):
        particles.solve(mf.Hardmax(Q=np.diag([1.0, -1.0, 0.5])), x0, T, backend="torch")
    with pytest.raises(ValueError, match="backend"):
        particles.solve(mf.SA(1.0), x0, T, backend="jax")
    with pytest.raises(ValueError, match="backend='torch'"):
        particles.solve(mf.SA(1.0), x0, T, device="cpu")      # device= without the torch backend
    with pytest.raises(ValueError, match="overflows"):
        particles.solve(mf.USA(800.0), x0, T, backend="torch")


def test_cuda_refused_where_there_is_none(torch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        particles.velocity(mf.SA(1.0), mf.uniform_sphere(5, 3, seed=0), backend="torch", device="cuda")
    assert torch_backend.as_device(None).type == "cpu"


def test_missing_torch_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)       # what `import torch` does without PyTorch
    assert not torch_backend.available()
    with pytest.raises(ImportError, match=r"meanfield-attention\[gpu\]"):
        particles.solve(mf.SA(1.0), mf.uniform_sphere(5, 3, seed=0), T, backend="torch")


def test_phase_diagram_task_on_the_torch_backend(torch):
    """The phase-diagram sweep task (streamed statistics of a batch, the paper's Euler step) gives the
    Numba engine's fractions and cluster counts, and records nothing else in its store key."""
    from meanfield.validation import phase_diagram
    params = dict(model="SA", d=3, beta=4.0, n=8, batch=6, T=3.0, times=7)
    numba = phase_diagram.pair_statistics(params, 0)
    on_torch = phase_diagram.pair_statistics(dict(params, backend="torch", device="cpu"), 0)
    for key in ("t", "pair_fraction", "median_clusters"):
        np.testing.assert_array_equal(on_torch[key], numba[key])


def test_figures_forward_the_backend_to_the_phase_diagram_only(capsys):
    from meanfield.cli import figures
    assert figures.main(["kuramoto", "--backend", "torch"]) == 2
    assert "phase_diagram" in capsys.readouterr().err
    assert figures.main(["--backend", "torch"]) == 2       # every experiment: refused, not silently ignored


def test_sweep_places_tasks_by_their_resources(tmp_path):
    """Tasks asking for a resource (``gpu_resources``: device="cuda...") run on the workers that offer
    it; a cluster where none does is refused before anything runs."""
    from meanfield import sweep
    distributed = pytest.importorskip("distributed")
    assert sweep.gpu_resources({"device": "cuda:1"}) == {"GPU": 1}
    assert sweep.gpu_resources({"device": "cpu"}) is None and sweep.gpu_resources({}) is None
    grid = {"beta": [1.0], "n": [6], "d": [3], "T": [0.5], "device": ["cuda"]}
    with pytest.raises(ValueError, match="give a client"):
        sweep.run(sweep.particle_clusters, grid, 1, tmp_path / "a", resources=sweep.gpu_resources)
    with pytest.raises(ValueError, match="positive amount"):
        sweep.run(sweep.particle_clusters, grid, 1, tmp_path / "a", client="local", resources={"GPU": -1})
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        with pytest.raises(ValueError, match="--resources GPU=1"):
            sweep.run(sweep.particle_clusters, grid, 1, tmp_path / "b", client=client, resources=sweep.gpu_resources)
    grid.update(backend=["torch"], device=["cpu"])    # the placement is tested, not a GPU: these run on the CPU
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                                  resources={"GPU": 1}) as cluster, distributed.Client(cluster) as client:
        if not torch_backend.available():
            grid.pop("backend"), grid.pop("device")
        res = sweep.run(sweep.particle_clusters, grid, 2, tmp_path / "c", client=client, resources={"GPU": 1})
        assert len(res) == 2 and np.all(res.get("clusters") >= 1)


def test_usa_overflow_is_an_error_not_a_nan(torch):
    """β |A| = 700 passes the exponent check, but |V| e^{700} (V = 1e10 I) overflows: an error, as on Numba."""
    x0 = mf.uniform_sphere(6, 3, seed=0)
    model = mf.USA(700.0, V=1e10)
    with pytest.raises(FloatingPointError, match="overflows"):
        particles.velocity(model, x0, backend="torch")
