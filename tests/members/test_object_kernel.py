"""The object-text check's vector kernels (``_json_object.h``: AVX2 and AVX-512BW on x86-64,
NEON on aarch64) against its scalar check (``_members_c._object_text_scalar``, itself compared with
``_members_py.scan_object`` in test_json_value): on every input over a few bytes, with every
pattern of a few bytes at every offset around the 64-byte blocks, through one memo as a
relay keeps one, on every byte value and on generated objects, whole and with one byte
changed. ``_is_object_text(text, kernel)`` is that kernel's answer (``"scalar"``: the scalar
check's), with ``one_line`` also no LF or CR in the text, as the relay asks of a data field
(the kernels see them as they read). Only the Cython twin has the check; where the CPU lacks
a kernel, asking for it gives the scalar check.
"""

from __future__ import annotations

import json
import platform
from types import ModuleType
from typing import Any

import pytest
from _budget import examples
from _cpu import cpu_has
from _twins import SWITCHES_KERNELS, twin
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcore.members import _members_py


@pytest.fixture(scope="module")
def json_c() -> ModuleType:
    module: ModuleType = twin("members", "c")
    return module


def scanned(text: bytes) -> bool:
    try:
        _members_py.scan_object(text, 0, len(text), True)
    except _members_py.ScanError:
        return False
    return True


# the kernels: each one of this architecture that the CPU has is compared with the scalar
# check (one it lacks falls back to the scalar check: comparing it is a no-op)
ALL_KERNELS = ("avx2", "avx512", "neon")
AARCH64 = platform.machine().lower() in ("aarch64", "arm64")
KERNELS = ("neon",) if AARCH64 else ("avx2", "avx512")


def check(json_c: ModuleType, text: bytes) -> bool:
    """The kernels' answers against the scalar check's, and on one line (no LF or CR)."""
    expected = json_c._is_object_text(text, "scalar")
    one_line = expected and b"\n" not in text and b"\r" not in text
    assert json_c._is_object_text(text, "scalar", True) is one_line, text
    for kernel in (None, *KERNELS):
        assert json_c._is_object_text(text, kernel) is expected, (kernel, text)
        assert json_c._is_object_text(text, kernel, True) is one_line, (kernel, text)
    return bool(expected)


def test_kernel_in_use(json_c: ModuleType) -> None:
    """An x86-64 CPU runs the widest kernel it has, an aarch64 one NEON: a build or a
    dispatch that lost it fails here instead of going slow."""
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if AARCH64:
        expected = "neon"
    elif not x86 or cpu_has("avx2") is None:
        expected = "scalar" if not x86 else json_c._kernel()
    elif cpu_has("avx2") and cpu_has("pclmulqdq"):
        expected = "avx512" if cpu_has("avx512bw") else "avx2"
    else:
        expected = "scalar"
    assert json_c._kernel() == expected == json_c._kernels()[-1]
    assert json_c._OBJECT_KERNELS == ("scalar", *ALL_KERNELS)
    assert json_c._kernels() == (("scalar", "neon") if expected == "neon" else
                                 ("scalar", "avx2", "avx512")[:KERNEL_LEVEL[expected] + 1])


KERNEL_LEVEL = {"scalar": 0, "avx2": 1, "avx512": 2}


@SWITCHES_KERNELS
def test_use_kernel(json_c: ModuleType) -> None:
    """Every kernel of the CPU runs through the hook, and the text check follows it."""
    text = CHUNK
    best = json_c._kernel()
    for name in json_c._kernels():
        assert json_c._use_kernel(name) == best
        assert json_c._kernel() == name and json_c._is_object_text(text)
        assert not json_c._is_object_text(text[:-1] + b",}")
        json_c._use_kernel(best)
    with pytest.raises(ValueError, match="no kernel 'AVX2' here .not a kernel name."):
        json_c._use_kernel("AVX2")
    assert json_c._kernel() == best


# bytes whose nibbles the classes share: each is read as a byte of a literal
NEIGHBOURS = b"+|Z\x0c\x00\xa2\xfb\xdd\xba\x1a\x2a\x3b\x7e\x5e\x80\xff"
EXHAUSTIVE = [
    # (alphabet, longest window, frames around it)
    (b'{}[]":,\\ a', 6, [(b"", b""), (b"{", b"}"), (b'{"a":', b"}"), (b'{"k":"', b'"}')]),
    (b'{}"\\:, \t\n\r\x0bx', 4, [(b"", b""), (b"{", b"}"), (b'{"a":', b"}")]),
    (b'\xef\xbb\xbf{} ', 6, [(b"", b"")]),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("alphabet", "longest", "frames"), EXHAUSTIVE)
def test_kernel_agrees_on_every_input(json_c: ModuleType, alphabet: bytes, longest: int,
                                      frames: list[tuple[bytes, bytes]], kernel: str) -> None:
    """About 5 million inputs, enumerated in C."""
    for before, after in frames:
        for length in range(longest + 1):
            for memo in (False, True):
                found = json_c._object_text_agree(alphabet, length, before, after, kernel, memo)
                assert found is None, (alphabet, before, after, memo, found)


# (frame before, the same again, frame after): the window goes to every offset of a text of
# each total, inside a key, a nested value, a literal, whitespace, a string of backslashes
FRAMES = [
    (b'{"', b"x", b'":1}'),
    (b'{"a":[', b"1", b"]}"),
    (b'{"a":', b"1", b"}"),
    (b'{"a":1', b" ", b"}"),
    (b'{"a":"', b"\\", b'"}'),
    (b'{"a":[{"b":"', b"y", b'"}],"c":2}'),
]
TOTALS = (60, 63, 64, 65, 66, 70, 127, 128, 129, 131, 192, 200)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("before", "filler", "after"), FRAMES)
def test_kernel_agrees_in_every_window(json_c: ModuleType, before: bytes, filler: bytes,
                                       after: bytes, kernel: str) -> None:
    """Every pattern of 4 structural bytes in every lane of texts across the blocks (about
    2.7 million inputs, enumerated in C)."""
    for total in TOTALS:
        room = total - len(before) - len(after) - 4
        for at in range(room + 1):
            head, tail = before + filler * at, filler * (room - at) + after
            found = json_c._object_text_agree(b'{}"\\:,1 ', 4, head, tail, kernel)
            assert found is None, (total, at, found)


CHUNK = (b'{"id":"chatcmpl-8f3c2a1b4d5e6f708192a3b4c5d6e7f8","object":"chat.completion.chunk",'
         b'"created":1732000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,'
         b'"delta":{"content":" the"},"logprobs":null,"finish_reason":null}],"usage":null}')


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("lead", [b"", b" ", b"\xef\xbb\xbf \n"])
def test_memo_agrees_in_every_window(json_c: ModuleType, kernel: str, lead: bytes) -> None:
    """A memo kept from input to input, as a relay keeps one from event to event: a chat
    chunk with 3 bytes changed at every offset, so that each input begins like the ones
    before it up to the change (the memo's blocks taken, refilled or passed over), and the
    answers are still the scalar check's."""
    text = lead + CHUNK
    for at in range(len(text) - 3 + 1):
        found = json_c._object_text_agree(b'"{}:,\\ x', 3, text[:at], text[at + 3:],
                                          kernel, memo=True)
        assert found is None, (at, found)


@pytest.mark.parametrize("kernel", KERNELS)
def test_memo_keeps_the_lead(json_c: ModuleType, kernel: str) -> None:
    """Texts that differ only in the whitespace before their brace (a LF or CR there or not)
    begin their members at the same offset and go on from one memo: the memo's bytes include
    that lead, so each text's answer (on one line or not) is its own."""
    for length in (1, 3, 6):
        found = json_c._object_text_agree(b" \t\n\r", length, b"", CHUNK, kernel, memo=True)
        assert found is None, (length, found)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("alphabet", [b'"\\\n\rx', b'"\\ x{'])
def test_memo_agrees_in_every_string_window(json_c: ModuleType, kernel: str,
                                            alphabet: bytes) -> None:
    """The memo's whole-text answer: a chat chunk with 1 to 4 bytes of its text changed to
    quotes, backslashes, LF, CR or others (every input through one memo: each compared with
    the one kept before it), and the same in its id, at the start of the members and just
    before the usage member: the answers and the line ends are the scalar check's."""
    content = CHUNK.index(b'" the"') + 1
    for at, width in ((content, 5), (content + 1, 4), (content + 4, 2), (7, 4), (1, 3),
                      (len(CHUNK) - 15, 3), (len(CHUNK) - 2, 1)):
        for length in range(1, width + 1):
            found = json_c._object_text_agree(alphabet, length, CHUNK[:at],
                                              CHUNK[at + min(length, 2):], kernel, memo=True)
            assert found is None, (at, length, found)


OTHER = CHUNK.replace(b'" the"', b'" model"')
EARLY = CHUNK.replace(b"chatcmpl-8", b"chatcmpl-9")
MIDDLE = CHUNK.replace(b"Qwen2.5", b"Qwen2.6")  # after 64 bytes of members
BROKEN = CHUNK[:-1] + b",}"  # begins as CHUNK does; no object, so not kept
QUOTED = CHUNK.replace(b'" the"', b'" \\"the"')  # a quote in the text: its string ends
ESCAPED = CHUNK.replace(b'" the"', b'" the\\\\"')  # ends in an escaped backslash
NUMBER = CHUNK.replace(b'"created":1732000000', b'"created":17320000001')  # not in a string
LINE = CHUNK.replace(b'" the"', b'" the\n"')  # a LF in a string: an object, not one line
LONG = CHUNK.replace(b'" the"', b'"' + b"x" * 600 + b'"')  # too long to keep whole


@pytest.mark.parametrize("kernel", KERNELS)
def test_memo_is_used(json_c: ModuleType, kernel: str) -> None:
    """A stream's chunks go on from the memo: a text that differs from the kept one only
    inside one of its strings (no quote, LF or CR there, no backslash just before the rest)
    is answered from it (-1), with no block read; any other that begins with the same bytes
    goes on from the blocks it fills (2 when the first 128 bytes of members are the same, 1
    when only the first 64 are), 0 when it is short, changed at the start, or follows one that
    was no object (which is not kept). Every answer and line end is the scalar check's."""
    if kernel not in json_c._kernels():
        pytest.skip(f"no {kernel} kernel on this CPU")
    texts = [CHUNK, OTHER, CHUNK, MIDDLE, CHUNK, EARLY, EARLY, b'{"a":1}', CHUNK + b"x",
             CHUNK[:100], EARLY, BROKEN, CHUNK, BROKEN, CHUNK,
             b'{"a":1}', CHUNK, QUOTED, CHUNK, CHUNK, ESCAPED, CHUNK, NUMBER, CHUNK, LINE, LINE,
             CHUNK, LONG,
             b'{"a":1}', LONG, LONG.replace(b"xxx", b"xyx"), CHUNK, b" " + CHUNK, b" " + OTHER]
    taken = [0, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, -1, 0, -1,
             0, 0, 2, 2, -1, 2, 2, 1, 1, 2, -1,
             2, -1,
             0, 0, 2, 2, 0, -1]
    answers = json_c._memo_answers(texts, kernel)
    assert [answer[2] for answer in answers] == taken
    assert json_c._memo_taken(texts, kernel) == taken
    for text, (answer, line, _) in zip(texts, answers):
        expected = json_c._is_object_text(text, "scalar")
        assert answer == expected, text
        assert line is (None if not expected else b"\n" in text or b"\r" in text), text


@pytest.mark.parametrize("at", [0, 1, 31, 32, 62, 63, 64, 65, 127, 128])
def test_every_byte_value(json_c: ModuleType, at: int) -> None:
    """Each of the 256 bytes in a key, a string value, a literal and between members, at
    offsets that put it on either side of a block boundary."""
    pad = b" " * at
    for byte in range(256):
        b = bytes([byte])
        for text in (b'{"' + pad + b + b'":1}', b'{"a":"' + pad + b + b'"}',
                     b'{"a":1' + pad + b + b"}", b'{"a":' + pad + b + b"}",
                     b'{"a":1,' + pad + b + b'"b":2}', pad + b + b"{}", b"{}" + pad + b):
            check(json_c, text)


def test_known_answers(json_c: ModuleType) -> None:
    yes = [b"{}", b" {\n}\r\n", b'{"a":\n1}', b'{"a":"\r"}', b"\xef\xbb\xbf{}", b'{"a":1}',
           b'{"a":"b\\"c"}', b'{"a":[1,{"b":2}],"c":null}', b'{"a":{]}',
           b'{"a":"\\\\","b":"x"}', b'{"a" : 1 , "b" :[ ] }', b'{"a":-x}',
           b'{"k":"' + b"x" * 200 + b'","usage":null}']
    no = [b"", b"{", b"}", b"{}}", b"{} x", b'{"a":1,}', b'{"a":[}]}', b'{"a"}', b'{"a":1 2}',
          b'{1:2}', b'{"a":[1}', b'{"a":"}', b'{"a":1]', b'{"a":"b""c"}', b'{"a":\\"x"}', b"[]",
          b'{"a":1}}', b' \xef\xbb\xbf{}', b'{"a":[\\"],"b":1}', b'{"a":1:2}', b'{,"a":1}',
          b'{"a":[' + b"1," * 100 + b"1}"]
    for text in yes:
        assert check(json_c, text) and scanned(text), text
    for text in no:
        assert not check(json_c, text) and not scanned(text), text


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) \
        | st.text(max_size=12)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=24)


SEPARATORS = st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", "\t: ")])
STRUCTURAL = st.sampled_from(b'{}[]":,\\ \n0a\xc3')


@settings(max_examples=examples(1500))
@given(st.dictionaries(st.text(max_size=8), json_values(), max_size=8), SEPARATORS,
       st.booleans(), st.integers(min_value=0), STRUCTURAL,
       st.sampled_from(["keep", "replace", "insert", "delete"]))
def test_kernel_agrees_on_objects(json_c: ModuleType, obj: dict[str, Any],
                                  separators: tuple[str, str], ascii_only: bool, where: int,
                                  byte: int, change: str) -> None:
    """A JSON object (many cross a block boundary), whole or with one byte changed."""
    text = json.dumps(obj, separators=separators, ensure_ascii=ascii_only).encode()
    at = where % len(text)
    changed = {"keep": text, "replace": text[:at] + bytes([byte]) + text[at + 1:],
               "insert": text[:at] + bytes([byte]) + text[at:],
               "delete": text[:at] + text[at + 1:]}[change]
    assert check(json_c, changed) is scanned(changed), changed
    if change == "keep":
        assert scanned(text), text


def whole_objects() -> st.SearchStrategy[Any]:
    return st.dictionaries(st.text(max_size=8), json_values(), min_size=1, max_size=8)


@settings(max_examples=examples(1500))
@given(whole_objects(), SEPARATORS, st.booleans(), st.integers(min_value=0),
       st.text(max_size=12), st.binary(max_size=6), st.booleans())
def test_memo_agrees_on_changed_strings(json_c: ModuleType, obj: dict[str, Any],
                                        separators: tuple[str, str], ascii_only: bool,
                                        where: int, text: str, raw: bytes,
                                        as_json: bool) -> None:
    """An object, then the same with the bytes of one of its strings (a key or a value, at
    any depth) changed: to another string's JSON (escapes and all) or to raw bytes (quotes,
    backslashes, line ends and others), through one memo, both orders: every answer and line
    end is the scalar check's."""
    first = json.dumps(obj, separators=separators, ensure_ascii=ascii_only).encode()
    quotes = [k for k in range(len(first)) if first[k] == 34
              and (len(first[:k]) - len(first[:k].rstrip(b"\\"))) % 2 == 0]
    opening = quotes[2 * (where % (len(quotes) // 2))]
    closing = quotes[quotes.index(opening) + 1]
    inner = json.dumps(text, ensure_ascii=ascii_only)[1:-1].encode() if as_json else raw
    second = first[:opening + 1] + inner + first[closing:]
    for kernel in KERNELS:
        if kernel not in json_c._kernels():
            continue
        for texts in ([first, second], [second, first], [first, second, first, second]):
            for each, (answer, line, _) in zip(texts, json_c._memo_answers(texts, kernel)):
                expected = json_c._is_object_text(each, "scalar")
                assert answer in (expected, -1), (kernel, texts)  # -1: the scalar decides
                if answer == 1:
                    assert line is (b"\n" in each or b"\r" in each), (kernel, texts)
