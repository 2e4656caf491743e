"""The engine contract (``meanfield.solvers.contract``): every engine's operator implements it.

The linear part is checked against the engines' own first-order upwind right-hand side, and against
what makes it usable by an implicit scheme: an M-matrix form (non-negative diagonal, non-positive
off-diagonal entries, zero column sums in the cell-size weighting), so that one implicit Euler step
keeps the density non-negative and the mass exact."""
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg

import meanfield as mf
from meanfield.solvers import adaptive, adaptive_circle, causal, circle, euclidean, hardmax, particles, sphere, sphere_fv, zonal
from meanfield.solvers.contract import Operator, upwind_matrix
from meanfield.solvers.meshes.dyadic import select, uniform_mesh

MESH = sphere.icosphere(2)
DYADIC = select(uniform_mesh(16, 2), [2] + [0] * 15, buffer=1)
MULTI = mf.MultiHead([mf.SA(2.0), mf.USA(1.0, V=-1.0)])


def _circle_rho(n):
    theta = circle.cell_angles(n)
    return np.exp(4 * np.cos(theta)) + 0.3 * np.exp(2 * np.sin(3 * theta)) + 1e-3


def _sphere_rho():
    return np.exp(3 * MESH.points[:, 2]) + 0.5 * np.exp(2 * MESH.points[:, 0])


def _cases():
    """(operator, state, the flux="upwind" right-hand side by the engine's public function, cell sizes)."""
    rho = _circle_rho(96)
    h = 2 * np.pi / 96
    for model in (mf.SA(3.0), mf.USA(1.5), MULTI, mf.SA(80.0)):
        for flux in ("upwind2", "upwind", "tpfa"):
            yield (circle.CircleOperator(model, 96, flux), rho, circle.time_derivative(model, rho, flux="upwind"),
                   np.full(96, h))
    diffusive = circle.CircleOperator(mf.SA(3.0), 96, "upwind", diffusion=0.05)
    yield diffusive, rho, diffusive(rho)[0], np.full(96, h)
    srho = _sphere_rho()
    for model in (mf.SA(3.0), MULTI):
        for flux in ("upwind2", "upwind", "muscl"):
            yield (sphere.SphereOperator(model, MESH, flux), srho, sphere.time_derivative(model, srho, MESH, "upwind"),
                   MESH.areas)
    diffusive = sphere.SphereOperator(mf.SA(3.0), MESH, "upwind", diffusion=0.05)
    yield diffusive, srho, diffusive(srho)[0], MESH.areas
    m = zonal.cell_masses(lambda s: np.exp(3 * s) + 0.2, 5, 80)
    for flux in ("upwind2", "upwind"):
        yield (zonal.ZonalOperator(mf.SA(4.0), 5, 80, flux), m, zonal.time_derivative(mf.SA(4.0), m, 5, "upwind"),
               np.full(80, np.pi / 80))
    crho = 1 + 0.8 * np.cos(circle.cell_angles(32) - 0.7 * np.arange(6)[:, None])
    op = causal.CausalOperator(mf.SA(2.0, causal=True), 32, "upwind")
    yield op, crho, op(crho)[0], np.full(6 * 32, 2 * np.pi / 32)
    drho = 1 + 0.5 * np.cos(DYADIC.angles)
    yield (adaptive_circle.DyadicOperator(mf.SA(3.0), DYADIC, "tpfa"), drho,
           adaptive_circle.time_derivative(mf.SA(3.0), drho, DYADIC, "upwind"), DYADIC.widths)


CASES = list(_cases())
IDS = [f"{type(c[0]).__name__}-{getattr(c[0], 'flux', '')}-{k}" for k, c in enumerate(CASES)]


@pytest.mark.parametrize("op, y, rhs, sizes", CASES, ids=IDS)
def test_linear_part_is_the_upwind_right_hand_side_in_m_matrix_form(op, y, rhs, sizes):
    """-A y equals the engine's flux="upwind" right-hand side to round-off (observed <= 4e-14 relative);
    diag(A) >= 0, off-diagonal <= 0, sizes @ A = 0 (mass), and one implicit Euler step of any size
    keeps the density >= 0 and the mass to round-off."""
    assert isinstance(op, Operator) and op.positive
    A = op.linear_part(y)
    assert scipy.sparse.issparse(A) and A.format == "csr" and A.shape == (y.size, y.size)
    scale = np.abs(rhs).max()
    assert np.abs(-(A @ y.ravel()) - rhs.ravel()).max() <= 1e-12 * scale
    off = A - scipy.sparse.diags(A.diagonal())
    assert A.diagonal().min() >= 0 and (off.data <= 0).all()
    column = np.abs(A).T @ sizes
    assert np.all(np.abs(sizes @ A) <= 1e-13 * column)
    for h in (0.1, 10.0):
        step = scipy.sparse.linalg.spsolve((scipy.sparse.identity(y.size) + h * A).tocsc(), y.ravel())
        assert step.min() >= -1e-14 * y.max()
        assert sizes @ step == pytest.approx(sizes @ y.ravel(), rel=1e-12)


def test_upwind_matrix_transports_a_constant_speed_exactly_as_the_donor_cell_scheme():
    """Speed 1 around a ring of N cells of width h: (Aρ)_i = (ρ_i - ρ_{i-1})/h."""
    n, h = 6, 0.25
    i = np.arange(n)
    A = upwind_matrix(i, (i + 1) % n, np.ones(n), np.ones(n), np.ones(n), np.full(n, h))
    rho = np.arange(1.0, n + 1)
    assert np.allclose(A @ rho, (rho - np.roll(rho, 1)) / h)


@pytest.mark.parametrize("model", [mf.SA(3.0), mf.USA(1.0)])
def test_energy_measure_and_step_bound_agree_with_the_engines(model):
    """energy(y) is E_β of measure(y) (the direct double sum of ``meanfield.energy``); the weights carry the
    mass; step_bound is the solver's max_step."""
    rho = _circle_rho(64)
    rho /= rho.sum() * 2 * np.pi / 64
    op = circle.CircleOperator(model, 64, "upwind2")
    points, weights = op.measure(rho)
    assert op.energy(rho) == pytest.approx(mf.energy(points, model.beta, weights), rel=1e-12)
    assert weights.sum() == pytest.approx(1.0, rel=1e-13)
    assert op.step_bound() == circle.max_step(model, 64, "upwind2")
    srho = sphere.initial_density(_sphere_rho(), MESH)
    sop = sphere.SphereOperator(model, MESH, "upwind")
    points, weights = sop.measure(srho)
    assert sop.energy(srho) == pytest.approx(mf.energy(points, model.beta, weights), rel=1e-12)
    assert sop.step_bound() == sphere.max_step(model, MESH, "upwind")
    m = zonal.cell_masses(lambda s: 1 + 0.5 * s, 3, 64)
    zop = zonal.ZonalOperator(model, 3, 64)
    assert zop.energy(m) == pytest.approx(zonal.energy(m, model.beta, 3), rel=1e-12)
    assert zop.step_bound() == zonal.max_step(model, 64) and zop.measure(m)[1].sum() == pytest.approx(1.0)
    cop = causal.CausalOperator(mf.SA(2.0, causal=True), 32)
    crho = np.ones((4, 32)) / (2 * np.pi)
    assert np.isnan(cop.energy(crho)) and cop.measure(crho)[1].sum() == pytest.approx(1.0)
    assert cop(crho)[1] == 1 / cop.step_bound() == 1 / causal.max_step(mf.SA(2.0, causal=True), 32)


def test_particle_operator_follows_the_contract():
    """The particle field as an operator: rate 0, project x/|x|, E_β of the tokens, no linear part."""
    x = mf.uniform_sphere(10, 3, seed=2)
    op = particles.ParticleOperator(mf.SA(2.0), 3)
    v, rate = op(x)
    assert isinstance(op, Operator) and not op.positive and rate == 0.0
    assert np.allclose(v, mf.velocity(mf.SA(2.0), x))
    assert op.energy(x) == pytest.approx(mf.energy(x, 2.0), rel=1e-12)
    assert np.allclose(np.linalg.norm(op.project(2 * x), axis=1), 1.0)
    assert op.step_bound() == particles.max_step(mf.SA(2.0), 3)
    with pytest.raises(NotImplementedError, match="linear part"):
        op.linear_part(x)


def _spy(monkeypatch, module, seen):
    real = module.integrate

    def integrate(*args, **kw):
        seen.append(kw.get("scheme"))
        return real(*args, **kw)
    monkeypatch.setattr(module, "integrate", integrate)


def test_scheme_is_passed_through_to_the_integration(monkeypatch):
    """Every solver hands its ``scheme=`` to ``stepping.integrate`` untouched (so a scheme class of the
    scheme protocol reaches the integration loop); the density solvers default to "ssprk3"."""
    seen = []
    for module in (circle, sphere_fv, adaptive, adaptive_circle, zonal, causal, particles, euclidean):
        _spy(monkeypatch, module, seen)
    t = [0.0, 0.1]
    circle.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 0], t, cells=32, scheme="euler")
    sphere.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 2], t, mesh=sphere.icosphere(1), scheme="euler")
    adaptive.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 2], t, base=1, finest=1, scheme="euler")
    adaptive_circle.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 0], t, cells=16, finest_cells=32, scheme="euler")
    zonal.solve(mf.SA(2.0), lambda s: 1 + 0.5 * s, t, 3, cells=16, scheme="euler")
    causal.solve(mf.SA(2.0), lambda s, th: 1 + 0.5 * np.cos(th), t, slices=4, cells=16, scheme="euler")
    particles.solve(mf.SA(1.0), mf.uniform_sphere(4, 3, seed=0), t, scheme="euler", dt=0.05)
    euclidean.solve(mf.SA(1.0), np.eye(3), t, scheme="euler")
    assert seen and set(seen) == {"euler"}
    seen.clear()
    circle.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 0], t, cells=32)
    assert seen == ["ssprk3"]


def test_method_is_scheme_under_its_contract_name():
    x0, t = mf.uniform_sphere(4, 3, seed=0), [0.0, 0.2]
    a = particles.solve(mf.SA(1.0), x0, t, method="euler", dt=0.05)
    b = particles.solve(mf.SA(1.0), x0, t, scheme="euler", dt=0.05)
    assert np.array_equal(a.x, b.x) and a.info["method"] == "euler"
    with pytest.raises(TypeError, match="given twice"):
        particles.solve(mf.SA(1.0), x0, t, scheme="euler", method="rk4")
    h = hardmax.solve(mf.Hardmax(), x0, t, method="euler")
    assert h.info["method"] == "euler" and h.info["nsteps"] >= 20


def test_velocity_serves_hardmax():
    """``mf.velocity`` of a Hardmax is ``hardmax.velocity`` (it used to refuse the model)."""
    x = mf.uniform_sphere(7, 3, seed=4)
    model = mf.Hardmax(Q=np.diag([1.0, -1.0, 0.5]))
    assert np.array_equal(mf.velocity(model, x), hardmax.velocity(model, x))
    with pytest.raises(ValueError, match="weights"):
        mf.velocity(model, x, weights=np.full(7, 1 / 7))


def test_a_checkpoint_resumes_only_with_its_scheme(tmp_path):
    """The scheme joins the run's identity when it is not the default: the default's checkpoints (also
    those written before solvers took scheme=) resume, another scheme's are refused."""
    path, t = tmp_path / "run.npz", [0.0, 0.5, 1.0]
    run = lambda **kw: circle.solve(mf.SA(2.0), lambda x: 1 + 0.5 * x[:, 0], t, cells=32, checkpoint=path,  # noqa: E731
                                    checkpoint_every=3, **kw)
    first = run()
    assert np.array_equal(run(resume=True).rho, first.rho) and first.info["method"] == "ssprk3"
    with pytest.raises(ValueError, match="different run"):
        run(resume=True, scheme="euler")
