"""Start-up cost of the command line and of ``import meanfield``, against the libraries underneath.

Each contender is a fresh Python process; the contenders run interleaved (one of each per round,
in a shuffled order, after one warm-up round that fills the file cache), and the table gives the
median wall time of each and the ratios the package promises:

- ``meanfield --help``, ``meanfield compare --help`` and rejected options, against
  ``python -c "import numpy, scipy"`` (target: at most 1.5x);
- ``import meanfield`` against ``import numpy, scipy.special, numba, matplotlib`` (target: at most
  1.5x), and, for scale, every public name (``from meanfield import *``, which imports the engines)
  and ``import ot`` (which imports every array backend installed: PyTorch, JAX, ...).

Run it twice to see what an installed PyTorch costs POT: as is, and with POT's switch
``POT_BACKEND_DISABLE_PYTORCH=1`` (what POT imports then is what it imports without PyTorch):

    python benchmarks/bench_startup.py [--rounds 9] [--json benchmarks/results/startup.json]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time

import numpy as np

PY = sys.executable
_SCRIPT = os.path.join(os.path.dirname(PY), "meanfield")
MEANFIELD = [_SCRIPT] if os.path.exists(_SCRIPT) else ([shutil.which("meanfield")] if shutil.which("meanfield")
                                                        else [PY, "-m", "meanfield"])

CONTENDERS = {
    "meanfield --help": MEANFIELD + ["--help"],
    "meanfield compare --help": MEANFIELD + ["compare", "--help"],
    "meanfield compare --beta nan (rejected)": MEANFIELD + ["compare", "--beta", "nan"],
    "meanfield convergence --n 0 5 (rejected)": MEANFIELD + ["convergence", "--n", "0", "5"],
    "import numpy, scipy": [PY, "-c", "import numpy, scipy"],
    "import meanfield": [PY, "-c", "import meanfield"],
    "import numpy, scipy.special, numba, matplotlib": [PY, "-c", "import numpy, scipy.special, numba, matplotlib"],
    "from meanfield import * (every public name)": [PY, "-c", "from meanfield import *"],
    "import ot": [PY, "-c", "import ot"],
}
RATIOS = [("meanfield --help", "import numpy, scipy"),
          ("meanfield compare --help", "import numpy, scipy"),
          ("meanfield compare --beta nan (rejected)", "import numpy, scipy"),
          ("meanfield convergence --n 0 5 (rejected)", "import numpy, scipy"),
          ("import meanfield", "import numpy, scipy.special, numba, matplotlib"),
          ("from meanfield import * (every public name)", "import numpy, scipy.special, numba, matplotlib")]


def wall(cmd):
    clock = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - clock


def measure(rounds, seed=0):
    """{contender: [seconds per round]}, one warm-up round first, rounds interleaved and shuffled."""
    rng = random.Random(seed)
    names = list(CONTENDERS)
    for name in names:
        wall(CONTENDERS[name])
    times = {name: [] for name in names}
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            times[name].append(wall(CONTENDERS[name]))
    return times


def installed(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--json", help="also write the medians and ratios to this file (appends a run)")
    args = p.parse_args(argv)
    times = measure(args.rounds)
    medians = {name: float(np.median(v)) for name, v in times.items()}
    setting = dict(torch=installed("torch"), jax=installed("jax"),
                   pot_torch_disabled=bool(os.environ.get("POT_BACKEND_DISABLE_PYTORCH")),
                   pot_jax_disabled=bool(os.environ.get("POT_BACKEND_DISABLE_JAX")), rounds=args.rounds,
                   python=sys.version.split()[0], cpus=os.cpu_count())
    print(f"start-up, median of {args.rounds} interleaved rounds, one process each; {setting}")
    for name, value in medians.items():
        print(f"  {name:<48} {value:6.3f} s")
    ratios = {f"{a} / {b}": medians[a] / medians[b] for a, b in RATIOS}
    for name, value in ratios.items():
        print(f"  {name:<95} {value:5.2f}x")
    if args.json:
        runs = []
        if os.path.exists(args.json):
            with open(args.json) as fh:
                runs = json.load(fh)
        runs.append(dict(setting=setting, medians=medians, ratios=ratios))
        with open(args.json, "w") as fh:
            json.dump(runs, fh, indent=1)


if __name__ == "__main__":
    main()
