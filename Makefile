# The two commands a new user needs: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# the build writes the page into rtxviz/web/static, then the notebook widget (the last file it writes)
STATIC := rtxviz/notebook/static/widget.js
# the build generates frontend/src/generated/ from the event schema and the gradient classes (scripts/gen_frontend.py)
GEN_SRC := scripts/gen_frontend.py rtxviz/schema.py $(wildcard rtxviz/summary/*.py)
FRONTEND_SRC := $(wildcard frontend/src/*.ts frontend/test/*.ts frontend/*.html frontend/*.css frontend/*.mjs) \
	frontend/package.json frontend/package-lock.json frontend/tsconfig.json $(GEN_SRC)
# the generator runs under the venv's interpreter (it needs pydantic and numpy)
NPM_ENV := PYTHON=$(abspath $(PY))

.PHONY: setup frontend graphviz system-deps demo test lint bench

# setup.py compiles rtxviz/_native.c and rtxviz/_eventcheck.c into the source tree (an editable install builds in place)
$(VENV)/.installed: pyproject.toml setup.py rtxviz/_native.c rtxviz/_eventcheck.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,torch]'
	touch $@

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund --loglevel=error

# The viewer is built into the Python package's static folder (pip users need no Node): generate the types,
# type-check (tsc --noEmit), bundle.
$(STATIC): $(VENV)/.installed frontend/node_modules/.package-lock.json $(FRONTEND_SRC)
	cd frontend && $(NPM_ENV) npm run build

setup: $(VENV)/.installed $(STATIC) graphviz

frontend: $(STATIC)

graphviz:
	bash scripts/system-deps.sh graphviz

system-deps:
	bash scripts/system-deps.sh graphviz chromium postgresql

# `make demo PORT=8001` when 8000 is taken
PORT ?= 8000
demo: setup
	$(PY) examples/live_demo.py --serve --port $(PORT)

# RTXVIZ_REQUIRE_NATIVE: here the compiled summaries must have been built (tests/events/test_stats.py checks)
# `npm test` generates the types and runs `tsc --noEmit` (npm run typecheck) before the unit tests; mypy checks
# the package's types (pyproject's [tool.mypy])
# what nbconvert's HTML page loads from a CDN, served offline to the saved-notebook test (tests/notebook/cdn)
NB_CDN := tests/notebook/cdn/node_modules/.package-lock.json
$(NB_CDN): tests/notebook/cdn/package-lock.json
	cd tests/notebook/cdn && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts

# RTXVIZ_REQUIRE_POSTGRES: tests/store and tests/web fail, not skip, without PostgreSQL (system-deps installs it)
# RTXVIZ_TEST_DEVICE=strict: the engine and training-kit tests again, on the strict cupy stand-in (tests/strict_xp.py)
test: setup system-deps $(NB_CDN)
	cd frontend && $(NPM_ENV) npm test
	$(PY) -m mypy
	RTXVIZ_REQUIRE_NATIVE=1 RTXVIZ_REQUIRE_POSTGRES=1 $(PY) -m pytest
	RTXVIZ_TEST_DEVICE=strict $(PY) -m pytest -q -p no:warnings -o addopts="" tests/engine tests/nn

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) benchmarks/bench_engine.py
