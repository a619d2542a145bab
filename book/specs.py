"""The example accelerator that the chapters measure against, and the byte units.

Introduced in chapter 4 (the roofline of the cache's speed-up); chapter 6 splits a decoding step's
roofline into its two kinds of work. It describes no real product. The example model is a
`book.card.ModelCard` (`book.card.EXAMPLE_MODEL`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Accelerator", "EXAMPLE_ACCELERATOR", "REAL_CHIPS", "KiB", "MiB", "GiB"]

KiB, MiB, GiB = 2**10, 2**20, 2**30


@dataclass(frozen=True)
class Accelerator:
    """A chip by the two rates that bound its speed."""

    name: str
    bandwidth: float  # bytes read from memory per second
    ops_per_second: float  # arithmetic operations per second (dense 16-bit matrix products for a real chip)
    sparse_ops_per_second: float = 0.0  # the headline figure with 2:4 structured sparsity, where one is printed
    source: str = ""  # the spec sheet the two rates come from (a key of references.bib)

    @property
    def ridge(self) -> float:
        """Operations per byte read at which the two roofs meet (chapter 6)."""
        return self.ops_per_second / self.bandwidth


# The source page states times, not rates; the rates are read back from them.
# One token at a context of 2,048 reads the weights (335,594,496 x 2 bytes) and the
# cache (2,048 x 98,304 bytes): 872,515,584 bytes, which the page says takes 873 us,
# so the bandwidth is 1.0e12 bytes/s (872.5 us, and 1,146 / 3,506 / 4,721 tokens/s at
# batches of 1 / 8 / 64, as the page prints). The same token does about 872 million
# operations in 8.7 us, so the arithmetic rate is 1.0e14 operations/s.
# tests/test_specs.py checks that these rates give back the page's times.
EXAMPLE_ACCELERATOR = Accelerator(name="example accelerator", bandwidth=1.0e12, ops_per_second=1.0e14)

# Real chips, as their makers' spec sheets state them (chapter 6). Peak rates, never reached in practice.
# NVIDIA prints its 16-bit tensor figures "with sparsity" (2:4 structured sparsity, half the weights zero);
# the dense rate, which an ordinary model's matrix products can use, is half of it.
REAL_CHIPS = [
    Accelerator(
        "A100 80GB SXM",
        bandwidth=2.039e12,
        ops_per_second=312e12,
        sparse_ops_per_second=624e12,
        source="nvidia2021a100",
    ),
    Accelerator(
        "H100 SXM", bandwidth=3.35e12, ops_per_second=989e12, sparse_ops_per_second=1_979e12, source="nvidia2022h100"
    ),
    # Apple states one GPU rate, 27.2 TFLOPS (32-bit) for the 76-core M2 Ultra, and 800 GB/s; its GPU does
    # 16-bit arithmetic at the same rate, so the same figure is taken as the 16-bit rate (an assumption).
    Accelerator("Apple M2 Ultra (76-core GPU)", bandwidth=800e9, ops_per_second=27.2e12, source="apple2023macprospecs"),
]
