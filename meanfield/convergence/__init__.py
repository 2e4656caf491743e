"""Particles and densities converging to each other (``meanfield convergence``): on S^1 and S^2
(``core``) and for causal attention (``causal``)."""
from .core import ConvergenceStudy, figure, observed_order, reference_size, study

__all__ = ["ConvergenceStudy", "study", "observed_order", "figure", "reference_size"]
