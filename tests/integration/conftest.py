"""What the integration tests (the adapters, the whole answer, the example orchestrators on
loopback with the real clients) share: a log that must stay quiet, and the clients a test
opens, closed when it ends."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from _clients import OPEN


@pytest.fixture
def quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record of the test, from every thread; none at ERROR or with a traceback."""
    with caplog.at_level(logging.DEBUG):
        yield caplog
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """The clients the test kept (``_clients.kept``), closed after it."""
    yield
    while OPEN:
        client: Any = OPEN.pop()
        client.close()
