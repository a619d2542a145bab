"""The figures the source pages print, typed once from the pages: ``book/data/source_figures/*.csv``.

One file per chapter; a row gives the figure's id, the chapter that covers it, the figure as the
page prints it (``source_text``), the course's corrected figure where the page is wrong
(``course_text``), and a note. ``tools.make_example`` searches for a table that meets these
figures, ``tests/test_example.py`` and ``tests/test_specs.py`` check the example against them,
``tests/test_source_figures.py`` checks each chapter prints them, and the errata page lists the
corrected ones.
"""

from __future__ import annotations

import csv
from pathlib import Path

__all__ = ["FOLDER", "ROWS", "page", "course"]

FOLDER = Path(__file__).with_name("data") / "source_figures"


def _read():
    rows = []
    for path in sorted(FOLDER.glob("*.csv")):
        with path.open(newline="") as f:
            rows += list(csv.DictReader(f))
    return rows


ROWS = _read()
_BY_ID = {row["id"]: row for row in ROWS}


def page(figure_id: str) -> str:
    """The figure as the source page prints it, e.g. page("s1.average-loss") == "1.31"."""
    try:
        return _BY_ID[figure_id]["source_text"]
    except KeyError:
        raise KeyError(f"no source figure {figure_id!r} in {FOLDER}") from None


def course(figure_id: str) -> str:
    """The figure the course prints: the page's, or the corrected one where the page is wrong."""
    page(figure_id)
    return _BY_ID[figure_id]["course_text"] or _BY_ID[figure_id]["source_text"]
