"""The WHATWG HTML "event stream" decoder: the pure-Python reference twin.

``EventDecoder`` turns bytes, split anywhere, into ``Event`` objects by the parsing rules of
the HTML standard (BOM, comments, the four fields, all line ends). ``Event``,
``EventTooLarge`` and the default bound are shared: the Cython twin uses the same ones.

What a decoder holds is bounded by ``max_event_bytes``: the bytes of its unfinished line
plus the event's data buffer (each ``data`` value and its LF) and its event type. Line ends
are not held and not counted. The first byte that would take the held bytes past the bound
drops the event (data, type, ``retry``, and an ``id`` it set) and starts a skip to its blank
line; the ``feed`` that did so still decodes the rest of its chunk, then raises
``EventTooLarge`` (a ``ValueError``) with the events it completed, so none is lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .._args import BytesLike, check_max_event_bytes, enter_init, in_use, payload_view

#: a UTF-8 byte order mark, skipped at the start of a stream
BOM = b"\xef\xbb\xbf"
#: any SSE line end (the relay's framing reads lines by the same rule)
LINE_ENDS = re.compile(rb"\r\n|\r|\n")

#: The decoder must hold a whole event to hand it over, and one event can be legitimately
#: large (a whole response body, an image as base64), so the default only stops a runaway
#: upstream (no blank line, endless data lines) from taking all memory. The relay's default
#: is smaller because it forwards an oversized event unscanned; the decoder has to drop it.
DEFAULT_MAX_EVENT_BYTES = 64 << 20

_OFFSETS_SHOWN = 5  # in a message; ``EventTooLarge.offsets`` has them all


class Event(NamedTuple):
    """One dispatched server-sent event."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class EventTooLarge(ValueError):
    """An event held more than ``max_event_bytes``: it was dropped and skipped up to its
    blank line. Raised by the call that passed the bound once it has decoded its whole chunk:
    ``events`` are the events that call completed (in stream order, the dropped ones left
    out), ``offsets`` the stream offsets (bytes fed before the byte that did not fit) where
    the bound was passed, one for each dropped event. The decoder can go on being fed."""

    def __init__(self, message: str, events: list[Event] | None = None,
                 offsets: list[int] | None = None) -> None:
        super().__init__(message)
        self.events: list[Event] = [] if events is None else events
        self.offsets: list[int] = [] if offsets is None else offsets


def event_too_large(limit: int, offsets: list[int], events: list[Event]) -> EventTooLarge:
    """The error of a call that dropped ``len(offsets)`` events (the message of both twins)."""
    if len(offsets) == 1:
        what = f"an event passed max_event_bytes ({limit}) at stream offset {offsets[0]}"
    else:
        shown = ", ".join(map(str, offsets[:_OFFSETS_SHOWN]))
        more = ", ..." if len(offsets) > _OFFSETS_SHOWN else ""
        what = (f"{len(offsets)} events passed max_event_bytes ({limit}), at stream offsets "
                f"{shown}{more}")
    return EventTooLarge(f"{what}: dropped and skipped up to the blank line (the events "
                         "this call completed are the error's .events)", events, offsets)


class EventDecoder:
    """Bytes in, ``Event`` objects out, by the WHATWG HTML event-stream parsing rules.

    ``id`` is the last event ID in force when the event was dispatched (None until an
    ``id`` field sets one); ``retry`` is the reconnection time set by a ``retry`` field of
    this event, else None. One decoder is one stream's state: a call made while another call
    on it is running (another thread's, or a hook inside it), ``__init__`` included, raises
    ``RuntimeError``.

    ``max_event_bytes`` bounds what an event holds: the unfinished line, each data value with
    its LF, and the event type (line ends do not count). It is checked at the exact byte, so
    the events, errors and offsets are the same however the stream is split; the byte that
    would pass it drops the event (an id it set included) and skips to its blank line.

    Raises, when made, ``TypeError`` or ``ValueError`` for a ``max_event_bytes`` that is not
    an ``int`` in [1, 2**63); ``feed`` raises ``EventTooLarge`` (a ``ValueError``) at the end
    of the read that passed the bound, ``TypeError`` for a chunk that is not bytes-like and
    ``ValueError`` after ``close()``.
    """

    __slots__ = ("_max", "_line", "_data", "_type", "_last_id", "_id_before", "_retry",
                 "_started", "_cr", "_skipping", "_skip_line_start", "_offset", "_closed",
                 "_token")
    _token: list[bool]  # taken by each call, __init__ included (_args.enter_init)

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        # the one signature of both twins (the Cython twin binds through it: _args.Bound)
        self._setup(check_max_event_bytes(max_event_bytes))

    def _setup(self, max_event_bytes: int) -> None:
        # taken by every call: a second call at once (another thread) fails at once, as the
        # Cython twin's busy flag has it (a flag alone is not atomic; list.pop is, under the
        # GIL or, without it, under the list's own lock: no lock on GIL builds); __init__
        # takes it too
        token = enter_init(self, "EventDecoder")
        try:
            self._max = max_event_bytes
            self._line = bytearray()  # an unfinished line
            self._data = bytearray()  # the data buffer: each data value and a LF
            self._type = b""  # the event type buffer
            self._last_id: str | None = None
            self._id_before: str | None = None  # the last event ID when this event began
            self._retry: int | None = None
            self._started = False  # past the first line (where a BOM may be)
            self._cr = False  # the last chunk ended with a CR: a LF first in the next ends it
            self._skipping = False  # dropped an event: skipping it up to its blank line
            self._skip_line_start = False  # skipping, and no byte of the current line seen
            self._offset = 0  # bytes fed so far
            self._closed = False
        finally:
            token.append(True)

    @property
    def pending_bytes(self) -> int:
        """Bytes held of the event being decoded (at most ``max_event_bytes``)."""
        return self._max - self._room()

    def feed(self, chunk: BytesLike) -> list[Event]:
        """The events this chunk completes, in stream order."""
        data = chunk if type(chunk) is bytes else bytes(payload_view(chunk, "chunk"))
        token = self._token
        try:
            token.pop()
        except IndexError:
            raise in_use("EventDecoder") from None
        try:
            if self._closed:
                raise ValueError("feed() after close()")
            return self._feed(data)
        finally:
            token.append(True)

    def close(self) -> list[Event]:
        """End of stream: an unfinished last event is discarded, as the rules say."""
        token = self._token
        try:
            token.pop()
        except IndexError:
            raise in_use("EventDecoder") from None
        try:
            self._closed = True
            self._drop()
            self._skipping = False
            return []
        finally:
            token.append(True)

    def _room(self) -> int:
        """How many more bytes the decoder may hold."""
        return self._max - len(self._line) - len(self._data) - len(self._type)

    def _feed(self, data: bytes) -> list[Event]:
        events: list[Event] = []
        n = len(data)
        if not n:
            return events
        offset = self._offset
        self._offset += n
        # what is held grows by at most the bytes read: a chunk that fits needs no checks
        check = n > self._max - len(self._line) - len(self._data) - len(self._type)
        dropped: list[int] = []
        begin = 0
        if self._cr and data[0] == 0x0A:
            begin = 1  # the LF of a CRLF split across chunks
        for match in LINE_ENDS.finditer(data, begin):
            end = match.start()
            if self._skipping:
                if end == begin and self._skip_line_start:
                    self._skipping = False  # the blank line that ends the dropped event
                self._skip_line_start = True
            elif check and end - begin > self._room():
                dropped.append(offset + begin + self._room())
                self._drop()
                self._skip_line_start = True  # this line ends here
            else:
                line = data[begin:end]
                if self._line:
                    self._line += line
                    line = bytes(self._line)
                    self._line.clear()
                self._field(line, events)
            begin = match.end()
        # a CR last: a LF first in the next chunk is the end of the same line
        self._cr = begin == n and data[n - 1] == 0x0D
        if begin < n:  # an unfinished line
            if self._skipping:
                self._skip_line_start = False
            elif check and n - begin > self._room():
                dropped.append(offset + begin + self._room())
                self._drop()
                self._skip_line_start = False
            else:
                self._line += data[begin:]
        if dropped:
            raise event_too_large(self._max, dropped, events)
        return events

    def _drop(self) -> None:
        """Forget the event being decoded (as if it never came) and skip the rest of it."""
        self._line.clear()
        self._data.clear()
        self._type = b""
        self._retry = None
        self._last_id = self._id_before
        self._started = True
        self._skipping = True

    def _field(self, raw: bytes, events: list[Event]) -> None:
        if not self._started:
            self._started = True
            if raw.startswith(BOM):
                raw = raw[3:]
        if not raw:
            self._dispatch(events)
            return
        if raw[0] == 0x3A:  # ":" a comment
            return
        # ":" and the ASCII field names never occur inside a UTF-8 sequence, so the bytes
        # are split and compared as the decoded text would be
        name, colon, value = raw.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data += value
            self._data += b"\n"
        elif name == b"event":
            self._type = value
        elif name == b"id":
            if b"\0" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():  # ASCII digits only, and not empty
                try:
                    self._retry = int(value)
                except ValueError:  # more digits than int() converts: ignored
                    pass

    def _dispatch(self, events: list[Event]) -> None:
        if self._data:
            del self._data[-1]  # the LF after the last value
            kind = self._type.decode("utf-8", "replace") if self._type else "message"
            events.append(Event(kind, self._data.decode("utf-8", "replace"), self._last_id,
                                self._retry))
            self._data.clear()
        self._type = b""
        self._retry = None
        self._id_before = self._last_id


def iter_events(chunks: Iterable[BytesLike], *,
                max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Iterator[Event]:
    """Decode an iterable of byte chunks into events. An event over ``max_event_bytes`` ends
    the iteration with ``EventTooLarge``, once the events its chunk completed are yielded.

    Raises ``EventTooLarge`` (a ``ValueError``) after the read that passed the bound,
    ``TypeError`` for a chunk that is not bytes-like, and what ``EventDecoder`` raises for
    ``max_event_bytes``.
    """
    return _iterate(EventDecoder(max_event_bytes=max_event_bytes), chunks)


def _iterate(decoder: EventDecoder, chunks: Iterable[BytesLike]) -> Iterator[Event]:
    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as exc:
            yield from exc.events
            raise
        yield from events
    yield from decoder.close()
