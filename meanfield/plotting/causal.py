"""Plots of a ``CausalComparison`` (the ``meanfield compare --causal`` report).

- ``distance_figure``: D (the mean over bins of s of the circle W_1) against t, mean and range over
  the draws, with the grid's own error D(ρ_h, ρ_{2h}) and the cluster-mass floor π B/(2n);
- ``solution_figure``: the density ρ(t, s, θ) (log colours, s against θ) at the first and the last
  output, with the first draw's tokens (θ_i(t), s_i) on top.
"""
import os

import numpy as np

__all__ = ["distance_figure", "solution_figure", "report_figures"]

MAX_TOKENS = 2000          # tokens drawn over a density panel (evenly spaced in the sequence)


def distance_figure(comparison):
    """D against t (log scale): mean over draws and the min-max band, the grid error (dashed) and
    the floor π B/(2n) (dash-dotted); the legend below the axes.

    Parameters
    ----------
    comparison : meanfield.compare.causal.CausalComparison

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.compare.causal import compare_causal
    >>> from meanfield.plotting.causal import distance_figure
    >>> c = compare_causal(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s), [0, 0.5], n=32,
    ...                    seeds=1, slices=4, cells=16, bins=2, grid_reference=False)
    >>> fig = distance_figure(c)
    >>> fig.axes[0].get_yscale()
    'log'
    >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 5.2), constrained_layout=True)
    t, w, info = comparison.t, comparison.w1, comparison.info
    ax.plot(t, w.mean(axis=1), color="C0", lw=2, label=f"$D$: mean over {info['bins']} bins of $s$ of $W_1$ "
                                                      f"({info['sampling']} tokens)")
    if w.shape[1] > 1:
        ax.fill_between(t, w.min(axis=1), w.max(axis=1), color="C0", alpha=0.25, lw=0)
    if comparison.grid_error is not None:
        ax.plot(t, comparison.grid_error, "k--", label=r"grid error $D(\rho_h, \rho_{2h})$")
    ax.axhline(comparison.floor, color="grey", lw=1, ls="-.", label=r"floor once clustered: $\pi B/(2n)$")
    ax.set_yscale("log")
    ax.set_xlabel("$t$")
    ax.set_ylabel("distance (rad)")
    grid = info["grid"]
    ax.set_title(f"causal {info['model_name'].split('(')[0]}: n = {info['n']} tokens ({w.shape[1]} draws) vs "
                 f"PDE on {grid['slices']} × {grid['cells']} cells")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    return fig


def solution_figure(comparison):
    """ρ(t, s, θ) at the first and last output (one logarithmic colour scale each, with a colour bar)
    and the first draw's tokens (θ_i, s_i = (i - 1/2)/n) on top.

    Parameters
    ----------
    comparison : meanfield.compare.causal.CausalComparison

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.compare.causal import compare_causal
    >>> from meanfield.plotting.causal import solution_figure
    >>> c = compare_causal(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s), [0, 0.5], n=32,
    ...                    seeds=1, slices=4, cells=16, bins=2, grid_reference=False)
    >>> fig = solution_figure(c)
    >>> len(fig.axes)     # two panels and their colour bars
    4
    >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    density, x = comparison.density, comparison.particles.x
    x = x[:, 0] if x.ndim == 4 else x
    n = x.shape[1]
    pick = np.linspace(0, n - 1, min(MAX_TOKENS, n)).astype(int)
    s_tokens = (pick + 0.5) / n
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    for ax, k in zip(axes, (0, -1)):
        rho = density.rho[k]
        top = rho.max()
        image = ax.pcolormesh(density.theta, density.s, rho, shading="nearest", cmap="magma",
                              norm=LogNorm(vmin=max(rho.min(), top * 1e-4), vmax=top))
        fig.colorbar(image, ax=ax, label=r"density $\rho(t, s, \theta)$")
        theta = np.mod(np.arctan2(x[k, pick, 1], x[k, pick, 0]), 2 * np.pi)
        ax.scatter(theta, s_tokens, s=2, color="cyan", alpha=0.7, label=f"tokens ({pick.size} of {n})")
        ax.set(xlim=(0, 2 * np.pi), ylim=(0, 1), xlabel=r"angle $\theta$",
               ylabel="position in the sequence $s$", title=f"t = {comparison.t[k]:g}")
        ax.legend(loc="upper right", fontsize=9)
    return fig


def report_figures(comparison, folder):
    """Write solution.png and wasserstein.png to ``folder``; return their paths.

    Parameters
    ----------
    comparison : meanfield.compare.causal.CausalComparison
    folder : str
        An existing folder.

    Returns
    -------
    list of str
        The paths written.

    Examples
    --------
    >>> import os
    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield.compare.causal import compare_causal
    >>> from meanfield.plotting.causal import report_figures
    >>> c = compare_causal(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s), [0, 0.5], n=32,
    ...                    seeds=1, slices=4, cells=16, bins=2, grid_reference=False)
    >>> [os.path.basename(p) for p in report_figures(c, ".")]
    ['solution.png', 'wasserstein.png']
    """
    import matplotlib.pyplot as plt
    paths = []
    for name, make in (("solution", solution_figure), ("wasserstein", distance_figure)):
        fig = make(comparison)
        paths.append(os.path.join(folder, f"{name}.png"))
        fig.savefig(paths[-1], dpi=130)
        plt.close(fig)
    return paths
