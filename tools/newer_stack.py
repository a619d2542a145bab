"""The course on a newer stack: `make newer-stack` (or python -m tools.newer_stack [--python 3.13] [--venv DIR]).

For a maintainer bumping the pins; it downloads several GB (PyPI's newest PyTorch comes with its CUDA
libraries, and runs on the CPU), so it is not part of `make test`. In a virtual environment of a newer
Python holding only what a hosted notebook such as Colab starts with (the newest torch, numpy, matplotlib,
ipykernel), it

1. runs every Colab notebook of notebooks/ in an empty folder, from its own first cell, which installs the
   course package from this checkout (COURSE_SOURCE) exactly as it would from GitHub on Colab;
2. runs the goldens of tests/golden/ under nbval there, in a one-thread kernel, and lists every cell that
   prints otherwise than the golden, with the first differing line.

It prints a report, then a short summary to paste into the closing note or docs/testing.md (the stack's
versions; page notebooks run; goldens passed and differing; exercise notebooks run and failed), and writes
both to _build/newer-stack.txt. pip's own configuration is ignored (PIP_CONFIG_FILE=/dev/null), so a local
wheel cache or cap does not stand in for PyPI. `--skip-notebooks` and `--skip-goldens` run one half. When
no cell differs, add the versions to `SAME_FIGURES_ON` in book/check.py and the summary to docs/testing.md.

`--pins 3.11 3.12 3.13` instead asks pip, on each of those Pythons, whether requirements.txt's learner set
installs from PyPI as wheels (`pip install --dry-run --no-deps --only-binary :all:`, the README's command
without the CPU index, which this machine cannot reach; it downloads each wheel, torch's 0.5 GB included).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTED = ["torch", "numpy", "matplotlib", "ipykernel", "nbclient", "nbformat", "nbval", "pytest"]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def find_python(version: str) -> str:
    """An interpreter of that version: pyenv's (X.Y.Z, or the newest X.Y.*), else one on the PATH that runs."""
    pyenv = Path.home() / ".pyenv" / "versions"
    exact = pyenv / version / "bin" / "python"
    found = (
        [exact]
        if exact.exists()
        else sorted(
            pyenv.glob(f"{version}.*/bin/python"),
            key=lambda p: [int(x) if x.isdigit() else -1 for x in p.parts[-3].split(".")],
        )
    )
    for candidate in [*map(str, found[-1:]), shutil.which(f"python{version}")]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    sys.exit(f"no Python {version} found (install it, or pass --python with another version)")


def run(cmd, **kw):
    print("$", " ".join(map(str, cmd)), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def prepare(venv: Path, python: str, env: dict) -> Path:
    py = venv / "bin" / "python"
    if not py.exists():
        run([python, "-m", "venv", str(venv)])
    run([py, "-m", "pip", "install", "-q", "--upgrade", *HOSTED], env=env)
    run([py, "-m", "pip", "uninstall", "-q", "-y", "book", "otter-grader"], env=env)  # as on Colab
    run([py, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"], env=env)
    return py


def pins_install(pythons: list[str], env: dict) -> list[str]:
    """For each Python, whether the learner set's pins all have wheels it installs (a dry run): one line each."""
    pinned = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if not line.startswith("-e")]
    lines = []
    with tempfile.TemporaryDirectory() as folder:
        wanted = Path(folder) / "requirements.txt"
        wanted.write_text("\n".join(pinned) + "\n")
        for version in pythons:
            python = find_python(version)
            have = subprocess.run(
                [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
            )
            cmd = [python, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed"]
            cmd += ["--only-binary", ":all:", "-r", str(wanted)]
            print("$", " ".join(cmd), flush=True)
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            would = re.search(r"^Would install (.*)$", done.stdout, re.M)
            if done.returncode == 0 and would:
                count = len(would.group(1).split())
                lines.append(f"pins on Python {have.stdout.strip()}: all {count} wheels found (pip --dry-run)")
            else:
                why = (done.stderr.strip().splitlines() or ["no output"])[-1]
                lines.append(f"pins on Python {have.stdout.strip()}: do not install: {why[:200]}")
            print(lines[-1], flush=True)
    return lines


def versions(py: Path) -> str:
    code = (
        "import sys, torch, numpy, matplotlib; print(sys.version.split()[0], torch.__version__, "
        "numpy.__version__, matplotlib.__version__)"
    )
    return subprocess.run([py, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def run_colab_notebooks(py: Path, env: dict) -> list[tuple[str, bool, str]]:
    """Every notebook of notebooks/, alone in an empty folder, run from the top: (path, ran, line) each."""
    code = r"""
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
try:
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
    print("ok")
except Exception as e:
    print("FAILED:", str(e).strip().splitlines()[-1][:300])
"""
    results = []
    for nb in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / nb.name
            shutil.copy(nb, copy)
            out = subprocess.run(
                [py, "-c", code, str(copy), folder],
                capture_output=True,
                text=True,
                env={**env, "COURSE_SOURCE": str(ROOT)},
            ).stdout.strip()
        path = str(nb.relative_to(ROOT / "notebooks"))
        line = f"colab notebooks/{path}: {out.splitlines()[-1] if out else 'no output'}"
        print(line, flush=True)
        results.append((path, out.endswith("ok"), line))
    return results


def run_goldens(py: Path, env: dict) -> tuple[list[str], str]:
    """nbval on every golden, in a one-thread kernel: each cell that prints otherwise (and its first differing
    line), and pytest's last line. The course is installed first, from this checkout, as the notebooks' first
    cell does (prepare() removed it, and --skip-notebooks leaves it out)."""
    run([py, "-m", "pip", "install", "-q", "--no-deps", str(ROOT)], env=env)
    cmd = [
        py,
        "-m",
        "pytest",
        "-q",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--nbval",
        "--nbval-sanitize-with",
        str(ROOT / "tests" / "sanitize.cfg"),
        "--nbval-cell-timeout=900",
        "--nbval-kernel-name",
        "python3",
        *sorted(map(str, (ROOT / "tests" / "golden").glob("*.ipynb"))),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env, **ONE_THREAD}, cwd=ROOT / "chapters")
    differing = []
    for block in re.split(r"\n_{5,} ", done.stdout):
        m = re.match(r"(\S+\.ipynb::Cell \d+)", block)
        if m:
            first = next(
                (l for l in block.splitlines() if l.startswith(("-", "+")) and not l.startswith(("---", "+++"))), ""
            )
            differing.append(f"golden {m.group(1)}: {first[:200]}")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-300:]
    print("goldens:", last)
    return differing, last


def counted(pytest_line: str) -> dict[str, int]:
    """pytest's last line ("2 failed, 281 passed, 1 warning in 75.81s") as counts by outcome."""
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)\b", pytest_line)}


def summary(stack: str, notebooks: list[tuple[str, bool, str]] | None, goldens: tuple[list[str], str] | None) -> str:
    """The lines a maintainer pastes: versions, page notebooks, goldens, exercise notebooks."""
    python, torch, numpy, matplotlib = stack.split()
    lines = [f"newer stack: Python {python}, torch {torch}, numpy {numpy}, matplotlib {matplotlib}"]
    if notebooks is not None:
        for kind, mine in (("page", lambda p: "/" not in p), ("exercise", lambda p: p.startswith("exercises/"))):
            these = [(path, ran) for path, ran, _ in notebooks if mine(path)]
            failed = [path.removeprefix("exercises/") for path, ran in these if not ran]
            lines.append(
                f"{kind} notebooks: {len(these) - len(failed)} of {len(these)} ran from their install cell"
                + (f"; failed: {', '.join(failed)}" if failed else "")
            )
    if goldens is not None:
        differing, last = goldens
        n = counted(last)
        cells = sorted({re.match(r"golden (\S+::Cell \d+)", d).group(1) for d in differing})
        lines.append(
            f"goldens under nbval: {n.get('passed', 0)} passed, {n.get('failed', 0)} differ"
            + (f", {n.get('error', 0) + n.get('errors', 0)} errors" if n.get("error") or n.get("errors") else "")
            + (f" ({', '.join(cells)})" if cells else "")
            + ("" if n else f" (pytest said: {last[:200]})")
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="3.12", help="the newer Python (default 3.12)")
    parser.add_argument(
        "--venv", type=Path, help="the environment to make or reuse (default ~/.cache/transformer-course-newer/pyX.Y)"
    )
    parser.add_argument("--pins", nargs="+", metavar="X.Y", help="only dry-run the learner pins on these Pythons")
    parser.add_argument("--skip-notebooks", action="store_true", help="only the goldens")
    parser.add_argument("--skip-goldens", action="store_true", help="only the Colab notebooks")
    args = parser.parse_args()
    venv = args.venv or Path.home() / ".cache" / "transformer-course-newer" / f"py{args.python}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "BOOK_"))}
    env |= {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "BOOK_CACHE": tempfile.mkdtemp(prefix="newer-stack-cache-"),
    }
    if args.pins:
        lines = pins_install(args.pins, env)
        print("\n".join(lines))
        return 0 if all("all " in line for line in lines) else 1
    py = prepare(venv, find_python(args.python), env)
    stack = versions(py)
    print("stack (python torch numpy matplotlib):", stack, flush=True)
    report = [f"stack (python torch numpy matplotlib): {stack}"]
    notebooks = None if args.skip_notebooks else run_colab_notebooks(py, env)
    report += [line for _, ran, line in notebooks or [] if not ran]
    goldens = None if args.skip_goldens else run_goldens(py, env)
    if goldens:
        report += [*goldens[0], f"goldens: {goldens[1]}"]
    text = "\n".join(report) + "\n\nsummary, to paste:\n" + summary(stack, notebooks, goldens) + "\n"
    out = ROOT / "_build" / "newer-stack.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(text, end="")
    print(f"written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
