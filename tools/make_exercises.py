"""Regenerate the student notebooks (exercises/) and the autograder zips (autograder/) from solutions/.

Each `solutions/NN_slug.md` is an otter-grader master notebook written as Jupytext
MyST. For each one this script converts it to a notebook in a temporary folder,
runs `otter assign` (which also runs every test against the solutions and fails
if one does not pass), then copies out:

- `exercises/NN_slug.ipynb`: the student copy, with the public tests only. Its first cell loads them
  with the course's grader (`book/exercise.py`: found whatever the notebook is called, hints in steps,
  no doctest trace), and its metadata `course_hints` holds, per question and public test case, the
  `ask` and `recipe` keys of the case's TEST CONFIG (the second and third hint; otter keeps
  `failure_message`, the first, and would refuse keys it does not know);
- `autograder/NN_slug.zip`: otter's autograder (public tests) and, under `grading/`, what
  `tools/grade.py` needs: `probes.py` (the hidden inputs, from the master's `# PROBES` cells; each
  `probe(..., what="a window that must crop")` says what kind of input it is, a 5th item of its entry),
  `checks.py` (the property checks, from its `# CHECKS` cells), `questions.json` and
  `solution.ipynb` (the solved notebook, whose answers on the hidden inputs are the reference).

The hidden cells stand in the master between raw cells `# BEGIN HIDDEN` and `# END HIDDEN`;
they are taken out before `otter assign` sees the master, so no student copy can hold them.

Both outputs are normalised (cell ids, zip timestamps) so that regenerating
from unchanged masters gives byte-identical files. Usage (or `make exercises`):

    python -m tools.make_exercises               # every exercise
    python -m tools.make_exercises 02_causal_mask  # one exercise
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
AUTOGRADER = ROOT / "autograder"
OTTER = [sys.executable, "-m", "otter"]
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # a fixed timestamp for every zip entry
PROBES_PRELUDE = '''"""Hidden inputs of one exercise, generated from its master by tools/make_exercises.py.

Run inside the grading sandbox after the submission's cells: each `probe` names a question, the
function it calls and the arguments; `probe_with` passes the function to a driver that calls it.
`what` says what kind of input a probe is ("a window that must crop"), for the learner's feedback:
a reason names the kind of input that broke an answer, never the input itself.
"""
import random as _random

# The seed of this grading run's fresh inputs: tools/grade.py writes a new one for every run (the instructor
# can give it with --seed to repeat a run), so inputs a submission leaked from one run are worth nothing in
# the next. `fresh(low, high)` is a whole number, `fresh_float(low, high)` a real one, drawn from it.
SEED = 0
_FRESH = _random.Random(SEED)


def fresh(low, high):
    return _FRESH.randint(low, high)


def fresh_float(low, high):
    return _FRESH.uniform(low, high)


PROBES = []


def probe(question, function, *args, what=None):
    PROBES.append((question, function, args, None) + ((what,) if what else ()))


def probe_with(question, function, driver, *args, what=None):
    PROBES.append((question, function, args, driver) + ((what,) if what else ()))
'''
CHECKS_PRELUDE = '''"""Property checks of one exercise, generated from its master by tools/make_exercises.py.

Run by tools/grade.py outside every sandbox: `check_qN(got, want, args)` gets the decoded answers of
a submission, of the solution, and the arguments of each probe; it raises Wrong("reason").
Names available: Wrong, Tensor, same, values, describe, np, math (tools/judge.py).
"""
'''


def exercise_names():
    """Every exercise, by the file stem of its master (e.g. '01_next_token_prediction'), in order."""
    return sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]_*.md"))


TEST_CONFIG = re.compile(r'^"""# BEGIN TEST CONFIG\n(.*?)\n"""\s*# END TEST CONFIG\n', re.S)
INIT_CELL = """# Load this exercise's checks (found whatever this notebook is called)
from book.exercise import grader_for

grader = grader_for("{name}")"""


def _take_hints(cell):
    """Take the course's own keys `ask` (a leading question) and `recipe` out of a public test's TEST CONFIG,
    which otter would refuse; return them (None where absent). Otter keeps `failure_message`, the first hint."""
    found = TEST_CONFIG.match(cell.source)
    if not found:
        return None
    config = yaml.safe_load(found.group(1)) or {}
    hints = [config.pop("ask", None), config.pop("recipe", None)]
    text = yaml.safe_dump(config, sort_keys=False, width=100).strip() if config else ""
    cell.source = f'"""# BEGIN TEST CONFIG\n{text}\n"""  # END TEST CONFIG\n' + cell.source[found.end() :]
    return hints if any(hints) else None


def _reason_problems(source):
    """The `Wrong(...)` calls of a # CHECKS cell whose reason is built from anything but the grader's own words:
    a reason reaches the learner, so it may be string literals and `describe(...)` of a value (the grader's
    fixed vocabulary of kinds), never a formatted value, which the hidden inputs or the submission decide."""
    import ast

    def trusted(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return True
        if isinstance(node, ast.JoinedStr):
            return all(
                isinstance(v, ast.Constant)
                or (
                    isinstance(v, ast.FormattedValue)
                    and v.conversion == -1
                    and v.format_spec is None
                    and isinstance(v.value, ast.Call)
                    and getattr(v.value.func, "id", None) == "describe"
                )
                for v in node.values
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return trusted(node.left) and trusted(node.right)
        return False

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Wrong":
            if len(node.args) != 1 or node.keywords or not trusted(node.args[0]):
                found.append(f"line {node.lineno}: {ast.get_source_segment(source, node)[:80]}")
    return found


def split_master(name):
    """The master without its hidden cells, the text of probes.py and checks.py taken from them, the
    questions, and the stepped hints of the public tests ({question: [[ask, recipe] or None per test case]})."""
    nb = jupytext.read(SOLUTIONS / f"{name}.md")
    kept, probes, checks, inside = [], [], [], False
    hints, question, in_tests = {}, None, False
    for cell in nb.cells:
        marker = cell.source.strip() if cell.cell_type == "raw" else ""
        found = re.match(r"# BEGIN QUESTION\s*\nname:\s*(\w+)", marker)
        if found:
            question = found.group(1)
        in_tests = (in_tests or marker == "# BEGIN TESTS") and marker != "# END TESTS"
        if in_tests and cell.cell_type == "code" and not inside:
            hints.setdefault(question, []).append(_take_hints(cell))
        if marker == "# BEGIN HIDDEN":
            inside = True
        elif marker == "# END HIDDEN":
            inside = False
        elif not inside:
            kept.append(cell)
        elif cell.cell_type == "code" and cell.source.startswith("# PROBES"):
            probes.append(cell.source.strip() + "\n")
        elif cell.cell_type == "code" and cell.source.startswith("# CHECKS"):
            bad = _reason_problems(cell.source)
            if bad:
                raise RuntimeError(
                    f"solutions/{name}.md: a reason formats a value (the learner would read what "
                    f"the hidden inputs or the submission decide): {'; '.join(bad)}"
                )
            checks.append(cell.source.strip() + "\n")
        elif cell.cell_type == "code" and cell.source.startswith("# WRONG"):
            pass  # planted wrong answers: read by planted_answers() for the tests, never exported
        else:
            raise RuntimeError(
                f"solutions/{name}.md: a cell of a hidden block is neither # PROBES, # CHECKS nor # WRONG"
            )
    if inside:
        raise RuntimeError(f"solutions/{name}.md: # BEGIN HIDDEN without # END HIDDEN")
    questions = re.findall(
        r"^# BEGIN QUESTION\s*\nname:\s*(\w+)", "\n".join(c.source for c in kept if c.cell_type == "raw"), flags=re.M
    )
    nb.cells = kept
    hints = {q: h for q, h in hints.items() if any(h)}
    return (nb, "\n\n".join([PROBES_PRELUDE, *probes]), "\n\n".join([CHECKS_PRELUDE, *checks]), questions, hints)


class Planted(str):
    """A planted wrong answer (the source of a cell), written in a `# WRONG` cell of its master.

    `hint`: a word the learner's first hint must contain (it names the mistake). `hardcoded`: it types in the
    values of the public checks, so only the hidden tests, on inputs the learner has not seen, can catch it;
    every other planted answer must fail `grader.check` too."""

    def __new__(cls, source, hint=None, hardcoded=False):
        self = super().__new__(cls, source)
        self.hint, self.hardcoded = hint, hardcoded
        return self


def solution_code(name, question):
    """The solution cell of a question of a master, without its markers."""
    cells = jupytext.read(SOLUTIONS / f"{name}.md").cells
    start = next(
        i
        for i, c in enumerate(cells)
        if c.cell_type == "raw" and re.match(rf"# BEGIN QUESTION\s*\nname:\s*{question}\b", c.source)
    )
    code = next(c for c in cells[start:] if c.cell_type == "code").source
    return "\n".join(ln for ln in code.splitlines() if not re.match(r"\s*# (BEGIN|END) SOLUTION", ln))


def planted_answers(name):
    """{question: [Planted, ...]} from the `# WRONG` cells of a master's hidden blocks, in order.

    A `# WRONG` cell calls `wrong(question, source, hint=None, hardcoded=False)` with the whole code of a
    wrong answer, or `mutant(question, hint, (old, new), ...)`, which makes one from the question's solution
    by textual changes (each `old` must occur in it)."""
    answers = {}

    def wrong(question, source, hint=None, hardcoded=False):
        answers.setdefault(question, []).append(Planted(source.strip("\n"), hint, hardcoded))

    def mutant(question, hint, *changes):
        code = solution_code(name, question)
        for old, new in changes:
            if old not in code:
                raise RuntimeError(f"solutions/{name}.md, {question}: {old!r} is not in the solution")
            code = code.replace(old, new)
        answers.setdefault(question, []).append(Planted(code, hint))

    for cell in jupytext.read(SOLUTIONS / f"{name}.md").cells:
        if cell.cell_type == "code" and cell.source.startswith("# WRONG"):
            exec(compile(cell.source, f"solutions/{name}.md # WRONG", "exec"), {"wrong": wrong, "mutant": mutant})
    return answers


def assign(name, workdir, run_tests=True, in_process=False):
    """Run `otter assign` on one master; return the output folder (with `student/` and `autograder/`).

    With `run_tests`, otter also runs every test against the solutions and fails if one does not pass
    (`make exercises` always does; the test suite grades the solutions itself and skips it). With
    `in_process`, otter runs in this process rather than a new one (its import alone takes seconds;
    `--into` uses it to rebuild every exercise in one process).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    master = workdir / f"{name}.ipynb"
    nb, probes, checks, questions, hints = split_master(name)
    nbformat.write(nb, master)
    dist = workdir / "dist"
    if in_process:
        import contextlib
        import io

        from otter.assign import main as otter_assign

        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                otter_assign(str(master.resolve()), str(dist.resolve()), no_run_tests=not run_tests)
        except Exception as err:
            raise RuntimeError(f"otter assign failed for solutions/{name}.md: {type(err).__name__}: {err}") from err
    else:
        options = [] if run_tests else ["--no-run-tests"]
        run = subprocess.run(
            [*OTTER, "assign", *options, master.name, dist.name],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if run.returncode != 0:
            log = [ln for ln in (run.stdout + run.stderr).splitlines() if "IPKernelApp" not in ln]
            raise RuntimeError(f"otter assign failed for solutions/{name}.md:\n" + "\n".join(log[-25:]))
    grading = dist / "grading"
    grading.mkdir()
    (grading / "probes.py").write_text(probes)
    (grading / "checks.py").write_text(checks)
    (grading / "questions.json").write_text(json.dumps({"name": name, "questions": questions}, indent=1) + "\n")
    (dist / "hints.json").write_text(json.dumps(hints, indent=1) + "\n")
    (grading / "solution.ipynb").write_text(_normalised(dist / "autograder" / f"{name}.ipynb"))
    return dist


def _normalised(path):
    """A notebook with ids that do not change from one regeneration to the next."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"
    nb.metadata.pop("jupytext", None)
    return nbformat.writes(nb) + "\n"


def student_notebook(name, dist):
    """The student copy (public tests only), normalised: its first cell loads the checks with the course's
    grader (book/exercise.py: found whatever the notebook is called, hints in steps, no doctest trace), and
    its metadata carries the later steps of each hint."""
    path = Path(dist) / "student" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0]
    if not (first.cell_type == "code" and "otter.Notebook(" in first.source):
        raise RuntimeError(f"solutions/{name}.md: otter's student copy does not start with its init cell")
    first.source = INIT_CELL.format(name=name)
    nb.metadata["course_hints"] = json.loads((Path(dist) / "hints.json").read_text())
    nbformat.write(nb, path)
    return _normalised(path)


def write_zip(source, target, extra=None):
    """Copy a zip, plus `extra` {name: file}, with its entries sorted and every timestamp fixed, so equal
    content gives equal bytes."""
    with zipfile.ZipFile(source) as src:
        entries = [(info.filename, src.read(info)) for info in src.infolist() if not info.is_dir()]
    entries = sorted(entries + [(n, Path(p).read_bytes()) for n, p in (extra or {}).items()])
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for filename, data in entries:
            info = zipfile.ZipInfo(filename, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, data)


def export(name, dist, exercises=EXERCISES, autograder=AUTOGRADER):
    """Write the student notebook and the autograder zip of one exercise out of its `otter assign` folder."""
    exercises, autograder = Path(exercises), Path(autograder)
    exercises.mkdir(parents=True, exist_ok=True)
    autograder.mkdir(parents=True, exist_ok=True)
    (exercises / f"{name}.ipynb").write_text(student_notebook(name, dist))
    [zip_path] = (Path(dist) / "autograder").glob("*.zip")
    grading = Path(dist) / "grading"
    write_zip(zip_path, autograder / f"{name}.zip", {f"grading/{p.name}": p for p in grading.iterdir()})


def build(name, workdir, exercises=EXERCISES, autograder=AUTOGRADER, run_tests=True, in_process=False):
    """Assign and export one exercise; return the `otter assign` folder (its autograder/ holds the solved notebook)."""
    dist = assign(name, workdir, run_tests, in_process)
    export(name, dist, exercises, autograder)
    return dist


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="exercises to rebuild (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="exercises built at the same time")
    parser.add_argument(
        "--into",
        metavar="FOLDER",
        help="write exercises/ and autograder/ under FOLDER instead of "
        "the repository, one exercise after the other in this process, without otter's run of the "
        "public tests (the test suite's check that the committed files are up to date)",
    )
    args = parser.parse_args(argv)
    names = args.names or exercise_names()
    unknown = [n for n in names if not (SOLUTIONS / f"{n}.md").exists()]
    if unknown:
        sys.exit(f"no master for {', '.join(unknown)} in solutions/")
    if args.into:
        into = Path(args.into)
        for name in names:
            try:
                build(
                    name,
                    into / "work" / name,
                    into / "exercises",
                    into / "autograder",
                    run_tests=False,
                    in_process=True,
                )
            except RuntimeError as err:
                sys.exit(str(err))
        return
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        jobs = {name: pool.submit(build, name, Path(tmp) / name) for name in names}
        failed = False
        for name, job in jobs.items():
            try:
                job.result()
                print(f"exercises/{name}.ipynb and autograder/{name}.zip written")
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                failed = True
                print(err, file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
