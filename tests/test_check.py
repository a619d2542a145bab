"""A learner's install and `python -m book.check`: the README's Linux command names PyTorch's CPU index, the
self-check names a torch that cannot import in one line with its fix, and the versions it compares against
are the pins."""

import ast
import json
import os
import re
import subprocess
import sys
import tomllib

import jupytext
import pytest

from book import check
from tools.notebooks import ROOT

CUDNN = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"


def pins():
    return dict(re.findall(r"^([\w.-]+)==([\w.+-]+)$", (ROOT / "requirements.txt").read_text(), re.M))


def test_the_printed_with_versions_are_the_pins():
    have = pins()
    for name in ("torch", "numpy", "matplotlib"):
        assert check.PRINTED_WITH[name] == have[name], name
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert runtime == f"python-{check.PRINTED_WITH['python']}"


def test_the_declared_lower_bounds_are_versions_the_course_ran_with():
    """pyproject's ranges start no lower than what was run: its Python and each dependency's lower bound
    is the pinned version's minor, so nothing older that was never tried is promised."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    low = re.match(r">=(\d+\.\d+)", project["requires-python"]).group(1)
    assert low == check.PRINTED_WITH["python"]
    assert check.SUPPORTED_PYTHON[0] == tuple(int(x) for x in low.split("."))
    major, below = map(int, re.search(r"<(\d+)\.(\d+)", project["requires-python"]).groups())
    assert check.SUPPORTED_PYTHON[1] == (major, below - 1)  # the highest Python tried is the highest declared
    have = pins()
    for dep in project["dependencies"]:
        name, bound = re.match(r"([\w-]+)>=([\d.]+)", dep).groups()
        assert have[name].startswith(bound + ".") or have[name] == bound, (dep, have[name])


def test_the_code_is_within_the_declared_lowest_python():
    """What the code uses is not newer than requires-python's lower bound: every .py file of the repository
    and every code cell of the chapters and exercise masters parses as that Python's grammar (a 3.12 `type`
    alias or generic `def f[T]` fails on a newer interpreter too), and ruff lints against the same version
    (it takes requires-python when [tool.ruff] names no target-version)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    low = tuple(int(x) for x in re.match(r">=(\d+)\.(\d+)", config["project"]["requires-python"]).groups())
    assert "target-version" not in config["tool"]["ruff"] or config["tool"]["ruff"]["target-version"] == "py%d%d" % low
    sources = {
        str(p.relative_to(ROOT)): p.read_text()
        for folder in ("book", "tools", "tests", "_ext")
        for p in (ROOT / folder).rglob("*.py")
    }
    for page in [*(ROOT / "chapters").glob("*.md"), *(ROOT / "solutions").glob("*.md")]:
        for i, cell in enumerate(jupytext.read(page).cells):
            if cell.cell_type == "code":
                sources[f"{page.name} cell {i}"] = "\n".join(
                    line for line in cell.source.splitlines() if not line.lstrip().startswith(("!", "%"))
                )
    assert len(sources) > 200
    newer = []
    for where, source in sources.items():
        try:
            ast.parse(source, feature_version=low)
        except SyntaxError as e:
            newer.append(f"{where}: {e}")
    assert not newer, newer
    with pytest.raises(SyntaxError):  # the check can fail: syntax of a later Python is refused
        ast.parse("type Pair = tuple[int, int]", feature_version=low)


def test_the_readme_linux_command_takes_the_cpu_build():
    readme = (ROOT / "README.md").read_text()
    linux = next(line for line in readme.splitlines() if line.startswith("| Linux |"))
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in linux and "requirements.txt" in linux
    assert "python -m book.check" in readme
    assert check.CPU_INDEX in check.TORCH_FIX and "--force-reinstall" in check.TORCH_FIX


def test_a_cuda_build_without_its_libraries_is_one_line_with_the_fix():
    good, line = check.torch_problem(CUDNN)
    assert not good and "\n" not in line
    assert line.startswith("problem: torch does not import") and "CUDA build" in line
    assert line.endswith(f"fix: {check.TORCH_FIX}")


def test_the_command_reports_a_torch_that_cannot_import_without_a_traceback(tmp_path):
    """A torch whose import fails as PyPI's Linux wheel does when installed with --no-deps (the libcudnn
    error, raised by a stand-in package first on the path): one problem line, exit 1, no traceback."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(f"raise ImportError({CUDNN.removeprefix('ImportError: ')!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "book.check"], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    problems = [line for line in done.stdout.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1 and "libcudnn.so.9" in problems[0] and check.TORCH_FIX in problems[0]


def test_the_command_passes_here():
    done = subprocess.run([sys.executable, "-m", "book.check"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout
    assert all(line.startswith("ok: ") for line in done.stdout.splitlines()[:-1]), done.stdout
    assert done.stdout.splitlines()[-1] == "all ok"


def test_a_python_outside_the_range_and_a_missing_package_are_problems():
    good, line = check.check_python((3, 10, 4))
    assert not good and "3.10.4" in line and "fix:" in line
    assert check.check_python((3, 13, 0))[0]
    lines = check.check_packages(lambda dist: None if dist == "jupytext" else "1.0")
    assert [good for good, _ in lines].count(False) == 1
    assert any("jupytext is not installed" in line for _, line in lines)


def test_a_version_other_than_the_pins_is_named_and_judged_by_what_was_tried():
    """A Python, torch or numpy on which the newer-stack run found every figure the same is ok and says so;
    an untried torch is a problem naming the pinned version and its fix; an untried numpy is noted."""
    assert "every figure was the same on 3.13" in check.check_python((3, 13, 0))[1]
    assert check.check_python((3, 11, 7)) == (True, "ok: Python 3.11.7")

    class Done:
        def __init__(self, version):
            self.stdout = json.dumps(
                {"version": version, "cuda": "13.2", "path": "AVX2", "threads": 1, "cache": "/c", "trained": True}
            )
            self.stderr = ""

    tried = check.check_torch(lambda: Done(check.SAME_FIGURES_ON["torch"][0] + "+cu132"))
    assert all(good for good, _ in tried) and "every printed figure was the same" in tried[1][1]
    untried = check.check_torch(lambda: Done("9.0.0+cu132"))
    assert [good for good, _ in untried] == [True, False, True]
    assert "torch 9.0.0 is not " + check.PRINTED_WITH["torch"] in untried[1][1] and check.TORCH_FIX in untried[1][1]
    assert check.check_torch(lambda: Done(check.PRINTED_WITH["torch"] + "+cpu"))[1] == (
        True,
        "ok: the tiny model is trained, in /c",
    )
    numpy = dict(zip(check.NEEDED, check.check_packages(lambda dist: "9.0.0")))["numpy"][1]
    assert (
        numpy
        == "ok: numpy 9.0.0 (not the pinned "
        + check.PRINTED_WITH["numpy"]
        + ", with which the pages were printed; not tried)"
    )


def test_every_lesson_points_to_the_self_check_before_it_starts():
    """Issue 34: the README and each chapter's *Before you start* name `python -m book.check`, the first thing a
    learner on their own machine runs (and pastes into a question)."""
    from tools import built_site

    missing = []
    for page in built_site.toc_pages():
        source = built_site.source_of(page)
        if not source.parent.name == "chapters" or source.stem.endswith("_lab"):
            continue
        text = source.read_text()
        start = text.find("**Before you start.**")
        paragraph = text[start : text.find("\n\n", start)] if start >= 0 else ""
        if "python -m book.check" not in paragraph:
            missing.append(source.name)
    assert not missing, f"no `python -m book.check` in the Before you start of {missing}"
    assert "python -m book.check" in (ROOT / "README.md").read_text()
