"""The table products of the S^2 finite volumes: blocks, thread counts, the user's BLAS setting (issue 40)."""
import os

import numpy as np
import pytest

import meanfield as mf
from meanfield.measures import perturbed_uniform
from meanfield.solvers import sphere, sphere_fv, threads
from meanfield.solvers.kernels import spectral

OPENBLAS = threads.blas_library()
needs_openblas = pytest.mark.skipif(OPENBLAS is None, reason="NumPy's BLAS is not an OpenBLAS found at run time")


@pytest.fixture
def blas_restored():
    """Restore OpenBLAS's thread count after a test that changes it."""
    before = threads.blas_threads()
    yield
    if OPENBLAS is not None:
        OPENBLAS.set(before)


def _table(level=3, beta=3.0, seed=0):
    mesh = sphere.icosphere(level)
    T = sphere_fv._basis(mesh, spectral.degree(beta, 3))
    W = np.random.default_rng(seed).random((mesh.size, 10)) - 0.3
    return T, W, spectral.table_weights(beta)


@pytest.mark.parametrize("n", [1, 15, 16, 64, 65, 484, 2562, 10243, 10 ** 6])
def test_row_blocks_are_aligned_and_bounded(n):
    edges = threads.row_blocks(n)
    assert edges[0] == 0 and edges[-1] == n and np.all(np.diff(edges) > 0)
    assert np.all(edges[:-1] % threads.ALIGN == 0)
    assert edges.size - 1 <= threads.MAX_BLOCKS


def test_table_product_is_the_product():
    """Against the products in exact rational order: float64 with a long-double reference."""
    T, W, w = _table()
    reference = T.astype(np.longdouble) @ (w[:, None] * (T.T.astype(np.longdouble) @ W))
    got = threads.table_product(T, W, w)
    assert np.abs(got - reference).max() <= 1e-13 * np.abs(reference).max()


@needs_openblas
@pytest.mark.parametrize("level", [3, 4])
def test_same_bits_on_any_thread_count(level, blas_restored):
    """The blocks depend on the size alone: 1, 2 and 3 threads give the same bits, and those of the
    whole product on single-threaded BLAS."""
    T, W, w = _table(level)
    results = []
    for n in (1, 2, 3):
        OPENBLAS.set(n)
        results.append(threads.table_product(T, W, w))
        assert threads.blas_threads() == n              # the user's setting is restored
    OPENBLAS.set(1)
    whole = np.matmul(T, w[:, None] * (T.T @ W))
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])
    np.testing.assert_allclose(results[0], whole, rtol=0, atol=1e-14 * np.abs(whole).max())


@needs_openblas
def test_threads_follow_the_blas_setting(monkeypatch, blas_restored):
    """The products use as many threads as BLAS is set to, one below PARALLEL_WORK, and BLAS runs on
    one thread inside them."""
    seen = []
    run = threads._run

    def spy(task, count, workers):
        seen.append((workers, OPENBLAS.get()))
        return run(task, count, workers)

    monkeypatch.setattr(threads, "_run", spy)
    T, W, w = _table(3)
    for n in (2, 3):
        OPENBLAS.set(n)
        threads.table_product(T, W, w)
        assert seen[-1] == (n, 1)
    OPENBLAS.set(1)
    count = len(seen)
    threads.table_product(T, W, w)
    OPENBLAS.set(2)
    threads.table_product(T[:40, :30].copy(), W[:40], w[:30])        # 40·30·10 < PARALLEL_WORK
    assert len(seen) == count


@needs_openblas
def test_solve_independent_of_blas_threads(blas_restored):
    """A solve on the harmonic table gives the same bits on 1 and 2 BLAS threads (checkpoints written
    on one thread count resume on another)."""
    args = (mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 0.5])
    runs = []
    for n in (1, 2):
        OPENBLAS.set(n)
        runs.append(sphere.solve(*args, mesh=sphere.icosphere(3), energy=False, progress=False))
    np.testing.assert_array_equal(runs[0].rho, runs[1].rho)


def test_single_threaded_blas_restores_on_error(blas_restored):
    before = threads.blas_threads()
    with pytest.raises(RuntimeError), threads.single_threaded_blas():
        assert OPENBLAS is None or OPENBLAS.get() == 1
        assert threads.blas_threads() == before          # still the threads asked for
        raise RuntimeError("inside")
    assert threads.blas_threads() == before and not threads._ASKED


@needs_openblas
def test_solves_hold_blas_on_one_thread_and_keep_the_threads_asked_for(monkeypatch, blas_restored):
    """sphere.solve runs with OpenBLAS on one thread; its products still use the threads asked for."""
    seen = []
    product = threads.table_product

    def spy(T, W, weights, out=None):
        seen.append((OPENBLAS.get(), threads.blas_threads()))
        return product(T, W, weights, out)

    monkeypatch.setattr(threads, "table_product", spy)
    OPENBLAS.set(2)
    for mesh in (sphere.icosphere(3), None):
        sphere.solve(mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 0.05], mesh=mesh, energy=False,
                     progress=False)
        assert seen and set(seen) == {(1, 2)}
        assert OPENBLAS.get() == 2
        seen.clear()


def test_a_failing_block_raises():
    T, W, w = _table(3)
    with pytest.raises(ValueError):
        threads.table_product(T, W[:-1], w)


def _plain_kernel_sums(mesh, beta, masses, W=None, out=None):
    """The kernel sums as NumPy's two whole products (the engine before the row blocks)."""
    W = np.multiply(sphere_fv._moments(mesh), masses[:, None], out=W)
    T = sphere_fv._basis(mesh, spectral.degree(beta, 3))
    coef = T.T @ W
    coef *= spectral.table_weights(beta)[:, None]
    return np.matmul(T, coef, out=out)


@pytest.mark.parametrize("level", [3, 4])
def test_solve_equals_the_whole_products(level, monkeypatch):
    """A solve through the blocked products equals one through NumPy's whole products to 1e-12 (on
    OpenBLAS with one thread: to the bit)."""
    args = (mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 1.0])
    mesh = sphere.icosphere(level)
    blocked = sphere.solve(*args, mesh=mesh, energy=False, progress=False)
    monkeypatch.setattr(sphere_fv, "_kernel_sums", _plain_kernel_sums)
    plain = sphere.solve(*args, mesh=mesh, energy=False, progress=False)
    assert blocked.info["nfev"] == plain.info["nfev"]
    np.testing.assert_allclose(blocked.rho, plain.rho, rtol=0, atol=1e-12 * np.abs(plain.rho).max())
    if threads.blas_threads() == 1 and OPENBLAS is not None:
        np.testing.assert_array_equal(blocked.rho, plain.rho)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_computes_the_products():
    """The helper threads do not survive a fork: the child makes its own."""
    T, W, w = _table(3)
    parent = threads.table_product(T, W, w)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if np.array_equal(threads.table_product(T, W, w), parent) else 1)
    assert os.waitpid(pid, 0)[1] == 0


def _drive(choice, seconds, count):
    """Run ``count`` evaluations through ``choice``; ``seconds(k, i)`` is the time of evaluation i on k threads."""
    used = []
    for i in range(count):
        k = choice.next()
        used.append(k)
        choice.record(k, seconds(k, i))
    return used


def test_choice_runs_on_the_faster_setting():
    fast_one = threads.ThreadChoice(2)
    used = _drive(fast_one, lambda k, i: 1.0 if k == 1 else 1.5, 2000)
    assert fast_one.choice == 1
    assert used.count(2) < 0.02 * len(used)              # trials only: a few blocks on two threads
    fast_two = threads.ThreadChoice(2)
    used = _drive(fast_two, lambda k, i: 1.0 if k == 1 else 0.6, 2000)
    assert fast_two.choice == 2 and used.count(1) < 0.02 * len(used)


def test_first_trial_stops_early_only_on_a_clear_winner():
    """Blocks 1.5x apart decide after one block each; blocks 1.1x apart run the second pair, and a
    winner that shows only in the second pair (the first two blocks met a disturbance) is found."""
    clear = threads.ThreadChoice(2)
    used = _drive(clear, lambda k, i: 1.0 if k == 1 else 1.5, 100)
    assert clear.trials[0] == (2 * threads.BLOCK, 1.5, 1.0) and used[:2 * threads.BLOCK].count(2) == threads.BLOCK
    close = threads.ThreadChoice(2)
    _drive(close, lambda k, i: 1.0 if k == 1 else 1.1, 100)
    assert close.trials[0] == (4 * threads.BLOCK, 1.1, 1.0) and close.choice == 1
    late = threads.ThreadChoice(2)       # two threads 0.6 s, but the first two blocks meet 0.95 s evaluations
    _drive(late, lambda k, i: 1.0 if k == 1 else (0.95 if i < threads.BLOCK else 0.6), 100)
    assert late.trials[0][0] == 4 * threads.BLOCK and late.choice == 2


def test_choice_follows_a_change_of_the_machine():
    """Two threads win until evaluation 1000, then lose (another process starts): the choice follows
    within the longest period, and comparisons grow sparser while the choice stands."""
    choice = threads.ThreadChoice(2)
    used = _drive(choice, lambda k, i: (0.6 if i < 1000 else 2.0) if k == 2 else 1.0, 3000)
    assert used[900] == 2 and choice.choice == 1
    switched = next(n for n, many, one in choice.trials if many > one)
    assert 1000 < switched <= 1000 + threads.LONGEST + 4 * threads.BLOCK
    gaps = np.diff([n for n, _, _ in choice.trials if n < 1000])
    assert np.all(np.diff(gaps) >= 0) and gaps[-1] > gaps[0]


def test_choice_ignores_an_outlier():
    """The first evaluation on two threads meets a warm-up 100x slower: the median still picks two threads."""
    choice = threads.ThreadChoice(2)
    _drive(choice, lambda k, i: 100.0 if i == 0 else (0.6 if k == 2 else 1.0), 40)
    assert choice.trials[0][1] == 0.6 and choice.choice == 2


def test_one_thread_asked_for_is_never_timed():
    choice = threads.ThreadChoice(1)
    assert set(_drive(choice, lambda k, i: 1.0, 500)) == {1} and not choice.trials


def test_evaluation_sets_and_restores_the_threads(monkeypatch):
    """Numba's threads follow the choice inside a solve, are set only when the choice changes, and are
    restored when the solve ends."""
    import numba
    before = numba.get_num_threads()
    calls = []
    setter = numba.set_num_threads
    monkeypatch.setattr(numba, "set_num_threads", lambda k: (calls.append(k), setter(k)))
    with threads.solving() as choice:
        choice.choice, choice._plan = 1, []
        for _ in range(5):
            with threads.evaluation(timed=False):
                inside = numba.get_num_threads()
        between = numba.get_num_threads()
    assert numba.get_num_threads() == before and not threads._CHOICES
    if before > 1:
        assert inside == between == 1 and choice.current == 1
        assert calls == [1, before]                  # once to one thread, once back
    else:
        assert calls == []


@pytest.mark.skipif(__import__("numba").config.NUMBA_NUM_THREADS < 2, reason="one Numba thread")
@pytest.mark.parametrize("solver", ["sphere", "adaptive", "circle"])
def test_solve_same_bits_whatever_the_choice(solver, monkeypatch):
    """Solves whose thread choice is forced to one thread or to two give the same bits."""
    from meanfield.solvers import circle
    runs = []
    for k in (1, 2):
        monkeypatch.setattr(threads.ThreadChoice, "next", lambda self, k=k: k)
        if solver == "circle":
            sol = circle.solve(mf.SA(9.0), perturbed_uniform(2, degree=2), [0.0, 0.5], cells=512,
                               summation="direct", energy=False, progress=False)
        else:
            sol = sphere.solve(mf.SA(3.0), perturbed_uniform(3, degree=2), [0.0, 0.3],
                               mesh=sphere.icosphere(3) if solver == "sphere" else None, energy=False,
                               progress=False)
        runs.append(sol.rho)
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.skipif(__import__("numba").config.NUMBA_NUM_THREADS < 2, reason="one Numba thread")
def test_checkpoint_written_on_one_thread_resumes_on_two(tmp_path, monkeypatch):
    """A solve interrupted while its choice ran on one thread leaves Numba's threads as they were, and
    its checkpoint resumed on two threads repeats the uninterrupted two-thread run bit for bit."""
    import numba
    args = (mf.SA(3.0), perturbed_uniform(3, degree=2), np.linspace(0.0, 2.0, 5))
    kwargs = dict(mesh=sphere.icosphere(3), energy=False, progress=False)
    path = tmp_path / "ck.npz"
    monkeypatch.setattr(threads.ThreadChoice, "next", lambda self: 2)
    full = sphere.solve(*args, **kwargs)
    original, calls = sphere.SphereOperator.__call__, []

    def interrupted(self, rho):
        calls.append(1)
        if len(calls) > 12:
            raise KeyboardInterrupt
        return original(self, rho)

    before = numba.get_num_threads()
    monkeypatch.setattr(threads.ThreadChoice, "next", lambda self: 1)
    monkeypatch.setattr(sphere.SphereOperator, "__call__", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sphere.solve(*args, **kwargs, checkpoint=path, checkpoint_every=2)
    assert numba.get_num_threads() == before and not threads._CHOICES
    monkeypatch.setattr(sphere.SphereOperator, "__call__", original)
    monkeypatch.setattr(threads.ThreadChoice, "next", lambda self: 2)
    resumed = sphere.solve(*args, **kwargs, checkpoint=path, checkpoint_every=2, resume=True)
    assert resumed.info["nfev"] == full.info["nfev"]
    np.testing.assert_array_equal(resumed.rho, full.rho)
