#!/usr/bin/env bash
# Builds (once) an arm64 Debian trixie root for the emulated aarch64 job and prints its path.
# It lives outside the clone, under the user's cache folder, so only a new machine pays for
# debootstrap. Trixie's python3.13 also carries CPython's gh-145264 fix in binascii, which
# the base64 twins must follow. Needs root, debootstrap and qemu-user-static (apt).
set -euo pipefail

CACHE="${TOKCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokcore}"
SUITE=trixie
PACKAGES=python3,python3-dev,python3-venv,python3-pip,gcc,libc6-dev,make,ca-certificates
ROOT="$CACHE/arm64-$SUITE"
STAMP="$ROOT/.tokcore-root"
WANT="$SUITE $PACKAGES"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need debootstrap || ! [ -e /usr/bin/qemu-aarch64-static ]; then
    echo "arm64_root: installing debootstrap and qemu-user-static" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap qemu-user-static binfmt-support >&2
fi
# binfmt_misc lets the kernel run arm64 binaries through qemu (binfmt-support registers it)
if ! [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    update-binfmts --enable qemu-aarch64 >&2 || true
fi

if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    echo "arm64_root: building $ROOT (debootstrap --arch=arm64 $SUITE, several minutes)" >&2
    mkdir -p "$CACHE"
    rm -rf "$ROOT.new"
    debootstrap --arch=arm64 --variant=minbase --include="$PACKAGES" \
        "$SUITE" "$ROOT.new" http://deb.debian.org/debian >&2
    rm -rf "$ROOT" && mv "$ROOT.new" "$ROOT"
    echo "$WANT" > "$STAMP"
fi
echo "$ROOT"
