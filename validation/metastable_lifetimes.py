"""Metastable lifetimes at large β (arXiv:2410.06833): prepared caps merge after a time exponential in β times the gap.

Starts: k caps S_q(ε) = {x : <x, w_q> >= 1 - ε} on S^2 (centres w_q on a great circle, m tokens
each: m/2 uniform in the cap and their half-turns about w_q, so each cap's mean direction is w_q;
ε = 1e-3), evolved by SA with the adaptive Dormand–Prince solver.
Within a cap the tokens attract at rate ~1 and collapse to a point (the fast phase, t ≲ 10);
two clusters at angle φ then interact only through e^{β(cos φ - 1)}.  Geshkovski–Koubbi–
Polyanskiy–Rigollet prove that the tokens stay in their caps for t <= T_2 = (ε/n) e^{(1-α)β},
α the largest inner product between caps: a lifetime exponential in β, the exponent set by the
gap 1 - α (paper.md §6.2).  Here the lifetime is measured, not bounded.

Reduced model (two Diracs).  Clusters of mass fractions m_A, m_B at angle φ: the SA velocity of a
token of A towards B is m_B e^{β cos φ} sin φ / (m_A e^β + m_B e^{β cos φ}), so

    dφ/dt = -sin φ (m_B / (m_A e^{βg(φ)} + m_B) + m_A / (m_B e^{βg(φ)} + m_A)),   g(φ) = 1 - cos φ,

and the time from φ_1 to φ_2 < φ_1 is the quadrature ``dirac_merge_time``.  For equal masses and
βg(φ_1) large, Laplace's method at the upper end gives

    L ≈ e^{β g(φ_1)} / (2 β sin² φ_1),  i.e.  log(β L) = β g(φ_1) - log(2 sin² φ_1) + O(1/β),

the predicted law: exponential in β with exponent the gap g = 1 - cos φ_1 (the paper's 1 - α for
collapsed caps), and a 1/β prefactor that a plain fit of log L against β would fold into c.

Lifetime L: the time at which the angle between the clusters' mean directions has halved (the
second half takes a fraction ~e^{-β(cos(φ/2) - cos φ)} of the first); it is located between
output times by linear interpolation of the angle.  The prediction starts from the measured angle
φ_c at t_c = 10 (caps collapsed to ~1e-6 rad, which changes the drift by ~β·1e-12) and is
t_c + dirac_merge_time(φ_c → φ_0/2).

Checks: two caps, gaps g ∈ {0.25, 0.4, 0.6} with βg from 8 to 12.5 (β = 13 … 50): every
measured lifetime within 1e-3 of the two-Dirac quadrature (relative; a β 1 % off moves L by 8 %);
per gap, the fitted slope of log(β L)
against β within 3 % of the gap 1 - cos φ_c (and the plain fit of log L shown beside it); three
caps at gaps φ_a < φ_b: the closest pair merges first, within 3 % of its two-Dirac time (the third
cluster's pull is O(e^{-β(cos φ_a - cos φ_b)})).  The theorem's T_2 and its separation γ(β)
are recorded beside each run, not checked: γ > 0 needs β (1 - α - 8ε) > log(2n²/ε) ≈ 13, far beyond
lifetimes a run can reach here (T_2 then lies orders of magnitude below L).
"""
import numpy as np
from scipy.integrate import quad

import meanfield as mf
from meanfield.cli.figures import Experiment
from meanfield.solvers import particles

EPS = 1e-3         # cap size: <x, w_q> >= 1 - EPS
T_COLLAPSE = 10.0  # the caps have collapsed (diameter ~e^{-T} of the start's) by then
PER_CAP = 8


def cap_tokens(centre, m, eps, rng):
    """m (even) points in the cap {x : <x, centre> >= 1 - eps} of S^2: m/2 uniform ones (height uniform
    in [1-eps, 1]) and their half-turns about the centre, so that the mean direction is the centre."""
    centre = np.asarray(centre, float)
    h = np.repeat(rng.uniform(1 - eps, 1, m // 2), 2)
    phi = np.repeat(rng.uniform(0, 2 * np.pi, m // 2), 2) + np.tile([0.0, np.pi], m // 2)
    e1 = np.cross(centre, [0.0, 0.0, 1.0] if abs(centre[2]) < 0.9 else [1.0, 0.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(centre, e1)
    r = np.sqrt(1 - h ** 2)
    return mf.normalise(h[:, None] * centre + r[:, None] * (np.cos(phi)[:, None] * e1 + np.sin(phi)[:, None] * e2))


def caps_start(angles, m, eps, seed):
    """Caps centred at (cos ψ, sin ψ, 0) for ψ in ``angles``, m tokens each: (tokens (k m, 3), centres (k, 3))."""
    rng = np.random.default_rng(seed)
    centres = np.stack([[np.cos(a), np.sin(a), 0.0] for a in angles])
    return np.concatenate([cap_tokens(c, m, eps, rng) for c in centres]), centres


def dirac_merge_time(beta, phi_from, phi_to, m_a=0.5, m_b=0.5):
    """Time for two SA Diracs of mass fractions m_a, m_b to close from angle phi_from to phi_to:
    ∫_{phi_to}^{phi_from} dφ / (sin φ (m_b/(m_a e^{βg} + m_b) + m_a/(m_b e^{βg} + m_a))), g = 1 - cos φ."""
    def slowness(phi):
        e = np.exp(beta * (1 - np.cos(phi)))
        return 1.0 / (np.sin(phi) * (m_b / (m_a * e + m_b) + m_a / (m_b * e + m_a)))
    return float(quad(slowness, phi_to, phi_from, epsabs=0, epsrel=1e-11, limit=200)[0])


def laplace_lifetime(beta, phi):
    """The leading term e^{β(1 - cos φ)} / (2 β sin² φ) of ``dirac_merge_time(β, φ, ·)``, equal masses."""
    return np.exp(beta * (1 - np.cos(phi))) / (2 * beta * np.sin(phi) ** 2)


def observables(groups, centres, eps):
    """observe(x) for the solver: the angles between the groups' mean directions (pairs a < b), then
    min_i <x_i, w_{q(i)}> - (1 - 2ε) (negative once a token has left its doubled cap)."""
    pairs = [(a, b) for a in range(len(groups)) for b in range(a + 1, len(groups))]

    def observe(x):
        means = mf.normalise(np.stack([x[g].mean(axis=0) for g in groups]))
        angles = [np.arccos(np.clip(means[a] @ means[b], -1, 1)) for a, b in pairs]
        inside = min(float(np.min(x[g] @ centres[q])) for q, g in enumerate(groups)) - (1 - 2 * eps)
        return np.array(angles + [inside])
    return pairs, observe


def crossing(t, values, level):
    """First time the sampled values fall to ``level`` (linear interpolation); inf if they never do."""
    below = np.flatnonzero(values <= level)
    if below.size == 0:
        return np.inf
    k = below[0]
    if k == 0:
        return float(t[0])
    return float(t[k - 1] + (t[k] - t[k - 1]) * (values[k - 1] - level) / (values[k - 1] - values[k]))


def run_caps(beta, angles, seed, T, outputs=2000, model=mf.SA):
    """``model(beta)`` (SA) from caps at ``angles``: (t, angles between the groups' means (m, pairs), cap
    margin (m,), pairs)."""
    x0, centres = caps_start(angles, PER_CAP, EPS, seed)
    groups = [np.arange(q * PER_CAP, (q + 1) * PER_CAP) for q in range(len(angles))]
    pairs, observe = observables(groups, centres, EPS)
    t = np.concatenate([np.linspace(0, T_COLLAPSE, 201), np.linspace(T_COLLAPSE, T, outputs)[1:]])
    sol = particles.solve(model(beta), x0, t, method="adaptive", rtol=1e-9, atol=1e-12, observe=observe,
                          energy=False)
    return t, sol.observed[:, :-1], sol.observed[:, -1], pairs


def theorem_t2(beta, gap_angle, n, eps):
    """(T_2 = (ε/n) e^{(1-α)β}, γ = 1 - α - 8ε - log(2n²/ε)/β) for caps of centres φ apart, α the
    largest inner product between the caps (centres φ apart, angular radius arccos(1 - ε))."""
    alpha = np.cos(max(gap_angle - 2 * np.arccos(1 - eps), 0.0))
    return (eps / n) * np.exp((1 - alpha) * beta), 1 - alpha - 8 * eps - np.log(2 * n * n / eps) / beta


def two_cap_runs(gaps, products, seed=0, model=mf.SA):
    """Per gap g: the β with β g in ``products``; each run's measured and predicted (SA) lifetimes, the
    runs made with ``model(β)``."""
    rows = []
    for g in gaps:
        phi0 = np.arccos(1 - g)
        for p in products:
            beta = p / g
            T = 1.3 * dirac_merge_time(beta, phi0, phi0 / 2) + 2 * T_COLLAPSE
            t, ang, margin, _ = run_caps(beta, [0.0, phi0], seed, T, model=model)
            phi_c = float(np.interp(T_COLLAPSE, t, ang[:, 0]))
            target = ang[0, 0] / 2
            measured = crossing(t, ang[:, 0], target)
            predicted = T_COLLAPSE + dirac_merge_time(beta, phi_c, target)
            t2, gamma = theorem_t2(beta, phi0, 2 * PER_CAP, EPS)
            rows.append(dict(gap=g, beta=beta, phi0=phi0, phi_c=phi_c, lifetime=measured, predicted=predicted,
                             relative_error=measured / predicted - 1, laplace=laplace_lifetime(beta, phi_c),
                             exit_time=crossing(t, margin, 0.0), T2=t2, gamma=gamma, T=T))
            print(f"g={g:g} beta={beta:.3g}: L = {measured:.5g}, two-Dirac {predicted:.5g}, T_2 = {t2:.3g}")
    return rows


def lifetimes_match(rows, rtol=1e-3):
    """(largest |measured/predicted - 1| over ``rows``, whether it is <= rtol)."""
    worst = max(abs(r["relative_error"]) for r in rows)
    return worst, worst <= rtol


def lifetime_fit(rows):
    """Least squares log(β L) = a + c β and log L = a' + c' β over ``rows`` (one gap)."""
    b = np.array([r["beta"] for r in rows])
    L = np.array([r["lifetime"] for r in rows])
    c, a = np.polyfit(b, np.log(b * L), 1)
    c_plain, a_plain = np.polyfit(b, np.log(L), 1)
    return dict(rate_c=float(c), intercept=float(a), plain_rate=float(c_plain), plain_intercept=float(a_plain))


def main(argv=None):
    exp = Experiment("metastable_lifetimes", __doc__.splitlines()[0], argv)
    gaps = exp.size([0.6], [0.25, 0.4, 0.6])
    products = exp.size([8.0, 9.0], [8.0, 9.5, 11.0, 12.5])
    rows = two_cap_runs(gaps, products)
    worst, ok = lifetimes_match(rows)
    exp.check("two caps: every lifetime within 1e-3 of the two-Dirac quadrature", ok,
              worst_relative_error=worst, betas=[r["beta"] for r in rows])
    fits = {}
    for g in gaps:
        sel = [r for r in rows if r["gap"] == g]
        fit = lifetime_fit(sel)
        gap_c = float(np.mean([1 - np.cos(r["phi_c"]) for r in sel]))
        fit.update(gap=g, gap_after_collapse=gap_c, betas=[r["beta"] for r in sel])
        fits[f"{g:g}"] = fit
        exp.check(f"gap {g:g}: log(beta L) grows like (1 - cos phi_c) beta (slope within 3 %)",
                  abs(fit["rate_c"] / gap_c - 1) <= 0.03, slope=fit["rate_c"], gap=gap_c,
                  plain_slope_of_log_L=fit["plain_rate"])
    # three caps on a great circle: gaps phi_a < phi_b (and the rest of the circle)
    g3 = 0.4
    phi_a = np.arccos(1 - g3)
    phi_b = 1.3 * phi_a
    three = []
    for p in exp.size([8.0], [8.0, 10.0, 12.0]):
        beta = p / g3
        T = 1.3 * dirac_merge_time(beta, phi_a, phi_a / 2, 1 / 3, 1 / 3) + 2 * T_COLLAPSE
        t, ang, _, pairs = run_caps(beta, [0.0, phi_a, phi_a + phi_b], 1, T)
        times = [crossing(t, ang[:, j], ang[0, j] / 2) for j in range(len(pairs))]
        first = int(np.argmin(times))
        phi_c = float(np.interp(T_COLLAPSE, t, ang[:, 0]))
        predicted = T_COLLAPSE + dirac_merge_time(beta, phi_c, ang[0, 0] / 2, 1 / 3, 1 / 3)
        three.append(dict(beta=beta, phi_a=phi_a, phi_b=phi_b, first_pair=pairs[first], lifetime=times[first],
                          predicted=predicted, relative_error=times[first] / predicted - 1,
                          third_pull=float(np.exp(-beta * (np.cos(phi_a) - np.cos(phi_b))))))
        print(f"three caps beta={beta:.3g}: first merge {pairs[first]} at {times[first]:.5g}, "
              f"pair alone {predicted:.5g}")
    exp.check("three caps: the closest pair merges first", all(r["first_pair"] == (0, 1) for r in three),
              first_pairs=[r["first_pair"] for r in three])
    worst3 = max(abs(r["relative_error"]) for r in three)
    exp.check("three caps: the first merge within 3 % of the pair's two-Dirac time", worst3 <= 0.03,
              worst_relative_error=worst3, third_pull=[r["third_pull"] for r in three])

    results = dict(eps=EPS, per_cap=PER_CAP, t_collapse=T_COLLAPSE, two_caps=rows, fits=fits, three_caps=three)
    exp.finish(figure(results), results)


def figure(results):
    """Lifetimes against β per gap with the two-Dirac curve and the fitted law; log(βL) - log of the
    Laplace prefactor against βg (one line for every gap); the three-cap first merges."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(18, 8), constrained_layout=True)
    rows = results["two_caps"]
    ax = axes[0]
    for c, (key, fit) in enumerate(results["fits"].items()):
        sel = [r for r in rows if f"{r['gap']:g}" == key]
        b = np.array([r["beta"] for r in sel])
        ax.semilogy(b, [r["lifetime"] for r in sel], "o", ms=9, color=f"C{c}")
        grid = np.linspace(b.min() - 1, b.max() + 1, 60)
        ax.semilogy(grid, np.exp(fit["intercept"] + fit["rate_c"] * grid) / grid, "-", color=f"C{c}",
                    label=f"gap 1 − cos φ = {float(key):g}: fit log(βL) = a + cβ, c = {fit['rate_c']:.4f}")
        ax.semilogy(b, [r["T2"] for r in sel], "v", ms=7, mfc="none", color=f"C{c}",
                    label="theorem's T₂ = (ε/n) exp((1−α)β), a lower bound" if c == 0 else None)
    three = results["three_caps"]
    if three:
        ax.semilogy([r["beta"] for r in three], [r["lifetime"] for r in three], "k*", ms=14,
                    label="three caps: first merge (closest pair)")
    ax.set(xlabel="β", ylabel="lifetime L (time until the clusters' angle halves)",
           title="SA on S², two caps of 8 tokens (ε = 1e-3): lifetime against β")
    ax.legend(fontsize=10, loc="center right")
    ax = axes[1]
    for c, key in enumerate(results["fits"]):
        sel = [r for r in rows if f"{r['gap']:g}" == key]
        x = np.array([r["beta"] * (1 - np.cos(r["phi_c"])) for r in sel])
        y = np.array([r["lifetime"] / r["predicted"] for r in sel])
        z = np.array([r["lifetime"] / r["laplace"] for r in sel])
        ax.plot(x, y, "o-", ms=9, color=f"C{c}", label=f"gap {float(key):g}: measured / two-Dirac quadrature "
                                                       f"(max |error| {np.max(np.abs(y - 1)):.1e})")
        ax.plot(x, z, "s--", ms=7, mfc="none", color=f"C{c}",
                label=f"gap {float(key):g}: measured / (exp(βg) / (2β sin²φ))  (Laplace)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(xlabel="β (1 − cos φ_c)", ylabel="measured lifetime / prediction",
           title="against the two-Dirac reduction (exact) and its large-β asymptote")
    ax.legend(fontsize=10, loc="upper right")
    for a in axes:
        a.title.set_fontsize(12)
    return fig


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
