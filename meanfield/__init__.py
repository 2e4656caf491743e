"""meanfield: the mean-field dynamics of self-attention on the sphere.

Transformers as interacting particles (Geshkovski, Letrouit, Polyanskiy, Rigollet,
arXiv:2312.10794): models, energies, geometry, optimal transport and theory.
The engines live in ``meanfield.solvers`` (also as ``mf.particles``, ``mf.circle``, ``mf.sphere``).
Layers: ``checks``, ``geometry``, ``models``, ``theory``, ``measures`` (the mathematics) <-
``meanfield.solvers`` (the engines) <- everything else (energy, transport, comparison, plotting, CLI).

The names below are loaded on first use (as scipy does for its submodules): ``import meanfield``
and ``meanfield --help`` cost almost nothing, and ``mf.SA`` imports ``meanfield.models`` the first
time it is asked for.
"""
import importlib
import sys
import types

from .solvers import _numba_env  # noqa: F401  (sets up the Numba cache before any kernel is compiled)

__version__ = "0.1.0"

# the engines, under short names
_MODULES = {"circle": "meanfield.solvers.circle", "particles": "meanfield.solvers.particles",
            "sphere": "meanfield.solvers.sphere"}
# public function or class -> the module that defines it
_LAZY = {
    "energy": "meanfield.energy", "log_energy": "meanfield.energy",
    **{name: "meanfield.geometry" for name in ("circle_angles", "circle_points", "geodesic_distance", "normalise",
                                                "random_rotation", "tangent_projection", "uniform_sphere")},
    **{name: "meanfield.models" for name in ("SA", "USA", "FeedForward", "Hardmax", "MultiHead",
                                              "model_from_dict")},
    "velocity": "meanfield.solvers.particles",
    "growth_rate": "meanfield.theory", "most_unstable_mode": "meanfield.theory",
    "wasserstein": "meanfield.transport",
    "perturbed_uniform": "meanfield.measures", "sample_density": "meanfield.measures",
    "discretise": "meanfield.sampling",
    "kde": "meanfield.density_estimation",
}

__all__ = ["SA", "USA", "Hardmax", "MultiHead", "FeedForward", "velocity", "energy", "log_energy", "uniform_sphere",
           "normalise",
           "tangent_projection", "circle_points", "circle_angles", "random_rotation",
           "geodesic_distance", "model_from_dict", "growth_rate", "most_unstable_mode",
           "wasserstein", "sample_density", "perturbed_uniform", "discretise", "kde", "particles", "circle", "sphere"]


def __getattr__(name):
    """Import the module behind a public name on first use and keep the name in the namespace."""
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'meanfield' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Namespace(types.ModuleType):
    """The package module: importing the submodule ``meanfield.energy`` binds it as an attribute of
    the package, which would hide the function ``meanfield.energy``; a public function keeps its name."""

    def __setattr__(self, name, value):
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Namespace
