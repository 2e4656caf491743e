"""The particle side's initial data in a comparison: n tokens discretising ρ_0, for several draws."""
import numpy as np

from ..measures import sample_density
from ..sampling import discretise

__all__ = ["initial_tokens"]


def initial_tokens(rho0, n: int, d: int, sampling: str, seed: int, seeds: int):
    """x0 (seeds, n, d) discretising ρ_0 and their weights (seeds, n), or None when all are 1/n.

    The draws use successive states of ``numpy.random.default_rng(seed)`` (i.i.d.: one batch, as
    ``sample_density(rho0, n, d, seed, batch=seeds)``).

    Parameters
    ----------
    rho0 : callable
        Points (N, d) -> densities.
    n : int
        Tokens per draw.
    d : int
        2 (the circle) or 3 (the sphere).
    sampling : {"stratified", "iid", "quantile", "weighted"}
        ``meanfield.sampling.discretise``'s methods, or "iid" (``meanfield.measures.sample_density``).
    seed : int
        The seed of the draws.
    seeds : int
        The number of draws.

    Returns
    -------
    x0 : numpy.ndarray, shape (seeds, n, d)
    weights : numpy.ndarray, shape (seeds, n), or None

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.compare import initial_tokens
    >>> x0, w = initial_tokens(mf.perturbed_uniform(2, seed=0), 16, 2, "stratified", 0, 3)
    >>> x0.shape, w
    ((3, 16, 2), None)
    """
    if sampling == "iid":
        return sample_density(rho0, n, d, seed=seed, batch=seeds), None
    rng = np.random.default_rng(seed)
    draws = [discretise(rho0, n, d, sampling, seed=rng) for _ in range(seeds)]
    x0 = np.stack([x for x, _ in draws])
    return x0, (np.stack([w for _, w in draws]) if sampling == "weighted" else None)
