"""SSE framing and the usage relay: the pure-Python reference twin.

``UsageRelay`` cuts a ``text/event-stream`` byte stream into events on blank lines (any line
end, split anywhere), forwards the events that cannot carry usage untouched and has
``_usage_py`` rewrite the usage counts of the ones that do, in place. It counts what it did.

The multi-line event path (usage JSON spread over several ``data`` fields) is shared: the
Cython twin calls ``rewrite_event`` for it, so both twins give the same bytes.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ._args import BytesLike, check_max_event_bytes, payload_bytes
from ._dialects import FOREIGN, NONE, NOT_OBJECT, REWRITTEN, UNREADABLE
from ._events_py import BOM, LINE_ENDS
from ._usage_py import Edit, Rules, apply_edits, make_rules, may_hold_usage, text_edits

Span = tuple[int, int]

#: default bound on the bytes one event may hold before it is forwarded unscanned
DEFAULT_MAX_EVENT_BYTES = 1 << 20

_COLON = 0x3A


class RelayCounts(NamedTuple):
    """What a relay has done so far."""

    #: complete events seen (an unfinished last one given out by ``close()`` included)
    events: int = 0
    #: usage values rewritten
    rewritten: int = 0
    #: usage objects of another API (none of the dialect's own count keys): left as they came
    foreign: int = 0
    #: usage values that are not objects (nor null): left as they came
    not_object: int = 0
    #: usage that could not be read (an event holding the key whose data is not a JSON
    #: object text, a count too long to be one): left as it came
    unreadable: int = 0
    #: events larger than ``max_event_bytes``: forwarded unscanned
    oversized: int = 0


_EVENTS = RelayCounts._fields.index("events")
_OVERSIZED = RelayCounts._fields.index("oversized")
#: RelayCounts field index of each outcome that is counted
OUTCOME_FIELDS = {outcome: RelayCounts._fields.index(name) for outcome, name in (
    (REWRITTEN, "rewritten"), (FOREIGN, "foreign"), (NOT_OBJECT, "not_object"),
    (UNREADABLE, "unreadable"))}


# --- events: lines and data fields ---------------------------------------------------------


def data_fields(event: bytes, bom: bool) -> list[Span]:
    """The byte spans of the values of an event's ``data`` fields, in order.

    ``event`` holds whole lines (an unterminated last line is not a field yet).
    """
    spans: list[Span] = []
    begin = 3 if bom and event.startswith(BOM) else 0
    for match in LINE_ENDS.finditer(event, begin):
        line_end = match.start()
        if event.startswith(b"data", begin, line_end):
            rest = begin + 4
            if rest == line_end:
                spans.append((rest, rest))  # "data" alone: an empty value
            elif event[rest] == _COLON:
                rest += 1
                if rest < line_end and event[rest] == 0x20:
                    rest += 1
                spans.append((rest, line_end))
        begin = match.end()
    return spans


def rewrite_event(event: bytes, bom: bool, rules: Rules) -> tuple[int, bytes | None]:
    """``(outcome, bytes)``: a complete event with its usage rewritten, or None for the
    bytes when it goes out as it came.

    The usage JSON is looked for in the event's data as the WHATWG rules build it: the
    values of its ``data`` fields joined with ``\\n``. An edit that spans several data
    fields (only a replaced value that runs over lines can) puts its text where it starts
    and removes the rest of the old value from the following fields; field names, line ends
    and other lines stay.
    """
    spans = data_fields(event, bom)
    if not spans:
        return NONE, None
    if len(spans) == 1:
        start, end = spans[0]
        outcome, edits = text_edits(event[start:end], rules)
        if outcome != REWRITTEN:
            return outcome, None
        return outcome, apply_edits(event, edits, start)
    joined = b"\n".join(event[s:e] for s, e in spans)
    outcome, edits = text_edits(joined, rules)
    if outcome != REWRITTEN:
        return outcome, None
    return outcome, apply_edits_to_fields(event, spans, edits)


def apply_edits_to_fields(event: bytes, spans: list[Span], edits: list[Edit]) -> bytes:
    """Edits of the joined data made in the event: data offset ``offset`` of a field is at
    event offset ``start``; a joiner (the ``\\n`` between two fields) is never an edit's
    first or last byte, but a replaced value may run over it."""
    pieces, copied = [], 0
    for edit_start, edit_end, text in edits:
        offset, placed = 0, False
        for start, end in spans:
            length = end - start
            if edit_start == edit_end:  # an insertion
                if offset <= edit_start <= offset + length:
                    at = start + edit_start - offset
                    pieces.append(event[copied:at])
                    pieces.append(text)
                    copied = at
                    break
            else:
                cut_start = max(edit_start, offset)
                cut_end = min(edit_end, offset + length)
                if cut_start < cut_end:
                    pieces.append(event[copied:start + cut_start - offset])
                    if not placed:
                        pieces.append(text)
                        placed = True
                    copied = start + cut_end - offset
            offset += length + 1
    pieces.append(event[copied:])
    return b"".join(pieces)


# --- UsageRelay ----------------------------------------------------------------------------

_BLANK_LINE = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r|\n)")


def next_boundary(data: bytes, pos: int, line_start: bool, cr: bool) -> tuple[int, bool, bool]:
    """``(end, line_start, cr)``: ``end`` is just past the first blank line at or after
    ``pos``, or -1 when there is none. ``line_start``: the scan is at the start of a line;
    ``cr``: the last byte was a CR, so a LF right after it completes that line end."""
    n = len(data)
    if pos < n and cr:
        if data[pos] == 0x0A:
            pos += 1  # the LF of a CRLF split across reads
        cr = False
    if pos >= n:
        return -1, line_start, cr
    first = data[pos]
    if line_start and (first == 0x0A or first == 0x0D):  # an empty line right here
        end = pos + 2 if data[pos:pos + 2] == b"\r\n" else pos + 1
        return end, True, data[end - 1] == 0x0D
    match = _BLANK_LINE.search(data, pos)
    if match is not None:
        end = match.end()
        return end, True, data[end - 1] == 0x0D
    last = data[n - 1]
    return -1, last == 0x0A or last == 0x0D, last == 0x0D


class UsageRelay:
    """Relay a ``text/event-stream`` byte stream, rewriting usage values on the way."""

    __slots__ = ("_rules", "_max", "_pending", "_line_start", "_cr", "_skipping", "_first",
                 "_counts")

    def __init__(self, prompt_tokens: int, cached_tokens: int | None = None, *,
                 api: str = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._rules = make_rules(prompt_tokens, cached_tokens, api)
        self._max = check_max_event_bytes(max_event_bytes)
        self._pending = bytearray()  # the start of an event whose blank line is not here yet
        self._line_start = True
        self._cr = False
        self._skipping = False  # inside an event too large to hold: forwarded as it comes
        self._first = True  # the next event starts the stream (a BOM may lead it)
        self._counts = [0] * len(RelayCounts._fields)

    @property
    def pending_bytes(self) -> int:
        """How many bytes are held back, waiting for the end of their event."""
        return len(self._pending)

    @property
    def counts(self) -> RelayCounts:
        """What the relay has done so far (events, usage rewritten or left alone, why)."""
        return RelayCounts(*self._counts)

    def _event(self, event: bytes) -> bytes:
        """A complete event, rewritten or as it came (too large: as it came, unscanned)."""
        # the size counts up to the blank line's CR or LF, so a CRLF split between two
        # reads cannot change it: the same events are scanned however the stream is cut
        if event[0] != 0x0A and event[0] != 0x0D:  # not an empty line
            self._counts[_EVENTS] += 1
        if len(event) - event.endswith(b"\r\n") > self._max:
            self._first = False
            self._counts[_OVERSIZED] += 1
            return event
        return self._scan(event)

    def _scan(self, event: bytes) -> bytes:
        first, self._first = self._first, False
        if not may_hold_usage(event):
            return event
        outcome, rewritten = rewrite_event(event, first, self._rules)
        if outcome != NONE:
            self._counts[OUTCOME_FIELDS[outcome]] += 1
        return event if rewritten is None else rewritten

    def feed(self, chunk: BytesLike) -> bytes:
        """The bytes that can be forwarded now (possibly ``b""``)."""
        data = payload_bytes(chunk, "chunk")
        n = len(data)
        if not n:
            return b""
        out: list[bytes] = []
        pos = 0
        copied = 0  # data[copied:pos] is complete events still to go out as they are
        while pos < n:
            if self._cr and not self._pending and not self._skipping and data[pos] == 0x0A:
                pos += 1  # the LF of the CRLF that ended the last event: out with it
                self._cr = False
                continue
            end, self._line_start, self._cr = next_boundary(data, pos, self._line_start,
                                                            self._cr)
            if self._skipping:
                if end < 0:
                    pos = n
                    break
                self._skipping = False
                self._first = False
                self._counts[_EVENTS] += 1
                pos = end
                continue
            if end < 0:
                tail = data[pos:]
                if len(self._pending) + len(tail) >= self._max:  # it will end up larger
                    self._skipping = True  # forward what is held and the rest of this event
                    self._counts[_OVERSIZED] += 1
                    out.append(data[copied:pos])
                    out.append(bytes(self._pending))
                    self._pending.clear()
                    copied, pos = pos, n
                else:
                    self._pending += tail
                    out.append(data[copied:pos])
                    copied = pos = n
                break
            if self._pending:
                self._pending += data[pos:end]
                event = bytes(self._pending)
                self._pending.clear()
                out.append(data[copied:pos])
                out.append(self._event(event))
                copied = end
            else:
                event = data[pos:end]
                result = self._event(event)
                if result is not event:
                    out.append(data[copied:pos])
                    out.append(result)
                    copied = end
            pos = end
        if copied == 0 and not out and not self._pending:
            return data  # complete events, none rewritten: the chunk itself
        out.append(data[copied:pos])
        return b"".join(out)

    def close(self) -> bytes:
        """The rest: an incomplete last event, processed as if its blank line had come."""
        event = bytes(self._pending)
        self._pending.clear()
        skipping, self._skipping = self._skipping, False
        self._line_start, self._cr = True, False
        if skipping:
            self._counts[_EVENTS] += 1
        if not event or skipping:
            return event
        if event[0] != 0x0A and event[0] != 0x0D:
            self._counts[_EVENTS] += 1
        # An unfinished last line still counts as a field: add a line end to read it and
        # take it off again, so the bytes forwarded are exactly the bytes received.
        ended = event if event.endswith((b"\n", b"\r")) else event + b"\n"
        result = self._scan(ended)
        return result if ended is event else result[:-1]
