"""Fuzz pack_ids / unpack_ids: both twins, every kind of input, struct as the oracle.

The input picks a container (list, tuple, iterator, array.array, numpy array of any integer
dtype and byte order with any stride, memoryview, hostile objects), the width (int32, or
int64 for a quarter of the inputs: a first byte of 192 or more) and the values (around the
int32 and int64 limits and beyond), then the rest of it is fed to unpack_ids as bytes-like
data.

Each input says which outcome the contract allows (:func:`build_ids` returns it with the
argument): struct's packing of the values when they all fit the width; else an OverflowError
naming the first index outside it; a TypeError naming the index and the type of the first
item that is not an integer; a RuntimeError when an item's ``__index__`` resizes the list;
the item's own exception (HostileError) when its ``__index__`` raises; TypeError or
ValueError (a buffer of 0 or 2 dimensions) for what is not a sequence of ids. The first
problem in index order is the one raised. unpack_ids: the ints struct reads; ValueError for a
length that is not a multiple of 4 (8); TypeError for str and for a strided buffer.
"""

from __future__ import annotations

import array
import struct
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from _parity import (
    Allow,
    Draw,
    HostileError,
    Raised,
    fail,
    fuzz_main,
    instrumented,
    load_twins,
    same_outcome,
)

with instrumented(__name__ == "__main__" and "--random" not in sys.argv, own=["ids._pack_py"]):
    TWINS = load_twins("ids._pack")

import numpy as np  # noqa: E402  (after the instrumented import of tokcore)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: each width's range and struct code
RANGES = {32: (INT32_MIN, INT32_MAX, "i"), 64: (-(2**63), 2**63 - 1, "q")}
RESIZED = Allow(RuntimeError, "changed size during pack_ids")


def any_overflow(width: int) -> Allow:
    return Allow(OverflowError, rf"^ids\[\d+\] = -?\d+ is outside the int{width} range", "re")


ANY_OVERFLOW = any_overflow(32)


def draw_kind(draw: Draw, kinds: int) -> tuple[int, int]:
    """``(kind, width)`` from one byte: the kind is the byte modulo ``kinds`` (as
    ``draw.int(0, kinds - 1)`` reads it: the kept inputs made before widths keep their
    meaning), the width 64 for a byte of 192 or more."""
    byte = draw.int(0, 255)
    return byte % kinds, 64 if byte >= 192 else 32

# values that matter: the int32 limits and just past, the int cache edge, digit edges
EDGES = [0, 1, -1, 255, 2**15, 2**18 - 1, 2**18, 2**30 - 1, 2**30, -(2**30), -(2**30) - 1,
         INT32_MAX, INT32_MAX + 1, INT32_MIN, INT32_MIN - 1, 2**32 - 1, 2**32, 2**63 - 1,
         -(2**63), 2**64 - 1, 2**64, -(2**64), 10**30]
ARRAY_CODES = "bBhHiIlLqQ"
#: the values each array typecode holds
ARRAY_RANGES = {code: (-(1 << (8 * array.array(code).itemsize - 1)) if code.islower() else 0,
                       (1 << (8 * array.array(code).itemsize - code.islower())) - 1)
                for code in ARRAY_CODES}
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


NOT_INTEGERS: list[Any] = [1.5, None, "7", b"7", [1], np.float64(2.0), object()]
# (what is not a sequence of ids, the error it must raise)
NOT_SEQUENCES: list[tuple[Any, Allow]] = [
    *((bad, Allow(TypeError, f"ids must be a sequence of integers, not {name}"))
      for bad, name in [("123", "str"), (b"1234", "bytes"), (bytearray(4), "bytearray"),
                        (5, "int"), (None, "NoneType"), (2.5, "float")]),
    (np.zeros((2, 2), np.int32), Allow(ValueError, "must be one-dimensional, not 2-")),
    (np.int32(3), Allow(ValueError, "must be one-dimensional, not 0-")),
    (np.array([1.0]), Allow(TypeError, "must hold integers, not format 'd'")),
    (np.array([True]), Allow(TypeError, "must hold integers, not format '?'")),
    (memoryview(b"abcd").cast("c"), Allow(TypeError, "must hold integers, not format 'c'")),
]


def draw_values(draw: Draw) -> list[int]:
    return [draw_value(draw) for _ in range(draw.int(0, 40))]


class Expected(NamedTuple):
    """What pack_ids may do with one drawn argument."""

    allowed: list[Allow]  # the exceptions it may raise
    must_raise: bool
    values: list[bytes]  # the results it may return (with must_raise False)


def first_overflow(values: list[Any], stop: int | None = None, width: int = 32) -> int | None:
    """The index of the first int outside the width in ``values[:stop]``, or None."""
    low, high, _ = RANGES[width]
    for i, v in enumerate(values[:stop]):
        if type(v) is int and not low <= v <= high:
            return i
    return None


def overflow(values: list[int], i: int, width: int = 32) -> Allow:
    return Allow(OverflowError, f"ids[{i}] = {values[i]} is outside the int{width} range")


def pack(values: list[int], width: int = 32) -> bytes:
    return struct.pack(f"<{len(values)}{RANGES[width][2]}", *values)


def packs(values: list[int], width: int = 32) -> Expected:
    """The outcome for plain ints: struct's packing, or the first value outside the width."""
    i = first_overflow(values, None, width)
    if i is not None:
        return Expected([overflow(values, i, width)], True, [])
    return Expected([], False, [pack(values, width)])


def build_ids(draw: Draw, kind: int, values: list[int],
              width: int = 32) -> tuple[Callable[[], Any], Expected]:
    """A factory for a fresh ``ids`` argument (hostile ones are consumed) and the outcome
    the contract allows for it at ``width``."""
    if kind == 0:
        return (lambda: list(values)), packs(values, width)
    if kind == 1:
        return (lambda: tuple(values)), packs(values, width)
    if kind == 2:
        return (lambda: iter(values)), packs(values, width)
    if kind == 3:
        return (lambda: [Index(v) for v in values]), packs(values, width)
    if kind == 4:
        code = draw.choice(ARRAY_CODES)
        low, high = ARRAY_RANGES[code]
        fitting = [v for v in values if low <= v <= high]
        return (lambda: array.array(code, fitting)), packs(fitting, width)
    if kind == 5:
        dtype = np.dtype(draw.choice(DTYPES)).newbyteorder(draw.choice("<>="))
        info = np.iinfo(dtype)
        kept = [v for v in values if info.min <= v <= info.max]
        step = draw.choice([1, 1, 2, 3, -1, -2, -5])
        arr = np.array(kept, dtype=dtype)[::step]
        return (lambda: arr), packs([int(v) for v in arr], width)
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
        return (lambda: view), packs(list(view), width)
    if kind == 7:  # hostile items at a drawn position
        where = draw.int(0, len(values))
        action = draw.int(0, 4)

        def hostile() -> list[Any]:
            victim: list[Any] = list(values)
            item: Any = Raiser() if action == 4 else Mutator(victim, action, 7)
            victim.insert(where, item)
            return victim

        return hostile, hostile_outcome(values, where, action, width)
    if kind == 8:  # not integers at all
        bad = draw.choice(NOT_INTEGERS)
        where = draw.int(0, len(values))
        i = first_overflow(values, where, width)
        if i is not None:
            return (lambda: values[:where] + [bad] + values[where:]), \
                Expected([overflow(values, i, width)], True, [])
        message = f"ids[{where}] must be an integer, not {type(bad).__name__}"
        return (lambda: values[:where] + [bad] + values[where:]), \
            Expected([Allow(TypeError, message, "==")], True, [])
    if kind == 9:  # not sequences of ids
        bad, error = draw.choice(NOT_SEQUENCES)
        return (lambda: bad), Expected([error], True, [])
    if kind == 10:  # numpy scalars as items (numpy's int64 cannot hold the others)
        kept = [v for v in values if -(2**63) <= v < 2**63]
        return (lambda: [np.int64(v) for v in kept]), packs(kept, width)
    return (lambda: (v for v in values)), packs(values, width)


def hostile_outcome(values: list[int], where: int, action: int, width: int = 32) -> Expected:
    """``values`` with an item at ``where`` whose ``__index__`` raises (action 4) or changes
    the list (0 clear, 1 grow, 3 shrink: a RuntimeError; 2: the last item replaced by
    2**40, same size) and returns 7. The first problem in index order wins; after a resize,
    which of the resize or a later value outside the width is seen first is not said."""
    i = first_overflow(values, where, width)
    if i is not None:  # before the hostile item is reached
        return Expected([overflow(values, i, width)], True, [])
    if action == 4:
        return Expected([Allow(HostileError, "__index__ raised", "==")], True, [])
    if action != 2:
        return Expected([RESIZED, any_overflow(width)], True, [])
    victim = values[:where] + [7] + values[where:]
    if where == len(values):  # it replaces itself, already read
        return packs(victim, width)
    # the last item, read after the hostile one, is now 2**40: an OverflowError at int32
    # (or the old value, for a twin that read it before), the new one at int64
    candidates = [victim, victim[:-1] + [2**40]] if width == 64 else [victim]
    return Expected([any_overflow(width)], False,
                    [pack(v, width) for v in candidates if first_overflow(v, None, width) is None])


def draw_data(draw: Draw, width: int = 32) -> tuple[Callable[[], Any], bytes, list[Allow]]:
    """A factory for unpack_ids' argument, the bytes it holds and the errors it must raise
    (a refusal of its type, or a length that is not a multiple of 4, 8 at width 64)."""
    kind = draw.int(0, 5)
    raw = draw.rest()
    if kind == 0:
        make: Callable[[], Any] = lambda: raw  # noqa: E731
    elif kind == 1:
        make = lambda: bytearray(raw)  # noqa: E731
    elif kind == 2:
        make = lambda: memoryview(raw)  # noqa: E731
    elif kind == 3:  # a numpy byte view, contiguous
        make = lambda: np.frombuffer(raw, np.uint8)  # noqa: E731
    elif kind == 4:  # a strided view: contiguous only when it holds one byte or none
        if len(raw) > 2:
            return (lambda: memoryview(raw)[::2]), raw, \
                [Allow(TypeError, "must be a contiguous bytes-like object")]
        raw = raw[::2]
        make = lambda: memoryview(raw)[::2]  # noqa: E731
    else:  # str is text, not data
        return (lambda: raw.decode("latin-1")), raw, \
            [Allow(TypeError, "must be a bytes-like object, not str")]
    size = width // 8
    if len(raw) % size:
        return make, raw, [Allow(ValueError, f"int{width} data must be a multiple of {size} "
                                             f"bytes long, got {len(raw)} ")]
    return make, raw, []


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    kind, width = draw_kind(draw, 12)
    values = draw_values(draw)
    make_ids, expected = build_ids(draw, kind, values, width)
    packed = same_outcome(TWINS, lambda twin: twin.pack_ids(make_ids(), width=width),
                          expected.allowed, f"pack_ids kind {kind} width {width}",
                          expected.must_raise)
    if not isinstance(packed, Raised) and packed not in expected.values:
        fail(f"pack_ids kind {kind} width {width}: {packed!r}, expected {expected.values} "
             f"({values})")

    make_data, raw, errors = draw_data(draw, width)
    unpacked = same_outcome(TWINS, lambda twin: twin.unpack_ids(make_data(), width=width),
                            errors, f"unpack_ids width {width}", bool(errors))
    code = RANGES[width][2]
    if not errors and unpacked != list(struct.unpack(f"<{len(raw) // (width // 8)}{code}",
                                                     raw)):
        fail(f"unpack_ids({raw!r}, width={width}) -> {unpacked!r}")


if __name__ == "__main__":
    fuzz_main("ids", test_one_input)
    sys.exit(0)
