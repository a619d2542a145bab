"""No submission can cheat, hang the batch or touch another's work.

One batch of `tools/grading/grade.py`, sandbox and all, grades every notebook of
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

It adds the attacks of a hostile student on the instructor's machine, and the batch runs twice,
as root and as an ordinary user (tests/attacks/as_user.py; run by an ordinary user, only as that user),
every case in both but the endless loop and the C loop, graded by the ordinary user's batch alone (they spin
a CPU to the time limit and are stopped as any hang is, whoever runs the grader: the spinners, a hang of many
processes, are in both), each time through `tools/grading/grade.py`'s command line with a secret planted in its environment. Held
means: no command ran on the host (the core_pattern attack's marker file is absent and
/proc/sys/kernel/core_pattern is unchanged, restored if not), the secret is nowhere in the CSV or the
terminal output, the batch ends with a row per folder entry (FIFO, links, names not in UTF-8, names
a spreadsheet would run, control characters), the CSV reads with `csv`'s default field limit, no
process is left (none in a cgroup that the grader joins before it starts, which holds every process the
batch starts, whatever its uid, and which none can leave; without one, as an ordinary user, none of the
spinners), no reason shows a hidden input, and the seccomp filter refuses what it lists. Beside a CPU hog, honest notebooks get full
marks and take at most twice as long as beside an idle neighbour, measured in the same run (the hog spins
only as long as that takes: three times the idle time and 1 s).

Needs Debian's bubblewrap: skipped with a message on a machine without it, failed under CI.
"""

from __future__ import annotations

import copy
import csv
import functools
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
from attacks.as_user import ORDINARY_UID, Tracker, give_to_ordinary_user, run_grader  # tests/attacks/, on pytest's path
from attacks.cases import CASES
from conftest import unavailable  # a missing sandbox: fail under CI, skip on a reader's machine

from tools.grading import grade, sandbox

EXERCISE = "09_recap_quiz"
TIMEOUT = 6  # seconds per submission in this batch; a solved notebook of exercise 9 needs under 1 (about 2 as an
# ordinary user at nice 5 on 2 cores under a load of 20), the slowest case that ends by itself about as much
JOBS = 2
MARKER = "attack-suite-background-marker"
SPINNER = "attack-suite-spinner-marker"
SECRET = "planted-secret-4f1c9a"
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
MODES = ["root", "user"]


def _fingerprint(*folders, skip=()):
    """{path: sha256} of every file under the folders (the grader's own caches excluded)."""
    out = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path not in skip:
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _our_processes(tracker, uids=()):
    """The processes the batch started that still run: those in `tracker`'s cgroup, whatever their uid; without
    one (an ordinary user runs the suite), those whose command line carries an attack's marker or that run as one
    of `uids`."""
    found = []
    tracked = tracker.pids() if tracker.folder is not None else None
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
                if tracked is not None:
                    ours = int(proc.name) in tracked
                else:
                    ours = MARKER.encode() in cmdline or SPINNER.encode() in cmdline or proc.stat().st_uid in uids
                if ours:
                    found.append(f"{proc.name} uid {proc.stat().st_uid} {cmdline[:80]!r}")
            except OSError:
                pass
    return found


def _mode_cases(mode):
    """The cases that the batch of `mode` grades (see `modes` in tests/attacks/cases.py)."""
    return [case for case in CASES if mode in case.get("modes", MODES)]


def _notebooks(folder, paths, mode):
    """Write every case of `mode`'s batch as a notebook in `folder`; return {file name: case}."""
    zip_path = ROOT / "autograder" / f"{EXERCISE}.zip"
    with zipfile.ZipFile(zip_path) as z:
        solved = nbformat.reads(z.read("grading/solution.ipynb").decode(), as_version=4)
    blank = nbformat.read(ROOT / "exercises" / f"{EXERCISE}.ipynb", as_version=4)
    cases = {}
    for case in _mode_cases(mode):
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
            if case.get("assignment_name"):
                nb.metadata.otter.assignment_name = case["assignment_name"]
            nbformat.write(nb, target)
            if case.get("bom"):  # saved by an editor that writes a UTF-8 byte-order mark
                target.write_bytes(b"\xef\xbb\xbf" + target.read_bytes())
        cases[target.name] = case
    return cases


def _folder_attacks(folder):
    """The attacks on the folder itself (D1 to D4 and names): {file name as the CSV shows it: what it must get}."""
    solved = (folder / "honest_solved.ipynb").read_bytes()
    os.mkfifo(folder / "d1_fifo.ipynb")
    os.symlink("/dev/zero", folder / "d2_link_to_dev_zero.ipynb")
    os.symlink("honest_solved.ipynb", folder / "d4_link_to_alice.ipynb")
    os.link(folder / "honest_solved.ipynb", folder / "d4_hard_link_to_alice.ipynb")
    names = {
        b"d3_caf\xe9_not_utf8.ipynb": "d3_caf\\xe9_not_utf8.ipynb",
        b'=HYPERLINK("evil")_solved.ipynb': '\'=HYPERLINK("evil")_solved.ipynb',
        b"-2+3_solved.ipynb": "'-2+3_solved.ipynb",
        b"\tat_tab_solved.ipynb": "\\tat_tab_solved.ipynb",
        b"esc\x1b[31m_red_solved.ipynb": "esc\\x1b[31m_red_solved.ipynb",
        # a name a terminal without UTF-8 cannot print (the batch runs with PYTHONIOENCODING=ascii)
        "café_utf8_solved.ipynb".encode(): "café_utf8_solved.ipynb",
    }
    for raw in names:
        Path(os.fsdecode(os.path.join(os.fsencode(folder), raw))).write_bytes(solved)
    expected = {
        "d1_fifo.ipynb": "a FIFO",
        "d2_link_to_dev_zero.ipynb": "a symbolic link",
        "d4_link_to_alice.ipynb": "a symbolic link",
        "d4_hard_link_to_alice.ipynb": "full",
    }
    expected.update({shown: "full" for shown in names.values()})
    return expected


def _read_rows(out):
    """The CSV's rows by submission, numbers as floats; read with csv's default field limit."""
    with open(out, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    for row in table:
        for key, value in row.items():
            if key not in ("submission", "status", "reason", "warnings"):
                row[key] = float(value)
    return table


BACKGROUND = "cheat_background_rewrites_csv.ipynb"
BACKGROUND_WAIT = 5  # the background attack writes 3 s after its start: it gets 5 s after it to try


def _left_to_the_background_attack(rows):
    """Seconds still to wait, at the batch's end, before the background attack has had BACKGROUND_WAIT s since its
    start. The batch grades by name, JOBS at a time, so the submissions after it in the CSV ran after its start:
    all but the one that may have run beside it had started after it ended, so the batch went on for at least their
    seconds, shared among the jobs (a lower bound; a missing row waits the whole BACKGROUND_WAIT)."""
    names = [r["submission"] for r in rows]
    if BACKGROUND not in names:
        return BACKGROUND_WAIT
    after = [r["seconds"] for r in rows[names.index(BACKGROUND) + 1 :]]
    since = (sum(after) - max(after, default=0.0)) / JOBS
    return max(0.0, BACKGROUND_WAIT - since)


@functools.cache
def _capped_as(mode):
    """Whether the grader, run in `mode`, can cap a sandbox's total memory (a cgroup of its own)."""
    if mode == "root" and os.geteuid() == 0:
        return sandbox.memory_capped()
    code = "from tools.grading import sandbox; print(sandbox.memory_capped())"
    done = run_grader([], mode, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, 120, python_args=["-c", code])
    return done.stdout.strip() == "True"


@pytest.fixture(scope="module", params=MODES)
def batch(request):
    mode = request.param
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("the suite runs as an ordinary user: the root batch needs root")
    if not sandbox.bwrap_path():
        unavailable(sandbox.INSTALL_HINT)
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as err:
        unavailable(str(err))
    tmp = Path(tempfile.mkdtemp(prefix=f"attacks-{mode}-"))
    tmp.chmod(0o755)
    folder, out, canary, escape = tmp / "submissions", tmp / "results" / "grades.csv", tmp / "canary", tmp / "escape"
    folder.mkdir()
    out.parent.mkdir()
    paths = {"ROOT": ROOT, "SUBMISSIONS": folder, "OUT": out, "CANARY": canary, "ESCAPE": escape}
    cases = _notebooks(folder, paths, mode)
    folder_cases = _folder_attacks(folder)
    if mode == "user":
        give_to_ordinary_user(folder, out.parent)
    watched = [ROOT / "solutions", ROOT / "autograder", ROOT / "exercises"]
    before = _fingerprint(*watched)
    submissions_before = {p.name: p.lstat().st_mtime_ns for p in folder.iterdir()}
    core_pattern = CORE_PATTERN.read_bytes()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GRADER_TOKEN": SECRET,
        "HOME": str(tmp),
        "CI_SECRET": SECRET,
        "PYTHONIOENCODING": "ascii",
    }  # a terminal that cannot print every reason
    tracker = Tracker()  # the cgroup that holds every process the batch starts
    try:
        started = time.monotonic()
        try:
            uncapped = ["--uncapped-memory"] if mode == "user" and not _capped_as(mode) else []
            result = run_grader(
                [EXERCISE, folder, out, "--timeout", TIMEOUT, "--jobs", JOBS, *uncapped],
                mode,
                env,
                timeout=900,
                tracker=tracker,
            )
        finally:
            if CORE_PATTERN.read_bytes() != core_pattern and os.geteuid() == 0:
                CORE_PATTERN.write_bytes(core_pattern)  # never leave the host changed, whatever happened
                core_pattern_changed = True
            else:
                core_pattern_changed = False
        elapsed = time.monotonic() - started
        assert result.returncode == 0, f"the grader failed: {result.stderr[-2000:]}"
        csv_after_batch = out.read_bytes()
        time.sleep(_left_to_the_background_attack(_read_rows(out)))
        marked = [
            str(p)
            for d in (ROOT / "tools", ROOT / "book")
            for p in d.rglob("*.py")
            if "written by cheat_rewrite_hidden_tests" in p.read_text(errors="replace")
        ]
        uids = {sandbox.SANDBOX_HOST_UID} if mode == "root" and os.geteuid() == 0 else set()
        if mode == "user" and os.geteuid() == 0:
            uids.add(ORDINARY_UID)
        table = _read_rows(out)
        yield dict(
            mode=mode,
            cases=cases,
            folder_cases=folder_cases,
            rows={r["submission"]: r for r in table},
            elapsed=elapsed,
            out=out,
            canary=canary,
            escape=escape,
            marked=marked,
            result=result,
            before=before,
            after=_fingerprint(*watched),
            csv_after_batch=csv_after_batch,
            table=table,
            leftovers=_our_processes(tracker, uids),
            tmp=tmp,
            core_pattern_changed=core_pattern_changed,
            submissions_before=submissions_before,
            submissions_after={p.name: p.lstat().st_mtime_ns for p in folder.iterdir()},
        )
    finally:
        tracker.close()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


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


BOTH = [c for c in CASES if "modes" not in c]
USER_ONLY = [c for c in CASES if c.get("modes") == ("user",)]
assert len(BOTH) + len(USER_ONLY) == len(CASES), "a case graded by the root batch alone: give it a test"


@pytest.mark.parametrize("case", BOTH, ids=[c["name"] for c in BOTH])
def test_each_row_is_what_the_case_expects(batch, case):
    _expect_row(batch, case)


@pytest.mark.parametrize("batch", ["user"], indirect=True)  # by value: the same module-wide batch as above
@pytest.mark.parametrize("case", USER_ONLY, ids=[c["name"] for c in USER_ONLY])
def test_each_row_of_the_user_batch_alone_is_what_the_case_expects(batch, case):
    _expect_row(batch, case)


def _expect_row(batch, case):
    row = batch["rows"][f"{case['name']}.ipynb"]
    expected = {"full": row["possible"], "zero": 0}.get(case["expect"], case["expect"])
    assert row["total"] == expected, f"{case['name']}: {row['total']} points, expected {expected}: {row['reason']}"
    assert row["status"] == case.get("status", row["status"] if case["name"].startswith("cheat") else "graded"), (
        f"{case['name']}: status {row['status']} ({row['reason']})"
    )
    for key in ("warning", "reason"):
        if key in case:
            column = "warnings" if key == "warning" else "reason"
            assert case[key] in row[column], f"{case['name']}: {column} lacks {case[key]!r}: {row[column]!r}"
    assert "Traceback" not in row["reason"] + row["warnings"] and len(row["reason"]) < 1200


def test_batch_finishes_within_its_time_limit_with_one_row_each(batch):
    names = sorted([*batch["cases"], *batch["folder_cases"]])
    assert sorted(r["submission"] for r in batch["table"]) == names, "the CSV does not hold one row per entry"
    limit = TIMEOUT * math.ceil(len(names) / JOBS) + 120  # every notebook at its limit, plus the solution's run
    assert batch["elapsed"] < limit, f"the batch took {batch['elapsed']:.0f} s (limit {limit} s)"
    slow = {n: r["seconds"] for n, r in batch["rows"].items() if r["seconds"] > TIMEOUT + 5}
    assert not slow, f"sandboxes outlived their time limit: {slow}"
    hung = [r["submission"] for r in batch["table"] if r["status"] == "timeout"]
    assert sorted(hung) == sorted(name for name, case in batch["cases"].items() if case.get("status") == "timeout")
    assert "cheat_c_ptrace_and_spinners.ipynb" in hung and len(hung) == {"root": 1, "user": 3}[batch["mode"]]


def test_nothing_outside_the_sandbox_changes(batch):
    assert batch["submissions_before"] == batch["submissions_after"], "a submission changed"
    changed = sorted(set(batch["before"].items()) ^ set(batch["after"].items()))
    assert not changed, f"files changed outside the sandboxes: {[p for p, _ in changed][:5]}"
    assert not batch["marked"], f"the rewrite attack reached {batch['marked']}"
    assert not batch["canary"].exists(), f"a sandbox wrote {batch['canary']}: {batch['canary'].read_text()[:200]}"
    assert batch["out"].read_bytes() == batch["csv_after_batch"], "the CSV changed after the batch ended"
    strays = [p.name for p in batch["tmp"].iterdir() if p.name not in ("submissions", "results")]
    assert not strays, f"files appeared beside the submissions: {strays}"


def test_no_process_is_left_behind(batch):
    assert not batch["leftovers"], f"processes of the attacks or the sandboxes still run: {batch['leftovers']}"


def test_no_command_runs_on_the_host(batch):
    """Attack A: core_pattern piped to a script in the sandbox, then abort(): the script never runs on the host."""
    assert not batch["escape"].exists(), f"a command ran on the host: {batch['escape'].read_text()[:200]}"
    assert not batch["core_pattern_changed"], "a sandbox changed /proc/sys/kernel/core_pattern (restored)"


def test_no_secret_of_the_grader_reaches_the_csv(batch):
    """Attack B: /proc/1/environ and every environment the sandbox sees hold nothing of the grader's."""
    assert SECRET.encode() not in batch["out"].read_bytes()
    assert SECRET.encode() not in grade.details_path(batch["out"]).read_bytes()
    assert SECRET.encode() not in grade.results_path(batch["out"]).read_bytes()
    assert SECRET not in batch["result"].stdout + batch["result"].stderr


def test_the_results_file_holds_what_the_csv_says_in_the_graders_kinds(batch):
    """The structured results beside the CSV (what `make feedback` reads) hold one record per row, with the
    row's scores, status and texts (the CSV's reason and warnings columns are their texts joined), and every
    kind is one of the grader's own: it carries nothing the CSV does not."""
    results = json.loads(grade.results_path(batch["out"]).read_text(encoding="utf-8"))
    assert results["format"] == grade.RESULTS_FORMAT and results["exercise"] == EXERCISE
    by_name = {grade.csv_cell(r["submission"]): r for r in results["submissions"]}
    assert sorted(by_name) == sorted(batch["rows"]), "the results file and the CSV list other submissions"
    for name, row in batch["rows"].items():
        record = by_name[name]
        assert record["status"] == row["status"] and record["total"] == row["total"], name
        verdicts = record["questions"]
        assert {q: v["score"] for q, v in verdicts.items()} == {q: row[q] for q in results["questions"]}, name
        assert {v["kind"] for v in verdicts.values()} <= {None, *grade.VERDICT_KINDS}, name
        assert {p["kind"] for p in record["problems"]} <= set(grade.PROBLEM_KINDS), name
        assert {w["kind"] for w in record["warnings"]} <= set(grade.WARNING_KINDS), name
        reasons = [p["text"] for p in record["problems"]] + [
            grade.Verdict(q, v["score"], v["function"], v["kind"], v["why"], v["on"]).reason
            for q, v in verdicts.items()
            if v["why"]
        ]
        assert grade.csv_cell("; ".join(reasons)) == row["reason"], name
        assert grade.csv_cell("; ".join(w["text"] for w in record["warnings"])) == row["warnings"], name


def test_every_cell_is_safe_and_reads_with_the_default_field_limit(batch):
    text = batch["out"].read_text(encoding="utf-8")
    for row in csv.reader(text.splitlines()):  # the default field limit, 131,072 characters
        for cell in row:
            assert len(cell) <= grade.MAX_CELL
            assert not cell.startswith(grade.FORMULA_STARTS), f"a spreadsheet would run {cell[:40]!r}"
            assert all(c.isprintable() for c in cell), f"a control character in {cell[:40]!r}"
    for line in batch["result"].stdout.splitlines():
        assert all(c.isprintable() for c in line), f"a control character reached the terminal: {line[:60]!r}"


@pytest.mark.parametrize(
    "name",
    [
        "d1_fifo.ipynb",
        "d2_link_to_dev_zero.ipynb",
        "d4_link_to_alice.ipynb",
        "d4_hard_link_to_alice.ipynb",
        "d3_caf\\xe9_not_utf8.ipynb",
        '\'=HYPERLINK("evil")_solved.ipynb',
        "'-2+3_solved.ipynb",
        "\\tat_tab_solved.ipynb",
        "esc\\x1b[31m_red_solved.ipynb",
    ],
)
def test_each_folder_entry_gets_its_row(batch, name):
    """Attacks D1 to D4 and names: a row each; a link or a FIFO is named as such and scores 0, never followed."""
    expected = batch["folder_cases"][name]
    row = batch["rows"][name]
    if expected == "full":
        assert row["status"] == "graded" and row["total"] == row["possible"] == 6, row["reason"]
    else:
        assert row["status"] == "error" and row["total"] == 0 and expected in row["reason"], row["reason"]


@pytest.mark.parametrize("case", [c for c in CASES if "absent" in c], ids=lambda c: c["name"])
def test_reasons_never_show_hidden_inputs(batch, case):
    """Attack E2: an exception or an answer made of the hidden inputs never reaches the CSV."""
    row = batch["rows"][f"{case['name']}.ipynb"]
    shown = " ".join(str(v) for v in row.values())
    assert case["absent"] not in shown, f"{case['name']}: the row shows {case['absent']!r}: {shown[:300]}"
    results = json.loads(grade.results_path(batch["out"]).read_text(encoding="utf-8"))
    [record] = [r for r in results["submissions"] if r["submission"] == f"{case['name']}.ipynb"]
    assert case["absent"] not in json.dumps(record, ensure_ascii=False), f"{case['name']}: the results file shows it"


@pytest.mark.parametrize("mode", MODES)
def test_without_a_memory_cap_the_grader_refuses_and_says_why(mode):
    """Where nothing can cap a sandbox's total memory (an ordinary user without a cgroup of its own), `make grade`
    does not start unless told to (--uncapped-memory), and says why and what to do, in one line."""
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("the root mode needs root")
    if not sandbox.bwrap_path():
        unavailable(sandbox.INSTALL_HINT)
    if _capped_as(mode):
        pytest.skip(f"as {mode}, the grader can cap memory here (a cgroup of its own)")
    tmp_path = Path(tempfile.mkdtemp(prefix="uncapped-"))
    try:
        tmp_path.chmod(0o755)
        folder = tmp_path / "submissions"
        folder.mkdir()
        (folder / "a.ipynb").write_text("{}")
        give_to_ordinary_user(folder, tmp_path)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
        done = run_grader([EXERCISE, folder, tmp_path / "g.csv"], mode, env, timeout=300)
        assert done.returncode != 0 and not (tmp_path / "g.csv").exists()
    finally:
        subprocess.run(["rm", "-rf", str(tmp_path)], check=False)
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("cannot grade: nothing here can cap a sandbox's total memory") and "Fix:" in line, line
    assert "--uncapped-memory" in line and "Traceback" not in done.stderr


def test_the_instructor_keeps_the_messages(batch):
    """What raised, message and all, is in the instructor's file beside the CSV, never in the CSV."""
    details = list(csv.reader(grade.details_path(batch["out"]).read_text(encoding="utf-8").splitlines()))
    assert ["careless_raising.ipynb", "q6", "raised ValueError: not done yet"] in details
    assert any(row[0] == "honest_raising_cell.ipynb" and "ZeroDivisionError" in row[2] for row in details)


def test_grade_command_explains_bad_input(tmp_path):
    """The command line answers a wrong exercise or folder with one line, never a traceback."""
    import subprocess

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "tools.grading.grade", *map(str, args)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

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
        unavailable(sandbox.INSTALL_HINT)
    name = "05_sampling"
    zip_path = ROOT / "autograder" / f"{name}.zip"
    with zipfile.ZipFile(zip_path) as z:
        (tmp_path / "solved.ipynb").write_bytes(z.read("grading/solution.ipynb"))
    [row] = grade.grade_folder(zip_path, tmp_path, tmp_path / "out" / "grades.csv", timeout=120, jobs=1, report=None)
    assert row["status"] == "graded" and row["total"] == row["possible"] == 6, row["reason"] or row["warnings"]


@pytest.mark.parametrize(
    "printed",
    [
        {"ndarray": {"dtype": "object", "shape": [1], "data": [1]}},  # a dtype numpy would run code for
        {"ndarray": {"dtype": "float64", "shape": [2, 2], "data": [1.0, 2.0]}},  # shape and data disagree
        {"tensor": {"dtype": "torch.float32", "shape": [1], "data": ["1"], "requires_grad": False}},
        {"float": "1.0"},
        {"int": 1.5},
        {"bool": 1},
        {"list": [{"float": 1.0}, 2]},
        {"float": 1.0, "int": 1},
        {"__reduce__": ["os.system", ["true"]]},
        [],
        "passed",
        {"float": 10**400},
        {"list": [{"float": -(10**400)}]},  # too large for a float: a clean row, not a grader failure
        {"ndarray": {"dtype": "int64", "shape": [1], "data": [10**30]}},
        {"tensor": {"dtype": "torch.float32", "shape": [1], "data": [10**400], "requires_grad": False}},
    ],
)
def test_judge_refuses_malformed_answers(printed):
    """What a sandbox prints is data: anything but a well-formed tagged value is refused, never interpreted."""
    from tools.grading import judge

    with pytest.raises(judge.Malformed):
        judge.decode(printed)


def test_judge_wants_the_exact_type():
    import numpy as np

    from tools.grading import judge

    judge.same((1, 2.0), (1, 2.0))
    judge.same([1, 2.0], (1, 2.0))  # a pair may be a list
    for got, want in [
        (1, 1.0),
        (1.0, 1),
        (True, 1),
        (np.float64(1.0), 1.0),
        (judge.Other("m.Float"), 1.0),
        (np.zeros(2, dtype=np.float32), np.zeros(2)),
        (np.zeros(3), np.zeros(2)),
        (judge.Tensor("torch.float64", np.zeros(2), False), judge.Tensor("torch.float32", np.zeros(2), False)),
        (float("nan"), 1.0),
        (1.0001, 1.0),
    ]:
        with pytest.raises(judge.Wrong):
            judge.same(got, want)


HONEST_LOOP = "total = 0\nfor i in range({n}):\n    total += i"
HONEST_SECONDS = 2.0  # of pure Python work: the CSV gives seconds to 0.1 s, so 5% of it


@functools.cache
def _honest_work():
    """A cell of pure Python that takes about HONEST_SECONDS on this machine (timed here, best of three): a fixed
    count of steps took 0.6 s on one processor and over a second on another, and at 0.6 s the CSV's rounding to
    0.1 s alone moves a ratio by a third."""
    n = 2_000_000
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        exec(HONEST_LOOP.format(n=n), {})
        best = min(best, time.perf_counter() - start)
    return HONEST_LOOP.format(n=max(n, round(n * HONEST_SECONDS / best)))


NEIGHBOUR_SECONDS = 12  # the time limit in these batches: the idle neighbour outlives the honest notebooks beside it
IDLE = "import time\ntime.sleep(3600)"
HOG = """import os, time
end, child = time.monotonic() + {seconds}, False
for _ in range(60):
    if os.fork() == 0:
        child = True
        break
while time.monotonic() < end:
    pass
if child:
    os._exit(0)"""


def _beside(mode, neighbour, lasts, n_honest, limit=NEIGHBOUR_SECONDS):
    """The seconds of each honest notebook (of `n_honest`, graded one after another) that ended while the
    `neighbour` cell, graded beside them (two jobs, a time limit of `limit` each), still ran (it `lasts` that many
    seconds)."""
    with zipfile.ZipFile(ROOT / "autograder" / f"{EXERCISE}.zip") as z:
        solved = nbformat.reads(z.read("grading/solution.ipynb").decode(), as_version=4)
    tmp = Path(tempfile.mkdtemp(prefix=f"hog-{mode}-"))
    try:
        tmp.chmod(0o755)
        folder, out = tmp / "submissions", tmp / "results" / "grades.csv"
        folder.mkdir()
        out.parent.mkdir()
        nb = copy.deepcopy(solved)
        nb.cells.insert(1, nbformat.v4.new_code_cell(neighbour))
        nbformat.write(nb, folder / "a_neighbour.ipynb")  # first: it starts with the first honest one
        for i in range(n_honest):
            nb = copy.deepcopy(solved)
            nb.cells.append(nbformat.v4.new_code_cell(_honest_work()))
            nbformat.write(nb, folder / f"honest_{i}.ipynb")
        if mode == "user":
            give_to_ordinary_user(folder, out.parent)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp)}
        uncapped = ["--uncapped-memory"] if mode == "user" and not _capped_as(mode) else []
        result = run_grader([EXERCISE, folder, out, "--timeout", limit, "--jobs", 2, *uncapped], mode, env, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        rows = {r["submission"]: r for r in _read_rows(out)}
        honest = [rows[f"honest_{i}.ipynb"] for i in range(n_honest)]
        for row in honest:
            assert row["status"] == "graded" and row["total"] == row["possible"] == 6, row["reason"]
        # the honest ones run one after another beside the neighbour (two jobs): those that ended while it
        # lasted count (the first does whenever it ends within the neighbour's life)
        ended = [sum(r["seconds"] for r in honest[: i + 1]) for i in range(n_honest)]
        return [r["seconds"] for r, end in zip(honest, ended) if end < lasts], rows["a_neighbour.ipynb"]
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


@pytest.mark.parametrize("mode", MODES)
def test_a_cpu_hog_slows_honest_neighbours_at_most_twice(mode):
    """Attack G: beside a sandbox of 61 spinning processes, honest notebooks (each with two seconds of work) take at
    most twice as long as beside a sandbox that sleeps, measured in the same run (a CPU cgroup as root, the
    sandbox's own scheduling autogroup and no setsid as an ordinary user).

    Beside the idle sandbox (asleep to its time limit), the fastest of three honest notebooks is the measure (a
    burst of the suite's other worker, a browser test say, slows one notebook). The hog then spins only as long as
    the test needs: three times that and 1 s (the two sandboxes start a moment apart), so that the first honest
    notebook beside it ends within the hog's life whenever it keeps to twice its pace, and the second too if both
    keep to one and a half; of those that end within it, the fastest counts. Up to three tries, the best counts: a
    hog that is not held back slows its neighbours every time (tens of times, with 61 processes)."""
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("the suite runs as an ordinary user: the root batch needs root")
    if not sandbox.bwrap_path():
        unavailable(sandbox.INSTALL_HINT)
    tries = []
    for _ in range(3):  # the suite's other worker shares the machine: a burst of it in one half can tip one try
        beside_idle, neighbour = _beside(mode, IDLE, NEIGHBOUR_SECONDS, 3)
        assert neighbour["status"] == "timeout", f"the idle neighbour did not sleep: {neighbour['reason']}"
        assert beside_idle, f"the first honest notebook outlasted its idle neighbour's {NEIGHBOUR_SECONDS} s"
        idle = min(beside_idle)
        lasts = round(3 * idle + 1, 1)
        beside_hog, neighbour = _beside(mode, HOG.format(seconds=lasts), lasts, 2, max(NEIGHBOUR_SECONDS, lasts + 5))
        assert neighbour["status"] == "graded" and neighbour["seconds"] >= lasts, f"the hog did not spin {lasts} s"
        hog = min(beside_hog) if beside_hog else float("inf")  # none ended within the hog's life: over twice
        tries.append((hog / idle, idle, hog))
        print(
            f"{mode}: honest notebook {idle:.1f} s beside an idle sandbox, {hog:.1f} s beside a hog: {hog / idle:.2f}x"
        )
        if hog / idle <= 2.0:
            break
    ratio, idle, hog = min(tries)
    assert ratio <= 2.0, f"a hog slowed honest notebooks {ratio:.2f}x ({idle} s beside an idle sandbox, {hog} s)"


def test_an_answer_a_check_cannot_read_loses_its_question_only():
    """A learner's generate returned a tensor where the capstone asks for a list: its check, written for a list,
    raised ValueError and the whole notebook was a grader fault (0 of 5, correct answers to q1 to q4 lost). The
    question is now scored 0 with the plain comparison's reason; a check that fails on an answer of the
    solution's own kind is still the grader's fault."""

    def check_q1(got, want, args):
        if got[0] != want[0]:  # a comparison of lists: an array here raises ValueError
            raise judge.Wrong("the tokens are wrong")

    from tools.grading import judge

    exercise = grade.Exercise("x", ["q1", "q2"], "", {"check_q1": check_q1}, b"")
    exercise.probes = 'PROBES = [("q1", "generate", (1,), None, "a prompt"), ("q2", "loss", (2,), None)]\n'
    reference = grade.Reference(answers=[[1, 2], 0.5], args=[(1,), (2,)])
    questions_of = grade.probe_functions(exercise, reference)
    array = {"ndarray": {"dtype": "int64", "shape": [2], "data": [1, 2]}}
    run = grade.Run(answers={0: array, 1: {"float": 0.5}}, finished=True)
    verdicts = grade.judge_run(exercise, reference, questions_of, run)
    assert tuple(verdicts["q1"]) == (
        0.0,
        "q1 (generate) on a prompt: the answer is a NumPy array of int64; expected a list",
    )
    assert verdicts["q2"].score == 1.0
    run = grade.Run(answers={0: {"list": [{"int": 1}, {"int": 3}]}, 1: {"float": 0.5}}, finished=True)
    assert tuple(grade.judge_run(exercise, reference, questions_of, run)["q1"]) == (
        0.0,
        "q1 (generate): the tokens are wrong",
    )

    def broken(got, want, args):
        return got[0]["no such key"]  # raises on every answer: the master's fault, not the learner's

    exercise.checks = {"check_q1": broken}
    run = grade.Run(answers={0: {"list": [{"int": 1}, {"int": 2}]}, 1: {"float": 0.5}}, finished=True)
    with pytest.raises(TypeError):
        grade.judge_run(exercise, reference, questions_of, run)


def test_reasons_name_the_property_and_the_kind_of_input_never_values():
    """A probe record may carry a 5th item, a description of its input, which the reason uses; a
    reason shows neither the answer, nor the solution's shape or length, nor an exception's message."""
    from tools.grading import judge

    exercise = grade.Exercise("x", ["q1", "q2"], "", {}, b"")
    probes = """
PROBES = [("q1", "crop", (1,), None, "a window that must crop"), ("q2", "loss", (2,), None)]
"""
    exercise.probes = probes
    reference = grade.Reference(answers=[987654.25, (1, 2, 3)], args=[(1,), (2,)])
    questions_of = grade.probe_functions(exercise, reference)
    assert questions_of == [grade.Probe("q1", "crop", "a window that must crop"), grade.Probe("q2", "loss")]
    run = grade.Run(answers={0: {"float": 123456.5}, 1: {"list": [{"int": 1}]}}, finished=True)
    verdicts = grade.judge_run(exercise, reference, questions_of, run)
    assert tuple(verdicts["q1"]) == (0.0, "q1 (crop) on a window that must crop: the answer is wrong")
    assert verdicts["q1"] == grade.Verdict("q1", 0.0, "crop", "wrong", "the answer is wrong", "a window that must crop")
    assert tuple(verdicts["q2"]) == (0.0, "q2 (loss): the answer has the wrong number of items")
    run = grade.Run(answers={0: {"raised": "ValueError: args were (1,) 987654"}, 1: {"missing": "loss"}})
    verdicts = grade.judge_run(exercise, reference, questions_of, run)
    assert tuple(verdicts["q1"]) == (0.0, "q1 (crop) on a window that must crop: raised ValueError")
    assert verdicts["q1"].kind == "raised" and verdicts["q2"].kind == "missing"
    run = grade.Run(answers={0: {"float": 987654.25}, 1: {"missing": "loss_was_1_2_3"}})  # a forged name
    assert tuple(grade.judge_run(exercise, reference, questions_of, run)["q2"]) == (
        0.0,
        "q2 (loss): no function named loss",
    )
    for got, want in [
        (
            judge.Tensor("torch.float32", np.zeros((7, 3)), False),
            judge.Tensor("torch.float32", np.zeros((5, 3)), False),
        ),
        (np.zeros((7, 3)), np.zeros((5, 3))),
        (41, 42),
        ("hidden 42", "x"),
    ]:
        with pytest.raises(judge.Wrong) as wrong:
            judge.same(got, want)
        assert not any(d in str(wrong.value) for d in "0123456789"), str(wrong.value)
    for message, shown in [
        ("OSError: [Errno 28] No space left on device: '/dev/shm/x'", "raised OSError (No space left on device)"),
        ("OSError: [Errno 28] inputs (5, 7)", "raised OSError"),
        ("KeyError: 'hidden 42'", "raised KeyError"),
        ("not a type: 42", "raised an exception"),
    ]:
        with pytest.raises(judge.Wrong, match=r"^" + re.escape(shown) + "$"):
            judge.same(judge.Raised(message), 1.0)
    exercise.probes = "PROBES = [('q1', 'crop', (1,), None, 42)]"
    with pytest.raises(grade.GradingError):
        grade.probe_functions(exercise, grade.Reference([1.0], [(1,)]))


def _forged_output(tmp_path, lines):
    path = tmp_path / "stdout"
    path.write_text("".join(json.dumps(record) + "\n" for record in lines) + '{"done": true}\n')
    return path


@functools.cache
def _judged_exercise():
    """Exercise 9, its reference answers (one sandboxed run of the solution) and probes, shared by the forged
    answers below: each is judged afresh against them."""
    exercise = grade.load_exercise(ROOT / "autograder" / f"{EXERCISE}.zip")
    reference = grade.reference_answers(exercise, 120)
    return exercise, reference, grade.probe_functions(exercise, reference)


@pytest.mark.parametrize("forged", ["huge_shape", "colliding_probes", "dict_of_colliding_keys"])
def test_a_pathological_answer_costs_only_its_own_row(forged, tmp_path):
    """Third round: answers forged to freeze the trusted side (a shape of 600,000 dimensions, probe indices or
    dict keys that are all multiples of 2**61 - 1, which collide in Python's hash table) are refused or judged
    in a bounded child within seconds, and only that submission loses its points."""
    exercise, reference, questions_of = _judged_exercise()
    big = 2**61 - 1
    records = {
        "huge_shape": [{"probe": 0, "answer": {"ndarray": {"dtype": "float64", "shape": [9] * 600_000, "data": []}}}],
        "colliding_probes": [{"probe": k * big, "answer": {"int": 1}} for k in range(1, 60_001)],
        "dict_of_colliding_keys": [
            {"probe": 0, "answer": {"dict": [[{"int": k * big}, {"int": 1}] for k in range(1, 60_001)]}}
        ],
    }[forged]
    path = _forged_output(tmp_path, records)
    started = time.monotonic()
    run, verdicts, _ = grade.bounded(grade._read_and_judge, exercise, reference, questions_of, path)
    assert time.monotonic() - started < 10, f"{forged} took {time.monotonic() - started:.0f} s to judge"
    assert sum(score for score, _ in verdicts.values()) < len(exercise.questions)


@pytest.mark.parametrize("order", [1, -1])
def test_feedback_files_map_one_to_one_whatever_the_order(order, tmp_path):
    """A submission named ' honest_solved.ipynb' (a leading space) never takes honest_solved.md, in either order
    of the rows, and Markdown in a row is shown as text."""
    from tools.grading import feedback

    exercise = grade.Exercise("x", ["q1"], "", {}, b"")
    honest, spaced = grade.empty_row(exercise, "honest_solved.ipynb"), grade.empty_row(exercise, " honest_solved.ipynb")
    honest["verdicts"] = {"q1": grade.Verdict("q1", 1.0, "f")}
    spaced["verdicts"] = {"q1": grade.Verdict("q1", 0.0, "f", "raised", "raised <img src=x> **ValueError**")}
    data = grade.results_data(exercise, [grade.settle(honest), grade.settle(spaced)])
    data["submissions"] = data["submissions"][::order]
    path = tmp_path / "g.csv"
    grade.results_path(path).write_text(json.dumps(data))
    written = {p.name: p.read_text() for p in feedback.write_feedback(path, tmp_path / "out")}
    assert len(written) == 2 and "Score: 1 out of 1" in written["honest_solved.md"]
    other = next(text for name, text in written.items() if name != "honest_solved.md")
    assert "<img" not in other.replace("\\<", "") and "\\<img src=x\\>" in other and "\\*\\*ValueError\\*\\*" in other


def test_a_cell_that_a_spreadsheet_splits_on_a_semicolon_is_no_formula():
    for text in (";=HYPERLINK(1)", "a;=1+1", "b; -2+3", "c|@SUM(1)"):
        cell = grade.csv_cell(text)
        assert not any(part.lstrip().startswith(grade.FORMULA_STARTS) for part in re.split(r"[;|,]", cell)), cell


@pytest.mark.parametrize("name", sorted(grade.BY_HAND))
def test_a_by_hand_rule_flags_an_alias_and_not_the_solution(name):
    """Third round: binding the forbidden function under another name before a check replaces it scored full
    marks. The rule is now a static read of the learner's own definitions: an alias, a helper or a base class that
    reaches a forbidden name is flagged for the instructor; the solution's own code, read as a learner's, is not."""
    exercise = grade.load_exercise(ROOT / "autograder" / f"{name}.zip")
    solution = json.loads(exercise.solution)
    assert grade.by_hand_warnings(name, solution, frozenset()) == [], "the solution itself is flagged"
    for question, (definitions, forbidden) in grade.BY_HAND[name].items():
        owner, _, attr = forbidden[0].rpartition(".")
        module = {"tiny": "book.tiny"}.get(owner, "torch.nn.functional")
        cheat = {
            "cells": [
                {"cell_type": "code", "source": f"from {module} import {attr} as _library"},
                {"cell_type": "code", "source": f"def {definitions[0]}(*args, **kwargs):\n    return _library(*args)"},
            ]
        }
        warnings = grade.by_hand_warnings(name, cheat, exercise.template)
        assert any(w.startswith(f"{question} asks for its own code") for w in warnings), (question, warnings)


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        ("model.eval()\n    out = model(x)\n    model.train(True)", False),
        ("was = model.training\n    model.eval()\n    model.train(was)", False),
        ("out = eval('model(x)')", True),
        ("out = builtins.eval('model(x)')", True),
        ("import builtins as b\n    out = b.eval('model(x)')", True),
        ("b = builtins\n    out = b.eval('model(x)')", True),
        ("out = B.eval('model(x)')", True),  # B bound at the top: `import builtins as B`
        ("out = T.generate(model, x)", True),  # T bound at the top: `T = tiny`
        ("out = getattr(model, 'forward')(x)", True),
        ("out = vars(model)['forward'](x)", True),
        ("out = model.__dict__['forward'](x)", True),
    ],
)
def test_a_method_named_eval_is_not_the_builtin_eval(body, flagged):
    """A learner's `generate` that called `model.eval()` was flagged as looking a name up at run time: an
    attribute named like a dynamic builtin is a method, not the builtin; a bare `eval(...)`, `builtins.eval`,
    `getattr`, `vars` and `__dict__` still are."""
    name = "11_build_the_gpt"
    exercise = grade.load_exercise(ROOT / "autograder" / f"{name}.zip")
    notebook = {
        "cells": [
            {"cell_type": "code", "source": "import builtins\nimport builtins as B\nfrom book import tiny\nT = tiny"},
            {"cell_type": "code", "source": f"def generate(model, x):\n    {body}\n    return out"},
        ]
    }
    warnings = [w for w in grade.by_hand_warnings(name, notebook, exercise.template) if w.startswith("q5 ")]
    assert bool(warnings) == flagged, (body, warnings)
    if flagged:
        what = "tiny.generate" if "T." in body else "a name looked up at run time"
        assert warnings == [f"q5 asks for its own code, and its definition reaches {what}: check it by hand"]


def test_a_lookup_table_of_leaked_inputs_scores_nothing_on_a_fresh_run(tmp_path):
    """Third round: submissions rebuilt the hidden inputs from their feedback, then scored full marks with
    functions that only look answers up in a table keyed by their arguments. Each run now draws fresh inputs
    from its own seed: the same table scores full marks on the run it was built from, and 0 on the next."""
    if not sandbox.bwrap_path():
        unavailable(sandbox.INSTALL_HINT)
    zip_path = ROOT / "autograder" / f"{EXERCISE}.zip"
    leaked = grade.load_exercise(zip_path, seed=1)
    reference = grade.reference_answers(leaked, 120)
    questions_of = grade.probe_functions(leaked, reference)
    table = {}
    for probe, args, answer in zip(questions_of, reference.args, reference.answers):
        table.setdefault(probe.function, {})[repr(tuple(args))] = answer
    lines = [
        "TABLE = "
        + repr({f: {k: (int(v) if type(v) is int else float(v)) for k, v in d.items()} for f, d in table.items()})
    ]
    for function in table:
        lines.append(f"def {function}(*args):\n    return TABLE[{function!r}].get(repr(args), 0)")
    blank = nbformat.read(ROOT / "exercises" / f"{EXERCISE}.ipynb", as_version=4)
    blank.cells.append(nbformat.v4.new_code_cell("\n".join(lines)))
    folder = tmp_path / "submissions"
    folder.mkdir(parents=True)
    tmp_path.chmod(0o755)
    nbformat.write(blank, folder / "lookup.ipynb")
    same_run = grade.grade_folder(zip_path, folder, timeout=60, jobs=1, report=None, seed=1, uncapped_memory=True)[0]
    fresh_run = grade.grade_folder(zip_path, folder, timeout=60, jobs=1, report=None, seed=2, uncapped_memory=True)[0]
    assert same_run["total"] == same_run["possible"], same_run["reason"]
    assert fresh_run["total"] == 0, fresh_run["reason"]


def test_the_wait_for_the_background_attack_counts_only_what_ran_after_it():
    row = lambda name, s: {"submission": name, "seconds": s}  # noqa: E731
    before = [row("a.ipynb", 9.0), row(BACKGROUND, 1.0)]
    assert _left_to_the_background_attack(before) == BACKGROUND_WAIT  # graded last: the whole wait
    assert _left_to_the_background_attack([row("a.ipynb", 1.0)]) == BACKGROUND_WAIT  # no row: the whole wait
    # after it: 4 + 3 + 1 s; the longest (4 s) may have run beside it, the rest shared by the jobs
    later = before + [row("x.ipynb", 4.0), row("y.ipynb", 3.0), row("z.ipynb", 1.0)]
    assert _left_to_the_background_attack(later) == BACKGROUND_WAIT - 4.0 / JOBS
    assert _left_to_the_background_attack(later + [row("zz.ipynb", 20.0)]) == BACKGROUND_WAIT - 8.0 / JOBS
    assert _left_to_the_background_attack(later + [row("zz.ipynb", 6.0)] * 2) == 0.0
