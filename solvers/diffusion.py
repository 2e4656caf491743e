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
    """D >= 0, finite."""
    value = float(as_float_array(diffusion, "diffusion"))
    if value < 0:
        raise ValueError(f"diffusion must be >= 0 (the coefficient D of D Δ_S ρ); got {value:g}")
    return value


def circle_laplacian(rho, h):
    """(ρ_{i+1} - 2ρ_i + ρ_{i-1}) / h² on the periodic grid of spacing h."""
    return (np.roll(rho, -1) - 2.0 * rho + np.roll(rho, 1)) / (h * h)


def circle_rate(cells):
    """2/h², the diagonal of -Δ on the circle's grid of ``cells`` cells."""
    h = 2 * np.pi / cells
    return 2.0 / (h * h)


def mesh_laplacian(mesh):
    """The two-point Laplace–Beltrami operator of a Voronoi mesh as a sparse (N, N) matrix."""
    i, j = mesh.edges[:, 0], mesh.edges[:, 1]
    t = mesh.lengths / mesh.distances
    n = mesh.size
    coupling = scipy.sparse.coo_matrix((np.concatenate([t, t]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                                       shape=(n, n)).tocsr()
    degree = np.asarray(coupling.sum(axis=1)).ravel()
    return scipy.sparse.diags(1.0 / mesh.areas) @ (coupling - scipy.sparse.diags(degree))


def mesh_rate(mesh):
    """max_i (1/|C_i|) Σ_j |f_ij|/d_ij, the largest diagonal entry of -Δ on the mesh."""
    t = np.bincount(mesh.edges.ravel(), np.repeat(mesh.lengths / mesh.distances, 2), minlength=mesh.size)
    return float(np.max(t / mesh.areas))


def combined_step(advective_bound, diffusion, rate):
    """Positivity bound 1/(1/dt_a + D r) of a forward-Euler stage of advection plus diffusion."""
    return float(1.0 / (1.0 / advective_bound + diffusion * rate))
