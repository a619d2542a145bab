"""The exercises grade correctly, and the student copies are what solutions/ says they are.

One session regenerates every exercise from `solutions/` into a temporary folder
(`tools/make_exercises.py`, the code behind `make exercises`), then grades, with
the batch grader's own `grade_one`, for each exercise: the solved notebook, the
untouched student notebook, and notebooks with planted wrong answers. The
regenerated files must equal the committed ones, byte for byte.
"""
from __future__ import annotations

import copy
import csv
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import grade  # noqa: E402
import make_exercises  # noqa: E402

NAMES = make_exercises.exercise_names()

# Planted wrong answers, two per question. The first of each pair hard-codes the
# value its public test expects (so it passes the public test), and the hidden
# tests must still catch it; the second is a plausible mistake of understanding.
WRONG = {
    "01_next_token_prediction": {
        "q1": ["def position_losses(chances, target_ids):\n    return np.log([2, 1.25])",
               "def position_losses(chances, target_ids):\n"
               "    return -np.log2(np.asarray(chances)[np.arange(len(target_ids)), target_ids])"],
        "q2": ["def sentence_loss(logits, target_ids):\n    return float((np.log(4 / 3) + np.log(4)) / 2)",
               "def sentence_loss(logits, target_ids):\n"
               "    return float(-np.log(softmax(logits)[np.arange(len(target_ids)), target_ids]).sum())"],
        "q3": ["def favourite_hits(chances, target_ids):\n    return 2",
               "def favourite_hits(chances, target_ids):\n"
               "    return int((np.asarray(chances).argmin(axis=1) == np.asarray(target_ids)).sum())"],
        "q4": ["def signal_counts(n_tokens, sentence_tokens):\n    return (20, 600)",
               "def signal_counts(n_tokens, sentence_tokens):\n    return -(-n_tokens // sentence_tokens), n_tokens - 1"],
    },
}


def _build(name, root):
    return make_exercises.build(name, root / "work" / name, root / "exercises", root / "autograder")


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory):
    """Every exercise rebuilt from solutions/: {name: otter assign folder}, plus the folder of the copies."""
    root = tmp_path_factory.mktemp("regenerated")
    with ThreadPoolExecutor(2) as pool:
        dists = dict(zip(NAMES, pool.map(lambda n: _build(n, root), NAMES)))
    return root, dists


def _with_cells(nb, sources):
    """A copy of `nb` with code cells appended (appended definitions replace the earlier ones)."""
    nb = copy.deepcopy(nb)
    nb.cells.extend(nbformat.v4.new_code_cell(s) for s in sources)
    return nb


def _submissions(name, root, dist):
    """The notebooks graded for one exercise: solved, blank, and one per variant of planted wrong answers."""
    folder = root / "submissions" / name
    folder.mkdir(parents=True)
    solved = nbformat.read(dist / "autograder" / f"{name}.ipynb", as_version=4)
    notebooks = {"solved": solved, "blank": nbformat.read(root / "exercises" / f"{name}.ipynb", as_version=4)}
    for k in range(2):
        notebooks[f"wrong{k}"] = _with_cells(solved, [v[k] for v in WRONG.get(name, {}).values()])
    for kind, nb in notebooks.items():
        nbformat.write(nb, folder / f"{kind}.ipynb")
    return {kind: folder / f"{kind}.ipynb" for kind in notebooks}


@pytest.fixture(scope="session")
def graded(regenerated):
    """{(name, kind): CSV row of the batch grader}, every submission graded in a pool of two."""
    root, dists = regenerated
    jobs = {(name, kind): (root / "autograder" / f"{name}.zip", path)
            for name in NAMES for kind, path in _submissions(name, root, dists[name]).items()}
    with ThreadPoolExecutor(2) as pool:
        rows = pool.map(lambda job: grade.grade_one(*job, timeout=300), jobs.values())
        return dict(zip(jobs, rows))


def test_there_are_exercises():
    assert NAMES, "no masters in solutions/"
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES, "exercises/ and solutions/ differ"
    assert sorted(p.stem for p in (ROOT / "autograder").glob("*.zip")) == NAMES, "autograder/ and solutions/ differ"


@pytest.mark.parametrize("name", NAMES)
def test_no_drift_from_solutions(regenerated, name):
    root, _ = regenerated
    for folder, suffix in [("exercises", "ipynb"), ("autograder", "zip")]:
        fresh, committed = root / folder / f"{name}.{suffix}", ROOT / folder / f"{name}.{suffix}"
        assert fresh.read_bytes() == committed.read_bytes(), \
            f"{folder}/{name}.{suffix} is not what solutions/{name}.md gives: run `make exercises EX={name}`"


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks(graded, name):
    row = graded[name, "solved"]
    assert row["status"] == "graded" and row["total"] == row["possible"] > 0, row["reason"]


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_scores_zero(graded, name):
    row = graded[name, "blank"]
    questions = grade.question_names(ROOT / "autograder" / f"{name}.zip")
    assert row["status"] == "graded", row["reason"]
    assert {q: row[q] for q in questions} == {q: 0 for q in questions}


def _solution_and_hidden_lines(name):
    """The code lines of the solutions and of the hidden tests in one master."""
    nb = jupytext.read(ROOT / "solutions" / f"{name}.md")
    solution, hidden = [], []
    for cell in nb.cells:
        lines = cell.source.splitlines()
        if cell.cell_type == "code" and "hidden: true" in cell.source:
            hidden += [ln.strip() for ln in lines if ln.strip() and '"""' not in ln and ln.strip() != "import numpy as np"]
        inside = False
        for line in lines:
            if line.strip() == "# END SOLUTION":
                inside = False
            if inside and line.strip():
                solution.append(line.strip())
            if line.strip() == "# BEGIN SOLUTION":
                inside = True
    return solution, hidden


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_holds_no_solution_and_no_hidden_test(name):
    text = (ROOT / "exercises" / f"{name}.ipynb").read_text()
    nb = nbformat.reads(text, as_version=4)
    code = "\n".join(c.source for c in nb.cells)
    solution, hidden = _solution_and_hidden_lines(name)
    assert solution and hidden, f"solutions/{name}.md: no solution or no hidden test found"
    leaked = [ln for ln in solution if ln in code]
    assert not leaked, f"exercises/{name}.ipynb contains solution code: {leaked[:3]}"
    leaked = [ln for ln in hidden if ln in text or ln.replace('"', '\\"') in text]
    assert not leaked, f"exercises/{name}.ipynb contains hidden tests: {leaked[:3]}"


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_planted_wrong_answers(name):
    questions = grade.question_names(ROOT / "autograder" / f"{name}.zip")
    assert sorted(WRONG.get(name, {}), key=lambda q: (len(q), q)) == questions, \
        f"add two planted wrong answers per question of {name} to WRONG"


@pytest.mark.parametrize("name", NAMES)
def test_planted_wrong_answers_fail_the_hidden_tests(graded, name):
    for k in range(2):
        row = graded[name, f"wrong{k}"]
        assert row["status"] == "graded", row["reason"]
        for q in WRONG[name]:
            assert row[q] == 0, f"{name} {q}: planted wrong answer {k} scored {row[q]}:\n{WRONG[name][q][k]}"
            assert not row["detail"][q]["hidden_passed"], f"{name} {q}: the hidden tests pass wrong answer {k}"
            if k == 0:  # hard-coded public values: only the hidden tests can tell
                assert row["detail"][q]["public_passed"], f"{name} {q}: planted answer 0 should pass the public test"


def test_batch_grader_keeps_every_submission(regenerated, tmp_path):
    """Solved, blank, raising, wrong-type and endless-loop submissions: five rows, right totals, within the timeout."""
    root, dists = regenerated
    name = "01_next_token_prediction"
    solved = nbformat.read(dists[name] / "autograder" / f"{name}.ipynb", as_version=4)
    folder = tmp_path / "submissions"
    folder.mkdir()
    nbformat.write(solved, folder / "a_solved.ipynb")
    (folder / "b_blank.ipynb").write_bytes((root / "exercises" / f"{name}.ipynb").read_bytes())
    nbformat.write(_with_cells(solved, ["def sentence_loss(logits, target_ids):\n    raise ValueError('not done yet')"]),
                   folder / "c_raising.ipynb")
    nbformat.write(_with_cells(solved, ["def favourite_hits(chances, target_ids):\n    return 'two'"]),
                   folder / "d_wrong_type.ipynb")
    looping = copy.deepcopy(solved)
    looping.cells.insert(2, nbformat.v4.new_code_cell("while True:\n    pass"))
    nbformat.write(looping, folder / "e_endless_loop.ipynb")
    (folder / "notes.txt").write_text("not a notebook: ignored")

    timeout = 90
    started = time.monotonic()
    rows = grade.grade_folder(root / "autograder" / f"{name}.zip", folder, tmp_path / "grades.csv",
                              timeout=timeout, jobs=2, report=None)
    elapsed = time.monotonic() - started

    with open(tmp_path / "grades.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["submission"] for r in table] == ["a_solved.ipynb", "b_blank.ipynb", "c_raising.ipynb",
                                                "d_wrong_type.ipynb", "e_endless_loop.ipynb"]
    totals = {r["submission"][0]: (float(r["total"]), float(r["possible"]), r["status"]) for r in table}
    assert totals == {"a": (4, 4, "graded"), "b": (0, 4, "graded"), "c": (3, 4, "graded"),
                      "d": (3, 4, "graded"), "e": (0, 4, "timeout")}
    by_name = {r["submission"]: r for r in table}
    assert by_name["c_raising.ipynb"]["q2"] == "0.0" and "ValueError: not done yet" in by_name["c_raising.ipynb"]["reason"]
    assert by_name["d_wrong_type.ipynb"]["q3"] == "0.0" and "q3" in by_name["d_wrong_type.ipynb"]["reason"]
    assert "Traceback" not in "".join(r["reason"] for r in table)
    assert all(r["seconds"] <= timeout + 30 for r in rows), [r["seconds"] for r in rows]
    assert elapsed < 3 * timeout, f"the batch took {elapsed:.0f} s"
