"""An upstream's whole answer, made ready for the client: what every adapter decides alike.

The client adapters open the upstream request and make its answer ready
(:func:`tokcore.adapters.httpx.aopen_answer`, :func:`tokcore.adapters.aiohttp.aopen_answer`:
an :class:`AsyncAnswer`); the server adapters send it
(:func:`tokcore.adapters.aiohttp.relay_answer`, :func:`tokcore.adapters.starlette.relay_answer`).
Whatever the upstream does, its client gets an answer it can read:

- a 2xx ``text/event-stream``: the same status, the stream through the usage relay;
- any other 2xx: the same status, the whole body with its usage rewritten
  (:func:`tokcore.rewrite_usage`) and its own ``Content-Type`` (``application/json`` when it
  has none);
- a 4xx or 5xx: the same status, the error in the API's shape with the upstream's message
  kept (:func:`tokcore.adapters.errors.relayed_error`), and its ``Retry-After``; another
  status (a redirect) is a 502;
- no answer (refused, reset, a timeout before the answer began): a 502 or a 504 in the API's
  shape, naming the upstream (:func:`tokcore.adapters.errors.failed_upstream`).

Once the answer is relayed (a body sent, a stream ended however it ends), the completion
hook, if given, is called with a :class:`Completion`: a plain function or one that returns an
awaitable (an ``async def``), which is awaited. What it raises is logged (ERROR, with its
traceback, on the ``tokcore.adapters`` logger), never raised into the response.

This module imports no framework.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Generic, NamedTuple, Protocol, TypeVar
from urllib.parse import urlsplit

from .._args import Api, BytesLike
from ..stream import RelayCounts, UsageRelay, arelay_usage, rewrite_body
from .errors import relayed_error

__all__ = ["JSON_HEADERS", "SSE_HEADERS", "AnswerStream", "AsyncAnswer", "BaseAnswer",
           "Completion", "CompletionHook"]

#: the headers of a relayed stream unless the caller gives its own
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
#: the headers of an error answer
JSON_HEADERS = {"Content-Type": "application/json"}
log = logging.getLogger("tokcore.adapters")


class Completion(NamedTuple):
    """What one relayed answer came to, given to the completion hook once it is done."""

    #: the API the answer speaks (``api=``)
    api: Api
    #: the status the client was sent
    status: int
    #: the relay's counts: a stream's; a whole body's usage counted as an event's would be
    #: (``events`` 0); all zero for an error answer
    counts: RelayCounts
    #: the client went away (or the response was cancelled) before the answer's end
    client_gone: bool
    #: body bytes sent to the client (a stream's error event included)
    bytes_relayed: int
    #: the answer was an event stream
    stream: bool
    #: what went wrong upstream, None when nothing did: ``"answered 503"`` (an error
    #: status), or the class of the error that ended the answer or prevented it
    #: (``"ClientConnectorError"``, ``"ReadTimeout"``, ``"TimeoutError"``)
    upstream_error: str | None


#: a completion hook: a function of the :class:`Completion`, or one returning an awaitable
CompletionHook = Callable[[Completion], "Awaitable[object] | None"]


def check_hook(hook: object) -> None:
    """``on_complete=`` is None or callable (``TypeError`` before anything is sent)."""
    if hook is not None and not callable(hook):
        raise TypeError(f"on_complete must be callable or None, not {type(hook).__name__}")


def _hook_name(hook: object) -> str:
    return str(getattr(hook, "__qualname__", None) or repr(hook))


async def report(hook: CompletionHook | None, completion: Completion) -> None:
    """Call ``hook`` with ``completion`` (awaiting what it returns); log what it raises."""
    if hook is None:
        return
    try:
        result = hook(completion)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("the completion hook %s raised", _hook_name(hook))


def report_sync(hook: CompletionHook | None, completion: Completion) -> None:
    """``report`` for a sync relay: an awaitable the hook returns cannot be awaited there,
    so it is closed and an error logged."""
    if hook is None:
        return
    try:
        result = hook(completion)
    except Exception:
        log.exception("the completion hook %s raised", _hook_name(hook))
        return
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        log.error("the completion hook %s returned an awaitable, which a sync relay cannot "
                  "await: give it a plain function", _hook_name(hook))


def upstream_name(url: object) -> str:
    """What the client is told of an upstream by default: its scheme, host and port (no
    path, query or credentials); ``upstream=`` gives it another name."""
    parts = urlsplit(str(url))
    return f"the upstream at {parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def is_event_stream(content_type: str | None) -> bool:
    """The media type is ``text/event-stream`` (its parameters aside)."""
    return (content_type or "").partition(";")[0].strip().lower() == "text/event-stream"


def is_success(status: int) -> bool:
    return 200 <= status <= 299


def body_headers(content_type: str | None) -> dict[str, str]:
    """The headers of a whole 2xx body: its own content type, JSON's when it has none."""
    return {"Content-Type": content_type or "application/json"}


def error_headers(retry_after: str | None) -> dict[str, str]:
    """The headers of an error answer: JSON, and the upstream's ``Retry-After`` (the
    official clients wait that long before they retry)."""
    if retry_after is None:
        return dict(JSON_HEADERS)
    return {**JSON_HEADERS, "Retry-After": retry_after}


class AnswerStream:
    """The relayed body of an upstream's event stream: an async iterator of bytes (usage
    rewritten) that closes the upstream response when it ends, on ``aclose()``, at the end
    of an ``async with`` block, and on an error or a cancellation; then it calls its
    completion hook, once.

    ``source`` is the upstream body (an async iterable of chunks whose ``aclose()`` closes
    the upstream response); ``relay`` the ``UsageRelay`` (its ``counts``); ``status`` what
    the client is sent; ``upstream`` what the logs call the upstream. ``bytes_relayed``
    counts what the stream gave out.
    """

    def __init__(self, source: AsyncIterable[BytesLike], relay: UsageRelay, *,
                 api: Api = "chat", status: int = 200, upstream: str = "the upstream",
                 on_complete: CompletionHook | None = None) -> None:
        check_hook(on_complete)
        self.relay = relay
        self.api: Api = api
        self.status = status
        #: what the logs call the upstream
        self.upstream = upstream
        self.bytes_relayed = 0
        #: the class of the error that ended the stream, if the source failed
        self.error: str | None = None
        #: the relay itself (``arelay_usage`` over ``source``): its end or its closing
        #: closes the source. A server adapter reads it directly, then calls ``aclose()``.
        self.chunks = arelay_usage(source, relay=relay)
        self._hook = on_complete
        self._ended = False
        self._closed = False

    def __aiter__(self) -> AnswerStream:
        return self

    async def __anext__(self) -> bytes:
        try:
            out = await self.chunks.__anext__()
        except StopAsyncIteration:
            self._ended = True
            await self.aclose()
            raise
        except BaseException as error:  # the source's error, or a cancellation
            if isinstance(error, Exception):
                self.error = type(error).__name__
            await self.aclose()
            raise
        self.bytes_relayed += len(out)
        return out

    async def aclose(self) -> None:
        """Close the stream and the upstream response; the first time, call the hook."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.chunks.aclose()
        finally:
            await report(self._hook, Completion(
                self.api, self.status, self.relay.counts,
                not self._ended and self.error is None, self.bytes_relayed, True, self.error))

    async def __aenter__(self) -> AnswerStream:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()


class _Relayed(Protocol):
    relay: UsageRelay


S = TypeVar("S", bound=_Relayed)


class BaseAnswer(Generic[S]):
    """What the upstream answered, ready for the client: the ``status`` and ``headers`` to
    send, and either ``body`` (a whole answer with its usage rewritten, or an error in the
    API's shape) or ``stream`` (a 2xx event stream, relayed as it is read).

    ``upstream_status`` is what the upstream answered (None: no answer), ``upstream_error``
    what went wrong (as :attr:`Completion.upstream_error`).
    """

    __slots__ = ("_counts", "api", "body", "headers", "status", "stream", "upstream_error",
                 "upstream_status")

    def __init__(self, api: Api, status: int, headers: Mapping[str, str], *,
                 body: bytes | None = None, stream: S | None = None,
                 counts: RelayCounts | None = None, upstream_status: int | None = None,
                 upstream_error: str | None = None) -> None:
        if (body is None) == (stream is None):
            raise TypeError("an answer has a body or a stream, one of the two")
        self.api: Api = api
        self.status = status
        self.headers = dict(headers)
        self.body = body
        self.stream = stream
        self.upstream_status = upstream_status
        self.upstream_error = upstream_error
        self._counts = RelayCounts() if counts is None else counts

    @property
    def counts(self) -> RelayCounts:
        """The relay's counts: the stream's so far, or the body's."""
        return self.stream.relay.counts if self.stream is not None else self._counts

    def completion(self, client_gone: bool = False) -> Completion:
        """The :class:`Completion` of a body answer sent whole (``client_gone``: it was not)."""
        if self.body is None:
            raise TypeError("a stream's completion is its own to report")
        return Completion(self.api, self.status, self._counts, client_gone,
                          0 if client_gone else len(self.body), False, self.upstream_error)

    def __repr__(self) -> str:
        what = "a stream" if self.body is None else f"{len(self.body)} bytes"
        return f"<{type(self).__name__} {self.api} {self.status}: {what}>"


class AsyncAnswer(BaseAnswer[AnswerStream]):
    """:class:`BaseAnswer` of an async client: ``aclose()`` closes the stream (nothing for a
    body); an ``async with`` block does it at its end."""

    __slots__ = ()

    async def aclose(self) -> None:
        """Close the stream, if the answer is one (again: nothing happens)."""
        if self.stream is not None:
            await self.stream.aclose()

    async def __aenter__(self) -> AsyncAnswer:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()


A = TypeVar("A", bound=BaseAnswer[Any])


def body_answer(kind: type[A], api: Api, status: int, body: bytes, *, upstream: str,
                content_type: str | None, retry_after: str | None, prompt_tokens: int,
                cached_tokens: int | None) -> A:
    """The answer (of class ``kind``) for an upstream that answered ``status`` with the
    whole ``body``: a 2xx with its usage rewritten, an error in the API's shape."""
    if is_success(status):
        out, counts = rewrite_body(body, prompt_tokens, cached_tokens, api=api)
        return kind(api, status, body_headers(content_type), body=out, counts=counts,
                    upstream_status=status)
    (log.warning if status >= 500 else log.debug)("%s answered %d", upstream, status)
    client_status, error_body = relayed_error(api, status, body, upstream)
    return kind(api, client_status, error_headers(retry_after), body=error_body,
                upstream_status=status, upstream_error=f"answered {status}")
