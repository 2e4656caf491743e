"""meanfield: the mean-field dynamics of self-attention on the sphere.

Transformers as interacting particles (Geshkovski, Letrouit, Polyanskiy, Rigollet,
arXiv:2312.10794): models, energies, geometry, optimal transport and theory.
The engines live in ``meanfield.solvers`` (also as ``mf.particles``, ``mf.circle``, ``mf.sphere``).
Layers: ``checks``, ``geometry``, ``models``, ``theory``, ``measures`` (the mathematics) <-
``meanfield.solvers`` (the engines) <- everything else (energy, transport, comparison, plotting, CLI).
"""
from .solvers import _numba_env  # noqa: F401  (sets up the Numba cache before any kernel is compiled)

from .energy import energy, log_energy
from .geometry import (circle_angles, circle_points, geodesic_distance, normalise, random_rotation,
                       tangent_projection, uniform_sphere)
from .models import SA, USA, FeedForward, Hardmax, MultiHead, model_from_dict
from .solvers import circle, particles, sphere
from .solvers.particles import velocity
from .theory import growth_rate, most_unstable_mode
from .transport import wasserstein
from .measures import perturbed_uniform, sample_density
from .sampling import discretise
from .density_estimation import kde

__version__ = "0.1.0"

__all__ = ["SA", "USA", "Hardmax", "MultiHead", "FeedForward", "velocity", "energy", "log_energy", "uniform_sphere",
           "normalise",
           "tangent_projection", "circle_points", "circle_angles", "random_rotation",
           "geodesic_distance", "model_from_dict", "growth_rate", "most_unstable_mode",
           "wasserstein", "sample_density", "perturbed_uniform", "discretise", "kde", "particles", "circle", "sphere"]
