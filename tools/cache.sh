# Sourced by tools/*.sh and .ci/run: the cache outside the tree, and what is kept there.
#
# What costs time but is the same every run (a built CPython, a Debian root, a venv) is kept
# in $CACHE, ~/.cache/tokcore (TOKCORE_CACHE overrides it), each under a name that carries a
# hash of what it is made from, so that a clean clone finds it and a change remakes it.

CACHE="${TOKCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokcore}"

# key TEXT...: 12 hex digits of the SHA-256 of its arguments and standard input
key() { { printf '%s\n' "$@"; cat; } | sha256sum | cut -c1-12; }

# groups_text GROUP...: those dependency groups of pyproject.toml as text (a venv's key:
# the groups, not the file, so that an edit elsewhere in pyproject.toml keeps the venv)
groups_text() {
    python3 - "$@" <<'EOF'
import json, sys, tomllib
groups = tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]
print(json.dumps({name: groups[name] for name in sys.argv[1:]}, sort_keys=True))
EOF
}

# cached_venv NAME PYTHON KEYTEXT FILL: prints the path of a venv of PYTHON kept in
# $CACHE/venv-NAME-<key> (the key: the interpreter's path and version, and KEYTEXT, which
# says what FILL installs), made once: FILL, a function, is called with the venv's folder
# after the venv's pip is updated. A venv whose making did not finish is made again; the
# other venvs of NAME (older keys) are removed. What pip says goes to standard error.
cached_venv() {
    local name=$1 python=$2 keytext=$3 fill=$4 dir old
    dir="$CACHE/venv-$name-$(key "$(readlink -f "$(command -v "$python")")" "$keytext" \
        < <("$python" -VV))"
    if ! [ -f "$dir/.tokcore-complete" ]; then
        echo "cache: making $dir" >&2
        rm -rf "$dir"
        "$python" -m venv "$dir" >&2
        "$dir/bin/python" -m pip install -q --disable-pip-version-check -U "pip>=25.1" >&2
        "$fill" "$dir" >&2
        touch "$dir/.tokcore-complete"
        for old in "$CACHE/venv-$name-"*; do
            [ "$old" = "$dir" ] || rm -rf "$old"
        done
    fi
    echo "$dir"
}
