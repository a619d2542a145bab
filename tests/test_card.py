"""The model-card calculator (book.card) gives the published sizes of real models, and its command line fails politely."""
import dataclasses
import math
import re
import subprocess
import sys

import pytest

from book import EXAMPLE_MODEL
from book.card import (
    CATALOGUE, ModelCard, active_params, cache_bytes_per_token, decode_tokens_per_second, parse_bytes, parse_rate,
    requests_that_fit, total_params, weights_bytes,
)

GiB = 2**30


def rounds_to(value, published):
    """Does `value` (a count of parameters) round to `published` ('6.7B', '124M', '70B') at its written precision?

    Significant figures are those written: '6.7B' has two, '1558M' four; the trailing zero of '70B' is not significant.
    """
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?([MB])", published)
    whole, frac, unit = m.groups()
    digits = len(whole) + len(frac) if frac else len(whole.rstrip("0"))
    scale = {"M": 1e6, "B": 1e9}[unit]
    target = float(published[:-1]) * scale
    step = 10 ** (math.floor(math.log10(target)) - digits + 1)
    return abs(value - target) <= step / 2


def test_gpt2_small_exactly():
    card = CATALOGUE["gpt2-small"]
    assert total_params(card) == 124_439_808
    assert (card.vocab + card.positions) * card.d_model == 39_383_808  # the embeddings the recap quotes


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_total_matches_the_published_figure(name):
    card = CATALOGUE[name]
    assert rounds_to(total_params(card), card.published), (
        f"{name}: computed {total_params(card):,} parameters, published {card.published}")


def test_mixture_of_experts_active_parameters():
    card = CATALOGUE["mixtral-8x7b"]
    assert rounds_to(active_params(card), card.published_active)
    assert active_params(card) < total_params(card) / 3


def test_dense_models_use_every_parameter():
    for card in CATALOGUE.values():
        if card.n_experts == 1:
            assert active_params(card) == total_params(card)


def test_the_course_example_model():
    card = ModelCard("example", n_layers=EXAMPLE_MODEL.n_layers, d_model=EXAMPLE_MODEL.d_model,
                     n_heads=EXAMPLE_MODEL.n_heads, n_kv_heads=EXAMPLE_MODEL.n_heads, d_head=EXAMPLE_MODEL.d_head,
                     d_ff=EXAMPLE_MODEL.d_ff, ffn_matrices=2, vocab=EXAMPLE_MODEL.vocab, tied_output=True)
    assert total_params(card) == 335_594_496
    assert cache_bytes_per_token(card) == 98_304


def test_the_recap_16_versus_68():
    """80 GiB, requests of 8,192 tokens: a 7B shape with 32 key-value heads, then the same with 8."""
    full = CATALOGUE["llama-2-7b"]
    grouped = dataclasses.replace(full, n_kv_heads=8)
    assert cache_bytes_per_token(full) * 8192 == 4 * GiB and cache_bytes_per_token(grouped) * 8192 == 1 * GiB
    assert weights_bytes(grouped) < weights_bytes(full)  # the K and V projections shrink too
    assert requests_that_fit(full, 8192, 80 * GiB) == 16
    assert requests_that_fit(grouped, 8192, 80 * GiB) == 68


def test_nothing_fits_when_the_weights_do_not():
    assert requests_that_fit(CATALOGUE["llama-2-70b"], 8192, 80 * GiB) == 0


def test_decode_rate_is_bandwidth_over_bytes_read():
    card = CATALOGUE["llama-2-7b"]
    expected = 1e12 / (weights_bytes(card) + 2048 * cache_bytes_per_token(card))
    assert decode_tokens_per_second(card, 1e12, 1, 2048) == pytest.approx(expected)
    # a batch reads the weights once, so it gets more tokens out of the same bandwidth
    assert decode_tokens_per_second(card, 1e12, 8, 2048) > 3 * expected


def test_one_token_of_a_mixture_reads_only_its_experts():
    card = CATALOGUE["mixtral-8x7b"]
    one = decode_tokens_per_second(card, 1e12, 1, 1)
    assert one == pytest.approx(1e12 / (active_params(card) * 2 + cache_bytes_per_token(card)))


@pytest.mark.parametrize("text,value", [("80GiB", 80 * GiB), ("40GB", 40e9), ("512 MiB", 512 * 2**20), ("1e9", 1e9)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


def test_parse_rate():
    assert parse_rate("3.35TB/s") == pytest.approx(3.35e12)
    with pytest.raises(ValueError, match="bytes per second"):
        parse_rate("3.35TB")


def run(*args):
    return subprocess.run([sys.executable, "-m", "book.card", *args], capture_output=True, text=True, timeout=60)


def test_command_line_walk_away_answer():
    out = run("mistral-7b", "--context", "8192", "--memory", "80GiB", "--bandwidth", "3.35TB/s")
    assert out.returncode == 0, out.stderr
    assert "mistral-7b" in out.stdout and "128 KiB" in out.stdout and "requests that fit in 80 GiB" in out.stdout


def test_command_line_compare():
    out = run("--compare", "llama-2-7b", "mistral-7b")
    assert out.returncode == 0 and "llama-2-7b" in out.stdout and "mistral-7b" in out.stdout


@pytest.mark.parametrize("args,message", [
    (("gpt5",), "known models: gpt2-small"),
    (("gpt2-small", "--memory", "eighty"), "e.g. 80GiB"),
    (("gpt2-small", "--bandwidth", "3TB"), "bytes per second"),
    (("gpt2-small", "--context", "0"), "positive number of tokens"),
    ((), "name a model"),
])
def test_command_line_errors_are_clear(args, message):
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
