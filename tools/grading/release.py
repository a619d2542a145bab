"""Write the student release of the course: what learners of a graded class may see, nothing more.

    python -m tools.grading.release OUT_FOLDER
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
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

from tools.exercises.master import read_master

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTOR_ONLY = ("solutions/", "autograder/", "tests/", "tools/", ".ci/")


def tracked_files() -> list[str]:
    """The files git tracks, relative to the repository (the release never takes an untracked file)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def release_files() -> list[str]:
    return [p for p in tracked_files() if not p.startswith(INSTRUCTOR_ONLY) and (ROOT / p).is_file()]


def squeeze(text: str) -> str:
    """The text without any white space, so that a statement matches however it is wrapped or indented."""
    return re.sub(r"\s+", "", text)


def statements(source: str) -> list[tuple[int, int, str]]:
    """[(first row, last row, code)] of each logical line of Python source: a statement with its
    continuation lines (a call split over five lines is one statement), without its comments. Source
    that does not tokenize (an IPython magic) falls back to its physical lines."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    found, pieces, first, last = [], [], None, None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NEWLINE and pieces:
                found.append((first, tok.start[0], " ".join(pieces)))
                pieces, first = [], None
            elif tok.type not in skip:
                first, last = first or tok.start[0], tok.end[0]
                pieces.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [(n, n, line) for n, line in enumerate(source.splitlines(), start=1)]
    if pieces:  # a last statement with no NEWLINE token after it
        found.append((first, last, " ".join(pieces)))
    return found


def master_secrets(master: str | Path, min_length: int = 16) -> tuple[set[str], set[str]]:
    """(solution statements, hidden statements) of one master in solutions/, squeezed: the code between
    `# BEGIN SOLUTION` and `# END SOLUTION`, and every statement of the hidden blocks (`# BEGIN HIDDEN` to
    `# END HIDDEN`), as tools/exercises/master.py reads them. Short ones, imports, definitions' first lines and bare
    returns are left out (they are not specific to a solution)."""
    solution, hidden = set(), set()
    for cell in read_master(master).cells:
        if cell.marker in ("# BEGIN HIDDEN", "# END HIDDEN"):
            continue
        for first, _, code in statements(cell.source):
            text = squeeze(code)
            if len(text) < min_length or code.startswith(("import ", "from ", "def ", "return ", '"""')):
                continue
            if cell.hidden:
                hidden.add(text)
            elif first in cell.solution_rows:
                solution.add(text)
    return solution, hidden


def public_text() -> str:
    """Everything learners are shown in the open (the chapters and the `book/` package), squeezed."""
    return squeeze(
        "\n".join(
            p.read_text() for p in [*sorted((ROOT / "chapters").glob("*.md")), *sorted((ROOT / "book").rglob("*.py"))]
        )
    )


def secret_lines(min_length: int = 16) -> set[str]:
    """Statements that must never reach learners: each solution's code and each hidden probe or check, from
    the masters in solutions/, squeezed. One that the chapters or the `book/` package already show
    (`torch.manual_seed(seed)`, the chapter's own top-p code) is taught in the open, not a secret."""
    public = public_text()
    secrets = set()
    for master in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.md")):
        solution, hidden = master_secrets(master, min_length)
        secrets |= solution | hidden
    return {s for s in secrets if s not in public}


def file_text(path: str | Path) -> str | None:
    """A file's text as a reader of it sees it, squeezed: a notebook's every string (cell sources, and otter's
    tests kept in the metadata), unescaped from the JSON; any other file as it is. None for a binary file."""
    try:
        text = Path(path).read_text()
    except (UnicodeDecodeError, OSError):
        return None
    if Path(path).suffix == ".ipynb":

        def strings(node):
            if isinstance(node, str):
                yield node
            elif isinstance(node, list):
                for item in node:
                    yield from strings(item)
            elif isinstance(node, dict):
                for item in node.values():
                    yield from strings(item)

        try:
            text = "\n".join(strings(json.loads(text)))
        except json.JSONDecodeError:
            pass
    return squeeze(text)


def leaks(folder: str | Path) -> list[tuple[str, str]]:
    """[(file, statement)] of every secret statement found in a text file under `folder`."""
    secrets = secret_lines()
    found = []
    for path in sorted(Path(folder).rglob("*")):
        text = file_text(path) if path.is_file() else None
        if text:
            found += [(str(path.relative_to(folder)), s) for s in sorted(secrets) if s in text]
    return found


def write_release(out: str | Path) -> list[str]:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write the release into (new or empty, outside the repository)")
    args = parser.parse_args(argv)
    files = write_release(args.out)
    print(
        f"wrote the student release to {args.out}: {len(files)} files, without "
        f"{', '.join(p.rstrip('/') for p in INSTRUCTOR_ONLY)}"
    )


if __name__ == "__main__":
    sys.exit(main())
