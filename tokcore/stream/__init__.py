"""The event-stream wing: the usage relay (``_relay``: ``UsageRelay``, its counts; ``_relay_iter``:
``relay_usage`` and ``arelay_usage`` over a stream's chunks), the scan of an event too large to
hold (``_bigevent``), the usage found and rewritten in a JSON text (``_usage``, by the API
dialects of ``_dialects``, through an event's data fields: ``_fields``), the WHATWG event
decoder (``_events``) and the byte scans they share (``_ssescan.h``). Each hot path is a
dispatcher with a Cython and a Python twin; the public names are ``tokcore``'s."""
