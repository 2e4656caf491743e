"""Trajectories on S^2 and on the circle at the paper's settings: tokens gather into clusters.

The paper's Fig. B (paper.md §4, its code ``sphere.py``): n = 64 tokens i.i.d. uniform on S^2
follow SA with β = 1, Q = K = V = I,
dx_i/dt = P_{x_i} Σ_j e^{β<x_i,x_j>} x_j / Σ_k e^{β<x_i,x_k>},
by explicit Euler with step 0.1 and renormalisation x <- x/|x| after each step, to T = 15
(151 frames); they form a single cluster by T ≈ 15.  (The authors' Euler step moves along the
unprojected drift, ours along its tangential part; both are first order for the same ODE.)
The same settings at β = 9, and on the circle (angles unwrapped in time, so that a token
crossing θ = 2π is one continuous path), show the contrast: several clusters that stay apart.
The GIF (``trajectories.gif``, 640 px) shows the β = 1 tokens on S^2 in orthographic view,
tokens on the front hemisphere filled, those behind hollow and pale.

Checks: one cluster at T for β = 1 (S^2 and the circle); several at T for β = 9; E_β(t)
non-decreasing along every run; |x_i| = 1 to round-off; the GIF is at least 600 px wide.
"""
import numpy as np

import meanfield as mf
from meanfield.clusters import cluster_count
from meanfield.cli.figures import Experiment, max_relative_decrease
from meanfield.solvers import particles

TOL = 1e-2            # geodesic cluster scale
BETAS = (1.0, 9.0)
GIF_PIXELS = 640


def view_frame(x_final, tilt=50 * np.pi / 180):
    """An orthonormal frame (e1, e2, view) looking at the tokens' final mean from ``tilt`` away, so
    that their end point sits on the front hemisphere: screen coordinates <x, e1>, <x, e2>; the
    token is in front when <x, view> > 0."""
    centre = np.mean(x_final, axis=0)
    centre /= np.linalg.norm(centre)
    side = np.cross(centre, [0.0, 0.0, 1.0] if abs(centre[2]) < 0.9 else [1.0, 0.0, 0.0])
    side /= np.linalg.norm(side)
    view = np.cos(tilt) * centre + np.sin(tilt) * side
    e1 = np.cross(np.cross(view, [0.0, 0.0, 1.0]), view)   # screen up: z projected on the screen
    e1 = np.cross(e1 / np.linalg.norm(e1), view)
    return np.stack([e1, np.cross(view, e1), view])


def _sphere_panel(ax, x, title):
    """Orthographic view of paths x (m, n, 3): front parts dark, back parts pale; start grey, end red."""
    from matplotlib.patches import Circle
    frame = view_frame(x[-1])
    y = x @ frame.T                                 # (m, n, 3): screen u, v and depth
    ax.add_patch(Circle((0, 0), 1, fill=False, color="0.3", lw=1.2))
    for i in range(x.shape[1]):
        u, v, depth = y[:, i].T
        ax.plot(np.where(depth >= 0, u, np.nan), np.where(depth >= 0, v, np.nan), color="C0", lw=1.0)
        ax.plot(np.where(depth < 0, u, np.nan), np.where(depth < 0, v, np.nan), color="C0", lw=0.8, alpha=0.25)
    _tokens(ax, y[0], color="0.35", size=14)
    _tokens(ax, y[-1], color="C3", size=45)
    ax.set(xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), aspect="equal", title=title)
    ax.set_axis_off()


def _tokens(ax, y, color, size):
    """Tokens in screen coordinates y (n, 3): filled in front, hollow and pale behind."""
    front = y[:, 2] >= 0
    ax.scatter(y[front, 0], y[front, 1], s=size, color=color, zorder=3)
    return ax.scatter(y[~front, 0], y[~front, 1], s=size, facecolors="none", edgecolors=color, alpha=0.45,
                      zorder=2)


def animate(path, sol, frames, title):
    """GIF (Pillow writer) of the tokens sol.x (m, n, 3) on S^2, GIF_PIXELS wide, with a front/back cue."""
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter
    frame = view_frame(sol.x[-1])
    y = sol.x @ frame.T
    dpi = 100
    fig, ax = plt.subplots(figsize=(GIF_PIXELS / dpi, GIF_PIXELS / dpi), dpi=dpi)
    idx = np.unique(np.linspace(0, sol.t.size - 1, frames).astype(int))

    def draw(k):
        ax.clear()
        ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="0.3", lw=1.5))
        lo = max(0, idx[k] - 8)                    # a short trail
        for i in range(y.shape[1]):
            u, v, depth = y[lo:idx[k] + 1, i].T
            ax.plot(u, v, color="C0", lw=1.0, alpha=0.6 if depth[-1] >= 0 else 0.2)
        _tokens(ax, y[idx[k]], color="C3", size=60)
        ax.set(xlim=(-1.08, 1.08), ylim=(-1.08, 1.08), aspect="equal")
        ax.set_axis_off()
        ax.set_title(f"{title}, t = {sol.t[idx[k]]:4.1f}   (filled: front, hollow: back)", fontsize=13)

    anim = FuncAnimation(fig, draw, frames=idx.size, blit=False)
    anim.save(path, writer=PillowWriter(fps=10), dpi=dpi)
    plt.close(fig)
    return path


def unwrapped_angles(x):
    """Angles of circle paths x (m, n, 2), continuous in time, each path shifted by a multiple of
    2π so that its final angle lies within π of the final circular mean (a cluster straddling
    θ = 0 is drawn as one band)."""
    theta = np.unwrap(mf.circle_angles(x), axis=0)
    centre = np.angle(np.mean(np.exp(1j * theta[-1])))
    return theta + 2 * np.pi * np.round((centre - theta[-1]) / (2 * np.pi))


def gif_width(path):
    """Pixel width of a GIF (bytes 6-7 of the logical screen descriptor, little endian)."""
    head = open(path, "rb").read(10)
    return int.from_bytes(head[6:8], "little")


def main(argv=None):
    exp = Experiment("trajectories", __doc__.splitlines()[0], argv)
    n = exp.size(32, 64)
    T = 15.0
    t = np.linspace(0.0, T, 151)                   # the paper's 151 frames, one per Euler step
    runs = {}
    for d in (3, 2):
        x0 = mf.uniform_sphere(n, d, seed=2023 + d)
        for beta in BETAS:
            sol = particles.solve(mf.SA(beta), x0, t, method="euler", dt=0.1)
            counts = [cluster_count(sol.x[k], TOL) for k in range(t.size)]
            sol.info["clusters"] = counts
            runs[d, beta] = sol
            dip = max_relative_decrease(sol.energy)
            exp.check(f"d={d} beta={beta:g}: E_beta(t) non-decreasing", dip <= 1e-12, max_relative_decrease=dip)
            norm_err = float(np.max(np.abs(np.linalg.norm(sol.x, axis=-1) - 1)))
            exp.check(f"d={d} beta={beta:g}: tokens stay on the sphere", norm_err <= 1e-12, max_norm_error=norm_err)
        exp.check(f"d={d}: beta=1 forms a single cluster by T={T:g}", runs[d, 1.0].info["clusters"][-1] == 1,
                  clusters=runs[d, 1.0].info["clusters"][-1])
        last = runs[d, 9.0].info["clusters"][-1]
        exp.check(f"d={d}: beta=9 still has several clusters at T={T:g}", 2 <= last <= n // 2, clusters=last)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(13, 12), gridspec_kw=dict(height_ratios=(1, 1.25)))
    for col, beta in enumerate(BETAS):
        ax = axes[0, col]
        theta = unwrapped_angles(runs[2, beta].x)
        ax.plot(t, theta, color="C0", lw=0.9)
        ax.set_xlabel("t", fontsize=13)
        ax.set_ylabel("θ_i(t), unwrapped (rad)", fontsize=13)
        ax.set_title(f"circle, SA β = {beta:g}, n = {n}: {runs[2, beta].info['clusters'][-1]} cluster(s) at T",
                     fontsize=13)
        ax.tick_params(labelsize=11)
        sol = runs[3, beta]
        _sphere_panel(axes[1, col], sol.x, f"S², SA β = {beta:g}, n = {n}: {sol.info['clusters'][-1]} cluster(s) "
                                           f"at T = {T:g}\n(grey: t = 0, red: t = {T:g}; pale/hollow: far side)")
        axes[1, col].title.set_fontsize(13)
    fig.suptitle("Euler, step 0.1, renormalised (the paper's settings)", fontsize=14)
    fig.tight_layout()
    gif = animate(exp.path(".gif"), runs[3, 1.0], exp.size(12, 151), f"SA, β = 1, n = {n}")
    width = gif_width(gif)
    exp.check("the GIF is at least 600 px wide", width >= 600, width=width)
    results = {f"d{d}_beta{beta:g}": dict(t=t, clusters=sol.info["clusters"], energy=sol.energy,
                                          final_points=sol.x[-1])
               for (d, beta), sol in runs.items()}
    results.update(n=n, T=T, dt=0.1, method="euler", tol=TOL, gif=gif.name, gif_bytes=gif.stat().st_size,
                   gif_pixels=width, paper_size=not exp.quick)
    exp.finish(fig, results)


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
