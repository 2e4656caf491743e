r"""Particles and densities converging to each other: ``meanfield convergence``.

For one model and initial density ρ_0, solve the particle system for several token counts n
(tokens from ``meanfield.sampling.discretise``, "stratified" by default) and the finite-volume
PDE on several grids (cells on S^1, icosphere levels on S^2), and tabulate, for every n, every
grid h and every output time t,

.. math::

    W_p(\mu^n_t, \rho^h_t), \qquad p = 1, 2,

with the observed orders: in h, the least-squares slope of log W_p(μ^{n_max}_t, ρ^h_t) against
log h (h the mean cell width, (|S^{d-1}|/N)^{1/(d-1)}), and in n, minus the slope of
log W_p(μ^n_t, ρ^{h_min}_t) against log n. A slope only measures the varied discretisation
while the other one's error is smaller, so the local orders between neighbours are reported
too, and the self-convergence of each discretisation alone: W_p(ρ^h_t, ρ^{h/2}_t) for the grids
and W_p(μ^n_t, μ^{n'}_t) between consecutive token counts.

Once clusters have formed, a cluster-mass error δm moves mass δm across a distance D between
clusters,

.. math::

    W_1 \approx D\, \delta m, \qquad W_2 \approx D \sqrt{\delta m},

so W_2 converges at half the order of W_1 (and n equal-mass tokens cannot represent a cluster
mass better than 1/(2n)): W_1 is the metric to read orders from, W_2 the one to compare with the
reports.

Once clusters have formed (``clustered``: the finest density has a cluster denser than twice
uniform, ``meanfield.clusters.density_clusters`` at level 2), W_p(μ^n, ρ^h) is bounded by the
cluster-mass quantum of n tokens rather than by the grid: half a token's mass across the diameter,
``quantum_level(n, p)`` = π (2n)^{-1/p}. A pair whose distance is below ``FLOOR_FACTOR`` times that
level is *at its floor* (``ConvergenceStudy.at_floor``): no order is computed from it, and the
tables mark it with ``*``.

What converges past clustering, W_2 included: the grids against a **refined reference** (on the
circle; ``meanfield convergence`` computes it by default, ``study(..., reference=n_ref)`` when
asked). ``meanfield.sampling.refined_quantiles`` puts weighted atoms on the quantile intervals of
ρ_0 and refines those that a watershed between clusters crosses, so its cluster masses are not
quantised in 1/n; flowed by the particle solver it is the mean-field solution to within its own
error, estimated by W_p between the references of n_ref/2 and n_ref atoms.  The study records
W_p(ρ^h_t, ref_t) for every grid with its order in h, pairs below ``FLOOR_FACTOR`` times the
reference's own error being at that floor (no order).  On S^2 the refined reference
(``refined_triangles``) costs minutes per round at the levels that matter, so it is not computed.
"""
import time
from dataclasses import dataclass, field

import numpy as np

from ..checks import as_choice, as_count, as_time_grid
from ..clusters import density_clusters
from ..compare.density import density_solver
from ..compare.distances import MERGE_TOL, quantum_level
from ..compare.tokens import initial_tokens
from ..geometry import GEOMETRIES
from ..measures import merge_atoms, sphere_area
from ..models import as_model
from ..sampling import METHODS, refined_quantiles
from ..solvers import particles
from ..summaries import short_repr
from ..transport.sphere import series_method, wasserstein

__all__ = ["ConvergenceStudy", "study", "observed_order", "figure"]

REFERENCE_FIELDS = ("reference_w1", "reference_w2", "reference_error_w1", "reference_error_w2")
FLOOR_FACTOR = 2.0         # a pair within this factor of its cluster-mass quantum gives no order
CLUSTER_LEVEL = 2.0        # clusters have formed once the density has a part denser than twice uniform


@dataclass(eq=False)
class ConvergenceStudy:
    r"""W_p between particles and densities over a grid of resolutions (result of ``study``).

    .. math::

        w_p[k, i, j] = W_p(\mu^{n_i}_{t_k}, \rho^{h_j}_{t_k}).

    Parameters
    ----------
    t : numpy.ndarray, shape (m,)
        Output times.
    n : numpy.ndarray, shape (a,)
        Token counts.
    cells : numpy.ndarray, shape (b,)
        Grid sizes.
    h : numpy.ndarray, shape (b,)
        Mean cell widths.
    w1, w2 : numpy.ndarray, shape (m, a, b)
        W_p(μ^{n_i}_t, ρ^{h_j}_t) in radians.
    grid_w1, grid_w2 : numpy.ndarray, shape (m, b - 1)
        W_p(ρ^{h_j}_t, ρ^{h_{j+1}}_t).
    particle_w1, particle_w2 : numpy.ndarray, shape (m, a - 1)
        W_p(μ^{n_i}_t, μ^{n_{i+1}}_t).
    info : dict
        Settings, methods, timings.
    clustered : numpy.ndarray of bool, shape (m,), optional
        Whether clusters have formed at t (None: never asked, no floors).
    reference_w1, reference_w2 : numpy.ndarray, shape (m, b), optional
        W_p(ρ^{h_j}_t, ref_t) against the refined reference (None: no reference).
    reference_error_w1, reference_error_w2 : numpy.ndarray, shape (m,), optional
        The reference's own error (W_p between the two refined references).
    bins : int
        The distances are means over ``bins`` measures of n/bins tokens each (1; the causal study's
        bins of s, ``convergence.causal.causal_study``), whose floor is that of n/bins tokens.  A
        causal study has W_1 only (w2 and its companions are NaN).

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.convergence import study
    >>> s = study(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], ns=[32, 64], grids=[32, 64])
    >>> s.w1.shape, s.grid_w2.shape, s.particle_w1.shape
    ((2, 2, 2), (2, 1), (2, 1))
    >>> sorted(s.orders(p=1))
    ['grid', 'h', 'n', 'particles']
    """

    __repr__ = short_repr
    t: np.ndarray
    n: np.ndarray
    cells: np.ndarray
    h: np.ndarray
    w1: np.ndarray
    w2: np.ndarray
    grid_w1: np.ndarray
    grid_w2: np.ndarray
    particle_w1: np.ndarray
    particle_w2: np.ndarray
    info: dict = field(default_factory=dict)
    clustered: np.ndarray = None
    bins: int = 1
    reference_w1: np.ndarray = None
    reference_w2: np.ndarray = None
    reference_error_w1: np.ndarray = None
    reference_error_w2: np.ndarray = None

    def at_floor(self, p=2):
        """(m, a) boolean: the pairs (t, n) whose W_p(μ^n_t, ρ^h_t) is at the cluster-mass floor
        of n tokens, for every grid h (m, a, b): clusters have formed at t and the distance is below
        ``FLOOR_FACTOR`` · ``quantum_level(n, p)``. No order is computed from such a pair.

        Examples
        --------
        >>> import numpy as np
        >>> s = ConvergenceStudy(t=np.array([0.0, 9.0]), n=np.array([100, 400]), cells=np.array([64, 128]),
        ...                      h=2 * np.pi / np.array([64, 128]), w1=np.full((2, 2, 2), 0.05),
        ...                      w2=np.full((2, 2, 2), 0.05), grid_w1=np.zeros((2, 1)), grid_w2=np.zeros((2, 1)),
        ...                      particle_w1=np.zeros((2, 1)), particle_w2=np.zeros((2, 1)),
        ...                      clustered=np.array([False, True]))
        >>> s.at_floor(p=2)[:, :, 0]        # 0.05 < 2 π (2n)^{-1/2} = 0.44, 0.22 once clustered
        array([[False, False],
               [ True,  True]])
        """
        w = self.w1 if p == 1 else self.w2
        if self.clustered is None:
            return np.zeros(w.shape, dtype=bool)
        floor = FLOOR_FACTOR * quantum_level(self.n / self.bins, p)
        return np.asarray(self.clustered, dtype=bool)[:, None, None] & (w < floor[None, :, None])

    def orders(self, p=2):
        """Least-squares orders at each output time (m,) (NaN where undefined): "h" and "n" of
        W_p(particles, density) on the most tokens / the finest grid, "grid" of W_p(ρ_h, ρ_{h/2})
        against h and "particles" of W_p(μ^n, μ^{n'}) (next n' > n) against n. Pairs at their
        floor (``at_floor``) are left out: an order needs two pairs above it."""
        w, g, q = (self.w1, self.grid_w1, self.particle_w1) if p == 1 else (self.w2, self.grid_w2, self.particle_w2)
        w, q = self._above_floor(w, p), self._particles_above_floor(q, p)
        steps = range(self.t.size)
        out = dict(h=np.array([observed_order(self.h, w[k, -1, :]) for k in steps]),
                   n=np.array([-observed_order(self.n, w[k, :, -1]) for k in steps]),
                   grid=np.array([observed_order(self.h[:-1], g[k]) for k in steps]),
                   particles=np.array([-observed_order(self.n[:-1], q[k]) for k in steps]))
        if self.reference_w1 is not None:
            r = np.where(self.reference_at_floor(p), np.nan, self._reference(p)[0])
            out["reference"] = np.array([observed_order(self.h, r[k]) for k in steps])
        return out

    def _reference(self, p):
        return (self.reference_w1, self.reference_error_w1) if p == 1 else (self.reference_w2, self.reference_error_w2)

    def reference_at_floor(self, p=2):
        """(m, b) boolean: the grids whose W_p to the refined reference is below ``FLOOR_FACTOR`` times
        the reference's own error (W_p between its n_ref/2 and n_ref atoms): no order from them."""
        w, err = self._reference(p)
        return w < FLOOR_FACTOR * err[:, None]

    def _above_floor(self, w, p):
        return np.where(self.at_floor(p), np.nan, w)

    def _particles_above_floor(self, q, p):
        """W_p(μ^{n_i}, μ^{n_{i+1}}) with the pairs below the floor of n_i (once clustered) set to NaN."""
        if self.clustered is None:
            return q
        floor = FLOOR_FACTOR * quantum_level(self.n[:-1] / self.bins, p)
        return np.where(np.asarray(self.clustered, dtype=bool)[:, None] & (q < floor[None, :]), np.nan, q)

    def table(self):
        """Plain text: first what converges (the observed orders at every output time, and the orders to
        expect), then the tables of W_1 and W_2 at every output time. Pairs at their cluster-mass floor are
        marked * and give no order ("-"); a time whose pairs are all at the floor is one line."""
        lines = self._summary()
        for p, w in ((1, self.w1), (2, self.w2))[:2 if np.isfinite(self.w2).any() else 1]:
            orders, floor = self.orders(p), self.at_floor(p)
            above = self._above_floor(w, p)
            for k, t in enumerate(self.t):
                state = "clusters formed" if self.clustered is not None and self.clustered[k] else "before clustering"
                name = f"W{p}" if self.bins == 1 else f"D = mean over {self.bins} s-bins of W1"
                if floor[k].all():
                    lines.append(f"{name} at t = {t:g}, {state}: every pair at its floor, {self._floor_text(p)}: "
                                 f"no order")
                    lines.extend(self._reference_line(p, k, orders))
                    lines.append("")
                    continue
                columns = "cells" if self.bins == 1 else f"cells S x N = {', '.join(self.info.get('grid_labels', []))}"
                lines.append(f"{name} at t = {t:g}, {state}   (rows: n tokens, columns: {columns})")
                lines.append(f"{'n':>7} " + " ".join(f"{c:>10d} " for c in self.cells) + f" {'order h':>8}")
                for i, n in enumerate(self.n):
                    lines.append(f"{n:>7d} " + " ".join(f"{v:10.3e}" + ("*" if f else " ")
                                                        for v, f in zip(w[k, i], floor[k, i]))
                                 + f" {_order(observed_order(self.h, above[k, i])):>8}")
                local = [-observed_order(self.n[i:i + 2], above[k, i:i + 2, -1]) for i in range(self.n.size - 1)]
                lines.append(f"{'order n':>7} (finest grid) {_order(orders['n'][k])}, local "
                             + ", ".join(_order(o) for o in local))
                grid = self.grid_w1 if p == 1 else self.grid_w2
                lines.append(f"{'grid':>7} W{p}(rho_h, rho_h/2) " + " ".join(f"{v:.2e}" for v in grid[k])
                             + f", order {_order(orders['grid'][k])}")
                own = self.particle_w1 if p == 1 else self.particle_w2
                lines.append(f"{'tokens':>7} W{p}(mu_n, mu_2n) " + " ".join(f"{v:.2e}" for v in own[k])
                             + f", order {_order(orders['particles'][k])}")
                lines.extend(self._reference_line(p, k, orders))
                if floor[k].any():
                    lines.append(f"{'*':>7} at the floor, {self._floor_text(p)}: no order")
                lines.append("")
        return "\n".join(lines)

    def _floor_text(self, p):
        """'below 2 x <the floor formula> = 2 x (values)', the floor of W_p for n tokens (per bin of s)."""
        formula = "pi/(2n)" if p == 1 else f"pi (2n)^(-1/{p:g})"
        if self.bins != 1:
            formula = formula.replace("n", f"n/{self.bins}") + " (n/B tokens per bin of s)"
        levels = ", ".join(f"{v:.2e}" for v in quantum_level(self.n / self.bins, p))
        return f"below {FLOOR_FACTOR:g} x {formula} = {FLOOR_FACTOR:g} x ({levels}), the cluster-mass quantum"

    def _reference_line(self, p, k, orders):
        if self.reference_w1 is None:
            return []
        ref, err = self._reference(p)
        marks = self.reference_at_floor(p)[k]
        return [f"{'ref':>7} W{p}(rho_h, refined reference) "
                + " ".join(f"{v:.2e}" + ("*" if f else "") for v, f in zip(ref[k], marks))
                + f", order {_order(orders['reference'][k])} (reference's own error "
                f"{err[k]:.1e}{'; * below twice it: no order' if marks.any() else ''})"]

    def _summary(self):
        """What converges: the observed orders at every output time, then the orders to expect."""
        ps = (1, 2) if np.isfinite(self.w2).any() else (1,)
        orders = {p: self.orders(p) for p in ps}
        kinds = [("h", "in h"), ("n", "in n"), ("grid", "grid"), ("particles", "tokens")]
        if self.reference_w1 is not None:
            kinds.append(("reference", "ref"))
        width = 7 * len(kinds) - 1
        lines = ["What converges: observed orders (in h and in n of tokens vs density; the grids alone, the tokens "
                 "alone" + (", the grids vs the refined reference" if self.reference_w1 is not None else "")
                 + "; -: at the floor or undefined)",
                 (f"{'':>7} | " + " | ".join(f"{f'W{p}':^{width}}" for p in ps)).rstrip(),
                 f"{'t':>7} | " + " | ".join(" ".join(f"{label:>6}" for _, label in kinds) for _ in ps)]
        for k, t in enumerate(self.t):
            lines.append(f"{t:7.3g} | " + " | ".join(" ".join(f"{_order(orders[p][key][k]):>6}" for key, _ in kinds)
                                                     for p in ps))
        tokens = "1/2 (i.i.d. tokens)" if self.info.get("sampling") == "iid" else "1 (stratified or quantile tokens)"
        if self.bins != 1:
            tokens = "below 1 (causal tokens approach the PDE slowly: about 0.6-0.7, docs/causal.md)"
        lines.append(f"expected: W1 of order 1 in h at every time; before clustering order {tokens} in n;")
        if 2 in ps:
            lines.append("after clustering W2 of equal-mass tokens stops at its floor pi (2n)^(-1/2), and against a "
                         "refined reference converges at order 1/2 in h at best (W2 ~ D sqrt(dm))")
        lines.append("")
        return lines

    def to_dict(self):
        """JSON-ready numbers."""
        return dict(info=self.info, t=self.t.tolist(), n=self.n.tolist(), cells=self.cells.tolist(),
                    h=self.h.tolist(), w1=self.w1.tolist(), w2=self.w2.tolist(), grid_w1=self.grid_w1.tolist(),
                    grid_w2=self.grid_w2.tolist(), particle_w1=self.particle_w1.tolist(),
                    particle_w2=self.particle_w2.tolist(),
                    clustered=None if self.clustered is None else np.asarray(self.clustered).tolist(),
                    bins=self.bins, **{name: None if getattr(self, name) is None else getattr(self, name).tolist()
                                       for name in REFERENCE_FIELDS},
                    at_floor={f"w{p}": self.at_floor(p).tolist() for p in (1, 2)},
                    orders={f"w{p}": {k: v.tolist() for k, v in self.orders(p).items()} for p in (1, 2)})


    @classmethod
    def from_dict(cls, numbers):
        """The study back from ``to_dict``'s numbers (a convergence.json; ``clustered`` None when absent)."""
        arrays = {name: np.asarray(numbers[name]) for name in ("t", "n", "cells", "h", "w1", "w2", "grid_w1",
                                                               "grid_w2", "particle_w1", "particle_w2")}
        clustered = numbers.get("clustered")
        arrays.update({name: None if numbers.get(name) is None else np.asarray(numbers[name], dtype=float)
                       for name in REFERENCE_FIELDS})
        return cls(**arrays, info=dict(numbers.get("info", {})), bins=int(numbers.get("bins", 1)),
                   clustered=None if clustered is None else np.asarray(clustered, dtype=bool))


def _order(value):
    return "-" if np.isnan(value) else f"{value:.2f}"


def observed_order(h, err):
    r"""Least-squares slope of log err against log h (NaN with fewer than two positive errors).

    .. math::

        \log \mathrm{err} \approx p \log h + c.

    Parameters
    ----------
    h : array_like, shape (k,)
        Resolutions (cell widths, or token counts).
    err : array_like, shape (k,)
        Errors; entries that are NaN or <= 0 are left out.

    Returns
    -------
    float
        The slope p.

    Examples
    --------
    >>> from meanfield.convergence import observed_order
    >>> round(observed_order([0.1, 0.05, 0.025], [0.02, 0.005, 0.00125]), 6)
    2.0
    >>> observed_order([0.1, 0.05], [0.02, float("nan")])
    nan
    """
    h, err = np.asarray(h, dtype=float), np.asarray(err, dtype=float)
    ok = err > 0
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(h[ok]), np.log(err[ok]), 1)[0])


def study(model, rho0, t_eval, ns, grids, *, geometry="circle", sampling="stratified", seed=0, flux="upwind",
          transport="auto", progress=None, reference=None):
    r"""W_p(particles_n, density_h) for every n in ``ns`` and every grid in ``grids``, at the times t_eval.

    .. math::

        W_p(\mu^n_t, \rho^h_t), \quad p = 1, 2; \qquad W_p(\rho^h_t, \rho^{h/2}_t), \quad W_p(\mu^n_t, \mu^{n'}_t).

    One draw of tokens per n (``compare.initial_tokens`` with ``sampling`` and ``seed``).

    Parameters
    ----------
    model : SA or USA
        Q = K = I, V = ±I.
    rho0 : callable
        Initial density, points (N, d) -> densities.
    t_eval : array_like
        Increasing output times.
    ns : sequence of int
        Token counts (at least two different).
    grids : sequence of int
        Cells on the circle, icosphere levels on the sphere (at least two different).
    geometry : {"circle", "sphere"}
        S^1 or S^2.
    sampling : {"stratified", "iid", "quantile", "weighted"}
        How the tokens discretise ρ_0.
    seed : int
        Seed of the draws.
    flux : str
        Flux of the finite-volume solver.
    transport : str
        The ``wasserstein`` method.
    progress : bool or None
        Progress reports (None: after a few seconds, as the solvers).
    reference : int, optional
        n_ref > 0 (the circle only; ``meanfield convergence`` passes ``reference_size(None, ...)`` =
        max(ns)/2 by default): the refined references of n_ref/2 and n_ref quantile atoms (module
        docstring) and W_p of every grid to the finer one; None or 0: none.

    Returns
    -------
    ConvergenceStudy

    Raises
    ------
    ValueError
        If the geometry or sampling is unknown, the times are not increasing, or the token counts or
        grids are fewer than two or repeat.

    Examples
    --------
    >>> import meanfield as mf
    >>> from meanfield.convergence import study
    >>> s = study(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], ns=[32, 64], grids=[32, 64])
    >>> s.n.tolist(), s.cells.tolist(), bool(s.w1.max() < 0.5)
    ([32, 64], [32, 64], True)
    """
    model = as_model(model)
    as_choice(geometry, "geometry", tuple(GEOMETRIES))
    as_choice(sampling, "sampling", METHODS)
    d = GEOMETRIES[geometry]
    t_eval = as_time_grid(t_eval)
    ns = sorted(as_count(n, "n") for n in ns)
    grids = sorted(as_count(g, "grid", minimum=0 if geometry == "sphere" else 1) for g in grids)
    if len(set(ns)) < 2 or len(set(grids)) < 2:
        raise ValueError(f"a convergence study needs at least two different token counts n and two different grids; "
                         f"got n = {ns}, grid = {grids}")
    if len(set(ns)) < len(ns) or len(set(grids)) < len(grids):
        raise ValueError(f"token counts and grids must not repeat; got n = {ns}, grids = {grids}")
    reference = 0 if reference is None else reference_size(reference, geometry, ns)
    clock, timings = time.perf_counter(), {}
    tokens = []
    for n in ns:
        x0, w = initial_tokens(rho0, n, d, sampling, seed, 1)
        sol = particles.solve(model, x0[0], t_eval, energy=False, weights=None if w is None else w[0],
                              progress=progress)
        tokens.append([merge_atoms(xk, None if w is None else w[0], tol=MERGE_TOL) for xk in sol.x])
    timings["particles"] = time.perf_counter() - clock
    clock = time.perf_counter()
    densities = [density_solver(geometry, model, rho0, t_eval, cells=g, level=g, flux=flux, progress=progress)
                 for g in grids]
    timings["density"] = time.perf_counter() - clock
    clock = time.perf_counter()
    m, a, b = t_eval.size, len(ns), len(grids)
    w1, w2 = np.empty((m, a, b)), np.empty((m, a, b))
    g1, g2 = np.empty((m, b - 1)), np.empty((m, b - 1))
    q1, q2 = np.empty((m, a - 1)), np.empty((m, a - 1))
    methods = set()
    most_n, most_cells = max(ns), max(dens.points.shape[-2] for dens in densities)
    # one method per series (tokens against tokens, against densities, grids against grids)
    tokens_series = series_method(transport, d, most_n * most_n)
    density_series = series_method(transport, d, most_n * most_cells)
    grid_series = series_method(transport, d, most_cells * most_cells)
    for k in range(m):
        for i in range(a - 1):
            q1[k, i] = wasserstein(*tokens[i][k], *tokens[i + 1][k], p=1, method=tokens_series)
            q2[k, i] = wasserstein(*tokens[i][k], *tokens[i + 1][k], p=2, method=tokens_series)
        for j, dens in enumerate(densities):
            y, yw = dens.measure(k)
            for i, atoms in enumerate(tokens):
                w1[k, i, j], info = wasserstein(*atoms[k], y, yw, p=1, method=density_series, return_info=True)
                w2[k, i, j] = wasserstein(*atoms[k], y, yw, p=2, method=density_series)
                methods.add(info["method"])
            if j + 1 < b:
                finer = densities[j + 1].measure(k)
                g1[k, j] = wasserstein(y, yw, *finer, p=1, method=grid_series)
                g2[k, j] = wasserstein(y, yw, *finer, p=2, method=grid_series)
    timings["transport"] = time.perf_counter() - clock
    refs = {}
    if reference:
        clock = time.perf_counter()
        refs = reference_distances(model, rho0, t_eval, reference, densities)
        timings["reference"] = time.perf_counter() - clock
    clustered = np.array([density_clusters(densities[-1], k, level=CLUSTER_LEVEL) > 0 for k in range(m)])
    cells = np.array([dens.points.shape[0] for dens in densities])
    h = (sphere_area(d) / cells) ** (1.0 / (d - 1))
    info = dict(geometry=geometry, model=model.to_dict(), model_name=repr(model), sampling=sampling, seed=seed,
                flux=flux, grids=grids, transport_methods=sorted(methods | {tokens_series, grid_series}),
                transport_exact="sliced" not in methods | {tokens_series, grid_series},
                rho0=getattr(rho0, "spec", None),
                reference=dict(n=[reference // 2, reference], method="refined_quantiles") if reference else None,
                timings={k: round(v, 2) for k, v in timings.items()})
    return ConvergenceStudy(t=t_eval, n=np.array(ns), cells=cells, h=h, w1=w1, w2=w2, grid_w1=g1, grid_w2=g2,
                            particle_w1=q1, particle_w2=q2, info=info, clustered=clustered, **refs)


def reference_size(reference, geometry, ns):
    """n_ref of the refined reference of ``meanfield convergence``: max(ns)/2 (at least 4) on the
    circle for None, 0 (none) on the sphere; an explicit n_ref is 0 or at least 4, and 0 on the
    sphere (ValueError otherwise).

    Examples
    --------
    >>> reference_size(None, "circle", [500, 4000]), reference_size(None, "sphere", [250, 1000])
    (2000, 0)
    """
    if reference is None:
        return max(max(ns) // 2, 4) if geometry == "circle" else 0
    reference = as_count(reference, "reference", minimum=0)
    if reference and geometry != "circle":
        raise ValueError("the refined reference of the study is the circle's (refined_quantiles); on the sphere "
                         "use meanfield.sampling.refined_triangles (minutes per round), or reference=0")
    if 0 < reference < 4:
        raise ValueError(f"reference must be 0 (none) or at least 4 atoms; got {reference}")
    return reference


def reference_distances(model, rho0, t_eval, n_ref, densities):
    """The refined references (``sampling.refined_quantiles`` of n_ref/2 and n_ref atoms, flowed by
    the particle solver to every output time) and {reference_w1, reference_w2: (m, b) W_p(ρ^h_t, ref_t)
    for the finer one, reference_error_w1, reference_error_w2: (m,) W_p between the two}."""
    path = {}

    def flow(x, w):                 # the final positions; the whole path of the last (finest) round is kept
        path["x"] = particles.solve(model, x, t_eval, weights=w, energy=False).x
        return path["x"][-1]
    refs = []
    for n in (n_ref // 2, n_ref):
        _, weights = refined_quantiles(rho0, flow, n)
        refs.append((path["x"], weights))
    (xa, wa), (xb, wb) = refs
    out = {}
    for p in (1, 2):
        out[f"reference_w{p}"] = np.array([[wasserstein(*dens.measure(k), xb[k], wb, p=p, method="circle")
                                            for dens in densities] for k in range(t_eval.size)])
        out[f"reference_error_w{p}"] = np.array([wasserstein(xa[k], wa, xb[k], wb, p=p, method="circle")
                                                 for k in range(t_eval.size)])
    return out


def figure(result):
    r"""The figure of a convergence study: W_1 at every output time against the cell width h (the most
    tokens) and against the tokens n (the finest grid), log-log: one colour per time, hollow markers
    for pairs at their cluster-mass floor, the floor itself (grey) and slope guides; with a refined
    reference, a third panel: W_2(ρ_h, ref) against h at every time (hollow: below twice the
    reference's own error, drawn dotted).

    .. math::

        W_1(\mu^{n_{\max}}_t, \rho^h_t) \text{ against } h, \qquad W_1(\mu^n_t, \rho^{h_{\min}}_t) \text{ against } n,
        \qquad \text{floor } 2 \cdot \pi/(2n).

    Parameters
    ----------
    result : ConvergenceStudy

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import meanfield as mf
    >>> from meanfield.convergence import study
    >>> s = study(mf.SA(beta=1.0), mf.perturbed_uniform(2, seed=0), [0.0, 1.0], ns=[32, 64], grids=[32, 64])
    >>> from meanfield.convergence import figure
    >>> fig = figure(s)
    >>> len(fig.axes)
    2
    >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter
    panels = 2 if result.reference_w2 is None else 3
    fig, axes = plt.subplots(1, panels, figsize=(5.6 * panels, 4.8), constrained_layout=True)
    left, right = axes[:2]
    floor = result.at_floor(1)
    steps = range(result.t.size)
    colours = plt.cm.viridis(np.linspace(0.0, 0.85, len(steps)))
    for colour, k in zip(colours, steps):
        label = f"t = {result.t[k]:g}" + (" (clustered)" if result.clustered is not None and result.clustered[k]
                                          else "")
        _line(left, result.h, result.w1[k, -1], floor[k, -1], colour, label)
        _line(right, result.n, result.w1[k, :, -1], floor[k, :, -1], colour, label)
        left.loglog(result.h[:-1], result.grid_w1[k], "--", color=colour, lw=1)
        if panels == 3 and result.t[k] > 0:
            _line(axes[2], result.h, result.reference_w2[k], result.reference_at_floor(2)[k], colour, label)
            axes[2].axhline(result.reference_error_w2[k], color=colour, ls=":", lw=1)
    left.loglog(result.h, result.w1[steps[-1], -1, -1] * result.h / result.h[-1], ":", color="grey",
                label="slope 1")
    left.plot([], [], "k--", lw=1, label=r"grid alone: $W_1(\rho_h, \rho_{h/2})$")
    left.set_xlabel("mean cell width $h$ (rad)")
    ylabel = (r"$W_1(\mu^n_t, \rho^h_t)$ (rad)" if result.bins == 1 else
              rf"$D$: mean over {result.bins} $s$-bins of $W_1$ (rad)")
    left.set_ylabel(ylabel)
    left.set_title(f"against the grid, n = {result.n[-1]} tokens")
    right.loglog(result.n, FLOOR_FACTOR * quantum_level(result.n / result.bins, 1), "-", color="grey", lw=2,
                 alpha=0.6, label=rf"floor ${FLOOR_FACTOR:g}\,\pi/(2n)$ once clustered" if result.bins == 1 else
                 rf"floor ${FLOOR_FACTOR:g}\,\pi B/(2n)$ once clustered ($B = {result.bins}$ bins of $s$)")
    right.loglog(result.n, result.w1[steps[0], 0, -1] * result.n[0] / result.n, ":", color="grey", label="slope $-1$")
    right.set_xlabel("tokens $n$")
    right.set_ylabel(ylabel)
    right.set_title(f"against the tokens ({result.info['sampling']}), "
                    f"{result.info.get('grid_labels', result.cells)[-1]} cells")
    if panels == 3:
        ref = axes[2]
        last = result.reference_w2[-1]
        ref.loglog(result.h, last[0] * np.sqrt(result.h / result.h[0]), "--", color="grey", lw=1, label="slope 1/2")
        ref.plot([], [], "k:", lw=1, label="the reference's own error")
        ref.set_xlabel("mean cell width $h$ (rad)")
        ref.set_ylabel(r"$W_2(\rho^h_t, \mathrm{ref}_t)$ (rad)")
        sizes = result.info.get("reference", {}).get("n", ["", ""])
        ref.set_title(f"$W_2$ past clustering: grid vs refined reference ({sizes[-1]} atoms)")
    for ax, ticks in [(left, result.h), (right, result.n)] + ([(axes[2], result.h)] if panels == 3 else []):
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        if ax is not right:
            ax.set_xticklabels([f"{v:.3g}" for v in ticks])
        ax.legend(fontsize=8)
    fig.suptitle(f"{result.info['model_name']} on the {result.info['geometry']}: particles vs density "
                 "(hollow: at the floor, no order)")
    return fig


def _line(ax, x, y, floor, colour, label):
    ax.loglog(x, y, "-", color=colour, label=label)
    ax.loglog(x[~floor], y[~floor], "o", color=colour)
    ax.loglog(x[floor], y[floor], "o", mfc="white", color=colour)
