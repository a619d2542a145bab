"""The exercises grade correctly, and the student copies are what solutions/ says they are.

One session regenerates every exercise from `solutions/` into a temporary folder
(`tools/make_exercises.py`, the code behind `make exercises`), then grades, with
the batch grader's own `grade_one`, for each exercise: the solved notebook, the
untouched student notebook, and notebooks with planted wrong answers. The
regenerated files must equal the committed ones, byte for byte.
"""
from __future__ import annotations

import copy
import csv
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import grade  # noqa: E402
import make_exercises  # noqa: E402

NAMES = make_exercises.exercise_names()

# Planted wrong answers, two per question. The first of each pair hard-codes the
# value its public test expects (so it passes the public test), and the hidden
# tests must still catch it; the second is a plausible mistake of understanding.
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
               "    return int((np.asarray(chances).argmin(axis=1) == np.asarray(target_ids)).sum())"],
        "q4": ["def signal_counts(n_tokens, sentence_tokens):\n    return (20, 600)",
               "def signal_counts(n_tokens, sentence_tokens):\n    return -(-n_tokens // sentence_tokens), n_tokens - 1"],
    },
    "02_causal_mask": {
        "q1": ['def causal_mask(n):\n    return np.array([[True, False, False], [True, True, False], [True, True, True]])',
               'def causal_mask(n):\n    return np.triu(np.ones((n, n), dtype=bool))'],
        "q2": ['def allowed_pairs(n):\n    return 10',
               'def allowed_pairs(n):\n    return n * n // 2'],
        "q3": ['def allowed_share(n):\n    return 0.625',
               'def allowed_share(n):\n    return 0.5'],
        "q4": ['def masked_weights(scores):\n    return np.array([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])',
               'def masked_weights(scores):\n    n = len(scores)\n    return softmax(np.where(np.tril(np.ones((n, n), dtype=bool)), scores, 0.0))'],
        "q5": ['def zero_leak(row, position):\n    return 0.5',
               'def zero_leak(row, position):\n    row = np.array(row, dtype=float)\n    row[position + 1:] = -np.inf\n    return float(softmax(row)[position + 1:].sum())'],
    },
    "03_teacher_forcing": {
        "q1": ['def answer_accuracy(per_token, n_tokens):\n    return 0.125',
               'def answer_accuracy(per_token, n_tokens):\n    return 1 - n_tokens * (1 - per_token)'],
        "q2": ['def longest_answer(per_token, target):\n    return 2',
               'def longest_answer(per_token, target):\n    return int(round(np.log(target) / np.log(per_token)))'],
        "q3": ['def n_parameters(spec):\n    return 180',
               'def n_parameters(spec):\n    d = spec.d_model\n    per_block = 4 * d * spec.n_heads * spec.d_head + 2 * d * spec.d_ff + 2 * d\n    return 2 * spec.vocab * d + spec.n_layers * per_block + d'],
        "q4": ["def training_memory(spec, n_params, batch, seq_len, saved_per_layer):\n    return {'weights': 360, 'gradients': 360, 'optimiser': 1440, 'copy': 720, 'activations': 48}",
               "def training_memory(spec, n_params, batch, seq_len, saved_per_layer):\n    half = spec.bytes_per_number\n    return {'weights': n_params * half, 'gradients': n_params * half, 'optimiser': 4 * n_params,\n            'copy': n_params * 4, 'activations': batch * seq_len * spec.n_layers * saved_per_layer * spec.d_model * half}"],
    },
    "04_kv_cache": {
        "q1": ['def passes_without_cache(n):\n    return 10',
               'def passes_without_cache(n):\n    return n * n'],
        "q2": ['def kv_bytes_per_token(n_layers, n_kv_heads, d_head, bytes_per_number):\n    return 96',
               'def kv_bytes_per_token(n_layers, n_kv_heads, d_head, bytes_per_number):\n    return n_layers * n_kv_heads * d_head * bytes_per_number'],
        "q3": ['def serving_gib(weight_bytes, kv_bytes_per_token, context, n_conversations):\n    return 4.0',
               'def serving_gib(weight_bytes, kv_bytes_per_token, context, n_conversations):\n    return n_conversations * (weight_bytes + context * kv_bytes_per_token) / GiB'],
        "q4": ['def conversations_that_fit(memory_bytes, weight_bytes, kv_bytes_per_token, context):\n    return 8',
               'def conversations_that_fit(memory_bytes, weight_bytes, kv_bytes_per_token, context):\n    return round((memory_bytes - weight_bytes) / (kv_bytes_per_token * context))'],
    },
    "05_sampling": {
        "q1": ['def with_temperature(logits, temperature):\n    return np.array([0.25, 0.75]) if temperature == 1.0 else np.array([1 / 3, 2 / 3])',
               'def with_temperature(logits, temperature):\n    return softmax(np.asarray(logits, dtype=float) * temperature)'],
        "q2": ['def spread(chances):\n    return float(np.log(2))',
               'def spread(chances):\n    p = np.asarray(chances, dtype=float)\n    p = p[p > 0]\n    return float(-(p * np.log2(p)).sum())'],
        "q3": ['def top_p_keep(chances, top_p):\n    return 2',
               'def top_p_keep(chances, top_p):\n    running = np.cumsum(np.asarray(chances, dtype=float))\n    return int(min(np.searchsorted(running, top_p) + 1, len(running)))'],
        "q4": ['def top_p_chances(chances, top_p):\n    return np.array([0, 2 / 3, 1 / 3])',
               'def top_p_chances(chances, top_p):\n    p = np.asarray(chances, dtype=float)\n    return np.where(p >= np.sort(p)[::-1][1], p, 0.0)'],
        "q5": ['def best_pair(first, second):\n    return 1, 0, 0.36',
               'def best_pair(first, second):\n    i = int(np.argmax(first))\n    j = int(np.argmax(second[i]))\n    return i, j, float(first[i] * second[i][j])'],
    },
    "06_context_window": {
        "q1": ['def dropped_tokens(conversation, window):\n    return 20, 0.2',
               'def dropped_tokens(conversation, window):\n    return conversation - window, (conversation - window) / window'],
        "q2": ['def read_and_compute_seconds(n_bytes, n_ops, accelerator):\n    return 0.5, 0.2',
               'def read_and_compute_seconds(n_bytes, n_ops, accelerator):\n    return n_bytes / accelerator.ops_per_second, n_ops / accelerator.bandwidth'],
        "q3": ['def tokens_per_second(weight_bytes, cache_bytes, batch, bandwidth):\n    return 10.0',
               'def tokens_per_second(weight_bytes, cache_bytes, batch, bandwidth):\n    return batch / (batch * (weight_bytes + cache_bytes) / bandwidth)'],
        "q4": ['def batch_for_rate(weight_bytes, cache_bytes, bandwidth, target):\n    return 6 if target == 15.0 else None',
               'def batch_for_rate(weight_bytes, cache_bytes, bandwidth, target):\n    if target >= bandwidth / cache_bytes:\n        return None\n    return int(target * weight_bytes / bandwidth) + 1'],
    },
    "08_using_pytorch": {
        "q1": ['def inputs_and_targets(tokens):\n    return torch.tensor([[5, 1, 8, 5, 3]]), torch.tensor([[1, 8, 5, 3, 9]])',
               'def inputs_and_targets(tokens):\n    return tokens[:-1], tokens[1:]'],
        "q2": ['def knows_nothing_loss(n_positions, vocab):\n    return math.log(2)',
               'def knows_nothing_loss(n_positions, vocab):\n    return float(F.cross_entropy(torch.full((n_positions, vocab), 1.0 / vocab).log().exp(), torch.zeros(n_positions, dtype=torch.long)) / n_positions)'],
        "q3": ['def causal_weights(scores):\n    return torch.tensor([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])',
               'def causal_weights(scores):\n    n = scores.shape[-1]\n    allowed = torch.ones(n, n, dtype=torch.bool).tril()\n    return torch.softmax(scores.masked_fill(~allowed, 0.0), dim=-1)'],
        "q4": ['def top_p_count(raw, top_p):\n    return 2',
               'def top_p_count(raw, top_p):\n    chances = torch.softmax(raw, dim=-1)\n    return int((chances.cumsum(0) < top_p).sum()) + 1'],
    },
    "09_recap_quiz": {
        "q1": ['def gpt2_parameters(n_layers, d_model, vocab, n_positions):\n    return 92',
               'def gpt2_parameters(n_layers, d_model, vocab, n_positions):\n    return (vocab + n_positions) * d_model + n_layers * 12 * d_model ** 2'],
        "q2": ['def embedding_share(n_layers, d_model, vocab, n_positions):\n    return 14 / 92',
               'def embedding_share(n_layers, d_model, vocab, n_positions):\n    d = d_model\n    return vocab * d / ((vocab + n_positions) * d + n_layers * (12 * d * d + 13 * d) + 2 * d)'],
        "q3": ['def crossover_length(d_model, ff_multiple):\n    return 600',
               'def crossover_length(d_model, ff_multiple):\n    return 6 * d_model'],
        "q4": ['def kv_cache_gib(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):\n    return 2.0',
               'def kv_cache_gib(n_layers, n_kv_heads, d_head, n_tokens, bytes_per_number):\n    return n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number / GiB'],
        "q5": ['def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n    return 4',
               'def requests_that_fit(memory_gib, weights_gib, cache_gib_per_request):\n    return round((memory_gib - weights_gib) / cache_gib_per_request)'],
    },
}


def _build(name, root):
    # otter's own run of the tests against the solutions is skipped: test_solution_scores_full_marks grades them
    return make_exercises.build(name, root / "work" / name, root / "exercises", root / "autograder", run_tests=False)


@pytest.fixture(scope="session")
def regenerated(tmp_path_factory):
    """Every exercise rebuilt from solutions/: {name: otter assign folder}, plus the folder of the copies."""
    root = tmp_path_factory.mktemp("regenerated")
    with ThreadPoolExecutor(2) as pool:
        dists = dict(zip(NAMES, pool.map(lambda n: _build(n, root), NAMES)))
    return root, dists


def _with_cells(nb, sources):
    """A copy of `nb` with code cells appended (appended definitions replace the earlier ones)."""
    nb = copy.deepcopy(nb)
    nb.cells.extend(nbformat.v4.new_code_cell(s) for s in sources)
    return nb


def _submissions(name, root, dist):
    """The notebooks graded for one exercise: solved, blank, and one per variant of planted wrong answers."""
    folder = root / "submissions" / name
    folder.mkdir(parents=True)
    solved = nbformat.read(dist / "autograder" / f"{name}.ipynb", as_version=4)
    notebooks = {"solved": solved, "blank": nbformat.read(root / "exercises" / f"{name}.ipynb", as_version=4)}
    for k in range(2):
        notebooks[f"wrong{k}"] = _with_cells(solved, [v[k] for v in WRONG.get(name, {}).values()])
    for kind, nb in notebooks.items():
        nbformat.write(nb, folder / f"{kind}.ipynb")
    return {kind: folder / f"{kind}.ipynb" for kind in notebooks}


@pytest.fixture(scope="session")
def graded(regenerated):
    """{(name, kind): CSV row of the batch grader}, every submission graded in a pool of two."""
    root, dists = regenerated
    jobs = {(name, kind): (root / "autograder" / f"{name}.zip", path)
            for name in NAMES for kind, path in _submissions(name, root, dists[name]).items()}
    with ThreadPoolExecutor(2) as pool:
        rows = pool.map(lambda job: grade.grade_one(*job, timeout=300), jobs.values())
        return dict(zip(jobs, rows))


def test_there_are_exercises():
    assert NAMES, "no masters in solutions/"
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES, "exercises/ and solutions/ differ"
    assert sorted(p.stem for p in (ROOT / "autograder").glob("*.zip")) == NAMES, "autograder/ and solutions/ differ"


@pytest.mark.parametrize("name", NAMES)
def test_no_drift_from_solutions(regenerated, name):
    root, _ = regenerated
    for folder, suffix in [("exercises", "ipynb"), ("autograder", "zip")]:
        fresh, committed = root / folder / f"{name}.{suffix}", ROOT / folder / f"{name}.{suffix}"
        assert fresh.read_bytes() == committed.read_bytes(), \
            f"{folder}/{name}.{suffix} is not what solutions/{name}.md gives: run `make exercises EX={name}`"


@pytest.mark.parametrize("name", NAMES)
def test_solution_scores_full_marks(graded, name):
    row = graded[name, "solved"]
    assert row["status"] == "graded" and row["total"] == row["possible"] > 0, row["reason"]


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_scores_zero(graded, name):
    row = graded[name, "blank"]
    questions = grade.question_names(ROOT / "autograder" / f"{name}.zip")
    assert row["status"] == "graded", row["reason"]
    assert {q: row[q] for q in questions} == {q: 0 for q in questions}


def _solution_and_hidden_lines(name):
    """The code lines of the solutions and of the hidden tests in one master."""
    nb = jupytext.read(ROOT / "solutions" / f"{name}.md")
    solution, hidden = [], []
    for cell in nb.cells:
        lines = cell.source.splitlines()
        if cell.cell_type == "code" and "hidden: true" in cell.source:
            hidden += [ln.strip() for ln in lines if ln.strip() and '"""' not in ln
                       and not ln.startswith(("import ", "from "))]  # imports are shared with the public tests
        inside = False
        for line in lines:
            if line.strip() == "# END SOLUTION":
                inside = False
            if inside and line.strip():
                solution.append(line.strip())
            if line.strip() == "# BEGIN SOLUTION":
                inside = True
    return solution, hidden


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_holds_no_solution_and_no_hidden_test(name):
    text = (ROOT / "exercises" / f"{name}.ipynb").read_text()
    nb = nbformat.reads(text, as_version=4)
    code = "\n".join(c.source for c in nb.cells)
    solution, hidden = _solution_and_hidden_lines(name)
    assert solution and hidden, f"solutions/{name}.md: no solution or no hidden test found"
    leaked = [ln for ln in solution if ln in code]
    assert not leaked, f"exercises/{name}.ipynb contains solution code: {leaked[:3]}"
    leaked = [ln for ln in hidden if ln in text or ln.replace('"', '\\"') in text]
    assert not leaked, f"exercises/{name}.ipynb contains hidden tests: {leaked[:3]}"


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_planted_wrong_answers(name):
    questions = grade.question_names(ROOT / "autograder" / f"{name}.zip")
    assert sorted(WRONG.get(name, {}), key=lambda q: (len(q), q)) == questions, \
        f"add two planted wrong answers per question of {name} to WRONG"


@pytest.mark.parametrize("name", NAMES)
def test_planted_wrong_answers_fail_the_hidden_tests(graded, name):
    for k in range(2):
        row = graded[name, f"wrong{k}"]
        assert row["status"] == "graded", row["reason"]
        for q in WRONG[name]:
            assert row[q] == 0, f"{name} {q}: planted wrong answer {k} scored {row[q]}:\n{WRONG[name][q][k]}"
            assert not row["detail"][q]["hidden_passed"], f"{name} {q}: the hidden tests pass wrong answer {k}"
            if k == 0:  # hard-coded public values: only the hidden tests can tell
                assert row["detail"][q]["public_passed"], f"{name} {q}: planted answer 0 should pass the public test"


def test_batch_grader_keeps_every_submission(regenerated, tmp_path):
    """Solved, blank, raising, wrong-type and endless-loop submissions: five rows, right totals, within the timeout."""
    root, dists = regenerated
    name = "01_next_token_prediction"
    solved = nbformat.read(dists[name] / "autograder" / f"{name}.ipynb", as_version=4)
    folder = tmp_path / "submissions"
    folder.mkdir()
    nbformat.write(solved, folder / "a_solved.ipynb")
    (folder / "b_blank.ipynb").write_bytes((root / "exercises" / f"{name}.ipynb").read_bytes())
    nbformat.write(_with_cells(solved, ["def sentence_loss(logits, target_ids):\n    raise ValueError('not done yet')"]),
                   folder / "c_raising.ipynb")
    nbformat.write(_with_cells(solved, ["def favourite_hits(chances, target_ids):\n    return 'two'"]),
                   folder / "d_wrong_type.ipynb")
    looping = copy.deepcopy(solved)
    looping.cells.insert(2, nbformat.v4.new_code_cell("while True:\n    pass"))
    nbformat.write(looping, folder / "e_endless_loop.ipynb")
    (folder / "notes.txt").write_text("not a notebook: ignored")

    timeout = 60
    started = time.monotonic()
    rows = grade.grade_folder(root / "autograder" / f"{name}.zip", folder, tmp_path / "grades.csv",
                              timeout=timeout, jobs=2, report=None)
    elapsed = time.monotonic() - started

    with open(tmp_path / "grades.csv") as f:
        table = list(csv.DictReader(f))
    assert [r["submission"] for r in table] == ["a_solved.ipynb", "b_blank.ipynb", "c_raising.ipynb",
                                                "d_wrong_type.ipynb", "e_endless_loop.ipynb"]
    totals = {r["submission"][0]: (float(r["total"]), float(r["possible"]), r["status"]) for r in table}
    assert totals == {"a": (4, 4, "graded"), "b": (0, 4, "graded"), "c": (3, 4, "graded"),
                      "d": (3, 4, "graded"), "e": (0, 4, "timeout")}
    by_name = {r["submission"]: r for r in table}
    assert by_name["c_raising.ipynb"]["q2"] == "0.0" and "ValueError: not done yet" in by_name["c_raising.ipynb"]["reason"]
    assert by_name["d_wrong_type.ipynb"]["q3"] == "0.0" and "q3" in by_name["d_wrong_type.ipynb"]["reason"]
    assert "Traceback" not in "".join(r["reason"] for r in table)
    assert all(r["seconds"] <= timeout + 30 for r in rows), [r["seconds"] for r in rows]
    assert elapsed < 3 * timeout, f"the batch took {elapsed:.0f} s"
