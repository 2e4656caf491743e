"""The gallery of validation figures (docs/gallery.md), written at every docs build from
``validation/results``: each script of ``validation/`` gets an entry with its figures, the
command that made them and every check its JSON records, so the page shows what the committed
results say and cannot fall behind them.  ``tests/test_gallery.py`` checks that every script has
its figure and its checks."""
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VALIDATION = ROOT / "validation"
RESULTS = VALIDATION / "results"
PAGE = "gallery.md"          # written into the docs source folder (git-ignored)
WITHOUT_CHECKS = {           # scripts whose committed JSON records no checks, and why
    "mean_field_limit": "its full-size JSON predates the checks; the script's `--quick` run checks them "
                        "(validation/README.md)",
}
MAX_ITEMS = 6                # list values shown per check


def scripts():
    """The experiments: every script of validation/ (its stem)."""
    return sorted(p.stem for p in VALIDATION.glob("*.py") if not p.name.startswith("_"))


def figures(name):
    """The figures a script wrote: NAME.png first, then NAME_*.png, then the GIFs."""
    pngs = sorted(RESULTS.glob(f"{name}_*.png"))
    main = RESULTS / f"{name}.png"
    return ([main] if main.is_file() else []) + pngs + sorted(RESULTS.glob(f"{name}*.gif"))


def record(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _number(value):
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _value(value):
    if isinstance(value, list):
        shown = ", ".join(_value(v) for v in value[:MAX_ITEMS])
        return f"[{shown}{', …' if len(value) > MAX_ITEMS else ''}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in list(value.items())[:MAX_ITEMS]) + "}"
    return _number(value)


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def check_rows(checks):
    rows = ["| claim | holds | values |", "|---|---|---|"]
    for check in checks:
        values = "; ".join(f"{k} = {_value(v)}" for k, v in check.items() if k not in ("claim", "passed"))
        rows.append(f"| {_cell(check.get('claim', ''))} | {'yes' if check.get('passed') else '**no**'} | "
                    f"{_cell(values)} |")
    return rows


def entry(name):
    """The Markdown of one script's entry."""
    data = record(name)
    title = name.replace("_", " ").capitalize()
    lines = [f"## {title}", "", f"Script `validation/{name}.py`."]
    if data.get("description"):
        lines += ["", data["description"]]
    facts = []
    if data.get("command"):
        facts.append(f"made by `{data['command']}`")
    if data.get("seconds") is not None:
        facts.append(f"in {data['seconds']:.0f} s")
    if data.get("quick"):
        facts.append("**a `--quick` run** (small sizes)")
    if facts:
        lines += ["", "The committed results were " + ", ".join(facts) + "."]
    for figure in figures(name):
        lines += ["", f"```{{image}} ../validation/results/{figure.name}", f":alt: {figure.name}", ":width: 100%",
                  "```"]
    checks = data.get("checks") or []
    if checks:
        held = sum(bool(c.get("passed")) for c in checks)
        lines += ["", f"**{held} of {len(checks)} checks hold.**", ""] + check_rows(checks)
    else:
        lines += ["", f"No checks recorded: {WITHOUT_CHECKS.get(name, 'the JSON has none')}."]
    return "\n".join(lines)


def page():
    names = scripts()
    head = ["# Gallery of the validation figures", "",
            "Every figure that `meanfield figures` (the scripts of `validation/`) writes to "
            "`validation/results/`, with the checks its JSON records: each script asserts its claims and "
            "fails when one does not hold.  This page is generated from those files at every documentation "
            "build; [the paper's figures](figures.md) says what each experiment computes and at which size.", ""]
    head += [f"- [{n.replace('_', ' ').capitalize()}](#{n.replace('_', '-')})" for n in names]
    return "\n".join(head + [""] + [entry(n) + "\n" for n in names])


def write(srcdir):
    """Write the page into the docs source folder ``srcdir`` (the figures stay where they are)."""
    (Path(srcdir) / PAGE).write_text(page())


def setup(app):
    app.connect("builder-inited", lambda app: write(app.srcdir))
    return {"parallel_read_safe": True}
