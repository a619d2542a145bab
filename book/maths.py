"""Small numerical helpers that several chapters use.

`softmax` is introduced in chapter 1 and reused by the masking (2) and sampling (5) chapters.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax"]


def softmax(logits, axis=-1, temperature=1.0):
    """Chances from raw outputs (logits) along `axis`, each divided by
    `temperature` first.

    Subtracting the maximum keeps exp() from overflowing.
    """
    logits = np.asarray(logits, dtype=float) / temperature
    shifted = np.exp(logits - logits.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)
