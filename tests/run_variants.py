"""Run tools/grade_runner.py on several trusted notebooks of one exercise, fast, for tests/test_exercises.py.

    python tests/run_variants.py PROBES.py OUT_DIR TIMEOUT NOTEBOOK.ipynb [NOTEBOOK.ipynb ...]

The notebooks graded by test_exercises.py are ours (the solution, the blank student copy,
planted wrong answers), not learners', so they need no sandbox: this process imports
numpy, torch and book once, then forks one child per notebook, which runs the grader's own
runner and writes what it prints to OUT_DIR/<notebook stem>.out (the first notebook's run
also prints the arguments of each probe, as the reference run does). The sandbox itself
is tested by tests/test_grading_attacks.py.
"""
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import numpy  # noqa: E402,F401  imported once, shared by every child
import torch  # noqa: E402

import book  # noqa: E402,F401
import book.tiny  # noqa: E402,F401
import grade_runner  # noqa: E402

torch.set_num_threads(1)


def main(probes, out_dir, timeout, notebooks):
    for k, notebook in enumerate(notebooks):
        out = Path(out_dir) / f"{Path(notebook).stem}.out"
        pid = os.fork()
        if pid == 0:
            try:
                fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                grade_runner.main(notebook, probes, with_args=(k == 0))
            finally:
                os._exit(1)
        deadline = time.monotonic() + timeout
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:])
