# The two commands a new user needs: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STATIC := rtxviz/web/static/index.html
FRONTEND_SRC := $(wildcard frontend/src/*.ts frontend/*.html frontend/*.css frontend/*.mjs) frontend/package-lock.json

.PHONY: setup frontend graphviz system-deps demo test lint bench

# setup.py compiles rtxviz/_native.c into the source tree (an editable install builds in place)
$(VENV)/.installed: pyproject.toml setup.py rtxviz/_native.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error

# The viewer is built into the Python package's static folder (pip users need no Node).
$(STATIC): frontend/node_modules/.package-lock.json $(FRONTEND_SRC)
	cd frontend && npm run build

setup: $(VENV)/.installed $(STATIC) graphviz

frontend: $(STATIC)

graphviz:
	bash scripts/system-deps.sh graphviz

system-deps:
	bash scripts/system-deps.sh graphviz chromium

demo: setup
	$(PY) examples/live_demo.py --serve

# RTXVIZ_REQUIRE_NATIVE: here the compiled summaries must have been built (tests/events/test_stats.py checks)
test: setup system-deps
	cd frontend && npm test
	RTXVIZ_REQUIRE_NATIVE=1 $(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) benchmarks/bench_engine.py
