"""SSE usage relay dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin
from ._sse_py import Event

_twin = load_twin("sse")

find_usage = _twin.find_usage
rewrite_usage = _twin.rewrite_usage
UsageRelay = _twin.UsageRelay
EventDecoder = _twin.EventDecoder
iter_events = _twin.iter_events

__all__ = ["Event", "EventDecoder", "UsageRelay", "find_usage", "iter_events", "rewrite_usage"]
