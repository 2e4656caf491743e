"""Result objects: compact repr, .npz and netCDF round trips through xarray, Comparison.save/load,
scalar sweep outputs and SweepResult.to_dataframe."""
import numpy as np
import pytest

import meanfield as mf
import sweep_tasks
from meanfield import sweep
from meanfield.compare import Comparison
from meanfield.solvers import particles
from meanfield.solvers.results import DensitySolution, ParticleSolution

REPR_LIMIT = 600     # characters: a few lines, whatever the size of the arrays


@pytest.fixture(scope="module")
def batch():
    x0 = np.stack([mf.uniform_sphere(50, 2, seed=s) for s in range(2)])
    return particles.solve(mf.SA(beta=2.0), x0, np.linspace(0.0, 1.0, 4), dt=0.1)


def density(m=4, cells=300):
    rng = np.random.default_rng(1)
    theta = np.linspace(0.0, 2 * np.pi, cells, endpoint=False)
    rho = rng.random((m, cells))
    areas = np.full(cells, 2 * np.pi / cells)
    return DensitySolution(t=np.linspace(0.0, 1.0, m), points=np.c_[np.cos(theta), np.sin(theta)], areas=areas,
                           rho=rho, mass=rho @ areas, energy=rng.random(m), model=mf.USA(beta=3.0),
                           info={"flux": "upwind", "nsteps": 12})


def comparison(part, dens):
    m, s = part.x.shape[:2]
    rng = np.random.default_rng(2)
    return Comparison(t=part.t, w1=rng.random((m, s)), w2=rng.random((m, s)), energy_particles=part.energy,
                      energy_density=dens.energy, clusters_particles=rng.integers(1, 5, (m, s)),
                      clusters_density=rng.integers(1, 5, m), particles=part, density=dens,
                      info={"geometry": "sphere", "n": 50, "seeds": 2, "timings": {"particles": 0.1}})


def same(a, b):
    """Two result objects of one class with equal arrays (dtype kind included), model and info."""
    assert type(a) is type(b)
    for name, value in vars(a).items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            assert other.dtype.kind == value.dtype.kind and np.array_equal(value, other), name
        elif hasattr(value, "__dataclass_fields__") and name not in ("model",):
            same(value, other)
        else:
            assert value == other, name


def test_repr_is_a_few_lines_whatever_the_size():
    big = ParticleSolution(t=np.linspace(0, 5, 200), x=np.zeros((200, 3, 2000, 3)), energy=np.zeros((200, 3)),
                           model=mf.SA(beta=9.0), info={"method": "rk4"})
    text = repr(big)
    assert len(text) < REPR_LIMIT and len(text.splitlines()) <= 6, text
    assert "SA(beta=9" in text and "rk4" in text and "(200, 3, 2000, 3)" in text and "[0, 5]" in text
    dens = density(m=100, cells=5000)
    for obj in (dens, comparison(big, density(m=200, cells=5000))):
        text = repr(obj)
        assert len(text) < REPR_LIMIT and "..." not in text and "0." not in text.split("t:")[0], text
    assert "(100, 5000)" in repr(dens) and "USA(beta=3" in repr(dens)


def test_npz_round_trip_keeps_nested_solutions(batch, tmp_path):
    comp = comparison(batch, density())
    comp.save(tmp_path / "c.npz")
    same(comp, Comparison.load(tmp_path / "c.npz"))
    with pytest.raises(ValueError, match="holds a Comparison"):
        DensitySolution.load(tmp_path / "c.npz")


def test_xarray_dataset_has_named_dimensions(batch):
    pytest.importorskip("xarray")
    ds = batch.to_xarray()
    assert ds["x"].dims == ("t", "draw", "token", "coord") and ds["energy"].dims == ("t", "draw")
    assert np.array_equal(ds["t"].values, batch.t) and ds.sizes["token"] == 50
    ds = comparison(batch, density()).to_xarray()
    assert ds["density_rho"].dims == ("t", "cell") and ds["particles_x"].dims[:2] == ("t", "draw")
    assert ds["w2"].dims == ("t", "draw") and ds.attrs["kind"] == "Comparison"


@pytest.mark.parametrize("kind", ["particles", "density", "comparison"])
def test_netcdf_round_trip(batch, tmp_path, kind):
    pytest.importorskip("xarray")
    obj = {"particles": batch, "density": density(), "comparison": comparison(batch, density())}[kind]
    path = tmp_path / f"{kind}.nc"
    obj.to_netcdf(path)
    back = type(obj).from_netcdf(path)
    same(obj, back)
    same(obj, type(obj).from_xarray(obj.to_xarray()))
    with pytest.raises(ValueError, match="not a"):
        (DensitySolution if kind == "particles" else ParticleSolution).from_netcdf(path)


def test_single_system_and_circle_angles_round_trip(tmp_path):
    pytest.importorskip("xarray")
    sol = particles.solve(mf.USA(beta=1.0), mf.uniform_sphere(20, 3, seed=0), [0.0, 0.5], dt=0.1)
    assert sol.to_xarray()["x"].dims == ("t", "token", "coord")
    sol.to_netcdf(tmp_path / "one.nc")
    same(sol, ParticleSolution.from_netcdf(tmp_path / "one.nc"))


def test_from_xarray_refuses_other_objects():
    pytest.importorskip("xarray")
    with pytest.raises(TypeError, match="dataset"):
        ParticleSolution.from_xarray({"x": 1})


def test_scalar_task_is_stored_as_value_and_dataframe(tmp_path):
    pd = pytest.importorskip("pandas")
    res = sweep.run(sweep_tasks.scalar, {"a": [1, 2]}, seeds=3, store=tmp_path)
    assert res.names == ["value"] and np.array_equal(res.get("value"), [10, 11, 12, 20, 21, 22])
    frame = res.to_dataframe()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 6
    assert list(frame.columns) == ["a", "seed", "value", "seconds"]
    assert frame.groupby("a")["value"].mean().to_dict() == {1: 11.0, 2: 21.0}
    assert np.array_equal(sweep.load(tmp_path).get("value"), res.get("value"))
    text = repr(res)
    assert "6 tasks: 2 parameter sets x 3 seeds" in text and "value ()" in text and len(text) < REPR_LIMIT


def test_zonal_solution_and_comparison_round_trip(tmp_path):
    pytest.importorskip("xarray")
    from meanfield.compare.zonal import ZonalComparison, compare as zonal_compare
    comp = zonal_compare(mf.SA(1.0), lambda c: 1.0 + 0.5 * c, [0.0, 0.5], d=5, n=30, seeds=2, cells=32)
    text = repr(comp)
    assert len(text) < REPR_LIMIT and "ZonalSolution" in text and "ParticleSolution" in text
    comp.save(tmp_path / "z.npz")
    same(comp, ZonalComparison.load(tmp_path / "z.npz"))
    comp.to_netcdf(tmp_path / "z.nc")
    same(comp, ZonalComparison.from_netcdf(tmp_path / "z.nc"))
    assert comp.to_xarray()["pde_masses"].dims == ("t", "cell")
