#!/usr/bin/env bash
# The emulated aarch64 job: the extensions cross-compiled for aarch64 (NEON kernels), then the
# suite run under qemu-user in an arm64 Debian root, on both twins.
#
#   tools/aarch64_job.sh [--broad | --all] [pytest arguments...]
#
# The root (tools/arm64_root.sh) and a venv inside it with the test extra are made once and
# kept under the user's cache folder, so a new machine pays for them once. The C files come
# from this tree's x86 build (make build: Cython's output does not depend on the
# architecture); each is compiled by Debian's gcc-aarch64-linux-gnu with the target Python's
# own flags, against the root's headers and libc (--sysroot). Needs root (chroot, mounts)
# and apt for what is missing.
#
# Emulation runs this suite about 100x slower than the host (pytest and hypothesis are
# interpreter-bound), so there are three selections, with hypothesis drawing fewer examples
# (TOKCORE_TEST_PROFILE=quick) in the first two:
#   default  CI's: the kernel tests (tests/stream/test_scan.py, tests/ids/test_b64.py whole,
#            tests/members/test_object_kernel.py but C_DESELECT, tests/ids/test_wire.py: the JSON
#            reader's NEON windows, the stream writer's kernel test: its NEON escapes), and the Cython twins' ids, relay
#            (but C_DESELECT), event, pickling and fuzz-corpus tests; the Python twins'
#            base64 and ids tests. About 8 minutes on a free machine with the root and venv
#            made.
#   --broad  every file but the ones in BROAD_IGNORE, both twins (the Python twins on
#            PY_BROAD), without the tests in BROAD_DESELECT: 2,500 + 981 tests, 31 minutes.
#   --all    everything, the full draw: hours.
# Pytest arguments given replace the file selection; PYTEST_ADDOPTS is passed on.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=default
case "${1:-}" in
    --broad) MODE=broad; shift ;;
    --all) MODE=all; shift ;;
esac

C_FILES=(
    tests/stream/test_scan.py tests/ids/test_b64.py tests/members/test_object_kernel.py tests/ids/test_pack.py
    tests/stream/test_relay.py tests/stream/test_events.py tests/pickling/test_compact.py tests/test_fuzz_corpus.py
    tests/ids/test_wire.py
    tests/writer/test_writer.py::test_every_kernel_writes_the_same  # the writer's NEON text
)
# random streams through the relay against json: 2 minutes here, the Python oracle's time;
# generated objects through the object check and its memo: 160 s and 84 s for 20 drawn under
# emulation (the NEON kernel and the memo meet every input of the enumerated tests, in C:
# every window, every string window; the drawn objects run on x86)
C_DESELECT="test_generated_streams_against_json or test_kernel_agrees_on_objects"
C_DESELECT="$C_DESELECT or test_memo_agrees_on_changed_strings"
PY_FILES=(tests/ids/test_b64.py tests/ids/test_pack.py)
# --broad: every file but these, which repeat whole workloads thousands of times (80 s to
# 10 minutes each here) or need other programs
BROAD_IGNORE=(
    tests/test_leaks.py        # 400,000 calls a twin, the heap after each batch
    tests/test_threads.py      # 6 threads over shared data, 2k rounds
    tests/stream/test_stream_close.py  # loopback HTTP servers and clients (aiohttp)
    tests/integration/test_examples.py  # imports the openai and anthropic clients: 100 s before a test
)
BROAD_DESELECT=(
    test_memory_is_flat_over_many_lazy_cycles  # 2,000 pickle cycles a class, 6 minutes
    7000000                                    # the 7 MB events of test_bigevent, 80 s
)
# The Python twins are the same code on every architecture: what can differ is the Python
# under them (binascii's rules, byte order, the int and buffer APIs)
PY_BROAD=(
    tests/ids/test_b64.py tests/ids/test_pack.py tests/members/test_members.py
    tests/stream/test_events.py tests/stream/test_usage.py tests/pickling/test_compact.py tests/test_backend.py tests/test_fuzz_corpus.py
)

log() { echo "aarch64_job: $*" >&2; }
t0=$SECONDS

ROOT=$(bash tools/arm64_root.sh)
log "root $ROOT ($((SECONDS - t0)) s)"

if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    log "installing gcc-aarch64-linux-gnu"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc-aarch64-linux-gnu >&2
fi

# --- the C files of this tree's build ---------------------------------------------------
shopt -s nullglob
mapfile -t PYX < <(find tokcore -name '_*_c.pyx' | sort)  # the root's and the wings'
for pyx in "${PYX[@]}"; do
    c="${pyx%.pyx}.c"
    if ! [ -f "$c" ] || [ "$c" -ot "$pyx" ]; then
        log "$c is missing or older than $pyx: run make build first"
        exit 1
    fi
done

# --- inside the root: a command with /proc and /dev, in a mount namespace that ends with
# it, so no mount is left behind however the job stops -----------------------------------
in_root() {
    unshare --mount --propagation private -- /bin/sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"
    ' in_root "$ROOT" "$@"
}

# --- the venv with the test extra, remade when the extra changes --------------------------
# pip runs on the host, not under emulation (where resolving, unpacking and byte-compiling
# took over 8 minutes): it installs the aarch64 wheels for the root's Python straight into
# the site-packages of a venv made there without pip. Every requirement has such wheels.
VENV=/opt/tokcore-venv
HOST_PY=python3
if [ -x .venv/bin/python ]; then HOST_PY=.venv/bin/python; fi
# the test group's lines, for the stamp (pip installs the group itself)
REQS=$("$HOST_PY" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["test"]))')
PYVER=$(in_root /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$(cat "$ROOT$VENV/.tokcore-reqs" 2>/dev/null)" != "$PYVER $REQS" ]; then
    log "making $VENV in the root (aarch64 wheels for Python $PYVER)"
    rm -rf "${ROOT:?}$VENV"
    in_root /usr/bin/python3 -m venv --without-pip "$VENV"
    platforms=()
    for tag in manylinux2014 manylinux_2_17 manylinux_2_28 manylinux_2_31 manylinux_2_34; do
        platforms+=(--platform "${tag}_aarch64")
    done
    PIP_ROOT_USER_ACTION=ignore "$HOST_PY" -m pip install -q --disable-pip-version-check \
        --no-warn-conflicts --no-compile --only-binary=:all: --implementation cp \
        --python-version "$PYVER" --abi "cp${PYVER/./}" "${platforms[@]}" \
        --target "$ROOT$VENV/lib/python$PYVER/site-packages" --group test \
        2> >(grep -v "^WARNING: Location" >&2)  # an index location of this machine's config
    printf '%s' "$PYVER $REQS" > "$ROOT$VENV/.tokcore-reqs"
fi
log "venv ready ($((SECONDS - t0)) s)"

# --- a copy of the tree in the root, with aarch64 extensions -------------------------------
WORK=/work/tokcore
rm -rf "${ROOT:?}$WORK" && mkdir -p "$ROOT$WORK"
git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null \
    | tar -xf - -C "$ROOT$WORK"
for pyx in "${PYX[@]}"; do cp "${pyx%.pyx}.c" "$ROOT$WORK/${pyx%.pyx}.c"; done

# the target Python's compiler, flags and module suffix
mapfile -t CONF < <(in_root /usr/bin/python3 -c '
import sysconfig as s
for k in ("CFLAGS", "CCSHARED", "LDSHARED", "EXT_SUFFIX", "INCLUDEPY"):
    print(s.get_config_var(k))')
export CFLAGS=${CONF[0]} CCSHARED=${CONF[1]} LDSHARED=${CONF[2]} SUFFIX=${CONF[3]}
export INCLUDE=${CONF[4]} ROOT WORK
# Debian's LDSHARED names the compiler aarch64-linux-gnu-gcc: the cross compiler's name
command -v "${LDSHARED%% *}" >/dev/null || { log "no cross compiler ${LDSHARED%% *}"; exit 1; }
build_one() {  # $1: tokcore/[wing/]_x_c.c; setup.py's flags on top: -O3, no debug info, stripped
    # shellcheck disable=SC2086  # the flags are lists of words
    ${LDSHARED} ${CFLAGS} ${CCSHARED} -O3 -g0 -Wl,-s --sysroot="$ROOT" -I"=$INCLUDE" \
        -Itokcore "$1" -o "$ROOT$WORK/${1%.c}$SUFFIX"
}
export -f build_one
tb=$SECONDS
printf '%s\n' "${PYX[@]/%.pyx/.c}" | xargs -P "$(nproc)" -I{} bash -c 'build_one "$@"' _ {}
log "cross-compiled ${#PYX[@]} modules ($SUFFIX) in $((SECONDS - tb)) s"

# --- the suite under emulation -----------------------------------------------------------
PROFILE=quick
case $MODE in
    default) C_ARGS=(-k "not ($C_DESELECT)" "${C_FILES[@]}") PY_ARGS=("${PY_FILES[@]}") ;;
    broad)
        expr=""
        for skip in "${BROAD_DESELECT[@]}"; do expr="${expr:+$expr and }not $skip"; done
        C_ARGS=(-k "$expr") PY_ARGS=("${PY_BROAD[@]}")
        for path in "${BROAD_IGNORE[@]}"; do C_ARGS+=("--ignore=$path"); done ;;
    all) PROFILE=full C_ARGS=() PY_ARGS=() ;;
esac
if [ $# -gt 0 ]; then  # the caller's selection, for both runs
    if [ "$MODE" = default ]; then C_ARGS=(-k "not ($C_DESELECT)"); fi
    PY_ARGS=()
fi
pytest_in_root() {  # environment assignments, then pytest's arguments
    in_root /bin/sh -c 'cd "$0" && exec env "$@"' "$WORK" "TOKCORE_TEST_PROFILE=$PROFILE" \
        "PYTEST_ADDOPTS=${PYTEST_ADDOPTS:-}" "$@"
}
in_root /bin/sh -c "cd $WORK && TOKCORE_REQUIRE_EXTENSIONS=1 $VENV/bin/python -m tokcore"
status=0
tc=$SECONDS
pytest_in_root TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_TWINS=c \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${C_ARGS[@]}" "$@" || status=1
log "Cython twins: $((SECONDS - tc)) s"
tp=$SECONDS
pytest_in_root TOKCORE_NO_EXTENSIONS=1 \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${PY_ARGS[@]}" "$@" || status=1
log "Python twins: $((SECONDS - tp)) s"
log "done in $((SECONDS - t0)) s"
exit $status
