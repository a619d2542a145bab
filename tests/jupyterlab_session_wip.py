"""WORK IN PROGRESS, not collected by pytest (rename to test_jupyterlab.py when it passes): on a loaded
2-core machine, *Run All Cells* in chapter 1 left every prompt at [ ] for 300 s, and the quiz showed no
<details> within the wait; the exercise check passed once (108 s). See the closing note of issue 16.

A learner's session in a real JupyterLab, driven in Debian's chromium.

`jupyter lab` is started from this environment on localhost, with the settings that binder/postBuild
installs (postBuild is run into a temporary prefix, as repo2docker runs it, and JupyterLab reads its
settings from there), on a temporary copy of the files a learner opens, so nothing in the repository is
touched (JupyterLab autosaves). Then, through the UI:

- chapter 1 opens from its URL as a notebook (not in the text editor), *Run All Cells* runs it to the end,
  and the page shows what its golden notebook recorded, with the chapter's headline figure;
- the recap quiz (chapter 9) shows its MyST as the website does (jupyterlab-myst): every answer folded in a
  closed dropdown, and no raw directive, role or label in the text;
- in exercise 1, the solution typed into question 1's cell passes its `grader.check` cell, and a wrong answer
  shows the question's hint.

Screenshots go to _build/screenshots/jupyterlab-*.png.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from urllib.parse import quote

import jupytext
import nbformat
import pytest
import requests

import built_site

ROOT = built_site.ROOT
CHAPTER = "chapters/01_next_token_prediction.md"
QUIZ = "chapters/09_recap_quiz.md"
EXERCISE = "exercises/01_next_token_prediction.ipynb"
MASTER = "solutions/01_next_token_prediction.md"
GOLDEN = ROOT / "tests" / "golden" / "01_next_token_prediction.ipynb"
HEADLINE = "average loss: 1.31 nats"  # the source page's average loss of the example sentence
# MyST that JupyterLab shows as raw text without jupyterlab-myst: directives, roles, labels
RAW_MYST = re.compile(r":::|```|\{(?:ref|cite|term|dropdown|admonition|download|binder|numref|doc)\}|^\([\w-]+\)=", re.M)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
SHOTS = built_site.HTML.parent / "screenshots"


def _unavailable(message):
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post_build_settings(prefix):
    """Run binder/postBuild as repo2docker does, into a temporary prefix; return the settings folder it fills.
    Its pip step (the course package, already installed here) goes to a stand-in `python` that does nothing."""
    fake_bin = prefix / "bin"
    fake_bin.mkdir(parents=True)
    (fake_bin / "python").write_text("#!/bin/sh\nexit 0\n")
    (fake_bin / "python").chmod(0o755)
    env = dict(os.environ, NB_PYTHON_PREFIX=str(prefix), PATH=f"{fake_bin}:{os.environ['PATH']}")
    run = subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    settings = prefix / "share" / "jupyter" / "lab" / "settings"
    assert (settings / "overrides.json").exists(), "postBuild installed no JupyterLab settings"
    return settings


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token, the folder JupyterLab serves) of a JupyterLab started as a learner starts it."""
    jupyter = shutil.which("jupyter-lab", path=os.path.dirname(sys.executable))
    if jupyter is None:
        _unavailable("the JupyterLab test needs JupyterLab: pip install -r requirements.txt")
    home = tmp_path_factory.mktemp("jupyterlab")
    served = home / "course"
    for path in (CHAPTER, QUIZ, EXERCISE):
        (served / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, served / path)
    settings = post_build_settings(home / "prefix")
    # the one setting of the test's own: every cell in the page at once (JupyterLab otherwise renders only
    # the cells near the view), so that the test can read all of them without scrolling
    tracker = home / "user-settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    port, token = free_port(), uuid.uuid4().hex
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "ws"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    log = open(home / "lab.log", "w")
    proc = subprocess.Popen(
        [jupyter, "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
         f"--LabApp.app_settings_dir={settings}", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--allow-root"],  # CI runs as root
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(f"{base}/api/status", headers={"Authorization": f"token {token}"}, timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (home / "lab.log").read_text()[-3000:]
            time.sleep(0.3)
        yield base, token, served
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(chromium):
        _unavailable("the JupyterLab test needs Debian's chromium: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the JupyterLab test needs the playwright package: pip install -r requirements-dev.txt")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True, args=ARGS,
                                                       viewport={"width": 1280, "height": 900})
        context.set_default_timeout(60_000)
        context.route(re.compile(r"^(?!(http|ws)://127\.0\.0\.1[:/]).*"), lambda route: route.abort())  # no network
        yield context
        context.close()


def open_in_lab(browser, lab, path):
    """Open a file from its JupyterLab URL; return the page once the document's panel is shown."""
    base, token, _ = lab
    page = browser.new_page()
    page.goto(f"{base}/lab/tree/{quote(path)}?token={token}", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-NotebookPanel, .jp-FileEditor", state="visible", timeout=90_000)
    return page


def notebook(page):
    return page.locator(".jp-NotebookPanel:visible .jp-Notebook")


def wait_for_cells(page, n):
    try:
        page.wait_for_function("""(n) => document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length === n""", arg=n, timeout=60_000)
    except Exception:
        shoot(page, "unloaded")
        pytest.fail(f"the notebook shows {notebook(page).locator('.jp-Cell').count()} cells, the file has {n}")


def wait_for_idle_kernel(page, timeout=120):
    page.wait_for_function("""() => {
        const s = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
        return s && s.getAttribute('data-status') === 'idle';
    }""", timeout=timeout * 1000)


def shoot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"jupyterlab-{name}.png")


def run_cell(page, index, code=None):
    """Type code into cell `index` (replacing what it holds), run it with Shift+Enter, wait for it to finish."""
    cell = notebook(page).locator(".jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    editor = cell.locator(".cm-content")
    editor.click()
    if code is not None:
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(code)  # as pasted: no auto-indent or bracket closing
    before = cell.locator(".jp-InputPrompt").inner_text()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function("""([cell, before]) => {
        const prompt = cell.querySelector('.jp-InputPrompt').innerText.trim();
        return /\\[\\d+\\]/.test(prompt) && prompt !== before.trim();
    }""", arg=[cell.element_handle(), before], timeout=120_000)
    return cell.locator(".jp-OutputArea").inner_text()


def test_chapter_1_opens_as_a_notebook_and_runs_to_the_end(browser, lab):
    page = open_in_lab(browser, lab, CHAPTER)
    assert page.locator(".jp-FileEditor:visible").count() == 0, "chapter 1 opened in the text editor"
    source = jupytext.read(ROOT / CHAPTER)
    wait_for_cells(page, len(source.cells))
    wait_for_idle_kernel(page)

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    code = notebook(page).locator(".jp-CodeCell")
    n_code = sum(c.cell_type == "code" for c in source.cells)
    try:
        page.wait_for_function("""(n) => {
            const prompts = Array.from(document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')).map(p => p.innerText.trim());
            return prompts.length === n && prompts.every(p => /^\\[\\d+\\]:?$/.test(p));
        }""", arg=n_code, timeout=300_000)
    except Exception:
        shoot(page, "chapter-1-unfinished")
        prompts = [p.inner_text() for p in code.locator(".jp-InputPrompt").all()]
        pytest.fail(f"Run All Cells did not finish: {n_code} code cells, prompts {prompts}")
    shoot(page, "chapter-1")
    outputs = [code.nth(i).locator(".jp-OutputArea").inner_text() for i in range(n_code)]
    page.close()

    golden = [c for c in nbformat.read(GOLDEN, as_version=4).cells if c.cell_type == "code"]
    assert len(golden) == n_code
    for number, (cell, shown) in enumerate(zip(golden, outputs), start=1):
        tags = cell.metadata.get("tags", [])
        assert "Traceback" not in shown or "raises-exception" in tags, f"cell {number} failed:\n{shown[-1500:]}"
        if "nbval-ignore-output" in tags:
            continue
        for line in "".join(o.text for o in cell.outputs if o.output_type == "stream").splitlines():
            assert line.strip() in shown, f"cell {number} should show {line!r}; it shows\n{shown[:1500]}"
    assert HEADLINE in "\n".join(outputs)


def test_recap_quiz_renders_myst_with_answers_folded(browser, lab):
    page = open_in_lab(browser, lab, QUIZ)
    wait_for_cells(page, len(jupytext.read(ROOT / QUIZ).cells))
    markdown = notebook(page).locator(".jp-MarkdownCell")
    answers = notebook(page).locator("details")
    expected = len(re.findall(r"^:::\{dropdown\}", (ROOT / QUIZ).read_text(), re.M))
    assert expected > 0 and answers.count() == expected, f"{answers.count()} dropdowns shown, {expected} in the quiz"
    for i in range(answers.count()):
        answer = answers.nth(i)
        assert answer.get_attribute("open") is None, f"answer {i + 1} is open before it is clicked"
        body = answer.locator(":scope > :not(summary)").first
        assert not body.is_visible(), f"answer {i + 1} is visible before it is clicked"
    text = "\n".join(markdown.nth(i).inner_text() for i in range(markdown.count()))
    shoot(page, "recap-quiz")
    raw = sorted({m.group() for m in RAW_MYST.finditer(text)})
    assert not raw, f"raw MyST shown in the quiz: {raw}"
    answers.first.locator(":scope > summary").click()
    answers.first.locator(":scope > :not(summary)").first.wait_for(state="visible", timeout=5_000)
    page.close()


def master_question(name):
    """(the solution code, the hint of its public test) of a question, from the exercise's otter master."""
    cells = jupytext.read(ROOT / MASTER).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "raw" and c.source.startswith("# BEGIN QUESTION")
                 and re.search(rf"^name: {name}$", c.source, re.M))
    solution = next(c for c in cells[start:] if c.cell_type == "code")
    code = "\n".join(ln for ln in solution.source.splitlines() if not re.match(r"\s*# (BEGIN|END) SOLUTION", ln))
    tests = next(i for i in range(start, len(cells)) if cells[i].source.startswith("# BEGIN TESTS"))
    public = next(c for c in cells[tests:] if c.cell_type == "code" and "hidden: true" not in c.source)
    hint = re.search(r"^failure_message: (.+)$", public.source, re.M).group(1).strip()
    return code, hint


def test_exercise_check_passes_a_right_answer_and_hints_at_a_wrong_one(browser, lab):
    solution, hint = master_question("q1")
    student = nbformat.read(ROOT / EXERCISE, as_version=4)
    answer_cell = next(i for i, c in enumerate(student.cells) if c.source.startswith("def position_losses("))
    check_cell = next(i for i, c in enumerate(student.cells) if c.source.strip() == 'grader.check("q1")')
    setup_cells = [i for i in range(answer_cell) if student.cells[i].cell_type == "code"]

    page = open_in_lab(browser, lab, EXERCISE)
    wait_for_cells(page, len(student.cells))
    wait_for_idle_kernel(page)
    for i in setup_cells:  # the otter set-up and the imports, as a learner runs them from the top
        shown = run_cell(page, i)
        assert "Traceback" not in shown, f"cell {i} failed:\n{shown[-1500:]}"

    run_cell(page, answer_cell, solution)
    passed = run_cell(page, check_cell)
    shoot(page, "exercise-passed")
    assert re.search(r"\bq1\b.*passed", passed, re.S), f"the right answer did not pass:\n{passed}"

    wrong = "def position_losses(chances, target_ids):\n    return np.zeros(len(target_ids))\n"
    run_cell(page, answer_cell, wrong)
    failed = run_cell(page, check_cell)
    shoot(page, "exercise-hint")
    assert "passed!" not in failed and hint in " ".join(failed.split()), (
        f"the wrong answer should fail with the hint {hint!r}:\n{failed}")
    page.close()
