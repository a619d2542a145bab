"""The shared package of the course: the example's data, the model card, the specs, the figure style.

Every chapter, exercise, solution and test imports from here, so the example
is defined once.
"""
from . import style
from .card import EXAMPLE_MODEL, ModelCard
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
