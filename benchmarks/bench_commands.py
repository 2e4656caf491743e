"""The README's two commands, measured: ``meanfield compare`` (its wall time with a warm Numba cache,
its final distances and reference lines) and the test suite (how many tests it collects; with
``--suite``, its wall time too).

The numbers the README and docs/index.md quote about these commands are read from the JSON this
script writes (tests/test_quoted_numbers.py holds the pages to it). ``meanfield compare`` runs
twice in fresh processes: the first compiles and caches the Numba kernels, the second is timed.
Its report figure ``wasserstein.png`` is kept as the README's figure.

    python benchmarks/bench_commands.py [--suite] [--json benchmarks/results/commands.json]
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


def count_tests():
    """The number of tests ``python -m pytest`` collects."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return int(re.search(r"(\d+) tests? collected", out).group(1))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", action="store_true", help="also time the whole test suite (minutes)")
    p.add_argument("--json", default=os.path.join(HERE, "results", "commands.json"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        result = {"compare": measure_compare(folder)}
    result["tests"] = {"collected": count_tests()}
    if args.suite:
        result["tests"]["wall_s"] = _timed([sys.executable, "-m", "pytest", "-q"])[0]
    result["setting"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "load": list(os.getloadavg())}
    with open(args.json, "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
