#!/usr/bin/env bash
# make test-matrix: the Cython twins' suite on every other CPython the project supports,
# from pyenv's versions folder (the newest patch release of each minor found there).
# Each gets its own .venv-3.X and its own in-place build (the .so names carry the version,
# so they sit side by side with the main build). What changes between versions is the C-API
# code, so only the Cython twins' tests run (TOKCORE_TEST_TWINS=c), and hypothesis draws
# fewer examples (TOKCORE_TEST_QUICK=1, tests/_budget.py): the full draw of both twins is
# `make test`'s, on 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."

MINORS="${MATRIX:-3.9 3.10 3.12 3.13}"
VERSIONS="${PYENV_VERSIONS:-$( (pyenv root 2>/dev/null || echo "$HOME/.pyenv") | tail -1)/versions}"
status=0
for minor in $MINORS; do
    python=$(ls -d "$VERSIONS/$minor".* 2>/dev/null | grep -E "/$minor\.[0-9]+$" | sort -V | tail -1)
    if [ -z "$python" ] || ! [ -x "$python/bin/python3" ]; then
        echo "test-matrix: NOTICE: no CPython $minor under $VERSIONS: not tested here"
        continue
    fi
    start=$(date +%s)
    venv=".venv-$minor"
    [ -x "$venv/bin/python" ] || "$python/bin/python3" -m venv "$venv"
    pip="$venv/bin/python -m pip --disable-pip-version-check -q"
    if ! [ "$venv/.deps" -nt pyproject.toml ]; then
        $pip install -U setuptools wheel "Cython>=3.0"
        $venv/bin/python tools/extra_requirements.py test > "$venv/requirements.txt"
        $pip install -r "$venv/requirements.txt"
        touch "$venv/.deps"
    fi
    TOKCORE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" setup.py -q build_ext --inplace 2>&1 \
        | grep -v "^$" | grep -iv "warning" || true
    if TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_QUICK=1 TOKCORE_TEST_TWINS=c \
            "$venv/bin/python" -m pytest -q -rfE -p no:cacheprovider "$@" | tail -15; \
            [ "${PIPESTATUS[0]}" -eq 0 ]; then
        echo "test-matrix: $(basename "$python"): ok in $(( $(date +%s) - start )) s"
    else
        echo "test-matrix: $(basename "$python"): FAILED"
        status=1
    fi
done
exit $status
