#!/usr/bin/env bash
# Builds (once) a Debian root with debootstrap and prints its path:
#
#   tools/debian_root.sh ARCH SUITE PACKAGES   (PACKAGES: comma-separated)
#
# The root lives outside the clone, under the user's cache folder, so only a new machine pays
# for debootstrap. A root is kept while it holds every package asked for; it is rebuilt when
# it is absent or lacks one. Needs root and debootstrap (apt: installed here when missing);
# a foreign ARCH also needs qemu-user-static and binfmt_misc (tools/arm64_root.sh).
set -euo pipefail

ARCH=$1 SUITE=$2 PACKAGES=$3
CACHE="${TOKCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokcore}"
ROOT="$CACHE/$ARCH-$SUITE"
STAMP="$ROOT/.tokcore-root"

log() { echo "debian_root: $*" >&2; }
if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
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

has_all() {  # the stamp names the suite and the packages the root was made with
    local have pkg
    have=$(cat "$STAMP" 2>/dev/null) || return 1
    [ "${have%% *}" = "$SUITE" ] || return 1
    for pkg in ${PACKAGES//,/ }; do
        case ",${have#* }," in *",$pkg,"*) ;; *) return 1 ;; esac
    done
}

if ! has_all; then
    log "building $ROOT (debootstrap --arch=$ARCH $SUITE, several minutes)"
    mkdir -p "$CACHE"
    remove_root "$ROOT.new"
    mirror=$(bash "$(dirname "$0")/debian_mirror.sh")  # this machine's apt's Debian archive
    debootstrap --arch="$ARCH" --variant=minbase --include="$PACKAGES" \
        "$SUITE" "$ROOT.new" "$mirror" >&2
    rm -rf "$ROOT.new/var/cache/apt/archives/"*.deb  # the downloads, not needed again
    remove_root "$ROOT"
    mv "$ROOT.new" "$ROOT"
    echo "$SUITE $PACKAGES" > "$STAMP"
fi
echo "$ROOT"
