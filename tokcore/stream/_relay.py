"""SSE usage relay dispatcher: the Cython twin when it loads, else the Python one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._relay_py import RelayCounts

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._relay_py import UsageRelay
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    UsageRelay = _twin.UsageRelay

__all__ = ["RelayCounts", "UsageRelay"]
