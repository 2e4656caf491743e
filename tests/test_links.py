"""Every link of README.md and of the documentation pages resolves: relative links to a file of
the repository, anchors to a heading of their page.  External URLs cannot be fetched here (the
test machines have no network): they are only checked to be well formed."""
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = {"auto_examples", "_build", "gallery.md"}   # built by the docs build
PAGES = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*.md")
                                      if not GENERATED & set(p.relative_to(ROOT / "docs").parts))

FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", flags=re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", flags=re.M)
HTML = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", flags=re.I)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", flags=re.M)
LABEL = re.compile(r"^\((\S+)\)=\s*$", flags=re.M)


def _text(page):
    """The page without code and formulas (fenced blocks, inline code and $…$ hold no links)."""
    return MATH.sub("", INLINE_CODE.sub("", FENCE.sub("", page.read_text())))


def links(page):
    text = _text(page)
    return LINK.findall(text) + REFERENCE.findall(text) + HTML.findall(text)


def slug(heading):
    """The anchor of a heading, as GitHub and MyST (``myst_heading_anchors``) make it: markup and
    punctuation dropped, lower case, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page):
    """Anchors of a page: its headings' slugs (numbered -1, -2 … when repeated) and MyST labels."""
    text = FENCE.sub("", page.read_text())
    found, seen = set(LABEL.findall(text)), {}
    for _, title in HEADING.findall(text):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def well_formed_url(target):
    parts = urlsplit(target)
    if parts.scheme == "mailto":
        return bool(re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", parts.path, flags=re.I))
    return parts.scheme in ("http", "https") and bool(re.fullmatch(r"[a-z0-9.-]+\.[a-z]{2,}(:\d+)?",
                                                                   parts.netloc, flags=re.I))


def broken(page, target):
    """Why ``target`` (a link on ``page``) does not resolve, or None."""
    parts = urlsplit(target)
    if parts.scheme:
        return None if well_formed_url(target) else "malformed URL"
    path, fragment = unquote(parts.path), unquote(parts.fragment)
    destination = page if not path else (page.parent / path).resolve()
    if not destination.exists():
        return f"no file {path}"
    try:
        destination.relative_to(ROOT)
    except ValueError:
        return f"{path} is outside the repository"
    if fragment and destination.suffix == ".md" and fragment not in anchors(destination):
        return f"no heading #{fragment} in {destination.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page):
    found = links(page)
    problems = [f"{target}: {why}" for target in found if (why := broken(page, target))]
    assert not problems, f"{page.relative_to(ROOT)}: broken links\n" + "\n".join(problems)


def test_link_finder_sees_links_and_rejects_broken_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# A title: with `code`\n\n## Repeated\n\n## Repeated\n\n(label)=\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#a-title-with-code) [b](other.md#repeated-1) [c](other.md#label) "
                    "[d](other.md#nope) [e](missing.md) ![f](other.md) [g](https://example.org/x) "
                    "[h](https://exa mple) [i](#local) $\\Phi[\\rho](x)$\n\n```\n[j](not-a-link.md)\n```\n\n# Local\n")
    found = links(page)
    assert found == ["other.md#a-title-with-code", "other.md#repeated-1", "other.md#label", "other.md#nope",
                     "missing.md", "other.md", "https://example.org/x", "#local"]
    assert [t for t in found if broken(page, t)] == ["other.md#nope", "missing.md"]
    assert broken(page, "https://exa") == "malformed URL"
