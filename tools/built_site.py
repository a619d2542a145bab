"""The built website, for the tests that read it (links) or open it in a browser.

The pages and their order come from _toc.yml at run time, so the tests follow the chapters that exist.
The site is the one `make book` writes into _build/html. The build command is written here once: `make book`
runs this module (`python -m tools.built_site`), tests/test_build.py and tools/bench.py call `build()`.
Its first step (`execute_chapters`) trains the tiny models and executes the notebooks, one job per CPU at
a time, into the build's execution cache; `jupyter-book build` then finds every notebook cached.
`ensure_built()` builds only when the site is missing, older than its sources, or its last build (recorded
in _build/build-result.json) had warnings, so a full `make test` after `make book` builds nothing, and a
test run builds at most once.
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from tools import warm_kernel

ROOT = Path(__file__).resolve().parent.parent
# Debian's chromium, headless, without the lookups and updates that stall it when the network is closed: the
# browser tests and `make pdf` start it with these
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
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


def load_extension(name):
    """One of the site's Sphinx extensions (`_ext/NAME.py`), loaded from its file (Sphinx finds them by the
    `local_extensions` of _config.yml, not on the import path)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def binder_url(path):
    """The Binder address that opens `path` (a repository file) in JupyterLab: the one function the site's
    {binder} role uses (_ext/binder_link.py), fed from _config.yml as jupyter-book feeds the theme."""
    url = load_extension("binder_link").binder_url

    cfg = config()
    theme = {
        "repository_url": cfg["repository"]["url"],
        "repository_branch": cfg["repository"].get("branch", "main"),
        "launch_buttons": cfg["launch_buttons"],
    }
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
    paths += list((ROOT / "_static").glob("*"))
    return [p for p in paths if p.exists()]


def is_stale():
    """True when the site is missing a page, a source changed after the last build, or that build failed."""
    pages = [HTML / f"{p}.html" for p in toc_pages()]
    if not all(p.exists() for p in pages) or not RESULT.exists():
        return True
    last = json.loads(RESULT.read_text())
    if not last.get("ok") or "executed_by_build" not in last:  # failed, or built before the first step existed
        return True
    return max(p.stat().st_mtime for p in _inputs()) > RESULT.stat().st_mtime


def warnings_in(log):
    return [ln for ln in log.splitlines() if re.search(r"\b(WARNING|ERROR)\b", ln) and "IPKernelApp" not in ln]


def _cache(output):
    from jupyter_cache import get_cache

    return get_cache(str(Path(output) / "_build" / ".jupyter_cache"))  # where jupyter-book keeps it


def as_myst_nb_reads(page):
    """The notebook MyST-NB makes of a page, which its cache matches on (code cells and kernelspec)."""
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    path = source_of(page)
    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    extensions = config().get("parse", {}).get("myst_enable_extensions", [])
    return read_myst_markdown_notebook(path.read_text(), MdParserConfig(enable_extensions=extensions), path=path)


def _execute_one(page, nb, cache, lock, timeout):
    """Execute `nb`, MyST-NB's reading of `page`, into the cache unless it is there already."""
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.executors.utils import single_nb_execution

    with lock:
        try:
            cache.match_cache_notebook(nb)
            return page, None  # cached already
        except KeyError:
            pass
    result = single_nb_execution(nb, cwd=str(source_of(page).parent), timeout=timeout, allow_errors=False)
    if result.err is None:
        with lock:
            bundle = CacheBundleIn(nb, str(source_of(page)), data={"execution_seconds": result.time})
            cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)
    return page, result


# The trainings the build runs before the pages that load their models, each with the texts that mark a page
# needing it (any one of them): every model a page's trained_model() call would otherwise train inside that page,
# on one core. One masked run serves two recipes: its first 100 steps are the 100-step run (tiny.trained_model's
# `keep`), so it writes that model's cache entry on the way to tiny.STEPS.
TRAININGS = [
    # the masked model of tiny.STEPS, which most chapters load, and chapter 1's lesson's first 100 steps
    ("tiny.trained_model(keep=(100,))", ("trained_model()", "trained_model(steps=")),
    ("tiny.trained_model(causal=False, shipped=False, steps=tiny.RETRAIN_STEPS)", ("shipped=False",)),  # ch 2's lab
]


@contextmanager
def _warm_kernels():
    """While it lasts, the pages' kernels (the kernel spec python3, first on JUPYTER_PATH) and the trainings are
    forked from one process that has imported torch (tools/warm_kernel.py): a torch import a build, not one a page."""
    import shutil
    import tempfile

    saved = {name: os.environ.get(name) for name in ("JUPYTER_PATH", warm_kernel.SOCKET_VAR)}
    folder = tempfile.mkdtemp(prefix="warm-kernel-spec-")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [folder, saved["JUPYTER_PATH"]]))
    try:
        with warm_kernel.warm() as socket_path:  # its environment is the kernels' own, JUPYTER_PATH included
            warm_kernel.kernel_spec(folder, "python3", socket_path, display_name="Python 3 (ipykernel)")
            os.environ[warm_kernel.SOCKET_VAR] = socket_path
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)


def execute_chapters(output=OUTPUT, workers=None):
    """Execute the notebook pages the build's cache lacks, `workers` at a time (one per CPU), into that cache.

    The build itself (MyST-NB with `execute_notebooks: cache`) runs uncached notebooks one after the other,
    each on one core; run first, this fills the same cache with the same notebooks (MyST-NB's reading of
    each page), so the build finds them all. The trainings of TRAININGS that a page to run needs go first,
    one core each, so that no two pages train the same model and no page trains one itself; the pages that
    load no trained model run beside them, and a page that loads one waits for the trainings it names. A
    notebook that fails here is left out of the cache: the build runs it again and reports the failing cell.
    """
    import concurrent.futures

    workers = workers or os.cpu_count() or 1
    cache, lock = _cache(output), threading.Lock()
    pages = [p for p in toc_pages() if is_notebook(p)]
    read = {page: as_myst_nb_reads(page) for page in pages}  # once a page: parsing the Markdown is not free
    timeout = config().get("execute", {}).get("timeout", 600)
    missing = []
    for page in pages:
        try:
            cache.match_cache_notebook(read[page])
        except KeyError:
            missing.append(page)
    report = {"workers": workers, "trainings": 0, "training_s": 0.0, "wall_s": 0.0, "pages": {}}
    if missing:
        start = time.perf_counter()
        texts = {page: source_of(page).read_text() for page in missing}
        needs = {
            page: [call for call, markers in TRAININGS if any(m in text for m in markers)]
            for page, text in texts.items()
        }
        done = {call: threading.Event() for call in {c for calls in needs.values() for c in calls}}
        trained_at = []

        def train(call):  # loads the model instead if it is trained already
            try:  # a training that fails leaves its pages to train the model themselves
                subprocess.run(warm_kernel.command(f"from book import tiny; {call}"), cwd=ROOT, check=False)
            finally:
                trained_at.append(time.perf_counter() - start)
                done[call].set()

        def execute(page):
            for call in needs[page]:
                done[call].wait()
            return _execute_one(page, read[page], cache, lock, timeout)

        # first come first served: every training starts before any page, so a page never holds a worker that
        # a training it waits for would need; the pages that wait for none come first
        order = sorted(missing, key=lambda page: bool(needs[page]))
        with _warm_kernels(), concurrent.futures.ThreadPoolExecutor(workers) as pool:
            trainings = [pool.submit(train, call) for call, _ in TRAININGS if call in done]
            runs = [pool.submit(execute, page) for page in order]
            finished = [run.result() for run in runs] + [t.result() for t in trainings]
        report["trainings"], report["training_s"] = len(trainings), max(trained_at, default=0.0)
        report["pages"] = {
            page: None if result.err else result.time for page, result in finished[: len(runs)] if result is not None
        }
        report["wall_s"] = time.perf_counter() - start
    path = execution_report_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    return report


def execution_report_path(output=OUTPUT):
    """What the last `execute_chapters` did: its workers, seconds training, seconds per page (None: failed)."""
    return Path(output) / "_build" / "execution-report.json"


def build(output=OUTPUT, echo=False, env=None):
    """Run the build of `make book` into `output`; return (ok, the warnings or the end of the log).

    The notebooks are executed first, one per CPU at a time (`execute_chapters`, in a process with `env`).
    With echo, the log is also printed line by line as it comes (as `make book` shows it)."""
    first = subprocess.run(
        [sys.executable, "-m", "tools.built_site", "--execute", str(output)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if echo:
        print(first.stdout, end="", flush=True)
    proc = subprocess.Popen(
        command(output), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if echo:
            print(line, end="", flush=True)
    proc.wait(timeout=3600)
    log = "".join(lines)
    warnings = warnings_in(log)
    ok = proc.returncode == 0 and not warnings
    # notebooks the build ran itself: those that failed in the first step, or that the cache did not match
    executed = sorted(set(re.findall(r"^(\S+?): Executing notebook", log, re.M)))
    result = Path(output) / "_build" / "build-result.json"
    if result.parent.exists():
        result.write_text(json.dumps({"ok": ok, "warnings": warnings, "executed_by_build": executed}, indent=1))
    return ok, "\n".join(warnings) or log[-3000:]


@functools.cache
def ensure_built():
    """Build the site if it is stale; at most once per test run. Returns (ok, message).

    Under a lock: when `make test` runs test files side by side, the first worker to need the site builds it
    and the others wait for it, then find it fresh."""
    lock = OUTPUT / "_build" / ".build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
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


if __name__ == "__main__":  # `make book`; `--execute OUTPUT` is the first step of build()
    if sys.argv[1:2] == ["--execute"]:
        report = execute_chapters(sys.argv[2])
        if report["pages"]:
            print(
                f"{report['workers']} at a time: {report['trainings']} trainings of the tiny models, done "
                f"after {report['training_s']:.1f} s, and the notebooks:"
            )
        for page, seconds in report["pages"].items():
            print(f"  {page}: {'failed, left to the build' if seconds is None else f'executed in {seconds:.1f} s'}")
        sys.exit()
    ok, message = build(echo=True)
    if not ok:
        sys.exit(f"\nthe book does not build cleanly:\n{message}")
    print("The website is in _build/html: open _build/html/index.html in a browser.")
