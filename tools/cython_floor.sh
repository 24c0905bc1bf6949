#!/usr/bin/env bash
# make test-cython-floor: the extensions built with the oldest Cython the build group of
# pyproject.toml allows, exactly (its `>=` floor, read from there: raising the floor is one
# edit), then the Cython twins' suite on that build (quick draw).
#
# A small venv (kept in the cache: tools/cache.sh) holds only setuptools and that Cython; the
# build is made in a copy of the tree (build/cython-floor), and the tests run there with the
# main venv's Python (same interpreter, so the same extension ABI), which imports the copy's
# tokcore, without the tests of the repository's text (TOKCORE_TEST_CODE_ONLY: conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/cache.sh

PY=.venv/bin/python
floor=$("$PY" - <<'PYEOF'
import re, tomllib
groups = tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["build"]
line = next(g for g in groups if isinstance(g, str) and re.match(r"cython\b", g, re.I))
print(re.search(r">=\s*([^,;\s]+)", line).group(1))
PYEOF
)
setuptools=$("$PY" -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"] if r.startswith("setuptools")))')
echo "cython-floor: Cython==$floor, $setuptools"

fill_floor_venv() { "$1/bin/python" -m pip install -q "Cython==$floor" "$setuptools"; }
venv=$(cached_venv cython-floor python3 "Cython==$floor $setuptools" fill_floor_venv)
"$venv/bin/python" -c 'import Cython; print("cython-floor: built with Cython", Cython.__version__)'

work=build/cython-floor
rm -rf "$work" && mkdir -p "$work"
git ls-files -z -co --exclude-standard | grep -zv '^tokcore/.*\.\(so\|c\)$' \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$work"
start=$SECONDS
(cd "$work" && TOKCORE_REQUIRE_EXTENSIONS=1 "$venv/bin/python" setup.py -q \
    build_ext --inplace -j 2 2>&1 | grep -v "^$" | grep -iv "warning" || true)
find "$work"/tokcore -name '*.so' | grep . > /dev/null || { echo "cython-floor: no extension built"; exit 1; }
echo "cython-floor: built in $((SECONDS - start)) s"
cd "$work"
TOKCORE_REQUIRE_EXTENSIONS=1 TOKCORE_TEST_TWINS=c TOKCORE_TEST_PROFILE=quick \
    TOKCORE_TEST_CODE_ONLY=1 "$OLDPWD/$PY" -m pytest -q -p no:cacheprovider -n "${TEST_WORKERS:-2}" "$@"
