"""`make pdf` prints the whole course as one PDF (tools/pdf.py): every page of the book, in order, with its
figures embedded, its formulas typeset, every line the chapters print whole (wrapped, not cut at the edge
of the sheet) and the recap quiz's answers printed open under their questions.

Needs Debian's chromium and poppler-utils (pdfunite, pdfinfo, pdftotext, pdfimages): skipped with the package's
name on a reader's machine without them, failed under CI.
"""

import functools
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from tools import built_site, pdf
from tools.notebooks import ROOT, chapter_names, code_cells, read_chapter


@pytest.fixture(scope="module")
def course_pdf(site, tmp_path_factory):
    missing = pdf.missing_tools() + [
        f"the PDF test needs {t}: apt-get install poppler-utils"
        for t in ("pdfinfo", "pdftotext", "pdfimages")
        if not shutil.which(t)
    ]
    if missing:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("\n".join(missing))
    out = tmp_path_factory.mktemp("pdf") / "course.pdf"
    # the command of `make pdf`, in its own process (the browser tests keep a Playwright loop in this one)
    run = subprocess.run(
        [sys.executable, "-m", "tools.pdf", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"{len(built_site.toc_pages())} pages of the book" in run.stdout, run.stdout
    return out


@functools.cache  # pdftotext of the whole course takes seconds: once a command a run
def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def pdf_text(course_pdf):
    """The PDF's text, each line laid out as on the sheet (-layout): its words in order, white space aside, as every
    test of the text reads it (one pdftotext run for all)."""
    return run("pdftotext", "-layout", str(course_pdf), "-")


def test_page_count_is_plausible(course_pdf):
    pages = int(re.search(r"^Pages:\s+(\d+)", run("pdfinfo", str(course_pdf)), re.M).group(1))
    book_pages = len(built_site.toc_pages())
    # every page of the book takes at least one sheet; a chapter of ~900 lines takes tens, not hundreds
    assert 2 * book_pages <= pages <= 40 * book_pages, f"{pages} PDF pages for {book_pages} pages of the book"


def test_every_chapter_title_is_in_the_text(course_pdf):
    # Sphinx prints an apostrophe typographically (its smart quotes): compare them as one character
    text = re.sub(r"\s+", " ", pdf_text(course_pdf)).replace("\u2019", "'")
    for name in chapter_names():
        title = next(
            line[2:] for line in (ROOT / "chapters" / f"{name}.md").read_text().splitlines() if line.startswith("# ")
        )
        assert re.sub(r"\s+", " ", title) in text, f"{name}: its title {title!r} is not in the PDF's text"
    assert "\\(" not in text and "\\[" not in text, "a formula was printed as raw LaTeX"


def test_figures_are_embedded(course_pdf):
    """Each figure's PNG reaches the PDF at its own size (a bitmap of the same width and height)."""
    from PIL import Image

    sizes = {}
    for name in chapter_names():
        page = (built_site.HTML / "chapters" / f"{name}.html").read_text()
        for src in re.findall(r'<img [^>]*src="([^"]+\.png)"', page):
            if "_static/" in src:  # the theme's own images (a launch button's logo), not a figure
                continue
            with Image.open(built_site.HTML / "chapters" / src) as img:
                sizes[src] = img.size
    figures = sum(
        "figure" in c.metadata.get("mystnb", {}) for name in chapter_names() for c in code_cells(read_chapter(name))
    )
    assert len(sizes) >= figures, f"the site shows {len(sizes)} figure images for {figures} figure cells"
    listed = [line.split() for line in run("pdfimages", "-list", str(course_pdf)).splitlines()[2:]]
    in_pdf = {(int(cols[3]), int(cols[4])) for cols in listed if len(cols) > 4 and cols[2] == "image"}
    missing = [src for src, size in sizes.items() if size not in in_pdf]
    assert not missing, f"{len(missing)} of {len(sizes)} figures are not embedded in the PDF: {missing[:5]}"


def words(text):
    """A text as a sequence of lower-case words, numbers and markup aside: 'The feed-forward layer, $8d^2$' ->
    'the feed forward layer d'."""
    return " ".join(re.findall(r"[a-z]+", text.lower()))


def test_quiz_answers_are_printed_open(course_pdf):
    quiz = (ROOT / "chapters" / "09_recap_quiz.md").read_text()
    answers = re.findall(r"^:::+\{dropdown\}[^\n]*\n(.*?)^:::+\s*$", quiz, re.M | re.S)
    assert len(answers) >= 10, f"the quiz has {len(answers)} dropdown answers"
    text = words(pdf_text(course_pdf))
    for answer in answers:
        prose = re.sub(r"\$[^$]*\$|\{[a-z]+\}`[^`]*`|`[^`]*`", " ", answer)  # formulas and roles print otherwise
        opening = " ".join(words(prose).split()[:5])  # its first five words
        assert opening in text, f"the quiz answer opening {opening!r} is not printed"


def test_every_printed_line_is_in_the_text_whole(course_pdf):
    """What the chapters print (their stdout, in the notebooks the build executed) is in the PDF's text, long
    lines included: the website scrolls a wide line sideways, the sheet wraps it (a cut line loses its end).
    Cells folded whole (hide-cell) are left out: they print folded."""
    # without white space: the PDF's text keeps the words of a line in order, not the runs of spaces between them
    text = re.sub(r"\s+", "", pdf_text(course_pdf))
    missing, checked, longest = [], 0, 0
    for name in chapter_names():
        executed = nbformat.read(built_site.OUTPUT / "_build" / "jupyter_execute" / "chapters" / f"{name}.ipynb", 4)
        for cell in code_cells(executed):
            if "hide-cell" in cell.metadata.get("tags", []):
                continue
            for out in cell.get("outputs", []):
                for line in out.get("text", "").splitlines() if out.get("name") == "stdout" else []:
                    checked, longest = checked + 1, max(longest, len(line))
                    if re.sub(r"\s+", "", line) not in text:
                        missing.append(f"{name}: {line.strip()[:100]}")
    # the check reads the pages' printed lines, those as wide as the column too (a sheet cuts a line that is wider
    # than its column; no page prints one wider than 77 now, tests/test_format.py)
    assert checked > 300 and longest >= 70, (checked, longest)
    assert not missing, f"{len(missing)} printed lines are not whole in the PDF, e.g.:\n" + "\n".join(missing[:10])
