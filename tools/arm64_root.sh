#!/usr/bin/env bash
# Builds (once) an arm64 Debian trixie root for the emulated aarch64 job and prints its path.
# It lives outside the clone, under the user's cache folder, so only a new machine pays for
# debootstrap. Trixie's python3.13 also carries CPython's gh-145264 fix in binascii, which
# the base64 twins must follow. Needs root, debootstrap and qemu-user-static (apt: installed
# here when missing).
#
# The extensions are cross-compiled and the test venv's wheels installed from the host
# (tools/aarch64_job.sh), so the root holds no compiler, pip or CA certificates: Python, its
# headers and libc's development files (for --sysroot) are enough, and every package less
# is one less configured under emulation (107 packages are, in 7 minutes here).
set -euo pipefail

CACHE="${TOKCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokcore}"
SUITE=trixie
PACKAGES=python3,python3-dev,libc6-dev
ROOT="$CACHE/arm64-$SUITE"
STAMP="$ROOT/.tokcore-root"

log() { echo "arm64_root: $*" >&2; }
need() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
    log "installing $*"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2
}
if ! need debootstrap || ! [ -e /usr/bin/qemu-aarch64-static ] || ! need update-binfmts; then
    apt_install debootstrap qemu-user-static binfmt-support
fi
# binfmt_misc lets the kernel run arm64 binaries through qemu (binfmt-support registers it)
if ! [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    update-binfmts --enable qemu-aarch64 >&2 || true
fi
if ! [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    log "the kernel cannot run arm64 programs (binfmt_misc has no qemu-aarch64)"
    exit 1
fi

# Never delete a folder something is mounted in (a /dev bind mount would take the host's
# /dev with it): whoever mounted it unmounts it first.
mounted_under() { awk -v d="$1/" 'index($2 "/", d) == 1 {print $2}' /proc/self/mounts; }
remove_root() {
    local dir=$1 mounts
    mounts=$(mounted_under "$dir")
    if [ -n "$mounts" ]; then
        log "not removing $dir: mounted in it: $mounts"
        exit 1
    fi
    rm -rf "$dir"
}

# A root is kept while it holds every package asked for (a root made with more, by an
# older version of this script, still does).
has_all() {
    local have
    have=$(cat "$STAMP" 2>/dev/null) || return 1
    [ "${have%% *}" = "$SUITE" ] || return 1
    local pkg
    for pkg in ${PACKAGES//,/ }; do
        case ",${have#* }," in *",$pkg,"*) ;; *) return 1 ;; esac
    done
}

if ! has_all; then
    log "building $ROOT (debootstrap --arch=arm64 $SUITE, several minutes)"
    mkdir -p "$CACHE"
    remove_root "$ROOT.new"
    mirror=$(bash "$(dirname "$0")/debian_mirror.sh")  # this machine's apt's Debian archive
    debootstrap --arch=arm64 --variant=minbase --include="$PACKAGES" \
        "$SUITE" "$ROOT.new" "$mirror" >&2
    rm -rf "$ROOT.new/var/cache/apt/archives/"*.deb  # 100 MB of downloads, not needed again
    remove_root "$ROOT"
    mv "$ROOT.new" "$ROOT"
    echo "$SUITE $PACKAGES" > "$STAMP"
fi
echo "$ROOT"
