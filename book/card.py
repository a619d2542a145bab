"""The walk-away question as a tool: parameters, cache and capacity from a model card.

Introduced in the model-card chapter (after the recap). For any decoder-only
transformer described by its card, it answers: total and active parameters,
cache bytes per token, weight bytes, how many requests of N tokens fit beside
the weights in M bytes (an upper bound: perfect packing, every request at full
length), the decode rate that memory bandwidth allows at a given batch (an
upper bound too), and the two rooflines of a decode step: the weight products,
about B operations per byte read at a batch of B and 2-byte weights, and
attention over the cache, about G operations per byte (G query heads per
key-value head) at any batch.

Command line (after `make book` has set up .venv)::

    python -m book.card mistral-7b --context 8192 --memory 80GiB --bandwidth 3.35TB/s
    python -m book.card --compare llama-2-7b mistral-7b --context 32768
    python -m book.card --list

It warns when a context passes the length a model was trained at, refuses one
past its table of positions, and refuses contexts beyond MAX_CONTEXT tokens.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import KW_ONLY, dataclass

__all__ = [
    "ModelCard", "EXAMPLE_MODEL", "CATALOGUE", "cached_tokens", "cache_bytes", "total_params", "active_params", "cache_bytes_per_token", "weights_bytes",
    "requests_that_fit", "weights_read_per_step", "decode_tokens_per_second", "parse_bytes", "parse_rate",
    "parse_flops", "product_params", "weight_ops_per_byte", "attention_ops_per_byte", "compute_bound_batch", "decode_step_roofs", "context_warning",
    "MAX_CONTEXT",
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
    bytes_per_number: int = 2
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
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: {self.n_heads} query heads do not split into {self.n_kv_heads} groups")


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


def cache_bytes_per_token(c: ModelCard) -> int:
    """Key and value, in every layer, for every key-value head: 2 x layers x kv heads x head size x bytes."""
    return 2 * c.n_layers * c.n_kv_heads * c.d_head * c.bytes_per_number


def cached_tokens(c: ModelCard, context: int) -> int:
    """Tokens a request's cache holds at `context` tokens: all of them, or the last `window` (a rolling cache)."""
    return min(context, c.window) if c.window else context


def cache_bytes(c: ModelCard, context: int) -> int:
    """Bytes of one request's cache at `context` tokens."""
    return cached_tokens(c, context) * cache_bytes_per_token(c)


def weights_bytes(c: ModelCard) -> int:
    return total_params(c) * c.bytes_per_number


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
    return (_shared_params(c) - unread + c.n_layers * touched * _expert_params(c)) * c.bytes_per_number


def decode_tokens_per_second(c: ModelCard, bandwidth: float, batch: int, context: int) -> float:
    """Memory-bound decode rate: each step reads the weights once and every request's whole cache.

    An upper bound: it counts only the bytes at the full bandwidth, which real kernels do not reach."""
    step_bytes = weights_read_per_step(c, batch) + batch * cache_bytes(c, context)
    return batch * bandwidth / step_bytes


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
    attention = (batch * cache_bytes(c, context) / bandwidth,
                 batch * tokens * attention_ops_per_cached_token(c) / ops_per_second)
    return {"weights": weights, "attention": attention}


def context_warning(c: ModelCard, context: int) -> str:
    """A warning when `context` passes the length the model was trained at ('' when it does not)."""
    if c.trained_context and context > c.trained_context:
        return (f"warning: {c.name} was trained at {c.trained_context:,} tokens; at {context:,} the figures are "
                "the arithmetic of its shape, not what the released model can read well")
    return ""


# The example model of the source pages (chapter 3): no real product. 335,594,496 parameters.
EXAMPLE_MODEL = ModelCard(
    "example model", n_layers=24, n_heads=16, d_head=64, d_model=1024, d_ff=4096, vocab=32_768,
    bytes_per_number=2, source="the source page's example (section 3)",
)


CATALOGUE = {
    card.name: card
    for card in [
        ModelCard(
            "gpt2-small", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, d_head=64, d_ff=3072,
            ffn_matrices=2, vocab=50_257, tied_output=True, attn_biases=True, ffn_biases=True, norm_params=2, positions=1024,
            trained_context=1_024, source="Radford et al. 2019; released config (n_layer 12, n_embd 768, n_head 12, n_ctx 1024)",
            published="124M", published_where="the released checkpoint's name in openai/gpt-2",
            exact=124_439_808, exact_where="GPT2LMHeadModel.from_pretrained('gpt2'): sum of p.numel() over its parameters (the output layer tied, mask buffers excluded)",
        ),
        ModelCard(
            "gpt2-xl", n_layers=48, d_model=1600, n_heads=25, n_kv_heads=25, d_head=64, d_ff=6400,
            ffn_matrices=2, vocab=50_257, tied_output=True, attn_biases=True, ffn_biases=True, norm_params=2, positions=1024,
            trained_context=1_024, source="Radford et al. 2019; released config (n_layer 48, n_embd 1600, n_head 25, n_ctx 1024)",
            published="1558M",
            published_where="the released checkpoint's name in openai/gpt-2 (the paper's table says 1542M)",
            exact=1_557_611_200, exact_where="GPT2LMHeadModel.from_pretrained('gpt2-xl'): sum of p.numel() over its parameters",
        ),
        ModelCard(
            "llama-2-7b", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, d_head=128, d_ff=11_008,
            ffn_matrices=3, vocab=32_000, tied_output=False,
            trained_context=4_096, source="Touvron et al. 2023, Llama 2 (arXiv 2307.09288); released config (SwiGLU 11008, 32 kv heads)",
            published="6.7B", published_where="LLaMA 7B, the same shape: Touvron et al. 2023, arXiv 2302.13971, Table 2",
            exact=6_738_415_616, exact_where="the released checkpoint meta-llama/Llama-2-7b-hf: sum of p.numel() over its parameters",
        ),
        ModelCard(
            "llama-2-70b", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128, d_ff=28_672,
            ffn_matrices=3, vocab=32_000, tied_output=False,
            trained_context=4_096, source="Touvron et al. 2023, Llama 2 (arXiv 2307.09288); released config (grouped-query, 8 kv heads)",
            published="70B", published_where="the model's name in the Llama 2 paper",
            exact=68_976_648_192, exact_where="the released checkpoint meta-llama/Llama-2-70b-hf: sum of p.numel() over its parameters",
        ),
        ModelCard(
            "mistral-7b", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, d_ff=14_336,
            ffn_matrices=3, vocab=32_000, tied_output=False, window=4096,
            trained_context=8_192, source="Jiang et al. 2023, Mistral 7B (arXiv 2310.06825), Table 1",
            published="7B", published_where="the model's name in the Mistral 7B paper",
            exact=7_241_732_096, exact_where="the released checkpoint mistralai/Mistral-7B-v0.1: sum of p.numel() over its parameters",
        ),
        ModelCard(
            "mixtral-8x7b", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, d_ff=14_336,
            ffn_matrices=3, vocab=32_000, tied_output=False, n_experts=8, experts_per_token=2,
            trained_context=32_768, source="Jiang et al. 2024, Mixtral of Experts (arXiv 2401.04088), Table 1",
            published="47B", published_active="13B", published_where="Mixtral paper, section 2",
            exact=46_702_792_704, exact_where="the released checkpoint mistralai/Mixtral-8x7B-v0.1: sum of p.numel() over its parameters",
        ),
    ]
}

_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([KMGT]I?B|B)?\s*", re.IGNORECASE)


def parse_bytes(text: str) -> float:
    """'80GiB' -> 85899345920.0; accepts B, KB/MB/GB/TB (powers of 1000) and KiB/MiB/GiB/TiB (of 1024)."""
    m = _SIZE.fullmatch(text)
    if not m:
        raise ValueError(f"cannot read a size from {text!r}: write a number and a unit, e.g. 80GiB or 40GB")
    return float(m.group(1)) * _UNITS[(m.group(2) or "").upper()]


def parse_flops(text: str) -> float:
    """'989T' or '989e12' -> 9.89e14 operations per second (K, M, G, T, P prefixes; 'FLOP/s' optional)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([KMGTP]?)\s*(?:FLOP/?S|FLOPS)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cannot read an arithmetic rate from {text!r}: write operations per second, e.g. 989T")
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[m.group(2).upper()]


def parse_rate(text: str) -> float:
    """'3.35TB/s' -> 3.35e12 bytes per second."""
    if not text.strip().lower().endswith("/s"):
        raise ValueError(f"cannot read a bandwidth from {text!r}: write bytes per second, e.g. 3.35TB/s or 900GB/s")
    return parse_bytes(text.strip()[:-2])


def _rows(c: ModelCard, context: int, memory: float, bandwidth: float, flops: float):
    fit = requests_that_fit(c, context, memory)
    fits = f"at most {fit:,}" if weights_bytes(c) <= memory else "0 (weights too big)"
    at_fit = f"at most {decode_tokens_per_second(c, bandwidth, fit, context):,.0f} tokens/s" if fit else "none fit"
    return [
        ("total parameters", f"{total_params(c) / 1e9:,.2f} B"),
        ("active parameters per token", f"{active_params(c) / 1e9:,.2f} B"),
        ("weights", f"{weights_bytes(c) / 2**30:,.2f} GiB"),
        ("cache per token", f"{cache_bytes_per_token(c) / 2**10:,.0f} KiB"),
        (f"cache per request of {context:,} tokens", f"{cache_bytes(c, context) / 2**30:,.2f} GiB"),
        (f"requests that fit in {memory / 2**30:,.0f} GiB", fits),
        ("decode, one request", f"at most {decode_tokens_per_second(c, bandwidth, 1, context):,.0f} tokens/s"),
        ("decode, all requests that fit", at_fit),
        ("weight products: compute-bound from batch", f"{compute_bound_batch(c, bandwidth, flops):,}"),
        ("attention over the cache: operations/byte", f"{attention_ops_per_byte(c):g} (ridge {flops / bandwidth:,.0f})"),
        ("published total (active)", c.published + (f" ({c.published_active})" if c.published_active else "")),
    ]


def table(names, context: int, memory: float, bandwidth: float, flops: float = 989e12) -> str:
    """The walk-away answer for one or more catalogue models, as a text table."""
    cards = [CATALOGUE[n] for n in names]
    columns = [_rows(c, context, memory, bandwidth, flops) for c in cards]
    labels = [label for label, _ in columns[0]]
    width = max(map(len, labels))
    head = " " * width + "".join(f"  {c.name:>24}" for c in cards)
    lines = [head] + [
        f"{label:<{width}}" + "".join(f"  {col[i][1]:>24}" for col in columns) for i, label in enumerate(labels)]
    note = (f"at {context:,} tokens a request, {memory / 2**30:,.0f} GiB of accelerator memory, "
            f"{bandwidth / 1e12:,.2f} TB/s, {flops / 1e12:,.0f} T operations/s; {cards[0].bytes_per_number} bytes a number")
    bounds = ("upper bounds: requests packed perfectly at full length, tokens/s at the full bandwidth "
              "(real kernels reach less)")
    warnings = [w for w in (context_warning(c, context) for c in cards) if w]
    return "\n".join(lines + [note, bounds] + warnings)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m book.card",
        description="Total and active parameters, cache per token, and how many requests fit, for a published model.")
    parser.add_argument("name", nargs="?", help=f"one of: {', '.join(CATALOGUE)}")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two models side by side")
    parser.add_argument("--context", type=int, default=None,
                        help="tokens per request (default 8192, or a model's table of positions if shorter)")
    parser.add_argument("--memory", default="80GiB", help="accelerator memory, e.g. 80GiB or 40GB (default 80GiB)")
    parser.add_argument("--bandwidth", default="3.35TB/s", help="memory bandwidth, e.g. 3.35TB/s (default 3.35TB/s)")
    parser.add_argument("--flops", default="989T",
                        help="dense 16-bit arithmetic rate, operations/s, e.g. 989T (default 989T)")
    parser.add_argument("--list", action="store_true", help="list the known models and where their shapes come from")
    args = parser.parse_args(argv)

    if args.list:
        for card in CATALOGUE.values():
            print(f"{card.name:14} shape: {card.source}\n{'':14} published {card.published}: {card.published_where}")
        return 0
    names = args.compare or ([args.name] if args.name else [])
    if not names:
        parser.error(f"name a model or use --compare A B; known models: {', '.join(CATALOGUE)}")
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; known models: {', '.join(CATALOGUE)}")
    try:
        memory, bandwidth, flops = parse_bytes(args.memory), parse_rate(args.bandwidth), parse_flops(args.flops)
    except ValueError as err:
        parser.error(str(err))
    if args.context is None:  # 8,192, or the shortest table of positions among the named models
        args.context = min([8192] + [CATALOGUE[n].positions for n in names if CATALOGUE[n].positions])
    if args.context <= 0:
        parser.error("--context must be a positive number of tokens, e.g. 8192")
    if args.context > MAX_CONTEXT:
        parser.error(f"--context {args.context:,} tokens is beyond any released model's window; "
                     f"the calculator accepts up to {MAX_CONTEXT:,}")
    for n in names:
        if CATALOGUE[n].positions and args.context > CATALOGUE[n].positions:
            parser.error(f"{n} has a table of {CATALOGUE[n].positions:,} positions: it cannot read "
                         f"{args.context:,} tokens at all")
    print(table(names, args.context, memory, bandwidth, flops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
