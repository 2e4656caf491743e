"""The full attention model (any Q, K, V) in the density solvers: mass and positivity, the per-stage field
against the particles' field of the cell measure, the isotropic cases against the isotropic solver at
β' = cβ, the energy E_V (monotone where V = Q^T K is symmetric, NaN with the reason otherwise), bad input."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.solvers import adaptive, adaptive_circle, causal, circle, full_model, particles, sphere, zonal


def rotation(d, angle=0.7):
    if d == 2:
        c, s = np.cos(angle), np.sin(angle)
        return np.array([[c, -s], [s, c]])
    a = np.array([1.0, 2.0, 2.0]) / 3.0
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def random_model(d, cls=mf.SA, beta=2.0, seed=0):
    Q, K, V = np.random.default_rng(seed).normal(size=(3, d, d))
    return cls(beta, Q=Q, K=K, V=V)


def symmetric_model(d, cls=mf.SA, beta=1.5, seed=1):
    """V = Q^T K = A symmetric, anisotropic (a gradient flow of E_V)."""
    G = np.random.default_rng(seed).normal(size=(d, d))
    A = np.eye(d) + 0.3 * (G + G.T)
    return cls(beta, K=A, V=A)


def rho0(x):
    return 1 + 0.5 * x[:, 0] + 0.3 * x[:, 1] ** 2


T = np.linspace(0.0, 4.0, 5)


def circle_solve(model, **kw):
    return circle.solve(model, rho0, T, cells=kw.pop("cells", 96), progress=False, **kw)


def sphere_solve(model, **kw):
    return sphere.solve(model, rho0, T, mesh=kw.pop("mesh", sphere.icosphere(2)), progress=False, **kw)


@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
@pytest.mark.parametrize("flux", ["upwind2", "upwind"])
def test_mass_and_positivity_general(cls, flux):
    for sol in (circle_solve(random_model(2, cls, 1.5), flux=flux), sphere_solve(random_model(3, cls, 1.5), flux=flux)):
        np.testing.assert_allclose(sol.mass, 1.0, rtol=0, atol=1e-13)
        assert sol.rho.min() >= 0
        assert np.all(np.isnan(sol.energy))
        assert sol.info["energy_reason"].startswith("not a gradient flow")
        assert sol.info["tolerance"] == pytest.approx(1e-17)


def test_multihead_general():
    model = mf.MultiHead([random_model(2, mf.SA, 1.0, 3), random_model(2, mf.USA, 0.5, 4)])
    sol = circle_solve(model)
    np.testing.assert_allclose(sol.mass, 1.0, rtol=0, atol=1e-13)
    assert sol.rho.min() >= 0 and sol.info["summation"] == "expansion"


def test_circle_stage_field_is_the_particle_field():
    """The first-order stage's centre velocities are <X[μ_h], t> of the particles' field of the cell measure."""
    for model in (random_model(2, mf.SA, 3.0), random_model(2, mf.USA, 1.0),
                  mf.MultiHead([random_model(2, mf.SA, 1.0, 5), random_model(2, mf.SA, 2.0, 6)])):
        op = circle.CircleOperator(circle.density_model(model), 128, "upwind")
        rho = circle.initial_density(rho0, 128)
        points, weights = op.measure(rho)
        X = particles.velocity(model, points, weights, summation="direct")
        u = op.centre(rho)[0][0]
        np.testing.assert_allclose(u, np.sum(X * points[:, ::-1] * [-1, 1], axis=1), rtol=0, atol=1e-12)


def test_sphere_stage_field_is_the_particle_field():
    """The first-order stage's normal speeds at both generators of every face come from X[μ_h]."""
    mesh = sphere.icosphere(2)
    for model in (random_model(3, mf.SA, 3.0), random_model(3, mf.USA, 1.0)):
        op = sphere.SphereOperator(sphere.check_model(model), mesh, "upwind")
        rho = sphere.initial_density(rho0, mesh)
        op(rho)
        X = particles.velocity(model, *op.measure(rho), summation="direct")
        np.testing.assert_allclose(op.u[0], np.einsum("ec,ec->e", X[mesh.edges[:, 0]], mesh.normals[:, 0]),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(op.u[1], np.einsum("ec,ec->e", X[mesh.edges[:, 1]], mesh.normals[:, 1]),
                                   rtol=0, atol=1e-12)


def test_second_order_face_velocity_and_balance_on_the_sphere():
    """upwind2's face velocities are the balanced centre velocities extrapolated by the exact slopes:
    against centred differences of the field along the geodesic through the face."""
    mesh = sphere.icosphere(2)
    model = random_model(3, mf.SA, 2.0)
    op = sphere.SphereOperator(model, mesh, "upwind2")
    rho = sphere.initial_density(rho0, mesh)
    X, slopes, trusted = op.general.stage(rho, op.pairs, op.pair_normals)
    assert trusted.all()
    field = op.general.field
    masses = rho * mesh.areas
    for e in (0, 17, 100):
        i, n = mesh.edges[e, 0], mesh.normals[e, 0]
        x = mesh.points[i]
        s = 1e-4
        ends = [x * np.cos(t) + n * np.sin(t) for t in (s, -s)]
        tangents = [-x * np.sin(t) + n * np.cos(t) for t in (s, -s)]
        values = [particles.velocity(model, np.vstack([p, mesh.points]), np.concatenate([[0.0], masses]),
                                     summation="direct")[0] @ t for p, t in zip(ends, tangents)]
        assert slopes[2 * e] == pytest.approx((values[0] - values[1]) / (2 * s), rel=1e-6)
    # the balance term: X of the uniform density is the exact uniform field
    uniform = np.full(mesh.size, 1 / (4 * np.pi))
    exact = full_model.general_field.uniform_field(model, mesh.points)[0]
    np.testing.assert_allclose(op.general.velocity(uniform), exact, rtol=0, atol=1e-13)
    assert np.abs(field(uniform * mesh.areas)[0] - exact).max() > 1e-6      # the correction does something


@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
def test_isotropic_kernels_equal_the_isotropic_solver(cls):
    for d, solve in ((2, circle_solve), (3, sphere_solve)):
        R = rotation(d)
        reference = solve(cls(3.0, V=-1.0 if cls is mf.USA else None))
        for model in (cls(3.0, Q=R, K=R, V=-np.eye(d) if cls is mf.USA else None), cls(1.5, Q=2.0, V=reference.model.V),
                      cls(1.0, Q=np.sqrt(3.0) * R, K=np.sqrt(3.0) * R, V=reference.model.V)):
            sol = solve(model)
            np.testing.assert_allclose(sol.rho, reference.rho, rtol=1e-12, atol=0)
            assert repr(sol.model) == repr(reference.model)


@pytest.mark.filterwarnings("ignore:.*pinned")
@pytest.mark.parametrize("cls", [mf.SA, mf.USA])
@pytest.mark.parametrize("flux", ["upwind2", "tpfa"])
def test_energy_monotone_for_symmetric_v(cls, flux):
    for d, solve in ((2, circle_solve), (3, sphere_solve)):
        sol = solve(symmetric_model(d, cls), flux=flux)
        assert sol.info["energy_reason"] == "non-decreasing: V = Q^T K is symmetric"
        assert np.all(np.isfinite(sol.energy)) and sol.energy[-1] > sol.energy[0]
        assert sol.info["energy_dips"]["count"] == 0, sol.info["energy_dips"]
        points, weights = sol.points, sol.rho[-1] * sol.areas
        E, _ = full_model.general_field.energy(sol.model, points, weights, "direct")
        assert sol.energy[-1] == pytest.approx(E, rel=1e-12)


def test_energy_nan_with_reason_and_potential_refused():
    sol = circle_solve(mf.SA(1.0, V=np.diag([1.0, 2.0])))
    assert np.all(np.isnan(sol.energy)) and "neither Q^T K nor -Q^T K" in sol.info["energy_reason"]
    with pytest.raises(ValueError, match="need a potential"):
        circle_solve(random_model(2), flux="tpfa")
    with pytest.raises(ValueError, match="need a potential"):
        sphere_solve(random_model(3), flux="muscl")


@pytest.mark.parametrize("bad", [dict(Q=[[1.0, np.nan], [0.0, 1.0]]), dict(V=[[np.inf, 0.0], [0.0, 1.0]]),
                                 dict(K=np.eye(3)), dict(Q=np.ones((2, 3)))])
def test_bad_matrices_refused(bad):
    with pytest.raises(ValueError):
        circle_solve(mf.SA(1.0, **bad))


def test_sphere_refuses_wrong_dimension_and_feedforward():
    with pytest.raises(ValueError, match="R\\^3"):
        sphere_solve(mf.SA(1.0, Q=np.eye(2)))
    with pytest.raises(ValueError):
        sphere_solve(mf.USA(800.0, Q=np.diag([1.0, 1.0, 2.0])))


def test_adaptive_sphere_general_model():
    """One mesh level: the fixed-mesh solver exactly; refined: mass, positivity and E_V agree with it."""
    model = symmetric_model(3, mf.SA, 3.0)
    t = [0.0, 1.0, 2.0]
    fixed = sphere.solve(model, rho0, t, mesh=sphere.icosphere(2), progress=False)
    same = adaptive.solve(model, rho0, t, base=2, finest=2, progress=False)
    np.testing.assert_array_equal(same.rho, fixed.rho)
    refined = adaptive.solve(model, rho0, t, base=2, finest=3, progress=False)
    np.testing.assert_allclose(refined.mass, 1.0, rtol=0, atol=1e-12)
    assert np.nanmin(refined.rho) >= 0
    assert refined.info["field"] == ["expansion"] and refined.info["energy_reason"].startswith("non-decreasing")
    finer = sphere.solve(model, rho0, t, mesh=sphere.icosphere(3), progress=False)
    np.testing.assert_allclose(refined.energy, finer.energy, rtol=2e-3)


def test_adaptive_circle_general_model():
    """Dyadic cells (64 refined to 256) against the uniform grid of 256 cells: mass, positivity, E_V."""
    model = symmetric_model(2, mf.SA, 4.0)
    t = [0.0, 2.0, 6.0]
    sol = adaptive_circle.solve(model, rho0, t, cells=64, finest_cells=256, progress=False)
    ref = circle.solve(model, rho0, t, cells=256, progress=False)
    np.testing.assert_allclose(sol.mass, 1.0, rtol=0, atol=1e-12)
    assert np.nanmin(sol.rho) >= 0 and sol.info["energy_dips"]["count"] == 0
    np.testing.assert_allclose(sol.energy, ref.energy, rtol=3e-3)
    with pytest.raises(ValueError, match="need a potential"):
        adaptive_circle.solve(random_model(2), rho0, t, cells=64, finest_cells=256, flux="muscl", progress=False)


def test_causal_random_qk_converges_to_one_cluster():
    """Karagodin–Polyanskiy–Rigollet: V = I and arbitrary Q, K, causal attention ends in one cluster."""
    Q, K = np.random.default_rng(3).normal(size=(2, 2, 2))
    sol = causal.solve(mf.SA(2.0, Q=Q, K=K), lambda s, th: 1 + 0.5 * np.cos(th - 2 * np.pi * s), [0, 20], slices=8,
                       cells=48, progress=False)
    np.testing.assert_allclose(sol.mass, 1.0, rtol=0, atol=1e-13)
    assert sol.rho.min() >= 0 and sol.info["summation"] == ["expansion"]
    z = sol.rho[-1] @ np.exp(1j * sol.theta) * (2 * np.pi / 48)       # each slice's mean resultant
    assert np.abs(z).min() > 0.99 and np.ptp(np.angle(z)) < 0.05, z
    initial = sol.rho[0] @ np.exp(1j * sol.theta) * (2 * np.pi / 48)
    assert np.abs(initial).max() < 0.3


def test_causal_and_zonal_isotropic_kernels():
    R = rotation(2)
    rho = 1 + 0.5 * np.cos(circle.cell_angles(32) - np.arange(4)[:, None])
    a = causal.solve(mf.SA(1.0, Q=np.sqrt(3.0) * R, K=np.sqrt(3.0) * R), rho, [0, 1], progress=False)
    b = causal.solve(mf.SA(3.0), rho, [0, 1], progress=False)
    np.testing.assert_allclose(a.rho, b.rho, rtol=1e-12, atol=0)
    f = lambda s: np.exp(2.0 * s)                                                     # noqa: E731
    a = zonal.solve(mf.USA(1.0, Q=2.0 * rotation(3), K=rotation(3)), f, [0, 1], 3, cells=32, progress=False)
    b = zonal.solve(mf.USA(2.0), f, [0, 1], 3, cells=32, progress=False)
    np.testing.assert_allclose(a.rho, b.rho, rtol=1e-12, atol=0)


# --- comparison and command line ------------------------------------------------------------------

def test_model_files_and_random_family(tmp_path):
    from meanfield.compare import models
    from meanfield.validation import phase_diagram_random
    assert phase_diagram_random.random_weights is models.random_weights
    Q, K, V = models.random_weights(2, 0.3, 5)
    model = models.model_from_options("USA", 2.0, 2, attention="random", sigma=0.3, seed=5)
    assert np.array_equal(model.K, K) and np.array_equal(model.V, V) and not model.normalised
    path = tmp_path / "m.toml"
    path.write_text('kind = "SA"\nbeta = 2.0\nK = [[1.0, 0.2], [0.2, 3.0]]\nV = [[1.0, 0.2], [0.2, 3.0]]\n')
    model = models.load_model_file(path)
    assert model.beta == 2.0 and np.array_equal(model.V, [[1.0, 0.2], [0.2, 3.0]])
    for text, match in [('kind = "SA"\nbeta = 1.0\nW = 1.0\n', "unknown keys"), ('beta = 1.0\n', "kind"),
                        ('kind = "SA"\nbeta = 1.0\nQ = [[1.0, nan], [0.0, 1.0]]\n', "Q"),
                        ('kind = "SA"\nbeta = 1.0\nQ = [[1.0, 0.0]]\n', "square"), ('kind = "SA\n', "TOML"),
                        ('kind = "SA"\nbeta = 1.0\nV = "__import__(\'os\')"\n', "V")]:
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            models.load_model_file(path)


def test_compare_general_model_energy():
    from meanfield.compare import compare
    from meanfield.measures import perturbed_uniform
    model = symmetric_model(2, mf.SA, 3.0)
    c = compare(model, perturbed_uniform(2, seed=1), [0.0, 2.0], n=300, seeds=1, cells=128, progress=False)
    assert c.info["energy"].startswith("E_V") and "non-decreasing" in c.info["energy"]
    np.testing.assert_allclose(c.energy_particles[:, 0], c.energy_density, rtol=0.02)
    assert c.w1[-1, 0] < 0.05
    scaled = compare(mf.SA(1.5, Q=2.0), perturbed_uniform(2, seed=1), [0.0, 1.0], n=200, seeds=1, cells=64,
                     progress=False)
    assert scaled.info["energy"].startswith("E_beta' with beta' = 3")
    np.testing.assert_allclose(scaled.energy_particles[:, 0], scaled.energy_density, rtol=0.02)
    nan = compare(random_model(2), perturbed_uniform(2, seed=1), [0.0, 1.0], n=100, seeds=1, cells=64, progress=False)
    assert np.isnan(nan.energy_particles).all() and nan.info["energy"].startswith("none (NaN)")


def test_cli_model_options(tmp_path, capsys):
    from meanfield.cli import compare as compare_cli, convergence as convergence_cli
    path = tmp_path / "m.toml"
    path.write_text('kind = "USA"\nbeta = 1.0\nQ = [[1.0, 0.5], [0.0, 1.0]]\n')
    assert compare_cli.main(["--model-file", str(path), "--n", "64", "--seeds", "1", "--cells", "32", "--T", "0.5",
                             "--outputs", "2", "--out", str(tmp_path / "a")]) == 0
    assert "energy shown: none (NaN): not a gradient flow" in capsys.readouterr().out
    opts = compare_cli.options(["--attention", "random", "--sigma", "0.3", "--seed", "4", "--out", str(tmp_path / "b")])
    model = compare_cli._model(opts)
    assert np.array_equal(model.K, full_model_random(4)[1])
    opts = convergence_cli.options(["--attention", "random", "--n", "100", "200", "--grids", "32", "64",
                                    "--out", str(tmp_path / "c")])
    assert not convergence_cli._model(opts).is_isotropic
    path.write_text('kind = "SA"\nbeta = 1.0\nQ = [[1.0, 0.5, 0.0]]\n')
    with pytest.raises(SystemExit):
        convergence_cli.options(["--model-file", str(path), "--n", "100", "200", "--grids", "32", "64",
                                 "--out", str(tmp_path / "c")])


def full_model_random(seed):
    from meanfield.compare.models import random_weights
    return random_weights(2, 0.3, seed)


def test_linear_part_of_the_general_operators():
    """The engine contract: -A(ρ) ρ = dρ/dt of flux="upwind" for the full model on every engine."""
    from meanfield.solvers.meshes.dyadic import select, uniform_mesh
    mesh = sphere.icosphere(2)
    model3, model2 = random_model(3), random_model(2, mf.USA, 1.0)
    ops = [(sphere.SphereOperator(model3, mesh, "upwind"), 1 + 0.5 * mesh.points[:, 2]),
           (circle.CircleOperator(model2, 64, "upwind"), 1 + 0.5 * np.cos(circle.cell_angles(64)))]
    cells = select(uniform_mesh(16, 2), [2] + [0] * 15, buffer=1)
    ops.append((adaptive_circle.DyadicOperator(model2, cells, "upwind"), 1 + 0.5 * np.cos(cells.angles)))
    for op, rho in ops:
        np.testing.assert_allclose(-op.linear_part(rho) @ rho, op(rho)[0], rtol=0, atol=1e-12)
    op = causal.CausalOperator(mf.SA(2.0, Q=np.diag([1.0, 2.0]), causal=True), 32, "upwind")
    rho = 1 + 0.5 * np.cos(circle.cell_angles(32) - np.arange(4)[:, None])
    np.testing.assert_allclose(-(op.linear_part(rho) @ rho.ravel()), op(rho)[0].ravel(), rtol=0, atol=1e-12)
