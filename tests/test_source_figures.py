"""Every figure of the source pages that the chapters cover is printed by its chapter.

The table is book/data/source_figures/*.csv (read through `book.source_figures`), one file per chapter: the figure's id, the
chapter that covers it, the figure as the source page prints it, and, where the
source is wrong, the course's corrected figure. A corrected figure must also be
explained in an erratum note in the chapter that quotes the source's figure and
the course's: an admonition titled "Erratum", or, for a mere rounding, a footnote
whose text begins "Erratum" (`[^label]: Erratum ...`, with its indented lines).
"""

import re

import pytest

from book.source_figures import ROWS
from tools.notebooks import CHAPTERS, ERRATUM, chapter_names, magnitudes, normalise, printed_numbers, read_golden

# a MyST footnote definition that opens with "Erratum", and its indented continuation lines
ERRATUM_FOOTNOTE = re.compile(r"^\[\^[\w-]+\]:[ \t]*Erratum.*(?:\n[ \t]+\S.*)*", re.MULTILINE)


def errata_notes(chapter):
    """The text of each Erratum admonition and each Erratum footnote in a chapter."""
    text = (CHAPTERS / f"{chapter}.md").read_text()
    return [m.group(0) for pattern in (ERRATUM, ERRATUM_FOOTNOTE) for m in pattern.finditer(text)]


def test_table_is_well_formed():
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)), "duplicate figure ids"
    for row in ROWS:
        assert row["chapter"] in chapter_names(), f"{row['id']}: unknown chapter {row['chapter']}"
        normalise(row["source_text"])  # each row is one number


# pages of the course that mirror no source page, so have no source figures to print
NOT_FROM_THE_SOURCE = {"11_the_model_in_one_file": "the appendix shows the course's own model, book/tiny.py"}


def test_every_chapter_has_rows():
    covered = {r["chapter"] for r in ROWS}
    labs = {f"{name}_lab" for name in covered}  # a lab measures what its lesson's source figures state
    uncovered = set(chapter_names()) - covered - labs - set(NOT_FROM_THE_SOURCE)
    assert not uncovered, f"chapters without source figures: {uncovered}"
    assert not covered & set(NOT_FROM_THE_SOURCE), "a page listed as not from the source has source figures"


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_figure_is_printed_by_its_chapter(row):
    expected = row["course_text"] or row["source_text"]
    printed = printed_numbers(read_golden(row["chapter"]))
    assert normalise(expected) in printed, (
        f"{row['id']}: the source figure {expected} ({row['note']}) is not printed by chapters/{row['chapter']}.md"
    )


@pytest.mark.parametrize("row", [r for r in ROWS if r["course_text"]], ids=lambda r: r["id"])
def test_corrected_figure_has_an_erratum_note(row):
    quoted = [magnitudes(note) for note in errata_notes(row["chapter"])]  # whole numbers:
    wanted = {normalise(row["source_text"]), normalise(row["course_text"])}  # "256" is not found inside "256.5"
    assert any(wanted <= numbers for numbers in quoted), (
        f"{row['id']}: the course prints {row['course_text']} where the source says {row['source_text']}; "
        f"chapters/{row['chapter']}.md needs an Erratum admonition (or Erratum footnote) quoting both"
    )
