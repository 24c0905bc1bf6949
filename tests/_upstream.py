"""A real SSE upstream on loopback for the stream and adapter tests.

An aiohttp server on its own event loop in a thread (other servers may share that loop:
``Server.run``). ``/stream?id=X&events=N`` sends the usage event and N token events, then:
``end=1`` ends the stream; ``fail=1`` aborts the connection (an upstream that dies
mid-stream); ``quiet=1`` sends nothing more (a worker that is slow to answer); else a token
event every 10 ms, for ``lifetime`` seconds at most. ``status=N`` answers N with a JSON
error body instead. Until its lifetime ends, it watches its client's connection and records
when it is closed, and when it is done with the request (``served``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from aiohttp import web

PROMPT, CACHED = 40, 32
USAGE_EVENT = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n'
RELAYED_USAGE = (b'data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,'
                 b'"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}\n\n')
TOKEN_EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
#: how long an upstream may take to see its client go: generous for a loaded machine
RELEASE_TIMEOUT = 20.0
#: an upstream streams at most this long, so that a test that fails still ends
UPSTREAM_LIFETIME = 60.0
T = TypeVar("T")


class Upstream:
    """One request to the upstream server, as the server saw it."""

    def __init__(self) -> None:
        self.started = threading.Event()  # the request arrived
        self.released = threading.Event()  # the client went away (its connection closed)
        self.finished = threading.Event()  # the stream was sent to its end
        self.served = threading.Event()  # the server is done with it (no connection left)


class Server:
    """The upstream, on 127.0.0.1; ``url`` is its ``/stream`` URL."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.requests: dict[str, Upstream] = {}
        self._ids = itertools.count()
        app = web.Application()
        app.router.add_route("*", "/stream", self.stream)
        self.runner = web.AppRunner(app, access_log=None)
        self.url = self.run(self.start())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the server's loop; its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    async def start(self) -> str:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/stream"

    def request(self, **query: str) -> tuple[str, Upstream]:
        """A new request id's URL and its record."""
        rid = str(next(self._ids))
        upstream = self.requests.setdefault(rid, Upstream())
        url = f"{self.url}?id={rid}" + "".join(f"&{k}={v}" for k, v in query.items())
        return url, upstream

    async def stream(self, request: web.Request) -> web.StreamResponse:
        upstream = self.requests.setdefault(request.query.get("id", ""), Upstream())
        upstream.started.set()
        if request.can_read_body:
            await request.read()
        try:
            if "status" in request.query:
                upstream.finished.set()
                return web.json_response({"error": "refused"},
                                         status=int(request.query["status"]))
            return await self._stream(request, upstream)
        finally:
            upstream.served.set()

    async def _stream(self, request: web.Request, upstream: Upstream) -> web.StreamResponse:
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
            if request.query.get("fail"):
                await asyncio.sleep(0.05)  # let the events reach the client first
                assert request.transport is not None
                request.transport.abort()  # the worker died mid-stream
                upstream.finished.set()
                return response
            deadline = time.monotonic() + float(request.query.get("lifetime",
                                                                  UPSTREAM_LIFETIME))
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
        self.run(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def released(upstream: Upstream) -> bool:
    return upstream.released.wait(RELEASE_TIMEOUT)


def served(upstream: Upstream) -> bool:
    """The server is done with the request: nothing of it is left open there."""
    return upstream.served.wait(RELEASE_TIMEOUT)


def still_open(upstream: Upstream) -> bool:
    """The upstream has not seen its client go (a short look: the test's own control)."""
    return not upstream.released.wait(0.3)


async def released_soon(upstream: Upstream) -> bool:
    """``released``, from inside an event loop, which goes on running meanwhile."""
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while not upstream.released.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return upstream.released.is_set()
