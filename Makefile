PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ENV_PACKAGES := $(wildcard environments/*/pyproject.toml)

.PHONY: setup test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml $(ENV_PACKAGES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' $(foreach p,$(ENV_PACKAGES),-e $(dir $(p)))
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check prime_cli tests environments

clean:
	rm -rf $(VENV) .pytest_cache

.PHONY: bench
bench: setup
	$(BIN)/python benchmarks/eval_throughput.py
