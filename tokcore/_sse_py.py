"""SSE usage relay and event decoder: the pure-Python reference twin.

``find_usage`` decides by one scan of the bytes (string state with escapes, nesting depth)
whether a JSON object text has a top-level ``"usage"`` member, without parsing it.
``rewrite_usage`` replaces only that member's value. ``UsageRelay`` cuts a byte stream into
events on blank lines, forwards the events that cannot carry usage untouched and rewrites
the one that does. ``EventDecoder`` follows the WHATWG HTML "event stream" rules.

The argument checks, the rewrite of the usage value itself and the multi-line event path
are shared: the Cython twin imports them, so both twins give the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from operator import index as _index
from typing import NamedTuple, Union

Span = tuple[int, int]
BytesLike = Union[bytes, bytearray, memoryview]

#: default bound on the bytes one event may hold before it is forwarded unscanned
DEFAULT_MAX_EVENT_BYTES = 1 << 20

BOM = b"\xef\xbb\xbf"
USAGE_NEEDLE = b'"usage"'
#: any JSON spelling of "usage" with an escaped letter contains this (\u0075, \u0073...)
ESCAPE_NEEDLE = b"\\u00"

_JSON_WS = b" \t\n\r"
_LBRACE, _RBRACE, _LBRACKET, _RBRACKET = 0x7B, 0x7D, 0x5B, 0x5D
_QUOTE, _COLON, _COMMA, _BACKSLASH = 0x22, 0x3A, 0x2C, 0x5C
_OPENERS = (_LBRACE, _LBRACKET)
_CLOSERS = (_RBRACE, _RBRACKET)

# One token per match: a whole string, a literal run, a structural byte, a whitespace run,
# or a lone quote (an unterminated string: the text is truncated).
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[^ \t\n\r{}\[\]:,"]+|[{}\[\]:,]|[ \t\n\r]+|"', re.S)
# The last member is "usage": null (checked backwards, see _ends_with_null_usage).
_NULL_USAGE_TAIL = re.compile(rb'[,{][ \t\n\r]*"usage"[ \t\n\r]*:[ \t\n\r]*null[ \t\n\r]*}'
                              rb'[ \t\n\r]*\Z')
_SIMPLE_ESCAPES = {ord('"'): 0x22, ord("\\"): 0x5C, ord("/"): 0x2F, ord("b"): 0x08,
                   ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09}
_USAGE_UNITS = [ord(c) for c in "usage"]
_HEX = frozenset(b"0123456789abcdefABCDEF")

# scanner states at depth 1 (the top-level object)
_BEFORE, _FIRST_KEY, _KEY, _COLON_NEXT, _VALUE, _NESTED, _AFTER, _DONE = range(8)


# --- argument checks, shared by both twins -------------------------------------------------

def payload_view(payload: object, what: str = "payload") -> memoryview:
    """A flat byte view of a bytes-like payload; ``str`` and the rest are a ``TypeError``."""
    if isinstance(payload, str):
        raise TypeError(f"{what} must be a bytes-like object (UTF-8 JSON), not str")
    try:
        view = memoryview(payload)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be a bytes-like object, not {type(payload).__name__}") \
            from None
    if not view.c_contiguous:
        raise TypeError(f"{what} must be a contiguous bytes-like object")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def check_count(value: object, name: str) -> int:
    """A token count: an integer (not a bool) >= 0."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        count = _index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if count < 0:
        raise ValueError(f"{name} must be >= 0, got {count}")
    return count


def check_counts(prompt_tokens: object, cached_tokens: object) -> tuple[int, int | None]:
    prompt = check_count(prompt_tokens, "prompt_tokens")
    cached = None if cached_tokens is None else check_count(cached_tokens, "cached_tokens")
    return prompt, cached


def check_max_event_bytes(value: object) -> int:
    limit = check_count(value, "max_event_bytes")
    if limit < 1:
        raise ValueError("max_event_bytes must be >= 1")
    return limit


# --- find_usage ----------------------------------------------------------------------------

def is_usage_key(key: bytes) -> bool:
    """Whether a JSON string token (quotes included) decodes to ``usage``."""
    inner = key[1:-1]
    if b"\\" not in inner:
        return inner == b"usage"
    units: list[int] = []
    i, n = 0, len(inner)
    while i < n:
        byte = inner[i]
        if byte != _BACKSLASH:
            units.append(byte)
            i += 1
            continue
        kind = inner[i + 1] if i + 1 < n else -1
        if kind in _SIMPLE_ESCAPES:
            units.append(_SIMPLE_ESCAPES[kind])
            i += 2
        elif kind == ord("u") and i + 6 <= n and all(b in _HEX for b in inner[i + 2:i + 6]):
            units.append(int(inner[i + 2:i + 6], 16))
            i += 6
        else:
            return False  # an invalid escape: not a JSON string at all
        if len(units) > len(_USAGE_UNITS):
            return False
    return units == _USAGE_UNITS


def ends_with_null_usage(data: bytes) -> bool:
    """The text ends with ``"usage":null}``, its last top-level member.

    In valid JSON the quote after ``,`` or ``{`` opens a key (``usage`` outside a string is
    not JSON), and the final ``}`` closes the top-level object, so the last ``usage`` key is
    null whatever comes before: the answer is None without a forward scan.
    """
    return data.endswith((b"}", b" ", b"\t", b"\n", b"\r")) and \
        _NULL_USAGE_TAIL.search(data, max(0, len(data) - 64)) is not None


def scan_usage(data: bytes) -> Span | None:
    """The forward scan: the top-level object's members, nested values skipped by depth."""
    state, depth = _BEFORE, 0
    found: Span | None = None
    is_usage = False
    value_start = 0
    start = 3 if data.startswith(BOM) else 0  # json.loads(bytes) skips a UTF-8 BOM too
    for match in _TOKENS.finditer(data, start):
        begin, end = match.span()
        byte = data[begin]
        if byte in _JSON_WS:
            continue
        if state == _NESTED:
            if byte == _QUOTE and end - begin == 1:
                return None  # unterminated string
            if byte in _OPENERS:
                depth += 1
            elif byte in _CLOSERS:
                depth -= 1
                if depth == 1:
                    state = _AFTER
                    if is_usage:
                        found = (value_start, end)
            continue
        if state == _BEFORE:
            if byte != _LBRACE:
                return None
            state, depth = _FIRST_KEY, 1
        elif state in (_FIRST_KEY, _KEY):
            if byte == _QUOTE and end - begin > 1:
                is_usage = is_usage_key(data[begin:end])
                state = _COLON_NEXT
            elif byte == _RBRACE and state == _FIRST_KEY:
                state, depth = _DONE, 0
            else:
                return None
        elif state == _COLON_NEXT:
            if byte != _COLON:
                return None
            state = _VALUE
        elif state == _VALUE:
            if byte in _OPENERS:
                state, depth, value_start = _NESTED, 2, begin
            elif byte == _QUOTE:
                if end - begin == 1:
                    return None
                state = _AFTER
                if is_usage:
                    found = (begin, end)
            elif byte in _CLOSERS or byte == _COLON or byte == _COMMA:
                return None
            else:  # a literal: number, true, false, null (or junk)
                state = _AFTER
                if is_usage:
                    found = None if data[begin:end] == b"null" else (begin, end)
        elif state == _AFTER:
            if byte == _COMMA:
                state = _KEY
            elif byte == _RBRACE:
                state, depth = _DONE, 0
            else:
                return None
        else:  # _DONE: only whitespace may follow the object
            return None
    return found if state == _DONE else None


def find_usage_bytes(data: bytes) -> Span | None:
    if USAGE_NEEDLE not in data and ESCAPE_NEEDLE not in data:
        return None  # no spelling of the key at all
    if ends_with_null_usage(data):
        return None
    return scan_usage(data)


def find_usage(payload: BytesLike) -> Span | None:
    """Byte span of the top-level ``"usage"`` value of a JSON object text, or None."""
    return find_usage_bytes(bytes(payload_view(payload)))


# --- rewrite_usage -------------------------------------------------------------------------

def new_usage_value(value: bytes, prompt: int, cached: int | None) -> bytes | None:
    """The rewritten usage value as compact ASCII JSON, or None when it is not an object."""
    try:
        usage = json.loads(value.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None
    if type(usage) is not dict:
        return None
    completion = usage.get("completion_tokens")
    usage["prompt_tokens"] = prompt
    usage["total_tokens"] = prompt + (completion if type(completion) is int else 0)
    if cached is not None:
        details = usage.get("prompt_tokens_details")
        if type(details) is not dict:
            details = usage["prompt_tokens_details"] = {}
        details["cached_tokens"] = cached
    return json.dumps(usage, separators=(",", ":")).encode("ascii")


def splice(data: BytesLike, start: int, end: int, value: bytes) -> bytes:
    return b"".join((data[:start], value, data[end:]))


def rewrite_usage(payload: BytesLike, prompt_tokens: int,
                  cached_tokens: int | None = None) -> bytes:
    """The payload with only its usage value rewritten (see the contract)."""
    view = payload_view(payload)
    prompt, cached = check_counts(prompt_tokens, cached_tokens)
    data = payload if type(payload) is bytes else bytes(view)
    span = find_usage_bytes(data)
    if span is not None:
        value = new_usage_value(data[span[0]:span[1]], prompt, cached)
        if value is not None:
            return splice(data, span[0], span[1], value)
    return data


# --- events: lines and data fields ---------------------------------------------------------

_LINE_ENDS = re.compile(rb"\r\n|\r|\n")


def data_fields(event: bytes, bom: bool) -> list[Span]:
    """The byte spans of the values of an event's ``data`` fields, in order.

    ``event`` holds whole lines (an unterminated last line is not a field yet).
    """
    spans: list[Span] = []
    begin = 3 if bom and event.startswith(BOM) else 0
    for match in _LINE_ENDS.finditer(event, begin):
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


def rewrite_event(event: bytes, bom: bool, prompt: int, cached: int | None) -> bytes | None:
    """A complete event with its usage rewritten, or None when it has none.

    The usage JSON is looked for in the event's data as the WHATWG rules build it: the
    values of its ``data`` fields joined with ``\\n``. When the usage value spreads over
    several data fields, the new value goes where it starts and the rest of the old value
    is removed from the following fields; field names, line ends and other lines stay.
    """
    spans = data_fields(event, bom)
    if not spans:
        return None
    if len(spans) == 1:
        start, end = spans[0]
        span = find_usage_bytes(event[start:end])
        if span is None:
            return None
        value = new_usage_value(event[start + span[0]:start + span[1]], prompt, cached)
        return None if value is None else splice(event, start + span[0], start + span[1], value)
    joined = b"\n".join(event[s:e] for s, e in spans)
    span = find_usage_bytes(joined)
    if span is None:
        return None
    value = new_usage_value(joined[span[0]:span[1]], prompt, cached)
    if value is None:
        return None
    pieces, copied, offset = [], 0, 0
    for start, end in spans:  # the data offset `offset` is at event offset `start`
        cut_start = max(span[0], offset)
        cut_end = min(span[1], offset + end - start)
        if cut_start < cut_end:  # the value starts and ends on data bytes, never a joiner
            pieces.append(event[copied:start + cut_start - offset])
            if cut_start == span[0]:
                pieces.append(value)
            copied = start + cut_end - offset
        offset += end - start + 1
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

    __slots__ = ("_prompt", "_cached", "_max", "_pending", "_line_start", "_cr", "_skipping",
                 "_first")

    def __init__(self, prompt_tokens: int, cached_tokens: int | None = None, *,
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._prompt, self._cached = check_counts(prompt_tokens, cached_tokens)
        self._max = check_max_event_bytes(max_event_bytes)
        self._pending = bytearray()  # the start of an event whose blank line is not here yet
        self._line_start = True
        self._cr = False
        self._skipping = False  # inside an event too large to hold: forwarded as it comes
        self._first = True  # the next event starts the stream (a BOM may lead it)

    @property
    def pending_bytes(self) -> int:
        """How many bytes are held back, waiting for the end of their event."""
        return len(self._pending)

    def _event(self, event: bytes) -> bytes:
        """A complete event, rewritten or as it came (too large: as it came, unscanned)."""
        # the size counts up to the blank line's CR or LF, so a CRLF split between two
        # reads cannot change it: the same events are scanned however the stream is cut
        if len(event) - event.endswith(b"\r\n") > self._max:
            self._first = False
            return event
        return self._scan(event)

    def _scan(self, event: bytes) -> bytes:
        first, self._first = self._first, False
        if USAGE_NEEDLE not in event and ESCAPE_NEEDLE not in event:
            return event
        rewritten = rewrite_event(event, first, self._prompt, self._cached)
        return event if rewritten is None else rewritten

    def feed(self, chunk: BytesLike) -> bytes:
        """The bytes that can be forwarded now (possibly ``b""``)."""
        data = chunk if type(chunk) is bytes else bytes(payload_view(chunk, "chunk"))
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
                pos = end
                continue
            if end < 0:
                tail = data[pos:]
                if len(self._pending) + len(tail) >= self._max:  # it will end up larger
                    self._skipping = True  # forward what is held and the rest of this event
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
        if not event or skipping:
            return event
        # An unfinished last line still counts as a field: add a line end to read it and
        # take it off again, so the bytes forwarded are exactly the bytes received.
        ended = event if event.endswith((b"\n", b"\r")) else event + b"\n"
        result = self._scan(ended)
        return result if ended is event else result[:-1]


# --- Event and EventDecoder ----------------------------------------------------------------

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
        for match in _LINE_ENDS.finditer(data):
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


