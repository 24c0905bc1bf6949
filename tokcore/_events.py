"""Event-stream decoder dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin
from ._events_py import Event

_twin = load_twin("events")

EventDecoder = _twin.EventDecoder
iter_events = _twin.iter_events

__all__ = ["Event", "EventDecoder", "iter_events"]
