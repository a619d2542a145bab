"""The student release (`make release`, tools/grading/release.py) holds no solution line and no hidden test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools.exercises.master import read_master
from tools.grading import release


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "course"
    run = subprocess.run(
        [sys.executable, "-m", "tools.grading.release", str(out)], capture_output=True, cwd=ROOT, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return out


def test_release_keeps_what_learners_need(released):
    for rel in (
        "chapters",
        "exercises",
        "book/__init__.py",
        "book/tiny.py",
        "_config.yml",
        "_toc.yml",
        "requirements.txt",
        "binder",
    ):
        assert (released / rel).exists(), f"the release lacks {rel}"
    assert sorted(p.name for p in (released / "exercises").glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "exercises").glob("*.ipynb")
    )


def test_release_has_no_instructor_files(released):
    for folder in ("solutions", "autograder", "tests", "tools", ".ci"):
        assert not (released / folder).exists(), f"the release holds {folder}/"
    assert not list(released.rglob("*.zip")), "the release holds a zip"


def test_release_holds_no_solution_line_or_hidden_test(released):
    secrets = release.secret_lines()
    assert len(secrets) > 50, "too few solution and hidden-test lines found in solutions/ to check anything"
    assert not release.leaks(released), release.leaks(released)[:3]


def test_the_leak_check_finds_a_leak(tmp_path):
    """The check above can fail: a release with one master copied in is caught."""
    shutil.copy(ROOT / "solutions" / "04_kv_cache.md", tmp_path / "notes.md")
    found = release.leaks(tmp_path)
    assert found and {f for f, _ in found} == {"notes.md"}


def test_the_leak_check_finds_a_statement_wrapped_another_way(tmp_path):
    """A solution statement that spans several lines in its master is caught on one line of a notebook."""
    public, wrapped = release.public_text(), []
    for master in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.md")):
        solution, _ = release.master_secrets(master)
        wrapped += [
            code
            for cell in read_master(master).cells
            if cell.kind == "code"
            for first, last, code in release.statements(cell.source)
            if last > first and release.squeeze(code) in solution and release.squeeze(code) not in public
        ]
    assert wrapped, "no multi-line solution statement in the master to try"
    nb = {"cells": [{"cell_type": "code", "source": [wrapped[0]], "metadata": {}, "outputs": []}]}
    (tmp_path / "copied.ipynb").write_text(json.dumps(nb, indent=1))
    assert [f for f, _ in release.leaks(tmp_path)] == ["copied.ipynb"]


def test_statements_span_their_rows():
    """Each statement with the rows it spans, comments left out, with or without a newline at the end."""
    source = "x = f(1,  # one\n      2)\n# a comment\ny = 3"
    assert release.statements(source) == [(1, 2, "x = f ( 1 , 2 )"), (4, 4, "y = 3")]
    assert release.statements(source + "\n") == release.statements(source)
    assert release.statements("%timeit f(\n") == [(1, 1, "%timeit f(")]  # no Python: the physical lines


def test_release_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "old.txt").write_text("keep me")
    run = subprocess.run(
        [sys.executable, "-m", "tools.grading.release", str(tmp_path)],
        capture_output=True,
        cwd=ROOT,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and "is not empty" in run.stderr and "Traceback" not in run.stderr
    assert (tmp_path / "old.txt").read_text() == "keep me"
