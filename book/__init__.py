"""The shared package of the course: the example's data, the model card, the specs, the figure style.

Every chapter, exercise, solution and test imports from here, so the example
is defined once.

Importing it pins the CPU code paths of PyTorch and its MKL (AVX2, which nearly every x86
machine of the last ten years has) before any tensor operation runs: on a processor with
AVX-512, PyTorch would otherwise pick other kernels, whose sums round differently, and the
tiny model's 400 training steps would carry that into the second decimal of its loss. A reader
can override either variable before starting Python.
"""
import atexit
import gc
import os

os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")  # read at PyTorch's first operation, not at import
os.environ.setdefault("MKL_CBWR", "AVX2")  # MKL's conditional numerical reproducibility: the AVX2 branch
# A process that imported torch spends 1.5 to 3.5 s at exit in Python's last garbage collection (a kernel
# at the end of every chapter); frozen objects are skipped, and the system frees the memory all the same.
atexit.register(gc.freeze)
from . import style  # noqa: E402  (after the pins above)
from .example import (
    ATTENTION_SCORES, INPUT_WORDS, LOGITS, NEXT_AFTER, NEXT_LOGITS, SENTENCE, START,
    TARGET_IDS, TARGET_WORDS, TOKEN_IDS, VOCAB, WORD_ID,
)
from .maths import softmax
from .specs import EXAMPLE_ACCELERATOR, GiB, KiB, MiB, Accelerator

__all__ = [
    "style", "softmax", "ATTENTION_SCORES", "INPUT_WORDS", "LOGITS", "NEXT_AFTER", "NEXT_LOGITS", "SENTENCE",
    "START", "TARGET_IDS", "TARGET_WORDS", "TOKEN_IDS", "VOCAB", "WORD_ID", "EXAMPLE_ACCELERATOR",
    "EXAMPLE_MODEL", "GiB", "KiB", "MiB", "Accelerator", "ModelCard",
]


def __getattr__(name):
    """`book.EXAMPLE_MODEL` and `book.ModelCard` come from `book.card`, imported on first use, so that
    `python -m book.card` (the model-card calculator) runs without a second copy of that module."""
    if name in ("EXAMPLE_MODEL", "ModelCard"):
        from . import card

        return getattr(card, name)
    raise AttributeError(f"module 'book' has no attribute {name!r}")
