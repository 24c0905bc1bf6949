"""httpx: open a request and make its whole answer ready for a client, or relay its stream.

::

    from tokcore.adapters.httpx import aopen_answer

    answer = await aopen_answer(client, "POST", GENERATION_URL, prompt_tokens, cached_tokens,
                                upstream="the generation worker", json=body)
    answer.status, answer.headers       # what the client is to get
    if answer.stream is None:
        send(answer.body)               # the whole answer, usage rewritten, or the error
    else:
        async with answer.stream:       # the relayed bytes, usage rewritten
            async for out in answer.stream:
                ...

``aopen_answer`` follows the rules of :mod:`tokcore.adapters.answer`: a 2xx event stream
through the relay, another 2xx body with its usage rewritten, an error status in the API's
shape, an upstream that cannot be reached or does not answer in time as a 502 or a 504;
nothing the upstream does raises. ``aopen_relay`` opens a stream and leaves its status to
the caller. ``open_answer`` and ``open_relay`` are the same for a sync ``httpx.Client``.

Closing an httpx ``response.aiter_bytes()`` iterator does not close its response (the
connection goes only when the garbage collector finalizes httpcore's generators), so the
streams here hold the response and close it: at the end of the body, on ``aclose()``
(``close()``), at the end of an ``async with`` (``with``) block, on an error or a
cancellation, and when the request's arguments are refused. The client is the caller's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Generator, Iterator
from types import TracebackType
from typing import Any

import httpx

from .._args import Api
from ..stream import DEFAULT_MAX_EVENT_BYTES, UsageRelay, relay_of, relay_usage
from .answer import (
    SSE_HEADERS,
    AnswerStream,
    AsyncAnswer,
    BaseAnswer,
    Completion,
    CompletionHook,
    body_answer,
    check_hook,
    error_headers,
    is_event_stream,
    is_success,
    report,
    report_sync,
    upstream_name,
)
from .errors import ERROR_BODY_LIMIT, failed_upstream

__all__ = ["Answer", "AsyncRelayStream", "RelayStream", "aopen_answer", "aopen_relay",
           "open_answer", "open_relay"]

log = logging.getLogger("tokcore.adapters")
#: what an upstream that gives no answer raises (a timeout of the answer_timeout too)
_FAILURES = (TimeoutError, httpx.TransportError, httpx.DecodingError, OSError)


class _Body:
    """A response's body as the relay's source: closing it closes the response."""

    __slots__ = ("response",)

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.response.aiter_bytes()

    async def aclose(self) -> None:
        await self.response.aclose()

    def __iter__(self) -> Iterator[bytes]:
        return self.response.iter_bytes()

    def close(self) -> None:
        self.response.close()


class AsyncRelayStream(AnswerStream):
    """The relayed body of an open response (:class:`~tokcore.adapters.answer.AnswerStream`):
    an async iterator of bytes that closes the response when it ends or is closed.
    ``response`` is the ``httpx.Response`` (status and headers read, body not), ``relay``
    the ``UsageRelay`` (its ``counts``)."""

    def __init__(self, response: httpx.Response, relay: UsageRelay, *, api: Api = "chat",
                 upstream: str | None = None,
                 on_complete: CompletionHook | None = None) -> None:
        super().__init__(_Body(response), relay, api=api, status=response.status_code,
                         upstream=upstream or f"upstream {response.url}",
                         on_complete=on_complete)
        self.response = response

    async def __aenter__(self) -> AsyncRelayStream:
        return self


class RelayStream:
    """``AsyncRelayStream`` for a sync ``httpx.Client``: an iterator with ``close()``; its
    completion hook must be a plain function."""

    def __init__(self, response: httpx.Response, relay: UsageRelay, *, api: Api = "chat",
                 on_complete: CompletionHook | None = None) -> None:
        check_hook(on_complete)
        self.response = response
        self.relay = relay
        self.api: Api = api
        self.status = response.status_code
        self.bytes_relayed = 0
        self.error: str | None = None
        self.chunks: Generator[bytes, None, None] = relay_usage(_Body(response), relay=relay)
        self._hook = on_complete
        self._ended = False
        self._closed = False

    def __iter__(self) -> RelayStream:
        return self

    def __next__(self) -> bytes:
        try:
            out = next(self.chunks)
        except StopIteration:
            self._ended = True
            self.close()
            raise
        except BaseException as error:
            if isinstance(error, Exception):
                self.error = type(error).__name__
            self.close()
            raise
        self.bytes_relayed += len(out)
        return out

    def close(self) -> None:
        """Close the stream and the response (again: nothing happens); the first time, call
        the hook."""
        if self._closed:
            return
        self._closed = True
        try:
            self.chunks.close()
        finally:
            report_sync(self._hook, Completion(
                self.api, self.status, self.relay.counts,
                not self._ended and self.error is None, self.bytes_relayed, True, self.error))

    def __enter__(self) -> RelayStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class Answer(BaseAnswer[RelayStream]):
    """:class:`~tokcore.adapters.answer.BaseAnswer` of a sync client: ``close()`` closes the
    stream (nothing for a body); a ``with`` block does it at its end."""

    __slots__ = ()

    def close(self) -> None:
        """Close the stream, if the answer is one (again: nothing happens)."""
        if self.stream is not None:
            self.stream.close()

    def __enter__(self) -> Answer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


# --- the whole answer ----------------------------------------------------------------------

def _wants_body(response: httpx.Response) -> bool:
    return not (is_success(response.status_code)
                and is_event_stream(response.headers.get("Content-Type")))


def _failure(api: Api, name: str, method: str, url: object,
             error: BaseException) -> tuple[int, bytes]:
    log.warning("%s (%s %s) gave no answer: %s: %s", name, method, url, type(error).__name__,
                error)
    return failed_upstream(api, error, name,
                           timed_out=isinstance(error, (TimeoutError, httpx.TimeoutException)))


async def aopen_answer(client: httpx.AsyncClient, method: str, url: httpx.URL | str,
                       prompt_tokens: int, cached_tokens: int | None = None, *,
                       api: Api = "chat", upstream: str | None = None,
                       answer_timeout: float | None = None,
                       on_complete: CompletionHook | None = None,
                       max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                       **request: Any) -> AsyncAnswer:
    """Send ``method url`` with ``client`` (``request``: ``build_request``'s arguments:
    ``json=``, ``content=``, ``headers=``, ``timeout=`` ...) and make its answer ready for
    the client (:class:`~tokcore.adapters.answer.AsyncAnswer`, the rules in
    :mod:`tokcore.adapters.answer`). ``upstream`` names the upstream in the client's error
    messages (default: its scheme, host and port); ``answer_timeout``: seconds for the answer
    to begin (a whole body: to arrive), a 504 beyond, on top of httpx's own timeouts (whose
    timeout is a 504 too). The arguments are checked before the request is sent; nothing the
    upstream does raises. ``on_complete`` is called once the answer is relayed: a body's at
    once (it is whole), a stream's when it ends or is closed."""
    relay = UsageRelay(prompt_tokens, cached_tokens, api=api, max_event_bytes=max_event_bytes)
    check_hook(on_complete)
    name = upstream or upstream_name(url)
    response: httpx.Response | None = None
    try:
        async with asyncio.timeout(answer_timeout):
            response = await client.send(client.build_request(method, url, **request),
                                         stream=True)
            body = None
            if _wants_body(response):
                body = (await response.aread() if is_success(response.status_code)
                        else await _aread_error(response))
                await response.aclose()
    except _FAILURES as error:
        if response is not None:
            await response.aclose()
        status, error_body = _failure(api, name, method, url, error)
        answer = AsyncAnswer(api, status, error_headers(None), body=error_body,
                             upstream_error=type(error).__name__)
    except BaseException:
        if response is not None:
            await response.aclose()
        raise
    else:
        if body is None:
            status = response.status_code
            return AsyncAnswer(api, status, SSE_HEADERS, upstream_status=status,
                               stream=AsyncRelayStream(response, relay, api=api, upstream=name,
                                                       on_complete=on_complete))
        answer = body_answer(AsyncAnswer, api, response.status_code, body, upstream=name,
                             content_type=response.headers.get("Content-Type"),
                             retry_after=response.headers.get("Retry-After"),
                             prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)
    await report(on_complete, answer.completion())
    return answer


async def _aread_error(response: httpx.Response) -> bytes:
    parts, size = [], 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_LIMIT:
            break
    return b"".join(parts)[:ERROR_BODY_LIMIT]


def open_answer(client: httpx.Client, method: str, url: httpx.URL | str,
                prompt_tokens: int, cached_tokens: int | None = None, *,
                api: Api = "chat", upstream: str | None = None,
                on_complete: CompletionHook | None = None,
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, **request: Any) -> Answer:
    """``aopen_answer`` for a sync ``httpx.Client``: an :class:`Answer`; the time limits are
    httpx's own (``timeout=``), and the hook a plain function."""
    relay = UsageRelay(prompt_tokens, cached_tokens, api=api, max_event_bytes=max_event_bytes)
    check_hook(on_complete)
    name = upstream or upstream_name(url)
    response: httpx.Response | None = None
    try:
        response = client.send(client.build_request(method, url, **request), stream=True)
        body = None
        if _wants_body(response):
            body = response.read() if is_success(response.status_code) else _read_error(response)
            response.close()
    except _FAILURES as error:
        if response is not None:
            response.close()
        status, error_body = _failure(api, name, method, url, error)
        answer = Answer(api, status, error_headers(None), body=error_body,
                        upstream_error=type(error).__name__)
    except BaseException:
        if response is not None:
            response.close()
        raise
    else:
        if body is None:
            status = response.status_code
            return Answer(api, status, SSE_HEADERS, upstream_status=status,
                          stream=RelayStream(response, relay, api=api, on_complete=on_complete))
        answer = body_answer(Answer, api, response.status_code, body, upstream=name,
                             content_type=response.headers.get("Content-Type"),
                             retry_after=response.headers.get("Retry-After"),
                             prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)
    report_sync(on_complete, answer.completion())
    return answer


def _read_error(response: httpx.Response) -> bytes:
    parts, size = [], 0
    for chunk in response.iter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_LIMIT:
            break
    return b"".join(parts)[:ERROR_BODY_LIMIT]


# --- a stream whose status is the caller's ---------------------------------------------------

async def aopen_relay(client: httpx.AsyncClient, method: str, url: httpx.URL | str,
                      prompt_tokens: int | None = None, cached_tokens: int | None = None, *,
                      api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                      relay: UsageRelay | None = None,
                      on_complete: CompletionHook | None = None,
                      **request: Any) -> AsyncRelayStream:
    """Send ``method url`` with ``client`` (``request``: ``build_request``'s arguments:
    ``json=``, ``content=``, ``headers=``, ``timeout=`` ...), wait for its headers, and
    return its body as an ``AsyncRelayStream``, whatever its status (the caller's to check:
    :func:`aopen_answer` decides it). The relay's arguments (the counts, or ``relay=``, as
    ``arelay_usage``) are checked before the request is sent; a transport error propagates
    (nothing is left open)."""
    usage_relay = relay_of(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    check_hook(on_complete)
    response = await client.send(client.build_request(method, url, **request), stream=True)
    return AsyncRelayStream(response, usage_relay, api=api, on_complete=on_complete)


def open_relay(client: httpx.Client, method: str, url: httpx.URL | str,
               prompt_tokens: int | None = None, cached_tokens: int | None = None, *,
               api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
               relay: UsageRelay | None = None, on_complete: CompletionHook | None = None,
               **request: Any) -> RelayStream:
    """``aopen_relay`` for a sync ``httpx.Client``."""
    usage_relay = relay_of(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    check_hook(on_complete)
    response = client.send(client.build_request(method, url, **request), stream=True)
    return RelayStream(response, usage_relay, api=api, on_complete=on_complete)
