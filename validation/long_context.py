"""Long contexts: one attention layer on an equiangular configuration at β_n = γ log n (arXiv:2512.01868).

n tokens with all pairwise inner products ρ, one softmax attention layer with V = I followed by the
normalisation x_i <- y_i/|y_i|: by symmetry every output pair has the same cosine, given in closed
form by ``theory.equiangular_layer`` (diagonal weight a = e^β/Z, off-diagonal b = e^{βρ}/Z).  At
β_n = γ log n the diagonal weight tends to L = 0, 1/2, 1 as c = γ(1 - ρ) <, =, > 1 and the output
cosine to ρ/(ρ + (1 - ρ)L²) (``theory.long_context_limit``): collapse to cosine 1, an intermediate
value, or the identity.

Simulation: explicit tokens x_j = √ρ e_0 + √(1-ρ) e_j in R^{n+1}.  Up to n = 1000 the whole layer
runs through the package's BLAS-tiled softmax engine (``gemm.softmax_sums``) and the cosines of all
pairs are measured; beyond, the outputs of tokens 1 and 2 are formed from the same vectors stored
sparsely (their n scores, a log-sum-exp softmax, the output coordinates), O(n) each.

Checks: simulated cosines and weights equal the closed form (relative 1e-12) for every n and regime;
all output pairs share one cosine (dense runs); a(n) approaches L at the predicted power of n
(exponents c - 1, -1, 1 - c for |a - L|, fitted over the two largest n, within 0.05); the output
cosine at the largest n is within 10 |a - L| of the limit.
"""
import numpy as np
from scipy.special import logsumexp

from meanfield.cli.figures import Experiment
from meanfield.solvers.kernels import gemm
from meanfield.theory import equiangular_layer, long_context_limit

RHO = 0.5
GAMMAS = (1.0, 2.0, 4.0)     # c = γ(1 - ρ) = 0.5, 1, 2
DENSE_MAX = 1000


def tokens(rho, n):
    """x_j = √ρ e_0 + √(1-ρ) e_j, j = 1..n, as rows of an (n, n+1) array."""
    x = np.zeros((n, n + 1))
    x[:, 0] = np.sqrt(rho)
    x[np.arange(n), np.arange(1, n + 1)] = np.sqrt(1 - rho)
    return x


def dense_layer(rho, beta, n):
    """(a, cosines of all output pairs) from the explicit tokens through ``gemm.softmax_sums``."""
    x = tokens(rho, n)
    y, _ = gemm.softmax_sums(beta * x[None], x[None], np.full((1, n), 1.0 / n), True)
    y = y[0] / np.linalg.norm(y[0], axis=1, keepdims=True)
    gram = y @ y.T
    a = float(np.exp(beta - logsumexp(beta * (x[0] @ x.T))))
    return a, gram[np.triu_indices(n, 1)]


def sparse_layer(rho, beta, n):
    """(a, cosine of the outputs of tokens 1 and 2) from the same tokens stored sparsely:
    <x_i, x_j> = √ρ √ρ + (1-ρ)[i = j], y_i = (√ρ Σ_j A_ij) e_0 + √(1-ρ) Σ_j A_ij e_j."""
    out = []
    for i in (0, 1):
        scores = np.full(n, np.sqrt(rho) * np.sqrt(rho))
        scores[i] += np.sqrt(1 - rho) * np.sqrt(1 - rho)
        A = np.exp(beta * scores - logsumexp(beta * scores))
        out.append((np.sqrt(rho) * A.sum(), np.sqrt(1 - rho) * A))
    (c1, v1), (c2, v2) = out
    cosine = (c1 * c2 + v1 @ v2) / np.sqrt((c1 * c1 + v1 @ v1) * (c2 * c2 + v2 @ v2))
    return float(v1[0] / np.sqrt(1 - rho)), cosine


def main(argv=None):
    exp = Experiment("long_context", __doc__.splitlines()[0], argv)
    sizes = exp.size([100, 1000, 10 ** 4, 10 ** 5], [100, 1000, 10 ** 4, 10 ** 5, 10 ** 6])
    curve = np.unique(np.geomspace(2, 1e12, 300).astype(np.int64))
    results = {}
    for gamma in GAMMAS:
        c = gamma * (1 - RHO)
        L, cos_limit = long_context_limit(RHO, gamma)
        label = f"gamma={gamma:g} (c = {c:g})"
        sim_a, sim_cos, spread = [], [], 0.0
        for n in sizes:
            beta = gamma * np.log(n)
            if n <= DENSE_MAX:
                a, pairs = dense_layer(RHO, beta, n)
                spread = max(spread, float(pairs.max() - pairs.min()))
                cos = float(pairs.mean())
            else:
                a, cos = sparse_layer(RHO, beta, n)
            sim_a.append(a)
            sim_cos.append(cos)
        a_closed, cos_closed = (np.asarray(v) for v in equiangular_layer(RHO, gamma * np.log(sizes), sizes))
        err = float(max(np.max(np.abs(np.array(sim_a) / a_closed - 1)),
                        np.max(np.abs(np.array(sim_cos) / cos_closed - 1))))
        exp.check(f"{label}: simulated layer = closed form (relative)", err <= 1e-12, max_relative_error=err)
        exp.check(f"{label}: every output pair has one cosine (dense runs)", spread <= 1e-12, spread=spread)
        distance = np.abs(np.array(sim_a) - L)
        predicted = c - 1 if c < 1 else -1.0 if c == 1 else 1 - c
        observed = float(np.log(distance[-1] / distance[-2]) / np.log(sizes[-1] / sizes[-2]))
        exp.check(f"{label}: |a(n) - L| ~ n^{predicted:g} (L = {L:g})", abs(observed - predicted) <= 0.05,
                  observed_exponent=observed, predicted_exponent=predicted)
        gap = abs(sim_cos[-1] - cos_limit)
        exp.check(f"{label}: output cosine at n = {sizes[-1]:g} near its limit {cos_limit:.4g}",
                  gap <= 10 * distance[-1], cosine=sim_cos[-1], limit=cos_limit, a_minus_L=float(distance[-1]))
        a_curve, cos_curve = equiangular_layer(RHO, gamma * np.log(curve), curve)
        results[label] = dict(gamma=gamma, c=c, L=L, cosine_limit=cos_limit, n=sizes, a=sim_a, cosine=sim_cos,
                              closed_a=a_closed, closed_cosine=cos_closed, observed_exponent=observed,
                              predicted_exponent=predicted, curve_n=curve, curve_a=a_curve, curve_cosine=cos_curve)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(15, 6), constrained_layout=True)
    for k, (label, r) in enumerate(results.items()):
        col = f"C{k}"
        axes[0].semilogx(r["curve_n"], r["curve_a"], color=col, lw=2, label=f"closed form, {label}")
        axes[0].semilogx(r["n"], r["a"], "o", color=col, ms=9, mfc="none")
        axes[0].axhline(r["L"], color=col, ls=":", lw=1.5)
        axes[1].semilogx(r["curve_n"], r["curve_cosine"], color=col, lw=2, label=f"closed form, {label}")
        axes[1].semilogx(r["n"], r["cosine"], "o", color=col, ms=9, mfc="none")
        axes[1].axhline(r["cosine_limit"], color=col, ls=":", lw=1.5)
    axes[0].plot([], [], "ko", mfc="none", label="simulated layer (explicit tokens)")
    axes[0].plot([], [], "k:", label="limit L")
    axes[0].set(xlabel="context length n", ylabel="diagonal attention weight a",
                title=f"β_n = γ log n, ρ = {RHO}: a → 0, 1/2, 1")
    axes[1].plot([], [], "k:", label="limit ρ/(ρ + (1-ρ)L²)")
    axes[1].set(xlabel="context length n", ylabel="output cosine",
                title="one layer: collapse (c < 1), critical (c = 1), identity (c > 1)")
    for ax in axes:
        ax.legend(fontsize=10)
        ax.title.set_fontsize(13)
    exp.finish(fig, dict(rho=RHO, regimes=results))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
