"""The repository's own rules, read from its files: the C headers include one another one way
(no circle, and a header defines or includes whatever it calls), and no package registry's
host name is written anywhere (scripts read mirrors from the machine's configuration)."""

from __future__ import annotations

import posixpath
import re
import subprocess
from pathlib import Path

import pytest
from _twins import ROOT

HEADERS = ROOT / "tokcore"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# a function definition of the headers' own prefix: "tok_name(...) {" after its return type
DEFINITION = re.compile(r"\b(tok_\w+)\s*\([^;{]*\)\s*\{")
CALL = re.compile(r"\b(tok_\w+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def headers() -> dict[str, str]:
    """Every header of the package, by its path under tokcore/ (``stream/_ssescan.h``)."""
    return {p.relative_to(HEADERS).as_posix(): COMMENT.sub("", p.read_text())
            for p in sorted(HEADERS.rglob("*.h"))}


def resolve(header: str, included: str, texts: dict[str, str]) -> str | None:
    """The package's header that ``#include "included"`` in ``header`` reads, as the compiler
    finds it: beside the including header first, then from tokcore/ (the include path)."""
    beside = posixpath.normpath(posixpath.join(posixpath.dirname(header), included))
    return next((h for h in (beside, included) if h in texts), None)


def includes(texts: dict[str, str]) -> dict[str, list[str]]:
    graph: dict[str, list[str]] = {}
    for name, text in texts.items():
        found = (resolve(name, h, texts) for h in INCLUDE.findall(text))
        graph[name] = [h for h in found if h is not None]
    return graph


def reachable(graph: dict[str, list[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += graph[name]
    return seen


def test_headers_include_one_way() -> None:
    texts = headers()
    graph = includes(texts)
    assert "stream/_ssescan_neon.h" in graph["stream/_ssescan.h"]  # the test reads them
    circles = [name for name in graph if name in reachable(graph, name)]
    assert circles == []


def test_a_header_calls_only_what_it_defines_or_includes() -> None:
    """A header that calls a function of another header it does not include needs its includer
    to have defined it first: an arrow back up the include graph (_ssescan_neon.h called
    _ssescan.h's tok_is_candidate)."""
    texts = headers()
    graph = includes(texts)
    defined = {name: set(DEFINITION.findall(text)) for name, text in texts.items()}
    everywhere = set().union(*defined.values())
    assert "tok_is_candidate" in everywhere
    backwards = {}
    for name, text in texts.items():
        own = defined[name].union(*(defined[h] for h in reachable(graph, name)))
        called = (set(CALL.findall(text)) & everywhere) - own
        if called:
            backwards[name] = sorted(called)
    assert backwards == {}


def test_one_cpu_probe() -> None:
    """Only _cpu.h asks the CPU what it has (and what the compiler targets): every kernel
    header includes it, so a new feature check is one line there."""
    asking = re.compile(r"__builtin_cpu_(?:init|supports|is)|\b__(?:SSE2|AVX2|ARM_NEON)__\b")
    texts = headers()
    assert asking.search(texts["_cpu.h"])
    others = {name for name, text in texts.items() if name != "_cpu.h" and asking.search(text)}
    assert others == set()


# the hosts of package registries and distribution mirrors (PyPI and its files, Debian's and
# Ubuntu's archives, npm, Rust's crates, conda, the Go proxy)
REGISTRY_HOST = re.compile(
    r"\b(?:[\w-]+\.)*(?:pypi\.org|pythonhosted\.org|pypi\.python\.org|debian\.org"
    r"|ubuntu\.com|npmjs\.(?:org|com)|yarnpkg\.com|crates\.io|anaconda\.(?:org|com)"
    r"|conda-forge\.org|golang\.org|proxy\.golang\.org)\b", re.IGNORECASE)


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                                check=False)
    except FileNotFoundError:  # (the matrix's Debian root has no git)
        pytest.skip("no git here: the tracked files cannot be listed")
    if listed.returncode:
        pytest.skip("not a git checkout (a test run on an unpacked sdist)")
    return [ROOT / name for name in listed.stdout.decode().split("\0") if name]


def test_no_registry_host_in_the_repository() -> None:
    found = []
    for path in tracked_files():
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in REGISTRY_HOST.finditer(text)]
    assert found == []


def test_the_debian_mirror_comes_from_apt(tmp_path: Path) -> None:
    """tools/debian_mirror.sh: the first deb source of the release asked for, in either of
    apt's formats, read where APT_CONFIG says; its -security suite and a third party's are
    not it; none is an error naming the way out."""
    (tmp_path / "parts").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.invalid/debian sid main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.invalid/debian/ sid main\n")
    (tmp_path / "parts" / "a.sources").write_text(
        "Types: deb\nURIs: http://security.invalid/debian-security\nSuites: trixie-security\n\n"
        "Types: deb-src deb\nURIs: http://two.invalid/debian\nSuites: trixie trixie-updates\n"
        "Components: main\n")
    (tmp_path / "parts" / "b.list.disabled").write_text("deb http://off.invalid/x bookworm main\n")
    (tmp_path / "apt.conf").write_text(
        f'Dir::Etc::sourcelist "{tmp_path}/sources.list";\n'
        f'Dir::Etc::sourceparts "{tmp_path}/parts/";\n')
    script = ROOT / "tools" / "debian_mirror.sh"
    env = {"PATH": "/usr/bin:/bin", "APT_CONFIG": str(tmp_path / "apt.conf")}
    if subprocess.run(["apt-config", "dump"], env=env, capture_output=True,
                      check=False).returncode:
        pytest.skip("apt-config is not here: not a Debian-like machine")

    def mirror(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(script), *args], env={**env, **extra},
                              capture_output=True, text=True, check=False)

    assert mirror("sid").stdout == "http://one.invalid/debian\n"
    assert mirror("trixie").stdout == "http://two.invalid/debian\n"
    missing = mirror("bookworm")
    assert missing.returncode == 1 and "TOKCORE_DEBIAN_MIRROR" in missing.stderr
    assert mirror("bookworm", TOKCORE_DEBIAN_MIRROR="http://set.invalid/d/").stdout == \
        "http://set.invalid/d\n"


# the last commit before the prefixes of docs/contributing/index.md were the rule
PREFIXES_SINCE = "5662442"
PREFIX_ROW = re.compile(r"^\| `([a-z]+)` \|", re.MULTILINE)


def commit_prefixes() -> set[str]:
    """The prefixes the contributing page lists, read from its table."""
    text = (ROOT / "docs" / "contributing" / "index.md").read_text()
    table = text.split("<!-- prefixes: the list tests/test_hygiene.py reads -->", 1)[1]
    return set(PREFIX_ROW.findall(table.split("\n\n", 1)[0]))


def test_commit_subjects_follow_the_rule() -> None:
    """Every subject since the rule: at most 72 characters, one of the listed prefixes."""
    prefixes = commit_prefixes()
    assert {"ids", "vllm", "docs", "ci"} <= prefixes
    try:
        log = subprocess.run(["git", "log", "--format=%h %s", f"{PREFIXES_SINCE}..HEAD"],
                             cwd=ROOT, capture_output=True, text=True, check=False)
    except FileNotFoundError:  # (the matrix's Debian root has no git)
        pytest.skip("no git here: the history cannot be read")
    if log.returncode:
        if not (ROOT / ".git").exists():
            pytest.skip("not a git checkout (a test run on an unpacked sdist)")
        raise AssertionError(f"git log failed (a shallow clone?): {log.stderr.strip()}")
    bad = []
    for line in log.stdout.splitlines():
        sha, subject = line.split(" ", 1)
        prefix = subject.split(": ", 1)[0] if ": " in subject else ""
        if prefix not in prefixes or len(subject) > 72:
            bad.append(f"{sha} ({len(subject)} characters) {subject}")
    assert bad == [], "subjects outside docs/contributing/index.md's rule:\n" + "\n".join(bad)
