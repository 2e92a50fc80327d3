# Two-command quick start: `make run` and `make test`. Each creates .venv when it is missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test lint bench bench-tiny clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("neuronet needs Python >= 3.11, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed-run

## run: install and run the main job on the embedded EURUSD H1 sample
run: $(VENV)/.installed-run
	$(BIN)/neuronet run

## test: install with dev extras, lint, and run the test suite (slow tests excluded)
test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -m 'not slow' -q

## test-slow: the long-running tests
test-slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m slow -q

## bench: run the benchmarks (installs PyTorch CPU as the peer)
bench: $(VENV)/.installed-dev
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m benchmarks

## bench-tiny: every benchmark at a toy size (seconds; checks they run, measures nothing; PyTorch optional)
bench-tiny: $(VENV)/.installed-dev
	$(BIN)/python -m benchmarks --tiny

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
