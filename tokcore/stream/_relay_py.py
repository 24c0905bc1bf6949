"""SSE framing and the usage relay: the pure-Python reference twin.

``UsageRelay`` cuts a ``text/event-stream`` byte stream into events on blank lines (any line
end, split anywhere), forwards the events that cannot carry usage untouched and has
``_usage_py`` rewrite the usage counts of the ones that do, in place. It counts what it did.

An event larger than ``max_event_bytes`` is not held: it goes out as it comes, through a
``BigEvent`` scan (``_bigevent_py``) that holds only a usage value. The multi-line event path
(usage JSON spread over several ``data`` fields, ``_fields``) is shared with the Cython twin,
so both twins give the same bytes.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .._args import Api, BytesLike, check_max_event_bytes, enter_init, in_use, payload_bytes
from ._bigevent_py import BigEvent
from ._dialects import FOREIGN, NONE, NOT_OBJECT, REWRITTEN, TOO_LARGE, UNREADABLE
from ._fields import rewrite_event
from ._usage_py import Rules, make_rules, may_hold_usage

Span = tuple[int, int]

#: default bound on the bytes the relay holds: one event, or one usage value of a larger event
DEFAULT_MAX_EVENT_BYTES = 1 << 20


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
    #: events larger than ``max_event_bytes``: not held, scanned as they streamed through
    oversized: int = 0
    #: usage values larger than ``max_event_bytes`` (in such events): left as they came
    too_large: int = 0


_EVENTS = RelayCounts._fields.index("events")
_OVERSIZED = RelayCounts._fields.index("oversized")
#: RelayCounts field index of each outcome that is counted
OUTCOME_FIELDS = {outcome: RelayCounts._fields.index(name) for outcome, name in (
    (REWRITTEN, "rewritten"), (FOREIGN, "foreign"), (NOT_OBJECT, "not_object"),
    (UNREADABLE, "unreadable"), (TOO_LARGE, "too_large"))}


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
    """Relay a ``text/event-stream`` byte stream, rewriting usage values on the way.

    ``feed`` gives what can be forwarded now, ``close`` the rest. Joined, the output is the
    input with only usage values rewritten (:doc:`/dialects`), however the input is split
    into chunks: events end at a blank line (``\\n``, ``\\r\\n`` or ``\\r`` line ends), the
    usage is looked for in an event's data as WHATWG joins its ``data`` fields, an event goes
    out as soon as its blank line has come, and a chunk of complete events with no usage and
    nothing pending comes back as the same object. Nothing is dropped. An event is held
    whole up to ``max_event_bytes`` (counted up to its blank line's CR or LF); a larger one is
    scanned as it streams, holding only a usage value, so the relay keeps at most that bound
    and a constant.

    Raises, when made, what ``rewrite_usage`` raises for the counts and ``api``, and
    ``ValueError`` for a ``max_event_bytes`` outside [1, 2**63) (``TypeError`` for one that
    is not an ``int``). ``feed`` raises only ``TypeError`` for a chunk that is not
    bytes-like, never on data; ``feed``, ``close`` and ``__init__`` raise ``RuntimeError``
    for a call made while another runs on the same relay (another thread, a hook inside it).
    """

    __slots__ = ("_rules", "_max", "_pending", "_line_start", "_cr", "_big", "_first",
                 "_counts", "_token")
    _token: list[bool]  # taken by each call, __init__ included (_args.enter_init)

    def __init__(self, prompt_tokens: int, cached_tokens: int | None = None, *,
                 api: Api = "chat", max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        # the one signature of both twins (the Cython twin binds through it: _args.Bound)
        self._setup(make_rules(prompt_tokens, cached_tokens, api),
                    check_max_event_bytes(max_event_bytes))

    def _setup(self, rules: Rules, max_event_bytes: int) -> None:
        # the call token (one item, taken by each call: list.pop is atomic under the GIL, and
        # under the list's own lock without it), so a second call at the same time is
        # refused with no lock; __init__ takes it too
        token = enter_init(self, "UsageRelay")
        try:
            self._rules = rules
            self._max = max_event_bytes
            self._pending = bytearray()  # the start of an event whose blank line is not here
            self._line_start = True
            self._cr = False
            self._big: BigEvent | None = None  # the scan of an event too large to hold
            self._first = True  # the next event starts the stream (a BOM may lead it)
            self._counts = [0] * len(RelayCounts._fields)
        finally:
            token.append(True)

    @property
    def pending_bytes(self) -> int:
        """How many bytes are held back: an event waiting for its end, or the usage value of
        an event too large to hold."""
        return len(self._pending) + (self._big.held_bytes if self._big is not None else 0)

    @property
    def counts(self) -> RelayCounts:
        """What the relay has done so far (events, usage rewritten or left alone, why).
        Readable at any time, after ``close()`` too: from inside a running call of its own
        thread (a hook) it is the state that call has reached; on a free-threaded build a read
        from another thread waits for a running call to end."""
        return RelayCounts(*self._counts)

    def _event(self, event: bytes) -> bytes:
        """A complete event, rewritten or as it came (too large to hold: through BigEvent)."""
        # the size counts up to the blank line's CR or LF, so a CRLF split between two
        # reads cannot change it: the same events are held however the stream is cut
        if event[0] != 0x0A and event[0] != 0x0D:  # not an empty line
            self._counts[_EVENTS] += 1
        if len(event) - event.endswith(b"\r\n") > self._max:
            big = self._start_big()
            out, _ = big.feed(event, 0)
            self._end_big(big)
            return out
        return self._scan(event)

    def _start_big(self) -> BigEvent:
        self._counts[_OVERSIZED] += 1
        big = BigEvent(self._rules, self._max, self._first)
        self._first = False
        return big

    def _end_big(self, big: BigEvent) -> None:
        """Take the outcomes counted by a BigEvent scan so far."""
        for outcome, count in enumerate(big.outcomes):
            if count and outcome != NONE:
                self._counts[OUTCOME_FIELDS[outcome]] += count
            big.outcomes[outcome] = 0

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
        token = self._token
        try:
            token.pop()
        except IndexError:
            raise in_use("UsageRelay") from None
        try:
            return self._feed(data)
        finally:
            token.append(True)

    def _feed(self, data: bytes) -> bytes:
        n = len(data)
        if not n:
            return b""
        out: list[bytes] = []
        pos = 0
        copied = 0  # data[copied:pos] is complete events still to go out as they are
        while pos < n:
            big = self._big
            if big is not None:  # inside an event too large to hold
                piece, end = big.feed(data, pos)
                self._end_big(big)
                out.append(data[copied:pos])
                out.append(piece)
                if end < 0:
                    copied = pos = n
                    break
                self._big = None
                self._counts[_EVENTS] += 1
                self._line_start, self._cr = True, data[end - 1] == 0x0D
                copied = pos = end
                continue
            if self._cr and not self._pending and data[pos] == 0x0A:
                pos += 1  # the LF of the CRLF that ended the last event: out with it
                self._cr = False
                continue
            end, self._line_start, self._cr = next_boundary(data, pos, self._line_start,
                                                            self._cr)
            if end < 0:
                tail = data[pos:]
                out.append(data[copied:pos])
                copied = pos
                if len(self._pending) + len(tail) >= self._max:  # it will end up larger
                    big = self._big = self._start_big()  # scanned as it streams from here
                    held = bytes(self._pending)
                    self._pending.clear()
                    self._line_start, self._cr = True, False
                    piece, _ = big.feed(held, 0)  # no blank line in it
                    out.append(piece)
                    continue  # the rest of this read through the scan
                self._pending += tail
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
        token = self._token
        try:
            token.pop()
        except IndexError:
            raise in_use("UsageRelay") from None
        try:
            return self._close()
        finally:
            token.append(True)

    def _close(self) -> bytes:
        event = bytes(self._pending)
        self._pending.clear()
        big, self._big = self._big, None
        self._line_start, self._cr = True, False
        if big is not None:
            self._counts[_EVENTS] += 1
            rest = big.finish()
            self._end_big(big)
            return rest
        if not event:
            return event
        if event[0] != 0x0A and event[0] != 0x0D:
            self._counts[_EVENTS] += 1
        # An unfinished last line still counts as a field: add a line end to read it and
        # take it off again, so the bytes forwarded are exactly the bytes received.
        ended = event if event.endswith((b"\n", b"\r")) else event + b"\n"
        result = self._scan(ended)
        return result if ended is event else result[:-1]
