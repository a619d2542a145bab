"""The chapters print the same figures whatever the number of threads.

The nbval run of the goldens uses the machine's default thread count; this runs the
same comparison again with one thread for numpy's BLAS and torch, so an output that
depends on how a sum is split across threads fails here. Each worker uses one thread,
so the chapters run as many at a time as the machine has cores (pytest-xdist, with
`--dist loadfile` keeping a notebook's cells in one kernel): the check costs the wall
time of the goldens divided by the core count, not twice the suite.
"""
import os
import subprocess
import sys

from notebooks import GOLDEN, ROOT


def test_goldens_match_on_one_thread():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    workers = str(max(1, min(os.cpu_count() or 1, 4)))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers,
                          "--dist", "loadfile", str(GOLDEN)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:]
    assert " passed" in run.stdout and "no tests ran" not in run.stdout, run.stdout[-2000:]
