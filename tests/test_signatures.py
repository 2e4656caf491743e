"""One set of names: every solver's signature read with ``inspect``.

The first three parameters are (model, initial state, t_eval), positional; everything after them is
keyword-only (except the dimension ``d`` of ``zonal.solve``, positional in the API contract), and
every common keyword has one kind and one default wherever a solver has it."""
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
