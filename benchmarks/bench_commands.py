"""The README's two commands, measured: ``meanfield compare`` (its wall time with a warm Numba cache,
its final distances and reference lines) and the test suite (how many tests it collects; with
``--suite``, its wall time too); and the default ``meanfield convergence`` study (its wall time, and its
``convergence.json`` kept whole as ``benchmarks/results/convergence_circle.json``).

The numbers the README and docs/index.md quote about these commands are read from the JSON this
script writes (tests/test_quoted_numbers.py holds the pages to it). ``meanfield compare`` runs
twice in fresh processes: the first compiles and caches the Numba kernels, the second is timed.
Its report figure ``wasserstein.png`` is kept as the README's figure.

    python benchmarks/bench_commands.py [--parts compare tests convergence] [--suite] [--json FILE]

``--parts`` measures only those parts and keeps the others' entries of an existing FILE.
"""
import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIGURE = os.path.join(HERE, "results", "compare_wasserstein.png")


def _timed(cmd):
    """Run ``cmd`` from the repository's root: (wall seconds, its standard output)."""
    clock = time.perf_counter()
    out = subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    return time.perf_counter() - clock, out


def measure_compare(folder):
    """Wall time of a warm ``meanfield compare``, what it prints and the final numbers of its report."""
    cmd = [sys.executable, "-m", "meanfield", "compare", "--out", folder]
    _timed(cmd)                                         # fills the Numba cache
    wall, printed = _timed(cmd)
    with open(os.path.join(folder, "report.json")) as fh:
        report = json.load(fh)
    opts, summary = report["options"], report["summary"]
    n = int(opts["n"])
    shutil.copyfile(os.path.join(folder, "wasserstein.png"), FIGURE)
    return {"wall_s": wall, "printed": printed.splitlines(), "n": n, "seeds": int(opts["seeds"]),
            "cells": int(opts["cells"]),
            "T": float(opts["T"]), "beta": float(opts["beta"]),
            "w1_final": summary["w1_final"], "w2_final": summary["w2_final"],
            "grid_error_final": summary["grid_error_final"],
            "w2_floor": math.pi * (2 * n) ** -0.5, "w1_floor": math.pi / (2 * n),
            "horizon": report["info"]["horizon"], "lambda_star": report["info"]["lambda_star"]}


def measure_convergence(folder):
    """Wall time of the default ``meanfield convergence``; its JSON is kept in benchmarks/results/."""
    wall, _ = _timed([sys.executable, "-m", "meanfield", "convergence", "--out", folder])
    shutil.copyfile(os.path.join(folder, "convergence.json"), os.path.join(HERE, "results", "convergence_circle.json"))
    return {"wall_s": wall}


def count_tests():
    """The number of tests ``python -m pytest`` collects."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return int(re.search(r"(\d+) tests? collected", out).group(1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", nargs="+", choices=["compare", "tests", "convergence"],
                   default=["compare", "tests", "convergence"])
    p.add_argument("--suite", action="store_true", help="also time the whole test suite (minutes)")
    p.add_argument("--json", default=os.path.join(HERE, "results", "commands.json"))
    args = p.parse_args(argv)
    result = {}
    if os.path.exists(args.json):
        with open(args.json) as fh:
            result = json.load(fh)
    setting = {"python": platform.python_version(), "cpus": os.cpu_count(), "load": list(os.getloadavg())}
    for part in args.parts:
        if part == "tests":
            result["tests"] = {"collected": count_tests()}
            if args.suite:
                result["tests"]["wall_s"] = _timed([sys.executable, "-m", "pytest", "-q"])[0]
        else:
            with tempfile.TemporaryDirectory() as folder:
                result[part] = (measure_compare if part == "compare" else measure_convergence)(folder)
        result[part]["setting"] = setting
    with open(args.json, "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
