"""Token ids as JSON arrays, MessagePack arrays and bins, base64 and int32, on both twins:
json, msgpack, msgspec, base64 and struct are the oracles."""

from __future__ import annotations

import base64
import json
import mmap
import os
import platform
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import msgpack
import numpy as np
import pytest
from _budget import QUICK
from _cpu import cpu_has
from _twins import SHARED_VIEW, SWITCHES_KERNELS, twin
from hypothesis import given
from hypothesis import strategies as st

try:
    import msgspec
except ModuleNotFoundError:
    # msgspec has no free-threaded build: make test-freethreaded says so and runs the rest with
    # msgpack (its pure-Python packer there) as the oracle; everywhere else its absence fails
    if os.environ.get("TOKCORE_TEST_WITHOUT_MSGSPEC") != "1":
        raise
    msgspec = None  # type: ignore[assignment]

needs_msgspec = pytest.mark.skipif(msgspec is None, reason="TOKCORE_TEST_WITHOUT_MSGSPEC=1: "
                                   "no msgspec for this interpreter (free-threaded)")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FORMATS = ("int32", "b64", "json", "msgpack", "msgpack_bin")
int32s = st.integers(INT32_MIN, INT32_MAX)
# ids as a tokenizer gives them, and the values where the encodings change
token_ids = st.one_of(st.integers(0, 151_999), int32s, st.integers(-300, 300))
id_lists = st.lists(token_ids, max_size=200)
EDGES = [0, 1, -1, 9, 10, 99, 100, 127, 128, 255, 256, -31, -32, -33, -127, -128, -129,
         9999, 10_000, 65_535, 65_536, -32_767, -32_768, -32_769, 99_999_999, 100_000_000,
         999_999_999, 1_000_000_000, 151_643, INT32_MAX, INT32_MIN, INT32_MIN + 1]
WS = " \t\n\r"


def compact(ids: list[int]) -> bytes:
    return json.dumps(ids, separators=(",", ":")).encode()


def oracle_write(ids: list[int], fmt: str) -> bytes:
    """``ids`` in ``fmt`` as the other libraries write them."""
    raw = struct.pack(f"<{len(ids)}i", *ids)
    if fmt == "int32":
        return raw
    if fmt == "b64":
        return base64.b64encode(raw)
    if fmt == "json":
        return compact(ids)
    if fmt == "msgpack":
        return msgpack_of(ids)
    return msgpack.packb(raw)  # type: ignore[no-any-return]


def msgpack_of(ids: list[int]) -> bytes:
    """The MessagePack array msgpack writes, and msgspec writes the same where it is installed."""
    packed: bytes = msgpack.packb(ids)
    if msgspec is not None:
        assert msgspec.msgpack.encode(ids) == packed
    return packed


def oracle_read(data: bytes, fmt: str) -> list[int]:
    if fmt == "json":
        return json.loads(data)  # type: ignore[no-any-return]
    if fmt == "msgpack":
        return msgpack.unpackb(data)  # type: ignore[no-any-return]
    if fmt == "b64":
        data = base64.b64decode(data, validate=True)
    elif fmt == "msgpack_bin":
        data = msgpack.unpackb(data)
    return list(struct.unpack(f"<{len(data) // 4}i", data))


def outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except Exception as exc:  # the outcome, compared: type and message
        return type(exc), str(exc)


@contextmanager
def kernel(name: str) -> Iterator[ModuleType]:
    """The Cython twin reading JSON with the kernel ``name``."""
    c = twin("wire", "c")
    before = c._use_kernel(name)
    try:
        yield c
    finally:
        c._use_kernel(before)


def kernels() -> list[str]:
    return list(twin("wire", "c")._kernels())


# --- writing -------------------------------------------------------------------------------

@given(id_lists)
def test_ids_to_json_is_compact_json(wire_twin: ModuleType, ids: list[int]) -> None:
    assert wire_twin.ids_to_json(ids) == compact(ids)


@given(id_lists)
def test_ids_to_msgpack_is_msgpacks_and_msgspecs(wire_twin: ModuleType, ids: list[int]) -> None:
    out = wire_twin.ids_to_msgpack(ids)
    assert out == msgpack_of(ids)
    assert type(out) is bytes


def test_writers_at_the_edges(wire_twin: ModuleType) -> None:
    for value in EDGES:
        for ids in ([value], [value, -value if value != INT32_MIN else 0, 5]):
            assert wire_twin.ids_to_json(ids) == compact(ids)
            assert wire_twin.ids_to_msgpack(ids) == msgpack.packb(ids)
    every_digit_count = [10**k + j for k in range(10) for j in (-1, 0, 1) if 10**k + j > 0]
    every_digit_count = [v for v in every_digit_count if v <= INT32_MAX]
    ids = every_digit_count + [-v for v in every_digit_count]
    assert wire_twin.ids_to_json(ids) == compact(ids)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 255, 256, 65_535, 65_536])
def test_msgpack_headers(wire_twin: ModuleType, size: int) -> None:
    ids = [i % 300 - 40 for i in range(size)]
    out = wire_twin.ids_to_msgpack(ids)
    assert out == msgpack_of(ids)
    assert wire_twin.msgpack_to_ids(out) == ids


@pytest.mark.parametrize("make", [
    tuple, iter, lambda ids: np.array(ids, np.int64), lambda ids: np.array(ids, ">i4"),
    lambda ids: np.array(ids, np.int32)[::-1][::-1], lambda ids: memoryview(np.array(ids, "<i4")),
], ids=["tuple", "iter", "numpy-int64", "numpy-big-endian", "numpy-view", "memoryview"])
def test_writers_take_what_pack_ids_takes(wire_twin: ModuleType, make: Any) -> None:
    ids = [5, -3, 0, 151_999, INT32_MAX, INT32_MIN, 1000]
    assert wire_twin.ids_to_json(make(ids)) == compact(ids)
    assert wire_twin.ids_to_msgpack(make(ids)) == msgpack.packb(ids)


@pytest.mark.parametrize("bad, error, message", [
    ([0, 1, 2**31], OverflowError, r"^ids\[2\] = 2147483648 is outside the int32 range"),
    ((1, -(2**31) - 1), OverflowError, r"^ids\[1\] = -2147483649 is outside"),
    (np.array([1, 2**40]), OverflowError, r"^ids\[1\] = 1099511627776 is outside"),
    ([1, 2.0], TypeError, r"^ids\[1\] must be an integer, not float$"),
    ("123", TypeError, r"^ids must be a sequence of integers, not str"),
    (b"123", TypeError, r"^ids must be a sequence of integers, not bytes"),
    (None, TypeError, r"^ids must be a sequence of integers, not NoneType"),
])
def test_writers_raise_what_pack_ids_raises(wire_twin: ModuleType, bad: Any, error: type,
                                            message: str) -> None:
    for write in (wire_twin.ids_to_json, wire_twin.ids_to_msgpack):
        with pytest.raises(error, match=message):
            write(bad)


def test_writers_past_one_block(wire_twin: ModuleType) -> None:
    ids = [(i * 7919) % 300_000 - 1000 for i in range(5000)]  # several 1024-id blocks
    ids[3333] = 2**31  # the error of a later block names its index
    with pytest.raises(OverflowError, match=r"^ids\[3333\] = 2147483648"):
        wire_twin.ids_to_json(ids)
    ids[3333] = 7
    assert wire_twin.ids_to_json(ids) == compact(ids)
    assert wire_twin.ids_to_msgpack(ids) == msgpack.packb(ids)


# --- reading JSON --------------------------------------------------------------------------

def spaced(draw: Any, ids: list[int]) -> str:
    """A JSON text of ``ids`` with whitespace drawn around every token."""
    gap = st.text(WS, max_size=3)
    parts = [draw(gap), "[", draw(gap)]
    for i, value in enumerate(ids):
        if i:
            parts += [draw(gap), ",", draw(gap)]
        parts.append(str(value))
    parts += [draw(gap), "]", draw(gap)]
    return "".join(parts)


@st.composite
def json_texts(draw: Any) -> tuple[str, list[int]]:
    ids = draw(id_lists)
    style = draw(st.integers(0, 3))
    if style == 0:
        return compact(ids).decode(), ids
    if style == 1:
        return json.dumps(ids), ids  # ", " separators: json.dumps' default
    if style == 2:
        return json.dumps(ids, indent=draw(st.integers(0, 4))), ids
    return spaced(draw, ids), ids


@given(json_texts())
def test_json_to_ids_reads_what_json_loads(wire_twin: ModuleType,
                                           text_ids: tuple[str, list[int]]) -> None:
    text, ids = text_ids
    for data in (text, text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        out = wire_twin.json_to_ids(data)
        assert out == ids == json.loads(text)
        assert all(type(v) is int for v in out)


def test_json_to_ids_minus_zero_and_edges(wire_twin: ModuleType) -> None:
    assert wire_twin.json_to_ids(b"[-0]") == [0]
    assert wire_twin.json_to_ids(b"[]") == [] == wire_twin.json_to_ids(" \n[ \t]\r ")
    assert wire_twin.json_to_ids(compact(EDGES)) == EDGES


JSON_ERRORS = [
    (b"", "expected '[' at offset 0, found the end of the data"),
    (b"  ", "expected '[' at offset 2, found the end of the data"),
    (b"{}", "expected '[' at offset 0, found '{'"),
    (b"\xef\xbb\xbf[1]", "expected '[' at offset 0, found byte 0xef"),
    (b"[", "expected an integer or ']' at offset 1, found the end of the data"),
    (b"[,1]", "expected an integer or ']' at offset 1, found ','"),
    (b"[[1]]", "expected an integer or ']' at offset 1, found '['"),
    (b"[1,]", "expected an integer at offset 3, found ']'"),
    (b"[1,,2]", "expected an integer at offset 3, found ','"),
    (b'[1,"2"]', "expected an integer at offset 3, found '\"'"),
    (b"[+1]", "expected an integer or ']' at offset 1, found '+'"),
    (b"[1, null]", "expected an integer at offset 4, found 'n'"),
    (b"[NaN]", "expected an integer or ']' at offset 1, found 'N'"),
    (b"[-]", "expected a digit after '-' at offset 2, found ']'"),
    (b"[- 1]", "expected a digit after '-' at offset 2, found byte 0x20"),
    (b"[01]", "expected no digit after a leading 0 at offset 2, found '1'"),
    (b"[-00]", "expected no digit after a leading 0 at offset 3, found '0'"),
    (b"[1.0]", "expected an integer, not a fraction or an exponent at offset 2, found '.'"),
    (b"[1e3]", "expected an integer, not a fraction or an exponent at offset 2, found 'e'"),
    (b"[2E3]", "expected an integer, not a fraction or an exponent at offset 2, found 'E'"),
    (b"[1 2]", "expected ',' or ']' at offset 3, found '2'"),
    (b"[1;2]", "expected ',' or ']' at offset 2, found ';'"),
    (b"[1", "expected ',' or ']' at offset 2, found the end of the data"),
    (b"[1]]", "expected nothing after the array at offset 3, found ']'"),
    (b"[1] [2]", "expected nothing after the array at offset 4, found '['"),
    (b"[1]\x00", "expected nothing after the array at offset 3, found byte 0x00"),
    ("[1, \u00e9]", "expected an integer at offset 4, found byte 0xc3"),
    ("[\ud800]", "expected an integer or ']' at offset 1, found byte 0xed"),
]


@pytest.mark.parametrize("data, message", JSON_ERRORS)
def test_json_errors_name_the_offset(wire_twin: ModuleType, data: bytes | str,
                                     message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(
            f"not a JSON array of int32 ids: {message}") + "$"):
        wire_twin.json_to_ids(data)


@pytest.mark.parametrize("text, index, value", [
    ("[2147483648]", 0, "2147483648"), ("[1, -2147483649]", 1, "-2147483649"),
    ("[0,1,99999999999]", 2, "99999999999"), ("[5," + "9" * 5000 + "]", 1, "9" * 5000),
])
def test_json_overflow_names_the_index(wire_twin: ModuleType, text: str, index: int,
                                       value: str) -> None:
    with pytest.raises(OverflowError) as caught:
        wire_twin.json_to_ids(text)
    assert str(caught.value) == (f"ids[{index}] = {value} is outside the int32 range "
                                 f"[{INT32_MIN}, {INT32_MAX}]")


def test_json_the_first_problem_wins(wire_twin: ModuleType) -> None:
    with pytest.raises(OverflowError, match=r"ids\[1\]"):  # before the bad byte after it
        wire_twin.json_to_ids(b"[1,3000000000,x]")
    with pytest.raises(ValueError, match="fraction or an exponent at offset 14"):
        wire_twin.json_to_ids(b"[1,30000000000.5]")  # a fraction is no integer at all


@SHARED_VIEW
@pytest.mark.parametrize("bad, message", [
    (None, "JSON data must be a bytes-like object or str, not NoneType"),
    (5, "JSON data must be a bytes-like object or str, not int"),
    ([1, 2], "JSON data must be a bytes-like object or str, not list"),
    (memoryview(b"[1, 2]")[::2], "JSON data must be a contiguous bytes-like object"),
])
def test_json_to_ids_type_errors(wire_twin: ModuleType, bad: Any, message: str) -> None:
    with pytest.raises(TypeError, match="^" + re.escape(message) + "$"):
        wire_twin.json_to_ids(bad)


def test_json_every_cut_is_an_error(wire_twin: ModuleType) -> None:
    text = json.dumps([1, -20, 300, 151_643, 0, -7], indent=1).encode()
    for cut in range(len(text) - 1):  # whitespace after the ']' may be cut off
        if text[:cut].rstrip().endswith(b"]"):
            continue
        with pytest.raises(ValueError, match="found the end of the data$"):
            wire_twin.json_to_ids(text[:cut])


@given(st.text("[]-,0123456789 .e" + WS, max_size=40))
def test_json_twins_agree_and_json_loads_agrees(text: str) -> None:
    py, c = twin("wire", "py"), twin("wire", "c")
    ours = outcome(py.json_to_ids, text)
    assert outcome(c.json_to_ids, text) == ours
    assert outcome(c.json_to_ids, text.encode()) == ours
    try:
        theirs = json.loads(text)
    except ValueError:
        assert isinstance(ours, tuple)  # json refuses it: so do we
        return
    if isinstance(ours, list):
        assert ours == theirs
    elif isinstance(theirs, list) and all(type(v) is int for v in theirs):
        assert ours[0] is OverflowError  # an int json reads, outside int32


# --- the JSON kernels ----------------------------------------------------------------------

def kernel_texts() -> Iterator[bytes]:
    """Texts whose ids and separators land at every place of the 64-byte windows and of the
    8-byte loads, the end of the text among them."""
    values = [7, -7, 0, 12, 151_643, -151_643, 1_234_567, 12_345_678, -12_345_678, INT32_MAX,
              INT32_MIN, 100, 9_999_999, -1]
    seps = [",", ", ", " ,", ",\n  ", "\t,\r"]
    for length in range(0, 150 if QUICK else 400):
        ids = [values[(i * 5 + length) % len(values)] for i in range(length // 3)]
        sep = seps[length % len(seps)]
        body = sep.join(map(str, ids))
        yield f"[{body}]".encode()
        yield f"[{body}] ".encode()
        yield compact(ids)


@SWITCHES_KERNELS
@pytest.mark.draw
def test_kernels_agree_with_the_scalar_one() -> None:
    c = twin("wire", "c")
    texts = list(kernel_texts())
    with kernel("scalar"):
        expected = [outcome(c.json_to_ids, t) for t in texts]
        expected_int32 = [outcome(c.convert_ids, t, "json", "int32") for t in texts]
    for name in kernels():
        with kernel(name):
            for text, want, want32 in zip(texts, expected, expected_int32, strict=True):
                assert outcome(c.json_to_ids, text) == want, (name, text)
                assert outcome(c.convert_ids, text, "json", "int32") == want32, (name, text)
                assert want == json.loads(text)


@SWITCHES_KERNELS
@pytest.mark.draw
def test_kernels_on_damaged_texts() -> None:
    """One byte of a long text changed at every place: each kernel names the same error
    as the scalar one (or reads the same ids)."""
    c = twin("wire", "c")
    base = compact([(i * 7919) % 200_000 - 500 for i in range(40)])
    swaps = b"x0-,] .e1" if QUICK else b"x0-,] .e1[\n9+\xff"
    step = 3 if QUICK else 1
    damaged = [base[:at] + bytes([b]) + base[at + 1:] for at in range(0, len(base), step)
               for b in swaps]
    damaged += [base[:at] + b"0" + base[at:] for at in range(0, len(base), step)]
    with kernel("scalar"):
        expected = [outcome(c.json_to_ids, t) for t in damaged]
    for name in kernels():
        with kernel(name):
            assert [outcome(c.json_to_ids, t) for t in damaged] == expected, name


@SWITCHES_KERNELS
@given(st.lists(st.sampled_from(EDGES + [5, 55, 555, 5555, 55555]), max_size=60),
       st.lists(st.sampled_from([",", ", ", " , ", ",\n"]), min_size=1, max_size=4))
def test_kernel_property(ids: list[int], seps: list[str]) -> None:
    text = "[" + "".join(f"{v}{seps[i % len(seps)]}" for i, v in enumerate(ids))
    text = (text[:-len(seps[(len(ids) - 1) % len(seps)])] if ids else text) + "]"
    for name in kernels():
        with kernel(name) as c:
            assert c.json_to_ids(text.encode()) == ids == json.loads(text), name


@SWITCHES_KERNELS
@pytest.mark.draw
def test_kernels_on_long_texts() -> None:
    """Texts of many windows, as the servers write them and less tidy: token ids of 1 to 7
    digits, compact or with whitespace after (or before) a separator, a negative id or an
    8-digit one now and then, read alike by every kernel, as json reads them."""
    import random

    rng = random.Random(33)
    c = twin("wire", "c")
    for trial in range(12 if QUICK else 60):
        ids = [rng.choice((rng.randrange(152_000), rng.randrange(10), rng.randrange(10**7),
                           -rng.randrange(1000), rng.randrange(10**8, 2**31)))
               if rng.random() < 0.1 * (trial % 4) else rng.randrange(152_000)
               for _ in range(rng.randrange(1, 600))]
        seps = [",", ",", ", ", ",\n  ", " ,"][:2 + trial % 4]
        text = "[" + "".join(f"{v}{rng.choice(seps)}" for v in ids[:-1]) + f"{ids[-1]}]"
        for name in kernels():
            with kernel(name):
                assert c.json_to_ids(text) == ids, (name, trial)
                assert c.convert_ids(text, "json", "int32") == struct.pack(f"<{len(ids)}i", *ids)


@SWITCHES_KERNELS
def test_writer_kernels_agree() -> None:
    """The writers' 4-id steps (with the windows' kernels: JSON on SSE2, MessagePack on
    AVX2) and their id-by-id ones: every digit count, sign, MessagePack form (the values
    around each bound) and the ids past 10**8 (one by one) at each place of a step."""
    c = twin("wire", "c")
    values = [v for k in range(11) for v in (10**k - 1, 10**k, -(10**k) + 1, -(10**k))
              if INT32_MIN <= v <= INT32_MAX] + [INT32_MIN, INT32_MAX, 0, -1, 151_643]
    values += [b + d for b in (-32, 127, -128, 255, -32768, 65535) for d in (-1, 0, 1)]
    for length in range(0, 40):
        for shift in range(0, len(values), 3):
            ids = [values[(i + shift) % len(values)] for i in range(length)]
            raw = struct.pack(f"<{length}i", *ids)
            for name in kernels():
                with kernel(name):
                    assert c.ids_to_json(ids) == compact(ids), (name, ids)
                    assert c.convert_ids(raw, "int32", "json") == compact(ids), (name, ids)
                    assert c.ids_to_msgpack(ids) == msgpack.packb(ids), (name, ids)
                    assert c.convert_ids(raw, "int32", "msgpack") == msgpack.packb(ids)


@SWITCHES_KERNELS  # and reads the kernel in use
def test_kernel_names() -> None:
    c = twin("wire", "c")
    # (/proc/cpuinfo under qemu-user is the x86 host's: the build's architecture decides)
    avx2 = platform.machine().lower() in ("x86_64", "amd64") and bool(cpu_has("avx2"))
    vector = "sse2" if platform.machine().lower() in ("x86_64", "amd64") else "neon"
    assert c._kernels() == ("scalar", "swar", vector) + (("avx2",) if avx2 else ())
    with kernel("swar"):
        assert c._kernel() == "swar"
        assert c.BUILD_INFO["msgpack write"] == "scalar"
    assert c._kernel() == ("avx2" if avx2 else vector)
    assert c.BUILD_INFO["msgpack write"] == ("avx2" if avx2 else "scalar")
    with pytest.raises(ValueError, match="no kernel 'avx9' here"):
        c._use_kernel("avx9")


# --- reading MessagePack -------------------------------------------------------------------

def non_minimal(value: int, tag: int) -> bytes:
    """``value`` in the integer encoding ``tag``, whatever its size."""
    fmt = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
           0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}[tag]
    return bytes([tag]) + struct.pack(fmt, value)


@st.composite
def msgpack_arrays(draw: Any) -> tuple[bytes, list[int]]:
    """Arrays of ids, each in any encoding that holds it, under any header that fits."""
    ids = draw(id_lists)
    items = []
    for value in ids:
        tags = [t for t, (lo, hi) in {0xCC: (0, 255), 0xCD: (0, 65535), 0xCE: (0, 2**32 - 1),
                                      0xCF: (0, 2**64 - 1), 0xD0: (-128, 127),
                                      0xD1: (-(2**15), 2**15 - 1), 0xD2: (INT32_MIN, INT32_MAX),
                                      0xD3: (-(2**63), 2**63 - 1)}.items() if lo <= value <= hi]
        if -32 <= value <= 127:
            tags.append(0)
        tag = draw(st.sampled_from(tags))
        items.append(bytes([value & 0xFF]) if tag == 0 else non_minimal(value, tag))
    count = len(ids)
    header = draw(st.sampled_from(
        ([bytes([0x90 | count])] if count <= 15 else [])
        + [b"\xdc" + struct.pack(">H", count), b"\xdd" + struct.pack(">I", count)]))
    return header + b"".join(items), ids


@given(msgpack_arrays())
def test_msgpack_to_ids_reads_every_encoding(wire_twin: ModuleType,
                                             data_ids: tuple[bytes, list[int]]) -> None:
    data, ids = data_ids
    assert msgpack.unpackb(data) == ids
    for arg in (data, bytearray(data), memoryview(data)):
        assert wire_twin.msgpack_to_ids(arg) == ids
    assert wire_twin.convert_ids(data, "msgpack", "msgpack") == msgpack_of(ids)


MSGPACK_ERRORS = [
    (b"", "expected an array (a byte 0x90-0x9f, 0xdc or 0xdd) at offset 0, "
          "found the end of the data"),
    (b"\x80", "expected an array (a byte 0x90-0x9f, 0xdc or 0xdd) at offset 0, found byte 0x80"),
    (b"\x05", "expected an array (a byte 0x90-0x9f, 0xdc or 0xdd) at offset 0, found byte 0x05"),
    (b"\xdc\x00", "expected the rest of the array's header at offset 2, "
                  "found the end of the data"),
    (b"\xdd\x00\x00\x00", "expected the rest of the array's header at offset 4, "
                          "found the end of the data"),
    (b"\x92\x01", "expected an integer at offset 2, found the end of the data"),
    (b"\x92\x01\xc0", "expected an integer at offset 2, found byte 0xc0"),
    (b"\x91\xc2", "expected an integer at offset 1, found byte 0xc2"),
    (b"\x91\xca\x00\x00\x00\x00", "expected an integer at offset 1, found byte 0xca"),
    (b"\x91\xa1a", "expected an integer at offset 1, found byte 0xa1"),
    (b"\x91\x91\x01", "expected an integer at offset 1, found byte 0x91"),
    (b"\x91\xcd\x01", "expected the rest of the integer at offset 3, found the end of the data"),
    (b"\x91\xd3" + b"\x00" * 7, "expected the rest of the integer at offset 9, "
                                "found the end of the data"),
    (b"\x90\x00", "expected nothing after the array at offset 1, found byte 0x00"),
    (b"\x91\x01\x91\x01", "expected nothing after the array at offset 2, found byte 0x91"),
]


@pytest.mark.parametrize("data, message", MSGPACK_ERRORS)
def test_msgpack_errors_name_the_offset(wire_twin: ModuleType, data: bytes,
                                        message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(
            f"not a MessagePack array of int32 ids: {message}") + "$"):
        wire_twin.msgpack_to_ids(data)


@pytest.mark.parametrize("item, value", [
    (non_minimal(2**31, 0xCE), 2**31), (non_minimal(2**64 - 1, 0xCF), 2**64 - 1),
    (non_minimal(-(2**31) - 1, 0xD3), -(2**31) - 1), (non_minimal(-(2**63), 0xD3), -(2**63)),
    (non_minimal(2**40, 0xD3), 2**40),
])
def test_msgpack_overflow_names_the_index(wire_twin: ModuleType, item: bytes,
                                          value: int) -> None:
    data = b"\x93\x01\x02" + item
    with pytest.raises(OverflowError, match=rf"^ids\[2\] = {value} is outside the int32"):
        wire_twin.msgpack_to_ids(data)
    assert wire_twin.msgpack_to_ids(b"\x91" + non_minimal(7, item[0])) == [7]


def test_msgpack_every_cut_is_an_error(wire_twin: ModuleType) -> None:
    ids = [1, -1, 200, -200, 70_000, -70_000, 151_643, INT32_MIN] * 3
    data = msgpack.packb(ids)
    for cut in range(len(data)):
        with pytest.raises(ValueError, match="found the end of the data$"):
            wire_twin.msgpack_to_ids(data[:cut])


@pytest.mark.draw
def test_msgpack_damaged_arrays() -> None:
    """One byte of an array of every encoding changed at every place (a tag the fast steps
    take, one they leave, a payload byte): the Cython twin reads or refuses it as the
    Python one does."""
    py, c = twin("wire", "py"), twin("wire", "c")
    ids = [(i * 7919) % 200_000 for i in range(30)] + [5, 200, -5, -200, 70_000, -70_000]
    base = msgpack.packb(ids)
    base += b"".join(non_minimal(v, t) for v, t in ((9, 0xCF), (-9, 0xD3), (9, 0xD2)))
    base = b"\xdc" + struct.pack(">H", len(ids) + 3) + base[3:]
    swaps = b"\x00\x7f\x80\xcc\xcd\xce\xcf\xd0\xd2\xe0\xff"
    step = 3 if QUICK else 1
    for at in range(0, len(base), step):
        for b in swaps:
            data = base[:at] + bytes([b]) + base[at + 1:]
            assert outcome(c.msgpack_to_ids, data) == outcome(py.msgpack_to_ids, data), data


def test_msgpack_to_ids_refuses_text(wire_twin: ModuleType) -> None:
    with pytest.raises(TypeError, match="^MessagePack data must be a bytes-like object, not str$"):
        wire_twin.msgpack_to_ids("\x91\x01")
    with pytest.raises(TypeError, match="^MessagePack data must be a bytes-like object, not int$"):
        wire_twin.msgpack_to_ids(5)


@given(st.integers(0, 15), st.binary(max_size=40))
def test_msgpack_twins_agree_with_msgpack(count: int, items: bytes) -> None:
    py, c = twin("wire", "py"), twin("wire", "c")
    data = bytes([0x90 | count]) + items
    ours = outcome(py.msgpack_to_ids, data)
    assert outcome(c.msgpack_to_ids, data) == ours
    try:
        theirs = msgpack.unpackb(data, strict_map_key=False)
    except Exception:  # msgpack refuses it (cut short, extra data, ...): so do we
        assert isinstance(ours, tuple)
        return
    if isinstance(ours, list):
        assert ours == theirs
    elif all(type(v) is int and INT32_MIN <= v <= INT32_MAX for v in theirs):
        raise AssertionError(f"{data!r}: msgpack reads {theirs}, we raise {ours}")


# --- convert_ids ---------------------------------------------------------------------------

@given(id_lists, st.sampled_from(FORMATS), st.sampled_from(FORMATS))
def test_convert_every_pair(wire_twin: ModuleType, ids: list[int], src: str, dst: str) -> None:
    out = wire_twin.convert_ids(oracle_write(ids, src), src, dst)
    assert type(out) is bytes
    assert out == oracle_write(ids, dst)
    assert oracle_read(out, dst) == ids


@pytest.mark.parametrize("src", FORMATS)
@pytest.mark.parametrize("dst", FORMATS)
def test_convert_large_and_empty(wire_twin: ModuleType, src: str, dst: str) -> None:
    big = [(i * 7919) % 152_000 for i in range(40_000)]  # 250 KB of JSON: the no-GIL path
    for ids in (big, []):
        assert wire_twin.convert_ids(oracle_write(ids, src), src, dst) == oracle_write(ids, dst)
    if src in ("json", "b64"):
        text = oracle_write(big[:100], src).decode()
        assert wire_twin.convert_ids(text, src, dst) == oracle_write(big[:100], dst)


def test_convert_normalises(wire_twin: ModuleType) -> None:
    assert wire_twin.convert_ids(b" [ 1 ,\n-0, 2 ] ", "json", "json") == b"[1,0,2]"
    assert wire_twin.convert_ids(b"\xdd\x00\x00\x00\x01\xd3" + b"\x00" * 7 + b"\x05",
                                 "msgpack", "msgpack") == b"\x91\x05"
    assert wire_twin.convert_ids(b"\xc6\x00\x00\x00\x04\x05\x00\x00\x00", "msgpack_bin",
                                 "msgpack_bin") == b"\xc4\x04\x05\x00\x00\x00"
    assert wire_twin.convert_ids(b"BQAAAA==", "b64", "b64") == b"BQAAAA=="
    assert wire_twin.convert_ids(bytearray(b"\x05\x00\x00\x00"), "int32", "int32") == \
        b"\x05\x00\x00\x00"


@pytest.mark.parametrize("data, src, error, message", [
    (b"[1]", "xml", ValueError, "src='xml' is not a format of token ids: expected one of "
                                "'int32', 'b64', 'json', 'msgpack', 'msgpack_bin', 'int64', "
                                "'b64_int64'"),
    (b"[1]", None, TypeError, "src must be a format name (str), not NoneType"),
    ("\x01\x00\x00\x00", "int32", TypeError, "int32 data must be a bytes-like object, not str"),
    (b"\x01\x00\x00", "int32", ValueError, "int32 data must be a multiple of 4 bytes long, "
                                           "got 3 (3 trailing byte(s) at offset 0)"),
    ("\x91\x01", "msgpack", TypeError, "MessagePack data must be a bytes-like object, not str"),
    (b"\xc4\x03\x01\x00\x00", "msgpack_bin", ValueError, "int32 data must be a multiple of 4 "
                                                         "bytes long, got 3"),
    (b"\x91\x01", "msgpack_bin", ValueError, "not a MessagePack bin of int32 ids: expected a bin "
                                             "(a byte 0xc4, 0xc5 or 0xc6) at offset 0, found "
                                             "byte 0x91"),
    (b"\xc4\x08\x01\x00\x00\x00", "msgpack_bin", ValueError,
     "not a MessagePack bin of int32 ids: expected the rest of the bin at offset 6, found the "
     "end of the data"),
    (b"\xc4\x00\x00", "msgpack_bin", ValueError, "not a MessagePack bin of int32 ids: expected "
                                                 "nothing after the bin at offset 2, found byte "
                                                 "0x00"),
    (b"\xc5\x00", "msgpack_bin", ValueError, "not a MessagePack bin of int32 ids: expected the "
                                             "rest of the bin at offset 2, found the end of the "
                                             "data"),
])
def test_convert_errors(wire_twin: ModuleType, data: Any, src: Any, error: type,
                        message: str) -> None:
    with pytest.raises(error) as caught:
        wire_twin.convert_ids(data, src, "json")
    assert str(caught.value).startswith(message)
    with pytest.raises(TypeError, match="^dst must be a format name"):
        wire_twin.convert_ids(b"[1]", "json", b"json")


@pytest.mark.parametrize("text", [
    "AQAAAA", "AQAAAA=", "AQAA\nAAA=", "AQAAAA==AA", "AQAAAAA=", "AQAAAAIAAA=", "AQAAAA==é", "====",
])
def test_convert_b64_source_is_b64_to_ids_validated(wire_twin: ModuleType, text: str) -> None:
    import tokcore
    expected = outcome(lambda: tokcore.b64_to_ids(text, validate=True))
    got = outcome(wire_twin.convert_ids, text, "b64", "json")
    if isinstance(expected, list):
        assert got == compact(expected)
    else:
        assert got == expected


def test_src_format_checked_before_data(wire_twin: ModuleType) -> None:
    with pytest.raises(ValueError, match="^dst='csv'"):
        wire_twin.convert_ids(None, "json", "csv")


@pytest.mark.parametrize("make", [
    bytes, bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8),
    lambda b: memoryview(b"xx" + b + b"yy")[2:-2], lambda b: b.decode(),
], ids=["bytes", "bytearray", "memoryview", "numpy", "slice", "str"])
def test_sources_of_every_kind(wire_twin: ModuleType, make: Any) -> None:
    ids = [1, -2, 151_644]
    assert wire_twin.json_to_ids(make(compact(ids))) == ids
    assert wire_twin.convert_ids(make(compact(ids)), "json", "msgpack") == msgpack.packb(ids)
    with mmap.mmap(-1, len(compact(ids))) as mapped:
        mapped[:] = compact(ids)
        assert wire_twin.json_to_ids(mapped) == ids


# --- what an orchestrator does with them ---------------------------------------------------

@needs_msgspec
def test_a_find_member_span_into_a_msgspec_body(wire_twin: ModuleType) -> None:
    """The context answer's JSON ids moved into a MessagePack request in one call: the body
    msgspec makes with the bytes embedded raw decodes as the one made with the list."""
    import tokcore

    ids = [151_644, 872, 198, -1, 0, 70_000] * 50
    answer = json.dumps({"id": "c1", "prompt_token_ids": ids, "usage": {"prompt_tokens": 300}},
                        separators=(",", ":")).encode()
    start, end = tokcore.find_member(answer, "prompt_token_ids")
    span = memoryview(answer)[start:end]  # no copy
    raw = wire_twin.convert_ids(span, "json", "msgpack")
    body = msgspec.msgpack.encode({"request_id": "r1", "prompt_token_ids": msgspec.Raw(raw),
                                   "max_tokens": 16})
    expected = {"request_id": "r1", "prompt_token_ids": ids, "max_tokens": 16}
    assert body == msgspec.msgpack.encode(expected)
    assert msgspec.msgpack.decode(body) == expected == msgpack.unpackb(body)
    # and back: the worker's ids as the int32 a numpy array reads
    as_int32 = wire_twin.convert_ids(span, "json", "int32")
    assert np.frombuffer(as_int32, "<i4").tolist() == ids


def test_msgpack_bin_for_new_workers(wire_twin: ModuleType) -> None:
    ids = [151_644, 872, 198]
    packed = wire_twin.convert_ids(compact(ids), "json", "msgpack_bin")
    assert msgpack.unpackb(packed) == struct.pack("<3i", *ids)
    if msgspec is not None:
        assert msgspec.msgpack.decode(packed) == struct.pack("<3i", *ids)
    assert np.frombuffer(msgpack.unpackb(packed), "<i4").tolist() == ids


def test_twins_raise_the_same(wire_twin: ModuleType) -> None:
    """Each error text above is the Python twin's: the Cython twin's is compared here on a
    mixed bag of bad input, every format pair."""
    py = twin("wire", "py")
    bags = [b"[1,2,x]", b"\x93\x01\xc0", b"\xc4\x01\x00", b"AQ=", b"\x01\x02", b"", "[\u00ff]",
            b"[99999999999]", b"\x91\xcf" + b"\xff" * 8]
    for data in bags:
        for src in FORMATS:
            for dst in ("json", "msgpack"):
                assert outcome(wire_twin.convert_ids, data, src, dst) == \
                    outcome(py.convert_ids, data, src, dst)



# --- int64: width=64 and the int64 formats -------------------------------------------------

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FORMATS64 = (*FORMATS, "int64", "b64_int64")
#: the values where a width or an encoding changes, LightLLM's 2**32 among them
EDGES64 = EDGES + [2**31, -(2**31) - 1, 2**32 - 1, 2**32, -(2**32), 2**32 + 1, 2**53 + 1,
                   10**18, -(10**18), 999_999_999_999_999_999, INT64_MAX, INT64_MIN,
                   INT64_MIN + 1, 2**63 - 2]
int64s = st.integers(INT64_MIN, INT64_MAX)
ids64 = st.lists(st.one_of(token_ids, int64s, st.sampled_from(EDGES64)), max_size=200)


def oracle_write64(ids: list[int], fmt: str) -> bytes:
    """``ids`` in ``fmt`` (at width 64) as the other libraries write them."""
    if fmt in ("int64", "b64_int64"):
        raw = struct.pack(f"<{len(ids)}q", *ids)
        assert raw == np.asarray(ids, np.int64).tobytes()
        return raw if fmt == "int64" else base64.b64encode(raw)
    if fmt == "json":
        return compact(ids)
    if fmt == "msgpack":
        return msgpack_of(ids)
    return oracle_write(ids, fmt)


def oracle_read64(data: bytes, fmt: str) -> list[int]:
    if fmt in ("int64", "b64_int64"):
        raw = data if fmt == "int64" else base64.b64decode(data, validate=True)
        return list(struct.unpack(f"<{len(raw) // 8}q", raw))
    return oracle_read(data, fmt)


def fits32(ids: list[int]) -> bool:
    return all(INT32_MIN <= v <= INT32_MAX for v in ids)


@given(ids64)
def test_writers64_are_json_msgpack_and_msgspec(wire_twin: ModuleType, ids: list[int]) -> None:
    assert wire_twin.ids_to_json(ids, width=64) == compact(ids)
    assert wire_twin.ids_to_msgpack(ids, width=64) == msgpack_of(ids)
    arr = np.asarray(ids, np.int64)
    assert wire_twin.ids_to_json(arr, width=64) == compact(ids)
    assert wire_twin.ids_to_msgpack(arr, width=64) == msgpack_of(ids)


def test_writers64_at_the_edges(wire_twin: ModuleType) -> None:
    for value in EDGES64:
        for ids in ([value], [value, 5, -value if value != INT64_MIN else 0]):
            assert wire_twin.ids_to_json(ids, width=64) == compact(ids)
            assert wire_twin.ids_to_msgpack(ids, width=64) == msgpack_of(ids)
    every_digit_count = [10**k + j for k in range(19) for j in (-1, 0, 1)]
    ids = every_digit_count + [-v for v in every_digit_count]
    assert wire_twin.ids_to_json(ids, width=64) == compact(ids)
    assert wire_twin.ids_to_msgpack(ids, width=64) == msgpack_of(ids)


@given(ids64, st.data())
def test_json_to_ids64_reads_what_json_loads(wire_twin: ModuleType, ids: list[int],
                                             data: Any) -> None:
    for text in (compact(ids).decode(), json.dumps(ids), spaced(data.draw, ids)):
        assert wire_twin.json_to_ids(text, width=64) == ids == json.loads(text)
        assert wire_twin.json_to_ids(text.encode(), width=64) == ids
    if not fits32(ids):
        with pytest.raises(OverflowError, match="is outside the int32 range"):
            wire_twin.json_to_ids(compact(ids))


@pytest.mark.parametrize("text, index, value", [
    ("[9223372036854775808]", 0, "9223372036854775808"),
    ("[1, -9223372036854775809]", 1, "-9223372036854775809"),
    ("[0,1,18446744073709551616]", 2, "18446744073709551616"),
    ("[0,1,99999999999999999999]", 2, "99999999999999999999"),
    ("[5," + "9" * 5000 + "]", 1, "9" * 5000),
    ("[" + "1," * 700 + "-" + "9" * 30 + "]", 700, "-" + "9" * 30),
])
def test_json64_overflow_names_the_index(wire_twin: ModuleType, text: str, index: int,
                                         value: str) -> None:
    with pytest.raises(OverflowError) as caught:
        wire_twin.json_to_ids(text, width=64)
    assert str(caught.value) == (f"ids[{index}] = {value} is outside the int64 range "
                                 f"[{INT64_MIN}, {INT64_MAX}]")


@pytest.mark.parametrize("data, message", JSON_ERRORS)
def test_json64_errors_name_the_offset(wire_twin: ModuleType, data: bytes | str,
                                       message: str) -> None:
    with pytest.raises(ValueError) as caught:
        wire_twin.json_to_ids(data, width=64)
    assert str(caught.value) == f"not a JSON array of int64 ids: {message}"


def test_json64_errors_after_a_wide_id(wire_twin: ModuleType) -> None:
    """What follows an integer outside int32 is read as after any other: its separator, a
    fraction, whitespace, the end."""
    for text, message in [
        (b"[4294967296 x]", "expected ',' or ']' at offset 12, found 'x'"),
        (b"[4294967296", "expected ',' or ']' at offset 11, found the end of the data"),
        (b"[4294967296.5]", "expected an integer, not a fraction or an exponent at offset 11, "
                            "found '.'"),
        (b"[4294967296,]", "expected an integer at offset 12, found ']'"),
        (b"[1,4294967296]]", "expected nothing after the array at offset 14, found ']'"),
    ]:
        with pytest.raises(ValueError) as caught:
            wire_twin.json_to_ids(text, width=64)
        assert str(caught.value) == f"not a JSON array of int64 ids: {message}"
    assert wire_twin.json_to_ids(b" [ 4294967296 ,\n-4294967296 ] ", width=64) == \
        [2**32, -(2**32)]


@SWITCHES_KERNELS
@pytest.mark.draw
def test_kernels64_agree_with_the_scalar_one() -> None:
    """Texts whose ids outside int32 land at every place of the windows and loads: every
    kernel reads them as the scalar one does at width 64, and as json does."""
    c = twin("wire", "c")
    values = [7, -7, 0, 151_643, 12_345_678, INT32_MAX, INT32_MIN, 2**31, -(2**31) - 1, 2**32,
              INT64_MAX, INT64_MIN, 10**15, 100]
    texts = []
    for length in range(0, 120 if QUICK else 300):
        ids = [values[(i * 5 + length) % len(values)] if (i + length) % 7 else 2**32 + i
               for i in range(length // 3)]
        sep = [",", ", ", ",\n  "][length % 3]
        texts.append(("[" + sep.join(map(str, ids)) + "]").encode())
    with kernel("scalar"):
        expected = [outcome(c.json_to_ids, t, width=64) for t in texts]
    for name in kernels():
        with kernel(name):
            for text, want in zip(texts, expected, strict=True):
                assert want == json.loads(text)
                assert outcome(c.json_to_ids, text, width=64) == want, (name, text)
                assert outcome(c.convert_ids, text, "json", "int64") == \
                    struct.pack(f"<{len(want)}q", *want), (name, text)


@SWITCHES_KERNELS
@pytest.mark.draw
def test_kernels64_on_damaged_texts() -> None:
    """One byte of a text with ids outside int32 changed at every place: the twins, and
    every kernel, read it or refuse it alike at width 64."""
    py, c = twin("wire", "py"), twin("wire", "c")
    base = compact([(i * 7919) % 200_000 - 500 + (2**33 if i % 5 == 2 else 0)
                    for i in range(30)])
    swaps = b"x0-,] .e1" if QUICK else b"x0-,] .e1[\n9+\xff"
    step = 3 if QUICK else 1
    damaged = [base[:at] + bytes([b]) + base[at + 1:] for at in range(0, len(base), step)
               for b in swaps]
    expected = [outcome(py.json_to_ids, t, width=64) for t in damaged]
    for name in kernels():
        with kernel(name):
            assert [outcome(c.json_to_ids, t, width=64) for t in damaged] == expected, name


@SWITCHES_KERNELS
def test_writer_kernels64_agree() -> None:
    """Runs of ids within int32 (the int32 writers' 4-id steps) broken by ids outside it at
    each place of a step and of a run, on every kernel."""
    c = twin("wire", "c")
    values = [0, -1, 151_643, 99_999_999, 100_000_000, INT32_MAX, INT32_MIN, 127, -33, 65_536]
    wide = [2**31, 2**32 - 1, 2**32, -(2**31) - 1, INT64_MAX, INT64_MIN]
    for length in range(0, 24):
        for at in range(0, max(length, 1), 3):
            ids = [values[(i + at) % len(values)] for i in range(length)]
            if length:
                ids[at] = wide[(at + length) % len(wide)]
            raw = struct.pack(f"<{length}q", *ids)
            for name in kernels():
                with kernel(name):
                    assert c.ids_to_json(ids, width=64) == compact(ids), (name, ids)
                    assert c.convert_ids(raw, "int64", "json") == compact(ids), (name, ids)
                    assert c.ids_to_msgpack(ids, width=64) == msgpack.packb(ids), (name, ids)
                    assert c.convert_ids(raw, "int64", "msgpack") == msgpack.packb(ids)
    long = [(i * 7919) % 152_000 for i in range(3000)]  # runs past the writers' blocks
    for at in (0, 255, 256, 257, 1023, 1024, 2999):
        ids = long[:at] + [2**40 + at] + long[at + 1:]
        assert c.ids_to_json(ids, width=64) == compact(ids)
        assert c.ids_to_msgpack(ids, width=64) == msgpack.packb(ids)


def msgpack_item(value: int, tag: int) -> bytes:
    return bytes([value & 0xFF]) if tag == 0 else non_minimal(value, tag)


@st.composite
def msgpack_arrays64(draw: Any) -> tuple[bytes, list[int]]:
    """Arrays of int64 ids, each in any encoding that holds it (uint64 up to 2**63 - 1)."""
    ids = draw(ids64)
    ranges = {0xCC: (0, 255), 0xCD: (0, 65535), 0xCE: (0, 2**32 - 1), 0xCF: (0, 2**64 - 1),
              0xD0: (-128, 127), 0xD1: (-(2**15), 2**15 - 1), 0xD2: (INT32_MIN, INT32_MAX),
              0xD3: (INT64_MIN, INT64_MAX)}
    items = []
    for value in ids:
        tags = [t for t, (lo, hi) in ranges.items() if lo <= value <= hi]
        if -32 <= value <= 127:
            tags.append(0)
        items.append(msgpack_item(value, draw(st.sampled_from(tags))))
    count = len(ids)
    header = draw(st.sampled_from(
        ([bytes([0x90 | count])] if count <= 15 else [])
        + [b"\xdc" + struct.pack(">H", count), b"\xdd" + struct.pack(">I", count)]))
    return header + b"".join(items), ids


@given(msgpack_arrays64())
def test_msgpack_to_ids64_reads_every_encoding(wire_twin: ModuleType,
                                               data_ids: tuple[bytes, list[int]]) -> None:
    data, ids = data_ids
    assert msgpack.unpackb(data) == ids
    if msgspec is not None:
        assert msgspec.msgpack.decode(data) == ids
    for arg in (data, bytearray(data), memoryview(data)):
        assert wire_twin.msgpack_to_ids(arg, width=64) == ids
    assert wire_twin.convert_ids(data, "msgpack", "msgpack", width=64) == msgpack_of(ids)
    assert wire_twin.convert_ids(data, "msgpack", "int64") == oracle_write64(ids, "int64")
    if not fits32(ids):
        with pytest.raises(OverflowError, match="is outside the int32 range"):
            wire_twin.msgpack_to_ids(data)


@pytest.mark.parametrize("item, value", [
    (non_minimal(2**63, 0xCF), 2**63), (non_minimal(2**64 - 1, 0xCF), 2**64 - 1),
])
def test_msgpack64_uint64_above_int64(wire_twin: ModuleType, item: bytes, value: int) -> None:
    data = b"\x93\xcf" + struct.pack(">Q", 2**40) + b"\x02" + item
    with pytest.raises(OverflowError) as caught:
        wire_twin.msgpack_to_ids(data, width=64)
    assert str(caught.value) == (f"ids[2] = {value} is outside the int64 range "
                                 f"[{INT64_MIN}, {INT64_MAX}]")
    for dst in ("int64", "json", "msgpack", "int32"):
        with pytest.raises(OverflowError, match=rf"^ids\[2\] = {value} is outside the int64"):
            wire_twin.convert_ids(data, "msgpack", dst, width=64)


@pytest.mark.parametrize("data, message", MSGPACK_ERRORS)
def test_msgpack64_errors_name_the_offset(wire_twin: ModuleType, data: bytes,
                                          message: str) -> None:
    with pytest.raises(ValueError) as caught:
        wire_twin.msgpack_to_ids(data, width=64)
    assert str(caught.value) == f"not a MessagePack array of int64 ids: {message}"


def test_msgpack64_every_cut_is_an_error(wire_twin: ModuleType) -> None:
    ids = [1, 2**32, -1, INT64_MIN, 200, 2**40, -200, INT64_MAX, 70_000] * 3 + [2**33]
    data = msgpack.packb(ids)
    for cut in range(len(data)):
        with pytest.raises(ValueError, match="found the end of the data$"):
            wire_twin.msgpack_to_ids(data[:cut], width=64)
    for end in (b"\x00", b"\xcf"):  # after the last (wide) item: one byte too many
        with pytest.raises(ValueError, match="expected nothing after the array"):
            wire_twin.msgpack_to_ids(data + end, width=64)
        for dst in ("json", "int64", "int32"):
            with pytest.raises(ValueError, match="expected nothing after the array"):
                wire_twin.convert_ids(data + end, "msgpack", dst, width=64)


@pytest.mark.draw
def test_msgpack64_damaged_arrays() -> None:
    """One byte of an array with int64 items changed at every place: the Cython twin reads
    or refuses it as the Python one does, at width 64 and (narrowing) into int32."""
    py, c = twin("wire", "py"), twin("wire", "c")
    ids = [(i * 7919) % 200_000 for i in range(30)] + [2**32, -(2**32), 2**63 - 1, -5, 2**31]
    base = msgpack.packb(ids)
    swaps = b"\x00\x7f\x80\xcc\xcd\xce\xcf\xd0\xd2\xd3\xe0\xff"
    step = 3 if QUICK else 1
    for at in range(0, len(base), step):
        for b in swaps:
            data = base[:at] + bytes([b]) + base[at + 1:]
            assert outcome(c.msgpack_to_ids, data, width=64) == \
                outcome(py.msgpack_to_ids, data, width=64), data
            for dst in ("int32", "json"):
                assert outcome(c.convert_ids, data, "msgpack", dst, width=64) == \
                    outcome(py.convert_ids, data, "msgpack", dst, width=64), (data, dst)


@given(st.integers(0, 15), st.binary(max_size=60))
def test_msgpack64_twins_agree_with_msgpack(count: int, items: bytes) -> None:
    py, c = twin("wire", "py"), twin("wire", "c")
    data = bytes([0x90 | count]) + items
    ours = outcome(py.msgpack_to_ids, data, width=64)
    assert outcome(c.msgpack_to_ids, data, width=64) == ours
    try:
        theirs = msgpack.unpackb(data, strict_map_key=False)
    except Exception:
        assert isinstance(ours, tuple)
        return
    if isinstance(ours, list):
        assert ours == theirs
    elif all(type(v) is int and INT64_MIN <= v <= INT64_MAX for v in theirs):
        raise AssertionError(f"{data!r}: msgpack reads {theirs}, we raise {ours}")


@given(ids64, st.sampled_from(FORMATS64), st.sampled_from(FORMATS64),
       st.sampled_from([None, 32, 64]))
def test_convert64_every_pair(wire_twin: ModuleType, ids: list[int], src: str, dst: str,
                              width: int | None) -> None:
    """Every pair of formats at every width against the oracles: each id read in the
    source's width and written in the destination's, an id that does not fit either the
    OverflowError naming the first one."""
    def bits(fmt: str) -> int | None:
        return 64 if fmt in ("int64", "b64_int64") else None if fmt in ("json", "msgpack") \
            else 32
    given_bits = width or (64 if 64 in (bits(src), bits(dst)) else 32)
    read_bits, write_bits = bits(src) or given_bits, bits(dst) or given_bits
    if read_bits == 32 and src not in ("json", "msgpack"):
        ids = [v for v in ids if INT32_MIN <= v <= INT32_MAX]  # what such a source can hold
    data = oracle_write64(ids, src)
    narrowest = min(read_bits, write_bits)
    outside = [i for i, v in enumerate(ids) if not -(2**(narrowest - 1)) <= v < 2**(narrowest - 1)]
    if outside:
        with pytest.raises(OverflowError, match=rf"^ids\[{outside[0]}\] = {ids[outside[0]]} "):
            wire_twin.convert_ids(data, src, dst, width=width)
        return
    out = wire_twin.convert_ids(data, src, dst, width=width)
    assert type(out) is bytes
    assert out == oracle_write64(ids, dst)
    assert oracle_read64(out, dst) == ids


@pytest.mark.parametrize("src", FORMATS64)
@pytest.mark.parametrize("dst", FORMATS64)
def test_convert64_large(wire_twin: ModuleType, src: str, dst: str) -> None:
    """40k ids, some outside int32 (the no-GIL path), through every pair at width 64."""
    ids = [(i * 7919) % 152_000 + (2**32 if i % 1000 == 7 else 0) for i in range(40_000)]
    if src in ("int32", "b64", "msgpack_bin") or dst in ("int32", "b64", "msgpack_bin"):
        ids = [v % 2**31 for v in ids]
    data = oracle_write64(ids, src)
    assert wire_twin.convert_ids(data, src, dst, width=64) == oracle_write64(ids, dst)
    if src in ("json", "b64", "b64_int64"):
        text = oracle_write64(ids[:100], src).decode()
        assert wire_twin.convert_ids(text, src, dst, width=64) == oracle_write64(ids[:100], dst)


def test_convert_widths() -> None:
    """Which width a JSON or MessagePack array is read and written in: ``width``, else int64
    beside an int64 format, else int32."""
    import tokcore

    big = compact([1, 2**32])
    assert tokcore.convert_ids(big, "json", "int64") == struct.pack("<2q", 1, 2**32)
    assert tokcore.convert_ids(big, "json", "b64_int64") == \
        base64.b64encode(struct.pack("<2q", 1, 2**32))
    assert tokcore.convert_ids(big, "json", "msgpack", width=64) == msgpack.packb([1, 2**32])
    with pytest.raises(OverflowError, match=r"^ids\[1\] = 4294967296 is outside the int32"):
        tokcore.convert_ids(big, "json", "msgpack")
    with pytest.raises(OverflowError, match=r"^ids\[1\] = 4294967296 is outside the int32"):
        tokcore.convert_ids(big, "json", "int64", width=32)
    raw = struct.pack("<3q", 5, 2**40, 7)
    assert tokcore.convert_ids(raw, "int64", "json") == b"[5,1099511627776,7]"
    with pytest.raises(OverflowError) as caught:
        tokcore.convert_ids(raw, "int64", "json", width=32)
    assert str(caught.value) == ("ids[1] = 1099511627776 is outside the int32 range "
                                 f"[{INT32_MIN}, {INT32_MAX}]")
    for dst in ("int32", "b64", "msgpack_bin"):  # narrowing: each id checked
        with pytest.raises(OverflowError, match=r"^ids\[1\] = 1099511627776 is outside the "
                                                r"int32 range"):
            tokcore.convert_ids(raw, "int64", dst)
    assert tokcore.convert_ids(struct.pack("<2i", -1, 5), "int32", "int64") == \
        struct.pack("<2q", -1, 5)


def test_a_data_error_comes_before_a_narrowing_one(wire_twin: ModuleType) -> None:
    """The Python twin reads the whole source before it writes: so an id that does not fit
    the destination is raised only when the source is well formed, in the compiled twin
    too (which stops writing at it but reads on)."""
    ids = [1, 2**40] + [5] * 3000
    data = msgpack.packb(ids)
    with pytest.raises(OverflowError, match=r"^ids\[1\] = 1099511627776 is outside the int32"):
        wire_twin.convert_ids(data, "msgpack", "int32", width=64)
    with pytest.raises(ValueError, match="expected nothing after the array"):
        wire_twin.convert_ids(data + b"\x00", "msgpack", "int32", width=64)
    with pytest.raises(ValueError, match="expected an integer at offset"):
        wire_twin.convert_ids(data[:-1] + b"\xc0", "msgpack", "json", width=64)


@pytest.mark.parametrize("width, error", [(16, ValueError), ("64", TypeError),
                                          (True, TypeError), (32.0, TypeError)])
def test_wire_bad_width(wire_twin: ModuleType, width: Any, error: type) -> None:
    """The width's own error, checked before the data (a wrong one here), and after the
    format names (convert_ids)."""
    for call in (lambda: wire_twin.ids_to_json("x", width=width),
                 lambda: wire_twin.ids_to_msgpack("x", width=width),
                 lambda: wire_twin.json_to_ids(None, width=width),
                 lambda: wire_twin.msgpack_to_ids(None, width=width),
                 lambda: wire_twin.convert_ids(None, "json", "msgpack", width=width)):
        with pytest.raises(error, match="^width must be 32 or 64"):
            call()
    with pytest.raises(ValueError, match="^src='x'"):
        wire_twin.convert_ids(None, "x", "json", width=width)


def test_int64_sources_and_type_errors(wire_twin: ModuleType) -> None:
    with pytest.raises(TypeError, match="^int64 data must be a bytes-like object, not str$"):
        wire_twin.convert_ids("\x01" * 8, "int64", "json")
    with pytest.raises(ValueError) as caught:
        wire_twin.convert_ids(b"\x01" * 12, "int64", "json")
    assert str(caught.value) == ("int64 data must be a multiple of 8 bytes long, got 12 "
                                 "(4 trailing byte(s) at offset 8)")
    with pytest.raises(ValueError, match="^int64 data must be a multiple of 8 bytes long, "
                                         "got 4 "):
        wire_twin.convert_ids("AQAAAA==", "b64_int64", "json")
    assert wire_twin.convert_ids("AQAAAAAAAAA=", "b64_int64", "json") == b"[1]"
    arr = np.array([3, 2**35, -4], np.int64)
    assert wire_twin.convert_ids(arr, "int64", "msgpack") == msgpack.packb([3, 2**35, -4])
    assert wire_twin.convert_ids(memoryview(arr.tobytes())[8:], "int64", "json") == \
        b"[34359738368,-4]"


def test_twins_raise_the_same64(wire_twin: ModuleType) -> None:
    py = twin("wire", "py")
    bags = [b"[1,2,x]", b"[1,4294967296,x]", b"[99999999999999999999]", b"\x93\x01\xc0",
            b"\x91\xcf" + b"\xff" * 8, b"\x92\xcf" + b"\x00" * 7 + b"\x01\x05", b"AQ=",
            b"\x01\x02", b"", "[\u00ff]", b"\x01" * 8 + b"\xff" * 8, b"\x00" * 16]
    for data in bags:
        for src in FORMATS64:
            for dst in FORMATS64:
                for width in (None, 32, 64):
                    assert outcome(wire_twin.convert_ids, data, src, dst, width=width) == \
                        outcome(py.convert_ids, data, src, dst, width=width), (data, src, dst)


def test_narrowing_at_every_place(wire_twin: ModuleType) -> None:
    """int64 bytes into an int32 destination, narrowed eight a step and a block at a time:
    an id that does not fit at every place of a step, of the tail and past a block."""
    for n in list(range(0, 20)) + [1023, 1024, 1025, 2100]:
        ids = [(i * 7919) % 152_000 for i in range(n)]
        raw = struct.pack(f"<{n}q", *ids)
        for dst in ("int32", "b64", "msgpack_bin"):
            assert wire_twin.convert_ids(raw, "int64", dst) == oracle_write(ids, dst)
        for at in sorted({*range(min(n, 20)), *(n - 1 - k for k in range(min(n, 3)))} |
                         ({n // 2} if n else set())):
            bad = ids[:at] + [-(2**31) - 1] + ids[at + 1:]
            with pytest.raises(OverflowError, match=rf"^ids\[{at}\] = -2147483649 is outside "
                                                    r"the int32 range"):
                wire_twin.convert_ids(struct.pack(f"<{n}q", *bad), "int64", "int32")
