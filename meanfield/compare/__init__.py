"""Particles against the density PDE: on S^1 and S^2 (``compare``, ``meanfield compare``), causal attention
on [0, 1] × S^1 (``causal``) and zonal densities on S^{d-1} (``zonal``).

One job per module: ``core`` runs a comparison, ``cells`` resolves and checks the density's cells,
``density`` solves the PDE on them, ``tokens`` draws the particles' initial data, ``distances`` computes
the distance series and its reference lines, ``report`` holds the result (``Comparison``) and reads a
report folder (``meanfield.cli.report.write_report`` writes one)."""
from .causal import CausalComparison
from .cells import FLUX, check_density_settings, coarser_cells, describe_grid, sphere_cells
from .core import check_same_problem, compare
from .density import density_solver
from .distances import quantum_level
from .report import Comparison, read_report
from .tokens import initial_tokens

__all__ = ["Comparison", "CausalComparison", "compare", "sphere_cells", "coarser_cells", "describe_grid",
           "density_solver", "check_density_settings", "check_same_problem", "initial_tokens", "read_report",
           "quantum_level", "FLUX"]
