"""Twin fixtures: every hot-path test runs against the Cython and the Python twin.

The Cython twin is imported directly, so a broken build fails the tests. Only an explicit
TOKCORE_NO_EXTENSIONS run leaves it out, and pytest reports those tests as skipped.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tokcore._backend import NO_EXTENSIONS

TWINS = ("c", "py")


def _twin(request: pytest.FixtureRequest, name: str) -> ModuleType:
    kind = request.param
    if kind == "c" and NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    return importlib.import_module(f"tokcore._{name}_{kind}")


@pytest.fixture(params=TWINS)
def ids_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._ids_c`` or ``tokcore._ids_py``."""
    return _twin(request, "ids")


@pytest.fixture(params=TWINS)
def b64_twin(request: pytest.FixtureRequest) -> ModuleType:
    """``tokcore._b64_c`` or ``tokcore._b64_py``."""
    return _twin(request, "b64")
