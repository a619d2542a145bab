"""Regenerate the student notebooks (exercises/) and the autograder zips (autograder/) from solutions/.

Each `solutions/NN_slug.md` is an otter-grader master notebook written as Jupytext MyST, in the format
of docs/exercise-format.md, read by `tools.exercises.master.read_master`. For each one this script takes its hidden
blocks out, converts the rest to a notebook in a temporary folder, runs `otter assign` (which also runs
every test against the solutions and fails if one does not pass), then writes `exercises/NN_slug.ipynb`
(the student copy, with the course's init cell and `course_hints`) and `autograder/NN_slug.zip` (otter's
autograder, and under `grading/` the files tools/grading/grade.py needs: `probes.py`, `checks.py`,
`questions.json`, `solution.ipynb`).

Both outputs are normalised (cell ids, zip timestamps) so that regenerating
from unchanged masters gives byte-identical files. Usage (or `make exercises`):

    python -m tools.exercises.make_exercises               # every exercise
    python -m tools.exercises.make_exercises 02_causal_mask  # one exercise
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
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from tools.exercises.master import read_master

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
AUTOGRADER = ROOT / "autograder"
OTTER = [sys.executable, "-m", "otter"]
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # a fixed timestamp for every zip entry
PROBES_PRELUDE = '''"""Hidden inputs of one exercise, generated from its master by tools/exercises/make_exercises.py.

Run inside the grading sandbox after the submission's cells: each `probe` names a question, the
function it calls and the arguments; `probe_with` passes the function to a driver that calls it.
`what` says what kind of input a probe is ("a window that must crop"), for the learner's feedback:
a reason names the kind of input that broke an answer, never the input itself.
"""
import random as _random

# The seed of this grading run's fresh inputs: tools/grading/grade.py writes a new one for every run (the instructor
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
CHECKS_PRELUDE = '''"""Property checks of one exercise, generated from its master by tools/exercises/make_exercises.py.

Run by tools/grading/grade.py outside every sandbox: `check_qN(got, want, args)` gets the decoded answers of
a submission, of the solution, and the arguments of each probe; it raises Wrong("reason").
Names available: Wrong, Tensor, same, values, describe, np, math (tools/grading/judge.py).
"""
'''


def exercise_names() -> list[str]:
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


def split_master(name: str) -> tuple[object, str, str, list[str], dict]:
    """The master without its hidden cells, the text of probes.py and checks.py taken from them, the
    questions, and the stepped hints of the public tests ({question: [[ask, recipe] or None per test case]})."""
    master = read_master(SOLUTIONS / f"{name}.md")
    hints = {}
    for cell in master.cells:
        if cell.role == "test":
            hints.setdefault(cell.question, []).append(_take_hints(cell.node))
    checks = master.hidden_sources("checks")
    for source in checks:
        bad = _reason_problems(source)
        if bad:
            raise RuntimeError(
                f"{master.where}: a reason formats a value (the learner would read what "
                f"the hidden inputs or the submission decide): {'; '.join(bad)}"
            )
    nb = master.notebook
    nb.cells = [c.node for c in master.cells if not c.hidden and c.marker not in ("# BEGIN HIDDEN", "# END HIDDEN")]
    probes = [s.strip() + "\n" for s in master.hidden_sources("probes")]
    hints = {q: h for q, h in hints.items() if any(h)}
    return (
        nb,
        "\n\n".join([PROBES_PRELUDE, *probes]),
        "\n\n".join([CHECKS_PRELUDE, *(s.strip() + "\n" for s in checks)]),
        list(master.questions),
        hints,
    )


@dataclass(frozen=True)
class Planted:
    """A planted wrong answer, written in a `# WRONG` cell of its master: `source`, the code of the answer.

    `hint`: a word the learner's first hint must contain (it names the mistake). `hardcoded`: it types in the
    values of the public checks, so only the hidden tests, on inputs the learner has not seen, can catch it;
    every other planted answer must fail `grader.check` too."""

    source: str
    hint: str | None = None
    hardcoded: bool = False


def solution_code(name: str, question: str) -> str:
    """The solution cell of a question of a master, without its markers."""
    return read_master(SOLUTIONS / f"{name}.md").question(question).solution


def planted_answers(name: str) -> dict[str, list[Planted]]:
    """{question: [Planted, ...]} from the `# WRONG` cells of a master's hidden blocks, in order.

    A `# WRONG` cell calls `wrong(question, source, hint=None, hardcoded=False)` with the whole code of a
    wrong answer, or `mutant(question, hint, (old, new), ...)`, which makes one from the question's solution
    by textual changes (each `old` must occur in it)."""
    master = read_master(SOLUTIONS / f"{name}.md")
    answers = {}

    def wrong(question, source, hint=None, hardcoded=False):
        answers.setdefault(question, []).append(Planted(source.strip("\n"), hint, hardcoded))

    def mutant(question, hint, *changes):
        code = master.question(question).solution
        for old, new in changes:
            if old not in code:
                raise RuntimeError(f"{master.where}, {question}: {old!r} is not in the solution")
            code = code.replace(old, new)
        answers.setdefault(question, []).append(Planted(code, hint))

    for source in master.hidden_sources("wrong"):
        exec(compile(source, f"{master.where} # WRONG", "exec"), {"wrong": wrong, "mutant": mutant})
    return answers


def assign(name: str, workdir: str | Path, run_tests: bool = True, in_process: bool = False) -> Path:
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


def student_notebook(name: str, dist: str | Path) -> str:
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


def write_zip(source: str | Path, target: str | Path, extra: dict | None = None) -> None:
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


def export(name: str, dist: str | Path, exercises: str | Path = EXERCISES, autograder: str | Path = AUTOGRADER) -> None:
    """Write the student notebook and the autograder zip of one exercise out of its `otter assign` folder."""
    exercises, autograder = Path(exercises), Path(autograder)
    exercises.mkdir(parents=True, exist_ok=True)
    autograder.mkdir(parents=True, exist_ok=True)
    (exercises / f"{name}.ipynb").write_text(student_notebook(name, dist))
    [zip_path] = (Path(dist) / "autograder").glob("*.zip")
    grading = Path(dist) / "grading"
    write_zip(zip_path, autograder / f"{name}.zip", {f"grading/{p.name}": p for p in grading.iterdir()})


def build(
    name: str,
    workdir: str | Path,
    exercises: str | Path = EXERCISES,
    autograder: str | Path = AUTOGRADER,
    run_tests: bool = True,
    in_process: bool = False,
) -> Path:
    """Assign and export one exercise; return the `otter assign` folder (its autograder/ holds the solved notebook)."""
    dist = assign(name, workdir, run_tests, in_process)
    export(name, dist, exercises, autograder)
    return dist


def main(argv: list[str] | None = None) -> None:
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
