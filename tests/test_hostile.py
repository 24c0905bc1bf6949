"""Hostile input: whatever a peer or a buggy caller sends, tokcore raises the contract's error
(or returns the right answer), the same in both twins, and never crashes.

Run under ``make sanitize`` too, where a read past a buffer or of freed memory aborts.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tokcore._backend import NO_EXTENSIONS

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Hostile(Exception):
    pass


def outcome(call: Callable[[], Any]) -> Any:
    """A call's result, or the type of the exception it raised."""
    try:
        return call()
    except Exception as exc:
        return type(exc)


def twins(name: str) -> list[ModuleType]:
    mods = [importlib.import_module(f"tokcore._{name}_py")]
    if not NO_EXTENSIONS:
        mods.append(importlib.import_module(f"tokcore._{name}_c"))
    return mods


def same_everywhere(name: str, call: Callable[[ModuleType], Any],
                    allowed: tuple[type[BaseException], ...]) -> Any:
    """``call`` on each twin: one outcome, and an exception only of the ``allowed`` types."""
    results = [outcome(lambda m=m: call(m)) for m in twins(name)]
    for result in results:
        if isinstance(result, type):
            assert issubclass(result, allowed), f"{result.__name__} is outside the contract"
    assert all(r == results[0] and type(r) is type(results[0]) for r in results), results
    return results[0]


# --- token ids: sequences whose __index__ raises or mutates --------------------------------

class Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __index__(self) -> int:
        raise self.exc


class Mutates:
    """An ``__index__`` that does something to the list being packed, then returns 5."""

    def __init__(self, victim: list[Any], action: str) -> None:
        self.victim, self.action = victim, action

    def __index__(self) -> int:
        v = self.victim
        if self.action == "clear":
            v.clear()
        elif self.action == "grow":
            v.extend(range(5000))
        elif self.action == "pop":
            v.pop()
        elif self.action == "insert":
            v.insert(0, 9)
        elif self.action == "replace-all":
            v[:] = [Raises(Hostile())] * len(v)  # same size, every item new (old ones freed)
        elif self.action == "replace-next":
            v[-1] = 10**20
        return 5


class ReturnsNonInt:
    def __index__(self) -> Any:
        return "7"


class ReturnsHuge:
    def __index__(self) -> int:
        return 2**100


@pytest.mark.parametrize("exc", [Hostile("x"), KeyError("k"), ValueError("v"),
                                 MemoryError(), RecursionError()])
@pytest.mark.parametrize("where", [0, 3, 7])
def test_index_that_raises(exc: BaseException, where: int) -> None:
    def call(m: ModuleType) -> Any:
        ids: list[Any] = list(range(8))
        ids[where] = Raises(exc)
        return m.pack_ids(ids)

    assert same_everywhere("ids", call, (type(exc),)) is type(exc)


@pytest.mark.parametrize("action", ["clear", "grow", "pop", "insert", "replace-all",
                                    "replace-next"])
@pytest.mark.parametrize("where", [0, 3, 7])
@pytest.mark.parametrize("container", ["list", "tuple-of-list-items"])
def test_index_that_mutates(action: str, where: int, container: str) -> None:
    def call(m: ModuleType) -> Any:
        victim: list[Any] = list(range(8))
        victim[where] = Mutates(victim, action)
        return m.pack_ids(victim if container == "list" else tuple(victim))

    result = same_everywhere("ids", call, (RuntimeError, OverflowError, Hostile))
    if container == "tuple-of-list-items":  # the tuple itself cannot change
        assert result == struct.pack("<8i", *[5 if i == where else i for i in range(8)])


@pytest.mark.parametrize("item, error", [(ReturnsNonInt(), TypeError),
                                         (ReturnsHuge(), OverflowError)])
def test_index_that_returns_nonsense(item: Any, error: type[BaseException]) -> None:
    assert same_everywhere("ids", lambda m: m.pack_ids([1, item]), (error,)) is error


def test_iterator_that_raises_midway() -> None:
    def gen() -> Any:
        yield 1
        raise Hostile("midway")

    assert same_everywhere("ids", lambda m: m.pack_ids(gen()), (Hostile,)) is Hostile


class LyingLength:
    def __len__(self) -> int:
        return 10**9

    def __iter__(self) -> Any:
        return iter([1, 2, 3])


def test_length_that_lies() -> None:
    assert same_everywhere("ids", lambda m: m.pack_ids(LyingLength()), ()) == \
        struct.pack("<3i", 1, 2, 3)


# --- token ids: numpy arrays of every integer dtype, any stride, the int32 edges ----------

DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"]
EDGES = [0, 1, -1, INT32_MAX - 1, INT32_MAX, INT32_MAX + 1, INT32_MIN + 1, INT32_MIN,
         INT32_MIN - 1, 2**32 - 1, 2**32, 2**63 - 1, -(2**63), 2**64 - 1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("step", [1, -1, 2, -3])
def test_every_dtype_stride_and_edge(dtype: str, order: str, step: int) -> None:
    dt = np.dtype(dtype).newbyteorder(order)
    info = np.iinfo(dt)
    for edge in EDGES:
        if not info.min <= edge <= info.max:
            continue
        arr = np.array([edge, 7, edge, 9, edge], dtype=dt)[::step]
        values = [int(v) for v in arr]
        result = same_everywhere("ids", lambda m, a=arr: m.pack_ids(a), (OverflowError,))
        if INT32_MIN <= edge <= INT32_MAX:
            assert result == struct.pack(f"<{len(values)}i", *values), (dtype, edge)
        else:
            assert result is OverflowError, (dtype, order, step, edge)
            for m in twins("ids"):  # the message names the first bad index and its value
                with pytest.raises(OverflowError, match=rf"ids\[{values.index(edge)}\] = {edge}\b"):
                    m.pack_ids(arr)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_and_empty_buffers(dtype: str) -> None:
    values = np.arange(-3, 50, dtype=dtype) if dtype[0] == "i" else np.arange(50, dtype=dtype)
    raw = b"\0" + values.tobytes()
    unaligned = np.frombuffer(raw, dtype=dtype, offset=1)  # every item straddles a boundary
    assert same_everywhere("ids", lambda m: m.pack_ids(unaligned), ()) == le32(values)
    empty = np.zeros(0, dtype)[::-1]
    assert same_everywhere("ids", lambda m: m.pack_ids(empty), ()) == b""


@pytest.mark.parametrize("bad", [np.zeros(3, "f2"), np.zeros(3, "?"), np.zeros(3, "c8"),
                                 np.zeros(3, "M8[s]"), np.zeros(3, "m8[s]"), np.zeros(3, "O"),
                                 np.zeros(3, "V4"), np.zeros(3, "U1"),
                                 np.zeros((3, 2), "i4")[:, 0], np.zeros((), "i4"),
                                 np.zeros((2, 3), "i4").T])
def test_buffers_that_are_not_id_vectors(bad: Any) -> None:
    result = same_everywhere("ids", lambda m: m.pack_ids(bad), (TypeError, ValueError))
    if isinstance(result, bytes):  # a strided column of a 2-D array is a 1-D view: fine
        assert result == le32(bad)


def le32(values: Any) -> bytes:
    return np.asarray(values, dtype="<i4").tobytes()


# --- token ids: data for unpack_ids --------------------------------------------------------

@pytest.mark.parametrize("data", [b"\0" * 3, b"\xff" * 5, b"\0\0\0\0\0", bytearray(7),
                                  memoryview(b"\0" * 9), np.zeros(3, np.uint8)])
def test_unpack_bad_lengths(data: Any) -> None:
    assert same_everywhere("ids", lambda m: m.unpack_ids(data), (ValueError,)) is ValueError


@pytest.mark.parametrize("data", ["", "abcd", 0, None, [0, 0, 0, 0], np.zeros(8, np.uint8)[::2],
                                  np.zeros((4, 4), np.uint8)[:, 1]])
def test_unpack_not_data(data: Any) -> None:
    assert same_everywhere("ids", lambda m: m.unpack_ids(data), (TypeError,)) is TypeError


@pytest.mark.parametrize("data", [memoryview(b"")[::2], memoryview(b"abcdefgh")[::8],
                                  np.zeros(0, np.uint8)[::-1]])
def test_unpack_views_that_hold_at_most_one_item(data: Any) -> None:
    """Found by fuzzing (fuzz/corpus/ids): an empty strided view is contiguous to the buffer
    protocol, so the Cython twin returned [] where the Python twin raised TypeError."""
    expected = [] if memoryview(data).nbytes == 0 else ValueError
    assert same_everywhere("ids", lambda m: m.unpack_ids(data), (ValueError,)) == expected


def test_unpack_nul_and_high_bytes() -> None:
    data = b"\0\0\0\0\xff\xff\xff\xff\0\0\0\x80\xff\xff\xff\x7f"
    assert same_everywhere("ids", lambda m: m.unpack_ids(data), ()) == \
        [0, -1, INT32_MIN, INT32_MAX]
