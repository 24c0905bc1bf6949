"""JSON object members without parsing: the pure-Python reference twin.

One scan reads an object's members: each key's and value's byte span. Strings are skipped
to their closing quote (a backslash takes the next byte with it), nested objects and arrays
by a depth counter (no recursion: any depth costs the same), literals (numbers, true, false,
null) as runs of bytes that are neither structure, whitespace nor a quote. Only the
object's own level is checked for JSON structure; what is invalid JSON below it may be read
leniently, but both twins read it the same way, and on every text ``json.loads`` accepts they
agree with it.

``scan_object`` raises ``ScanError`` with the offset where the text stops being an object.
The ``_usage_py`` twin and the ``_json_c`` twin's escaped-key path use this module's helpers.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import NamedTuple

from ._args import BytesLike, check_key, check_path, payload_bytes, payload_view

Span = tuple[int, int]

BOM = b"\xef\xbb\xbf"
_WS = re.compile(rb"[ \t\n\r]*")
# the rest of a string after its opening quote, closing quote included
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_LITERAL = re.compile(rb'[^ \t\n\r{}\[\]:,"]+')
_NESTED_TOKEN = re.compile(rb'[{}\[\]"]')
_QUOTE, _LBRACE, _RBRACE, _LBRACKET, _COLON, _COMMA = 0x22, 0x7B, 0x7D, 0x5B, 0x3A, 0x2C
_NOT_A_VALUE = frozenset(b"}]:,")
_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f",
            ord("n"): "\n", ord("r"): "\r", ord("t"): "\t"}
_HEX4 = re.compile(rb"[0-9a-fA-F]{4}")


class ScanError(Exception):
    """The text is not a JSON object; ``offset`` is where the scan stopped."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


class Member(NamedTuple):
    key_start: int  # the key's opening quote
    key_end: int  # just past its closing quote
    value_start: int
    value_end: int
    comma: int  # the comma before the member, -1 for the first


def _skip_ws(data: bytes, pos: int, end: int) -> int:
    match = _WS.match(data, pos, end)
    return match.end() if match else pos


def skip_string(data: bytes, pos: int, end: int) -> int:
    """Just past the string whose opening quote is at ``pos``."""
    match = _STRING_REST.match(data, pos + 1, end)
    if match is None:
        raise ScanError(end)
    return match.end()


def skip_nested(data: bytes, pos: int, end: int) -> int:
    """Just past the object or array that opens at ``pos``, by bracket depth."""
    depth = 0
    while True:
        match = _NESTED_TOKEN.search(data, pos, end)
        if match is None:
            raise ScanError(end)
        pos = match.start()
        byte = data[pos]
        if byte == _QUOTE:
            pos = skip_string(data, pos, end)
            continue
        pos += 1
        if byte == _LBRACE or byte == _LBRACKET:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos


def skip_value(data: bytes, pos: int, end: int) -> int:
    """Just past the value that starts at ``pos`` (whitespace already skipped)."""
    if pos >= end:
        raise ScanError(end)
    byte = data[pos]
    if byte == _QUOTE:
        return skip_string(data, pos, end)
    if byte == _LBRACE or byte == _LBRACKET:
        return skip_nested(data, pos, end)
    if byte in _NOT_A_VALUE:
        raise ScanError(pos)
    match = _LITERAL.match(data, pos, end)
    assert match is not None  # any other byte starts a literal run
    return match.end()


def scan_object(data: bytes, start: int, end: int, top: bool) -> tuple[list[Member], int]:
    """The members of the object in ``data[start:end]`` and the offset of its ``{``.

    ``top``: the whole text, where a BOM may lead and whitespace surround the object.
    Otherwise ``data[start:end]`` is exactly one object value (``{`` at ``start``).
    """
    pos = start
    if top:
        if data.startswith(BOM, pos, end):
            pos += 3
        pos = _skip_ws(data, pos, end)
    if pos >= end:
        raise ScanError(end)
    if data[pos] != _LBRACE:
        raise ScanError(pos)
    opening = pos
    members: list[Member] = []
    pos = _skip_ws(data, pos + 1, end)
    comma = -1
    if pos < end and data[pos] == _RBRACE:
        pos += 1
    else:
        while True:
            if pos >= end:
                raise ScanError(end)
            if data[pos] != _QUOTE:
                raise ScanError(pos)
            key_end = skip_string(data, pos, end)
            colon = _skip_ws(data, key_end, end)
            if colon >= end:
                raise ScanError(end)
            if data[colon] != _COLON:
                raise ScanError(colon)
            value = _skip_ws(data, colon + 1, end)
            value_end = skip_value(data, value, end)
            members.append(Member(pos, key_end, value, value_end, comma))
            pos = _skip_ws(data, value_end, end)
            if pos >= end:
                raise ScanError(end)
            if data[pos] == _RBRACE:
                pos += 1
                break
            if data[pos] != _COMMA:
                raise ScanError(pos)
            comma = pos
            pos = _skip_ws(data, pos + 1, end)
    if top:
        pos = _skip_ws(data, pos, end)
        if pos != end:
            raise ScanError(pos)
    elif pos != end:  # cannot happen: the value's span was found by the same depth rule
        raise ScanError(pos)
    return members, opening


def decode_key(raw: bytes) -> str | None:
    """A key's text between its quotes, decoded as ``json`` decodes it (None if it cannot
    be: an invalid escape or invalid UTF-8, which ``json.loads`` refuses too)."""
    parts: list[str] = []
    pos, n = 0, len(raw)
    try:
        while pos < n:
            slash = raw.find(b"\\", pos)
            if slash < 0:
                parts.append(raw[pos:].decode("utf-8", "surrogatepass"))
                break
            parts.append(raw[pos:slash].decode("utf-8", "surrogatepass"))
            kind = raw[slash + 1] if slash + 1 < n else -1
            if kind in _ESCAPES:
                parts.append(_ESCAPES[kind])
                pos = slash + 2
                continue
            if kind != ord("u") or not _HEX4.fullmatch(raw, slash + 2, slash + 6):
                return None
            unit = int(raw[slash + 2:slash + 6], 16)
            pos = slash + 6
            if 0xD800 <= unit <= 0xDBFF and raw.startswith(b"\\u", pos) \
                    and _HEX4.fullmatch(raw, pos + 2, pos + 6):
                low = int(raw[pos + 2:pos + 6], 16)
                if 0xDC00 <= low <= 0xDFFF:  # a surrogate pair: one code point, as json
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    pos += 6
            parts.append(chr(unit))
    except UnicodeDecodeError:
        return None
    return "".join(parts)


def key_is(data: bytes, member: Member, key: str, raw_key: bytes) -> bool:
    """Whether ``member``'s key decodes to ``key`` (``raw_key``: its UTF-8 bytes)."""
    raw = data[member.key_start + 1:member.key_end - 1]
    if b"\\" not in raw:
        return raw == raw_key
    return decode_key(raw) == key


def utf8(key: str) -> bytes:
    """A key's bytes as they appear unescaped in a JSON text (``json.loads(bytes)`` reads
    surrogates encoded this way)."""
    return key.encode("utf-8", "surrogatepass")


def last_member(data: bytes, members: list[Member], key: str) -> Member | None:
    raw_key = utf8(key)
    found = None
    for member in members:
        if key_is(data, member, key, raw_key):
            found = member
    return found


def member_span(data: bytes, path: tuple[str, ...]) -> Span | None:
    """``find_member`` on ``bytes``; ``ScanError`` when an object on the way is not one."""
    start, end, top = 0, len(data), True
    for step, key in enumerate(path):
        if step:
            if data[start] != _LBRACE:
                return None
            top = False
        members, _ = scan_object(data, start, end, top)
        found = last_member(data, members, key)
        if found is None:
            return None
        start, end = found.value_start, found.value_end
    return start, end


def find_member(payload: BytesLike, *path: str) -> Span | None:
    """The byte span of the value at ``path`` in a JSON object text, or None."""
    data = payload_bytes(payload)
    check_path(path)
    try:
        return member_span(data, path)
    except ScanError:
        return None


def not_an_object(error: ScanError) -> ValueError:
    return ValueError(f"payload is not a JSON object: the scan stopped at offset {error.offset}")


def top_members(data: bytes) -> tuple[list[Member], int]:
    try:
        return scan_object(data, 0, len(data), True)
    except ScanError as error:
        raise not_an_object(error) from None


@lru_cache(maxsize=256)  # a relay's rules are made per stream: their few keys, not json
def key_text(key: str) -> bytes:
    """A new member's key as JSON text."""
    return json.dumps(key).encode("ascii")


def set_member(payload: BytesLike, key: str, value: BytesLike) -> bytes:
    """``payload`` with its top-level member ``key`` set to the JSON text ``value``."""
    data = payload_bytes(payload)
    check_key(key)
    text = bytes(payload_view(value, "value"))
    members, opening = top_members(data)
    found = last_member(data, members, key)
    if found is not None:
        return b"".join((data[:found.value_start], text, data[found.value_end:]))
    if members:
        at = members[-1].value_end
        return b"".join((data[:at], b",", key_text(key), b":", text, data[at:]))
    at = opening + 1
    return b"".join((data[:at], key_text(key), b":", text, data[at:]))


def removed_ranges(members: list[Member], gone: list[bool]) -> list[Span]:
    """The byte ranges that remove the members marked in ``gone`` with their commas.

    Members before the first kept one go from the first such key to the kept key; each
    later one goes with the comma before it; with none kept, all of them go.
    """
    kept = [i for i, g in enumerate(gone) if not g]
    if not kept:
        return [(members[0].key_start, members[-1].value_end)]
    ranges: list[Span] = []
    first = kept[0]
    if first:
        ranges.append((members[0].key_start, members[first].key_start))
    ranges.extend((members[i].comma, members[i].value_end)
                  for i in range(first + 1, len(members)) if gone[i])
    return ranges


def del_member(payload: BytesLike, key: str) -> bytes:
    """``payload`` without its top-level member ``key`` (every occurrence)."""
    data = payload_bytes(payload)
    check_key(key)
    members, _ = top_members(data)
    raw_key = utf8(key)
    gone = [key_is(data, member, key, raw_key) for member in members]
    if not any(gone):
        return data
    pieces, copied = [], 0
    for start, end in removed_ranges(members, gone):
        pieces.append(data[copied:start])
        copied = end
    pieces.append(data[copied:])
    return b"".join(pieces)
