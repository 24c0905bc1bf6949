"""Twin fixtures: every hot-path test runs against the Cython and the Python twin.

The Cython twin is imported directly, so a broken build fails the tests. Only an explicit
TOKCORE_NO_EXTENSIONS run leaves it out, and pytest reports those tests as skipped.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from hypothesis import settings

from tokcore._backend import NO_EXTENSIONS

# A shared 2-core machine makes per-example timings meaningless: no deadline.
settings.register_profile("tokcore", deadline=None, max_examples=150)
settings.load_profile("tokcore")

TWINS = ("c", "py")


def _twin(request: pytest.FixtureRequest, name: str) -> ModuleType:
    kind = request.param
    if kind == "c" and NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    return importlib.import_module(f"tokcore._{name}_{kind}")


@pytest.fixture(params=TWINS, scope="session")  # session: usable under @given
def ids_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._ids_c`` or ``tokcore._ids_py``."""
    return _twin(request, "ids")


@pytest.fixture(params=TWINS, scope="session")
def sse_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._sse_c`` or ``tokcore._sse_py``."""
    return _twin(request, "sse")


@pytest.fixture(scope="session")
def ids_pair() -> tuple[ModuleType, ModuleType]:
    """``(tokcore._ids_c, tokcore._ids_py)``, for parity checks."""
    if NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    return importlib.import_module("tokcore._ids_c"), importlib.import_module("tokcore._ids_py")


@pytest.fixture(params=TWINS, scope="session")  # session: usable under @given
def b64_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._b64_c`` or ``tokcore._b64_py``."""
    return _twin(request, "b64")
