# The two commands of the README: `make book` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two pinned sets: requirements.txt is what a learner needs (Binder installs only that one);
# requirements-dev.txt adds the website build, the tests and the formatter, and includes the first.
# Each set pins every package it needs, so it is installed with --no-deps (pip resolves nothing, and
# otter-grader's nbconvert[webpdf] does not pull a browser driver into the learner set); pip check proves it whole.
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup book test check lint bench golden exercises colab newer-stack grade feedback release pdf clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-dev.txt
	$(BIN)/python -m pip check
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

# the build command (jupyter-book build . -n -W --keep-going) is written once, in tools/built_site.py
book: setup
	$(BIN)/python -m tools.built_site

# The tests side by side, one worker per CPU: each test file whole on one worker, the longest first by
# tests/durations.json and the build before all (see tests/conftest.py); TESTS="tests/test_prose.py tests/golden"
# runs some of them (tests/golden/, the goldens under nbval on this machine's path, runs only when named).
# A plain `.venv/bin/python -m pytest FILE` runs serially, in the same order.
TESTS ?=
# The tests' processes may keep Python's bytecode caches (__pycache__/, git-ignored): where the environment says
# PYTHONDONTWRITEBYTECODE, every worker, kernel and inner pytest compiles the course's modules again and pytest
# rewrites its plugins' asserts again (about 2 CPU s a pytest process).
# compileall writes them before the tests start. A fresh clone has none, and (likely cause, not traced) sandboxed
# grading runs and kernels that cannot write them compile book/ and tools/ in memory each time (fresh clone,
# quiet machine: pytest 335 s and 372 s without it, 293 s with it).
test check: export PYTHONDONTWRITEBYTECODE =
test: setup lint
	$(BIN)/python -m compileall -q book tools tests
	$(BIN)/python -m pytest --numprocesses auto --dist loadfile --no-loadscope-reorder $(TESTS)

# The fast tier (about a minute): lint, format, and every test file not marked slow in tests/conftest.py.
check: setup lint
	$(BIN)/python -m compileall -q book tools tests
	$(BIN)/python -m pytest --numprocesses auto --dist loadfile --no-loadscope-reorder -m "not slow" $(TESTS)

# ruff's lint and format rules (pyproject.toml) on every Python file; `$(BIN)/ruff format .` fixes the format.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Regenerate the executed golden notebooks: all of them, or one with CH=01_next_token_prediction
golden: setup
	$(BIN)/python -m tools.make_golden $(CH)
	$(BIN)/python -m tools.colab

# Regenerate exercises/ (student notebooks) and autograder/ (zips with the hidden tests) from solutions/:
# all of them, or one with EX=02_causal_mask. otter assign also checks every solution passes its tests.
exercises: setup
	$(BIN)/python -m tools.exercises.make_exercises $(EX)
	$(BIN)/python -m tools.colab

# The notebooks the Colab buttons open (notebooks/), from the chapters and exercises; tests/test_colab.py
# checks they are in sync. `make golden` and `make exercises` run it too.
colab: setup
	$(BIN)/python -m tools.colab

# For a maintainer bumping pins (downloads several GB, so not in `make test`): a Python 3.12 venv with the
# newest PyTorch from PyPI, the goldens under nbval there, and every Colab notebook run from its own install
# cell as on Colab. Prints every cell that prints otherwise. ARGS="--python 3.13" tries another Python.
newer-stack:
	$(PYTHON) -m tools.newer_stack $(ARGS)

# Grade a folder of submitted notebooks for one exercise into a CSV, a row per submission, each notebook in its
# own bubblewrap sandbox (apt-get install bubblewrap); ARGS passes options, e.g. ARGS="--timeout 60 --jobs 4":
#   make grade EX=01_next_token_prediction SUBMISSIONS=path/to/folder OUT=grades.csv
grade: setup
	@test -n "$(EX)" -a -n "$(SUBMISSIONS)" -a -n "$(OUT)" || \
	  { echo "usage: make grade EX=01_next_token_prediction SUBMISSIONS=folder/ OUT=grades.csv [ARGS=...]"; exit 2; }
	$(BIN)/python -m tools.grading.grade $(EX) $(SUBMISSIONS) $(OUT) $(ARGS)

# Hand each learner their own results: one feedback file per submission, from the results file tools/grading/grade.py
# writes beside the CSV (grades.csv -> grades.results.json):
#   make feedback CSV=grades.csv OUT=feedback/
feedback: setup
	@test -n "$(CSV)" -a -n "$(OUT)" || { echo "usage: make feedback CSV=grades.csv OUT=feedback/ [ARGS=--exercise ...]"; exit 2; }
	$(BIN)/python -m tools.grading.feedback $(CSV) $(OUT) $(ARGS)

# Write the student release (chapters, exercises, book/, site and Binder files; no solutions/, autograder/,
# tests/ or tools/) into a new folder outside the repository, checked for solution and hidden-test lines:
#   make release OUT=../course-release
release: setup
	@test -n "$(OUT)" || { echo "usage: make release OUT=../course-release"; exit 2; }
	$(BIN)/python -m tools.grading.release $(OUT)

# Build and test times, execution time per chapter, sizes of the environment and the site, each against
# its budget (a script that prints, not a test). `make bench ARGS=--no-test` skips the timed `make test`.
bench: setup
	$(BIN)/python -m tools.bench $(ARGS)

# The whole course as one PDF, _build/pdf/course.pdf, printed from the website by Debian's chromium
# (needs apt-get install chromium poppler-utils); builds the website first if it is missing or stale.
pdf: setup
	$(BIN)/python -m tools.pdf

clean:
	rm -rf _build
