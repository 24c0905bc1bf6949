"""An event too large to hold, scanned as it streams through: the pure-Python reference twin.

The relay holds a whole event only up to ``max_event_bytes``. A larger one goes out as it
comes, through this scanner: it follows the event's lines and the JSON structure of its data
(the ``data`` values joined with ``\\n``, as the WHATWG rules build it) without keeping
either, and holds only a usage value at one of the dialect's paths, from its ``{`` to its
``}``. That value is rewritten as in a held event (``_fields.rewrite_value``) and sent on; a
usage value itself larger than the bound goes out as it came (TOO_LARGE).

The JSON rules are those of ``_members_py.scan_object`` where they matter: the top-level object
and the objects on a dialect path are read member by member (key, colon, value, comma); below
them, strings and bracket depth only, so any depth costs the same. What differs from a held
event, since the end cannot be waited for: every usage member at a path is rewritten as it
passes (a held event rewrites the last, which is the one JSON readers keep), and the rest of
the event is not known to be JSON when that happens. An event whose data stops being a JSON
object before any usage value, and which holds a spelling of the key, counts as UNREADABLE.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from .._args import enter_init, in_use
from ..members._members_py import decode_key, utf8
from ._dialects import DIALECTS, NONE, NOT_OBJECT, TOO_LARGE, UNREADABLE, Dialect
from ._events_py import BOM
from ._fields import rewrite_value
from ._usage_py import ESCAPE_NEEDLE, USAGE_NEEDLE, Rules

# line states: the stream's first bytes (a BOM may lead), a field name being matched against
# "data", "data" matched, "data:" matched (one optional space), in a data value, in a line
# that is not a data field
L_BOM, L_NAME, L_NAMED, L_COLON, L_VALUE, L_OTHER = range(6)
# JSON states: before the text (a BOM may lead), before the top-level "{", after a tracked
# object's "{", after its ",", in a key, before the colon, before a value, in a string value,
# in a literal, in a nested value (depth counted), after a value, after the top-level "}",
# not an object (nothing more is looked at)
(J_START, J_TOP, J_OPEN, J_KEY, J_IN_KEY, J_COLON, J_VALUE, J_IN_STR, J_IN_LIT, J_NESTED,
 J_AFTER, J_DONE, J_LOST) = range(13)
# what a member is on the dialect's paths: nothing, an object on the way, the usage value
SKIP, PREFIX, USAGE = range(3)
N_OUTCOMES = TOO_LARGE + 1
_R = TypeVar("_R")

_DATA = b"data"
_LF, _CR, _SP, _QUOTE, _BACKSLASH, _COLON, _COMMA = 0x0A, 0x0D, 0x20, 0x22, 0x5C, 0x3A, 0x2C
_LBRACE, _RBRACE, _LBRACKET = 0x7B, 0x7D, 0x5B
_WS = frozenset(b" \t\n\r")
_NOT_A_VALUE = frozenset(b"}]:,")
_LINE_END = re.compile(rb"[\r\n]")
_NOT_WS = re.compile(rb"[^ \t\n\r]")
_STRING_STOP = re.compile(rb'["\\]')
_NESTED_STOP = re.compile(rb'[{}\[\]"]')
_LITERAL_END = re.compile(rb'[ \t\n\r{}\[\]:,"]')
_NEEDLE_TAIL = max(len(USAGE_NEEDLE), len(ESCAPE_NEEDLE)) - 1


class PathKeys(NamedTuple):
    """What the scan reads of a dialect's paths (made once per dialect: ``path_keys``)."""

    dialect: Dialect
    #: the paths of the usage value, and the objects on the way to one
    paths: frozenset[tuple[str, ...]]
    prefixes: frozenset[tuple[str, ...]]
    #: raw bytes a key may have and still be one of the paths' keys: each character escaped
    #: as a surrogate pair at most (``\\udxxx\\udxxx``)
    key_limit: int
    #: each key of the paths by its UTF-8 bytes (a key spelled with no escape)
    raw_keys: dict[bytes, str]


def _make_path_keys(dialect: Dialect) -> PathKeys:
    paths = dialect.paths
    return PathKeys(dialect, frozenset(paths),
                    frozenset(path[:k] for path in paths for k in range(1, len(path))),
                    12 * max(len(key) for path in paths for key in path),
                    {utf8(key): key for path in paths for key in path})


PATH_KEYS = {name: _make_path_keys(spec) for name, spec in DIALECTS.items()}


def path_keys(dialect: Dialect) -> PathKeys:
    """The ``PathKeys`` of a dialect: those made at import for ``DIALECTS``' own (a scan per
    event too large to hold is started often: nothing is built per scan)."""
    keys = PATH_KEYS.get(dialect.name)
    return keys if keys is not None and keys.dialect is dialect else _make_path_keys(dialect)


class BigEvent:
    """One event too large to hold, from its first byte to its blank line."""

    __slots__ = ("_rules", "_max", "_paths", "_prefixes", "_key_limit", "_raw_keys", "outcomes",
                 "_line", "_matched", "_line_empty", "_cr", "_fields",
                 "_state", "_bom", "_prefix", "_key", "_key_name", "_role", "_esc",
                 "_in_str", "_nest", "_lit", "_handled", "_needle", "_tail",
                 "_hold", "_holding", "_hold_from", "_out", "_copied", "_token")
    _token: list[bool]  # taken by each call, __init__ included (_args.enter_init)

    def __init__(self, rules: Rules, max_bytes: int, bom: bool) -> None:
        token = enter_init(self, "BigEvent")
        try:
            self._start(rules, max_bytes, bom)
        finally:
            token.append(True)

    def _start(self, rules: Rules, max_bytes: int, bom: bool) -> None:
        self._rules = rules
        self._max = max_bytes
        keys = path_keys(rules.dialect)
        self._paths = keys.paths
        self._prefixes = keys.prefixes
        self._key_limit = keys.key_limit
        self._raw_keys = keys.raw_keys
        #: usage values by outcome since the relay last took them (it zeroes them)
        self.outcomes = [0] * N_OUTCOMES
        self._line = L_BOM if bom else L_NAME
        self._matched = 0  # bytes of the BOM or of "data" matched
        self._line_empty = True
        self._cr = False
        self._fields = False  # a data field was seen (the next one is joined with "\n")
        self._state = J_START
        self._bom = 0
        self._prefix: list[str] = []  # keys of the tracked objects the scan is in
        self._key = bytearray()  # the raw key being read, while it may be a path's key
        self._key_name: str | None = None
        self._role = SKIP
        self._esc = False
        self._in_str = False
        self._nest = 0
        self._lit = bytearray()  # a usage literal's first bytes (is it null?)
        self._handled = False  # a usage value was rewritten or counted
        self._needle = False  # the data holds a spelling of the usage key
        self._tail = b""  # the data's last bytes, for a needle split across reads
        self._hold = bytearray()  # a usage value's bytes from earlier reads
        self._holding = False
        self._hold_from = 0
        self._out: list[bytes] = []
        self._copied = 0

    @property
    def held_bytes(self) -> int:
        return len(self._hold)

    # --- lines ------------------------------------------------------------------------

    def feed(self, data: bytes, pos: int) -> tuple[bytes, int]:
        """``(bytes to forward, end)``: ``end`` is just past the event's blank line in
        ``data``, or -1 when the event goes on."""
        return self._call(self._feed, data, pos)

    def _feed(self, data: bytes, pos: int) -> tuple[bytes, int]:
        n = len(data)
        self._out = []
        self._copied = pos
        self._hold_from = pos
        end = -1
        i = pos
        while i < n:
            if self._cr:
                self._cr = False
                if data[i] == _LF:  # the LF of a CRLF
                    i += 1
                    continue
            line = self._line
            if line == L_VALUE or line == L_OTHER:
                match = _LINE_END.search(data, i)
                stop = n if match is None else match.start()
                if line == L_VALUE and stop > i:
                    self._json(data, i, stop)
                i = stop
                if match is None:
                    break
            byte = data[i]
            if byte == _LF or byte == _CR:
                i += 1
                self._cr = byte == _CR
                if self._line_empty:  # a blank line: the event ends
                    lf = self._cr and i < n and data[i] == _LF
                    if lf:
                        i += 1
                        self._cr = False
                    end = i
                    self._end(data, end, lf)
                    break
                if line == L_NAMED or line == L_COLON:
                    self._field()  # "data" or "data:" alone: an empty value
                self._line, self._matched, self._line_empty = L_NAME, 0, True
                continue
            self._line_empty = False
            if line == L_BOM:
                if byte == BOM[self._matched]:
                    self._matched += 1
                    if self._matched == 3:
                        self._line, self._matched = L_NAME, 0
                    i += 1
                else:  # no BOM: this byte starts the name; part of one: no field
                    self._line = L_NAME if self._matched == 0 else L_OTHER
                    self._matched = 0
            elif line == L_NAME:
                if byte == _DATA[self._matched]:
                    self._matched += 1
                    if self._matched == 4:
                        self._line = L_NAMED
                    i += 1
                else:
                    self._line = L_OTHER
            elif line == L_NAMED:
                if byte == _COLON:
                    self._line = L_COLON
                    i += 1
                else:
                    self._line = L_OTHER
            else:  # L_COLON: the value starts here, after one optional space
                self._field()
                self._line = L_VALUE
                if byte == _SP:
                    i += 1
        stop = n if end < 0 else end
        if self._holding:
            self._keep(data, stop)
        self._out.append(data[self._copied:stop])
        out, self._out = self._out, []
        return b"".join(out), end

    def finish(self) -> bytes:
        """The stream ended inside the event: what is still held, as it came."""
        return self._call(self._finish)

    def _call(self, run: Callable[..., _R], *args: Any) -> _R:
        """``run(*args)`` holding the call token: __init__ is refused meanwhile."""
        token = self._token
        try:
            token.pop()
        except IndexError:
            raise in_use("BigEvent") from None
        try:
            return run(*args)
        finally:
            token.append(True)

    def _finish(self) -> bytes:
        if self._line == L_NAMED or self._line == L_COLON:
            self._field()  # an unfinished last line still counts as a field
        self._out = []
        self._end(b"", 0, False)
        out, self._out = self._out, []
        return b"".join(out)

    def _field(self) -> None:
        if self._fields:
            self._json(b"\n", 0, 1)  # the joiner of two data values
        self._fields = True

    def _end(self, data: bytes, at: int, lf: bool) -> None:
        """The event ends at ``data[at]``: a usage value still held goes out as it came.
        ``lf``: the blank line's CRLF ended in this read (its LF is not counted, so the size
        is the same whether or not a read ended between the CR and the LF)."""
        if self._holding:  # never closed: unreadable, or over the bound as a cut would say
            size = len(self._hold) + at - self._hold_from - lf
            self._release(data, at)
            self._count(TOO_LARGE if size > self._max else UNREADABLE)
        elif self._fields and self._state != J_DONE and not self._handled and self._needle:
            self._count(UNREADABLE)

    # --- holding a usage value ----------------------------------------------------------

    def _count(self, outcome: int) -> None:
        self.outcomes[outcome] += 1
        if outcome != NONE:
            self._handled = True

    def _release(self, data: bytes, at: int) -> None:
        self._out.append(bytes(self._hold))
        self._out.append(data[self._hold_from:at])
        self._hold = bytearray()
        self._holding = False
        self._copied = at

    def _keep(self, data: bytes, at: int) -> None:
        """The read ends inside a held usage value: keep it, or give it up when it is
        already larger than the bound."""
        if len(self._hold) + at - self._hold_from > self._max:
            self._release(data, at)
            self._count(TOO_LARGE)
        else:
            self._hold += data[self._hold_from:at]
            self._copied = at

    def _value_end(self, data: bytes, at: int) -> None:
        """The held usage value ends just before ``data[at]``: rewritten, out it goes."""
        held = bytes(self._hold) + data[self._hold_from:at]
        self._hold = bytearray()
        self._holding = False
        self._copied = at
        if len(held) > self._max:
            self._count(TOO_LARGE)
            self._out.append(held)
            return
        outcome, text = rewrite_value(held, self._rules)
        self._count(outcome)
        self._out.append(text)

    # --- the JSON of the data -----------------------------------------------------------

    def _look_for_needle(self, data: bytes, i: int, stop: int) -> None:
        head = self._tail + data[i:min(stop, i + _NEEDLE_TAIL)]
        if USAGE_NEEDLE in head or ESCAPE_NEEDLE in head or \
                data.find(USAGE_NEEDLE, i, stop) >= 0 or data.find(ESCAPE_NEEDLE, i, stop) >= 0:
            self._needle = True
            return
        self._tail = (self._tail + data[max(i, stop - _NEEDLE_TAIL):stop])[-_NEEDLE_TAIL:]

    def _key_done(self) -> None:
        raw = bytes(self._key)
        self._key.clear()
        name: str | None = None
        if len(raw) <= self._key_limit:  # read as _members_py.key_is reads a key
            name = decode_key(raw) if b"\\" in raw else self._raw_keys.get(raw)
        self._key_name = name
        path = (*self._prefix, name)
        self._role = USAGE if path in self._paths else PREFIX if path in self._prefixes \
            else SKIP

    def _close(self) -> None:
        """A tracked object's ``}``."""
        if self._prefix:
            self._prefix.pop()
            self._state = J_AFTER
        else:
            self._state = J_DONE

    def _json(self, data: bytes, i: int, stop: int) -> None:
        """Read ``data[i:stop]``, a run of the event's data (never a line end of its own)."""
        if not self._needle:
            self._look_for_needle(data, i, stop)
        while i < stop:
            state = self._state
            if state == J_NESTED:
                if self._esc:
                    self._esc = False
                    i += 1
                    continue
                match = (_STRING_STOP if self._in_str else _NESTED_STOP).search(data, i, stop)
                if match is None:
                    return
                i = match.start()
                byte = data[i]
                i += 1
                if self._in_str:
                    if byte == _BACKSLASH:
                        self._esc = True
                    else:
                        self._in_str = False
                elif byte == _QUOTE:
                    self._in_str = True
                elif byte == _LBRACE or byte == _LBRACKET:
                    self._nest += 1
                else:
                    self._nest -= 1
                    if self._nest == 0:
                        self._state = J_AFTER
                        if self._holding:
                            self._value_end(data, i)
                continue
            if state == J_IN_KEY or state == J_IN_STR:
                if self._esc:
                    self._esc = False
                    if state == J_IN_KEY and len(self._key) <= self._key_limit:
                        self._key.append(data[i])
                    i += 1
                    continue
                match = _STRING_STOP.search(data, i, stop)
                j = stop if match is None else match.start()
                if state == J_IN_KEY and len(self._key) <= self._key_limit:
                    self._key += data[i:min(j, i + self._key_limit + 1)]
                if match is None:
                    return
                i = j + 1
                if data[j] == _BACKSLASH:
                    self._esc = True
                    if state == J_IN_KEY and len(self._key) <= self._key_limit:
                        self._key.append(_BACKSLASH)
                elif state == J_IN_KEY:
                    self._key_done()
                    self._state = J_COLON
                else:
                    self._state = J_AFTER
                continue
            if state == J_IN_LIT:
                match = _LITERAL_END.search(data, i, stop)
                j = stop if match is None else match.start()
                if self._role == USAGE and len(self._lit) < 5:
                    self._lit += data[i:min(j, i + 5)]
                if match is None:
                    return
                i = j
                if self._role == USAGE:
                    self._count(NONE if self._lit[:5] == b"null" else NOT_OBJECT)
                self._state = J_AFTER  # the byte that ended the literal is read there
                continue
            if state == J_LOST:
                return
            byte = data[i]
            if state == J_START:
                if byte == BOM[self._bom]:
                    self._bom += 1
                    i += 1
                    if self._bom == 3:
                        self._state = J_TOP
                    continue
                self._state = J_LOST if self._bom else J_TOP
                continue
            if byte in _WS:
                match = _NOT_WS.search(data, i, stop)
                if match is None:
                    return
                i = match.start()
                byte = data[i]
            i += 1
            if state == J_TOP:
                self._state = J_OPEN if byte == _LBRACE else J_LOST
            elif state == J_OPEN or state == J_KEY:
                if byte == _QUOTE:
                    self._key.clear()
                    self._state = J_IN_KEY
                elif byte == _RBRACE and state == J_OPEN:
                    self._close()
                else:
                    self._state = J_LOST
            elif state == J_COLON:
                self._state = J_VALUE if byte == _COLON else J_LOST
            elif state == J_VALUE:
                self._value_start(data, i - 1, byte)
            elif state == J_AFTER:
                if byte == _COMMA:
                    self._state = J_KEY
                elif byte == _RBRACE:
                    self._close()
                else:
                    self._state = J_LOST
            else:  # J_DONE: only whitespace may follow the object
                self._state = J_LOST

    def _value_start(self, data: bytes, at: int, byte: int) -> None:
        """A member's value starts with ``byte`` at ``data[at]`` (already read)."""
        role = self._role
        if byte == _LBRACE:
            if role == PREFIX:
                assert self._key_name is not None
                self._prefix.append(self._key_name)
                self._state = J_OPEN
                return
            self._state, self._nest, self._in_str = J_NESTED, 1, False
            if role == USAGE:  # hold from here to the value's end
                self._out.append(data[self._copied:at])
                self._holding = True
                self._hold_from = at
            return
        if byte in _NOT_A_VALUE:
            self._state = J_LOST
            return
        if byte == _LBRACKET or byte == _QUOTE:
            if role == USAGE:
                self._count(NOT_OBJECT)
            if byte == _LBRACKET:
                self._state, self._nest, self._in_str = J_NESTED, 1, False
            else:
                self._state = J_IN_STR
            return
        self._state = J_IN_LIT
        self._lit = bytearray((byte,))


__all__ = ["BigEvent", "N_OUTCOMES", "PATH_KEYS", "PathKeys", "path_keys"]
