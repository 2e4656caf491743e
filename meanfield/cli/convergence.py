"""``meanfield convergence``: the command line of ``meanfield.convergence``.

Options are parsed and checked (types, ranges, repeats, the grids against the solver's limits)
before any particle or density solve; bad values end with argparse's usage message and exit
status 2.
"""
import argparse
import json
import os
import sys
import time

from ..checks import as_beta, as_count, as_positive
from .compare import FLUXES, MODELS, SAMPLINGS
from ..geometry import GEOMETRIES

__all__ = ["DEFAULTS", "CAUSAL_DEFAULTS", "options", "main"]

DEFAULTS = {"circle": dict(beta=4.0, T=20.0, n=[500, 1000, 2000, 4000], grids=[256, 512, 1024, 2048], degree=3,
                           flux="upwind"),
            "sphere": dict(beta=3.0, T=10.0, n=[250, 500, 1000], grids=[2, 3, 4], degree=2, flux="upwind")}
# --causal: grids are cells N in θ with N/4 slices in s (convergence.causal.grid_shape)
CAUSAL_DEFAULTS = dict(beta=3.0, T=4.0, n=[256, 512, 1024, 2048], grids=[64, 128, 256], degree=3, flux="upwind2")
MAX_TIMES = 10             # output times 0, T/2^9, ..., T: finer than T/512 says nothing new


def _parser():
    p = argparse.ArgumentParser(
        prog="meanfield convergence",
        description="W_1 and W_2 between particles (n tokens) and the density PDE (grid h) at several times, "
                    "over a grid of n and cells (circle) or icosphere levels (sphere), with the observed orders "
                    "in n and in h: a table, convergence.json and convergence.png. Once clusters have formed, "
                    "pairs below twice the cluster-mass quantum pi (2n)^(-1/p) of n tokens are marked * and "
                    "give no order.")
    add = p.add_argument
    add("--geometry", choices=tuple(GEOMETRIES), default="circle", help="S^1 or S^2 (default circle)")
    add("--model", choices=MODELS, default="SA", help="softmax (SA) or unnormalised (USA) attention (default SA)")
    add("--model-file", metavar="FILE.toml",
        help="the model from a TOML file: kind = \"SA\" or \"USA\", beta, and Q, K, V as nested lists (read as "
             "data; it replaces --model, --beta, --repulsive and --attention)")
    add("--attention", choices=("identity", "random"),      # meanfield.compare.models.ATTENTIONS
        default="identity",
        help="the weights: identity (Q = K = V = I, default) or random (Q = I, K = I + sigma G/sqrt(d), "
             "V = I + sigma H/sqrt(d), G, H i.i.d. N(0, 1) from --seed: validation/phase_diagram_random.py's family)")
    add("--sigma", type=float, default=0.3,
        help="with --attention random: the size sigma >= 0 of the perturbation (default 0.3)")
    add("--beta", type=float, help="inverse temperature β >= 0 (default 4 on the circle, 3 on the sphere)")
    add("--T", type=float, help="final time > 0 (default 20 on the circle, 10 on the sphere)")
    add("--times", type=int, default=3,
        help=f"output times 0 and T/2^(times-1), ..., T/2, T; 1 to {MAX_TIMES} (default 3)")
    add("--n", type=int, nargs="+", help="two or more different token counts (default 500 1000 2000 4000; "
                                        "sphere 250 500 1000)")
    add("--grids", type=int, nargs="+", help="two or more different grids: cells on the circle (default 256 ... 2048) "
                                            "or icosphere levels on the sphere (default 2 3 4)")
    add("--sampling", choices=SAMPLINGS, default="stratified",
        help="how the tokens discretise rho_0 (default stratified; quantile on the circle only)")
    add("--flux", choices=FLUXES, help="finite-volume flux (default upwind: first order; upwind2, the only one, "
                                       "with --causal)")
    add("--amplitude", type=float, default=0.6,
        help="size ε in (0, 1) of the perturbation of the uniform density (default 0.6)")
    add("--degree", type=int, help="perturbation modes l = 1..degree (default 3 on the circle, 2 on the sphere)")
    add("--seed", type=int, default=0, help="seed of the tokens and of rho_0's perturbation (default 0)")
    add("--out", metavar="DIR", default="meanfield-convergence",
        help="folder for convergence.json and convergence.png (default ./meanfield-convergence)")
    add("--quiet", action="store_true", help="no progress bars and no tables")
    add("--reference", type=int,
        help="atoms n_ref of the refined reference (circle: the grids' W_1 and W_2 against refined_quantiles of "
             "n_ref/2 and n_ref atoms, what converges past clustering; default half the largest --n; 0: none; not on "
             "the sphere)")
    add("--causal", action="store_true",
        help="causal attention: causal particles vs the causal PDE on [0, 1] x S^1, the distance D the mean over "
             "--bins bins of s of the circle W_1; grids are cells N in theta with N/4 slices in s (defaults: SA "
             "beta 3, T 4, n 256 ... 2048, grids 64 128 256)")
    add("--bins", type=int, default=4, help="with --causal: bins of s of D; n and the slices must be multiples "
                                            "(default 4)")
    return p


def options(argv):
    r"""The options of ``meanfield convergence`` with the geometry's defaults filled in, every value
    checked before any computation.

    .. math::

        \text{options} = \text{command line} \leftarrow \text{DEFAULTS[geometry] (for what is unset)}.

    Parameters
    ----------
    argv : list of str
        The command line after ``meanfield convergence``.

    Returns
    -------
    dict

    Raises
    ------
    SystemExit
        With status 2 and the usage message, for any bad option.

    Examples
    --------
    >>> from meanfield.cli.convergence import options
    >>> opts = options(["--n", "100", "200", "--grids", "32", "64"])
    >>> opts["n"], opts["grids"], opts["beta"], opts["T"]
    ([100, 200], [32, 64], 4.0, 20.0)
    """
    parser = _parser()
    opts = vars(parser.parse_args(argv))
    for name, value in (CAUSAL_DEFAULTS if opts["causal"] else DEFAULTS[opts["geometry"]]).items():
        if opts[name] is None:
            opts[name] = value
    try:
        _check(opts)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    return opts


def _check(opts):
    as_beta(opts["beta"], "beta")
    if opts["sigma"] < 0:
        raise ValueError(f"sigma must be >= 0; got {opts['sigma']}")
    as_positive(opts["T"], "T")
    if not 1 <= as_count(opts["times"], "times") <= MAX_TIMES:
        raise ValueError(f"times must be between 1 and {MAX_TIMES}; got {opts['times']}")
    if not 0 < as_positive(opts["amplitude"], "amplitude") < 1:
        raise ValueError(f"amplitude must be in (0, 1) so that the density stays positive; got {opts['amplitude']}")
    as_count(opts["degree"], "degree")
    as_count(opts["seed"], "seed", minimum=0)
    sphere = opts["geometry"] == "sphere"
    for name in ("n", "grids"):
        values = [as_count(v, name, minimum=0 if name == "grids" and sphere else 1) for v in opts[name]]
        if len(values) < 2 or len(set(values)) < len(values):
            raise ValueError(f"{name} needs two or more different values; got {' '.join(map(str, values))}")
    _model(opts)                     # a bad model file is refused here, after the checks that load no engine
    if opts["reference"] is not None:
        if opts["causal"]:
            raise ValueError("--reference: the causal study has no refined reference (weighted atoms would change "
                             "causal attention itself; docs/causal.md)")
        from ..convergence.core import reference_size
        reference_size(opts["reference"], opts["geometry"], opts["n"])
    if opts["sampling"] == "quantile" and sphere:
        raise ValueError("sampling 'quantile' is the inverse CDF on the circle; on the sphere use 'stratified' "
                         "or 'weighted'")
    from .. import atomic
    atomic.check_folder(opts["out"], "out")               # before the study, not after it
    if opts["causal"]:
        _check_causal(opts)
        return
    from ..compare import check_density_settings
    for grid in opts["grids"]:
        check_density_settings(opts["geometry"], _model(opts), cells=grid, level=grid, flux=opts["flux"])


def _check_causal(opts):
    """--causal: the circle, the causal solver's flux and samplings, n and slices in whole bins."""
    from ..compare.causal import SAMPLINGS, check_causal_settings
    from ..convergence.causal import grid_shape
    if opts["geometry"] != "circle" or opts["flux"] != "upwind2":
        raise ValueError(f"--causal solves the causal PDE on [0, 1] x S^1 with its one flux upwind2; got geometry "
                         f"{opts['geometry']}, flux {opts['flux']}")
    if opts["sampling"] not in SAMPLINGS:
        raise ValueError(f"with --causal, sampling must be one of {', '.join(SAMPLINGS)}; got {opts['sampling']}")
    bins = as_count(opts["bins"], "bins")
    for n in opts["n"]:
        for grid in opts["grids"]:
            check_causal_settings(_model(opts), n, *grid_shape(grid), bins, opts["sampling"])


def _model(opts):
    from ..compare.models import model_from_options
    return model_from_options(opts["model"], opts["beta"], GEOMETRIES[opts["geometry"]],
                              model_file=opts["model_file"], attention=opts["attention"], sigma=opts["sigma"],
                              seed=opts["seed"])


def main(argv=None):
    r"""``meanfield convergence [options]``: run the study, print the tables, write the JSON and plot.

    The output times are 0 and T/2^k, k = times-1, ..., 0:

    .. math::

        t \in \{0, T/2^{\text{times}-1}, \dots, T/2, T\}.

    Parameters
    ----------
    argv : list of str, optional
        The command line after ``meanfield convergence`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 1 when the results cannot be written.

    Raises
    ------
    SystemExit
        With status 2 (argparse) for bad options, before any computation.

    Examples
    --------
    >>> import os, tempfile
    >>> from meanfield.cli.convergence import main
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     out = os.path.join(parent, "study")
    ...     status = main(["--n", "32", "64", "--grids", "32", "64", "--T", "1", "--times", "1", "--quiet",
    ...                    "--out", out])
    ...     print(status, sorted(os.listdir(out)))
    0 ['complete.json', 'convergence.json', 'convergence.png']
    """
    opts = options(sys.argv[1:] if argv is None else argv)
    import numpy as np

    from ..convergence.core import figure, reference_size, study
    from ..measures import perturbed_uniform
    model = _model(opts)
    rho0 = perturbed_uniform(GEOMETRIES[opts["geometry"]], amplitude=opts["amplitude"], degree=opts["degree"],
                             seed=opts["seed"])
    t_eval = np.concatenate([[0.0], opts["T"] / 2.0 ** np.arange(opts["times"] - 1, -1, -1)])
    clock = time.perf_counter()
    if opts["causal"]:
        from ..compare.causal import twisted
        from ..convergence.causal import causal_study
        result = causal_study(model, twisted(rho0), t_eval, opts["n"], opts["grids"], bins=opts["bins"],
                              sampling=opts["sampling"], seed=opts["seed"], progress=not opts["quiet"])
    else:
        result = study(model, rho0, t_eval, opts["n"], opts["grids"], geometry=opts["geometry"],
                       sampling=opts["sampling"], seed=opts["seed"], flux=opts["flux"], progress=not opts["quiet"],
                       reference=reference_size(opts["reference"], opts["geometry"], opts["n"]))
    import matplotlib.pyplot as plt
    from .. import atomic
    fig = figure(result)

    def write(folder):
        with open(os.path.join(folder, "convergence.json"), "w") as fh:
            json.dump(result.to_dict(), fh, indent=1)
        fig.savefig(os.path.join(folder, "convergence.png"), dpi=130)

    try:        # all at once: a kill leaves the previous results whole (meanfield.atomic.replace_folder)
        atomic.replace_folder(opts["out"], write, "out")
    except OSError as exc:
        print(f"meanfield convergence: {exc}", file=sys.stderr)
        return 1
    finally:
        plt.close(fig)
    if not opts["quiet"]:
        distance = result.info.get("distance", f"W_p by {'/'.join(result.info['transport_methods'])}")
        print(f"{opts['geometry']}{' x [0, 1] (causal)' if opts['causal'] else ''}, {model!r}, {opts['sampling']} "
              f"tokens, {distance}")
        print(result.table())
        print(f"wrote convergence.json and convergence.png to {os.path.join(opts['out'], '')} in "
              f"{time.perf_counter() - clock:.1f} s")
    return 0
