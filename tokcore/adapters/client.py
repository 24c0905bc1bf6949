"""The client half a server adapter uses: an upstream's whole answer opened with whichever
client the application has, httpx's ``AsyncClient`` or aiohttp's ``ClientSession``.

The server adapters (``aiohttp.relay_answer``, ``starlette.relay_answer``) take either client;
this module picks the client adapter by the client's package and imports it only then, so
``answer.py``, the rules both client adapters share, imports neither of them.
"""

from __future__ import annotations

from typing import Any

from .answer import AsyncAnswer

__all__ = ["aopen_answer"]


async def aopen_answer(client: Any, method: str, url: Any, prompt_tokens: int,
                       cached_tokens: int | None = None, **options: Any) -> AsyncAnswer:
    """The client adapter's ``aopen_answer`` for ``client``: an ``httpx.AsyncClient`` or an
    ``aiohttp.ClientSession`` (the server adapters take either)."""
    kind = type(client).__module__.partition(".")[0]
    if kind == "httpx":
        from .httpx import aopen_answer as httpx_open

        return await httpx_open(client, method, url, prompt_tokens, cached_tokens, **options)
    if kind == "aiohttp":
        from ._aiohttp_client import aopen_answer as aiohttp_open

        return await aiohttp_open(client, method, url, prompt_tokens, cached_tokens,
                                  **options)
    raise TypeError("client must be an httpx.AsyncClient or an aiohttp.ClientSession, not "
                    f"{type(client).__name__}")
