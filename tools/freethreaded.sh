#!/usr/bin/env bash
# make test-freethreaded: a free-threaded CPython 3.13 (--disable-gil), built once from
# Debian's copy of the CPython 3.13.5 source (checked against its .dsc's SHA-256) into the
# user's cache folder (about 10 minutes on 2 cores), then tokcore on it:
# - the Python twins' thread tests and whole suite with PYTHON_GIL=0: no GIL, none turned on;
# - the Cython twins built and their suite run: importing them turns the GIL back on, on
#   purpose (they do not declare free-threading support; README: Free-threaded CPython).
# The tests that need the HTTP clients (examples, stream close) are left out: those clients'
# compiled parts have no free-threaded wheels to install.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=3.13.5
CACHE="${TOKCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokcore}"
PREFIX="$CACHE/cpython-${VERSION}t"
POOL=http://deb.debian.org/debian/pool/main/p/python3.13
PY="$PREFIX/bin/python3.13t"

if ! [ -x "$PY" ]; then
    src="$CACHE/src"; mkdir -p "$src"
    tarball="$src/python3.13_$VERSION.orig.tar.xz"
    if ! [ -s "$tarball" ]; then
        curl -fsS -o "$tarball.part" "$POOL/python3.13_$VERSION.orig.tar.xz"
        mv "$tarball.part" "$tarball"
    fi
    want=$(curl -fsS "$POOL/python3.13_$VERSION-2.dsc" \
           | awk '/^Checksums-Sha256:/{on=1; next} on && /orig.tar.xz$/{print $1; exit}')
    echo "$want  $tarball" | sha256sum -c -
    rm -rf "$src/Python-$VERSION" && tar -C "$src" -xJf "$tarball"
    cd "$src/Python-$VERSION"
    ./configure --disable-gil --prefix="$PREFIX" -q
    make -s -j"$(nproc)" >/dev/null
    make -s install >/dev/null
    cd - >/dev/null
fi
"$PY" -c "import sys; assert not sys._is_gil_enabled(), 'not a free-threaded build'"

venv=".venv-3.13t"
[ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
pip="$venv/bin/python -m pip --disable-pip-version-check -q"
# --only-binary: no compiler or Rust needed (newer hypothesis builds a native part from source)
$pip install --only-binary :all: setuptools wheel "Cython>=3.0" pytest hypothesis numpy

echo "freethreaded: the Python twins, PYTHON_GIL=0"
PYTHON_GIL=0 TOKCORE_NO_EXTENSIONS=1 "$venv/bin/python" -W error::RuntimeWarning -c \
    "import sys, tokcore; assert not sys._is_gil_enabled(); print('GIL stays off:', tokcore.BACKEND)"
PYTHON_GIL=0 TOKCORE_NO_EXTENSIONS=1 TOKCORE_TEST_QUICK=1 "$venv/bin/python" -m pytest -q \
    -rfE -p no:cacheprovider --ignore=tests/test_examples.py --ignore=tests/test_stream_close.py | tail -3

echo "freethreaded: the Cython twins (the GIL comes back on import, on purpose)"
TOKCORE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" setup.py -q build_ext --inplace 2>&1 \
    | grep -iv "warning" | grep -v "^$" || true
"$venv/bin/python" -c "import sys, warnings
warnings.simplefilter('always')
with warnings.catch_warnings(record=True) as said:
    import tokcore
assert tokcore.BACKEND == 'cython' and sys._is_gil_enabled(), (tokcore.BACKEND, said)
print('GIL on after import:', [str(w.message)[:70] for w in said])"
# PYTHON_GIL=0 forces the GIL off even for modules that need it: the compiled twins are not
# used then (a RuntimeWarning says so), and TOKCORE_REQUIRE_EXTENSIONS=1 makes it an error
PYTHON_GIL=0 "$venv/bin/python" -c "import sys, warnings
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter('always')
    import tokcore
assert tokcore.BACKEND == 'python' and not sys._is_gil_enabled(), tokcore.BACKEND
assert any('PYTHON_GIL=0 keeps it off' in str(w.message) for w in said), said
print('PYTHON_GIL=0: the Python twins run, GIL off, said:', str(said[0].message)[:60])"
if PYTHON_GIL=0 TOKCORE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" -c "import tokcore" 2>/dev/null
then echo "PYTHON_GIL=0 with TOKCORE_REQUIRE_EXTENSIONS=1 imported"; exit 1; fi
TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_QUICK=1 TOKCORE_TEST_TWINS=c "$venv/bin/python" \
    -m pytest -q -rfE -p no:cacheprovider --ignore=tests/test_examples.py --ignore=tests/test_stream_close.py | tail -3
