"""The built website, for the tests that read it (links) or open it in a browser.

The pages and their order come from _toc.yml at run time, so the tests follow the chapters that exist.
The site is the one `make book` writes into _build/html. The build command is written here once: `make book`
runs this file (`python tests/built_site.py`), tests/test_build.py and tools/bench.py call `build()`.
`ensure_built()` builds only when the site is missing, older than its sources, or its last build (recorded
in _build/build-result.json) had warnings, so a full `make test` after `make book` builds nothing, and a
test run builds at most once.
"""
from __future__ import annotations

import functools
import json
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
RESULT = OUTPUT / "_build" / "build-result.json"  # the verdict of the last build: ok, and its warnings


def command(output=OUTPUT):
    """The build of `make book`: warnings are errors, keep going to report them all, into `output`/_build."""
    return [str(JB), "build", ".", "-n", "-W", "--keep-going", "--path-output", str(output)]


def config():
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def binder_url(path):
    """The Binder address that opens `path` (a repository file) in JupyterLab: the one function the site's
    {binder} role uses (_ext/binder_link.py), fed from _config.yml as jupyter-book feeds the theme."""
    sys.path.insert(0, str(ROOT / "_ext"))
    from binder_link import binder_url as url

    cfg = config()
    theme = {"repository_url": cfg["repository"]["url"], "repository_branch": cfg["repository"].get("branch", "main"),
             "launch_buttons": cfg["launch_buttons"]}
    return url(theme, path)


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
    """True when the site is missing a page, a source changed after the last build, or that build failed."""
    pages = [HTML / f"{p}.html" for p in toc_pages()]
    if not all(p.exists() for p in pages) or not RESULT.exists():
        return True
    if not json.loads(RESULT.read_text()).get("ok"):
        return True
    return max(p.stat().st_mtime for p in _inputs()) > RESULT.stat().st_mtime


def warnings_in(log):
    return [ln for ln in log.splitlines() if re.search(r"\b(WARNING|ERROR)\b", ln) and "IPKernelApp" not in ln]


def build(output=OUTPUT, echo=False, env=None):
    """Run the build of `make book` into `output`; return (ok, the warnings or the end of the log).

    With echo, the log is also printed line by line as it comes (as `make book` shows it)."""
    proc = subprocess.Popen(command(output), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if echo:
            print(line, end="", flush=True)
    proc.wait(timeout=3600)
    log = "".join(lines)
    warnings = warnings_in(log)
    ok = proc.returncode == 0 and not warnings
    result = Path(output) / "_build" / "build-result.json"
    if result.parent.exists():
        result.write_text(json.dumps({"ok": ok, "warnings": warnings}, indent=1))
    return ok, "\n".join(warnings) or log[-3000:]


@functools.cache
def ensure_built():
    """Build the site if it is stale; at most once per test run. Returns (ok, message)."""
    if not is_stale():
        return True, ""
    return build()


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


if __name__ == "__main__":  # `make book`
    ok, message = build(echo=True)
    if not ok:
        sys.exit(f"\nthe book does not build cleanly:\n{message}")
    print("The website is in _build/html: open _build/html/index.html in a browser.")
