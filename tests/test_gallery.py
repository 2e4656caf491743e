"""The docs' gallery of validation figures (docs/_ext/gallery.py, written at every docs build)
has an entry for every script of validation/, with its figures and the checks its JSON records."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("gallery", ROOT / "docs" / "_ext" / "gallery.py")
gallery = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gallery)
SCRIPTS = gallery.scripts()


def test_scripts_are_the_validation_experiments():
    assert len(SCRIPTS) >= 17 and "kuramoto" in SCRIPTS and "__init__" not in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_has_a_gallery_entry_with_its_figures_and_checks(name):
    entry = gallery.entry(name)
    figures = gallery.figures(name)
    assert any(f.suffix == ".png" for f in figures), f"validation/{name}.py has no figure in validation/results"
    for figure in figures:
        assert f"../validation/results/{figure.name}" in entry
    checks = gallery.record(name).get("checks") or []
    if name in gallery.WITHOUT_CHECKS:
        assert not checks, f"{name} now records checks: remove it from gallery.WITHOUT_CHECKS"
        return
    assert checks, f"validation/results/{name}.json records no checks"
    assert all(c["passed"] for c in checks), [c["claim"] for c in checks if not c["passed"]]
    assert f"**{len(checks)} of {len(checks)} checks hold.**" in entry
    assert all(gallery._cell(c["claim"]) in entry for c in checks)


def test_every_committed_figure_is_in_the_gallery():
    shown = {f.name for name in SCRIPTS for f in gallery.figures(name)}
    committed = {p.name for p in (ROOT / "validation" / "results").iterdir() if p.suffix in (".png", ".gif")}
    assert committed - shown == set()


def test_page_lists_every_entry_and_is_written_into_the_docs(tmp_path):
    gallery.write(tmp_path)
    text = (tmp_path / gallery.PAGE).read_text()
    for name in SCRIPTS:
        assert f"(#{name.replace('_', '-')})" in text and gallery.entry(name) in text
    assert gallery.WITHOUT_CHECKS.keys() <= set(SCRIPTS)
