"""binder/ installs the learner set of requirements.txt (with CPU-only PyTorch) and nothing of the authors' set;
the learner set is complete and consistent (whether its JupyterLab loads the Jupytext and MyST extensions is checked
in a real JupyterLab by tests/test_jupyterlab.py),
and postBuild makes JupyterLab open the chapters (Jupytext Markdown) as notebooks."""

import json
import os
import re
import subprocess
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.built_site import ROOT

BINDER = ROOT / "binder"
LEARNER = {"numpy", "matplotlib", "torch", "jupytext", "otter-grader", "jupyterlab", "jupyterlab-myst", "ipykernel"}
AUTHOR_ONLY = {
    "jupyter-book",
    "pytest",
    "nbval",
    "axe-playwright-python",
    "playwright",
    "ruff",
    "django-static-mathjax",
}
# extras that a learner package asks for and the learner set leaves out on purpose (it is installed with --no-deps)
UNUSED_EXTRAS = {("nbconvert", "webpdf"): "otter-grader asks for PDF export through a browser; no exercise exports"}


def pins(path):
    """{canonical package name: version} of the exact pins in a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
        if m:
            found[canonicalize_name(m.group(1))] = m.group(2)
    return found


def test_binder_installs_the_learner_set_itself_with_the_cpu_torch_wheel():
    """No hand-kept copy of the pins: postBuild installs the root requirements.txt, pip resolving nothing."""
    assert not (BINDER / "requirements.txt").exists(), "binder/ must not keep a second copy of the learner pins"
    post_build = (BINDER / "postBuild").read_text()
    install = " ".join(post_build.replace("\\\n", " ").split("python -m pip install", 1)[1].splitlines()[0].split())
    for option in (
        "--no-deps",
        "--extra-index-url https://download.pytorch.org/whl/cpu",
        "--requirement requirements.txt",
    ):
        assert option in install, f"postBuild's pip install lacks {option}: {install}"


def test_two_sets_learner_and_author():
    learner, dev = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-dev.txt")
    assert LEARNER <= learner.keys(), f"the learner set misses {LEARNER - learner.keys()}"
    assert not AUTHOR_ONLY & learner.keys(), f"author packages in the learner set: {AUTHOR_ONLY & learner.keys()}"
    assert AUTHOR_ONLY <= dev.keys(), f"the author set misses {AUTHOR_ONLY - dev.keys()}"
    assert not learner.keys() & dev.keys(), f"pinned in both files: {learner.keys() & dev.keys()}"
    assert learner["torch"] == "2.13.0"
    lines = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert "-r requirements.txt" in lines, "requirements-dev.txt must include the learner set"
    assert "-r requirements-dev.txt" in (ROOT / "Makefile").read_text(), "make setup installs both sets"
    for path in (ROOT / "requirements.txt", ROOT / "requirements-dev.txt"):
        loose = [
            ln
            for ln in path.read_text().splitlines()
            if ln.strip() and not ln.startswith(("#", "-e ", "-r ")) and "==" not in ln
        ]
        assert not loose, f"{path.name}: lines without an exact pin: {loose}"


def _requirements_of(name, extras=()):
    """The requirements of an installed distribution that apply here (Python 3.11 on Linux), with its extras."""
    found = []
    for text in metadata.distribution(name).requires or []:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            found.append(req)
    return found


def test_the_learner_set_resolves_on_its_own():
    """Every requirement of every pinned learner package is pinned too, at a version it accepts: pip installs
    the set with nothing left to choose, without the authors' packages."""
    learner = pins(ROOT / "requirements.txt")
    installed = {name: metadata.version(name) for name in learner}
    wrong = {n: (v, learner[n]) for n, v in installed.items() if v.split("+")[0] != learner[n]}
    if wrong:
        pytest.fail(f"this environment is not the pinned one (run make setup): {wrong}")
    extras = {}  # e.g. nbconvert[webpdf] is asked for by otter-grader
    for name in learner:
        for req in _requirements_of(name):
            for extra in req.extras:
                if (canonicalize_name(req.name), extra) not in UNUSED_EXTRAS:
                    extras.setdefault(canonicalize_name(req.name), set()).add(extra)
    problems = []
    for name in learner:
        for req in _requirements_of(name, extras.get(name, ())):
            dep = canonicalize_name(req.name)
            if dep not in learner:
                problems.append(f"{name} needs {req}, which requirements.txt does not pin")
            elif not req.specifier.contains(learner[dep], prereleases=True):
                problems.append(f"{name} needs {req}, requirements.txt pins {dep}=={learner[dep]}")
    assert not problems, "\n".join(problems)


def test_binder_python_is_the_course_python():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    import tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires.split(",")[0] == ">=3.11", requires  # Binder's Python is the lowest the package declares


def test_post_build_installs_the_learner_set_the_jupytext_viewer_and_the_models(tmp_path):
    overrides = json.loads((BINDER / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == "Jupytext Notebook"

    # run postBuild as repo2docker does (from the repository root), with a stand-in `python` that logs its arguments
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "python").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/python.log\n')
    (fake_bin / "python").chmod(0o755)
    prefix = tmp_path / "prefix"
    env = dict(os.environ, NB_PYTHON_PREFIX=str(prefix), PATH=f"{fake_bin}:{os.environ['PATH']}")
    run = subprocess.run(["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    installed = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert json.loads(installed.read_text()) == overrides
    calls = (tmp_path / "python.log").read_text().splitlines()
    installs = [i for i, c in enumerate(calls) if c.startswith("-m pip install") and "requirements.txt" in c]
    assert installs, f"postBuild never installs requirements.txt (which holds the package's -e . line): {calls}"
    assert "-e ." in (ROOT / "requirements.txt").read_text().splitlines(), "the learner set installs the package"
    # then, with the package installed, the tiny models are trained into the image's cache
    training = calls[installs[0] + 1 :]
    assert any(
        "tiny.trained_model(keep=(100,))" in c
        and "tiny.trained_model(causal=False, shipped=False, steps=tiny.RETRAIN_STEPS)" in c
        for c in training
    ), calls
    assert os.access(BINDER / "postBuild", os.X_OK), "repo2docker runs postBuild only if it is executable"


def test_post_build_trains_what_the_build_trains_and_each_training_has_a_page():
    """Binder's image holds every model the build trains before the pages (TRAININGS), so no page trains one
    in a learner's first run there either; and each training is still wanted by some chapter page."""
    from tools import built_site

    post_build = (BINDER / "postBuild").read_text()
    pages = [built_site.source_of(p).read_text() for p in built_site.chapter_pages()]
    for call, markers in built_site.TRAININGS:
        assert call in post_build, f"binder/postBuild does not run {call}, which the build trains"
        for marker in markers:
            assert any(marker in text for text in pages), f"no chapter page needs {call} for {marker!r} any more"


def test_the_learner_set_holds_only_what_learners_run():
    """Every package of requirements.txt is needed by a learner package (the direct dependencies, LEARNER, and what
    they pull in): no test, build or browser package rides along to Binder."""
    learner = pins(ROOT / "requirements.txt")
    needed, todo = set(), [(name, ()) for name in LEARNER]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in needed:
            continue
        needed.add((name, extras))
        for req in _requirements_of(name, extras):
            wanted = tuple(sorted(e for e in req.extras if (canonicalize_name(req.name), e) not in UNUSED_EXTRAS))
            todo.append((canonicalize_name(req.name), wanted))
    extra = sorted(set(learner) - {name for name, _ in needed})
    assert not extra, (
        f"requirements.txt pins packages no learner package needs (move them to requirements-dev.txt): {extra}"
    )
