"""relay_usage / arelay_usage close their source, however the stream ends.

The upstream is a real aiohttp server on loopback that streams SSE and records when its
client goes away; the sources are what users write: a generator holding an aiohttp or httpx
response in its ``async with`` (``with``) block. Each way a consumer can stop is tried: the
stream closed early, dropped after an error in the consumer, its task cancelled while it
waits for the upstream, closed before its first read, and run to its end. The README's
Starlette app runs too, driven as an ASGI server drives it, the client going away under
both disconnect conventions of the ASGI spec (``http.disconnect`` from ``receive`` before
2.4, an ``OSError`` from ``send`` from 2.4 on). Every case runs on the twin that loaded.
"""

from __future__ import annotations

import asyncio
import gc
import io
import itertools
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

import aiohttp
import httpx
import pytest
from _twins import ROOT
from aiohttp import web

from tokcore import UsageRelay, arelay_usage, relay_usage

PROMPT, CACHED = 40, 32
USAGE_EVENT = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n'
RELAYED_USAGE = (b'data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,'
                 b'"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}\n\n')
TOKEN_EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
#: how long an upstream may take to see its client go: generous for a loaded machine
RELEASE_TIMEOUT = 20.0
#: an upstream streams at most this long, so that a test that fails still ends
UPSTREAM_LIFETIME = 60.0


class Upstream:
    """One request to the upstream server, as the server saw it."""

    def __init__(self) -> None:
        self.released = threading.Event()  # the client went away (its connection closed)
        self.finished = threading.Event()  # the stream was sent to its end


class Server:
    """An aiohttp SSE server on 127.0.0.1, on its own event loop in a thread.

    ``/stream?id=X&events=N`` sends the usage event and N token events, then: with
    ``end=1`` ends the stream; with ``quiet=1`` sends nothing more (a worker that is slow to
    answer); else a token event every 10 ms. Until its lifetime ends, it watches its
    client's connection and records when it is closed.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.requests: dict[str, Upstream] = {}
        app = web.Application()
        app.router.add_route("*", "/stream", self.stream)
        self.runner = web.AppRunner(app, access_log=None)
        self.url = asyncio.run_coroutine_threadsafe(self.start(), self.loop).result(30)

    async def start(self) -> str:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/stream"

    async def stream(self, request: web.Request) -> web.StreamResponse:
        upstream = self.requests.setdefault(request.query["id"], Upstream())
        if request.can_read_body:
            await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(USAGE_EVENT)
            for _ in range(int(request.query.get("events", "2"))):
                await response.write(TOKEN_EVENT)
            if request.query.get("end"):
                await response.write_eof()
                upstream.finished.set()
                return response
            deadline = time.monotonic() + UPSTREAM_LIFETIME
            while time.monotonic() < deadline:
                transport = request.transport
                if transport is None or transport.is_closing():
                    break
                if not request.query.get("quiet"):
                    await response.write(TOKEN_EVENT)
                await asyncio.sleep(0.01)
            else:
                return response  # never released: the test waiting for it fails
        except ConnectionError:
            pass  # a write found the connection closed
        upstream.released.set()
        return response

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


_ids = itertools.count()


def request(server: Server, **query: str) -> tuple[str, Upstream]:
    """A new request id's URL and its record."""
    rid = str(next(_ids))
    upstream = server.requests.setdefault(rid, Upstream())
    url = f"{server.url}?id={rid}" + "".join(f"&{k}={v}" for k, v in query.items())
    return url, upstream


def released(upstream: Upstream) -> bool:
    return upstream.released.wait(RELEASE_TIMEOUT)


def still_open(upstream: Upstream) -> bool:
    """The upstream has not seen its client go (a short look: the test's own control)."""
    return not upstream.released.wait(0.3)


async def released_soon(upstream: Upstream) -> bool:
    """``released``, from inside an event loop, which goes on running meanwhile."""
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while not upstream.released.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return upstream.released.is_set()


# --- the sources users write -----------------------------------------------------------------
# Each test keeps its own reference to the source while it checks the upstream, as a handler
# with an ``upstream`` variable does: only the stream's own close can release it then (a
# source that nothing else holds would be closed by the garbage collector anyway).

async def aiohttp_source(url: str) -> AsyncIterator[bytes]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            async for chunk in response.content.iter_any():
                yield chunk


async def httpx_source(url: str) -> AsyncIterator[bytes]:
    async with httpx.AsyncClient(timeout=None) as client:
        async with client.stream("GET", url) as response:
            async for chunk in response.aiter_bytes():
                yield chunk


def httpx_sync_source(url: str) -> Iterator[bytes]:
    with httpx.Client(timeout=None) as client:
        with client.stream("GET", url) as response:
            yield from response.iter_bytes()


SOURCES: dict[str, Callable[[str], AsyncIterator[bytes]]] = {
    "aiohttp": aiohttp_source, "httpx": httpx_source}


async def read_until(stream: AsyncIterator[bytes], expected: bytes) -> bytes:
    """Read ``stream`` until ``expected`` is in what it gave."""
    seen = b""
    async for out in stream:
        seen += out
        if expected in seen:
            return seen
    raise AssertionError(f"the stream ended before {expected!r}: {seen!r}")


# --- async: every way to stop early --------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES)
def test_aclose_releases_the_upstream(server: Server, source: str) -> None:
    url, upstream = request(server)

    async def run() -> None:
        chunks = SOURCES[source](url)
        stream = arelay_usage(chunks, PROMPT, CACHED)
        assert RELAYED_USAGE in await read_until(stream, RELAYED_USAGE)
        assert still_open(upstream)  # held, not closed: the upstream streams on
        await stream.aclose()
        assert await released_soon(upstream)

    asyncio.run(run())


@pytest.mark.parametrize("source", SOURCES)
def test_an_error_in_the_consumer_releases_the_upstream(server: Server, source: str) -> None:
    """The shape of a handler whose client went away: its write raises inside the loop and
    the stream is dropped (asyncio finalizes it, which closes it, and so the source)."""
    url, upstream = request(server)

    async def handler(chunks: AsyncIterator[bytes]) -> None:
        async for out in arelay_usage(chunks, PROMPT, CACHED):
            if TOKEN_EVENT in out:
                raise ConnectionResetError("the client went away")

    async def run() -> None:
        chunks = SOURCES[source](url)
        with pytest.raises(ConnectionResetError):
            await handler(chunks)
        assert await released_soon(upstream)

    asyncio.run(run())


@pytest.mark.parametrize("source", SOURCES)
def test_cancelling_the_task_releases_the_upstream(server: Server, source: str) -> None:
    """Cancelled while it waits for an upstream that has gone quiet."""
    url, upstream = request(server, quiet="1")

    async def run() -> None:
        chunks = SOURCES[source](url)
        stream = arelay_usage(chunks, PROMPT, CACHED)
        reading = asyncio.ensure_future(read_until(stream, b"never sent"))
        await asyncio.sleep(0.3)
        assert not reading.done()
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        assert await released_soon(upstream)
        await stream.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("source", SOURCES)
def test_the_stream_to_its_end(server: Server, source: str) -> None:
    url, upstream = request(server, events="3", end="1")

    async def run() -> bytes:
        return b"".join([out async for out in arelay_usage(SOURCES[source](url), PROMPT,
                                                           CACHED)])

    assert asyncio.run(run()) == RELAYED_USAGE + TOKEN_EVENT * 3
    # the server thread marks its end after writing it: the client can see the end first
    assert upstream.finished.wait(10)


def test_aclose_before_the_first_read_closes_the_source() -> None:
    """An async generator closed before it starts never runs its body; the stream still
    closes its source (here an object with aclose())."""
    source = Chunks([USAGE_EVENT])

    async def run() -> None:
        stream = arelay_usage(source, PROMPT)
        await stream.aclose()
        assert source.closed == 1
        assert [out async for out in stream] == []
        await stream.aclose()

    asyncio.run(run())
    assert source.closed == 1  # once


def test_athrow_before_the_first_read_closes_the_source() -> None:
    source = Chunks([USAGE_EVENT])

    async def run() -> None:
        stream = arelay_usage(source, PROMPT)
        with pytest.raises(KeyError):
            await stream.athrow(KeyError("thrown in"))
        assert source.closed == 1
        assert [out async for out in stream] == []

    asyncio.run(run())
    assert source.closed == 1


# --- async: which objects are closed, and errors ---------------------------------------------

class Chunks:
    """An async iterable whose iterator is a new async generator, with aclose() of its own
    (as a response body object has)."""

    def __init__(self, chunks: list[bytes], fail: BaseException | None = None,
                 close_fails: BaseException | None = None) -> None:
        self.chunks, self.fail, self.close_fails = chunks, fail, close_fails
        self.closed = 0
        self.iterators: list[Any] = []

    def __aiter__(self) -> AsyncIterator[bytes]:
        iterator = self._iterate()
        self.iterators.append(iterator)
        return iterator

    async def _iterate(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            await asyncio.sleep(0)
            yield chunk
        if self.fail is not None:
            raise self.fail

    async def aclose(self) -> None:
        self.closed += 1
        if self.close_fails is not None:
            raise self.close_fails


def test_the_iterator_and_the_iterable_are_closed() -> None:
    source = Chunks([USAGE_EVENT, TOKEN_EVENT, TOKEN_EVENT])

    async def run() -> None:
        stream = arelay_usage(source, PROMPT, CACHED)
        assert await stream.__anext__() == RELAYED_USAGE
        await stream.aclose()

    asyncio.run(run())
    assert source.closed == 1
    (iterator,) = source.iterators
    assert iterator.ag_frame is None  # the generator the stream took was closed too


def test_an_error_from_the_source_propagates_and_the_source_is_closed() -> None:
    source = Chunks([USAGE_EVENT], fail=OSError("upstream reset"))

    async def run() -> list[bytes]:
        outs = []
        with pytest.raises(OSError, match="upstream reset"):
            async for out in arelay_usage(source, PROMPT, CACHED):
                outs.append(out)
        return outs

    assert asyncio.run(run()) == [RELAYED_USAGE]
    assert source.closed == 1


def test_an_error_from_aclose_propagates() -> None:
    source = Chunks([USAGE_EVENT, TOKEN_EVENT], close_fails=RuntimeError("close failed"))

    async def run() -> None:
        stream = arelay_usage(source, PROMPT)
        await stream.__anext__()
        with pytest.raises(RuntimeError, match="close failed"):
            await stream.aclose()

    asyncio.run(run())
    assert source.closed == 1


class SlowChunks(Chunks):
    """After its chunks, waits (a quiet upstream); its aclose() can be made to wait too."""

    def __init__(self, chunks: list[bytes], slow_close: bool = False) -> None:
        super().__init__(chunks)
        self.slow_close = slow_close
        self.closing: asyncio.Event | None = None  # made in the test's loop (3.9 binds one)

    async def _iterate(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        await asyncio.sleep(UPSTREAM_LIFETIME)

    async def aclose(self) -> None:
        self.closed += 1
        if self.slow_close:
            assert self.closing is not None
            self.closing.set()
            await asyncio.sleep(UPSTREAM_LIFETIME)


def test_cancelling_the_task_closes_the_source() -> None:
    """The source's own iterator ends with the CancelledError; its aclose() is still called,
    and the CancelledError reaches the task."""
    source = SlowChunks([USAGE_EVENT])

    async def run() -> None:
        stream = arelay_usage(source, PROMPT)
        assert await stream.__anext__()
        waiting = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert source.closed == 1
        await stream.aclose()

    asyncio.run(run())
    assert source.closed == 1


def test_a_cancellation_during_aclose_propagates() -> None:
    """Closing is not shielded from a cancellation of its own: it propagates."""
    source = SlowChunks([USAGE_EVENT], slow_close=True)

    async def run() -> None:
        source.closing = asyncio.Event()
        stream = arelay_usage(source, PROMPT)
        await stream.__anext__()
        closing = asyncio.ensure_future(stream.aclose())
        await asyncio.wait_for(source.closing.wait(), RELEASE_TIMEOUT)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing

    asyncio.run(run())
    assert source.closed == 1


def test_bad_arguments_fail_at_the_call_and_leave_the_source_alone() -> None:
    source = Chunks([USAGE_EVENT])
    with pytest.raises(TypeError, match="prompt_tokens or relay="):
        arelay_usage(source)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="async iterable"):
        arelay_usage([USAGE_EVENT], PROMPT)  # type: ignore[call-overload]
    assert source.closed == 0 and source.iterators == []


def test_the_relay_of_the_caller_keeps_its_counts_after_an_early_close() -> None:
    relay = UsageRelay(PROMPT, CACHED)
    source = Chunks([USAGE_EVENT, TOKEN_EVENT, b"data: {\"usage\""])

    async def run() -> None:
        stream = arelay_usage(source, relay=relay)
        assert await stream.__anext__() == RELAYED_USAGE
        await stream.aclose()

    asyncio.run(run())
    assert relay.counts.rewritten == 1 and source.closed == 1


# --- sync ------------------------------------------------------------------------------------

def test_sync_close_releases_the_upstream(server: Server) -> None:
    url, upstream = request(server)
    chunks = httpx_sync_source(url)
    stream = relay_usage(chunks, PROMPT, CACHED)
    assert next(stream) == RELAYED_USAGE
    assert still_open(upstream)
    stream.close()
    assert released(upstream)


def test_sync_break_releases_the_upstream(server: Server) -> None:
    """A for loop left early drops the generator, which closes it."""
    url, upstream = request(server)
    chunks = httpx_sync_source(url)
    for out in relay_usage(chunks, PROMPT, CACHED):
        if TOKEN_EVENT in out:
            break
    gc.collect()  # (CPython closes it at once; other interpreters when they collect)
    assert released(upstream)


def test_sync_error_in_the_consumer_releases_the_upstream(server: Server) -> None:
    url, upstream = request(server)
    chunks = httpx_sync_source(url)

    def handler() -> None:
        for out in relay_usage(chunks, PROMPT, CACHED):
            if TOKEN_EVENT in out:
                raise BrokenPipeError("the client went away")

    with pytest.raises(BrokenPipeError):
        handler()
    gc.collect()
    assert released(upstream)


def test_sync_stream_to_its_end(server: Server) -> None:
    url, upstream = request(server, events="2", end="1")
    assert b"".join(relay_usage(httpx_sync_source(url), PROMPT, CACHED)) == (
        RELAYED_USAGE + TOKEN_EVENT * 2)
    # the server thread marks its end after writing it: the client can see the end first
    assert upstream.finished.wait(10)


def test_sync_file_source_is_closed() -> None:
    """A file is an iterable with close(): at the end, early, and before the first read."""
    whole = io.BytesIO(USAGE_EVENT + TOKEN_EVENT)
    assert b"".join(relay_usage(whole, PROMPT, CACHED)) == RELAYED_USAGE + TOKEN_EVENT
    assert whole.closed
    early = io.BytesIO(USAGE_EVENT + TOKEN_EVENT)
    stream = relay_usage(early, PROMPT, CACHED)
    assert next(stream) == RELAYED_USAGE
    stream.close()
    assert early.closed
    unread = io.BytesIO(USAGE_EVENT)
    relay_usage(unread, PROMPT).close()
    assert unread.closed


class SyncChunks:
    def __init__(self, chunks: list[bytes], fail: BaseException | None = None,
                 close_fails: BaseException | None = None) -> None:
        self.chunks, self.fail, self.close_fails = chunks, fail, close_fails
        self.closed = 0
        self.iterators: list[Any] = []

    def __iter__(self) -> Iterator[bytes]:
        iterator = self._iterate()
        self.iterators.append(iterator)
        return iterator

    def _iterate(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.fail is not None:
            raise self.fail

    def close(self) -> None:
        self.closed += 1
        if self.close_fails is not None:
            raise self.close_fails


def test_sync_errors_propagate_and_the_source_is_closed() -> None:
    failing = SyncChunks([USAGE_EVENT], fail=OSError("upstream reset"))
    with pytest.raises(OSError, match="upstream reset"):
        list(relay_usage(failing, PROMPT, CACHED))
    assert failing.closed == 1
    stubborn = SyncChunks([USAGE_EVENT, TOKEN_EVENT], close_fails=RuntimeError("close failed"))
    stream = relay_usage(stubborn, PROMPT)
    next(stream)
    with pytest.raises(RuntimeError, match="close failed"):
        stream.close()
    assert stubborn.closed == 1
    (iterator,) = stubborn.iterators
    assert iterator.gi_frame is None


def test_sync_bad_arguments_fail_at_the_call_and_leave_the_source_alone() -> None:
    source = SyncChunks([USAGE_EVENT])
    with pytest.raises(ValueError, match="api"):
        relay_usage(source, PROMPT, api="gpt")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="not iterable"):
        relay_usage(42, PROMPT)  # type: ignore[call-overload]
    assert source.closed == 0 and source.iterators == []


# --- the README's Starlette app --------------------------------------------------------------

MARKER = "<!-- tests/test_stream_close.py runs the next block -->"


def readme_app() -> ModuleType:
    """The README's Starlette block, executed as written into a module of its own."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\n```python\n(.*?)\n```\n", text, re.S)
    assert found, "the README's Starlette block is gone"
    module = ModuleType("readme_starlette_app")
    exec(compile(found.group(1), "README.md (Starlette app)", "exec"), module.__dict__)
    return module


class AsgiClient:
    """What an ASGI server does for one POST whose client goes away after ``reads`` body
    messages: before spec 2.4 ``receive`` then gives ``http.disconnect`` and ``send``
    does nothing; from 2.4 on ``send`` raises an ``OSError``."""

    def __init__(self, spec: str, reads: int) -> None:
        self.spec, self.reads = spec, reads
        self.bodies: list[bytes] = []
        self.gone = asyncio.Event()
        self.requested = False

    async def receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b'{"messages":[]}', "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.gone.is_set():
            if self.spec >= "2.4":
                raise OSError("the client went away")
            return
        if message["type"] == "http.response.body" and message.get("body"):
            self.bodies.append(message["body"])
            if len(self.bodies) >= self.reads:
                self.gone.set()

    async def post(self, app: Any, path: str) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": self.spec},
                 "http_version": "1.1", "method": "POST", "scheme": "http", "path": path,
                 "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"content-type", b"application/json")],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
        from starlette.requests import ClientDisconnect

        try:
            await app(scope, self.receive, self.send)
        except (OSError, ClientDisconnect):  # a server swallows these
            pass


@pytest.mark.parametrize(("spec", "quiet"), [("2.3", False), ("2.4", False), ("2.3", True)],
                         ids=["2.3-streaming", "2.4-streaming", "2.3-quiet"])
def test_readme_starlette_app_releases_the_upstream(server: Server, spec: str,
                                                    quiet: bool) -> None:
    """The client goes away while the upstream streams on (the relay stream is then between
    reads, or in ``send``), or after the upstream has gone quiet (the stream waits in the
    upstream read, where Starlette's cancellation lands). Under spec 2.4 Starlette does not
    listen for the disconnect: it learns of it from the next ``send``, so a quiet upstream
    keeps the request until it sends again, the app's way, not the relay's."""
    app = readme_app()
    url, upstream = request(server, **({"quiet": "1", "events": "0"} if quiet else {}))
    app.GENERATION_URL = url

    async def counts(body: Any) -> tuple[int, int]:
        return PROMPT, CACHED

    app.run_context_phase = counts
    bodies: list[bytes] = []

    async def run() -> None:
        client = AsgiClient(spec, reads=2 if not quiet else 1)  # (3.9: events in their loop)
        client.bodies = bodies
        try:
            await asyncio.wait_for(client.post(app.app, "/v1/chat/completions"), 30)
            assert released(upstream)
        finally:
            await app.client.aclose()

    asyncio.run(run())
    assert bodies[0] == RELAYED_USAGE


def test_a_plain_streaming_response_leaves_the_upstream_open(server: Server) -> None:
    """The control, and why the README's app closes its stream: with a plain
    ``StreamingResponse`` and a 2.4 server, nothing closes the relay stream when the client
    goes away, so the upstream stays open for as long as anything holds the response (here
    the test; a traceback or a middleware can), until the stream is closed."""
    from starlette.responses import StreamingResponse

    url, upstream = request(server)

    async def run() -> None:
        async with httpx.AsyncClient(timeout=None) as http:
            async def source() -> AsyncIterator[bytes]:
                async with http.stream("GET", url) as response:
                    async for chunk in response.aiter_bytes():
                        yield chunk

            relayed = arelay_usage(source(), PROMPT, CACHED)
            plain = StreamingResponse(relayed, media_type="text/event-stream")
            await AsgiClient("2.4", reads=2).post(plain, "/")
            gc.collect()
            assert still_open(upstream)
            await relayed.aclose()
            assert released(upstream)

    asyncio.run(run())

