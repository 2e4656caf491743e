"""Numerical engines: interacting particles and finite volumes on S^1 and S^2."""
from . import _numba_env  # noqa: F401  (must run before numba is imported)
