#!/usr/bin/env bash
# make tsan (optional, not in CI): ThreadSanitizer over the threaded tests, GIL off.
#
# A free-threaded CPython built with clang and --with-thread-sanitizer (from the same Debian
# source tarball tools/freethreaded.sh uses, cached beside it: the first run builds it, about
# twice the plain build's time), the compiled twins built for it with -fsanitize=thread, then
# tests/test_threads.py on both twins under TSan with CPython's own suppressions for the
# interpreter's known reports (Tools/tsan/suppressions_free_threading.txt). A data race in
# tokcore's code fails the run (halt_on_error). Needs clang (Debian: apt-get install clang).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

VERSION=${TSAN_PYTHON:-3.13.5} REVISION=${TSAN_REVISION:-2}
MINOR=${VERSION%.*}
CACHE="${TOKCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokcore}"
PREFIX="$CACHE/cpython-${VERSION}t-tsan"
PY="$PREFIX/bin/python${MINOR}t"
SRC="$CACHE/src"
command -v clang >/dev/null || { echo "tsan: clang is needed (apt-get install clang)"; exit 1; }

if ! [ -x "$PY" ]; then
    # the tarball and its checksum: tools/freethreaded.sh's (it fetches and checks them)
    TOKCORE_FT_PYTHONS="$VERSION-$REVISION" FT_BUILD_ONLY=1 tools/freethreaded.sh
    echo "tsan: building CPython $VERSION with --disable-gil --with-thread-sanitizer"
    start=$SECONDS
    rm -rf "$SRC/tsan-$VERSION" && mkdir -p "$SRC/tsan-$VERSION"
    tar -C "$SRC/tsan-$VERSION" -xJf "$SRC/python${MINOR}_$VERSION.orig.tar.xz"
    (cd "$SRC/tsan-$VERSION/Python-$VERSION" \
        && CC=clang ./configure --disable-gil --with-thread-sanitizer --prefix="$PREFIX" -q \
        && nice make -s -j"$(nproc)" >/dev/null 2>&1 && make -s install >/dev/null 2>&1)
    cp "$SRC/tsan-$VERSION/Python-$VERSION/Tools/tsan/suppressions_free_threading.txt" \
        "$PREFIX/tsan-suppressions.txt"
    rm -rf "$SRC/tsan-$VERSION"
    echo "tsan: built in $((SECONDS - start)) s"
fi

export TSAN_OPTIONS="suppressions=$PREFIX/tsan-suppressions.txt halt_on_error=1 second_deadlock_stack=1"
venv=".venv-${MINOR}t-tsan"
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
"$venv/bin/python" -m pip --disable-pip-version-check -q install --only-binary :all: \
    setuptools wheel "Cython>=3.1" pytest hypothesis numpy

# a copy of the tree with its own in-place build, as make sanitize does
dir=build/tsan
rm -rf "$dir" && mkdir -p "$dir"
cp -r tokcore tests build_backend setup.py pyproject.toml README.md "$dir"/
find "$dir"/tokcore \( -name '*.so' -o -name '_*_c.c' \) -delete
(cd "$dir" && CC=clang CFLAGS="-fsanitize=thread -g -O1" LDFLAGS="-fsanitize=thread" \
    TOKCORE_REQUIRE_EXTENSIONS=1 "$ROOT/$venv/bin/python" setup.py -q build_ext --inplace \
    2>&1 | grep -iv warning | grep -v "^$" || true)
for so in $(find "$dir"/tokcore -name '*.so'); do
    # not grep -q: its early exit kills nm with SIGPIPE, which pipefail counts as a failure
    nm -D "$so" | grep __tsan_ > /dev/null || { echo "tsan: $so is not instrumented"; exit 1; }
done
echo "tsan: tests/test_threads.py, both twins, GIL off, under ThreadSanitizer"
(cd "$dir" && TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_QUICK=1 \
    "$ROOT/$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_threads.py)
