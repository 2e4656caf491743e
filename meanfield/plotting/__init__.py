"""Plots of particle and density solutions (matplotlib)."""
from .circle import density_overlay, spacetime  # noqa: F401
from .sphere import density_map, particles_on_density  # noqa: F401
