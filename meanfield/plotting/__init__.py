"""Plots of particle and density solutions (matplotlib)."""
