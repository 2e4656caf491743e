"""One namespace: the engines install as ``meanfield.solvers``, nothing generic at the top level,
and the layers import downwards only (mathematics <- engines <- analysis)."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import meanfield

ROOT = Path(meanfield.__file__).resolve().parent
SOLVERS = Path(meanfield.solvers.__file__).resolve().parent
# The mathematics layer: what the engines may import from meanfield.
# the mathematics layer, and the input, file and work-budget utilities beside it (no engine, no analysis)
CORE = {"checks", "geometry", "models", "theory", "measures", "sampling", "interpolation", "atomic", "budget",
        "npzfile", "progress", "summaries"}


def _run_elsewhere(tmp_path, code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_no_top_level_solvers_package(tmp_path):
    out = _run_elsewhere(tmp_path, "import importlib.util, meanfield.solvers.particles as p;"
                                   "print(importlib.util.find_spec('solvers') is None, p.__name__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "meanfield.solvers.particles"]


def test_stray_solvers_module_in_working_directory_is_harmless(tmp_path):
    (tmp_path / "solvers.py").write_text("raise RuntimeError('user module imported')\n")
    out = _run_elsewhere(tmp_path, "import meanfield as mf; x = mf.uniform_sphere(8, 3, seed=0);"
                                   "print(mf.energy(x, 1.0) > 0)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_short_aliases():
    from meanfield.solvers import circle, particles, sphere
    assert meanfield.particles is particles and meanfield.circle is circle and meanfield.sphere is sphere


def _package(path):
    """The dotted package a file of meanfield or meanfield.solvers belongs to (subfolders included)."""
    root, name = (SOLVERS, "meanfield.solvers") if path.is_relative_to(SOLVERS) else (ROOT, "meanfield")
    return ".".join([name, *path.parent.relative_to(root).parts])


def _meanfield_imports(path):
    """Modules of meanfield that a file imports (absolute or relative), at any depth in the file."""
    tree = ast.parse(path.read_text())
    package = _package(path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.update(f"{base}.{a.name}" if not node.module else base for a in node.names)
    return {n for n in names if n.startswith("meanfield")}


@pytest.mark.parametrize("name", sorted(CORE))
def test_mathematics_layer_does_not_import_engines_or_analysis(name):
    for mod in _meanfield_imports(ROOT / f"{name}.py"):
        sub = mod.split(".")[1] if "." in mod else ""
        assert sub in CORE, f"meanfield.{name} imports {mod}"


@pytest.mark.parametrize("path", sorted(SOLVERS.rglob("*.py")), ids=lambda p: str(p.relative_to(SOLVERS)))
def test_engines_import_only_the_mathematics_layer(path):
    for mod in _meanfield_imports(path):
        parts = mod.split(".")
        if parts[:2] == ["meanfield", "solvers"]:
            continue
        assert len(parts) > 1 and parts[1] in CORE, f"{_package(path)}.{path.stem} imports {mod}"


def test_package_folders_are_found():
    """The layer rules walk the subfolders: the kernels and meshes of the engines, the analysis packages."""
    assert {p.parent.name for p in SOLVERS.rglob("*.py")} >= {"solvers", "kernels", "meshes"}
    assert _package(SOLVERS / "meshes" / "voronoi.py") == "meanfield.solvers.meshes"
    assert _package(ROOT / "transport" / "sphere.py") == "meanfield.transport"
    assert "meanfield.checks" in _meanfield_imports(ROOT / "transport" / "sphere.py")


# ---------------------------------------------------------------------------------------------------------------
# The import graph of the whole package, read from the source (function-level imports counted)

# the interfaces: the command line (``sweep`` is the ``meanfield sweep`` command and its runner; its task
# ``particle_clusters`` runs an engine and counts clusters, and stays there: its module:qualname is part of
# every stored task's key), figures and plots
INTERFACES = {"cli", "plotting", "__main__", "sweep"}


def _module_name(path):
    """The dotted name of a source file of meanfield or meanfield.solvers (a package for ``__init__.py``)."""
    package = _package(path)
    return package if path.stem == "__init__" else f"{package}.{path.stem}"


def _source_files():
    return {_module_name(p): p for p in [*ROOT.rglob("*.py"), *SOLVERS.rglob("*.py")]
            if not p.is_relative_to(SOLVERS) or p.parent.name != "__pycache__"}


MODULES = _source_files()


def _imports(name):
    """What module ``name`` imports from the package: a list of (module, imported name or None, line),
    function-level imports included, relative imports and ``from package import module`` resolved to
    modules; and, for names bound to a module of the package, the attributes read from it."""
    path = MODULES[name]
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    found, module_names = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    found.append((alias.name, None, node.lineno))
                    if alias.asname:
                        module_names[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base not in MODULES:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    found.append((full, None, node.lineno))
                    module_names[alias.asname or alias.name] = full
                else:
                    found.append((base, alias.name, node.lineno))
    for node in ast.walk(tree):       # private attributes of an imported module: ``sphere._Stage``
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_names):
            found.append((module_names[node.value.id], node.attr, node.lineno))
    return found


def _private(attr):
    return attr is not None and attr.startswith("_") and not attr.startswith("__")


def _graph():
    return {name: sorted({m for m, _, _ in _imports(name) if m != name}) for name in MODULES}


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _layer(name):
    """``core``, ``engine``, ``analysis``, ``interface`` or ``package`` (the two top-level ``__init__``)."""
    parts = name.split(".")
    if name in ("meanfield", "meanfield.solvers"):
        return "package"
    if parts[1] == "solvers":
        return "engine"
    if parts[1] in CORE:
        return "core"
    if parts[1] in INTERFACES:
        return "interface"
    return "analysis"


def test_graph_finds_every_module_and_resolves_imports():
    assert {"meanfield.compare", "meanfield.solvers.meshes.voronoi", "meanfield.cli.report"} <= set(MODULES)
    graph = _graph()
    assert "meanfield.solvers.meshes.voronoi" in graph["meanfield.solvers.meshes.remesh"]
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


def test_no_import_cycles():
    """No circle of imports, function-level imports counted (an import in a function that breaks a
    circle at load time still makes two modules depend on each other)."""
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_private_names_across_modules():
    """No module uses a private name (``_x``) of another module of the package, imported or read as an
    attribute; private modules (``solvers._numba_env``) are the package's own and may be imported."""
    bad = [f"{name}:{line} uses {module}.{attr}" for name in sorted(MODULES)
           for module, attr, line in _imports(name)
           if module != name and _private(attr)]
    assert not bad, "\n".join(bad)


def test_layers_import_downwards():
    """mathematics < engines < analysis < interfaces: an engine imports only the mathematics layer and
    other engine modules; the mathematics layer no engine; the analysis layer no interface."""
    allowed = {"core": {"core"}, "engine": {"core", "engine", "package"},
               "analysis": {"core", "engine", "analysis", "package"},
               "interface": {"core", "engine", "analysis", "interface", "package"},
               "package": {"core", "engine", "analysis", "interface", "package"}}
    bad = [f"{name} ({_layer(name)}) imports {module} ({_layer(module)})"
           for name, imported in _graph().items() for module in imported
           if _layer(module) not in allowed[_layer(name)]]
    assert not bad, "\n".join(bad)


# The function-level imports of the package's own modules that stay: each defers a heavy dependency.
# The commands (``meanfield.cli.*``, ``meanfield.sweep``) parse their options before loading an engine
# (Numba, SciPy): ``meanfield --help`` costs no more than numpy.  PyTorch loads only for backend="torch".
DEFERRED_IN = ("meanfield.cli", "meanfield.sweep")
DEFERRED = {("meanfield.solvers.particles", "meanfield.solvers.torch_backend")}


def _function_imports(name):
    """(imported module, line) of every import of the package inside a function of module ``name``."""
    tree = ast.parse(MODULES[name].read_text())
    lines = {node.lineno for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
    return {(module, line) for module, _, line in _imports(name) if line in lines}


def test_function_level_imports_only_defer_heavy_dependencies():
    """No import inside a function to break a circle: only the commands and the optional PyTorch backend
    import the package's modules inside functions."""
    bad = [f"{name}:{line} imports {module}" for name in sorted(MODULES) if not name.startswith(DEFERRED_IN)
           for module, line in sorted(_function_imports(name))
           if (name, module) not in DEFERRED]
    assert not bad, "\n".join(bad)
