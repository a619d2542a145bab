"""The built website, for the tests that read it (links) or open it in a browser.

The pages and their order come from _toc.yml at run time, so the tests follow the chapters that exist.
The site is the one `make book` writes into _build/html; `ensure_built()` builds it only when it is
missing or older than its sources (tests/conftest.py runs tests/test_build.py first, so a full run builds once).
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# BOOK_BUILD_DIR=/tmp/x runs the site tests on a build in /tmp/x/_build (as `jupyter-book build --path-output /tmp/x`)
OUTPUT = Path(os.environ.get("BOOK_BUILD_DIR", ROOT))
HTML = OUTPUT / "_build" / "html"
JB = Path(sys.executable).parent / "jupyter-book"


def config():
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def _files(entries):
    for entry in entries or []:
        if "file" in entry:
            yield entry["file"]
        yield from _files(entry.get("sections"))


def toc_pages():
    """Every page of the book (docname, e.g. 'chapters/01_next_token_prediction'), in reading order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", [{"chapters": toc.get("chapters")}]):
        pages += _files(part.get("chapters"))
    return [re.sub(r"\.(md|ipynb)$", "", p) for p in pages]


def source_of(page):
    return next(p for p in (ROOT / f"{page}.md", ROOT / f"{page}.ipynb") if p.exists())


def is_notebook(page):
    """A page that is a notebook: an .ipynb, or a Jupytext Markdown file (front matter with a kernelspec)."""
    path = source_of(page)
    return path.suffix == ".ipynb" or bool(re.match(r"---\n.*?^kernelspec:", path.read_text(), re.S | re.M))


def chapter_pages():
    return [p for p in toc_pages() if p.startswith("chapters/")]


def _inputs():
    paths = [source_of(p) for p in toc_pages()]
    paths += [ROOT / "_config.yml", ROOT / "_toc.yml", ROOT / "references.bib"]
    paths += list((ROOT / "_ext").glob("*.py")) + list((ROOT / "book" / "data" / "source_figures").glob("*.csv"))
    return [p for p in paths if p.exists()]


def is_stale():
    """True when the site is missing a page or a source changed after the last build."""
    pages = [HTML / f"{p}.html" for p in toc_pages()]
    if not all(p.exists() for p in pages):
        return True
    built = max(p.stat().st_mtime for p in HTML.rglob("*.html"))
    return max(p.stat().st_mtime for p in _inputs()) > built


def build():
    """Run the build of `make book`; return (ok, the warnings or the end of the log)."""
    run = subprocess.run([str(JB), "build", ".", "-n", "-W", "--keep-going", "--path-output", str(OUTPUT)], cwd=ROOT,
                         capture_output=True, text=True, timeout=3600)
    log = run.stdout + run.stderr
    warnings = [ln for ln in log.splitlines() if re.search(r"\b(WARNING|ERROR)\b", ln) and "IPKernelApp" not in ln]
    return run.returncode == 0 and not warnings, "\n".join(warnings) or log[-3000:]


@functools.cache
def ensure_built():
    """Build the site if it is stale; at most once per test run. Returns (ok, message)."""
    return build() if is_stale() else (True, "")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(folder):
    """Serve a folder on localhost from a thread; yields the base URL (with a trailing slash)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
