"""Write the notebooks that the Colab buttons open: `python -m tools.colab` (also run by `make exercises`
and `make golden`).

Colab reads `.ipynb` files from the repository, not the Jupytext `.md` chapters, and it has neither the
course package nor otter-grader. So for every chapter page of _toc.yml this writes
`notebooks/<page>.ipynb`, and for every exercise `notebooks/exercises/<name>.ipynb`: the same cells,
with MyST roles Colab cannot render turned into plain text, after a first cell that installs the course
package (and, for an exercise, otter-grader and the exercise's own file, which holds its checks) when
`book` is missing. It leaves Colab's own PyTorch, NumPy and Matplotlib alone (`--no-deps`); `python -m
book.check` then says how they differ from the pins. `COURSE_SOURCE` (a folder or a pip address) replaces
the repository's address, for a test run away from GitHub. tests/test_colab.py checks the files are in
sync with their sources.
"""

from __future__ import annotations

import re
import sys

import jupytext
import nbformat
import yaml

from tools.notebooks import CHAPTERS, ROOT, chapter_names

OUT = ROOT / "notebooks"
EXERCISES = ROOT / "exercises"
OTTER = "otter-grader==7.0.0"


def repository():
    """(owner/repo, branch) from _config.yml, the one place a fork changes them."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"].rstrip("/").removesuffix(".git")
    return url.removeprefix("https://github.com/"), config["repository"].get("branch", "main")


def setup_cell(exercise: str | None = None) -> str:
    """The first cell: install what is missing, from the repository (or COURSE_SOURCE)."""
    repo, branch = repository()
    lines = [
        "# Colab or any hosted notebook: install the course package if it is missing.",
        "# Your PyTorch, NumPy and Matplotlib stay as they are (--no-deps); run",
        "# `!python -m book.check` to see how they differ from the course's versions.",
        "import importlib.util, os, shutil, subprocess, sys, urllib.request",
        "",
        f'SOURCE = os.environ.get("COURSE_SOURCE", "https://github.com/{repo}")',
        f'BRANCH = "{branch}"',
        'pip = [sys.executable, "-m", "pip", "install", "-q"]',
        'if importlib.util.find_spec("book") is None:',
        '    where = SOURCE if os.path.isdir(SOURCE) else f"git+{SOURCE}@{BRANCH}"',
        '    subprocess.run([*pip, "--no-deps", where], check=True)',
        "    importlib.invalidate_caches()",
    ]
    if exercise:
        lines += [
            'if importlib.util.find_spec("otter") is None:',
            f'    subprocess.run([*pip, "{OTTER}"], check=True)',
            f'NAME = "{exercise}.ipynb"  # its file holds the checks grader.check runs',
            "if not os.path.exists(NAME):",
            "    if os.path.isdir(SOURCE):",
            '        shutil.copy(os.path.join(SOURCE, "exercises", NAME), NAME)',
            "    else:",
            '        raw = SOURCE.replace("github.com", "raw.githubusercontent.com")',
            '        urllib.request.urlretrieve(f"{raw}/{BRANCH}/exercises/{NAME}", NAME)',
        ]
    return "\n".join(lines)


ROLE = re.compile(r"\{(term|ref|doc|numref|download)\}`([^`<]*?)\s*(?:<[^`>]*>)?`")
CITE = re.compile(r"\{cite(?::\w+)?\}`([^`]*)`")
LABEL = re.compile(r"^\([\w-]+\)=\s*\n", re.M)


def plain(markdown: str) -> str:
    """MyST roles and labels as Colab's Markdown can show them."""
    markdown = ROLE.sub(lambda m: m.group(2) or "", markdown)
    markdown = CITE.sub(lambda m: "(" + ", ".join(k.strip() for k in m.group(1).split(",")) + ")", markdown)
    return LABEL.sub("", markdown)


def with_setup(nb, source: str):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["colab-setup"]
    cell.pop("id", None)
    nb.cells.insert(0, cell)
    for i, c in enumerate(nb.cells):
        c["id"] = f"cell-{i}"
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
        else:
            c.source = plain(c.source)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "colab": {"provenance": []},
        **(
            {"otter": nb.metadata["otter"], "course_hints": nb.metadata.get("course_hints", {})}
            if "otter" in nb.metadata
            else {}
        ),
    }
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def chapter_notebook(name: str):
    return with_setup(jupytext.read(CHAPTERS / f"{name}.md"), setup_cell())


def exercise_notebook(name: str):
    return with_setup(nbformat.read(EXERCISES / f"{name}.ipynb", as_version=4), setup_cell(name))


def expected() -> dict:
    """Every file this writes, relative to notebooks/, with its text."""
    files = {f"{name}.ipynb": chapter_notebook(name) for name in chapter_names()}
    files |= {f"exercises/{p.stem}.ipynb": exercise_notebook(p.stem) for p in sorted(EXERCISES.glob("*.ipynb"))}
    return {path: nbformat.writes(nb) + "\n" for path, nb in files.items()}


def main() -> int:
    files = expected()
    for old in OUT.rglob("*.ipynb") if OUT.exists() else []:
        if str(old.relative_to(OUT)) not in files:
            old.unlink()
    for path, text in files.items():
        target = OUT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    print(f"wrote {len(files)} notebooks into notebooks/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
