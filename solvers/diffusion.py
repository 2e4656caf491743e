"""Diffusion D Δ_S for the finite-volume solvers (the McKean–Vlasov density equation
∂_t ρ + div(ρ X[ρ]) = D Δ_S ρ, the law of particles with noise σ = sqrt(2D)).

Two-point fluxes, conservative, second order on the circle's uniform grid and consistent on
Voronoi meshes (faces are orthogonal to the generator-to-generator arcs):

    circle:   (Δρ)_i = (ρ_{i+1} - 2ρ_i + ρ_{i-1}) / h²
    mesh:     (Δρ)_i = (1/|C_i|) Σ_{j ~ i} (|f_ij| / d(c_i, c_j)) (ρ_j - ρ_i)

A forward-Euler stage of the diffusion alone keeps ρ >= 0 for dt <= 1/r, r = max_i of the
diagonal (2/h² on the circle, (1/|C_i|) Σ_j |f_ij|/d_ij on a mesh); together with an advective
bound dt_a the stage stays positive for dt <= 1/(1/dt_a + D r) (a convex combination of the two
forward-Euler stages), which ``combined_step`` returns.
"""
import numpy as np
import scipy.sparse

from meanfield.checks import as_float_array


def as_diffusion(diffusion):
    """The diffusion coefficient D, checked: finite and >= 0.

    Parameters
    ----------
    diffusion : float

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For D < 0, NaN or inf.

    Examples
    --------
    >>> from meanfield.solvers.diffusion import as_diffusion
    >>> as_diffusion(0.25)
    0.25
    """
    value = float(as_float_array(diffusion, "diffusion"))
    if value < 0:
        raise ValueError(f"diffusion must be >= 0 (the coefficient D of D Δ_S ρ); got {value:g}")
    return value


def no_diffusion(diffusion: float, solver: str) -> None:
    """Refuse D > 0 in a solver that has no diffusion term (its ``diffusion=`` keyword exists so that
    every density solver takes the same keywords, and says clearly where the term is missing).

    Parameters
    ----------
    diffusion : float
        D, checked by ``as_diffusion``.
    solver : str
        The solver, named in the error.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        For D > 0 (or an invalid D).

    Examples
    --------
    >>> from meanfield.solvers.diffusion import no_diffusion
    >>> no_diffusion(0.0, "zonal.solve")
    >>> no_diffusion(0.1, "zonal.solve")
    Traceback (most recent call last):
    ...
    ValueError: diffusion = 0.1: zonal.solve has no diffusion term; ...
    """
    if as_diffusion(diffusion) > 0:
        raise ValueError(f"diffusion = {diffusion:g}: {solver} has no diffusion term; circle.solve and "
                         f"sphere.solve take diffusion=D")


def circle_laplacian(rho, h):
    r"""The periodic second difference of cell values on the circle.

    .. math::

        (\Delta_h \rho)_i = \frac{\rho_{i+1} - 2\rho_i + \rho_{i-1}}{h^2}.

    Parameters
    ----------
    rho : ndarray, shape (N,)
    h : float
        Grid spacing.

    Returns
    -------
    ndarray, shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.diffusion import circle_laplacian
    >>> circle_laplacian(np.array([0.0, 1.0, 0.0, 1.0]), 1.0)
    array([ 2., -2.,  2., -2.])
    """
    return (np.roll(rho, -1) - 2.0 * rho + np.roll(rho, 1)) / (h * h)


def circle_rate(cells):
    """The diagonal 2/h² of -Δ_h on the circle's grid of ``cells`` cells (h = 2π/cells).

    Parameters
    ----------
    cells : int

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.diffusion import circle_rate
    >>> bool(np.isclose(circle_rate(64), 2 / (2 * np.pi / 64) ** 2))
    True
    """
    h = 2 * np.pi / cells
    return 2.0 / (h * h)


def mesh_laplacian(mesh):
    r"""The two-point Laplace–Beltrami operator of a Voronoi mesh.

    .. math::

        (\Delta_h \rho)_i = \frac{1}{|C_i|} \sum_{j \sim i} \frac{|f_{ij}|}{d_{ij}} (\rho_j - \rho_i).

    Parameters
    ----------
    mesh : meanfield.solvers.meshes.voronoi.Mesh

    Returns
    -------
    scipy.sparse matrix, shape (N, N)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> from meanfield.solvers.diffusion import mesh_laplacian
    >>> mesh = icosphere(2)
    >>> L = mesh_laplacian(mesh)
    >>> bool(np.abs(L @ np.ones(mesh.size)).max() < 1e-12 and abs((mesh.areas @ L) @ mesh.points[:, 2]) < 1e-12)
    True
    """
    i, j = mesh.edges[:, 0], mesh.edges[:, 1]
    t = mesh.lengths / mesh.distances
    n = mesh.size
    coupling = scipy.sparse.coo_matrix((np.concatenate([t, t]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                                       shape=(n, n)).tocsr()
    degree = np.asarray(coupling.sum(axis=1)).ravel()
    return scipy.sparse.diags(1.0 / mesh.areas) @ (coupling - scipy.sparse.diags(degree))


def mesh_rate(mesh):
    r"""The largest diagonal entry of -Δ_h on the mesh.

    .. math::

        r = \max_i \frac{1}{|C_i|} \sum_{j \sim i} \frac{|f_{ij}|}{d_{ij}}.

    Parameters
    ----------
    mesh : meanfield.solvers.meshes.voronoi.Mesh

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.solvers.meshes.voronoi import icosphere
    >>> from meanfield.solvers.diffusion import mesh_laplacian, mesh_rate
    >>> bool(np.isclose(mesh_rate(icosphere(2)), -mesh_laplacian(icosphere(2)).diagonal().min()))
    True
    """
    t = np.bincount(mesh.edges.ravel(), np.repeat(mesh.lengths / mesh.distances, 2), minlength=mesh.size)
    return float(np.max(t / mesh.areas))


def combined_step(advective_bound, diffusion, rate):
    r"""The positivity bound of a forward-Euler stage of advection plus diffusion.

    .. math::

        \Delta t = \frac{1}{1/\Delta t_a + D r}.

    Parameters
    ----------
    advective_bound : float
        Δt_a, the advective bound.
    diffusion : float
        D.
    rate : float
        r, the diagonal of -Δ_h (``circle_rate``, ``mesh_rate``).

    Returns
    -------
    float

    Examples
    --------
    >>> from meanfield.solvers.diffusion import combined_step
    >>> combined_step(0.1, 0.5, 20.0)
    0.05
    """
    return float(1.0 / (1.0 / advective_bound + diffusion * rate))
