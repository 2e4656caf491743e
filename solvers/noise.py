"""Brownian motion on the sphere for the particle solver (McKean–Vlasov particles).

With generator (σ²/2) Δ_S, the geodesic Euler–Maruyama step is

    x_{k+1} = (x_k + h X(x_k) + σ √h P_{x_k} ξ_k) / |...|,      ξ_k ~ N(0, I_d),

of weak order 1: the normalisation supplies the Itô drift -(σ²/2)(d-1) x of spherical
Brownian motion.  Without drift the first moment after k steps is exactly m(h)^k x_0 with
m(h) = E[(1 + σ² h χ²_{d-1})^{-1/2}] (``mean_contraction``), against e^{-(d-1) σ² t / 2}.
"""
import numpy as np
from scipy.integrate import quad
from scipy.special import gammaln, xlogy

from meanfield.checks import as_float_array


def brownian_kick(noise, seed, scheme):
    r"""The Brownian increment of the geodesic Euler–Maruyama step, for ``stepping.integrate``.

    .. math::

        \mathrm{kick}(x, h, k) = \sigma \sqrt h \, P_x \xi_k, \qquad \xi_k \sim N(0, I_d),

    ξ_k drawn from a generator keyed by (seed, k), so a resumed run repeats the draws.

    Parameters
    ----------
    noise : float
        σ >= 0.
    seed : int or None
        None: one is drawn (and returned, to be recorded in the solution's info).
    scheme : str
        The time scheme; noise needs "euler".

    Returns
    -------
    kick : callable or None
        None for σ = 0.
    seed : int or None

    Raises
    ------
    ValueError
        For σ < 0 or non-finite, or σ > 0 with another scheme than Euler.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.noise import brownian_kick
    >>> kick, seed = brownian_kick(0.5, 7, "euler")
    >>> x = np.array([[[0.0, 0.0, 1.0]]])
    >>> dx = kick(x, 0.01, 0)
    >>> seed, float(dx[0, 0, 2]) == 0.0            # tangent: no component along x
    (7, True)
    """
    sigma = float(as_float_array(noise, "noise"))
    if sigma < 0:
        raise ValueError(f"noise must be >= 0 (the Brownian amplitude σ); got {sigma:g}")
    if sigma == 0:
        return None, None
    if scheme != "euler":
        raise ValueError("noise > 0 needs method='euler' (geodesic Euler–Maruyama, weak order 1)")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % 2**63)
    elif isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 (noisy runs are keyed by (seed, step)); got {seed!r}")
    seed = int(seed)

    def kick(x, h, step):
        xi = np.random.default_rng([seed, step]).standard_normal(x.shape)
        xi -= np.sum(xi * x, axis=-1, keepdims=True) * x
        return (sigma * np.sqrt(h)) * xi

    return kick, seed


def mean_contraction(sigma, h, d):
    r"""The factor by which the noise step alone shrinks the mean of a token.

    .. math::

        m(h) = E\left[(1 + \sigma^2 h \chi^2_{d-1})^{-1/2}\right], \qquad E[x_{k+1} \mid x_k] = m(h) x_k.

    Parameters
    ----------
    sigma : float
    h : float
        The step.
    d : int
        Ambient dimension.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.noise import mean_contraction
    >>> bool(np.isclose(mean_contraction(0.5, 1e-3, 3), np.exp(-0.5 ** 2 * 1e-3), atol=1e-6))  # e^{-σ² h (d-1)/2}
    True
    """
    k = d - 1
    value, _ = quad(lambda s: _chi2_pdf(s, k) / np.sqrt(1.0 + sigma ** 2 * h * s), 0, np.inf, limit=200)
    return value


def _chi2_pdf(s, k):
    """The χ²_k density s^{k/2-1} e^{-s/2} / (2^{k/2} Γ(k/2)) (scipy.special, not scipy.stats: 0.5 s of imports)."""
    return np.exp(xlogy(k / 2.0 - 1.0, s) - s / 2.0 - (k / 2.0) * np.log(2.0) - gammaln(k / 2.0))
