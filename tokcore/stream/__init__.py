"""The event-stream wing: the usage relay (``_relay``: ``UsageRelay``, its counts; ``_relay_iter``:
``relay_usage`` and ``arelay_usage`` over a stream's chunks), the scan of an event too large to
hold (``_bigevent``), the usage found and rewritten in a JSON text (``_usage``, by the API
dialects of ``_dialects``, through an event's data fields: ``_fields``; a whole body's, counted:
``_body``), the WHATWG event decoder (``_events``) and the byte scans they share
(``_ssescan.h``). Each hot path is a dispatcher with a Cython and a Python twin.

The public names are ``tokcore``'s. The names below are the wing's face to the wings that
import it (the adapters), which reach nothing of the wing but through them
(tests/test_layout.py holds that); ``DEFAULT_MAX_EVENT_BYTES`` is the relay's default bound
(the decoder, ``EventDecoder``, has its own).
"""

from ._body import rewrite_body
from ._relay import RelayCounts, UsageRelay
from ._relay_iter import arelay_usage, relay_of, relay_usage
from ._relay_py import DEFAULT_MAX_EVENT_BYTES
from ._usage import rewrite_usage

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "RelayCounts", "UsageRelay", "arelay_usage", "relay_of",
           "relay_usage", "rewrite_body", "rewrite_usage"]
