"""The example model and accelerator in `book` give back the page's stated sizes and times.

Expected values are typed from the source page; the arithmetic here is independent of the chapters.
"""
from book import EXAMPLE_ACCELERATOR as ACC
from book import EXAMPLE_MODEL as M
from book import MiB


def params(m):
    # tied input/output embedding, no position table, no biases, norms with a weight only
    per_layer = 4 * m.d_model**2 + 2 * m.d_model * m.d_ff + 2 * m.d_model
    return m.vocab * m.d_model + m.n_layers * per_layer + m.d_model


def cache_bytes_per_token(m):
    return 2 * m.n_layers * m.n_heads * m.d_head * m.bytes_per_number


def test_parameter_count():
    assert params(M) == 335_594_496


def test_cache_per_token():
    assert cache_bytes_per_token(M) == 98_304


def test_weights_are_640_mib():
    assert round(params(M) * M.bytes_per_number / MiB) == 640


def step_seconds(batch, context=2_048):
    read = params(M) * M.bytes_per_number + batch * context * cache_bytes_per_token(M)
    return read / ACC.bandwidth


def test_reading_time_of_one_token():
    assert f"{step_seconds(1) * 1e6:.0f}" == "873"


def test_arithmetic_time_of_one_token():
    ops = 2 * params(M) + 4 * M.n_layers * 2_048 * M.d_model  # matrix work + attention over 2,048 positions
    assert f"{ops / ACC.ops_per_second * 1e6:.1f}" == "8.7"


def test_tokens_per_second_under_batching():
    got = {b: f"{b / step_seconds(b):,.0f}" for b in (1, 8, 64)}
    assert got == {1: "1,146", 8: "3,506", 64: "4,721"}
