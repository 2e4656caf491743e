"""``compare(..., causal=True)``, ``meanfield compare --causal`` and the causal convergence study."""
import json
import os

import numpy as np
import pytest

import meanfield as mf
from meanfield.cli import compare as compare_cli, convergence as convergence_cli
from meanfield.compare.causal import CausalComparison, compare_causal, slice_density
from meanfield.convergence.causal import causal_study
from meanfield.transport.causal import binned_w1
from meanfield.cli.report import write_report
from meanfield.compare import Comparison, compare
from meanfield.solvers import causal


def rho0(s, theta):
    return 1 + 0.6 * np.cos(theta - 2 * np.pi * s) + 0.3 * np.sin(2 * theta)


@pytest.fixture(scope="module")
def small():
    return compare(mf.SA(3.0), rho0, [0.0, 0.5, 1.0], n=96, seeds=2, causal=True, slices=16, cells=32, bins=4)


def test_causal_compare_report(small, tmp_path):
    c = small
    assert isinstance(c, CausalComparison) and c.w1.shape == (3, 2) and c.grid_error.shape == (3,)
    assert np.all(np.isfinite(c.w1)) and np.all(c.w1 > 0) and np.all(c.w1 < 0.3)
    assert c.particles.x.shape == (3, 2, 96, 2) and c.density.rho.shape == (3, 16, 32)
    assert c.clusters_density.dtype.kind == "i" and c.clusters_particles.shape == (3, 2)
    assert np.isclose(c.floor, np.pi * 4 / (2 * 96))
    numbers = c.to_dict()
    assert "not a gradient flow" in numbers["energy"] and "energy_particles" not in numbers
    assert "not a gradient flow" in c.table() and "not a gradient flow" in c.explanation()
    paths = write_report(c, str(tmp_path / "r"), {"causal": True})
    assert sorted(os.path.basename(p) for p in paths) == ["complete.json", "density.npz", "particles.npz",
                                                           "report.json", "solution.png", "wasserstein.png"]
    for back in (Comparison.load(tmp_path / "r"), CausalComparison.load(tmp_path / "r" / "report.json")):
        assert isinstance(back, CausalComparison) and np.array_equal(back.w1, c.w1)
        assert np.array_equal(back.density.rho, c.density.rho)
    c.save(tmp_path / "c.npz")
    assert np.array_equal(CausalComparison.load(tmp_path / "c.npz").w1, c.w1)


def test_causal_distance_against_pot_per_bin(small):
    """D from the bins' circle W_1 by an independent solver (POT's 1-D circle W_1 on atoms), per draw."""
    ot = pytest.importorskip("ot")
    c, k, B = small, -1, 4
    rho = c.density.rho[k]
    cells = (np.arange(rho.shape[1]) + 0.5) / rho.shape[1]
    for s in range(2):
        u = np.mod(mf.circle_angles(c.particles.x[k, s]), 2 * np.pi) / (2 * np.pi)
        total = 0.0
        for tokens, slab in zip(np.split(u, B), np.split(rho, B)):
            mass = slab.mean(axis=0)
            total += float(ot.wasserstein_circle(tokens, cells, np.full(tokens.size, 1 / tokens.size),
                                                 mass / mass.sum(), p=1)[0])
        assert abs(2 * np.pi * total / B - c.w1[k, s]) < 1e-10


def test_causal_compare_matches_the_parts(small):
    """The comparison's density is the solver's, and the grid error the binned distance to the coarse solve."""
    model = mf.SA(3.0, causal=True)
    fine = causal.solve(model, rho0, small.t, slices=16, cells=32)
    coarse = causal.solve(model, rho0, small.t, slices=8, cells=16)
    assert np.array_equal(fine.rho, small.density.rho)
    assert np.allclose([binned_w1(fine, coarse, k, 4) for k in range(3)], small.grid_error, atol=1e-14)


def test_s_independent_start_is_the_circle_pde():
    """A start that does not depend on s: every prefix average is the slice itself, so every slice of
    the causal PDE is the circle PDE's solution (same flux, same step)."""
    f = slice_density(lambda x: 1 + 0.5 * x[:, 0] + 0.2 * x[:, 1])
    sol = causal.solve(mf.SA(2.0), f, [0, 1.0], slices=4, cells=64)
    assert np.abs(sol.rho[-1] - sol.rho[-1][:1]).max() < 1e-13
    circ = mf.circle.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 0] + 0.2 * x[:, 1], [0, 1.0], cells=64,
                           dt=sol.info["dt"])
    assert np.abs(sol.rho[-1, 0] - circ.rho[-1]).max() < 1e-10


@pytest.mark.parametrize("kwargs, match", [
    (dict(geometry="sphere"), "geometry must be 'circle'"),
    (dict(flux="upwind"), "one flux"),
    (dict(sampling="quantile"), "sampling"),
    (dict(n=90), "multiple of bins"),
    (dict(slices=10), "multiple of bins"),
    (dict(model=mf.SA(2.0, Q=np.eye(3))), "R\\^2"),
    (dict(finest=6, bulk=4), "finest, bulk set the cells on S\\^2"),
])
def test_causal_compare_refusals(kwargs, match):
    options = dict(model=mf.SA(2.0), n=96, slices=16, cells=32, bins=4) | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        compare(options.pop("model"), rho0, [0, 1.0], causal=True, **options)


def test_cli_causal(tmp_path, capsys):
    out = str(tmp_path / "rep")
    assert compare_cli.main(["--causal", "--n", "64", "--seeds", "1", "--T", "0.5", "--outputs", "2", "--slices",
                             "8", "--cells", "32", "--bins", "4", "--out", out, "--quiet"]) == 0
    assert "not a gradient flow" in capsys.readouterr().out
    with open(os.path.join(out, "report.json")) as fh:
        numbers = json.load(fh)
    assert numbers["info"]["causal"] and numbers["info"]["grid"] == dict(slices=8, cells=32)
    for bad in (["--geometry", "sphere"], ["--n", "100"], ["--sampling", "weighted"], ["--flux", "muscl"],
                ["--slices", "12", "--bins", "8"], ["--bins", "0"]):
        with pytest.raises(SystemExit) as exc:
            compare_cli.options(["--causal", *bad, "--out", str(tmp_path / "x")])
        assert exc.value.code == 2
    with pytest.raises(SystemExit):                     # --slices and --bins belong to --causal
        compare_cli.options(["--slices", "32", "--out", str(tmp_path / "x")])


def test_causal_study_orders_in_n_and_cells():
    """Before clustering (SA β = 3, T = 1/2): D decreases in n (finest grid) and in cells (most tokens);
    observed orders (measured 0.7 in n, 0.6 in h at n = 1024, 1.05 for the grids alone) are positive,
    and the grids' self-convergence is first order (the cell-centre atoms are h/4 from a smooth ρ)."""
    r = causal_study(mf.SA(3.0), rho0, [0.0, 0.5], [64, 256, 1024], [(8, 32), (16, 64), (32, 128)], bins=4)
    assert not r.clustered.any()
    orders = r.orders(1)
    assert np.all(np.diff(r.w1[-1, :, -1]) < 0) and np.all(np.diff(r.w1[-1, -1, :]) < 0)
    assert orders["n"][-1] > 0.5 and orders["h"][-1] > 0.4 and orders["grid"][-1] > 0.9, orders
    assert "W2" not in r.table() and np.isnan(r.w2).all()


def test_convergence_cli_causal_options(tmp_path):
    opts = convergence_cli.options(["--causal", "--out", str(tmp_path / "c")])
    assert opts["causal"] and opts["grids"] == convergence_cli.CAUSAL_DEFAULTS["grids"]
    for bad in (["--geometry", "sphere"], ["--n", "102", "204"], ["--grids", "64", "100"], ["--sampling", "quantile"]):
        with pytest.raises(SystemExit) as exc:
            convergence_cli.options(["--causal", *bad, "--out", str(tmp_path / "x")])
        assert exc.value.code == 2


def test_causal_model_without_causal_flag_is_pointed_to_it():
    with pytest.raises(ValueError, match="causal=True"):
        compare(mf.SA(2.0, causal=True), lambda x: 1 + 0 * x[:, 0], [0, 1.0], n=64)


def test_compare_causal_refuses_foreign_density():
    with pytest.raises(ValueError, match="CausalDensitySolution"):
        compare_causal(mf.SA(2.0), rho0, [0, 1.0], n=64, slices=8, cells=32, bins=4, density=object())


def test_doctests_of_the_causal_comparison_modules():
    import doctest

    from meanfield.compare import causal as causal_compare
    from meanfield.convergence import causal as causal_convergence
    from meanfield.transport import causal as causal_transport
    for module in (causal_compare, causal_convergence, causal_transport):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_cli_causal_prints_its_table_and_explanation(tmp_path, capsys):
    assert compare_cli.main(["--causal", "--n", "64", "--seeds", "2", "--T", "0.5", "--outputs", "2", "--slices",
                             "8", "--cells", "32", "--bins", "4", "--out", str(tmp_path / "rep")]) == 0
    printed = capsys.readouterr().out
    assert "D = mean_b W1" in printed                      # the table's header
    assert "grid error estimate" in printed and "final D =" in printed     # the explanation, the final line
