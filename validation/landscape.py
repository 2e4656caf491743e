"""Open problem 1 (paper §5): on the torus (S^1)^n, is every critical point of E_β but consensus a strict saddle?

For n = 2..8 and β on a grid of [0.1, 30], ``meanfield.landscape.critical_points`` runs Newton's method
on ∇E_β from random starts and from regular k-gons carrying every composition of n, merges duplicates up
to rotation and permutation, and classifies each critical point by the Hessian spectrum on 1^⊥
(computed blockwise over clusters of coinciding tokens, so the small inter-cluster eigenvalues,
~e^{β cos φ}, are resolved next to the intra-cluster ones, ~e^β).

Reported: every critical point that is not a strict saddle besides the global maxima (expected: none),
and per family of strict saddles (the multiplicity pattern of the clusters) the smallest positive
eigenvalue of the Hessian on 1^⊥ (the weakest escape direction) at each β, and its minimum over the scan.

Large β.  Newton on all n angles loses critical points as β grows (n = 8: 35 at β = 10, 28 at
β = 30; n = 7: 19 → 14; n = 5: 7 → 5): at a configuration of clusters the curvature inside a cluster
(~e^β) and between clusters (~e^{β cos φ}) share no floating-point scale, and least squares drops
the second.  Two further methods find the rest: (i) ``cluster_newton`` on the k cluster angles of
every multiplicity pattern (each equation scaled by its own size, so the system stays well
conditioned), from the regular k-gon and random sorted angles; (ii) continuation in β: every
critical point found at β = 10 followed to β = 30 (step 1) and on to β = 60.  Each critical
point records the starts that reached it (``found_by``: random, symmetric, clusters); the counts
per method are in the figure and the JSON.

Checks: the consensus is found for every (n, β) and is the only maximum; no degenerate critical point;
the regular n-gon is found and its spectrum equals the circulant formula
λ_p = (1/n²) Σ_{j=1}^{n-1} h(2πj/n)(cos(2πpj/n) - 1); every critical point at β = 10 continues to
β = 30 without a fold or a merger, and the continued branches are exactly the critical points the
searches find at β = 30 (a bijection up to rotation and permutation).
"""
import numpy as np

from meanfield import landscape as L
from meanfield.cli.figures import Experiment

BETAS = [0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 12.0, 20.0, 30.0]
CONTINUATION = (10.0, 30.0, 60.0)      # from, checked at, followed to


def _pattern(family):
    """The family name without its gap values: 'regular 3-gon', '4 clusters x2,1,1,1', ..."""
    return family.split(" gaps")[0]


def _circulant(n, beta):
    u = 2 * np.pi * np.arange(1, n) / n
    h = (np.cos(u) - beta * np.sin(u) ** 2) * np.exp(beta * np.cos(u))
    return np.sort([h @ (np.cos(p * u) - 1) / n ** 2 for p in range(1, n)])


def continued_set(start_points, betas):
    """Follow each critical point of ``start_points`` (token angles at β = betas[0]) along ``betas``:
    (angles at every β of ``betas`` of each branch that lasted, [(index, β lost) of those that did not])."""
    lasted, lost = [], []
    for j, theta in enumerate(start_points):
        path, where = L.continuation(theta, betas)
        if where is None:
            lasted.append(path)
        else:
            lost.append((j, where))
    return lasted, lost


def same_sets(a, b, tol=1e-6):
    """Whether two lists of critical points (token angles) are equal up to rotation, permutation and order."""
    unmatched = list(b)
    for theta in a:
        k = next((j for j, other in enumerate(unmatched) if L._same_up_to_symmetry(theta, other, tol)), None)
        if k is None:
            return False
        unmatched.pop(k)
    return not unmatched


def main(argv=None):
    exp = Experiment("landscape", __doc__.splitlines()[0], argv)
    ns = exp.size([2, 3, 4, 5], list(range(2, 9)))
    betas = exp.size([0.1, 10.0, 30.0], BETAS)
    starts = exp.size(30, 80)
    records, exceptions, families = [], [], {}
    count = np.zeros((len(ns), len(betas)), dtype=int)
    newton = np.zeros_like(count)           # of which found by Newton on all n angles
    found = {}
    polygon_err = 0.0
    for a, n in enumerate(ns):
        for b, beta in enumerate(betas):
            cps = L.critical_points(n, beta, random_starts=starts, seed=100 * n + b, cluster_starts=3)
            count[a, b] = len(cps)
            newton[a, b] = sum(bool(cp.info["found_by"] & {"random", "symmetric"}) for cp in cps)
            found[n, beta] = cps
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
                           residual=cp.residual, eigenvalues=cp.eigenvalues, theta=cp.theta,
                           found_by=sorted(cp.info["found_by"]))
                records.append(rec)
                if cp.kind != "strict saddle" and cp.family != "consensus":
                    exceptions.append(rec)
                if cp.kind == "strict saddle":
                    fam = families.setdefault(f"n={n}: {_pattern(cp.family)}", dict(n=n, by_beta={}))
                    lam = cp.smallest_positive_eigenvalue
                    fam["by_beta"][beta] = min(fam["by_beta"].get(beta, np.inf), lam)
            print(f"n={n} beta={beta:g}: {len(cps)} critical points ({newton[a, b]} by Newton on all angles)")
    exp.check("no critical point other than the consensus is a maximum or degenerate", not exceptions,
              exceptions=[f"n={r['n']} beta={r['beta']} {r['family']} ({r['kind']})" for r in exceptions])
    exp.check("regular n-gon spectra equal the circulant formula", polygon_err < 1e-8, max_relative_error=polygon_err)

    b0, b1, b2 = CONTINUATION
    path_betas = np.concatenate([np.arange(b0, b1 + 0.5), np.arange(b1 + 2, b2 + 1, 2)])
    continued = {}
    for n in ns:
        if (n, b0) not in found or (n, b1) not in found:
            continue
        multi = [cp.theta for cp in found[n, b0] if cp.family != "consensus"]
        lasted, lost = continued_set(multi, path_betas)
        at_b1 = [path[int(np.flatnonzero(path_betas == b1)[0])] for path in lasted]
        direct = [cp.theta for cp in found[n, b1] if cp.family != "consensus"]
        match = same_sets(at_b1, direct)
        continued[n] = dict(start=len(multi), lasted_to=float(path_betas[-1]), lasted=len(lasted), lost=lost,
                            found_at_check=len(direct), same_as_search=match,
                            energies_at_end=sorted(L.energy(p[-1], path_betas[-1]) for p in lasted))
        exp.check(f"n={n}: the {len(multi)} critical points at beta={b0:g} continue to beta={b1:g} and are the "
                  f"{len(direct)} the searches find there", not [w for _, w in lost if w <= b1] and match,
                  lost=lost, continued=len(at_b1), found=len(direct))
        print(f"n={n}: {len(multi)} branches from beta={b0:g}: {len(lasted)} reach beta={path_betas[-1]:g}, "
              f"lost {lost}; same set as the search at {b1:g}: {match}")

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
            extra = count[a, b] - newton[a, b]
            ax.text(b, a, f"{count[a, b]}" + (f"\n(+{extra})" if extra else ""), ha="center", va="center",
                    color="k" if count[a, b] > 0.6 * count.max() else "w", fontsize=9)
    ax.set(xlabel="β", ylabel="n", title="Critical points found (up to rotation and permutation);\n"
                                          "(+k): k found only by cluster Newton")
    fig.colorbar(im, ax=ax, label="number of critical points")
    exp.finish(fig, dict(ns=ns, betas=betas, random_starts=starts, counts=count, counts_newton_all_angles=newton,
                         continuation=continued, continuation_betas=path_betas, exceptions=exceptions,
                         families=families, polygon_spectrum_error=polygon_err, critical_points=records))


if __name__ == "__main__":
    import sys
    from meanfield.cli.figures import run_script
    sys.exit(run_script(__file__))
