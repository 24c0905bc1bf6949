"""httpx: open a streaming request and read its body through the relay.

::

    from tokcore.adapters.httpx import aopen_relay

    stream = await aopen_relay(client, "POST", GENERATION_URL, prompt_tokens, cached_tokens,
                               json=body)
    if stream.response.status_code != 200:
        await stream.aclose()           # the caller decides what an upstream error becomes
    async for out in stream:            # the relayed bytes, usage rewritten
        ...
    await stream.aclose()               # or `async with stream:`; the end closes it too

Closing an httpx ``response.aiter_bytes()`` iterator does not close its response (the
connection goes only when the garbage collector finalizes httpcore's generators), so the
stream here holds the response and closes it: at the end of the body, on ``aclose()``
(``close()``), at the end of an ``async with`` (``with``) block, and when the request's
arguments are refused. The client is the caller's. ``open_relay`` is the same for a
``httpx.Client``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from types import TracebackType
from typing import Any

import httpx

from .._args import Api
from .._sse import UsageRelay
from .._sse_py import DEFAULT_MAX_EVENT_BYTES
from ..relay import _relay, arelay_usage, relay_usage

__all__ = ["AsyncRelayStream", "RelayStream", "aopen_relay", "open_relay"]


class AsyncRelayStream:
    """The relayed body of an open response: an async iterator of bytes that closes the
    response when it ends or is closed. ``response`` is the ``httpx.Response`` (status and
    headers read, body not), ``relay`` the ``UsageRelay`` (its ``counts``)."""

    def __init__(self, response: httpx.Response, relay: UsageRelay) -> None:
        self.response = response
        self.relay = relay
        self._stream: AsyncGenerator[bytes, None] = arelay_usage(response.aiter_bytes(),
                                                                 relay=relay)

    def __aiter__(self) -> AsyncRelayStream:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._stream.__anext__()
        except BaseException:  # the end, an error or a cancellation: the response goes
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Close the stream and the response (again: nothing happens)."""
        try:
            await self._stream.aclose()
        finally:
            await self.response.aclose()

    async def __aenter__(self) -> AsyncRelayStream:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()


class RelayStream:
    """``AsyncRelayStream`` for a sync ``httpx.Client``: an iterator with ``close()``."""

    def __init__(self, response: httpx.Response, relay: UsageRelay) -> None:
        self.response = response
        self.relay = relay
        self._stream: Generator[bytes, None, None] = relay_usage(response.iter_bytes(),
                                                                 relay=relay)

    def __iter__(self) -> RelayStream:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._stream)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the stream and the response (again: nothing happens)."""
        try:
            self._stream.close()
        finally:
            self.response.close()

    def __enter__(self) -> RelayStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


async def aopen_relay(client: httpx.AsyncClient, method: str, url: httpx.URL | str,
                      prompt_tokens: int | None = None, cached_tokens: int | None = None, *,
                      api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                      relay: UsageRelay | None = None, **request: Any) -> AsyncRelayStream:
    """Send ``method url`` with ``client`` (``request``: ``build_request``'s arguments:
    ``json=``, ``content=``, ``headers=``, ``timeout=`` ...), wait for its headers, and
    return its body as an ``AsyncRelayStream``. The relay's arguments (the counts, or
    ``relay=``, as ``arelay_usage``) are checked before the request is sent; a transport
    error propagates (nothing is left open)."""
    usage_relay = _relay(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    response = await client.send(client.build_request(method, url, **request), stream=True)
    return AsyncRelayStream(response, usage_relay)


def open_relay(client: httpx.Client, method: str, url: httpx.URL | str,
               prompt_tokens: int | None = None, cached_tokens: int | None = None, *,
               api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
               relay: UsageRelay | None = None, **request: Any) -> RelayStream:
    """``aopen_relay`` for a sync ``httpx.Client``."""
    usage_relay = _relay(prompt_tokens, cached_tokens, api, max_event_bytes, relay)
    response = client.send(client.build_request(method, url, **request), stream=True)
    return RelayStream(response, usage_relay)
