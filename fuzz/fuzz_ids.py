"""Fuzz pack_ids / unpack_ids: both twins, every kind of input, struct as the oracle.

The input picks a container (list, tuple, iterator, array.array, numpy array of any integer
dtype and byte order with any stride, memoryview, hostile objects) and its values (around
the int32 limits and beyond), then the rest of it is fed to unpack_ids as bytes-like data.
"""

from __future__ import annotations

import array
import struct
import sys
from typing import Any, Callable

from _parity import Draw, HostileError, expect, fuzz_main, instrumented, load_twins, same_outcome

with instrumented(__name__ == "__main__" and "--random" not in sys.argv):
    TWINS = load_twins("ids")

import numpy as np  # noqa: E402  (after the instrumented import of tokcore)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
PACK_ERRORS = (TypeError, OverflowError, ValueError, RuntimeError, HostileError)
UNPACK_ERRORS = (TypeError, ValueError)

# values that matter: the int32 limits and just past, the int cache edge, digit edges
EDGES = [0, 1, -1, 255, 2**15, 2**18 - 1, 2**18, 2**30 - 1, 2**30, -(2**30), -(2**30) - 1,
         INT32_MAX, INT32_MAX + 1, INT32_MIN, INT32_MIN - 1, 2**32 - 1, 2**32, 2**63 - 1,
         -(2**63), 2**64 - 1, 2**64, -(2**64), 10**30]
ARRAY_CODES = "bBhHiIlLqQ"
DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"]


class Index:
    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


class Raiser:
    def __index__(self) -> int:
        raise HostileError("__index__ raised")


class Mutator:
    """An __index__ that changes the list being packed (shrink, grow, replace, clear)."""

    def __init__(self, victim: list[Any], action: int, value: int) -> None:
        self.victim, self.action, self.value = victim, action, value

    def __index__(self) -> int:
        victim = self.victim
        if self.action == 0:
            victim.clear()
        elif self.action == 1:
            victim.extend(range(1000))  # moves the list's storage
        elif self.action == 2 and victim:
            victim[-1] = 2**40  # same size, a new item (the old one freed)
        elif self.action == 3 and victim:
            victim.pop()
        return self.value


def draw_value(draw: Draw) -> int:
    kind = draw.int(0, 3)
    if kind == 0:
        return int(draw.choice(EDGES)) + draw.int(-2, 2)
    if kind == 1:
        return draw.int(0, 151_999)
    if kind == 2:
        return draw.int(INT32_MIN, INT32_MAX)
    return draw.int(-(2**70), 2**70)


def draw_values(draw: Draw) -> list[int]:
    return [draw_value(draw) for _ in range(draw.int(0, 40))]


def fits(values: list[int]) -> bool:
    return all(INT32_MIN <= v <= INT32_MAX for v in values)


def build_ids(draw: Draw, kind: int,
              values: list[int]) -> tuple[Callable[[], Any], list[int] | None]:
    """A factory for a fresh ``ids`` argument (hostile ones are consumed) and, when the
    result is plain, the int values it stands for (the oracle's input)."""
    if kind == 0:
        return (lambda: list(values)), values
    if kind == 1:
        return (lambda: tuple(values)), values
    if kind == 2:
        return (lambda: iter(values)), values
    if kind == 3:
        return (lambda: [Index(v) for v in values]), values
    if kind == 4:
        code = draw.choice(ARRAY_CODES)
        fitting = [v for v in values if _fits_code(v, code)]
        return (lambda: array.array(code, fitting)), fitting
    if kind == 5:
        dtype = np.dtype(draw.choice(DTYPES)).newbyteorder(draw.choice("<>="))
        info = np.iinfo(dtype)
        kept = [v for v in values if info.min <= v <= info.max]
        step = draw.choice([1, 1, 2, 3, -1, -2, -5])
        arr = np.array(kept, dtype=dtype)[::step]
        expected = [int(v) for v in arr]
        return (lambda: arr), expected
    if kind == 6:
        kept = [v for v in values if INT32_MIN <= v <= INT32_MAX]
        fmt = draw.choice(["i", "b", "h", "q", "B"])
        raw = array.array("i", kept).tobytes()
        view = memoryview(raw)
        if fmt != "i":
            view = view.cast("B")
            if fmt != "B":
                size = struct.calcsize(fmt)
                view = view[: len(raw) // size * size].cast(fmt)
        expected = list(view)
        return (lambda: view), expected
    if kind == 7:  # hostile items at a drawn position
        where = draw.int(0, len(values))
        action = draw.int(0, 4)

        def hostile() -> list[Any]:
            victim: list[Any] = list(values)
            item: Any = Raiser() if action == 4 else Mutator(victim, action, 7)
            victim.insert(where, item)
            return victim

        return hostile, None
    if kind == 8:  # not integers at all
        bad = draw.choice([1.5, None, "7", b"7", [1], np.float64(2.0), object()])
        where = draw.int(0, len(values))
        return (lambda: values[:where] + [bad] + values[where:]), None
    if kind == 9:  # not sequences of ids
        bad = draw.choice(["123", b"1234", bytearray(4), 5, None, 2.5,
                           np.zeros((2, 2), np.int32), np.array([1.0]), np.array([True]),
                           np.int32(3), memoryview(b"abcd").cast("c")])
        return (lambda: bad), None
    if kind == 10:  # numpy scalars as items
        return (lambda: [np.int64(v) for v in values]), values
    return (lambda: (v for v in values)), values


def _fits_code(value: int, code: str) -> bool:
    try:
        array.array(code, [value])
    except OverflowError:
        return False
    return True


def draw_data(draw: Draw) -> tuple[Callable[[], Any], bytes | None]:
    """A factory for unpack_ids' argument and the bytes it holds (None: must be refused)."""
    kind = draw.int(0, 5)
    raw = draw.rest()
    if kind == 0:
        return (lambda: raw), raw
    if kind == 1:
        return (lambda: bytearray(raw)), raw
    if kind == 2:
        return (lambda: memoryview(raw)), raw
    if kind == 3:  # a numpy byte view, contiguous
        return (lambda: np.frombuffer(raw, np.uint8)), raw
    if kind == 4:  # a strided view: contiguous only when it holds one byte or none
        return (lambda: memoryview(raw)[::2]), (raw[::2] if len(raw) <= 2 else None)
    return (lambda: raw.decode("latin-1")), None  # str is text, not data


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    kind = draw.int(0, 11)
    values = draw_values(draw)
    make_ids, plain = build_ids(draw, kind, values)
    packed = same_outcome(TWINS, lambda twin: twin.pack_ids(make_ids()), PACK_ERRORS,
                          f"pack_ids kind {kind}")
    if plain is not None:
        if fits(plain):
            expect(packed == struct.pack(f"<{len(plain)}i", *plain),
                   f"pack_ids kind {kind}: {packed!r} is not struct's packing of {plain}")
        else:
            expect(getattr(packed, "type", None) is OverflowError,
                   f"pack_ids kind {kind}: {plain} has values outside int32, got {packed!r}")

    make_data, raw = draw_data(draw)
    unpacked = same_outcome(TWINS, lambda twin: twin.unpack_ids(make_data()), UNPACK_ERRORS,
                            "unpack_ids")
    if raw is None:
        expect(getattr(unpacked, "type", None) is TypeError,
               f"unpack_ids must refuse a str or a strided buffer, got {unpacked!r}")
    else:
        if len(raw) % 4:
            expect(getattr(unpacked, "type", None) is ValueError,
                   f"unpack_ids of {len(raw)} bytes must raise ValueError, got {unpacked!r}")
        else:
            expect(unpacked == list(struct.unpack(f"<{len(raw) // 4}i", raw)),
                   f"unpack_ids({raw!r}) -> {unpacked!r}")


if __name__ == "__main__":
    fuzz_main("ids", test_one_input)
    sys.exit(0)
