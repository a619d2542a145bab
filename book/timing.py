"""The check of a timing cell: a measurement outside its band stops the cell with a reason a reader can act on.

Used by the timing cells of chapters 4 (the key-value cache) and 6 (the decode step's roofs). Their bands
were set on a few processors; another machine, or one busy with other work, can miss one. Then the cell
prints what it measured, what the text expects and why a machine can differ, and raises `TimingMissed`
(an AssertionError), so that the book's build and its tests still fail on it.
"""

from __future__ import annotations

import textwrap

WHY = (
    "Timings depend on the processor (its caches, its vector units, the code path PyTorch picks "
    "for it), on the versions of PyTorch and its maths libraries, and on other programs using the "
    "machine at the same time. The cell already keeps the fastest of several runs and times again "
    "up to three times; running it once more on a quieter machine usually lands in the band."
)


class TimingMissed(AssertionError):
    """A timing outside the band a chapter's text relies on."""


def check_timing(ok: bool, measured: str, expected: str, reason: str = ""):
    """Return if `ok`; otherwise print what was `measured`, what was `expected` and why, then raise.

    `reason` says why the band holds on a typical machine (the chapter's argument in one sentence)."""
    if ok:
        return
    lines = [
        "This machine's timing missed the band the text relies on.",
        f"  measured: {measured}",
        f"  expected: {expected}",
    ]
    if reason:
        lines.append(textwrap.fill(f"why the band: {reason}", 100, initial_indent="  ", subsequent_indent="    "))
    lines.append(textwrap.fill(f"why it can differ: {WHY}", 100, initial_indent="  ", subsequent_indent="    "))
    print("\n".join(lines))
    raise TimingMissed(f"measured {measured}; expected {expected} (explained above)")
