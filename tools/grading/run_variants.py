"""Run tools/grading/grade_runner.py on many trusted notebooks, fast, for tests/test_exercises.py.

    python -m tools.grading.run_variants JOBS.json

JOBS.json lists runs `{"probes": PROBES.py, "notebook": NB.ipynb, "out": OUT, "with_args": bool}`.
The notebooks graded by test_exercises.py are ours (solutions, blank student copies,
planted wrong answers), not learners', so they need no sandbox: this process imports
numpy, torch and book once, then forks one child per run, two at a time, which runs the
grader's own runner and writes what it prints to OUT. A child that takes longer than the
time limit is killed (its OUT then lacks the final "done" line). The sandbox itself is
tested by tests/test_grading_attacks.py.

With RUN_VARIANTS_TIMES=FILE in the environment, each run's wall seconds and notebook are appended to FILE,
slowest first (to find the planted answers that cost the suite its time).
"""

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

import numpy  # noqa: E402,F401  imported once, shared by every child
import torch  # noqa: E402
import torch._dynamo  # noqa: E402,F401  what torch.optim's first optimizer imports: 2-4 s a run, once here

import book  # noqa: E402,F401
import book.tiny  # noqa: E402,F401
from tools.grading import grade_runner  # noqa: E402
from tools.grading.sandbox import MEMORY_BYTES  # noqa: E402

torch.set_num_threads(1)
PARALLEL = 2
TIMEOUT = 120  # seconds per run


def _address_space():
    """The bytes of address space this process holds now (torch and numpy imported)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def start(job):
    pid = os.fork()
    if pid == 0:
        try:
            # the grader's sandbox caps a run at MEMORY_BYTES; here the cap comes on top of what the run starts
            # with (torch imported): a planted answer that builds an array of every step fails at once with
            # MemoryError, not after filling the machine's memory, which slowed the suite's other worker
            limit = _address_space() + MEMORY_BYTES
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            fd = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.chdir(Path(job["out"]).parent)
            grade_runner.main(job["notebook"], job["probes"], with_args=job.get("with_args", False))
        finally:
            os._exit(1)
    return pid


def main(spec):
    pending = list(json.loads(Path(spec).read_text()))
    running = {}  # pid -> (deadline, job, start)
    times = []  # (seconds, notebook) of each run, for RUN_VARIANTS_TIMES
    while pending or running:
        while pending and len(running) < PARALLEL:
            job = pending.pop(0)
            running[start(job)] = (time.monotonic() + TIMEOUT, job, time.monotonic())
        for pid, (deadline, job, began) in list(running.items()):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if not done and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                done = True
            if done:
                del running[pid]
                times.append((time.monotonic() - began, job["notebook"]))
        time.sleep(0.005)
    if os.environ.get("RUN_VARIANTS_TIMES"):
        with open(os.environ["RUN_VARIANTS_TIMES"], "a") as f:
            f.writelines(f"{t:7.2f} {nb}\n" for t, nb in sorted(times, reverse=True))


if __name__ == "__main__":
    main(sys.argv[1])
