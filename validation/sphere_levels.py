"""Particles and the FV density converging to each other on S^2 as the icosphere is refined (3 -> 4 -> 5).

SA, β = 3, the degree-2 perturbed-uniform ρ_0 (``perturbed_uniform(3, degree=2)``), T = 10, one
stratified draw of n = 500 and n = 1000 tokens; the FV solution (first-order ``upwind`` flux, the
convergence study's) on icosphere levels 2, 3, 4, 5 (162 … 10 242 cells, mean cell width h halving
per level).  ``meanfield.convergence.study`` computes at t = 0, 5, 10

    W_p(μ^n_t, ρ^h_t)  and  W_p(ρ^h_t, ρ^{h/2}_t),   p = 1, 2,

all by the exact network simplex (``transport="emd"``; level 4 against level 5 is a 2562 × 10 242
problem, just above the size where ``"auto"`` would fall back to the sliced distance).

Checks (full size): at T both W_1 and W_2 between particles and density decrease through levels
3 -> 4 -> 5 for each n; W_1's observed order in h at T (least squares over levels 2–5, n = 1000)
is at least 0.5; the grids' self-distance W_1(ρ_h, ρ_{h/2}) decreases with h at every output time.
CI (tests/test_sampling.py) covers levels 2 -> 4 only: level 5 costs minutes.
--quick: levels 1, 2, 3, n = 200, 400, T = 5 (the same checks on those levels).
"""
import numpy as np

import meanfield as mf
from meanfield.convergence import observed_order, study
from meanfield.cli.figures import Experiment
from meanfield.measures import perturbed_uniform


def main(argv=None):
    exp = Experiment("sphere_levels", __doc__.splitlines()[0], argv)
    levels = exp.size([1, 2, 3], [2, 3, 4, 5])
    ns = exp.size([200, 400], [500, 1000])
    T = exp.size(5.0, 10.0)
    t = np.array([0.0, T / 2, T])
    result = study(mf.SA(3.0), perturbed_uniform(3, degree=2), t, ns, levels, geometry="sphere",
                   flux="upwind", transport="emd")
    fine = slice(-3, None)                       # the three finest levels (3, 4, 5 at full size)
    for i, n in enumerate(result.n):
        for p, w in ((1, result.w1), (2, result.w2)):
            values = w[-1, i, fine]
            exp.check(f"n = {n}: W_{p}(particles, density) at T decreases through levels "
                      f"{'->'.join(map(str, levels[fine]))}", np.all(np.diff(values) < 0), values=values)
    order = observed_order(result.h, result.w1[-1, -1])
    exp.check("W_1 order in h at T (n = max) >= 0.5", order >= 0.5, order=order)
    for k, tk in enumerate(t):
        exp.check(f"t = {tk:g}: W_1(rho_h, rho_h/2) decreases with h", np.all(np.diff(result.grid_w1[k]) < 0),
                  values=result.grid_w1[k])
    print(result.table())
    results = dict(levels=levels, **result.to_dict(), order_h_w1_T=order,
                   order_h_w2_T=observed_order(result.h, result.w2[-1, -1]))
    exp.finish(figure(results), results)


def figure(results):
    """``meanfield.convergence.figure`` of the stored study (``meanfield figures sphere_levels --replot``)."""
    from meanfield.convergence import ConvergenceStudy, figure
    return figure(ConvergenceStudy.from_dict(results))


if __name__ == "__main__":
    main()
