"""Sphinx configuration of the meanfield documentation (Markdown pages via MyST, API reference
from the numpydoc docstrings via autodoc + napoleon, example gallery executed at build time)."""
import os
import sys
from datetime import date
from pathlib import Path

import meanfield

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))   # gallery: the validation figures page

os.environ.setdefault("MPLBACKEND", "Agg")

project = "meanfield"
author = "the meanfield developers"
copyright = f"{date.today().year}, {author}"
release = meanfield.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_ext", "auto_examples/*.ipynb", "auto_examples/*.py", "**.codeobj.json"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
# pages link to files of the repository outside docs/ (validation/README.md, benchmarks/...):
# MyST reports those as missing cross-references, which is not an error of the page
suppress_warnings = ["myst.header"]

autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_mock_imports = []
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"\.py$",            # execute every example
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "write_computation_times": False,
}

html_theme = "alabaster"
html_title = f"meanfield {release}"
html_theme_options = {"description": "Mean-field dynamics of self-attention", "fixed_sidebar": True}


# --- plain-text docstrings ----------------------------------------------------------------------
# The package's docstrings write formulas in plain Unicode text: |x| for norms and absolute
# values, and indented blocks for displayed formulas and code. In reStructuredText |x| is a
# substitution and an indented block after a paragraph a quotation, so before napoleon reads
# them, indented blocks become literal blocks and every other | is escaped.

def _literal_blocks(lines):
    """Turn every block indented deeper than the paragraph before it (after a blank line) into
    a literal block; returns (lines, flags) with flags[i] true inside literal blocks."""
    out, flags = [], []
    literal_indent = None
    previous_indent, previous_text, blank = 0, "", True
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if line.strip():
            if literal_indent is not None and indent < literal_indent:
                literal_indent = None
            if literal_indent is None and blank and indent > previous_indent:
                if not previous_text.rstrip().endswith("::"):
                    out.extend([" " * previous_indent + "::", ""])
                    flags.extend([True, True])
                literal_indent = indent
            elif literal_indent is None and line.rstrip().endswith("::"):
                pass
            if literal_indent is None:
                previous_indent, previous_text = indent, line
        blank = not line.strip()
        out.append(line)
        flags.append(literal_indent is not None)
    return out, flags


def _escape_bars(line):
    """Escape | outside ``inline literals``."""
    parts = line.split("``")
    return "``".join(p if k % 2 else p.replace("|", r"\|") for k, p in enumerate(parts))


def _plain_text_docstring(app, what, name, obj, options, lines):
    text, flags = _literal_blocks(list(lines))
    lines[:] = [line if literal else _escape_bars(line) for line, literal in zip(text, flags)]


def setup(app):
    app.connect("autodoc-process-docstring", _plain_text_docstring, priority=400)
