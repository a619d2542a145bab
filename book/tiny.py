"""A tiny decoder-only transformer, trained on the reader's CPU in seconds.

Introduced in chapter 1 and measured in chapters 1 to 6: the loss curve, the mask
leak, the memory of a training step, the key-value cache, sampling, decode speed.
The whole model is in this file; shapes are in the comments (B batch, T tokens,
C width, H heads, D head size, V vocabulary).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "TinyConfig", "TinyGPT", "WordTokenizer", "load_text", "corpus", "batches", "train", "trained_model",
    "generate", "greedy", "sample", "new_caches", "cache_bytes", "one_thread",
]

TEXT_PATH = Path(__file__).with_name("data") / "robot_text.txt"
STEPS, BATCH, LR, SEED = 400, 32, 1e-2, 0  # the training run every chapter repeats: a few seconds on one core
TRAIN_WINDOW = 24  # tokens per training window; an episode of the text is about 16 words


@contextmanager
def one_thread():
    """Run torch on one thread: the same numbers on every machine, and faster for a model this small."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- data


class WordTokenizer:
    """Words to ids and back; the vocabulary is every word of the training text, sorted."""

    def __init__(self, text: str):
        self.words = sorted(set(text.split()))
        self.ids = {w: i for i, w in enumerate(self.words)}

    def encode(self, text: str) -> list[int]:
        return [self.ids[w] for w in text.split()]

    def decode(self, ids) -> str:
        return " ".join(self.words[int(i)] for i in ids)

    def __len__(self):
        return len(self.words)


def load_text() -> str:
    """The shipped training text (see book/make_text.py)."""
    return TEXT_PATH.read_text()


def corpus():
    """The tokenizer of the shipped text and the whole text as one row of token ids."""
    text = load_text()
    tokenizer = WordTokenizer(text)
    return tokenizer, torch.tensor(tokenizer.encode(text))


def batches(data: torch.Tensor, batch: int, context: int, generator: torch.Generator):
    """Endless random windows of the token stream: inputs and the same windows one token on."""
    while True:
        starts = torch.randint(len(data) - context - 1, (batch,), generator=generator)
        x = torch.stack([data[s:s + context] for s in starts])  # (B, T)
        y = torch.stack([data[s + 1:s + context + 1] for s in starts])  # (B, T), shifted by one
        yield x, y


# ---------------------------------------------------------------- model


@dataclass
class TinyConfig:
    vocab: int
    context: int = 128  # positions the model has slots for; training uses only the first TRAIN_WINDOW
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    causal: bool = True  # False trains the model that can see the answer


class Attention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        H = self.cfg.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        if cache is not None:  # keys and values of earlier positions, kept from earlier steps
            if cache["k"] is not None:
                k = torch.cat([cache["k"], k], dim=2)  # (B, H, T_past + T, D)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // H)  # (B, H, T, T_all)
        if self.cfg.causal:
            past = k.shape[2] - T
            allowed = torch.ones(T, k.shape[2], dtype=torch.bool).tril(diagonal=past)
            scores = scores.masked_fill(~allowed, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)
        return self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))

    def forward(self, x, cache=None):
        x = x + self.attn(self.norm1(x), cache)  # residual around attention
        return x + self.ff(self.norm2(x))  # residual around the feed-forward layer


class TinyGPT(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.tokens = nn.Embedding(cfg.vocab, cfg.d_model)
        self.positions = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.head.weight = self.tokens.weight  # tied output layer
        for module in self.modules():  # small starting weights, so the untrained model is unsure of everything
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None, caches=None, start=0):
        """Raw outputs (B, T, V) for token ids (B, T); with targets, also the mean loss in nats."""
        B, T = idx.shape
        x = self.tokens(idx) + self.positions(torch.arange(start, start + T))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        logits = self.head(self.norm(x))  # (B, T, V)
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def train(model, data, steps=STEPS, batch=BATCH, lr=LR, seed=SEED, window=TRAIN_WINDOW):
    """Train with AdamW on random windows of the text; returns the loss of every step, in nats."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    with one_thread():
        for _, (x, y) in zip(range(steps), batches(data, batch, window, gen)):
            _, loss = model(x, y)  # x, y: (B, T)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


def trained_model(causal=True, steps=STEPS, seed=SEED):
    """The course's tiny model, built from a fixed seed and trained on the shipped text: (model, losses)."""
    tokenizer, data = corpus()
    torch.manual_seed(seed)
    model = TinyGPT(TinyConfig(vocab=len(tokenizer), causal=causal))
    losses = train(model, data, steps=steps, seed=seed)
    return model.eval(), losses


# ---------------------------------------------------------------- generation


def greedy(logits, generator=None):
    """The single most likely token."""
    return int(torch.argmax(logits))


def sample(logits, temperature=1.0, top_p=1.0, generator=None):
    """Divide by the temperature, keep the smallest top set reaching top_p, draw one token."""
    chances = torch.softmax(logits / temperature, dim=-1)
    order = torch.argsort(chances, descending=True)
    running = torch.cumsum(chances[order], dim=0)
    keep = order[: int((running < top_p).sum()) + 1]  # the words needed to reach top_p
    kept = chances[keep] / chances[keep].sum()
    return int(keep[torch.multinomial(kept, 1, generator=generator)])


def new_caches(model):
    return [{"k": None, "v": None} for _ in model.blocks]


@torch.no_grad()
def generate(model, prompt, n_new, pick=greedy, use_cache=True, generator=None, caches=None):
    """Append n_new tokens to prompt (a list of ids), one at a time; with the cache, feed only the newest token."""
    with one_thread():
        return _generate(model, prompt, n_new, pick, use_cache, generator, caches)


def _generate(model, prompt, n_new, pick, use_cache, generator, caches):
    ids = list(prompt)
    if use_cache:
        caches = caches if caches is not None else new_caches(model)
        logits = model(torch.tensor([ids]), caches=caches)  # the prompt, once: fills the cache
    for step in range(n_new):
        if not use_cache:
            logits = model(torch.tensor([ids]))  # the whole row again, every step
        ids.append(pick(logits[0, -1], generator=generator))
        if use_cache and step < n_new - 1:
            logits = model(torch.tensor([ids[-1:]]), caches=caches, start=len(ids) - 1)  # (1, 1, V)
    return ids


def cache_bytes(caches) -> int:
    """Bytes held by the key and value tensors of a cache."""
    return sum(t.nelement() * t.element_size() for c in caches for t in (c["k"], c["v"]) if t is not None)
