"""Write one feedback file per submission from a grading run's results, to hand each learner their own.

    python -m tools.grading.feedback grades.csv feedback/            # or: make feedback CSV=grades.csv OUT=feedback/
    python -m tools.grading.feedback grades.results.json feedback/ --exercise 02_causal_mask

`tools/grading/grade.py` writes, beside its CSV, the structured results of the run (`grades.csv` ->
`grades.results.json`): per submission its status, its problems and warnings, and per question the score and,
for a lost point, the kind of fault, what failed and the kind of input that broke it, each in the grader's own
words. This command reads that file (given the CSV's path, it reads the results beside it; it refuses, with
the fix, a CSV without them) and writes `OUT/<submission>.md` for each submission: its scores, question by
question, with the reason for each lost point (never the hidden input itself), and its warnings. Nothing else
is copied, and a learner gets nothing of another learner's results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from tools.grading.grade import RESULTS_FORMAT, results_path
from tools.grading.judge import clean

CLEAN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a submission name kept as it is
MARKDOWN = re.compile(r"([\\`*_\[\]<>|#!~{}])")  # characters Markdown would read as markup
MAX_FIELD = 2000  # characters of one text copied into a feedback file


def _text(value: object) -> str:
    """A text of the results as one line of printable text, capped, shown as itself in Markdown."""
    return _md(clean("" if value is None else value, MAX_FIELD))


def _number(value: object) -> str:
    return f"{value:g}" if type(value) in (int, float) else "?"


def _why(verdict: dict) -> str:
    """What went wrong with one question, as the table shows it: the kind of input, then what failed."""
    if not isinstance(verdict, dict) or verdict.get("kind") is None:
        return ""
    if verdict.get("kind") == "not-graded":
        return "not graded (see below)"
    on = f"on {verdict['on']}: " if verdict.get("on") else ""
    return f"{on}{verdict.get('why') or ''}"


def feedback_text(submission: dict, questions: list[str], exercise: str | None = None) -> str:
    """The Markdown feedback of one submission of the results file."""
    title = f" on {_text(exercise)}" if exercise else ""
    lines = [f"# Feedback{title}: {_text(submission.get('submission', ''))}", ""]
    lines.append(
        f"Score: {_number(submission.get('total'))} out of {_number(submission.get('possible'))} "
        f"({_text(submission.get('status')) or 'graded'})."
    )
    lines += ["", "| question | score | what went wrong |", "|---|---|---|"]
    verdicts = submission.get("questions") if isinstance(submission.get("questions"), dict) else {}
    for q in questions:
        verdict = verdicts.get(q) if isinstance(verdicts.get(q), dict) else {}
        lines.append(f"| {_text(q)} | {_number(verdict.get('score'))} | {_text(_why(verdict))} |")
    for key, label in (("problems", "Also"), ("warnings", "Warnings")):
        items = submission.get(key) if isinstance(submission.get(key), list) else []
        texts = [item.get("text") for item in items if isinstance(item, dict) and item.get("text")]
        if texts:
            lines += ["", f"{label}: " + _text("; ".join(map(str, texts)))]
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
            raise ValueError(f"two submissions of the results are both named {clean(name, 200)!r}")
        taken.add(path)
    return path


def read_results(path: str | Path) -> dict:
    """The results of a grading run, from their file or from the CSV they were written beside. Raises
    ValueError, saying what to do, for a CSV without its results file or a file that is not one."""
    path = Path(path)
    results = path if path.name.endswith(".results.json") else results_path(path)
    if not results.exists():
        raise ValueError(
            f"{results} not found: feedback reads the structured results tools/grading/grade.py writes beside its CSV "
            f"({path.name} -> {results.name}); grade the folder again with `make grade` (a CSV alone is not read)"
        )
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{results}: not a results file of tools/grading/grade.py ({type(err).__name__})") from None
    if (
        not isinstance(data, dict)
        or data.get("format") != RESULTS_FORMAT
        or not isinstance(data.get("submissions"), list)
    ):
        raise ValueError(f"{results}: not a results file of tools/grading/grade.py (format {RESULTS_FORMAT})")
    return data


def write_feedback(path: str | Path, out_folder: str | Path, exercise: str | None = None) -> list[Path]:
    """Write one feedback file per submission of the results of `path` (the CSV or its results file) into
    `out_folder`; return their paths. The title names `exercise`, else the exercise the results name."""
    data = read_results(path)
    questions = [q for q in data.get("questions", []) if isinstance(q, str)]
    exercise = exercise or (data.get("exercise") if isinstance(data.get("exercise"), str) else None)
    out = Path(out_folder)
    out.mkdir(parents=True, exist_ok=True)
    taken, written = set(), []
    for submission in data["submissions"]:
        if not isinstance(submission, dict):
            raise ValueError(f"{path}: a submission of the results is not a record")
        target = out / file_name(str(submission.get("submission", "")), taken)
        target.write_text(feedback_text(submission, questions, exercise), encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "results", help="the grading CSV of tools/grading/grade.py (its results file beside it), or that file"
    )
    parser.add_argument("out", help="the folder to write one feedback file per submission into")
    parser.add_argument("--exercise", help="the exercise's name, for the files' titles (default: the results')")
    args = parser.parse_args(argv)
    try:
        written = write_feedback(args.results, args.out, args.exercise)
    except (OSError, ValueError) as err:
        sys.exit(f"feedback: {err}")
    print(f"{len(written)} feedback files written to {args.out}")


if __name__ == "__main__":
    main()
