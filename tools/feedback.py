"""Write one feedback file per submission from a grading CSV, to hand each learner their own row.

    python -m tools.feedback grades.csv feedback/            # or: make feedback CSV=grades.csv OUT=feedback/
    python -m tools.feedback grades.csv feedback/ --exercise 02_causal_mask

`tools/grade.py` writes one CSV row per submission: the score of each question, the total, a status, the
reasons for the lost points, warnings and the seconds. This command writes `OUT/<submission>.md` for each
row: that learner's scores, question by question, with the reason for each lost point (a reason names the
question, the property that failed and the kind of input that broke it, never the hidden input itself), and
the row's warnings. Only those columns are copied: any other column of the CSV (an instructor's note, the
seconds) stays out. A learner gets nothing of another learner's row.
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

from tools.grade import FORMULA_STARTS

QUESTION = re.compile(r"^q\d+$")
SAFE_NAME = re.compile(r"[^A-Za-z0-9._()\- ]")
MAX_FIELD = 2000  # characters of a reason or warnings cell copied into a feedback file


def question_reasons(reason: str) -> dict[str, list[str]]:
    """{question: [reasons]} from a row's reason cell, whose parts read 'q2 (function): what failed'."""
    out, current = {}, None
    for part in re.split(r";\s+(?=q\d+ \()", reason or ""):
        found = re.match(r"(q\d+) \(", part)
        current = found.group(1) if found else current
        out.setdefault(current or "", []).append(part.strip())
    return out


def _plain(text: str) -> str:
    """A CSV cell as one line of text: control characters and the spreadsheet guard quote removed, capped."""
    text = re.sub(r"[\x00-\x1f\x7f]", " ", text or "")
    if len(text) > 1 and text[0] == "'" and text[1:].startswith(FORMULA_STARTS):  # the grader's guard quote
        text = text[1:]
    return text[:MAX_FIELD]


def _number(text: str) -> str:
    try:
        return f"{float(text):g}"
    except (TypeError, ValueError):
        return _plain(text) or "?"


def feedback_text(row: dict, questions: list[str], exercise: str | None = None) -> str:
    """The Markdown feedback of one CSV row."""
    name = _plain(row.get("submission", ""))
    reasons = question_reasons(_plain(row.get("reason", "")))
    lines = [f"# Feedback{f' on {exercise}' if exercise else ''}: {name}", ""]
    lines.append(f"Score: {_number(row.get('total'))} out of {_number(row.get('possible'))} "
                 f"({_plain(row.get('status', '')) or 'graded'}).")
    lines += ["", "| question | score | what went wrong |", "|---|---|---|"]
    for q in questions:
        # the table names the question: drop its label "qN (function)", keep the kind of input and the reason
        why = " ".join(re.sub(rf"^{q} \([^)]*\)\s*:?\s*", "", r) for r in reasons.pop(q, []))
        lines.append(f"| {q} | {_number(row.get(q))} | {why.replace('|', '/')} |")
    rest = [r for parts in reasons.values() for r in parts if r]
    if rest:
        lines += ["", "Also: " + "; ".join(rest)]
    if _plain(row.get("warnings", "")):
        lines += ["", f"Warnings: {_plain(row['warnings'])}"]
    lines += ["", "The grade calls your functions on inputs you have not seen. Each reason says what kind of input "
              "broke an answer: try an input of that kind in your notebook, compare with what the question "
              "asks, and run its `grader.check` cell again.", ""]
    return "\n".join(lines)


def file_name(submission: str, taken: set) -> str:
    """A safe, unique file name for a submission's feedback (no folders, no odd characters)."""
    stem = SAFE_NAME.sub("_", Path(submission or "submission").stem).strip(" .") or "submission"
    name, k = f"{stem[:100]}.md", 1
    while name in taken:
        k += 1
        name = f"{stem[:100]}-{k}.md"
    taken.add(name)
    return name


def write_feedback(csv_path, out_folder, exercise=None) -> list[Path]:
    """Write one feedback file per row of `csv_path` into `out_folder`; return their paths."""
    with open(csv_path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "submission" not in reader.fieldnames:
            raise ValueError(f"{csv_path}: not a grading CSV of tools/grade.py (no 'submission' column)")
        questions = [c for c in reader.fieldnames if QUESTION.match(c)]
        rows = list(reader)
    out = Path(out_folder)
    out.mkdir(parents=True, exist_ok=True)
    taken, written = set(), []
    for row in rows:
        path = out / file_name(row.get("submission", ""), taken)
        path.write_text(feedback_text(row, questions, exercise), encoding="utf-8")
        written.append(path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="the grading CSV written by tools/grade.py")
    parser.add_argument("out", help="the folder to write one feedback file per submission into")
    parser.add_argument("--exercise", help="the exercise's name, for the files' titles")
    args = parser.parse_args(argv)
    try:
        written = write_feedback(args.csv, args.out, args.exercise)
    except (OSError, ValueError, csv.Error) as err:
        sys.exit(f"feedback: {err}")
    print(f"{len(written)} feedback files written to {args.out}")


if __name__ == "__main__":
    main()
