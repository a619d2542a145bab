"""The example model and accelerator in `book` give back the source page's stated sizes and times.

The sizes come from `book.card` (whose formulas `tests/test_card.py` checks against torch's own count);
the expected figures are the page's, from `book/data/source_figures/*.csv`.
"""

from book import EXAMPLE_ACCELERATOR as ACC
from book import EXAMPLE_MODEL as M
from book import MiB
from book.card import cache_bytes_per_token, decode_tokens_per_second, total_params, weights_bytes
from book.source_figures import page

CONTEXT = 2_048


def as_int(text):
    return int(text.replace(",", ""))


def test_parameter_count_and_cache_per_token():
    assert total_params(M) == as_int(page("s3.params"))
    assert cache_bytes_per_token(M) == as_int(page("s4.bytes-per-token"))


def test_weights_in_mib():
    assert round(weights_bytes(M) / MiB) == as_int(page("s6.weights-mib"))


def step_seconds(batch):
    return (weights_bytes(M) + batch * CONTEXT * cache_bytes_per_token(M)) / ACC.bandwidth


def test_reading_time_of_one_token():
    assert f"{step_seconds(1) * 1e6:.0f}" == page("s6.reading-time")


def test_arithmetic_time_of_one_token():
    ops = 2 * total_params(M) + 4 * M.n_layers * CONTEXT * M.d_model  # matrix work + attention over the context
    assert f"{ops / ACC.ops_per_second * 1e6:.1f}" == page("s6.arithmetic-time")


def test_tokens_per_second_under_batching():
    for batch, figure in [(1, "s6.tokens-per-s-1"), (8, "s6.tokens-per-s-8"), (64, "s6.tokens-per-s-64")]:
        assert f"{batch / step_seconds(batch):,.0f}" == page(figure)
        # the card's decode rate (which reads only the batch's rows of an untied table) agrees for a tied one
        assert f"{decode_tokens_per_second(M, ACC.bandwidth, batch, CONTEXT):,.0f}" == page(figure)


def test_real_chips_dense_rate_is_half_the_sparse_headline():
    """NVIDIA's spec sheets print 16-bit tensor rates with 2:4 sparsity; the dense rate the chapter uses is half."""
    from book.specs import REAL_CHIPS

    for chip in REAL_CHIPS:
        assert chip.source, f"{chip.name}: no spec sheet cited"
        if chip.sparse_ops_per_second:
            assert abs(chip.sparse_ops_per_second / chip.ops_per_second - 2) < 0.01, chip.name
        # every real chip does far more arithmetic than one operation per byte it reads, and
        # fewer than a thousand: the bands a decode step's two kinds of work fall on either side of
        assert 10 < chip.ridge < 1000, chip.name


def test_example_accelerator_ridge_is_100():
    assert ACC.ridge == ACC.ops_per_second / ACC.bandwidth == 100
