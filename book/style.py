"""One look for every picture in the course: palette, sizes, font.

Introduced in chapter 1; every chapter calls ``use()`` in its imports cell.
"""

from __future__ import annotations

import matplotlib as mpl

__all__ = ["COLORS", "WIDE", "SQUARE", "TALL", "use", "token_box"]

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies
COLORS = {
    "main": "#0072B2",  # blue: the quantity the figure is about
    "other": "#E69F00",  # orange: the thing it is compared with
    "right": "#009E73",  # green: a right answer, an allowed pair
    "wrong": "#D55E00",  # vermillion: a wrong answer, a blocked pair, a leak
    "muted": "#999999",  # grey: context
    "ink": "#222222",  # text and outlines
}

WIDE = (8.0, 3.2)
SQUARE = (4.2, 4.2)
TALL = (6.0, 4.5)


def use():
    """Apply the course style to matplotlib (call once per notebook)."""
    mpl.rcParams.update(
        {
            "figure.figsize": WIDE,
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "font.family": "DejaVu Sans",
            "font.size": 10,
            "axes.titlesize": 10,
            "axes.labelsize": 10,
            "axes.edgecolor": COLORS["ink"],
            "axes.labelcolor": COLORS["ink"],
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.prop_cycle": mpl.cycler(color=[COLORS[k] for k in ("main", "other", "right", "wrong", "muted")]),
            "xtick.color": COLORS["ink"],
            "ytick.color": COLORS["ink"],
            "legend.frameon": False,
            "figure.constrained_layout.use": True,
        }
    )


def token_box(ax, x, y, word, colour):
    """One word in a filled, rounded box centred at (x, y): the token pictures of chapters 1, 3 and 4."""
    ax.text(
        x,
        y,
        word,
        ha="center",
        va="center",
        color="white",
        fontsize=11,
        bbox=dict(boxstyle="round,pad=0.4", facecolor=colour, edgecolor="none"),
    )
