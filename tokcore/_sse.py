"""SSE usage relay dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin
from ._sse_py import RelayCounts

_twin = load_twin("sse")

UsageRelay = _twin.UsageRelay

__all__ = ["RelayCounts", "UsageRelay"]
