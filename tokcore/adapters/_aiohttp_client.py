"""aiohttp's client half: an upstream's whole answer opened with a ``ClientSession``.

``tokcore.adapters.aiohttp`` gives it as ``aopen_answer`` beside the server half; it lives
here so that :mod:`tokcore.adapters.client`, which the server halves call with either client,
imports it without importing a server adapter back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import ClientError, ClientResponse, ClientSession
from yarl import URL

from .._args import Api
from ..stream import DEFAULT_MAX_EVENT_BYTES, UsageRelay
from .answer import (
    SSE_HEADERS,
    AnswerStream,
    AsyncAnswer,
    CompletionHook,
    body_answer,
    check_hook,
    error_headers,
    is_event_stream,
    is_success,
    report,
    upstream_name,
)
from .errors import ERROR_BODY_LIMIT, failed_upstream

__all__ = ["aopen_answer"]

log = logging.getLogger("tokcore.adapters")


class _Body:
    """An upstream ``ClientResponse``'s body as the relay's source: its chunks as they
    arrive; closing it releases the connection when the body was read to its end and closes
    it otherwise (unread data: the worker sees its client go)."""

    __slots__ = ("upstream",)

    def __init__(self, upstream: ClientResponse) -> None:
        self.upstream = upstream

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.upstream.content.iter_any().__aiter__()

    async def aclose(self) -> None:
        if self.upstream.content.at_eof():
            self.upstream.release()
        else:
            self.upstream.close()


async def _read_error_body(upstream: ClientResponse) -> bytes:
    """At most ``ERROR_BODY_LIMIT`` bytes of an error answer's body (the rest is dropped)."""
    parts, size = [], 0
    async for chunk in upstream.content.iter_any():
        parts.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_LIMIT:
            break
    return b"".join(parts)[:ERROR_BODY_LIMIT]


async def aopen_answer(session: ClientSession, method: str, url: str | URL,
                       prompt_tokens: int, cached_tokens: int | None = None, *,
                       api: Api = "chat", upstream: str | None = None,
                       answer_timeout: float | None = None,
                       on_complete: CompletionHook | None = None,
                       max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                       **request: Any) -> AsyncAnswer:
    """Send ``method url`` with ``session`` (``request``: ``session.request``'s arguments:
    ``data=``, ``json=``, ``headers=``, ``timeout=`` ...) and make its answer ready for the
    client (:class:`~tokcore.adapters.answer.AsyncAnswer`, the rules in
    :mod:`tokcore.adapters.answer`). ``upstream`` names the upstream in the client's error
    messages (default: its scheme, host and port); ``answer_timeout``: seconds for the answer
    to begin (a whole body: to arrive), a 504 beyond, on top of the session's own timeouts.
    The arguments are checked before the request is sent; nothing the upstream does raises.
    ``on_complete`` is called once the answer is relayed: a body's at once (it is whole),
    a stream's when it ends or is closed."""
    relay = UsageRelay(prompt_tokens, cached_tokens, api=api, max_event_bytes=max_event_bytes)
    check_hook(on_complete)
    name = upstream or upstream_name(url)
    response: ClientResponse | None = None
    body: bytes | None = None
    try:
        async with asyncio.timeout(answer_timeout):
            response = await session.request(method, url, **request)
            if not (is_success(response.status)
                    and is_event_stream(response.headers.get("Content-Type"))):
                body = (await response.read() if is_success(response.status)
                        else await _read_error_body(response))
                await _Body(response).aclose()
    except (TimeoutError, ClientError, OSError) as error:
        if response is not None:
            response.close()
        log.warning("%s (%s %s) gave no answer: %s: %s", name, method, url,
                    type(error).__name__, error)
        status, error_body = failed_upstream(api, error, name)
        answer = AsyncAnswer(api, status, error_headers(None), body=error_body,
                             upstream_error=type(error).__name__)
    except BaseException:
        if response is not None:
            response.close()
        raise
    else:
        status = response.status
        if body is None:  # a 2xx event stream
            return AsyncAnswer(api, status, SSE_HEADERS, upstream_status=status,
                               stream=AnswerStream(_Body(response), relay, api=api,
                                                   status=status, upstream=name,
                                                   on_complete=on_complete))
        answer = body_answer(AsyncAnswer, api, status, body, upstream=name,
                             content_type=response.headers.get("Content-Type"),
                             retry_after=response.headers.get("Retry-After"),
                             prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)
    await report(on_complete, answer.completion())
    return answer
