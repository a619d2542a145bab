"""The walk-away question as a tool: parameters, cache and capacity from a model card.

Introduced in the model-card chapter (after the recap). Its scope: decoder-only transformers, dense or
with a top-k mixture of experts, with multi-head or grouped-query attention and at most one sliding
window for every layer. Multi-head latent attention (DeepSeek), windows that differ by layer (Gemma 2
and 3) and shared experts are outside it; a card with them is refused (`parse_card`), not answered wrongly.

For such a card it answers: total and active parameters, cache bytes per token, weight bytes (weights
and cache each at their own precision, `weight_bits` and `cache_bits`), how many requests of N tokens
fit beside the weights in M bytes (an upper bound: perfect packing, every request at full length), and
the decode rate at a batch, bounded by both roofs: a step takes at least the longer of reading its bytes
at the full bandwidth and doing its arithmetic at the peak rate (and, on several chips in tensor
parallel, of sending its all-reduces over the links). It also gives the two rooflines of a decode step
(chapter 6): the weight products, about B operations per byte read at a batch of B and 2-byte weights,
and attention over the cache, about G operations per byte (G query heads per key-value head) at any batch.

Command line (after `make book` has set up .venv)::

    python -m book.card mistral-7b --context 8192 --memory 80GiB --bandwidth 3.35TB/s
    python -m book.card llama-2-70b --weight-bits 4 --chips 2
    python -m book.card --card n_layers=32,d_model=4096,n_heads=32,d_head=128,d_ff=11008,vocab=32000
    python -m book.card --compare llama-2-7b mistral-7b --context 32768
    python -m book.card --list

It warns when a context passes the length a model was trained at, refuses one past its table of
positions, and refuses contexts beyond MAX_CONTEXT tokens. Any input it cannot use gets one line
naming what it expected, and exit status 2, before anything else is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import textwrap
from dataclasses import KW_ONLY, dataclass

__all__ = [
    "ModelCard",
    "EXAMPLE_MODEL",
    "CATALOGUE",
    "cached_tokens",
    "cache_bytes",
    "total_params",
    "active_params",
    "cache_bytes_per_token",
    "weights_bytes",
    "requests_that_fit",
    "weights_read_per_step",
    "decode_tokens_per_second",
    "parse_bytes",
    "parse_rate",
    "parse_flops",
    "product_params",
    "weight_ops_per_byte",
    "attention_ops_per_byte",
    "compute_bound_batch",
    "decode_step_roofs",
    "context_warning",
    "MAX_CONTEXT",
    "weight_bits",
    "cache_bits",
    "step_bound",
    "longest_context",
    "parse_card",
    "answer",
    "table",
    "main",
    "attention_ops_per_cached_token",
    "allreduce_bytes_per_step",
    "Answer",
    "LINK_BANDWIDTH",
    "OUT_OF_SCOPE",
]

# the longest context the calculator accepts: 2**24 tokens, beyond any released model's window
MAX_CONTEXT = 2**24


@dataclass(frozen=True)
class ModelCard:
    """A decoder-only transformer as its card states it: the one description of a model in the course.

    Introduced in chapter 3 (the example model); chapter 10 runs it on published models, and
    `book.tiny.card_of` describes the tiny trained model with it. Only the shape fields are required;
    the defaults describe the course's example layout (no biases, RMSNorm-style weight-only norms,
    a tied output layer, two feed-forward matrices, one key-value head per query head).
    """

    name: str = "model"
    _: KW_ONLY
    n_layers: int
    d_model: int
    n_heads: int  # query heads
    d_head: int
    d_ff: int  # feed-forward width (of one expert)
    vocab: int
    n_kv_heads: int = 0  # key-value heads; 0 means one per query head (no grouped-query attention)
    ffn_matrices: int = 2  # 2 for up/down (GPT-2), 3 for gated up/gate/down (SwiGLU)
    tied_output: bool = True  # output layer shares the token-embedding matrix
    n_experts: int = 1
    experts_per_token: int = 1
    bytes_per_number: float = 2  # bytes a number, for weights and cache alike unless the next two say otherwise
    weight_bits: float = 0  # bits a weight (0: 8 x bytes_per_number); 4 for 4-bit weights
    cache_bits: float = 0  # bits a cached key or value number (0: 8 x bytes_per_number)
    attn_biases: bool = False  # a bias on the attention projections (GPT-2)
    ffn_biases: bool = False  # a bias on the feed-forward matrices (GPT-2, the tiny model)
    norm_params: int = 1  # numbers per width in each norm: 1 (RMSNorm weight) or 2 (LayerNorm weight and bias)
    positions: int = 0  # rows of a learned position table (0 for rotary positions)
    window: int = 0  # sliding-window attention span in tokens (0: every token attends to the whole context)
    trained_context: int = 0  # the sequence length the released model was trained at (0: not stated)
    source: str = ""  # where the shape comes from
    published: str = ""  # the total its authors publish, as they print it: "6.7B", "124M"
    published_active: str = ""  # the active count they publish, for a mixture of experts
    published_where: str = ""  # where that published figure stands
    exact: int = 0  # the exact count of the released checkpoint's tensors, where known
    exact_where: str = ""  # where that exact count comes from

    def __post_init__(self):
        if not self.n_kv_heads:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        for field in ("n_heads", "n_kv_heads", "n_experts", "experts_per_token"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{self.name}: {field} must be a positive whole number, not {value!r}")
        # 0 is allowed here, for the parts of a model (a block without its feed-forward layer or vocabulary);
        # a card given on the command line needs them positive (parse_card)
        for field in ("n_layers", "d_model", "d_head", "d_ff", "vocab", "positions", "window", "trained_context"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{self.name}: {field} must be a whole number, 0 or more, not {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: {self.n_heads} query heads do not split into {self.n_kv_heads} groups")
        if self.experts_per_token > self.n_experts:
            raise ValueError(f"{self.name}: {self.experts_per_token} experts a token, of only {self.n_experts}")
        if self.ffn_matrices not in (1, 2, 3) or self.norm_params not in (0, 1, 2):
            raise ValueError(f"{self.name}: ffn_matrices is 2 or 3 (1 for a part) and norm_params 0, 1 or 2")
        for field in ("bytes_per_number", "weight_bits", "cache_bits"):
            value = getattr(self, field)
            low = 0 if field != "bytes_per_number" else 1e-9
            if not isinstance(value, (int, float)) or not low <= value <= 64:
                raise ValueError(f"{self.name}: {field} must be a number of bits or bytes up to 64, not {value!r}")


def _attention_params(c: ModelCard) -> int:
    q_out, kv_out = c.n_heads * c.d_head, c.n_kv_heads * c.d_head
    weights = c.d_model * q_out + 2 * c.d_model * kv_out + q_out * c.d_model  # W_q, W_k, W_v, W_o
    return weights + ((q_out + 2 * kv_out + c.d_model) if c.attn_biases else 0)


def _expert_params(c: ModelCard) -> int:
    return c.ffn_matrices * c.d_model * c.d_ff + ((c.d_ff + c.d_model) if c.ffn_biases else 0)


def _shared_params(c: ModelCard) -> int:
    """Everything but the experts: embeddings, attention, router, norms, output layer."""
    router = c.d_model * c.n_experts if c.n_experts > 1 else 0
    per_layer = _attention_params(c) + router + 2 * c.norm_params * c.d_model
    return _embedding_params(c) + c.n_layers * per_layer + c.norm_params * c.d_model + _output_params(c)


def _embedding_params(c: ModelCard) -> int:
    return (c.vocab + c.positions) * c.d_model


def _output_params(c: ModelCard) -> int:
    return 0 if c.tied_output else c.vocab * c.d_model


def total_params(c: ModelCard) -> int:
    """Every trainable number: what memory must hold."""
    return _shared_params(c) + c.n_layers * c.n_experts * _expert_params(c)


def active_params(c: ModelCard) -> int:
    """The numbers one token passes through: what sets the compute per token."""
    return _shared_params(c) + c.n_layers * c.experts_per_token * _expert_params(c)


def product_params(c: ModelCard) -> int:
    """The active parameters a token multiplies by: all but the lookup tables (chapter 6).

    An untied token-embedding table and a learned position table are read one row per token and added,
    with no multiply-adds; a tied table stays, since it is also the output layer's matrix."""
    lookups = (0 if c.tied_output else c.vocab * c.d_model) + c.positions * c.d_model
    return active_params(c) - lookups


def weight_bits(c: ModelCard) -> float:
    """Bits a weight is stored in: the card's weight_bits, or 8 x bytes_per_number when it gives none."""
    return c.weight_bits or 8 * c.bytes_per_number


def cache_bits(c: ModelCard) -> float:
    """Bits a cached key or value number is stored in: cache_bits, or 8 x bytes_per_number."""
    return c.cache_bits or 8 * c.bytes_per_number


def _bytes(numbers: int, bits: float):
    """Bytes that `numbers` numbers of `bits` bits fill: a whole count where the bits make one."""
    exact = numbers * bits / 8
    return round(exact) if float(exact).is_integer() else exact


def cache_bytes_per_token(c: ModelCard) -> int:
    """Key and value, in every layer, for every key-value head: 2 x layers x kv heads x head size x bytes."""
    return _bytes(2 * c.n_layers * c.n_kv_heads * c.d_head, cache_bits(c))


def cached_tokens(c: ModelCard, context: int) -> int:
    """Tokens a request's cache holds at `context` tokens: all of them, or the last `window` (a rolling cache)."""
    return min(context, c.window) if c.window else context


def cache_bytes(c: ModelCard, context: int) -> int:
    """Bytes of one request's cache at `context` tokens."""
    return cached_tokens(c, context) * cache_bytes_per_token(c)


def weights_bytes(c: ModelCard) -> int:
    """Bytes of the weights at `weight_bits` a number (no quantisation scales counted)."""
    return _bytes(total_params(c), weight_bits(c))


def requests_that_fit(c: ModelCard, tokens: int, memory: float) -> int:
    """Whole requests of `tokens` tokens whose caches fit in `memory` bytes beside the weights (0 if none).

    An upper bound: it assumes perfect packing (no fragmentation, no activations or workspace) and every
    request at its full length at once. Real servers reserve memory for activations and allocate the
    cache in blocks (chapter 7)."""
    spare = memory - weights_bytes(c)
    return max(0, math.floor(spare / cache_bytes(c, tokens)))


def weights_read_per_step(c: ModelCard, batch: int) -> float:
    """Weight bytes one decode step reads: the shared weights and the experts the batch's tokens touch.

    The input embedding table is read one row per token (the output layer reads all of it, so a tied
    table is read whole). With uniform routing, a layer's expert is untouched by one token with chance
    1 - k/E, so a batch of B tokens touches E x (1 - (1 - k/E)^B) experts on average.
    """
    touched = c.n_experts * (1 - (1 - c.experts_per_token / c.n_experts) ** batch)
    unread = 0 if c.tied_output else (c.vocab - min(batch, c.vocab)) * c.d_model
    unread += (c.positions - min(batch, c.positions)) * c.d_model
    return (_shared_params(c) - unread + c.n_layers * touched * _expert_params(c)) * weight_bits(c) / 8


# a link's default: NVLink 4 on an H100 SXM, 450 GB/s each way (900 GB/s both ways together)
LINK_BANDWIDTH = 450e9
ACTIVATION_BYTES = 2  # activations travel between chips in 16 bits


def allreduce_bytes_per_step(c: ModelCard, batch: int, chips: int) -> float:
    """Bytes each chip sends in one decode step in tensor parallel over `chips` chips.

    Two all-reduces a layer (after attention and after the feed-forward layer), of B x d_model numbers each:
    2 x B x d_model numbers a layer, of which a ring all-reduce sends 2 (N - 1) / N over each chip's link."""
    if chips == 1:
        return 0.0
    numbers = c.n_layers * 2 * batch * c.d_model
    return numbers * ACTIVATION_BYTES * 2 * (chips - 1) / chips


def step_bound(
    c: ModelCard,
    batch: int,
    context: int,
    bandwidth: float,
    ops_per_second: float = math.inf,
    chips: int = 1,
    link_bandwidth: float = LINK_BANDWIDTH,
) -> tuple[float, str]:
    """The least time one decode step can take, and which roof sets it: "memory", "arithmetic" or "links".

    Reading: the weights once and every request's cache, at the full bandwidth of all the chips. Arithmetic:
    the weight products and attention over the cache, at the peak rate of all the chips. Links: the
    all-reduces of tensor parallelism over `chips` chips (weights and caches split evenly among them). The
    step takes at least the longest of the three, however they overlap: a bound, which real kernels,
    uneven splits and each all-reduce's latency (not counted) only lengthen."""
    roofs = decode_step_roofs(c, batch, context, chips * bandwidth, chips * ops_per_second)
    times = {
        "memory": roofs["weights"][0] + roofs["attention"][0],
        "arithmetic": roofs["weights"][1] + roofs["attention"][1],
        "links": allreduce_bytes_per_step(c, batch, chips) / link_bandwidth,
    }
    binds = max(times, key=times.get)
    return times[binds], binds


def decode_tokens_per_second(
    c: ModelCard,
    bandwidth: float,
    batch: int,
    context: int,
    ops_per_second: float = math.inf,
    chips: int = 1,
    link_bandwidth: float = LINK_BANDWIDTH,
) -> float:
    """Decode rate of a batch, tokens a second: batch / the least time of a step (`step_bound`).

    Each step reads the weights once and every request's whole cache, and does their arithmetic. Without
    `ops_per_second` only the reading is counted (the memory roof alone, as chapter 6 first draws it);
    with it, both roofs. An upper bound either way: real kernels reach neither peak."""
    return batch / step_bound(c, batch, context, bandwidth, ops_per_second, chips, link_bandwidth)[0]


def weight_ops_per_byte(c: ModelCard, batch: int) -> float:
    """Operations per byte of the weight products in one decode step: 2 x product params x batch / weight bytes read.

    About `batch` at 2-byte weights (chapter 6): every weight read serves one multiply-add per request
    (the rows of a lookup table serve none: they are neither counted as operations nor mostly read)."""
    return 2 * product_params(c) * batch / weights_read_per_step(c, batch)


def attention_ops_per_byte(c: ModelCard) -> float:
    """Operations per byte of attention over the cache in a decode step, whatever the batch or context.

    Per cached token a query head does 2 x d_head operations on the key and 2 x d_head on the value, in
    every layer, while the token's cache holds 2 x layers x kv heads x d_head numbers: 2G operations per
    number for G = heads / kv heads, so G per byte at 2 bytes a number, 2G at 1 byte (chapter 6)."""
    return attention_ops_per_cached_token(c) / cache_bytes_per_token(c)


def attention_ops_per_cached_token(c: ModelCard) -> int:
    """Operations one query does over one cached token, in every layer: 2 x d_head with the key and 2 x d_head
    with the value, in each head."""
    return 4 * c.n_layers * c.n_heads * c.d_head


def compute_bound_batch(c: ModelCard, bandwidth: float, ops_per_second: float) -> int:
    """The batch at which the weight products' arithmetic first takes as long as reading the weights.

    Past it they are bound by arithmetic; attention over the cache is not, at any batch (chapter 6)."""
    ridge = ops_per_second / bandwidth

    def below(batch):
        return weight_ops_per_byte(c, batch) < ridge * (1 - 1e-12)

    high = 1  # weight_ops_per_byte rises with the batch: double past the ridge, then halve the gap
    while below(high):
        high *= 2
    low = high // 2  # below(low) holds, or low is 0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if below(middle) else (low, middle)
    return high


def decode_step_roofs(c: ModelCard, batch: int, context: int, bandwidth: float, ops_per_second: float) -> dict:
    """Seconds of reading and of arithmetic in one decode step, for each of its two kinds of work.

    {"weights": (read, arithmetic), "attention": (read, arithmetic)}; each kind takes at least the larger
    of its two, and the step at least the sum of the two kinds, which run one after the other (chapter 6)."""
    tokens = cached_tokens(c, context)
    weights = (weights_read_per_step(c, batch) / bandwidth, 2 * product_params(c) * batch / ops_per_second)
    attention = (
        batch * cache_bytes(c, context) / bandwidth,
        batch * tokens * attention_ops_per_cached_token(c) / ops_per_second,
    )
    return {"weights": weights, "attention": attention}


def context_warning(c: ModelCard, context: int) -> str:
    """A warning when `context` passes the length the model was trained at ('' when it does not)."""
    if c.trained_context and context > c.trained_context:
        return (
            f"warning: {c.name} was trained at {c.trained_context:,} tokens; at {context:,} the figures are "
            "the arithmetic of its shape, not what the released model can read well"
        )
    return ""


def longest_context(c: ModelCard, batch: int, memory: float) -> int:
    """The longest context at which `batch` requests still fit in `memory` bytes beside the weights.

    0 when they do not fit even at one token; MAX_CONTEXT when a sliding window caps each cache below what
    fits (any context then fits), or the table of positions when that is shorter."""
    top = min(MAX_CONTEXT, c.positions or MAX_CONTEXT)
    if requests_that_fit(c, 1, memory) < batch:
        return 0
    if requests_that_fit(c, top, memory) >= batch:
        return top
    low, high = 1, top  # fits at low, not at high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if requests_that_fit(c, middle, memory) >= batch else (low, middle)
    return low


# The example model of the source pages (chapter 3): no real product. 335,594,496 parameters.
EXAMPLE_MODEL = ModelCard(
    "example model",
    n_layers=24,
    n_heads=16,
    d_head=64,
    d_model=1024,
    d_ff=4096,
    vocab=32_768,
    bytes_per_number=2,
    source="the source page's example (section 3)",
)


CATALOGUE = {
    card.name: card
    for card in [
        ModelCard(
            "gpt2-small",
            n_layers=12,
            d_model=768,
            n_heads=12,
            n_kv_heads=12,
            d_head=64,
            d_ff=3072,
            ffn_matrices=2,
            vocab=50_257,
            tied_output=True,
            attn_biases=True,
            ffn_biases=True,
            norm_params=2,
            positions=1024,
            trained_context=1_024,
            source="Radford et al. 2019; released config (n_layer 12, n_embd 768, n_head 12, n_ctx 1024)",
            published="124M",
            published_where="the released checkpoint's name in openai/gpt-2",
            exact=124_439_808,
            exact_where="GPT2LMHeadModel.from_pretrained('gpt2'): sum of p.numel() over its parameters (the output layer tied, mask buffers excluded)",
        ),
        ModelCard(
            "gpt2-xl",
            n_layers=48,
            d_model=1600,
            n_heads=25,
            n_kv_heads=25,
            d_head=64,
            d_ff=6400,
            ffn_matrices=2,
            vocab=50_257,
            tied_output=True,
            attn_biases=True,
            ffn_biases=True,
            norm_params=2,
            positions=1024,
            trained_context=1_024,
            source="Radford et al. 2019; released config (n_layer 48, n_embd 1600, n_head 25, n_ctx 1024)",
            published="1558M",
            published_where="the released checkpoint's name in openai/gpt-2 (the paper's table says 1542M)",
            exact=1_557_611_200,
            exact_where="GPT2LMHeadModel.from_pretrained('gpt2-xl'): sum of p.numel() over its parameters",
        ),
        ModelCard(
            "llama-2-7b",
            n_layers=32,
            d_model=4096,
            n_heads=32,
            n_kv_heads=32,
            d_head=128,
            d_ff=11_008,
            ffn_matrices=3,
            vocab=32_000,
            tied_output=False,
            trained_context=4_096,
            source="Touvron et al. 2023, Llama 2 (arXiv 2307.09288); released config (SwiGLU 11008, 32 kv heads)",
            published="6.7B",
            published_where="LLaMA 7B, the same shape: Touvron et al. 2023, arXiv 2302.13971, Table 2",
            exact=6_738_415_616,
            exact_where="the released checkpoint meta-llama/Llama-2-7b-hf: sum of p.numel() over its parameters",
        ),
        ModelCard(
            "llama-2-70b",
            n_layers=80,
            d_model=8192,
            n_heads=64,
            n_kv_heads=8,
            d_head=128,
            d_ff=28_672,
            ffn_matrices=3,
            vocab=32_000,
            tied_output=False,
            trained_context=4_096,
            source="Touvron et al. 2023, Llama 2 (arXiv 2307.09288); released config (grouped-query, 8 kv heads)",
            published="70B",
            published_where="the model's name in the Llama 2 paper",
            exact=68_976_648_192,
            exact_where="the released checkpoint meta-llama/Llama-2-70b-hf: sum of p.numel() over its parameters",
        ),
        ModelCard(
            "mistral-7b",
            n_layers=32,
            d_model=4096,
            n_heads=32,
            n_kv_heads=8,
            d_head=128,
            d_ff=14_336,
            ffn_matrices=3,
            vocab=32_000,
            tied_output=False,
            window=4096,
            trained_context=8_192,
            source="Jiang et al. 2023, Mistral 7B (arXiv 2310.06825), Table 1",
            published="7B",
            published_where="the model's name in the Mistral 7B paper",
            exact=7_241_732_096,
            exact_where="the released checkpoint mistralai/Mistral-7B-v0.1: sum of p.numel() over its parameters",
        ),
        ModelCard(
            "mixtral-8x7b",
            n_layers=32,
            d_model=4096,
            n_heads=32,
            n_kv_heads=8,
            d_head=128,
            d_ff=14_336,
            ffn_matrices=3,
            vocab=32_000,
            tied_output=False,
            n_experts=8,
            experts_per_token=2,
            trained_context=32_768,
            source="Jiang et al. 2024, Mixtral of Experts (arXiv 2401.04088), Table 1",
            published="47B",
            published_active="13B",
            published_where="Mixtral paper, section 2",
            exact=46_702_792_704,
            exact_where="the released checkpoint mistralai/Mixtral-8x7B-v0.1: sum of p.numel() over its parameters",
        ),
    ]
}

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "PB": 1e15,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "PIB": 2**50,
}
_NUMBER = r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)"
_SIZE = re.compile(r"\s*" + _NUMBER + r"\s*([KMGTP]I?B|B)?\s*", re.IGNORECASE)


def parse_bytes(text: str, unit_required: bool = False) -> float:
    """'80GiB' -> 85899345920.0; accepts B, KB/MB/GB/TB/PB (powers of 1000) and KiB to PiB (of 1024).

    A bare number is bytes, unless `unit_required` (the command line's case: '80' is more likely 80 GiB)."""
    m = _SIZE.fullmatch(text)
    if not m or (unit_required and not m.group(2)):
        raise ValueError(f"cannot read a size from {text!r}: write a number and a unit, e.g. 80GiB or 40GB")
    return float(m.group(1)) * _UNITS[(m.group(2) or "").upper()]


def parse_flops(text: str) -> float:
    """'989T' or '989e12' -> 9.89e14 operations per second (K, M, G, T, P prefixes; 'FLOP/s' optional)."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*([KMGTP]?)\s*(?:FLOP/?S|FLOPS)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cannot read an arithmetic rate from {text!r}: write operations per second, e.g. 989T")
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[m.group(2).upper()]


def parse_rate(text: str) -> float:
    """'3.35TB/s' -> 3.35e12 bytes per second."""
    if not text.strip().lower().endswith("/s"):
        raise ValueError(f"cannot read a bandwidth from {text!r}: write bytes per second, e.g. 3.35TB/s or 900GB/s")
    try:
        return parse_bytes(text.strip()[:-2])
    except ValueError:
        raise ValueError(
            f"cannot read a bandwidth from {text!r}: write bytes per second, e.g. 3.35TB/s or 900GB/s"
        ) from None


# what a --card may set: the shape of a model the calculator can describe
_CARD_FIELDS = {
    "name": str,
    "n_layers": int,
    "d_model": int,
    "n_heads": int,
    "n_kv_heads": int,
    "d_head": int,
    "d_ff": int,
    "vocab": int,
    "ffn_matrices": int,
    "tied_output": bool,
    "n_experts": int,
    "experts_per_token": int,
    "attn_biases": bool,
    "ffn_biases": bool,
    "norm_params": int,
    "positions": int,
    "window": int,
    "trained_context": int,
}
_CARD_REQUIRED = ("n_layers", "d_model", "n_heads", "d_head", "d_ff", "vocab")
# what a card of another family states, and why the calculator cannot answer for it
OUT_OF_SCOPE = {
    "kv_lora_rank": "multi-head latent attention (DeepSeek) caches a compressed key-value",
    "q_lora_rank": "multi-head latent attention (DeepSeek) caches a compressed key-value",
    "layer_windows": "windows that differ by layer (Gemma 2 and 3)",
    "sliding_window_pattern": "windows that differ by layer (Gemma 2 and 3)",
    "layer_types": "windows that differ by layer (Gemma 2 and 3)",
    "shared_experts": "shared experts (DeepSeek, Qwen mixtures)",
    "n_shared_experts": "shared experts (DeepSeek, Qwen mixtures)",
}
_LARGEST_FIELD = 10**7  # no card field of a released model comes near: a guard against typing slips


def parse_card(text: str) -> ModelCard:
    """A card from 'n_layers=32,d_model=4096,...' (ModelCard's field names; commas or spaces between).

    Required: n_layers, d_model, n_heads, d_head, d_ff, vocab; the rest default as in ModelCard, except
    that the output layer is untied and the feed-forward layer gated (ffn_matrices 3), as in most current
    models. A field of a design outside the calculator's scope is refused with the reason."""
    values: dict = {"name": "your model", "tied_output": False, "ffn_matrices": 3}
    for item in filter(None, re.split(r"[,\s]+", text.strip())):
        key, eq, raw = item.partition("=")
        key = key.strip().lower().replace("-", "_")
        if key in OUT_OF_SCOPE:
            raise ValueError(
                f"out of scope: {OUT_OF_SCOPE[key]}; the calculator answers for dense or top-k "
                "mixture-of-experts decoders with one window for all layers"
            )
        if key not in _CARD_FIELDS or not eq:
            raise ValueError(
                f"cannot read {item!r} in --card: write field=value with fields among {', '.join(_CARD_FIELDS)}"
            )
        kind = _CARD_FIELDS[key]
        if kind is str:
            values[key] = raw
        elif kind is bool:
            if raw.lower() not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError(f"--card {key} is true or false, not {raw!r}")
            values[key] = raw.lower() in ("true", "yes", "1")
        else:
            if not re.fullmatch(r"[0-9]{1,8}", raw) or int(raw) > _LARGEST_FIELD:
                raise ValueError(f"--card {key} must be a whole number up to {_LARGEST_FIELD:,}, not {raw!r}")
            values[key] = int(raw)
    missing = [k for k in _CARD_REQUIRED if k not in values]
    if missing:
        raise ValueError(f"--card needs {', '.join(missing)} (and takes {', '.join(_CARD_REQUIRED)} at least)")
    zero = [k for k in _CARD_REQUIRED if values[k] < 1]
    if zero:
        raise ValueError(f"--card {zero[0]} must be a whole number from 1 to {_LARGEST_FIELD:,}")
    return ModelCard(**values)


def _size(n: float) -> str:
    """Bytes in the largest binary unit that leaves at least 1: 12.55 GiB, 16.0 MiB, 128 KiB."""
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            v = n / scale
            return f"{v:,.2f} {unit}" if unit in ("GiB", "TiB", "PiB") else f"{v:,.{0 if v >= 100 else 1}f} {unit}"
    return f"{n:,.0f} B"


def _memory(n: float) -> str:
    """A memory size as its owner writes it: 80 GiB, 37.25 GiB."""
    v = n / 2**30
    return f"{v:,.0f} GiB" if v >= 1 and abs(v - round(v)) < 5e-3 else _size(n)


def _count(n: int) -> str:
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.2f} M"


def _rate(r: float) -> str:
    return f"{r:,.0f}" if r >= 10 else f"{r:.2g}"


def _seconds(t: float) -> str:
    if t >= 1:
        return f"{t:,.3g} s" if t < 1000 else f"{t:,.0f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} µs"


def _bits(b: float) -> str:
    return f"{b:g}-bit"


@dataclass(frozen=True)
class Answer:
    """The walk-away figures for one card: what `table` prints, as numbers."""

    card: ModelCard
    context: int
    memory: float  # of all the chips together
    fit: int  # requests that fit (0 if none)
    batch: int  # the batch the rates are for: `fit`, or the one asked
    fits: bool  # does that batch fit beside the weights
    step: float  # seconds, at least, a step at that batch (0 when it does not fit)
    binds: str  # "memory", "arithmetic" or "links"
    alone: float  # seconds, at least, a step of one request alone (0 when one does not fit)
    alone_binds: str
    crossing: int  # the batch from which the weight products are bound by arithmetic
    longest: int  # the longest context at which `crossing` requests fit (0: none)

    @property
    def rate(self) -> float:
        return self.batch / self.step if self.fits else 0.0


def answer(
    c: ModelCard,
    context: int,
    memory: float,
    bandwidth: float,
    flops: float = 989e12,
    *,
    batch: int | None = None,
    chips: int = 1,
    link_bandwidth: float = LINK_BANDWIDTH,
) -> Answer:
    """The walk-away answer as numbers. `memory`, `bandwidth` and `flops` are each chip's; with `chips` > 1
    the weights and caches are split evenly among the chips (tensor parallel) and the three are summed."""
    total = chips * memory
    fit = requests_that_fit(c, context, total)
    batch = fit if batch is None else batch
    fits = batch >= 1 and weights_bytes(c) + batch * cache_bytes(c, context) <= total
    step, binds = step_bound(c, batch, context, bandwidth, flops, chips, link_bandwidth) if fits else (0.0, "")
    alone, alone_binds = step_bound(c, 1, context, bandwidth, flops, chips, link_bandwidth) if fit else (0.0, "")
    crossing = compute_bound_batch(c, bandwidth, flops)
    return Answer(
        c,
        context,
        total,
        fit,
        batch,
        fits,
        step,
        binds,
        alone,
        alone_binds,
        crossing,
        longest_context(c, crossing, total),
    )


def _rows(a: Answer, flops: float, bandwidth: float):
    c = a.card
    none = "does not fit"
    if not a.longest:
        longest = "none"
    elif a.longest == MAX_CONTEXT and c.window and not c.positions:
        longest = f"any (window {c.window:,})"
    else:
        longest = f"{a.longest:,} tokens"
    return [
        ("total parameters", _count(total_params(c))),
        ("active parameters per token", _count(active_params(c))),
        ("weights", _size(weights_bytes(c))),
        ("cache per token", _size(cache_bytes_per_token(c))),
        ("cache per request", _size(cache_bytes(c, a.context))),
        (f"requests that fit in {_memory(a.memory)}", f"at most {a.fit:,}" if a.fit else none),
        ("batch", f"{a.batch:,}" if a.batch else "none"),
        ("decode step at that batch", f"at least {_seconds(a.step)}" if a.fits else none),
        ("  bound by", a.binds or "-"),
        ("tokens/s, whole batch", f"at most {_rate(a.rate)}" if a.fits else none),
        ("tokens/s, each request", f"at most {_rate(1 / a.step)}" if a.fits else none),
        ("tokens/s, one request alone", f"at most {_rate(1 / a.alone)}" if a.fit else none),
        ("  bound by", a.alone_binds or "-"),
        ("compute-bound from batch", f"{a.crossing:,}"),
        ("longest context at that batch", longest),
        ("attention operations/byte", f"{attention_ops_per_byte(c):.3g} (ridge {flops / bandwidth:,.0f})"),
        ("published total (active)", (c.published + (f" ({c.published_active})" if c.published_active else "")) or "-"),
    ]


def _why_not(a: Answer) -> str:
    c, w = a.card, weights_bytes(a.card)
    caches = "one cache" if a.batch <= 1 or not a.fit else f"{a.batch:,} caches"
    return (
        f"{c.name} does not fit: weights {_size(w)} + {caches} of {_size(cache_bytes(c, a.context))} > "
        f"{_memory(a.memory)}"
    )


def table(
    names,
    context: int,
    memory: float,
    bandwidth: float,
    flops: float = 989e12,
    *,
    batch: int | None = None,
    chips: int = 1,
    link_bandwidth: float = LINK_BANDWIDTH,
    weight_bits: float | None = None,
    cache_bits: float | None = None,
) -> str:
    """The walk-away answer for one or two models (catalogue names or cards), as a text table of 77 columns.

    `memory`, `bandwidth` and `flops` are each chip's; `weight_bits` and `cache_bits` override the cards'."""
    cards = [CATALOGUE[n] if isinstance(n, str) else n for n in names]
    if weight_bits:
        cards = [dataclasses.replace(c, weight_bits=weight_bits) for c in cards]
    if cache_bits:
        cards = [dataclasses.replace(c, cache_bits=cache_bits) for c in cards]
    answers = [
        answer(c, context, memory, bandwidth, flops, batch=batch, chips=chips, link_bandwidth=link_bandwidth)
        for c in cards
    ]
    columns = [_rows(a, flops, bandwidth) for a in answers]
    labels = [label for label, _ in columns[0]]
    width = max(map(len, labels))
    value = max(len(v) for col in columns for _, v in col + [("", a.card.name) for a in answers])
    value = max(value, 77 - width - 2 if len(cards) == 1 else 0)
    if len(cards) == 1:
        value = max(len(v) for _, v in columns[0] + [("", cards[0].name)])
    head = " " * width + "".join(f"  {c.name:>{value}}" for c in cards)
    lines = [head] + [
        f"{label:<{width}}" + "".join(f"  {col[i][1]:>{value}}" for col in columns) for i, label in enumerate(labels)
    ]
    precision = sorted({(_bits(globals()["weight_bits"](c)), _bits(globals()["cache_bits"](c))) for c in cards})
    chip = f"each of {chips} chips in tensor parallel" if chips > 1 else "one chip"
    notes = [
        f"At {context:,} tokens a request, batch {'of ' + format(batch, ',') if batch else 'all that fit'}; "
        + "; ".join(f"weights {w}, cache {k}" for w, k in precision)
        + f"; {chip}: {_memory(memory)}, {bandwidth / 1e12:,.3g} TB/s, {flops / 1e12:,.4g} T operations/s.",
    ]
    if chips > 1:
        notes.append(
            f"Weights and caches split evenly over the {chips} chips; two all-reduces a layer "
            f"over links of {link_bandwidth / 1e9:,.4g} GB/s each way, their latency not counted."
        )
    notes.append(
        "Counts and rates are upper bounds, times lower bounds: requests packed perfectly at full "
        "length; a step at least the longest of its reading "
        "at full bandwidth, its arithmetic at the peak rate"
        + (" and its all-reduces" if chips > 1 else "")
        + " (real kernels reach less)."
    )
    notes += [_why_not(a) + "." for a in answers if not a.fits]
    notes += [w for w in (context_warning(c, context) for c in cards) if w]
    # a figure and its unit stay on one line
    notes = [re.sub(r"(\d) (GiB|MiB|KiB|TiB|PiB|B|TB/s|GB/s|T|tokens)\b", "\\1\xa0\\2", n) for n in notes]
    wrapped = [textwrap.fill(n, 77, subsequent_indent="  ").replace("\xa0", " ") for n in notes]
    return "\n".join(lines + wrapped)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own adds the usage above it)
        raise _Refused(message)


class _Refused(Exception):
    pass


_LIMITS = {  # each chip's: far beyond any chip, and far above nothing
    "memory": (2**20, 2**50, "1MiB and 1PiB, e.g. 80GiB"),
    "bandwidth": (1e6, 1e15, "1MB/s and 1PB/s, e.g. 3.35TB/s"),
    "flops": (1e6, 1e18, "1M and 1000P operations a second, e.g. 989T"),
    "link": (1e6, 1e15, "1MB/s and 1PB/s, e.g. 450GB/s"),
}
MAX_CHIPS, MAX_BATCH = 4096, 10**9
_VALUED = (
    "--context",
    "--batch",
    "--memory",
    "--bandwidth",
    "--flops",
    "--chips",
    "--link",
    "--weight-bits",
    "--cache-bits",
    "--card",
)


def _whole(text: str, what: str, top: int) -> int:
    if not re.fullmatch(r"\s*[0-9][0-9_,]*\s*", text):
        raise _Refused(f"{what} must be a whole number from 1 to {top:,}, not {text!r}")
    n = int(text.replace(",", "").replace("_", ""))
    if not 1 <= n <= top:
        raise _Refused(f"{what} must be a whole number from 1 to {top:,}, not {text!r}")
    return n


def _bits_option(text: str, what: str) -> float:
    try:
        bits = float(text)
    except ValueError:
        bits = math.nan
    if not 1 <= bits <= 32:  # also refuses nan
        raise _Refused(f"{what} must be a number of bits from 1 to 32, e.g. 4, 8 or 16, not {text!r}")
    return bits


def _measure(text: str, what: str, parse) -> float:
    low, high, say = _LIMITS[what]
    if text.strip().startswith("-"):
        raise _Refused(f"--{what} must be positive: between {say}, not {text!r}")
    if re.fullmatch(r"\s*" + _NUMBER + r"\s*", text, re.IGNORECASE) and what in ("memory", "bandwidth", "link"):
        unit = "e.g. 80GiB or 40GB" if what == "memory" else "in bytes a second, e.g. 3.35TB/s"
        raise _Refused(f"--{what} {text.strip()!r} needs a unit, {unit}")
    try:
        value = parse(text)
    except ValueError as err:
        raise _Refused(str(err)) from None
    if not low <= value <= high:  # also refuses inf and nan
        raise _Refused(f"--{what} {text!r} is out of range: between {say}")
    return value


def _parser() -> _Parser:
    parser = _Parser(
        prog="python -m book.card",
        description="Parameters, cache, requests that fit and decode rates bounded by both roofs, for a dense or "
        "top-k mixture-of-experts decoder with grouped-query attention and one window for all layers.",
    )
    parser.add_argument("name", nargs="?", help=f"one of: {', '.join(CATALOGUE)}")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two models side by side")
    parser.add_argument(
        "--card",
        help="your own model: n_layers=..,d_model=..,n_heads=..,d_head=..,d_ff=..,vocab=.."
        " (and n_kv_heads, n_experts, experts_per_token, window, ...)",
    )
    parser.add_argument(
        "--context", help="tokens per request (default 8192, or a model's table of positions if shorter)"
    )
    parser.add_argument("--batch", help="requests decoded together (default: all that fit)")
    parser.add_argument("--weight-bits", default="16", help="bits a weight, e.g. 4, 8 or 16 (default 16)")
    parser.add_argument("--cache-bits", default="16", help="bits a cached number, e.g. 8 or 16 (default 16)")
    parser.add_argument("--memory", default="80GiB", help="each chip's memory, e.g. 80GiB or 40GB (default 80GiB)")
    parser.add_argument("--bandwidth", default="3.35TB/s", help="each chip's memory bandwidth (default 3.35TB/s)")
    parser.add_argument(
        "--flops",
        default="989T",
        help="each chip's peak arithmetic rate, operations/s (default 989T, an H100's dense 16-bit)",
    )
    parser.add_argument("--chips", default="1", help="chips in tensor parallel (default 1)")
    parser.add_argument("--link", default="450GB/s", help="each chip's link bandwidth, each way (default 450GB/s)")
    parser.add_argument("--list", action="store_true", help="list the known models and where their shapes come from")
    return parser


def _joined(argv):
    """'--memory -80GiB' as '--memory=-80GiB', so that a value that starts with '-' reaches its check."""
    out, argv = [], list(argv)
    while argv:
        arg = argv.pop(0)
        if arg in _VALUED and argv and argv[0].startswith("-") and argv[0] not in _VALUED:
            arg = f"{arg}={argv.pop(0)}"
        out.append(arg)
    return out


def _run(argv) -> str:  # noqa: C901 (the command line's steps in order)
    """The command line's whole output, or _Refused with the one line that says what was expected."""
    args = _parser().parse_args(_joined(argv))
    if args.list:
        if args.name or args.compare or args.card:
            raise _Refused("--list takes no model")
        return "\n".join(
            f"{card.name:14} shape: {card.source}\n{'':14} published {card.published}: {card.published_where}"
            for card in CATALOGUE.values()
        )
    given = sum(bool(x) for x in (args.name, args.compare, args.card))
    if given == 0:
        raise _Refused(f"name a model, use --compare A B or --card; known models: {', '.join(CATALOGUE)}")
    if given > 1:
        raise _Refused("give one of: a model name, --compare A B, or --card, not several")
    if args.card is not None:
        try:
            cards = [parse_card(args.card)]
        except ValueError as err:
            raise _Refused(str(err)) from None
    else:
        names = args.compare or [args.name]
        unknown = [n for n in names if n not in CATALOGUE]
        if unknown:
            raise _Refused(f"unknown model {unknown[0]!r}; known models: {', '.join(CATALOGUE)}")
        cards = [CATALOGUE[n] for n in names]
    memory = _measure(args.memory, "memory", lambda t: parse_bytes(t, unit_required=True))
    bandwidth = _measure(args.bandwidth, "bandwidth", parse_rate)
    flops = _measure(args.flops, "flops", parse_flops)
    link = _measure(args.link, "link", parse_rate)
    chips = _whole(args.chips, "--chips", MAX_CHIPS)
    batch = None if args.batch is None else _whole(args.batch, "--batch", MAX_BATCH)
    weight, cache = _bits_option(args.weight_bits, "--weight-bits"), _bits_option(args.cache_bits, "--cache-bits")
    if args.context is None:  # 8,192, or the shortest table of positions among the named models
        context = min([8192] + [c.positions for c in cards if c.positions])
    else:
        if not re.fullmatch(r"\s*-?[0-9][0-9_,]*\s*", args.context):
            raise _Refused(f"--context must be a positive number of tokens, e.g. 8192, not {args.context!r}")
        context = int(args.context.replace(",", "").replace("_", ""))
    if context <= 0:
        raise _Refused("--context must be a positive number of tokens, e.g. 8192")
    if context > MAX_CONTEXT:
        raise _Refused(
            f"--context {context:,} tokens is beyond any released model's window; "
            f"the calculator accepts up to {MAX_CONTEXT:,}"
        )
    for c in cards:
        if c.positions and context > c.positions:
            raise _Refused(
                f"{c.name} has a table of {c.positions:,} positions: it cannot read {context:,} tokens at all"
            )
    return table(
        cards,
        context,
        memory,
        bandwidth,
        flops,
        batch=batch,
        chips=chips,
        link_bandwidth=link,
        weight_bits=weight,
        cache_bits=cache,
    )


def main(argv=None) -> int:
    """The command line: prints the answer and returns 0, or prints one line on stderr and exits with status 2."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        _parser().print_help()
        return 0
    try:
        out = _run(argv)
    except _Refused as err:
        print(f"book.card: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
