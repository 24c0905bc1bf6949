"""The repository's own rules, read from its files: the C headers include one another one way
(no circle, and a header defines or includes whatever it calls), and no package registry's
host name is written anywhere (scripts read mirrors from the machine's configuration)."""

from __future__ import annotations

import re

from _twins import ROOT

HEADERS = ROOT / "tokcore"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# a function definition of the headers' own prefix: "tok_name(...) {" after its return type
DEFINITION = re.compile(r"\b(tok_\w+)\s*\([^;{]*\)\s*\{")
CALL = re.compile(r"\b(tok_\w+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def headers() -> dict[str, str]:
    return {p.name: COMMENT.sub("", p.read_text()) for p in sorted(HEADERS.glob("*.h"))}


def includes(texts: dict[str, str]) -> dict[str, list[str]]:
    return {name: [h for h in INCLUDE.findall(text) if h in texts]
            for name, text in texts.items()}


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
    assert "_ssescan_neon.h" in graph["_ssescan.h"]  # the test reads the includes
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
