"""Starlette and FastAPI: a streaming response that owns its relayed stream.

::

    from tokcore.adapters.httpx import aopen_relay
    from tokcore.adapters.starlette import RelayResponse

    async def chat(request: Request) -> Response:
        stream = await aopen_relay(client, "POST", GENERATION_URL, prompt_tokens,
                                   cached_tokens, json=body)
        return RelayResponse(stream)

``RelayResponse(stream)`` takes any async iterator of bytes with ``aclose()``: what
:func:`tokcore.adapters.httpx.aopen_relay` or :func:`tokcore.arelay_usage` return. A
``StreamingResponse`` does not close its body iterator when the client goes away (under ASGI
spec 2.4 nothing does; under 2.3 only a stream waiting for the upstream is cancelled), so
the upstream would stay open for as long as anything holds the response. ``RelayResponse``
closes the stream when the response ends, whichever way:

- the end of the stream, as a ``StreamingResponse``;
- the client goes away, under either disconnect convention (``http.disconnect`` from
  ``receive``, ASGI 2.3; an ``OSError`` from ``send``, 2.4): the stream is closed, one DEBUG
  line is logged, and the response returns quietly (no ``ClientDisconnect`` for the server
  to log);
- the upstream fails mid-stream: an error event in ``api``'s shape ends the body
  (:func:`tokcore.adapters.errors.stream_error_event`), one WARNING line names the failure;
- the task is cancelled: the stream is closed, the cancellation propagates.

FastAPI's ``StreamingResponse`` is Starlette's: return a ``RelayResponse`` from a route.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .._args import Api
from .errors import stream_error_event

__all__ = ["ClosableStream", "RelayResponse"]

log = logging.getLogger("tokcore.adapters")


class ClosableStream(Protocol):
    """An async iterable of bytes that can be closed (``aclose()``)."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


class RelayResponse(StreamingResponse):
    """An event-stream response that closes ``stream`` however it ends; ``api`` names the
    shape of the error event sent if the upstream fails mid-stream."""

    def __init__(self, stream: ClosableStream, *, api: Api = "chat", status_code: int = 200,
                 headers: Mapping[str, str] | None = None,
                 media_type: str = "text/event-stream",
                 background: BackgroundTask | None = None) -> None:
        super().__init__(stream, status_code=status_code, headers=headers,
                         media_type=media_type, background=background)
        self.stream = stream
        self.api: Api = api

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        iterator = self.stream.__aiter__()
        while True:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as error:  # the source's: the relay never raises on data
                log.warning("the upstream failed mid-stream: %s: %s", type(error).__name__,
                            error)
                await send({"type": "http.response.body", "more_body": True,
                            "body": stream_error_event(self.api)})
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (ClientDisconnect, OSError):  # ASGI 2.4: a send after the client went away
            log.debug("the client of %s went away mid-stream", scope.get("path"))
        finally:
            await self.stream.aclose()
