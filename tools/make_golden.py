"""Regenerate the golden notebooks: `make golden` (all chapters) or `make golden CH=01_next_token_prediction`.

Each chapter's Markdown source is converted to a notebook and executed from the
chapters folder, as the book build does. A golden keeps only what nbval compares:
the code cells, in the chapter's order, with their text outputs (image data is
stripped: nbval does not compare images, and it keeps the repository small). The
prose lives in the chapter alone, so editing a sentence never leaves a stale copy.
"""

from __future__ import annotations

import sys

import jupytext
import nbformat
from nbclient import NotebookClient

from tools.notebooks import CHAPTERS, GOLDEN, chapter_names

IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")


def strip(nb):
    nb.cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            for key in IMAGE_TYPES:
                out.get("data", {}).pop(key, None)
            out.get("metadata", {}).clear() if "metadata" in out else None
    nb.metadata.pop("widgets", None)
    return nb


def make(name):
    nb = jupytext.read(CHAPTERS / f"{name}.md")
    nb.metadata.pop("jupytext", None)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(CHAPTERS)}}).execute()
    GOLDEN.mkdir(parents=True, exist_ok=True)
    nbformat.write(strip(nb), GOLDEN / f"{name}.ipynb")
    print(f"wrote tests/golden/{name}.ipynb")


if __name__ == "__main__":
    names = sys.argv[1:] or chapter_names()
    unknown = sorted(set(names) - set(chapter_names()))
    if unknown:
        sys.exit(f"no such chapter: {', '.join(unknown)} (chapters: {', '.join(chapter_names())})")
    for name in names:
        make(name)
