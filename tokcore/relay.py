"""Stream helpers on top of ``UsageRelay``: relay a worker's SSE body with usage rewritten.

``relay_usage`` takes any iterable of byte chunks (``requests``' ``iter_content()``, a file);
``arelay_usage`` any async iterable (aiohttp's ``iter_any()``, httpx's ``aiter_bytes()``).
Both yield only non-empty bytes, each ready to be written to the client as it comes.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

from ._sse import UsageRelay
from ._sse_py import DEFAULT_MAX_EVENT_BYTES, BytesLike


def relay_usage(chunks: Iterable[BytesLike], prompt_tokens: int,
                cached_tokens: int | None = None, *,
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Iterator[bytes]:
    """Yield ``chunks`` as they can be forwarded, with every usage value rewritten."""
    relay = UsageRelay(prompt_tokens, cached_tokens, max_event_bytes=max_event_bytes)
    for chunk in chunks:
        out = relay.feed(chunk)
        if out:
            yield out
    rest = relay.close()
    if rest:
        yield rest


async def arelay_usage(chunks: AsyncIterable[BytesLike], prompt_tokens: int,
                       cached_tokens: int | None = None, *,
                       max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> AsyncIterator[bytes]:
    """``relay_usage`` for an async iterable of chunks."""
    relay = UsageRelay(prompt_tokens, cached_tokens, max_event_bytes=max_event_bytes)
    async for chunk in chunks:
        out = relay.feed(chunk)
        if out:
            yield out
    rest = relay.close()
    if rest:
        yield rest
