"""The JSON value check (set_member's, and the usage rewrite's) and the object-text check,
against json.loads and between the twins, offset for offset.

The check's answer is where a text stops being the start of a JSON text (RFC 8259 over
RFC 3629 UTF-8): -1 for one value, else the offset of the first byte no valid text could
have there. The oracle for validity is ``json.loads`` of the strictly decoded text without
NaN/Infinity; the offsets are compared between the twins and, for the C twin, between its
SSE2 and portable string loops.
"""

from __future__ import annotations

import json
from typing import Any

import _twins
import pytest
from _budget import examples
from _twins import twins
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcore._backend import NO_EXTENSIONS
from tokcore.members import _members_py


def strict(data: bytes) -> bool:
    def refuse(name: str) -> Any:
        raise ValueError(name)
    try:
        json.loads(data.decode("utf-8"), parse_constant=refuse)
    except (ValueError, RecursionError):
        return False
    return True


def answers(data: bytes) -> set[int]:
    found = {_members_py.value_error(data, 0, len(data))}
    if not NO_EXTENSIONS:
        from tokcore.members import _members_c
        found.add(_members_c._value_error(data))
        found.add(_members_c._value_error(data, simd=False))
    return found


PIECES = st.sampled_from([b"{", b"}", b"[", b"]", b",", b":", b'"', b'"a"', b"\\", b'\\"', b"\\u",
                          b"\\u00e9", b"0", b"-", b"1", b"07", b".", b"e", b"E+", b"5.0", b"true",
                          b"nul", b" ", b"\n", b"\t", b"\x00", b"\x1f", b"\xc3\xa9", b"\xc3",
                          b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98\x80", b"\xff",
                          b"x", b"a" * 20])


@settings(max_examples=examples(600))
@given(st.lists(PIECES, max_size=20).map(b"".join))
def test_value_check_agrees_with_json_loads(data: bytes) -> None:
    (stop,) = answers(data)
    assert (stop < 0) == strict(data), (data, stop)
    if stop >= 0:
        assert 0 <= stop <= len(data)
        # the text up to the offset is a JSON text or the start of one (it stops at its end)
        assert answers(data[:stop]) <= {-1, stop}, (data, stop)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4), max_leaves=20)


@settings(max_examples=examples(300))
@given(JSON_VALUES, st.booleans(), st.integers(0, 10**6))
def test_every_json_value_passes_and_every_cut_fails(value: Any, ascii_only: bool,
                                                     cut: int) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    if not strict(text):  # json.dumps writes lone surrogates raw when not ascii-only
        return
    assert answers(text) == {-1}
    at = cut % len(text)
    if strict(text[:at]):
        return
    (stop,) = answers(text[:at])
    assert 0 <= stop <= at


@pytest.mark.parametrize("data, stop", [
    (b"007", 1), (b"+5", 0), (b"0x10", 1), (b"abc", 0), (b"nul", 3), (b"1.2.3", 3), (b".5", 0),
    (b'"\xff"', 1), (b"1.", 2), (b"-", 1), (b"[1,]", 3), (b'{"a" 1}', 5), (b"", 0), (b"  ", 2),
    (b'"\\u12x4"', 5), (b'"\\x"', 2), (b'"\xed\xa0\x80"', 2), (b'"\xe0\x80\x80"', 2),
    (b'"' + b"a" * 40 + b'\x01"', 41), (b'"' + b"a" * 40 + b"\xc3\xa9" * 9 + b'\xc3"', 60),
    (b"[" * 5000 + b"]" * 5000, -1), (b"[" * 5000 + b"]" * 4999, 9999), (b"{}x", 2),
])
def test_value_check_offsets(data: bytes, stop: int) -> None:
    assert answers(data) == {stop}


@pytest.mark.skipif(NO_EXTENSIONS, reason="the C object-text check")
@settings(max_examples=examples(600))
@given(st.lists(PIECES | st.sampled_from([b'"usage":null', b'{"a":1}', b"\xef\xbb\xbf"]),
                max_size=16).map(b"".join))
def test_object_text_check_is_the_scan(data: bytes) -> None:
    from tokcore.members import _members_c
    for text in (data, b"{" + data, b'{"a":' + data + b"}"):
        try:
            _members_py.scan_object(text, 0, len(text), True)
            expected = True
        except _members_py.ScanError:
            expected = False
        assert _members_c._is_object_text(text) is expected, text


def test_the_twins_are_here() -> None:
    # the kinds this run tests (TOKCORE_TEST_TWINS): the Cython twin is missing only
    # under TOKCORE_NO_EXTENSIONS, never because its build broke
    kinds = [m.__name__.rsplit("_", 1)[1] for m in twins("members")]
    wanted = ("py",) if _twins.ONLY == ("dispatch",) else _twins.ONLY
    assert sorted(kinds) == sorted(k for k in wanted if not (k == "c" and NO_EXTENSIONS))
