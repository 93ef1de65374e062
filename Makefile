# Set-up and everyday commands. `make serve` and `make test` each set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup setup-test serve test lint bench layouts clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The stamp files re-run pip only when the dependency lists change.
$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

setup: $(VENV)/.installed

setup-test: $(VENV)/.installed-test
	scripts/install-test-packages

serve: setup
	$(BIN)/flask --app wsgi run --host $(HOST) --port $(PORT)

lint: setup-test
	$(BIN)/ruff check .

test: setup-test lint
	$(BIN)/pytest

bench: setup-test
	$(BIN)/python bench/verify.py
	$(BIN)/python bench/page.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/datalab.py
	$(BIN)/python bench/storm.py
	$(BIN)/python bench/faults.py

layouts: setup-test
	$(BIN)/python scripts/build-layouts

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts
