# acp-hub: the two commands of the README are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8765
# setuptools says at every editable install that it is one (ten lines on standard error).
QUIET_PIP := PYTHONWARNINGS="ignore:Editable installation"
# pytest-xdist workers of `make unit` (most tests wait on agent and hub processes, so more than
# the cores); JOBS=0 runs in this process.
JOBS   ?= 4

.PHONY: demo serve test lint typecheck unit peers bench bench-quick matrix screenshots clean

$(BIN)/python:
	@echo "make: setting up $(VENV) (once)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	@$(QUIET_PIP) $(BIN)/python -m pip install --quiet -e '.[fast]'
	@touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	@$(QUIET_PIP) $(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

## make demo: set up and run the hub with the built-in demo agent (no Redis, no API key)
demo: $(VENV)/.installed
	@$(BIN)/acp-hub demo --host $(HOST) --port $(PORT)

## make serve: run the hub with the agents of ACP_HUB_CONFIG (or acp-hub.toml)
serve: $(VENV)/.installed
	$(BIN)/acp-hub serve --host $(HOST) --port $(PORT)

## make peers: install the third-party ACP peers the tests drive (pinned in tests/peers/)
peers: $(VENV)/.installed-test
	bash tests/peers/install.sh $(BIN)/python

lint: $(VENV)/.installed-test
	$(BIN)/ruff check hub tests
	$(BIN)/ruff format --check hub tests

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy --strict hub tests

# The coverage floor is hub/protocol's, which its own tests cover (99%): they run under
# coverage, and every other test runs without it (tracing doubles the CPU of a test that runs a
# hub in its own process, and most of the suite's time is CPU on this 2-core machine).
COVERED := tests/protocol

unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup --durations=5 $(COVERED) \
		--cov=hub --cov-branch --cov-report=
	$(BIN)/python -m coverage report --include='hub/protocol/*' --fail-under=95
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup --durations=25 \
		--ignore=$(COVERED) $(PYTEST_ARGS)

## make test: set up and run the whole suite (lint, types, tests, protocol coverage)
test: peers lint typecheck unit

## make bench: every benchmark scenario; writes docs/benchmarks.md
bench: $(VENV)/.installed-test
	$(BIN)/python -m tests.bench.run --out docs/benchmarks.md

## make bench-quick: a short smoke run of the same scenarios (correctness only)
bench-quick: $(VENV)/.installed-test
	$(BIN)/python -m tests.bench.run --quick

## make matrix: run the conformance matrix and write its table into docs/protocol.md
matrix: peers
	PYTHONPATH=. $(BIN)/python -m tests.interop.matrix --write

## make screenshots: the screenshots of docs/screenshots, from the browser tests that take them
screenshots: $(VENV)/.installed-test
	ACP_HUB_SCREENSHOTS=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest tests/web -m screenshots -q

clean:
	rm -rf $(VENV) tests/peers/node_modules tests/peers/cache .coverage
