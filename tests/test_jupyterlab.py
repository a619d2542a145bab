"""A learner's session in a real JupyterLab, driven through its UI in Debian's chromium.

`jupyter lab` is started from this environment on localhost, with the settings binder/postBuild installs:
postBuild runs as repo2docker runs it, into a temporary NB_PYTHON_PREFIX, and JupyterLab reads that prefix's
share/jupyter/lab/settings (overrides.json) as its app settings. It serves a temporary copy of the files a
learner opens, so nothing in the repository is touched (JupyterLab autosaves). Then, as a learner:

- chapter 1 opens from its /lab/tree URL as a notebook, not in the text editor; Run > Run All Cells (the
  menu) runs it in one kernel, every code cell's prompt ends numbered 1, 2, ... in order, no cell shows an
  error, and the chapter's headline figure is visible in an output area;
- the recap quiz (chapter 9) shows its MyST rendered (jupyterlab-myst): one folded dropdown per answer,
  whose body shows only once its summary is clicked, no raw directive, role or label in the text, and no
  cross-reference left unresolved (chapter 1 too);
- in exercise 1, the solution typed into question 1's cell passes its `grader.check("q1")` cell, and a wrong
  answer shows the question's hint.

JupyterLab loads once, in one browser page, from chapter 1's /lab/tree URL with `?reset` (a fresh workspace:
otherwise it restores the documents of an earlier session); the quiz and the exercise are opened in that app by
File > Open from Path, as a learner opens another file (each app load cost several CPU seconds of the
browser), and what was opened before stays in hidden tabs: the tests read the visible notebook panel. A cell is run only once the status bar names the kernel and says Idle; the notebook's
execution indicator already says idle while the panel has no kernel yet, and a Run All clicked then leaves
every prompt blank. JupyterLab skips the layout of cells out of view (content-visibility), so their
innerText is empty: prompts are read from their text content, and what must be *visible* is scrolled into
view first. Screenshots go to _build/screenshots/jupyterlab-*.png; `pytest -s` prints each test's time.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from urllib.parse import quote

import jupytext
import nbformat
import pytest
import requests
from conftest import unavailable as _unavailable
from test_jupyter_server import free_port

from tools import built_site

ROOT = built_site.ROOT
CHAPTER = "chapters/01_next_token_prediction.md"
QUIZ = "chapters/09_recap_quiz.md"
EXERCISE = "exercises/01_next_token_prediction.ipynb"
MASTER = "solutions/01_next_token_prediction.md"
HEADLINE = "average loss: 1.31 nats"  # the source page's average loss of the example sentence
# MyST that JupyterLab shows as raw text without jupyterlab-myst: directive fences, roles (rendered as plain
# Markdown, {ref}`x` reads "{ref}x"), target labels
RAW_MYST = re.compile(r"^\s*(:::+|```+)|\{[a-z][\w:-]*\}(?=[^\s\x22\x27])|^\([\w-]+\)=\s*$", re.MULTILINE)
SHOTS = built_site.HTML.parent / "screenshots"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# a page-side wait checks its condition every POLL_MS, not at every animation frame (Playwright's default), which
# kept the renderer busy all through Run All Cells
POLL_MS = 100
SECONDS = {"start": 90, "open": 90, "kernel": 120, "run all": 240, "cell": 90}  # generous: 2 loaded cores


def post_build(prefix):
    """Run binder/postBuild as repo2docker does, into `prefix`; return the settings folder it fills. Its pip
    step (the course package, installed here already) goes to a stand-in `python` that does nothing."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
    (prefix / "bin" / "python").chmod(0o755)
    env = dict(os.environ, NB_PYTHON_PREFIX=str(prefix), PATH=f"{prefix / 'bin'}:{os.environ['PATH']}")
    run = subprocess.run(["bash", "binder/postBuild"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    settings = prefix / "share" / "jupyter" / "lab" / "settings"
    assert (settings / "overrides.json").exists(), "binder/postBuild installed no JupyterLab settings"
    return settings


def wait_for_server(proc, url, headers, log, seconds):
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if requests.get(url, headers=headers, timeout=5).ok:
                return
        except requests.RequestException:  # not listening yet, or too busy to answer
            pass
        time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {seconds} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token) of a JupyterLab started as a learner on Binder has it, on a copy of the course."""
    jupyter_lab = shutil.which("jupyter-lab", path=os.path.dirname(sys.executable))
    if jupyter_lab is None:
        _unavailable("the JupyterLab test needs JupyterLab: pip install --no-deps -r requirements.txt")
    started = time.monotonic()
    home = tmp_path_factory.mktemp("jupyterlab")
    for path in (CHAPTER, QUIZ, EXERCISE):
        (home / "course" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, home / "course" / path)
    settings = post_build(home / "prefix")
    port, token = free_port(), uuid.uuid4().hex
    # every folder JupyterLab writes to is the test's own (user settings and workspaces default to ~/.jupyter)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    # the one answer given in advance: "No" to JupyterLab's question whether to fetch Jupyter news, whose
    # toast would otherwise sit over the bottom right of every page (the test's network is closed anyway)
    notification = home / "user-settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    notification /= "notification.jupyterlab-settings"
    notification.write_text(json.dumps({"fetchNews": "false"}))
    log = home / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                jupyter_lab,
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={home / 'course'}",
                f"--LabApp.app_settings_dir={settings}",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--allow-root",
            ],  # CI runs as root
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}
    try:
        wait_for_server(proc, f"{base}/api/status", headers, log, SECONDS["start"])
        # postBuild's overrides reached JupyterLab: a Markdown file's default viewer is Jupytext's notebook
        docmanager = requests.get(
            f"{base}/lab/api/settings/@jupyterlab/docmanager-extension:plugin", headers=headers, timeout=30
        ).json()
        viewers = docmanager["schema"]["properties"]["defaultViewers"]["default"]
        assert viewers.get("markdown") == "Jupytext Notebook", f"postBuild's settings not in effect: {viewers}"
        print(f"\nJupyterLab: set up and started in {time.monotonic() - started:.1f} s")
        yield base, token
    finally:
        proc.terminate()  # the server shuts its kernels down on the way out
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        print(f"JupyterLab session: {time.monotonic() - started:.1f} s in all")


@pytest.fixture
def timed(request):
    started = time.monotonic()
    yield
    print(f"{request.node.name}: {time.monotonic() - started:.1f} s")


def shoot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"jupyterlab-{name}.png")


@pytest.fixture(scope="module")
def lab_page(browser_context, lab):
    """The one browser page of the module's JupyterLab: the app loads once, from the first test's /lab/tree URL,
    and each later test opens its document in it, as a learner does, by File > Open from Path (an app load
    cost several CPU seconds of the browser, three times)."""
    page = browser_context.new_page()
    yield page
    page.close()


@contextmanager
def session(lab_page, lab, path, name, from_url=False):
    """`path` shown in the module's JupyterLab page: opened from its /lab/tree URL in a fresh workspace when the
    app is not loaded yet (or `from_url`), else by File > Open from Path; on a failure its screenshot goes to
    jupyterlab-`name`-failed.png. The documents opened before stay open in hidden tabs: every locator here
    reads the visible notebook panel."""
    base, token = lab
    page = lab_page
    try:
        if from_url or not page.url.startswith(base):
            page.goto(f"{base}/lab/tree/{quote(path)}?token={token}&reset", wait_until="domcontentloaded")
        else:
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Open from Path")).click()
            field = page.locator(".jp-Dialog input")
            field.fill(path)
            page.locator(".jp-Dialog button", has_text=re.compile(r"^Open$")).click()
        page.wait_for_function(
            r"""name => Array.from(document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current'))
            .some(tab => tab.textContent.trim() === name)""",
            arg=path.rsplit("/", 1)[-1],
            polling=POLL_MS,
            timeout=SECONDS["open"] * 1000,
        )
        page.wait_for_selector(f"{PANEL}, .jp-FileEditor", state="visible", timeout=SECONDS["open"] * 1000)
        assert page.locator(".jp-FileEditor:visible").count() == 0, f"{path} opened in the text editor"
        yield page
    except BaseException:
        shoot(page, f"{name}-failed")
        raise


def cells(page, kind=""):
    return page.locator(f"{PANEL} .jp-Notebook .jp-Cell{kind}")


def wait_for_cells(page, n):
    page.wait_for_function(
        f"n => document.querySelectorAll('{PANEL} .jp-Notebook .jp-Cell').length === n",
        arg=n,
        polling=POLL_MS,
        timeout=SECONDS["open"] * 1000,
    )


def wait_for_kernel(page):
    """Until the status bar names the notebook's kernel and says it is idle, as a learner waits for it."""
    page.wait_for_function(
        r"""() => Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
        .some(item => /^(?!No Kernel).+ \| Idle$/.test(item.textContent.trim()))""",
        polling=POLL_MS,
        timeout=SECONDS["kernel"] * 1000,
    )


def prompts(page):
    return page.evaluate(f"""() => Array.from(document.querySelectorAll('{PANEL} .jp-CodeCell .jp-InputPrompt'))
        .map(p => p.textContent.trim())""")


def on_screen(page, area, text):
    """Scroll the notebook until `text` (white space folded) stands in the middle of it; assert that the
    learner sees it there: inside the notebook's view, and not covered by anything else."""
    where = area.evaluate(
        r"""async (root, text) => {
        const fold = s => s.replace(/\s+/g, ' ');
        let target = null;
        const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let node = walk.nextNode(); node && !target; node = walk.nextNode()) {
            const at = node.data.indexOf(text);  // a line of printed text: the range of just that line
            if (at >= 0) {
                target = document.createRange();
                target.setStart(node, at);
                target.setEnd(node, at + text.length);
            }
        }
        if (!target) {  // text across elements (rendered HTML): the innermost element that holds all of it
            const holders = [root, ...root.querySelectorAll('*')].filter(e => fold(e.textContent).includes(text));
            if (!holders.length) return 'not in the output';
            target = holders[holders.length - 1];
        }
        const view = root.closest('.jp-WindowedPanel-outer');
        const frame = () => new Promise(done => requestAnimationFrame(done));
        // cells coming into view take their real height only when the page is next drawn, and JupyterLab may
        // still be scrolling to the cell it ran last: scroll, let the page draw, and again, until the text
        // has stood in the middle for ten frames running
        let r, v;
        for (let pass = 0, still = 0; pass < 600 && still < 10; pass++) {
            r = target.getBoundingClientRect();
            v = view.getBoundingClientRect();
            const off = (r.top + r.bottom) / 2 - (v.top + v.bottom) / 2;
            if (Math.abs(off) < 2) still++; else { still = 0; view.scrollTop += off; }
            await frame();
        }
        r = target.getBoundingClientRect();
        v = view.getBoundingClientRect();
        if (!r.height || r.top < v.top || r.bottom > v.bottom || r.left < v.left || r.right > v.right)
            return `outside the notebook's view: ${JSON.stringify(r)} in ${JSON.stringify(v)}`;
        const top = document.elementFromPoint(r.left + Math.min(r.width, 20) / 2, (r.top + r.bottom) / 2);
        return root.contains(top) ? 'shown' : `covered by ${top && top.className}`;
    }""",
        " ".join(text.split()),
    )
    assert where == "shown", f"{text!r}: {where}"


def run_cell(page, index, code=None):
    """Click into code cell `index` (of all cells), replace its code as if pasted, run it with Shift+Enter;
    once its prompt has a new number, return its output area and the text it shows."""
    cell = cells(page).nth(index)
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    if code is not None:
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(code)  # as pasted: no auto-indent or closing brackets
    before = cell.locator(".jp-InputPrompt").text_content().strip()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        r"""([prompt, before]) => {
        const now = prompt.textContent.trim();
        return /^\[\d+\]:$/.test(now) && now !== before;
    }""",
        arg=[cell.locator(".jp-InputPrompt").element_handle(), before],
        polling=POLL_MS,
        timeout=SECONDS["cell"] * 1000,
    )
    output = cell.locator(".jp-OutputArea")
    output.scroll_into_view_if_needed()  # laid out, so that its innerText is what it shows
    return output, output.inner_text()


def unresolved_references(page):
    """The labels of the cross-references that jupyterlab-myst could not resolve in the open notebook: it shows
    each as a warning sign and the bare label. It resolves a label of the same notebook, not one of another
    page, so the chapters link another page as a file ([title](04_kv_cache.md)), which both it and the website
    follow. (It reads no bibliography either: a {cite} shows its key, marked "Citation Not Found".)"""
    return page.eval_on_selector_all(
        f"{PANEL} .jp-MarkdownCell [title='Cross Reference Not Found']", "found => found.map(e => e.textContent.trim())"
    )


def test_chapter_1_opens_as_a_notebook_and_runs_to_the_end(lab_page, lab, timed):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # here: the fixture checked it is installed

    source = jupytext.read(ROOT / CHAPTER)
    code = [c for c in source.cells if c.cell_type == "code"]
    with session(lab_page, lab, CHAPTER, "chapter-1", from_url=True) as page:
        wait_for_cells(page, len(source.cells))
        wait_for_kernel(page)
        assert prompts(page) == ["[ ]:"] * len(code), "chapter 1 opened with cells already run"
        assert not unresolved_references(page), f"references shown unresolved: {unresolved_references(page)}"

        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        expected = [f"[{n}]:" for n in range(1, len(code) + 1)]  # one fresh kernel, every cell once, in order
        try:
            page.wait_for_function(
                f"""() => {{
                const shown = Array.from(document.querySelectorAll('{PANEL} .jp-CodeCell .jp-InputPrompt'))
                    .map(p => p.textContent.trim());
                return shown.every(p => p !== '[*]:') && shown.some(p => p !== '[ ]:');
            }}""",
                polling=POLL_MS,
                timeout=SECONDS["run all"] * 1000,
            )
        except PlaywrightTimeout:
            pytest.fail(f"Run All Cells did not finish in {SECONDS['run all']} s: prompts {prompts(page)}")
        assert prompts(page) == expected, "Run All Cells did not run every cell once, in order"

        code_cells = cells(page, ".jp-CodeCell")
        for number, cell in enumerate(code, start=1):
            errors = code_cells.nth(number - 1).locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
            )
            if "raises-exception" not in cell.metadata.get("tags", []) and errors.count():
                errors.first.scroll_into_view_if_needed()
                pytest.fail(f"code cell {number} shows an error:\n{errors.first.inner_text()[-1500:]}")

        headline = page.locator(f"{PANEL} .jp-OutputArea-output", has_text=HEADLINE)
        assert headline.count() == 1, f"{headline.count()} output areas hold {HEADLINE!r}"
        on_screen(page, headline, HEADLINE)
        shoot(page, "chapter-1")


def test_recap_quiz_renders_myst_with_answers_folded(lab_page, lab, timed):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    source = jupytext.read(ROOT / QUIZ)
    markdown_sources = [c.source for c in source.cells if c.cell_type == "markdown"]
    n_answers = sum(len(re.findall(r"^:::+\{dropdown\}", s, re.MULTILINE)) for s in markdown_sources)
    assert n_answers > 0 and RAW_MYST.search("\n".join(markdown_sources)), "the quiz's source has changed shape"
    with session(lab_page, lab, QUIZ, "recap-quiz") as page:
        wait_for_cells(page, len(source.cells))
        answers = page.locator(f"{PANEL} .jp-MarkdownCell details")
        try:  # jupyterlab-myst renders each {dropdown} as <details class="myst-dropdown">
            page.wait_for_function(
                f"n => document.querySelectorAll('{PANEL} .jp-MarkdownCell details').length === n",
                arg=n_answers,
                polling=POLL_MS,
                timeout=SECONDS["open"] * 1000,
            )
        except PlaywrightTimeout:
            pytest.fail(f"{answers.count()} dropdowns shown, {n_answers} in the quiz: is jupyterlab-myst enabled?")

        shown = cells(page, ".jp-MarkdownCell")
        assert shown.count() == len(markdown_sources)
        raw = {}
        for i in range(shown.count()):
            cell = shown.nth(i)
            cell.scroll_into_view_if_needed()  # laid out, so that innerText is what is on screen
            assert cell.locator(".jp-InputArea-editor").is_hidden(), f"markdown cell {i + 1} is not rendered"
            raw.update({m.group().strip(): i + 1 for m in RAW_MYST.finditer(cell.inner_text())})
        assert not raw, f"raw MyST shown in the quiz (text: markdown cell): {raw}"
        assert not unresolved_references(page), f"references shown unresolved: {unresolved_references(page)}"

        for i in range(n_answers):
            answer = answers.nth(i)
            answer.scroll_into_view_if_needed()
            assert answer.get_attribute("open") is None, f"answer {i + 1} is open before it is clicked"
            assert answer.locator(":scope > summary").is_visible(), f"answer {i + 1} has no visible summary"
            assert answer.locator(":scope > :not(summary)").first.is_hidden(), f"answer {i + 1} is shown unasked"
        shoot(page, "recap-quiz")
        first = answers.first
        first.scroll_into_view_if_needed()
        first.locator(":scope > summary").click()  # a learner opens one answer: now it shows
        first.locator(":scope > :not(summary)").first.wait_for(state="visible", timeout=10_000)
        shoot(page, "recap-quiz-answer-open")


def solution_code(question):
    """The code of `question`'s solution cell in the exercise's otter master, without its markers."""
    cells_ = jupytext.read(ROOT / MASTER).cells
    start = next(
        i
        for i, c in enumerate(cells_)
        if c.cell_type == "raw"
        and c.source.startswith("# BEGIN QUESTION")
        and re.search(rf"^name: {question}$", c.source, re.MULTILINE)
    )
    solution = next(c for c in cells_[start:] if c.cell_type == "code")
    return "\n".join(ln for ln in solution.source.splitlines() if not re.match(r"\s*# (BEGIN|END) SOLUTION", ln))


def public_hint(student, question):
    """The failure message of `question`'s public test, as the student notebook carries it to otter."""
    suites = student.metadata["otter"]["tests"][question]["suites"]
    return next(case["failure_message"] for s in suites for case in s["cases"] if not case["hidden"])


def test_exercise_check_passes_a_right_answer_and_hints_at_a_wrong_one(lab_page, lab, timed):
    student = nbformat.read(ROOT / EXERCISE, as_version=4)
    answer = next(i for i, c in enumerate(student.cells) if c.source.startswith("def position_losses("))
    check = next(i for i, c in enumerate(student.cells) if c.source.strip() == 'grader.check("q1")')
    setup = [i for i in range(answer) if student.cells[i].cell_type == "code"]
    hint = " ".join(public_hint(student, "q1").split())
    wrong = "def position_losses(chances, target_ids):\n    return np.zeros(len(target_ids))\n"
    with session(lab_page, lab, EXERCISE, "exercise") as page:
        wait_for_cells(page, len(student.cells))
        wait_for_kernel(page)
        for i in setup:  # the otter set-up and the imports, as a learner runs them from the top
            _, shown = run_cell(page, i)
            assert "Traceback" not in shown and "Error" not in shown, f"cell {i + 1} failed:\n{shown[-1500:]}"

        run_cell(page, answer, solution_code("q1"))
        output, passed = run_cell(page, check)
        assert re.search(r"\bq1\b.*\bpassed\b", passed, re.DOTALL) and hint not in " ".join(passed.split()), (
            f"the right answer did not pass:\n{passed}"
        )
        on_screen(page, output, "passed!")
        shoot(page, "exercise-passed")

        run_cell(page, answer, wrong)
        output, failed = run_cell(page, check)
        assert "passed" not in failed and hint in " ".join(failed.split()), (
            f"the wrong answer should fail with the hint {hint!r}:\n{failed}"
        )
        on_screen(page, output, hint)
        shoot(page, "exercise-hint")
