# Two entry points, both from a fresh clone (see README):
#   make run   - set up, run grids/seed.toml into the embedded DuckDB warehouse, print its headline table
#   make test  - set up, run the test suite
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# Test processes (pytest-xdist): one per core of the 2-core CI machine; tests/conftest.py groups the tests per file.
TEST_WORKERS ?= 2

$(BIN)/sweepkit: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/sweepkit

setup: $(BIN)/sweepkit

run: setup
	$(BIN)/sweepkit run grids/seed.toml

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

bench: setup
	$(BIN)/python benchmarks/bench_sweep.py

docs: setup
	$(BIN)/python -m sweepkit.cli.docs > docs/cli.md

.PHONY: setup run test bench docs
