# make demo: set up the environment and run the main job.
# make test: set up the environment (with the test extras), then ruff, mypy on src/ and the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test typecheck lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,demo]"
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m tensig.demo

test: $(VENV)/.installed-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	$(BIN)/python -m pytest src tests

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

bench: $(VENV)/.installed-test
	$(BIN)/python bench/bench_core.py
	$(BIN)/python bench/bench_exec.py
	$(BIN)/python bench/bench_verify.py
	$(BIN)/python bench/bench_rank.py
	$(BIN)/python bench/bench_runtime.py
	$(BIN)/python bench/bench_train.py
	$(BIN)/python bench/bench_distributed.py
	$(BIN)/python bench/bench_padding.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis build src/*.egg-info
