"""Grade a folder of submitted notebooks for one exercise into a CSV, one row per submission.

    python -m tools.grade 01_next_token_prediction submissions/ grades.csv [--timeout 120] [--jobs 2]
    make grade EX=01_next_token_prediction SUBMISSIONS=submissions/ OUT=grades.csv

The sandbox computes, this process judges. Each submission runs in its own bubblewrap
sandbox (tools/sandbox.py: user nobody, no network, read-only environment, a private
/tmp, memory/process/time limits, killed whole at the time limit). There
tools/grade_runner.py runs its code cells, calls each question's function on the hidden
inputs of `grading/probes.py` and prints the answers as plain JSON. The solution
notebook is run the same way, once per batch, in the same environment. Here, outside
every sandbox, each answer is compared with the solution's (tools/judge.py: exact
types, shapes, dtypes, values) and with the exercise's property checks
(`grading/checks.py`). Patching otter, doctest, pickle, numpy or builtins inside a
notebook can change what it prints, never this comparison.

The batch never stops: rows are appended to the CSV as submissions finish (the file is
rewritten sorted by name at the end); a notebook that raises, loops, exits, or is not a
notebook still gets its row, with status `graded`, `timeout` or `error` and a one-line
reason for every lost point. A notebook that lost its notebook-level otter metadata is
graded anyway, as the exercise named on the command line, with a warning.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tools import judge, sandbox

ROOT = Path(__file__).resolve().parent.parent
AUTOGRADER = ROOT / "autograder"
RUNNER = Path(__file__).resolve().parent / "grade_runner.py"
TIMEOUT = 120  # seconds per submission; a solved notebook takes a few
MAX_OUTPUT = 32 * 2**20  # bytes of answers read from one sandbox
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


def load_exercise(autograder_zip):
    """An exercise's grading files from its autograder zip (written by tools/make_exercises.py)."""
    try:
        with zipfile.ZipFile(autograder_zip) as z:
            meta = json.loads(z.read("grading/questions.json"))
            probes = z.read("grading/probes.py").decode()
            checks_source = z.read("grading/checks.py").decode()
            solution = z.read("grading/solution.ipynb")
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as err:
        raise GradingError(f"{autograder_zip} is not a grading zip of this course ({err}): run `make exercises`")
    checks = dict(judge.CHECK_NAMES)
    exec(compile(checks_source, f"{autograder_zip}:grading/checks.py", "exec"), checks)
    return Exercise(meta["name"], meta["questions"], probes, checks, solution)


def question_names(autograder_zip):
    """The questions of an exercise (q1, q2, ...)."""
    return load_exercise(autograder_zip).questions


@dataclass
class Run:
    """What one sandboxed run printed, read by this (trusted) process."""
    answers: dict = field(default_factory=dict)  # probe index -> encoded answer
    args: dict = field(default_factory=dict)  # probe index -> encoded arguments (reference run only)
    functions: dict = field(default_factory=dict)  # probe index -> (question, function)
    cell_errors: list = field(default_factory=list)
    finished: bool = False
    timed_out: bool = False
    crashed: str = ""  # why the run ended abnormally, in one line
    seconds: float = 0.0


def run_notebook(exercise, notebook_bytes, timeout, with_args=False):
    """Run a notebook and the exercise's probes in a fresh sandbox; return what it printed (never raises
    for anything the notebook does)."""
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
        argv = [str(Path(sys.prefix) / "bin" / "python"), "-I", "/grading/grade_runner.py",
                "/grading/submission.ipynb", "/grading/probes.py", *(["--with-args"] if with_args else [])]
        outcome = sandbox.run(argv, grading, output, timeout)
        run = _read_output(outcome.stdout)
        run.seconds = outcome.seconds
        run.timed_out = outcome.timed_out
        if not run.finished and not run.timed_out:
            status = outcome.returncode
            last = outcome.stderr.read_bytes()[-4000:].decode(errors="replace").strip().splitlines()
            last = [ln for ln in last if ln.strip()]
            hint = judge.one_line(last[-1], 160) if last else ""
            hint = "out of memory" if "MemoryError" in hint else hint
            run.crashed = run.crashed or (f"the grading process ended early (exit status {status})"
                                          + (f": {hint}" if hint else ""))
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
        if "probe" in record and type(record["probe"]) is int:
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


def reference_answers(exercise, timeout):
    """The solution's answers on the hidden inputs, computed in a sandbox like every submission's."""
    return reference_from_run(exercise, run_notebook(exercise, exercise.solution, max(timeout, 120), with_args=True))


def reference_from_run(exercise, run):
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
        raise GradingError(f"the solution of {exercise.name} gave unreadable answers ({err})")
    bad = [i for i, a in enumerate(answers) if isinstance(a, (judge.Raised, judge.Missing, judge.Other))]
    if bad:
        raise GradingError(f"the solution of {exercise.name} fails probe {bad[0]}: {answers[bad[0]]}")
    return Reference(answers, args)


def judge_run(exercise, reference, questions_of, run):
    """{question: (score, reason or None)} for one run, decided here from its printed answers."""
    out = {}
    for q in exercise.questions:
        indices = [i for i, (question, _) in enumerate(questions_of) if question == q]
        function = questions_of[indices[0]][1] if indices else "?"
        try:
            if not indices:
                raise judge.Wrong("has no hidden test")  # a broken master; never a free point
            got = []
            for i in indices:
                if i not in run.answers:
                    raise judge.Wrong("did not finish within the time limit" if run.timed_out
                                      else "was never called: the notebook stopped before")
                try:
                    got.append(judge.decode(run.answers[i]))
                except (judge.Malformed, RecursionError, TypeError, ValueError):
                    raise judge.Wrong("gave an answer the grader cannot read")
            want = [reference.answers[i] for i in indices]
            args = [reference.args[i] for i in indices]
            for g in got:  # the same message for these whatever the check
                if isinstance(g, (judge.Raised, judge.Missing)):
                    judge.same(g, None)
            check = exercise.checks.get(f"check_{q}")
            if check:
                check(got, want, args)
            else:
                for g, w in zip(got, want):
                    judge.same(g, w)
            out[q] = (1.0, None)
        except judge.Wrong as wrong:
            out[q] = (0.0, f"{q} ({function}): {wrong}")
    return out


def _warning_for(exercise, notebook):
    otter = notebook.get("metadata", {}).get("otter") if isinstance(notebook.get("metadata"), dict) else None
    name = otter.get("assignment_name") if isinstance(otter, dict) else None
    if name is None:
        return f"the notebook lost its otter metadata: graded as {exercise.name} (the exercise asked for)"
    if name != exercise.name:
        return f"the notebook says it is {name!r}, not {exercise.name!r}: graded as {exercise.name}"
    return ""


def grade_notebook(exercise, reference, questions_of, submission, timeout=TIMEOUT):
    """Grade one notebook; return its CSV row as a dict (never raises for anything in the notebook)."""
    submission = Path(submission)
    row = {"submission": submission.name, **{q: 0.0 for q in exercise.questions}, "total": 0.0,
           "possible": float(len(exercise.questions)), "status": "graded", "reason": "", "warnings": "",
           "seconds": 0.0}
    try:
        data = submission.read_bytes()
        notebook = json.loads(data)
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            raise ValueError("no list of cells")
    except (OSError, ValueError, RecursionError) as err:
        row.update(status="error", reason=f"not a readable notebook ({str(err).splitlines()[0][:100]}); "
                                          "every question scored 0")
        return row
    warnings = [_warning_for(exercise, notebook)]
    run = run_notebook(exercise, data, timeout)
    if run.cell_errors:
        first = run.cell_errors[0]
        more = f" (and {len(run.cell_errors) - 1} more)" if len(run.cell_errors) > 1 else ""
        warnings.append(f"cell {judge.one_line(first.get('cell'), 10)} raised "
                        f"{judge.one_line(first.get('error'), 160)}{more}")
    row["warnings"] = "; ".join(w for w in warnings if w)
    row["seconds"] = round(run.seconds, 1)
    if run.crashed:
        row.update(status="error", reason=f"could not be graded: {run.crashed}; every question scored 0")
        return row
    verdicts = judge_run(exercise, reference, questions_of, run)
    row.update({q: score for q, (score, _) in verdicts.items()})
    row["total"] = sum(score for score, _ in verdicts.values())
    reasons = [reason for _, reason in verdicts.values() if reason]
    if run.timed_out:
        row["status"] = "timeout"
        reasons.insert(0, f"stopped after {timeout:g} s (an endless loop?)")
    row["reason"] = "; ".join(reasons)
    return row


class CsvOut:
    """The CSV, a row appended as each submission finishes; rewritten sorted by name at the end."""

    def __init__(self, path, columns):
        self.path, self.columns, self.lock = Path(path), columns, threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "w", newline="")
        self.writer = csv.DictWriter(self.file, columns, extrasaction="ignore")
        self.writer.writeheader()
        self.file.flush()

    def add(self, row):
        with self.lock:
            self.writer.writerow(row)
            self.file.flush()

    def finish(self, rows):
        self.file.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, self.columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(sorted(rows, key=lambda r: r["submission"]))
        os.replace(tmp, self.path)


def grade_folder(autograder_zip, folder, out_csv=None, timeout=TIMEOUT, jobs=2, report=print):
    """Grade every notebook in `folder`; write the CSV if `out_csv` is given; return the rows, sorted by name."""
    sandbox.check_available()
    exercise = load_exercise(autograder_zip)
    submissions = sorted(Path(folder).glob("*.ipynb"))
    out = CsvOut(out_csv, ["submission", *exercise.questions, *COLUMNS_AFTER]) if out_csv else None
    rows = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        reference = reference_answers(exercise, timeout)
        questions_of = probe_functions(exercise, reference)

        def one(path):
            try:
                row = grade_notebook(exercise, reference, questions_of, path, timeout)
            except Exception as err:  # a fault of the grader itself still leaves a row
                row = {"submission": path.name, **{q: 0.0 for q in exercise.questions}, "total": 0.0,
                       "possible": float(len(exercise.questions)), "status": "error",
                       "reason": f"the grader failed on this notebook ({type(err).__name__}: {err})", "warnings": "",
                       "seconds": 0.0}
            if out:
                out.add(row)
            if report:
                report(f"{row['submission']}: {row['total']:g}/{row['possible']:g} ({row['status']}, "
                       f"{row['seconds']:.0f} s){'  ' + row['reason'] if row['reason'] else ''}")
            return row

        rows = list(pool.map(one, submissions))
    if out:
        out.finish(rows)
    return sorted(rows, key=lambda r: r["submission"])


def probe_functions(exercise, reference):
    """[(question, function)] of each probe, read from probes.py by running it here (trusted code)."""
    space = {"__name__": "probes"}
    exec(compile(exercise.probes, "probes.py", "exec"), space)
    listed = [(entry[0], entry[1]) for entry in space["PROBES"]]  # (q, fn, args, driver[, what])
    if len(listed) != len(reference.answers):
        raise GradingError(f"{exercise.name}: the solution answered {len(reference.answers)} probes of {len(listed)}")
    return listed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercise",
                        help="exercise name, e.g. 01_next_token_prediction (or a path to an autograder zip)")
    parser.add_argument("submissions", help="folder holding the submitted .ipynb files")
    parser.add_argument("out", help="CSV file to write")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds allowed per submission")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at the same time")
    args = parser.parse_args(argv)

    autograder_zip = Path(args.exercise) if args.exercise.endswith(".zip") else AUTOGRADER / f"{args.exercise}.zip"
    if not autograder_zip.exists():
        known = ", ".join(sorted(p.stem for p in AUTOGRADER.glob("*.zip"))) or "none (run make exercises)"
        sys.exit(f"no autograder for {args.exercise!r}: {autograder_zip} does not exist. Known exercises: {known}")
    folder = Path(args.submissions)
    if not folder.is_dir():
        sys.exit(f"{args.submissions} is not a folder of submitted notebooks")
    if not any(folder.glob("*.ipynb")):
        sys.exit(f"{args.submissions} holds no .ipynb files")
    if args.timeout <= 0 or args.jobs < 1:
        sys.exit("--timeout must be positive and --jobs at least 1")
    started = time.monotonic()
    try:
        rows = grade_folder(autograder_zip, folder, args.out, args.timeout, args.jobs)
    except (GradingError, sandbox.SandboxUnavailable) as err:
        sys.exit(f"cannot grade: {err}")
    problems = sum(r["status"] != "graded" for r in rows)
    print(f"wrote {args.out}: {len(rows)} submissions in {time.monotonic() - started:.0f} s"
          f"{f', {problems} could not be graded fully (see the reason column)' if problems else ''}")


if __name__ == "__main__":
    main()
