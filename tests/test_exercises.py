"""The exercises teach and grade correctly, and the student copies are what solutions/ says they are.

One session regenerates every exercise from `solutions/` into a temporary folder
(`tools/exercises/make_exercises.py --into`, the code behind `make exercises`); the regenerated files must
equal the committed ones, byte for byte. Then, for each exercise, the grader's own runner
(`tools/grading/grade_runner.py`) runs the solution, the untouched student notebook and two
notebooks of planted wrong answers on the hidden inputs, and the grader's own judge
(`tools.grading.grade.judge_run`) scores them: the solution gets full marks, the student copy 0,
each planted wrong answer 0 on its question. These notebooks are ours, so they run
without the sandbox (`tools/grading/run_variants.py` imports torch once and forks one child per
notebook); the sandbox and the batch are tested with hostile notebooks by
`tests/test_grading_attacks.py`.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools.exercises import make_exercises
from tools.exercises.master import read_master
from tools.grading import grade, release

# EX=02_causal_mask,04_kv_cache (the Makefile's name) limits the run to those exercises while an author works on
# them; tests about one other exercise then skip. `make test` sets no EX and runs them all.
ONLY = [n for n in os.environ.get("EX", "").split(",") if n]
NAMES = ONLY or make_exercises.exercise_names()


def _need(*names):
    missing = [n for n in names if n not in NAMES]
    if missing:
        pytest.skip(f"EX={','.join(NAMES)} leaves out {', '.join(missing)}")


RUN_TIMEOUT = 120  # seconds for one notebook's run in tools/grading/run_variants.py (a solved one takes about a second)


# Planted wrong answers, two or more per question, written in the `# WRONG` cells of each master (see
# CONTRIBUTING.md): each fails the hidden tests, and each not marked `hardcoded` fails the public checks
# (`grader.check`) too, with a hint that names its mistake.
WRONG = {name: make_exercises.planted_answers(name) for name in NAMES}


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory):
    """Every exercise rebuilt from solutions/ into a temporary folder (exercises/, autograder/), by the code behind
    `make exercises`, in one process; otter's own run of the public tests is skipped (the runs below grade the
    solutions on the hidden inputs, which needs them to work)."""
    root = tmp_path_factory.mktemp("regenerated")
    run = subprocess.run(
        [sys.executable, "-m", "tools.exercises.make_exercises", "--into", str(root), *ONLY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return root


def _with_cells(nb, sources):
    """A copy of `nb` with code cells appended (appended definitions replace the earlier ones)."""
    nb = copy.deepcopy(nb)
    nb.cells.extend(nbformat.v4.new_code_cell(s) for s in sources)
    return nb


def _questions_only(nb):
    """`nb` without what follows its last `grader.check` cell: the capstone's closing cell trains a model of
    200 steps for the learner to read (4 of the 7.5 CPU seconds of each of its runs), which no question
    grades. For the notebooks made here to test answers (planted, honest, recipe); the solution, its reference
    run and the blank copy are graded whole."""
    checks = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith("grader.check(")]
    nb = copy.deepcopy(nb)
    if checks:
        del nb.cells[checks[-1] + 1 :]
    return nb


def _solution_notebook(zip_path):
    with zipfile.ZipFile(zip_path) as z:
        return nbformat.reads(z.read("grading/solution.ipynb").decode(), as_version=4)


def _variants(name, root):
    """Write the notebooks run for one exercise: the solution (as the reference, then as a submission), the
    student copy and the planted wrong answers. Returns (exercise, {kind: run job})."""
    zip_path = root / "autograder" / f"{name}.zip"
    exercise = grade.load_exercise(zip_path)
    folder = root / "variants" / name
    folder.mkdir(parents=True)
    solved = _solution_notebook(zip_path)
    notebooks = {
        "reference": solved,
        "solved": solved,
        "blank": nbformat.read(root / "exercises" / f"{name}.ipynb", as_version=4),
    }
    for k in range(max((len(v) for v in WRONG.get(name, {}).values()), default=0)):
        answers = [v[k].source for v in WRONG[name].values() if k < len(v)]
        notebooks[f"wrong{k}"] = _with_cells(_questions_only(solved), answers)
    (folder / "probes.py").write_text(exercise.probes)
    jobs = {}
    for kind, nb in notebooks.items():
        nbformat.write(nb, folder / f"{kind}.ipynb")
        jobs[kind] = {
            "probes": str(folder / "probes.py"),
            "notebook": str(folder / f"{kind}.ipynb"),
            "out": str(folder / f"{kind}.out"),
            "with_args": kind == "reference",
        }
    return exercise, jobs


@pytest.fixture(scope="session")
def graded(regenerated):
    """{name: the reference and the verdicts of every variant}; every run forked from one process that imported
    torch once (tools/grading/run_variants.py), two at a time."""
    variants = {name: _variants(name, regenerated) for name in NAMES}
    spec = regenerated / "variants" / "jobs.json"
    spec.write_text(json.dumps([job for _, jobs in variants.values() for job in jobs.values()]))
    subprocess.run(
        [sys.executable, "-m", "tools.grading.run_variants", str(spec)], check=True, cwd=ROOT, timeout=RUN_TIMEOUT * 10
    )
    out = {}
    for name, (exercise, jobs) in variants.items():
        runs = {kind: grade._read_output(Path(job["out"])) for kind, job in jobs.items()}
        reference = grade.reference_from_run(exercise, runs.pop("reference"))
        questions_of = grade.probe_functions(exercise, reference)
        out[name] = {
            "exercise": exercise,
            "reference": reference,
            "questions_of": questions_of,
            **{
                kind: {"run": run, "verdicts": grade.judge_run(exercise, reference, questions_of, run)}
                for kind, run in runs.items()
            },
        }
    return out


def test_there_are_exercises():
    names = make_exercises.exercise_names()
    assert names, "no masters in solutions/"
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == names, "exercises/ and solutions/ differ"
    assert sorted(p.stem for p in (ROOT / "autograder").glob("*.zip")) == names, "autograder/ and solutions/ differ"
    assert set(NAMES) <= set(names), f"EX names exercises with no master: {sorted(set(NAMES) - set(names))}"


@pytest.mark.parametrize("name", NAMES)
def test_no_drift_from_solutions(regenerated, name):
    for folder, suffix in [("exercises", "ipynb"), ("autograder", "zip")]:
        fresh, committed = regenerated / folder / f"{name}.{suffix}", ROOT / folder / f"{name}.{suffix}"
        assert fresh.read_bytes() == committed.read_bytes(), (
            f"{folder}/{name}.{suffix} is not what solutions/{name}.md gives: run `make exercises EX={name}`"
        )


def _questions(name):
    """{question: (prompt, function name, its parameters)} of one master."""
    master = read_master(ROOT / "solutions" / f"{name}.md")
    return {q.name: (q.prompt, q.function, q.parameters) for q in master.questions.values()}


@pytest.mark.parametrize("name", NAMES)
def test_each_exercise_has_a_build_it_and_check_it_question(name):
    questions = _questions(name)
    built = [q for q, (prompt, _, _) in questions.items() if "(build it and check it)" in prompt]
    assert built, f"solutions/{name}.md: no question marked (build it and check it)"
    uses_torch = "import torch" in (ROOT / "solutions" / f"{name}.md").read_text()
    chapter = next((ROOT / "chapters").glob(f"{name[:2]}_*.md"), None)
    # the recap quiz runs one block of the tiny model to show a property (Q7); its exercise recaps the counts
    counts_only = {"09_recap_quiz"}
    if (
        chapter
        and name not in counts_only
        and ("book.tiny" in chapter.read_text() or "import torch" in chapter.read_text())
    ):
        assert uses_torch, f"{name}: its chapter uses torch, so its build-it question should too"


@pytest.mark.parametrize("name", NAMES)
def test_no_parameter_shadows_a_question_function(name):
    """Exercise 4 had a parameter named like another question's function (kv_bytes_per_token)."""
    questions = _questions(name)
    functions = {fn for _, fn, _ in questions.values()}
    for q, (_, fn, params) in questions.items():
        clash = functions & set(params)
        assert not clash, f"{name} {q}: parameter {sorted(clash)} of {fn} hides the function of another question"


def test_top_p_question_is_named_for_what_it_returns():
    """Chapter 5's `top_p_keep` returns ids; the exercise turns the cut around and returns a top_p (it asked
    for `len(top_p_keep(...))` once, a copy of the chapter's cell)."""
    functions = {fn for _, fn, _ in _questions("05_sampling").values()}
    assert "top_p_keep" not in functions and "top_p_count" not in functions and "largest_top_p" in functions


def test_float32_training_has_no_full_precision_copy(graded):
    """Chapter 3 says the full-precision copy vanishes when a model already trains in float32."""
    _need("03_teacher_forcing")
    g = graded["03_teacher_forcing"]
    asked = [
        (args, answer)
        for probe, args, answer in zip(g["questions_of"], g["reference"].args, g["reference"].answers)
        if probe.question == "q4"
    ]
    float32 = [answer["copy"] for args, answer in asked if args[1] == 4]
    half = [(answer["copy"], args[0]) for args, answer in asked if args[1] == 2]
    assert float32 and half, "the hidden inputs of q4 should hold a float32 and a half-precision model"
    assert all(copy == 0 for copy in float32), "a float32 model trains without a full-precision copy"
    assert all(copy == 4 * n for copy, n in half), "a half-precision model keeps a float32 copy: 4 bytes a parameter"


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks(graded, name):
    verdicts = graded[name]["solved"]["verdicts"]
    assert verdicts, f"{name}: no question graded"
    lost = {q: reason for q, (score, reason) in verdicts.items() if score != 1.0}
    assert not lost, f"{name}: the solution loses {lost}"


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_scores_zero(graded, name):
    run = graded[name]["blank"]["run"]
    assert run.finished, f"{name}: the student notebook did not run to the end ({run.crashed})"
    verdicts = graded[name]["blank"]["verdicts"]
    assert {q: score for q, (score, _) in verdicts.items()} == {q: 0.0 for q in verdicts}


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_holds_no_solution_and_no_hidden_test(name):
    """Statement by statement, however the code is wrapped: no solution and no hidden probe or check (a
    statement the chapters or `book/` show in the open, `torch.Generator().manual_seed(seed)`, is no secret)."""
    student = release.file_text(ROOT / "exercises" / f"{name}.ipynb")
    solution, hidden = release.master_secrets(ROOT / "solutions" / f"{name}.md")
    assert solution and hidden, f"solutions/{name}.md: no solution or no hidden probe found"
    public = release.public_text()
    solution, hidden = {s for s in solution if s not in public}, {s for s in hidden if s not in public}
    leaked = sorted(s for s in solution if s in student)
    assert not leaked, f"exercises/{name}.ipynb contains solution code: {leaked[:3]}"
    leaked = sorted(s for s in hidden if s in student)
    assert not leaked, f"exercises/{name}.ipynb contains hidden probes or checks: {leaked[:3]}"


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_planted_wrong_answers(name):
    questions = grade.question_names(ROOT / "autograder" / f"{name}.zip")
    assert sorted(WRONG.get(name, {}), key=lambda q: (len(q), q)) == questions, (
        f"solutions/{name}.md: every question needs a # WRONG cell in its hidden block (CONTRIBUTING.md)"
    )
    few = [q for q, answers in WRONG[name].items() if len(answers) < 2]
    assert not few, f"solutions/{name}.md: plant at least two wrong answers for {few} (CONTRIBUTING.md)"


@pytest.mark.parametrize("name", NAMES)
def test_planted_wrong_answers_fail_the_hidden_tests(graded, name):
    for q, answers in WRONG[name].items():
        for k, answer in enumerate(answers):
            score, reason = graded[name][f"wrong{k}"]["verdicts"][q]
            assert score == 0, f"{name} {q}: planted wrong answer {k} scored {score}:\n{answer.source}"
            assert reason and "Traceback" not in reason and len(reason) < 300, reason


@pytest.fixture(scope="session")
def public_checks(regenerated):
    """{name: {question: [outcome of the solution, then of each planted answer]}}: the learner's own
    `grader.check` (book/exercise.py, loaded by the student notebook's first cell) run on each."""
    spec = [
        {
            "name": name,
            "student": str(regenerated / "exercises" / f"{name}.ipynb"),
            "solution": str(regenerated / "variants" / name / "solved.ipynb")
            if (regenerated / "variants" / name / "solved.ipynb").exists()
            else None,
            "answers": {q: [a.source for a in answers] for q, answers in WRONG[name].items()},
        }
        for name in NAMES
    ]
    folder = regenerated / "public"
    folder.mkdir(exist_ok=True)
    for job in spec:
        if job["solution"] is None:
            path = folder / f"{job['name']}.solved.ipynb"
            nbformat.write(_solution_notebook(regenerated / "autograder" / f"{job['name']}.zip"), path)
            job["solution"] = str(path)
    return _run_public_checks(spec, folder)


def _run_public_checks(spec, folder):
    """The learner's own `grader.check` on each answer of `spec` (tools/grading/run_public_checks.py), in `folder`."""
    (folder / "spec.json").write_text(json.dumps(spec))
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "grading" / "run_public_checks.py"),
            str(folder / "spec.json"),
            str(folder / "out.json"),
        ],
        check=True,
        timeout=RUN_TIMEOUT * 10,
        cwd=folder,
    )
    return json.loads((folder / "out.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_planted_wrong_answers_fail_the_public_checks(public_checks, name):
    """`grader.check` once said "All test cases passed!" to answers that do not do the task (ex. 2 q6
    `return x @ w_v`, ex. 6 q6 `list(prompt) + [0] * n_new`). Every planted answer that does not type in
    the public values must fail the learner's own check, with a hint in a few clear lines."""
    problems = []
    for q, (solution, *planted) in public_checks[name].items():
        if not solution["passed"]:
            problems.append(f"{q}: the solution fails its public checks:\n{solution['text']}")
        for k, (answer, run) in enumerate(zip(WRONG[name][q], planted)):
            text = run["text"]
            if run.get("raised") or "Traceback" in text or "Trying:" in text:
                problems.append(f"{q}: the check of planted answer {k} shows a trace:\n{text}")
            if answer.hardcoded:
                continue
            if run["passed"]:
                problems.append(f"{q}: grader.check passes planted answer {k}:\n{answer.source}")
            elif answer.hint and answer.hint.lower() not in text.lower():
                problems.append(
                    f"{q}: the hint for planted answer {k} does not name its mistake ({answer.hint!r}):\n{text}"
                )
            elif len(text.splitlines()) < 2:
                problems.append(f"{q}: planted answer {k} fails with no hint:\n{text}")
    assert not problems, f"{name}:\n" + "\n\n".join(problems)


def _run_first_cell(folder, notebook):
    """Run a student notebook's first cell (the one that loads the checks) in `folder`, as its kernel would."""
    import os

    nb = nbformat.read(notebook, as_version=4)
    env = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(nb.cells[0].source, str(notebook), "exec"), env)
    finally:
        os.chdir(here)
    return env


def test_a_renamed_notebook_still_finds_its_checks(tmp_path, monkeypatch):
    """A browser saves a second download as `02_causal_mask (1).ipynb`; otter's first cell then raised
    FileNotFoundError and every check said `NameError: name 'grader' is not defined`. The course's first cell
    finds the notebook whatever it is called, also beside the other exercises."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    for other in ("01_next_token_prediction", "05_sampling"):
        (tmp_path / f"{other}.ipynb").write_bytes((ROOT / "exercises" / f"{other}.ipynb").read_bytes())
    renamed = tmp_path / "02_causal_mask (1).ipynb"
    renamed.write_bytes((ROOT / "exercises" / "02_causal_mask.ipynb").read_bytes())
    env = _run_first_cell(tmp_path, renamed)
    exec("import numpy as np\ndef causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=bool))", env)
    assert env["grader"].check("q1", env).passed
    assert "mask" not in env, "the check's own variables leaked into the learner's namespace"
    exec("def causal_mask(n):\n    return np.triu(np.ones((n, n), dtype=bool))", env)
    assert not env["grader"].check("q1", env).passed


def test_hints_come_in_steps_without_a_trace(tmp_path, monkeypatch):
    """The first failure of a check names the kind of mistake, the second adds a leading question, the
    third the recipe; never doctest's "Trying: ... Expecting nothing"; a function that raises is named in one
    line."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    student = ROOT / "exercises" / "02_causal_mask.ipynb"
    hints = nbformat.read(student, as_version=4).metadata["course_hints"]["q2"][1]
    env = _run_first_cell(student.parent, student)
    exec("def allowed_pairs(n):\n    return n * n // 2", env)
    shown = [repr(env["grader"].check("q2", env)) for _ in range(3)]
    ask, recipe = (" ".join(h.split()) for h in hints)
    assert [ask in s for s in shown] == [False, True, True], shown
    assert [recipe in s for s in shown] == [False, False, True], shown
    assert all("Trying:" not in s and "Traceback" not in s and "The line that failed: assert" in s for s in shown)
    exec("def allowed_pairs(n):\n    return 1 / 0", env)
    raised = repr(env["grader"].check("q2", env))
    assert "Your code raised ZeroDivisionError: division by zero" in raised and "Traceback" not in raised, raised
    exec("def allowed_pairs(n):\n    return n * (n + 1) // 2", env)
    assert env["grader"].check("q2", env).passed


def test_an_answer_that_raises_is_not_told_it_returns_none(tmp_path, monkeypatch):
    """A learner's answers that raised TypeError were told "Your code raised TypeError" and then "Not answered
    yet: ... returns None, as the blank cell's does": the second line, the first check's message for a blank
    answer, is false of code that raised, and is left out (a blank answer still gets it)."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    student = ROOT / "exercises" / "06_context_window.ipynb"
    env = _run_first_cell(student.parent, student)
    exec("def dropped_tokens(conversation, window):\n    return None", env)
    blank = repr(env["grader"].check("q1", env))
    assert "Not answered yet" in blank, blank
    exec("def dropped_tokens(conversation, window):\n    return conversation + None", env)
    raised = repr(env["grader"].check("q1", env))
    assert "Your code raised TypeError" in raised and "Not answered yet" not in raised, raised


def test_a_changed_answer_starts_the_hints_again(tmp_path, monkeypatch):
    """The hint level counted failures, not answers: three different slips revealed the whole recipe. Re-running
    the same code climbs the steps; changing it (the function's code, not its name) starts them again."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    student = ROOT / "exercises" / "02_causal_mask.ipynb"
    ask, recipe = (" ".join(h.split()) for h in nbformat.read(student, as_version=4).metadata["course_hints"]["q2"][1])
    env = _run_first_cell(student.parent, student)
    shown = []
    for slip in ("n * n // 2", "n * n // 2", "n * (n - 1) // 2", "n * (n - 1) // 2", "n * (n - 1) // 2"):
        exec(f"def allowed_pairs(n):\n    return {slip}", env)
        shown.append(repr(env["grader"].check("q2", env)))
    assert [ask in s for s in shown] == [False, True, False, True, True], shown
    assert [recipe in s for s in shown] == [False, False, False, False, True], shown


def test_a_notebook_without_its_tests_says_so(tmp_path, monkeypatch, capsys):
    """A notebook moved away from its metadata (or run by the grader's sandbox, whose otter is a stand-in) still
    runs its first cell without an error; a check then says why it cannot run."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    lost = tmp_path / "copy.ipynb"
    nb = nbformat.read(ROOT / "exercises" / "02_causal_mask.ipynb", as_version=4)
    nb.metadata = {}
    nbformat.write(nb, lost)
    env = _run_first_cell(tmp_path, lost)
    assert "were not found" in capsys.readouterr().out
    feedback = env["grader"].check("q1", env)
    assert not feedback.passed and "were not found" in repr(feedback)


def _scalars(value):
    """The numbers of a probe's arguments that would identify it if a reason printed them."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, (int, float)):
        return {repr(value), f"{value:g}"} if abs(value) >= 100 or value != int(value) else set()
    if isinstance(value, (list, tuple)):
        return set().union(*map(_scalars, value)) if value else set()
    return set()


@pytest.mark.parametrize("name", NAMES)
def test_hidden_reasons_do_not_print_the_hidden_inputs(graded, name):
    """A reason says what failed, never the input that broke it (ex. 5 q6 printed
    top_p and the temperature, ex. 9 q6 the memory). Every planted answer's reason is searched for the numbers of
    its question's hidden arguments."""
    g = graded[name]
    for k in range(max(len(v) for v in WRONG[name].values())):
        for q, (_score, reason) in g[f"wrong{k}"]["verdicts"].items():
            numbers = set().union(
                *(
                    _scalars(list(args))
                    for probe, args in zip(g["questions_of"], g["reference"].args)
                    if probe.question == q
                )
            )
            shown = sorted(n for n in numbers if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", reason or ""))
            assert not shown, f"{name} {q}: the reason shows hidden inputs {shown}: {reason}"


def test_feedback_writes_each_learner_only_their_own_row(tmp_path, graded):
    """`make feedback` (tools/grading/feedback.py) writes one file per submission of the results file beside the CSV:
    that submission's scores and reasons, none of another's, and nothing but the learner's (an instructor's
    field stays out), under a safe file name whatever the submission was called."""
    from tools.grading import feedback

    _need("02_causal_mask")
    g = graded["02_causal_mask"]
    rows = []
    for submission, kind in [("alice.ipynb", "solved"), ("../bob.ipynb", "wrong1"), ("=cmd|x.ipynb", "wrong2")]:
        row = grade.empty_row(g["exercise"], submission)
        row["verdicts"] = g[kind]["verdicts"]
        rows.append(grade.settle(row))
    data = grade.results_data(g["exercise"], rows)
    data["submissions"][0]["instructor_only"] = "SECRET hidden inputs"
    path = tmp_path / "grades.csv"
    grade.results_path(path).write_text(json.dumps(data))
    written = feedback.write_feedback(path, tmp_path / "out")
    names = sorted(p.name for p in written)
    # a plain name keeps its stem; another gets its cleaned stem and a hash after "~", never a folder
    assert "alice.md" in names and len(names) == 3 and all("/" not in n for n in names)
    bob = next(n for n in names if n.startswith("bob~"))
    assert any(n.startswith("cmd_x~") for n in names)
    assert all(p.parent == tmp_path / "out" for p in written)
    texts = {p.name: p.read_text() for p in written}
    texts["bob.md"] = texts[bob]
    assert all("SECRET" not in t for t in texts.values())
    assert "Score: 6 out of 6" in texts["alice.md"] and "Score: 0 out of 6" in texts["bob.md"]
    assert texts["alice.md"].startswith("# Feedback on 02\\_causal\\_mask: alice.ipynb")
    lost = [v for v in g["wrong1"]["verdicts"].values() if v.score == 0]
    # each lost point reaches the learner whole: the kind of input it broke on, if one did, and what failed
    shown = [feedback._md(f"on {v.on}: {v.why}" if v.on else v.why) for v in lost]
    assert lost and all(f"| {v.question} | 0 | {s} |" in texts["bob.md"] for v, s in zip(lost, shown))
    assert any(v.on for v in lost), "no reason of this run names the kind of input"
    assert not any(v.why in texts["alice.md"] for v in lost)


def test_feedback_refuses_a_csv_without_its_results(tmp_path):
    """A CSV alone (an older run, or one copied without its results file) is refused with the fix."""
    (tmp_path / "grades.csv").write_text('"submission","q1"\n"a.ipynb",1.0\n')
    run = subprocess.run(
        [sys.executable, "-m", "tools.grading.feedback", str(tmp_path / "grades.csv"), str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert "grades.results.json not found" in run.stderr and "make grade" in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", NAMES)
def test_every_hidden_probe_says_what_kind_of_input_it_is(name):
    """Each probe carries a short description (`what=`, the 5th item of its PROBES entry), which
    the grader may show a learner in place of the input itself."""
    space = {"__name__": "probes"}
    exec(compile(grade.load_exercise(ROOT / "autograder" / f"{name}.zip").probes, "probes.py", "exec"), space)
    unlabelled = [
        (entry[0], entry[1])
        for entry in space["PROBES"]
        if len(entry) < 5 or not isinstance(entry[4], str) or not 3 <= len(entry[4]) <= 80
    ]
    assert space["PROBES"] and not unlabelled, f"{name}: probes without a `what=` label: {unlabelled}"


def _master(tmp_path, *cells):
    """A master of the given (kind, source) cells, written as Jupytext MyST."""
    import jupytext

    nb = nbformat.v4.new_notebook()
    new = {"raw": nbformat.v4.new_raw_cell, "code": nbformat.v4.new_code_cell, "md": nbformat.v4.new_markdown_cell}
    nb.cells = [new[kind](source) for kind, source in cells]
    path = tmp_path / "99_made_up.md"
    jupytext.write(nb, path, fmt="md:myst")
    return path


QUESTION = [
    ("raw", "# BEGIN QUESTION\nname: q1\nall_or_nothing: true"),
    ("md", "**Question 1.** Write `double(x)`."),
    ("raw", "# BEGIN SOLUTION"),
    ("code", "def double(x):\n    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION"),
    ("raw", "# END SOLUTION"),
    ("raw", "# BEGIN TESTS"),
    ("code", "assert double(2) == 4"),
    ("raw", "# END TESTS"),
    ("raw", "# END QUESTION"),
]


def test_the_master_reader_gives_each_cell_its_role(tmp_path):
    hidden = [("raw", "# BEGIN HIDDEN"), ("code", '# PROBES\nprobe("q1", "double", 3, what="an odd x")')]
    master = read_master(_master(tmp_path, *QUESTION, *hidden, ("raw", "# END HIDDEN"), ("md", "The end.")))
    q = master.question("q1")
    assert (q.function, q.parameters, q.solution) == ("double", ["x"], "def double(x):\n    return 2 * x")
    assert [c.role for c in q.cells] == [
        *["marker", "prompt", "marker", "solution", "marker", "marker", "test", "marker", "marker"],
        *["marker", "probes", "marker", "text"],
    ]
    assert [c.hidden for c in master.cells].count(True) == 1 and master.hidden_sources("probes")
    assert master.cells[3].solution_rows == {3}  # the row between the solution comments


@pytest.mark.parametrize(
    "cells, fault",
    [
        ([("raw", "# BEGIN HIDDEN"), ("code", "# PROBES")], "without # END HIDDEN"),
        ([("raw", "# BEGIN HIDDEN"), ("md", "a note"), ("raw", "# END HIDDEN")], "neither # PROBES"),
        ([("raw", "# END HIDDEN")], "outside a hidden block"),
        ([("raw", "# BEGIN QUESTION\nall_or_nothing: true")], "without `name: qN`"),
        ([*QUESTION, *QUESTION], "two questions named q1"),
    ],
)
def test_a_malformed_master_is_refused_by_name(tmp_path, cells, fault):
    from tools.exercises.master import MasterError

    with pytest.raises(MasterError, match=re.escape(fault)) as raised:
        read_master(_master(tmp_path, *cells))
    assert "solutions/99_made_up.md" in str(raised.value)


# Issue 35: the hidden inputs are drawn afresh for each grading run from a seed the grader keeps (probes.py's
# `SEED = 0` line, replaced by tools/grade.py's `with_seed`), so inputs one run leaked are worth nothing in the
# next. Every question of every exercise draws some of its inputs with `fresh()`/`fresh_float()`. Two seeds:
# each grades every exercise's reference, honest answers and recipes again (a third cost ~10 s of the suite).
FRESH_SEEDS = (1, 2)

# Honest answers written another way than the masters' (another formula, another library call), which must
# score full marks on every run's fresh inputs, as the solution does: a fresh input must never need the
# solution's own rounding.
HONEST = {
    "02_causal_mask": [
        "def allowed_pairs(n):\n    return math.comb(n + 1, 2)",
        "def causal_mask(n):\n    return np.arange(n)[:, None] >= np.arange(n)[None, :]",
        # a NumPy float64, which is a float (a learner's such answer once scored 0)
        "def allowed_share(n):\n    return np.float64(0.5) + 0.5 / n",
        "def masked_weights(scores):\n"
        "    s = torch.tensor(scores, dtype=torch.float64)\n"
        "    allowed = torch.ones(len(s), len(s), dtype=torch.bool).tril()\n"
        "    return torch.softmax(s.masked_fill(~allowed, float('-inf')), dim=-1).numpy()",
        # a closed form, with no max subtracted: at the last position it returns 0 at once (else 0 / 0 when
        # every e**score underflows)
        "def zero_leak(row, position):\n"
        "    later = len(row) - position - 1\n"
        "    if later == 0:\n"
        "        return 0.0\n"
        "    return later / (sum(math.exp(v) for v in row[: position + 1]) + later)",
        # PyTorch's own causal attention, which q6 tells learners to compare against: its scaling rounds
        # otherwise than the master's, so no probe may turn on the last digits of the scores
        "def causal_attention(x, w_q, w_k, w_v):\n"
        "    from torch.nn import functional as F\n"
        "    return F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, is_causal=True)",
    ],
    "04_kv_cache": [
        "def positions_without_cache(prompt, n_new, window):\n"
        "    full = max(0, n_new - (window - prompt))\n"
        "    return math.comb(prompt + n_new - full, 2) - math.comb(prompt, 2) + full * window",
        "def kv_bytes_per_token(n_layers, n_heads, n_kv_heads, d_head, bits_per_number):\n"
        "    return (2 * n_layers * n_kv_heads * d_head * bits_per_number) // 8",
        "def conversations_that_fit(memory_bytes, weight_bytes, bytes_per_token, context):\n"
        "    free = memory_bytes - weight_bytes\n"
        "    return free // (bytes_per_token * context) if free > 0 else 0",
        # q2, a learner's ceiling (learner14): the sizes always make whole bytes, so rounding up is exact too
        "def kv_bytes_per_token(n_layers, n_heads, n_kv_heads, d_head, bits_per_number):\n"
        "    return -(-2 * n_layers * n_kv_heads * d_head * bits_per_number // 8)",
        # q5, a learner's: one token at a time, stacked (the question says n >= 1, so no probe feeds an empty chunk)
        "def attention_chunk(x_new, k_cache, v_cache, w_q, w_k, w_v):\n"
        "    k_all = torch.cat([k_cache, x_new @ w_k])\n"
        "    v_all = torch.cat([v_cache, x_new @ w_v])\n"
        "    t = k_cache.shape[0]\n"
        "    outs = []\n"
        "    for i, x in enumerate(x_new):\n"
        "        s = k_all[: t + i + 1] @ (x @ w_q) / math.sqrt(w_q.shape[1])\n"
        "        outs.append(torch.softmax(s, dim=0) @ v_all[: t + i + 1])\n"
        "    return torch.stack(outs), k_all, v_all",
    ],
    "05_sampling": [
        # q3 under the question's own rule: a total within 1e-9 of top_p reaches it, so the literal largest
        # top_p is the total of the k likeliest plus 1e-9 (a learner's); the question counts it right
        "def largest_top_p(chances, k):\n"
        "    p = np.sort(np.asarray(chances, dtype=np.float64))[::-1]\n"
        "    if k >= len(p):\n"
        "        return 1.0\n"
        "    return float(min(np.cumsum(p)[k - 1] + 1e-9, 1.0))",
        # q6 with the global generator seeded, then restored: the same draws as the question's own generator
        # and the global state left as it was, so the question's observable contract is met (learner11)
        "def sample_ids(logits, temperature, top_p, n, seed):\n"
        "    if temperature == 0:\n"
        "        return torch.full((n,), int(torch.argmax(logits)), dtype=torch.int64)\n"
        "    chances = torch.softmax(logits / temperature, dim=-1)\n"
        "    values, order = torch.sort(chances, descending=True, stable=True)\n"
        "    keep = order[(torch.cumsum(values, 0) - values) < top_p - 1e-9]\n"
        "    cut = torch.zeros_like(chances)\n"
        "    cut[keep] = chances[keep]\n"
        "    state = torch.get_rng_state()\n"
        "    torch.manual_seed(seed)\n"
        "    out = torch.distributions.Categorical(probs=cut).sample((n,))\n"
        "    torch.set_rng_state(state)\n"
        "    return out",
    ],
    "06_context_window": [
        "def batch_for_rate(weight_bytes, cache_bytes, bandwidth, target):\n"
        "    from fractions import Fraction\n"
        "    t = Fraction(target)\n"
        "    if t * weight_bytes == 0 and t * cache_bytes <= bandwidth:\n"
        "        return 1\n"
        "    if t * cache_bytes >= bandwidth:\n"
        "        return None\n"
        "    need = t * weight_bytes / (Fraction(bandwidth) - t * cache_bytes)\n"
        "    batch = max(1, int(need))\n"
        "    return batch if batch >= need else batch + 1",
        # q6, a learner's: model.eval() first (every model, public and hidden, is an nn.Module)
        "def generate_in_window(model, prompt, n_new, window):\n"
        "    ids = [*prompt]\n"
        "    model.eval()\n"
        "    for _ in range(n_new):\n"
        "        x = torch.tensor(ids[-window:]).unsqueeze(0)\n"
        "        ids.append(model(x)[:, -1, :].argmax(dim=-1).item())\n"
        "    return ids",
    ],
    "08_using_pytorch": [
        "def top_p_count(raw, top_p):\n"
        "    ranked = torch.sort(torch.softmax(raw, dim=-1), descending=True).values\n"
        "    before = ranked.cumsum(0) - ranked\n"
        "    return int((before < top_p).sum())",
    ],
}


# Answers written by following, literally and in turn, the recipes (the third hint) of every public check of a
# question (issue 37: "no recipe is wrong; test each recipe by following it"). Each must pass the learner's own
# grader.check and score full marks on every seed's hidden inputs. The questions whose checks were split one
# property per check with their own recipes (exercise 9) and the variants of ex. 4 q1 and ex. 5 q3; exercises 1,
# 3 and 8 and ex. 11 q3 (the second learner pass's list). Ex. 1 q5's recipe added top, of shape (B, T, 1), to a
# sum of shape (B, T): followed literally it gave (B, T, T), and now says top.squeeze(-1).
RECIPES = {
    "01_next_token_prediction": {
        # q1: -np.log of the chances picked, chances[np.arange(len(target_ids)), target_ids], on np.asarray(chances)
        "q1": "def position_losses(chances, target_ids):\n"
        "    chances = np.asarray(chances)\n"
        "    return -np.log(chances[np.arange(len(target_ids)), target_ids])",
        # q2: float(...); softmax(logits), pick each position's right word, -np.log, then .mean()
        "q2": "def sentence_loss(logits, target_ids):\n"
        "    chances = softmax(logits)\n"
        "    return float((-np.log(chances[np.arange(len(target_ids)), target_ids])).mean())",
        # q3: int(...); the argmax of each row compared with the right word, the matches counted
        "q3": "def favourite_hits(chances, target_ids):\n"
        "    return int((np.argmax(chances, axis=1) == np.asarray(target_ids)).sum())",
        # q4: // for whole sentences; (n_tokens // sentence_tokens, n_tokens)
        "q4": "def signal_counts(n_tokens, sentence_tokens):\n    return (n_tokens // sentence_tokens, n_tokens)",
        # q5: dim=-1 and gather; top.squeeze(-1) plus the log of exp(logits - top) summed over dim=-1, minus
        # logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        "q5": "def losses_by_hand(logits, targets):\n"
        "    top = logits.max(dim=-1, keepdim=True).values\n"
        "    log_total = top.squeeze(-1) + torch.log(torch.exp(logits - top).sum(dim=-1))\n"
        "    return log_total - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)",
    },
    "03_teacher_forcing": {
        # q1: per_token ** n_tokens
        "q1": "def answer_accuracy(per_token, n_tokens):\n    return per_token ** n_tokens",
        # q2: an int counted up from 0 while per_token ** (n + 1) >= target
        "q2": "def longest_answer(per_token, target):\n"
        "    n = 0\n"
        "    while per_token ** (n + 1) >= target:\n"
        "        n += 1\n"
        "    return n",
        # q3: the last recipe's formula, as it is spelt
        "q3": "def n_parameters(n_layers, d_model, n_heads, d_head, d_ff, vocab):\n"
        "    return vocab * d_model + n_layers * (4 * d_model * n_heads * d_head + 2 * d_model * d_ff + 2 * d_model)"
        " + d_model",
        # q4: each key by its recipe; the activations as an int
        "q4": "def training_memory(n_params, bytes_per_number, n_layers, d_model, batch, seq_len, saved_per_layer):\n"
        "    return {\n"
        "        'weights': n_params * bytes_per_number,\n"
        "        'gradients': n_params * bytes_per_number,\n"
        "        'optimiser': 2 * n_params * 4,\n"
        "        'copy': 4 * n_params if bytes_per_number < 4 else 0,\n"
        "        'activations': int(batch * seq_len * n_layers * saved_per_layer * d_model * bytes_per_number),\n"
        "    }",
        # q5: the step the question spells; then numel() * element_size() over model.parameters(), their .grad
        # and optimiser.state[p]['exp_avg'] and ['exp_avg_sq']
        "q5": "def step_bytes(model, ids):\n"
        "    from torch.nn import functional as F\n"
        "    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
        "    logits = model(ids[:, :-1])\n"
        "    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))\n"
        "    loss.backward()\n"
        "    optimiser.step()\n"
        "    params = list(model.parameters())\n"
        "    return {\n"
        "        'weights': sum(p.numel() * p.element_size() for p in params),\n"
        "        'gradients': sum(p.grad.numel() * p.grad.element_size() for p in params),\n"
        "        'optimiser': sum(\n"
        "            optimiser.state[p][k].numel() * optimiser.state[p][k].element_size()\n"
        "            for p in params\n"
        "            for k in ('exp_avg', 'exp_avg_sq')\n"
        "        ),\n"
        "    }",
    },
    "08_using_pytorch": {
        # q1: tokens[:, :-1] and tokens[:, 1:]
        "q1": "def inputs_and_targets(tokens):\n    return tokens[:, :-1], tokens[:, 1:]",
        # q2: float(F.cross_entropy(torch.zeros(n_positions, vocab), any n_positions ids below vocab))
        "q2": "def knows_nothing_loss(n_positions, vocab):\n"
        "    return float(F.cross_entropy(torch.zeros(n_positions, vocab), torch.zeros(n_positions, dtype=torch.long)))",
        # q3: torch.tril for the allowed pairs, masked_fill with minus infinity, softmax along the last dimension
        "q3": "def causal_weights(scores):\n"
        "    n = scores.shape[-1]\n"
        "    allowed = torch.ones(n, n, dtype=torch.bool).tril()\n"
        "    return torch.softmax(scores.masked_fill(~allowed, float('-inf')), dim=-1)",
        # q4: int(...); torch.softmax, .sort(descending=True).values, .cumsum(0); min(int((totals < top_p).sum()) + 1,
        # len(chances))
        "q4": "def top_p_count(raw, top_p):\n"
        "    chances = torch.softmax(raw, dim=-1).sort(descending=True).values\n"
        "    totals = chances.cumsum(0)\n"
        "    return int(min(int((totals < top_p).sum()) + 1, len(chances)))",
        # q5: torch operations throughout, .mean(); logsumexp of each row of model(ids[:, :-1]) minus the raw
        # output gathered at ids[:, 1:]
        "q5": "def model_loss(model, ids):\n"
        "    logits = model(ids[:, :-1])\n"
        "    right = logits.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)\n"
        "    return (torch.logsumexp(logits, dim=-1) - right).mean()",
    },
    "04_kv_cache": {
        # q1: halve with //; g steps push g * prompt plus g * (g - 1) // 2; g = min(n_new, window - prompt), every
        # other step pushes window positions
        "q1": "def positions_without_cache(prompt, n_new, window):\n"
        "    g = min(n_new, window - prompt)\n"
        "    return g * prompt + g * (g - 1) // 2 + (n_new - g) * window",
    },
    "05_sampling": {
        # q1: book's softmax of the raw outputs divided by temperatures[:, None], a new array (no /=), in float64
        "q1": "def rows_with_temperature(logits, temperatures):\n    return softmax(logits / temperatures[:, None])",
        # q2: float64 first, np.asarray(chances, dtype=float); minus the sum along each row of
        # p * np.log(np.where(p > 0, p, 1.0))
        "q2": "def spreads(chances):\n"
        "    p = np.asarray(chances, dtype=float)\n"
        "    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1)",
        # q3: float(...); add up k chances; sort with np.sort(...)[::-1] first; 1.0 when k >= len(chances), first
        # (and float64 first, np.asarray(chances, dtype=np.float64): float32 chances are summed in float64)
        "q3": "def largest_top_p(chances, k):\n"
        "    if k >= len(chances):\n"
        "        return 1.0\n"
        "    chances = np.asarray(chances, dtype=np.float64)\n"
        "    return float(np.sort(chances)[::-1][:k].sum())",
        # q4: p = np.asarray(chances, dtype=float); the first top_k ids of np.argsort(-p, kind="stable"); the running total of their chances over their
        # sum; the count kept as in question 3 (up to the first total within 1e-9 of top_p); their chances copied
        # into np.zeros_like at their own positions, divided by the sum
        "q4": "def top_k_top_p_chances(chances, top_k, top_p):\n"
        "    p = np.asarray(chances, dtype=float)\n"
        "    ids = np.argsort(-p, kind='stable')[:top_k]\n"
        "    total = np.cumsum(p[ids] / p[ids].sum())\n"
        "    count = min(len(ids), int(np.searchsorted(total, top_p - 1e-9)) + 1)\n"
        "    kept = np.zeros_like(p)\n"
        "    kept[ids[:count]] = p[ids[:count]]\n"
        "    return kept / kept.sum()",
        # q5: the outer product by broadcasting; np.unravel_index of its argmax; int, int, float
        "q5": "def best_pair(first, second):\n"
        "    pair = np.asarray(first)[:, None] * np.asarray(second)\n"
        "    i, j = np.unravel_index(pair.argmax(), pair.shape)\n"
        "    return int(i), int(j), float(pair[i, j])",
        # q6: a generator of its own, from seed itself; temperature 0: torch.full of int(logits.argmax()) as
        # int64 before any division; torch.softmax(logits / temperature); torch.sort(descending=True); keep the ids
        # of the order whose total before them (cumsum minus its own chance) is below top_p - 1e-9; their chances
        # into torch.zeros_like, divided by the total; torch.multinomial(..., replacement=True, generator=generator)
        "q6": "def sample_ids(logits, temperature, top_p, n, seed):\n"
        "    generator = torch.Generator().manual_seed(seed)\n"
        "    if temperature == 0:\n"
        "        return torch.full((n,), int(logits.argmax()), dtype=torch.int64)\n"
        "    chances = torch.softmax(logits / temperature, dim=-1)\n"
        "    ordered, order = torch.sort(chances, descending=True)\n"
        "    ids = order[ordered.cumsum(0) - ordered < top_p - 1e-9]\n"
        "    kept = torch.zeros_like(chances)\n"
        "    kept[ids] = chances[ids]\n"
        "    return torch.multinomial(kept / kept.sum(), n, replacement=True, generator=generator)",
    },
    "02_causal_mask": {
        # q1: build it from n on every call, np.tril(np.ones((n, n), dtype=bool)), and keep no copy of it
        "q1": "def causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=bool))",
        # q3: divide n * (n + 1) / 2 by n * n, Python ints and / (a float division of a float by n * n, which
        # rounds past 2**53: 1 ulp off the correctly rounded share for about a quarter of n past 10**8, within the prompt's
        # "float64's precision")
        "q3": "def allowed_share(n):\n    return n * (n + 1) / 2 / (n * n)",
        # q4: a new array, np.array(scores, dtype=float); ~np.tril(...) marks the blocked; -np.inf put in them
        # (into that copy: the second learner pass wrote into np.asarray's, the caller's own array); subtract
        # s.max(axis=1, keepdims=True) before np.exp; divide by each row's sum
        "q4": "def masked_weights(scores):\n"
        "    s = np.array(scores, dtype=float)\n"
        "    n = len(s)\n"
        "    blocked = ~np.tril(np.ones((n, n), dtype=bool))\n"
        "    s[blocked] = -np.inf\n"
        "    e = np.exp(s - s.max(axis=1, keepdims=True))\n"
        "    return e / e.sum(axis=1, keepdims=True)",
        # q5: a copy, np.array(row, dtype=float); row[position + 1:] set to 0; the course's softmax of the whole
        # row; the weight after the position added up, converted with float(...)
        "q5": "def zero_leak(row, position):\n"
        "    row = np.array(row, dtype=float)\n"
        "    row[position + 1:] = 0\n"
        "    return float(softmax(row)[position + 1:].sum())",
        # q6: work in torch throughout; softmax each row (dim=-1); a torch.ones(T, T, dtype=torch.bool).tril()
        # mask filled with -inf above the diagonal; scores divided by math.sqrt(d_head); weights times values
        "q6": "def causal_attention(x, w_q, w_k, w_v):\n"
        "    q, k, v = x @ w_q, x @ w_k, x @ w_v\n"
        "    d_head = w_k.shape[1]\n"
        "    scores = q @ k.T / math.sqrt(d_head)\n"
        "    T = len(x)\n"
        "    mask = torch.ones(T, T, dtype=torch.bool).tril()\n"
        "    scores = scores.masked_fill(~mask, float('-inf'))\n"
        "    return torch.softmax(scores, dim=-1) @ v",
    },
    "06_context_window": {
        # q1: max(0, conversation - window); (dropped, dropped / conversation)
        "q1": "def dropped_tokens(conversation, window):\n"
        "    dropped = max(0, conversation - window)\n"
        "    return (dropped, dropped / conversation)",
        "q2": "def read_and_compute_seconds(n_bytes, n_ops, bandwidth, ops_per_second):\n"
        "    return (n_bytes / bandwidth, n_ops / ops_per_second)",
        # q3: divide with / throughout
        "q3": "def tokens_per_second(weight_bytes, cache_bytes, batch, bandwidth):\n"
        "    return batch / ((weight_bytes + batch * cache_bytes) / bandwidth)",
        # q4: target and bandwidth made exact first, Fraction(...) of each; 1 when target * weight_bytes == 0
        # and target * cache_bytes <= bandwidth, first; None when target * cache_bytes >= bandwidth; int(...);
        # the ceiling of a / d as -(-a // d), a = target * weight_bytes, d = bandwidth - target * cache_bytes;
        # max(1, ...); no search
        "q4": "def batch_for_rate(weight_bytes, cache_bytes, bandwidth, target):\n"
        "    from fractions import Fraction\n"
        "    target, bandwidth = Fraction(target), Fraction(bandwidth)\n"
        "    if target * weight_bytes == 0 and target * cache_bytes <= bandwidth:\n"
        "        return 1\n"
        "    if target * cache_bytes >= bandwidth:\n"
        "        return None\n"
        "    a = target * weight_bytes\n"
        "    d = bandwidth - target * cache_bytes\n"
        "    return max(1, int(-(-a // d)))",
        # q5: the reading and arithmetic times of the recipes; compare with >=
        "q5": "def decode_step(n_params, bytes_per_number, cache_bytes, batch, bandwidth, ops_per_second):\n"
        "    read_s = (n_params * bytes_per_number + batch * cache_bytes) / bandwidth\n"
        "    compute_s = 2 * n_params * batch / ops_per_second\n"
        "    if read_s >= compute_s:\n"
        "        return (read_s, 'memory')\n"
        "    return (compute_s, 'compute')",
        # q6: list(prompt); every step model(torch.tensor([ids[-window:]])), int() of the argmax at [0, -1]
        "q6": "def generate_in_window(model, prompt, n_new, window):\n"
        "    ids = list(prompt)\n"
        "    for _ in range(n_new):\n"
        "        logits = model(torch.tensor([ids[-window:]]))\n"
        "        ids.append(int(logits[0, -1].argmax()))\n"
        "    return ids",
    },
    "09_recap_quiz": {
        # q1: vocab * d once; n_positions * d; 2 * d for the final norm; 4 * d * d + 2 * (d * 4 * d); 4 * d,
        # 4 * d + d and 2 * 2 * d per block
        "q1": "def gpt2_parameters(n_layers, d_model, vocab, n_positions):\n"
        "    d = d_model\n"
        "    block = 4 * d * d + 2 * (d * 4 * d) + 4 * d + 4 * d + d + 2 * 2 * d\n"
        "    return vocab * d + n_positions * d + 2 * d + n_layers * block",
        # q2: divide with /; both tables over the whole count, as the last recipe spells it
        "q2": "def embedding_share(n_layers, d_model, vocab, n_positions):\n"
        "    d = d_model\n"
        "    return (vocab + n_positions) * d_model / (\n"
        "        (vocab + n_positions) * d + n_layers * (12 * d * d + 13 * d) + 2 * d\n"
        "    )",
        # q3: divide both sides by 2 n d
        "q3": "def crossover_length(d_model, ff_multiple):\n    return (4 + 2 * ff_multiple) * d_model / 2",
        # q4: each factor once; divide the bytes by GiB; times 2 for the key and the value
        "q4": "def kv_cache_gib(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):\n"
        "    return 2 * n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number / GiB",
        # q5: int(...) after //; the weights first; round down with //; max(0, ...)
        "q5": "def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n"
        "    return max(0, int((memory_gib - weights_gib) // cache_gib_per_request))",
        # q6: int(...); max(0, ...); the free bytes over per_token * n_requests, with //, rounding nothing before
        "q6": "def longest_context(memory_gib, weights_gib, n_layers, n_kv_heads, d_head, bytes_per_number, n_requests):\n"
        "    per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_number\n"
        "    free_bytes = (memory_gib - weights_gib) * GiB\n"
        "    return max(0, int(free_bytes // (per_token * n_requests)))",
    },
    "11_build_the_gpt": {
        # q1: qkv and out as nn.Linear(..., bias=False), the heads in an int; split(C, dim=-1), each
        # .view(B, T, H, D).transpose(1, 2); the cache concatenated in front along dim=2 and stored back; scores
        # over D ** 0.5; torch.ones(T, T_all, dtype=torch.bool).tril(diagonal=T_all - T), -inf by masked_fill,
        # softmax over the last dimension; .transpose(1, 2).reshape(B, T, C), then self.out
        "q1": "class CausalSelfAttention(nn.Module):\n"
        "    def __init__(self, cfg):\n"
        "        super().__init__()\n"
        "        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)\n"
        "        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)\n"
        "        self.n_heads = cfg.n_heads\n"
        "\n"
        "    def forward(self, x, cache=None):\n"
        "        B, T, C = x.shape\n"
        "        H = self.n_heads\n"
        "        D = C // H\n"
        "        q, k, v = self.qkv(x).split(C, dim=-1)\n"
        "        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))\n"
        "        if cache is not None:\n"
        "            if cache['k'] is not None:\n"
        "                k = torch.cat([cache['k'], k], dim=2)\n"
        "                v = torch.cat([cache['v'], v], dim=2)\n"
        "            cache['k'], cache['v'] = k, v\n"
        "        T_all = k.shape[2]\n"
        "        scores = q @ k.transpose(-2, -1) / D**0.5\n"
        "        mask = torch.ones(T, T_all, dtype=torch.bool).tril(diagonal=T_all - T)\n"
        "        weights = torch.softmax(scores.masked_fill(~mask, float('-inf')), dim=-1)\n"
        "        return self.out((weights @ v).transpose(1, 2).reshape(B, T, C))",
        # q2: the four parts by name; nn.GELU() with no argument; x = x + self.attn(self.norm1(x), cache), then
        # x + self.ff(self.norm2(x))
        "q2": "class Block(nn.Module):\n"
        "    def __init__(self, cfg):\n"
        "        super().__init__()\n"
        "        self.norm1 = nn.LayerNorm(cfg.d_model)\n"
        "        self.attn = CausalSelfAttention(cfg)\n"
        "        self.norm2 = nn.LayerNorm(cfg.d_model)\n"
        "        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))\n"
        "\n"
        "    def forward(self, x, cache=None):\n"
        "        x = x + self.attn(self.norm1(x), cache)\n"
        "        return x + self.ff(self.norm2(x))",
        # q3: the five parts by name and size; head.weight = tokens.weight after both; token vectors plus
        # self.positions(torch.arange(start, start + T)), each block with None if caches is None else caches[i],
        # then self.head(self.norm(x))
        "q3": "class GPT(nn.Module):\n"
        "    def __init__(self, cfg):\n"
        "        super().__init__()\n"
        "        self.tokens = nn.Embedding(cfg.vocab, cfg.d_model)\n"
        "        self.positions = nn.Embedding(cfg.context, cfg.d_model)\n"
        "        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])\n"
        "        self.norm = nn.LayerNorm(cfg.d_model)\n"
        "        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)\n"
        "        self.head.weight = self.tokens.weight\n"
        "\n"
        "    def forward(self, idx, caches=None, start=0):\n"
        "        T = idx.shape[1]\n"
        "        x = self.tokens(idx) + self.positions(torch.arange(start, start + T))\n"
        "        for i, block in enumerate(self.blocks):\n"
        "            x = block(x, None if caches is None else caches[i])\n"
        "        return self.head(self.norm(x))",
        # q4: append loss.item(); F.cross_entropy on the flattened outputs and y, default mean; the generator and
        # AdamW once, before the loop; for each of the first steps pairs from tiny.batches: the loss, zero_grad,
        # backward, step
        "q4": "def train(model, data, steps, batch, lr, seed, window):\n"
        "    generator = torch.Generator().manual_seed(seed)\n"
        "    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)\n"
        "    losses = []\n"
        "    for _, (x, y) in zip(range(steps), tiny.batches(data, batch, window, generator)):\n"
        "        logits = model(x)\n"
        "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n"
        "        optimiser.zero_grad()\n"
        "        loss.backward()\n"
        "        optimiser.step()\n"
        "        losses.append(loss.item())\n"
        "    return losses",
        # q5: list(prompt), int(...) of each id; without the cache the whole row each step, the argmax at
        # [0, -1]; with it one dict per block, the prompt once with caches=caches, then torch.tensor([ids[-1:]])
        # with caches=caches and start=len(ids) - 1 (keywords only)
        "q5": "@torch.no_grad()\n"
        "def generate(model, prompt, n_new, use_cache=True):\n"
        "    ids = list(prompt)\n"
        "    if not use_cache:\n"
        "        for _ in range(n_new):\n"
        "            logits = model(torch.tensor([ids]))\n"
        "            ids.append(int(logits[0, -1].argmax()))\n"
        "        return ids\n"
        "    caches = [{'k': None, 'v': None} for _ in model.blocks]\n"
        "    logits = model(torch.tensor([ids]), caches=caches)\n"
        "    for _ in range(n_new):\n"
        "        ids.append(int(logits[0, -1].argmax()))\n"
        "        logits = model(torch.tensor([ids[-1:]]), caches=caches, start=len(ids) - 1)\n"
        "    return ids",
    },
}


def _probe_arguments(name, seed):
    """{question: the encoded arguments of its hidden probes} that a grading run with this seed draws."""
    from tools.grading import grade_runner

    space = {"__name__": "probes"}
    probes = grade.load_exercise(ROOT / "autograder" / f"{name}.zip", seed=seed).probes
    exec(compile(probes, "probes.py", "exec"), space)
    out = {}
    for question, *_rest in space["PROBES"]:
        out.setdefault(question, [])
    for question, _function, args, *_rest in space["PROBES"]:
        out[question].append(json.dumps(grade_runner.encode(list(args)), sort_keys=True))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_two_seeds_draw_different_hidden_inputs(name):
    """A lookup table built from one run's hidden inputs must be worth nothing in the next: under two seeds,
    every question gets other inputs, and the same seed repeats them (`--seed` repeats a run)."""
    first, again, second = (_probe_arguments(name, seed) for seed in (1, 1, 2))
    assert first == again, f"{name}: the same seed drew other hidden inputs"
    same = sorted(q for q in first if first[q] == second[q])
    assert not same, f"{name}: {same} draw the same hidden inputs under seeds 1 and 2 (use fresh() in its probes)"


@pytest.fixture(scope="session")
def graded_by_seed(regenerated):
    """{(name, seed): verdicts of the solution, with the HONEST answers in place of the masters' where given},
    each judged against the solution's own answers on that seed's fresh inputs."""
    jobs, keys = [], []
    for name in NAMES:
        zip_path = regenerated / "autograder" / f"{name}.zip"
        solved = _solution_notebook(zip_path)
        honest = _with_cells(_questions_only(solved), HONEST.get(name, []))
        # the reference of each seed is the solution's questions only, as the answers judged are: that the
        # closing cell changes no answer is shown by `graded`, which judges the whole solution against its
        # whole reference run, and the trimmed planted answers against it too
        kinds = [("reference", _questions_only(solved)), ("honest", honest)]
        if name in RECIPES:
            kinds.append(("recipe", _with_cells(_questions_only(solved), list(RECIPES[name].values()))))
        for seed in FRESH_SEEDS:
            folder = regenerated / "seeds" / f"{name}-{seed}"
            folder.mkdir(parents=True)
            (folder / "probes.py").write_text(grade.load_exercise(zip_path, seed=seed).probes)
            for kind, nb in kinds:
                nbformat.write(nb, folder / f"{kind}.ipynb")
                jobs.append(
                    {
                        "probes": str(folder / "probes.py"),
                        "notebook": str(folder / f"{kind}.ipynb"),
                        "out": str(folder / f"{kind}.out"),
                        "with_args": kind == "reference",
                    }
                )
            keys.append((name, seed, folder))
    spec = regenerated / "seeds" / "jobs.json"
    spec.write_text(json.dumps(jobs))
    subprocess.run(
        [sys.executable, "-m", "tools.grading.run_variants", str(spec)], check=True, cwd=ROOT, timeout=RUN_TIMEOUT * 20
    )
    out = {}
    for name, seed, folder in keys:
        exercise = grade.load_exercise(regenerated / "autograder" / f"{name}.zip", seed=seed)
        reference = grade.reference_from_run(exercise, grade._read_output(folder / "reference.out"))
        questions_of = grade.probe_functions(exercise, reference)
        out[name, seed] = grade.judge_run(exercise, reference, questions_of, grade._read_output(folder / "honest.out"))
        if name in RECIPES:
            out[name, seed, "recipe"] = grade.judge_run(
                exercise, reference, questions_of, grade._read_output(folder / "recipe.out")
            )
    return out


@pytest.mark.parametrize("name", NAMES)
def test_an_honest_solution_scores_full_marks_under_every_seed(graded_by_seed, name):
    for seed in FRESH_SEEDS:
        verdicts = graded_by_seed[name, seed]
        assert verdicts, f"{name}: no question graded under seed {seed}"
        lost = {q: reason for q, (score, reason) in verdicts.items() if score != 1.0}
        assert not lost, f"{name}, seed {seed}: an honest solution loses {lost}"


@pytest.mark.parametrize("name", sorted(set(RECIPES) & set(NAMES)))
def test_answers_that_follow_the_recipes_score_full_marks_under_every_seed(graded_by_seed, name):
    for seed in FRESH_SEEDS:
        verdicts = graded_by_seed[name, seed, "recipe"]
        lost = {q: reason for q, (score, reason) in verdicts.items() if q in RECIPES[name] and score != 1.0}
        assert not lost, f"{name}, seed {seed}: an answer that follows the recipes loses {lost}"


def test_answers_that_follow_the_recipes_pass_the_public_checks(tmp_path, regenerated):
    """The learner's own grader.check (tools/grading/run_public_checks.py, as for the planted answers) on each
    answer of RECIPES: a recipe that leads to a wrong answer fails here."""
    spec = [
        {
            "name": name,
            "student": str(regenerated / "exercises" / f"{name}.ipynb"),
            "solution": str(tmp_path / f"{name}.solved.ipynb"),
            "answers": {q: [source] for q, source in answers.items()},
        }
        for name, answers in RECIPES.items()
        if name in NAMES
    ]
    for job in spec:
        nbformat.write(_solution_notebook(regenerated / "autograder" / f"{job['name']}.zip"), job["solution"])
    out = _run_public_checks(spec, tmp_path)
    failed = [
        f"{name} {q}: {run['text']}"
        for name, answers in RECIPES.items()
        if name in NAMES
        for q in answers
        for run in out[name][q][1:]
        if not run["passed"]
    ]
    assert not failed, "answers that follow the recipes fail grader.check:\n" + "\n\n".join(failed)


def test_a_check_of_an_answer_that_never_finishes_stops_and_says_so(monkeypatch):
    """A search loop with no end made the learner's grader.check hang with no word (a second learner's pass,
    ex. 6 q4): the check stops after book.exercise.CHECK_SECONDS and says why, and the next answer is checked."""
    import book.exercise

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(book.exercise, "CHECK_SECONDS", 1)
    student = ROOT / "exercises" / "02_causal_mask.ipynb"
    env = _run_first_cell(student.parent, student)
    exec("def allowed_pairs(n):\n    while True:\n        pass", env)
    stopped = env["grader"].check("q2", env)
    # after 1 s where the loop had its share of the processor; a busy machine gives it up to BUSY_ROUNDS of them
    assert not stopped.passed and re.search(r"the check stopped after [123] s", repr(stopped)), repr(stopped)
    assert "did not finish" in repr(stopped) and "Traceback" not in repr(stopped)
    exec("def allowed_pairs(n):\n    return n * (n + 1) // 2", env)
    assert env["grader"].check("q2", env).passed


def test_a_check_that_waits_gets_more_time_and_is_told_so(monkeypatch):
    """A learner on a busy machine (load 15) had honest answers stopped as endless loops: a check whose code had
    the processor for under book.exercise.BUSY_SHARE of the limit gets more rounds of it, and when it still has
    not ended, the message says that it waited, not that it spun."""
    import book.exercise

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(book.exercise, "CHECK_SECONDS", 0.5)
    student = ROOT / "exercises" / "02_causal_mask.ipynb"
    env = _run_first_cell(student.parent, student)
    once = "import time\nslept = []\ndef allowed_pairs(n):\n    if not slept:\n        slept.append(time.sleep(0.8))\n"
    exec(once + "    return n * (n + 1) // 2", env)
    assert env["grader"].check("q2", env).passed  # 0.8 s asleep: past one round, within BUSY_ROUNDS of them
    exec("import time\ndef allowed_pairs(n):\n    while True:\n        time.sleep(0.05)", env)
    stopped = repr(env["grader"].check("q2", env))
    assert re.search(r"the check stopped after [12] s", stopped) and "had the processor for little" in stopped, stopped


def test_train_once_gives_what_training_again_gives(monkeypatch):
    """The capstone's checks train one small model in several checks and probes (book.exercise.train_once):
    the second call loads what the first reached, bit for bit what `tiny.train` gives again, and another start
    (other weights, other arguments) trains afresh."""
    import torch

    from book import exercise, tiny

    _, data = tiny.corpus()
    shape = dict(vocab=25, context=32, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    torch.manual_seed(3)
    start = tiny.TinyGPT(tiny.TinyConfig(**shape)).to(torch.float64)
    plain, first, again, other = (copy.deepcopy(start) for _ in range(4))
    args = dict(steps=5, batch=4, seed=1, window=8)
    expected = tiny.train(plain, data, **args)
    assert exercise.train_once(first, data, **args) == expected
    monkeypatch.setattr(tiny, "train", lambda *a, **k: pytest.fail("trained again"))
    assert exercise.train_once(again, data, **args) == expected
    for a, b in zip(plain.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    monkeypatch.undo()
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    trained = []
    monkeypatch.setattr(tiny, "train", lambda *a, **k: trained.append(1) or [0.0])
    exercise.train_once(other, data, **args)
    exercise.train_once(copy.deepcopy(start), data, **dict(args, steps=6))
    assert len(trained) == 2
