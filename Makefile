# make test / make bench each do their own set-up: a local .venv, the build, the deps.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
SOURCES := $(wildcard tokcore/*.pyx tokcore/*.pxd tokcore/*.h) setup.py pyproject.toml

.PHONY: all venv build test test-c test-py bench fuzz sanitize lint clean

all: test

# The venv is (re)made when pyproject.toml changes; each extra is installed once.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps-%: pyproject.toml | $(BIN)/python
	$(PIP) install -U setuptools wheel "Cython>=3.0"
	$(BIN)/python tools/extra_requirements.py $* > $(VENV)/requirements-$*.txt
	$(PIP) install -r $(VENV)/requirements-$*.txt
	touch $@

venv: $(VENV)/.deps-test

# In-place build: the tests import the package from the source tree.
$(VENV)/.built: $(SOURCES) | $(VENV)/.deps-test
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python setup.py -q build_ext --inplace -j 2
	touch $@

build: $(VENV)/.built

test-c: build
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python -m pytest -q

test-py: build
	TOKCORE_NO_EXTENSIONS=1 $(BIN)/python -m pytest -q

test: test-c test-py

bench: build $(VENV)/.deps-bench
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python bench/report.py $(BENCH_ARGS)

clean:
	rm -rf build $(VENV) tokcore/*.so tokcore/_*_c.c tokcore/*.html .pytest_cache .hypothesis bench/results

lint: $(VENV)/.deps-test
	$(PIP) install ruff mypy
	$(BIN)/ruff check tokcore tests bench examples tools fuzz setup.py
	$(BIN)/mypy
