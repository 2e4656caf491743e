"""One set of names: every solver's signature read with ``inspect``.

The first three parameters are (model, initial state, t_eval), positional; everything after them is
keyword-only (except the dimension ``d`` of ``zonal.solve``, positional in the API contract), and
every common keyword has one kind and one default wherever a solver has it; the analysis functions
that run solvers (compare, convergence) share those keywords' meanings and defaults."""
import inspect

import pytest

from meanfield.budget import BUDGET
from meanfield.solvers import adaptive, adaptive_circle, causal, circle, contract, euclidean, hardmax, particles
from meanfield.solvers import sphere, zonal

DENSITY = {"circle": circle.solve, "sphere": sphere.solve, "adaptive": adaptive.solve,
           "adaptive_circle": adaptive_circle.solve, "zonal": zonal.solve, "causal": causal.solve}
PARTICLE = {"particles": particles.solve, "particles.solve_angles": particles.solve_angles,
            "euclidean": euclidean.solve, "hardmax": hardmax.solve}
SOLVERS = {**DENSITY, **PARTICLE}
POSITIONAL = {"zonal": ("d",)}          # the API contract: zonal.solve(model, f0, t_eval, d, cells=512)
STATES = ("rho0", "f0", "x0", "theta0")

# keyword: the default every solver that has it gives it (scheme: per family)
COMMON = {"dt": None, "progress": None, "checkpoint": None, "checkpoint_every": contract.CHECKPOINT_EVERY,
          "resume": False, "budget": BUDGET, "energy": True, "seed": None}
EVERYWHERE = ("scheme", "budget", "progress")   # keywords no solver may lack (but hardmax: no progress bar)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_first_three_positional_then_keyword_only(name):
    params = list(inspect.signature(SOLVERS[name]).parameters.values())
    assert [p.name for p in params[:3]] == ["model", params[1].name, "t_eval"] and params[1].name in STATES
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params[:3])
    extra = POSITIONAL.get(name, ())
    assert tuple(p.name for p in params[3:3 + len(extra)]) == extra
    for p in params[3 + len(extra):]:
        assert p.kind is p.KEYWORD_ONLY, f"{name}.solve: {p.name} should be keyword-only"


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_common_keywords_have_one_default(name):
    params = inspect.signature(SOLVERS[name]).parameters
    for key in EVERYWHERE:
        assert key in params or (name, key) == ("hardmax", "progress"), f"{name}.solve lacks {key}="
    for key, default in COMMON.items():
        if key in params:
            assert params[key].default == default, f"{name}.solve: {key}={params[key].default!r}, not {default!r}"
    scheme = contract.DENSITY_SCHEME if name in DENSITY else contract.PARTICLE_SCHEME
    assert params["scheme"].default == scheme


@pytest.mark.parametrize("name", sorted(PARTICLE))
def test_method_is_the_alias_of_scheme_in_the_particle_solvers(name):
    """``method=`` (the API contract's name in particles.solve) stays, keyword-only, default None."""
    method = inspect.signature(PARTICLE[name]).parameters["method"]
    assert method.kind is method.KEYWORD_ONLY and method.default is None


def test_the_density_solvers_share_their_numerical_keywords():
    """flux, cfl, summation, diffusion: one default wherever present."""
    seen = {}
    for name, solve in DENSITY.items():
        for key in ("flux", "cfl", "summation", "diffusion", "max_dt"):
            p = inspect.signature(solve).parameters.get(key)
            if p is not None:
                assert seen.setdefault(key, p.default) == p.default, f"{name}.solve: {key}"


def test_every_density_solver_takes_summation_and_diffusion():
    """Where a solver has no choice of summation or no diffusion term, the keyword is still there, and
    refuses what it cannot do (next test)."""
    for name, solve in DENSITY.items():
        params = inspect.signature(solve).parameters
        assert params["summation"].default == "auto" and params["diffusion"].default == 0.0, name


def test_no_diffusion_and_no_summation_choice_are_refused_by_name():
    import meanfield as mf
    with pytest.raises(ValueError, match="zonal.solve has no diffusion term"):
        zonal.solve(mf.SA(1.0), lambda th: 1 + 0 * th, [0.0, 0.1], 3, diffusion=0.1)
    with pytest.raises(ValueError, match="adaptive_circle.solve has no diffusion term"):
        adaptive_circle.solve(mf.SA(1.0), lambda x: 1 + 0 * x[:, 0], [0.0, 0.1], diffusion=0.1)
    with pytest.raises(ValueError, match="summation"):
        causal.solve(mf.SA(1.0), lambda s, th: 1 + 0 * th, [0.0, 0.1], summation="fast")


# the analysis functions that run solvers: the keywords they share with the solvers keep one meaning
# and default (progress, seed, transport, sampling); the time scheme of their particles is scheme=
ANALYSES = {"compare": "meanfield.compare:compare", "compare_causal": "meanfield.compare.causal:compare_causal",
            "study": "meanfield.convergence:study", "causal_study": "meanfield.convergence.causal:causal_study",
            "zonal_compare": "meanfield.compare.zonal:compare"}
SHARED = {"progress": None, "transport": "auto", "seed": 0}


def _analysis(name):
    import importlib
    module, function = ANALYSES[name].split(":")
    return getattr(importlib.import_module(module), function)


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_compare_and_convergence_share_their_keywords(name):
    params = inspect.signature(_analysis(name)).parameters
    assert [p for p in params][:3] == ["model", "f0" if name == "zonal_compare" else "rho0", "t_eval"]
    for key, default in SHARED.items():
        if key in params:
            assert params[key].default == default, f"{name}: {key}={params[key].default!r}, not {default!r}"
    assert "method" not in params, f"{name}: the particles' time scheme is scheme= (method is each function's own)"
    assert "mesh" not in params, f"{name}: mesh= is a Mesh object (sphere.solve); the kind of cells is grid="


def test_sampling_defaults_per_family():
    """Samplers of a law draw i.i.d. tokens by default (the mean-field limit's tokens; ``discretise``'s
    default is the API contract's); tokens drawn to be compared with a density (``compare``,
    ``convergence``, ``DensitySolution.sample``) are stratified by default (a W_1 floor of order 1/n
    instead of 1/sqrt(n))."""
    from meanfield.compare.zonal import sample
    from meanfield.sampling import discretise
    from meanfield.solvers.results import DensitySolution
    assert inspect.signature(discretise).parameters["method"].default == "iid"
    assert inspect.signature(sample).parameters["method"].default == "iid"
    assert inspect.signature(DensitySolution.sample).parameters["method"].default == "stratified"
    for name in ANALYSES:      # the zonal comparison offers no stratified draw: its deterministic one
        expected = "quantile" if name == "zonal_compare" else "stratified"
        assert inspect.signature(_analysis(name)).parameters["sampling"].default == expected, name


def test_p_defaults_to_two():
    from meanfield.transport import wasserstein
    from meanfield.transport.sphere import geodesic_cost
    assert inspect.signature(wasserstein).parameters["p"].default == 2
    assert inspect.signature(geodesic_cost).parameters["p"].default == 2
    from meanfield.compare.zonal import polar_wasserstein
    from meanfield.convergence.core import ConvergenceStudy
    for function in (polar_wasserstein, ConvergenceStudy.orders, ConvergenceStudy.at_floor,
                     ConvergenceStudy.reference_at_floor):
        assert inspect.signature(function).parameters["p"].default == 2, function.__qualname__


def test_circle_results_give_points_and_theta():
    import numpy as np
    import meanfield as mf
    sol = circle.solve(mf.SA(1.0), lambda x: 1 + 0.5 * x[:, 0], [0.0, 0.1], cells=16, progress=False)
    assert np.allclose(mf.circle_points(sol.theta), sol.points)
    causal_sol = causal.solve(mf.SA(1.0), lambda s, th: 1 + 0 * th, [0.0, 0.1], slices=2, cells=16, progress=False)
    assert np.allclose(causal_sol.points, sol.points)
    with pytest.raises(ValueError, match="S\\^2"):
        sphere_sol = sphere.solve(mf.SA(1.0), lambda x: 1 + 0 * x[:, 0], [0.0, 0.1], mesh=sphere.icosphere(1),
                                  progress=False)
        assert sphere_sol.theta is None
