"""``meanfield compare``: the command line of ``meanfield.compare`` (the package's main job).

The options are parsed and checked here before any engine is imported: ``meanfield compare
--help`` and a rejected option cost an import of numpy, not of Numba, SciPy and POT (measured in
benchmarks/bench_startup.py). Checks that need an engine (the flux and grid against the solver's
stability limits, the model's weights) run next, still before anything is computed.

To add an option: one ``add(...)`` line in ``_parser``, its default in ``DEFAULTS``, its check
in ``_check_option_values`` and its use in ``run``.
"""
import argparse
import os
import sys
import time

try:
    import tomllib
except ModuleNotFoundError:      # Python 3.10: the same parser, as the package tomli
    import tomli as tomllib

from .. import atomic
from ..checks import as_beta, as_choice, as_count, as_flag, as_positive
from ..geometry import GEOMETRIES

__all__ = ["DEFAULTS", "GEOMETRY_DEFAULTS", "CAUSAL_DEFAULTS", "options", "run", "main"]

# names of meanfield.sampling.METHODS and of the solvers' FLUXES (tests/test_ux.py checks they agree):
# spelled out so that --help lists them without importing the engines
SAMPLINGS = ("stratified", "iid", "quantile", "weighted")
FLUXES = ("upwind2", "upwind", "muscl", "tpfa")
MODELS = ("SA", "USA")

DEFAULTS = dict(geometry="circle", model="SA", beta=4.0, repulsive=False, n=None, T=None, outputs=None, seeds=None,
                seed=0, cells=None, level=None, mesh=None, base=None, finest=None, bulk=None, flux="upwind2",
                sampling="stratified", amplitude=0.6, degree=3, out="meanfield-report", quiet=False, causal=False,
                slices=None, bins=None, model_file=None, attention="identity", sigma=0.3)
# on S^2 each exact W_p (n tokens × thousands of cells, network simplex) costs seconds: fewer of them.
# The density on adaptive cells by default (meanfield.compare.ADAPTIVE; docs/comparison.md): only the
# settings of the chosen --mesh are filled in (level for uniform; base, finest, bulk for adaptive)
GEOMETRY_DEFAULTS = {"circle": dict(n=2000, seeds=3, outputs=41, level=3, cells=512, T=20.0),
                     "sphere": dict(n=1000, seeds=2, outputs=6, mesh="adaptive", level=4, base=3, finest=8, bulk=4,
                                    cells=512, T=20.0)}
MESHES = ("adaptive", "uniform")               # meanfield.compare.MESHES
MESH_OPTIONS = {"uniform": ("level",), "adaptive": ("base", "finest", "bulk")}
# causal: n^2/2 pairs per field evaluation for every draw, and the PDE on slices × cells (docs/causal.md)
CAUSAL_DEFAULTS = dict(n=1024, seeds=2, outputs=21, cells=256, T=10.0, slices=64, bins=8)
CAUSAL_SAMPLINGS = ("stratified", "iid")     # meanfield.compare.causal.SAMPLINGS


def _parser():
    p = argparse.ArgumentParser(
        prog="meanfield compare",
        description="Particles vs the density PDE from the same perturbed-uniform initial density: "
                    "Wasserstein distances, energies and cluster counts at each output time, printed "
                    "as a table and written to a report folder (PNG plots, report.json, the solutions; "
                    "read it back with meanfield.compare.Comparison.load(folder)).",
        epilog="Options may also come from a TOML file (--config) with the same names, e.g. "
               "'beta = 9' or 'geometry = \"sphere\"'; the command line overrides it.")
    add = p.add_argument
    add("--config", metavar="FILE.toml", help="read options from a TOML file")
    add("--geometry", choices=tuple(GEOMETRIES), help="S^1 or S^2 (default circle)")
    add("--model", choices=MODELS, help="softmax (SA) or unnormalised (USA) attention (default SA)")
    add("--beta", type=float, help="inverse temperature β >= 0 (default 4)")
    add("--repulsive", action="store_true", default=None, help="V = -I instead of V = I")
    add("--model-file", metavar="FILE.toml",
        help="the model from a TOML file: kind = \"SA\" or \"USA\", beta, and Q, K, V as nested lists (read as "
             "data; it replaces --model, --beta, --repulsive and --attention)")
    add("--attention", choices=("identity", "random"),      # meanfield.compare.models.ATTENTIONS
        help="the weights: identity (Q = K = V = I, default) or random (Q = I, K = I + sigma G/sqrt(d), "
             "V = I + sigma H/sqrt(d), G, H i.i.d. N(0, 1) from --seed: validation/phase_diagram_random.py's family)")
    add("--sigma", type=float, help="with --attention random: the size sigma >= 0 of the perturbation (default 0.3)")
    add("--n", type=int, help="tokens per draw (default 2000 on the circle, 1000 on the sphere)")
    add("--T", type=float, help="final time > 0 (default 20)")
    add("--outputs", type=int, help="number of output times in [0, T], >= 2 (default 41 on the circle, 6 on the "
                                   "sphere, where each exact W_p costs seconds)")
    add("--seeds", type=int, help="independent draws of the tokens (default 3 on the circle, 2 on the sphere)")
    add("--seed", type=int, help="seed of the first draw and of ρ_0's perturbation (default 0)")
    add("--cells", type=int, help="finite-volume cells on the circle (default 512)")
    add("--mesh", choices=MESHES,
        help="the density's cells on the sphere: adaptive (default: cells that follow the clusters, levels "
             "--base to --finest) or uniform (icosphere(--level)); --level alone implies uniform")
    add("--level", type=int, help="with --mesh uniform: icosphere level, 10·4^level + 2 cells (default 4: 2562 "
                                 "cells); given alone it selects --mesh uniform")
    add("--base", type=int, help="with --mesh adaptive: the coarsest level, where the density is thin (default 3)")
    add("--finest", type=int, help="with --mesh adaptive: the finest level, in the clusters, at most 9 (default 8)")
    add("--bulk", type=int, help="with --mesh adaptive: the level kept wherever the density is at least a tenth "
                                "of its mean, between --base and --finest (default 4)")
    add("--sampling", choices=SAMPLINGS,
        help="how the tokens discretise rho_0: stratified (default: equal-mass strata, one random point each), "
             "iid, quantile (circle only, deterministic) or weighted (quasi-uniform points weighted by rho)")
    add("--flux", choices=FLUXES, help="finite-volume flux (default upwind2; docs/finite_volumes.md)")
    add("--amplitude", type=float, help="size ε in (0, 1) of the perturbation of the uniform density (default 0.6)")
    add("--degree", type=int, help="perturbation modes l = 1..degree (default 3)")
    add("--out", metavar="DIR", help="report folder (default ./meanfield-report)")
    add("--quiet", action="store_true", default=None,
        help="no progress bars and no table: only the final W_1 and W_2")
    add("--causal", action="store_true", default=None,
        help="causal attention: causal particles vs the causal density PDE on [0, 1] x S^1 (circle only); the "
             "distance is the mean over --bins bins of the sequence position s of the circle W_1; energies are "
             "omitted (not a gradient flow); defaults n 1024, seeds 2, outputs 21, cells 256, T 10")
    add("--slices", type=int, help="with --causal: slices in s of the PDE, a multiple of --bins (default 64)")
    add("--bins", type=int, help="with --causal: bins of s of the distance; n and --slices must be multiples "
                                 "(default 8)")
    return p


def _check_option_values(opts):
    """Every option's type and range (ValueError/TypeError naming it), without the engines: TOML
    gives typed values, so "sa", "false" or 2.9 are refused rather than read as something else."""
    as_choice(opts["geometry"], "geometry", tuple(GEOMETRIES))
    as_choice(opts["model"], "model", MODELS)
    as_choice(opts["attention"], "attention", ("identity", "random"))
    if float(opts["sigma"]) < 0:
        raise ValueError(f"sigma must be >= 0; got {opts['sigma']}")
    if opts["model_file"] is not None and not isinstance(opts["model_file"], str):
        raise TypeError(f"model_file must be a file name; got {opts['model_file']!r}")
    as_choice(opts["sampling"], "sampling", SAMPLINGS)
    as_choice(opts["flux"], "flux", FLUXES)
    if opts["sampling"] == "quantile" and opts["geometry"] != "circle":
        raise ValueError("sampling 'quantile' is the inverse CDF on the circle; on the sphere use 'stratified' "
                         "or 'weighted'")
    as_beta(opts["beta"], "beta")
    for name in ("repulsive", "quiet", "causal"):
        as_flag(opts[name], name)
    for name, low in (("n", 1), ("seeds", 1), ("seed", 0), ("degree", 1), ("outputs", 2), ("cells", 1)):
        as_count(opts[name], name, minimum=low)
    if opts["geometry"] == "sphere":
        as_choice(opts["mesh"], "mesh", MESHES)
    for name in ("level", "base", "finest", "bulk"):      # those of the other mesh are None
        if opts[name] is not None:
            as_count(opts[name], name, minimum=0)
    if opts["causal"]:
        _check_causal_options(opts)
    elif opts["slices"] is not None or opts["bins"] is not None:
        raise ValueError("slices and bins belong to --causal (the causal PDE's slices in s, the bins of its "
                         "distance)")
    as_positive(opts["T"], "T")
    if not 0 < as_positive(opts["amplitude"], "amplitude") < 1:
        raise ValueError(f"amplitude must be in (0, 1) so that the density stays positive; got {opts['amplitude']}")
    if not isinstance(opts["out"], str) or not opts["out"]:
        raise TypeError(f"out must be a folder name; got {opts['out']!r}")
    atomic.check_folder(opts["out"], "out")


def _check_causal_options(opts):
    """--causal: the circle, the causal solver's one flux, its samplings, n and slices in whole bins."""
    if opts["geometry"] != "circle":
        raise ValueError("--causal compares with the causal PDE on [0, 1] x S^1: geometry must be circle")
    if opts["flux"] != "upwind2":
        raise ValueError(f"the causal PDE solver has one flux, upwind2; got flux {opts['flux']}")
    as_choice(opts["sampling"], "sampling (with --causal)", CAUSAL_SAMPLINGS)
    as_count(opts["slices"], "slices")
    as_count(opts["bins"], "bins")
    for name in ("n", "slices"):
        if opts[name] % opts["bins"]:
            raise ValueError(f"{name} = {opts[name]} must be a multiple of bins = {opts['bins']} (the distance is a "
                             f"mean over equal bins of s)")


def _check_engine_settings(opts):
    """What only the engines can say, still before any computation: the grid and flux against the
    density solver's limits, the model against the particle solver's."""
    from ..compare import check_density_settings
    from ..solvers import particles
    if opts["causal"]:
        from ..compare.causal import check_causal_settings
        check_causal_settings(_model(opts), opts["n"], opts["slices"], opts["cells"], opts["bins"], opts["sampling"])
    else:
        check_density_settings(opts["geometry"], _model(opts), opts["cells"], flux=opts["flux"], **_cells(opts))
    particles.max_step(_model(opts), GEOMETRIES[opts["geometry"]])   # refuses USA whose weights overflow


def options(argv):
    r"""The options of ``meanfield compare``: defaults, overridden by the TOML config, overridden by the
    command line, every value checked before any computation.

    .. math::

        \text{options} = \text{DEFAULTS} \leftarrow \text{config} \leftarrow \text{command line}
        \leftarrow \text{GEOMETRY\_DEFAULTS (for what is still unset)}.

    Parameters
    ----------
    argv : list of str
        The command line after ``meanfield compare``.

    Returns
    -------
    dict
        One value per name of ``DEFAULTS``.

    Raises
    ------
    SystemExit
        With status 2 and argparse's usage message, for any bad option.

    Examples
    --------
    >>> from meanfield.cli.compare import options
    >>> opts = options(["--beta", "9", "--n", "500", "--out", "report"])
    >>> opts["beta"], opts["n"], opts["seeds"], opts["geometry"]
    (9.0, 500, 3, 'circle')
    >>> opts = options(["--geometry", "sphere", "--out", "report"])      # adaptive cells by default
    >>> opts["mesh"], opts["base"], opts["finest"], opts["bulk"], opts["level"]
    ('adaptive', 3, 8, 4, None)
    >>> opts = options(["--geometry", "sphere", "--level", "3", "--out", "report"])    # --level alone: uniform
    >>> opts["mesh"], opts["level"], opts["finest"]
    ('uniform', 3, None)
    """
    parser = _parser()
    args = vars(parser.parse_args(argv))
    config = args.pop("config")
    opts = dict(DEFAULTS)
    if config is not None:
        try:
            with open(config, "rb") as fh:
                loaded = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            parser.error(f"cannot read --config {config}: {exc}")
        unknown = sorted(set(loaded) - set(DEFAULTS))
        if unknown:
            parser.error(f"unknown option(s) in {config}: {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
        opts.update(loaded)
    opts.update({k: v for k, v in args.items() if v is not None})
    for name, value in (CAUSAL_DEFAULTS if opts["causal"] is True else {}).items():
        if opts[name] is None:
            opts[name] = value
    try:
        _sphere_cells(opts)
        default_bulk = opts["bulk"] is None
        for name, value in GEOMETRY_DEFAULTS.get(opts["geometry"], {}).items():
            if opts[name] is None and not _other_mesh(opts, name):
                opts[name] = value
        if opts["mesh"] == "adaptive" and default_bulk:
            opts["bulk"] = _default_bulk(opts)
        _check_option_values(opts)
        _check_engine_settings(opts)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    return opts


def _sphere_cells(opts):
    """Decide --mesh before the defaults are filled in: --level alone means uniform, otherwise adaptive;
    refuse the settings of the other kind of cells, and any of them on the circle."""
    given = [name for name in ("mesh", "base", "finest", "bulk") if opts[name] is not None]
    if opts["geometry"] != "sphere":
        if given:
            raise ValueError(f"{'/'.join(given)} set the density's cells on the sphere; with geometry "
                             f"{opts['geometry']} use cells")
        return
    if opts["mesh"] is None:
        opts["mesh"] = "uniform" if opts["level"] is not None else "adaptive"
    if opts["mesh"] not in MESHES:
        return                                  # refused by _check_option_values, naming it
    other = [name for name in MESH_OPTIONS["adaptive" if opts["mesh"] == "uniform" else "uniform"]
             if opts[name] is not None]
    if other and opts["mesh"] == "uniform":
        raise ValueError(f"{'/'.join(other)} set adaptive cells; mesh uniform is icosphere(level): drop "
                         f"{'/'.join(other)} or use mesh adaptive")
    if other:
        raise ValueError("level selects a uniform icosphere(level): use mesh uniform (or level alone), or set "
                         "adaptive cells by base/finest/bulk")


def _other_mesh(opts, name):
    """Whether ``name`` is a setting of the kind of sphere cells not chosen (left unset)."""
    return opts["geometry"] == "sphere" and any(name in names for kind, names in MESH_OPTIONS.items()
                                                if kind != opts["mesh"])


def _default_bulk(opts):
    """The default bulk level clipped to [base, finest] (so that --base 2 --finest 3 alone is valid)."""
    low, high = opts["base"], opts["finest"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
        return opts["bulk"]                     # refused by _check_option_values, naming it
    return min(max(opts["bulk"], low), high)


def _cells(opts):
    """The density's cells on the sphere as keywords of ``compare`` (none on the circle)."""
    if opts["geometry"] != "sphere":
        return {}
    return {"grid": opts["mesh"], **{name: opts[name] for name in MESH_OPTIONS[opts["mesh"]]}}


def _model(opts):
    from ..compare.models import model_from_options
    return model_from_options(opts["model"], opts["beta"], GEOMETRIES[opts["geometry"]], repulsive=opts["repulsive"],
                              model_file=opts["model_file"], attention=opts["attention"], sigma=opts["sigma"],
                              seed=opts["seed"])


def run(opts):
    r"""The comparison described by the options (as returned by ``options``): ``compare`` from the
    perturbed-uniform density at the outputs linspace(0, T, outputs).

    .. math::

        t_k = k T / (\text{outputs} - 1), \qquad k = 0, \dots, \text{outputs} - 1.

    Parameters
    ----------
    opts : dict
        The options, as ``options`` returns them.

    Returns
    -------
    Comparison

    Examples
    --------
    >>> from meanfield.cli.compare import options, run
    >>> opts = options(["--n", "64", "--seeds", "1", "--cells", "64", "--T", "1", "--outputs", "2", "--quiet"])
    >>> run(opts).w1.shape
    (2, 1)
    """
    import numpy as np

    from ..compare import compare
    from ..measures import perturbed_uniform
    d = GEOMETRIES[opts["geometry"]]
    rho0 = perturbed_uniform(d, amplitude=opts["amplitude"], degree=opts["degree"], seed=opts["seed"])
    t_eval = np.linspace(0.0, float(opts["T"]), int(opts["outputs"]))
    if opts["causal"]:
        from ..compare.causal import twisted
        return compare(_model(opts), twisted(rho0), t_eval, n=opts["n"], seeds=opts["seeds"], causal=True,
                       slices=opts["slices"], cells=opts["cells"], bins=opts["bins"], seed=opts["seed"],
                       sampling=opts["sampling"], progress=not opts["quiet"])
    return compare(_model(opts), rho0, t_eval, n=opts["n"], seeds=opts["seeds"], geometry=opts["geometry"],
                   cells=opts["cells"], flux=opts["flux"], seed=opts["seed"], sampling=opts["sampling"],
                   progress=not opts["quiet"], **_cells(opts))


def main(argv=None):
    """``meanfield compare [options]``: run, print the table (or with ``--quiet`` only the final
    distances), write the report folder.

    Parameters
    ----------
    argv : list of str, optional
        The command line after ``meanfield compare`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 1 when the report cannot be written.

    Raises
    ------
    SystemExit
        With status 2 (argparse) for bad options, before any computation.

    Examples
    --------
    >>> from meanfield.cli.compare import main
    >>> main(["--beta", "-1"])                 # refused before any computation; the message goes to stderr
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """
    opts = options(sys.argv[1:] if argv is None else argv)
    from ..compare import describe_grid
    from .report import write_report
    clock = time.perf_counter()
    comparison = run(opts)
    try:
        paths = write_report(comparison, opts["out"], opts)
    except OSError as exc:                  # a disk that filled up or went read-only since the check
        print(f"meanfield compare: {exc}", file=sys.stderr)
        return 1
    info = comparison.info
    if not opts["quiet"]:
        if info.get("causal"):
            print(f"[0, 1] x circle, {info['model_name']}, n = {opts['n']} tokens x {info['seeds']} draws "
                  f"({opts['sampling']}), {info['grid']['slices']} x {info['grid']['cells']} cells, {info['distance']}")
        else:
            print(f"{info['geometry']}, {info['model_name']}, n = {opts['n']} tokens x {info['seeds']} draws "
                  f"({opts['sampling']}), {describe_grid(info['grid'])}, "
                  f"W_p by {'/'.join(info['transport_methods'])}")
        print(comparison.table())
        print(comparison.explanation())
        if "energy" in info:
            print(f"energy shown: {info['energy']}")
    print(comparison.final_line())
    if not opts["quiet"]:
        print(f"wrote {len(paths)} files to {os.path.join(opts['out'], '')} in {time.perf_counter() - clock:.1f} s")
    return 0
