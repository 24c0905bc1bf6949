"""The values of ``compact_ids``' pickle format: what a compact value is on its way into a
pickle (``_CompactIds``, ``_HeldRef``) and what it unpickles through (``_ids_from_int32``,
``_held_ids_from_int32``, the latter making a ``_HeldIds`` placeholder).

The two functions are named ``tokcore.pickling.<name>`` in every pickle: their
``__module__`` says so, and ``tokcore.pickling`` imports them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from operator import index as _index
from types import ModuleType
from typing import Any, overload

from ..ids import _pack
from ..ids._pack_py import ID_BYTES, length_error

#: the token-id codec in use: the dispatched twin (tests and benchmarks swap in either one)
_codec: ModuleType = _pack

#: the module the pickle format names
FORMAT_MODULE = "tokcore.pickling"


def _ids_from_int32(data: bytes) -> list[int]:
    """What an eager compact value unpickles through. Its name is part of the pickle format."""
    ids: list[int] = _codec.unpack_ids(data)
    return ids


def _held_ids_from_int32(data: bytes) -> _HeldIds | list[int]:
    """What a lazy compact value unpickles through: a placeholder holding ``data``.

    Its name is part of the pickle format. ``data`` is checked here, so a damaged pickle
    fails at load, never at the first read. A payload that is not ``bytes`` (a hand-made
    pickle) is unpacked at once, with ``unpack_ids``' checks.
    """
    if type(data) is bytes:
        if len(data) % ID_BYTES:
            raise length_error(len(data))
        return _HeldIds(data)
    return _ids_from_int32(data)


class _HeldIds(Sequence[int]):
    """Placeholder for a lazy attribute's list: the int32 bytes it came as.

    Only tokcore's descriptors and ``_LazyDict`` normally see it. A reader whose class is not
    decorated gets it as the attribute's value: a read-only sequence of the ids, which pickles
    again as the same bytes.
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
        return _held_ids_from_int32, (self.data,)

    def __copy__(self) -> _HeldIds:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _HeldIds:
        return _HeldIds(self.data)  # the bytes are immutable: shared, a placeholder of its own

    def __len__(self) -> int:
        return len(self.data) // ID_BYTES

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            ids: list[int] = _codec.unpack_ids(self.data)
            return ids[index]
        position = _index(index)
        size = len(self)
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError("held ids index out of range")
        start = position * ID_BYTES
        return int.from_bytes(self.data[start:start + ID_BYTES], "little", signed=True)

    def __iter__(self) -> Iterator[int]:
        return iter(_codec.unpack_ids(self.data))

    def __eq__(self, other: object) -> bool:
        if type(other) is _HeldIds:
            return self.data == other.data
        if isinstance(other, list):
            return bool(_codec.unpack_ids(self.data) == other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<held int32 ids: {len(self)} ids>"


class _CompactIds:
    """A flat int32 id sequence on its way into a pickle."""

    __slots__ = ("value", "data", "lazy")

    def __init__(self, value: list[int] | tuple[int, ...], data: bytes, lazy: bool = False) -> None:
        self.value = value  # the original object, for copy.copy
        self.data = data
        self.lazy = lazy

    def __reduce__(self) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
        return (_held_ids_from_int32 if self.lazy else _ids_from_int32), (self.data,)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(self.value, memo)

    def __repr__(self) -> str:
        return f"<compact int32 ids: {len(self.data) // ID_BYTES} ids>"


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
        return (_held_ids_from_int32 if self.lazy else _ids_from_int32), (self.held.data,)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        if self.lazy:
            return _HeldIds(self.held.data)
        return _codec.unpack_ids(self.held.data)

    def __repr__(self) -> str:
        return f"<held int32 ids: {len(self.held)} ids>"


_ids_from_int32.__module__ = _held_ids_from_int32.__module__ = FORMAT_MODULE

#: the types a state may carry for a compact value
MARKERS = (_CompactIds, _HeldRef, _HeldIds)


def holds(values: Any) -> bool:
    """Whether one of ``values`` is a held placeholder."""
    return any(type(value) is _HeldIds for value in values)
