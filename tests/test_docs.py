"""Every code block of the README and the documentation runs, so none can go stale.

- A ``python`` block that starts with ``>>>`` is a doctest (the blocks of one page share
  their names, in order; the README's are tests/test_readme.py's, which the sdist runs).
- Any other ``python`` block is a program, run in a module of its own. The generation
  worker's URL in it (``http://127.0.0.1:8001/...``) is replaced by a real upstream on
  loopback (tests/_upstream.py). A block that defines ``app`` (an aiohttp ``Application`` or
  an ASGI app) is then served and sent a request, its ``run_context_phase`` giving the
  counts: the client must get the upstream's stream with the usage rewritten.
- A ``sh`` block's ``make`` targets must be targets of the Makefile, its ``pip install``
  extras extras of pyproject.toml.
- The README's relative links and every page's files it names must exist; the docs' own
  cross-references are Sphinx's to check (``make docs`` runs with warnings as errors).
"""

from __future__ import annotations

import asyncio
import doctest
import re
import shlex
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from _twins import ROOT
from _upstream import CACHED, PROMPT, RELAYED_USAGE, TOKEN_EVENT, USAGE_EVENT, Server

PLACEHOLDER = re.compile(r'"http://127\.0\.0\.1:8001(/[^"]*)"')
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """The fenced blocks of ``page``: (language, text, line)."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in BLOCK.finditer(text)]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_block_says_its_language(page: Path) -> None:
    """``python`` runs, ``sh`` is checked, ``text`` is output; directives are Sphinx's."""
    inside = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```") and not inside:
            language = line[3:].strip()
            assert language in ("python", "sh", "text") or language.startswith("{"), (
                f"{page_id(page)}:{number}: a block in {language or 'no language'}")
            inside = True
        elif line.strip() == "```":
            inside = False


def test_the_pages_have_blocks() -> None:
    assert (ROOT / "docs" / "index.md").exists()
    counts = {page_id(p): len(blocks(p)) for p in PAGES}
    assert counts["README.md"] >= 5
    assert sum(counts.values()) >= 30, counts


@pytest.mark.parametrize("page", PAGES[1:], ids=page_id)
def test_doctests(page: Path) -> None:
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                   | doctest.IGNORE_EXCEPTION_DETAIL)
    # the page's names live in a module of its own, so that its classes pickle
    module = ModuleType("docs_" + re.sub(r"\W", "_", page_id(page)))
    sys.modules[module.__name__] = module
    try:
        for language, text, line in blocks(page):
            if language == "python" and text.lstrip().startswith(">>>"):
                test = parser.get_doctest(text, {}, f"{page_id(page)}:{line}", str(page), line)
                test.globs = module.__dict__
                runner.run(test, clear_globs=False)
    finally:
        del sys.modules[module.__name__]
    assert runner.failures == 0, f"{runner.failures} doctest(s) failed in {page_id(page)}"


PROGRAMS = [(page, line, text) for page in PAGES for language, text, line in blocks(page)
            if language == "python" and not text.lstrip().startswith(">>>")]


@pytest.mark.parametrize(("page", "line", "text"), PROGRAMS,
                         ids=[f"{page_id(p)}:{n}" for p, n, _ in PROGRAMS])
def test_programs(server: Server, page: Path, line: int, text: str) -> None:
    url, upstream = server.request(events="2", end="1")
    source = PLACEHOLDER.sub(repr(url), text)
    module = ModuleType(f"docs_block_{line}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, f"{page_id(page)}:{line}", "exec"), module.__dict__)
        app = module.__dict__.get("app")
        if app is not None:
            assert PLACEHOLDER.search(text), "a served block names its generation worker"

            async def counts(body: Any) -> tuple[int, int]:
                return PROMPT, CACHED

            module.__dict__["run_context_phase"] = counts
            path = PLACEHOLDER.search(text).group(1)  # type: ignore[union-attr]
            body = asyncio.run(serve_and_post(app, "/v1" + path.split("/v1", 1)[1],
                                              module.__dict__))
            if path.endswith("/v1/messages"):  # the upstream's chat usage is foreign there
                assert body == USAGE_EVENT + TOKEN_EVENT * 2
            else:
                assert body == RELAYED_USAGE + TOKEN_EVENT * 2
    finally:
        del sys.modules[module.__name__]


async def serve_and_post(app: Any, path: str, names: dict[str, Any]) -> bytes:
    """``app``'s answer to one POST of a chat request; then the clients the block made for
    the application (``names``) are closed in the loop they used, as its shutdown would."""
    try:
        return await post_to(app, path)
    finally:
        for value in list(names.values()):
            if isinstance(value, httpx.AsyncClient):
                await value.aclose()


async def post_to(app: Any, path: str) -> bytes:
    from aiohttp import web

    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    if isinstance(app, web.Application):
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with httpx.AsyncClient() as client:
                answer = await client.post(f"http://127.0.0.1:{port}{path}", json=request)
        finally:
            await runner.cleanup()
    else:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://app") as client:
            answer = await client.post(path, json=request)
    assert answer.status_code == 200, answer.text
    return answer.content


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {t for line in re.findall(r"^([\w .%-]+):(?!=)", text, re.M) for t in line.split()}


def extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return set(tomllib.loads(text)["project"].get("optional-dependencies", {}))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_shell_blocks_name_real_targets_and_extras(page: Path) -> None:
    targets, known = makefile_targets(), extras()
    for language, text, line in blocks(page):
        if language != "sh":
            continue
        for command in text.splitlines():
            command = command.split("#", 1)[0].strip()
            if command.startswith("make "):
                for word in shlex.split(command)[1:]:
                    if "=" not in word and not word.startswith("-"):
                        assert word in targets, f"{page_id(page)}:{line}: make {word}"
            for group in re.findall(r"\.\[([\w,-]+)\]", command):
                for extra in group.split(","):
                    assert extra in known, f"{page_id(page)}:{line}: extra {extra}"


def test_readme_links() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link and not link.startswith("mailto:")]
    assert local, "the README links into the docs"
    for link in local:
        assert (ROOT / link).exists(), f"README.md links to {link}, which is not there"
    for anchor in re.findall(r"\]\(#([^)]+)\)", text):
        headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                    for h in re.findall(r"^#+ (.*)$", text, re.M)}
        assert anchor in headings, f"README.md links to #{anchor}, no such heading"


def test_readme_is_short_and_starts_with_the_install_line() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 275, len(lines)  # 260 before the wire formats' entry (issue 33)
    first_screen = "\n".join(lines[:40])
    assert "pip install tokcore" in first_screen and "```python" in first_screen


def test_the_api_reference_names_every_public_name() -> None:
    import tokcore

    text = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    missing = [name for name in tokcore.__all__ if name != "__version__"
               and not re.search(rf"^\.\. auto\w+:: tokcore\.{name}$", text, re.M)
               and not re.search(rf"^```{{py:\w+}} {name}\b", text, re.M)]
    assert not missing, missing
