"""Open problem 1 (paper §5): on the torus (S^1)^n, is every critical point of E_β but consensus a strict saddle?

For n = 2..8 and β on a grid of [0.1, 30], ``meanfield.landscape.critical_points`` runs Newton's method
on ∇E_β from random starts and from regular k-gons carrying every composition of n, merges duplicates up
to rotation and permutation, and classifies each critical point by the Hessian spectrum on 1^⊥
(computed blockwise over clusters of coinciding tokens, so the small inter-cluster eigenvalues,
~e^{β cos φ}, are resolved next to the intra-cluster ones, ~e^β).

Reported: every critical point that is not a strict saddle besides the global maxima (expected: none),
and per family of strict saddles (the multiplicity pattern of the clusters) the smallest positive
eigenvalue of the Hessian on 1^⊥ (the weakest escape direction) at each β, and its minimum over the scan.

Checks: the consensus is found for every (n, β) and is the only maximum; no degenerate critical point;
the regular n-gon is found and its spectrum equals the circulant formula
λ_p = (1/n²) Σ_{j=1}^{n-1} h(2πj/n)(cos(2πpj/n) - 1).
"""
import numpy as np

from meanfield import landscape as L
from meanfield.figures import Experiment

BETAS = [0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0]


def _pattern(family):
    """The family name without its gap values: 'regular 3-gon', '4 clusters x2,1,1,1', ..."""
    return family.split(" gaps")[0]


def _circulant(n, beta):
    u = 2 * np.pi * np.arange(1, n) / n
    h = (np.cos(u) - beta * np.sin(u) ** 2) * np.exp(beta * np.cos(u))
    return np.sort([h @ (np.cos(p * u) - 1) / n ** 2 for p in range(1, n)])


def main(argv=None):
    exp = Experiment("landscape", __doc__.splitlines()[0], argv)
    ns = exp.size([2, 3, 4, 5], list(range(2, 9)))
    betas = exp.size([0.1, 2.0, 30.0], BETAS)
    starts = exp.size(30, 80)
    records, exceptions, families = [], [], {}
    count = np.zeros((len(ns), len(betas)), dtype=int)
    polygon_err = 0.0
    for a, n in enumerate(ns):
        for b, beta in enumerate(betas):
            cps = L.critical_points(n, beta, random_starts=starts, seed=100 * n + b)
            count[a, b] = len(cps)
            maxima = [cp for cp in cps if cp.kind == "maximum"]
            exp.check(f"n={n}, beta={beta:g}: the consensus is found and is the only maximum",
                      len(maxima) == 1 and maxima[0].family == "consensus", maxima=[cp.family for cp in maxima])
            polygon = [cp for cp in cps if cp.family == f"regular {n}-gon"]
            if polygon:
                ref = _circulant(n, beta)
                polygon_err = max(polygon_err, float(np.max(np.abs(polygon[0].eigenvalues - ref))
                                                     / np.max(np.abs(ref))))
            exp.check(f"n={n}, beta={beta:g}: the regular {n}-gon is found", bool(polygon))
            for cp in cps:
                rec = dict(n=n, beta=beta, family=cp.family, kind=cp.kind, energy=cp.energy, hits=cp.hits,
                           residual=cp.residual, eigenvalues=cp.eigenvalues, theta=cp.theta)
                records.append(rec)
                if cp.kind != "strict saddle" and cp.family != "consensus":
                    exceptions.append(rec)
                if cp.kind == "strict saddle":
                    fam = families.setdefault(f"n={n}: {_pattern(cp.family)}", dict(n=n, by_beta={}))
                    lam = cp.smallest_positive_eigenvalue
                    fam["by_beta"][beta] = min(fam["by_beta"].get(beta, np.inf), lam)
            print(f"n={n} beta={beta:g}: {len(cps)} critical points")
    exp.check("no critical point other than the consensus is a maximum or degenerate", not exceptions,
              exceptions=[f"n={r['n']} beta={r['beta']} {r['family']} ({r['kind']})" for r in exceptions])
    exp.check("regular n-gon spectra equal the circulant formula", polygon_err < 1e-8, max_relative_error=polygon_err)

    for fam in families.values():
        fam["betas"] = sorted(fam["by_beta"])
        fam["smallest_positive_by_beta"] = [fam["by_beta"][beta] for beta in fam["betas"]]
        fam["smallest_positive"] = min(fam["smallest_positive_by_beta"])
        del fam["by_beta"]
    weakest = min(families, key=lambda k: families[k]["smallest_positive"])
    print(f"weakest escape direction: {weakest}, smallest positive eigenvalue "
          f"{families[weakest]['smallest_positive']:.3g}")

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(15, 6), constrained_layout=True)
    ax = axes[0]
    grid = np.geomspace(min(betas), max(betas), 200)
    for fam in sorted(families.values(), key=lambda f: -f["n"]):       # large n first
        n = fam["n"]
        ax.plot(fam["betas"], fam["smallest_positive_by_beta"], "o-", ms=2 + (9 - n), lw=0.6, alpha=0.6,
                color=plt.cm.viridis((n - 2) / 6))
    for n in ns:
        ax.plot([], [], "o", color=plt.cm.viridis((n - 2) / 6), label=f"n = {n}")
    for n in (min(ns), max(ns)):
        ax.plot(grid, np.exp(-grid) / n, "k--" if n == min(ns) else "k:", lw=1,
                label=f"e^(-β)/{n}: two antipodal clusters, n = {n}")
    ax.set(xscale="log", yscale="log", xlabel="β", ylabel="smallest positive eigenvalue of H on 1^⊥",
           title="Smallest positive Hessian eigenvalue per family of strict saddles\n"
                 "(one line per multiplicity pattern, minimum over the critical points of the family)")
    ax.legend(fontsize=8)
    ax = axes[1]
    im = ax.imshow(count, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(betas)), [f"{b:g}" for b in betas])
    ax.set_yticks(range(len(ns)), [str(n) for n in ns])
    for a in range(len(ns)):
        for b in range(len(betas)):
            ax.text(b, a, str(count[a, b]), ha="center", va="center", color="w", fontsize=8)
    ax.set(xlabel="β", ylabel="n", title="Critical points found (up to rotation and permutation)")
    fig.colorbar(im, ax=ax, label="number of critical points")
    exp.finish(fig, dict(ns=ns, betas=betas, random_starts=starts, counts=count, exceptions=exceptions,
                         families=families, polygon_spectrum_error=polygon_err, critical_points=records))


if __name__ == "__main__":
    import sys
    from meanfield.figures import run_script
    sys.exit(run_script(__file__))
