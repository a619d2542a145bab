"""Every page prints its golden on PyTorch's plain CPU code path, in a kernel of one thread, and the chapters that
compute with PyTorch (train, sample, time) print it on the other x86 paths too, not only on this machine's.

PyTorch picks its kernels by processor (AVX-512, AVX2, ARM's NEON, a plain path), and so do oneDNN and
MKL; each adds in its own order and rounds differently. The website's build runs every page on this machine's
path, at its default thread count, and test_thread_count.py holds its outputs to the goldens'; here the same
goldens run again, each path in a fresh model cache (so the tiny models the pages load are trained on that
path), with nbval in the one-thread kernel of conftest.py, and every output must equal the golden:

- plain: PyTorch's default kernels, oneDNN held to SSE4.1 and MKL in its compatible mode, the path any
  x86-64 processor can follow (ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_CBWR=COMPATIBLE),
  with every page: so each page is also run in one thread, where the build runs it in the machine's default;
- avx2 and avx512: PyTorch's vector kernels of those widths, where the processor has them and they are
  not already the path of the build's run, with the pages that compute with PyTorch.

Before the pages of a path run, one process trains into its cache what they will load, each model once: the
masked run of tiny.STEPS, keeping on the way the 100-step run that chapter 1's lesson shows (tiny.trained_model's
`keep`: the first k steps of a run are the k-step run, bit for bit, tests/test_tiny.py). On the plain path it
also trains the tiny.RETRAIN_STEPS steps of the unmasked run that chapter 2's lab loads, and checks that the
shipped weights of the unmasked model (book/data/tiny_unmasked.pt) are what its recipe trains there: its first
steps' losses within 1e-12 (not bit for bit: SHIPPED_CHECK says why). On the other paths chapter 2's lab
retrains its tiny.RETRAIN_STEPS steps itself.
Timing cells (nbval-ignore-output) are left out, as in the build's comparison; the sanitizers of
tests/sanitize.cfg apply.

The pages of one path run one after the other in one kernel of one thread (one notebook of all their cells,
`one_notebook`), not each in a kernel of its own: a kernel imports torch, matplotlib and torch._dynamo once
instead of once a page. That a page prints its golden from a fresh kernel is the build's run; here the question
is the code path and the thread count, and between two pages the kernel is put back as a fresh one holds it
(the user's names deleted, numpy's and torch's print options, torch's default dtype, grad mode and threads, no
figure open, the goldens' folder as working directory: FRESH_PAGE), so no page sees what another left.
"""

import functools
import os
import platform
import re
import subprocess
import sys

import conftest
import nbformat
import pytest

from book import tiny
from tools.notebooks import GOLDEN, ROOT, chapter_names, code_cells, read_golden

# the chapters that compute with PyTorch: those that train, load or sample the tiny trained models, and those
# whose other torch computations (a training step, a fused attention) could round differently on another path
# (a lesson may load them through book.tiny without importing torch itself)
TORCH_USES = ("import torch", "tiny.trained_model(")
CHAPTERS = [
    name for name in chapter_names() if any(use in (ROOT / "chapters" / f"{name}.md").read_text() for use in TORCH_USES)
]
PAGES = {"plain": chapter_names()}  # the pages each path runs: the plain path every one (one thread), others CHAPTERS
PATHS = {
    "plain": tiny.PLAIN_PATH,  # the path the unmasked run ships from
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
}
CAPABILITY = {"plain": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512"}  # as torch.backends.cpu names them
PINS = tiny.CPU_PATH_VARIABLES


def capability(env):
    """The code path PyTorch takes under `env` on this machine (it falls back when the processor lacks one)."""
    return _capability(tuple(sorted((k, v) for k, v in env.items() if k in PINS)))


@functools.cache  # one torch import for each setting of the path's variables, not two a test
def _capability(pinned):
    env = {k: v for k, v in os.environ.items() if k not in PINS} | dict(pinned)
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def environment(path, cache):
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    return {**env, **PATHS[path], "BOOK_CACHE": str(cache), "PYTHONHASHSEED": "0"}


# Run before the first page and between two pages of the one kernel: what a fresh kernel holds, again.
FRESH_PAGE = '''"""Between two pages run in one kernel (tests/test_cpu_paths.py): the state a fresh kernel has."""
import os
import sys

import numpy
import torch

GOLDEN = {golden!r}
FRESH = {{"numpy": numpy.get_printoptions(), "threads": torch.get_num_threads(), "dtype": torch.get_default_dtype()}}


def next_page():
    """IPython's %reset -f has deleted the user's names; this puts back what a page may have changed besides."""
    numpy.set_printoptions(**FRESH["numpy"])
    torch.set_printoptions(profile="default")
    torch.set_default_dtype(FRESH["dtype"])
    torch.set_grad_enabled(True)
    torch.set_num_threads(FRESH["threads"])
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    os.chdir(GOLDEN)


next_page()
'''
BETWEEN = "%reset -f\nimport fresh_page\nfresh_page.next_page()"


def one_notebook(names, folder):
    """The code cells of the goldens `names`, in order, in one notebook written into `folder` (with its helper
    fresh_page.py), each page after a cell that makes the kernel as fresh; and, for each of its cells, the
    golden cell it is (e.g. '02_causal_mask.ipynb::Cell 16'; None for the cells between pages)."""
    (folder / "fresh_page.py").write_text(FRESH_PAGE.format(golden=str(GOLDEN)))
    nb = nbformat.v4.new_notebook(metadata=read_golden(names[0]).metadata)
    origin = []
    for number, name in enumerate(names):
        start = f"import sys\nsys.path.insert(0, {str(folder)!r})\nimport fresh_page" if number == 0 else BETWEEN
        nb.cells.append(nbformat.v4.new_code_cell(start, execution_count=1))
        origin.append(None)
        for index, cell in enumerate(code_cells(read_golden(name))):
            nb.cells.append(cell)
            origin.append(f"{name}.ipynb::Cell {index}")
    path = folder / "pages.ipynb"
    nbformat.write(nb, path)
    return path, origin


def failed_cells(output, origin):
    """The golden cells nbval reports as failed in the one notebook, by their page (or as between two pages)."""
    numbers = sorted({int(n) for n in re.findall(r"FAILED \S*?pages\.ipynb::Cell (\d+)", output)})
    return [origin[n] or f"the cell before page {next(o for o in origin[n:] if o).split('::')[0]}" for n in numbers]


def test_the_chapters_that_train_are_found():
    trained = {
        name for name in chapter_names() if "tiny.trained_model(" in (ROOT / "chapters" / f"{name}.md").read_text()
    }
    assert (
        {"01_next_token_prediction", "02_causal_mask", "04_kv_cache_lab", "05_sampling_lab", "06_context_window"}
        <= trained
        <= set(CHAPTERS)
    )


@pytest.mark.parametrize("path", list(PATHS))
def test_the_goldens_print_the_same_on_another_cpu_path(path, tmp_path):
    if platform.machine() not in ("x86_64", "AMD64") and path != "plain":
        pytest.skip(f"{path} is an x86 code path; this machine is {platform.machine()}")
    env = environment(path, tmp_path / "cache")
    native = capability({k: v for k, v in os.environ.items() if k not in PINS})
    taken = capability(env)
    if taken != CAPABILITY[path]:
        pytest.skip(f"this processor has no {path} path (PyTorch falls back to {taken})")
    if path != "plain" and taken == native:
        pytest.skip(f"{path} is this machine's own path: the build's run covers it (test_thread_count.py)")
    notebook, origin = one_notebook(PAGES.get(path, CHAPTERS), tmp_path)
    prepared = subprocess.run(
        [sys.executable, "-c", PREPARE + (SHIPPED_CHECK if path == "plain" else "")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert prepared.returncode == 0 or path == "plain", prepared.stderr[-3000:]  # plain: reported below
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", str(ROOT / "pyproject.toml")]
        + ["--nbval-kernel-name", conftest.ONE_THREAD_KERNEL, str(notebook)],  # the goldens' kernel (conftest.py)
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    failed = failed_cells(run.stdout, origin)
    assert run.returncode == 0, (
        f"on the {path} path ({' '.join(f'{k}={v}' for k, v in PATHS[path].items())}), {len(failed)} golden "
        f"cells printed something else: {', '.join(failed) or '(see below)'}\n{run.stdout[-6000:]}"
    )
    if path == "plain":
        assert prepared.stdout.strip() == "same", (
            "book/data/tiny_unmasked.pt is not what its recipe trains on the plain path; retrain it with\n  "
            + " ".join(f"{k}={v}" for k, v in tiny.PLAIN_PATH.items())
            + f" python -m book.tiny ship\n{prepared.stderr[-3000:]}"
        )


# What the pages load, trained before they run, each model once (so no page trains it): the masked run, keeping
# the 100 steps that chapter 1's lesson shows (its SHOWN_STEPS)
PREPARE = "import torch; from book import tiny\ntiny.trained_model(keep=(100,))\n"
# On the plain path: the unmasked run's first tiny.RETRAIN_STEPS steps, the run chapter 2's lab loads, must be the
# recipe's run that ships. Not bit for bit: something on the plain path still picks its code by processor (the C
# library's exp and log and MKL can; not traced further), and on another processor (seen: a Xeon with AMX) a loss
# differs in its last bit at step 4. The run is chaotic from about step 110 (book/tiny.py), so its end moves with
# that bit; before then the two runs agree to a few units of the last place. So the first CALM_STEPS losses must
# be within 1e-12 of the shipped ones (a wrong seed, rate or recipe is off from the first step by far more). The
# shipped run's length is the recipe's, tiny.STEPS. Training the RETRAIN_STEPS here, not the whole run, is what
# the lab loads: that the first k steps of a run are the k-step run, bit for bit, is tests/test_tiny.py's.
CALM_STEPS = 100
SHIPPED_CHECK = (
    "shipped, shipped_losses = tiny.trained_model(causal=False)\n"
    "assert len(shipped_losses) == tiny.STEPS, 'a shipped run of another length'\n"
    "_, losses = tiny.trained_model(causal=False, shipped=False, steps=tiny.RETRAIN_STEPS)\n"
    f"gap = max(abs(a - b) / abs(b) for a, b in zip(losses[:{CALM_STEPS}], shipped_losses[:{CALM_STEPS}]))\n"
    f"assert gap <= 1e-12, f'the first {CALM_STEPS} losses differ by {{gap:.1e}} (relative): not the recipe\\'s run'\n"
    "print('same')"
)


def test_a_missed_timing_band_explains_itself_and_still_fails(capsys):
    """A reader whose machine misses a timing band reads what was measured, what was expected and why; the cell
    still raises (an AssertionError), so the build and nbval fail on it."""
    from book.timing import TimingMissed, check_timing

    check_timing(True, "speed-up 3.1", "above 1")  # in the band: silent
    assert capsys.readouterr().out == ""
    with pytest.raises(AssertionError) as raised:
        check_timing(False, "speed-up 0.8", "above 1", "the cache saves positions")
    assert raised.type is TimingMissed and "speed-up 0.8" in str(raised.value)
    out = capsys.readouterr().out
    for needed in (
        "measured: speed-up 0.8",
        "expected: above 1",
        "the cache saves positions",
        "processor",
        "other programs",
    ):
        assert needed in out, needed
