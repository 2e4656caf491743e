"""The ``meanfield`` command line: ``compare`` (the main job), ``convergence``, ``figures`` and ``sweep``
(also ``python -m meanfield``). Each command's module is imported only when it is asked for, and
parses its options before importing any engine: ``meanfield --help`` costs no more than numpy."""
import importlib
import sys

COMMANDS = {
    "compare": ("meanfield.cli.compare", "particles vs density PDE with optimal transport and energies "
                                     "(default: circle, SA, beta=4, n=2000, T=20)"),
    "convergence": ("meanfield.cli.convergence", "W_p(particles_n, density_h) over a grid of n and cells, "
                                             "with the observed orders (circle or sphere)"),
    "figures": ("meanfield.cli.figures", "reproduce the paper's experiments (validation/ scripts)"),
    "sweep": ("meanfield.sweep", "run a parameter sweep from a TOML config (Dask or in-process)"),
}


def usage() -> str:
    """The top-level usage text: the commands and what each does.

    Returns
    -------
    str

    Examples
    --------
    >>> from meanfield.cli import usage
    >>> print(usage())
    usage: meanfield COMMAND [options]   (meanfield COMMAND --help for its options)
    <BLANKLINE>
    commands:
      compare     particles vs density PDE ...
      convergence ...
      figures     reproduce the paper's experiments (validation/ scripts)
      sweep       run a parameter sweep from a TOML config (Dask or in-process)
    """
    lines = ["usage: meanfield COMMAND [options]   (meanfield COMMAND --help for its options)", "",
             "commands:"]
    lines += [f"  {name:<12}{text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``meanfield COMMAND [options]``: import the command's module and call its ``main``.

    Parameters
    ----------
    argv : list of str, optional
        The command line without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 2 for an unknown command or bad options (argparse's
        ``SystemExit(2)`` for the options of a command) and for a refusal raised while the command
        runs (a ValueError, TypeError or OSError: a size beyond memory, a run beyond its budget, an
        unreadable file), printed as one line ``meanfield: error: ...``.

    Examples
    --------
    >>> from meanfield.cli import main
    >>> main(["frobnicate"])            # the message and the usage go to stderr
    2
    >>> main(["--help"])
    usage: meanfield COMMAND [options] ...
    0
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from meanfield import __version__
        print(__version__)
        return 0
    if argv[0] not in COMMANDS:
        print(f"meanfield: unknown command {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    try:
        return module.main(argv[1:]) or 0
    except (ValueError, TypeError, OSError) as exc:      # a refusal (sizes, budget, files): one line, status 2
        print(f"meanfield: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
