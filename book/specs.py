"""The example accelerator that the chapters measure against, and the byte units.

Introduced in chapter 6. It describes no real product. The example model is a
`book.card.ModelCard` (`book.card.EXAMPLE_MODEL`).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Accelerator", "EXAMPLE_ACCELERATOR", "KiB", "MiB", "GiB"]

KiB, MiB, GiB = 2**10, 2**20, 2**30


@dataclass(frozen=True)
class Accelerator:
    """A chip by the two rates that bound its speed."""

    name: str
    bandwidth: float  # bytes read from memory per second
    ops_per_second: float  # arithmetic operations per second


# The source page states times, not rates; the rates are read back from them.
# One token at a context of 2,048 reads the weights (335,594,496 x 2 bytes) and the
# cache (2,048 x 98,304 bytes): 872,515,584 bytes, which the page says takes 873 us,
# so the bandwidth is 1.0e12 bytes/s (872.5 us, and 1,146 / 3,506 / 4,721 tokens/s at
# batches of 1 / 8 / 64, as the page prints). The same token does about 872 million
# operations in 8.7 us, so the arithmetic rate is 1.0e14 operations/s.
# tests/test_specs.py checks that these rates give back the page's times.
EXAMPLE_ACCELERATOR = Accelerator(name="example accelerator", bandwidth=1.0e12, ops_per_second=1.0e14)
