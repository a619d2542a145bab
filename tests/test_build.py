"""The book builds with warnings as errors, and every chapter page carries its figures.

This runs the build of `make book` (tools/built_site.py), unless the site is already built from the
current sources by a build that had no warning; with `execute_notebooks: cache` a chapter is executed
again only when it changed, and a failing cell fails the build.
"""

import json
import re

import nbformat

from tools import built_site
from tools.notebooks import chapter_names, code_cells, read_chapter, read_golden


def test_book_builds_without_warnings():
    ok, message = built_site.ensure_built()
    assert ok, message
    # the first step of the build executed every notebook, several at once, into the cache the build reads:
    # a notebook the build ran again means the two read a page differently (and the build took longer)
    assert json.loads(built_site.RESULT.read_text())["executed_by_build"] == []

    html = built_site.HTML
    assert (html / "intro.html").exists()
    for name in chapter_names():
        page = (html / "chapters" / f"{name}.html").read_text()
        figures = sum(
            "mystnb" in c.metadata and "figure" in c.metadata["mystnb"] for c in code_cells(read_chapter(name))
        )
        shown = len(re.findall(r"<figure\b", page))
        assert shown == figures, f"{name}: {figures} figure cells, {shown} figures on the page"
        images = re.findall(r'<img [^>]*src="([^"]+)"', page)
        assert all((html / "chapters" / src).resolve().exists() for src in images), f"{name}: an image file is missing"


def test_the_download_of_each_chapter_holds_its_outputs():
    """The page's .ipynb download (and _build/jupyter_execute/) comes from the cache with its outputs:
    every code cell that prints in the golden prints in the download (_ext/site_fixes.py)."""
    ok, message = built_site.ensure_built()
    assert ok, message
    for name in chapter_names():
        download = nbformat.read(built_site.HTML / "_sources" / "chapters" / f"{name}.ipynb", as_version=4)
        printing = [bool(c.get("outputs")) for c in code_cells(read_golden(name))]
        assert [bool(c.get("outputs")) for c in code_cells(download)] == printing, f"{name}: outputs missing"
