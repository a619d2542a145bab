"""The simulated example sentence that the chapters score, mask and sample.

Introduced in chapter 1. The sentence, its twelve-word vocabulary and the raw
outputs (logits) of a part-trained model at each of its six positions are
simulated; everything the chapters do with them is real arithmetic.

How the numbers were made: see ``tools/make_example.py``. In short, seeded
normal draws with a boost for the right word, the page's printed values pinned
where it prints them (position 4's raw outputs), everything rounded to two
decimals (attention scores to three), then a seeded search on that grid until
every simulated figure of the source page is reproduced at its printed
precision. ``tests/test_example.py`` checks each of those figures.
"""

from __future__ import annotations

import numpy as np

from .example_data import ATTENTION_SCORES, LOGITS, NEXT_LOGITS, VOCAB

__all__ = [
    "VOCAB",
    "WORD_ID",
    "SENTENCE",
    "START",
    "INPUT_WORDS",
    "TARGET_WORDS",
    "TOKEN_IDS",
    "TARGET_IDS",
    "LOGITS",
    "NEXT_LOGITS",
    "NEXT_AFTER",
    "ATTENTION_SCORES",
]

SENTENCE = ("the", "arm", "lifts", "the", "red", "block")
START = "<start>"  # the marker the first position reads; never a word the model predicts

WORD_ID = {word: i for i, word in enumerate(VOCAB)}
TOKEN_IDS = [WORD_ID[w] for w in SENTENCE]  # [5, 1, 8, 5, 3, 9], the ids the PyTorch chapter uses

# what each position is given, and what it must produce: the same sentence, one place apart
INPUT_WORDS = (START,) + SENTENCE[:-1]
TARGET_WORDS = SENTENCE
TARGET_IDS = np.array(TOKEN_IDS)

LOGITS = np.array(LOGITS)  # (6 positions, 12 words)
NEXT_LOGITS = np.array(NEXT_LOGITS)  # (2, 12): one step on from position 4
NEXT_AFTER = ("lifts", "the")  # the word chosen at position 4 for each row of NEXT_LOGITS
ATTENTION_SCORES = np.array(ATTENTION_SCORES)  # (6 looking, 6 looked at), before any mask
