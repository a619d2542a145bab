"""Helpers shared by the golden-notebook script and the tests: where chapters and goldens live, how to read them."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
GOLDEN = ROOT / "tests" / "golden"
# an erratum note in a chapter: a MyST admonition titled "Erratum", fenced by ::: or ```
ERRATUM = re.compile(r"^(:::+|```+)\{admonition\} Erratum.*?^\1\s*$", re.MULTILINE | re.DOTALL)


def chapter_names():
    """Every chapter, by file stem (e.g. '01_next_token_prediction'), in order."""
    return sorted(p.stem for p in CHAPTERS.glob("[0-9][0-9]_*.md"))


def read_chapter(name):
    return jupytext.read(CHAPTERS / f"{name}.md")


def read_golden(name):
    return nbformat.read(GOLDEN / f"{name}.ipynb", as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def output_text(cell):
    """All text a code cell printed or returned (images excluded)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return "\n".join(parts)


# A number as it is written: 1,000 or 0.933 or 10,000,000 or 2.4849, not part of a word or a version.
NUMBER = re.compile(r"(?<![\w.])[-+\u2212]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|\.\d)")


def normalise(text):
    """A written number in one canonical form: no sign, no thousands commas ('-2.61' -> '2.61')."""
    m = NUMBER.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a number: {text!r}")
    return m.group(1).replace(",", "") + (m.group(2) or "")


def numbers_in(text):
    """(canonical number, offset) for every number written in `text`."""
    return [(m.group(1).replace(",", "") + (m.group(2) or ""), m.start()) for m in NUMBER.finditer(text)]


def code_literals(source):
    """Canonical forms of the numeric literals in a code cell (the chapter's inputs)."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            found.add(repr(node.value) if isinstance(node.value, float) else str(node.value))
    return found


def printed_numbers(nb):
    """Every number the golden's cells printed, canonical."""
    return {n for cell in code_cells(nb) for n, _ in numbers_in(output_text(cell))}
