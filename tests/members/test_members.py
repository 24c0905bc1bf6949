"""find_member, set_member and del_member against json.loads, and the twins against each other.

The texts are written by this file's own serializer (``dump``) from a model in which an
object is a list of pairs, so duplicate keys, escaped spellings of a key (``"us\\u0061ge"``,
``\\u00E9``, surrogate pairs, ``\\/``), every JSON whitespace between tokens and a leading BOM
all occur. The oracle is json's own: ``json.loads`` for the values, and the stdlib scanner
(``json.decoder.scanstring`` and ``JSONDecoder.raw_decode``) for where each member's key and
value start and end, so a span is checked to the byte, not only by the value it holds.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from itertools import accumulate
from json.decoder import JSONDecoder
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from _budget import examples
from _twins import twin as twin_of
from _twins import twins
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BOM = b"\xef\xbb\xbf"
WS = " \t\n\r"
WS_BYTES = b" \t\n\r"
Span = tuple[int, int]

# --- the oracle: json.loads and the stdlib scanner -------------------------------------------

_DECODER = JSONDecoder()
#: json's own string scanner: (decoded text, offset after the closing quote)
scanstring: Callable[[str, int], tuple[str, int]] = \
    json.decoder.scanstring  # type: ignore[attr-defined]


class Invalid(Exception):
    """json.loads does not accept the text (as UTF-8, an optional BOM first)."""


def oracle_loads(text: bytes) -> Any:
    """``json.loads`` of a UTF-8 text; ``Invalid`` when json does not accept it.

    ``json.loads(bytes)`` would also guess UTF-16/32 from NUL bytes and let encoded
    surrogates through; the contract is about UTF-8 texts, so the text is decoded first.
    """
    body = text[3:] if text.startswith(BOM) else text
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise Invalid from exc


#: Doc.span's answer where the member functions raise ValueError: an object on the path is not
NOT_AN_OBJECT = "not an object"


class Member(NamedTuple):
    key: str
    key_start: int  # the opening quote of the key
    value_start: int
    value_end: int


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in WS:
        i += 1
    return i


def _members(s: str, i: int) -> list[Member]:
    """The members of the object whose ``{`` is at ``s[i]``, in character offsets."""
    out: list[Member] = []
    i = _skip_ws(s, i + 1)
    if s[i] == "}":
        return out
    while True:
        key_start = i
        assert s[i] == '"'
        key, i = scanstring(s, i + 1)
        i = _skip_ws(s, i)
        assert s[i] == ":"
        value_start = i = _skip_ws(s, i + 1)
        _, i = _DECODER.raw_decode(s, i)
        out.append(Member(key, key_start, value_start, i))
        i = _skip_ws(s, i)
        if s[i] == "}":
            return out
        assert s[i] == ","
        i = _skip_ws(s, i + 1)


class Doc:
    """A text json.loads accepts, with the oracle's answers in byte offsets."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.value = oracle_loads(text)  # raises Invalid
        self.bom = 3 if text.startswith(BOM) else 0
        self.s = text[self.bom:].decode("utf-8")
        if len(self.s) + self.bom == len(text):
            self._bytes: list[int] | None = None  # ASCII: a char offset is a byte offset
        else:
            self._bytes = [0, *accumulate(len(c.encode("utf-8")) for c in self.s)]
        self.root = _skip_ws(self.s, 0)

    def at(self, i: int) -> int:
        """The byte offset of character offset ``i``."""
        return self.bom + (i if self._bytes is None else self._bytes[i])

    def is_object(self) -> bool:
        return isinstance(self.value, dict)

    def top(self) -> list[Member]:
        """The top-level members, byte offsets."""
        return [Member(m.key, self.at(m.key_start), self.at(m.value_start), self.at(m.value_end))
                for m in _members(self.s, self.root)]

    def open_brace(self) -> int:
        return self.at(self.root)

    def close_brace(self) -> int:
        _, end = _DECODER.raw_decode(self.s, self.root)
        return self.at(end - 1)

    def span(self, path: tuple[str, ...]) -> Span | None | str:
        """The span of the value at ``path`` (last duplicate at each step), None when a key
        on the way is absent, NOT_AN_OBJECT when the text or a value on the way (before the
        last key) is not an object."""
        if not self.is_object():
            return NOT_AN_OBJECT
        i = self.root
        for depth, key in enumerate(path):
            found = [m for m in _members(self.s, i) if m.key == key]
            if not found:
                return None
            last = found[-1]
            if depth == len(path) - 1:
                return self.at(last.value_start), self.at(last.value_end)
            if self.s[last.value_start] != "{":
                return NOT_AN_OBJECT
            i = last.value_start
        raise AssertionError("empty path")

    def lookup(self, path: tuple[str, ...]) -> Any:
        """The json.loads value at ``path``; KeyError when absent or not reachable."""
        node = self.value
        for key in path:
            if not isinstance(node, dict) or key not in node:
                raise KeyError(key)
            node = node[key]
        return node


def key_paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of nested dicts in a json.loads value (not through lists)."""
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((*prefix, key))
            out += key_paths(item, (*prefix, key))
    return out


def all_keys(value: Any) -> set[str]:
    stack: list[Any] = [value]
    keys: set[str] = set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            keys.update(node)
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    return keys


def probe_paths(doc: Doc, rnd: random.Random, limit: int = 40) -> list[tuple[str, ...]]:
    """Paths present in the object and near misses: absent keys, steps into non-objects."""
    present = key_paths(doc.value)
    keys = sorted(all_keys(doc.value)) + ["usage", "absent", ""]
    probes = list(present)
    for path in [(), *present]:
        for key in rnd.sample(keys, min(3, len(keys))):
            probes.append((*path, key))
        if path:
            probes.append((*path[:-1], path[-1] + "x"))
            probes.append((*path[:-1], path[-1][:-1]))
            probes.append((*path, "usage"))
    rnd.shuffle(probes)
    return present[:limit] + probes[:limit]


# --- the serializer ------------------------------------------------------------------------

class Obj(list):  # type: ignore[type-arg]
    """A JSON object as a list of (key, value) pairs: duplicates allowed."""


class Raw(str):
    """A JSON number text written as it is."""


SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                 "\r": "\\r", "\t": "\\t"}


def _u(code: int, rnd: random.Random) -> str:
    digits = f"{code:04x}"
    return "\\u" + (digits.upper() if rnd.random() < 0.3 else digits)


def spell(s: str, rnd: random.Random, style: str) -> str:
    """A JSON string literal for ``s``; ``style`` says how eagerly characters are escaped."""
    rate = {"plain": 0.0, "some": 0.3, "all": 1.0}[style]
    out = ['"']
    for ch in s:
        code = ord(ch)
        must = ch in '"\\' or code < 0x20
        if not must and rnd.random() >= rate:
            out.append(ch)
        elif ch in SHORT_ESCAPES and rnd.random() < 0.5:
            out.append(SHORT_ESCAPES[ch])
        elif code < 0x10000:
            out.append(_u(code, rnd))
        else:  # a surrogate pair
            code -= 0x10000
            out.append(_u(0xD800 + (code >> 10), rnd) + _u(0xDC00 + (code & 0x3FF), rnd))
    out.append('"')
    return "".join(out)


#: seeds for the serializer's many small choices (one draw each, not one per choice)
SEEDS = st.integers(0, 2**32 - 1)
WS_CHOICES = ["", "", "", " ", "\n", "\t", "\r", "\r\n  ", " \t\n\r"]


def dump(value: Any, rnd: random.Random, spaced: bool = True) -> str:
    """``value`` (Obj, list, str, Raw, number, bool, None) as JSON text, spellings varied."""
    out: list[str] = []

    def ws() -> str:
        return rnd.choice(WS_CHOICES) if spaced else ""

    def style() -> str:
        return rnd.choice(["plain", "plain", "some", "all"])

    def emit(v: Any) -> None:
        if isinstance(v, Obj):
            out.append("{" + ws())
            for i, (key, item) in enumerate(v):
                if i:
                    out.append(ws() + "," + ws())
                out.append(spell(key, rnd, style()) + ws() + ":" + ws())
                emit(item)
            out.append(ws() + "}")
        elif isinstance(v, list):
            out.append("[" + ws())
            for i, item in enumerate(v):
                if i:
                    out.append(ws() + "," + ws())
                emit(item)
            out.append(ws() + "]")
        elif isinstance(v, Raw):
            out.append(v)
        elif isinstance(v, str):
            out.append(spell(v, rnd, style()))
        else:
            out.append(json.dumps(v))

    emit(value)
    return "".join(out)


KEY_POOL = ["usage", "id", "a", "b", "", "us\"age", "k\\", "\u00e9", "\U0001F600", "usage\x00",
            "prompt_tokens", '"usage":{"prompt_tokens":1}', "\u2028", "a/b", "\u00ff\u0100"]
KEYS = st.sampled_from(KEY_POOL) | st.text(max_size=5)
STRINGS = (st.sampled_from(['"usage":{"prompt_tokens":1}', '{"usage":null}', "\\", '"', "{",
                            "}", "[", "]", ",", ":", '\\"usage\\"', "\u00e9\u20ac\U0001F600",
                            "\x00\x1f\x7f", "usage"])
           | st.text(max_size=10)
           | st.text(alphabet='ab"\\{}[],: \u00e9', min_size=16, max_size=80))
NUMBERS = st.sampled_from(["0", "-0", "1e5", "1E+5", "-1.5e-3", "0.0", "12345678901234567890123"])
SCALARS = (st.none() | st.booleans() | st.integers(-(10**20), 10**20)
           | st.floats(allow_nan=False, allow_infinity=False) | NUMBERS.map(Raw) | STRINGS)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (st.lists(inner, max_size=4)
                   | st.lists(st.tuples(KEYS, inner), max_size=4).map(Obj)),
    max_leaves=15)


@st.composite
def deep_values(draw: st.DrawFn) -> Any:
    """A value nested hundreds deep in arrays and objects; sometimes the keys along the way
    repeat (a deep key path), sometimes a string of brackets sits at the bottom."""
    depth = draw(st.integers(100, 300))
    value: Any = draw(SCALARS | st.just("]]}}{["))
    key = draw(st.sampled_from(["k", "usage", "a"]))
    rnd = random.Random(draw(SEEDS))  # one draw, not one per level
    for _ in range(depth):
        value = Obj([(key, value)]) if rnd.random() < 0.7 else [value]
    return value


@st.composite
def objects(draw: st.DrawFn, deep: bool = True) -> Obj:
    """A top-level object with duplicate keys (some with another value, some not)."""
    members = draw(st.lists(st.tuples(KEYS, VALUES), max_size=6))
    if deep and draw(st.integers(0, 9)) == 9:  # rare, and not in the smallest example
        members.append((draw(KEYS), draw(deep_values())))
    for _ in range(draw(st.integers(0, 3))):
        if members:
            key = draw(st.sampled_from([k for k, _ in members]))
            members.insert(draw(st.integers(0, len(members))), (key, draw(VALUES)))
    return Obj(members)


@st.composite
def texts(draw: st.DrawFn, deep: bool = True) -> bytes:
    """A JSON object text json.loads accepts."""
    rnd = random.Random(draw(SEEDS))
    spaced = draw(st.integers(0, 3)) > 0
    obj = draw(objects(deep))
    def around() -> str:
        return rnd.choice(WS_CHOICES) if spaced else ""

    text = around() + dump(obj, rnd, spaced) + around()
    return (BOM if draw(st.integers(0, 4)) == 0 else b"") + text.encode("utf-8")


VALUE_TEXTS = st.builds(lambda v, seed: dump(v, random.Random(seed)).encode("utf-8"),
                        VALUES, SEEDS)


def as_kind(data: bytes, kind: str) -> Any:
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(b"xx" + data + b"yy")[2:-2]
    return data


KINDS = st.sampled_from(["bytes", "bytes", "bytearray", "memoryview"])


# --- shared checks -------------------------------------------------------------------------

def same_value(a: Any, b: Any) -> bool:
    """Equal JSON values, NaN equal to NaN (json.loads takes NaN, and nan != nan)."""
    return bool(a == b) or json.dumps(a) == json.dumps(b)


def check_find(twin: ModuleType, doc: Doc, path: tuple[str, ...]) -> None:
    expected = doc.span(path)
    if expected == NOT_AN_OBJECT:
        with pytest.raises(ValueError, match="is not a JSON object: the scan stopped at offset"):
            twin.find_member(doc.text, path)
        return
    span = twin.find_member(doc.text, path)
    assert span == expected, path
    try:
        expected = doc.lookup(path)
    except KeyError:
        assert span is None, path
        return
    assert span is not None, path
    start, end = span
    assert same_value(json.loads(doc.text[start:end]), expected), path


def check_set(twin: ModuleType, doc: Doc, key: str, value: bytes, kind: str = "bytes") -> None:
    result = twin.set_member(as_kind(doc.text, kind), key, as_kind(value, kind))
    assert type(result) is bytes
    text, members = doc.text, doc.top()
    found = [m for m in members if m.key == key]
    if found:  # the last occurrence's value replaced, every other byte kept
        expected = text[:found[-1].value_start] + value + text[found[-1].value_end:]
    else:
        new = json.dumps(key).encode("ascii") + b":" + value
        if members:  # right after the last member
            at = members[-1].value_end
            expected = text[:at] + b"," + new + text[at:]
        else:  # right after "{"
            at = doc.open_brace() + 1
            expected = text[:at] + new + text[at:]
    assert result == expected
    oracle = dict(doc.value)
    oracle[key] = json.loads(value)
    got = oracle_loads(result)
    assert same_value(got, oracle) and list(got) == list(oracle)


def _is_subsequence(small: bytes, big: bytes) -> bool:
    it = iter(big)
    return all(byte in it for byte in small)


def check_del(twin: ModuleType, doc: Doc, key: str, kind: str = "bytes") -> None:
    payload = as_kind(doc.text, kind)
    result = twin.del_member(payload, key)
    assert type(result) is bytes
    text, members = doc.text, doc.top()
    if not any(m.key == key for m in members):
        assert result == text
        if kind == "bytes":
            assert result is payload
        return
    oracle = {k: v for k, v in doc.value.items() if k != key}
    got = oracle_loads(result)
    assert same_value(got, oracle) and list(got) == list(oracle)
    # Only the members and their commas went (whitespace next to them may have gone too):
    # everything up to "{" and from "}" on is kept, every kept member is kept byte for byte,
    # one comma between two kept members, and the whitespace left between them was there.
    opened, closed = doc.open_brace() + 1, doc.close_brace()
    tail = len(text) - closed
    assert result[:opened] == text[:opened]
    assert result[len(result) - tail:] == text[closed:]
    body = result[opened:len(result) - tail]
    pos, region = 0, opened  # region: where the original text between kept members starts
    kept = [m for m in members if m.key != key]
    for n, member in enumerate([*kept, None]):
        gap_start = pos
        while pos < len(body) and body[pos] in b" \t\n\r,":
            pos += 1
        gap = body[gap_start:pos]
        assert gap.count(b",") == (1 if 0 < n < len(kept) else 0), (n, gap)
        region_end = closed if member is None else member.key_start
        between = b"".join(  # the original bytes there, the deleted members left out
            text[a:b] for a, b in _outside(members, key, region, region_end))
        assert _is_subsequence(gap.replace(b",", b""), between.replace(b",", b"")), (gap, between)
        if member is None:
            break
        member_text = text[member.key_start:member.value_end]
        assert body[pos:pos + len(member_text)] == member_text
        pos += len(member_text)
        region = member.value_end
    assert pos == len(body)


def _outside(members: list[Member], key: str, start: int, end: int) -> list[Span]:
    """[start, end) without the members called ``key``."""
    spans, at = [], start
    for m in members:
        if m.key == key and start <= m.key_start < end:
            spans.append((at, m.key_start))
            at = m.value_end
    spans.append((at, end))
    return spans


OFFSET = re.compile(r"offset\D{0,12}?(\d+)", re.I)


def check_not_object(twin: ModuleType, text: bytes, first_byte: int | None = None) -> None:
    """Not a JSON object text: find, set and del raise the same ValueError naming an offset."""
    calls: list[Callable[[], Any]] = [lambda: twin.set_member(text, "a", b"1"),
                                      lambda: twin.del_member(text, "a"),
                                      lambda: twin.set_member(text, ("a", "b"), b"1"),
                                      lambda: twin.del_member(text, ("a", "b"))]
    calls += [lambda p=p: twin.find_member(text, p)  # type: ignore[misc]
              for p in ("a", "usage", ("a", "b"))]
    messages = set()
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        messages.add(message)
        assert message.startswith("payload is not a JSON object: "), message
        match = OFFSET.search(message)
        assert match, message
        assert 0 <= int(match.group(1)) <= len(text), message
        if first_byte is not None:
            assert int(match.group(1)) == first_byte, message
    assert len(messages) == 1, messages  # one rule, one message for the three functions


# --- find_member ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, path, span", [
    (b'{"a":1}', ("a",), (5, 6)),
    (b'{"a":1,"b":[1,2]}', ("b",), (11, 16)),
    (b'{ "a" : "x" , "b" : { } }', ("b",), (20, 23)),
    (b'{"a":1,"a":{"b":2}}', ("a",), (11, 18)),  # the last one wins
    (b'{"a":{"b":2},"a":1}', ("a", "b"), NOT_AN_OBJECT),  # ... also on the way down
    (b'{"a":{"b":2},"a":{"c":3}}', ("a", "b"), None),
    (b'{"a":{"b":2},"a":{"c":3}}', ("a", "c"), (22, 23)),
    (b'{"a":{"b":{"c":null}}}', ("a", "b", "c"), (15, 19)),
    (b'{"a":{"b":[{"c":1}]}}', ("a", "b", "c"), NOT_AN_OBJECT),  # through an array: no
    (b'{"a":"{\\"b\\":1}"}', ("a", "b"), NOT_AN_OBJECT),  # an object text in a string
    (b'{"us\\u0061ge":7}', ("usage",), (14, 15)),  # an escaped spelling is the same key
    (b'{"\\u0075\\u0073\\u0061\\u0067\\u0065":7}', ("usage",), (34, 35)),
    (b'{"\\u00E9":1,"\xc3\xa9":2}', ("\u00e9",), (17, 18)),  # upper-case hex, then raw
    (b'{"\xc3\xa9":2,"\\u00e9":3}', ("\u00e9",), (17, 18)),
    (b'{"\\ud83d\\ude00":1}', ("\U0001F600",), (16, 17)),  # a surrogate pair is one char
    (b'{"\xf0\x9f\x98\x80":1}', ("\U0001F600",), (8, 9)),
    (b'{"a\\/b":1}', ("a/b",), (8, 9)),
    (b'{"\\"":1,"\\\\":2}', ('"',), (6, 7)),
    (b'{"\\"":1,"\\\\":2}', ("\\",), (13, 14)),
    (b'{"usage\\u0000":1}', ("usage",), None),
    (b'{"usage\\u0000":1}', ("usage\x00",), (15, 16)),
    (b'{"x":"\\"usage\\":{\\"a\\":1}","usage":5}', ("usage",), (35, 36)),
    (b'{"x":"\\\\","usage":5}', ("usage",), (18, 19)),
    (BOM + b'{"a":1}', ("a",), (8, 9)),  # offsets count the BOM
    (BOM + b' \t\r\n{"a":1} \t\r\n', ("a",), (12, 13)),
    (b'{"":0}', ("",), (4, 5)),
    (b'{"a":-1.5e+3 ,"b":true}', ("a",), (5, 12)),
    (b'{"a":1}', ("b",), None),
    (b'{}', ("a",), None),
    (b'{"a":1}', ("a", "b"), NOT_AN_OBJECT),  # a step into a number
    (b'{"a":[{"b":1}]}', ("a", "b"), NOT_AN_OBJECT),
    (b'{"a":"b"}', ("a", "b"), NOT_AN_OBJECT),
    (b'{"a":null}', ("a", "b"), NOT_AN_OBJECT),
    (b'{"x":1}', ("a", "b"), None),  # absent on the way: None, whatever follows
])
def test_find_member_cases(members_twin: ModuleType, text: bytes, path: tuple[str, ...],
                           span: Span | None | str) -> None:
    if span == NOT_AN_OBJECT:
        with pytest.raises(ValueError, match=r"the value at \('a'.*\) is not a JSON object"):
            members_twin.find_member(text, path)
    else:
        assert members_twin.find_member(text, path) == span
        if len(path) == 1:
            assert members_twin.find_member(text, path[0]) == span  # a str is a path of one
    doc = Doc(text)
    assert doc.span(path) == span  # the oracle agrees with the hand-written answer
    check_find(members_twin, doc, path)


@pytest.mark.parametrize("text, path", [
    (b'{"\\ud800":1}', ("\ud800",)),  # a lone surrogate escape is a key json.loads keeps
    (b'{"\\udc00x":1}', ("\udc00x",)),
    (b'{"\\ud83d\\ude00":1}', ("\ud83d\ude00",)),  # two str chars: not the key json decodes
    (b'{"\\ud83d":1,"\\ude00":2}', ("\ud83d",)),
])
def test_find_member_surrogate_keys(members_twin: ModuleType, text: bytes,
                                    path: tuple[str, ...]) -> None:
    check_find(members_twin, Doc(text), path)


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(texts(), SEEDS)
def test_find_member_agrees_with_json_loads(members_twin: ModuleType, text: bytes,
                                            seed: int) -> None:
    doc = Doc(text)
    for path in probe_paths(doc, random.Random(seed)):
        check_find(members_twin, doc, path)


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.large_base_example])
@given(deep_values(), deep_values(), SEEDS)
def test_find_member_deep_nesting(members_twin: ModuleType, before: Any, target: Any,
                                  seed: int) -> None:
    # a deep value to skip, then a deep value to walk into
    text = dump(Obj([("k", before), ("usage", target), ("z", 0)]),
                random.Random(seed)).encode("utf-8")
    doc = Doc(text)
    paths = key_paths(doc.value)
    for path in [*paths, *(p + ("absent",) for p in paths[-3:])]:
        check_find(members_twin, doc, path)


def test_find_member_any_depth(members_twin: ModuleType) -> None:
    # far deeper than json.loads goes (it recurses): the scan does not
    depth = 100_000
    nested = b"[" * depth + b'"]}"' + b"]" * depth
    text = b'{"a":' + nested + b',"b":{"c":1}}'
    start = text.index(b'{"c"')
    assert members_twin.find_member(text, "b") == (start, start + 7)
    assert members_twin.find_member(text, ("b", "c")) == (start + 5, start + 6)
    assert members_twin.find_member(text, "a") == (5, 5 + len(nested))
    with pytest.raises(ValueError, match="offset"):
        members_twin.find_member(text[:-1], "b")  # truncated at the very end
    # a key path hundreds of steps long (each step scans the rest of the text: keep it short)
    steps = 600
    keys = b'{"k":' * steps + b"1" + b"}" * steps
    assert members_twin.find_member(keys, ("k",) * steps) == (5 * steps, 5 * steps + 1)
    with pytest.raises(ValueError, match="offset"):
        members_twin.find_member(keys, ("k",) * (steps + 1))  # the last step is into a number
    with pytest.raises(ValueError, match="offset"):
        members_twin.find_member(keys[:-1], "k")


@pytest.mark.parametrize("key", [b'"usage"', b'"us\\u0061ge"', b'"\\u0075sage"'])
def test_find_member_at_every_offset(members_twin: ModuleType, key: bytes) -> None:
    # a scanner that reads blocks of bytes: the key and the escapes across every boundary
    for pad in range(70):
        text = b'{"' + b"a" * pad + b'":"x\\"usage\\":\\\\",' + key + b':{"n":1}}'
        start = len(text) - 8
        assert members_twin.find_member(text, "usage") == (start, start + 7), pad
        assert members_twin.find_member(text, ("usage", "n")) == (start + 5, start + 6), pad
        assert members_twin.find_member(text.replace(key, b'"usagf"'), "usage") is None, pad
        check_find(members_twin, Doc(text), ("usage",))


NOT_OBJECTS = [
    (b"", 0), (b" \t\r\n", 4), (BOM, 3), (BOM + b" ", 4), (b"[DONE]", 0), (b"[]", 0),
    (b'[{"a":1}]', 0), (b" 1", 1), (b"-1.5", 0), (b'"a"', 0), (b'"{\\"a\\":1}"', 0),
    (b"null", 0), (b"true", 0), (b"\n\n[1]", 2), (BOM + b'["a"]', 3), (b'x{"a":1}', 0),
    (b'\x0b{"a":1}', 0), (b'\xc2\xa0{"a":1}', 0), (b'\x00{"a":1}', 0), (BOM + BOM + b'{"a":1}', 3),
    (b'{"a":1} x', None), (b'{"a":1}{}', None), (b'{"a":1},', None), (b'{"a":1}]', None),
    (b'{"a":1}}', None), (b'{"a":1}\x00', None), (b'{"a":1}' + BOM, None), (b'{"a":1}\x0c', None),
    (b'{"a":1', None), (b'{"a":"1}', None), (b'{"a":{"b":1}', None), (b'{"a"', None),
    (b"{", None), (b'{"a":"\\"}', None), (b'{"a":[1,{"b":"]}"}]', None),
]


@pytest.mark.parametrize("text, first_byte", NOT_OBJECTS)
def test_not_an_object(members_twin: ModuleType, text: bytes, first_byte: int | None) -> None:
    try:
        assert not isinstance(oracle_loads(text), dict)
    except Invalid:
        pass
    check_not_object(members_twin, text, first_byte)


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.too_slow])
@given(texts(deep=False), SEEDS)
def test_every_prefix_is_not_an_object(members_twin: ModuleType, text: bytes,
                                       seed: int) -> None:
    doc = Doc(text)
    rnd = random.Random(seed)
    end = doc.close_brace() + 1  # a prefix that holds the "}" is the whole object
    cuts = range(end) if end <= 400 else sorted(rnd.sample(range(end), 400))
    keys = [m.key for m in doc.top()][-2:] + ["a"]
    for cut in cuts:
        prefix = text[:cut]
        for key in keys:
            with pytest.raises(ValueError, match="(?i)offset"):
                members_twin.find_member(prefix, key)
        with pytest.raises(ValueError, match="(?i)offset"):
            members_twin.set_member(prefix, keys[0], b"1")
        with pytest.raises(ValueError, match="(?i)offset"):
            members_twin.del_member(prefix, keys[0])
    for cut in range(end, len(text) + 1):  # the object and some of its whitespace: valid
        check_find(members_twin, Doc(text[:cut]), (keys[0],))


# --- set_member ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, key, value, expected", [
    (b"{}", "a", b"1", b'{"a":1}'),
    (b"{ }", "a", b"1", b'{"a":1 }'),
    (b"{\n}", "a", b"1", b'{"a":1\n}'),
    (BOM + b" {\t} \n", "a", b"[1, 2]", BOM + b' {"a":[1, 2]\t} \n'),
    (b'{\n  "x": 1\n}', "a", b'"v"', b'{\n  "x": 1,"a":"v"\n}'),
    (b'{\n  "x": {\n    "y": [\n      1\n    ]\n  }\n}\n', "a", b"null",
     b'{\n  "x": {\n    "y": [\n      1\n    ]\n  },"a":null\n}\n'),
    (b'{"x":1 , "y" : 2 }', "a", b"true", b'{"x":1 , "y" : 2,"a":true }'),
    (b'{"a":1}', "a", b"2", b'{"a":2}'),
    (b'{ "a" : 1 , "b":2}', "a", b'{"n":[]}', b'{ "a" : {"n":[]} , "b":2}'),
    (b'{"a":1,"b":2,"a":3}', "a", b"4", b'{"a":1,"b":2,"a":4}'),  # only the last one
    (b'{"us\\u0061ge":1}', "usage", b"2", b'{"us\\u0061ge":2}'),  # its spelling is kept
    (b'{"x":{"a":1}}', "a", b"2", b'{"x":{"a":1},"a":2}'),  # a nested "a" is not it
    (b'{"x":"\\"a\\":1"}', "a", b"2", b'{"x":"\\"a\\":1","a":2}'),
    (b'{"a":"long string value"}', "a", b"0", b'{"a":0}'),
    (b'{"a":1}', "a", b"xyz", b'{"a":xyz}'),  # trusted: the value is taken as given
    (b"{}", 'a"b\\c\n\u00e9\U0001F600', b"1",
     b'{"a\\"b\\\\c\\n\\u00e9\\ud83d\\ude00":1}'),  # a new key is written by json.dumps
    (b"{}", "\ud800", b"1", b'{"\\ud800":1}'),
    (b"{}", "", b"1", b'{"":1}'),
])
def test_set_member_cases(members_twin: ModuleType, text: bytes, key: str, value: bytes,
                          expected: bytes) -> None:
    if value == b"xyz":
        with pytest.raises(ValueError, match="not one JSON value"):
            members_twin.set_member(text, key, value)
    assert members_twin.set_member(text, key, value, trusted=True) == expected
    if value != b"xyz":
        assert members_twin.set_member(text, key, value) == expected
        assert members_twin.set_member(text, (key,), value) == expected
        check_set(members_twin, Doc(text), key, value)


@pytest.mark.parametrize("trusted", ["yes", 1, 0, None, 1.0, b"", [True], object()])
def test_set_member_trusted_is_a_bool_only(members_twin: ModuleType, trusted: object) -> None:
    """The review's repro: trusted="yes" (or 1) skipped the value check, so invalid JSON was
    written without the caller having said trusted=True. A keyword that switches a safety
    check off takes True or False only (as compact_ids(lazy=) does); nothing is written."""
    with pytest.raises(TypeError, match=rf"^trusted must be True or False, not "
                                        rf"{type(trusted).__name__}$"):
        members_twin.set_member(b"{}", "k", b"nope", trusted=trusted)
    assert members_twin.set_member(b"{}", "k", b"1", trusted=False) == b'{"k":1}'


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(texts(), st.data())
def test_set_member_agrees_with_json_loads(members_twin: ModuleType, text: bytes,
                                           data: st.DataObject) -> None:
    doc = Doc(text)
    present = [m.key for m in doc.top()]
    key = data.draw(st.sampled_from(present) | KEYS if present else KEYS)
    value = data.draw(VALUE_TEXTS)
    check_set(members_twin, doc, key, value, data.draw(KINDS))


def test_set_member_keeps_a_big_value_verbatim(members_twin: ModuleType) -> None:
    value = b'"' + b"A" * 200_000 + b'"'
    request = b'{"model":"m","prompt":"hi","max_tokens":16}'
    assert members_twin.set_member(request, "ids", value) == \
        request[:-1] + b',"ids":' + value + b"}"
    assert members_twin.set_member(request[:-1] + b',"ids":null}', "ids", value) == \
        request[:-1] + b',"ids":' + value + b"}"


@pytest.mark.parametrize("kind", [bytearray, memoryview, "nested path", "slice"])
def test_set_member_takes_any_bytes_like_value(members_twin: ModuleType, kind: object) -> None:
    """A bytes-like value gives what its bytes give, checked or trusted, a new key, a
    replaced one or a path of absent objects; a bad one names its offset the same."""
    answer = b'{"id":"c1","prompt_token_ids":[151644,872,198],"usage":{}}'
    start, end = members_twin.find_member(answer, "prompt_token_ids")
    value = answer[start:end]
    arg: object = memoryview(answer)[start:end] if kind == "slice" else \
        kind(value) if callable(kind) else bytearray(value)
    path: tuple[str, ...] = ("a", "b", "ids") if kind == "nested path" else ("ids",)
    expected = members_twin.set_member(b'{"m":1}', path, value)
    assert json.loads(expected) == {"m": 1, **nest(path, [151644, 872, 198])}
    for trusted in (False, True):
        assert members_twin.set_member(b'{"m":1}', path, arg, trusted=trusted) == expected
    replaced = members_twin.set_member(b'{"ids":null,"m":1}', "ids", arg)
    assert replaced == b'{"ids":[151644,872,198],"m":1}'
    with pytest.raises(ValueError, match="stops at offset 3$"):
        members_twin.set_member(b"{}", "k", memoryview(b'[1,]'))


def nest(path: tuple[str, ...], value: object) -> dict[str, object]:
    for key in reversed(path[1:]):
        value = {key: value}
    return {path[0]: value}


def test_set_member_reads_a_memoryview_value_in_place() -> None:
    """The compiled twin writes a memoryview's bytes straight into the result: the only
    allocation of the value's size is the result (the guide's zero-copy step)."""
    import tracemalloc

    c = twin_of("members", "c")
    answer = b'{"ids":"' + b"A" * 2_000_000 + b'"}'
    start, end = c.find_member(answer, "ids")
    view = memoryview(answer)[start:end]
    tracemalloc.start()
    try:
        out = c.set_member(b'{"m":1}', "ids", view, trusted=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == b'{"m":1,"ids":' + view.tobytes() + b"}"
    assert peak < 1.2 * len(view), peak


# --- del_member ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, key, expected", [
    (b'{"a":1}', "a", b"{}"),
    (b'{"a":1,"b":2}', "a", b'{"b":2}'),
    (b'{"a":1,"b":2}', "b", b'{"a":1}'),
    (b'{"b":1,"a":2,"c":3}', "a", b'{"b":1,"c":3}'),
    (b'{"a":1,"a":2,"b":3,"a":4}', "a", b'{"b":3}'),  # every one of them
    (b'{"a":1,"a":2}', "a", b"{}"),
    (b'{"b":[{"a":1}],"a":{"a":2}}', "a", b'{"b":[{"a":1}]}'),
    (b'{"x":"\\"a\\":1","a":1}', "a", b'{"x":"\\"a\\":1"}'),
    (b'{"us\\u0061ge":{"p":1},"id":"x"}', "usage", b'{"id":"x"}'),
    (BOM + b' {"a":1,"b":2} \n', "a", BOM + b' {"b":2} \n'),
])
def test_del_member_cases(members_twin: ModuleType, text: bytes, key: str, expected: bytes) -> None:
    assert members_twin.del_member(text, key) == expected
    check_del(members_twin, Doc(text), key)


@pytest.mark.parametrize("text, key", [
    (b'{ "a" : 1 }', "a"),
    (b'{ "a" : 1 , "b" : 2 }', "a"),
    (b'{ "a" : 1 , "b" : 2 }', "b"),
    (b'{\n  "a": 1,\n  "b": 2,\n  "c": 3\n}', "b"),
    (b'{\n  "a": 1,\n  "b": 2,\n  "a": 3\n}\n', "a"),
    (b'{"a":1 ,\t"a":2 ,\r"b":3}', "a"),
])
def test_del_member_spaced(members_twin: ModuleType, text: bytes, key: str) -> None:
    check_del(members_twin, Doc(text), key)


@pytest.mark.parametrize("text", [b"{}", b"{ }", b'{"a":1}', b'{"x":{"b":1}}', b'{"x":"\\"b\\":1"}',
                                  b'{"b\\u0000":1}', b'{"B":1}'])
def test_del_member_absent_is_the_same_object(members_twin: ModuleType, text: bytes) -> None:
    assert members_twin.del_member(text, "b") is text
    for kind in ("bytearray", "memoryview"):
        result = members_twin.del_member(as_kind(text, kind), "b")
        assert type(result) is bytes and result == text


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])
@given(texts(), st.data())
def test_del_member_agrees_with_json_loads(members_twin: ModuleType, text: bytes,
                                           data: st.DataObject) -> None:
    doc = Doc(text)
    present = [m.key for m in doc.top()]
    key = data.draw(st.sampled_from(present) | KEYS if present else KEYS)
    check_del(members_twin, doc, key, data.draw(KINDS))


# --- arguments -----------------------------------------------------------------------------

def test_bytes_like_inputs(members_twin: ModuleType) -> None:
    text = b'{"a":1,"b":{"c":[2]}}'
    for kind in ("bytes", "bytearray", "memoryview"):
        payload = as_kind(text, kind)
        assert members_twin.find_member(payload, ("b", "c")) == (16, 19)
        assert members_twin.set_member(payload, "a", as_kind(b"5", kind)) == \
            b'{"a":5,"b":{"c":[2]}}'
        assert members_twin.del_member(payload, "a") == b'{"b":{"c":[2]}}'
    with pytest.raises(ValueError, match="offset 0"):
        members_twin.find_member(bytearray(), "a")
    assert members_twin.set_member(b"{}", "a", memoryview(b"[1]")) == b'{"a":[1]}'


@pytest.mark.parametrize("call", [
    lambda m: m.find_member('{"a":1}', "a"),
    lambda m: m.set_member('{"a":1}', "a", b"1"),
    lambda m: m.del_member('{"a":1}', "a"),
    lambda m: m.find_member(None, "a"),
    lambda m: m.find_member(5, "a"),
    lambda m: m.set_member([1], "a", b"1"),
    lambda m: m.del_member(None, "a"),
    lambda m: m.find_member(b'{"a":1}'),  # no path
    lambda m: m.find_member(b'{"a":{}}', "a", "b"),  # a path is one argument
    lambda m: m.find_member(b'{"a":1}', b"a"),
    lambda m: m.find_member(b'{"a":1}', 1),
    lambda m: m.find_member(b'{"a":1}', None),
    lambda m: m.find_member(b'{"a":1}', ["a"]),  # a tuple, not a list
    lambda m: m.find_member(b'{"a":{}}', ("a", 1)),
    lambda m: m.find_member(b"{}", ("a", b"b")),  # checked even when the first step is absent
    lambda m: m.set_member(b"{}", ("a", None), b"1"),
    lambda m: m.del_member(b"{}", ("a", 2)),
    lambda m: m.set_member(b'{"a":1}', b"a", b"1"),
    lambda m: m.set_member(b'{"a":1}', 1, b"1"),
    lambda m: m.set_member(b'{"a":1}', None, b"1"),
    lambda m: m.set_member(b'{"a":1}', "a", "1"),  # the value is bytes-like too
    lambda m: m.set_member(b'{"a":1}', "a", 1),
    lambda m: m.set_member(b'{"a":1}', "a", None),
    lambda m: m.del_member(b'{"a":1}', b"a"),
    lambda m: m.del_member(b'{"a":1}', 1),
    lambda m: m.del_member(b"{}", None),
])
def test_type_errors(members_twin: ModuleType, call: Callable[[ModuleType], Any]) -> None:
    with pytest.raises(TypeError):
        call(members_twin)


# --- twin parity ---------------------------------------------------------------------------

def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        return ("ok", call())
    except Exception as exc:  # the type and the message, whatever it is
        return (type(exc), str(exc))


SPECIAL = st.sampled_from([b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b" ", b"\t", b"\n",
                           b"\r", BOM, b"\x00", b"\xff", b"\xc3", b"\\u", b"\\u00", b'"usage"',
                           b"null", b"1", b"e"])
MUTATIONS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3) | st.integers(0, 24),
                               SPECIAL | st.binary(max_size=3)), min_size=1, max_size=4)
#: pieces of JSON, and of JSON gone wrong, to glue at random
FRAGMENTS = st.sampled_from([b"{", b"}", b"[", b"]", b",", b":", b'"a"', b'"usage"', b'"b"',
                             b'"us\\u0061ge"', b"1", b"-0.5e3", b"null", b"tru", b'"', b"\\",
                             b'\\"', b" ", b"\n", b"\t", BOM, b'"\\u00', b'"\\ud800"', b"\xc3",
                             b'"\xc3\xa9"', b"\x00", b"x", b'{"a":1}', b'"a":', b",}", b",,"])


def mutate(text: bytes, mutations: list[tuple[int, int, bytes]]) -> bytes:
    for at, cut, junk in mutations:
        at %= len(text) + 1
        text = text[:at] + junk + text[at + cut:]
    return text


def run_all(twin: ModuleType, text: bytes, paths: list[tuple[str, ...]]) -> list[tuple[Any, ...]]:
    key = paths[0][0]
    results = [outcome(lambda p=p: twin.find_member(text, p)) for p in paths]  # type: ignore[misc]
    results.append(outcome(lambda: twin.set_member(text, key, b'"v"')))
    results.append(outcome(lambda: twin.set_member(text, "new", b"[]")))
    results.append(outcome(lambda: twin.set_member(text, paths[-1], b"[]")))
    results.append(outcome(lambda: twin.set_member(text, key, text, trusted=True)))
    results.append(outcome(lambda: twin.set_member(b"{}", key, text)))  # text as the value
    results.append(outcome(lambda: twin.del_member(text, key)))
    results.append(outcome(lambda: twin.del_member(text, "usage")))
    results.append(outcome(lambda: twin.del_member(text, paths[-1])))
    return results


def check_parity(text: bytes, paths: list[tuple[str, ...]]) -> None:
    """The twins give the same results and errors; on a text json.loads accepts, its answers."""
    modules = twins("members")
    first = run_all(modules[0], text, paths)
    for other in modules[1:]:
        assert run_all(other, text, paths) == first, text
    try:
        doc = Doc(text)
    except Invalid:
        return
    for twin in modules:
        for path in paths:
            check_find(twin, doc, path)
        if doc.is_object():
            check_set(twin, doc, paths[0][0], b'"v"')
            check_del(twin, doc, paths[0][0])


@settings(max_examples=examples(250), suppress_health_check=[HealthCheck.too_slow])
@given(texts(), MUTATIONS)
def test_twins_agree_on_damaged_bytes(text: bytes, mutations: list[tuple[int, int, bytes]]) -> None:
    doc = Doc(text)
    paths = key_paths(doc.value)[:6] + [("usage",), ("a", "b")]
    check_parity(mutate(text, mutations), paths)


@settings(max_examples=examples(300))
@given(st.lists(FRAGMENTS, max_size=16).map(b"".join), st.sampled_from(["a", "usage", "b"]))
def test_twins_agree_on_token_soup(text: bytes, key: str) -> None:
    check_parity(text, [(key,), (key, "b"), ("a", "usage")])
    check_parity(b"{" + text, [(key,), (key, "b")])
    check_parity(b'{"a":' + text, [(key,), ("a",), ("a", "b")])


@given(st.binary(max_size=48), st.sampled_from(["a", "usage", ""]))
def test_twins_agree_on_any_bytes(text: bytes, key: str) -> None:
    check_parity(text, [(key,), (key, "b")])
    check_parity(b"{" + text, [(key,), (key, "b")])
    check_parity(b'{"a":' + text + b"}", [(key,), ("a",), ("a", "b")])


def test_twins_agree_on_nan() -> None:
    """json.loads takes NaN and Infinity (and nan != nan): the checks compare them as JSON."""
    for text in (b"NaN", b'{"a":NaN}', b'{"a":[Infinity,-Infinity,NaN],"b":1}'):
        check_parity(text, [("a",), ("usage",), ("a", "b")])
