"""Seconds per code cell of chapter pages, slowest first: python -m tools.cell_times chapters/NN_slug[.md] ...

Each page runs in a fresh kernel from its own folder, as the build runs it (MyST-NB's reading of the page);
the time of a cell is the kernel's, from nbclient's record of when it started and when it replied, and its
CPU seconds (all the kernel's threads) come from hooks on IPython's cell events, added in a cell before the
page's first and read in one after its last. On a busy machine the wall seconds grow with the load and the
CPU seconds hardly do: compare two versions of a page by both, measured back to back. Use it to find where a
page over its budget spends its time; the model cache is the one BOOK_CACHE names.
"""

import argparse
import json
import time
from datetime import datetime

from nbclient import NotebookClient

from tools import built_site


def _seconds(cell):
    times = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.fromisoformat(times["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(times["shell.execute_reply"].replace("Z", "+00:00"))
    except KeyError:
        return 0.0
    return (end - start).total_seconds()


HOOK = """
import time as _t
_cpu = []
def _pre(*_):
    _cpu.append(-_t.process_time())
def _post(*_):
    _cpu[-1] += _t.process_time()
get_ipython().events.register("pre_run_cell", _pre)
get_ipython().events.register("post_run_cell", _post)
"""
READ = 'print("CPU", __import__("json").dumps(_cpu[:-1]))'


def cell_times(page):
    """(wall seconds of the whole run, kernel CPU seconds of the cells,
    [(seconds, CPU seconds, cell index, first line of the cell)], slowest first) for one page."""
    import nbformat

    page = page.removesuffix(".md").removesuffix(".ipynb")
    nb = built_site.as_myst_nb_reads(page)
    nb.cells = [nbformat.v4.new_code_cell(HOOK)] + nb.cells + [nbformat.v4.new_code_cell(READ)]
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=True,
        resources={"metadata": {"path": str(built_site.source_of(page).parent)}},
    )
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    cpu = json.loads(nb.cells[-1].outputs[0]["text"].split("CPU ", 1)[1])
    code = [(i, c) for i, c in enumerate(nb.cells[1:-1]) if c.cell_type == "code"]
    cells = [
        (_seconds(c), cpu_s, i, (c.source.strip().splitlines() or [""])[0][:60]) for (i, c), cpu_s in zip(code, cpu)
    ]
    return wall, sum(cpu), sorted(cells, reverse=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--top", type=int, default=8, help="how many of the slowest cells to print")
    args = parser.parse_args()
    for page in args.pages:
        wall, cpu, cells = cell_times(page)
        print(
            f"{page}: {wall:.1f} s in all (kernel start included), cells {sum(c[0] for c in cells):.1f} s, "
            f"CPU {cpu:.1f} s"
        )
        for seconds, cpu_s, index, line in cells[: args.top]:
            print(f"  {seconds:6.2f} s  CPU {cpu_s:6.2f} s  cell {index:3}  {line}")


if __name__ == "__main__":
    main()
