"""The values of ``compact_ids``' pickle format: what a compact value is on its way into a
pickle (``_CompactIds``, ``_HeldRef``) and what it unpickles through (``_ids_from_int32``,
``_held_ids_from_int32``, the latter making a ``_HeldIds`` placeholder; for ids outside
int32, ``_ids_from_int64`` and ``_held_ids_from_int64``).

The four functions are named ``tokcore.pickling.<name>`` in every pickle: their
``__module__`` says so, and ``tokcore.pickling`` imports them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from operator import index as _index
from types import ModuleType
from typing import Any, overload

from ..ids import _pack
from ..ids._pack_py import length_error
from ..ids._width import INT32, INT64, IdWidth

#: the token-id codec in use: the dispatched twin (tests and benchmarks swap in either one)
_codec: ModuleType = _pack

#: the module the pickle format names
FORMAT_MODULE = "tokcore.pickling"


def _ids_from_int32(data: bytes) -> list[int]:
    """What an eager compact value unpickles through. Its name is part of the pickle format."""
    ids: list[int] = _codec.unpack_ids(data)
    return ids


def _ids_from_int64(data: bytes) -> list[int]:
    """``_ids_from_int32`` for ids that do not all fit int32 (little-endian int64 bytes)."""
    ids: list[int] = _codec.unpack_ids(data, width=64)
    return ids


def _held(data: bytes, width: IdWidth) -> _HeldIds | list[int]:
    if type(data) is bytes:
        if len(data) % width.size:
            raise length_error(len(data), width)
        return _HeldIds(data, width)
    return _codec.unpack_ids(data, width=width.bits)  # type: ignore[no-any-return]


def _held_ids_from_int32(data: bytes) -> _HeldIds | list[int]:
    """What a lazy compact value unpickles through: a placeholder holding ``data``.

    Its name is part of the pickle format. ``data`` is checked here, so a damaged pickle
    fails at load, never at the first read. A payload that is not ``bytes`` (a hand-made
    pickle) is unpacked at once, with ``unpack_ids``' checks.
    """
    return _held(data, INT32)


def _held_ids_from_int64(data: bytes) -> _HeldIds | list[int]:
    """``_held_ids_from_int32`` for ids that do not all fit int32 (int64 bytes)."""
    return _held(data, INT64)


class _HeldIds(Sequence[int]):
    """Placeholder for a lazy attribute's list: the int32 (or int64) bytes it came as.

    Only tokcore's descriptors and ``_LazyDict`` normally see it. A reader whose class is not
    decorated gets it as the attribute's value: a read-only sequence of the ids, which pickles
    again as the same bytes.
    """

    __slots__ = ("data", "width")

    def __init__(self, data: bytes, width: IdWidth = INT32) -> None:
        self.data = data
        self.width = width

    def ids(self) -> list[int]:
        """The list of the held ids (a new one each time)."""
        if self.width is INT32:
            ids: list[int] = _codec.unpack_ids(self.data)
        else:
            ids = _codec.unpack_ids(self.data, width=self.width.bits)
        return ids

    def __reduce__(self) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
        return unpickler(True, self.width), (self.data,)

    def __copy__(self) -> _HeldIds:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _HeldIds:
        # the bytes are immutable: shared, a placeholder of its own
        return _HeldIds(self.data, self.width)

    def __len__(self) -> int:
        return len(self.data) // self.width.size

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return self.ids()[index]
        position = _index(index)
        size = len(self)
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError("held ids index out of range")
        start = position * self.width.size
        return int.from_bytes(self.data[start:start + self.width.size], "little", signed=True)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids())

    def __eq__(self, other: object) -> bool:
        if type(other) is _HeldIds:
            return self.data == other.data and self.width == other.width
        if isinstance(other, list):
            return self.ids() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<held {self.width.name} ids: {len(self)} ids>"


class _CompactIds:
    """A flat id sequence on its way into a pickle, as int32 (or int64) bytes."""

    __slots__ = ("value", "data", "lazy", "width")

    def __init__(self, value: list[int] | tuple[int, ...], data: bytes, lazy: bool = False,
                 width: IdWidth = INT32) -> None:
        self.value = value  # the original object, for copy.copy
        self.data = data
        self.lazy = lazy
        self.width = width

    def __reduce__(self) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
        return unpickler(self.lazy, self.width), (self.data,)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(self.value, memo)

    def __repr__(self) -> str:
        return f"<compact {self.width.name} ids: {len(self.data) // self.width.size} ids>"


class _HeldRef:
    """A held placeholder of a live object on its way into a pickle (or a copy).

    Pickled, it is the held bytes as they are. ``copy.copy`` resolves it to the owner's list
    (built then, shared by both objects, as a list attribute is); ``copy.deepcopy`` to a new
    placeholder of the same bytes.
    """

    __slots__ = ("held", "owner", "lazy")

    def __init__(self, held: _HeldIds, owner: object, lazy: bool) -> None:
        self.held = held
        self.owner = owner
        self.lazy = lazy

    def __reduce__(self) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
        return unpickler(self.lazy, self.held.width), (self.held.data,)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        if self.lazy:
            return _HeldIds(self.held.data, self.held.width)
        return self.held.ids()

    def __repr__(self) -> str:
        return f"<held {self.held.width.name} ids: {len(self.held)} ids>"


#: the functions of the pickle format, by (lazy, width): int32 bytes as every pickle of
#: 0.1.0 has them, int64 bytes for ids that do not all fit int32
UNPICKLERS: dict[tuple[bool, int], Callable[[bytes], Any]] = {
    (False, 32): _ids_from_int32, (True, 32): _held_ids_from_int32,
    (False, 64): _ids_from_int64, (True, 64): _held_ids_from_int64,
}
for _function in UNPICKLERS.values():
    _function.__module__ = FORMAT_MODULE
del _function


def unpickler(lazy: bool, width: IdWidth) -> Callable[[bytes], Any]:
    """The function a compact value of ``width`` pickles as a call of."""
    return UNPICKLERS[lazy, width.bits]

#: the types a state may carry for a compact value
MARKERS = (_CompactIds, _HeldRef, _HeldIds)


def holds(values: Any) -> bool:
    """Whether one of ``values`` is a held placeholder."""
    return any(type(value) is _HeldIds for value in values)
