"""Run the learner's `grader.check` of exercise notebooks on planted answers, for tests/test_exercises.py.

    python tools/grading/run_public_checks.py SPEC.json OUT.json   # run by its path: it imports only book

SPEC.json lists exercises `{"name", "student": the student notebook, "solution": the solved notebook,
"answers": {question: [source, ...]}}`. For each one, this process runs the solved notebook's code cells
(not its otter cells) into a namespace, then runs each question's public checks through the course's
grader (book/exercise.py, what the student notebook's first cell loads) on the solution, then on each
planted answer defined over the solution. It writes `{name: {question: [outcome, ...]}}` to OUT.json,
the solution's outcome first; an outcome is `{"passed": bool, "text": what the learner sees}`.
"""

import json
import sys
from pathlib import Path

import nbformat
import torch

from book.exercise import Grader

torch.set_num_threads(1)


def solved_namespace(path):
    """The namespace of a solved notebook, run cell by cell (its otter cells left out)."""
    env = {"__name__": "__main__"}
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and "otter" not in cell.source and "grader" not in cell.source:
            exec(compile(cell.source, str(path), "exec"), env)
    return env


def outcome(grader, question, env):
    try:
        fb = grader.check(question, env)
    except Exception as err:  # the check itself broke: the test reports it
        return {"passed": False, "text": f"the check raised {type(err).__name__}: {err}", "raised": True}
    return {"passed": fb.passed, "text": repr(fb)}


def main(spec, out):
    results = {}
    for job in json.loads(Path(spec).read_text()):
        env = solved_namespace(job["solution"])
        student = Path(job["student"])
        per_question = {}
        for question, answers in job["answers"].items():
            runs = [outcome(Grader(job["name"], student), question, dict(env))]
            for source in answers:
                planted = dict(env)
                exec(compile(source, f"planted {question}", "exec"), planted)
                runs.append(outcome(Grader(job["name"], student), question, planted))
            per_question[question] = runs
        results[job["name"]] = per_question
    Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])
