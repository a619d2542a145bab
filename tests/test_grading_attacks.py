"""No submission can cheat, hang the batch or touch another's work.

One batch of `tools/grade.py`, sandbox and all, grades every notebook of
tests/attacks/cases.py against exercise 9 (the recap quiz): honest solved notebooks (one with its otter
metadata lost, one with magics, prints and a raising cell), careless ones (blank, raising,
wrong type, an endless loop, a C loop that never releases the interpreter lock, an 8 GiB
allocation, a fork bomb, an early exit, a file that is not a notebook) and cheats (patched
otter, doctest, pickle, json, numpy or builtins; answers whose `__eq__` is always true or a
float subclass; a function that patches its callers on the stack; forged results on every
file descriptor; a payload for the results' reader; rewriting the hidden tests; reading
the solutions; copying or overwriting other submissions; a background process that
rewrites the CSV after the batch; the network). Promises: no cheat scores above 0, every
honest notebook gets full marks, the batch ends within its time limit with one row per
notebook, nothing outside the sandboxes changes, and no process is left behind.

Needs Debian's bubblewrap: skipped with a message on a machine without it, failed under CI.
"""
from __future__ import annotations

import copy
import csv
import hashlib
import math
import os
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
from attacks.cases import CASES  # tests/attacks/, on the path pytest gives the tests
from tools import grade, sandbox

EXERCISE = "09_recap_quiz"
TIMEOUT = 12  # seconds per submission in this batch; a solved notebook of exercise 9 needs about 1
JOBS = 2
MARKER = "attack-suite-background-marker"


def _unavailable(message):
    """A missing sandbox fails the suite under CI and skips these tests on a reader's machine."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _fingerprint(*folders, skip=()):
    """{path: sha256} of every file under the folders (the grader's own caches excluded)."""
    out = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path not in skip:
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _our_processes():
    """Processes whose command line carries the background attack's marker."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if MARKER.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def _notebooks(folder, paths):
    """Write every case as a notebook in `folder`; return {case name: case}."""
    zip_path = ROOT / "autograder" / f"{EXERCISE}.zip"
    with zipfile.ZipFile(zip_path) as z:
        solved = nbformat.reads(z.read("grading/solution.ipynb").decode(), as_version=4)
    blank = nbformat.read(ROOT / "exercises" / f"{EXERCISE}.ipynb", as_version=4)
    cases = {}
    for case in CASES:
        target = folder / f"{case['name']}.ipynb"
        if case["base"] is None:
            target.write_text(case["raw"])
        else:
            nb = copy.deepcopy(solved if case["base"] == "solved" else blank)
            cells = []
            for source in case["cells"]:
                for key, value in paths.items():
                    source = source.replace(key, str(value))
                cells.append(nbformat.v4.new_code_cell(source))
            at = case.get("at", len(nb.cells))
            nb.cells[at:at] = cells
            if case.get("drop_metadata"):
                nb.metadata.pop("otter", None)
            nbformat.write(nb, target)
        cases[target.name] = case
    return cases


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if not sandbox.bwrap_path():
        _unavailable(sandbox.INSTALL_HINT)
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as err:
        _unavailable(str(err))
    tmp = tmp_path_factory.mktemp("attacks")
    folder, out, canary = tmp / "submissions", tmp / "results" / "grades.csv", tmp / "canary"
    folder.mkdir()
    cases = _notebooks(folder, {"ROOT": ROOT, "SUBMISSIONS": folder, "OUT": out, "CANARY": canary})
    # hashed before and after: what no one else edits while the suite runs (the attacks also aim at tools/ and
    # book/, which other work may change meanwhile: those are searched for the attack's mark instead)
    watched = [ROOT / "solutions", ROOT / "autograder", ROOT / "exercises", folder]
    before = _fingerprint(*watched)
    started = time.monotonic()
    rows = grade.grade_folder(ROOT / "autograder" / f"{EXERCISE}.zip", folder, out, timeout=TIMEOUT, jobs=JOBS,
                              report=None)
    elapsed = time.monotonic() - started
    csv_after_batch = out.read_bytes()
    time.sleep(5)  # the background attack writes 3 s after its start: give it the time to try
    marked = [str(p) for d in (ROOT / "tools", ROOT / "book") for p in d.rglob("*.py")
              if "written by cheat_rewrite_hidden_tests" in p.read_text(errors="replace")]
    return dict(cases=cases, rows={r["submission"]: r for r in rows}, elapsed=elapsed, out=out, canary=canary,
                marked=marked,
                before=before, after=_fingerprint(*watched), csv_after_batch=csv_after_batch,
                table=list(csv.DictReader(open(out))), leftovers=_our_processes(), tmp=tmp)


def _cases(kind):
    return [c["name"] for c in CASES if c["name"].startswith(kind)]


@pytest.mark.parametrize("name", _cases("cheat"))
def test_no_cheat_scores(batch, name):
    row = batch["rows"][f"{name}.ipynb"]
    assert row["total"] == 0, f"{name} scored {row['total']}: {row['reason']}"


@pytest.mark.parametrize("name", _cases("honest"))
def test_honest_notebooks_get_full_marks(batch, name):
    row = batch["rows"][f"{name}.ipynb"]
    assert row["status"] == "graded" and row["total"] == row["possible"] == 6, row["reason"] or row["warnings"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_row_is_what_the_case_expects(batch, case):
    row = batch["rows"][f"{case['name']}.ipynb"]
    expected = {"full": row["possible"], "zero": 0}.get(case["expect"], case["expect"])
    assert row["total"] == expected, f"{case['name']}: {row['total']} points, expected {expected}: {row['reason']}"
    assert row["status"] == case.get("status", row["status"] if case["name"].startswith("cheat") else "graded"), \
        f"{case['name']}: status {row['status']} ({row['reason']})"
    for key in ("warning", "reason"):
        if key in case:
            column = "warnings" if key == "warning" else "reason"
            assert case[key] in row[column], f"{case['name']}: {column} lacks {case[key]!r}: {row[column]!r}"
    assert "Traceback" not in row["reason"] + row["warnings"] and len(row["reason"]) < 1200


def test_batch_finishes_within_its_time_limit_with_one_row_each(batch):
    names = sorted(batch["cases"])
    assert [r["submission"] for r in batch["table"]] == names, "the CSV does not hold one row per notebook"
    limit = TIMEOUT * math.ceil(len(names) / JOBS) + 120  # every notebook at its limit, plus the solution's run
    assert batch["elapsed"] < limit, f"the batch took {batch['elapsed']:.0f} s (limit {limit} s)"
    slow = {n: r["seconds"] for n, r in batch["rows"].items() if r["seconds"] > TIMEOUT + 5}
    assert not slow, f"sandboxes outlived their time limit: {slow}"
    hung = [r["submission"] for r in batch["table"] if r["status"] == "timeout"]
    assert sorted(hung) == ["careless_c_loop.ipynb", "careless_endless_loop.ipynb"]


def test_nothing_outside_the_sandbox_changes(batch):
    changed = sorted(set(batch["before"].items()) ^ set(batch["after"].items()))
    assert not changed, f"files changed outside the sandboxes: {[p for p, _ in changed][:5]}"
    assert not batch["marked"], f"the rewrite attack reached {batch['marked']}"
    assert not batch["canary"].exists(), f"a sandbox wrote {batch['canary']}: {batch['canary'].read_text()[:200]}"
    assert batch["out"].read_bytes() == batch["csv_after_batch"], "the CSV changed after the batch ended"
    strays = [p.name for p in batch["tmp"].rglob("*") if p.is_file() and p.parent == batch["tmp"]]
    assert not strays, f"files appeared beside the submissions: {strays}"


def test_no_process_is_left_behind(batch):
    assert not batch["leftovers"], f"processes of the background attack still run: {batch['leftovers']}"


def test_grade_command_explains_bad_input(tmp_path):
    """The command line answers a wrong exercise or folder with one line, never a traceback."""
    import subprocess

    def run(*args):
        return subprocess.run([sys.executable, "-m", "tools.grade", *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)

    unknown = run("99_nothing", tmp_path, tmp_path / "out.csv")
    assert unknown.returncode != 0 and "no autograder for '99_nothing'" in unknown.stderr
    empty = run(EXERCISE, tmp_path, tmp_path / "out.csv")
    assert empty.returncode != 0 and "holds no .ipynb files" in empty.stderr
    for result in (unknown, empty):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_torch_exercise_gets_full_marks_in_the_sandbox(tmp_path):
    """PyTorch runs within the sandbox's limits: a solved notebook of exercise 5 (the seeded sampler) scores full
    marks through the same batch as learners' notebooks."""
    if not sandbox.bwrap_path():
        _unavailable(sandbox.INSTALL_HINT)
    name = "05_sampling"
    zip_path = ROOT / "autograder" / f"{name}.zip"
    with zipfile.ZipFile(zip_path) as z:
        (tmp_path / "solved.ipynb").write_bytes(z.read("grading/solution.ipynb"))
    [row] = grade.grade_folder(zip_path, tmp_path, tmp_path / "out" / "grades.csv", timeout=120, jobs=1, report=None)
    assert row["status"] == "graded" and row["total"] == row["possible"] == 6, row["reason"] or row["warnings"]


@pytest.mark.parametrize("printed", [
    {"ndarray": {"dtype": "object", "shape": [1], "data": [1]}},  # a dtype numpy would run code for
    {"ndarray": {"dtype": "float64", "shape": [2, 2], "data": [1.0, 2.0]}},  # shape and data disagree
    {"tensor": {"dtype": "torch.float32", "shape": [1], "data": ["1"], "requires_grad": False}},
    {"float": "1.0"}, {"int": 1.5}, {"bool": 1}, {"list": [{"float": 1.0}, 2]}, {"float": 1.0, "int": 1},
    {"__reduce__": ["os.system", ["true"]]}, [], "passed",
])
def test_judge_refuses_malformed_answers(printed):
    """What a sandbox prints is data: anything but a well-formed tagged value is refused, never interpreted."""
    from tools import judge

    with pytest.raises(judge.Malformed):
        judge.decode(printed)


def test_judge_wants_the_exact_type():
    import numpy as np

    from tools import judge

    judge.same((1, 2.0), (1, 2.0))
    judge.same([1, 2.0], (1, 2.0))  # a pair may be a list
    for got, want in [(1, 1.0), (1.0, 1), (True, 1), (np.float64(1.0), 1.0), (judge.Other("m.Float"), 1.0),
                      (np.zeros(2, dtype=np.float32), np.zeros(2)), (np.zeros(3), np.zeros(2)),
                      (judge.Tensor("torch.float64", np.zeros(2), False),
                       judge.Tensor("torch.float32", np.zeros(2), False)),
                      (float("nan"), 1.0), (1.0001, 1.0)]:
        with pytest.raises(judge.Wrong):
            judge.same(got, want)
