"""Token ids in the wire formats the serving stacks speak: the pure-Python reference twin.

JSON int arrays (``[1,-2,151644]``), MessagePack arrays of ints, MessagePack ``bin`` of
int32, base64 of int32 or int64 and raw int32 or int64, each to and from token ids, and from
any one to any other (``convert_ids``); ids within int32, or int64 with ``width=64``. The
grammar, the error kinds and their messages, and the argument checks are defined here once;
the Cython twin imports them, and its kernels (``_wire_json.h``, ``_wire_msgpack.h``) return
the same error kinds at the same offsets.

Speed here comes from the standard library's C loops (``re``, ``json``, ``array``,
``base64``) on the well-formed path; the byte-by-byte readers below run only to name the
exact problem of an input that is not.
"""

from __future__ import annotations

import binascii
import json
import re
import struct
from array import array
from collections.abc import Callable
from typing import Literal, NamedTuple

from .._args import BytesLike, TextOrBytes
from . import _b64_py
from ._pack_py import (
    LITTLE_ENDIAN_HOST,
    MAX_IDS,
    IdsArg,
    coerce_ids,
    length_error,
    overflow_error,
    pack_ids,
    unexportable_error,
)
from ._width import INT32, INT64, IdWidth, Width, check_width

#: the formats of ``convert_ids``: raw little-endian int32, its base64 text (standard
#: alphabet, padded), a JSON array of ints, a MessagePack array of ints, a MessagePack
#: ``bin`` holding the raw int32, raw little-endian int64 and its base64 text (the table of
#: their readers and writers is ``FORMATS``, below)
IdFormat = Literal["int32", "b64", "json", "msgpack", "msgpack_bin", "int64", "b64_int64"]


# --- argument checks, shared by both twins -------------------------------------------------

def check_format(value: object, name: str) -> IdFormat:
    """``value`` as one of :data:`FORMATS`' names: a ``TypeError`` for a non-str,
    ``ValueError`` for an unknown name."""
    if type(value) is not str:
        raise TypeError(f"{name} must be a format name (str), not {type(value).__name__}")
    if value not in FORMATS:
        names = ", ".join(repr(f) for f in FORMATS)
        raise ValueError(f"{name}={value!r} is not a format of token ids: expected one of "
                         f"{names}")
    return value  # type: ignore[return-value]  # one of the table's names


def text_bytes(text: str) -> bytes:
    """A ``str`` source as the bytes the readers scan (UTF-8; a lone surrogate as its three
    bytes, which no format accepts: the offsets name the first character that is not
    ASCII, the same in characters and bytes)."""
    return text.encode("utf-8", "surrogatepass")


def data_view(data: object, what: str, text: bool) -> memoryview | bytes:
    """The bytes of a source: ``data`` itself or a flat byte view of it; a ``str`` encoded
    where ``text`` (else a ``TypeError``); anything without the buffer protocol, or
    strided, a ``TypeError``."""
    if isinstance(data, str):
        if text:
            return text_bytes(data)
        raise TypeError(f"{what} must be a bytes-like object, not str")
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        kinds = "a bytes-like object or str" if text else "a bytes-like object"
        raise TypeError(f"{what} must be {kinds}, not {type(data).__name__}") from None
    except ValueError as exc:  # a buffer exporter that cannot export (datetime64 arrays)
        raise unexportable_error(f"{what} must be a bytes-like object", data, exc) from None
    if not view.nbytes:  # empty is contiguous (PyBuffer_IsContiguous, the Cython twin's)
        return b""
    if not view.c_contiguous:
        raise TypeError(f"{what} must be a contiguous bytes-like object")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def found(data: memoryview | bytes, offset: int, text: bool = True) -> str:
    """What is at ``offset``, for an error message: a printable character of a text format
    as itself, any other byte in hex."""
    if offset >= len(data):
        return "the end of the data"
    byte = data[offset]
    return repr(chr(byte)) if text and 0x21 <= byte <= 0x7E else f"byte 0x{byte:02x}"


# --- JSON arrays of integers ---------------------------------------------------------------

JSON_WHAT = "JSON data"


def json_prefix(width: IdWidth) -> str:
    return f"not a JSON array of {width.name} ids"


# The error kinds, numbered as _wire_json.h numbers them (TOK_IJ_*): each is the reason at
# the offset of the first byte that no valid text could have there.
J_OPEN, J_FIRST, J_INT, J_DIGIT, J_SEP, J_ZERO, J_FRACTION, J_TRAILING = range(1, 9)
JSON_REASONS = {
    J_OPEN: "expected '['",
    J_FIRST: "expected an integer or ']'",
    J_INT: "expected an integer",
    J_DIGIT: "expected a digit after '-'",
    J_SEP: "expected ',' or ']'",
    J_ZERO: "expected no digit after a leading 0",
    J_FRACTION: "expected an integer, not a fraction or an exponent",
    J_TRAILING: "expected nothing after the array",
}


def json_error(kind: int, data: memoryview | bytes, offset: int,
               width: IdWidth = INT32) -> ValueError:
    return json_error_found(kind, offset, found(data, offset), width)


def json_error_found(kind: int, offset: int, what: str, width: IdWidth = INT32) -> ValueError:
    """The error of kind ``kind`` at ``offset``, where ``what`` was found (the Cython twin
    passes :func:`found` of the byte there, not the whole data)."""
    return ValueError(f"{json_prefix(width)}: {JSON_REASONS[kind]} at offset {offset}, "
                      f"found {what}")


def json_overflow(index: int, text: bytes, width: IdWidth = INT32) -> OverflowError:
    """``pack_ids``' error for the ``index``-th id, its value as the JSON text wrote it (an
    integer without leading zeros reads the same as its value: no int is made of it)."""
    return overflow_error(index, text.decode("ascii"), width)


_WS = b" \t\n\r"
_DIGITS = b"0123456789"
#: the most digits of an integer of each width (beyond them it is out of range, so json.loads
#: never meets its digit limit)
_MOST_DIGITS = {32: 10, 64: 19}


def _well_formed(digits: int) -> re.Pattern[bytes]:
    """The grammar of a well-formed array of integers of at most ``digits`` digits."""
    num = rf"-?(?:0|[1-9][0-9]{{0,{digits - 1}}})"
    return re.compile(
        rf"[ \t\n\r]*\[[ \t\n\r]*(?:{num}(?:[ \t\n\r]*,[ \t\n\r]*{num})*[ \t\n\r]*)?\][ \t\n\r]*"
        .encode())


_WELL_FORMED = {bits: _well_formed(digits) for bits, digits in _MOST_DIGITS.items()}


def _skip_ws(data: memoryview | bytes, pos: int) -> int:
    end = len(data)
    while pos < end and data[pos] in _WS:
        pos += 1
    return pos


def _json_read_int(data: memoryview | bytes, pos: int, index: int, first: bool,
                   width: IdWidth) -> tuple[int, int]:
    """The integer at ``pos`` (JSON whitespace skipped already): ``(value, end)``, or the
    contract's error."""
    end = len(data)
    start = pos
    if pos < end and data[pos] == 0x2D:  # '-'
        pos += 1
    if pos == end or data[pos] not in _DIGITS:
        kind = J_DIGIT if pos > start else J_FIRST if first else J_INT
        raise json_error(kind, data, pos, width)
    digits = pos
    if data[pos] == 0x30:  # '0'
        pos += 1
        if pos < end and data[pos] in _DIGITS:
            raise json_error(J_ZERO, data, pos, width)
    else:
        while pos < end and data[pos] in _DIGITS:
            pos += 1
    if pos < end and data[pos] in b".eE":
        raise json_error(J_FRACTION, data, pos, width)
    text = bytes(data[start:pos])
    if pos - digits > _MOST_DIGITS[width.bits] or not width.low <= int(text) <= width.high:
        raise json_overflow(index, text, width)
    return int(text), pos


def json_scan(data: memoryview | bytes, width: IdWidth = INT32) -> list[int]:
    """The reference reader, byte by byte: the ids, or the error at the first byte (or
    integer) no valid text could have there. The same steps as ``tok_ij_scalar``."""
    ids: list[int] = []
    end = len(data)
    pos = _skip_ws(data, 0)
    if pos == end or data[pos] != 0x5B:  # '['
        raise json_error(J_OPEN, data, pos, width)
    pos = _skip_ws(data, pos + 1)
    if pos < end and data[pos] == 0x5D:  # ']': the empty array
        pos += 1
    else:
        while True:
            value, pos = _json_read_int(data, pos, len(ids), not ids, width)
            ids.append(value)
            pos = _skip_ws(data, pos)
            if pos < end and data[pos] == 0x2C:  # ','
                pos = _skip_ws(data, pos + 1)
                continue
            if pos < end and data[pos] == 0x5D:
                pos += 1
                break
            raise json_error(J_SEP, data, pos, width)
    pos = _skip_ws(data, pos)
    if pos != end:
        raise json_error(J_TRAILING, data, pos, width)
    return ids


def fit(values: list[int], width: IdWidth) -> list[int]:
    """``values`` when each is within ``width``, else the error of the first that is not."""
    try:
        array(width.typecode, values)
    except OverflowError:
        for index, value in enumerate(values):
            if not width.low <= value <= width.high:
                raise overflow_error(index, value, width) from None
        raise  # not reached: one of them is out of range
    return values


def json_ids(data: memoryview | bytes, width: IdWidth = INT32) -> list[int]:
    """The ids of a JSON array: ``json.loads`` where the text is well formed (a regular
    expression of the grammar says so first), the reference reader otherwise."""
    if _WELL_FORMED[width.bits].fullmatch(data) is not None:
        ids: list[int] = json.loads(bytes(data))
        return fit(ids, width)
    return json_scan(data, width)


def json_text(values: list[int]) -> bytes:
    """The compact JSON array of ``values``: ``json.dumps(values, separators=(",", ":"))``."""
    return ("[" + ",".join(map(str, values)) + "]").encode("ascii")


# --- MessagePack ---------------------------------------------------------------------------

MSGPACK_WHAT = "MessagePack data"
BIN_PREFIX = "not a MessagePack bin of int32 ids"
#: the most items a MessagePack array holds and the most bytes a bin holds: array32's count
#: and bin32's length are four bytes (a bin of int32 ids holds a quarter as many ids)
MSGPACK_MOST = 2**32 - 1


def msgpack_prefix(width: IdWidth) -> str:
    return f"not a MessagePack array of {width.name} ids"


# The error kinds, numbered as _wire_msgpack.h numbers them (TOK_MP_*)
M_ARRAY, M_ARRAY_REST, M_INT, M_INT_REST, M_TRAILING, M_BIN, M_BIN_REST, M_BIN_TRAILING = \
    range(1, 9)
MSGPACK_REASONS = {
    M_ARRAY: "expected an array (a byte 0x90-0x9f, 0xdc or 0xdd)",
    M_ARRAY_REST: "expected the rest of the array's header",
    M_INT: "expected an integer",
    M_INT_REST: "expected the rest of the integer",
    M_TRAILING: "expected nothing after the array",
    M_BIN: "expected a bin (a byte 0xc4, 0xc5 or 0xc6)",
    M_BIN_REST: "expected the rest of the bin",
    M_BIN_TRAILING: "expected nothing after the bin",
}


def msgpack_error(kind: int, data: memoryview | bytes, offset: int,
                  width: IdWidth = INT32) -> ValueError:
    return msgpack_error_found(kind, offset, found(data, offset, False), width)


def msgpack_error_found(kind: int, offset: int, what: str,
                        width: IdWidth = INT32) -> ValueError:
    prefix = BIN_PREFIX if kind >= M_BIN else msgpack_prefix(width)
    return ValueError(f"{prefix}: {MSGPACK_REASONS[kind]} at offset {offset}, found {what}")


#: the payload of each integer type: (struct format, size); fixints have none
_MSGPACK_INTS = {0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
                 0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8)}


def _msgpack_length(data: memoryview | bytes, pos: int, size: int, rest: int,
                    width: IdWidth = INT32) -> int:
    """The big-endian length of ``size`` bytes at ``pos``, or the error of a cut header."""
    if pos + size > len(data):
        raise msgpack_error(rest, data, len(data), width)
    return int.from_bytes(data[pos:pos + size], "big")


def msgpack_ids(data: memoryview | bytes, width: IdWidth = INT32) -> list[int]:
    """The ids of one MessagePack array of ints (any encoding of each), or the error."""
    end = len(data)
    if not end:
        raise msgpack_error(M_ARRAY, data, 0, width)
    tag = data[0]
    if 0x90 <= tag <= 0x9F:
        count, pos = tag & 0x0F, 1
    elif tag in (0xDC, 0xDD):
        size = 2 if tag == 0xDC else 4
        count, pos = _msgpack_length(data, 1, size, M_ARRAY_REST, width), 1 + size
    else:
        raise msgpack_error(M_ARRAY, data, 0, width)
    ids: list[int] = []
    for index in range(count):
        if pos == end:
            raise msgpack_error(M_INT, data, pos, width)
        tag = data[pos]
        if tag <= 0x7F or tag >= 0xE0:  # positive and negative fixints
            value = tag if tag <= 0x7F else tag - 0x100
            pos += 1
        elif tag in _MSGPACK_INTS:
            fmt, size = _MSGPACK_INTS[tag]
            if pos + 1 + size > end:
                raise msgpack_error(M_INT_REST, data, end, width)
            value = struct.unpack_from(fmt, data, pos + 1)[0]
            pos += 1 + size
        else:
            raise msgpack_error(M_INT, data, pos, width)
        if not width.low <= value <= width.high:
            raise overflow_error(index, value, width)
        ids.append(value)
    if pos != end:
        raise msgpack_error(M_TRAILING, data, pos, width)
    return ids


def _msgpack_int(value: int) -> bytes:
    """One int (within int64) in its smallest MessagePack encoding (msgpack.packb's,
    msgspec's)."""
    if value >= 0:
        if value <= 0x7F:
            return bytes((value,))
        if value <= 0xFF:
            return b"\xcc" + bytes((value,))
        if value <= 0xFFFF:
            return b"\xcd" + value.to_bytes(2, "big")
        if value <= 0xFFFFFFFF:
            return b"\xce" + value.to_bytes(4, "big")
        return b"\xcf" + value.to_bytes(8, "big")
    if value >= -32:
        return bytes((value & 0xFF,))
    if value >= -128:
        return b"\xd0" + value.to_bytes(1, "big", signed=True)
    if value >= -32768:
        return b"\xd1" + value.to_bytes(2, "big", signed=True)
    if value >= -(2**31):
        return b"\xd2" + value.to_bytes(4, "big", signed=True)
    return b"\xd3" + value.to_bytes(8, "big", signed=True)


def msgpack_text(values: list[int]) -> bytes:
    """The MessagePack array of ``values`` (the smallest header: fixarray, array16, array32),
    each int in its smallest encoding; :func:`count_error` for more than an array holds."""
    count = len(values)
    if count > MSGPACK_MOST:
        raise count_error(count, "msgpack")
    if count <= 15:
        header = bytes((0x90 | count,))
    elif count <= 0xFFFF:
        header = b"\xdc" + count.to_bytes(2, "big")
    else:
        header = b"\xdd" + count.to_bytes(4, "big")
    return header + b"".join(map(_msgpack_int, values))


def bin_payload(data: memoryview | bytes) -> memoryview | bytes:
    """The int32 bytes of one MessagePack bin (bin8, bin16 or bin32), or the error."""
    end = len(data)
    if not end or data[0] not in (0xC4, 0xC5, 0xC6):
        raise msgpack_error(M_BIN, data, 0)
    size = 1 << (data[0] - 0xC4)
    length = _msgpack_length(data, 1, size, M_BIN_REST)
    start = 1 + size
    if start + length > end:
        raise msgpack_error(M_BIN_REST, data, end)
    if start + length != end:
        raise msgpack_error(M_BIN_TRAILING, data, start + length)
    if length % 4:
        raise length_error(length)
    return data[start:]


def bin_text(raw: bytes) -> bytes:
    """A MessagePack bin of ``raw``, int32 ids (msgpack.packb's, msgspec's encoding of
    bytes); :func:`count_error` for more ids than a bin holds."""
    size = len(raw)
    if size > MSGPACK_MOST:
        raise count_error(size // INT32.size, "msgpack_bin")
    if size <= 0xFF:
        return b"\xc4" + size.to_bytes(1, "big") + raw
    if size <= 0xFFFF:
        return b"\xc5" + size.to_bytes(2, "big") + raw
    return b"\xc6" + size.to_bytes(4, "big") + raw


# --- int32, int64 and base64 ---------------------------------------------------------------

def raw_values(raw: memoryview | bytes, width: IdWidth = INT32) -> list[int]:
    """The ids of little-endian int32 (or int64) bytes."""
    if len(raw) % width.size:
        raise length_error(len(raw), width)
    values = array(width.typecode)
    values.frombytes(raw)
    if not LITTLE_ENDIAN_HOST:
        values.byteswap()
    return values.tolist()


def raw_bytes(values: list[int], width: IdWidth = INT32) -> bytes:
    """``values`` (within ``width``) as little-endian int32 (or int64) bytes."""
    packed = array(width.typecode, values)
    if not LITTLE_ENDIAN_HOST:
        packed.byteswap()
    return packed.tobytes()


def b64_raw(data: object, width: IdWidth = INT32) -> bytes:
    """The int32 (or int64) bytes of base64 text, as ``b64_to_ids(data, validate=True)``
    reads it."""
    raw = _b64_py.b64decode(data, validate=True)  # type: ignore[arg-type]
    if len(raw) % width.size:
        raise length_error(len(raw), width)
    return raw


def b64_text(raw: bytes) -> bytes:
    return binascii.b2a_base64(raw, newline=False)


# --- the table of formats ------------------------------------------------------------------

class Format(NamedTuple):
    """A format of ``convert_ids``: how its ids are read and written."""

    #: the width of the ids in its bytes; None: the call's (JSON and MessagePack arrays, whose
    #: ints have any size, are read and written within the width asked for)
    width: IdWidth | None
    #: the ids of a source in this format (a ``str`` or a buffer, as the caller gave it),
    #: each within the width given
    read: Callable[[object, IdWidth], list[int]]
    #: ids (within the width given already) in this format
    write: Callable[[list[int], IdWidth], bytes]
    #: the most ids its output holds (None: as many as a call takes, ``MAX_IDS``) and what
    #: holds them, for :func:`count_error`
    most: int | None = None
    holder: str = ""


def _read_raw(data: object, width: IdWidth) -> list[int]:
    return raw_values(data_view(data, f"{width.name} data", False), width)


def _read_b64(data: object, width: IdWidth) -> list[int]:
    return raw_values(b64_raw(data, width), width)


def _read_json(data: object, width: IdWidth) -> list[int]:
    return json_ids(data_view(data, JSON_WHAT, True), width)


def _read_msgpack(data: object, width: IdWidth) -> list[int]:
    return msgpack_ids(data_view(data, MSGPACK_WHAT, False), width)


def _read_msgpack_bin(data: object, width: IdWidth) -> list[int]:
    return raw_values(bin_payload(data_view(data, MSGPACK_WHAT, False)))


def _write_json(values: list[int], width: IdWidth) -> bytes:
    return json_text(values)


def _write_msgpack(values: list[int], width: IdWidth) -> bytes:
    return msgpack_text(values)


def _write_b64(values: list[int], width: IdWidth) -> bytes:
    return b64_text(raw_bytes(values, width))


def _write_msgpack_bin(values: list[int], width: IdWidth) -> bytes:
    return bin_text(raw_bytes(values))


#: every format by its public name, in the order of their numbers (``_wire_c`` numbers its
#: C table by this order: the names are spelled here only). A new format is a row here, its
#: reader and writer, and a row of ``_wire_c``'s table.
FORMATS: dict[str, Format] = {
    "int32": Format(INT32, _read_raw, raw_bytes),
    "b64": Format(INT32, _read_b64, _write_b64),
    "json": Format(None, _read_json, _write_json),
    "msgpack": Format(None, _read_msgpack, _write_msgpack, MSGPACK_MOST, "a MessagePack array"),
    "msgpack_bin": Format(INT32, _read_msgpack_bin, _write_msgpack_bin,
                          MSGPACK_MOST // INT32.size, f"a MessagePack bin of {INT32.name} ids"),
    "int64": Format(INT64, _read_raw, raw_bytes),
    "b64_int64": Format(INT64, _read_b64, _write_b64),
}


def count_error(count: int, dst: str) -> ValueError:
    """The error for ``count`` ids, more than the format ``dst``'s output holds (the Cython
    twin compares the count with its own table's, checked against this one's at import)."""
    spec = FORMATS[dst]
    return ValueError(f"ids has {count} items, more than the {spec.most} {spec.holder} holds")


def check_count(count: int, dst: str) -> None:
    """:func:`count_error` where ``count`` ids are more than the format ``dst``'s output
    holds (a MessagePack array 2**32 - 1, a bin 2**32 - 1 bytes): before anything is packed
    or written. More than ``MAX_IDS`` ids is ``too_many_error``, which the callers check
    first."""
    most = FORMATS[check_format(dst, "dst")].most
    if most is not None and count > most:
        raise count_error(count, dst)


def convert_widths(src: Format, dst: Format, width: object) -> tuple[IdWidth, IdWidth]:
    """The widths ``convert_ids`` reads ``src`` in and writes ``dst`` in: a byte format's
    own; for JSON and MessagePack, ``width``, or when it is None the int64 of a byte format
    of int64 on either side, else int32."""
    if width is None:
        given = INT64 if INT64 in (src.width, dst.width) else INT32
    else:
        given = check_width(width)
    return src.width or given, dst.width or given


# --- the public functions ------------------------------------------------------------------

def ids_to_json(ids: IdsArg, *, width: Width = 32) -> bytes:
    """Token ids -> their compact JSON array: the bytes of
    ``json.dumps(ids, separators=(",", ":"))`` and of ``orjson.dumps(ids)``
    (``b"[151644,872,198]"``). ``ids`` is what :func:`pack_ids` takes, within int32 (int64
    with ``width=64``).

    Raises what :func:`pack_ids` raises.
    """
    spec = check_width(width)
    return json_text(raw_values(pack_ids(ids, width=width), spec))


def json_to_ids(data: TextOrBytes, *, width: Width = 32) -> list[int]:
    """One JSON array of integers -> the token ids, as ``json.loads`` reads them, each
    within int32 (int64 with ``width=64``).

    ``data`` is bytes-like (a ``memoryview`` of a :func:`find_member` span: no copy) or
    ``str``. The grammar is RFC 8259's for an array of integers: whitespace (space, tab, LF,
    CR) around any token, ``-0`` read as 0; a fraction, an exponent, a leading zero, ``+``,
    ``NaN``, nesting, a byte order mark or anything after the array is an error.

    Raises ``ValueError`` (``not a JSON array of int32 ids: expected ... at offset N, found
    ...``; ``int64 ids`` with ``width=64``) for malformed text, at the first byte no valid
    text could have there (the end of the data for a text cut short); ``OverflowError``
    (``ids[i] = v is outside the int32 range ...``) for an integer outside the width's range,
    ``v`` as the text wrote it (the first problem in reading order wins); ``TypeError`` for an
    argument that is neither bytes-like nor ``str``, or a strided buffer; ``TypeError`` or
    ``ValueError`` for a ``width`` other than 32 and 64 (checked first).
    """
    spec = check_width(width)
    return json_ids(data_view(data, JSON_WHAT, True), spec)


def ids_to_msgpack(ids: IdsArg, *, width: Width = 32) -> bytes:
    """Token ids -> a MessagePack array of ints, each in its smallest encoding: the bytes of
    ``msgpack.packb(ids)`` and of ``msgspec.msgpack.encode(ids)``. ``ids`` is what
    :func:`pack_ids` takes, within int32 (int64 with ``width=64``).

    Raises what :func:`pack_ids` raises; ``ValueError`` (``ids has N items, more than the
    4294967295 a MessagePack array holds``) for more than 2**32 - 1 ids, the most an
    array32's four-byte count says, before any is packed (after :func:`pack_ids`'
    ``MemoryError`` for more than ``sys.maxsize // 32`` and its ``TypeError`` for a buffer
    not of integers).
    """
    spec = check_width(width)
    seq = coerce_ids(ids)
    if len(seq) <= MAX_IDS:  # more: pack_ids' MemoryError, every codec's, comes first
        check_count(len(seq), "msgpack")
    return msgpack_text(raw_values(pack_ids(seq, width=width), spec))


def msgpack_to_ids(data: BytesLike, *, width: Width = 32) -> list[int]:
    """One MessagePack array (fixarray, array16 or array32) of ints -> the token ids, each
    within int32 (int64 with ``width=64``).

    Each item may be in any integer encoding (fixints, uint8-64, int8-64, smallest or not);
    ``data`` is bytes-like and holds exactly the array.

    Raises ``ValueError`` (``not a MessagePack array of int32 ids: expected ... at offset N,
    found ...``; ``int64 ids`` with ``width=64``) for data that is not one array of ints (not
    an array, a cut header or item, another type of item, bytes after the array);
    ``OverflowError`` naming the index and value of an integer outside the width's range (a
    uint64 above 2**63 - 1 is outside int64); ``TypeError`` for ``str`` or another type;
    ``TypeError`` or ``ValueError`` for a ``width`` other than 32 and 64 (checked first).
    """
    spec = check_width(width)
    return msgpack_ids(data_view(data, MSGPACK_WHAT, False), spec)


def convert_ids(data: TextOrBytes, src: IdFormat, dst: IdFormat, *,
                width: Width | None = None) -> bytes:
    """Token ids in format ``src`` -> the same ids in format ``dst``, without a Python int or
    list in between (on the compiled twin).

    The formats: ``"int32"`` (little-endian int32), ``"b64"`` (the base64 text of those,
    standard alphabet, padded; read as ``b64_to_ids(data, validate=True)`` reads it),
    ``"json"`` and ``"msgpack"`` (the arrays of :func:`json_to_ids` and
    :func:`ids_to_msgpack`), ``"msgpack_bin"`` (one MessagePack bin holding the int32
    bytes), ``"int64"`` (little-endian int64) and ``"b64_int64"`` (its base64 text).
    ``str`` is taken for the text formats (``"b64"``, ``"b64_int64"``, ``"json"``).
    ``src == dst`` gives the normalised form (compact JSON, smallest MessagePack, canonical
    base64).

    ``width`` is that of the JSON and MessagePack ids (32 or 64: the range they are read and
    written in); by default int64 when ``src`` or ``dst`` is an int64 format, else int32. The
    byte formats have their own. Each id read is within the source's range and must be
    within the destination's.

    Raises what reading ``src`` raises (the functions above; for ``"int32"`` and ``"int64"``
    what :func:`unpack_ids` raises, for ``"b64"`` and ``"b64_int64"`` what
    ``b64_to_ids(validate=True)`` raises, for ``"msgpack_bin"`` a ``ValueError`` naming the
    offset of what is not one bin, and :func:`unpack_ids`' length error); ``OverflowError``
    naming the index and value of an id outside the destination's range; ``ValueError`` for
    an unknown format name; ``TypeError`` for a format that is not a ``str``, and for a
    ``str`` given for ``"int32"``, ``"int64"``, ``"msgpack"`` or ``"msgpack_bin"``;
    ``TypeError`` or ``ValueError`` for a ``width`` other than None, 32 and 64;
    ``ValueError`` for more ids than ``dst`` holds (``ids has N items, more than the
    4294967295 a MessagePack array holds`` for ``"msgpack"``, whose array32 count is four
    bytes; ``... more than the 1073741823 a MessagePack bin of int32 ids holds`` for
    ``"msgpack_bin"``, whose bin32 length is four bytes, 4 bytes an id), after what reading
    the source raises and before an id outside the destination's range is looked for.
    """
    reader = FORMATS[check_format(src, "src")]
    writer = FORMATS[check_format(dst, "dst")]
    read_width, write_width = convert_widths(reader, writer, width)
    values = reader.read(data, read_width)
    check_count(len(values), dst)
    if read_width.bits > write_width.bits:
        fit(values, write_width)
    return writer.write(values, write_width)
