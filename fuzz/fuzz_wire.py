"""Fuzz the wire formats: json_to_ids, msgpack_to_ids, ids_to_json, ids_to_msgpack and
convert_ids, both twins, with json, msgpack and struct/base64 as the oracles.

The first bytes choose the entry point, the width (int64 for a quarter of the inputs: a
first byte of 192 or more; for convert_ids then ``width`` None, 32 or 64 and the int64
formats too) and how its data is made: a JSON text or MessagePack array of drawn ids (drawn
whitespace, encodings and headers) with drawn damage (bytes spliced in, a cut at a drawn
place), or the rest of the input as it is; then, for a text or array made whole, its cuts
(each must be a ValueError at the end of the data): every one of a short one, 12 spread over
a long one (tests/ids/test_wire.py cuts long ones at every byte).

What each must do, input by input:
- ``json_to_ids``: where ``json.loads`` of the UTF-8 text gives a list of ints, exactly those
  ints, or ``OverflowError("ids[i] = v ...")`` for the first outside the width; anything else
  a ``ValueError("not a JSON array of int32 ids: ...")`` (``int64 ids``; or that
  OverflowError for an int before the first problem);
- ``msgpack_to_ids``: where ``msgpack.unpackb`` gives a list of ints, those ints or the
  OverflowError; anything else the ValueError ("not a MessagePack array of int32 ids");
- ``ids_to_json`` / ``ids_to_msgpack``: ``json.dumps(separators=(",", ":"))`` /
  ``msgpack.packb`` of what ``pack_ids`` packs, or exactly ``pack_ids``' exception;
- ``convert_ids``: the oracles' reading of ``src`` (in its width) written by the oracles as
  ``dst``, or the exception the reading raises, or the OverflowError of the first id that
  does not fit ``dst``'s width (a bad format name: its ValueError or TypeError).
Both twins agree on every outcome, exception type and message included.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import sys
from typing import Any

from _parity import (
    Allow,
    Draw,
    Raised,
    fail,
    fuzz_main,
    instrumented,
    load_twins,
    same_outcome,
)

with instrumented(__name__ == "__main__" and "--random" not in sys.argv,
                  own=["ids._wire_py"]):
    TWINS = load_twins("ids._wire")

import msgpack  # noqa: E402
from fuzz_ids import (  # noqa: E402
    RANGES,
    any_overflow,
    build_ids,
    draw_kind,
    draw_value,
    draw_values,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FORMATS = ["int32", "b64", "json", "msgpack", "msgpack_bin"]
FORMATS64 = [*FORMATS, "int64", "b64_int64"]
#: the width of the ids in each byte format's bytes (JSON and MessagePack: the call's)
BYTE_WIDTHS = {"int32": 32, "b64": 32, "msgpack_bin": 32, "int64": 64, "b64_int64": 64}
BIN_ERROR = Allow(ValueError, "not a MessagePack bin of int32 ids: ")


def json_error(width: int) -> Allow:
    return Allow(ValueError, f"not a JSON array of int{width} ids: ")


def msgpack_error(width: int) -> Allow:
    return Allow(ValueError, f"not a MessagePack array of int{width} ids: ")


def length_error(width: int) -> Allow:
    return Allow(ValueError, f"int{width} data must be a multiple of {width // 8} bytes long")

GARBAGE = [b",", b"]", b"[", b"-", b"0", b" ", b"\n", b".", b"e", b"\xc0", b"\xcd", b"\xd3",
           b"\x91", b"\xdc", b"\xff", b"\x00", b'"', b"9999999999"]
WS = [b"", b"", b" ", b"\n", b"\t", b"\r\n  "]
# the integer encodings and the values each holds
INT_TAGS = {0xCC: (">B", 0, 255), 0xCD: (">H", 0, 65535), 0xCE: (">I", 0, 2**32 - 1),
            0xCF: (">Q", 0, 2**64 - 1), 0xD0: (">b", -128, 127), 0xD1: (">h", -(2**15), 2**15 - 1),
            0xD2: (">i", INT32_MIN, INT32_MAX), 0xD3: (">q", -(2**63), 2**63 - 1)}


def draw_json(draw: Draw, values: list[int]) -> bytes:
    """A JSON array of ``values`` with drawn whitespace around each token."""
    parts = [draw.choice(WS), b"[", draw.choice(WS)]
    for i, value in enumerate(values):
        if i:
            parts += [draw.choice(WS), b",", draw.choice(WS)]
        parts.append(str(value).encode())
    parts += [draw.choice(WS), b"]", draw.choice(WS)]
    return b"".join(parts)


def draw_msgpack(draw: Draw, values: list[int]) -> bytes:
    """A MessagePack array of ``values``, each in a drawn encoding that holds it."""
    items = []
    for value in values:
        tags = [tag for tag, (_, low, high) in INT_TAGS.items() if low <= value <= high]
        fix = -32 <= value <= 127
        tag = draw.choice(tags + [0, 0] if fix else tags) if tags or fix else 0
        if tag == 0 and fix:
            items.append(bytes([value & 0xFF]))
        elif tag:
            items.append(bytes([tag]) + struct.pack(INT_TAGS[tag][0], value))
        else:  # past every encoding: a nil, which the reader refuses
            items.append(b"\xc0")
    count = len(values)
    header = draw.choice(([bytes([0x90 | count])] if count <= 15 else [])
                         + [b"\xdc" + struct.pack(">H", count), b"\xdd" + struct.pack(">I", count)])
    return header + b"".join(items)


def draw_damage(draw: Draw, data: bytes) -> bytes:
    """``data`` with drawn bytes spliced in and maybe cut short."""
    for _ in range(draw.int(0, 2)):
        where = draw.int(0, len(data))
        data = data[:where] + draw.choice(GARBAGE) + data[where + draw.int(0, 1):]
    if draw.int(0, 3) == 0:
        data = data[:draw.int(0, len(data))]
    return data


def json_expected(data: bytes, width: int = 32) -> tuple[list[Allow], bool, list[int] | None]:
    """What json_to_ids may do with ``data``: (allowed errors, must raise, the ids)."""
    try:
        values = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and the digit limit too
        return [json_error(width), any_overflow(width)], True, None
    if type(values) is not list or any(type(v) is not int for v in values):
        return [json_error(width), any_overflow(width)], True, None
    return first_overflow(values, width)


def msgpack_expected(data: bytes, width: int = 32) -> tuple[list[Allow], bool, list[int] | None]:
    try:
        values = msgpack.unpackb(data, strict_map_key=False)
    except Exception:  # cut short, extra data, a reserved byte: msgpack refuses it
        return [msgpack_error(width), any_overflow(width)], True, None
    if type(values) is not list or any(type(v) is not int for v in values):
        return [msgpack_error(width), any_overflow(width)], True, None
    return first_overflow(values, width)


def first_overflow(values: list[int], width: int = 32) -> tuple[list[Allow], bool,
                                                                list[int] | None]:
    low, high, _ = RANGES[width]
    for i, value in enumerate(values):
        if not low <= value <= high:
            return [Allow(OverflowError, f"ids[{i}] = {value} is outside the int{width} "
                                         "range")], True, None
    return [], False, values


def check_reader(name: str, data: bytes, expected: tuple[list[Allow], bool, list[int] | None],
                 width: int = 32) -> None:
    allowed, must_raise, values = expected
    got = same_outcome(TWINS, lambda twin: getattr(twin, name)(data, width=width), allowed,
                       f"{name} width {width}", must_raise)
    if not isinstance(got, Raised) and got != values:
        fail(f"{name}({data!r}, width={width}) -> {got!r}, the oracle reads {values!r}")


def check_cuts(name: str, data: bytes, width: int = 32) -> None:
    """Every cut of a whole text or array (of a long one, 12 spread over it) is an error at
    the end of the data (for JSON, a cut after the ']' is whitespace dropped, still whole)."""
    step = max(1, len(data) // 12)
    for cut in range(len(data) % step, len(data), step):
        piece = data[:cut]
        if name == "json_to_ids" and piece.rstrip().endswith(b"]"):
            continue
        error = json_error(width) if name == "json_to_ids" else msgpack_error(width)
        got = same_outcome(TWINS, lambda twin, piece=piece: getattr(twin, name)(piece,
                                                                                width=width),
                           [error], f"{name} cut at {cut}", True)
        if "found the end of the data" not in str(got.exc):
            fail(f"{name}({piece!r}): {got.exc} (a cut: the end of the data is the problem)")


def json_text(values: list[int]) -> bytes:
    return json.dumps(values, separators=(",", ":")).encode()


def encode(values: list[int], fmt: str) -> bytes:
    if fmt == "json":
        return json_text(values)
    if fmt == "msgpack":
        return msgpack.packb(values)  # type: ignore[no-any-return]
    raw = struct.pack(f"<{len(values)}{RANGES[BYTE_WIDTHS[fmt]][2]}", *values)
    if fmt in ("int32", "int64"):
        return raw
    if fmt in ("b64", "b64_int64"):
        return base64.b64encode(raw)
    return msgpack.packb(raw)  # type: ignore[no-any-return]


def read_expected(data: bytes, src: str, width: int = 32) -> tuple[list[Allow], bool,
                                                                   list[int] | None]:
    """What reading ``data`` as ``src`` (its ids in ``width``: the call's for JSON and
    MessagePack, the format's own for the others) may give (the oracles')."""
    if src == "json":
        return json_expected(data, width)
    if src == "msgpack":
        return msgpack_expected(data, width)
    if src in ("b64", "b64_int64"):
        try:
            raw = base64.b64decode(data, validate=True)
        except binascii.Error:
            return [Allow(binascii.Error)], True, None
    elif src == "msgpack_bin":
        try:
            raw = msgpack.unpackb(data)
        except Exception:
            return [BIN_ERROR], True, None
        if type(raw) is not bytes:
            return [BIN_ERROR], True, None
    else:
        raw = data
    size = BYTE_WIDTHS.get(src, 32) // 8
    if len(raw) % size:
        return [length_error(size * 8)], True, None
    return [], False, list(struct.unpack(f"<{len(raw) // size}{RANGES[size * 8][2]}", raw))


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    mode, width = draw_kind(draw, 6)
    if mode in (0, 1):  # made from drawn ids, damaged or not
        values = [draw_value(draw) if draw.int(0, 7) == 0 else draw.int(-300, 151_999)
                  for _ in range(draw.int(0, 24))]
        name = "json_to_ids" if mode == 0 else "msgpack_to_ids"
        whole = draw_json(draw, values) if mode == 0 else draw_msgpack(draw, values)
        text = draw_damage(draw, whole) if draw.bool() else whole
        expected = json_expected(text, width) if mode == 0 else msgpack_expected(text, width)
        check_reader(name, text, expected, width)
        if text == whole and not expected[1]:  # whole and valid
            check_cuts(name, whole, width)
    elif mode == 2:
        text = draw.rest()
        check_reader("json_to_ids", text, json_expected(text, width), width)
    elif mode == 3:
        packed = draw.rest()
        check_reader("msgpack_to_ids", packed, msgpack_expected(packed, width), width)
    elif mode == 4:  # the writers take what pack_ids takes, with its errors
        kind = draw.int(0, 11)
        make_ids, expected = build_ids(draw, kind, draw_values(draw), width)
        code = RANGES[width][2]
        for name, write in (("ids_to_json", json_text), ("ids_to_msgpack", msgpack.packb)):
            got = same_outcome(TWINS, lambda twin, name=name: getattr(twin, name)(
                make_ids(), width=width), expected.allowed, f"{name} kind {kind} width {width}",
                expected.must_raise)
            if not isinstance(got, Raised):
                wanted = [write(list(struct.unpack(f"<{len(v) // (width // 8)}{code}", v)))
                          for v in expected.values]
                if got not in wanted:
                    fail(f"{name} kind {kind} width {width}: {got!r}, expected one of "
                         f"{wanted!r}")
    elif width == 32:  # convert_ids, every pair (and names that are not formats)
        src = draw.choice(FORMATS + ["xml"])
        dst = draw.choice(FORMATS + [None])
        values = [draw.int(-300, 151_999) for _ in range(draw.int(0, 12))]
        source = encode(values, src if src in FORMATS else "json")
        if draw.bool():
            source = draw_damage(draw, source)
        check_convert(source, src, dst)
    else:  # convert_ids at every width, the int64 formats among the pairs
        src, dst = draw.choice(FORMATS64), draw.choice(FORMATS64)
        given = draw.choice([None, 32, 64])
        read_bits = BYTE_WIDTHS.get(src) or given or (
            64 if 64 in (BYTE_WIDTHS.get(src), BYTE_WIDTHS.get(dst)) else 32)
        low, high, _ = RANGES[read_bits]
        values = [draw_value(draw) if draw.int(0, 3) == 0 else draw.int(-300, 151_999)
                  for _ in range(draw.int(0, 12))]
        source = encode([v for v in values if low <= v <= high], src)
        if draw.bool():
            source = draw_damage(draw, source)
        check_convert(source, src, dst, given)


def convert_widths(src: str, dst: str, width: int | None) -> tuple[int, int]:
    """The widths src is read in and dst written in (convert_ids' rule, written anew here)."""
    given = width or (64 if 64 in (BYTE_WIDTHS.get(src), BYTE_WIDTHS.get(dst)) else 32)
    return BYTE_WIDTHS.get(src) or given, BYTE_WIDTHS.get(dst) or given


def check_convert(source: bytes, src: Any, dst: Any, width: int | None = None) -> None:
    def convert(twin: Any) -> Any:
        if width is None:
            return twin.convert_ids(source, src, dst)
        return twin.convert_ids(source, src, dst, width=width)

    if src not in FORMATS64:
        same_outcome(TWINS, convert,
                     [Allow(ValueError, f"src={src!r} is not a format of token ids")],
                     "convert_ids", True)
        return
    if dst not in FORMATS64:
        same_outcome(TWINS, convert, [Allow(TypeError, "dst must be a format name (str)")],
                     "convert_ids", True)
        return
    read_bits, write_bits = convert_widths(src, dst, width)
    allowed, must_raise, values = read_expected(source, src, read_bits)
    if values is not None and write_bits < read_bits:  # narrowed: each id must fit
        allowed, must_raise, values = first_overflow(values, write_bits)
    got = same_outcome(TWINS, convert, allowed, f"convert_ids {src}->{dst} width {width}",
                       must_raise)
    if not isinstance(got, Raised) and (values is None or got != encode(values, dst)):
        fail(f"convert_ids({source!r}, {src}, {dst}, width={width}) -> {got!r}, the oracles "
             f"say {values!r}")


if __name__ == "__main__":
    fuzz_main("wire", test_one_input)
    sys.exit(0)
