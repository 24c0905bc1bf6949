"""Every code block of the README and the documentation runs, so none can go stale.

- A ``python`` block that starts with ``>>>`` is a doctest (the blocks of one page share
  their names, in order; the README's are tests/test_readme.py's, which the sdist runs).
- Any other ``python`` block is a program, run in a module of its own. The generation
  worker's URL in it (``http://127.0.0.1:8001/...``) is replaced by a real upstream on
  loopback (tests/_upstream.py). A block that defines ``app`` (an aiohttp ``Application`` or
  an ASGI app) is then served, its ``run_context_phase`` giving the counts, and sent a
  request for each answer a worker gives: a stream and a whole body (the client must get
  the context's counts in their usage), an error status (the same status in the API's
  shape, the worker's message kept), a body that is not JSON (a 400); the block is then run
  again with a worker that is down (a 502 in the API's shape). Nothing may be logged at
  ERROR or with a traceback.
- A ``sh`` block's ``make`` targets must be targets of the Makefile, its ``pip install``
  extras extras of pyproject.toml.
- The README's relative links and every page's files it names must exist; the docs' own
  cross-references are Sphinx's to check (``make docs`` runs with warnings as errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import doctest
import importlib.util
import json
import logging
import re
import shlex
import socket
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from _twins import ROOT
from _upstream import CACHED, ERROR_MESSAGES, PROMPT, TOKENS, Server

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
def test_programs(server: Server, page: Path, line: int, text: str,
                  caplog: pytest.LogCaptureFixture) -> None:
    served = "\napp = " in text or "\napp: " in text
    if not served:
        url, _ = server.request(events="2", end="1")
        run_block(page, line, PLACEHOLDER.sub(repr(url), text))
        return
    match = PLACEHOLDER.search(text)
    assert match, "a served block names its generation worker"
    route = "/v1" + match.group(1).split("/v1", 1)[1]
    api = "messages" if route == "/v1/messages" else "chat"
    answers = server.url.rsplit("/", 1)[0] + f"/answer?api={api}"
    with caplog.at_level(logging.DEBUG):
        names = run_block(page, line, PLACEHOLDER.sub(repr(answers), text))
        asyncio.run(serve_and_check(names, route, api, live=True))
        names = run_block(page, line, PLACEHOLDER.sub(repr(dead_url() + route), text))
        asyncio.run(serve_and_check(names, route, api, live=False))
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


def run_block(page: Path, line: int, source: str) -> dict[str, Any]:
    """Run one block in a module of its own; its names."""
    module = ModuleType(f"docs_block_{line}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, f"{page_id(page)}:{line}", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


def dead_url() -> str:
    """A loopback URL nothing listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


async def serve_and_check(names: dict[str, Any], route: str, api: str, live: bool) -> None:
    """Serve the block's ``app`` (its ``run_context_phase`` giving the counts) and check
    each answer; then close the clients the block made for the application, in the loop
    they used, as its shutdown would."""
    async def counts(body: Any) -> tuple[int, int]:
        return PROMPT, CACHED

    names["run_context_phase"] = counts
    try:
        async with serving(names["app"]) as post:
            if live:
                await check_live(post, route, api)
            else:
                status, _, body = await post(route, request_body(api, stream=True))
                assert status == 502, body
                assert error_of(api, body)[1].startswith(("the generation worker could not",
                                                          "the upstream at http"))
    finally:
        for value in list(names.values()):
            if isinstance(value, httpx.AsyncClient):
                await value.aclose()
            elif type(value).__module__.startswith("aiohttp") and hasattr(value, "close") \
                    and type(value).__name__ == "ClientSession":
                await value.close()


def request_body(api: str, stream: bool, **extra: Any) -> bytes:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                            "max_tokens": TOKENS, "stream": stream, **extra}
    if stream and api == "chat":
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def error_of(api: str, body: bytes) -> tuple[str, str]:
    """(type, message) of an error body in ``api``'s shape."""
    data = json.loads(body)
    if api == "messages":
        assert data["type"] == "error"
    return data["error"]["type"], data["error"]["message"]


async def check_live(post: Any, route: str, api: str) -> None:
    status, headers, body = await post(route, request_body(api, stream=True))
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), body
    events = [json.loads(line[6:]) for line in body.decode().splitlines()
              if line.startswith("data: {")]
    whole_status, whole_headers, whole = await post(route, request_body(api, stream=False))
    assert whole_status == 200, whole
    assert whole_headers["content-type"] == "application/json"
    assert int(whole_headers["content-length"]) == len(whole)
    answer = json.loads(whole)
    if api == "messages":
        start = events[0]["message"]["usage"]
        for usage in (start, answer["usage"]):
            assert (usage["input_tokens"], usage["cache_read_input_tokens"]) == (
                PROMPT - CACHED, CACHED)
    else:
        for usage in (events[-1]["usage"], answer["usage"]):
            assert (usage["prompt_tokens"], usage["total_tokens"]) == (PROMPT, PROMPT + TOKENS)
            assert usage["prompt_tokens_details"] == {"cached_tokens": CACHED}
    status, _, body = await post(route, request_body(
        api, stream=True, x_answer={"status": 503, "shape": "sglang"}))
    assert status == 503, body
    assert error_of(api, body) == ("overloaded_error" if api == "messages" else "server_error",
                                   ERROR_MESSAGES["sglang"])
    status, _, body = await post(route, b"{bad")
    assert status == 400, body
    assert error_of(api, body)[0] == "invalid_request_error"


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[Any]:
    """``post(path, body) -> (status, headers, body)`` to ``app``, served for the block."""
    from aiohttp import web

    if isinstance(app, web.Application):
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        client = httpx.AsyncClient(base_url=base)
    else:
        runner = None
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                   base_url="http://app")

    async def post(path: str, body: bytes) -> tuple[int, httpx.Headers, bytes]:
        answer = await client.post(path, content=body, timeout=30,
                                   headers={"Content-Type": "application/json"})
        return answer.status_code, answer.headers, answer.content

    try:
        yield post
    finally:
        await client.aclose()
        if runner is not None:
            await runner.cleanup()


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
    # 260 before the wire formats' entry (issue 33), 276 when main's adapters met it; 280 with
    # the stacks' conventions (the examples' option, the per-stack guides, their figure); 306
    # with the widths on the first screen (issue 38: int64 ids, which stacks use which) and the
    # stream writer's entry and figures (issue 37); back within 300 (issue 43: the FastAPI
    # route is the relaying guide's)
    assert len(lines) <= 300, len(lines)
    first_screen = "\n".join(lines[:40])
    assert "pip install tokcore" in first_screen and "```python" in first_screen


def test_the_api_reference_names_every_public_name() -> None:
    import tokcore

    text = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    missing = [name for name in tokcore.__all__ if name != "__version__"
               and not re.search(rf"^\.\. auto\w+:: tokcore\.{name}$", text, re.M)
               and not re.search(rf"^```{{py:\w+}} {name}\b", text, re.M)]
    assert not missing, missing


def test_the_api_reference_is_read_from_the_docstrings() -> None:
    """What the reference says of each function and class is its typed twin's docstring,
    rendered by autodoc: the page's sections of names hold headings and directives only,
    so nothing written there can drift from the code (its Errors paragraphs said that
    find_member of a text that is not an object gives None, and that an empty path is a
    TypeError: both are ValueErrors). Each documented name's docstring says what it raises."""
    import importlib

    # autodoc reads the typed twins (make docs: TOKCORE_NO_EXTENSIONS=1): so does this test
    typed = [importlib.import_module(f"tokcore.{m}") for m in (
        "ids._pack_py", "ids._b64_py", "ids._wire_py", "members._members_py", "stream._usage_py",
        "stream._relay_py", "stream._events_py", "stream._relay_iter", "writer._writer_py",
        "writer._writer_shape", "writer._writer_rules", "pickling")]

    def docstring(name: str) -> str:
        return next(getattr(m, name) for m in typed if hasattr(m, name)).__doc__ or ""

    text = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    names = text[text.index("\n## Token ids"):text.index("\n## Static types")]
    directives = re.sub(r"^```.*?^```", "", names, flags=re.S | re.M)
    prose = [line for line in directives.splitlines()
             if line.strip() and not line.startswith("#")]
    assert prose == []
    documented = re.findall(r"^\.\. auto(?:function|class):: tokcore\.(\w+)$", names, re.M)
    assert len(documented) > 20
    silent = [name for name in documented  # (the data types raise nothing of theirs)
              if name not in ("RelayCounts", "Event", "EventTooLarge", "Probe", "TokenLogprob",
                              "TopLogprob", "Usage", "Step")
              and "Raises" not in docstring(name)]
    assert silent == []


# --- what the docs say, and how they are made ---------------------------------------------------

def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_figures", ROOT / "bench" / "figures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_and_the_benchmarks_page_show_one_recorded_run() -> None:
    """Both are written from docs/_static/bench/results.json (bench/figures.py): the same
    numbers in both places, and the run's date on both."""
    figures = _figures()
    results = figures.load()
    for path, text in figures.pages(results).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is not what the recorded results.json gives: python bench/figures.py")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert f"run of {results['date']}" in readme and f"Run of {results['date']}" in page
    pack = results["scripts"]["bench_ids"]["seconds"]["pack 40k uniform"]["tokcore-c"]
    assert f"| `pack_ids` | {figures.fmt_time(pack)} |" in readme
    assert f"| pack 40k uniform | tokcore-c | {figures.fmt_time(pack)} |" in page


def test_the_end_to_end_figures_have_the_fastapi_orchestrator_and_its_goal() -> None:
    results = _figures().load()
    e2e = results["scripts"]["bench_e2e"]["figures"]
    assert set(e2e["proxies"]) >= {"plain", "tokcore", "floor", "fastapi"}
    (goal,) = [g for g in e2e["goals"] if g["proxy"] == "fastapi"]
    assert (goal["baseline"], goal["goal"]) == ("floor", 1.3)
    assert "1.3x of the aiohttp floor" in (ROOT / "docs" / "guides" /
                                          "disaggregated.md").read_text(encoding="utf-8")


def test_the_end_to_end_figures_have_each_convention_both_ways() -> None:
    """The recorded run measured each stack's convention in the stack's own way and
    tokcore's, with the streams and the short answers, and checked TensorRT-LLM's goal on
    the short ones; the benchmarks page shows them."""
    e2e = _figures().load()["scripts"]["bench_e2e"]["figures"]
    short = e2e["short answers"]
    for convention, pair in e2e["conventions"].items():
        assert pair["tokcore"] == convention and pair["stack"] == f"{convention}-stack"
        for name in (pair["tokcore"], pair["stack"]):
            assert name in e2e["proxies"] and name in short["proxies"]
    assert set(e2e["conventions"]) == {"trtllm", "trtllm-ctxbytes", "vllm"}
    (goal,) = [g for g in e2e["goals"] if g["proxy"] == "trtllm"]
    assert (goal["baseline"], goal["goal"], goal["output tokens"]) == (
        "trtllm-stack", 0.5, short["output tokens"])
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "| TensorRT-LLM (JSON ids into MessagePack) | 300 |" in page


def test_the_vllm_section_is_the_recorded_bench_vllm_run() -> None:
    """docs/benchmarks.md's vLLM section is bench/bench_vllm.py's rendering of the recorded
    run (docs/_static/bench/vllm.json): the plugin off and on in each case, greedy and
    sampled, at least 3 rounds, vLLM's version, the goals."""
    spec = importlib.util.spec_from_file_location("bench_vllm", ROOT / "bench" / "bench_vllm.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    record = json.loads(bench.RECORDED.read_text(encoding="utf-8"))
    page = bench.PAGE.read_text(encoding="utf-8")
    assert bench.page(record, page) == page, "python bench/bench_vllm.py --docs"
    assert set(record["cases"]) == set(bench.CASES) == set(bench.GOALS)
    for modes in record["cases"].values():
        assert set(modes) == set(bench.MODES)
        assert all(len(row["api ms per 1k tokens"]) == record["rounds"] >= 3
                   for row in modes.values())
    assert f"vLLM {record['vllm']}" in page and len(record["goals"]) == len(bench.GOALS)


def test_make_docs_installs_only_what_the_docs_need() -> None:
    """The docs target needs the docs group alone (no build: autodoc reads the Python twins),
    and that group has every framework the documented adapters import."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rule = re.search(r"^docs: *(.*)$", makefile, re.M)
    assert rule and rule.group(1).split() == ["$(VENV)/.deps-docs"]
    group = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "dependency-groups"]["docs"]
    names = {re.match(r"[\w-]+", line).group(0).lower() for line in group}  # type: ignore[union-attr]
    reference = (ROOT / "docs" / "reference" / "adapters.md").read_text(encoding="utf-8")
    for module in sorted(set(re.findall(r"automodule:: tokcore\.adapters\.(\w+)", reference))):
        source = (ROOT / "tokcore" / "adapters" / f"{module}.py").read_text(encoding="utf-8")
        imported = set(re.findall(r"^(?:from|import) (\w+)", source, re.M))
        frameworks = imported & {"aiohttp", "starlette", "httpx", "fastapi", "yarl"}
        assert frameworks - {"yarl"} <= names, (module, frameworks - names)


def test_the_docs_wrap_long_example_outputs() -> None:
    conf = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    assert 'html_css_files = ["wrap.css"]' in conf
    css = (ROOT / "docs" / "_static" / "wrap.css").read_text(encoding="utf-8")
    assert ".highlight .go" in css and "pre-wrap" in css


def test_the_reference_shows_closable_streams_members() -> None:
    """autodoc leaves out a member without a docstring: the protocol's have theirs."""
    from tokcore.adapters.starlette import ClosableStream

    reference = (ROOT / "docs" / "reference" / "adapters.md").read_text(encoding="utf-8")
    listed = re.search(r"autoclass:: tokcore\.adapters\.starlette\.ClosableStream\n"
                       r"\s+:members: (.*)\n", reference)
    assert listed and listed.group(1).split(", ") == ["__aiter__", "aclose"]
    for name in ("__aiter__", "aclose"):
        assert getattr(ClosableStream, name).__doc__


def test_the_readme_relay_names_close() -> None:
    """An unfinished last event comes out of close(): the README says so, and shows it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`close()` gives what is left" in text and ">>> relay.close()" in text
