"""The model-card calculator (book.card) gives the published sizes of real models, and its command line fails politely.

The counting formulas are checked against torch itself: the tiny model, and torch models built in this file
(independently of book.card) from published cards at a reduced size, must have exactly as many parameters as
the card says.
"""

import dataclasses
import math
import re
import subprocess
import sys

import pytest
from torch import nn

from book import EXAMPLE_MODEL, tiny
from book.card import (
    CATALOGUE,
    MAX_CONTEXT,
    ModelCard,
    active_params,
    allreduce_bytes_per_step,
    answer,
    attention_ops_per_byte,
    cache_bytes,
    cache_bytes_per_token,
    compute_bound_batch,
    decode_step_roofs,
    decode_tokens_per_second,
    longest_context,
    parse_bytes,
    parse_card,
    parse_flops,
    parse_rate,
    product_params,
    requests_that_fit,
    step_bound,
    total_params,
    weight_ops_per_byte,
    weights_bytes,
    weights_read_per_step,
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


@pytest.mark.parametrize("name", [n for n, c in CATALOGUE.items() if c.exact])
def test_total_is_the_released_checkpoints_exact_count(name):
    card = CATALOGUE[name]
    assert total_params(card) == card.exact, (
        f"{name}: the card gives {total_params(card):,} parameters, {card.exact_where} has {card.exact:,}"
    )


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_total_matches_the_published_figure(name):
    card = CATALOGUE[name]
    assert rounds_to(total_params(card), card.published), (
        f"{name}: computed {total_params(card):,} parameters, published {card.published}"
    )


def test_mixture_of_experts_active_parameters():
    card = CATALOGUE["mixtral-8x7b"]
    assert rounds_to(active_params(card), card.published_active)
    assert active_params(card) < total_params(card) / 3


def test_dense_models_use_every_parameter():
    for card in CATALOGUE.values():
        if card.n_experts == 1:
            assert active_params(card) == total_params(card)


def test_the_course_example_model():
    assert total_params(EXAMPLE_MODEL) == 335_594_496
    assert cache_bytes_per_token(EXAMPLE_MODEL) == 98_304


# ---- the formulas against torch's own count


def build(card):
    """A torch model with the card's layout, written from the architecture, not from book.card's formulas."""
    d, heads, kv, dh = card.d_model, card.n_heads, card.n_kv_heads, card.d_head
    norm = lambda: nn.LayerNorm(d, bias=card.norm_params == 2)  # noqa: E731  (weight only: RMSNorm's count)

    def ffn():
        linear = lambda i, o: nn.Linear(i, o, bias=card.ffn_biases)  # noqa: E731
        if card.ffn_matrices == 3:  # SwiGLU: gate, up, down
            return nn.ModuleList([linear(d, card.d_ff), linear(d, card.d_ff), linear(card.d_ff, d)])
        return nn.Sequential(linear(d, card.d_ff), nn.GELU(), linear(card.d_ff, d))

    def layer():
        parts = nn.ModuleDict(
            {
                "q": nn.Linear(d, heads * dh, bias=card.attn_biases),
                "k": nn.Linear(d, kv * dh, bias=card.attn_biases),
                "v": nn.Linear(d, kv * dh, bias=card.attn_biases),
                "o": nn.Linear(heads * dh, d, bias=card.attn_biases),
                "norm1": norm(),
                "norm2": norm(),
                "experts": nn.ModuleList(ffn() for _ in range(card.n_experts)),
            }
        )
        if card.n_experts > 1:
            parts["router"] = nn.Linear(d, card.n_experts, bias=False)
        return parts

    model = nn.ModuleDict(
        {
            "tokens": nn.Embedding(card.vocab, d),
            "layers": nn.ModuleList(layer() for _ in range(card.n_layers)),
            "final_norm": norm(),
            "head": nn.Linear(d, card.vocab, bias=False),
        }
    )
    if card.positions:
        model["positions"] = nn.Embedding(card.positions, d)
    if card.tied_output:
        model["head"].weight = model["tokens"].weight
    return model


def counted(model):
    return sum(p.numel() for p in model.parameters())  # a shared (tied) tensor is listed once


REDUCED = dict(n_layers=2, d_model=64, n_heads=8, d_head=8, d_ff=96, vocab=101)


@pytest.mark.parametrize(
    "name,kv_heads,positions",
    [
        ("gpt2-small", 8, 32),  # LayerNorm, biases everywhere, learned positions, tied output
        ("mistral-7b", 2, 0),  # RMSNorm, grouped-query attention, SwiGLU, untied output
        ("mixtral-8x7b", 2, 0),  # the same with eight experts and a router
    ],
)
def test_formula_equals_torch_count_at_reduced_size(name, kv_heads, positions):
    card = dataclasses.replace(CATALOGUE[name], **REDUCED, n_kv_heads=kv_heads, positions=positions)
    assert total_params(card) == counted(build(card))


def test_formula_equals_the_tiny_models_own_count():
    model = tiny.TinyGPT(tiny.TinyConfig(vocab=25))
    assert total_params(tiny.card_of(model.cfg)) == counted(model)
    wider = tiny.TinyGPT(tiny.TinyConfig(vocab=40, context=64, d_model=48, n_heads=6, n_layers=3, d_ff=80))
    assert total_params(tiny.card_of(wider.cfg)) == counted(wider)


def test_active_parameters_count_the_experts_a_token_uses():
    card = dataclasses.replace(CATALOGUE["mixtral-8x7b"], **REDUCED, n_kv_heads=2)
    model = build(card)
    unused = sum(
        counted(layer["experts"][i]) for layer in model["layers"] for i in range(card.experts_per_token, card.n_experts)
    )
    assert active_params(card) == counted(model) - unused


def test_sliding_window_caps_the_cache():
    card = CATALOGUE["mistral-7b"]
    assert cache_bytes(card, 8192) == 4096 * cache_bytes_per_token(card)  # a rolling cache of 4,096 tokens
    assert cache_bytes(card, 2048) == 2048 * cache_bytes_per_token(card)
    # 80 GiB at 8,192 tokens a request: about twice as many requests as a full cache allows
    assert requests_that_fit(card, 8192, 80 * GiB) == 133
    assert requests_that_fit(dataclasses.replace(card, window=0), 8192, 80 * GiB) == 66


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
    unread = (card.vocab - 1) * card.d_model * card.bytes_per_number  # one token looks up one row of the input table
    expected = 1e12 / (weights_bytes(card) - unread + 2048 * cache_bytes_per_token(card))
    assert decode_tokens_per_second(card, 1e12, 1, 2048) == pytest.approx(expected)
    # a batch reads the weights once, so it gets more tokens out of the same bandwidth
    assert decode_tokens_per_second(card, 1e12, 8, 2048) > 3 * expected


def test_one_token_of_a_mixture_reads_only_its_experts():
    card = CATALOGUE["mixtral-8x7b"]
    one = decode_tokens_per_second(card, 1e12, 1, 1)
    unread = (card.vocab - 1) * card.d_model * 2  # the input table's rows it does not look up
    assert one == pytest.approx(1e12 / (active_params(card) * 2 - unread + cache_bytes_per_token(card)))


def test_two_rooflines_of_a_decode_step():
    """Weight products: about B operations per byte at 2-byte weights; attention: heads / kv heads per byte."""
    m = EXAMPLE_MODEL  # tied output, no position table: every weight is read at any batch
    for batch in (1, 7, 200):
        assert weight_ops_per_byte(m, batch) == pytest.approx(batch)  # 2 operations per 2-byte weight, per request
    assert attention_ops_per_byte(m) == 1  # one key-value head per query head, 2 bytes a number
    for name in ("llama-2-70b", "mistral-7b"):  # grouped-query attention: G = heads / kv heads
        card = CATALOGUE[name]
        assert attention_ops_per_byte(card) == card.n_heads // card.n_kv_heads
        eight_bit = dataclasses.replace(card, bytes_per_number=1)
        assert attention_ops_per_byte(eight_bit) == 2 * attention_ops_per_byte(card)
    # the crossing of the weight products: arithmetic 2 P B / rate equals reading 2 P / bandwidth at B = rate / bandwidth
    assert compute_bound_batch(m, 1e12, 1e14) == 100
    # a batch of 200 at 2,048 tokens on 1e12 B/s and 1e14 op/s: the weights turn arithmetic-bound, attention does not
    roofs = decode_step_roofs(m, 200, 2048, 1e12, 1e14)
    p = total_params(m)
    assert roofs["weights"] == pytest.approx((2 * p / 1e12, 2 * p * 200 / 1e14))
    assert roofs["attention"] == pytest.approx((200 * 2048 * 98_304 / 1e12, 200 * 2048 * 4 * 24 * 1024 / 1e14))
    assert roofs["weights"][1] > roofs["weights"][0] and roofs["attention"][0] > 50 * roofs["attention"][1]


def multiplied(model):
    """The parameters a token multiplies by in a torch model: those of every module but a lookup table.

    A tied table is the output layer's weight too, so it is counted once, through the output layer."""
    params = {id(p): p for m in model.modules() if not isinstance(m, nn.Embedding) for p in m.parameters(recurse=False)}
    return sum(p.numel() for p in params.values())


@pytest.mark.parametrize("name,positions", [("gpt2-small", 32), ("mistral-7b", 0)])
def test_weight_arithmetic_counts_no_lookup_table(name, positions):
    """2 operations per multiplied weight and token; an untied or position table's rows are looked up, not multiplied."""
    card = dataclasses.replace(CATALOGUE[name], **REDUCED, n_kv_heads=2, positions=positions)
    model = build(card)
    assert product_params(card) == multiplied(model)
    roofs = decode_step_roofs(card, 3, 16, 1e12, 1e14)
    assert roofs["weights"][1] == pytest.approx(2 * multiplied(model) * 3 / 1e14)
    assert weight_ops_per_byte(card, 3) == pytest.approx(2 * multiplied(model) * 3 / weights_read_per_step(card, 3))


@pytest.mark.parametrize("name", ["llama-2-7b", "mistral-7b", "gpt2-small"])
def test_the_weights_turn_arithmetic_bound_just_past_the_ridge(name):
    """At 2-byte weights B requests do about B operations per byte read, so the crossing is the ridge or just
    above it (the few looked-up rows add bytes, never operations); counting the lookup as arithmetic put it below."""
    card = CATALOGUE[name]
    for ops in (1e14, 312e12, 989e12):
        ridge = ops / 1e12
        assert ridge <= compute_bound_batch(card, 1e12, ops) <= ridge * 1.01 + 1


def test_a_mixture_turns_compute_bound_later_than_its_active_share_suggests():
    """More tokens in a batch touch more experts, so the weight bytes read grow with the batch."""
    card = CATALOGUE["mixtral-8x7b"]
    assert weight_ops_per_byte(card, 100) < 100 * active_params(card) / total_params(card) * 1.01 + 1
    assert compute_bound_batch(card, 1e12, 1e14) > compute_bound_batch(CATALOGUE["mistral-7b"], 1e12, 1e14)


@pytest.mark.parametrize("text,value", [("80GiB", 80 * GiB), ("40GB", 40e9), ("512 MiB", 512 * 2**20), ("1e9", 1e9)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


def test_parse_rate():
    assert parse_rate("3.35TB/s") == pytest.approx(3.35e12)
    with pytest.raises(ValueError, match="bytes per second"):
        parse_rate("3.35TB")


def test_parse_flops():
    assert parse_flops("989T") == pytest.approx(989e12)
    assert parse_flops("312 TFLOP/s") == pytest.approx(312e12)
    with pytest.raises(ValueError, match="operations per second"):
        parse_flops("fast")


def run(*args):
    return subprocess.run([sys.executable, "-m", "book.card", *args], capture_output=True, text=True, timeout=60)


def test_command_line_walk_away_answer():
    out = run("mistral-7b", "--context", "8192", "--memory", "80GiB", "--bandwidth", "3.35TB/s")
    assert out.returncode == 0, out.stderr
    assert "mistral-7b" in out.stdout and "128 KiB" in out.stdout and "requests that fit in 80 GiB" in out.stdout


def test_command_line_says_upper_bound_and_warns_past_the_trained_length():
    out = run("llama-2-7b", "--context", "8192")
    assert out.returncode == 0, out.stderr
    assert "at most" in out.stdout and "upper bounds" in out.stdout
    assert f"trained at {CATALOGUE['llama-2-7b'].trained_context:,} tokens" in out.stdout
    inside = run("llama-2-7b", "--context", "4096")
    assert inside.returncode == 0 and "warning" not in inside.stdout


def test_command_line_compare():
    out = run("--compare", "llama-2-7b", "mistral-7b")
    assert out.returncode == 0 and "llama-2-7b" in out.stdout and "mistral-7b" in out.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (("gpt5",), "known models: gpt2-small"),
        (("gpt2-small", "--memory", "eighty"), "e.g. 80GiB"),
        (("gpt2-small", "--bandwidth", "3TB"), "bytes per second"),
        (("gpt2-small", "--context", "0"), "positive number of tokens"),
        ((), "name a model"),
        (("mistral-7b", "--context", str(10**20)), f"up to {MAX_CONTEXT:,}"),
        (("gpt2-small", "--context", "1025"), "cannot read 1,025 tokens"),
        (("gpt2-small", "--flops", "fast"), "e.g. 989T"),
    ],
)
def test_command_line_errors_are_clear(args, message):
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_compute_bound_batch_is_the_first_batch_past_the_ridge_even_far_out():
    """The crossing is the first batch whose weight products reach the ridge, found as fast for a ridge of a
    million operations per byte (a batch near a million) as for a real chip's."""
    from book.card import compute_bound_batch, weight_ops_per_byte

    card = CATALOGUE["mistral-7b"]
    for ridge in (100.0, 295.2, 1e6):
        batch = compute_bound_batch(card, bandwidth=1.0, ops_per_second=ridge)
        assert weight_ops_per_byte(card, batch) >= ridge * (1 - 1e-12) > weight_ops_per_byte(card, batch - 1)


# ---- both roofs, separate precisions, what does not fit, several chips (issue 33)


def test_every_rate_is_bounded_by_both_roofs():
    """Mistral 7B at 128 tokens: 4,256 requests fit, and their arithmetic (61.5 ms) outlasts their reading."""
    card = CATALOGUE["mistral-7b"]
    a = answer(card, 128, 80 * GiB, 3.35e12, 989e12)
    assert a.fit == 4256 and a.binds == "arithmetic"
    assert a.step == pytest.approx(61.5e-3, rel=1e-3) and round(a.rate, -2) == 69_200
    assert a.rate <= 989e12 / (2 * product_params(card)) * a.batch / a.batch  # the arithmetic ceiling per token
    one = answer(card, 1, 80 * GiB, 3.35e12, 989e12)
    assert one.rate < 989e12 / (2 * product_params(card))  # the old code printed 21,249,059 tokens/s here
    out = run("mistral-7b", "--context", "128")
    assert out.returncode == 0 and "at most 69,217" in out.stdout and "arithmetic" in out.stdout


def test_step_time_and_each_requests_rate_at_the_reported_batch():
    out = run("llama-2-7b", "--context", "8192")
    assert out.returncode == 0, out.stderr
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.stdout.splitlines()[1:18])
    assert rows["batch"] == "16" and rows["decode step at that batch"] == "at least 24.5 ms"
    assert rows["tokens/s, each request"] == "at most 41" and rows["bound by"] == "memory"


@pytest.mark.parametrize("name,longest", [("llama-2-7b", 466), ("mistral-7b", 1840)])
def test_longest_context_at_the_compute_bound_batch(name, longest):
    card = CATALOGUE[name]
    batch = compute_bound_batch(card, 3.35e12, 989e12)
    assert longest_context(card, batch, 80 * GiB) == longest
    assert requests_that_fit(card, longest, 80 * GiB) >= batch > requests_that_fit(card, longest + 1, 80 * GiB)
    assert f"{longest:,} tokens" in run(name, "--context", "100").stdout


def test_what_does_not_fit_gets_no_rate():
    for args in (("llama-2-70b",), ("llama-2-7b", "--context", "200000"), ("mistral-7b", "--batch", "5000")):
        out = run(*args)
        assert out.returncode == 0, out.stderr
        assert "does not fit: weights" in out.stdout and not re.search(
            r"at most [0-9,.]+\n", out.stdout.split("tokens/s, whole batch")[1].split("\n")[0] + "\n"
        )
    assert "weights 128.48 GiB + one cache of 2.50 GiB > 80 GiB" in run("llama-2-70b").stdout.replace("\n  ", " ")


def test_weight_and_cache_precision_are_separate():
    card = CATALOGUE["llama-2-70b"]
    four = dataclasses.replace(card, weight_bits=4)
    assert weights_bytes(four) * 4 == weights_bytes(card) and cache_bytes_per_token(four) == cache_bytes_per_token(card)
    eight = dataclasses.replace(card, cache_bits=8)
    assert cache_bytes_per_token(eight) * 2 == cache_bytes_per_token(card) and weights_bytes(eight) == weights_bytes(
        card
    )
    # the old single knob still sets both
    both = dataclasses.replace(card, bytes_per_number=1)
    assert weights_bytes(both) * 2 == weights_bytes(card) and cache_bytes_per_token(both) * 2 == cache_bytes_per_token(
        card
    )
    out = run("llama-2-70b", "--weight-bits", "4", "--cache-bits", "8")
    assert out.returncode == 0 and "weights 4-bit, cache 8-bit" in out.stdout and "does not fit" not in out.stdout


def test_several_chips_split_the_weights_and_pay_for_their_links():
    card = CATALOGUE["llama-2-70b"]
    two = answer(card, 4096, 80 * GiB, 3.35e12, 989e12, chips=2)
    assert two.fits and two.fit == requests_that_fit(card, 4096, 160 * GiB)
    # at a large batch on slow links the all-reduces bind
    step, binds = step_bound(card, 64, 4096, 3.35e12, 989e12, chips=8, link_bandwidth=1e9)
    assert binds == "links" and step == pytest.approx(allreduce_bytes_per_step(card, 64, 8) / 1e9)
    assert allreduce_bytes_per_step(card, 64, 8) == card.n_layers * 2 * 64 * card.d_model * 2 * 2 * 7 / 8
    out = run("llama-2-70b", "--chips", "2")
    assert out.returncode == 0 and "tensor parallel" in out.stdout and "latency not counted" in out.stdout


def test_cards_out_of_scope_are_refused():
    with pytest.raises(ValueError, match="multi-head latent attention"):
        parse_card("n_layers=61,d_model=7168,n_heads=128,d_head=128,d_ff=2048,vocab=129280,kv_lora_rank=512")
    with pytest.raises(ValueError, match="windows that differ by layer"):
        parse_card("n_layers=26,d_model=2304,n_heads=8,d_head=256,d_ff=9216,vocab=256000,sliding_window_pattern=2")
    with pytest.raises(ValueError, match="shared experts"):
        parse_card("n_layers=2,d_model=64,n_heads=8,d_head=8,d_ff=96,vocab=101,n_shared_experts=2")
    with pytest.raises(ValueError, match="experts a token"):
        ModelCard("x", n_layers=1, d_model=8, n_heads=2, d_head=4, d_ff=8, vocab=10, n_experts=2, experts_per_token=3)
    own = parse_card("n_layers=32 d_model=4096 n_heads=32 d_head=128 d_ff=11008 vocab=32000")
    assert total_params(own) == total_params(CATALOGUE["llama-2-7b"])


@pytest.mark.parametrize(
    "args,message",
    [
        (("mistral-7b", "--memory", "80"), "needs a unit, e.g. 80GiB"),
        (("--card", "n_layers=0,d_model=8,n_heads=2,d_head=4,d_ff=8,vocab=10"), "n_layers must be"),
        (("mistral-7b", "--bandwidth", "0TB/s"), "between 1MB/s and 1PB/s"),
        (("mistral-7b", "--flops", "0"), "between 1M and 1000P"),
        (("mistral-7b", "--memory", "0GiB"), "between 1MiB and 1PiB"),
        (("mistral-7b", "--memory", "1e30GB"), "between 1MiB and 1PiB"),
        (("mistral-7b", "--memory", "-80GiB"), "must be positive"),
        (("mistral-7b", "--compare", "llama-2-7b", "gpt2-small"), "not several"),
        (("mistral-7b", "--weight-bits", "0"), "number of bits from 1 to 32"),
        (("mistral-7b", "--cache-bits", "nan"), "number of bits from 1 to 32"),
        (("mistral-7b", "--chips", "-2"), "whole number from 1"),
        (("mistral-7b", "--batch", "1.5"), "whole number from 1"),
        (("mistral-7b", "--context", "8k"), "positive number of tokens"),
        (("mistral-7b", "--link", "450GB"), "bytes per second"),
        (("mistral-7b", "--bandwidth", "3.35"), "needs a unit"),
        (("--card", "n_layers=3"), "--card needs"),
        (("--card", "n_layers=3,kv_lora_rank=4"), "out of scope"),
        (("mistral-7b", "--bogus"), "unrecognized arguments"),
    ],
)
def test_every_bad_input_gets_one_line_and_exit_2(args, message):
    out = run(*args)
    assert out.returncode == 2 and out.stdout == "" and message in out.stderr, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
