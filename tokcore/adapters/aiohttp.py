"""aiohttp: relay an upstream's whole answer to a client, as a server and as a client.

::

    from tokcore.adapters.aiohttp import relay_answer

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        return await relay_answer(request, session, "POST", GENERATION_URL, prompt_tokens,
                                  cached_tokens, upstream="the generation worker", data=body)

``relay_answer`` sends the request with the application's ``ClientSession`` (or an
``httpx.AsyncClient``) and relays whatever comes back (:mod:`tokcore.adapters.answer`): an
event stream through the relay, a whole JSON body with its usage rewritten, an error status
in the API's shape, an upstream that cannot be reached or does not answer in time as a 502
or a 504. ``aopen_answer`` is its client half (for Starlette and FastAPI on aiohttp's
client); ``relay_response`` streams a ``ClientResponse`` the caller opened.

However a stream ends, the upstream response is released or closed before the call
returns, and nothing is logged with a traceback:

- the upstream's end: the relay's rest written, the response ended, the upstream released;
- the client goes away: the upstream is closed at once (its worker sees the connection go
  and can stop generating), one DEBUG line is logged, and the prepared response is returned
  (aiohttp expects the handler to return it);
- the upstream fails mid-stream (reset, timeout): an error event in the API's shape
  (:func:`tokcore.adapters.errors.stream_error_event`) ends the stream, which the official
  clients raise as an error; one WARNING line names the failure;
- the handler is cancelled: the upstream is closed, the cancellation propagates.

``send_frames(request, frames)`` is the same for a server's own stream: the bytes of a
:class:`tokcore.StreamWriter`, from an async generator of the server's, written as they are
to a ``StreamResponse`` (the same ends, its source closed however it ends).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from aiohttp import ClientResponse, web
from yarl import URL

from .._args import Api
from ..stream import DEFAULT_MAX_EVENT_BYTES, RelayCounts, UsageRelay, relay_of
from ._aiohttp_client import _Body, aopen_answer
from .answer import (
    SSE_HEADERS,
    AnswerStream,
    AsyncAnswer,
    Completion,
    CompletionHook,
    check_hook,
    report,
)
from .client import aopen_answer as _open_any
from .errors import stream_error_event
from .frames import FRAME_HEADERS, Frames, FrameSource

__all__ = ["SSE_HEADERS", "aopen_answer", "relay_answer", "relay_response", "send_answer",
           "send_frames"]

log = logging.getLogger("tokcore.adapters")


async def relay_answer(request: web.BaseRequest, client: Any, method: str, url: str | URL,
                       prompt_tokens: int, cached_tokens: int | None = None, *,
                       api: Api = "chat", upstream: str | None = None,
                       answer_timeout: float | None = None,
                       on_complete: CompletionHook | None = None,
                       max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                       response_headers: Mapping[str, str] | None = None,
                       **options: Any) -> web.StreamResponse:
    """Send ``method url`` with ``client`` (the application's ``aiohttp.ClientSession``, or
    an ``httpx.AsyncClient``; ``options``: its request arguments) and relay the whole answer
    to the client of ``request`` (the rules in :mod:`tokcore.adapters.answer`); return the
    response, sent. ``upstream``, ``answer_timeout``: as :func:`aopen_answer`;
    ``response_headers`` are added to the answer's; ``on_complete`` is called once the
    answer is sent, however it ended."""
    check_hook(on_complete)
    answer = await _open_any(client, method, url, prompt_tokens, cached_tokens, api=api,
                             upstream=upstream, answer_timeout=answer_timeout,
                             max_event_bytes=max_event_bytes, **options)
    return await send_answer(request, answer, on_complete=on_complete,
                             response_headers=response_headers)


async def send_answer(request: web.BaseRequest, answer: AsyncAnswer, *,
                      on_complete: CompletionHook | None = None,
                      response_headers: Mapping[str, str] | None = None) -> web.StreamResponse:
    """Send ``answer`` (from an ``aopen_answer``) to the client of ``request``; return the
    response, sent. The stream is closed however it ends."""
    headers = {**answer.headers, **(response_headers or {})}
    if answer.stream is not None:
        return await _send_stream(request, answer.stream, answer.status, headers, on_complete)
    response = web.Response(status=answer.status, body=answer.body, headers=headers)
    gone = False
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionResetError:
        gone = True
        log.debug("the client of %s went away before its answer", request.path)
    await report(on_complete, answer.completion(gone))
    return response


async def relay_response(request: web.BaseRequest, upstream: ClientResponse,
                         prompt_tokens: int | None = None, cached_tokens: int | None = None,
                         *, api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                         relay: UsageRelay | None = None, status: int = 200,
                         headers: Mapping[str, str] | None = None,
                         on_complete: CompletionHook | None = None) -> web.StreamResponse:
    """Relay ``upstream``'s body, an event stream the caller opened and checked, to the
    client of ``request`` with usage rewritten, and return the prepared
    ``StreamResponse``. Give the counts or ``relay=`` (as ``arelay_usage``); the arguments
    are checked before anything is sent. :func:`relay_answer` relays any answer."""
    usage_relay = relay_of(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    check_hook(on_complete)
    stream = AnswerStream(_Body(upstream), usage_relay, api=api, status=status,
                          upstream=f"upstream {upstream.url}")
    return await _send_stream(request, stream, status,
                              SSE_HEADERS if headers is None else headers, on_complete)


async def _send_stream(request: web.BaseRequest, stream: AnswerStream, status: int,
                       headers: Mapping[str, str],
                       on_complete: CompletionHook | None) -> web.StreamResponse:
    # the relay itself: no wrapper between the reads and the writes
    return await _send_chunks(request, stream.chunks, stream.aclose, stream.api, status,
                              headers, stream.upstream, lambda: stream.relay.counts,
                              on_complete)


async def send_frames(request: web.BaseRequest, frames: FrameSource, *, api: Api = "chat",
                      status: int = 200, headers: Mapping[str, str] | None = None,
                      on_complete: CompletionHook | None = None) -> web.StreamResponse:
    """Send a server's own event stream to the client of ``request``: the frames of
    ``frames`` (an async or sync iterable of the bytes a :class:`tokcore.StreamWriter`
    wrote: an async generator, most often) written as they are to a ``StreamResponse``
    with ``text/event-stream``, ``Cache-Control: no-cache`` and ``X-Accel-Buffering: no``
    (``headers`` are added); return it, sent. However it ends, the frames' source is closed
    (an async generator's ``finally`` runs): its end; the client going away (one DEBUG
    line); an exception in the source (an error event in ``api``'s shape ends the stream,
    one WARNING line, no traceback); a cancellation (propagated). ``on_complete`` is called
    once it has ended (its ``counts`` all zero: nothing is relayed).

    Raises ``TypeError`` for ``frames`` that are not an iterable (or are ``bytes`` or
    ``str``) and for an ``on_complete`` that is not callable, before anything is sent."""
    source = Frames(frames)
    check_hook(on_complete)
    return await _send_chunks(request, source, source.aclose, api, status,
                              {**FRAME_HEADERS, **(headers or {})}, "the stream's frames",
                              RelayCounts, on_complete)


async def _send_chunks(request: web.BaseRequest, chunks: AsyncIterator[bytes],
                       close: Callable[[], Awaitable[None]], api: Api, status: int,
                       headers: Mapping[str, str], source: str,
                       counts: Callable[[], RelayCounts],
                       on_complete: CompletionHook | None) -> web.StreamResponse:
    response = web.StreamResponse(status=status, headers=headers)
    sent, finished, failed = 0, False, None
    try:
        await response.prepare(request)
        while True:
            try:
                out = await chunks.__anext__()
            except StopAsyncIteration:
                break
            except Exception as error:  # the source's: the relay never raises on data
                failed = type(error).__name__
                log.warning("%s failed mid-stream: %s: %s", source, failed, error)
                event = stream_error_event(api)
                await response.write(event)
                sent += len(event)
                break
            await response.write(out)
            sent += len(out)
        await response.write_eof()
        finished = True
    except ConnectionResetError:  # aiohttp's ClientConnectionResetError: the client is gone
        log.debug("the client of %s went away mid-stream", request.path)
    finally:
        try:
            await close()
        finally:
            await report(on_complete, Completion(api, status, counts(), not finished, sent,
                                                 True, failed))
    return response
