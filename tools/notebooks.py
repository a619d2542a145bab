"""Helpers shared by the golden-notebook script, the prose check and the tests: where chapters and goldens live,
how to read them, and the one grammar of numbers as they are written in prose, in outputs and in code."""

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
    """Every chapter, by file stem (e.g. '01_next_token_prediction'), in the order of _toc.yml, the one
    registry of the book's pages (tests/test_links.py checks that every file of chapters/ is in it)."""
    from tools.built_site import chapter_pages

    return [page.removeprefix("chapters/") for page in chapter_pages()]


def read_chapter(name):
    return jupytext.read(CHAPTERS / f"{name}.md")


def read_golden(name):
    return nbformat.read(GOLDEN / f"{name}.ipynb", as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def why_stale(name, mine, golden, tags=True):
    """Why the golden of `name` is stale, or None when it is not: the one test of "the golden is stale" (the
    sync test, the thread-count test and the prose check ask it). `mine` are the code cells the golden must hold,
    in order (the chapter's, as Jupytext or MyST-NB reads it); `golden` the golden's; with `tags`, each cell's
    tags must match too (nbval reads them: nbval-ignore-output, raises-exception)."""
    fix = f"run `make golden CH={name}`"
    if len(mine) != len(golden):
        return f"{name}: the chapter has {len(mine)} code cells, its golden {len(golden)}; {fix}"
    for i, (cell, gold) in enumerate(zip(mine, golden), start=1):
        if cell.source != gold.source:
            return f"{name}: code cell {i} differs from its golden; {fix}"
        if tags and cell.metadata.get("tags", []) != gold.metadata.get("tags", []):
            return f"{name}: the tags of code cell {i} differ from its golden's; {fix}"
    return None


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


# ----------------------------------------------------------------------------------------------------
# numbers as they are written, in prose, in outputs and in code: the one grammar of the checks

# A number as it is written, with its sign: 1,000 or -0.933 or \u22122.61 or 10,000,000; not part of a word or a
# version (1.2.3). Group 1 is the sign, 2 the whole part, 3 the decimals.
NUMBER = re.compile(r"(?<![\w.])([-+\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|\.\d)")


def signed(match):
    """Canonical signed form of a NUMBER match: '-2.61', '2048', '0.9'."""
    sign = "-" if match.group(1) in ("-", "\u2212") else ""
    return sign + match.group(2).replace(",", "") + (match.group(3) or "")


def numbers_in(text):
    """(canonical signed number, offset of its digits, span) for every number written in `text`."""
    return [(signed(m), m.start(2), m.span()) for m in NUMBER.finditer(text)]


def magnitudes(text):
    """The canonical numbers written in `text`, signs dropped ('-2.61' gives '2.61')."""
    return {value.lstrip("-") for value, _, _ in numbers_in(text)}


def normalise(text):
    """A written number in one canonical form: no sign, no thousands commas ('-2.61' -> '2.61')."""
    m = NUMBER.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a number: {text!r}")
    return signed(m).lstrip("-")


def code_literals(source, where=None):
    """Canonical signed forms of the numeric literals of a code cell (its inputs); 2.0 also counts as 2.
    `where`, a dict, receives for each literal the source lines that hold it."""
    lines = [ln if not ln.lstrip().startswith(("%", "!")) else "" for ln in source.splitlines()]
    found = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        sign = ""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            node, sign = node.operand, "-"
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            forms = {sign + (repr(node.value) if isinstance(node.value, float) else str(node.value))}
            if isinstance(node.value, float) and node.value.is_integer() and abs(node.value) < 1e15:
                forms.add(sign + str(int(node.value)))
            found |= forms
            if where is not None:
                for form in forms:
                    where.setdefault(form, []).append(lines[node.lineno - 1])
    return found


def printed_numbers(nb):
    """Every number the golden's cells printed, canonical, signs dropped."""
    return {n for cell in code_cells(nb) for n in magnitudes(output_text(cell))}
