"""The whole course as one PDF, printed from the built website by Debian's chromium: `make pdf`.

    make pdf                      # _build/pdf/course.pdf
    python -m tools.pdf OUT.pdf   # elsewhere

The website is built first if it is missing or stale (the build of `make book`). Each page of _toc.yml is
opened in turn in one tab of headless chromium from a local server, with the network closed (MathJax comes from the site
itself), and printed in the order of the book. Before printing, every folded answer of the recap quiz
(a dropdown titled "Answer") is opened, so the printed quiz shows each answer under its question, in its
titled box; folded code stays folded; figures are embedded as the page shows them; a printed line wider
than the sheet (the website scrolls it sideways) wraps instead of being cut off (the site's print
stylesheet, _static/print.css, which a reader's own Print of a page uses too). The pages are joined with poppler's
`pdfunite` (Debian's poppler-utils). A missing chromium or pdfunite is one line naming the package.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urljoin

ROOT = Path(__file__).resolve().parent.parent
from tools import built_site  # the build of `make book` and the site's pages

OUT = ROOT / "_build" / "pdf" / "course.pdf"

# open every dropdown (the quiz answers are sphinx-design <details>, titled Answer); folded code stays folded
OPEN_ANSWERS = """
for (const d of document.querySelectorAll('details.sd-dropdown')) { d.open = true; }
const style = document.createElement('style');
style.textContent = `
  * { box-shadow: none !important; }  /* a shadow is printed as a page-wide bitmap */
  details.sd-dropdown { break-inside: avoid; }
  .bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .prev-next-area, .bd-footer, .header-article { display: none !important; }
  .bd-main .bd-content .bd-article-container { max-width: 100% !important; }
`;
document.head.appendChild(style);
"""


def missing_tools():
    """One line per tool that is not installed, naming its Debian package."""
    lines = []
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        lines.append("make pdf needs Debian's chromium: apt-get install chromium")
    if not shutil.which("pdfunite"):
        lines.append("make pdf needs pdfunite: apt-get install poppler-utils")
    return lines


def wait_for_maths(page, timeout_s=30):
    """MathJax typesets after load: wait until it has finished (or the page has no maths)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = page.evaluate("""() => !window.MathJax || !MathJax.startup || !MathJax.startup.promise ? true :
            MathJax.startup.promise.then(() => true)""")
        if done:
            return
        time.sleep(0.2)


def print_pages(html_dir, folder):
    """Print each page of the book into `folder`, in order; returns the PDF files."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    files = []
    with built_site.serve(html_dir) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=built_site.CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route(re.compile(r"^(?!http://127\.0\.0\.1[:/]).*"), lambda route: route.abort())
        # one tab, navigated from page to page: a new tab a page cost twice the CPU of a navigation (its renderer
        # starts cold); the next page loads as the screen shows it, and is printed in print media
        page = context.new_page()
        for i, name in enumerate(built_site.toc_pages()):
            page.emulate_media(media="screen")
            page.goto(urljoin(base, f"{name}.html"), wait_until="load")
            wait_for_maths(page)
            page.evaluate(f"() => {{ {OPEN_ANSWERS} }}")
            page.emulate_media(media="print")
            path = Path(folder) / f"{i:03d}.pdf"
            page.pdf(
                path=str(path),
                format="A4",
                print_background=False,
                margin={"top": "15mm", "bottom": "15mm", "left": "15mm", "right": "15mm"},
                display_header_footer=True,
                header_template="<span></span>",
                footer_template='<div style="font-size:8px;width:100%;text-align:center">'
                '<span class="title"></span> - <span class="pageNumber"></span></div>',
            )
            files.append(path)
        browser.close()
    return files


def make_pdf(out=OUT):
    """Build the site if needed and print it into `out`; returns (pages printed, seconds)."""
    problems = missing_tools()
    if problems:
        sys.exit("\n".join(problems))
    start = time.perf_counter()
    ok, message = built_site.ensure_built()
    if not ok:
        sys.exit(f"the website does not build cleanly, so there is nothing to print:\n{message}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="course-pdf-") as tmp:
        files = print_pages(built_site.HTML, tmp)
        subprocess.run(["pdfunite", *map(str, files), str(out)], check=True)
    return len(files), time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(OUT), help=f"the PDF to write (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    pages, seconds = make_pdf(args.out)
    size = Path(args.out).stat().st_size
    print(f"wrote {args.out}: {pages} pages of the book, {size / 2**20:.1f} MiB, in {seconds:.0f} s")


if __name__ == "__main__":
    main()
