"""Check that this machine can run the course: python -m book.check

Run it first, and paste what it prints into a question. Each line is `ok: ...` or
`problem: ... fix: ...`; it exits with 1 when any line is a problem. PyTorch is tried in a
child process, so a build that cannot import is reported in one line, not a traceback.
Introduced in each chapter's *Before you start*.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import subprocess
import sys
from pathlib import Path

# The versions the printed figures of the pages were made with; tests/test_check.py checks
# that they are requirements.txt's pins and binder/runtime.txt's Python.
PRINTED_WITH = {"python": "3.11", "torch": "2.13.0", "numpy": "2.4.6", "matplotlib": "3.11.2"}
SUPPORTED_PYTHON = ((3, 11), (3, 13))  # lowest and highest minor version tried
# Other versions on which every golden ran under nbval with every printed figure the same, and every Colab
# notebook ran from its install cell (tools/newer_stack.py; the runs are listed in docs/testing.md).
SAME_FIGURES_ON = {"python": ("3.12", "3.13"), "torch": ("2.15.0",), "numpy": ("2.5.5",)}
NEEDED = ("numpy", "matplotlib", "torch")  # what `import book` and the chapters need
FOR_NOTEBOOKS = ("jupytext", "ipykernel")  # to open the .md chapters as notebooks
FOR_EXERCISES = ("otter-grader",)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_FIX = f"pip install --force-reinstall --no-deps torch=={PRINTED_WITH['torch']} --index-url {CPU_INDEX}"
DATA = Path(__file__).with_name("data")

# Run in a child process: what torch says about itself, or the error that stopped its import.
_PROBE = r"""
import json, sys
try:
    import torch
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"})); sys.exit()
out = {"version": torch.__version__, "cuda": torch.version.cuda,
       "path": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}
try:
    from book import tiny
    tok, _ = tiny.corpus()
    cfg = tiny.TinyConfig(vocab=len(tok), causal=True, dtype=tiny.DTYPE)
    key = tiny._run_key(cfg, tiny.STEPS, tiny.SEED)
    out["cache"] = str(tiny.cache_folder())
    out["trained"] = (tiny.cache_folder() / f"tiny-{key}.pt").exists()
except Exception as e:
    out["tiny_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def ok(text: str) -> tuple[bool, str]:
    return True, f"ok: {text}"


def problem(text: str, fix: str) -> tuple[bool, str]:
    return False, f"problem: {text} fix: {fix}"


def version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_python(info=sys.version_info) -> tuple[bool, str]:
    """Python within the range the course was tried on."""
    have = f"{info[0]}.{info[1]}.{info[2]}"
    low, high = SUPPORTED_PYTHON
    if not low <= tuple(info[:2]) <= high:
        return problem(
            f"Python {have} is outside {low[0]}.{low[1]} to {high[0]}.{high[1]}.",
            "install Python 3.11 and make a new virtual environment with it.",
        )
    minor = f"{info[0]}.{info[1]}"
    note = (
        ""
        if minor == PRINTED_WITH["python"]
        else f" (the pages were printed with {PRINTED_WITH['python']}; every figure was the same on {minor})"
        if minor in SAME_FIGURES_ON["python"]
        else f" (the pages were printed with {PRINTED_WITH['python']})"
    )
    return ok(f"Python {have}{note}")


def check_packages(version=version_of) -> list[tuple[bool, str]]:
    """The packages the chapters, notebooks and exercises import, and their versions."""
    lines = []
    for dist in NEEDED + FOR_NOTEBOOKS + FOR_EXERCISES:
        have = version(dist)
        if have is None:
            why = (
                "the chapters import it"
                if dist in NEEDED
                else "it opens the chapters as notebooks"
                if dist in FOR_NOTEBOOKS
                else "the exercises' checks use it"
            )
            fix = TORCH_FIX if dist == "torch" else "pip install --no-deps -r requirements.txt"
            lines.append(problem(f"{dist} is not installed, and {why}.", fix))
        else:
            lines.append(ok(f"{dist} {have}{version_note(dist, have)}"))
    return lines


def version_note(dist: str, have: str) -> str:
    """For numpy and matplotlib: whether a version other than the pin was tried with the printed figures."""
    pinned = PRINTED_WITH.get(dist)
    if dist == "torch" or pinned is None or have == pinned:
        return ""  # torch's version is judged once it has imported (check_torch)
    if have in SAME_FIGURES_ON.get(dist, ()):
        return f" (not the pinned {pinned}, but every printed figure was the same with it)"
    return f" (not the pinned {pinned}, with which the pages were printed; not tried)"


def torch_problem(error: str) -> tuple[bool, str]:
    """One line for a torch that does not import: the CUDA build without its libraries, or else."""
    if any(
        lib in error
        for lib in (
            "libcudnn",
            "libcublas",
            "libcuda",
            "libnvrtc",
            "libcusparse",
            "libnccl",
            "libnvJitLink",
            "libcufft",
            "libcurand",
        )
    ):
        return problem(
            f"torch does not import: {error.splitlines()[0][:120]}. This is PyPI's "
            "CUDA build installed without its CUDA libraries (pip --no-deps); the "
            "course runs on the CPU.",
            TORCH_FIX,
        )
    return problem(f"torch does not import: {error.splitlines()[0][:160]}", TORCH_FIX)


def check_torch(run=None) -> list[tuple[bool, str]]:
    """Whether torch imports, its version and CPU code path, and whether the tiny models are ready."""
    run = run or (lambda: subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300))
    try:
        done = run()
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return [problem("importing torch took over 5 minutes.", "check the disk and reinstall torch.")]
    except (IndexError, json.JSONDecodeError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [torch_problem(last)]
    if "error" in info:
        return [torch_problem(info["error"])]
    build = f"CUDA {info['cuda']} build; the course runs on the CPU" if info["cuda"] else "CPU build"
    lines = [ok(f"torch {info['version']} imports ({build}), CPU code path {info['path']}, {info['threads']} threads")]
    base = info["version"].split("+")[0]
    if base in SAME_FIGURES_ON["torch"]:
        lines.append(
            ok(
                f"torch {base} is not {PRINTED_WITH['torch']}, with which the pages were printed, but every "
                "printed figure was the same with it"
            )
        )
    elif base != PRINTED_WITH["torch"]:
        lines.append(
            problem(
                f"torch {base} is not {PRINTED_WITH['torch']}, with which the pages were printed: the "
                "chapters run, but a figure from the trained models may differ in its last digits, and "
                "a cell that checks one would then say so.",
                f"to see exactly the printed figures, {TORCH_FIX}",
            )
        )
    if "tiny_error" in info:
        lines.append(
            problem(
                f"the course's tiny model cannot be set up: {info['tiny_error'][:160]}",
                "reinstall the course package: pip install -e .",
            )
        )
    elif info["trained"]:
        lines.append(ok(f"the tiny model is trained, in {info['cache']}"))
    else:
        lines.append(
            ok(
                f"the tiny model is not trained yet: the first chapter that needs it trains "
                f"it in a few seconds and keeps it in {info['cache']}"
            )
        )
    return lines


def check_data() -> tuple[bool, str]:
    """The course package's data files: the training text, the shipped run, the source figures."""
    wanted = [DATA / "robot_text.txt", DATA / "tiny_unmasked.pt", DATA / "source_figures"]
    missing = [p.name for p in wanted if not p.exists()]
    if missing:
        return problem(
            f"the course package lacks {', '.join(missing)} (in {DATA}).",
            "install the course from its repository: pip install --no-deps -e .",
        )
    return ok(f"the course package is at {Path(__file__).parent}, with its data")


def report(lines: list[tuple[bool, str]]) -> int:
    for _, line in lines:
        print(line)
    problems = sum(not good for good, _ in lines)
    print(f"{problems} problem{'s' if problems != 1 else ''}" if problems else "all ok")
    return 1 if problems else 0


def main() -> int:
    lines = [check_python(), check_data(), *check_packages(), *check_torch()]
    return report(lines)


if __name__ == "__main__":
    sys.exit(main())
