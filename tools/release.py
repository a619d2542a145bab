"""Write the student release of the course: what learners of a graded class may see, nothing more.

    python tools/release.py OUT_FOLDER
    make release OUT=../course-release

The release is every file the repository tracks except the instructor's: `solutions/` (the
masters, with the solutions and the hidden probes and checks), `autograder/` (the hidden
inputs, the checks and the solved notebook), `tests/` (which plant wrong answers and read
the masters), `tools/` (the grader and the exercise builder) and `.ci/`. It keeps the
chapters, the student notebooks in `exercises/`, the `book/` package, the site's
configuration and `binder/`, so that `make book` and the Binder buttons work from it. An
instructor publishes it (privately, for a graded class) and points `_config.yml`'s
`repository.url` at it, so the Binder links open the release, not this repository.

The script refuses to write into a folder that is not empty, and checks what it wrote: no
line of a solution and no hidden probe or check may appear in any file of the release.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTOR_ONLY = ("solutions/", "autograder/", "tests/", "tools/", ".ci/")


def tracked_files():
    """The files git tracks, relative to the repository (the release never takes an untracked file)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def release_files():
    return [p for p in tracked_files() if not p.startswith(INSTRUCTOR_ONLY) and (ROOT / p).is_file()]


def secret_lines(min_length=16):
    """Lines that must never reach learners: each solution's code and each hidden probe or check, from the
    masters in solutions/ (long enough to be specific; imports and bare keywords are left out). A line that the
    chapters or the `book/` package already show (`torch.manual_seed(seed)`, the chapter's own top-p code) is
    taught in the open, not a secret."""
    public = "\n".join(p.read_text() for p in [*sorted((ROOT / "chapters").glob("*.md")),
                                               *sorted((ROOT / "book").rglob("*.py"))])
    lines = set()
    for master in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.md")):
        nb = jupytext.read(master)
        in_hidden = False
        for cell in nb.cells:
            marker = cell.source.strip() if cell.cell_type == "raw" else ""
            if marker in ("# BEGIN HIDDEN", "# END HIDDEN"):
                in_hidden = marker == "# BEGIN HIDDEN"
                continue
            in_solution = False
            for line in cell.source.splitlines():
                text = line.strip()
                if text == "# END SOLUTION":
                    in_solution = False
                if (in_hidden or in_solution) and len(text) >= min_length and not text.startswith(
                        ("import ", "from ", "#", '"""', "def ", "return ")):
                    lines.add(text)
                if text == "# BEGIN SOLUTION":
                    in_solution = True
    return {line for line in lines if line not in public}


def leaks(folder):
    """[(file, line)] of every secret line found in a text file under `folder`."""
    secrets = secret_lines()
    found = []
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for line in secrets:
            if line in text or line.replace('"', '\\"') in text:
                found.append((str(path.relative_to(folder)), line))
    return found


def write_release(out):
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty: give a new or empty folder for the release")
    if out == ROOT or ROOT in out.parents:
        raise SystemExit(f"{out} is inside the repository: give a folder outside it")
    files = release_files()
    for rel in files:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    found = leaks(out)
    if found:
        shutil.rmtree(out)
        where = "; ".join(f"{f}: {line[:60]}" for f, line in found[:3])
        raise SystemExit(f"the release would leak solution or hidden-test lines ({where}); nothing written")
    return files


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write the release into (new or empty, outside the repository)")
    args = parser.parse_args(argv)
    files = write_release(args.out)
    print(f"wrote the student release to {args.out}: {len(files)} files, without "
          f"{', '.join(p.rstrip('/') for p in INSTRUCTOR_ONLY)}")


if __name__ == "__main__":
    sys.exit(main())
