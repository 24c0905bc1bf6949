#!/usr/bin/env bash
# Prints the Debian archive this machine's apt uses, so that no script of the repository
# names a mirror (tools/debian_root.sh, tools/arm64_root.sh, tools/freethreaded.sh):
#
#   tools/debian_mirror.sh [CODENAME]
#
# It is the URI of the first enabled `deb` source whose suites include CODENAME (default: the
# release this machine runs, VERSION_CODENAME of /etc/os-release): the release's own archive,
# not its -security or -updates suites nor a third party's repository. The sources are read
# where apt reads them (apt-config: Dir::Etc::sourcelist and sourceparts, so APT_CONFIG is
# honoured): the one-line format of sources.list and *.list, the deb822 format of *.sources.
# TOKCORE_DEBIAN_MIRROR, when set, is printed instead (a machine whose apt is not Debian's).
set -euo pipefail

if [ -n "${TOKCORE_DEBIAN_MIRROR:-}" ]; then
    echo "${TOKCORE_DEBIAN_MIRROR%/}"
    exit 0
fi
CODENAME=${1:-$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")}
LIST=/etc/apt/sources.list PARTS=/etc/apt/sources.list.d/
if command -v apt-config >/dev/null 2>&1; then
    eval "$(apt-config shell LIST Dir::Etc::sourcelist/f PARTS Dir::Etc::sourceparts/d)"
fi
files=()
[ -f "$LIST" ] && files+=("$LIST")
for f in "$PARTS"*.list "$PARTS"*.sources; do [ -f "$f" ] && files+=("$f"); done

mirror=""
if [ -n "$CODENAME" ] && [ "${#files[@]}" -gt 0 ]; then
    mirror=$(awk -v want="$CODENAME" '
        function has(list, word,   n, i, parts) {
            n = split(list, parts, /[ \t]+/)
            for (i = 1; i <= n; i++) if (parts[i] == word) return 1
            return 0
        }
        function paragraph() {  # a deb822 stanza, at its end
            if (has(types, "deb") && has(suites, want) && tolower(enabled) != "no" && uris != "") {
                split(uris, u, /[ \t]+/); print u[1]; found = 1; exit
            }
            types = uris = suites = enabled = ""
        }
        FNR == 1 { if (deb822) paragraph(); deb822 = FILENAME ~ /\.sources$/ }
        deb822 {
            if ($0 ~ /^[ \t]*$/) { paragraph(); next }
            if ($0 ~ /^#/) next
            field = tolower($1); sub(/:$/, "", field); value = $0
            sub(/^[^:]*:[ \t]*/, "", value)
            if (field == "types") types = value
            else if (field == "uris") uris = value
            else if (field == "suites") suites = value
            else if (field == "enabled") enabled = value
            next
        }
        {   # one-line format: deb [options] uri suite [component...]
            line = $0; sub(/#.*/, "", line)
            n = split(line, w, /[ \t]+/); k = 1
            while (k <= n && w[k] == "") k++
            if (w[k] != "deb") next
            k++
            if (w[k] ~ /^\[/) { while (k <= n && w[k] !~ /\]$/) k++; k++ }
            if (w[k + 1] == want) { print w[k]; found = 1; exit }
        }
        END { if (!found && deb822) paragraph() }
    ' "${files[@]}")
fi
if [ -z "$mirror" ]; then
    echo "debian_mirror: no deb source for '${CODENAME:-?}' in $LIST or $PARTS: set" \
        "TOKCORE_DEBIAN_MIRROR to a Debian archive's URL" >&2
    exit 1
fi
echo "${mirror%/}"
