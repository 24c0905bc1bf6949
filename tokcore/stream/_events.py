"""Event-stream decoder dispatcher: the Cython twin when it loads, else the Python one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._events_py import DEFAULT_MAX_EVENT_BYTES, Event, EventTooLarge

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._events_py import EventDecoder, iter_events
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    EventDecoder = _twin.EventDecoder
    iter_events = _twin.iter_events

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Event", "EventDecoder", "EventTooLarge", "iter_events"]
