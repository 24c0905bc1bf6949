"""JSON object members without parsing: the pure-Python reference twin.

One scan reads an object's members: each key's and value's byte span. Strings are skipped
to their closing quote (a backslash takes the next byte with it), nested objects and arrays
by a depth counter (no recursion: any depth costs the same), literals (numbers, true, false,
null) as runs of bytes that are neither structure, whitespace nor a quote. Only the
object's own level is checked for JSON structure; what is invalid JSON below it may be read
leniently, but both twins read it the same way, and on every text ``json.loads`` accepts they
agree with it.

``scan_object`` raises ``ScanError`` with the offset where the text stops being an object.
The ``_usage_py`` twin and the ``_members_c`` twin's escaped-key path use this module's helpers.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import NamedTuple

from .._args import BytesLike, KeyPath, check_path, check_switch, payload_bytes, payload_view

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


# --- one JSON value, strictly (RFC 8259, UTF-8) -------------------------------------------
# The check a usage value passes before it is rewritten, and set_member's check of the value
# it writes. The answer is the offset where the text stops being the start of a JSON text:
# the first byte that no valid text could have there (the end, for a text cut short).

_UTF8_SEQUENCE = (rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]"
                  rb"|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]"
                  rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}"
                  rb"|\xf4[\x80-\x8f][\x80-\xbf]{2}")
# a string's valid bytes after its opening quote, up to its closing quote or a bad byte
_STRING_BODY = re.compile(rb'(?:[\x20\x21\x23-\x5b\x5d-\x7f]+|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|'
                          + _UTF8_SEQUENCE + rb")*")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# the longest start of a number (cut short, it may still become one)
_NUMBER_START = re.compile(rb"-?(?:(?:0|[1-9][0-9]*)(?:\.(?:[0-9]+(?:[eE][+-]?[0-9]*)?)?"
                           rb"|[eE][+-]?[0-9]*)?)?")
_HEX = frozenset(b"0123456789abcdefABCDEF")
# the continuation bytes each lead byte takes (RFC 3629: no overlong form, no surrogate)
_UTF8_TAILS: dict[int, tuple[tuple[int, int], ...]] = {}
for _lead in range(0xC2, 0xF5):
    _TAIL = (0x80, 0xBF)
    _UTF8_TAILS[_lead] = (_TAIL,) if _lead < 0xE0 else (
        ((0xA0, 0xBF) if _lead == 0xE0 else (0x80, 0x9F) if _lead == 0xED else _TAIL, _TAIL)
        if _lead < 0xF0 else
        ((0x90, 0xBF) if _lead == 0xF0 else (0x80, 0x8F) if _lead == 0xF4 else _TAIL,
         _TAIL, _TAIL))
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}


def _string_stop(data: bytes, at: int, end: int) -> int:
    """A string's first bad byte is at ``at`` (its body's valid bytes end there): the offset
    where the text stops (in an escape or a UTF-8 sequence, the byte that breaks it)."""
    byte = data[at]
    if byte == 0x5C:  # a backslash
        if at + 1 >= end:
            return end
        if data[at + 1] != 0x75:  # not \u: the escape letter is wrong
            return at + 1
        for k in range(at + 2, at + 6):
            if k >= end:
                return end
            if data[k] not in _HEX:
                return k
    tails = _UTF8_TAILS.get(byte)
    if tails is None:  # a control character, or no lead byte
        return at
    for k, (low, high) in enumerate(tails, at + 1):
        if k >= end:
            return end
        if not low <= data[k] <= high:
            return k
    raise AssertionError("a valid sequence stops no string")  # pragma: no cover


def value_error(data: bytes, start: int, end: int) -> int:
    """Where ``data[start:end]`` stops being one JSON value (RFC 8259, UTF-8; whitespace may
    surround it), as an offset in ``data``; -1 when it is one. Any depth (no recursion)."""
    stack = bytearray()  # the open containers: "{" or "["
    i = _skip_ws(data, start, end)
    key = False  # a member's key (and its colon) comes before the value
    while True:
        if key:
            if i >= end:
                return end
            if data[i] != _QUOTE:
                return i
            match = _STRING_BODY.match(data, i + 1, end)
            assert match is not None
            j = match.end()
            if j >= end:
                return end
            if data[j] != _QUOTE:
                return _string_stop(data, j, end)
            i = _skip_ws(data, j + 1, end)
            if i >= end:
                return end
            if data[i] != _COLON:
                return i
            i = _skip_ws(data, i + 1, end)
            key = False
        # a value at i
        if i >= end:
            return end
        byte = data[i]
        if byte == _LBRACE or byte == _LBRACKET:
            i = _skip_ws(data, i + 1, end)
            if i < end and data[i] == byte + 2:  # } or ]: empty
                i += 1
            else:
                stack.append(byte)
                key = byte == _LBRACE
                continue
        elif byte == _QUOTE:
            match = _STRING_BODY.match(data, i + 1, end)
            assert match is not None
            j = match.end()
            if j >= end:
                return end
            if data[j] != _QUOTE:
                return _string_stop(data, j, end)
            i = j + 1
        elif byte in _LITERALS:
            word = _LITERALS[byte]
            for k in range(1, len(word)):
                if i + k >= end:
                    return end
                if data[i + k] != word[k]:
                    return i + k
            i += len(word)
        else:
            whole = _NUMBER.match(data, i, end)
            begun = _NUMBER_START.match(data, i, end)
            assert begun is not None
            if whole is None or begun.end() > whole.end():  # cut short, or broken
                return begun.end()
            i = whole.end()
        # after a value: close what it ends, up to the next "," (or the end of the text)
        while True:
            i = _skip_ws(data, i, end)
            if not stack:
                return -1 if i == end else i
            if i >= end:
                return end
            byte = data[i]
            if byte == _COMMA:
                i = _skip_ws(data, i + 1, end)
                key = stack[-1] == _LBRACE
                break
            if byte != stack[-1] + 2:
                return i
            stack.pop()
            i += 1


def check_value(value: bytes, what: str = "value") -> None:
    """``ValueError`` unless ``value`` is one JSON value (RFC 8259, UTF-8)."""
    stop = value_error(value, 0, len(value))
    if stop >= 0:
        raise not_json(what, stop)


def not_json(what: str, offset: int) -> ValueError:
    return ValueError(f"{what} is not one JSON value (RFC 8259, UTF-8): it stops at offset "
                      f"{offset}")


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


def not_an_object(error: ScanError, path: tuple[str, ...] = ()) -> ValueError:
    where = "payload is not a JSON object" if not path else \
        f"the value at {path!r} is not a JSON object"
    return ValueError(f"{where}: the scan stopped at offset {error.offset}")


def path_object(data: bytes, start: int, end: int, path: tuple[str, ...]) -> \
        tuple[list[Member], int]:
    """The members and ``{`` of the object at ``path`` (``data[start:end]``, the whole text
    for the empty path); the ``ValueError`` of the member functions when it is no object."""
    try:
        if not path:
            return scan_object(data, 0, end, True)
        if data[start] != _LBRACE:
            raise ScanError(start)
        return scan_object(data, start, end, False)
    except ScanError as error:
        raise not_an_object(error, path) from None


def find_member(payload: BytesLike, path: KeyPath) -> Span | None:
    """The byte span of the value at ``path`` in a JSON object text, or None when a key on
    the way is absent.

    ``path`` is a key (a ``str``) or a tuple of keys, from the outermost object in; each step
    is the last member of that key in its object, as ``json.loads`` keeps it, keys compared
    after decoding their escapes (``"us\\u0061ge"`` is ``usage``). The text is scanned once,
    never parsed: a UTF-8 BOM may lead it, whitespace may surround every token, and objects
    and arrays are skipped at any depth without recursion. On every text ``json.loads``
    accepts, the answer is the one its result gives; what is not JSON may be read leniently,
    both twins alike.

    Raises ``ValueError`` for a payload that is not a JSON object, or a value on the way
    that is not one (naming the byte offset where the scan stopped), and for an empty path
    ``()``; ``TypeError`` for a payload that is not bytes-like (``str`` included), a path
    that is neither a ``str`` nor a tuple, or a path item that is not a ``str``.
    """
    data = payload_bytes(payload)
    keys = check_path(path)
    start, end = 0, len(data)
    for step, key in enumerate(keys):
        members, _ = path_object(data, start, end, keys[:step])
        found = last_member(data, members, key)
        if found is None:
            return None
        start, end = found.value_start, found.value_end
    return start, end


@lru_cache(maxsize=256)  # a relay's rules are made per stream: their few keys, not json
def key_text(key: str) -> bytes:
    """A new member's key as JSON text."""
    return json.dumps(key).encode("ascii")


def value_text(value: object, trusted: bool) -> bytes:
    """``set_member``'s value as bytes, checked to be one JSON value unless ``trusted``."""
    text = value if type(value) is bytes else bytes(payload_view(value, "value"))
    if not trusted:
        check_value(text)
    return text


def set_member(payload: BytesLike, path: KeyPath, value: BytesLike, *,
               trusted: bool = False) -> bytes:
    """``payload`` with the member at ``path`` set to the JSON text ``value`` (checked to be
    one JSON value unless ``trusted``); the objects of absent keys on the way are added.

    The value of the key's last member is replaced; an absent key is added as
    ``,"key":value`` after the last member of its object (``"key":value`` after ``{`` when
    it is empty), its key written by ``json.dumps``; every other byte stays as it was. The
    check is RFC 8259 over UTF-8 (RFC 3629). ``trusted=True`` is the caller saying ``value``
    is JSON already (a span :func:`find_member` found, bytes it wrote): nothing is checked,
    and that is the only way invalid JSON is ever written.

    Raises ``ValueError`` for a ``value`` that is not one JSON value (naming the offset where
    it stops; checked before the payload is read, and not at all with ``trusted=True``), and
    as ``find_member`` does for the payload and the path; ``TypeError`` for a ``trusted``
    that is not ``True`` or ``False`` and as ``find_member`` does for the other arguments.
    """
    check_switch(trusted, "trusted")
    data = payload_bytes(payload)
    keys = check_path(path)
    text = value_text(value, trusted)
    start, end = 0, len(data)
    for step, key in enumerate(keys):
        members, opening = path_object(data, start, end, keys[:step])
        found = last_member(data, members, key)
        if found is None:
            for inner in reversed(keys[step + 1:]):  # the rest of the path, as objects
                text = b"".join((b"{", key_text(inner), b":", text, b"}"))
            if members:
                at = members[-1].value_end
                return b"".join((data[:at], b",", key_text(key), b":", text, data[at:]))
            at = opening + 1
            return b"".join((data[:at], key_text(key), b":", text, data[at:]))
        start, end = found.value_start, found.value_end
    return b"".join((data[:start], text, data[end:]))


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


def del_member(payload: BytesLike, path: KeyPath) -> bytes:
    """``payload`` without the member at ``path`` (every occurrence of its last key in the
    object that holds it); unchanged when a key on the way is absent.

    Each member goes with its separating comma (the one before it, or the one after for a
    first member); every other byte stays as it was. Unchanged, a ``bytes`` payload is
    returned itself.

    Raises as ``find_member`` does.
    """
    data = payload_bytes(payload)
    keys = check_path(path)
    start, end = 0, len(data)
    for step in range(len(keys)):
        members, _ = path_object(data, start, end, keys[:step])
        if step == len(keys) - 1:
            break
        found = last_member(data, members, keys[step])
        if found is None:
            return data
        start, end = found.value_start, found.value_end
    key = keys[-1]
    raw_key = utf8(key)
    gone = [key_is(data, member, key, raw_key) for member in members]
    if not any(gone):
        return data
    pieces, copied = [], 0
    for cut_start, cut_end in removed_ranges(members, gone):
        pieces.append(data[copied:cut_start])
        copied = cut_end
    pieces.append(data[copied:])
    return b"".join(pieces)
