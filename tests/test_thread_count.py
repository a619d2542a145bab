"""The chapters print the same figures whatever the number of threads.

The nbval run of the goldens uses the machine's default thread count; this runs the
same comparison again with one thread for numpy's BLAS and torch, so an output that
depends on how a sum is split across threads fails here.
"""
import os
import subprocess
import sys

from notebooks import GOLDEN, ROOT


def test_goldens_match_on_one_thread():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(GOLDEN)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:]
