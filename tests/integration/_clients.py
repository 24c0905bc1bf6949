"""The clients an integration test opened (the openai and anthropic clients, httpx's), which
tests/integration/conftest.py closes when the test ends."""

from __future__ import annotations

from typing import Any, TypeVar

C = TypeVar("C")

#: kept by ``kept``, closed by the conftest after each test
OPEN: list[Any] = []


def kept(client: C) -> C:
    """``client``, to be closed when the test ends."""
    OPEN.append(client)
    return client
