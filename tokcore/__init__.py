"""tokcore: the host-side hot paths of LLM serving, with a Cython and a pure-Python twin.

Every public name is here; the modules behind it are private. Each has its static type
whichever twin loads: checkers read the typed Python twins (see tokcore/ids/_pack.py).
"""

from __future__ import annotations

from typing import Literal, cast

from ._backend import backend_summary
from .ids._b64 import (
    b64_to_ids,
    b64decode,
    b64encode,
    ids_to_b64,
    standard_b64decode,
    standard_b64encode,
    urlsafe_b64decode,
    urlsafe_b64encode,
)
from .ids._pack import pack_ids, unpack_ids
from .ids._wire import convert_ids, ids_to_json, ids_to_msgpack, json_to_ids, msgpack_to_ids
from .members._members import del_member, find_member, set_member
from .pickling import compact_ids, ids_buffer
from .stream._events import Event, EventDecoder, EventTooLarge, iter_events
from .stream._relay import RelayCounts, UsageRelay
from .stream._relay_iter import arelay_usage, relay_usage
from .stream._usage import find_usage, rewrite_usage
from .writer._writer import (
    PROBE,
    Probe,
    Step,
    StreamShape,
    StreamWriter,
    TokenLogprob,
    TopLogprob,
    Usage,
)

__version__ = "0.1.0"

#: which twins loaded: "cython", "python" or "mixed"
BACKEND: Literal["cython", "python", "mixed"] = cast(
    'Literal["cython", "python", "mixed"]', backend_summary())

__all__ = [
    "BACKEND",
    "Event",
    "EventDecoder",
    "EventTooLarge",
    "PROBE",
    "Probe",
    "RelayCounts",
    "Step",
    "StreamShape",
    "StreamWriter",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "UsageRelay",
    "__version__",
    "arelay_usage",
    "b64_to_ids",
    "b64decode",
    "b64encode",
    "compact_ids",
    "convert_ids",
    "del_member",
    "find_member",
    "find_usage",
    "ids_buffer",
    "ids_to_b64",
    "ids_to_json",
    "ids_to_msgpack",
    "iter_events",
    "json_to_ids",
    "msgpack_to_ids",
    "pack_ids",
    "relay_usage",
    "rewrite_usage",
    "set_member",
    "standard_b64decode",
    "standard_b64encode",
    "unpack_ids",
    "urlsafe_b64decode",
    "urlsafe_b64encode",
]
