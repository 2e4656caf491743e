"""Every public function and class of the documented packages has a numpydoc docstring with the
sections a reader looks for: Parameters (when it takes arguments), Returns (functions) and Examples
(run by tests/test_doctests.py). Public: named in the module's ``__all__``, or, without one, every
function and class the module defines whose name does not start with an underscore."""
import importlib
import inspect
import pkgutil

import pytest

DOCUMENTED = ("meanfield", "meanfield.solvers")
# not API: the experiment scripts, ``python -m meanfield``, and subpackages listed on their own
NOT_API = ("meanfield.validation", "meanfield.__main__")
SEPARATE = ("meanfield.solvers",)


def package_modules(package):
    """Names of the modules of ``package`` (itself included), without NOT_API and without the
    subpackages in SEPARATE other than ``package`` itself."""
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    skip = NOT_API + tuple(s for s in SEPARATE if s != package)
    return [n for n in names if not any(n == s or n.startswith(s + ".") for s in skip)]


def public_objects(module):
    """(name, object) of the public functions (Numba-compiled ones included) and classes of ``module``."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    objects = [(n, getattr(module, n)) for n in names]
    # re-exports (the package's lazy names) are checked in the module that defines them
    return [(n, obj) for n, obj in objects if (is_function(obj) or inspect.isclass(obj))
            and getattr(obj, "__module__", None) == module.__name__]


def is_function(obj):
    """A Python function, or one compiled by Numba (a dispatcher wrapping it)."""
    return inspect.isfunction(inspect.unwrap(obj)) if callable(obj) and not inspect.isclass(obj) else False


def takes_arguments(obj):
    """Whether ``obj`` (a function, or a class through its constructor) has named parameters."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return any(p.kind not in kinds for p in signature.parameters.values())


def sections(obj):
    """The numpydoc section titles of ``obj``'s docstring (a title line over a line of dashes)."""
    lines = (inspect.getdoc(obj) or "").splitlines()
    return {a.strip() for a, b in zip(lines, lines[1:]) if b.strip() and set(b.strip()) == {"-"}
            and len(b.strip()) == len(a.strip())}


PUBLIC = sorted({(f"{module}.{name}", obj) for package in DOCUMENTED for module in package_modules(package)
                 for name, obj in public_objects(importlib.import_module(module))}, key=lambda item: item[0])


def required(obj):
    need = {"Examples"}
    if takes_arguments(obj):
        need.add("Parameters")
    if not inspect.isclass(obj):
        need.add("Returns")
    return need


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_public_docstring_has_numpydoc_sections(name, obj):
    missing = required(obj) - sections(obj)
    assert not missing, f"{name}: docstring lacks {sorted(missing)}"
    summary = (inspect.getdoc(obj) or "").splitlines()[0]
    assert summary.strip(), f"{name}: docstring has no one-line summary"


def test_the_public_api_is_found():
    """The collection sees the whole public API (a broken walk would make the test above vacuous)."""
    names = {name for name, _ in PUBLIC}
    assert len(names) >= 150
    for expected in ("meanfield.transport.sphere.wasserstein", "meanfield.models.SA",
                     "meanfield.plotting.circle.spacetime",
                     "meanfield.exact.mobius_push", "meanfield.checks.as_points"):
        assert expected in names


def test_sections_reads_numpydoc_titles():
    def documented(x):
        """One line.

        Parameters
        ----------
        x : float

        Returns
        -------
        float

        Examples
        --------
        >>> documented(1.0)
        1.0
        """
        return x

    def undocumented(x):
        """One line, and prose: Parameters, Returns and Examples are words here."""
        return x

    assert required(documented) <= sections(documented)
    assert required(undocumented) - sections(undocumented) == {"Parameters", "Returns", "Examples"}
