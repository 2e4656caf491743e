"""``meanfield figures``: reproduce the experiments of arXiv:2312.10794 (the ``validation/`` scripts).

Each script ``validation/NAME.py`` defines ``main(argv=None)`` accepting ``--quick`` (small
sizes, seconds, for the test suite) and ``--out DIR``, and runs one experiment, most of them
through an ``Experiment``, which parses those options, records named checks of the
experiment's claims, and writes
``DIR/NAME.png`` (plus any extra files) and ``DIR/NAME.json`` — the numbers behind the figure,
the checks, the run time and the command that made them. A failed check makes the run fail::

    meanfield figures --list
    meanfield figures                         # every experiment at the paper's size, in ./figures
    meanfield figures kuramoto repulsive --quick --out /tmp/figs
    meanfield figures --out validation/results   # refresh the results committed in a checkout

Output goes to ``./figures`` unless ``--out`` says otherwise: the results committed in the
source tree (``validation/results``) are only rewritten when asked for explicitly. The scripts
ship with the package as ``meanfield.validation`` (the folder ``validation/`` of the source
tree), so the command works from an installed wheel too.
"""
import argparse
import contextlib
import importlib
import io
import json
import os
import platform
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from meanfield.progress import quiet, track

__all__ = ["Experiment", "CheckFailed", "max_relative_decrease", "validation_dir", "scripts", "load_script",
           "run_script", "main"]

DEFAULT_OUT = Path("figures")


class CheckFailed(AssertionError):
    """An experiment's claim did not hold (its JSON is still written, with the failed checks).

    Parameters
    ----------
    message : str
        The failed claims.

    Examples
    --------
    >>> from meanfield.cli.figures import CheckFailed
    >>> isinstance(CheckFailed("energy: 1 claim(s) failed"), AssertionError)
    True
    """


def validation_dir() -> Path:
    """The folder of the experiment scripts: the installed package ``meanfield.validation``
    (``validation/`` of the source tree).

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> from meanfield.cli.figures import validation_dir
    >>> (validation_dir() / "energy.py").exists()
    True
    """
    from meanfield import validation
    return Path(validation.__file__).resolve().parent


def scripts() -> dict[str, Path]:
    """Every experiment script: ``validation/*.py`` not starting with ``_``, by name.

    Returns
    -------
    dict of str to pathlib.Path
        name -> path, sorted by name.

    Examples
    --------
    >>> from meanfield.cli.figures import scripts
    >>> "kuramoto" in scripts(), "__init__" in scripts()
    (True, False)
    """
    return {p.stem: p for p in sorted(validation_dir().glob("*.py")) if not p.name.startswith("_")}


def load_script(name: str) -> types.ModuleType:
    """Import ``validation/NAME.py`` as the module ``meanfield.validation.NAME`` (so that its
    module-level task functions have the same identity, importable by Dask workers, whichever way
    the script is started).

    Parameters
    ----------
    name : str
        The experiment's name.

    Returns
    -------
    module

    Raises
    ------
    ValueError
        If there is no such experiment.

    Examples
    --------
    >>> from meanfield.cli.figures import load_script
    >>> load_script("energy").__name__
    'meanfield.validation.energy'
    """
    known = scripts()
    if name not in known:
        raise ValueError(f"unknown experiment {name!r}; choose from {', '.join(known)} (meanfield figures --list)")
    return importlib.import_module(f"meanfield.validation.{name}")


def run_script(path: str | os.PathLike, argv: list[str] | None = None) -> int:
    """Entry point of ``python validation/NAME.py [options]``: run that experiment's ``main``.

    Parameters
    ----------
    path : str or os.PathLike
        The script (its stem names the experiment).
    argv : list of str, optional
        Its options (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 1 when a check failed (the message goes to stderr).

    Raises
    ------
    ValueError
        If there is no such experiment.

    Examples
    --------
    >>> from meanfield.cli.figures import run_script
    >>> run_script("validation/nosuch.py")
    Traceback (most recent call last):
    ...
    ValueError: unknown experiment 'nosuch'; choose from ...
    """
    module = load_script(Path(path).stem)
    try:
        module.main(sys.argv[1:] if argv is None else argv)
    except CheckFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def max_relative_decrease(values: ArrayLike) -> float:
    r"""Largest drop between consecutive entries along axis 0, relative to max |values| (0 if none): the
    monotonicity defect of an energy history.

    .. math::

        \max\Big(0, \max_k \frac{v_k - v_{k+1}}{\max_j |v_j|}\Big).

    Parameters
    ----------
    values : array_like
        A history along axis 0.

    Returns
    -------
    float

    Examples
    --------
    >>> from meanfield.cli.figures import max_relative_decrease
    >>> max_relative_decrease([1.0, 2.0, 3.0]), max_relative_decrease([1.0, 4.0, 3.0])
    (0.0, 0.25)
    """
    values = np.asarray(values, dtype=float)
    return float(max(0.0, -np.min(np.diff(values, axis=0)) / np.max(np.abs(values))))


def _jsonable(value):
    """NumPy arrays and scalars as plain JSON (non-finite floats as strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value


class Experiment:
    """Options, checks and outputs of one validation script.

    ``exp = Experiment(name, description, argv)`` parses ``--quick`` and ``--out`` (plus the
    options a script adds through ``options(parser)``); ``exp.size(quick, full)`` picks a size;
    ``exp.check(claim, ok, **numbers)`` records a claim; ``exp.path(suffix)`` names an output;
    ``exp.finish(figure, results)`` writes NAME.png and NAME.json and raises ``CheckFailed``
    if any claim failed.

    Parameters
    ----------
    name : str
        The experiment's name (of its outputs).
    description : str
        One line, for --help and the JSON.
    argv : list of str, optional
        The options (default ``sys.argv[1:]``).
    options : callable, optional
        ``options(parser)`` adds the script's own options to the argparse parser.

    Examples
    --------
    >>> import tempfile
    >>> import matplotlib.pyplot as plt
    >>> from meanfield.cli.figures import Experiment
    >>> with tempfile.TemporaryDirectory() as out:
    ...     exp = Experiment("demo", "a demonstration", ["--quick", "--out", out])
    ...     n = exp.size(10, 1000)
    ...     ok = exp.check("n is small under --quick", n < 100, n=n)
    ...     record = exp.finish(plt.figure(), {"n": n})
      [ok] n is small under --quick  n=10
    demo: wrote ... (... s)
    >>> record["passed"], record["quick"]
    (True, True)
    """

    def __init__(self, name: str, description: str, argv: list[str] | None = None,
                 options: Callable[[argparse.ArgumentParser], object] | None = None):
        parser = argparse.ArgumentParser(prog=f"validation/{name}.py", description=description)
        parser.add_argument("--quick", action="store_true", help="small sizes (seconds), for the test suite")
        parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"output folder (default {DEFAULT_OUT})")
        if options is not None:
            options(parser)
        argv = sys.argv[1:] if argv is None else list(argv)
        self.args = parser.parse_args(argv)
        self.name = name
        self.description = description
        self.quick = self.args.quick
        self.out = Path(self.args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.command = _command(name, argv)
        self.checks = []
        self.start = time.perf_counter()

    def size(self, quick, full):
        """``quick`` under --quick, else ``full`` (the paper's size)."""
        return quick if self.quick else full

    def path(self, suffix):
        """Output file ``OUT/NAME<suffix>`` (e.g. ``.gif``, ``_store``)."""
        return self.out / f"{self.name}{suffix}"

    def check(self, claim, ok, **numbers):
        """Record whether ``claim`` held, with the numbers that decide it; returns ``ok``."""
        ok = bool(ok)
        self.checks.append(dict(claim=claim, passed=ok, **numbers))
        print(f"  [{'ok' if ok else 'FAILED'}] {claim}  " + ", ".join(f"{k}={_short(v)}" for k, v in numbers.items()))
        return ok

    def finish(self, figure, results):
        """Write NAME.png (``figure``, a matplotlib Figure) and NAME.json; raise if a check failed."""
        png = self.path(".png")
        figure.savefig(png, dpi=110 if self.quick else 150, bbox_inches="tight")
        import matplotlib.pyplot as plt
        plt.close(figure)
        failed = [c["claim"] for c in self.checks if not c["passed"]]
        record = dict(name=self.name, description=self.description, command=self.command, quick=self.quick,
                      seconds=round(time.perf_counter() - self.start, 2), passed=not failed,
                      checks=self.checks, results=results,
                      environment=dict(python=platform.python_version(), numpy=np.__version__,
                                       cores=os.cpu_count()))
        with open(self.path(".json"), "w") as fh:
            json.dump(_jsonable(record), fh, indent=1)
        print(f"{self.name}: wrote {png} and {self.path('.json')} ({record['seconds']} s)")
        if failed:
            raise CheckFailed(f"{self.name}: {len(failed)} claim(s) failed: " + "; ".join(failed))
        return record


def _command(name, argv):
    """The command line that reruns this experiment (``--out`` left out when it is the default)."""
    argv = list(argv)
    if "--out" in argv:
        k = argv.index("--out")
        if k + 1 < len(argv) and Path(argv[k + 1]).resolve() == DEFAULT_OUT.resolve():
            del argv[k:k + 2]
    return " ".join(["meanfield", "figures", name] + argv)


def _short(value):
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple, np.ndarray)) and np.size(value) > 8:
        return f"[{np.size(value)} values]"
    return value


def replot(names, out):
    """Redraw OUT/NAME.png from OUT/NAME.json for each experiment whose script defines
    ``figure(results)`` (the results as its JSON stores them); returns the exit status (2 when an
    experiment cannot be re-plotted or has no stored results)."""
    import matplotlib.pyplot as plt
    status = 0
    for name in names:
        module, stored = load_script(name), Path(out) / f"{name}.json"
        if not hasattr(module, "figure") or not stored.exists():
            why = f"no stored {stored}" if hasattr(module, "figure") else "its script has no figure(results)"
            print(f"meanfield figures: cannot re-plot {name} ({why})", file=sys.stderr)
            status = 2
            continue
        with open(stored) as fh:
            fig = module.figure(json.load(fh)["results"])
        fig.savefig(Path(out) / f"{name}.png", dpi=150, bbox_inches="tight")
        plt.close(fig)
        print(f"{name}: redrew {Path(out) / (name + '.png')} from {stored}")
    return status


def _parser():
    parser = argparse.ArgumentParser(prog="meanfield figures",
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Reproduce the experiments of 'A mathematical perspective on "
                                                 "Transformers' (scripts in validation/): each writes NAME.png and "
                                                 "NAME.json and checks its claim.",
                                     epilog="experiments:\n" + "\n".join(f"  {name}" for name in scripts()))
    parser.add_argument("names", nargs="*", help="experiments to run (default: all; see --list)")
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds each), as in the test suite")
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help=f"output folder (default ./{DEFAULT_OUT}; give validation/results to refresh the "
                             f"results committed in a source checkout)")
    parser.add_argument("--list", action="store_true", help="list the experiments (with one line each) and exit")
    parser.add_argument("--replot", action="store_true",
                        help="redraw NAME.png from the NAME.json already in --out, without rerunning (experiments "
                             "whose script has figure(results))")
    parser.add_argument("--quiet", action="store_true",
                        help="nothing from the experiments themselves: failures and a one-line summary only")
    parser.add_argument("--backend", choices=("numba", "torch"), default=None,
                        help="particle engine of the experiments that offer a choice (phase_diagram): numba "
                             "(default) or torch (PyTorch, on CUDA when available; pip install "
                             "\"meanfield-attention[gpu]\")")
    parser.add_argument("--device", default=None, help="torch device for --backend torch ('cpu', 'cuda', 'cuda:1')")
    return parser


def _engine_options(args, names):
    """The --backend/--device options forwarded to the scripts (each must declare ``ENGINE_OPTIONS = True``)."""
    forwarded = [f"--{k}={v}" for k, v in (("backend", args.backend), ("device", args.device)) if v is not None]
    if not forwarded:
        return [], None
    offer = [name for name in scripts() if getattr(load_script(name), "ENGINE_OPTIONS", False)]
    others = [name for name in names if name not in offer]
    if not names or others:
        return [], (f"--backend/--device choose the particle engine of {', '.join(offer)}; name only "
                    f"{'that experiment' if len(offer) == 1 else 'those experiments'}"
                    + (f" (not {', '.join(others)})" if others else ""))
    return forwarded, None


def main(argv: list[str] | None = None) -> int:
    """``meanfield figures [NAMES] [--quick] [--out DIR] [--list]``: run the experiments (default: all)
    and report the failed ones.

    Parameters
    ----------
    argv : list of str, optional
        The command line after ``meanfield figures`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 when every check passed, 1 when one failed, 2 for an unknown experiment.

    Examples
    --------
    >>> from meanfield.cli.figures import main
    >>> main(["nosuch"])                 # the message goes to stderr
    2
    """
    args = _parser().parse_args(argv)
    known = scripts()
    if args.list:
        width = max(map(len, known), default=0) + 2          # one column for the names, aligned descriptions
        for name in known:
            doc = (load_script(name).__doc__ or "").strip().splitlines()
            print(f"{name:<{width}}{doc[0] if doc else ''}".rstrip())
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"meanfield figures: unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(known)}",
              file=sys.stderr)
        return 2
    out = args.out
    if args.replot:
        return replot(args.names or list(known), out)
    failed = []
    extra, refused = _engine_options(args, args.names)
    if refused:
        print(f"meanfield figures: {refused}", file=sys.stderr)
        return 2
    names = args.names or list(known)
    for name in track(names, "figures", False if args.quiet else None, unit="figures"):
        if not args.quiet:
            print(f"== {name}")
        try:
            with contextlib.redirect_stdout(io.StringIO()) if args.quiet else contextlib.nullcontext(), \
                    quiet() if args.quiet else contextlib.nullcontext():
                load_script(name).main((["--quick"] if args.quick else []) + ["--out", out] + extra)
        except CheckFailed as exc:
            failed.append(name)
            print(f"FAILED: {exc}", file=sys.stderr)
        except SystemExit as exc:   # a script's own argument parser refused the options
            if exc.code not in (0, None):
                failed.append(name)
                print(f"FAILED: {name} exited with {exc.code} (every script must accept --quick and --out DIR)",
                      file=sys.stderr)
    if failed:
        print(f"meanfield figures: {len(failed)} experiment(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    if args.quiet:
        print(f"{len(names)} experiment(s) written to {os.path.join(out, '')}, every check passed")
    return 0
