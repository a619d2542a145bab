# The two commands of the README: `make book` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup book test golden clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

book: setup
	$(BIN)/jupyter-book build . -n -W --keep-going
	@echo "The website is in _build/html: open _build/html/index.html in a browser."

test: setup
	$(BIN)/python -m pytest

# Regenerate the executed golden notebooks: all of them, or one with CH=01_next_token_prediction
golden: setup
	cd tests && ../$(BIN)/python make_golden.py $(CH)

clean:
	rm -rf _build
