"""pack_ids / unpack_ids on both twins, against struct, array and numpy as oracles."""

from __future__ import annotations

import array
import enum
import re
import struct
from collections import deque
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from _index_objects import Index, Resizer
from _twins import SHARED_VIEW, twins
from hypothesis import given
from hypothesis import strategies as st

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
int32s = st.integers(INT32_MIN, INT32_MAX)
id_lists = st.lists(int32s, max_size=300)


def oracle_pack(ids: list[int]) -> bytes:
    return struct.pack(f"<{len(ids)}i", *ids)


def oracle_unpack(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 4}i", data))


class Colour(enum.IntEnum):
    RED = 7


# --- round trips and oracles ---------------------------------------------------------------

@given(id_lists)
def test_pack_matches_struct(pack_twin: ModuleType, ids: list[int]) -> None:
    assert pack_twin.pack_ids(ids) == oracle_pack(ids)


@given(id_lists)
def test_round_trip(pack_twin: ModuleType, ids: list[int]) -> None:
    packed = pack_twin.pack_ids(ids)
    assert type(packed) is bytes
    out = pack_twin.unpack_ids(packed)
    assert out == ids
    assert all(type(v) is int for v in out)


@given(st.binary(max_size=400).map(lambda b: b[: len(b) // 4 * 4]))
def test_unpack_matches_struct(pack_twin: ModuleType, data: bytes) -> None:
    assert pack_twin.unpack_ids(data) == oracle_unpack(data)


@given(id_lists)
def test_twins_agree(pack_pair: tuple[ModuleType, ModuleType], ids: list[int]) -> None:
    c, py = pack_pair
    assert c.pack_ids(ids) == py.pack_ids(ids)
    assert c.unpack_ids(oracle_pack(ids)) == py.unpack_ids(oracle_pack(ids))


@given(st.lists(st.integers(0, 2**20), max_size=200))
def test_unpack_ids_above_and_below_the_int_cache(pack_twin: ModuleType, ids: list[int]) -> None:
    first = pack_twin.unpack_ids(oracle_pack(ids))
    second = pack_twin.unpack_ids(oracle_pack(ids))
    assert first == second == ids


def test_unpack_ids_every_length_around_the_read_ahead(pack_twin: ModuleType) -> None:
    # the Cython twin asks for ids up to 64 places ahead: each length up to twice that, with
    # ids inside the int cache, past it and negative, ends the look-ahead at a new place
    pattern = [5, 2**18 - 1, 2**18, -1, 151_999, 0, INT32_MAX, 300]
    for n in range(130):
        ids = [pattern[(i * 3 + n) % len(pattern)] for i in range(n)]
        assert pack_twin.unpack_ids(oracle_pack(ids)) == ids


def test_limits_and_specials(pack_twin: ModuleType) -> None:
    ids = [0, 1, -1, 255, 256, 257, -5, -6, 2**15, 2**16, 2**18 - 1, 2**18, 2**30 - 1, 2**30,
           -(2**30), -(2**30) - 1, INT32_MAX, INT32_MIN]
    assert pack_twin.pack_ids(ids) == oracle_pack(ids)
    assert pack_twin.unpack_ids(oracle_pack(ids)) == ids


def test_empty(pack_twin: ModuleType) -> None:
    assert pack_twin.pack_ids([]) == b""
    assert pack_twin.pack_ids(()) == b""
    assert pack_twin.pack_ids(np.array([], np.int64)) == b""
    assert pack_twin.unpack_ids(b"") == []


# --- the kinds of input pack_ids takes -----------------------------------------------------

@pytest.mark.parametrize("make", [
    list, tuple, iter, lambda ids: (i for i in ids),
    lambda ids: array.array("i", ids), lambda ids: array.array("q", ids),
    lambda ids: array.array("l", ids), lambda ids: memoryview(array.array("i", ids)),
    lambda ids: [Index(v) for v in ids], lambda ids: [np.int64(v) for v in ids],
    lambda ids: [np.uint32(v) if v >= 0 else np.int32(v) for v in ids],
], ids=["list", "tuple", "iter", "generator", "array-i", "array-q", "array-l",
        "memoryview", "__index__", "np.int64-items", "np-scalar-items"])
def test_kinds_of_input(pack_twin: ModuleType, make: Any) -> None:
    ids = [5, -3, 0, 151_999, INT32_MAX, INT32_MIN, 1000]
    assert pack_twin.pack_ids(make(ids)) == oracle_pack(ids)


def test_range_bool_and_int_subclasses(pack_twin: ModuleType) -> None:
    assert pack_twin.pack_ids(range(5)) == oracle_pack(list(range(5)))
    assert pack_twin.pack_ids([True, False, Colour.RED]) == oracle_pack([1, 0, 7])


class MyList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:  # iteration is what a subclass may redefine
        return iter([9, 9])


def test_list_subclass_is_iterated(pack_twin: ModuleType) -> None:
    assert pack_twin.pack_ids(MyList([1, 2])) == oracle_pack([9, 9])


INTEGER_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                  np.uint64, np.intp, np.uintp, np.longlong, np.ulonglong]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("order", ["<", ">"])
def test_numpy_dtypes_and_byte_orders(pack_twin: ModuleType, dtype: Any, order: str) -> None:
    info = np.iinfo(dtype)
    values = [0, 1, 100, int(min(info.max, INT32_MAX)), int(max(info.min, INT32_MIN))]
    arr = np.array(values, dtype=np.dtype(dtype).newbyteorder(order))
    assert pack_twin.pack_ids(arr) == np.asarray(arr, "<i4").tobytes()


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_strides(pack_twin: ModuleType, dtype: Any) -> None:
    base = np.arange(60, dtype=dtype)
    for view in (base[::3], base[::-1], base[::-7], base[5:6], base.reshape(6, 10)[:, 2]):
        assert pack_twin.pack_ids(view) == view.astype("<i4").tobytes()


@given(st.lists(int32s, max_size=100), st.integers(-5, 5).filter(bool))
def test_numpy_int64_matches_numpy(pack_twin: ModuleType, ids: list[int], step: int) -> None:
    arr = np.array(ids, dtype=np.int64)[::step]
    assert pack_twin.pack_ids(arr) == arr.astype("<i4").tobytes()


def test_large_buffer_drops_the_gil_and_stays_right(pack_twin: ModuleType) -> None:
    arr = np.arange(-50_000, 50_000, dtype=np.int64)  # 800 KB: the no-GIL path
    assert pack_twin.pack_ids(arr) == arr.astype("<i4").tobytes()
    assert pack_twin.pack_ids(arr[::-2]) == arr[::-2].astype("<i4").tobytes()


# --- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["abc", b"abc", bytearray(b"ab"), 5, None, 3.5, object()])
def test_not_a_sequence_of_ids(pack_twin: ModuleType, bad: Any) -> None:
    with pytest.raises(TypeError):
        pack_twin.pack_ids(bad)


@pytest.mark.parametrize("bad, position, kind", [
    ([1, 2, 3.0], 2, "float"), ([None], 0, "NoneType"), ((1, "2"), 1, "str"),
    ([1, [2]], 1, "list"), (deque([0, 0, 0, b"x"]), 3, "bytes"), ([np.float64(1)], 0, "float64"),
])
def test_type_error_names_the_index(pack_twin: ModuleType, bad: Any, position: int,
                                    kind: str) -> None:
    with pytest.raises(TypeError, match=rf"ids\[{position}\].*{kind}"):
        pack_twin.pack_ids(bad)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1, 2**63, -(2**64), 10**30])
@pytest.mark.parametrize("make", [list, tuple, lambda v: [Index(x) for x in v]])
def test_overflow_names_index_and_value(pack_twin: ModuleType, value: int, make: Any) -> None:
    with pytest.raises(OverflowError, match=rf"ids\[3\] = {value}\b"):
        pack_twin.pack_ids(make([0, 1, 2, value, 4]))


@pytest.mark.parametrize("dtype, value", [
    (np.int64, INT32_MAX + 1), (np.int64, INT32_MIN - 1), (np.uint32, INT32_MAX + 1),
    (np.uint64, 2**64 - 1), (np.int64, -(2**63)),
])
@pytest.mark.parametrize("order", ["<", ">"])
def test_buffer_overflow(pack_twin: ModuleType, dtype: Any, value: int, order: str) -> None:
    arr = np.array([1, 2, value], dtype=np.dtype(dtype).newbyteorder(order))
    with pytest.raises(OverflowError, match=rf"ids\[2\] = {value}\b"):
        pack_twin.pack_ids(arr)
    with pytest.raises(OverflowError, match=rf"ids\[0\] = {value}\b"):
        pack_twin.pack_ids(arr[::-1])


@SHARED_VIEW
@pytest.mark.parametrize("bad", [
    np.array([1.0, 2.0]), np.array([True, False]), np.zeros((2, 2), np.int32),
    np.array(["a"]), memoryview(b"abcd").cast("c"), array.array("d", [1.0]),
])
def test_bad_buffers(pack_twin: ModuleType, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        pack_twin.pack_ids(bad)
    expected = ValueError if getattr(bad, "ndim", 1) != 1 else TypeError
    assert caught.type is expected


# numpy dtypes that hold no integers: datetime64/timedelta64 arrays cannot even export a
# buffer (numpy raises ValueError from memoryview()), the others export a non-integer format
NOT_INT_DTYPES = ["M8[s]", "M8[ns]", "m8[s]", "m8[us]", object, "U3", "S3", "V4", bool,
                  np.float64, np.float16, np.complex128, "i4,i4"]


def dtype_label(dtype: Any) -> str:
    return str(np.dtype(dtype))


@pytest.mark.parametrize("dtype", NOT_INT_DTYPES, ids=dtype_label)
@pytest.mark.parametrize("size", [0, 1, 3])
def test_numpy_arrays_of_non_integers_are_a_type_error(pack_twin: ModuleType, dtype: Any,
                                                       size: int) -> None:
    arr = np.zeros(size, dtype)
    for bad in (arr, arr[::-1]):
        with pytest.raises(TypeError, match=re.escape(f"numpy dtype {np.dtype(dtype)}")):
            pack_twin.pack_ids(bad)


@pytest.mark.parametrize("dtype", ["M8[s]", "m8[s]"])
def test_unpack_ids_of_an_array_that_cannot_export_a_buffer(pack_twin: ModuleType,
                                                            dtype: str) -> None:
    with pytest.raises(TypeError, match=r"int32 data must be a bytes-like object, not ndarray "
                       r"\(numpy dtype (datetime|timedelta)64\[s\]\)"):
        pack_twin.unpack_ids(np.zeros(4, dtype))


@pytest.mark.parametrize("dtype", NOT_INT_DTYPES, ids=dtype_label)
def test_twins_raise_the_same_for_non_integer_arrays(pack_pair: tuple[ModuleType, ModuleType],
                                                     dtype: Any) -> None:
    arr = np.zeros(2, dtype)
    errors = []
    for pack in (*(m.pack_ids for m in pack_pair), *(m.ids_to_b64 for m in twins("b64"))):
        with pytest.raises(TypeError) as caught:
            pack(arr)
        errors.append((caught.type, str(caught.value)))
    assert len(set(errors)) == 1, errors


def test_index_that_raises_propagates(pack_twin: ModuleType) -> None:
    class Boom:
        def __index__(self) -> int:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        pack_twin.pack_ids([1, Boom()])


@pytest.mark.parametrize("n", [1, 3, 5, 4003])
def test_unpack_length_not_multiple_of_four(pack_twin: ModuleType, n: int) -> None:
    with pytest.raises(ValueError, match=rf"\b{n}\b"):
        pack_twin.unpack_ids(b"\0" * n)


@pytest.mark.parametrize("bad", ["abcd", 1234, None, [1, 2, 3, 4]])
def test_unpack_wrong_type(pack_twin: ModuleType, bad: Any) -> None:
    with pytest.raises(TypeError):
        pack_twin.unpack_ids(bad)


def test_unpack_non_contiguous_buffer(pack_twin: ModuleType) -> None:
    with pytest.raises(TypeError):
        pack_twin.unpack_ids(np.zeros(16, np.uint8)[::2])


@pytest.mark.parametrize("make", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, np.uint8),
                                  lambda b: np.frombuffer(b, np.int32)])
def test_unpack_bytes_like(pack_twin: ModuleType, make: Any) -> None:
    ids = [3, -1, 151_999, 0]
    assert pack_twin.unpack_ids(make(oracle_pack(ids))) == ids


# --- mutation during packing cannot crash --------------------------------------------------

@pytest.mark.parametrize("grow", [False, True])
@pytest.mark.parametrize("where", [0, 5, 9])
def test_list_mutated_by_index(pack_twin: ModuleType, grow: bool, where: int) -> None:
    victim: list[Any] = list(range(10))
    victim[where] = Resizer(victim, grow)
    with pytest.raises(RuntimeError, match="changed size"):
        pack_twin.pack_ids(victim)


def test_list_item_replaced_by_index_reads_no_freed_memory(pack_twin: ModuleType) -> None:
    victim: list[Any] = [0, 0, 0]

    class Replacer:
        def __index__(self) -> int:
            victim[1] = 10**6  # same size: the new item is read, the old one freed
            victim[2] = -(10**6)
            return 5

    victim[0] = Replacer()
    assert pack_twin.pack_ids(victim) == oracle_pack([5, 10**6, -(10**6)])


def test_tuple_item_whose_index_mutates_a_list_elsewhere(pack_twin: ModuleType) -> None:
    other: list[int] = []

    class Side:
        def __index__(self) -> int:
            other.append(1)
            return 2

    assert pack_twin.pack_ids((Side(), Side())) == oracle_pack([2, 2])
    assert len(other) >= 2


def test_wire_is_little_endian(pack_twin: ModuleType) -> None:
    """Whatever the host, the wire is little-endian: explicit bytes, no oracle."""
    wire = b"\x01\0\0\0\0\x01\0\0\xfe\xff\xff\xff"
    assert pack_twin.pack_ids([1, 256, -2]) == wire
    assert pack_twin.unpack_ids(wire) == [1, 256, -2]


# --- int64: width=64 -----------------------------------------------------------------------

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
int64s = st.integers(INT64_MIN, INT64_MAX)
#: where the widths' encodings and ranges change
EDGES64 = [0, 1, -1, INT32_MAX, INT32_MIN, 2**31, -(2**31) - 1, 2**32 - 1, 2**32, -(2**32),
           2**53 + 1, INT64_MAX, INT64_MIN, INT64_MIN + 1, 2**18 - 1, 2**18, 151_999]


def oracle_pack64(ids: list[int]) -> bytes:
    return struct.pack(f"<{len(ids)}q", *ids)


@given(st.lists(int64s, max_size=300))
def test_pack64_matches_struct_and_numpy(pack_twin: ModuleType, ids: list[int]) -> None:
    packed = pack_twin.pack_ids(ids, width=64)
    assert packed == oracle_pack64(ids) == np.asarray(ids, np.int64).tobytes()
    assert pack_twin.unpack_ids(packed, width=64) == ids
    assert pack_twin.pack_ids(np.asarray(ids, np.int64), width=64) == packed


@given(st.lists(int32s, max_size=100))
def test_widths_agree_within_int32(pack_twin: ModuleType, ids: list[int]) -> None:
    assert pack_twin.pack_ids(ids, width=64) == np.asarray(ids, "<i4").astype("<i8").tobytes()
    assert pack_twin.pack_ids(ids, width=32) == pack_twin.pack_ids(ids)


def test_pack64_edges(pack_twin: ModuleType) -> None:
    assert pack_twin.pack_ids(EDGES64, width=64) == oracle_pack64(EDGES64)
    assert pack_twin.unpack_ids(oracle_pack64(EDGES64), width=64) == EDGES64
    assert pack_twin.pack_ids((), width=64) == b"" and pack_twin.unpack_ids(b"", width=64) == []
    # LightLLM's regression value, and the read-ahead past every length up to twice it
    for n in range(130):
        ids = [EDGES64[(i * 3 + n) % len(EDGES64)] for i in range(n)]
        assert pack_twin.unpack_ids(oracle_pack64(ids), width=64) == ids


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("order", ["<", ">"])
def test_pack64_numpy_dtypes(pack_twin: ModuleType, dtype: Any, order: str) -> None:
    info = np.iinfo(dtype)
    values = [0, 1, int(min(info.max, INT64_MAX)), int(max(info.min, INT64_MIN))]
    arr = np.array(values, dtype=np.dtype(dtype).newbyteorder(order))
    assert pack_twin.pack_ids(arr, width=64) == np.asarray(arr, "<i8").tobytes()
    for view in (arr[::-1], arr[::2], np.repeat(arr, 3)[1::3]):
        assert pack_twin.pack_ids(view, width=64) == np.asarray(view, "<i8").tobytes()


def test_pack64_large_buffer_without_the_gil(pack_twin: ModuleType) -> None:
    arr = np.arange(-50_000, 50_000, dtype=np.int64) * (2**33)  # 800 KB: the no-GIL path
    assert pack_twin.pack_ids(arr, width=64) == arr.tobytes()
    assert pack_twin.pack_ids(arr[::-2], width=64) == arr[::-2].tobytes()
    assert pack_twin.pack_ids(arr.astype(np.uint32), width=64) == \
        arr.astype(np.uint32).astype("<i8").tobytes()


@pytest.mark.parametrize("value", [2**63, INT64_MIN - 1, 2**64, 10**30])
@pytest.mark.parametrize("make", [list, tuple, lambda v: [Index(x) for x in v]])
def test_pack64_overflow_names_index_and_value(pack_twin: ModuleType, value: int,
                                               make: Any) -> None:
    with pytest.raises(OverflowError) as caught:
        pack_twin.pack_ids(make([0, 2**40, -(2**40), value, 4]), width=64)
    assert str(caught.value) == (f"ids[3] = {value} is outside the int64 range "
                                 f"[{INT64_MIN}, {INT64_MAX}]")


@pytest.mark.parametrize("order", ["<", ">"])
def test_pack64_uint64_above_int64(pack_twin: ModuleType, order: str) -> None:
    arr = np.array([1, 2**63 - 1, 2**63], dtype=np.dtype(np.uint64).newbyteorder(order))
    with pytest.raises(OverflowError, match=rf"^ids\[2\] = {2**63} is outside the int64 range"):
        pack_twin.pack_ids(arr, width=64)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**32, INT64_MAX, INT64_MIN])
def test_int64_ids_at_the_default_width(pack_twin: ModuleType, value: int) -> None:
    """numpy's int64, the common input, at the default width: range-checked, the index named."""
    arr = np.array([5, 7, value], np.int64)
    with pytest.raises(OverflowError) as caught:
        pack_twin.pack_ids(arr)
    assert str(caught.value) == (f"ids[2] = {value} is outside the int32 range "
                                 f"[{INT32_MIN}, {INT32_MAX}]")
    with pytest.raises(OverflowError, match=rf"^ids\[2\] = {value} is outside the int32"):
        pack_twin.pack_ids([5, 7, value])


@pytest.mark.parametrize("width, error, message", [
    (16, ValueError, "width must be 32 or 64, not 16"),
    (0, ValueError, "width must be 32 or 64, not 0"),
    (2**100, ValueError, f"width must be 32 or 64, not {2**100}"),
    (True, TypeError, "width must be 32 or 64 (an int), not bool"),
    ("64", TypeError, "width must be 32 or 64 (an int), not str"),
    (64.0, TypeError, "width must be 32 or 64 (an int), not float"),
    (None, TypeError, "width must be 32 or 64 (an int), not NoneType"),
])
def test_a_bad_width(pack_twin: ModuleType, width: Any, error: type, message: str) -> None:
    for call in (lambda: pack_twin.pack_ids([1], width=width),
                 lambda: pack_twin.unpack_ids(b"", width=width),
                 lambda: pack_twin.pack_ids("not ids", width=width)):  # checked first
        with pytest.raises(error) as caught:
            call()
        assert str(caught.value) == message


def test_unpack64_errors(pack_twin: ModuleType) -> None:
    with pytest.raises(ValueError) as caught:
        pack_twin.unpack_ids(b"\0" * 12, width=64)
    assert str(caught.value) == ("int64 data must be a multiple of 8 bytes long, got 12 "
                                 "(4 trailing byte(s) at offset 8)")
    with pytest.raises(TypeError, match="^int64 data must be a bytes-like object, not str$"):
        pack_twin.unpack_ids("abcdefgh", width=64)
    with pytest.raises(TypeError, match="^int64 data must be a contiguous bytes-like object$"):
        pack_twin.unpack_ids(np.zeros(32, np.uint8)[::2], width=64)
    assert pack_twin.unpack_ids(np.array([2**40, -5], np.int64), width=64) == [2**40, -5]


@given(st.lists(int64s, max_size=80), st.integers(-5, 5).filter(bool))
def test_pack64_twins_agree(pack_pair: tuple[ModuleType, ModuleType], ids: list[int],
                            step: int) -> None:
    c, py = pack_pair
    arr = np.array(ids, np.int64)[::step]
    for arg in (ids, arr):
        assert c.pack_ids(arg, width=64) == py.pack_ids(arg, width=64)
        for width in (32, 64):
            try:
                expected: Any = py.pack_ids(arg, width=width)
            except OverflowError as exc:
                expected = str(exc)
            try:
                got: Any = c.pack_ids(arg, width=width)
            except OverflowError as exc:
                got = str(exc)
            assert got == expected


@pytest.mark.parametrize("grow", [False, True])
def test_pack64_list_mutated_by_index(pack_twin: ModuleType, grow: bool) -> None:
    victim: list[Any] = list(range(10))
    victim[4] = Resizer(victim, grow)
    with pytest.raises(RuntimeError, match="changed size"):
        pack_twin.pack_ids(victim, width=64)


def test_int64_array_narrowed_at_every_place(pack_twin: ModuleType) -> None:
    """A contiguous int64 array at the default width is narrowed eight ids a step: an id
    outside int32 at every place of a step and of the tail, each named by its index."""
    for n in range(0, 42):
        arr = (np.arange(n, dtype=np.int64) * 99_991) % 152_000 - 7
        assert pack_twin.pack_ids(arr) == arr.astype("<i4").tobytes()
        for at in range(n):
            for value in (2**31, -(2**31) - 1, 2**32, INT64_MIN, INT32_MAX + 2**32):
                bad = arr.copy()
                bad[at] = value
                with pytest.raises(OverflowError) as caught:
                    pack_twin.pack_ids(bad)
                assert str(caught.value).startswith(f"ids[{at}] = {value} is outside the int32")
    big = np.arange(70_000, dtype=np.int64)  # the no-GIL size
    big[69_999] = 2**40
    with pytest.raises(OverflowError, match=r"^ids\[69999\] = 1099511627776 "):
        pack_twin.pack_ids(big)
