"""Stream helpers on top of ``UsageRelay``: relay a worker's SSE body with usage rewritten.

``relay_usage`` takes any iterable of byte chunks (``requests``' ``iter_content()``, a file);
``arelay_usage`` any async iterable (aiohttp's ``iter_any()``, httpx's ``aiter_bytes()``).
Both yield only non-empty bytes, each ready to be written to the client as it comes. Give
them the counts, or a ``UsageRelay`` of your own (``relay=``) to read its ``counts`` after.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

from ._args import BytesLike
from ._sse import UsageRelay
from ._sse_py import DEFAULT_MAX_EVENT_BYTES


def _relay(prompt_tokens: int | None, cached_tokens: int | None, api: str,
           max_event_bytes: int, relay: UsageRelay | None) -> UsageRelay:
    """The caller's relay, or a new one from the counts: exactly one of the two."""
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


def relay_usage(chunks: Iterable[BytesLike], prompt_tokens: int | None = None,
                cached_tokens: int | None = None, *, api: str = "chat",
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                relay: UsageRelay | None = None) -> Iterator[bytes]:
    """Yield ``chunks`` as they can be forwarded, with every usage value rewritten."""
    usage_relay = _relay(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    return _relay_sync(chunks, usage_relay)


def _relay_sync(chunks: Iterable[BytesLike], relay: UsageRelay) -> Iterator[bytes]:
    for chunk in chunks:
        out = relay.feed(chunk)
        if out:
            yield out
    rest = relay.close()
    if rest:
        yield rest


def arelay_usage(chunks: AsyncIterable[BytesLike], prompt_tokens: int | None = None,
                 cached_tokens: int | None = None, *, api: str = "chat",
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                 relay: UsageRelay | None = None) -> AsyncIterator[bytes]:
    """``relay_usage`` for an async iterable of chunks."""
    usage_relay = _relay(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    return _relay_async(chunks, usage_relay)


async def _relay_async(chunks: AsyncIterable[BytesLike],
                       relay: UsageRelay) -> AsyncIterator[bytes]:
    async for chunk in chunks:
        out = relay.feed(chunk)
        if out:
            yield out
    rest = relay.close()
    if rest:
        yield rest
