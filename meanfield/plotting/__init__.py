"""Plots of particle and density solutions (matplotlib): space-time and overlay plots on S^1,
density maps with tokens on S^2, animated GIFs of both (``animate``)."""
from .animate import animate  # noqa: F401
from .circle import density_overlay, spacetime  # noqa: F401
from .sphere import density_map, particles_on_density  # noqa: F401
