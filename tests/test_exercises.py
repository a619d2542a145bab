"""The exercises teach and grade correctly, and the student copies are what solutions/ says they are.

One session regenerates every exercise from `solutions/` into a temporary folder
(`tools/make_exercises.py --into`, the code behind `make exercises`); the regenerated files must
equal the committed ones, byte for byte. Then, for each exercise, the grader's own runner
(`tools/grade_runner.py`) runs the solution, the untouched student notebook and two
notebooks of planted wrong answers on the hidden inputs, and the grader's own judge
(`tools/grade.judge_run`) scores them: the solution gets full marks, the student copy 0,
each planted wrong answer 0 on its question. These notebooks are ours, so they run
without the sandbox (`tools/run_variants.py` imports torch once and forks one child per
notebook); the sandbox and the batch are tested with hostile notebooks by
`tests/test_grading_attacks.py`.
"""
from __future__ import annotations

import ast
import copy
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools import grade, make_exercises, release

NAMES = make_exercises.exercise_names()
RUN_TIMEOUT = 120  # seconds for one notebook's run in tools/run_variants.py (a solved one takes about a second)



class Planted(str):
    """A planted wrong answer (the source of a cell). `hint`: a word the learner's first hint must contain
    (it names the mistake). `hardcoded`: it types in the values of the public checks, so only the hidden
    tests, on inputs the learner has not seen, can catch it; every other planted answer must fail
    `grader.check` too."""

    def __new__(cls, source, hint=None, hardcoded=False):
        self = super().__new__(cls, source)
        self.hint, self.hardcoded = hint, hardcoded
        return self


def hardcoded(source):
    return Planted(source, hardcoded=True)


# Planted wrong answers, at least two per question: each fails the hidden tests, and each that is not
# marked `hardcoded` fails the public checks (`grader.check`) too, with a hint. Most questions have one
# answer that hard-codes the values its public test expects (a learner who types in a number) and
# plausible mistakes of understanding.
WRONG = {
    "01_next_token_prediction": {
        "q1": ["def position_losses(chances, target_ids):\n    return np.log([2, 1.25])",
               "def position_losses(chances, target_ids):\n"
               "    return -np.log2(np.asarray(chances)[np.arange(len(target_ids)), target_ids])"],
        "q2": ["def sentence_loss(logits, target_ids):\n    return float((np.log(4 / 3) + np.log(4)) / 2)",
               "def sentence_loss(logits, target_ids):\n"
               "    return float(-np.log(softmax(logits)[np.arange(len(target_ids)), target_ids]).sum())"],
        "q3": ["def favourite_hits(chances, target_ids):\n    return 2",
               "def favourite_hits(chances, target_ids):\n"
               "    return int((np.asarray(chances).argmin(axis=1) == np.asarray(target_ids)).sum())",
               # issue 24 (F1): "the right word has chance > 0.5" scored full marks on the hidden rows
               Planted("def favourite_hits(chances, target_ids):\n    chances = np.asarray(chances)\n"
                       "    return int((chances[np.arange(len(target_ids)), target_ids] > 0.5).sum())",
                       hint="below one half")],
        "q4": ["def signal_counts(n_tokens, sentence_tokens):\n    return (20, 600)",
               "def signal_counts(n_tokens, sentence_tokens):\n    return -(-n_tokens // sentence_tokens), n_tokens - 1",
               Planted("def signal_counts(n_tokens, sentence_tokens):\n    return n_tokens / sentence_tokens, n_tokens",
                       hint="ints")],
        "q5": ["def losses_by_hand(logits, targets):\n    g = torch.Generator().manual_seed(0)\n    x = torch.randn(2, 3, 5, generator=g)\n    t = torch.tensor([[0, 4, 2], [1, 1, 3]])\n    return F.cross_entropy(x.reshape(-1, 5), t.reshape(-1), reduction='none').reshape(2, 3)",
               "def losses_by_hand(logits, targets):  # no shift by the largest value: overflows\n    right = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)\n    return torch.log(torch.exp(logits).sum(dim=-1)) - right",
               # issue 24 (F2): F.cross_entropy, which the question forbids, scored full marks
               Planted("def losses_by_hand(logits, targets):\n"
                       "    return F.cross_entropy(logits.transpose(1, 2), targets, reduction='none')",
                       hint="F.cross_entropy"),
               Planted("def losses_by_hand(logits, targets):\n"
                       "    return -torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)",
                       hint="log_softmax"),
               Planted("def losses_by_hand(logits, targets):  # a float64 result\n"
                       "    top = logits.max(dim=-1, keepdim=True).values\n"
                       "    total = top.squeeze(-1) + torch.log(torch.exp(logits - top).sum(dim=-1))\n"
                       "    return (total - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).double()",
                       hint="float32")],
    },
    "02_causal_mask": {
        "q1": ['def causal_mask(n):\n    return np.array([[True, False, False], [True, True, False], [True, True, True]])',
               'def causal_mask(n):\n    return np.triu(np.ones((n, n), dtype=bool))',
               # issue 27: a list passed the public check and scored 0 on the hidden tests
               Planted('def causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=bool)).tolist()', hint="NumPy"),
               Planted('def causal_mask(n):  # a position may not use itself\n'
                       '    return np.tril(np.ones((n, n), dtype=bool), k=-1)', hint="itself")],
        "q2": ['def allowed_pairs(n):\n    return 10',
               'def allowed_pairs(n):\n    return n * n // 2',
               Planted('def allowed_pairs(n):\n    return n * (n + 1) / 2', hint="int"),
               'def allowed_pairs(n):  # forgets the diagonal\n    return n * (n - 1) // 2'],
        "q3": ['def allowed_share(n):\n    return 0.625',
               'def allowed_share(n):\n    return 0.5',
               'def allowed_share(n):  # forgets the diagonal\n    return n * (n - 1) / 2 / (n * n)'],
        "q4": ['def masked_weights(scores):\n    return np.array([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])',
               'def masked_weights(scores):\n    n = len(scores)\n    return softmax(np.where(np.tril(np.ones((n, n), dtype=bool)), scores, 0.0))',
               Planted('def masked_weights(scores):  # softmax first, then zeros: rows no longer add up to 1\n'
                       '    return softmax(np.asarray(scores, dtype=float)) * np.tril(np.ones(np.shape(scores)))',
                       hint="adding up to 1")],
        "q5": ['def zero_leak(row, position):\n    return 0.5',
               'def zero_leak(row, position):\n    row = np.array(row, dtype=float)\n    row[position + 1:] = -np.inf\n    return float(softmax(row)[position + 1:].sum())',
               # issue 27: zeroing the position's own score too passed the public check (its row was all zeros)
               Planted('def zero_leak(row, position):\n    row = np.array(row, dtype=float)\n    row[position:] = 0.0\n'
                       '    return float(softmax(row)[position + 1:].sum())', hint="its own score")],
        "q6": [Planted("def causal_attention(x, w_q, w_k, w_v):  # no mask\n    scores = (x @ w_q) @ (x @ w_k).T / math.sqrt(w_k.shape[1])\n    return torch.softmax(scores, dim=-1) @ (x @ w_v)", hint="later"),
               Planted("def causal_attention(x, w_q, w_k, w_v):  # not scaled by the square root of d_head\n    scores = (x @ w_q) @ (x @ w_k).T\n    allowed = torch.ones(len(x), len(x), dtype=torch.bool).tril()\n    return torch.softmax(scores.masked_fill(~allowed, float('-inf')), dim=-1) @ (x @ w_v)", hint="square root"),
               # issue 27: no attention at all passed the public check, which compared only out[0]
               Planted("def causal_attention(x, w_q, w_k, w_v):\n    return x @ w_v", hint="scaled_dot_product_attention")],
    },
    "03_teacher_forcing": {
        "q1": ['def answer_accuracy(per_token, n_tokens):\n    return 0.125',
               'def answer_accuracy(per_token, n_tokens):\n    return 1 - n_tokens * (1 - per_token)'],
        "q2": ['def longest_answer(per_token, target):\n    return 2',
               Planted('def longest_answer(per_token, target):\n    return int(round(np.log(target) / np.log(per_token)))',
                       hint="round down"),
               Planted('def longest_answer(per_token, target):  # a float\n'
                       '    return float(np.floor(np.log(target) / np.log(per_token)))', hint="int")],
        "q3": ['def n_parameters(n_layers, d_model, n_heads, d_head, d_ff, vocab):\n    return 180',
               'def n_parameters(n_layers, d_model, n_heads, d_head, d_ff, vocab):\n    d = d_model\n    per_block = 4 * d * n_heads * d_head + 2 * d * d_ff + 2 * d\n    return 2 * vocab * d + n_layers * per_block + d'],
        "q4": ["def training_memory(n_params, bytes_per_number, n_layers, d_model, batch, seq_len, saved_per_layer):\n    return {'weights': 360, 'gradients': 360, 'optimiser': 1440, 'copy': 720, 'activations': 48}",
               # the defect of issue 15: a full-precision copy even when training already runs in float32
               "def training_memory(n_params, bytes_per_number, n_layers, d_model, batch, seq_len, saved_per_layer):\n    b = bytes_per_number\n    return {'weights': n_params * b, 'gradients': n_params * b, 'optimiser': 8 * n_params,\n            'copy': n_params * 4, 'activations': batch * seq_len * n_layers * saved_per_layer * d_model * b}"],
        "q5": ["def step_bytes(model, ids):\n    return {'weights': 140, 'gradients': 140, 'optimiser': 280}",
               "def step_bytes(model, ids):  # counts the tied output layer twice and skips the step\n    n = sum(t.numel() * t.element_size() for t in model.state_dict().values())\n    return {'weights': n, 'gradients': n, 'optimiser': 2 * n}",
               Planted("def step_bytes(model, ids):  # counts Adam's step counters too\n"
                       "    opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
                       "    logits = model(ids[:, :-1])\n"
                       "    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))\n"
                       "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
                       "    size = lambda t: t.numel() * t.element_size()\n"
                       "    params = list(model.parameters())\n"
                       "    return {'weights': sum(map(size, params)), 'gradients': sum(size(p.grad) for p in params),\n"
                       "            'optimiser': sum(size(t) for p in params for t in opt.state[p].values())}",
                       hint="exp_avg")],
    },
    "04_kv_cache": {
        "q1": ['def passes_without_cache(n):\n    return 10',
               'def passes_without_cache(n):\n    return n * n',
               Planted('def passes_without_cache(n):\n    return n * (n + 1) / 2', hint="int")],
        "q2": ['def kv_bytes_per_token(n_layers, n_kv_heads, d_head, bytes_per_number):\n    return 96',
               Planted('def kv_bytes_per_token(n_layers, n_kv_heads, d_head, bytes_per_number):\n    return n_layers * n_kv_heads * d_head * bytes_per_number', hint="a value")],
        "q3": ['def serving_gib(weight_bytes, bytes_per_token, context, n_conversations):\n    return 4.0',
               Planted('def serving_gib(weight_bytes, bytes_per_token, context, n_conversations):\n    return n_conversations * (weight_bytes + context * bytes_per_token) / GiB', hint="held once")],
        "q4": ['def conversations_that_fit(memory_bytes, weight_bytes, bytes_per_token, context):\n    return 8',
               Planted('def conversations_that_fit(memory_bytes, weight_bytes, bytes_per_token, context):\n    return round((memory_bytes - weight_bytes) / (bytes_per_token * context))', hint="whole"),
               Planted('def conversations_that_fit(memory_bytes, weight_bytes, bytes_per_token, context):\n'
                       '    return int((memory_bytes - weight_bytes) // (bytes_per_token * context))', hint="negative")],
        "q5": ["def attention_step(x_new, k_cache, v_cache, w_q, w_k, w_v):  # the cache never grows\n    return x_new @ w_v, k_cache, v_cache",
               "def attention_step(x_new, k_cache, v_cache, w_q, w_k, w_v):  # attends to the past only, not to itself\n    k, v = (x_new @ w_k)[None], (x_new @ w_v)[None]\n    if len(k_cache):\n        w = torch.softmax(k_cache @ (x_new @ w_q) / math.sqrt(w_k.shape[1]), dim=0)\n        out = w @ v_cache\n    else:\n        out = v[0]\n    return out, torch.cat([k_cache, k]), torch.cat([v_cache, v])",
               Planted("def attention_step(x_new, k_cache, v_cache, w_q, w_k, w_v):  # not scaled\n"
                       "    k_cache = torch.cat([k_cache, (x_new @ w_k)[None]])\n"
                       "    v_cache = torch.cat([v_cache, (x_new @ w_v)[None]])\n"
                       "    return torch.softmax(k_cache @ (x_new @ w_q), dim=0) @ v_cache, k_cache, v_cache",
                       hint="square root")],
    },
    "05_sampling": {
        "q1": ['def with_temperature(logits, temperature):\n    return np.array([0.25, 0.75]) if temperature == 1.0 else np.array([1 / 3, 2 / 3])',
               Planted('def with_temperature(logits, temperature):\n    return softmax(np.asarray(logits, dtype=float) * temperature)', hint="below 1"),
               Planted('def with_temperature(logits, temperature):  # a list\n'
                       '    return list(softmax(np.asarray(logits, dtype=float) / temperature))', hint="NumPy array")],
        "q2": ['def spread(chances):\n    return float(np.log(2))',
               'def spread(chances):\n    p = np.asarray(chances, dtype=float)\n    p = p[p > 0]\n    return float(-(p * np.log2(p)).sum())',
               Planted('def spread(chances):  # keeps the zeros: 0 * log 0 is nan\n    p = np.asarray(chances, dtype=float)\n'
                       '    return float(-(p * np.log(p)).sum())', hint="exactly 0")],
        "q3": ['def top_p_count(chances, top_p):\n    return 2',
               'def top_p_count(chances, top_p):\n    running = np.cumsum(np.asarray(chances, dtype=float))\n    return int(min(np.searchsorted(running, top_p) + 1, len(running)))',
               Planted('def top_p_count(chances, top_p):  # stops before the word that reaches top_p\n'
                       '    running = np.cumsum(np.sort(np.asarray(chances, dtype=float))[::-1])\n'
                       '    return int((running < top_p).sum())', hint="including"),
               Planted('def top_p_count(chances, top_p):  # an exact hit does not count\n'
                       '    running = np.cumsum(np.sort(np.asarray(chances, dtype=float))[::-1])\n'
                       '    return int(min((running <= top_p).sum() + 1, len(running)))', hint="exact hit")],
        "q4": ['def top_p_chances(chances, top_p):\n    return np.array([0, 2 / 3, 1 / 3])',
               'def top_p_chances(chances, top_p):\n    p = np.asarray(chances, dtype=float)\n    return np.where(p >= np.sort(p)[::-1][1], p, 0.0)',
               Planted('def top_p_chances(chances, top_p):  # returns the kept chances in sorted order\n'
                       '    p = np.sort(np.asarray(chances, dtype=float))[::-1]\n'
                       '    n = int(np.searchsorted(np.cumsum(p), top_p - 1e-12)) + 1\n'
                       '    kept = np.where(np.arange(len(p)) < n, p, 0.0)\n    return kept / kept.sum()', hint="where it stood")],
        "q5": ['def best_pair(first, second):\n    return 1, 0, 0.36',
               'def best_pair(first, second):\n    i = int(np.argmax(first))\n    j = int(np.argmax(second[i]))\n    return i, j, float(first[i] * second[i][j])',
               Planted('def best_pair(first, second):  # NumPy integers\n'
                       '    pair = np.asarray(first)[:, None] * np.asarray(second)\n'
                       '    i, j = np.unravel_index(pair.argmax(), pair.shape)\n    return i, j, float(pair[i, j])', hint="ints")],
        "q6": [Planted("def sample_ids(logits, temperature, top_p, n, seed):  # no top-p cut\n    g = torch.Generator().manual_seed(seed)\n    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), n, replacement=True, generator=g)", hint="top-p set"),
               Planted("def sample_ids(logits, temperature, top_p, n, seed):  # ignores the seed\n    chances = torch.softmax(logits / temperature, dim=-1)\n    ranked, order = torch.sort(chances, descending=True)\n    cut = torch.zeros_like(chances)\n    keep = order[ranked.cumsum(0) - ranked < top_p]\n    cut[keep] = chances[keep]\n    return torch.multinomial(cut, n, replacement=True)", hint="seed"),
               Planted("def sample_ids(logits, temperature, top_p, n, seed):  # multiplies by the temperature\n"
                       "    chances = torch.softmax(logits * temperature, dim=-1)\n"
                       "    ranked, order = torch.sort(chances, descending=True)\n"
                       "    cut = torch.zeros_like(chances)\n    keep = order[ranked.cumsum(0) - ranked < top_p]\n"
                       "    cut[keep] = chances[keep]\n    g = torch.Generator().manual_seed(seed)\n"
                       "    return torch.multinomial(cut, n, replacement=True, generator=g)", hint="temperature")],
    },
    "06_context_window": {
        "q1": ['def dropped_tokens(conversation, window):\n    return 20, 0.2',
               'def dropped_tokens(conversation, window):\n    return conversation - window, (conversation - window) / window',
               # issue 27: without max(0, ...) it passed the public check, whose one case did not fit
               Planted('def dropped_tokens(conversation, window):\n    dropped = conversation - window\n'
                       '    return dropped, dropped / conversation', hint="already fits")],
        "q2": ['def read_and_compute_seconds(n_bytes, n_ops, bandwidth, ops_per_second):\n    return 0.5, 0.2',
               'def read_and_compute_seconds(n_bytes, n_ops, bandwidth, ops_per_second):\n    return n_bytes / ops_per_second, n_ops / bandwidth'],
        "q3": ['def tokens_per_second(weight_bytes, cache_bytes, batch, bandwidth):\n    return 10.0',
               'def tokens_per_second(weight_bytes, cache_bytes, batch, bandwidth):\n    return batch / (batch * (weight_bytes + cache_bytes) / bandwidth)'],
        "q4": ['def batch_for_rate(weight_bytes, cache_bytes, bandwidth, target):\n    return 6 if target == 15.0 else None',
               'def batch_for_rate(weight_bytes, cache_bytes, bandwidth, target):\n    if target >= bandwidth / cache_bytes:\n        return None\n    return int(target * weight_bytes / bandwidth) + 1'],
        "q5": ["def decode_step(n_params, bytes_per_number, cache_bytes, batch, bandwidth, ops_per_second):\n    return (0.21, 'memory') if batch == 1 else (200.0, 'compute')",
               "def decode_step(n_params, bytes_per_number, cache_bytes, batch, bandwidth, ops_per_second):  # adds the roofs\n    read_s = (n_params * bytes_per_number + batch * cache_bytes) / bandwidth\n    compute_s = 2 * n_params * batch / ops_per_second\n    return read_s + compute_s, 'memory' if read_s >= compute_s else 'compute'",
               # issue 27: the reversed tie rule scored full marks, public and hidden
               Planted("def decode_step(n_params, bytes_per_number, cache_bytes, batch, bandwidth, ops_per_second):\n"
                       "    read_s = (n_params * bytes_per_number + batch * cache_bytes) / bandwidth\n"
                       "    compute_s = 2 * n_params * batch / ops_per_second\n"
                       "    return (read_s, 'memory') if read_s > compute_s else (compute_s, 'compute')", hint="tie")],
        "q6": [Planted("def generate_in_window(model, prompt, n_new, window):\n    return list(prompt) + [0] * n_new",
                       hint="most likely"),
               Planted("def generate_in_window(model, prompt, n_new, window):  # never crops to the window\n    ids = list(prompt)\n    for _ in range(n_new):\n        ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))\n    return ids",
                       hint="crop"),
               # issue 27: cropping once, at the start, passed the public check (its window never cropped)
               Planted("def generate_in_window(model, prompt, n_new, window):\n    ids, seen = list(prompt), list(prompt)[-window:]\n"
                       "    for _ in range(n_new):\n        seen.append(int(model(torch.tensor([seen]))[0, -1].argmax()))\n"
                       "        ids.append(seen[-1])\n    return ids", hint="every step")],
    },
    "08_using_pytorch": {
        "q1": ['def inputs_and_targets(tokens):\n    return torch.tensor([[5, 1, 8, 5, 3]]), torch.tensor([[1, 8, 5, 3, 9]])',
               Planted('def inputs_and_targets(tokens):\n    return tokens[:-1], tokens[1:]', hint="second dimension"),
               Planted('def inputs_and_targets(tokens):  # the targets are the inputs themselves\n'
                       '    return tokens[:, :-1], tokens[:, :-1]', hint="moved along")],
        "q2": ['def knows_nothing_loss(n_positions, vocab):\n    return math.log(2)',
               'def knows_nothing_loss(n_positions, vocab):\n    return float(F.cross_entropy(torch.full((n_positions, vocab), 1.0 / vocab).log().exp(), torch.zeros(n_positions, dtype=torch.long)) / n_positions)'],
        "q3": ['def causal_weights(scores):\n    return torch.tensor([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])',
               'def causal_weights(scores):\n    n = scores.shape[-1]\n    allowed = torch.ones(n, n, dtype=torch.bool).tril()\n    return torch.softmax(scores.masked_fill(~allowed, 0.0), dim=-1)',
               Planted('def causal_weights(scores):  # softmax first, then zeros: rows no longer add up to 1\n'
                       '    return torch.softmax(scores, dim=-1).tril()', hint="adding up to 1")],
        "q4": ['def top_p_count(raw, top_p):\n    return 2',
               'def top_p_count(raw, top_p):\n    chances = torch.softmax(raw, dim=-1)\n    return int((chances.cumsum(0) < top_p).sum()) + 1',
               Planted('def top_p_count(raw, top_p):  # adds up raw outputs, not chances\n'
                       '    ranked = raw.sort(descending=True).values\n'
                       '    return min(int((ranked.cumsum(0) < top_p).sum()) + 1, len(raw))', hint="chances")],
        "q5": ["def model_loss(model, ids):  # a float: the graph is lost\n    logits = model(ids[:, :-1])\n    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)))",
               "def model_loss(model, ids):  # scores each position against its own id, not the next one\n    logits = model(ids[:, :-1])\n    right = logits.gather(-1, ids[:, :-1].unsqueeze(-1)).squeeze(-1)\n    return (torch.logsumexp(logits, dim=-1) - right).mean()",
               # the question asks for the cross-entropy by hand: F.cross_entropy scored full marks before
               Planted("def model_loss(model, ids):\n    logits = model(ids[:, :-1])\n"
                       "    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))",
                       hint="F.cross_entropy")],
    },
    "09_recap_quiz": {
        "q1": ['def gpt2_parameters(n_layers, d_model, vocab, n_positions):\n    return 92',
               'def gpt2_parameters(n_layers, d_model, vocab, n_positions):\n    return (vocab + n_positions) * d_model + n_layers * 12 * d_model ** 2'],
        "q2": ['def embedding_share(n_layers, d_model, vocab, n_positions):\n    return 14 / 92',
               'def embedding_share(n_layers, d_model, vocab, n_positions):\n    d = d_model\n    return vocab * d / ((vocab + n_positions) * d + n_layers * (12 * d * d + 13 * d) + 2 * d)'],
        "q3": ['def crossover_length(d_model, ff_multiple):\n    return 600',
               Planted('def crossover_length(d_model, ff_multiple):\n    return 6 * d_model', hint="feed-forward width"),
               Planted('def crossover_length(d_model, ff_multiple):  # solves 2 n d = (4 + 2f) d^2 wrongly\n'
                       '    return (4 + 2 * ff_multiple) * d_model', hint="solve for n")],
        "q4": ['def kv_cache_gib(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):\n    return 2.0',
               'def kv_cache_gib(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):\n    return n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number / GiB'],
        "q5": ['def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n    return 4',
               Planted('def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n    return round((memory_gib - weights_gib) / cache_gib_per_request)', hint="rounded down"),
               Planted('def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n'
                       '    return int((memory_gib - weights_gib) // cache_gib_per_request)', hint="never below zero")],
        "q6": ["def longest_context(memory_gib, weights_gib, n_layers, n_kv_heads, d_head, bytes_per_number, n_requests):\n    return 64 * 2**30 // (131_072 * 8) if memory_gib == 80 else 0",
               "def longest_context(memory_gib, weights_gib, n_layers, n_kv_heads, d_head, bytes_per_number, n_requests):  # keys only\n    per_token = n_layers * n_kv_heads * d_head * bytes_per_number\n    return max(0, int((memory_gib - weights_gib) * GiB // (per_token * n_requests)))"],
    },
}


def _solution_code(name, question):
    """The solution cell of a question of a master, without its markers."""
    cells = jupytext.read(ROOT / "solutions" / f"{name}.md").cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "raw"
                 and re.match(rf"# BEGIN QUESTION\s*\nname:\s*{question}\b", c.source))
    code = next(c for c in cells[start:] if c.cell_type == "code").source
    return "\n".join(ln for ln in code.splitlines() if not re.match(r"\s*# (BEGIN|END) SOLUTION", ln))


def mutant(name, question, hint, *changes):
    """A planted answer made from the solution of `question` by textual changes [(old, new), ...]."""
    code = _solution_code(name, question)
    for old, new in changes:
        assert old in code, f"{name} {question}: {old!r} is not in the solution"
        code = code.replace(old, new)
    return Planted(code, hint=hint)


_GPT = "11_build_the_gpt"
WRONG[_GPT] = {
    "q1": [mutant(_GPT, "q1", "square root", ("/ (C // H) ** 0.5", "")),
           mutant(_GPT, "q1", "later", ("scores.masked_fill(~seen, -torch.inf)", "scores")),
           mutant(_GPT, "q1", "consecutive", ("t.reshape(B, T, H, C // H).transpose(1, 2)",
                                              "t.reshape(B, T, C // H, H).transpose(1, 3).transpose(2, 3)")),
           mutant(_GPT, "q1", "cache", ('cache["k"], cache["v"] = k, v', "pass")),
           mutant(_GPT, "q1", "tiny's weights", ("self.qkv = nn.Linear", "self.projections = nn.Linear"),
                  ("self.qkv(x)", "self.projections(x)"))],
    "q2": [mutant(_GPT, "q2", "pre-norm", ("x = x + self.attn(self.norm1(x), cache)",
                                           "x = self.norm1(x + self.attn(x, cache))"),
                  ("return x + self.ff(self.norm2(x))", "return self.norm2(x + self.ff(x))")),
           mutant(_GPT, "q2", "residual", ("x = x + self.attn(self.norm1(x), cache)",
                                           "x = self.norm1(x)\n        x = x + self.attn(x, cache)"))],
    "q3": [mutant(_GPT, "q3", "tied", ("self.head.weight = self.tokens.weight  # tied", "pass")),
           mutant(_GPT, "q3", "start", ("torch.arange(start, start + T)", "torch.arange(T)")),
           mutant(_GPT, "q3", "final norm", ("self.head(self.norm(x))", "self.head(x)"))],
    "q4": [mutant(_GPT, "q4", "AdamW", ("torch.optim.AdamW(", "torch.optim.Adam(")),
           mutant(_GPT, "q4", "one generator", ("for _, (x, y) in zip(range(steps), windows):",
                                                "for _ in range(steps):\n        generator = "
                                                "torch.Generator().manual_seed(seed)\n        x, y = "
                                                "next(tiny.batches(data, batch, window, generator))")),
           mutant(_GPT, "q4", "cleared", ("optimiser.zero_grad()", "pass")),
           mutant(_GPT, "q4", "Python floats", ("losses.append(loss.item())", "losses.append(loss.detach())"))],
    "q5": [mutant(_GPT, "q5", "start", (", start=len(ids) - 1)", ")")),
           mutant(_GPT, "q5", "Python ints", ("ids.append(int(logits[0, -1].argmax()))",
                                              "ids.append(logits[0, -1].argmax())")),
           mutant(_GPT, "q5", "greedy loop", ("int(logits[0, -1].argmax())", "int(logits[0, 0].argmax())"))],
}

# The first planted answer of every question hard-codes its public values, except these, which are
# mistakes the public checks must catch.
_FIRST_NOT_HARDCODED = {("02_causal_mask", "q6"), ("04_kv_cache", "q5"), ("05_sampling", "q6"),
                        ("06_context_window", "q6"), ("08_using_pytorch", "q5")}
for _name, _questions in WRONG.items():
    for _q, _answers in _questions.items():
        _answers[:] = [a if isinstance(a, Planted) else Planted(a) for a in _answers]
        if (_name, _q) not in _FIRST_NOT_HARDCODED and _name != _GPT:
            _answers[0] = hardcoded(_answers[0])


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory):
    """Every exercise rebuilt from solutions/ into a temporary folder (exercises/, autograder/), by the code behind
    `make exercises`, in one process; otter's own run of the public tests is skipped (the runs below grade the
    solutions on the hidden inputs, which needs them to work)."""
    root = tmp_path_factory.mktemp("regenerated")
    run = subprocess.run([sys.executable, "-m", "tools.make_exercises", "--into", str(root)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return root


def _with_cells(nb, sources):
    """A copy of `nb` with code cells appended (appended definitions replace the earlier ones)."""
    nb = copy.deepcopy(nb)
    nb.cells.extend(nbformat.v4.new_code_cell(s) for s in sources)
    return nb


def _solution_notebook(zip_path):
    with zipfile.ZipFile(zip_path) as z:
        return nbformat.reads(z.read("grading/solution.ipynb").decode(), as_version=4)


def _variants(name, root):
    """Write the notebooks run for one exercise: the solution (as the reference, then as a submission), the
    student copy and the planted wrong answers. Returns (exercise, {kind: run job})."""
    zip_path = root / "autograder" / f"{name}.zip"
    exercise = grade.load_exercise(zip_path)
    folder = root / "variants" / name
    folder.mkdir(parents=True)
    solved = _solution_notebook(zip_path)
    notebooks = {"reference": solved, "solved": solved,
                 "blank": nbformat.read(root / "exercises" / f"{name}.ipynb", as_version=4)}
    for k in range(max((len(v) for v in WRONG.get(name, {}).values()), default=0)):
        notebooks[f"wrong{k}"] = _with_cells(solved, [v[k] for v in WRONG[name].values() if k < len(v)])
    (folder / "probes.py").write_text(exercise.probes)
    jobs = {}
    for kind, nb in notebooks.items():
        nbformat.write(nb, folder / f"{kind}.ipynb")
        jobs[kind] = {"probes": str(folder / "probes.py"), "notebook": str(folder / f"{kind}.ipynb"),
                      "out": str(folder / f"{kind}.out"), "with_args": kind == "reference"}
    return exercise, jobs


@pytest.fixture(scope="session")
def graded(regenerated):
    """{name: the reference and the verdicts of every variant}; every run forked from one process that imported
    torch once (tools/run_variants.py), two at a time."""
    variants = {name: _variants(name, regenerated) for name in NAMES}
    spec = regenerated / "variants" / "jobs.json"
    spec.write_text(json.dumps([job for _, jobs in variants.values() for job in jobs.values()]))
    subprocess.run([sys.executable, "-m", "tools.run_variants", str(spec)], check=True, cwd=ROOT,
                   timeout=RUN_TIMEOUT * 10)
    out = {}
    for name, (exercise, jobs) in variants.items():
        runs = {kind: grade._read_output(Path(job["out"])) for kind, job in jobs.items()}
        reference = grade.reference_from_run(exercise, runs.pop("reference"))
        questions_of = grade.probe_functions(exercise, reference)
        out[name] = {"exercise": exercise, "reference": reference, "questions_of": questions_of,
                     **{kind: {"run": run, "verdicts": grade.judge_run(exercise, reference, questions_of, run)}
                        for kind, run in runs.items()}}
    return out


def test_there_are_exercises():
    assert NAMES, "no masters in solutions/"
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES, "exercises/ and solutions/ differ"
    assert sorted(p.stem for p in (ROOT / "autograder").glob("*.zip")) == NAMES, "autograder/ and solutions/ differ"


@pytest.mark.parametrize("name", NAMES)
def test_no_drift_from_solutions(regenerated, name):
    for folder, suffix in [("exercises", "ipynb"), ("autograder", "zip")]:
        fresh, committed = regenerated / folder / f"{name}.{suffix}", ROOT / folder / f"{name}.{suffix}"
        assert fresh.read_bytes() == committed.read_bytes(), \
            f"{folder}/{name}.{suffix} is not what solutions/{name}.md gives: run `make exercises EX={name}`"


def _questions(name):
    """{question: (prompt, function name, its parameters)} of one master."""
    nb = jupytext.read(ROOT / "solutions" / f"{name}.md")
    out, current, prompt = {}, None, ""
    for cell in nb.cells:
        found = re.match(r"# BEGIN QUESTION\s*\nname:\s*(\w+)", cell.source) if cell.cell_type == "raw" else None
        if found:
            current, prompt = found.group(1), ""
        elif current and cell.cell_type == "markdown" and not prompt:
            prompt = cell.source
        elif current and cell.cell_type == "code" and cell.source.startswith("def ") and current not in out:
            fn = ast.parse(cell.source).body[0]
            out[current] = (prompt, fn.name, [a.arg for a in fn.args.args])
    return out


@pytest.mark.parametrize("name", NAMES)
def test_each_exercise_has_a_build_it_and_check_it_question(name):
    questions = _questions(name)
    built = [q for q, (prompt, _, _) in questions.items() if "(build it and check it)" in prompt]
    assert built, f"solutions/{name}.md: no question marked (build it and check it)"
    uses_torch = "import torch" in (ROOT / "solutions" / f"{name}.md").read_text()
    chapter = next((ROOT / "chapters").glob(f"{name[:2]}_*.md"), None)
    if chapter and ("book.tiny" in chapter.read_text() or "import torch" in chapter.read_text()):
        assert uses_torch, f"{name}: its chapter uses torch, so its build-it question should too"


@pytest.mark.parametrize("name", NAMES)
def test_no_parameter_shadows_a_question_function(name):
    """Issue 15: exercise 4 had a parameter named like another question's function (kv_bytes_per_token)."""
    questions = _questions(name)
    functions = {fn for _, fn, _ in questions.values()}
    for q, (_, fn, params) in questions.items():
        clash = functions & set(params)
        assert not clash, f"{name} {q}: parameter {sorted(clash)} of {fn} hides the function of another question"


def test_top_p_question_is_named_for_what_it_returns():
    """Issue 15: chapter 5's `top_p_keep` returns ids; the exercise's function returns a count."""
    functions = {fn for _, fn, _ in _questions("05_sampling").values()}
    assert "top_p_keep" not in functions and "top_p_count" in functions


def test_float32_training_has_no_full_precision_copy(graded):
    """Issue 15: chapter 3 says the full-precision copy vanishes when a model already trains in float32."""
    g = graded["03_teacher_forcing"]
    asked = [(args, answer) for (q, fn), args, answer in zip(g["questions_of"], g["reference"].args,
                                                            g["reference"].answers) if q == "q4"]
    float32 = [answer["copy"] for args, answer in asked if args[1] == 4]
    half = [(answer["copy"], args[0]) for args, answer in asked if args[1] == 2]
    assert float32 and half, "the hidden inputs of q4 should hold a float32 and a half-precision model"
    assert all(copy == 0 for copy in float32), "a float32 model trains without a full-precision copy"
    assert all(copy == 4 * n for copy, n in half), "a half-precision model keeps a float32 copy: 4 bytes a parameter"


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks(graded, name):
    verdicts = graded[name]["solved"]["verdicts"]
    assert verdicts, f"{name}: no question graded"
    lost = {q: reason for q, (score, reason) in verdicts.items() if score != 1.0}
    assert not lost, f"{name}: the solution loses {lost}"


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_scores_zero(graded, name):
    run = graded[name]["blank"]["run"]
    assert run.finished, f"{name}: the student notebook did not run to the end ({run.crashed})"
    verdicts = graded[name]["blank"]["verdicts"]
    assert {q: score for q, (score, _) in verdicts.items()} == {q: 0.0 for q in verdicts}


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_holds_no_solution_and_no_hidden_test(name):
    """Statement by statement, however the code is wrapped: no solution and no hidden probe or check (a
    statement the chapters or `book/` show in the open, `torch.Generator().manual_seed(seed)`, is no secret)."""
    student = release.file_text(ROOT / "exercises" / f"{name}.ipynb")
    solution, hidden = release.master_secrets(ROOT / "solutions" / f"{name}.md")
    assert solution and hidden, f"solutions/{name}.md: no solution or no hidden probe found"
    public = release.public_text()
    solution, hidden = {s for s in solution if s not in public}, {s for s in hidden if s not in public}
    leaked = sorted(s for s in solution if s in student)
    assert not leaked, f"exercises/{name}.ipynb contains solution code: {leaked[:3]}"
    leaked = sorted(s for s in hidden if s in student)
    assert not leaked, f"exercises/{name}.ipynb contains hidden probes or checks: {leaked[:3]}"


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_planted_wrong_answers(name):
    questions = grade.question_names(ROOT / "autograder" / f"{name}.zip")
    assert sorted(WRONG.get(name, {}), key=lambda q: (len(q), q)) == questions, \
        f"add two planted wrong answers per question of {name} to WRONG"


@pytest.mark.parametrize("name", NAMES)
def test_planted_wrong_answers_fail_the_hidden_tests(graded, name):
    for q, answers in WRONG[name].items():
        for k, answer in enumerate(answers):
            score, reason = graded[name][f"wrong{k}"]["verdicts"][q]
            assert score == 0, f"{name} {q}: planted wrong answer {k} scored {score}:\n{answer}"
            assert reason and "Traceback" not in reason and len(reason) < 300, reason


@pytest.fixture(scope="session")
def public_checks(regenerated):
    """{name: {question: [outcome of the solution, then of each planted answer]}}: the learner's own
    `grader.check` (book/exercise.py, loaded by the student notebook's first cell) run on each."""
    spec = [{"name": name, "student": str(regenerated / "exercises" / f"{name}.ipynb"),
             "solution": str(regenerated / "variants" / name / "solved.ipynb")
             if (regenerated / "variants" / name / "solved.ipynb").exists() else None,
             "answers": {q: list(map(str, answers)) for q, answers in WRONG[name].items()}} for name in NAMES]
    folder = regenerated / "public"
    folder.mkdir(exist_ok=True)
    for job in spec:
        if job["solution"] is None:
            path = folder / f"{job['name']}.solved.ipynb"
            nbformat.write(_solution_notebook(regenerated / "autograder" / f"{job['name']}.zip"), path)
            job["solution"] = str(path)
    (folder / "spec.json").write_text(json.dumps(spec))
    subprocess.run([sys.executable, str(ROOT / "tests" / "run_public_checks.py"), str(folder / "spec.json"),
                    str(folder / "out.json")], check=True, timeout=RUN_TIMEOUT * 10, cwd=folder)
    return json.loads((folder / "out.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_planted_wrong_answers_fail_the_public_checks(public_checks, name):
    """Issue 27: `grader.check` said "All test cases passed!" to answers that do not do the task (ex. 2 q6
    `return x @ w_v`, ex. 6 q6 `list(prompt) + [0] * n_new`). Every planted answer that does not type in
    the public values must fail the learner's own check, with a hint in a few clear lines."""
    problems = []
    for q, (solution, *planted) in public_checks[name].items():
        if not solution["passed"]:
            problems.append(f"{q}: the solution fails its public checks:\n{solution['text']}")
        for k, (answer, run) in enumerate(zip(WRONG[name][q], planted)):
            text = run["text"]
            if run.get("raised") or "Traceback" in text or "Trying:" in text:
                problems.append(f"{q}: the check of planted answer {k} shows a trace:\n{text}")
            if answer.hardcoded:
                continue
            if run["passed"]:
                problems.append(f"{q}: grader.check passes planted answer {k}:\n{answer}")
            elif answer.hint and answer.hint.lower() not in text.lower():
                problems.append(f"{q}: the hint for planted answer {k} does not name its mistake "
                                f"({answer.hint!r}):\n{text}")
            elif len(text.splitlines()) < 2:
                problems.append(f"{q}: planted answer {k} fails with no hint:\n{text}")
    assert not problems, f"{name}:\n" + "\n\n".join(problems)


def _run_first_cell(folder, notebook):
    """Run a student notebook's first cell (the one that loads the checks) in `folder`, as its kernel would."""
    import os
    nb = nbformat.read(notebook, as_version=4)
    env = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(nb.cells[0].source, str(notebook), "exec"), env)
    finally:
        os.chdir(here)
    return env


def test_a_renamed_notebook_still_finds_its_checks(tmp_path, monkeypatch):
    """Issue 27: a browser saves a second download as `02_causal_mask (1).ipynb`; otter's first cell then raised
    FileNotFoundError and every check said `NameError: name 'grader' is not defined`. The course's first cell
    finds the notebook whatever it is called, also beside the other exercises."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    for other in ("01_next_token_prediction", "05_sampling"):
        (tmp_path / f"{other}.ipynb").write_bytes((ROOT / "exercises" / f"{other}.ipynb").read_bytes())
    renamed = tmp_path / "02_causal_mask (1).ipynb"
    renamed.write_bytes((ROOT / "exercises" / "02_causal_mask.ipynb").read_bytes())
    env = _run_first_cell(tmp_path, renamed)
    exec("import numpy as np\ndef causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=bool))", env)
    assert env["grader"].check("q1", env).passed
    assert "mask" not in env, "the check's own variables leaked into the learner's namespace"
    exec("def causal_mask(n):\n    return np.triu(np.ones((n, n), dtype=bool))", env)
    assert not env["grader"].check("q1", env).passed


def test_hints_come_in_steps_without_a_trace(tmp_path, monkeypatch):
    """Issue 27: the first failure of a check names the kind of mistake, the second adds a leading question, the
    third the recipe; never doctest's "Trying: ... Expecting nothing"; a function that raises is named in one
    line."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    student = ROOT / "exercises" / "02_causal_mask.ipynb"
    hints = nbformat.read(student, as_version=4).metadata["course_hints"]["q2"][1]
    env = _run_first_cell(student.parent, student)
    exec("def allowed_pairs(n):\n    return n * n // 2", env)
    shown = [repr(env["grader"].check("q2", env)) for _ in range(3)]
    ask, recipe = (" ".join(h.split()) for h in hints)
    assert [ask in s for s in shown] == [False, True, True], shown
    assert [recipe in s for s in shown] == [False, False, True], shown
    assert all("Trying:" not in s and "Traceback" not in s and "The line that failed: assert" in s for s in shown)
    exec("def allowed_pairs(n):\n    return 1 / 0", env)
    raised = repr(env["grader"].check("q2", env))
    assert "Your code raised ZeroDivisionError: division by zero" in raised and "Traceback" not in raised, raised
    exec("def allowed_pairs(n):\n    return n * (n + 1) // 2", env)
    assert env["grader"].check("q2", env).passed


def test_a_notebook_without_its_tests_says_so(tmp_path, monkeypatch, capsys):
    """A notebook moved away from its metadata (or run by the grader's sandbox, whose otter is a stand-in) still
    runs its first cell without an error; a check then says why it cannot run."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    lost = tmp_path / "copy.ipynb"
    nb = nbformat.read(ROOT / "exercises" / "02_causal_mask.ipynb", as_version=4)
    nb.metadata = {}
    nbformat.write(nb, lost)
    env = _run_first_cell(tmp_path, lost)
    assert "were not found" in capsys.readouterr().out
    feedback = env["grader"].check("q1", env)
    assert not feedback.passed and "were not found" in repr(feedback)


def _scalars(value):
    """The numbers of a probe's arguments that would identify it if a reason printed them."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, (int, float)):
        return {repr(value), f"{value:g}"} if abs(value) >= 100 or value != int(value) else set()
    if isinstance(value, (list, tuple)):
        return set().union(*map(_scalars, value)) if value else set()
    return set()


@pytest.mark.parametrize("name", NAMES)
def test_hidden_reasons_do_not_print_the_hidden_inputs(graded, name):
    """Issue 27 item 3 (and 24 item 5): a reason says what failed, never the input that broke it (ex. 5 q6 printed
    top_p and the temperature, ex. 9 q6 the memory). Every planted answer's reason is searched for the numbers of
    its question's hidden arguments."""
    g = graded[name]
    for k in range(max(len(v) for v in WRONG[name].values())):
        for q, (score, reason) in g[f"wrong{k}"]["verdicts"].items():
            numbers = set().union(*(_scalars(list(args)) for (question, _), args
                                    in zip(g["questions_of"], g["reference"].args) if question == q))
            shown = sorted(n for n in numbers if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", reason or ""))
            assert not shown, f"{name} {q}: the reason shows hidden inputs {shown}: {reason}"


def test_feedback_writes_each_learner_only_their_own_row(tmp_path, graded):
    """Issue 27 item 3: `make feedback` (tools/feedback.py) writes one file per CSV row: that row's scores and
    reasons, none of another row's, and no column but the learner's (an instructor's column stays out), under a
    safe file name whatever the submission was called."""
    import csv
    import feedback
    g = graded["02_causal_mask"]
    questions = g["exercise"].questions
    rows = []
    for submission, kind in [("alice.ipynb", "solved"), ("../bob.ipynb", "wrong1"), ("=cmd|x.ipynb", "wrong2")]:
        verdicts = g[kind]["verdicts"]
        rows.append({"submission": submission, **{q: verdicts[q][0] for q in questions},
                     "total": sum(s for s, _ in verdicts.values()), "possible": float(len(questions)),
                     "status": "graded", "reason": "; ".join(r for _, r in verdicts.values() if r),
                     "warnings": "", "seconds": 1.0, "instructor_only": "SECRET hidden inputs"})
    path = tmp_path / "grades.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    written = feedback.write_feedback(path, tmp_path / "out", "02_causal_mask")
    assert sorted(p.name for p in written) == sorted(["alice.md", "bob.md", "_cmd_x.md"])
    assert all(p.parent == tmp_path / "out" for p in written)
    texts = {p.name: p.read_text() for p in written}
    assert all("SECRET" not in t for t in texts.values())
    assert "Score: 6 out of 6" in texts["alice.md"] and "Score: 0 out of 6" in texts["bob.md"]
    bob_reasons = [r for _, r in g["wrong1"]["verdicts"].values() if r]
    assert bob_reasons and all(r.split(": ", 1)[1] in texts["bob.md"] for r in bob_reasons)
    assert not any(r.split(": ", 1)[1] in texts["alice.md"] for r in bob_reasons)


@pytest.mark.parametrize("name", NAMES)
def test_every_hidden_probe_says_what_kind_of_input_it_is(name):
    """Issue 27 item 3: each probe carries a short description (`what=`, the 5th item of its PROBES entry), which
    the grader may show a learner in place of the input itself."""
    space = {"__name__": "probes"}
    exec(compile(grade.load_exercise(ROOT / "autograder" / f"{name}.zip").probes, "probes.py", "exec"), space)
    unlabelled = [(entry[0], entry[1]) for entry in space["PROBES"]
                  if len(entry) < 5 or not isinstance(entry[4], str) or not 3 <= len(entry[4]) <= 80]
    assert space["PROBES"] and not unlabelled, f"{name}: probes without a `what=` label: {unlabelled}"
