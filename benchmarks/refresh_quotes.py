"""Rewrite the quoted numbers of the user-facing pages from the results files their markers name.

A quoted measurement carries its source (``tests/test_quoted_numbers.py``)::

    takes 5.9 s<!-- from: benchmarks/results/commands.json:compare.wall_s -->

After a benchmark has written a results file again, this script replaces each marked number by the value
the marker names, written with as many decimals as before (or in e-notation with as many digits), and
lists what changed.  The prose around the numbers is left alone: read it again, since a claim such as
"faster" may no longer hold.

    python benchmarks/refresh_quotes.py docs/performance.md            # rewrite, list the changes
    python benchmarks/refresh_quotes.py docs/performance.md --check    # list only
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_quoted_numbers import MARKER, _value  # noqa: E402  (the test's own reading of the markers)


def written_like(old, value):
    """``value`` written with the decimals (or the e-notation digits) of the number ``old``."""
    mantissa, e, _ = old.lower().partition("e")
    if e:
        digits = len(mantissa.replace("-", "").replace(".", "")) - 1
        return f"{value:.{digits}e}".replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")
    decimals = len(mantissa.partition(".")[2])
    return f"{value:.{decimals}f}"


def refresh(text):
    """(new text, [(old, new, source)]) with every marked number recomputed."""
    changes, pieces, last = [], [], 0
    for match in MARKER.finditer(text):
        quoted, file, key, scale = match.group(1), match.group(2), match.group(3), match.group(4)
        value = _value(file, key) * (float(scale) if scale else 1.0)
        new = written_like(quoted, value)
        new = quoted if float(new) == float(quoted) else new       # the same number: its spelling kept
        pieces += [text[last:match.start(1)], new]
        last = match.end(1)
        if new != quoted:
            changes.append((quoted, new, f"{file}:{key}"))
    pieces.append(text[last:])
    return "".join(pieces), changes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--check", action="store_true", help="list the changes, write nothing")
    args = parser.parse_args()
    for page in args.pages:
        with open(page, encoding="utf-8") as fh:
            text = fh.read()
        new, changes = refresh(text)
        for old, value, source in changes:
            print(f"{page}: {old} -> {value}  ({source})")
        if changes and not args.check:
            with open(page, "w", encoding="utf-8") as fh:
                fh.write(new)


if __name__ == "__main__":
    main()
