"""The chapters print the same figures whatever the number of threads.

Two executions of every page happen in `make test`, so this check costs no third one:

- test_cpu_paths.py runs every golden under nbval on PyTorch's plain path in a kernel limited to one thread
  for numpy's BLAS and torch (the kernel spec `python3-one-thread` that conftest.py writes);
- the website's build executes the pages with the machine's default thread count (two on the CI machine),
  on this machine's own code path, and here each build notebook's printed output must equal its golden's,
  cell by cell (the goldens are written by `make golden` at the default thread count too).

So an output that depends on how a sum is split across threads fails one of the two. Timing cells (tagged
nbval-ignore-output) are left out, as nbval leaves them out; the sanitizers of tests/sanitize.cfg apply.
"""

import configparser
import json
import re

import conftest
import nbformat
import pytest

from tools import built_site
from tools.notebooks import ROOT, chapter_names, code_cells, read_golden, why_stale

EXECUTED = built_site.OUTPUT / "_build" / "jupyter_execute" / "chapters"


def sanitizers():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests" / "sanitize.cfg")
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


def printed(cell, rules):
    """What a code cell printed (its streams, merged per stream, as the build merges them) and returned."""
    streams, results = {}, []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            streams[out.name] = streams.get(out.name, "") + out.text
        elif out.output_type in ("execute_result", "display_data"):
            results.append(out.get("data", {}).get("text/plain", ""))
        elif out.output_type == "error":
            results.append(f"{out.ename}: {out.evalue}")
    # the build merges a cell's streams and drops their last newline (nb_merge_streams)
    text = json.dumps([sorted((k, v.rstrip("\n")) for k, v in streams.items()), results], indent=1)
    for regex, replace in rules:
        text = regex.sub(replace, text)
    return text


@pytest.mark.parametrize("name", chapter_names())
def test_the_build_at_the_default_thread_count_prints_what_the_golden_does(site, name):
    executed = EXECUTED / f"{name}.ipynb"
    assert executed.exists(), f"the build left no executed notebook {executed}"
    built, golden = code_cells(nbformat.read(executed, as_version=4)), code_cells(read_golden(name))
    stale = why_stale(name, built, golden)
    assert stale is None, f"the build executed other code than the golden holds: {stale}"
    rules = sanitizers()
    for i, (b, g) in enumerate(zip(built, golden), start=1):
        if "nbval-ignore-output" in g.metadata.get("tags", []):
            continue
        assert printed(b, rules) == printed(g, rules), (
            f"{name}: code cell {i} printed something else in the build (default thread count) than in its "
            f"golden:\n--- golden\n{printed(g, rules)[:1500]}\n--- build\n{printed(b, rules)[:1500]}"
        )


def test_nbval_runs_the_goldens_in_a_one_thread_kernel(pytestconfig):
    """nbval is handed the one-thread kernel (test_cpu_paths.py names it too), and a kernel of that spec has one
    thread for torch and numpy."""
    from jupyter_client.manager import start_new_kernel

    assert pytestconfig.option.nbval_kernel_name == conftest.ONE_THREAD_KERNEL
    manager, client = start_new_kernel(kernel_name=conftest.ONE_THREAD_KERNEL, startup_timeout=120)
    try:
        lines = []
        client.execute_interactive(
            "import os, torch; print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'],"
            " os.environ['OPENBLAS_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])",
            timeout=120,
            output_hook=lambda m: lines.append(m["content"].get("text", "")),
        )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert "".join(lines).split() == ["1", "1", "1", "1"], lines
