#!/usr/bin/env bash
# make sanitize: AddressSanitizer + UndefinedBehaviorSanitizer over the Cython twins.
#
# A copy of the tree as committed (build/asan) gets its own in-place build with the
# sanitizers (errors fatal), each extension checked to be instrumented; then the suite runs
# on the Cython twins alone (the Python twins have no C) on the quick draw (the full one,
# SANITIZE_PROFILE=full, took 29 minutes), without the tests of the repository's text
# (TOKCORE_TEST_CODE_ONLY: tests/conftest.py). The interpreter is not built with ASan, so its
# runtime is preloaded; PYTHONMALLOC=malloc lets ASan see every Python object's memory;
# detect_leaks=0: CPython itself does not free everything at exit (tests/test_leaks.py reads
# ASan's own count of bytes in use instead). Pytest arguments are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=build/asan
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"

rm -rf "$WORK" && mkdir -p "$WORK"
git ls-files -z | xargs -0 cp --parents -t "$WORK"  # the tree as committed
cd "$WORK"
start=$SECONDS
if ! CFLAGS="$FLAGS" LDFLAGS="-fsanitize=address,undefined" TOKCORE_REQUIRE_EXTENSIONS=1 \
        "$ROOT/.venv/bin/python" setup.py -q build_ext --inplace -j 2 > build.log 2>&1; then
    cat build.log
    echo "sanitize: the build failed"
    exit 1
fi
built=0
for so in $(find tokcore -name '*.so'); do
    # grep reads nm's whole output (not -q: an early exit makes nm die of SIGPIPE, and pipefail
    # then fails the check on an instrumented library)
    nm -D "$so" | grep __asan_report > /dev/null \
        || { echo "sanitize: $so is not instrumented"; exit 1; }
    built=$((built + 1))
done
[ "$built" -gt 0 ] || { echo "sanitize: no extension built"; exit 1; }
echo "sanitize: $built extensions built with the sanitizers in $((SECONDS - start)) s"

LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so)" PYTHONMALLOC=malloc TOKCORE_SANITIZE=1 \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TOKCORE_TEST_PROFILE="${SANITIZE_PROFILE:-quick}" TOKCORE_REQUIRE_EXTENSIONS=1 \
    TOKCORE_TEST_TWINS=c TOKCORE_TEST_CODE_ONLY=1 \
    exec "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider \
    --capture=sys "$@"  # a sanitizer's report (written to fd 2, then abort) reaches the log
