#!/usr/bin/env bash
# make test-matrix: the suite on every other CPython the project supports (3.11 is the
# venv's: make test), the newest first. Each version comes from
#   - pyenv's versions folder, when it has that minor (the newest patch release there): a
#     new machine of this kind has 3.9-3.13 there;
#   - else, for 3.14 and 3.15, Debian sid's python3.X packages, in an amd64 sid root made once
#     by debootstrap and kept in ~/.cache/tokcore (tools/debian_root.sh), run natively in a
#     chroot with this tree bind-mounted;
#   - else a printed NOTICE (not tested here).
# Each gets its own venv with the build and test groups, kept until they change (in the
# cache: tools/cache.sh; /opt/venv-3.X in the sid root), and its own in-place build (the .so
# names carry the version, so they sit side by side with the main build).
# On the quick draw (tests/_budget.py), on each version: every test but the Python twins'
# alone (the C-API code changes between versions: its #if branches, the API's rules); the
# Python twins' tests of PY_STDLIB, whose twins follow what the running standard library
# does (binascii's and base64's errors, int and buffer conversions, pickle's protocols, json's
# numbers); and, on the newest found, the Python twins' tests whole (the same Python code on
# every version: what a version changes under it shows on the newest; 3.11 is make test's).
# The Python twins' memory tests are make test's alone (below).
#
#   MATRIX="3.14 3.15" tools/test_matrix.sh [pytest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/cache.sh

MINORS="${MATRIX:-3.12 3.13 3.14 3.15}"
SID_MINORS="3.14 3.15"
VERSIONS="${PYENV_VERSIONS:-$( (pyenv root 2>/dev/null || echo "$HOME/.pyenv") | tail -1)/versions}"
PYTEST_ENV=(TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_PROFILE=quick TOKCORE_TEST_TWINS=c,py)
PYTEST_ARGS=(-m pytest -q -rfE -p no:cacheprovider -n "${MATRIX_WORKERS:-1}")
# the Python twins' memory tests are make test's: a Python twin holds no memory but the
# interpreter's objects, which is no C-API code of ours (they are two fifths of the Python
# twins' time here)
PY_MARK="python_twin and not memory"
PY_STDLIB=(tests/ids/test_b64.py tests/ids/test_pack.py tests/ids/test_wire.py
           tests/ids/test_sizes.py tests/pickling tests/members/test_members.py)
WHOLE=yes  # the Python twins' tests whole: on the first version run, the newest found
VENV_GROUPS=$(groups_text build test)  # what each venv holds, and its key
status=0

quiet_build() {  # $1: its log, then the interpreter's command: the in-place build, its
    # output shown without compiler warnings; a failed build shows its whole log and fails
    local log=$1
    shift
    if ! "$@" setup.py -q build_ext --inplace -j 2 > "$log" 2>&1; then
        cat "$log"
        return 1
    fi
    grep -v "^$" "$log" | grep -iv "warning" || true  # nothing left: a quiet build
}
build_failed() {  # $1: name
    echo "test-matrix: $1: FAILED (the build, log above)"
    status=1
}

mkdir -p build
result() {  # $1: name, $2: start, $3: pytest's status, $4: its whole output (printed on failure)
    if [ "$3" -eq 0 ]; then
        grep -E "(passed|failed|errors?|no tests ran).* in [0-9.]+s" "$4" || tail -3 "$4"
        echo "test-matrix: $1: ok in $(( $(date +%s) - $2 )) s"
    else
        cat "$4"
        echo "test-matrix: $1: FAILED"
        status=1
    fi
}

suite() {  # $1: the log, $2: the venv's python, then what runs it (in_sid, or nothing):
    # the runs the header says, their output in the log; fails if one fails
    local log=$1 python=$2 rc=0 py_rc=0
    shift 2
    "$@" env "${PYTEST_ENV[@]}" "$python" "${PYTEST_ARGS[@]}" -m "not python_twin" \
        "${EXTRA[@]}" > "$log" 2>&1 || rc=$?
    local selection=("${PY_STDLIB[@]}")
    if [ ${#EXTRA[@]} -gt 0 ]; then selection=("${EXTRA[@]}")
    elif [ "$WHOLE" = yes ]; then selection=(); WHOLE=no; fi
    "$@" env "${PYTEST_ENV[@]}" "$python" "${PYTEST_ARGS[@]}" -m "$PY_MARK" \
        "${selection[@]}" >> "$log" 2>&1 || py_rc=$?
    [ "$py_rc" -eq 5 ] && [ ${#EXTRA[@]} -gt 0 ] && py_rc=0  # the caller's selection: none
    [ "$rc" -ne 0 ] && return "$rc"
    return "$py_rc"
}

# --- from pyenv --------------------------------------------------------------------------
fill_test_venv() {  # $1: a venv's folder: the build and test groups
    "$1/bin/python" -m pip install -q --disable-pip-version-check --group build --group test
}
pyenv_run() {  # $1: minor, $2: the interpreter's folder
    local minor=$1 python=$2 start venv
    start=$(date +%s)
    venv=$(cached_venv "$minor" "$python/bin/python3" "$VENV_GROUPS" fill_test_venv)
    if ! quiet_build "build/test-matrix-$minor-build.log" "$venv/bin/python"; then
        build_failed "$(basename "$python")"
        return
    fi
    local log="build/test-matrix-$minor.log" rc=0
    suite "$log" "$venv/bin/python" || rc=$?
    result "$(basename "$python")" "$start" "$rc" "$log"
}

# --- from Debian sid, in a chroot ----------------------------------------------------------
SID_ROOT=""
HOST_CA=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
in_sid() {  # a command in the root, this tree at /work/tokcore, /proc, /dev, the host's DNS
    # and CA bundle there (for pip: this machine's network may need its own CA); the mounts
    # live in a namespace that ends with the command
    unshare --mount --propagation private -- /bin/sh -c '
        root=$1 tree=$2 ca=$3; shift 3
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        mkdir -p "$root/work/tokcore"
        mount --bind "$tree" "$root/work/tokcore"
        cp /etc/resolv.conf "$root/etc/resolv.conf"
        cp "$ca" "$root/etc/tokcore-host-ca.crt"
        exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 \
            PIP_CERT=/etc/tokcore-host-ca.crt \
            /bin/sh -c "cd /work/tokcore && exec \"\$@\"" sh "$@"
    ' in_sid "$SID_ROOT" "$PWD" "$HOST_CA" "$@"
}

sid_run() {  # $1: minor
    local minor=$1 start venv version
    start=$(date +%s)
    if [ -z "$SID_ROOT" ]; then
        local packages="gcc,libc6-dev" m
        for m in $SID_MINORS; do packages="$packages,python$m,python$m-dev,python$m-venv"; done
        SID_ROOT=$(bash tools/debian_root.sh amd64 sid "$packages")
    fi
    venv=/opt/venv-$minor
    if [ "$(cat "$SID_ROOT$venv/.deps" 2>/dev/null)" != "$VENV_GROUPS" ]; then
        rm -rf "${SID_ROOT:?}$venv"
        in_sid "/usr/bin/python$minor" -m venv "$venv"
        in_sid "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "pip>=25.1"
        in_sid "$venv/bin/python" -m pip install -q --disable-pip-version-check \
            --root-user-action=ignore --group build --group test
        printf '%s' "$VENV_GROUPS" > "$SID_ROOT$venv/.deps"
    fi
    version=$(in_sid "$venv/bin/python" -c 'import platform; print(platform.python_version())')
    if ! quiet_build "build/test-matrix-$minor-build.log" in_sid "$venv/bin/python"; then
        build_failed "$version (Debian sid)"
        return
    fi
    local log="build/test-matrix-$minor.log" rc=0
    suite "$log" "$venv/bin/python" in_sid || rc=$?
    result "$version (Debian sid)" "$start" "$rc" "$log"
}

EXTRA=("$@")
for minor in $(printf '%s\n' $MINORS | sort -rV); do  # the newest first
    python=$(ls -d "$VERSIONS/$minor".* 2>/dev/null | grep -E "/$minor\.[0-9]+$" | sort -V | tail -1) || true
    if [ -n "$python" ] && [ -x "$python/bin/python3" ]; then
        pyenv_run "$minor" "$python"
    elif [[ " $SID_MINORS " == *" $minor "* ]]; then
        sid_run "$minor"
    else
        echo "test-matrix: NOTICE: no CPython $minor under $VERSIONS: not tested here"
    fi
done
exit $status
