"""Plots of particle and density solutions (matplotlib)."""
from .circle import density_overlay, spacetime  # noqa: F401
