"""Benchmark of the book: build and test times, execution time per page, sizes. Prints; asserts nothing.

    make bench                 # everything, including a timed `make test`
    make bench ARGS=--no-test  # skip the (long) timed test run
    python -m tools.bench --no-test --quick  # the builds and the pages only: no learner environment, no PDF

The cold build runs the command of `make book` into a fresh temporary folder (so it executes every
page, with an empty cache, and leaves the shared _build alone); the warm build repeats it on that
folder. Times depend on the machine: each is printed with its budget and as a ratio to it, and the
machine is named, so that figures from two machines are compared as ratios.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
from tools import built_site  # the build command of `make book`, written once

PAGE_BUDGET_S = 10  # each page of _toc.yml's chapters, lesson or lab, alone in a fresh kernel, models trained
FIRST_PAGE = "chapters/01_next_token_prediction"  # a learner's first page, run alone with an empty model cache
FIRST_PAGE_BUDGET_S = 10  # ... so it trains what it needs, within the same 10 s
COLD_BUILD_BUDGET_S = 45  # a cold `make book` (empty build and model caches) after install (was 60 s)
WARM_BUILD_BUDGET_S = 5  # the same command again, nothing changed
CALCULATOR_ANSWER_BUDGET_S = 3  # the page calculator (chapter 10) answers its first input, Pyodide loaded
TEST_BUDGET_S = 300  # `make test` after install, on 2 cores
PAGE_BUDGET_BYTES = 2 * 1024 * 1024  # no page over 2 MB with its images
LEARNER_ENV_GOAL_BYTES = 1.4e9  # the learner set as Binder installs it (torch alone is about 0.75 GB)
MiB = 1024 * 1024


def speed():
    """Seconds for a fixed piece of pure Python (ten million additions), so that days and machines compare."""
    start = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - start


def alone(page, models):
    """Seconds to execute one page by itself in a fresh kernel (the default python3 kernel, started cold, as a
    learner's is), with the trained models of the folder `models` (an empty folder: none)."""
    from jupyter_cache.executors.utils import single_nb_execution

    with mock.patch.dict(os.environ, {"BOOK_CACHE": str(models)}):  # the kernel inherits the environment
        nb = built_site.as_myst_nb_reads(page)
        result = single_nb_execution(nb, cwd=str(built_site.source_of(page).parent), timeout=600, allow_errors=False)
    if result.err is not None:
        sys.exit(f"{page} failed when run alone: {result.err}")
    return result.time


def alone_with_empty_model_cache(page):
    """Seconds to execute one chapter by itself in a fresh kernel, with no trained model on disk."""
    with tempfile.TemporaryDirectory(prefix="bench-models-") as models:
        return alone(page, models)


def learner_environment_bytes():
    """Bytes of a fresh virtual environment holding the learner set, installed as binder/postBuild does."""
    with tempfile.TemporaryDirectory(prefix="bench-learner-") as tmp:
        env = Path(tmp) / "env"
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        run = subprocess.run(
            [
                str(env / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--requirement",
                "requirements.txt",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            return None, run.stderr.strip().splitlines()[-1:]
        return folder_bytes(env), []


def machine():
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
        model = m.group(1).strip() if m else ""
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def timed(cmd, **kwargs):
    start = time.perf_counter()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, run


def folder_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and not f.is_symlink())


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs = []

    def handle_starttag(self, tag, attrs):
        src = dict(attrs).get("src")
        if tag == "img" and src and not re.match(r"^[a-z]+:", src):
            self.srcs.append(src)


def page_sizes(html):
    """(bytes of the page plus each image it shows, page) for every page of the site, largest first."""
    sizes = []
    for page in html.rglob("*.html"):
        if "_static" in page.relative_to(html).parts:
            continue
        parser = _Images()
        parser.feed(page.read_text(errors="replace"))
        images = {(page.parent / src.split("?")[0]).resolve() for src in parser.srcs}
        total = page.stat().st_size + sum(p.stat().st_size for p in images if p.exists())
        sizes.append((total, page.relative_to(html).as_posix(), len(images)))
    return sorted(sizes, reverse=True)


def execution_times(build):
    """{chapter source: seconds} from the build's execution cache."""
    from jupyter_cache import get_cache

    latest = {}
    for record in get_cache(str(build / ".jupyter_cache")).list_cache_records():
        if record.uri not in latest or record.created > latest[record.uri].created:
            latest[record.uri] = record
    return {Path(uri).relative_to(ROOT).as_posix(): r.data.get("execution_seconds") for uri, r in latest.items()}


def verdict(value, budget):
    return f"{value / budget:5.2f} of budget  {'ok' if value <= budget else 'OVER BUDGET'}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-test", action="store_true", help="do not time `make test`")
    parser.add_argument("--quick", action="store_true", help="do not install the learner environment nor make the PDF")
    args = parser.parse_args()

    print(f"machine: {machine()}")
    print(f"date:    {time.strftime('%Y-%m-%d')}")
    # one machine of the same type built the book cold in 63 s one day and 114 s the next: the budgets below
    # are absolute seconds, so this shows how fast the machine was while they were taken
    print(f"speed:   {speed():.2f} s for ten million additions in pure Python (a fixed yardstick of this machine)")
    # other work on the machine slows every time below: the load average says how busy it was
    print(f"load:    {os.getloadavg()[0]:.1f} (1-minute load average at the start; {os.cpu_count()} CPUs)\n")

    with tempfile.TemporaryDirectory(prefix="bench-book-") as out:
        build = Path(out) / "_build"
        # cold: an empty cache of trained models too, so the build trains the tiny models
        cold_env = {**os.environ, "BOOK_CACHE": str(Path(out) / "model-cache")}
        start = time.perf_counter()
        ok, message = built_site.build(out, env=cold_env)
        cold = time.perf_counter() - start
        if not ok:
            print(message)
            sys.exit("the cold build failed")
        report = json.loads(built_site.execution_report_path(out).read_text())  # the first step of the cold build
        start = time.perf_counter()
        built_site.build(out, env=cold_env)
        warm = time.perf_counter() - start
        print("build (the command of `make book`)")
        print(
            f"  cold, empty cache:  {cold:7.1f} s   budget {COLD_BUILD_BUDGET_S} s  {verdict(cold, COLD_BUILD_BUDGET_S)}"
        )
        print(
            f"    first step, {report['workers']} jobs at a time: {report.get('trainings', 0)} trainings of the tiny "
            f"models, the last done after {report['training_s']:.1f} s (pages that load no model run beside "
            f"them), all the notebooks after {report['wall_s']:.1f} s"
        )
        print(
            f"  warm rebuild:       {warm:7.1f} s   budget {WARM_BUILD_BUDGET_S} s  "
            f"{verdict(warm, WARM_BUILD_BUDGET_S)}\n"
        )

        page_report(execution_times(build), report["workers"], cold_env["BOOK_CACHE"])
        alone = alone_with_empty_model_cache(FIRST_PAGE)
        print(
            f"  {FIRST_PAGE + '.md':44} {alone:6.1f} s  {verdict(alone, FIRST_PAGE_BUDGET_S)}: run alone with an "
            "empty model cache, so it trains what it needs (a learner's first page on their own machine; on Binder, "
            "postBuild trains the models into the image)\n"
        )
        calculator_report()

        html = build / "html"
        sizes = page_sizes(html)
        print("sizes")
        venv = ROOT / ".venv"
        if venv.exists():
            print(f"  authors' environment (.venv, both sets):     {folder_bytes(venv) / MiB:8.1f} MiB")
        learner, error = (None, ["--quick"]) if args.quick else learner_environment_bytes()
        if learner is None:
            print(f"  learner environment: could not be installed ({' '.join(error)})")
        else:
            print(
                f"  learner environment (requirements.txt, as Binder's postBuild installs it): "
                f"{learner / MiB:8.1f} MiB = {learner / 1e9:.2f} GB, goal {LEARNER_ENV_GOAL_BYTES / 1e9:.1f} GB "
                f"{verdict(learner, LEARNER_ENV_GOAL_BYTES)}"
            )
        print(f"  website (_build/html):                     {folder_bytes(html) / MiB:8.1f} MiB, {len(sizes)} pages")
        print(f"  pages with their images (budget {PAGE_BUDGET_BYTES / MiB:.0f} MiB each), largest first:")
        for size, page, n_images in sizes[:5]:
            print(f"    {page:42} {size / MiB:6.2f} MiB ({n_images} images)  {verdict(size, PAGE_BUDGET_BYTES)}")
        over = [page for size, page, _ in sizes if size > PAGE_BUDGET_BYTES]
        print(f"  pages over budget: {len(over)} of {len(sizes)} {over or ''}\n")

    print(f"load at the end of the builds: {os.getloadavg()[0]:.1f}\n")
    if not args.quick:
        pdf_report()
    if not args.no_test:
        test_report()


def page_report(times, workers, models):
    """Every page under _toc.yml's chapters, lessons and labs in reading order, against PAGE_BUDGET_S: each run
    alone in a fresh kernel with the tiny models trained (as a learner runs a page), beside its time in the
    build (`workers` at a time, in kernels forked from a warm process, tools/warm_kernel.py)."""
    print(
        f"execution per page, alone in a fresh kernel, the tiny models trained (budget {PAGE_BUDGET_S} s each on "
        f"2 cores); in brackets, in the build ({workers} at a time, warm kernels)"
    )
    over, spent, pages = [], [], built_site.chapter_pages()
    for page in pages:
        name = built_site.source_of(page).relative_to(ROOT).as_posix()
        kind = "lab" if page.endswith("_lab") else "lesson" if f"{page}_lab" in pages else "chapter"
        if not built_site.is_notebook(page):
            print(f"  {name:44}      -    not a notebook ({kind})")
            continue
        seconds, in_build = alone(page, models), times.get(name)
        built = "?" if in_build is None else f"{in_build:.1f} s"
        print(f"  {name:44} {seconds:6.1f} s  {verdict(seconds, PAGE_BUDGET_S)}  ({kind}; build {built})")
        spent.append(seconds)
        if seconds > PAGE_BUDGET_S:
            over.append(page)
    total = sum(t for t in times.values() if t)
    print(
        f"  {'all notebooks':44} {sum(spent):6.1f} s  alone, {total:.1f} s in the build (their sums); pages over "
        f"budget: {len(over)} {over or ''}"
    )


def calculator_report():
    """The page calculator of chapter 10 (Pyodide in the browser): its load time and its first answer.

    tests/test_calculator.py measures them in the browser; run with BOOK_BENCH_TIMINGS=FILE, it writes
    {"load_s": seconds until Pyodide is loaded, "first_answer_s": seconds from the first input to the answer}
    as JSON into FILE, which is printed here against CALCULATOR_ANSWER_BUDGET_S."""
    test = ROOT / "tests" / "test_calculator.py"
    if not test.exists() or not list((ROOT / "_static").glob("calculator*")):
        print("calculator: not built yet\n")
        return
    with tempfile.TemporaryDirectory(prefix="bench-calculator-") as tmp:
        out = Path(tmp) / "timings.json"
        seconds, run = timed(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", str(test)],
            env={**os.environ, "BOOK_BENCH_TIMINGS": str(out)},
        )
        if run.returncode != 0 or not out.exists():
            tail = (run.stdout.strip().splitlines() or ["no output"])[-1]
            print(f"calculator: no timings (tests/test_calculator.py exit {run.returncode}: {tail})\n")
            return
        t = json.loads(out.read_text())
    print(
        f"calculator (chapter 10, Pyodide in the browser): loaded in {t['load_s']:.1f} s; first answer "
        f"{t['first_answer_s']:.2f} s after its first input, budget {CALCULATOR_ANSWER_BUDGET_S} s  "
        f"{verdict(t['first_answer_s'], CALCULATOR_ANSWER_BUDGET_S)}  (its test: {seconds:.0f} s)\n"
    )


def test_report():
    """`make test`, timed whole, against TEST_BUDGET_S: one run with a build folder and a model cache of its own,
    empty at the start, so it builds the site and trains the tiny models, as `make test` does in a fresh clone.
    The test files run side by side (see the Makefile), so the seconds per file overlap and add up to more than
    the run's time."""
    make = shutil.which("make") or "make"
    print(f"make test, as in a fresh clone: no site, no trained model (load {os.getloadavg()[0]:.1f} at the start)")
    with tempfile.TemporaryDirectory(prefix="bench-test-") as tmp:
        report = Path(tmp) / "junit.xml"
        env = {
            **os.environ,
            "BOOK_BUILD_DIR": str(Path(tmp) / "build"),
            "BOOK_CACHE": str(Path(tmp) / "models"),
            "PYTEST_ADDOPTS": f"--junitxml={report}",
        }
        seconds, run = timed([make, "test"], env=env)
        per_file = seconds_per_test_file(report) if report.exists() else {}
        tail = [ln for ln in run.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
        print(f"  the whole suite: {seconds:.1f} s  budget {TEST_BUDGET_S} s  {verdict(seconds, TEST_BUDGET_S)}")
        print(
            f"    {tail[-1] if tail else 'no summary'} (exit {run.returncode}); load {os.getloadavg()[0]:.1f} "
            "at the end; test time per file (overlapping):"
        )
        for name, (count, spent) in sorted(per_file.items(), key=lambda kv: -kv[1][1]):
            print(f"      {name:44} {spent:7.1f} s  {count:4} tests")
        for line in run.stdout.splitlines():
            if line.startswith(("FAILED", "ERROR")):
                print(f"    {line[:160]}")
    print()


def pdf_report():
    """`make pdf`: its size, pages and time (printing only, on the site `make book` built)."""
    from tools import pdf

    if pdf.missing_tools():
        print("make pdf: skipped,", "; ".join(pdf.missing_tools()), "\n")
        return
    with tempfile.TemporaryDirectory(prefix="bench-pdf-") as tmp:
        out = Path(tmp) / "course.pdf"
        printed, seconds = pdf.make_pdf(out)
        info = subprocess.run(["pdfinfo", str(out)], capture_output=True, text=True).stdout
        pages = re.search(r"^Pages:\s+(\d+)", info, re.M)
        print(
            f"make pdf: {out.stat().st_size / MiB:.1f} MiB, {pages.group(1) if pages else '?'} PDF pages "
            f"from {printed} pages of the book, {seconds:.0f} s (site already built)\n"
        )


def seconds_per_test_file(junit_xml):
    """{test file: (tests, seconds)} from pytest's JUnit report."""
    import xml.etree.ElementTree as ET

    per_file = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        parts = (case.get("classname") or "?").split(".")  # tests.test_card[.Class] or tests.golden.NN_slug.ipynb
        name = f"golden/{parts[-2]}.ipynb" if parts[-1] == "ipynb" else f"{parts[min(1, len(parts) - 1)]}.py"
        count, total = per_file.get(name, (0, 0.0))
        per_file[name] = (count + 1, total + float(case.get("time") or 0))
    return per_file


if __name__ == "__main__":
    main()
