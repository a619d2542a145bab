"""The shared package of the course: the example's data, the model card, the specs, the figure style.

Every chapter, exercise, solution and test imports from here, so the example
is defined once.

It pins no CPU code path: the tiny model that chapters 1 to 6 train and measure computes in
float64 (book/tiny.py), in which the code paths tried (PyTorch's plain one, AVX2, AVX-512:
tests/test_cpu_paths.py) print the same figures, and the one chaotic run, the model without the
mask, ships its weights.
"""

import atexit
import gc

# A process that imported torch spends 1.5 to 3.5 s at exit in Python's last garbage collection (a kernel
# at the end of every chapter); frozen objects are skipped, and the system frees the memory all the same.
atexit.register(gc.freeze)
# Where each public name lives. They are imported on first use (PEP 562), so that `python -m book.check`
# runs, and reports in one line, even where numpy, matplotlib or torch cannot be imported.
_WHERE = {
    "style": None,
    "softmax": "maths",
    "EXAMPLE_ACCELERATOR": "specs",
    "GiB": "specs",
    "KiB": "specs",
    "MiB": "specs",
    "Accelerator": "specs",
    "EXAMPLE_MODEL": "card",
    "ModelCard": "card",
    **{
        name: "example"
        for name in (
            "ATTENTION_SCORES",
            "INPUT_WORDS",
            "LOGITS",
            "NEXT_AFTER",
            "NEXT_LOGITS",
            "SENTENCE",
            "START",
            "TARGET_IDS",
            "TARGET_WORDS",
            "TOKEN_IDS",
            "VOCAB",
            "WORD_ID",
        )
    },
}
__all__ = list(_WHERE)


def __getattr__(name):
    """`from book import softmax` and the like: the submodule that defines the name, imported on first use
    (so `python -m book.card` also runs without a second copy of that module)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'book' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f"{__name__}.{_WHERE[name] or name}")
    value = module if _WHERE[name] is None else getattr(module, name)
    globals()[name] = value
    return value
