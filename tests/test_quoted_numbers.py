"""Every measured number quoted by the user-facing pages comes from a results file a script writes.

A quoted measurement (a timing, a distance, an order, a ratio) is written with its source right after
it, as an HTML comment that Markdown does not render::

    takes 5.9 s<!-- from: benchmarks/results/commands.json:compare.wall_s -->
    W1 = 0.0044<!-- from: benchmarks/results/commands.json:compare.w1_final -->
    7.1×<!-- from: benchmarks/results/contenders_phase.json:0.median_seconds.jax / 0.median_seconds.meanfield -->

The key is a dotted path into the JSON (integers index lists; a part holding dots or slashes is
written in double quotes); ``a / b`` quotes the ratio of two
entries of the same file, ``scale=1000`` a value in other units (ms for seconds). The quoted number
must equal the value rounded to the digits shown: |quoted − value| ≤ half a unit of its last digit
(a range quotes two values, each with its own marker: "a s<!-- … -->–b s<!-- … -->"). A number
that is a formula's value, not a measurement, carries ``<!-- formula -->`` instead.

Terminal output in a code block is checked line by line against what the script recorded: a fenced
block opened right after ``<!-- output: PATH:KEY -->`` may only hold lines of that recorded output
(and ``...``).

Every timing (s, ms, min), ratio (×) and distance written ``W1 = …`` / ``W2 ≈ …`` in the pages'
prose must carry one of the two markers: an unmarked one fails the test.
"""
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md", "docs/index.md", "docs/performance.md", "docs/particles_vs_density.md",
         "docs/comparison.md", "docs/full_model.md"]

NUMBER = r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)"
MARKER = re.compile(NUMBER + r"\s*(?:s|ms|min|rad|%|×|x)?\s*<!-- from: ([^\s:]+):(.+?)(?: scale=([\d.e+-]+))? -->")
OUTPUT = re.compile(r"<!-- output: ([^\s:]+):(\S+) -->\s*\n```[^\n]*\n(.*?)\n```", re.S)
# measurements in prose: a number with a unit of time or a ratio sign, or a W_p value
QUANTITY = re.compile(r"(?<![\w.^{/-])(?:\d+(?:\.\d+)?\s*[–-]\s*)?\d+(?:\.\d+)?(?:e-?\d+)?\s*"
                      r"(?:s|ms|µs|ns|min|seconds|minutes|×(?!\s*\d))(?![\w^])"
                      r"|W_?\{?[12]\}?\s*(?:=|≈)\s*\d[\d.e-]*")
FENCE = re.compile(r"```.*?```", re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def _lookup(data, path):
    for quoted, plain in re.findall(r'"([^"]*)"|([^."]+)', path.strip()):
        part = quoted or plain
        data = data[int(part)] if isinstance(data, list) else data[part]
    return float(data)


def _value(file, key):
    with open(os.path.join(ROOT, file)) as fh:
        data = json.load(fh)
    parts = re.split(r' / (?=(?:[^"]*"[^"]*")*[^"]*$)', key)      # " / " outside quoted key parts
    value = _lookup(data, parts[0])
    return value / _lookup(data, parts[1]) if len(parts) == 2 else value


def _digits_unit(text):
    """Half a unit of the last digit written in ``text`` (a decimal or e-notation number)."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def _marked(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as fh:
        return fh.read()


@pytest.mark.parametrize("page", PAGES)
def test_marked_numbers_match_their_results_file(page):
    text = _marked(page)
    wrong = []
    for match in MARKER.finditer(text):
        quoted, file, key, scale = match.group(1), match.group(2), match.group(3), match.group(4)
        value = _value(file, key) * (float(scale) if scale else 1.0)
        if abs(float(quoted) - value) > _digits_unit(quoted) * (1 + 1e-9):
            wrong.append(f"{quoted} quotes {file}:{key} = {value:.6g}")
    assert not wrong, f"{page}: " + "; ".join(wrong)


@pytest.mark.parametrize("page", PAGES)
def test_terminal_output_is_what_the_script_recorded(page):
    for match in OUTPUT.finditer(_marked(page)):
        with open(os.path.join(ROOT, match.group(1))) as fh:
            data = json.load(fh)
        for part in match.group(2).split("."):
            data = data[part]
        recorded = {line.rstrip() for line in data}
        shown = [line.rstrip() for line in match.group(3).splitlines() if line.strip() not in ("...", "…")]
        assert set(shown) <= recorded, f"{page}: not printed by the command: {sorted(set(shown) - recorded)}"


@pytest.mark.parametrize("page", PAGES)
def test_every_quoted_measurement_is_marked(page):
    prose = INLINE_CODE.sub("", FENCE.sub("", _marked(page)))
    unmarked = []
    for match in QUANTITY.finditer(prose):
        after = prose[match.end():match.end() + 12].lstrip()
        is_range = re.search(r"\d\s*[–-]\s*\d", match.group(0)) is not None     # quote each end with its marker
        if is_range or not (after.startswith("<!-- from:") or after.startswith("<!-- formula")):
            unmarked.append(match.group(0))
    assert not unmarked, f"{page}: measurements without a results file: {unmarked}"


def test_the_markers_are_recognised():
    text = ("takes 5.9 s<!-- from: f.json:a --> and 7.1×<!-- from: f.json:b / a --> "
            "W2 = 0.050<!-- formula --> 12 s later, 4–6× and 3000 × 3000")
    assert [m.group(1) for m in MARKER.finditer(text)] == ["5.9", "7.1"]
    assert [m.group(0) for m in QUANTITY.finditer(text)] == ["5.9 s", "7.1×", "W2 = 0.050", "12 s", "4–6×"]
    assert _digits_unit("5.9") == pytest.approx(0.05) and _digits_unit("4.4e-3") == pytest.approx(5e-5)
    assert _digits_unit("18") == pytest.approx(0.5)
    data = {"a": [{"x.y / z": 6.0}], "b": 2.0}
    assert _lookup(data, 'a.0."x.y / z"') == 6.0
