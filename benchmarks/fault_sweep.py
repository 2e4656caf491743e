"""A bounded fuzz and fault sweep over the public surface (issue 38): counts of correct answers, named
refusals, silent wrong answers, raw errors, hangs, out-of-memory failures and user files removed.

    python benchmarks/fault_sweep.py [--draws 150] [--seed 0]

Every case runs in this process under a 60 s alarm (a hang) and an address-space limit of 16 GiB
(an allocation beyond it is a MemoryError, counted as an out-of-memory failure, instead of the
kernel's OOM killer).  A case passes when it returns an answer that passes its check, or raises
ValueError/TypeError/OSError; any other exception is a raw error, a failed check a silent wrong
answer; a controlled-step run stopped at its work budget (a RuntimeError naming the budget and the
checkpoint to resume from, as documented) is counted apart.  The classes: ρ₀ at the ends of the
double range on six engines, damaged and crafted checkpoints on seven loaders, report folders
(user files, changed digits, swapped files), a sweep config naming a scheduler, refusals of runs
that cannot finish or fit, and random draws of the solvers' arguments.
"""
import argparse
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import warnings
from collections import Counter

import numpy as np

import meanfield as mf
from meanfield import compare, sweep
from meanfield.cli.report import write_report
from meanfield.solvers import adaptive, adaptive_circle, causal, circle, hardmax, particles, sphere, zonal
from meanfield.solvers.meshes.voronoi import icosphere

ALARM = 60
MEMORY = 16 * 2 ** 30
REFUSALS = (ValueError, TypeError, OSError)
MODEL = mf.SA(1.0)
T0 = [0.0, 0.01]


class Hang(Exception):
    pass


def run_case(call, check):
    """'ok', 'refused', 'wrong', 'raw', 'hang' or 'oom' for call() and check(answer)."""
    def expire(*_):
        raise Hang
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(ALARM)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            answer = call()
    except Hang:
        return "hang", "no answer within the alarm"
    except MemoryError as exc:
        return "oom", repr(exc)
    except REFUSALS as exc:
        return "refused", str(exc)[:200]
    except RuntimeError as exc:
        if "budget" in str(exc):       # a controlled-step run stopped at its budget (documented, resumable)
            return "stopped", str(exc)[:200]
        return "raw", f"RuntimeError: {exc}"[:200]
    except Exception as exc:  # noqa: BLE001  (a raw error is what the sweep counts)
        return "raw", f"{type(exc).__name__}: {exc}"[:200]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    try:
        good = check(answer)
    except Exception as exc:  # noqa: BLE001
        return "wrong", f"check raised {type(exc).__name__}: {exc}"[:200]
    return ("ok", "") if good else ("wrong", "check failed")


def unit_density(sol):
    rho = [np.asarray(r, dtype=float) for r in sol.rho]
    return all(np.all(np.isfinite(r)) and np.all(r >= -1e-14) for r in rho) and \
        np.allclose(np.asarray(sol.mass, dtype=float), 1.0, rtol=1e-10)


def must_refuse(_answer):
    return False        # an answer where a refusal was due is a silent wrong answer


def shape(x):
    return 1 + 0.5 * x[:, 0]


ENGINES = {
    "circle": (lambda f: circle.solve(MODEL, f, T0, cells=32), lambda: shape(mf.circle_points(circle.cell_angles(32))),
               lambda a: circle.solve(MODEL, a, T0)),
    "sphere": (lambda f: sphere.solve(MODEL, f, T0, mesh=icosphere(1)), lambda: shape(icosphere(1).points),
               lambda a: sphere.solve(MODEL, a, T0, mesh=icosphere(1))),
    "adaptive": (lambda f: adaptive.solve(MODEL, f, T0, base=1, finest=2), lambda: shape(icosphere(1).points),
                 lambda a: adaptive.solve(MODEL, a, T0, base=1, finest=2)),
    "adaptive_circle": (lambda f: adaptive_circle.solve(MODEL, f, T0, cells=16, finest_cells=64),
                        lambda: shape(mf.circle_points(circle.cell_angles(16))),
                        lambda a: adaptive_circle.solve(MODEL, a, T0, cells=16, finest_cells=64)),
    "causal": (lambda f: causal.solve(MODEL, lambda s, th: f(np.column_stack([
                   np.cos(th + 0 * s).ravel(), np.sin(th + 0 * s).ravel()])).reshape(4, 16), T0, slices=4, cells=16),
               lambda: shape(mf.circle_points(circle.cell_angles(16))),
               lambda a: causal.solve(MODEL, np.tile(a, (4, 1)), T0, slices=4, cells=16)),
    "zonal": (lambda f: zonal.solve(MODEL, lambda s: f(np.column_stack([s, np.sqrt(1 - s * s)])), T0, d=3, cells=16),
              lambda: 1 + 0.5 * np.cos(zonal.polar_grid(16)[0]), lambda a: zonal.solve(MODEL, a, T0, d=3)),
}


def density_cases():
    for name, (by_callable, values, by_array) in ENGINES.items():
        for scale in (1e308, 1.7e308, 1.0, 2.0 ** -1000, 1e-310, 5e-324):
            yield f"rho0 {name} callable x{scale:g}", lambda s=scale, f=by_callable: f(lambda x: s * shape(x)), \
                unit_density
            yield f"rho0 {name} array x{scale:g}", lambda s=scale, f=by_array, v=values: f(s * v()), unit_density
        for bad in (np.nan, np.inf, -1.0, 0.0):
            def crafted(f=by_array, v=values, b=bad):
                a = v() * (0.0 if b == 0.0 else 1.0)
                a[0] = b if b != 0.0 else 0.0
                return f(a)
            yield f"rho0 {name} array with {bad}", crafted, must_refuse


X0 = mf.uniform_sphere(8, 3, seed=1)
RUNS = {
    "circle": (lambda p, r: circle.solve(MODEL, shape, [0.0, 0.05, 0.1], cells=32, checkpoint=p, resume=r,
                                         checkpoint_every=2), "y"),
    "sphere": (lambda p, r: sphere.solve(MODEL, shape, [0.0, 0.05, 0.1], mesh=icosphere(1), checkpoint=p, resume=r,
                                         checkpoint_every=2), "y"),
    "zonal": (lambda p, r: zonal.solve(MODEL, lambda s: 1 + 0.5 * s, [0.0, 0.05, 0.1], d=3, cells=16, checkpoint=p,
                                       resume=r, checkpoint_every=2), "y"),
    "causal": (lambda p, r: causal.solve(MODEL, lambda s, th: 1 + 0.5 * np.cos(th) + 0 * s, [0.0, 0.05, 0.1],
                                         slices=4, cells=16, checkpoint=p, resume=r, checkpoint_every=2), "y"),
    "particles": (lambda p, r: particles.solve(MODEL, X0, [0.0, 0.05, 0.1], dt=0.01, checkpoint=p, resume=r,
                                               checkpoint_every=2), "y"),
    "adaptive_circle": (lambda p, r: adaptive_circle.solve(MODEL, shape, [0.0, 0.3, 0.6], cells=16, finest_cells=64,
                                                           interval=0.1, checkpoint=p, checkpoint_every=1, resume=r),
                        "rho"),
    "adaptive": (lambda p, r: adaptive.solve(MODEL, shape, [0.0, 0.3, 0.6], base=1, finest=2, interval=0.1,
                                             checkpoint=p, resume=r), "rho"),
}


def damage(path, fault, key, rng):
    data = path.read_bytes() if hasattr(path, "read_bytes") else open(path, "rb").read()
    if fault.startswith("flip"):
        flipped = bytearray(data)
        for i in rng.choice(len(data), size=8, replace=False):
            flipped[i] ^= 1 << int(rng.integers(8))
        open(path, "wb").write(bytes(flipped))
        return
    if fault.startswith("truncate"):
        open(path, "wb").write(data[: int(rng.integers(1, len(data)))])
        return
    with np.load(path, allow_pickle=False) as npz:
        state = {k: npz[k] for k in npz.files}
    if fault == "double":
        state[key] = state[key] * 2
    elif fault == "nan":
        state[key] = state[key].copy()
        state[key].flat[0] = np.nan
    elif fault == "negative":
        state[key] = state[key].copy()
        state[key].flat[0] = -1.0
    elif fault in ("k99", "k0"):
        state["k"] = np.array(99 if fault == "k99" else 0, dtype=state["k"].dtype)
    elif fault == "t1e6":
        state["t"] = np.array(1e6)
    np.savez(path, **state)


def checkpoint_cases(folder, rng):
    faults = ["flip1", "flip2", "flip3", "truncate1", "truncate2", "double", "nan", "negative", "k99", "k0", "t1e6"]
    for name, (run, key) in RUNS.items():
        clean = os.path.join(folder, f"{name}.npz")
        run(clean, False)
        for fault in faults:
            def resumed(run=run, key=key, fault=fault, clean=clean, name=name):
                path = os.path.join(folder, f"{name}-{fault}.npz")
                shutil.copy(clean, path)
                damage(path, fault, key, rng)
                return run(path, True)
            # a flip may hit padding or an unused member: an answer is then right if it matches the clean run
            reference = run(clean, True)
            yield f"checkpoint {name} {fault}", resumed, \
                (lambda sol, ref=reference: np.array_equal(np.asarray(sol.rho if hasattr(sol, "rho") else sol.x,
                                                                      dtype=object).tolist(),
                                                           np.asarray(ref.rho if hasattr(ref, "rho") else ref.x,
                                                                      dtype=object).tolist()))


def folder_cases(folder):
    first = compare.compare(mf.SA(2.0), mf.perturbed_uniform(2, seed=1), [0.0, 0.5], n=16, seeds=1, cells=32)
    report = write_report(first, os.path.join(folder, "report"))
    base = os.path.dirname(report[0])
    removed = []

    def with_user_file(added):
        out = os.path.join(folder, "out-" + added.replace("/", "_"))
        shutil.copytree(base, out)
        target = os.path.join(out, added)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "w").write("mine")
        try:
            return write_report(first, out)
        finally:
            if not os.path.exists(target):
                removed.append(target)
    for added in ("notes.txt", "mydata/x.csv"):
        yield f"report --out over a user file {added}", lambda a=added: with_user_file(a), must_refuse

    def changed(fault):
        out = os.path.join(folder, "changed-" + fault)
        shutil.copytree(base, out)
        if fault == "digit":
            path = os.path.join(out, "report.json")
            text = open(path).read()
            i = text.index('"w1"') + 10
            i = next(j for j in range(i, len(text)) if text[j] in "123456789")
            open(path, "w").write(text[:i] + str(int(text[i]) % 9 + 1) + text[i + 1:])
        elif fault == "swap":
            other = compare.compare(mf.SA(2.0), mf.perturbed_uniform(2, seed=2), [0.0, 0.5], n=16, seeds=1, cells=32)
            write_report(other, out + "-other")
            shutil.copy(os.path.join(out + "-other", "density.npz"), os.path.join(out, "density.npz"))
        elif fault == "truncate":
            path = os.path.join(out, "report.json")
            open(path, "w").write(open(path).read()[:40])
        return compare.Comparison.load(out)
    for fault in ("digit", "swap", "truncate"):
        yield f"report load {fault}", lambda f=fault: changed(f), must_refuse
    yield "report load clean", lambda: compare.Comparison.load(base), lambda c: c.t.tolist() == [0.0, 0.5]
    yield "_removed", removed, None


def refusal_cases(folder):
    config = os.path.join(folder, "evil.toml")
    open(config, "w").write('function = "meanfield.sweep:particle_clusters"\n[grid]\nbeta = [1.0]\nn = [4]\nd = [3]\n'
                            'T = [1.0]\n[dask]\nscheduler = "tcp://127.0.0.1:1"\n')

    def sweep_refuses():
        real = socket.socket.connect

        def refuse(*_):
            raise AssertionError("a socket connected")
        socket.socket.connect = refuse
        try:
            sweep.main([config, "--quiet", "--store", os.path.join(folder, "store")])
        except SystemExit as exc:
            if exc.code == 2:
                raise ValueError("refused with exit status 2") from None
            raise
        finally:
            socket.socket.connect = real
    yield "sweep config naming a scheduler", sweep_refuses, must_refuse
    cases = {
        "hardmax dt=1e-300": lambda: hardmax.solve(mf.Hardmax(1.0), X0, [0.0, 1.0], dt=1e-300),
        "hardmax at t=1e20": lambda: hardmax.solve(mf.Hardmax(1.0), X0, [1e20, 1e20 + 1e4], dt=1.0),
        "adaptive interval=1e-300": lambda: adaptive.solve(MODEL, shape, [0.0, 1.0], base=1, finest=2, interval=1e-300),
        "adaptive_circle interval=1e-300": lambda: adaptive_circle.solve(MODEL, shape, [0.0, 1.0], cells=16,
                                                                         finest_cells=64, interval=1e-300),
        "adaptive finest=20": lambda: adaptive.solve(MODEL, shape, [0.0, 1.0], base=2, finest=20),
        "causal slices=1e7": lambda: causal.solve(MODEL, lambda s, th: 1 + 0 * s * th, [0.0, 1.0], slices=10 ** 7),
        "compare n=1e9": lambda: compare.compare(MODEL, mf.perturbed_uniform(2), [0.0, 1.0], n=10 ** 9),
        "compare causal slices=1e7": lambda: compare.compare(MODEL, mf.perturbed_uniform(2), [0.0, 1.0], causal=True,
                                                             slices=10 ** 7),
        "compare causal transport=bogus": lambda: compare.compare(MODEL, mf.perturbed_uniform(2), [0.0, 1.0],
                                                                  causal=True, transport="bogus"),
        "DensitySolution.at k=99": lambda: circle.solve(MODEL, shape, T0, cells=32).at(X0[:, :2] / np.linalg.norm(
            X0[:, :2], axis=1, keepdims=True), k=99),
        "energy='no'": lambda: sphere.solve(MODEL, shape, T0, mesh=icosphere(1), energy="no"),
    }
    for name, call in cases.items():
        yield name, call, must_refuse


EXTREME = [0.0, -0.0, 5e-324, 1e-300, 1e-3, 0.5, 1.0, 7.0, 709.0, 1e20, 1e300, -1.0, np.nan, np.inf]


def random_cases(draws, rng):
    def pick(values):
        return values[int(rng.integers(len(values)))]
    for i in range(draws):
        beta, t_end = pick(EXTREME + [0.5, 2.0, 4.0] * 3), pick(EXTREME + [0.05, 0.1, 0.2] * 4)
        model = pick([mf.SA, mf.USA])(beta) if np.isfinite(beta) and beta >= 0 else None
        with np.errstate(over="ignore"):
            rho = np.minimum(np.abs(rng.normal(size=16)) * pick([1.0, 1e308, 5e-324, 1e-310, 1.0]), 1.7e308)
        if rng.random() < 0.2:
            rho[int(rng.integers(16))] = pick([np.nan, np.inf, -1.0, 0.0])
        which = pick(["circle", "sphere", "causal", "hardmax", "adaptive", "adaptive_circle", "zonal"])
        interval, dt = pick(EXTREME + [0.1] * 4), pick([None, None, None] + EXTREME)
        if model is None:
            yield f"random {i} {which} beta={beta}", (lambda b=beta: mf.SA(b)), must_refuse
            continue
        call = _random_call(which, model, beta, rho, t_end, dt, interval)
        check = (lambda sol: np.allclose(np.linalg.norm(sol.x, axis=-1), 1, atol=1e-8)) if which == "hardmax" \
            else unit_density
        yield f"random {i} {which} beta={beta} t={t_end} dt={dt} interval={interval}", call, check


def _random_call(which, model, beta, rho, t_end, dt, interval):
    calls = {
        "circle": lambda: circle.solve(model, rho, [0.0, t_end], dt=dt, budget=10),
        "sphere": lambda: sphere.solve(model, np.resize(rho, 42), [0.0, t_end], mesh=icosphere(1), budget=10),
        "causal": lambda: causal.solve(model, np.tile(rho, (4, 1)), [0.0, t_end], dt=dt),
        "hardmax": lambda: hardmax.solve(mf.Hardmax(beta), X0, [0.0, t_end], dt=dt if dt is not None else 0.01),
        "adaptive": lambda: adaptive.solve(model, np.resize(rho, 42), [0.0, t_end], base=1, finest=2,
                                           interval=interval, budget=10),
        "adaptive_circle": lambda: adaptive_circle.solve(model, rho, [0.0, t_end], cells=16, finest_cells=64,
                                                         interval=interval, budget=10),
        "zonal": lambda: zonal.solve(model, rho, [0.0, t_end], d=3, budget=10),
    }
    return calls[which]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, resource.getrlimit(resource.RLIMIT_AS)[1]))
    rng = np.random.default_rng(args.seed)
    counts, bad = Counter(), []
    removed = []
    with tempfile.TemporaryDirectory() as folder:
        groups = [("rho0", density_cases()), ("checkpoints", checkpoint_cases(folder, rng)),
                  ("folders", folder_cases(folder)), ("refusals", refusal_cases(folder)),
                  ("random", random_cases(args.draws, rng))]
        for group, cases in groups:
            for name, call, check in cases:
                if name == "_removed":
                    removed = call
                    continue
                outcome, detail = run_case(call, check)
                counts[group, outcome] += 1
                if outcome not in ("ok", "refused", "stopped"):
                    bad.append(f"{outcome:7s} {name}: {detail}")
    kinds = ("ok", "refused", "stopped", "wrong", "raw", "hang", "oom")
    print(f"{'group':12s}" + "".join(f"{k:>9s}" for k in kinds))
    for group in dict.fromkeys(g for g, _ in counts):
        print(f"{group:12s}" + "".join(f"{counts[group, k]:9d}" for k in kinds))
    total = Counter()
    for (_, k), v in counts.items():
        total[k] += v
    print(f"{'all':12s}" + "".join(f"{total[k]:9d}" for k in kinds))
    print(f"user files removed: {len(removed)}")
    print("\n".join(bad) if bad else "no silent wrong answers, raw errors, hangs or out-of-memory failures")
    return int(bool(bad or removed))


if __name__ == "__main__":
    sys.exit(main())
