"""The simulated example in `book` reproduces every simulated figure of the source page.

Each expected value is the source page's figure (`000_1213c53d40e0ac7e.txt`) as typed once into
`book/data/source_figures/*.csv`, at the precision the page prints it, so a regenerated table
that misses one fails here.
"""

import numpy as np
import pytest

from book import ATTENTION_SCORES, LOGITS, NEXT_AFTER, NEXT_LOGITS, TARGET_IDS, TOKEN_IDS, VOCAB, WORD_ID, softmax
from book.source_figures import page


def entropy(p):
    return float(-(p * np.log(p)).sum())


def kept(p, cut=0.9):
    """How many words top-p keeps: the fewest whose running total reaches `cut`."""
    return int(np.argmax(np.cumsum(np.sort(p)[::-1]) >= cut) + 1)


P = np.array([softmax(row) for row in LOGITS])
RIGHT = P[np.arange(6), TARGET_IDS]
LOSS = -np.log(RIGHT)
P4 = P[3]
P4_SORTED = np.sort(P4)[::-1]
AFTER = {word: softmax(row) for word, row in zip(NEXT_AFTER, NEXT_LOGITS)}
ROW3 = ATTENTION_SCORES[2]

# (figure as the page words it, computed value, the page's printed figure from the table)
FIGURES = [
    ("right-word chance at position 1", RIGHT[0], page("s1.right-pos1")),
    ("right-word chance at position 6", RIGHT[5], page("s1.right-pos6")),
    ("loss at position 6", LOSS[5], page("s1.loss-pos6")),
    ("average loss of the six positions", LOSS.mean(), page("s1.average-loss")),
    ("right-word chance at position 3 ('lifts')", RIGHT[2], page("s1.right-pos3")),
    ("loss at position 3", LOSS[2], page("s1.loss-pos3")),
    ("favourite 'lifts' at position 4", P4[WORD_ID["lifts"]], page("s1.favourite-pos4")),
    ("right word 'the' at position 4", P4[WORD_ID["the"]], page("s1.right-pos4")),
    ("loss at position 4", LOSS[3], page("s1.loss-pos4")),
    ("raw output of 'lifts' at position 4", LOGITS[3, WORD_ID["lifts"]], page("s5.raw-lifts")),
    ("raw output of 'block' at position 4", LOGITS[3, WORD_ID["block"]], page("s5.raw-block")),
    ("favourite at temperature 0.5", softmax(LOGITS[3], temperature=0.5).max(), page("s5.favourite-t0.5")),
    ("favourite at temperature 1.0", softmax(LOGITS[3], temperature=1.0).max(), page("s5.favourite-t1.0")),
    ("favourite at temperature 1.5", softmax(LOGITS[3], temperature=1.5).max(), page("s5.favourite-t1.5")),
    ("spread at temperature 0.5 (nats)", entropy(softmax(LOGITS[3], temperature=0.5)), page("s5.spread-t0.5")),
    ("spread at temperature 1.5 (nats)", entropy(softmax(LOGITS[3], temperature=1.5)), page("s5.spread-t1.5")),
    ("least likely word at temperature 1.5", softmax(LOGITS[3], temperature=1.5).min(), page("s5.least-t1.5")),
    ("one in ... at temperature 1.5", 1 / softmax(LOGITS[3], temperature=1.5).min(), page("s5.least-one-in")),
    ("top-p running total after 7 words", P4_SORTED[:7].sum(), page("s5.top-p-total")),
    ("favourite renormalised after top-p", P4_SORTED[0] / P4_SORTED[:7].sum(), page("s5.top-p-renormalised")),
    ("top word at position 1", P[0].max(), page("s5.top-p-pos1-top")),
    ("top word at position 6", P[5].max(), page("s5.top-p-pos6-top")),
    ("greedy 'lifts' then its best word", P4[WORD_ID["lifts"]] * AFTER["lifts"].max(), page("s5.greedy-pair")),
    ("'the' then its best word", P4[WORD_ID["the"]] * AFTER["the"].max(), page("s5.runner-up-pair")),
    (
        "row 3 share on unseen positions, blocked scores set to 0",
        softmax(np.r_[ROW3[:3], 0, 0, 0])[3:].sum(),
        page("s2.zero-leak"),
    ),
    ("row 3 weight on position 1, masked", softmax(ROW3[:3])[0], page("s2.inf-weight1")),
    ("row 3 weight on position 2, masked", softmax(ROW3[:3])[1], page("s2.inf-weight2")),
    ("row 3 weight on position 3, masked", softmax(ROW3[:3])[2], page("s2.inf-weight3")),
    ("row 3 weight on position 4, no mask", softmax(ROW3)[3], page("s2.open-on-answer")),
    ("row 3 weight on positions 4-6, no mask", softmax(ROW3)[3:].sum(), page("s2.open-on-later")),
]


def printed(value, text):
    """`value` formatted the way the page prints `text` (same number of decimals)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return f"{value:.{decimals}f}"


@pytest.mark.parametrize("name,value,page", FIGURES, ids=[f[0] for f in FIGURES])
def test_simulated_figure(name, value, page):
    assert printed(value, page) == page, f"{name}: the table gives {value!r}, the page prints {page}"


def test_six_largest_raw_outputs_at_position_4():
    assert list(np.sort(LOGITS[3])[::-1][:6]) == [2.59, 1.97, 1.69, 1.37, 0.74, 0.64]
    assert VOCAB[int(np.argmax(LOGITS[3]))] == "lifts" and VOCAB[int(np.argmin(LOGITS[3]))] == "block"


def test_three_of_six_guesses_right():
    assert int((P.argmax(axis=1) == TARGET_IDS).sum()) == 3


def test_top_p_counts():
    assert kept(P4) == 7  # 7 of 12 at position 4
    assert kept(P[0]) == 9 and kept(P[5]) == 1  # 9 at position 1, a single word at position 6


def test_chances_sum_to_one():
    assert np.allclose(P.sum(axis=1), 1.0)


def test_word_ids_of_the_pytorch_section():
    assert TOKEN_IDS == [5, 1, 8, 5, 3, 9]
    assert len(VOCAB) == 12 and len(set(VOCAB)) == 12


def test_table_precision():
    """Raw outputs are stored to two decimals, attention scores to three."""
    assert np.allclose(LOGITS, np.round(LOGITS, 2)) and np.allclose(NEXT_LOGITS, np.round(NEXT_LOGITS, 2))
    assert np.allclose(ATTENTION_SCORES, np.round(ATTENTION_SCORES, 3))
