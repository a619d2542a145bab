"""A tiny decoder-only transformer, trained on the reader's CPU in seconds.

Introduced in chapter 1 and measured in chapters 1 to 6: the loss curve, the mask
leak, the memory of a training step, the key-value cache, sampling, decode speed.
The whole model is in this file; shapes are in the comments (B batch, T tokens,
C width, H heads, D head size, V vocabulary).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from .card import ModelCard

__all__ = [
    "TinyConfig",
    "TinyGPT",
    "WordTokenizer",
    "load_text",
    "corpus",
    "batches",
    "AdamW",
    "train",
    "trained_model",
    "card_of",
    "cache_folder",
    "generate",
    "generate_batch",
    "Written",
    "greedy",
    "sample",
    "sampler",
    "new_caches",
    "cache_bytes",
    "one_thread",
    "DTYPE",
    "RETRAIN_STEPS",
]

TEXT_PATH = Path(__file__).with_name("data") / "robot_text.txt"
STEPS, BATCH, LR, SEED = 400, 32, 1e-2, 0  # the training run every chapter repeats: a few seconds on one core
TRAIN_WINDOW = 24  # tokens per training window; an episode of the text is about 16 words
# The trained models compute in float64. In float32, 400 steps carry the rounding of one processor's sums
# (AVX2, AVX-512, ARM's vector units and the plain path each add in their own order) into the second decimal
# of the loss; in float64 the runs of the code paths tried (plain, AVX2, AVX-512) agree to about 1e-9 in the
# loss, far below a printed digit (tests/test_cpu_paths.py).
DTYPE = "float64"
DTYPES = ("float32", "float64")


@contextmanager
def one_thread():
    """Run torch on one thread: the same numbers at any thread count, and faster for a model this small."""
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
        x = torch.stack([data[s : s + context] for s in starts])  # (B, T)
        y = torch.stack([data[s + 1 : s + context + 1] for s in starts])  # (B, T), shifted by one
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
    dtype: str = "float32"  # of every weight and activation; the trained models use DTYPE, float64

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(
                f"TinyConfig(dtype={self.dtype!r}): the tiny model computes in one of {', '.join(map(repr, DTYPES))}"
            )

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


def card_of(cfg: TinyConfig) -> ModelCard:
    """The tiny model's shape as a model card: LayerNorm, biases in the feed-forward layer only,
    a learned position table, a tied output layer, numbers of the config's dtype (8 bytes in float64)."""
    return ModelCard(
        "tiny",
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_head=cfg.d_model // cfg.n_heads,
        d_ff=cfg.d_ff,
        vocab=cfg.vocab,
        ffn_biases=True,
        norm_params=2,
        positions=cfg.context,
        bytes_per_number=torch.empty(0, dtype=cfg.torch_dtype).element_size(),
        source="book/tiny.py",
    )


class Attention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False, dtype=cfg.torch_dtype)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False, dtype=cfg.torch_dtype)

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
        dtype = cfg.torch_dtype
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model, dtype=dtype), nn.LayerNorm(cfg.d_model, dtype=dtype)
        self.attn = Attention(cfg)
        self.ff = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff, dtype=dtype), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model, dtype=dtype)
        )

    def forward(self, x, cache=None):
        x = x + self.attn(self.norm1(x), cache)  # residual around attention
        return x + self.ff(self.norm2(x))  # residual around the feed-forward layer


class TinyGPT(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        dtype = cfg.torch_dtype  # every weight is made in it, so the random start is drawn in it too
        self.tokens = nn.Embedding(cfg.vocab, cfg.d_model, dtype=dtype)
        self.positions = nn.Embedding(cfg.context, cfg.d_model, dtype=dtype)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model, dtype=dtype)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False, dtype=dtype)
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


class AdamW:
    """The update of `torch.optim.AdamW` at its defaults, written out: per parameter, the same tensor
    operations in the same order as its CPU path, so the weights come out the same to the bit with the pinned
    PyTorch (tests/test_tiny.py checks).

    Why not torch's own: the first optimizer a Python process creates imports `torch._dynamo`, which
    takes 1.5 to 3 s, longer than a third of the training itself. The two moments kept for every
    parameter are the optimizer memory that chapter 3 measures.
    """

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = [p for p in params if p.requires_grad]
        self.lr, (self.beta1, self.beta2), self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.step_count = 0
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]  # mean, mean square

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.step_count += 1
        step_size = -(self.lr / (1 - self.beta1**self.step_count))  # the bias corrections of the moments
        root_correction = (1 - self.beta2**self.step_count) ** 0.5
        for p, (mean, mean_square) in zip(self.params, self.moments):
            if p.grad is None:
                continue
            p.mul_(1 - self.lr * self.weight_decay)  # decoupled weight decay
            mean.lerp_(p.grad, 1 - self.beta1)
            mean_square.mul_(self.beta2).addcmul_(p.grad, p.grad, value=1 - self.beta2)
            p.addcdiv_(mean, mean_square.sqrt().div_(root_correction).add_(self.eps), value=step_size)


def train(
    model, data, steps=STEPS, batch=BATCH, lr=LR, seed=SEED, window=TRAIN_WINDOW, optimizer=AdamW, after_step=None
):
    """Train with AdamW on random windows of the text; returns the loss of every step, in nats.

    `after_step(step, losses)`, if given, is called after each step with its number (from 1) and the losses so
    far, while the model holds that step's weights. Nothing here depends on `steps` but the number of steps, so
    the first k steps of a longer run are the k-step run, bit for bit (trained_model's `keep` uses this)."""
    gen = torch.Generator().manual_seed(seed)
    opt = optimizer(model.parameters(), lr=lr)
    losses = []
    with one_thread():
        for step, (x, y) in zip(range(1, steps + 1), batches(data, batch, window, gen)):
            _, loss = model(x, y)  # x, y: (B, T)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if after_step is not None:
                after_step(step, losses)
    return losses


def cache_folder() -> Path:
    """Where trained tiny models are kept: $BOOK_CACHE, else ~/.cache/transformer-course (or $XDG_CACHE_HOME)."""
    if os.environ.get("BOOK_CACHE"):
        return Path(os.environ["BOOK_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer-course"


def _recipe(cfg: TinyConfig, steps: int, seed: int) -> dict:
    """What a training run is asked to do: the config (dtype included), steps, seed, batch, rate, window, text."""
    return {
        "config": asdict(cfg),
        "steps": steps,
        "seed": seed,
        "batch": BATCH,
        "lr": LR,
        "window": TRAIN_WINDOW,
        "text": hashlib.sha256(load_text().encode()).hexdigest(),
    }


# What of this file decides a run's weights; editing anything else (generation, a docstring, a comment)
# keeps every trained model in the cache.
TRAINING_CODE = (
    "one_thread",
    "WordTokenizer",
    "load_text",
    "corpus",
    "batches",
    "TinyConfig",
    "Attention",
    "Block",
    "TinyGPT",
    "AdamW",
    "train",
    "_recipe",
)


def _training_code(source: str | None = None) -> str:
    """The code of TRAINING_CODE's definitions in this file, as syntax trees without docstrings."""
    import ast

    tree = ast.parse(source if source is not None else Path(__file__).read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    kept = [n for n in tree.body if getattr(n, "name", None) in TRAINING_CODE]
    return "\n".join(ast.dump(n) for n in kept)


def _run_key(cfg: TinyConfig, steps: int, seed: int) -> str:
    """A name for one training run: everything that decides its weights, hashed.

    The recipe, the torch version, the code that trains (not its docstrings or comments, nor generation), and
    the CPU code paths (PyTorch's, oneDNN's, MKL's, the machine's
    kind): in float64 these change the weights in their last bits only, yet a model is never loaded under a path
    it was not trained on."""
    cpu = [platform.machine(), torch.backends.cpu.get_cpu_capability()]
    cpu += [os.environ.get(name, "") for name in CPU_PATH_VARIABLES[1:]]  # PyTorch's own, read above
    recipe = {
        **_recipe(cfg, steps, seed),
        "torch": torch.__version__,
        "cpu": cpu,
        "code": hashlib.sha256(_training_code().encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:24]


# The run without the causal mask (chapter 2) is chaotic even in float64: once it finds that it can copy the
# next token (from about step 110), a difference in the last bit of one sum grows by orders of magnitude within
# tens of steps, so each CPU code path ends elsewhere (its last-30 loss 0.036 on the plain path, 0.045 on
# AVX-512). The course ships the weights of that run as trained on the plain path below, a path every x86
# machine has (tests/test_cpu_paths.py retrains it there and compares its first 100 steps
# to within 1e-12: another processor rounds a last bit otherwise even on the plain path), and
# `trained_model(causal=False)` loads them on any machine; chapter 2's lab retrains the first RETRAIN_STEPS
# steps of the same recipe on the reader's machine (`shipped=False`), past the step where its loss falls
# below the masked run's (about 180) yet in a few seconds, and checks the section's conclusions there.
SHIPPED_UNMASKED = TEXT_PATH.with_name("tiny_unmasked.pt")
RETRAIN_STEPS = 250
PLAIN_PATH = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE"}
# the variables that choose a CPU code path: PyTorch's, oneDNN's (under its two names) and MKL's
CPU_PATH_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR")


def _load_shipped(model, steps, seed):
    """The shipped weights and losses of the unmasked run, if they are of this recipe: losses, or None."""
    try:
        saved = torch.load(SHIPPED_UNMASKED, weights_only=True)
    except (OSError, RuntimeError, EOFError):
        return None
    if saved.get("recipe") != json.dumps(_recipe(model.cfg, steps, seed), sort_keys=True):
        return None  # another text, config or run: train it here
    model.load_state_dict(saved["weights"])
    return saved["losses"].tolist()


def trained_model(causal=True, steps=STEPS, seed=SEED, dtype=DTYPE, shipped=True, keep=()):
    """The course's tiny model, built from a fixed seed and trained on the shipped text: (model, losses).

    It computes in float64 (DTYPE), so that every processor prints the same figures from it. The first call
    trains it (a few seconds on one core) and keeps the weights and losses in `cache_folder()`, under a name
    made from the config (dtype included), seed, steps, training text, torch version, CPU code path and this
    file; later calls, in any notebook, load them. Loading gives the same numbers as training, bit for bit.
    The model without the mask (`causal=False`) comes from the course's shipped run (see SHIPPED_UNMASKED);
    `shipped=False` trains it on this machine instead.

    `keep=(k1, k2, ...)` (each 0 < k < steps) also keeps the shorter runs this one passes through: the first k
    steps of a run are the k-step run (`train`), so training it writes, at step k, the cache entry that
    `trained_model(causal, steps=k, seed, dtype, shipped=False)` loads, with that step's weights and losses.
    Only missing entries are written. If the whole run is in the cache already, it is loaded, and the kept runs
    still missing are trained alone: the longest of them, keeping the shorter ones, never the whole run again.
    `keep` needs a run trained here, so with `causal=False` it needs `shipped=False`.
    """
    keep = sorted(set(keep))
    if any(not 0 < k < steps for k in keep):
        raise ValueError(f"keep={tuple(keep)}: a kept run is a shorter one, of 1 to {steps - 1} steps")
    if keep and not causal and shipped:
        raise ValueError("keep= writes the runs trained on this machine; the shipped unmasked run needs shipped=False")
    tokenizer, data = corpus()
    torch.manual_seed(seed)
    model = TinyGPT(TinyConfig(vocab=len(tokenizer), causal=causal, dtype=dtype))  # built the same way either way
    if not causal and shipped:
        losses = _load_shipped(model, steps, seed)
        if losses is not None:
            return model.eval(), losses
    missing = {k: _cache_path(model.cfg, k, seed) for k in keep}
    missing = {k: path for k, path in missing.items() if not path.is_file()}
    path = _cache_path(model.cfg, steps, seed)
    try:
        saved = torch.load(path, weights_only=True)
        model.load_state_dict(saved["weights"])
    except (OSError, KeyError, RuntimeError, EOFError):
        pass  # not trained yet here (or an unreadable file): train it
    else:
        if missing:  # the longest missing run, keeping the shorter ones; it reseeds, as this call did
            *shorter, longest = sorted(missing)
            trained_model(causal, longest, seed, dtype, shipped=False, keep=shorter)
        return model.eval(), saved["losses"].tolist()

    def keep_step(step, losses):
        if step in missing:  # this step's weights, copied now: training goes on changing them
            weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
            _save(missing[step], {"weights": weights, "losses": torch.tensor(losses, dtype=torch.float64)})

    losses = train(model, data, steps=steps, seed=seed, after_step=keep_step if missing else None)
    _save(path, {"weights": model.state_dict(), "losses": torch.tensor(losses, dtype=torch.float64)})
    return model.eval(), losses


def _cache_path(cfg: TinyConfig, steps: int, seed: int) -> Path:
    """The file of one training run in `cache_folder()`."""
    return cache_folder() / f"tiny-{_run_key(cfg, steps, seed)}.pt"


def _save(path: Path, state: dict):
    """Write atomically, so a notebook running at the same time never reads half a file; skip if unwritable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            torch.save(state, f)
        os.chmod(f.name, 0o644)  # readable by every user of a shared cache
        os.replace(f.name, path)
    except OSError:
        pass


# ---------------------------------------------------------------- generation


def greedy(logits):
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


def sampler(temperature=1.0, top_p=1.0, seed=0):
    """A pick for `generate` that samples with this temperature and top-p, from its own seeded generator:
    the same draws on every run."""
    generator = torch.Generator().manual_seed(seed)
    return lambda logits: sample(logits, temperature, top_p, generator)


def new_caches(model):
    return [{"k": None, "v": None} for _ in model.blocks]


@dataclass
class Written:
    """What `generate` collects: the row (the prompt, then the new tokens), the log-chance of each new token
    at temperature 1, and the key-value caches it filled (one dict a layer, tensors (B, H, T, D); None if it
    wrote without a cache or outgrew its window)."""

    ids: list[int]
    log_chances: list[float]
    caches: list | None


@torch.no_grad()
def generate(model, prompt, n_new, pick=greedy, window=TRAIN_WINDOW, use_cache=True) -> Written:
    """Append n_new tokens to prompt (a list of ids), one at a time, as nanoGPT's `generate` does.

    `pick(logits)` chooses each token from the newest position's raw outputs (`greedy`, or `sampler(...)`).
    Each step reads at most the newest `window` tokens (default: the trained length, 24); `window=None`
    reads the whole row, and reading past the position table raises a ValueError. With the cache, only the
    newest token goes through the model, until the row outgrows the window: from then on every kept token
    sits at a new position, so the cache is of no use and each step reads the cropped row afresh.
    Used from chapter 2 on; chapter 4 times the cache, chapter 5 samples.
    """
    if prompt and isinstance(prompt[0], (list, tuple)):
        raise TypeError("generate writes after one prompt (a list of ids); for several, use generate_batch")
    rows, log_chances, caches = _write(model, [list(prompt)], n_new, pick, window, use_cache)
    return Written(rows[0], log_chances[0], caches)


@torch.no_grad()
def generate_batch(model, prompts, n_new, pick=greedy, window=TRAIN_WINDOW, use_cache=True) -> list[list[int]]:
    """`generate` for prompts of equal length, together: one (B, T) tensor through the model a step, `pick`
    applied to each row's newest raw outputs in row order; the rows come back. (Prompts of unequal length
    need padding and a padding mask: chapter 2 shows how; this model takes no mask.)"""
    rows, _, _ = _write(model, [list(p) for p in prompts], n_new, pick, window, use_cache)
    return rows


def _check(model, rows, n_new, window):
    """Refuse what cannot be written: no prompt, rows of unequal length, a window or length past the table."""
    if not rows or not rows[0]:
        raise ValueError("generate needs a prompt of at least one token (a batch: at least one such prompt)")
    lengths = sorted({len(row) for row in rows})
    if len(lengths) > 1:
        raise ValueError(
            f"the prompts of a batch must have equal length, to go through the model as one "
            f"(B, T) tensor; these have lengths {', '.join(map(str, lengths))}"
        )
    table = model.cfg.context
    if window is not None and not 1 <= window <= table:
        raise ValueError(f"window={window}: the model has position slots for 1 to {table} tokens")
    if window is None and lengths[0] + n_new - 1 > table:
        raise ValueError(
            f"{lengths[0]} prompt tokens + {n_new} new ones need {lengths[0] + n_new - 1} "
            f"positions; the model's position table has {table}. Pass window={table} (or less) "
            "to crop the row."
        )


def _write(model, rows, n_new, pick, window, use_cache):
    """The loop of `generate` and `generate_batch`: (rows, log-chances per row, caches or None)."""
    _check(model, rows, n_new, window)
    limit = window or model.cfg.context
    cached = use_cache and len(rows[0]) <= limit
    caches = new_caches(model) if cached else None
    log_chances = [[] for _ in rows]
    with one_thread():
        if cached:
            logits = model(torch.tensor(rows), caches=caches)  # the prompts, once: fills the cache
        for step in range(n_new):
            if cached and len(rows[0]) > limit:
                cached, caches = False, None  # outgrown the window: crop the rows and read them afresh
            if not cached:
                logits = model(torch.tensor([row[-limit:] for row in rows]))  # the whole (cropped) rows
            newest = torch.log_softmax(logits[:, -1], dim=-1)  # (B, V): each row's newest position
            for b, row in enumerate(rows):
                row.append(pick(logits[b, -1]))
                log_chances[b].append(float(newest[b, row[-1]]))
            if cached and step < n_new - 1 and len(rows[0]) <= limit:
                last = torch.tensor([row[-1:] for row in rows])  # (B, 1)
                logits = model(last, caches=caches, start=len(rows[0]) - 1)  # (B, 1, V)
    return rows, log_chances, caches


def cache_bytes(caches) -> int:
    """Bytes held by the key and value tensors of a cache."""
    return sum(t.nelement() * t.element_size() for c in caches for t in (c["k"], c["v"]) if t is not None)


def _ship():
    """Train the unmasked run on the plain path and write it to SHIPPED_UNMASKED: `python -m book.tiny ship`."""
    wrong = {k: os.environ.get(k) for k, v in PLAIN_PATH.items() if os.environ.get(k) != v}
    if wrong:
        raise SystemExit(
            "the shipped run is trained on the plain CPU path; run\n  "
            + " ".join(f"{k}={v}" for k, v in PLAIN_PATH.items())
            + " python -m book.tiny ship"
        )
    model, losses = trained_model(causal=False, shipped=False)  # trained here, on the plain path
    torch.save(
        {
            "weights": model.state_dict(),
            "losses": torch.tensor(losses, dtype=torch.float64),
            "recipe": json.dumps(_recipe(model.cfg, STEPS, SEED), sort_keys=True),
        },
        SHIPPED_UNMASKED,
    )
    print(f"wrote {SHIPPED_UNMASKED}: last-30 loss {sum(losses[-30:]) / 30:.6f}")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["ship"]:
        raise SystemExit(
            "usage: python -m book.tiny ship  (retrains the shipped unmasked run, book/data/tiny_unmasked.pt)"
        )
    _ship()
