"""meanfield.sweep: task identity, the resumable store, Dask vs in-process, killed workers and
killed sweeps, the command line."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import partial

import numpy as np
import pytest

import sweep_tasks
from meanfield import sweep

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)


def same(a, b):
    """Two SweepResults hold the same tasks with bit-identical outputs."""
    assert a.keys == b.keys and a.params == b.params
    assert np.array_equal(a.seeds, b.seeds)
    for x, y in zip(a.outputs, b.outputs):
        assert x.keys() == y.keys()
        for name in x:
            assert x[name].dtype == y[name].dtype and np.array_equal(x[name], y[name]), name


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  env={"NUMBA_NUM_THREADS": "1"}) as cluster, distributed.Client(cluster) as c:
        yield c


# --------------------------------------------------------------------------- grid, seeds, identity

def test_grid_order_outputs_and_table(tmp_path):
    res = sweep.run(sweep_tasks.polynomial, {"a": [1, 2, 3], "b": ["x", "y"]}, 2, tmp_path)
    assert len(res) == 12 and res.info["computed"] == 12 and res.info["reused"] == 0
    assert [p["a"] for p in res.params[:4]] == [1, 1, 1, 1]             # first name slowest
    assert [p["b"] for p in res.params[:4]] == ["x", "x", "y", "y"]
    assert res.seeds.tolist() == [0, 1] * 6                              # seeds fastest
    a, s = res.param("a"), res.seeds
    assert np.array_equal(res.get("y"), a * a + s)
    assert res.get("v").shape == (12, 3) and np.array_equal(res.get("v")[:, 2], 2.0 * a + s)
    assert res.get("noise")[1] == np.random.default_rng(1).standard_normal()
    table = res.table()
    assert list(table) == ["a", "b", "seed", "y", "noise", "label"]      # scalar outputs only
    sub = res.select(a=2, b="y")
    assert len(sub) == 2 and sub.get("y").tolist() == [4, 5]
    assert res.select(seed=1).get("y").tolist() == [2, 2, 5, 5, 10, 10]
    sets, mean = res.aggregate("y")
    assert sets[0] == {"a": 1, "b": "x"} and np.allclose(mean, [1.5, 1.5, 4.5, 4.5, 9.5, 9.5])
    with pytest.raises(KeyError, match="'z'"):
        res.get("z")


def test_list_grid_and_seed_list_match_the_product(tmp_path):
    product = sweep.run(sweep_tasks.polynomial, {"a": [2, 5]}, [3, 8], tmp_path / "p")
    listed = sweep.run(sweep_tasks.polynomial, [{"a": 2}, {"a": 5}], [3, 8], tmp_path / "l")
    same(product, listed)


def test_task_key_is_stable():
    key = sweep.task_key("m:f", {"a": 1.5, "b": "x"}, 3)
    assert key == sweep.task_key("m:f", {"b": "x", "a": 1.5}, 3)          # dict order is irrelevant
    assert key != sweep.task_key("m:f", {"a": 1.5, "b": "x"}, 4)
    assert key != sweep.task_key("m:g", {"a": 1.5, "b": "x"}, 3)
    tasks = sweep._tasks("m:f", {"a": [np.float64(1.5)], "b": [np.str_("x")]}, [np.int64(3)])
    assert tasks[0].key == key                                           # NumPy scalars are plain JSON


@pytest.mark.parametrize("grid, seeds, error, match", [
    ({}, 1, ValueError, "grid is empty"),
    ({"a": []}, 1, ValueError, "empty list"),
    ({"a": 3}, 1, TypeError, r"grid\['a'\] must be a list"),
    ({"a": "abc"}, 1, TypeError, r"grid\['a'\] must be a list"),
    ({"a": [float("nan")]}, 1, ValueError, "'a'.*finite JSON"),
    ({"a": [object()]}, 1, ValueError, "'a'.*JSON"),
    ({"seed": [1]}, 1, ValueError, "reserved"),
    ([{"a": 1}, {"a": 1}], 1, ValueError, "same parameter set twice"),
    ("a=1", 1, TypeError, "grid must be"),
    ({"a": [1]}, 0, ValueError, "seeds must be >= 1"),
    ({"a": [1]}, [1, 1], ValueError, "duplicates"),
    ({"a": [1]}, [-1], ValueError, "non-negative"),
    ({"a": [1]}, 2.0, TypeError, "seeds must be an int"),
    ({"a": [1]}, [], ValueError, "seeds is empty"),
])
def test_bad_grid_and_seeds(tmp_path, grid, seeds, error, match):
    with pytest.raises(error, match=match):
        sweep.run(sweep_tasks.polynomial, grid, seeds, tmp_path)


def test_functions_without_a_stable_name_are_refused(tmp_path):
    with pytest.raises(ValueError, match="module-level"):
        sweep.run(lambda p, s: {"y": 1}, {"a": [1]}, 1, tmp_path)
    with pytest.raises(TypeError, match="partial"):
        sweep.run(partial(sweep_tasks.polynomial), {"a": [1]}, 1, tmp_path)
    with pytest.raises(TypeError, match="client must be"):
        sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path / "c", client=3)


def test_bad_outputs_fail_the_task_with_a_clear_message(tmp_path):
    with pytest.raises(sweep.SweepError, match="1 of 1 tasks") as info:
        sweep.run(sweep_tasks.bad_output, {"a": [1]}, 1, tmp_path)
    assert isinstance(info.value.__cause__, TypeError) and "'y' of dtype object" in str(info.value.__cause__)


# --------------------------------------------------------------------------- the store

def test_store_resumes_extends_and_loads(tmp_path):
    first = sweep.run(sweep_tasks.polynomial, {"a": [1, 2]}, 2, tmp_path)
    stamps = {k: os.stat(sweep._task_path(tmp_path, k)).st_mtime_ns for k in first.keys}
    again = sweep.run(sweep_tasks.polynomial, {"a": [1, 2]}, 2, tmp_path)
    assert again.info["computed"] == 0 and again.info["reused"] == 4
    same(first, again)
    grown = sweep.run(sweep_tasks.polynomial, {"a": [1, 2, 3]}, 3, tmp_path)
    assert grown.info["computed"] == 5 and grown.info["reused"] == 4
    assert all(os.stat(sweep._task_path(tmp_path, k)).st_mtime_ns == t for k, t in stamps.items())
    loaded = sweep.load(tmp_path)
    assert loaded.info["pending"] == 0 and set(loaded.keys) == set(grown.keys)
    assert loaded.keys[:4] == first.keys                                 # manifest order: first run first
    same(loaded.select(seed=0), grown.select(seed=0))
    with pytest.raises(ValueError, match="holds results of sweep_tasks:polynomial, not sweep_tasks:slow"):
        sweep.run(sweep_tasks.slow, {"a": [1], "pause": [0.0]}, 1, tmp_path)
    with pytest.raises(ValueError, match="not a sweep store"):
        sweep.load(tmp_path / "nowhere")


def test_load_ignores_stray_temporary_files_and_reports_pending(tmp_path):
    res = sweep.run(sweep_tasks.polynomial, {"a": [1, 2]}, 1, tmp_path)
    (tmp_path / "tasks" / ".tmp-abc.npz").write_bytes(b"half a file")   # a writer killed mid-write
    os.remove(sweep._task_path(tmp_path, res.keys[1]))
    loaded = sweep.load(tmp_path)
    assert loaded.keys == res.keys[:1] and loaded.info["pending"] == 1
    resumed = sweep.run(sweep_tasks.polynomial, {"a": [1, 2]}, 1, tmp_path)
    assert resumed.info["computed"] == 1
    same(resumed, res)


def test_failed_tasks_do_not_stop_the_others_and_rerun_alone(tmp_path):
    flag = tmp_path / "flag"
    flag.touch()
    grid = {"a": [1, 2, 3], "flag": [str(flag)]}
    with pytest.raises(sweep.SweepError, match=r"(?s)2 of 6 tasks.*a = 2 is flagged") as info:
        sweep.run(sweep_tasks.fail_while_flagged, grid, 2, tmp_path / "store")
    assert isinstance(info.value.__cause__, ValueError)
    assert len(sweep.load(tmp_path / "store")) == 4 and sweep.load(tmp_path / "store").info["pending"] == 2
    flag.unlink()
    res = sweep.run(sweep_tasks.fail_while_flagged, grid, 2, tmp_path / "store")
    assert res.info["computed"] == 2 and np.array_equal(res.get("y"), res.param("a") ** 2 + res.seeds)


KILLED_SWEEP = """
import sys
sys.path.insert(0, {tests!r})
import sweep_tasks
from meanfield import sweep
sweep.run(sweep_tasks.slow, {{"a": list(range(10)), "pause": [0.15]}}, 1, {store!r})
"""


def test_killed_sweep_resumes_without_losing_or_redoing_work(tmp_path):
    store = tmp_path / "store"
    script = KILLED_SWEEP.format(tests=TESTS, store=str(store))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    folder = store / "tasks"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if folder.is_dir() and len([f for f in os.listdir(folder) if f.endswith(".npz")
                                    and not f.startswith(".")]) >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = sweep.load(store)
    assert 3 <= len(before) < 10 and before.info["pending"] == 10 - len(before)
    contents = {k: open(sweep._task_path(store, k), "rb").read() for k in before.keys}
    res = sweep.run(sweep_tasks.slow, {"a": list(range(10)), "pause": [0.15]}, 1, store)
    assert res.info["computed"] == 10 - len(before) and res.info["reused"] == len(before)
    assert all(open(sweep._task_path(store, k), "rb").read() == c for k, c in contents.items())
    assert np.array_equal(res.get("y"), np.arange(10) ** 2)
    assert len([f for f in os.listdir(folder) if f.endswith(".npz") and not f.startswith(".")]) == 10


# --------------------------------------------------------------------------- Dask

def test_local_cluster_gives_the_in_process_results(tmp_path, client):
    grid = {"beta": [1.0, 6.0], "n": [12], "d": [3], "T": [6.0], "dt": [0.1]}
    here = sweep.run(sweep.particle_clusters, grid, 2, tmp_path / "here")
    dask = sweep.run(sweep.particle_clusters, grid, 2, tmp_path / "dask", client=client)
    assert dask.info["client"].startswith("tcp://") and dask.info["computed"] == 4
    same(here, dask)                                          # bit for bit, whatever the thread count
    assert np.all(dask.get("energy") >= dask.get("energy0"))  # E_β increases along the flow


def test_dask_tasks_run_with_one_numba_thread(tmp_path, client):
    res = sweep.run(sweep_tasks.numba_threads, {"a": [1, 2]}, 1, tmp_path, client=client)
    assert res.get("threads").tolist() == [1, 1]


def test_killed_worker_loses_nothing_and_completes(tmp_path, client):
    flag = tmp_path / "killed"
    grid = [{"a": a, "victim": a == 3, "flag": str(flag)} for a in range(8)]
    res = sweep.run(sweep_tasks.kill_worker_once, grid, 1, tmp_path / "store", client=client)
    assert flag.exists()                                      # a worker really died mid-sweep
    assert res.info["computed"] == 8 and len(set(res.keys)) == 8
    assert np.array_equal(res.get("y"), np.arange(8) ** 2)
    loaded = sweep.load(tmp_path / "store")
    assert loaded.info["pending"] == 0
    same(loaded, res)


def test_failures_on_dask_are_collected(tmp_path, client):
    flag = tmp_path / "flag"
    flag.touch()
    with pytest.raises(sweep.SweepError, match="1 of 3 tasks"):
        sweep.run(sweep_tasks.fail_while_flagged, {"a": [1, 2, 3], "flag": [str(flag)]}, 1, tmp_path / "s",
                  client=client)
    assert len(sweep.load(tmp_path / "s")) == 2


def test_local_client_without_dask_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)                # import distributed -> ImportError
    with pytest.raises(ImportError, match=r"meanfield-attention\[dist\]"):
        sweep.run(sweep_tasks.polynomial, {"a": [1]}, 1, tmp_path, client="local")


# --------------------------------------------------------------------------- particle_clusters

def test_particle_clusters_reaches_consensus_at_small_beta(tmp_path):
    """SA at β = 1 in d = 3 reaches consensus: one cluster, <x_i, x_j> = 1 and E_β = e^β/(2β)."""
    out = sweep.particle_clusters({"beta": 1.0, "n": 16, "d": 3, "T": 40.0, "dt": 0.5}, 0)
    assert out["clusters"] == 1 and out["min_inner"] > 1 - 1e-8
    assert out["energy"] == pytest.approx(np.e / 2, rel=1e-8) and out["energy0"] < out["energy"]
    with pytest.raises(ValueError, match="unknown model"):
        sweep.particle_clusters({"model": "XA", "beta": 1.0, "n": 4, "d": 3, "T": 1.0}, 0)


# --------------------------------------------------------------------------- command line

def write_config(tmp_path, body):
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_command_line_runs_resumes_and_prints_a_table(tmp_path, capsys, monkeypatch):
    (tmp_path / "my_tasks.py").write_text("def square(params, seed):\n    return {'y': params['a'] ** 2 + seed}\n")
    monkeypatch.syspath_prepend(str(tmp_path))      # the user's module on PYTHONPATH
    config = write_config(tmp_path, f"""
        function = "my_tasks:square"
        store = "{tmp_path / 'store'}"
        seeds = [0, 10]
        [grid]
        a = [1, 2]
        [dask]
        scheduler = "none"
        """)
    from meanfield.cli import main as cli
    assert cli(["sweep", str(config), "--no-progress", "--allow-any-function"]) == 0
    out = capsys.readouterr().out
    assert "4 computed, 0 reused; in-process" in out
    assert out.splitlines()[1].split() == ["a", "mean", "y"] and out.splitlines()[3].split() == ["2", "9"]
    assert sweep.main([str(config), "--no-progress", "--allow-any-function"]) == 0
    assert "0 computed, 4 reused" in capsys.readouterr().out
    res = sweep.load(tmp_path / "store")
    assert res.get("y").tolist() == [1, 11, 4, 14]


def test_command_line_falls_back_to_in_process_without_dask(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    config = write_config(tmp_path, """
        function = "sweep_tasks:polynomial"
        seeds = 1
        [grid]
        a = [3]
        """)
    monkeypatch.chdir(tmp_path)
    assert sweep.main([str(config), "--no-progress", "--allow-any-function"]) == 0
    captured = capsys.readouterr()
    assert "running in-process" in captured.err and "1 computed" in captured.out
    assert sweep.load(tmp_path / "config-store").get("y").tolist() == [9]


def test_command_line_reports_failed_tasks(tmp_path, capsys):
    config = write_config(tmp_path, f"""
        function = "sweep_tasks:bad_output"
        store = "{tmp_path / 'store'}"
        [grid]
        a = [1]
        """)
    assert sweep.main([str(config), "--scheduler", "none", "--no-progress", "--allow-any-function"]) == 1
    assert "1 of 1 tasks" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        sweep.main([str(write_config(tmp_path, 'function = "sweep_tasks:polynomial"\n')), "--allow-any-function"])
    assert exit_.value.code == 2 and "missing 'grid'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        sweep.main([str(write_config(tmp_path, 'function = "polynomial"\n[grid]\na = [1]\n'))])
    assert exit_.value.code == 2 and "module:function" in capsys.readouterr().err


class _Connected(Exception):
    pass


@pytest.fixture
def no_connection(monkeypatch):
    """distributed.Client that fails the test if anything tries to connect."""
    distributed = pytest.importorskip("distributed")

    class Refused(distributed.Client):
        def __init__(self, *args, **kwargs):
            raise _Connected(f"a Client was made: {args} {kwargs}")
    monkeypatch.setattr(distributed, "Client", Refused)
    monkeypatch.setattr("socket.socket.connect", lambda *a: pytest.fail("a socket connected"))


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tls://example.org:8786", "inproc://x", "ws://h:1"])
def test_config_naming_a_scheduler_is_refused_before_connecting(tmp_path, capsys, no_connection, address):
    """A config is data: a scheduler address in it (which could send back pickles that run code here)
    is refused, exit 2, before any Client or socket exists, unless the user's flag allows it."""
    config = write_config(tmp_path, f"""
        function = "meanfield.sweep:particle_clusters"
        store = "{tmp_path / 'store'}"
        [grid]
        beta = [1.0]
        n = [4]
        d = [3]
        T = [1.0]
        [dask]
        scheduler = "{address}"
        """)
    from meanfield.cli import main as cli
    with pytest.raises(SystemExit) as exit_:
        cli(["sweep", str(config), "--quiet"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and address in err and "--allow-scheduler" in err
    assert not (tmp_path / "store").exists()
    if address.startswith("tcp://"):         # the user's flag: now (and only now) a Client is made
        with pytest.raises(_Connected):
            sweep.main([str(config), "--quiet", "--allow-scheduler"])
        with pytest.raises(_Connected):
            sweep.main([str(config), "--quiet", "--scheduler", address])
    assert sweep.main([str(config), "--quiet", "--scheduler", "none"]) == 0       # the user's choice wins


def test_cores_honour_the_cgroup_quota(monkeypatch):
    import meanfield.solvers._numba_env as env
    monkeypatch.setattr(env, "cpu_quota", lambda root="/sys/fs/cgroup": 1)
    assert sweep._cores() == 1
    monkeypatch.setattr(env, "cpu_quota", lambda root="/sys/fs/cgroup": None)
    assert sweep._cores() == (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())


def test_example_config_describes_a_valid_sweep():
    config = sweep._read_config(os.path.join(ROOT, "examples", "sweep.toml"))
    func = sweep._import_function(config["function"])
    assert func is sweep.particle_clusters
    tasks = sweep._tasks(sweep._func_id(func), config["grid"], config["seeds"])
    assert len(tasks) == 24 and json.dumps(tasks[0].params)
    assert config["dask"]["scheduler"] == "local"
