"""relay_usage / arelay_usage close their source, however the stream ends.

The upstream is a real aiohttp server on loopback that streams SSE and records when its
client goes away; the sources are what users write: a generator holding an aiohttp or httpx
response in its ``async with`` (``with``) block. Each way a consumer can stop is tried: the
stream closed early, dropped after an error in the consumer, its task cancelled while it
waits for the upstream, closed before its first read, and run to its end (the upstream is
tests/_upstream.py; the framework adapters built on these helpers are tested in
tests/integration/test_adapters.py). Every case runs on the twin that loaded.
"""

from __future__ import annotations

import asyncio
import gc
import io
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import httpx
import pytest
from _upstream import (
    CACHED,
    PROMPT,
    RELAYED_USAGE,
    RELEASE_TIMEOUT,
    TOKEN_EVENT,
    UPSTREAM_LIFETIME,
    USAGE_EVENT,
    Server,
    Upstream,
    released,
    released_soon,
    still_open,
)

from tokcore import UsageRelay, arelay_usage, relay_usage


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


def request(server: Server, **query: str) -> tuple[str, Upstream]:
    return server.request(**query)


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
        # the upstream's first event read before the task starts: a task cancelled before
        # its request reached the server (an httpx client's set-up alone can take longer
        # than a fixed wait under ASan on a loaded machine) has no upstream to release
        assert RELAYED_USAGE in await read_until(stream, RELAYED_USAGE)
        reading = asyncio.ensure_future(read_until(stream, b"never sent"))
        await asyncio.sleep(0.3)  # the task reads the rest and waits for the quiet upstream
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
