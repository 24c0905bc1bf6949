"""The WHATWG HTML "event stream" decoder: the pure-Python reference twin.

``EventDecoder`` turns bytes, split anywhere, into ``Event`` objects by the parsing rules of
the HTML standard (BOM, comments, the four fields, all line ends). ``Event`` is shared: the
Cython twin makes the same objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ._args import BytesLike, payload_view

#: a UTF-8 byte order mark, skipped at the start of a stream
BOM = b"\xef\xbb\xbf"
#: any SSE line end (the relay's framing reads lines by the same rule)
LINE_ENDS = re.compile(rb"\r\n|\r|\n")


class Event(NamedTuple):
    """One dispatched server-sent event."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class EventDecoder:
    """Bytes in, ``Event`` objects out, by the WHATWG HTML event-stream parsing rules.

    ``id`` is the last event ID in force when the event was dispatched (None until an
    ``id`` field sets one); ``retry`` is the reconnection time set by a ``retry`` field of
    this event, else None.
    """

    __slots__ = ("_buffer", "_started", "_cr", "_data", "_has_data", "_type", "_last_id",
                 "_retry", "_closed")

    def __init__(self) -> None:
        self._buffer = bytearray()  # an unfinished line
        self._started = False  # past the first bytes (where a BOM may be)
        self._cr = False
        self._data: list[str] = []
        self._has_data = False
        self._type = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._closed = False

    def feed(self, chunk: BytesLike) -> list[Event]:
        data = chunk if type(chunk) is bytes else bytes(payload_view(chunk, "chunk"))
        if self._closed:
            raise ValueError("feed() after close()")
        events: list[Event] = []
        if not data:
            return events
        if self._cr and data[:1] == b"\n":
            data = data[1:]  # the LF of a CRLF split across chunks
        self._cr = False
        begin = 0
        for match in LINE_ENDS.finditer(data):
            if match.group() == b"\r" and match.end() == len(data):
                self._cr = True  # a LF may still follow in the next chunk
            line = data[begin:match.start()]
            if self._buffer:
                self._buffer += line
                line = bytes(self._buffer)
                self._buffer.clear()
            self._line(line, events)
            begin = match.end()
        self._buffer += data[begin:]
        return events

    def close(self) -> list[Event]:
        """End of stream: an unfinished last event is discarded, as the rules say."""
        self._closed = True
        self._buffer.clear()
        self._data.clear()
        return []

    def _line(self, raw: bytes, events: list[Event]) -> None:
        if not self._started:
            self._started = True
            if raw.startswith(BOM):
                raw = raw[3:]
        line = raw.decode("utf-8", "replace")
        if not line:
            self._dispatch(events)
            return
        if line[0] == ":":
            return
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "event":
            self._type = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self._retry = int(value)

    def _dispatch(self, events: list[Event]) -> None:
        if self._has_data:
            events.append(Event(self._type or "message", "\n".join(self._data),
                                self._last_id, self._retry))
        self._data.clear()
        self._has_data = False
        self._type = ""
        self._retry = None


def iter_events(chunks: Iterable[BytesLike]) -> Iterator[Event]:
    """Decode an iterable of byte chunks into events."""
    decoder = EventDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()


