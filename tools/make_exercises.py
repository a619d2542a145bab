"""Regenerate the student notebooks (exercises/) and the autograder zips (autograder/) from solutions/.

Each `solutions/NN_slug.md` is an otter-grader master notebook written as Jupytext
MyST. For each one this script converts it to a notebook in a temporary folder,
runs `otter assign` (which also runs every test against the solutions and fails
if one does not pass), then copies out:

- `exercises/NN_slug.ipynb`: the student copy, with the public tests only;
- `autograder/NN_slug.zip`: the tests, hidden ones included, for `tools/grade.py`.

Both outputs are normalised (cell ids, zip timestamps) so that regenerating
from unchanged masters gives byte-identical files. Usage (or `make exercises`):

    python tools/make_exercises.py               # every exercise
    python tools/make_exercises.py 02_causal_mask  # one exercise
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
AUTOGRADER = ROOT / "autograder"
OTTER = [sys.executable, "-m", "otter"]
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # a fixed timestamp for every zip entry


def exercise_names():
    """Every exercise, by the file stem of its master (e.g. '01_next_token_prediction'), in order."""
    return sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]_*.md"))


def assign(name, workdir, run_tests=True):
    """Run `otter assign` on one master; return the output folder (with `student/` and `autograder/`).

    With `run_tests`, otter also runs every test against the solutions and fails if one does not pass
    (`make exercises` always does; the test suite grades the solutions itself and skips it).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    master = workdir / f"{name}.ipynb"
    nbformat.write(jupytext.read(SOLUTIONS / f"{name}.md"), master)
    dist = workdir / "dist"
    options = [] if run_tests else ["--no-run-tests"]
    run = subprocess.run([*OTTER, "assign", *options, master.name, dist.name], cwd=workdir,
                         capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        log = [ln for ln in (run.stdout + run.stderr).splitlines() if "IPKernelApp" not in ln]
        raise RuntimeError(f"otter assign failed for solutions/{name}.md:\n" + "\n".join(log[-25:]))
    return dist


def student_notebook(name, dist):
    """The student copy, with ids that do not change from one regeneration to the next."""
    nb = nbformat.read(Path(dist) / "student" / f"{name}.ipynb", as_version=4)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"
    nb.metadata.pop("jupytext", None)
    return nbformat.writes(nb) + "\n"


def write_zip(source, target):
    """Copy a zip with its entries sorted and every timestamp fixed, so equal content gives equal bytes."""
    with zipfile.ZipFile(source) as src:
        entries = sorted((info.filename, src.read(info)) for info in src.infolist() if not info.is_dir())
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
    write_zip(zip_path, autograder / f"{name}.zip")


def build(name, workdir, exercises=EXERCISES, autograder=AUTOGRADER, run_tests=True):
    """Assign and export one exercise; return the `otter assign` folder (its autograder/ holds the solved notebook)."""
    dist = assign(name, workdir, run_tests)
    export(name, dist, exercises, autograder)
    return dist


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="exercises to rebuild (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="exercises built at the same time")
    args = parser.parse_args(argv)
    names = args.names or exercise_names()
    unknown = [n for n in names if not (SOLUTIONS / f"{n}.md").exists()]
    if unknown:
        sys.exit(f"no master for {', '.join(unknown)} in solutions/")
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
