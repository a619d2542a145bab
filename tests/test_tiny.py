"""The tiny model of book.tiny trains on one core, generates the same text with and without its cache,
and its cache holds exactly the bytes the chapter-4 formula predicts."""
import math

import pytest
import torch

from book import tiny


@pytest.fixture(scope="module")
def trained():
    return tiny.trained_model()


def test_loss_starts_at_log_vocabulary_and_falls(trained):
    model, losses = trained
    assert abs(losses[0] - math.log(model.cfg.vocab)) < 0.1  # an untrained model is equally unsure of every word
    assert sum(losses[-30:]) / 30 < 0.7 < losses[0]


def test_training_is_deterministic(trained):
    _, losses = trained
    _, again = tiny.trained_model(steps=20)
    assert again == losses[:20]


def test_cache_changes_nothing_but_the_work(trained):
    model, _ = trained
    tokenizer, _ = tiny.corpus()
    prompt = tokenizer.encode("the arm lifts the red block . then it")
    assert tiny.generate(model, prompt, 12) == tiny.generate(model, prompt, 12, use_cache=False)


def test_cache_bytes_match_the_formula(trained):
    model, _ = trained
    cfg = model.cfg
    caches = tiny.new_caches(model)
    prompt = [0, 1, 2]
    ids = tiny.generate(model, prompt, 5, caches=caches)
    positions = len(ids) - 1  # the last token is produced but never fed back
    per_token = 2 * cfg.n_layers * cfg.n_heads * (cfg.d_model // cfg.n_heads) * 4  # float32
    assert tiny.cache_bytes(caches) == positions * per_token


def test_sampling_respects_top_p():
    logits = torch.tensor([3.0, 2.0, 0.0, -5.0])
    gen = torch.Generator().manual_seed(0)
    draws = {tiny.sample(logits, top_p=0.5, generator=gen) for _ in range(50)}
    assert draws == {0}  # the favourite alone reaches 0.5
