"""Grade a folder of submitted notebooks for one exercise into a CSV, one row per submission.

    python tools/grade.py 01_next_token_prediction submissions/ grades.csv
    make grade EX=01_next_token_prediction SUBMISSIONS=submissions/ OUT=grades.csv

Every `*.ipynb` in the folder is graded by otter-grader (`otter.run`, no Docker)
against `autograder/EX.zip`, hidden tests included, each in its own process with
a time limit. A submission that raises, lost cells, returns the wrong type or
never finishes still gets its row: 0 for each question it failed, and the
reason in the `reason` column. The run never stops at a bad submission.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AUTOGRADER = ROOT / "autograder"
TIMEOUT = 300  # seconds per submission; the course's exercises take well under a minute
EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)(?::.*)?)$")


def question_names(autograder_zip):
    """The questions of an exercise (q1, q2, ...), read from the test files in its autograder zip."""
    with zipfile.ZipFile(autograder_zip) as z:
        names = [Path(n).stem for n in z.namelist() if re.fullmatch(r"tests/[^/]+\.py", n)]
    return sorted(names, key=lambda n: (len(n), n))


def _case_error(message):
    """The last exception line of a failed test case's doctest output, e.g. "NameError: name 'f' is not defined"."""
    lines = [m.group(1).strip() for m in map(EXCEPTION_LINE.match, (message or "").splitlines()) if m]
    return lines[0][:120] if lines else None


def _summarise(results):
    """Per question: score, possible points, and whether its public and hidden tests passed (from GradingResults)."""
    out = {}
    for name, test_file in results.results.items():
        cases = test_file.test_case_results
        failed = [r for r in cases if not r.passed]
        out[name] = {
            "score": float(test_file.score),
            "possible": float(test_file.possible),
            "public_passed": all(r.passed for r in cases if not r.test_case.hidden),
            "hidden_passed": all(r.passed for r in cases if r.test_case.hidden),
            # exceptions other than a bare failed assert (which just means a wrong answer)
            "errors": [e for e in (_case_error(r.message) for r in failed) if e and e != "AssertionError"],
        }
    return out


def _worker(autograder_zip, submission, result_json):
    """Grade one submission in this process and write a JSON summary (run by `grade_one` in a subprocess)."""
    import contextlib
    import io

    from otter.run import main as otter_run

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            results = otter_run(str(submission), autograder=str(autograder_zip), output_dir=None, no_logo=True)
        if results.catastrophic_error is not None:
            summary = {"error": f"{type(results.catastrophic_error).__name__}: {results.catastrophic_error}"}
        else:
            summary = {"questions": _summarise(results)}
    except Exception as err:  # the submission could not be graded at all: say why, in one line
        summary = {"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    Path(result_json).write_text(json.dumps(summary))


def _reason(name, q):
    if q["score"] >= q["possible"]:
        return None
    if q["errors"]:
        return f"{name}: {q['errors'][0]}"
    if not q["public_passed"]:
        return f"{name}: wrong answer (public tests fail)"
    return f"{name}: wrong answer (passes the public tests, fails the hidden ones)"


def grade_one(autograder_zip, submission, timeout=TIMEOUT):
    """Grade one notebook in a subprocess with a time limit; return its CSV row as a dict (never raises)."""
    questions = question_names(autograder_zip)
    row = {"submission": Path(submission).name, **{q: 0.0 for q in questions}, "total": 0.0,
           "possible": float(len(questions)), "status": "graded", "reason": "", "seconds": 0.0, "detail": {}}
    scratch = Path(tempfile.mkdtemp(prefix="grade-"))
    result_json = scratch / "result.json"
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(autograder_zip), str(submission), str(result_json)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the grader and the kernel it started
        proc.communicate()
        row.update(status="timeout", reason=f"stopped after {timeout} s (an endless loop?); every question scored 0")
    else:
        summary = json.loads(result_json.read_text()) if result_json.exists() else {
            "error": f"the grader crashed: {(stderr.strip().splitlines() or ['no message'])[-1][:200]}"}
        if "error" in summary:
            row.update(status="error", reason=f"could not be graded ({summary['error']}); every question scored 0")
        else:
            detail = summary["questions"]
            possible = sum(q["possible"] for q in detail.values())
            row.update({name: q["score"] for name, q in detail.items()})
            row.update(total=sum(q["score"] for q in detail.values()), possible=possible, detail=detail,
                       reason="; ".join(r for r in (_reason(n, detail[n]) for n in questions if n in detail) if r))
    finally:
        row["seconds"] = round(time.monotonic() - started, 1)
        shutil.rmtree(scratch, ignore_errors=True)
    return row


def grade_folder(autograder_zip, folder, out_csv=None, timeout=TIMEOUT, jobs=2, report=print):
    """Grade every notebook in `folder`; write the CSV if `out_csv` is given; return the rows, sorted by name."""
    submissions = sorted(Path(folder).glob("*.ipynb"))
    questions = question_names(autograder_zip)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(grade_one, autograder_zip, s, timeout) for s in submissions]
        rows = []
        for future in futures:
            row = future.result()
            rows.append(row)
            if report:
                report(f"{row['submission']}: {row['total']:g}/{row['possible']:g} ({row['status']}, "
                       f"{row['seconds']:.0f} s){'  ' + row['reason'] if row['reason'] else ''}")
    if out_csv:
        columns = ["submission", *questions, "total", "possible", "status", "reason"]
        with open(out_csv, "w", newline="") as f:
            writer = csv.DictWriter(f, columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        _worker(*argv[1:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercise", help="exercise name, e.g. 01_next_token_prediction (or a path to an autograder zip)")
    parser.add_argument("submissions", help="folder holding the submitted .ipynb files")
    parser.add_argument("out", help="CSV file to write")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds allowed per submission")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at the same time")
    args = parser.parse_args(argv)

    autograder_zip = Path(args.exercise) if args.exercise.endswith(".zip") else AUTOGRADER / f"{args.exercise}.zip"
    if not autograder_zip.exists():
        known = ", ".join(sorted(p.stem for p in AUTOGRADER.glob("*.zip"))) or "none (run make exercises)"
        sys.exit(f"no autograder for {args.exercise!r}: {autograder_zip} does not exist. Known exercises: {known}")
    if not Path(args.submissions).is_dir():
        sys.exit(f"{args.submissions} is not a folder of submitted notebooks")
    if not any(Path(args.submissions).glob("*.ipynb")):
        sys.exit(f"{args.submissions} holds no .ipynb files")
    started = time.monotonic()
    rows = grade_folder(autograder_zip, args.submissions, args.out, args.timeout, args.jobs)
    problems = sum(r["status"] != "graded" for r in rows)
    print(f"wrote {args.out}: {len(rows)} submissions in {time.monotonic() - started:.0f} s"
          f"{f', {problems} could not be graded fully (see the reason column)' if problems else ''}")


if __name__ == "__main__":
    main()
