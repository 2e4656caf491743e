"""Phase diagram: the probability that n random tokens form a single cluster by time T, over (β, d).

For each cell (β, d) of the grid, batches of n tokens i.i.d. uniform on S^{d-1} follow SA
(adaptive Dormand–Prince, a whole batch per solve) up to time T; a run counts as one cluster
when its single-linkage clusters at geodesic scale 1e-2 are one.  The cells are tasks of the
sweep engine (``meanfield.sweep.run``: in-process by default, Dask with ``--client local``;
resumable with ``--store DIR``).  Small β gives a single cluster for all d; large β leaves
several metastable clusters at time T; the transition is sharp and moves to larger β as d grows
(in high dimension the tokens are nearly orthogonal and merge along the equiangular curve).

Checks: probability 1 at the smallest β and 0 at the largest for every d; non-increasing in
β up to sampling noise; the β where it crosses 1/2 grows with d.
"""
import sys
import tempfile

import numpy as np

import meanfield as mf
from meanfield import sweep
from meanfield.clusters import cluster_count
from meanfield.figures import Experiment
from meanfield.solvers import particles

TOL = 1e-2


def single_cluster(params, seed):
    """Sweep task: a batch of ``batch`` systems of n i.i.d. uniform tokens on S^{d-1}
    (random stream (seed, d)) under SA(β) up to T; their cluster counts at T and the
    fraction that formed one cluster."""
    x0 = mf.uniform_sphere(params["n"], params["d"], seed=np.random.default_rng([seed, params["d"]]),
                           batch=params["batch"])
    sol = particles.solve(mf.SA(params["beta"]), x0, [0.0, params["T"]], method="adaptive", rtol=1e-6,
                          atol=1e-8, energy=False)
    counts = cluster_count(sol.final, TOL)
    return dict(clusters=counts, single=float(np.mean(counts == 1)))


def crossing(betas, p, level=0.5):
    """First β where p(β) falls through ``level`` (linear interpolation); NaN if it never does."""
    for k in range(len(betas) - 1):
        if p[k] >= level > p[k + 1]:
            return float(betas[k] + (p[k] - level) / (p[k] - p[k + 1]) * (betas[k + 1] - betas[k]))
    return float("nan")


def _options(parser):
    parser.add_argument("--store", default=None, help="sweep store folder to keep and resume (default: temporary)")
    parser.add_argument("--client", default=None, help="Dask: 'local' or a scheduler address (default: in-process)")


def main(argv=None):
    exp = Experiment("phase_diagram", __doc__.splitlines()[0], argv, options=_options)
    n = exp.size(16, 32)
    T = exp.size(20.0, 30.0)
    betas = exp.size([1.0, 3.0, 5.0, 7.0, 10.0], [float(b) for b in range(1, 11)])
    dims = exp.size([2, 16], [2, 3, 4, 6, 8, 12, 16, 24, 32])
    batch, batches = exp.size((8, 1), (32, 2))
    grid = {"d": dims, "beta": betas, "n": [n], "T": [T], "batch": [batch]}
    with tempfile.TemporaryDirectory() as scratch:
        res = sweep.run(single_cluster, grid, seeds=batches, store=exp.args.store or scratch,
                        client=exp.args.client)
    prob = np.zeros((len(dims), len(betas)))
    for a, d in enumerate(dims):
        for b, beta in enumerate(betas):
            prob[a, b] = res.select(d=d, beta=beta).get("single").mean()
    half = np.array([crossing(betas, row) for row in prob])
    samples = batch * batches
    noise = 3 * np.sqrt(0.25 / samples)     # three standard errors of a proportion at p = 1/2
    exp.check("single cluster for every d at the smallest beta", np.all(prob[:, 0] == 1), p=prob[:, 0])
    exp.check("no single cluster for any d at the largest beta", np.all(prob[:, -1] == 0), p=prob[:, -1])
    rise = float(np.max(np.diff(prob, axis=1)))
    exp.check("probability non-increasing in beta (up to 3 standard errors)", rise <= noise,
              largest_increase=rise, three_standard_errors=noise)
    exp.check("the transition beta (p = 1/2) grows with d", np.all(np.diff(half) > 0), beta_half=half)

    import matplotlib.pyplot as plt
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
    im = ax.imshow(prob, origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=1,
                   extent=(betas[0] - 0.5, betas[-1] + 0.5, -0.5, len(dims) - 0.5))
    ax.plot(half, np.arange(len(dims)), "w.--", label="p = 1/2")
    ax.set_yticks(np.arange(len(dims)), [str(d) for d in dims])
    ax.set(xlabel="β", ylabel="d", title=f"P(single cluster at T = {T:g}), SA, n = {n}, {samples} runs per cell")
    ax.legend(loc="upper left")
    fig.colorbar(im, ax=ax)
    for a, d in enumerate(dims):
        ax2.plot(betas, prob[a], "o-", ms=3, color=plt.cm.plasma(a / max(1, len(dims) - 1)), label=f"d = {d}")
    ax2.set(xlabel="β", ylabel="probability of a single cluster", title="the transition in β for each d")
    ax2.legend(fontsize=8, ncol=2)
    exp.finish(fig, dict(n=n, T=T, betas=betas, dims=dims, runs_per_cell=samples, tol=TOL, probability=prob,
                         beta_half=half, sweep=dict(tasks=len(res), seconds=float(res.seconds.sum()),
                                                    client=res.info.get("client"))))


if __name__ == "__main__":
    from meanfield.figures import run_script
    sys.exit(run_script(__file__))
