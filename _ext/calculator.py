"""The model-card calculator of chapter 10, run in the reader's browser: `book/card.py` itself, by Pyodide.

- Pyodide's core comes from the npm package `pyodide`, pinned with its integrity hash below. At the start of a
  build the package's tarball is fetched once with `npm pack` into `_build/pyodide-cache/` and checked against
  the hash; at the end of an HTML build the five files of the core (about 13 MB) are copied to
  `_static/pyodide/`, and `book/card.py`, unchanged, to `_static/calculator/card.py`. The page script
  (`_static/calculator.js`, put on every page by Jupyter Book as every script of `_static/`) only turns the form into a command line and shows what `book.card.main` prints:
  there is no second copy of the arithmetic, and the site needs no network once built.
- Without npm (or without a network at the first build), the build says what to install and builds the rest;
  the calculator's page then states in words that its files are missing.
"""

import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

PYODIDE_VERSION = "314.0.8"
PYODIDE_INTEGRITY = "sha512-74Wq1kXOC+CCEzAfxuRAO701nAcCMLjf8NrwvWpu8S41dVMXwXmLQ05dYB+F4e46AdnGo0oq7YHSVUpHsoarLQ=="
# the core: the loader, the interpreter (JavaScript glue and WebAssembly), the standard library, the package index
PYODIDE_FILES = ["pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"]
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / "pyodide-cache"
TARBALL = CACHE / f"pyodide-{PYODIDE_VERSION}.tgz"


def integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def _say(message):
    print(f"calculator: {message}", file=sys.stderr)


def fetch() -> Path | None:
    """The checked tarball of pyodide PYODIDE_VERSION, fetched with npm if not cached; None (said why) if not."""
    if TARBALL.exists() and integrity(TARBALL) == PYODIDE_INTEGRITY:
        return TARBALL
    npm = shutil.which("npm")
    if npm is None:
        _say(
            f"npm is not installed, so chapter 10's calculator is left out of this build: install Node.js "
            f"and npm (e.g. apt-get install npm), then run make book again to fetch pyodide {PYODIDE_VERSION}"
        )
        return None
    CACHE.mkdir(parents=True, exist_ok=True)
    TARBALL.unlink(missing_ok=True)
    run = subprocess.run(
        [npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--pack-destination", str(CACHE)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0 or not TARBALL.exists():
        _say(
            f"npm pack pyodide@{PYODIDE_VERSION} failed, so chapter 10's calculator is left out of this build "
            f"(a network is needed once): {run.stderr.strip().splitlines()[-1:] or run.returncode}"
        )
        return None
    if integrity(TARBALL) != PYODIDE_INTEGRITY:
        TARBALL.unlink()
        _say(f"pyodide-{PYODIDE_VERSION}.tgz does not have the pinned sha512; deleted, calculator left out")
        return None
    return TARBALL


def fetch_at_start(app):
    app.env.calculator_tarball = fetch() if app.builder.format == "html" else None


def copy_files(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    (static / "calculator").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "book" / "card.py", static / "calculator" / "card.py")
    # the page script and its style, again: Sphinx copies _static/ only when some page is written, and a build
    # in which only the script changed writes none
    for name in ("calculator.js", "calculator.css"):
        shutil.copy2(ROOT / "_static" / name, static / name)
    tarball = getattr(app.env, "calculator_tarball", None) or fetch()
    target = static / "pyodide"
    if tarball is None:
        shutil.rmtree(target, ignore_errors=True)
        return
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        for name in PYODIDE_FILES:
            member = archive.getmember(f"package/{name}")
            with archive.extractfile(member) as source, open(target / name, "wb") as out:
                shutil.copyfileobj(source, out)


def setup(app):
    app.connect("builder-inited", fetch_at_start)
    app.connect("build-finished", copy_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
