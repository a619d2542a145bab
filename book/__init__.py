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
from . import style  # noqa: E402  (after the exit hook above)
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
