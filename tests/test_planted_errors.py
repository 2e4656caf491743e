"""Every strengthened validation check fails on a deliberately broken input (the error planted), and
passes on the correct one: high_dimension, cone_collapse, metastability, metastable_lifetimes, landscape,
metastability_pde."""
import numpy as np

import meanfield as mf
from meanfield.cli import figures
from meanfield import landscape as L


def test_high_dimension_mean_check_sees_a_two_percent_error_in_the_dynamics():
    hd = figures.load_script("high_dimension")
    dims, t = [32, 512, 8192], np.linspace(0.0, 4.0, 41)
    right = [hd.mean_deviation(mf.USA(2.0), mf.USA(2.0), 16, d, 2, t, dt=0.05) for d in dims]
    planted = [hd.mean_deviation(mf.USA(2.04), mf.USA(2.0), 16, d, 2, t, dt=0.05) for d in dims]
    assert hd.second_order_slope(right, dims)[1]
    assert not hd.second_order_slope(planted, dims)[1]


def test_cone_collapse_rate_and_wendel_checks_fail_on_planted_errors():
    cc = figures.load_script("cone_collapse")
    local = 2.0 * np.exp(1.0)
    for beta, ok in ((1.0, True), (1.01, False)):       # the run's β 1 % off: the rate 1 % off
        rate = cc.collapse_run(mf.USA(beta), 8, 3, 10, 16.0, 0.1 / local)[3]
        assert bool(abs(rate / local - 1) <= cc.RATE_RTOL) is ok
    dims, samples = [7, 8, 9], 300
    freq = cc.wendel_frequencies(16, dims, samples, np.random.default_rng(7))
    assert cc.wendel_agreement(freq, np.array([cc.wendel(16, d) for d in dims]), samples)[2]
    # the off-by-one slip Σ_{k<=d} C(n-1, k) is Wendel's formula at d + 1
    assert not cc.wendel_agreement(freq, np.array([cc.wendel(16, d + 1) for d in dims]), samples)[2]
    assert cc.testable_dims(32, 1000, range(2, 33)) == list(range(10, 23))


def test_metastability_rise_with_beta_is_not_passed_by_censored_runs():
    meta = figures.load_script("metastability")
    assert meta.rises_with_beta([2, 4, 8], [100.0, 900.0, np.inf])
    assert meta.rises_with_beta([2, 4, 8], [np.inf, np.inf, np.inf]) is None      # nothing to compare
    assert not meta.rises_with_beta([2, 4, 8], [900.0, 100.0, np.inf])             # planted: falls
    assert not meta.rises_with_beta([2, 4, 8], [100.0, np.inf, 900.0])            # planted: out of order


def test_lifetimes_check_sees_a_one_percent_error_in_beta():
    ml = figures.load_script("metastable_lifetimes")
    right = ml.two_cap_runs([0.6], [7.0])
    planted = ml.two_cap_runs([0.6], [7.0], model=lambda beta: mf.SA(1.01 * beta))
    assert ml.lifetimes_match(right)[1] and not ml.lifetimes_match(planted)[1]
    assert abs(planted[0]["relative_error"]) > 0.03


def test_pde_lifetime_checks_see_a_one_percent_error_in_beta():
    mp = figures.load_script("metastability_pde")
    betas = [3.0, 3.5, 4.0, 4.5]
    right = mp.lifetime_runs(betas)
    planted = mp.lifetime_runs(betas, pde_model=lambda beta: mf.SA(1.01 * beta))
    assert mp.lifetimes_agree(right)[1] and not mp.lifetimes_agree(planted)[1]
    fit = {k: mp.law_fit(betas, [r[k] for r in right]) for k in ("pde", "particles")}
    assert mp.intervals_overlap(fit["pde"], fit["particles"])
    assert not mp.intervals_overlap(mp.law_fit(betas, [r["pde"] for r in planted]), fit["particles"])


def test_cluster_newton_finds_what_newton_on_all_angles_misses_at_large_beta():
    cps = L.critical_points(5, 30.0, random_starts=20, cluster_starts=2)
    assert len(cps) == 7
    only = [cp.family.split(" gaps")[0] for cp in cps if cp.info["found_by"] == {"clusters"}]
    assert sorted(only) == ["3 clusters x2,2,1", "3 clusters x3,1,1"]
    for cp in cps:
        assert L._residual(cp.theta, 30.0) <= 1e-10
    # the continuation check compares sets: a search that misses one point fails it
    lm = figures.load_script("landscape")
    multi = [cp.theta for cp in cps if cp.family != "consensus"]
    lasted, lost = lm.continued_set([L.continuation(theta, [30.0])[0][0] for theta in multi], [30.0, 31.0, 30.0])
    assert not lost and lm.same_sets([p[-1] for p in lasted], multi)
    assert not lm.same_sets([p[-1] for p in lasted], multi[1:])
