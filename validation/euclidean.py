"""Self-attention without layer normalisation: leaders (V = I) and hyperplanes (simple top eigenvalue).

Tokens in R^d follow ẋ_i = Σ_j softmax_j(β<Qx_i, Kx_j>) V x_j (arXiv:2305.05465, paper.md §5 item 7);
the rescaled z_i = e^{-tV} x_i solve ż_i = Σ_j P_ij V (z_j - z_i) (``meanfield.solvers.euclidean``).

Checks (Q = K = I, β = 1, Gaussian starts in R^2): V = I — every z_i is a convex combination of the
others' pull, so the convex hull of the z_i shrinks (its area never increases); the z_i converge (no
motion over the last stretch) to a few points, all of them vertices of their own convex hull (a
polytope of "leaders"; we also record how often a leader's nearest initial token was a vertex of
the initial hull: mostly, not always).  V = diag(1, -1/2) (simple
positive top eigenvalue): the components along the top eigenvector converge to at most three values
(hyperplanes {z_1 = c}), while the other component stays spread.  Sizes are ours (the paper's
figures for this model are not fixed in paper.md).
"""
import numpy as np
from scipy.spatial import ConvexHull

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.solvers import euclidean


def distinct(values, tol):
    """Representatives of ``values`` (k, ...) up to ``tol`` (greedy, in order)."""
    reps = []
    for v in values:
        if not any(np.max(np.abs(v - r)) <= tol for r in reps):
            reps.append(v)
    return np.array(reps)


def main(argv=None):
    exp = Experiment("euclidean", __doc__.splitlines()[0], argv)
    n, T, seeds = exp.size((20, 16.0, 2), (40, 24.0, 6))
    t = np.linspace(0, T, int(4 * T) + 1)
    leaders_runs, hyper_runs = [], []
    for seed in range(seeds):
        z0 = np.random.default_rng(seed).normal(size=(n, 2))
        sol = euclidean.solve(mf.SA(1.0), z0, t, dt=0.01)
        areas = np.array([ConvexHull(z).volume for z in sol.x])
        final = sol.x[-1]
        leaders = distinct(final, 1e-3)
        hull0 = set(ConvexHull(z0).vertices)
        nearest = [int(np.argmin(np.linalg.norm(z0 - p, axis=1))) for p in leaders]
        extreme = len(leaders) <= 2 or len(ConvexHull(leaders).vertices) == len(leaders)
        motion = float(np.max(np.abs(sol.x[-1] - sol.x[-5])))
        exp.check(f"V = I, seed {seed}: hull area never increases", np.all(np.diff(areas) <= 1e-12 * areas[0]),
                  max_increase=float(np.max(np.diff(areas))))
        exp.check(f"V = I, seed {seed}: converged to {len(leaders)} leaders, all vertices of their convex hull",
                  motion < 1e-4 and extreme and 2 <= len(leaders) < n // 2, leaders=len(leaders), last_motion=motion,
                  nearest_initial_is_hull_vertex=float(np.mean([i in hull0 for i in nearest])))
        leaders_runs.append(dict(z=sol.x, areas=areas, leaders=leaders, z0=z0))

        V = np.diag([1.0, -0.5])
        sol = euclidean.solve(mf.SA(1.0, V=V), z0, t, dt=0.01)
        levels = distinct(sol.x[-1, :, 0][:, None], 1e-3)[:, 0]
        spread = float(np.ptp(sol.x[-1, :, 1]))
        exp.check(f"V = diag(1, -1/2), seed {seed}: top-eigenvector components converge to <= 3 values "
                  f"(hyperplanes) while the other component stays spread", len(levels) <= 3 and spread > 1.0,
                  values=np.sort(levels), spread=spread)
        hyper_runs.append(dict(z=sol.x, levels=levels))

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(18, 6), constrained_layout=True)
    run = leaders_runs[0]
    ax = axes[0]
    for i in range(n):
        ax.plot(run["z"][:, i, 0], run["z"][:, i, 1], "-", color="0.6", lw=0.8)
    hull = ConvexHull(run["z0"])
    loop = np.append(hull.vertices, hull.vertices[0])
    ax.plot(run["z0"][loop, 0], run["z0"][loop, 1], "b--", lw=1.5, label="initial convex hull")
    ax.scatter(*run["z0"].T, s=25, c="tab:blue", zorder=3, label="z_i(0)")
    ax.scatter(*run["leaders"].T, s=160, marker="*", c="tab:red", zorder=4,
               label=f"limits ({len(run['leaders'])} leaders)")
    ax.set(xlabel="z_1", ylabel="z_2", title="V = I: rescaled tokens cluster at the vertices of a polytope",
           aspect="equal")
    ax.legend(fontsize=9)
    ax = axes[1]
    for r in leaders_runs:
        ax.plot(t, r["areas"], lw=1.5)
    ax.set(xlabel="t", ylabel="area of the convex hull of the z_i(t)",
           title=f"V = I: hull areas never increase ({seeds} seeds)", ylim=(0, None))
    run = hyper_runs[0]
    ax = axes[2]
    for i in range(n):
        ax.plot(t, run["z"][:, i, 0], "-", color="tab:blue", lw=0.8, alpha=0.7)
    for c in run["levels"]:
        ax.axhline(c, color="k", ls=":", lw=1.2)
    ax.set(xlabel="t", ylabel="z_1 (component along the top eigenvector of V)",
           title=f"V = diag(1, -1/2): z_1 converges to {len(run['levels'])} values (hyperplanes)")
    exp.finish(fig, dict(n=n, T=T, seeds=seeds, beta=1.0,
                         leaders=[len(r["leaders"]) for r in leaders_runs],
                         hyperplanes=[np.sort(r["levels"]).tolist() for r in hyper_runs]))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
