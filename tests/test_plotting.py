"""Figures for people: animated GIFs on S^1 and S^2 (>= 600 px, one frame per pick), cluster
markers sized by mass, logarithmic colour scales on sphere maps."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.plotting import animate, density_map
from meanfield.plotting.tokens import AREA_PER_MASS, SMALLEST, cluster_markers
from meanfield.solvers import circle, particles, sphere

Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def circle_run():
    t = np.linspace(0.0, 2.0, 5)
    sol = circle.solve(mf.SA(4.0), lambda x: 1 + 0.5 * x[:, 0], t, cells=64)
    tokens = particles.solve(mf.SA(4.0), mf.uniform_sphere(40, 2, seed=0), t, energy=False)
    return sol, tokens


@pytest.fixture(scope="module")
def sphere_run():
    t = np.linspace(0.0, 1.0, 3)
    sol = sphere.solve(mf.SA(3.0), lambda x: np.exp(3 * x[:, 2]), t, mesh=sphere.icosphere(1))
    tokens = particles.solve(mf.SA(3.0), mf.uniform_sphere(30, 3, seed=1), t, energy=False)
    return sol, tokens


def frames_of(path):
    with Image.open(path) as im:
        return im.size, im.n_frames


def test_animate_circle_density_and_tokens(circle_run, tmp_path):
    sol, tokens = circle_run
    path = animate(tmp_path / "c.gif", sol, tokens, frames=3)
    (width, height), n = frames_of(path)
    assert width >= 600 and height >= 300 and n == 3
    (width, _), n = frames_of(animate(tmp_path / "p.gif", particles=tokens, frames=10, dpi=80))
    assert width == 640 and n == 5       # no more frames than output times


def test_animate_sphere_with_batch_tokens_and_alone(sphere_run, tmp_path):
    sol, tokens = sphere_run
    assert frames_of(animate(tmp_path / "s.gif", sol, tokens, frames=3, tail=2)) == ((800, 450), 3)
    assert frames_of(animate(tmp_path / "d.gif", density=sol, frames=2))[1] == 2
    batch = particles.solve(mf.SA(3.0), mf.uniform_sphere(10, 3, seed=2, batch=2), sol.t, energy=False)
    assert frames_of(animate(tmp_path / "b.gif", particles=batch, frames=3))[1] == 3


def test_animate_refuses_bad_input(circle_run, sphere_run, tmp_path):
    sol, tokens = circle_run
    with pytest.raises(ValueError, match="density"):
        animate(tmp_path / "x.gif")
    with pytest.raises(ValueError, match="600"):
        animate(tmp_path / "x.gif", sol, size=(4, 3), dpi=100)
    with pytest.raises(ValueError, match="same sphere"):
        animate(tmp_path / "x.gif", sol, sphere_run[1])
    with pytest.raises(ValueError, match="frames"):
        animate(tmp_path / "x.gif", sol, frames=0)


def test_cluster_markers_have_area_by_mass():
    rng = np.random.default_rng(0)
    a = mf.normalise(np.array([1.0, 0, 0]) + 1e-3 * rng.standard_normal((30, 3)))
    b = mf.normalise(np.array([0, 0, 1.0]) + 1e-3 * rng.standard_normal((10, 3)))
    centres, area = cluster_markers(np.vstack([a, b]))
    order = np.argsort(-area)
    assert np.allclose(area[order], SMALLEST + AREA_PER_MASS * np.array([0.75, 0.25]))
    assert np.allclose(centres[order], [[1, 0, 0], [0, 0, 1]], atol=1e-3)
    # a near-uniform cloud is one spread-out group: no centre, no marker
    assert cluster_markers(mf.uniform_sphere(2000, 3, seed=0))[0].shape == (0, 3)


def test_sphere_maps_use_a_log_scale_per_panel(sphere_run):
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    sol, _ = sphere_run
    ax = density_map(sol, -1, resolution=40)
    norm = ax.collections[0].norm
    assert isinstance(norm, LogNorm) and norm.vmax == pytest.approx(sol.rho[-1].max())
    assert norm.vmin == pytest.approx(max(sol.rho[-1].max() * 1e-4, sol.rho[-1].min()))
    assert not isinstance(density_map(sol, 0, resolution=40, log=False).collections[0].norm, LogNorm)
    plt.close("all")


@pytest.fixture(scope="module")
def clustered_sphere():
    """SA β = 6 on S^2 past clustering: two clusters, each in a few cells of icosphere(2)."""
    sol = sphere.solve(mf.SA(6.0), mf.perturbed_uniform(3, seed=0), [0.0, 15.0], mesh=sphere.icosphere(2))
    from meanfield.clusters import point_mass_measure
    measure = point_mass_measure(sol, -1)
    assert measure.masses.size == 2
    return sol, measure


def _white_near(ax, lonlat, radius_px):
    """Whether the rendered figure of ax has a white pixel within radius_px of the data point lonlat."""
    fig = ax.figure
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    x, y = ax.transData.transform(lonlat)
    row, col = image.shape[0] - y, x
    rows, cols = np.mgrid[:image.shape[0], :image.shape[1]]
    near = (rows - row) ** 2 + (cols - col) ** 2 <= radius_px ** 2
    return bool(np.any(np.all(image[near] > 0.95, axis=-1)))


@pytest.mark.parametrize("draw", ["density_map", "plot"])
def test_clusters_of_a_clustered_density_are_marked_at_their_centres(clustered_sphere, draw):
    import matplotlib.pyplot as plt
    from meanfield.plotting.sphere import lonlat
    sol, measure = clustered_sphere
    lon, lat = lonlat(measure.centres)
    for clusters in (True, False):
        fig = plt.figure(dpi=100)
        ax = fig.add_subplot(projection="mollweide")
        if draw == "plot":
            sol.plot(ax=ax, resolution=120, clusters=clusters)
        else:
            density_map(sol, ax=ax, resolution=120, clusters=clusters)
        for m, point in zip(measure.masses, zip(lon, lat)):
            radius = np.sqrt((SMALLEST + AREA_PER_MASS * m) / np.pi) * fig.dpi / 72     # the disc's, in pixels
            assert _white_near(ax, point, radius + 3) == clusters    # the white ring of the disc, only when drawn
        plt.close(fig)


def test_clusters_of_a_clustered_circle_density_are_drawn_with_their_masses():
    import matplotlib.pyplot as plt
    sol = circle.solve(mf.SA(6.0), mf.perturbed_uniform(2, seed=0), [0.0, 20.0], cells=256)
    from meanfield.clusters import point_mass_measure
    measure = point_mass_measure(sol, -1)
    assert measure.masses.size == 2
    ax = sol.plot()
    labels = sorted(float(t.get_text().split("= ")[1]) for t in ax.texts)
    np.testing.assert_allclose(labels, np.sort(measure.masses), atol=0.006)     # two digits shown
    assert sum(labels) == pytest.approx(1.0, abs=0.02)
    plt.close(ax.figure)
