"""Event-stream decoder dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin
from ._events_py import DEFAULT_MAX_EVENT_BYTES, Event, EventTooLarge

_twin = load_twin("events")

EventDecoder = _twin.EventDecoder
iter_events = _twin.iter_events

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Event", "EventDecoder", "EventTooLarge", "iter_events"]
