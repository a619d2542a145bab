"""The tiny model of book.tiny trains on one core, is kept on disk and loaded bit for bit, generates the
same text with and without its cache (cropping to its window as nanoGPT does), and its cache holds exactly
the bytes the model card predicts."""

import functools
import math
import os
import subprocess
import sys

import pytest
import torch

from book import tiny
from book.card import cache_bytes_per_token


@pytest.fixture(scope="module")
def trained():
    return tiny.trained_model()


def test_loss_starts_at_log_vocabulary_and_falls(trained):
    model, losses = trained
    assert abs(losses[0] - math.log(model.cfg.vocab)) < 0.1  # an untrained model is equally unsure of every word
    assert sum(losses[-30:]) / 30 < 0.7 < losses[0]


def test_training_is_deterministic(trained, tmp_path, monkeypatch):
    _, losses = trained
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path))  # an empty cache: this run trains
    _, again = tiny.trained_model(steps=20)
    assert again == losses[:20]


def _train_with(optimizer, steps, dtype="float32"):
    tokenizer, data = tiny.corpus()
    torch.manual_seed(tiny.SEED)
    model = tiny.TinyGPT(tiny.TinyConfig(vocab=len(tokenizer), dtype=dtype))
    return model, tiny.train(model, data, steps=steps, optimizer=optimizer)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_written_out_adamw_is_torchs_bit_for_bit(dtype):
    ours, our_losses = _train_with(tiny.AdamW, 40, dtype)
    theirs, their_losses = _train_with(torch.optim.AdamW, 40, dtype)
    assert our_losses == their_losses
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert torch.equal(a, b), name


def test_training_does_not_import_torch_dynamo():
    """The reason book.tiny writes AdamW out: torch.optim's first optimizer imports torch._dynamo (seconds)."""
    code = (
        "import sys; from book import tiny; tokenizer, data = tiny.corpus(); "
        "tiny.train(tiny.TinyGPT(tiny.TinyConfig(vocab=len(tokenizer))), data, steps=2); "
        "print('torch._dynamo' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


def test_a_loaded_model_is_the_trained_one_bit_for_bit(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path))
    trained, losses = tiny.trained_model(steps=15)  # trains and keeps the weights
    rng_after_training = torch.get_rng_state()
    assert len(list(tmp_path.glob("tiny-*.pt"))) == 1
    loaded, losses_again = tiny.trained_model(steps=15)  # loads them
    assert losses_again == losses and torch.equal(torch.get_rng_state(), rng_after_training)
    for (name, a), (_, b) in zip(trained.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    other, _ = tiny.trained_model(steps=16)  # another recipe is another file, not the same weights
    assert len(list(tmp_path.glob("tiny-*.pt"))) == 2
    assert not torch.equal(other.tokens.weight, loaded.tokens.weight)


def test_an_unreadable_cache_file_is_trained_again(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path))
    _, losses = tiny.trained_model(steps=5)
    for f in tmp_path.glob("tiny-*.pt"):
        f.write_bytes(b"half a file")
    _, again = tiny.trained_model(steps=5)
    assert again == losses


def _counting_training(monkeypatch):
    """Replace tiny.train with itself, counting: the step counts of the runs trained from now on."""
    trained_steps, train = [], tiny.train

    def counted(model, data, steps, **kwargs):
        trained_steps.append(steps)
        return train(model, data, steps, **kwargs)

    monkeypatch.setattr(tiny, "train", counted)
    return trained_steps


@pytest.mark.parametrize("causal", [True, False])
def test_a_kept_run_is_the_shorter_run_bit_for_bit(causal, tmp_path, monkeypatch):
    """The first k steps of a run are the k-step run: a longer run that keeps step k writes what the k-step run
    trained alone writes, the same losses and every weight the same, and a k-step call then loads it."""
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path / "alone"))
    alone, alone_losses = tiny.trained_model(causal=causal, shipped=False, steps=12)
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path / "kept"))
    longer, longer_losses = tiny.trained_model(causal=causal, shipped=False, steps=30, keep=(12,))
    assert len(longer_losses) == 30 and len(list((tmp_path / "kept").glob("tiny-*.pt"))) == 2
    rng_after_training = torch.get_rng_state()
    trained_steps = _counting_training(monkeypatch)
    kept, kept_losses = tiny.trained_model(causal=causal, shipped=False, steps=12)
    assert trained_steps == [] and torch.equal(torch.get_rng_state(), rng_after_training)  # loaded, not trained
    assert kept_losses == alone_losses == longer_losses[:12]
    assert kept.cfg.causal == causal
    for (name, a), (_, b) in zip(alone.state_dict().items(), kept.state_dict().items()):
        assert torch.equal(a, b), name
    assert not torch.equal(kept.tokens.weight, longer.tokens.weight)  # step 12's weights, not the last step's


def test_a_cached_run_trains_only_its_missing_kept_runs(tmp_path, monkeypatch):
    """With the whole run cached, `keep` trains the longest missing kept run alone (keeping the shorter ones),
    never the whole run again; with every kept run cached, nothing trains."""
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path))
    _, losses = tiny.trained_model(steps=20, keep=(4,))
    trained_steps = _counting_training(monkeypatch)
    _, again = tiny.trained_model(steps=20, keep=(4, 7, 11))
    assert again == losses and trained_steps == [11]  # 7 kept by the 11-step run, 4 cached already
    assert len(list(tmp_path.glob("tiny-*.pt"))) == 4
    for k in (4, 7, 11):
        assert tiny.trained_model(steps=k)[1] == losses[:k]
    _, again = tiny.trained_model(steps=20, keep=(4, 7, 11))
    assert again == losses and trained_steps == [11]  # all loaded


def test_keep_refuses_what_it_cannot_keep():
    for keep in ((0,), (5,), (7,)):
        with pytest.raises(ValueError, match="1 to 4 steps"):
            tiny.trained_model(steps=5, keep=keep)
    with pytest.raises(ValueError, match="shipped=False"):
        tiny.trained_model(causal=False, keep=(100,))


def test_cache_changes_nothing_but_the_work(trained):
    model, _ = trained
    tokenizer, _ = tiny.corpus()
    prompt = tokenizer.encode("the arm lifts the red block . then it")
    assert tiny.generate(model, prompt, 12).ids == tiny.generate(model, prompt, 12, use_cache=False).ids


@pytest.mark.parametrize("use_cache", [True, False])
def test_a_batch_writes_each_row_as_it_would_alone(trained, use_cache):
    model, _ = trained
    tokenizer, _ = tiny.corpus()
    # three places in an episode, so that each row's own newest word decides what comes next
    texts = (
        "the arm lifts the red block . then it",
        "block . the robot grips the blue cup .",
        "cup . then it drops the green ball .",
    )
    prompts = [tokenizer.encode(t) for t in texts]
    calls = []
    hook = model.register_forward_hook(lambda module, args, out: calls.append(tuple(args[0].shape)))
    try:
        batch = tiny.generate_batch(model, prompts, 12, use_cache=use_cache)
    finally:
        hook.remove()
    alone = [tiny.generate(model, p, 12, use_cache=use_cache).ids for p in prompts]
    assert batch == alone
    assert len({tuple(row[len(p) :]) for row, p in zip(alone, prompts)}) == 3  # three different continuations
    assert len(calls) == 12 and all(shape[0] == 3 for shape in calls)  # one call a token, for all three rows
    assert prompts == [tokenizer.encode(t) for t in texts]  # the prompts are not written into


def test_a_batch_samples_its_rows_in_order(trained):
    model, _ = trained
    prompts = [[0, 1, 2], [3, 4, 5]]
    batch = tiny.generate_batch(model, prompts, 6, pick=tiny.sampler(temperature=2.0, seed=3), use_cache=False)
    # by hand: one generator, drawn for row 0 then row 1 at every step
    gen, rows = torch.Generator().manual_seed(3), [list(p) for p in prompts]
    with torch.no_grad(), tiny.one_thread():
        for _ in range(6):
            logits = model(torch.tensor(rows))[:, -1]
            for b, row in enumerate(rows):
                row.append(tiny.sample(logits[b], temperature=2.0, generator=gen))
    assert batch == rows


def test_a_batch_refuses_what_it_cannot_write(trained):
    model, _ = trained
    with pytest.raises(ValueError, match="equal length.*lengths 2, 3"):
        tiny.generate_batch(model, [[0, 1, 2], [3, 4]], 4)
    for empty in ([], [[]]):
        with pytest.raises(ValueError, match="at least one token"):
            tiny.generate_batch(model, empty, 4)
    with pytest.raises(ValueError, match="at least one token"):
        tiny.generate(model, [], 4)
    with pytest.raises(TypeError, match="generate_batch"):
        tiny.generate(model, [[0, 1], [2, 3]], 4)


def test_cache_bytes_match_the_formula(trained):
    model, _ = trained
    cfg = model.cfg
    written = tiny.generate(model, [0, 1, 2], 5)
    positions = len(written.ids) - 1  # the last token is produced but never fed back
    assert tiny.cache_bytes(written.caches) == positions * cache_bytes_per_token(tiny.card_of(cfg))


def test_generate_crops_to_the_window_as_nanogpt_does(trained):
    model, _ = trained
    prompt = [0, 1, 2]
    window = 8
    got = tiny.generate(model, prompt, 12, window=window).ids
    # by hand: every step reads only the newest `window` tokens, from position 0
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(12):
            ids.append(int(model(torch.tensor([ids[-window:]]))[0, -1].argmax()))
    assert got == ids
    assert tiny.generate(model, prompt, 12, window=window, use_cache=False).ids == ids


def test_generate_refuses_to_read_past_the_position_table(trained):
    model, _ = trained
    table = model.cfg.context
    with pytest.raises(ValueError, match=f"position table has {table}"):
        tiny.generate(model, [0, 1, 2], table, window=None)
    with pytest.raises(ValueError, match="position slots"):
        tiny.generate(model, [0], 1, window=table + 1)
    assert len(tiny.generate(model, [0, 1, 2], table - 2, window=None).ids) == table + 1  # the last fits exactly


def test_log_chances_are_the_models_own(trained):
    model, _ = trained
    written = tiny.generate(model, [0, 1, 2], 4)
    ids, logs = written.ids, written.log_chances
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([ids])), dim=-1)[0]
    expected = [float(full[t - 1, ids[t]]) for t in range(3, len(ids))]
    assert logs == pytest.approx(expected, abs=1e-5)


def test_sampling_respects_top_p():
    logits = torch.tensor([3.0, 2.0, 0.0, -5.0])
    gen = torch.Generator().manual_seed(0)
    draws = {tiny.sample(logits, top_p=0.5, generator=gen) for _ in range(50)}
    assert draws == {0}  # the favourite alone reaches 0.5


def test_the_trained_models_compute_in_float64_throughout(trained):
    """Float64 weights, activations, outputs and card; a model built without a dtype stays float32."""
    model, _ = trained
    assert tiny.DTYPE == "float64" and model.cfg.dtype == "float64"
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    with torch.no_grad():
        assert model(torch.tensor([[0, 1, 2]])).dtype == torch.float64
    assert tiny.card_of(model.cfg).bytes_per_number == 8
    caches = tiny.generate(model, [0, 1, 2], 2).caches
    assert caches[0]["k"].dtype == torch.float64
    plain = tiny.TinyGPT(tiny.TinyConfig(vocab=5))
    assert {p.dtype for p in plain.parameters()} == {torch.float32} and tiny.card_of(plain.cfg).bytes_per_number == 4


def test_a_float64_model_is_drawn_in_float64_not_rounded_from_float32():
    """The starting weights are drawn in float64 (a float32 draw cast up would differ by processor)."""
    torch.manual_seed(0)
    weights = tiny.TinyGPT(tiny.TinyConfig(vocab=5, dtype="float64")).tokens.weight
    assert not torch.equal(weights, weights.float().double())


def test_an_unknown_dtype_is_refused_clearly():
    with pytest.raises(ValueError, match="dtype='float16'.*'float32', 'float64'"):
        tiny.TinyConfig(vocab=5, dtype="float16")


def test_the_cache_key_covers_the_dtype(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path))
    model64, losses64 = tiny.trained_model(steps=3)
    model32, losses32 = tiny.trained_model(steps=3, dtype="float32")  # trained, not the float64 file loaded
    assert len(list(tmp_path.glob("tiny-*.pt"))) == 2
    assert next(model32.parameters()).dtype == torch.float32 and losses32 != losses64
    assert next(tiny.trained_model(steps=3, dtype="float32")[0].parameters()).dtype == torch.float32  # loaded


@functools.cache  # a torch import for each setting of the path's variables, the unpinned one once, not four times
def _cache_key(pins=()):
    code = (
        "from book import tiny; tokenizer, _ = tiny.corpus(); "
        "print(tiny._run_key(tiny.TinyConfig(vocab=len(tokenizer), dtype=tiny.DTYPE), 3, 0))"
    )
    env = {k: v for k, v in os.environ.items() if k not in tiny.CPU_PATH_VARIABLES} | dict(pins)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize("variable", tiny.CPU_PATH_VARIABLES)
def test_the_cache_key_covers_the_cpu_code_path(variable):
    """A model trained on one code path is never loaded under another (each names another file)."""
    plain = {**tiny.PLAIN_PATH, "DNNL_MAX_CPU_ISA": tiny.PLAIN_PATH["ONEDNN_MAX_CPU_ISA"]}  # oneDNN's older name
    assert _cache_key() != _cache_key(((variable, plain[variable]),))


def test_the_unmasked_model_is_the_shipped_run(trained, tmp_path, monkeypatch):
    """causal=False loads book/data/tiny_unmasked.pt (nothing trained, nothing written); another recipe trains.

    That the shipped file is what its recipe trains on the plain path is checked by tests/test_cpu_paths.py."""
    monkeypatch.setenv("BOOK_CACHE", str(tmp_path))
    model, losses = tiny.trained_model(causal=False)
    saved = torch.load(tiny.SHIPPED_UNMASKED, weights_only=True)
    assert losses == saved["losses"].tolist() and len(losses) == tiny.STEPS
    assert not model.cfg.causal and all(torch.equal(a, saved["weights"][k]) for k, a in model.state_dict().items())
    assert sum(losses[-30:]) / 30 < sum(trained[1][-30:]) / 30 / 5  # it learnt to copy: far below the masked run
    assert not list(tmp_path.glob("tiny-*.pt"))  # loaded, not trained
    tiny.trained_model(causal=False, steps=4)  # another recipe: trained here
    tiny.trained_model(causal=False, steps=4, shipped=False)  # the same run, now loaded from the cache
    assert len(list(tmp_path.glob("tiny-*.pt"))) == 1


def test_shipping_refuses_another_cpu_path():
    env = {k: v for k, v in os.environ.items() if k not in tiny.CPU_PATH_VARIABLES}
    run = subprocess.run([sys.executable, "-m", "book.tiny", "ship"], env=env, capture_output=True, text=True)
    assert run.returncode != 0 and "ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_docstring_or_generation_edit_keeps_the_trained_models():
    """The cache key hashes the code that trains, not the file: editing a docstring, a comment or the generation
    code keeps every trained model; editing the training code trains afresh."""
    from pathlib import Path

    source = Path(tiny.__file__).read_text()
    key = tiny._training_code(source)
    assert "generate" not in tiny.TRAINING_CODE and "train" in tiny.TRAINING_CODE
    edited = source.replace("def generate(", "# a new comment\ndef generate(", 1)
    edited = edited.replace('"""Choose greedily', '"""Pick greedily', 1) if '"""Choose greedily' in edited else edited
    docstring = source.index('"""', source.index("def train(")) + 3  # the first words of train's docstring
    edited = edited[:docstring] + "Reworded. " + edited[docstring:]
    assert edited != source and tiny._training_code(edited) == key
    assert tiny._training_code(source.replace("def generate(", "def generate_text(", 1)) == key
    changed = source.replace("opt.step()", "opt.step()\n            opt.step()", 1)
    assert changed != source and tiny._training_code(changed) != key
