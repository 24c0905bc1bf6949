"""Independent oracles for the JSON and SSE harnesses, written from the specs, not from tokcore.

- :func:`whatwg_events`: the WHATWG HTML "event stream" interpretation of a whole stream.
- :func:`sse_blocks`: the same stream cut into its events as bytes (blank-line framing), with
  each event's data as the WHATWG rules build it, for the relay's byte-level checks.
- :func:`strict_json`: ``json.loads`` limited to RFC 8259 (no NaN/Infinity, UTF-8 only).
- :data:`DIALECTS`, :func:`usage_at`, :func:`rewritten_usage`: where each API puts its usage
  object and what ``rewrite_usage`` must make of it (docs/dialects.md's dialect table; the
  same rules as ``tests/_usage.py``'s ``expected_usage``, which a test checks this against).

Each is cheap enough to run on every fuzz input that needs it, and is only run then.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, Optional

from _parity import Allow

NOT_JSON = object()  # strict_json's answer for text that is not JSON
# (event, data, id, retry); a runtime alias, so Optional (X | None needs 3.10 there)
EventTuple = tuple[str, str, Optional[str], Optional[int]]  # noqa: UP045

BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


def whatwg_events(stream: bytes) -> list[EventTuple]:
    """Every event a conforming client dispatches for ``stream`` (read to its end).

    The stream is decoded as UTF-8 with replacement and one leading BOM dropped; a last line
    without its line end and a last event without its blank line are not dispatched.
    ``id`` is the last event ID in force (None before any ``id`` field), ``retry`` the value
    of a valid ``retry`` field of this event (None without one): tokcore's reading of the
    fields the spec keeps on the EventSource.
    """
    return [event for event, _ in whatwg_stream(stream)[0]]


def whatwg_stream(stream: bytes, bound: int | None = None) -> \
        tuple[list[tuple[EventTuple, int]], list[int]]:
    """``(events, drops)``: :func:`whatwg_events` with, for each event, the stream offset
    of the byte that dispatches it (the first byte of its blank line's line end); and
    ``EventDecoder(max_event_bytes=bound)``'s bound (its docstring): the decoder holds the
    unfinished line's bytes (a BOM included), each data value with its LF and the event type;
    the byte that would take that past ``bound`` drops the event (its data, type, retry and
    an id it set) and skips to its blank line. ``drops`` are those bytes' offsets."""
    events: list[tuple[EventTuple, int]] = []
    drops: list[int] = []
    data: list[bytes] = []
    held = 0  # the data values with their LFs, and the event type
    kind = b""
    last_id: str | None = None
    id_before: str | None = None  # last_id when this event began
    retry: int | None = None
    skipping = False
    line_start = 0
    spans = []  # (start, end) of each line, its line end left out
    for match in _LINE_END.finditer(stream):
        spans.append((line_start, match.start()))
        line_start = match.end()
    unended = (line_start, len(stream)) if line_start < len(stream) else None
    for index, (begin, end) in enumerate(spans):
        raw = stream[begin:end]
        if skipping:
            skipping = bool(raw)  # the blank line that ends the dropped event
            continue
        if bound is not None and held + len(raw) > bound:
            drops.append(begin + bound - held)
            data, held, kind, retry, last_id, skipping = [], 0, b"", None, id_before, True
            continue
        if index == 0 and raw.startswith(BOM):
            raw = raw[3:]
        if not raw:  # dispatch
            if data:
                event = (kind.decode("utf-8", "replace") if kind else "message",
                         b"\n".join(data).decode("utf-8", "replace"), last_id, retry)
                events.append((event, end))
            data, held, kind, retry, id_before = [], 0, b"", None, last_id
            continue
        if raw[0] == 0x3A:  # a comment
            continue
        name, colon, value = raw.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
            held += len(value) + 1
        elif name == b"event":
            held += len(value) - len(kind)
            kind = value
        elif name == b"id":
            if b"\0" not in value:
                last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value and all(48 <= c <= 57 for c in value):
                try:
                    retry = int(value)
                except ValueError:  # past int()'s digit limit: ignored
                    pass
    if unended is not None and not skipping and bound is not None \
            and held + unended[1] - unended[0] > bound:
        drops.append(unended[0] + bound - held)
    return events, drops


class Block(NamedTuple):
    """One event of a stream as bytes."""

    #: its bytes: the blank lines before it, its lines, its blank line (the last event: to
    #: the end of the stream, blank lines after it included); the blocks join to the stream
    raw: bytes
    #: its lines without their line ends (an unended last line too: the relay reads it)
    lines: list[bytes]
    #: ended by a blank line (else the stream ended first)
    complete: bool
    #: its data as WHATWG builds it (the data fields' values joined with LF), None without
    #: any data field
    data: bytes | None


def sse_blocks(stream: bytes) -> list[Block]:
    """The events of ``stream`` in order, as bytes, by the WHATWG framing: an event is a
    run of lines that are not blank, ended by a blank line or by the end of the stream. A
    leading BOM is no byte of the first line (so a line that is only the BOM is blank)."""
    blocks: list[Block] = []
    start = 0
    line_start = 3 if stream.startswith(BOM) else 0
    lines: list[bytes] = []
    for match in _LINE_END.finditer(stream, line_start):
        line = stream[line_start:match.start()]
        line_start = match.end()
        if line:
            lines.append(line)
        elif lines:  # the blank line that ends an event
            blocks.append(_block(stream[start:line_start], lines, True))
            lines = []
            start = line_start
    tail = stream[line_start:]
    if tail or lines:
        blocks.append(_block(stream[start:], lines + ([tail] if tail else []), False))
    elif blocks and start < len(stream):  # blank lines after the last event
        last = blocks[-1]
        blocks[-1] = last._replace(raw=last.raw + stream[start:])
    return blocks


_RUN_OF_LINES = re.compile(rb"[^\n]+(?:\n[^\n]+)*")


def event_count(stream: bytes) -> int:
    """``len(sse_blocks(stream))``, from C loops: the runs of non-blank lines."""
    if stream.startswith(BOM):
        stream = stream[3:]
    return len(_RUN_OF_LINES.findall(stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n")))


def _block(raw: bytes, lines: list[bytes], complete: bool) -> Block:
    values = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if name == b"data":
            values.append(value[1:] if value[:1] == b" " else value)
    return Block(raw, lines, complete, b"\n".join(values) if values else None)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(data: bytes | str) -> Any:
    """The value of a JSON text, or :data:`NOT_JSON` (invalid UTF-8, NaN, bad syntax...)."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if text.startswith("\ufeff"):  # json.loads(bytes) skips a UTF-8 BOM too
            text = text[1:]
        return json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return NOT_JSON


def same_json(a: Any, b: Any) -> bool:
    """Equal JSON values with object keys in the same order."""
    return json.dumps(a) == json.dumps(b)


# --- usage dialects (docs/dialects.md's table) ----------------------------------------------

class Dialect(NamedTuple):
    #: where the usage value may be: the first path present and not null is it
    paths: tuple[tuple[str, ...], ...]
    prompt_key: str  # := P (P - C when cached_apart and C is given)
    output_key: str  # with prompt_key the dialect's own keys: neither = another API's usage
    total_key: str | None  # := P + the output count; None: this API has no total
    details_key: str | None  # C goes to details_key.cached_key, or to cached_key itself
    cached_key: str
    cached_apart: bool  # the prompt count excludes cache reads (:= P - C)
    zeroed_keys: tuple[str, ...]  # := 0 where present: the prompt's other parts


DIALECTS = {
    "chat": Dialect((("usage",),), "prompt_tokens", "completion_tokens", "total_tokens",
                    "prompt_tokens_details", "cached_tokens", False, ()),
    "responses": Dialect((("usage",), ("response", "usage")), "input_tokens", "output_tokens",
                         "total_tokens", "input_tokens_details", "cached_tokens", False, ()),
    "messages": Dialect((("usage",), ("message", "usage")), "input_tokens", "output_tokens",
                        None, None, "cache_read_input_tokens", True,
                        ("cache_creation_input_tokens",)),
}
APIS = tuple(DIALECTS)
#: counts are below this (docs/dialects.md: ints in [0, 2**63))
COUNT_LIMIT = 1 << 63
#: an output count of more digits than this makes the usage unreadable (left as it came)
MAX_COUNT_DIGITS = 18


def usage_at(document: Any, api: str) -> tuple[tuple[str, ...] | None, Any]:
    """``(path, value)``: the usage value ``json.loads`` gives at the dialect's first path
    that is present and not null (each step an object's member), else ``(None, None)``."""
    for path in DIALECTS[api].paths:
        value = document
        for key in path:
            if type(value) is not dict or key not in value:
                value = None
                break
            value = value[key]
        if value is not None:
            return path, value
    return None, None


def rewritten_usage(usage: dict[str, Any], prompt: int, cached: int | None,
                    api: str = "chat") -> dict[str, Any] | None:
    """The usage object after ``rewrite_usage(prompt, cached, api=api)``, keys in the
    contract's order; None when the contract leaves it as it came (another API's usage, or
    an output count too long to be one)."""
    rules = DIALECTS[api]
    if rules.prompt_key not in usage and rules.output_key not in usage:
        return None  # foreign
    usage = dict(usage)
    output = usage.get(rules.output_key)
    count = output if type(output) is int else 0  # any other value counts 0
    if rules.total_key is not None and abs(count) >= 10**MAX_COUNT_DIGITS:
        return None  # unreadable
    given = 0 if cached is None else cached  # None: no cached tokens (0 where counted)
    usage[rules.prompt_key] = prompt - given if rules.cached_apart else prompt
    if rules.total_key is not None:
        usage[rules.total_key] = prompt + count
    if rules.details_key is None:
        if cached is not None or rules.cached_key in usage:
            usage[rules.cached_key] = given
    else:
        details = usage.get(rules.details_key)
        if cached is not None:
            details = dict(details) if type(details) is dict else {}
            details[rules.cached_key] = cached
            usage[rules.details_key] = details
        elif type(details) is dict and rules.cached_key in details:
            usage[rules.details_key] = {**details, rules.cached_key: 0}
    for key in rules.zeroed_keys:  # the parts of the prompt the caller's counts leave out
        if key in usage:
            usage[key] = 0
    return usage


def with_value(document: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``document`` with the member at ``path`` set to ``value`` (in its place)."""
    top = dict(document)
    if len(path) == 1:
        top[path[0]] = value
    else:
        top[path[0]] = with_value(top[path[0]], path[1:], value)
    return top


class Usage(NamedTuple):
    """What the contract says becomes of one JSON text's usage."""

    kind: str  # "none", "rewritten", "foreign", "not_object", "unreadable"
    path: tuple[str, ...] | None
    usage: Any  # the usage value json.loads sees (None: no usage)
    new: Any  # the usage object after the rewrite (kind "rewritten" only)
    expected: Any  # the whole document after the rewrite (kind "rewritten" only)


def usage_outcome(document: Any, prompt: int, cached: int | None, api: str) -> Usage:
    """The fate of the usage of a strict JSON text (``document`` is its value)."""
    path, usage = usage_at(document, api)
    if path is None:
        return Usage("none", None, None, None, None)
    if type(usage) is not dict:
        return Usage("not_object", path, usage, None, None)
    new = rewritten_usage(usage, prompt, cached, api)
    if new is None:
        rules = DIALECTS[api]
        foreign = rules.prompt_key not in usage and rules.output_key not in usage
        return Usage("foreign" if foreign else "unreadable", path, usage, None, None)
    return Usage("rewritten", path, usage, new, with_value(document, path, new))


def count_errors(value: Any, name: str, low: int = 0) -> list[Allow]:
    """The error a count argument (an int, not a bool, in ``[low, 2**63)``) must raise:
    ``TypeError`` for another type, ``ValueError`` out of range; each names the argument."""
    if type(value) is not int:  # bool, float, str, bytes, None
        return [Allow(TypeError, name)]
    if not low <= value < COUNT_LIMIT:
        return [Allow(ValueError, name)]
    return []


def may_name_usage(data: bytes) -> bool:
    """Whether a JSON text can hold a key ``usage``: spelled out, or with a ``\\u`` escape
    (no other JSON escape gives a letter)."""
    return b"usage" in data or b"\\u" in data
