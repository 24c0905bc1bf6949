#!/usr/bin/env bash
# make test-freethreaded: tokcore on a free-threaded CPython (--disable-gil), GIL off.
#
# The interpreter is built once from Debian's copy of the CPython source (the .orig tarball
# of the python3.X source package, checked against the SHA-256 in its .dsc) into the user's
# cache folder, then kept: about 14 minutes on 2 busy cores, nothing after. The versions are
# tried in order (TOKCORE_FT_PYTHONS, "version-debian_revision" each, default: 3.14.10 from
# sid, then 3.13.5): the first one already built, else the first whose source the mirror has
# (the Debian archive this machine's apt uses: tools/debian_mirror.sh).
# Debian has no free-threaded binary packages (no python3.X-nogil in sid), and sid's 3.14/3.15 source tarballs are not on
# the mirror this project reaches (its binary packages are), so today 3.13.5 is what builds;
# the script says which one it uses and why. TOKCORE_FT_PYTHON=/path/to/python3.Xt uses that
# interpreter instead (the workflow's, from actions/setup-python). Then, with the GIL off
# (never PYTHON_GIL=0: a module that needs the GIL must fail the run, not be let in):
# - the compiled twins built for it, imported with -W error::RuntimeWarning (CPython warns
#   when a module turns the GIL back on): BACKEND is "cython" and the GIL stays off;
# - the whole suite on the compiled twins, then on the Python twins, with the GIL checked
#   at both ends of each run (tools/pytest_gil_off.py);
# - the hot paths' tests under pytest-run-parallel, 4 threads on 2 cores: every test of the
#   compiled twins run by 4 threads at once (the Python twins are the interpreter's to keep
#   safe; their thread tests run in the suite above).
# Quick hypothesis draws, as the CPython matrix. The tests that need the HTTP clients
# (examples, stream close) are left out: their compiled parts have no free-threaded wheels
# to install. The venv is kept in the cache too (tools/cache.sh). FT_BUILD_ONLY=1: build
# the interpreter and stop.
set -euo pipefail
cd "$(dirname "$0")/.."

. tools/cache.sh
CANDIDATES=${TOKCORE_FT_PYTHONS:-"3.14.10-1 3.13.5-2"}
TIMEFORMAT="freethreaded: %R s wall, %U s user + %S s sys"  # CPU time: what a busy host hides
# No test modules (_testcapi and the others, Lib/test: a third of what make install
# byte-compiles three times over), which nothing here imports. The interpreter's folder
# carries a key of these options, so changing them builds it anew.
CONFIGURE=(--disable-gil --disable-test-modules)
FLAVOUR=$(key "${CONFIGURE[@]}" < /dev/null)

prefix_of() { echo "$CACHE/cpython-${1}t-$FLAVOUR"; }  # $1: the version

build_python() {  # build_python VERSION REVISION: 0 when its prefix_of is there
    local version=$1 revision=$2 minor=${1%.*} src="$CACHE/src" prefix
    prefix=$(prefix_of "$version")
    [ -x "$prefix/bin/python${minor}t" ] && return 0
    local pool tarball="$src/python${minor}_$version.orig.tar.xz" dsc mirror
    mirror=$(bash tools/debian_mirror.sh) || return 1  # this machine's apt's Debian archive
    pool="$mirror/pool/main/p/python$minor"
    mkdir -p "$src"
    if ! dsc=$(curl -fsS "$pool/python${minor}_$version-$revision.dsc"); then
        echo "freethreaded: Debian's python$minor $version-$revision source is not reachable"
        return 1
    fi
    if ! [ -s "$tarball" ]; then
        curl -fsS -o "$tarball.part" "$pool/python${minor}_$version.orig.tar.xz" || {
            echo "freethreaded: python${minor}_$version.orig.tar.xz is not reachable"
            return 1; }
        mv "$tarball.part" "$tarball"
    fi
    awk '/^Checksums-Sha256:/{on=1; next} on && /orig.tar.xz$/{print $1; exit}' <<<"$dsc" \
        | sed "s|\$|  $tarball|" | sha256sum -c -
    echo "freethreaded: building CPython $version with --disable-gil (once, into $prefix)"
    rm -rf "$src/Python-$version" && tar -C "$src" -xJf "$tarball"
    time (cd "$src/Python-$version" && ./configure "${CONFIGURE[@]}" --prefix="$prefix" -q \
        && nice make -s -j"$(nproc)" >/dev/null 2>&1 && make -s install >/dev/null 2>&1)
    rm -rf "$src/Python-$version"
    local old
    for old in "$CACHE/cpython-${version}t" "$CACHE/cpython-${version}t-"????????????; do
        [ "$old" = "$prefix" ] || rm -rf "$old"  # the same version built with other options
    done
}

PY="${TOKCORE_FT_PYTHON:-}"  # a free-threaded interpreter of the caller's (GitHub's runners)
for candidate in $([ -z "$PY" ] && echo "$CANDIDATES"); do
    version=${candidate%-*} revision=${candidate##*-}
    if build_python "$version" "$revision"; then
        PY="$(prefix_of "$version")/bin/python${version%.*}t"
        break
    fi
done
[ -n "$PY" ] || { echo "freethreaded: none of $CANDIDATES could be built"; exit 1; }
"$PY" -c "import sys; assert not sys._is_gil_enabled(), 'not a free-threaded build'"
echo "freethreaded: $("$PY" -VV)"
[ "${FT_BUILD_ONLY:-0}" = 1 ] && exit 0

version=$("$PY" -c "import sys; print('%d.%d' % sys.version_info[:2])")
# --only-binary: no compiler or Rust needed (newer hypothesis builds a native part from source)
FT_PACKAGES=(setuptools wheel "Cython>=3.1" pytest hypothesis numpy pytest-run-parallel)
fill_ft_venv() {  # $1: the venv's folder
    "$1/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: \
        "${FT_PACKAGES[@]}"
    # the wire tests' MessagePack oracle: msgpack has no free-threaded wheel, its pure-Python
    # packer and unpacker install from the sdist (no compiler); msgspec has neither, so the
    # tests that need msgspec itself say so and the rest use msgpack alone
    # (TOKCORE_TEST_WITHOUT_MSGSPEC)
    MSGPACK_PUREPYTHON=1 "$1/bin/python" -m pip install -q --disable-pip-version-check \
        --no-binary msgpack msgpack
}
venv=$(cached_venv "${version}t" "$PY" "${FT_PACKAGES[*]} msgpack (pure)" fill_ft_venv)

echo "freethreaded: the compiled twins, built for $version free-threaded"
TOKCORE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" setup.py -q build_ext --inplace 2>&1 \
    | grep -iv "warning" | grep -v "^$" || true
TOKCORE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" -W error::RuntimeWarning -c "import sys, tokcore
from tokcore import _backend
assert tokcore.BACKEND == 'cython', _backend.LOADED
assert not sys._is_gil_enabled(), 'a compiled twin turned the GIL on'
print('freethreaded: every compiled twin loaded, the GIL stays off:', sorted(_backend.LOADED))"

# the web-framework tests (examples, adapters, whole answers, docs, stream close) need the HTTP
# clients and servers, which this venv leaves out: they run on every GIL build; here the hot
# paths do (the stream writer's against the stacks' serializers, pydantic, orjson and msgspec,
# need them, and the last two have no free-threaded wheels: its own tests run here, the
# hostile values and the setters refused mid-call among them)
PYTEST=("$venv/bin/python" -W error::RuntimeWarning -m pytest -q -rfE -p no:cacheprovider
        -p pytest_gil_off --ignore=tests/integration --ignore=tests/stream/test_stream_close.py
        --ignore=tests/writer/test_writer_shapes.py
        --ignore=tests/writer/test_writer_styles.py --ignore=tests/writer/test_writer_values.py)
# the quick draw, as the CPython matrix; the repository's text is make test's (conftest.py)
export PYTHONPATH="$PWD/tools" TOKCORE_TEST_PROFILE=quick TOKCORE_TEST_WITHOUT_MSGSPEC=1 \
    TOKCORE_TEST_CODE_ONLY=1

echo "freethreaded: the suite on the compiled twins, GIL off"
time (TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_TWINS=c "${PYTEST[@]}" | tail -15)

echo "freethreaded: the suite on the Python twins, GIL off"
time (TOKCORE_NO_EXTENSIONS=1 "${PYTEST[@]}" | tail -15)

echo "freethreaded: pytest-run-parallel, 4 threads per test (2 cores), the compiled twins"
# tests that measure the process's memory (tracemalloc is one per process) run on one thread
time (TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_TWINS=c "${PYTEST[@]}" --parallel-threads=4 \
    -o thread_unsafe_functions=tracemalloc.start \
    tests/ids/test_pack.py tests/ids/test_b64.py tests/members/test_members.py tests/stream/test_usage.py \
    tests/stream/test_events.py tests/test_threads.py tests/ids/test_wire.py | tail -25)
