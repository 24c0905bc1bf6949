"""Twin fixtures: every hot-path test runs against the Cython and the Python twin.

The Cython twin is imported directly, so a broken build fails the tests. Only an explicit
TOKCORE_NO_EXTENSIONS run leaves it out, and pytest reports those tests as skipped.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from _twins import KINDS, twin
from hypothesis import settings

# A shared 2-core machine makes per-example timings meaningless: no deadline.
settings.register_profile("tokcore", deadline=None, max_examples=150)
settings.load_profile("tokcore")


@pytest.fixture(params=KINDS, scope="session")  # session: usable under @given
def ids_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._ids_c`` or ``tokcore._ids_py``."""
    return twin("ids", request.param)


@pytest.fixture(params=KINDS, scope="session")
def sse_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._sse_c`` or ``tokcore._sse_py`` (UsageRelay)."""
    return twin("sse", request.param)


@pytest.fixture(params=KINDS, scope="session")
def stream_twin(request: pytest.FixtureRequest) -> ModuleType:
    """The ``_usage``, ``_sse`` and ``_events`` twins of one kind, as one namespace."""
    return twin("stream", request.param)  # type: ignore[no-any-return]


@pytest.fixture(params=KINDS, scope="session")
def json_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._json_c`` or ``tokcore._json_py`` (find_member, set_member, del_member)."""
    return twin("json", request.param)


@pytest.fixture(params=KINDS, scope="session")
def usage_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._usage_c`` or ``tokcore._usage_py`` (find_usage, rewrite_usage)."""
    return twin("usage", request.param)


@pytest.fixture(params=KINDS, scope="session")
def events_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._events_c`` or ``tokcore._events_py`` (EventDecoder, iter_events)."""
    return twin("events", request.param)


@pytest.fixture(scope="session")
def ids_pair() -> tuple[ModuleType, ModuleType]:
    """``(tokcore._ids_c, tokcore._ids_py)``, for parity checks."""
    return twin("ids", "c"), twin("ids", "py")


@pytest.fixture(params=KINDS, scope="session")  # session: usable under @given
def b64_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._b64_c`` or ``tokcore._b64_py``."""
    return twin("b64", request.param)
