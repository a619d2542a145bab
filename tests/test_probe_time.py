"""A question whose answer is too slow on one hidden input costs that question, not the submission.

tools/grading/grade_runner.py stops a call that has not returned within its share of the time limit
(`--probe-seconds`, a quarter of `--timeout` in tools/grading/grade.py) and records `{"too_slow": S}` for it and
for the question's later calls, which it does not make; the grader then marks that question `too-slow`, with a
reason that says so, and judges the other questions as usual. A learner's slow but correct loop once cost a whole
notebook its points (the batch's 120 s ran out inside question 1).
"""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from tools.grading import grade, judge

RUNNER = Path(grade.__file__).resolve().parent / "grade_runner.py"

NOTEBOOK = """
import time

def count(n):
    total = 0
    for k in range(n):  # a loop where a formula would do: hopeless for a billion
        total += k
    return total

def add(a, b):
    return a + b

def spin():
    while True:
        try:
            time.sleep(0.01)
        except KeyboardInterrupt:  # a learner's habit: not the runner's timer
            pass
"""
PROBES = """
PROBES = [
    ("q1", "count", (10,), None),
    ("q1", "count", (10**10,), None),
    ("q1", "count", (10**11,), None),
    ("q2", "add", (2, 3), None),
    ("q3", "spin", (), None),
]
"""


def _run(tmp_path, seconds):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(NOTEBOOK)])
    nbformat.write(nb, tmp_path / "submission.ipynb")
    (tmp_path / "probes.py").write_text(PROBES)
    argv = [sys.executable, "-I", str(RUNNER), str(tmp_path / "submission.ipynb"), str(tmp_path / "probes.py")]
    run = subprocess.run(argv + ["--probe-seconds", str(seconds)], capture_output=True, text=True, timeout=60)
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_a_slow_call_is_stopped_and_the_next_questions_still_answer(tmp_path):
    records = _run(tmp_path, 0.5)
    answers = {r["probe"]: r["answer"] for r in records if "probe" in r}
    assert answers[0] == {"int": 45}
    assert answers[1] == answers[2] == {"too_slow": 0.5}  # the third call is not made: no second wait
    assert answers[3] == {"int": 5}
    assert answers[4] == {"too_slow": 0.5}  # an endless loop that catches KeyboardInterrupt is stopped too
    assert records[-1] == {"done": True}


def test_the_grader_marks_only_the_slow_question_and_says_why():
    exercise = grade.Exercise(
        "x", ["q1", "q2"], "PROBES = [('q1', 'count', (5,), None), ('q2', 'add', (2,), None)]", {}, b""
    )
    reference = grade.Reference(answers=[10, 5], args=[(5,), (2,)])
    questions_of = grade.probe_functions(exercise, reference)
    run = grade.Run(answers={0: {"too_slow": 30}, 1: {"int": 5}}, finished=True)
    verdicts = grade.judge_run(exercise, reference, questions_of, run)
    assert verdicts["q1"].kind == "too-slow" and verdicts["q1"].score == 0
    assert "did not return within 30 s on one hidden input" in verdicts["q1"].why
    assert verdicts["q2"].score == 1 and verdicts["q2"].kind is None


@pytest.mark.parametrize(
    "forged", [{"too_slow": "30"}, {"too_slow": 30, "int": 1}, {"too_slow": -1}, {"too_slow": True}]
)
def test_only_the_runners_own_record_counts_as_too_slow(forged):
    assert not judge.is_too_slow(forged)
    assert judge.is_too_slow({"too_slow": 7.5})


def test_a_submission_gets_a_share_of_the_time_limit_a_call():
    assert grade.PROBE_SHARE > 1 and grade.TIMEOUT / grade.PROBE_SHARE >= 10  # an honest call takes well under 1 s


def test_an_answer_of_a_type_the_channel_cannot_carry_costs_its_question_only(tmp_path):
    """A learner's answer in np.longdouble (float128 here) once ended the grading run (exit status 1: its items
    are NumPy scalars, which JSON cannot write), and the notebook lost every question, the right ones too. Such
    an answer is now "another type", judged wrong on its own question, and the later probes still answer."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import numpy as np\n"
                "def weights(n):\n    return np.ones(n, dtype=np.longdouble) / n\n"
                "def share(n):\n    return np.longdouble(1) / n\n"
                "def add(a, b):\n    return a + b\n"
            )
        ]
    )
    nbformat.write(nb, tmp_path / "submission.ipynb")
    (tmp_path / "probes.py").write_text(
        "PROBES = [('q1', 'weights', (4,), None), ('q2', 'share', (4,), None), ('q3', 'add', (2, 3), None)]\n"
    )
    argv = [sys.executable, "-I", str(RUNNER), str(tmp_path / "submission.ipynb"), str(tmp_path / "probes.py")]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    records = [json.loads(line) for line in run.stdout.splitlines()]
    answers = {r["probe"]: r["answer"] for r in records if "probe" in r}
    assert run.returncode == 0 and records[-1] == {"done": True}, run.stderr[-500:]
    if np.dtype(np.longdouble).itemsize > 8:  # x86: float128 (on ARM macOS longdouble is float64, carried as is)
        assert answers[0] == {"other": f"numpy.ndarray of {np.dtype(np.longdouble).name}"}
        assert answers[1] == {"other": "numpy.longdouble"}
        assert all(isinstance(judge.decode(answers[k]), judge.Other) for k in (0, 1))
    assert answers[2] == {"int": 5}
