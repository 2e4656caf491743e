r"""The distances of a comparison: W_1 and W_2 between each draw's tokens and the grid measure at every
output time (``distance_series``), the grid's own error W_2(ρ_h, ρ_{2h}) (``grid_error``), and the two
reference lines that explain them: the floor ``quantum_level`` once clusters have formed and the
i.i.d. growth n^{-1/2} e^{λ* t} (``instability``)."""
import numpy as np

from ..measures import drop_negligible, merge_atoms
from ..progress import track
from ..theory import growth_rate, most_unstable_mode
from ..transport.sphere import series_method, wasserstein

__all__ = ["distance_series", "grid_error", "quantum_level", "instability", "MERGE_TOL", "NEGLIGIBLE"]

MERGE_TOL = 1e-7           # tokens closer than this (a box of R^d) are one atom for W_p (changes it by < 2e-7)
NEGLIGIBLE = 1e-14         # cells of the density lighter than this in all are left out of W_p (changes W_2 by < 3.2e-7)


def quantum_level(n, p=2):
    """π (2n)^{-1/p}: W_p of half a token's mass δm = 1/(2n) moved across the diameter D = π.

    Once clusters have formed, a cluster-mass error δm at distance D costs W_p ≈ D δm^{1/p}, and
    n tokens of weight 1/n cannot fix a cluster's mass better than 1/(2n): below this level W_p
    no longer measures the discretisations' error.

    Parameters
    ----------
    n : int or array of int
        Tokens.
    p : float
        The order of W_p (1 or 2).

    Returns
    -------
    float or array
        π (2n)^{-1/p} in radians.

    Examples
    --------
    >>> print(f"{quantum_level(2000, 2):.4f} {quantum_level(2000, 1):.2e}")
    0.0497 7.85e-04
    """
    level = np.pi * (2.0 * np.asarray(n, dtype=float)) ** (-1.0 / p)
    return float(level) if level.ndim == 0 else level


def instability(model, d: int, n: int) -> dict:
    r"""{lambda_star, mode, horizon}: the fastest linear growth rate λ* at the uniform measure, its
    degree l* and the i.i.d. horizon where n^{-1/2} e^{λ* t} reaches 1,

    .. math::

        t_n = \frac{\log n}{2 \lambda^*};

    empty for models with no unstable mode.

    Parameters
    ----------
    model : SA or USA
    d : int
        The dimension of the ambient space.
    n : int
        Tokens.

    Returns
    -------
    dict

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare.distances import instability
    >>> sorted(instability(mf.SA(4.0), 2, 1000))
    ['horizon', 'lambda_star', 'mode']
    """
    if not model.is_isotropic or model.sign < 0:
        return {}
    mode = most_unstable_mode(model, d)
    rate = growth_rate(model, d, mode)
    if not rate > 0:
        return {}
    return dict(lambda_star=rate, mode=mode, horizon=float(np.log(n) / (2.0 * rate)))


def distance_series(x, weights, density, transport: str = "auto", progress: bool | None = None):
    r"""W_1 and W_2 between each draw's tokens and the grid measure at every output time,

    .. math::

        w_p[k, s] = W_p\Big(\mu^{n, s}_{t_k}, \sum_i \rho_i(t_k) |C_i| \delta_{c_i}\Big),

    tokens closer than ``MERGE_TOL`` merged into one atom and cells lighter than ``NEGLIGIBLE`` left out.

    Parameters
    ----------
    x : numpy.ndarray, shape (m, S, n, d)
        The tokens of S draws at m output times.
    weights : numpy.ndarray, shape (S, n), or None
        Their weights (None: 1/n).
    density : DensitySolution
        The density at the same output times (``density.measure(k)``).
    transport : str
        The ``wasserstein`` method; "auto" is resolved once for the whole series, from its largest
        problem (``transport.series_method``), so every output is measured with the same method.
    progress : bool or None
        A progress report over the output times (``meanfield.progress``).

    Returns
    -------
    w1, w2 : numpy.ndarray, shape (m, S)
    methods : set of str
        The transport methods ``wasserstein`` used.

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.solvers import circle
    >>> from meanfield.compare.distances import distance_series
    >>> sol = circle.solve(mf.SA(1.0), lambda p: 1 + 0 * p[:, 0], [0.0], cells=64, progress=False)
    >>> x = mf.circle_points(np.linspace(0, 2 * np.pi, 64, endpoint=False) + np.pi / 64)[None, None]
    >>> w1, w2, methods = distance_series(x, None, sol)
    >>> bool(w1[0, 0] < 1e-12), sorted(methods)
    (True, ['circle'])
    """
    m, seeds, n, d = x.shape
    ws = [None] * seeds if weights is None else weights
    w1, w2 = np.empty((m, seeds)), np.empty((m, seeds))
    methods = set()
    series = series_method(transport, d, n * _most_cells(density))      # one method for the whole series
    for k in track(range(m), "transport", progress, unit="outputs"):
        y, b = drop_negligible(*density.measure(k), tol=NEGLIGIBLE)
        for s in range(seeds):
            atoms = merge_atoms(x[k, s], ws[s], tol=MERGE_TOL)
            w1[k, s], info = wasserstein(*atoms, y, b, p=1, method=series, return_info=True)
            methods.add(info["method"])
            w2[k, s] = wasserstein(*atoms, y, b, p=2, method=series)
    return w1, w2, methods


def grid_error(density, coarse, transport: str = "auto") -> np.ndarray:
    """W_2(ρ_h, ρ_{2h}) at every output time: the grid measure against the one on the coarser grid, an
    estimate of the grid's own error (about it for a first-order scheme, three times it for a
    second-order one).

    Parameters
    ----------
    density, coarse : DensitySolution
        The density on the grid and on the coarser grid (``cells.coarser_cells``), at the same times.
    transport : str
        The ``wasserstein`` method ("auto": resolved once for the series, ``transport.series_method``).

    Returns
    -------
    numpy.ndarray, shape (m,)

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.solvers import circle
    >>> from meanfield.compare.distances import grid_error
    >>> rho0, t = mf.perturbed_uniform(2, seed=0), [0.0, 0.5]
    >>> fine, coarse = (circle.solve(mf.SA(1.0), rho0, t, cells=c, progress=False) for c in (128, 64))
    >>> e = grid_error(fine, coarse)
    >>> e.shape, bool(0 < e[0] < 0.05)
    ((2,), True)
    """
    series = series_method(transport, density.points.shape[-1], _most_cells(density) * _most_cells(coarse))
    return np.array([wasserstein(*drop_negligible(*density.measure(k), tol=NEGLIGIBLE),
                                 *drop_negligible(*coarse.measure(k), tol=NEGLIGIBLE), p=2, method=series)
                     for k in range(density.t.size)])


def _most_cells(density):
    """The most cells of any output of a density solution (fixed or changing meshes)."""
    cells = getattr(density, "cells", None)
    return int(np.max(cells)) if cells is not None else int(density.points.shape[-2])
