"""Shared fixtures: the built website. The build test runs first, so a full run builds the book once.

Every page runs twice in `make test`, and each run must print its golden: the website's build, at the machine's
default thread count on this machine's CPU code path (test_thread_count.py compares its outputs with the
goldens', cell by cell), and test_cpu_paths.py's nbval run of the goldens on PyTorch's plain path (and AVX2
where that is not this machine's path), in a kernel of one thread (the spec written below). A third run, nbval
on the goldens on this machine's own path in one thread, would test nothing the two do not: `make test` leaves
tests/golden/ out unless it is named (`make test TESTS=tests/golden`, or one golden), as an author reruns a page.
"""

import functools
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tools import built_site, warm_kernel

ONE_THREAD_KERNEL = "python3-one-thread"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
_KERNELS = Path(tempfile.mkdtemp(prefix="course-kernels-"))
ONE_THREAD_SPEC = _KERNELS / "kernels" / ONE_THREAD_KERNEL


def pytest_unconfigure(config):
    """The kernel spec's folder and the warm process go with the run (each xdist worker and the controller made
    their own)."""
    for process in _warm:
        process.__exit__(None, None, None)
    shutil.rmtree(_KERNELS, ignore_errors=True)


def pytest_configure(config):
    """A kernel spec of this Python with one thread for torch and BLAS, on JUPYTER_PATH, handed to nbval. Its
    kernels are forked from a warm process of this worker (tools/warm_kernel.py: torch imported once, not once a
    golden), started by the first test that runs a notebook; a kernel asked for before, or whose environment
    differs from the warm process's, starts cold (tests/test_warm_kernel.py)."""
    warm_kernel.kernel_spec(_KERNELS, ONE_THREAD_KERNEL, str(WARM_SOCKET), ONE_THREAD, "Python 3 (one thread)")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(_KERNELS), os.environ.get("JUPYTER_PATH")]))
    if hasattr(config.option, "nbval_kernel_name") and not config.option.nbval_kernel_name:
        config.option.nbval_kernel_name = ONE_THREAD_KERNEL


GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_ignore_collect(collection_path, config):
    """tests/golden/ is collected only when a path given on the command line is in it (see the docstring)."""
    if collection_path != GOLDEN:
        return None
    named = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    return not any(path == GOLDEN or GOLDEN in path.parents for path in named)


WARM_SOCKET = _KERNELS / "warm.socket"
NEEDS_KERNEL = ("golden", "test_thread_count.py")
_warm = []


def pytest_runtest_setup(item):
    if not _warm and group_of(item.path).split("/")[0] in NEEDS_KERNEL:
        _warm.append(warm_kernel.warm({**os.environ, **ONE_THREAD}, WARM_SOCKET))
        _warm[0].__enter__()


# The schedule. `make test` runs the tests on one worker per CPU with pytest-xdist's `loadfile`: a worker takes
# a whole test file, or a whole golden notebook (its cells run in one kernel, in order), the next in line when
# it has two tests or fewer left. The files are put in line longest first, by the seconds each took in the
# last measured run (tests/durations.json, written by `pytest --write-durations`; a file not in it counts a
# tenth of a second a test), so that the long ones start early and the short ones fill in at the end, when
# the two workers finish together. The one exception goes first: test_build.py builds _build/html (a file
# lock keeps any other worker that needs the site waiting, built_site.ensure_built). Run serially (a plain
# `pytest`), the order is the same. (`--dist loadgroup` with xdist_group marks would give the same groups, but
# with pytest 9.2 and pytest-xdist 3.8 it silently ignores the marks: pytest-dev/pytest-xdist#1386.)
TESTS = Path(__file__).resolve().parent
DURATIONS = TESTS / "durations.json"
FIRST = "test_build.py"
UNMEASURED = 0.1  # seconds a test of a file not in tests/durations.json (a new one)


@functools.cache
def group_of(path):
    """What a worker takes whole, a test file or a golden notebook, by its path under tests/ (as
    tests/durations.json names it), e.g. 'test_tiny.py' or 'golden/02_causal_mask.ipynb'."""
    return Path(path).resolve().relative_to(TESTS).as_posix()


def measured_seconds():
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def line_up(groups, seconds):
    """The files in the order the workers take them: the build first, then the longest first (a file never
    measured counts UNMEASURED seconds a test; ties keep pytest's order). `groups` maps a file to its test count."""
    cost = {g: seconds.get(g, UNMEASURED * n) for g, n in groups.items()}
    return sorted(groups, key=lambda g: (g != FIRST, -cost[g]))


# The slow tier: files that build the site, drive a browser or a kernel, grade in sandboxes, train or run the
# goldens. `make check` runs everything else (the fast tier, about a minute: `pytest -m "not slow"`);
# `make test` runs both.
SLOW = {
    "test_build.py",
    "test_browser.py",
    "golden",
    "test_cpu_paths.py",
    "test_grading_attacks.py",
    "test_jupyterlab.py",
    "test_pdf.py",
    "test_jupyter_server.py",
    "test_exercises.py",
    "test_tiny.py",
    "test_calculator.py",
    "test_thread_count.py",
    "test_links.py",
    "test_release.py",
    "test_colab.py",
    "test_seccomp.py",
    "test_binder.py",
    "test_check.py",
    "test_prose_mutations.py",
}


def pytest_addoption(parser):
    parser.addoption(
        "--timeline",
        metavar="FILE",
        help="write when each test file ran on which worker (first start, last stop, seconds in tests) into FILE",
    )
    parser.addoption(
        "--write-durations",
        action="store_true",
        help="write the seconds each test file took into tests/durations.json, the order of the next runs",
    )


def pytest_collection_modifyitems(items):
    groups = {}
    for item in items:
        group = group_of(item.path)
        groups[group] = groups.get(group, 0) + 1
        if group.split("/")[0] in SLOW:
            item.add_marker(pytest.mark.slow)
    rank = {g: i for i, g in enumerate(line_up(groups, measured_seconds()))}
    items.sort(key=lambda item: rank[group_of(item.path)])  # stable: within a group, pytest's order stays


_spent = {}
_ran = {}  # group -> [worker, first start, last stop] (--timeline)


def pytest_runtest_logreport(report):
    """The seconds of every test's setup, call and teardown, by file (the controller sees every worker's)."""
    group = group_of(TESTS.parent / report.nodeid.split("::")[0])  # node ids start at the repository's root
    _spent[group] = _spent.get(group, 0.0) + report.duration
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
    ran = _ran.setdefault(group, [worker, report.start, report.stop])
    ran[1], ran[2] = min(ran[1], report.start), max(ran[2], report.stop)


def pytest_sessionfinish(session):
    timeline = session.config.getoption("--timeline")
    if timeline and not hasattr(session.config, "workerinput") and _ran:
        begin = min(start for _, start, _ in _ran.values())
        rows = sorted((start - begin, stop - begin, worker, g) for g, (worker, start, stop) in _ran.items())
        Path(timeline).write_text(
            "".join(f"{w:>4} {a:7.1f} {b:7.1f} {b - a:7.1f} {_spent[g]:7.1f}  {g}\n" for a, b, w, g in rows)
        )
    if session.config.getoption("--write-durations") and not hasattr(session.config, "workerinput"):
        seconds = {**measured_seconds(), **{g: round(s, 1) for g, s in _spent.items()}}
        DURATIONS.write_text(json.dumps(dict(sorted(seconds.items(), key=lambda kv: -kv[1])), indent=1) + "\n")


@pytest.fixture(scope="session")
def site():
    """The folder of the built website, built first if it is missing or stale."""
    ok, message = built_site.ensure_built()
    if not ok:
        pytest.fail(f"the book does not build:\n{message}")
    return built_site.HTML


@pytest.fixture(scope="session")
def site_url(site):
    with built_site.serve(site) as url:
        yield url


def unavailable(message):
    """A missing browser fails the suite under CI and skips the browser tests on a reader's machine."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser_context():
    """One headless Debian chromium for every browser test of the session, its network closed."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(chromium):
        unavailable("the browser tests need Debian's chromium: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the browser tests need the playwright package: make setup (requirements-dev.txt)")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=chromium,
            headless=True,
            args=built_site.CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        # no network for any page of this context: only the local site answers (each Visit also records the rest)
        context.route(re.compile(r"^(?!http://127\.0\.0\.1[:/]).*"), lambda route: route.abort())
        yield context
        context.close()


# What each system tool missing from a reader's machine leaves untested, and the one command that installs them all.
# The reasons of the skips name the tool (see `unavailable` above, test_grading_attacks.py and test_pdf.py).
PROMISES_OF_TOOLS = {
    "chromium": "the website works in a browser (search, answers folded, accessibility), JupyterLab renders MyST",
    "bubblewrap": "grading runs every submission in a sandbox and holds against the attack suite",
    "poppler": "the PDF of the course",
    "pdfunite": "the PDF of the course",
    "playwright": "the website works in a browser",
}
INSTALL_ALL = "apt-get update && apt-get install -y chromium bubblewrap poppler-utils"


def _skip_reason(report):
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
    return str(reason).removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    """After a run with skips, say which promises went untested and how to install what they need."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    counts, others = {}, set()
    for report in skipped:
        reason = _skip_reason(report)
        tools = [tool for tool in PROMISES_OF_TOOLS if tool in reason.lower()]
        for tool in tools or ["other"]:
            counts[tool] = counts.get(tool, 0) + 1
        if not tools:
            others.add(reason.splitlines()[0][:120])
    terminalreporter.section("promises not tested on this machine")
    for tool, count in sorted(counts.items()):
        if tool == "other":
            terminalreporter.write_line(f"{count:5d} skipped for other reasons: {'; '.join(sorted(others))}")
        else:
            terminalreporter.write_line(f"{count:5d} skipped for want of {tool}: {PROMISES_OF_TOOLS[tool]}")
    if set(counts) - {"other"}:
        terminalreporter.write_line(f"install what they need, then run make test again: {INSTALL_ALL}")
