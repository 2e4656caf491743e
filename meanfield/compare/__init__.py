"""Particles against the density PDE: on S^1 and S^2 (``core``, ``meanfield compare``), causal attention
on [0, 1] × S^1 (``causal``) and zonal densities on S^{d-1} (``zonal``)."""
from .core import (FLUX, Comparison, check_density_settings, coarser_cells, compare, density_solver, describe_grid,
                   initial_tokens, quantum_level, read_report, sphere_cells, write_report)

__all__ = ["Comparison", "compare", "write_report", "sphere_cells", "coarser_cells", "describe_grid",
           "density_solver", "check_density_settings", "initial_tokens", "read_report", "quantum_level", "FLUX"]
