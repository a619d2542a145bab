"""The golden notebooks are the chapters' code cells as they stand, fully executed, and nothing else.

If a chapter's code changes and `make golden` was not run, this fails and names the cell. A golden
holds no Markdown (the prose lives in the chapter only), so no stale copy of a sentence can linger.
"""

import nbformat
import pytest

from tools.notebooks import GOLDEN, chapter_names, code_cells, read_chapter, read_golden, why_stale

CHAPTERS = chapter_names()


def test_every_chapter_has_a_golden_and_no_golden_is_orphaned():
    goldens = sorted(p.stem for p in GOLDEN.glob("*.ipynb"))
    assert goldens == CHAPTERS, "run `make golden`: goldens and chapters differ"


@pytest.mark.parametrize("name", CHAPTERS)
def test_code_cells_match_the_chapter(name):
    stale = why_stale(name, code_cells(read_chapter(name)), code_cells(read_golden(name)))
    assert stale is None, stale


def test_a_stale_golden_is_told_apart():
    """The freshness test itself: a golden one cell short, with a cell edited or a tag dropped, is stale."""
    name = CHAPTERS[0]
    mine = code_cells(read_chapter(name))
    assert why_stale(name, mine, mine) is None
    assert "code cells" in why_stale(name, mine, mine[:-1])
    edited = [nbformat.from_dict({**c, "source": c.source + "\n"}) if i == 1 else c for i, c in enumerate(mine)]
    assert "code cell 2 differs" in why_stale(name, mine, edited)
    tagged = next(i for i, c in enumerate(mine) if c.metadata.get("tags"))
    untagged = [nbformat.from_dict({**c, "metadata": {}}) if i == tagged else c for i, c in enumerate(mine)]
    assert f"tags of code cell {tagged + 1}" in why_stale(name, mine, untagged)
    assert why_stale(name, mine, untagged, tags=False) is None


@pytest.mark.parametrize("name", CHAPTERS)
def test_golden_holds_only_code_cells(name):
    kinds = {c.cell_type for c in read_golden(name).cells}
    assert kinds == {"code"}, f"{name}: the golden holds {sorted(kinds - {'code'})} cells; run `make golden CH={name}`"


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_golden_cell_was_executed(name):
    """nbval skips the comparison of a cell the reference never ran, so a never-run cell would go unchecked."""
    unexecuted = [i for i, c in enumerate(code_cells(read_golden(name)), start=1) if c.execution_count is None]
    assert not unexecuted, f"{name}: code cells {unexecuted} of the golden were never executed"


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_golden_cell_raised_unless_tagged(name):
    for i, cell in enumerate(code_cells(read_golden(name)), start=1):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if errors and "raises-exception" not in cell.metadata.get("tags", []):
            pytest.fail(f"{name}: code cell {i} raised {errors[0].ename}: {errors[0].evalue}")
