"""Usage located by dialect and rewritten in place: the pure-Python reference twin.

``usage_edits`` finds the usage value of one JSON text by its dialect's paths (``_dialects``)
and says what to change: each count member's value replaced where it is, absent members
added after the usage object's last member. Every other byte stays, so the text stays valid
JSON and the members tokcore does not set keep their exact spelling. ``rewrite_usage``
applies the edits; the relay applies them to an event's data.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .._args import Api, BytesLike, check_counts, payload_bytes
from ..members._members_py import (
    Member,
    ScanError,
    key_is,
    key_text,
    last_member,
    scan_object,
    utf8,
    value_error,
)
from ._dialects import (
    FOREIGN,
    MAX_COUNT_DIGITS,
    NONE,
    NOT_OBJECT,
    REWRITTEN,
    UNREADABLE,
    Dialect,
    dialect,
)

Span = tuple[int, int]
#: replace ``data[start:end]`` with ``text``
Edit = tuple[int, int, bytes]

#: any JSON spelling of "usage" contains one of these (an escaped letter starts with \u00)
USAGE_NEEDLE = b'"usage"'
ESCAPE_NEEDLE = b"\\u00"

_NULL = b"null"
_LBRACE = 0x7B
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)")
# The last member is "usage": null (checked backwards, see ends_with_null_usage).
_NULL_USAGE_TAIL = re.compile(rb'[,{][ \t\n\r]*"usage"[ \t\n\r]*:[ \t\n\r]*null[ \t\n\r]*}'
                              rb'[ \t\n\r]*\Z')


class Rules(NamedTuple):
    """A dialect with the counts to write, checked once per relay or call."""

    dialect: Dialect
    prompt: int  # the value of the dialect's prompt key
    total_base: int  # the total is this + the output count
    cached: int  # the cached count (0 when the caller gave None)
    add_cached: bool  # the caller gave one: its member is added where absent


def make_rules(prompt_tokens: object, cached_tokens: object, api: object) -> Rules:
    """The counts and the dialect checked, with their errors (shared by both twins)."""
    rules = dialect(api)
    prompt, cached = check_counts(prompt_tokens, cached_tokens)
    count = 0 if cached is None else cached
    return Rules(rules, prompt - count if rules.cached_excluded else prompt, prompt, count,
                 cached is not None)


def may_hold_usage(data: bytes) -> bool:
    return USAGE_NEEDLE in data or ESCAPE_NEEDLE in data


def ends_with_null_usage(data: bytes) -> bool:
    """The text ends with ``"usage":null}``, its last top-level member if it is a JSON
    object text.

    In an object the quote after ``,`` or ``{`` opens a key (``usage`` outside a string is
    not JSON), and the final ``}`` closes the top-level object, so the last ``usage`` key is
    null whatever comes before: no usage, with no key compared (for a dialect whose only path
    is ``usage``). Whether the text is an object is the caller's check (``no_usage``): text
    that is not one and spells the key is unreadable.
    """
    return data.endswith((b"}", b" ", b"\t", b"\n", b"\r")) and \
        _NULL_USAGE_TAIL.search(data, max(0, len(data) - 64)) is not None


def locate(data: bytes, rules: Dialect) -> tuple[int, Span | None]:
    """``(outcome, span)``: where the usage value is (outcome NONE, span None: nowhere).

    Every object on a dialect's path is read member by member, as the relay reads an event
    too large to hold (``_bigevent``): one that is not an object makes the text unreadable,
    even where a usage value at another path was found first. The top-level object is read
    once for all paths."""
    try:
        top, _ = scan_object(data, 0, len(data), True)
        spans = [_path_span(data, top, path) for path in rules.paths]
    except ScanError:
        return UNREADABLE, None
    for span in spans:
        if span is not None and data[span[0]:span[1]] != _NULL:
            return NONE, span
    return NONE, None


def _path_span(data: bytes, top: list[Member], path: tuple[str, ...]) -> Span | None:
    """The value at a dialect's path (one or two keys) from the top-level members; every
    object under the first key is scanned, the last one's member kept (``ScanError`` when
    one is not an object). A step whose value is not an object has nothing under it."""
    first, *rest = path
    assert len(rest) <= 1, "a dialect path has at most two keys"
    raw = utf8(first)
    found: Member | None = None
    for member in top:
        if not key_is(data, member, first, raw):
            continue
        if not rest:
            found = member
        elif data[member.value_start] != _LBRACE:
            found = None
        else:
            inner, _ = scan_object(data, member.value_start, member.value_end, False)
            found = last_member(data, inner, rest[0])
    return None if found is None else (found.value_start, found.value_end)


def output_count(text: bytes) -> int | None:
    """The output count's value: an integer of at most 18 digits; 0 for a value of another
    kind; None for an integer too long to be a count (the usage is then unreadable)."""
    if not _INTEGER.fullmatch(text):
        return 0
    if len(text) - text.startswith(b"-") > MAX_COUNT_DIGITS:
        return None
    return int(text)


def _member_text(key: str, value: int | bytes) -> bytes:
    text = value if isinstance(value, bytes) else str(value).encode("ascii")
    return key_text(key) + b":" + text


def _set(data: bytes, found: Member | None, key: str, value: int | bytes,
         edits: list[Edit], added: list[bytes]) -> None:
    """Replace ``found``'s value, or add the member (to ``added``, in rule order)."""
    if found is None:
        added.append(_member_text(key, value))
    else:
        text = value if isinstance(value, bytes) else str(value).encode("ascii")
        edits.append((found.value_start, found.value_end, text))


def _details_edits(data: bytes, found: Member | None, rules: Rules,
                   edits: list[Edit], added: list[bytes]) -> None:
    """The cached count into the details object; without the caller's count (``add_cached``
    false) only an existing member is set (to 0), nothing is added."""
    spec, cached, add = rules.dialect, rules.cached, rules.add_cached
    assert spec.details_key is not None
    inner = _member_text(spec.cached_key, cached)
    if found is None:
        if add:
            added.append(_member_text(spec.details_key, b"{" + inner + b"}"))
    elif data[found.value_start] != _LBRACE:
        if add:
            edits.append((found.value_start, found.value_end, b"{" + inner + b"}"))
    else:
        members, opening = scan_object(data, found.value_start, found.value_end, False)
        cached_member = last_member(data, members, spec.cached_key)
        if cached_member is not None:
            edits.append((cached_member.value_start, cached_member.value_end,
                          str(cached).encode("ascii")))
        elif not add:
            pass
        elif members:
            at = members[-1].value_end
            edits.append((at, at, b"," + inner))
        else:
            edits.append((opening + 1, opening + 1, inner))


def usage_edits(data: bytes, rules: Rules) -> tuple[int, list[Edit]]:
    """``(outcome, edits)`` for one JSON text; edits are in offset order, only when the
    outcome is REWRITTEN."""
    outcome, span = locate(data, rules.dialect)
    if span is None:
        return outcome, []
    return object_edits(data, span[0], span[1], rules)


def object_edits(data: bytes, start: int, end: int, rules: Rules) -> tuple[int, list[Edit]]:
    """``usage_edits`` of the usage value ``data[start:end]`` (found by ``locate``, or by the
    relay's scan of an event too large to hold)."""
    spec = rules.dialect
    if data[start] != _LBRACE:
        return NOT_OBJECT, []
    if value_error(data, start, end) >= 0:  # not one JSON value: never rewritten
        return UNREADABLE, []
    try:
        members, _ = scan_object(data, start, end, False)
        prompt = last_member(data, members, spec.prompt_key)
        output = last_member(data, members, spec.output_key)
        if prompt is None and output is None:
            return FOREIGN, []
        edits: list[Edit] = []
        added: list[bytes] = []
        _set(data, prompt, spec.prompt_key, rules.prompt, edits, added)
        if spec.total_key is not None:
            count = 0 if output is None else output_count(data[output.value_start:
                                                               output.value_end])
            if count is None:
                return UNREADABLE, []
            _set(data, last_member(data, members, spec.total_key), spec.total_key,
                 rules.total_base + count, edits, added)
        if spec.details_key is None:
            cached = last_member(data, members, spec.cached_key)
            if cached is not None or rules.add_cached:
                _set(data, cached, spec.cached_key, rules.cached, edits, added)
        else:
            _details_edits(data, last_member(data, members, spec.details_key), rules, edits,
                           added)
        if spec.zeroed_key is not None:
            zeroed = last_member(data, members, spec.zeroed_key)
            if zeroed is not None:
                edits.append((zeroed.value_start, zeroed.value_end, b"0"))
    except ScanError:
        return UNREADABLE, []
    if added:
        at = members[-1].value_end  # a usage object that is not foreign has a member
        edits.append((at, at, b"," + b",".join(added)))
    edits.sort()
    return REWRITTEN, edits


def apply_edits(data: bytes, edits: list[Edit], base: int = 0) -> bytes:
    """``data`` with the edits (offsets relative to ``base``) made."""
    pieces, copied = [], 0
    for start, end, text in edits:
        pieces.append(data[copied:base + start])
        pieces.append(text)
        copied = base + end
    pieces.append(data[copied:])
    return b"".join(pieces)


def is_object_text(data: bytes) -> bool:
    try:
        scan_object(data, 0, len(data), True)
    except ScanError:
        return False
    return True


def no_usage(data: bytes, spec: Dialect) -> bool:
    """The byte pre-filters: no spelling of the key, or (for a dialect with the one path
    ``usage``) a JSON object text whose last top-level member is ``"usage":null``."""
    return not may_hold_usage(data) or (len(spec.paths) == 1 and ends_with_null_usage(data)
                                        and is_object_text(data))


def text_edits(data: bytes, rules: Rules) -> tuple[int, list[Edit]]:
    """``usage_edits`` behind the byte pre-filters."""
    if no_usage(data, rules.dialect):
        return NONE, []
    return usage_edits(data, rules)


def find_usage(payload: BytesLike, *, api: Api = "chat") -> Span | None:
    """Byte span of the usage value of a JSON object text, or None (no usage, ``null``, or
    a text that is not a JSON object).

    Raises ``TypeError`` for a payload that is not bytes-like (``str`` included) or an
    ``api`` that is not a ``str``; ``ValueError`` for an unknown ``api``.
    """
    data = payload_bytes(payload)
    spec = dialect(api)
    return None if no_usage(data, spec) else locate(data, spec)[1]


def rewrite_usage(payload: BytesLike, prompt_tokens: int, cached_tokens: int | None = None,
                  *, api: Api = "chat") -> bytes:
    """The payload with only its usage counts rewritten, by the rules of ``api``
    (:doc:`/dialects`); the payload itself (for ``bytes``) when there is nothing to rewrite.

    Raises ``TypeError`` for a count that is not an ``int`` (a ``bool`` included), a payload
    that is not bytes-like or an ``api`` that is not a ``str``; ``ValueError`` for a count
    outside [0, 2**63), an unknown ``api``, or ``cached_tokens`` above ``prompt_tokens``.
    """
    data = payload_bytes(payload)
    rules = make_rules(prompt_tokens, cached_tokens, api)
    outcome, edits = text_edits(data, rules)
    return apply_edits(data, edits) if outcome == REWRITTEN else data

