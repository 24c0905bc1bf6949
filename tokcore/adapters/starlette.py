"""Starlette and FastAPI: relay an upstream's whole answer as a response.

::

    from tokcore.adapters.starlette import relay_answer

    async def chat(request: Request) -> Response:
        body = await request.body()
        return await relay_answer(client, "POST", GENERATION_URL, prompt_tokens,
                                  cached_tokens, upstream="the generation worker",
                                  content=body)

``relay_answer`` sends the request with the application's client (an ``httpx.AsyncClient``,
or an ``aiohttp.ClientSession``: the lighter one per request, see the docs' benchmarks) and
returns the response for whatever came back (:mod:`tokcore.adapters.answer`): a
``RelayResponse`` for an event stream, a ``Response`` for a whole body (usage rewritten) or
an error in the API's shape. A FastAPI route returns it as it is.

``RelayResponse(stream)`` takes any async iterator of bytes with ``aclose()``: what
:func:`tokcore.adapters.httpx.aopen_relay` or :func:`tokcore.arelay_usage` return. A
``StreamingResponse`` does not close its body iterator when the client goes away (under ASGI
spec 2.4 nothing does; under 2.3 only a stream waiting for the upstream is cancelled), so
the upstream would stay open for as long as anything holds the response. ``RelayResponse``
closes the stream when the response ends, whichever way:

- the end of the stream, as a ``StreamingResponse``;
- the client goes away, under either disconnect convention (``http.disconnect`` from
  ``receive``, ASGI 2.3, uvicorn's; an ``OSError`` from ``send``, 2.4): the stream is
  closed, one DEBUG line is logged, and the response returns quietly (no
  ``ClientDisconnect`` for the server to log);
- the upstream fails mid-stream: an error event in ``api``'s shape ends the body
  (:func:`tokcore.adapters.errors.stream_error_event`), one WARNING line names the failure;
- the task is cancelled: the stream is closed, the cancellation propagates.

``EventStreamResponse(frames)`` is the same for a server's own stream: the bytes of a
:class:`tokcore.StreamWriter`, from an async generator of the server's, sent as they are::

    async def chat(request: Request) -> Response:
        writer = tokcore.StreamWriter(SHAPE, id=request_id, model=model)

        async def frames() -> AsyncIterator[bytes]:
            yield writer.write("start")
            async for text in engine(request):
                yield writer.text(text)
            yield writer.done()

        return EventStreamResponse(frames())
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from .._args import Api
from ..stream import DEFAULT_MAX_EVENT_BYTES, RelayCounts, UsageRelay
from .answer import AnswerStream, AsyncAnswer, Completion, CompletionHook, check_hook, report
from .client import aopen_answer as _open_any
from .errors import stream_error_event
from .frames import FRAME_HEADERS, Frames, FrameSource

__all__ = ["AnswerResponse", "ClosableStream", "EventStreamResponse", "RelayResponse",
           "answer_response", "relay_answer"]

log = logging.getLogger("tokcore.adapters")


class ClosableStream(Protocol):
    """An async iterable of bytes that can be closed (``aclose()``)."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        """The iterator of the stream's byte chunks."""
        ...

    async def aclose(self) -> None:
        """Close the stream and what it reads from (again: nothing happens)."""
        ...


class RelayResponse(StreamingResponse):
    """An event-stream response that closes ``stream`` however it ends; ``api`` names the
    shape of the error event sent if the upstream fails mid-stream. ``on_complete`` is called
    once the response has ended, with the counts of ``relay`` (by default the stream's
    ``relay`` attribute, which the adapters' streams have; all zero without one)."""

    #: what the WARNING line of a failure mid-stream names
    _source_name = "the upstream"

    def __init__(self, stream: ClosableStream, *, api: Api = "chat", status_code: int = 200,
                 headers: Mapping[str, str] | None = None,
                 media_type: str = "text/event-stream",
                 background: BackgroundTask | None = None,
                 on_complete: CompletionHook | None = None,
                 relay: UsageRelay | None = None) -> None:
        check_hook(on_complete)
        super().__init__(stream, status_code=status_code, headers=headers,
                         media_type=media_type, background=background)
        self.stream = stream
        self.api: Api = api
        self.relay = relay if relay is not None else getattr(stream, "relay", None)
        self.on_complete = on_complete
        self._sent = 0
        self._ended = False  # the body was sent to its end (the source's or an error event)
        self._failed: str | None = None

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        # an adapter's stream is read through its relay directly: no wrapper per chunk
        stream = self.stream
        iterator = stream.chunks if isinstance(stream, AnswerStream) else stream.__aiter__()
        while True:
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as error:  # the source's: the relay never raises on data
                self._failed = type(error).__name__
                log.warning("%s failed mid-stream: %s: %s", self._source_name, self._failed,
                            error)
                event = stream_error_event(self.api)
                await send({"type": "http.response.body", "more_body": True, "body": event})
                self._sent += len(event)
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            self._sent += len(chunk)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        self._ended = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (ClientDisconnect, OSError):  # ASGI 2.4: a send after the client went away
            log.debug("the client of %s went away mid-stream", scope.get("path"))
        else:
            if not self._ended:  # ASGI 2.3: the disconnect listener cancelled the stream
                log.debug("the client of %s went away mid-stream", scope.get("path"))
        finally:
            try:
                await self.stream.aclose()
            finally:
                counts = self.relay.counts if self.relay is not None else RelayCounts()
                await report(self.on_complete, Completion(
                    self.api, self.status_code, counts, not self._ended, self._sent, True,
                    self._failed))


class EventStreamResponse(RelayResponse):
    """A server's own event stream: the frames of ``frames`` (an async or sync iterable of
    the bytes a :class:`tokcore.StreamWriter` wrote: an async generator, most often) sent as
    they are, as ``text/event-stream`` with ``Cache-Control: no-cache`` and
    ``X-Accel-Buffering: no`` (``headers`` are added). However the response ends, the
    frames' source is closed (an async generator's ``finally`` runs): its end; the client
    going away (one DEBUG line, under either ASGI disconnect convention); an exception in
    the source (an error event in ``api``'s shape ends the stream, one WARNING line, no
    traceback); a cancellation (propagated). ``on_complete`` is called once it has ended
    (its ``counts`` all zero: nothing is relayed).

    Raises ``TypeError`` for ``frames`` that are not an iterable (or are ``bytes`` or
    ``str``) and for an ``on_complete`` that is not callable; a frame that is not bytes
    ends the stream as an exception in the source does."""

    _source_name = "the stream's frames"

    def __init__(self, frames: FrameSource, *, api: Api = "chat", status_code: int = 200,
                 headers: Mapping[str, str] | None = None,
                 background: BackgroundTask | None = None,
                 on_complete: CompletionHook | None = None) -> None:
        sse = {k: v for k, v in FRAME_HEADERS.items() if k != "Content-Type"}
        super().__init__(Frames(frames), api=api, status_code=status_code,
                         headers={**sse, **(headers or {})},
                         media_type=FRAME_HEADERS["Content-Type"], background=background,
                         on_complete=on_complete)


class AnswerResponse(Response):
    """A whole answer's response (a body with its usage rewritten, or an error in the API's
    shape), which calls ``on_complete`` once it is sent."""

    def __init__(self, answer: AsyncAnswer, *, headers: Mapping[str, str] | None = None,
                 on_complete: CompletionHook | None = None) -> None:
        if answer.body is None:
            raise TypeError("an AnswerResponse is a body's: a stream's is a RelayResponse")
        check_hook(on_complete)
        super().__init__(answer.body, status_code=answer.status,
                         headers={**answer.headers, **(headers or {})})
        self.answer = answer
        self.on_complete = on_complete

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = False
        try:
            await super().__call__(scope, receive, send)
        except OSError:  # ASGI 2.4: the client went away
            gone = True
            log.debug("the client of %s went away before its answer", scope.get("path"))
        finally:
            await report(self.on_complete, self.answer.completion(gone))


def answer_response(answer: AsyncAnswer, *, headers: Mapping[str, str] | None = None,
                    on_complete: CompletionHook | None = None) -> Response:
    """The response that sends ``answer`` (from an ``aopen_answer``): a ``RelayResponse``
    for a stream, an ``AnswerResponse`` for a body; ``headers`` are added to the answer's."""
    if answer.stream is not None:
        return RelayResponse(answer.stream, api=answer.api, status_code=answer.status,
                             headers={**answer.headers, **(headers or {})},
                             on_complete=on_complete)
    return AnswerResponse(answer, headers=headers, on_complete=on_complete)


async def relay_answer(client: Any, method: str, url: Any, prompt_tokens: int,
                       cached_tokens: int | None = None, *, api: Api = "chat",
                       upstream: str | None = None, answer_timeout: float | None = None,
                       on_complete: CompletionHook | None = None,
                       max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                       response_headers: Mapping[str, str] | None = None,
                       **options: Any) -> Response:
    """Send ``method url`` with ``client`` (an ``httpx.AsyncClient`` or an
    ``aiohttp.ClientSession``; ``options``: its request arguments, ``content=``/``data=``,
    ``json=``, ``headers=`` ...) and return the response that relays the whole answer (the
    rules in :mod:`tokcore.adapters.answer`). ``upstream`` names the upstream in the
    client's error messages (default: its scheme, host and port); ``answer_timeout``:
    seconds for the answer to begin (a whole body: to arrive), a 504 beyond;
    ``response_headers`` are added to the answer's; ``on_complete`` is called once the
    answer is sent, however it ended. The arguments are checked before the request is sent;
    nothing the upstream does raises."""
    check_hook(on_complete)
    answer = await _open_any(client, method, url, prompt_tokens, cached_tokens, api=api,
                             upstream=upstream, answer_timeout=answer_timeout,
                             max_event_bytes=max_event_bytes, **options)
    return answer_response(answer, headers=response_headers, on_complete=on_complete)
