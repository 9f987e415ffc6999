# The two commands a new user needs: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) examples/quickstart.py

test: setup
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) benchmarks/run_all.py
