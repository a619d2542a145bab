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
import hashlib
import re
import sys
from pathlib import Path

from tools.grade import FORMULA_STARTS

QUESTION = re.compile(r"^q\d+$")
CLEAN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a submission name kept as it is
MARKDOWN = re.compile(r"([\\`*_\[\]<>|#!~{}])")  # characters Markdown would read as markup
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
    name = _md(_plain(row.get("submission", "")))
    reasons = question_reasons(_plain(row.get("reason", "")))
    lines = [f"# Feedback{f' on {_md(exercise)}' if exercise else ''}: {name}", ""]
    lines.append(
        f"Score: {_md(_number(row.get('total')))} out of {_md(_number(row.get('possible')))} "
        f"({_md(_plain(row.get('status', '')) or 'graded')})."
    )
    lines += ["", "| question | score | what went wrong |", "|---|---|---|"]
    for q in questions:
        # the table names the question: drop its label "qN (function)", keep the kind of input and the reason
        why = " ".join(re.sub(rf"^{q} \([^)]*\)\s*:?\s*", "", r) for r in reasons.pop(q, []))
        lines.append(f"| {q} | {_md(_number(row.get(q)))} | {_md(why)} |")
    rest = [r for parts in reasons.values() for r in parts if r]
    if rest:
        lines += ["", "Also: " + _md("; ".join(rest))]
    if _plain(row.get("warnings", "")):
        lines += ["", f"Warnings: {_md(_plain(row['warnings']))}"]
    lines += [
        "",
        "The grade calls your functions on inputs you have not seen. Each reason says what kind of input "
        "broke an answer: try an input of that kind in your notebook, compare with what the question "
        "asks, and run its `grader.check` cell again.",
        "",
    ]
    return "\n".join(lines)


def _md(text: str) -> str:
    """Text shown as itself in Markdown: every markup character escaped."""
    return MARKDOWN.sub(r"\\\1", text)


def file_name(submission: str, taken: set | None = None) -> str:
    """The feedback file of a submission, one to one and whatever the order of the rows: a plain name
    (letters, digits, '.', '_', '-') keeps its stem (`ada.ipynb` -> `ada.md`); any other name, such as
    ` ada.ipynb` with its leading space, gets its cleaned stem and a hash of the whole name after a '~',
    which no plain name holds, so it can never take another learner's file."""
    name = submission or ""
    stem = name.removesuffix(".ipynb")
    if not CLEAN_NAME.fullmatch(stem):
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        stem = f"{re.sub(r'[^A-Za-z0-9._-]', '_', stem).strip('._-')[:60] or 'submission'}~{digest}"
    path = f"{stem}.md"
    if taken is not None:
        if path in taken:
            raise ValueError(f"two rows of the CSV are both named {_plain(name)!r}")
        taken.add(path)
    return path


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
