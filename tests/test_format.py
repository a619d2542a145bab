"""The code of every chapter and every exercise master fits the website's code column and is formatted.

tools/format_code.py runs ruff format (pinned in requirements-dev.txt) on each code cell at the width of
the built site's code column (77 characters at a 1280-pixel window). A line that is too long, or a cell
that formatting would change, fails here with its file and line; `tools/format_code.py FILE` fixes the
formatting, and a long string or comment is split by hand.
"""

import subprocess
import sys

import pytest

from tools import built_site

ROOT = built_site.ROOT
FILES = sorted(ROOT.glob("chapters/*.md")) + sorted(ROOT.glob("solutions/*.md"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_code_is_formatted_and_fits_the_page(path):
    run = subprocess.run(
        [sys.executable, "-m", "tools.format_code", "--check", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, (
        f"run `.venv/bin/python -m tools.format_code {path.relative_to(ROOT)}`, "
        f"then split what is still too long by hand:\n{run.stdout}{run.stderr}"
    )


def test_the_check_fails_on_a_long_line_and_on_unformatted_code(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("# A page\n\n```{code-cell} ipython3\nx = [1,2]\nprint('" + "a" * 90 + "')\n```\n")
    run = subprocess.run(
        [sys.executable, "-m", "tools.format_code", "--check", str(bad)], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 1
    assert f"{bad}:4: the cell would be reformatted" in run.stdout
    assert f"{bad}:5: line of 99 characters (at most 77)" in run.stdout


COLUMN = 77  # characters of the site's output column, as of its code column


def wide_output_lines(nb):
    """(cell number, line) of every printed line wider than the page's column, in a golden notebook."""
    from tools.notebooks import code_cells, output_text

    return [
        (i, line)
        for i, cell in enumerate(code_cells(nb), 1)
        for line in output_text(cell).splitlines()
        if len(line) > COLUMN
    ]


@pytest.mark.parametrize("page", built_site.chapter_pages(), ids=lambda p: p.removeprefix("chapters/"))
def test_printed_output_fits_the_page(page):
    """No printed line is wider than the column it is shown in (a wider one scrolls sideways): wrap it or
    tabulate it in the cell that prints it."""
    from tools.notebooks import read_golden

    wide = wide_output_lines(read_golden(page.removeprefix("chapters/")))
    assert not wide, "\n".join(f"{page}.md, cell {i}: {len(line)} characters: {line[:90]}" for i, line in wide[:10])


def test_a_wide_printed_line_is_found():
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('x' * 78)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 78 + "\nshort\n")]
    nb.cells = [cell]
    assert wide_output_lines(nb) == [(1, "x" * 78)]
