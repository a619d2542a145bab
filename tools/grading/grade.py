"""Grade a folder of submitted notebooks for one exercise into a CSV, one row per submission.

    python -m tools.grading.grade 01_next_token_prediction submissions/ grades.csv [--timeout 120] [--jobs 2]
    make grade EX=01_next_token_prediction SUBMISSIONS=submissions/ OUT=grades.csv

The sandbox computes, this process judges. Each submission runs in its own bubblewrap
sandbox (tools/grading/sandbox.py: user nobody, no network, read-only environment, a private
/tmp, memory/process/time limits, killed whole at the time limit). There
tools/grading/grade_runner.py runs its code cells, calls each question's function on the hidden
inputs of `grading/probes.py` and prints the answers as plain JSON. The solution
notebook is run the same way, once per batch, in the same environment. Here, outside
every sandbox, each answer is compared with the solution's (tools/grading/judge.py: exact
types, shapes, dtypes, values) and with the exercise's property checks
(`grading/checks.py`). Patching otter, doctest, pickle, numpy or builtins inside a
notebook can change what it prints, never this comparison.

The batch never stops: rows are appended to the CSV as submissions finish (the file is
rewritten sorted by name at the end); a notebook that raises, loops, exits, or is not a
notebook still gets its row, with status `graded`, `timeout` or `error` and a one-line
reason for every lost point. A notebook that lost its notebook-level otter metadata is
graded anyway, as the exercise named on the command line, with a warning.

The folder is untrusted too: every entry whose name ends in `.ipynb` gets a row, but only a regular
file is opened (without following links, without blocking, its type checked again on the open
descriptor) and read, up to MAX_NOTEBOOK bytes; a link, a FIFO, a device or a folder gets a row
saying what it is, and the rows of two names of one file (a hard link) each say so. Every cell of the CSV is one
line of printable text (a name that is not UTF-8 is written with escapes), at most MAX_CELL
characters, and a cell that a spreadsheet would run as a formula (starting with =, +, -, @, a tab or
a carriage return) is prefixed with a quote (OWASP's rule against CSV injection). Reasons and
warnings, which go back to learners, never show the hidden inputs, nor anything the submission
printed or raised that could carry them: exception types, not their messages. The messages go
to a second file for the instructor only, beside the CSV (grades.csv -> grades.details.csv).

Beside the CSV, the same results as data (grades.csv -> grades.results.json, read by tools/grading/feedback.py):
per submission its status, scores, problems and warnings, and per question a `Verdict` (score, the kind of
fault, what failed, the kind of input), each text in the grader's words and each kind from a fixed set.
The CSV's reason and warnings columns are those texts joined, for a spreadsheet.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tools.grading import judge, sandbox

ROOT = Path(__file__).resolve().parents[2]
AUTOGRADER = ROOT / "autograder"
RUNNER = Path(__file__).resolve().parent / "grade_runner.py"
TIMEOUT = 120  # seconds per submission; a solved notebook takes a few
PROBE_SHARE = 4  # a call on one hidden input may take this share of them: a question too slow costs only itself
MAX_OUTPUT = 32 * 2**20  # bytes of answers read from one sandbox
MAX_NOTEBOOK = 32 * 2**20  # bytes of a submitted notebook
MAX_CELL = 2000  # characters in one CSV cell (Python's csv reader accepts 131,072)
# OWASP's CSV-injection starts; a tab or a carriage return never starts a cell, as csv_cell escapes both first
FORMULA_STARTS = ("=", "+", "-", "@")
MAX_REASON = 280  # characters of the reason for one question
MAX_PROBES = 10_000  # probe indices read from a sandbox (a forged k*(2**61-1) would collide in a dict)
MAX_DETAILS = 50  # rows of the instructor's details file for one submission
JUDGE_SECONDS = 30  # CPU seconds for reading and judging one submission's answers, in a child process
JUDGE_MEMORY = 2 * 2**30  # bytes that child may add to the grader's address space
COLUMNS_AFTER = ["total", "possible", "status", "reason", "warnings", "seconds"]


class GradingError(RuntimeError):
    """The batch cannot run at all (no sandbox, a broken autograder zip, a solution that fails)."""


@dataclass
class Exercise:
    name: str
    questions: list  # ["q1", "q2", ...]
    probes: str  # grading/probes.py: the hidden inputs (goes into each sandbox)
    checks: dict  # check_qN functions from grading/checks.py (stay here)
    solution: bytes  # the solved notebook
    template: frozenset = frozenset()  # the sources of the solution's code cells, stripped (not the learner's)
    seed: int = 0  # this run's seed of the fresh inputs (the details file records it)


SEED_LINE = "SEED = 0\n"  # in probes.py's prelude (tools/exercises/make_exercises.py): replaced by each run's own seed


def with_seed(probes: str, seed: int) -> str:
    """probes.py with this run's seed for its fresh inputs."""
    if SEED_LINE not in probes:
        raise GradingError("the autograder zip predates fresh inputs: run `make exercises`")
    return probes.replace(SEED_LINE, f"SEED = {int(seed)}\n", 1)


def load_exercise(autograder_zip: str | Path, seed: int | None = None) -> Exercise:
    """An exercise's grading files from its autograder zip (written by tools/exercises/make_exercises.py), its fresh
    inputs drawn from `seed` (a new one when None)."""
    try:
        with zipfile.ZipFile(autograder_zip) as z:
            meta = json.loads(z.read("grading/questions.json"))
            probes = z.read("grading/probes.py").decode()
            checks_source = z.read("grading/checks.py").decode()
            solution = z.read("grading/solution.ipynb")
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as err:
        raise GradingError(
            f"{autograder_zip} is not a grading zip of this course ({err}): run `make exercises`"
        ) from err
    checks = dict(judge.CHECK_NAMES)
    exec(compile(checks_source, f"{autograder_zip}:grading/checks.py", "exec"), checks)
    import secrets

    seed = secrets.randbits(63) if seed is None else seed
    probes = with_seed(probes, seed)
    try:
        cells = json.loads(solution).get("cells", [])
        template = frozenset(
            "".join(c["source"]).strip() if isinstance(c["source"], list) else c["source"].strip()
            for c in cells
            if c.get("cell_type") == "code"
        )
    except (ValueError, KeyError, AttributeError, TypeError):
        template = frozenset()
    return Exercise(meta["name"], meta["questions"], probes, checks, solution, template, seed)


def question_names(autograder_zip: str | Path) -> list[str]:
    """The questions of an exercise (q1, q2, ...)."""
    return load_exercise(autograder_zip).questions


@dataclass
class Run:
    """What one sandboxed run printed, read by this (trusted) process."""

    answers: dict = field(default_factory=dict)  # probe index -> encoded answer
    args: dict = field(default_factory=dict)  # probe index -> encoded arguments (reference run only)
    functions: dict = field(default_factory=dict)  # probe index -> (question, function)
    cell_errors: list = field(default_factory=list)
    n_cell_errors: int = 0  # how many cells raised, when only the first is kept
    finished: bool = False
    timed_out: bool = False
    crashed: str = ""  # why the run ended abnormally, in one line
    seconds: float = 0.0


def run_notebook(
    exercise: Exercise,
    notebook_bytes: bytes,
    timeout: float,
    with_args: bool = False,
    read: Callable[[Path], Run] | None = None,
) -> Run:
    """Run a notebook and the exercise's probes in a fresh sandbox; return what it printed, as a Run (never
    raises for anything the notebook does). `read(path)` reads the answers' file instead of `_read_output`."""
    work = Path(tempfile.mkdtemp(prefix="grade-"))
    try:
        grading, output = work / "grading", work / "output"
        grading.mkdir()
        output.mkdir()
        (grading / "submission.ipynb").write_bytes(notebook_bytes)
        (grading / "probes.py").write_text(exercise.probes)
        shutil.copy(RUNNER, grading / "grade_runner.py")
        for p in (work, grading, *grading.iterdir()):
            p.chmod(0o755 if p.is_dir() else 0o644)
        argv = [
            str(Path(sys.prefix).resolve() / "bin" / "python"),  # the venv as bound (it may be a link)
            "-I",
            "/grading/grade_runner.py",
            "/grading/submission.ipynb",
            "/grading/probes.py",
            *(["--with-args"] if with_args else ["--probe-seconds", f"{timeout / PROBE_SHARE:g}"]),
        ]
        outcome = sandbox.run(argv, grading, output, timeout)
        run = (read or _read_output)(outcome.stdout)
        run.seconds = outcome.seconds
        run.timed_out = outcome.timed_out
        if not run.finished and not run.timed_out:
            status = outcome.returncode
            # what the notebook printed is not shown (it could carry the hidden inputs): only its kind
            last = outcome.stderr.read_bytes()[-4000:].decode(errors="replace")
            hint = ": out of memory" if "MemoryError" in last else ""
            run.crashed = run.crashed or f"the grading process ended early (exit status {status}){hint}"
        return run
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read_output(path):
    run = Run()
    size = path.stat().st_size
    if size > MAX_OUTPUT:
        run.crashed = f"printed {size / 2**20:.0f} MiB of answers, more than the {MAX_OUTPUT / 2**20:.0f} MiB allowed"
        return run
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            run.crashed = "printed something that is not an answer (the grading channel was tampered with)"
            return run
        if not isinstance(record, dict):
            continue
        if "probe" in record and type(record["probe"]) is int and 0 <= record["probe"] < MAX_PROBES:
            run.answers[record["probe"]] = record.get("answer")
            if "args" in record:
                run.args[record["probe"]] = record["args"]
        elif "cell_error" in record and isinstance(record["cell_error"], dict):
            run.cell_errors.append(record["cell_error"])
        elif record.get("done") is True:
            run.finished = True
    return run


@dataclass
class Reference:
    answers: list  # decoded solution answers
    args: list  # decoded arguments


def reference_answers(exercise: Exercise, timeout: float) -> Reference:
    """The solution's answers on the hidden inputs, computed in a sandbox like every submission's."""
    return reference_from_run(exercise, run_notebook(exercise, exercise.solution, max(timeout, 120), with_args=True))


def reference_from_run(exercise: Exercise, run: Run) -> Reference:
    """The Reference that a run of the solution notebook (with its arguments) gives; raises GradingError if
    the solution did not answer every probe."""
    if not run.finished:
        raise GradingError(f"the solution of {exercise.name} could not be run: {run.crashed or 'it timed out'}")
    if run.cell_errors:
        raise GradingError(f"the solution of {exercise.name} raised: {run.cell_errors[0]}")
    n = len(run.answers)
    try:
        answers = [judge.decode(run.answers[i]) for i in range(n)]
        args = [judge.decode(run.args[i]) for i in range(n)]
    except (KeyError, judge.Malformed) as err:
        raise GradingError(f"the solution of {exercise.name} gave unreadable answers ({err})") from err
    bad = [i for i, a in enumerate(answers) if isinstance(a, (judge.Raised, judge.Missing, judge.Other))]
    if bad:
        raise GradingError(f"the solution of {exercise.name} fails probe {bad[0]}: {answers[bad[0]]}")
    return Reference(answers, args)


@dataclass(frozen=True)
class Probe:
    """One hidden call as probes.py lists it: the question, the name of the learner's function it calls, and
    `what`, the master's description of its input ("a window that must crop") or None."""

    question: str
    function: str
    what: str | None = None


# What went wrong with a question, as the results file names it (`Verdict.kind`): None is full marks.
VERDICT_KINDS = {
    "no-probe": "the master gives the question no hidden test",
    "timeout": "the run ended at the time limit before this question was answered",
    "not-called": "the notebook stopped before the function was called",
    "unreadable": "an answer the grader cannot read",
    "too-slow": "a call on one hidden input did not return within its share of the time limit",
    "raised": "the function raised",
    "missing": "no function of that name",
    "wrong": "an answer or a property differs from the solution's",
    "not-graded": "the whole submission could not be graded (its problems say why)",
}


@dataclass(frozen=True)
class Verdict:
    """The grade of one question of one submission, in the grader's own words only: its `score`, and for a lost
    point its `kind` (one of VERDICT_KINDS), `why` (what failed) and `on` (the description of the probe that
    broke it, if one did). `reason` is the one line the CSV shows; a Verdict unpacks as (score, reason)."""

    question: str
    score: float
    function: str = "?"
    kind: str | None = None
    why: str | None = None
    on: str | None = None

    @property
    def reason(self) -> str | None:
        if self.why is None:
            return None
        on = f" on {self.on}" if self.on else ""
        return judge.clean(f"{self.question} ({self.function}){on}: {self.why}", MAX_REASON)

    def __iter__(self):
        return iter((self.score, self.reason))

    def data(self) -> dict:
        """The verdict as the results file holds it."""
        return {"score": self.score, "function": self.function, "kind": self.kind, "on": self.on, "why": self.why}


class _Unanswered(judge.Wrong):
    def __init__(self, kind, why):
        super().__init__(why)
        self.kind = kind


def _answer(run: Run, i: int):
    """The decoded answer of probe i, or raise _Unanswered with the kind and reason of its absence."""
    if i not in run.answers:
        if run.timed_out:
            raise _Unanswered("timeout", "did not finish within the time limit")
        raise _Unanswered("not-called", "was never called: the notebook stopped before")
    if judge.is_too_slow(run.answers[i]):
        raise _Unanswered(
            "too-slow",
            f"did not return within {run.answers[i]['too_slow']:g} s on one hidden input (a loop where a formula "
            "or a faster method would do?); the other questions were still graded",
        )
    try:
        return judge.decode(run.answers[i])
    except (judge.Malformed, RecursionError, TypeError, ValueError, OverflowError):
        raise _Unanswered("unreadable", "gave an answer the grader cannot read") from None


def judge_run(exercise: Exercise, reference: Reference, questions_of: list[Probe], run: Run) -> dict[str, Verdict]:
    """{question: Verdict} for one run, decided here from its printed answers.

    `questions_of[i]` is the `Probe` of probe i (see `probe_functions`); its `what`, when the master gives it,
    says what kind of input the probe is ("a window that must crop"), and a verdict about that probe names it;
    the input itself never appears in a reason."""
    out = {}
    for q in exercise.questions:
        probes = [(i, p) for i, p in enumerate(questions_of) if p.question == q]
        function = probes[0][1].function if probes else "?"
        on, kind = None, "wrong"
        try:
            if not probes:
                kind = "no-probe"
                raise judge.Wrong("has no hidden test")  # a broken master; never a free point
            got = [_answer(run, i) for i, _ in probes]
            want = [reference.answers[i] for i, _ in probes]
            args = [reference.args[i] for i, _ in probes]
            for (_, probe), g in zip(probes, got):  # the same message for these whatever the check
                if isinstance(g, judge.Raised):
                    on, kind = probe.what, "raised"
                    judge.same(g, None)
                if isinstance(g, judge.Missing):  # the name the probe asks for, not the one printed
                    on, kind = probe.what, "missing"
                    judge.same(judge.Missing(probe.function), None)
            check = exercise.checks.get(f"check_{q}")
            if check:
                try:
                    check(list(got), list(want), args)  # copies: a check may rebind items
                except judge.Wrong:
                    raise
                except Exception:
                    # A check is written for answers of the solution's kind: given another kind (a tensor where
                    # a list is asked, say) it may raise, which would fail the whole notebook. The plain
                    # comparison then names the answer's kind; if every answer is of the solution's kind, the
                    # check itself is at fault and the grader says so.
                    for (_, probe), g, w in zip(probes, got, want):
                        on = probe.what
                        judge.same(g, w)
                    raise
            else:
                for (_, probe), g, w in zip(probes, got, want):
                    on = probe.what
                    judge.same(g, w)
            out[q] = Verdict(q, 1.0, function)
        except judge.Wrong as wrong:
            kind = wrong.kind if isinstance(wrong, _Unanswered) else kind
            out[q] = Verdict(q, 0.0, function, kind, judge.clean(wrong, MAX_REASON), on)
    return out


def details_of(exercise: Exercise, questions_of: list[Probe], run: Run) -> list[tuple[str, str]]:
    """[(question or "cell N", message)]: what the learner's code raised, for the instructor only (the details
    file), since a message may carry the hidden inputs."""
    out = [(f"cell {judge.clean(e.get('cell'), 10)}", judge.clean(e.get("error"), 300)) for e in run.cell_errors]
    for q in exercise.questions:
        for i, probe in enumerate(questions_of):
            if probe.question == q and i in run.answers:
                try:
                    value = judge.decode(run.answers[i])
                except (judge.Malformed, RecursionError, TypeError, ValueError):
                    continue
                if isinstance(value, judge.Raised):
                    out.append((q, f"raised {value.message}"))
                    break
    return out


def _cell_name(number):
    """'cell 3' for a cell number the runner reported, else 'a cell' (the channel can be forged: only an int of the
    notebook's size is the grader's own word)."""
    return f"cell {number}" if type(number) is int and 0 < number <= 100_000 else "a cell"


def _warning_for(exercise, notebook):
    otter = notebook.get("metadata", {}).get("otter") if isinstance(notebook.get("metadata"), dict) else None
    name = otter.get("assignment_name") if isinstance(otter, dict) else None
    if name is None:
        return f"the notebook lost its otter metadata: graded as {exercise.name} (the exercise asked for)"
    if name != exercise.name:  # not the name it gives: the submission wrote it
        return f"the notebook's otter metadata names another exercise: graded as {exercise.name}"
    return ""


class NotGradable(Exception):
    """A folder entry that is not a regular file of a readable size; the message says what it is."""


KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def read_submission(path: str | Path) -> bytes:
    """The bytes of a submitted file, read without trusting it: `lstat` first, only a regular file is opened
    (O_NOFOLLOW | O_NONBLOCK, so that neither a link nor a FIFO is followed or waited on), its type and size are
    checked again on the open descriptor, and at most MAX_NOTEBOOK bytes are read. Raises NotGradable."""
    try:
        st = os.lstat(path)
    except OSError as err:
        raise NotGradable(f"cannot be examined ({err.strerror})") from err
    if not stat.S_ISREG(st.st_mode):
        kind = KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise NotGradable(f"{kind}, not a regular file: not opened")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as err:
        raise NotGradable(f"cannot be opened ({err.strerror})") from err
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the lstat and the open
            raise NotGradable("not a regular file: not read")
        if st.st_size > MAX_NOTEBOOK:
            raise NotGradable(
                f"{st.st_size / 2**20:.0f} MiB, more than the {MAX_NOTEBOOK / 2**20:.0f} MiB "
                "a notebook may have: not read"
            )
        chunks, size = [], 0
        while size <= MAX_NOTEBOOK:
            chunk = os.read(fd, min(2**20, MAX_NOTEBOOK + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_NOTEBOOK:
            raise NotGradable(f"more than the {MAX_NOTEBOOK / 2**20:.0f} MiB a notebook may have: not read")
        return b"".join(chunks)
    except OSError as err:
        raise NotGradable(f"cannot be read ({err.strerror})") from err
    finally:
        os.close(fd)


def display_name(name: str) -> str:
    """A file name as printable text: bytes that are not UTF-8 and control characters written as escapes."""
    return judge.clean(os.fsencode(name).decode("utf-8", "backslashreplace"), escape=True)


def csv_cell(value: object) -> str | int | float:
    """A cell as the CSV holds it: one line of printable text, at most MAX_CELL characters, never a formula."""
    if isinstance(value, (int, float)):
        return value
    text = judge.clean(value, escape=True)
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 12] + " [truncated]"
    # a spreadsheet that splits on ';' or '|' (or a tab, escaped already) starts a cell after it: guard those too
    text = re.sub(r"([;|,])(\s*)(?=[=+\-@])", r"\1\2'", text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


@dataclass(frozen=True)
class Finding:
    """A problem of a whole submission (it could not be graded, or not fully) or a warning about it, in the
    grader's own words: `kind` names it for a program (PROBLEM_KINDS, WARNING_KINDS), `text` for the learner."""

    kind: str
    text: str


PROBLEM_KINDS = {
    "not-gradable": "a folder entry that is not a regular file of a readable size",
    "not-a-notebook": "a file that does not read as a notebook",
    "too-costly": "reading or judging it went over the grader's CPU or memory bounds",
    "crashed": "the grading run ended early or its channel was tampered with",
    "timeout": "the run was stopped at the time limit (answers given before it count)",
    "grader-fault": "the grader itself failed on this notebook",
}
WARNING_KINDS = {
    "metadata": "the notebook lost its otter metadata, or names another exercise",
    "cell-raised": "a cell of the notebook raised",
    "by-hand": "a question asks for the learner's own code and the definition reaches a forbidden name",
    "hard-link": "the same file as another submission",
}


def empty_row(exercise: Exercise, name: str) -> dict:
    """A row that scores 0 on every question; `verdicts`, `problems` and `warning_items` are its structured
    results (the results file), from which `settle` writes the CSV's reason and warnings columns."""
    return {
        "submission": display_name(name),
        **{q: 0.0 for q in exercise.questions},
        "total": 0.0,
        "possible": float(len(exercise.questions)),
        "status": "graded",
        "reason": "",
        "warnings": "",
        "seconds": 0.0,
        "verdicts": {},
        "problems": [],
        "warning_items": [],
    }


def settle(row: dict) -> dict:
    """The row's scores, total and CSV text columns from its structured results: the reason column is the
    problems, then each lost point's one-line reason; the warnings column each warning, joined by '; '."""
    row.update({q: v.score for q, v in row["verdicts"].items()})
    row["total"] = sum(v.score for v in row["verdicts"].values())
    reasons = [p.text for p in row["problems"]] + [v.reason for v in row["verdicts"].values() if v.reason]
    row["reason"] = "; ".join(reasons)
    row["warnings"] = "; ".join(w.text for w in row["warning_items"])
    return row


def _not_graded(row, kind, text):
    row["status"] = "error"
    row["problems"].append(Finding(kind, text))
    return settle(row)


def _too_costly(what):
    return (
        f"could not be graded: {what} took more than {JUDGE_SECONDS} s or "
        f"{JUDGE_MEMORY / 2**30:.0f} GiB; every question scored 0"
    )


def grade_notebook(
    exercise: Exercise,
    reference: Reference,
    questions_of: list[Probe],
    submission: str | Path,
    timeout: float = TIMEOUT,
) -> dict:
    """Grade one notebook; return its row as a dict: the CSV's columns and the structured results (never raises
    for anything in the notebook)."""
    submission = Path(submission)
    row = empty_row(exercise, submission.name)
    try:
        data = read_submission(submission)
    except NotGradable as why:
        return _not_graded(row, "not-gradable", f"not graded: {why}; every question scored 0")
    parsed = bounded(_parse_notebook, exercise, data)
    if parsed is None:
        return _not_graded(row, "too-costly", _too_costly("reading the notebook"))
    problem, warnings, data = parsed
    if problem:
        return _not_graded(row, "not-a-notebook", f"not a readable notebook ({problem}); every question scored 0")
    judged = {}

    def read_and_judge(path):
        """In a child process with its own CPU and memory limits: read the answers and judge them, so that a
        pathological answer (a forged shape of a million dimensions, numbers that collide in a hash table)
        costs its own row only, never the grader's other threads."""
        result = bounded(_read_and_judge, exercise, reference, questions_of, path)
        judged["result"] = result
        return result[0] if result else Run(crashed="")

    run = run_notebook(exercise, data, timeout, read=read_and_judge)
    result = judged.get("result")
    row["seconds"] = round(run.seconds, 1)
    row["warning_items"] = list(warnings)
    if result is None:
        return _not_graded(row, "too-costly", _too_costly("judging its answers"))
    run, verdicts, details = result
    if run.cell_errors:
        first = run.cell_errors[0]
        more = f" (and {run.n_cell_errors - 1} more)" if run.n_cell_errors > 1 else ""
        error = judge.error_kind(judge.clean(first.get("error"), 300))  # not the message: it may carry the
        row["warning_items"].append(Finding("cell-raised", f"{_cell_name(first.get('cell'))} raised {error}{more}"))
    if run.crashed:
        return _not_graded(row, "crashed", f"could not be graded: {run.crashed}; every question scored 0")
    row["details"] = details
    row["verdicts"] = verdicts
    if run.timed_out:
        row["status"] = "timeout"
        row["problems"].append(Finding("timeout", f"stopped after {timeout:g} s (an endless loop?)"))
    return settle(row)


# The questions that ask for a computation by hand, and what their definitions must not reach. An in-process
# check cannot enforce "do not call X" against code that owns the interpreter (it can bind X under another name
# before any check replaces it), so the grade scores what can be scored and a static read of the learner's own
# code flags a definition that reaches one of these names, directly, through an alias, a helper or a base
# class, or that looks names up dynamically: a warning for the instructor to check by hand.
BY_HAND = {
    "01_next_token_prediction": {
        "q5": (
            ("losses_by_hand",),
            ("cross_entropy", "log_softmax", "nll_loss", "CrossEntropyLoss", "NLLLoss", "LogSoftmax"),
        )
    },
    "08_using_pytorch": {
        "q5": (
            ("model_loss",),
            ("cross_entropy", "log_softmax", "nll_loss", "CrossEntropyLoss", "NLLLoss", "LogSoftmax"),
        )
    },
    "11_build_the_gpt": {
        q: (names, ("tiny.Attention", "tiny.Block", "tiny.TinyGPT", "tiny.train", "tiny.generate", "tiny.AdamW"))
        for q, names in (
            ("q1", ("CausalSelfAttention",)),
            ("q2", ("Block",)),
            ("q3", ("GPT",)),
            ("q4", ("train",)),
            ("q5", ("generate",)),
        )
    },
}
# The builtins that look names up at run time count only as bare names (`eval(...)`) or as attributes of the
# builtins module (`builtins.eval`): `model.eval()` is a method of the model, not the builtin. `import_module`
# and `__dict__` count however they are reached.
BUILTIN_DYNAMIC = {"getattr", "eval", "exec", "__import__", "globals", "vars", "compile"}
DYNAMIC = (
    BUILTIN_DYNAMIC
    | {"import_module", "__dict__"}
    | {f"{module}.{name}" for module in ("builtins", "__builtins__") for name in BUILTIN_DYNAMIC}
)


def _learner_trees(notebook, template_sources):
    """The parsed code cells of a notebook that are not the exercise template's (magics and shell lines as pass)."""
    import ast

    trees = []
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if source.strip() in template_sources:
            continue
        lines = ["pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
        try:
            trees.append(ast.parse("\n".join(lines)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return trees


def _definitions_and_aliases(trees):
    """{name: def or class node} and {name: [what it is bound to]} of the cells' top level; an import is bound to
    a string naming its module, its name and 'module.name'."""
    import ast

    defined, aliases = {}, {}
    for node in (node for tree in trees for node in tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in (n for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)):
                aliases.setdefault(name.id, []).append(node.value)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = getattr(node, "module", None) or ""
            for alias in node.names:
                qualified = f"{module.split('.')[-1]}.{alias.name}" if module else alias.name
                aliases.setdefault(alias.asname or alias.name.split(".")[0], []).append(
                    ast.Constant(value=f"{module} {alias.name} {qualified}")
                )
    return defined, aliases


def _mentioned(node):
    """The names a node uses: names, attributes (and 'name.attr'), and the words of its short strings. An
    attribute named like a dynamic builtin (`model.eval`) is kept only as 'name.attr', so that it is not taken
    for the builtin."""
    import ast

    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            if sub.attr not in BUILTIN_DYNAMIC:
                names.add(sub.attr)
            if isinstance(sub.value, ast.Name):
                names.add(f"{sub.value.id}.{sub.attr}")
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and len(sub.value) < 200:
            names |= set(sub.value.split()) | set(sub.value.replace(".", " ").split())
    # aliases made inside the node (`import builtins as b`, `b = builtins`): b.eval is builtins.eval too
    local = _local_aliases(node)
    for dotted in [n for n in names if "." in n]:
        base, _, attr = dotted.partition(".")
        names |= {f"{module}.{attr}" for module in local.get(base, ())}
    return names


def _local_aliases(node):
    """{name: {what it stands for}} of the imports and plain `a = b` or `a = b.c` bindings inside a node."""
    import ast

    local = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            for alias in sub.names:
                local.setdefault(alias.asname or alias.name, set()).add(alias.name)
        elif isinstance(sub, ast.Assign) and isinstance(sub.value, (ast.Name, ast.Attribute)):
            for target in (t for t in sub.targets if isinstance(t, ast.Name)):
                local.setdefault(target.id, set()).add(ast.unparse(sub.value))
    return local


def _reached(definitions, defined, aliases):
    """Every name the definitions use, following the notebook's own helpers, aliases and base classes."""
    seen, todo, reached = set(), [d for d in definitions if d in defined], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in [defined[name]] if name in defined else aliases.get(name, []):
            names = _mentioned(node)
            reached |= names
            todo += [n for n in names if n in defined or n in aliases]
    # an attribute of an alias is also an attribute of what the alias names: `import builtins as b; b.eval`
    # reaches builtins.eval, `t = tiny; t.Block` reaches tiny.Block
    for dotted in [n for n in reached if "." in n]:
        base, _, attr = dotted.partition(".")
        if base in aliases and base not in defined:
            for node in aliases[base]:
                reached |= {f"{name}.{attr}" for name in _mentioned(node) if "." not in name}
    return reached


def by_hand_warnings(exercise_name: str, notebook: dict, template_sources: frozenset) -> list[str]:
    """One warning per question of BY_HAND whose definition, in the learner's own cells (not those of the
    exercise's template), reaches a forbidden name or looks names up dynamically; in the grader's words."""
    rules = BY_HAND.get(exercise_name)
    if not rules:
        return []
    defined, aliases = _definitions_and_aliases(_learner_trees(notebook, template_sources))
    warnings = []
    for question, (definitions, forbidden) in rules.items():
        reached = _reached(definitions, defined, aliases)
        hits = sorted(set(forbidden) & reached)
        if hits or reached & DYNAMIC:
            what = ", ".join(hits) if hits else "a name looked up at run time"
            warnings.append(f"{question} asks for its own code, and its definition reaches {what}: check it by hand")
    return warnings


def _parse_notebook(exercise, data):
    """(problem or "", [warning Finding], bytes to run): a submission read as a notebook. A UTF-8 byte-order mark, which
    some editors write, is dropped."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        notebook = json.loads(data)
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise ValueError("no list of cells")
    except (ValueError, RecursionError) as err:
        return judge.error_kind(type(err).__name__), [], data
    metadata = _warning_for(exercise, notebook)
    warnings = [Finding("metadata", metadata)] if metadata else []
    warnings += [Finding("by-hand", w) for w in by_hand_warnings(exercise.name, notebook, exercise.template)]
    return "", warnings, data


def _read_and_judge(exercise, reference, questions_of, path):
    """(run, verdicts, details) of one sandbox's answers file; the run without its answers (they stay here)."""
    run = _read_output(path)
    verdicts = judge_run(exercise, reference, questions_of, run) if not run.crashed else {}
    details = details_of(exercise, questions_of, run)[:MAX_DETAILS]
    run.answers, run.args = {}, {}
    run.n_cell_errors, run.cell_errors = len(run.cell_errors), run.cell_errors[:1]
    return run, verdicts, details


def bounded(fn: Callable, *args: object, seconds: int = JUDGE_SECONDS, memory: int = JUDGE_MEMORY) -> object:
    """fn(*args) computed in a forked child with its own limits (CPU seconds, address space beyond the grader's
    own), its result sent back pickled; None if the child runs out of either or dies. The grader's threads go on
    meanwhile: the parent only waits on a pipe."""
    import pickle
    import resource
    import select

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: limits first, then the work; it never returns into the grader's code
        code = 1
        try:
            os.close(read_end)
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
            vsize = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (vsize + memory, vsize + memory))
            try:
                payload = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
            except MemoryError:
                raise
            except Exception as err:  # a fault of the grader's code: the caller says so in the row
                payload = pickle.dumps(("fault", f"{type(err).__name__}: {judge.clean(err, 200)}"))
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + 4 * seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.kill(pid, 9)
                break
            chunk = os.read(read_end, 2**20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        return None
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "fault":
        raise RuntimeError(value)
    return value


class CsvOut:
    """The CSV, a row appended as each submission finishes; rewritten sorted by name at the end, with the
    results file and the details file beside it. Every cell goes through `csv_cell`."""

    def __init__(self, path, exercise):
        columns = ["submission", *exercise.questions, *COLUMNS_AFTER]
        self.path, self.columns, self.lock, self.exercise = Path(path), columns, threading.Lock(), exercise
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "w", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.file, columns, extrasaction="ignore", quoting=csv.QUOTE_NONNUMERIC)
        self.writer.writeheader()
        self.file.flush()

    def _clean(self, row):
        return {key: csv_cell(row.get(key, "")) for key in self.columns}

    def add(self, row):
        with self.lock:
            self.writer.writerow(self._clean(row))
            self.file.flush()

    def finish(self, rows):
        self.file.close()
        rows = sorted(rows, key=lambda r: r["submission"])
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, self.columns, extrasaction="ignore", quoting=csv.QUOTE_NONNUMERIC)
            writer.writeheader()
            writer.writerows(self._clean(r) for r in rows)
        os.replace(tmp, self.path)
        write_results(results_path(self.path), self.exercise, rows)
        with open(details_path(self.path), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["submission", "where", "detail"])
            seed = self.exercise.seed
            writer.writerow(["(this run)", "seed", f"fresh inputs drawn from seed {seed} (--seed repeats them)"])
            for row in rows:
                for where, detail in row.get("details", []):
                    writer.writerow([csv_cell(row["submission"]), csv_cell(where), csv_cell(detail)])


RESULTS_FORMAT = "course-grading-results/1"


def results_data(exercise: Exercise, rows: list[dict]) -> dict:
    """The structured results of a batch, as the results file holds them (docs/instructors.md): per submission
    its status, scores, and per question the score and, for a lost point, the kind of fault, what failed and
    on what kind of input; its problems and warnings, each with its kind. Every text is the grader's own."""

    def question(row, q):
        verdict = row["verdicts"].get(q)
        if verdict is None:  # the whole submission was not graded: its problems say why
            return {"score": float(row.get(q, 0.0)), "function": None, "kind": "not-graded", "on": None, "why": None}
        return verdict.data()

    return {
        "format": RESULTS_FORMAT,
        "exercise": exercise.name,
        "questions": list(exercise.questions),
        "kinds": {"question": VERDICT_KINDS, "problem": PROBLEM_KINDS, "warning": WARNING_KINDS},
        "submissions": [
            {
                "submission": row["submission"],
                "status": row["status"],
                "total": row["total"],
                "possible": row["possible"],
                "seconds": row["seconds"],
                "questions": {q: question(row, q) for q in exercise.questions},
                "problems": [{"kind": p.kind, "text": p.text} for p in row["problems"]],
                "warnings": [{"kind": w.kind, "text": w.text} for w in row["warning_items"]],
            }
            for row in sorted(rows, key=lambda r: r["submission"])
        ],
    }


def write_results(path: str | Path, exercise: Exercise, rows: list[dict]) -> Path:
    """Write the results file (written whole, then moved into place)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results_data(exercise, rows), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def results_path(out_csv: str | Path) -> Path:
    """The structured results beside the CSV, which `make feedback` reads: grades.csv -> grades.results.json."""
    out_csv = Path(out_csv)
    return out_csv.with_name(f"{out_csv.stem}.results.json")


def details_path(out_csv: str | Path) -> Path:
    """The instructor-only file beside the CSV: grades.csv -> grades.details.csv."""
    out_csv = Path(out_csv)
    return out_csv.with_name(f"{out_csv.stem}.details{out_csv.suffix or '.csv'}")


def submissions_in(folder: str | Path) -> list[Path]:
    """Every entry of `folder` whose name ends in .ipynb (hidden ones too), by name; links are listed, not
    followed (each gets its row from grade_notebook)."""
    return sorted(
        (Path(folder) / name for name in os.listdir(folder) if name.endswith(".ipynb")),
        key=lambda p: display_name(p.name),
    )


def grade_folder(  # noqa: C901 (the batch's steps in order)
    autograder_zip: str | Path,
    folder: str | Path,
    out_csv: str | Path | None = None,
    timeout: float = TIMEOUT,
    jobs: int = 2,
    report: Callable[[str], object] | None = print,
    uncapped_memory: bool = False,
    seed: int | None = None,
) -> list[dict]:
    """Grade every notebook in `folder`; write the CSV if `out_csv` is given; return the rows, sorted by name.
    Refuses to start where nothing can cap a sandbox's total memory, unless `uncapped_memory` (then it says so)."""
    sandbox.check_available()
    if not sandbox.memory_capped():
        if not uncapped_memory:
            raise sandbox.SandboxUnavailable(f"{sandbox.UNCAPPED}. Fix: {sandbox.UNCAPPED_FIX}")
        print(f"warning: {sandbox.UNCAPPED} (--uncapped-memory)", file=sys.stderr)
    exercise = load_exercise(autograder_zip, seed)
    submissions = submissions_in(folder)
    out = CsvOut(out_csv, exercise) if out_csv else None
    rows = []
    names_of = {}  # (device, inode) -> the names of one regular file: hard links are graded, and flagged
    for path in submissions:
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                names_of.setdefault((st.st_dev, st.st_ino), []).append(path.name)
        except OSError:
            pass
    also = {name: [n for n in names if n != name] for names in names_of.values() for name in names}
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        reference = reference_answers(exercise, timeout)
        questions_of = probe_functions(exercise, reference)

        def one(path):
            try:
                row = grade_notebook(exercise, reference, questions_of, path, timeout)
                if also.get(path.name):
                    others = ", ".join(display_name(n) for n in also[path.name][:3])
                    row["warning_items"].insert(0, Finding("hard-link", f"the same file as {others} (a hard link)"))
                    settle(row)
            except Exception as err:  # a fault of the grader itself still leaves a row
                row = empty_row(exercise, path.name)
                why = f"the grader failed on this notebook ({judge.error_kind(type(err).__name__)})"
                _not_graded(row, "grader-fault", why)
                row["details"] = [("grader", judge.clean(f"{type(err).__name__}: {err}", 300))]
            if out:
                out.add(row)
            if report:  # a terminal that cannot print a reason (PYTHONIOENCODING=ascii) never stops the batch
                line = display_name(
                    f"{row['submission']}: {row['total']:g}/{row['possible']:g} ({row['status']}, "
                    f"{row['seconds']:.0f} s){'  ' + row['reason'] if row['reason'] else ''}"
                )
                for text in (line, line.encode("ascii", "backslashreplace").decode("ascii")):
                    try:
                        report(text)
                        break
                    except (UnicodeError, OSError):
                        continue
            return row

        rows = list(pool.map(one, submissions))
    if out:
        out.finish(rows)
    return sorted(rows, key=lambda r: r["submission"])


def probe_functions(exercise: Exercise, reference: Reference) -> list[Probe]:
    """[Probe(question, function, what)] of each probe, read from probes.py by running it here (trusted code).

    PROBES, the list that probes.py builds (its prelude is written by tools/exercises/make_exercises.py), holds one
    record per hidden call, in order: `(question, function, args, driver)` or
    `(question, function, args, driver, what)`, where `question` is "q1", ..., `function` the name of the
    learner's function, `args` the tuple of arguments, `driver` None or a function `driver(fn, *args)` that
    calls it (several times, say), and `what`, optional, a short description of the kind of input, for the
    learner ("a window that must crop"), which a reason about that probe shows instead of the input."""
    space = {"__name__": "probes"}
    exec(compile(exercise.probes, "probes.py", "exec"), space)
    listed = []
    for record in space["PROBES"]:
        if not isinstance(record, tuple) or len(record) not in (4, 5):
            raise GradingError(f"{exercise.name}: a probe record is not (question, function, args, driver[, what])")
        what = record[4] if len(record) == 5 else None
        if what is not None and not isinstance(what, str):
            raise GradingError(f"{exercise.name}: the description of a probe of {record[0]} is not text")
        listed.append(Probe(record[0], record[1], judge.clean(what, 80) if what else None))
    if len(listed) != len(reference.answers):
        raise GradingError(f"{exercise.name}: the solution answered {len(reference.answers)} probes of {len(listed)}")
    return listed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "exercise", help="exercise name, e.g. 01_next_token_prediction (or a path to an autograder zip)"
    )
    parser.add_argument("submissions", help="folder holding the submitted .ipynb files")
    parser.add_argument("out", help="CSV file to write")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds allowed per submission")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at the same time")
    parser.add_argument(
        "--seed",
        type=int,
        help="the seed of the fresh hidden inputs (default: a new one each run, recorded in the details file)",
    )
    parser.add_argument(
        "--uncapped-memory",
        action="store_true",
        help="grade even where nothing can cap a sandbox's total memory (an ordinary user without "
        "a cgroup of its own); the number of processes is capped all the same",
    )
    args = parser.parse_args(argv)

    autograder_zip = Path(args.exercise) if args.exercise.endswith(".zip") else AUTOGRADER / f"{args.exercise}.zip"
    if not autograder_zip.exists():
        known = ", ".join(sorted(p.stem for p in AUTOGRADER.glob("*.zip"))) or "none (run make exercises)"
        sys.exit(f"no autograder for {args.exercise!r}: {autograder_zip} does not exist. Known exercises: {known}")
    folder = Path(args.submissions)
    try:
        is_folder = folder.is_dir()
    except OSError as err:  # a folder on the way that this user cannot enter
        sys.exit(f"cannot open {args.submissions}: {err.strerror}")
    if not is_folder:
        sys.exit(f"{args.submissions} is not a folder of submitted notebooks")
    try:
        listed = submissions_in(folder)
    except OSError as err:
        sys.exit(f"cannot list {args.submissions}: {err.strerror}")
    if not listed:
        sys.exit(f"{args.submissions} holds no .ipynb files")
    if args.timeout <= 0 or args.jobs < 1:
        sys.exit("--timeout must be positive and --jobs at least 1")
    started = time.monotonic()
    try:
        rows = grade_folder(
            autograder_zip,
            folder,
            args.out,
            args.timeout,
            args.jobs,
            uncapped_memory=args.uncapped_memory,
            seed=args.seed,
        )
    except (GradingError, sandbox.SandboxUnavailable) as err:
        sys.exit(f"cannot grade: {err}")
    problems = sum(r["status"] != "graded" for r in rows)
    print(
        f"wrote {args.out}: {len(rows)} submissions in {time.monotonic() - started:.0f} s"
        f"{f', {problems} could not be graded fully (see the reason column)' if problems else ''}; "
        f"for `make feedback`, the results as data: {results_path(args.out)}; "
        f"for the instructor only, the messages of what raised: {details_path(args.out)}"
    )


if __name__ == "__main__":
    main()
