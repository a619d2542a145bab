"""What pathological answers cost a batch (issue 35): grade a folder of honest notebooks with three submissions
that forge answers meant to freeze the trusted side (a shape of 600,000 dimensions; 60,000 probe numbers, and
60,000 dict keys, that all collide in Python's hash table), and the same folder with three blank notebooks in
their place, interleaved, and print the batch's time with them against without them.

    .venv/bin/python -m tools.grading.batch_cost [--honest 24] [--rounds 3] [--uncapped-memory]

As an ordinary user without a delegated cgroup the grader refuses to start unless told `--uncapped-memory`;
this tool passes that on (the measurement is of time, not of the memory cap).

Every honest row must get full marks in both batches; the ratio is the promise (within 1.2x).
"""

import argparse
import copy
import csv
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = "09_recap_quiz"
FORGED = {  # name: the records the submission writes where the runner's answers go
    "huge_shape": '[{"probe": 0, "answer": {"ndarray": {"dtype": "float64", "shape": [9] * 600_000, "data": []}}}]',
    "colliding_probes": '[{"probe": k * BIG, "answer": {"int": 1}} for k in range(1, 60_001)]',
    "colliding_keys": '[{"probe": 0, "answer": {"dict": [[{"int": k * BIG}, {"int": 1}] for k in range(1, 60_001)]}}]',
}
FORGE = """import json, os
BIG = 2**61 - 1
records = {records}
lines = "".join(json.dumps(r) + "\\n" for r in records) + '{{"done": true}}\\n'
for fd in range(64):
    try:
        os.write(fd, lines.encode())
    except OSError:
        pass
os._exit(0)
"""


def write_batch(folder, honest, forged):
    """`honest` solved notebooks and the three named ones, forged or left blank."""
    with zipfile.ZipFile(ROOT / "autograder" / f"{EXERCISE}.zip") as z:
        solved = nbformat.reads(z.read("grading/solution.ipynb").decode(), as_version=4)
    blank = nbformat.read(ROOT / "exercises" / f"{EXERCISE}.ipynb", as_version=4)
    folder.mkdir(parents=True)
    for i in range(honest):
        nbformat.write(solved, folder / f"honest_{i}.ipynb")
    for name, records in FORGED.items():
        nb = copy.deepcopy(blank)
        if forged:
            nb.cells.append(nbformat.v4.new_code_cell(FORGE.format(records=records)))
        nbformat.write(nb, folder / f"{name}.ipynb")


def grade_batch(folder, out, uncapped_memory=False):
    """Seconds to grade `folder`, and its rows."""
    started = time.monotonic()
    command = [sys.executable, "-m", "tools.grading.grade", EXERCISE, str(folder), str(out), "--jobs", "2"]
    command += ["--uncapped-memory"] if uncapped_memory else []
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    with open(out, newline="") as f:
        return time.monotonic() - started, list(csv.DictReader(f))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--honest", type=int, default=24, help="honest notebooks in each batch")
    parser.add_argument("--rounds", type=int, default=3, help="batches of each kind, interleaved")
    parser.add_argument(
        "--uncapped-memory",
        action="store_true",
        help="passed to the grader: grade where nothing caps a sandbox's total memory (an ordinary user)",
    )
    args = parser.parse_args(argv)
    seconds = {True: 0.0, False: 0.0}
    with tempfile.TemporaryDirectory(prefix="batch-cost-") as tmp:
        for round_ in range(args.rounds):
            for forged in (False, True):
                base = Path(tmp) / f"{round_}-{forged}"
                write_batch(base / "submissions", args.honest, forged)
                took, rows = grade_batch(base / "submissions", base / "grades.csv", args.uncapped_memory)
                honest = [r for r in rows if r["submission"].startswith("honest_")]
                if len(rows) != args.honest + len(FORGED) or any(r["total"] != r["possible"] for r in honest):
                    sys.exit(f"round {round_}: a row is missing or an honest notebook lost points")
                seconds[forged] += took
                kind = "with the three forged" if forged else "with three blank"
                print(f"round {round_}, {kind}: {took:.1f} s, {len(rows)} rows, every honest one full marks")
    ratio = seconds[True] / seconds[False]
    print(f"batch with the forged answers / without: {seconds[True]:.1f} / {seconds[False]:.1f} s = {ratio:.2f}x")
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
