"""What the integration tests share: the clients a test opened (the openai and anthropic
clients, httpx's), which tests/integration/conftest.py closes when the test ends; the fronts
a module serves (aiohttp apps, ASGI apps under uvicorn), stopped when it ends; and an ASGI
server's side of one request, driven by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # (the frameworks imported where used: the conftest imports this module)
    from aiohttp import web

C = TypeVar("C")

#: kept by ``kept``, closed by the conftest after each test
OPEN: list[Any] = []


def kept(client: C) -> C:
    """``client``, to be closed when the test ends."""
    OPEN.append(client)
    return client


class Fronts:
    """The servers a test module runs on its loop: each ``serve_*`` (awaited on that loop)
    starts one on a free loopback port and gives its URL; ``stop()`` stops them all, the
    last started first."""

    def __init__(self) -> None:
        self.stops: list[Callable[[], Awaitable[None]]] = []

    async def serve_aiohttp(self, app: web.Application, **options: Any) -> str:
        """An aiohttp app (``options``: ``web.AppRunner``'s, as ``handler_cancellation``)."""
        from aiohttp import web

        runner = web.AppRunner(app, access_log=None, **options)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.stops.append(runner.cleanup)
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]

    async def serve_asgi(self, app: Any) -> str:
        """An ASGI app (Starlette, FastAPI) under uvicorn."""
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off",
                                log_config=None, log_level="debug", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.ensure_future(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)

        async def stop() -> None:
            server.should_exit = True
            await task

        self.stops.append(stop)
        return f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        while self.stops:
            await self.stops.pop()()


class AsgiClient:
    """What an ASGI server does for one POST whose client goes away after ``reads`` body
    messages: before spec 2.4 ``receive`` then gives ``http.disconnect`` and ``send``
    does nothing; from 2.4 on ``send`` raises an ``OSError`` (uvicorn does not use that
    convention, hence this)."""

    def __init__(self, spec: str, reads: int) -> None:
        self.spec, self.reads = spec, reads
        self.bodies: list[bytes] = []
        self.gone = asyncio.Event()
        self.requested = False

    async def receive(self) -> dict[str, Any]:
        if not self.requested:
            self.requested = True
            return {"type": "http.request", "body": b"{}", "more_body": False}
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

    def scope(self, path: str = "/") -> dict[str, Any]:
        return {"type": "http", "asgi": {"version": "3.0", "spec_version": self.spec},
                "http_version": "1.1", "method": "POST", "scheme": "http", "path": path,
                "raw_path": path.encode(), "query_string": b"", "root_path": "",
                "headers": [], "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
