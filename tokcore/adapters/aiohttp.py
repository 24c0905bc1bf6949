"""aiohttp: stream an upstream response to a client through the relay.

::

    from tokcore.adapters.aiohttp import relay_response

    async def chat(request: web.Request) -> web.StreamResponse:
        async with session.post(GENERATION_URL, json=body) as upstream:
            return await relay_response(request, upstream, prompt_tokens, cached_tokens)

The ``ClientSession`` is the caller's (one for the application, not one per request).
However the stream ends, the upstream response is released or closed before
``relay_response`` returns, and nothing is logged with a traceback:

- the upstream's end: the relay's rest written, the response ended, the upstream released;
- the client goes away: the upstream is closed at once (its worker sees the connection go
  and can stop generating), one DEBUG line is logged, and the prepared response is returned
  (aiohttp expects the handler to return it);
- the upstream fails mid-stream (reset, timeout): an error event in the API's shape
  (:func:`tokcore.adapters.errors.stream_error_event`) ends the stream, which the official
  clients raise as an error; one WARNING line names the failure;
- the handler is cancelled: the upstream is closed, the cancellation propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiohttp import ClientError, ClientResponse, web

from .._args import Api
from .._sse import UsageRelay
from .._sse_py import DEFAULT_MAX_EVENT_BYTES
from ..relay import _relay, arelay_usage
from .errors import stream_error_event

__all__ = ["SSE_HEADERS", "relay_response"]

#: the headers of a relayed stream unless the caller gives its own
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
log = logging.getLogger("tokcore.adapters")


async def relay_response(request: web.BaseRequest, upstream: ClientResponse,
                         prompt_tokens: int | None = None, cached_tokens: int | None = None,
                         *, api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                         relay: UsageRelay | None = None, status: int = 200,
                         headers: Mapping[str, str] | None = None) -> web.StreamResponse:
    """Relay ``upstream``'s body to the client of ``request`` with usage rewritten, and
    return the prepared ``StreamResponse``. Give the counts or ``relay=`` (as
    ``arelay_usage``); the arguments are checked before anything is sent."""
    usage_relay = _relay(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    stream = arelay_usage(upstream.content.iter_any(), relay=usage_relay)
    response = web.StreamResponse(status=status, headers=SSE_HEADERS if headers is None
                                  else headers)
    finished = False
    try:
        await response.prepare(request)
        while True:
            try:
                out = await stream.__anext__()
            except StopAsyncIteration:
                break
            except (TimeoutError, ClientError, OSError) as error:
                log.warning("upstream %s failed mid-stream: %s: %s", upstream.url,
                            type(error).__name__, error)
                await response.write(stream_error_event(api))
                break
            await response.write(out)
        await response.write_eof()
        finished = True
    except ConnectionResetError:  # aiohttp's ClientConnectionResetError: the client is gone
        log.debug("the client of %s went away mid-stream", request.path)
    finally:
        try:
            await stream.aclose()
        finally:
            if finished and upstream.content.at_eof():
                upstream.release()
            else:
                upstream.close()  # unread data: the connection cannot be reused
    return response
