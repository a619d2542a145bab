"""The book builds with warnings as errors, and every chapter page carries its figures.

This runs the same command as `make book`; with `execute_notebooks: cache` a chapter
is executed again only when it changed, and a failing cell fails the build.
"""
import re
import subprocess
import sys
from pathlib import Path

from notebooks import ROOT, chapter_names, code_cells, read_chapter

JB = Path(sys.executable).parent / "jupyter-book"


def test_book_builds_without_warnings():
    run = subprocess.run([str(JB), "build", ".", "-n", "-W", "--keep-going"], cwd=ROOT,
                         capture_output=True, text=True, timeout=3600)
    log = run.stdout + run.stderr
    warnings = [ln for ln in log.splitlines() if re.search(r"\b(WARNING|ERROR)\b", ln) and "IPKernelApp" not in ln]
    assert run.returncode == 0 and not warnings, "\n".join(warnings) or log[-3000:]

    html = ROOT / "_build" / "html"
    assert (html / "intro.html").exists()
    for name in chapter_names():
        page = (html / "chapters" / f"{name}.html").read_text()
        figures = sum("mystnb" in c.metadata and "figure" in c.metadata["mystnb"] for c in code_cells(read_chapter(name)))
        shown = len(re.findall(r"<figure\b", page))
        assert shown == figures, f"{name}: {figures} figure cells, {shown} figures on the page"
        images = re.findall(r'<img [^>]*src="([^"]+)"', page)
        assert all((html / "chapters" / src).resolve().exists() for src in images), f"{name}: an image file is missing"
