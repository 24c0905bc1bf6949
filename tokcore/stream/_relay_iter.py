"""Stream helpers on top of ``UsageRelay``: relay a worker's SSE body with usage rewritten.

``relay_usage`` takes any iterable of byte chunks (``requests``' ``iter_content()``, a file);
``arelay_usage`` any async iterable (aiohttp's ``iter_any()``, httpx's ``aiter_bytes()``).
Both yield only non-empty bytes, each ready to be written to the client as it comes. Give
them the counts, or a ``UsageRelay`` of your own (``relay=``) to read its ``counts`` after.

The arguments are checked, and the iterator taken from the source, at the call. From then on
the stream owns its source: however the stream ends (the source runs out, the consumer calls
``close()``/``aclose()`` or drops it, an error on either side, a cancelled task), and also
when it is closed before its first read, it calls ``close()`` (``aclose()`` for the async
one) of the iterator it took and of the source itself where they have one: a generator that
holds an upstream response in a ``with`` block releases it then. An error that closing or the
source raises propagates.
"""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Coroutine,
    Generator,
    Iterable,
    Iterator,
)
from typing import Any, overload

from .._args import Api, BytesLike
from ._relay import UsageRelay
from ._relay_py import DEFAULT_MAX_EVENT_BYTES


def relay_of(prompt_tokens: int | None, cached_tokens: int | None, api: Api,
           max_event_bytes: int, relay: object) -> UsageRelay:
    """The caller's relay, or a new one from the counts: exactly one of the two (``relay``
    is checked at run time too: an untyped caller may pass anything)."""
    if relay is None:
        if prompt_tokens is None:
            raise TypeError("give prompt_tokens or relay=")
        return UsageRelay(prompt_tokens, cached_tokens, api=api,
                          max_event_bytes=max_event_bytes)
    if prompt_tokens is not None or cached_tokens is not None:
        raise TypeError("give prompt_tokens or relay=, not both")
    if not isinstance(relay, UsageRelay):
        raise TypeError(f"relay must be a UsageRelay, not {type(relay).__name__}")
    return relay


# --- sync ----------------------------------------------------------------------------------

# Two ways to call each helper, as the checks at run time have it: the counts (with the
# relay's options), or a relay of your own (which has its options already).
@overload
def relay_usage(chunks: Iterable[BytesLike], prompt_tokens: int,
                cached_tokens: int | None = None, *, api: Api = "chat",
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Generator[bytes, None, None]:
    ...
@overload
def relay_usage(chunks: Iterable[BytesLike], *,
                relay: UsageRelay) -> Generator[bytes, None, None]:
    ...
def relay_usage(chunks: Iterable[BytesLike], prompt_tokens: int | None = None,
                cached_tokens: int | None = None, *, api: Api = "chat",
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                relay: UsageRelay | None = None) -> Generator[bytes, None, None]:
    """Yield ``chunks`` as they can be forwarded, with every usage value rewritten; closing
    the generator (or its end) closes ``chunks``.

    Give the counts (a new ``UsageRelay`` is made) or ``relay=``, one of your own, whose
    ``counts`` you read when the stream is done. The arguments are checked and the source's
    iterator taken at the call; the generator owns the source: however it ends (exhausted,
    closed, dropped, an error, closed before its first read) it calls ``close()`` of that
    iterator and of the source where they have one.

    Raises, at the call, what ``UsageRelay`` raises for the counts, ``api`` and
    ``max_event_bytes``, ``TypeError`` for both or neither of ``prompt_tokens`` and
    ``relay=``, and ``TypeError`` for a source that is not iterable; afterwards, whatever
    the source or its closing raises, as it is.
    """
    usage_relay = relay_of(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    stream = _relay_sync(iter(chunks), chunks, usage_relay)
    # A generator closed before it started never runs its finally: run it to its first
    # yield, inside the try, so that closing it at once still closes the source.
    next(stream)
    return stream


def _relay_sync(iterator: Iterator[BytesLike], source: object,
                relay: UsageRelay) -> Generator[bytes, None, None]:
    try:
        yield b""  # the priming step of relay_usage: never seen by the caller
        for chunk in iterator:
            out = relay.feed(chunk)
            if out:
                yield out
        rest = relay.close()
        if rest:
            yield rest
    finally:
        _close(iterator, source)


def _close(iterator: object, source: object) -> None:
    """``close()`` the iterator, then the source when it is another object."""
    try:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
    finally:
        if source is not iterator:
            close = getattr(source, "close", None)
            if close is not None:
                close()


# --- async ---------------------------------------------------------------------------------

@overload
def arelay_usage(chunks: AsyncIterable[BytesLike], prompt_tokens: int,
                 cached_tokens: int | None = None, *, api: Api = "chat",
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> AsyncGenerator[bytes, None]:
    ...
@overload
def arelay_usage(chunks: AsyncIterable[BytesLike], *,
                 relay: UsageRelay) -> AsyncGenerator[bytes, None]:
    ...
def arelay_usage(chunks: AsyncIterable[BytesLike], prompt_tokens: int | None = None,
                 cached_tokens: int | None = None, *, api: Api = "chat",
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                 relay: UsageRelay | None = None) -> AsyncGenerator[bytes, None]:
    """``relay_usage`` for an async iterable of chunks; ``aclose()`` (or its end) closes
    ``chunks``.

    Raises as ``relay_usage`` does (``TypeError`` for a source that is not an async
    iterable).
    """
    usage_relay = relay_of(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    try:
        aiter_of = type(chunks).__aiter__
    except AttributeError:
        raise TypeError("chunks must be an async iterable (async for), not "
                        f"{type(chunks).__name__}") from None
    iterator = aiter_of(chunks)
    return _AsyncRelayStream(_relay_async(iterator, chunks, usage_relay), iterator, chunks)


async def _relay_async(iterator: AsyncIterator[BytesLike], source: object,
                       relay: UsageRelay) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in iterator:
            out = relay.feed(chunk)
            if out:
                yield out
        rest = relay.close()
        if rest:
            yield rest
    finally:
        await _aclose(iterator, source)


async def _aclose(iterator: object, source: object) -> None:
    """``aclose()`` the iterator, then the source when it is another object."""
    try:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
    finally:
        if source is not iterator:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()


class _AsyncRelayStream(AsyncGenerator[bytes, None]):
    """The async generator ``arelay_usage`` returns: its ``_relay_async`` generator, except
    that ``aclose()`` (or ``athrow()``) before the first read closes the source too.

    (The sync twin primes its generator instead; an async generator can only be started
    from the event loop that runs it, which also registers it to be finalized there.)
    """

    __slots__ = ("_gen", "_iterator", "_source", "_started")

    def __init__(self, gen: AsyncGenerator[bytes, None], iterator: object,
                 source: object) -> None:
        self._gen = gen
        self._iterator: object = iterator
        self._source: object = source
        self._started = False

    def __anext__(self) -> Coroutine[Any, Any, bytes]:  # the generator's own: no wrapper
        self._started = True
        return self._gen.__anext__()

    def asend(self, value: None) -> Coroutine[Any, Any, bytes]:
        self._started = True
        return self._gen.asend(value)

    async def athrow(self, *args: Any) -> bytes:
        started, self._started = self._started, True
        try:
            return await self._gen.athrow(*args)
        finally:
            if not started:  # thrown in before the body ran: it raises, its finally is not run
                await _aclose(self._iterator, self._source)

    async def aclose(self) -> None:
        started, self._started = self._started, True
        await self._gen.aclose()
        if not started:  # the generator's body never ran: its finally cannot close
            await _aclose(self._iterator, self._source)
