"""``compact_ids``: pickle the token-id attributes of a class as int32 bytes.

A serving stack pickles request objects (broadcast to data-parallel ranks, IPC to workers)
that carry tens of thousands of token ids; pickle writes one opcode and one int object per id.
With ``@compact_ids("prompt_token_ids")`` the attribute travels as a single bytes object
(``pack_ids``) and comes back as a ``list[int]`` (``unpack_ids``). With
``@compact_ids("prompt_token_ids", lazy=True)`` it comes back *held*: the object keeps the
int32 bytes and builds the list on the attribute's first read, so a process that only
forwards the object, or hands the ids to C++ (``ids_buffer``), never makes an int.

How it works. The decorator gives the class a ``__getstate__`` that takes the state the class
would have pickled anyway (its own ``__getstate__``, or the default one: ``__dict__`` and
``__slots__`` values) and replaces each named value that is a flat list or tuple of int32s by
a ``_CompactIds`` marker. A marker pickles as a call: ``_ids_from_int32(<bytes>)`` for an
eager name, which the unpickler turns back into a list *before* any ``__setstate__`` runs (so
the receiving class, even an undecorated one, only ever sees plain lists), or
``_held_ids_from_int32(<bytes>)`` for a lazy name, which makes a ``_HeldIds`` placeholder
that only wraps the bytes. Those calls, references to private functions of this module, are
the markers in the pickle stream; no user value pickles like them. The decorator also gives
the class a ``__setstate__`` (wrapping the class's own, if any) that resolves markers left in
a state that never went through pickle (``copy.copy``) and installs placeholders.

Laziness. A lazy name gets a data descriptor on the class (``_lazy``, a Cython twin and a
Python one): ``LazyAttr`` for an attribute kept in the instance ``__dict__``, ``LazySlot``
(wrapping the slot's member descriptor) for a ``__slots__`` attribute. The placeholder sits
where the list would be, in the same dict position or slot; the descriptor's first read
unpacks it and puts the list in its place (under a lock, so concurrent first reads all
return one list), and assignment and ``del`` work on that same place. An instance
``__dict__`` that holds a placeholder is a ``_LazyDict``, a dict whose Python-level reads
(``vars(obj)[name]``, ``items()``, ``dict(...)``, ``==``, ``repr``, ``copy``) see the list,
not the placeholder. While the decorator's ``__getstate__`` runs (and while ``ids_buffer``
reads), reads of that object's held values give the placeholders themselves ("raw mode", per
thread), so pickling it again sends the held bytes as they are.

What travels compact: a value whose type is exactly ``list`` or ``tuple`` and whose items
``pack_ids`` accepts and that fit int32, and a held placeholder. Anything else travels
unchanged, as pickle would send it: ``None``, nested lists, numpy arrays, ``array.array``,
list subclasses, lists with an item outside int32 or not an integer. Compact values come
back as a ``list`` of plain ints: a tuple comes back as a list, and ``bool`` or numpy integer
items as the ints they index to. A compact list is sent by value: if the same list object is
also referenced from elsewhere in what is pickled, the unpickled copies are two distinct
lists.

State shapes the decorator understands: a dict (attribute name -> value), the default
``(dict or None, slots dict)`` pair, and the field-value list of a frozen ``slots=True``
dataclass. A class whose own ``__getstate__`` returns anything else still pickles exactly
as before, without the compaction. Pickles made before the class was decorated still load.
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import sys
import threading
import weakref
from array import array
from collections.abc import Callable, Container, Iterator, Sequence
from operator import index as _index
from types import MemberDescriptorType, ModuleType
from typing import Any, NamedTuple, TypeVar, overload

from . import _ids, _lazy
from ._ids_py import ID_BYTES, LITTLE_ENDIAN_HOST, length_error
from ._lazy_py import MISSING as _MISSING

_T = TypeVar("_T", bound=type)

# dataclasses gives frozen slots=True classes this __getstate__: a list of field values
_DATACLASS_GETSTATE = getattr(dataclasses, "_dataclass_getstate", None)
_OBJECT_GETSTATE = getattr(object, "__getstate__", None)  # Python 3.11+

#: the token-id codec in use: the dispatched twin (tests and benchmarks swap in either one)
_codec: ModuleType = _ids

_PACK_ERRORS = (TypeError, OverflowError, ValueError, RuntimeError)
#: memoryview format of a native int32 (``ids_buffer``)
_INT32_FORMAT = "i" if array("i").itemsize == ID_BYTES else "l"

_dict_get = dict.get
_dict_getitem = dict.__getitem__
_dict_setitem = dict.__setitem__
_dict_items = dict.items
_object_getattribute = object.__getattribute__
_object_setattr = object.__setattr__
_intern = sys.intern

#: serialises the swap of a placeholder for its list (never held while unpacking)
_swap_lock = threading.Lock()


# --- the pickle format: what a compact value unpickles through ----------------------------

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


# --- raw mode: reads that give the placeholders themselves ----------------------------------

_local = threading.local()


def _raw() -> tuple[object, object] | None:
    """``(object, its __dict__ or None)`` in raw mode in this thread, else None."""
    raw: tuple[object, object] | None = getattr(_local, "raw", None)
    return raw


def _enter_raw(obj: object) -> tuple[object, object] | None:
    previous = _raw()
    try:
        instance_dict = _object_getattribute(obj, "__dict__")
    except AttributeError:
        instance_dict = None
    _local.raw = (obj, instance_dict)
    return previous


def _exit_raw(previous: tuple[object, object] | None) -> None:
    _local.raw = previous


# --- where a held value lives: the instance __dict__ ------------------------------------------

def _list_in_dict(owner_dict: dict[Any, Any], key: Any, held: _HeldIds) -> Any:
    """The list for ``held`` at ``owner_dict[key]``: built, then swapped in unless another
    thread got there first (its list is returned then) or the value was replaced."""
    ids = _codec.unpack_ids(held.data)
    with _swap_lock:
        current = _dict_get(owner_dict, key, _MISSING)
        if current is held:
            _dict_setitem(owner_dict, key, ids)
            return ids
    if current is _MISSING:
        raise KeyError(key)
    if type(current) is _HeldIds:
        return _list_in_dict(owner_dict, key, current)
    return current


def _raw_dict(owner_dict: object) -> bool:
    """Whether ``owner_dict`` is the ``__dict__`` of the object in raw mode."""
    raw = _raw()
    return raw is not None and raw[1] is owner_dict


def _dict_value(owner_dict: dict[Any, Any], key: Any, value: Any) -> Any:
    """``value``, read from ``owner_dict[key]``, as a reader sees it."""
    if type(value) is _HeldIds and not _raw_dict(owner_dict):
        return _list_in_dict(owner_dict, key, value)
    return value


class _LazyDict(dict):  # type: ignore[type-arg]
    """An instance ``__dict__`` that may hold placeholders; its reads see lists.

    Attribute access never comes here (the descriptors read the dict's storage directly);
    these methods are what ``vars(obj)`` and ``obj.__dict__`` users call. ``__iter__`` is
    overridden only so that ``dict(d)``, ``{**d}`` and ``d.copy()`` take CPython's generic
    path, which reads each value through ``__getitem__``. Writes are dict's own.
    """

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        return _dict_value(self, key, _dict_getitem(self, key))

    def get(self, key: Any, default: Any = None) -> Any:
        value = _dict_get(self, key, _MISSING)
        return default if value is _MISSING else _dict_value(self, key, value)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = dict.setdefault(self, key, default)
        return _dict_value(self, key, value)

    def pop(self, key: Any, *default: Any) -> Any:
        value = dict.pop(self, key, *default)
        if type(value) is _HeldIds and not _raw_dict(self):
            return _codec.unpack_ids(value.data)
        return value

    def popitem(self) -> tuple[Any, Any]:
        key, value = dict.popitem(self)
        if type(value) is _HeldIds and not _raw_dict(self):
            value = _codec.unpack_ids(value.data)
        return key, value

    def _fill(self) -> None:
        if _raw_dict(self):
            return
        for key, value in list(_dict_items(self)):
            if type(value) is _HeldIds:
                try:
                    _list_in_dict(self, key, value)
                except KeyError:  # deleted meanwhile
                    pass

    def __iter__(self) -> Iterator[Any]:
        return dict.__iter__(self)

    def values(self) -> Any:
        self._fill()
        return dict.values(self)

    def items(self) -> Any:
        self._fill()
        return dict.items(self)

    def copy(self) -> dict[Any, Any]:
        return dict(self)  # the generic path: every value through __getitem__

    def __copy__(self) -> dict[Any, Any]:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return copy.deepcopy(self.copy(), memo)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return dict, (self.copy(),)

    def __eq__(self, other: object) -> bool:
        self._fill()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        self._fill()
        return dict.__ne__(self, other)

    __hash__ = None

    def __repr__(self) -> str:
        self._fill()
        return dict.__repr__(self)

    def __or__(self, other: Any) -> Any:
        self._fill()
        return dict.__or__(self, other)

    def __ror__(self, other: Any) -> Any:
        self._fill()
        return dict.__ror__(self, other)


def _instance_dict(obj: object) -> dict[Any, Any] | None:
    try:
        instance_dict: dict[Any, Any] = _object_getattribute(obj, "__dict__")
    except AttributeError:
        return None
    return instance_dict


def _set_lazy_dict(obj: object, state: Any) -> bool:
    """Pickle's default setting of a dict ``state`` into a fresh object, as one ``_LazyDict``
    (keys interned, as pickle does); False, doing nothing, for any other case."""
    if type(state) is not dict:
        return False
    instance_dict = _instance_dict(obj)
    if instance_dict:  # not fresh (its __new__ set something): the general path
        return False
    try:
        lazy_dict = _LazyDict(zip(map(_intern, state), state.values()))  # keys as pickle sets them
    except TypeError:  # a key that is not a str
        lazy_dict = _LazyDict(
            {_intern(key) if type(key) is str else key: value for key, value in state.items()})
    _object_setattr(obj, "__dict__", lazy_dict)
    return True


def _lazy_dict_of(obj: object) -> None:
    """Make ``obj``'s instance ``__dict__`` a ``_LazyDict`` (keeping what it holds)."""
    instance_dict = _instance_dict(obj)
    if instance_dict is not None and type(instance_dict) is not _LazyDict:
        _object_setattr(obj, "__dict__", _LazyDict(instance_dict))


# --- where a held value lives: a slot -----------------------------------------------------

def _list_in_slot(slot: Any, obj: object, held: _HeldIds) -> Any:
    """The list for ``held`` in ``slot`` of ``obj``, swapped in as ``_list_in_dict`` does."""
    ids = _codec.unpack_ids(held.data)
    member = slot.member
    with _swap_lock:
        try:
            current = member.__get__(obj)
        except AttributeError:
            current = _MISSING
        if current is held:
            member.__set__(obj, ids)
            return ids
    if current is _MISSING:
        return member.__get__(obj)  # deleted meanwhile: the member's own AttributeError
    if type(current) is _HeldIds:
        return _list_in_slot(slot, obj, current)
    return current


def _slot_value(slot: Any, obj: object, held: _HeldIds) -> Any:
    """What a read of ``slot`` that found ``held`` gives (a slot descriptor's ``on_held``)."""
    raw = _raw()
    if raw is not None and raw[0] is obj:
        return held
    return _list_in_slot(slot, obj, held)


# --- the descriptors of lazy names (_lazy_c, _lazy_py) ----------------------------------------

#: the twin whose descriptors the decorator puts on classes (tests swap in either one)
_descriptors: ModuleType = _lazy


def _descriptor_kind(value: object) -> str | None:
    """``"attr"`` or ``"slot"`` for a lazy descriptor of either twin, else None."""
    kind = type(value)
    if kind.__module__ in ("tokcore._lazy_py", "tokcore._lazy_c"):
        if kind.__name__ == "LazyAttr":
            return "attr"
        if kind.__name__ == "LazySlot":
            return "slot"
    return None


class _Layout(NamedTuple):
    """Where a type keeps its lazy names: those in ``__dict__`` and the slots."""

    in_dict: frozenset[str]
    slots: dict[str, Any]  # name -> its LazySlot


_layouts: weakref.WeakKeyDictionary[type, _Layout] = weakref.WeakKeyDictionary()
_NO_LAYOUT = _Layout(frozenset(), {})


_last_layout: tuple[type | None, _Layout] = (None, _NO_LAYOUT)  # the one most often asked


def _layout(cls: type) -> _Layout:
    """The lazy names of ``cls`` whose descriptor is what its attribute lookup finds."""
    global _last_layout
    last = _last_layout
    if last[0] is cls:
        return last[1]
    layout = _layouts.get(cls)
    if layout is None:
        seen: set[str] = set()
        in_dict: set[str] = set()
        slots: dict[str, Any] = {}
        for klass in cls.__mro__:
            # a copy, made in one C call: another thread's first pickle of the class may be
            # adding __slotnames__ to it meanwhile (copyreg caches it there)
            for key, value in vars(klass).copy().items():
                if key in seen:
                    continue
                seen.add(key)
                kind = _descriptor_kind(value)
                if kind == "attr":
                    in_dict.add(key)
                elif kind == "slot":
                    slots[key] = value
        layout = _Layout(frozenset(in_dict), slots) if in_dict or slots else _NO_LAYOUT
        _layouts[cls] = layout
    _last_layout = (cls, layout)
    return layout


def _list_of_held(owner: object, held: _HeldIds) -> Any:
    """The list of the attribute of ``owner`` that holds ``held`` (``copy.copy``)."""
    owner_dict = _instance_dict(owner)
    if owner_dict is not None:
        for key, value in list(_dict_items(owner_dict)):
            if value is held:
                try:
                    return _list_in_dict(owner_dict, key, held)
                except KeyError:
                    break
    for slot in _layout(type(owner)).slots.values():
        try:
            value = slot.member.__get__(owner)
        except AttributeError:
            continue
        if value is held:
            return _list_in_slot(slot, owner, held)
    return _codec.unpack_ids(held.data)  # no longer held there: the same ids, a new list


# --- state: compacting on the way out, resolving on the way in -------------------------------

_MARKERS = (_CompactIds, _HeldRef, _HeldIds)


def _holds(values: Any) -> bool:
    return any(type(value) is _HeldIds for value in values)


def _compact(value: object, owner: object = None, lazy: bool = False) -> object:
    """``value`` as a marker when it is a flat list or tuple of int32s or a held
    placeholder, else ``value``."""
    kind = type(value)
    if kind is _HeldIds:
        return _HeldRef(value, owner, lazy)  # type: ignore[arg-type]
    if kind is not list and kind is not tuple:
        return value
    try:
        data = _codec.pack_ids(value)
    except _PACK_ERRORS:
        return value  # not an int32 id sequence: pickle sends it as it is
    return _CompactIds(value, data, lazy)  # type: ignore[arg-type]


class _Plan(NamedTuple):
    """What a decorated class compacts and how it gets and sets its state."""

    names: tuple[str, ...]
    lazy: frozenset[str]
    own_getstate: Callable[[Any], Any] | None
    own_setstate: Callable[[Any, Any], None] | None
    by_field: bool


def _compact_dict(obj: object, state: dict[Any, Any], plan: _Plan) -> dict[Any, Any]:
    """A copy of ``state`` with the named values compacted (``state`` itself if none is)."""
    compacted = None
    if type(state) is _LazyDict:
        state = compacted = dict(_dict_items(state))  # its storage, placeholders included
    for name in plan.names:
        value = _dict_get(state, name, _MISSING)
        if value is not _MISSING:
            packed = _compact(value, obj, name in plan.lazy)
            if packed is not value:
                if compacted is None:
                    compacted = dict(state)  # never touch the object's own __dict__
                compacted[name] = packed
    return state if compacted is None else compacted


def _is_dict(state: Any) -> bool:
    return type(state) is dict or type(state) is _LazyDict


def _compact_state(obj: object, state: Any, plan: _Plan) -> Any:
    if _is_dict(state):
        return _compact_dict(obj, state, plan)
    if type(state) is tuple and len(state) == 2:
        dict_state, slot_state = state
        if (dict_state is None or _is_dict(dict_state)) and type(slot_state) is dict:
            new_dict = dict_state if dict_state is None else _compact_dict(obj, dict_state, plan)
            new_slots = _compact_dict(obj, slot_state, plan)
            if new_dict is not dict_state or new_slots is not slot_state:
                return (new_dict, new_slots)
        return state
    if plan.by_field and type(state) is list:  # a frozen slots=True dataclass: values by field
        fields = [f.name for f in dataclasses.fields(obj)]  # type: ignore[arg-type]
        if len(fields) != len(state):
            return state
        state = list(state)
        for position, field in enumerate(fields):
            if field in plan.names:
                state[position] = _compact(state[position], obj, field in plan.lazy)
        return state
    return state


def _resolve(value: object, keep: Container[Any], name: Any) -> object:
    """A value of an incoming state as it is to be set: markers (a state that skipped
    pickle) back to what they stand for, placeholders kept where ``name`` is held lazily."""
    kind = type(value)
    if kind is _CompactIds:
        return value.value  # type: ignore[attr-defined]
    if kind is _HeldRef:
        return _list_of_held(value.owner, value.held)  # type: ignore[attr-defined]
    if kind is _HeldIds and name not in keep:
        return _codec.unpack_ids(value.data)  # type: ignore[attr-defined]
    return value


def _resolve_dict(state: dict[Any, Any], keep: Container[Any]) -> tuple[dict[Any, Any], bool]:
    """``state`` resolved (itself when nothing changes) and whether it keeps a placeholder."""
    held = changed = False
    for key, value in state.items():
        kind = type(value)
        if kind is _HeldIds:
            if key in keep:
                held = True
            else:
                changed = True
        elif kind is _CompactIds or kind is _HeldRef:
            changed = True
    if changed:
        state = {key: _resolve(value, keep, key) for key, value in state.items()}
    return state, held


#: (state, a placeholder is to be set into the instance __dict__, one is to be set at all)
_Resolved = tuple[Any, bool, bool]


def _resolve_state(obj: object, state: Any, own_setstate: bool) -> _Resolved:
    """Markers back to values; placeholders kept only where the type holds them lazily.

    A dict state set by pickle's default rules goes into ``__dict__``, so only the names
    held there may keep a placeholder; the class's own ``__setstate__`` may set any lazy
    name through its descriptor.
    """
    layout = _layout(type(obj))
    slot_names = layout.slots
    keep = layout.in_dict.union(slot_names) if own_setstate else layout.in_dict
    if _is_dict(state):
        state, held = _resolve_dict(state, keep)
        return state, held, held
    if type(state) is tuple and len(state) == 2:
        dict_state, slot_state = state
        if (dict_state is None or _is_dict(dict_state)) and type(slot_state) is dict:
            new_dict, held_in_dict = (dict_state, False) if dict_state is None else (
                _resolve_dict(dict_state, keep))
            new_slots, held_in_slots = _resolve_dict(slot_state, slot_names)
            if new_dict is not dict_state or new_slots is not slot_state:
                state = (new_dict, new_slots)
            return state, held_in_dict, held_in_dict or held_in_slots
        return state, False, False
    if type(state) is list and any(type(value) in _MARKERS for value in state):
        # a frozen slots=True dataclass: values by field, set through the descriptors
        try:
            fields: list[Any] = [f.name for f in dataclasses.fields(obj)]  # type: ignore[arg-type]
        except TypeError:
            fields = []
        if len(fields) != len(state):
            fields = [None] * len(state)
        lazy = layout.in_dict.union(slot_names)
        state = [_resolve(value, lazy, field) for value, field in zip(state, fields)]
        held = _holds(state)
        return state, held and bool(layout.in_dict), held
    return state, False, False


def default_state(obj: object) -> Any:
    """The state pickle takes from an object whose class defines no ``__getstate__``.

    ``object.__getstate__`` on Python 3.11+; the same rules spelled out for 3.9 and 3.10:
    the instance ``__dict__`` (None when empty or absent), paired with a dict of the set
    ``__slots__`` values when there are any.
    """
    if _OBJECT_GETSTATE is not None:
        return _OBJECT_GETSTATE(obj)
    try:
        instance_dict = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        instance_dict = None
    state = instance_dict or None
    slots = {}
    for name in copyreg._slotnames(type(obj)):  # type: ignore[attr-defined]
        try:
            slots[name] = getattr(obj, name)
        except AttributeError:
            pass
    return (state, slots) if slots else state


def default_setstate(obj: object, state: Any) -> None:
    """What pickle and ``copy`` do with a state when the class has no ``__setstate__``."""
    slot_state = None
    if type(state) is tuple and len(state) == 2:
        state, slot_state = state
    if state:
        instance_dict = object.__getattribute__(obj, "__dict__")
        for key, value in state.items():
            instance_dict[sys.intern(key) if type(key) is str else key] = value
    if slot_state:
        for key, value in slot_state.items():
            setattr(obj, key, value)


def _adopt_placeholders(obj: object) -> None:
    """After a class's own ``__setstate__``: an instance ``__dict__`` it left holding a
    placeholder (``self.__dict__ = state``, ``self.ids = state["ids"]``) is made a
    ``_LazyDict``, so that reads through it see lists."""
    instance_dict = _instance_dict(obj)
    if type(instance_dict) is dict and _holds(instance_dict.values()):
        _object_setattr(obj, "__dict__", _LazyDict(instance_dict))


# --- public ----------------------------------------------------------------------------------

def ids_buffer(obj: object, name: str) -> memoryview:
    """The int32 ids of ``obj.<name>`` as a read-only buffer, without building a list.

    An attribute that ``compact_ids(..., lazy=True)`` still holds (unpickled and never read)
    gives a view of its held bytes: no copy, and the attribute stays held. Any other value
    (a list once read or set, a tuple, a numpy array: whatever ``pack_ids`` takes) is packed
    now. The buffer is a one-dimensional memoryview of native int32 (format ``"i"``), so
    ``np.frombuffer(buf, np.int32)``, ``np.asarray(buf)`` and C++ bindings that take an int32
    array (pybind11 ``py::array_t<int32_t>``, nanobind) view it without a copy. On a
    big-endian host the held bytes are byte-swapped into a copy first.

    Raises ``AttributeError`` when the attribute is absent and what ``pack_ids`` raises for
    a value that is not an int32 id sequence (``TypeError`` for None).
    """
    previous = _enter_raw(obj)
    try:
        value = getattr(obj, name)
    finally:
        _exit_raw(previous)
    data = value.data if type(value) is _HeldIds else _codec.pack_ids(value)
    if LITTLE_ENDIAN_HOST:
        return memoryview(data).cast(_INT32_FORMAT)  # type: ignore[call-overload,no-any-return]
    native = array(_INT32_FORMAT)
    native.frombytes(data)
    native.byteswap()
    return memoryview(native)


def _is_held(obj: object, name: str) -> bool:
    """Whether ``obj.<name>`` is still held (tests, benchmarks)."""
    previous = _enter_raw(obj)
    try:
        return type(getattr(obj, name, None)) is _HeldIds
    finally:
        _exit_raw(previous)


def _defines(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base other than ``object`` defines ``name``."""
    return any(name in vars(klass) for klass in cls.__mro__ if klass is not object)


def _lookup(cls: type, name: str) -> Any:
    """The class attribute ``name`` as attribute lookup finds it (unbound), or _MISSING."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return _MISSING


def _hold_lazily(cls: type, name: str) -> None:
    """Put the descriptor of lazy name ``name`` on ``cls`` (unless one already applies)."""
    found = _lookup(cls, name)
    if _descriptor_kind(found) is not None:
        return
    if type(found) is MemberDescriptorType:
        setattr(cls, name, _descriptors.LazySlot(name, found, _HeldIds, _slot_value))
        return
    kind = type(found)
    if found is not _MISSING and (hasattr(kind, "__set__") or hasattr(kind, "__delete__")):
        raise TypeError(
            f"compact_ids(lazy=True) cannot hold {cls.__qualname__}.{name}: the class "
            f"defines it as a {kind.__name__}, not an instance attribute"
        )
    if not cls.__dictoffset__:
        raise TypeError(
            f"compact_ids(lazy=True) cannot hold {cls.__qualname__}.{name}: it is not one of "
            "the class's __slots__ and its instances have no __dict__"
        )
    setattr(cls, name, _descriptors.LazyAttr(name, found, _HeldIds, _dict_value))


def compact_ids(*names: str, lazy: bool = False) -> Callable[[_T], _T]:
    """Class decorator: pickle the named token-id attributes as int32 bytes.

    Usage::

        @compact_ids("prompt_token_ids", "output_token_ids")
        @dataclass
        class Request:
            request_id: str
            prompt_token_ids: list[int]
            output_token_ids: list[int] | None = None

    Apply it on top of ``@dataclass``. With ``lazy=True`` a named attribute that travelled
    compact comes back holding its int32 bytes: the first read of the attribute builds the
    ``list[int]`` (later reads give that same list), and pickling the object again before
    that sends the bytes as they are; ``ids_buffer`` reads them without building the list.
    Such pickles load into a class decorated with ``compact_ids`` (lazy or not).

    Raises ``TypeError`` when no name is given, a name is not a ``str``, the class pickles
    through its own ``__reduce__``/``__reduce_ex__`` (which would bypass ``__getstate__``),
    or (lazy) a name is a property or similar on the class, or neither a slot nor storable
    in an instance ``__dict__``; ``ValueError`` for a name that is not an identifier.
    """
    if not names:
        raise TypeError("compact_ids needs at least one attribute name")
    for position, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(
                f"compact_ids attribute names must be str, not {type(name).__name__} "
                f"(argument {position})"
            )
        if not name.isidentifier():
            raise ValueError(f"compact_ids: {name!r} (argument {position}) is not an identifier")
    if type(lazy) is not bool:
        raise TypeError(f"compact_ids: lazy must be True or False, not {lazy!r}")
    wanted = tuple(dict.fromkeys(names))

    def decorate(cls: _T) -> _T:
        if not isinstance(cls, type):
            raise TypeError(f"compact_ids decorates classes, not {type(cls).__name__}")
        for method in ("__reduce_ex__", "__reduce__"):
            if getattr(cls, method) is not getattr(object, method):
                raise TypeError(
                    f"compact_ids cannot apply to {cls.__qualname__}: it defines {method}, "
                    "so pickle does not use __getstate__"
                )
        klass: Any = cls  # the methods below are set on it, which mypy cannot follow
        # object has no __getstate__ before Python 3.11
        base: _Plan | None = getattr(getattr(klass, "__getstate__", None), "_compact_plan", None)
        if base is not None:  # a decorated class (or base): extend its plan
            own_getstate = base.own_getstate
            base_setstate: _Plan | None = getattr(klass.__setstate__, "_compact_plan", None)
            own_setstate = (base.own_setstate if base_setstate is not None
                            else klass.__setstate__)
            base_names, base_lazy = base.names, base.lazy
        else:
            own_getstate = klass.__getstate__ if _defines(cls, "__getstate__") else None
            own_setstate = klass.__setstate__ if _defines(cls, "__setstate__") else None
            base_names = tuple(getattr(cls, "__compact_ids__", ()))
            base_lazy = frozenset(getattr(cls, "__compact_lazy__", ()))
        if lazy:
            for name in wanted:
                _hold_lazily(cls, name)
            lazy_names = base_lazy | frozenset(wanted)
        else:
            lazy_names = base_lazy - frozenset(wanted)
        plan = _Plan(
            names=tuple(dict.fromkeys((*base_names, *wanted))),
            lazy=lazy_names,
            own_getstate=own_getstate,
            own_setstate=own_setstate,
            by_field=own_getstate is not None and own_getstate is _DATACLASS_GETSTATE,
        )
        get_own = default_state if own_getstate is None else own_getstate
        set_own = own_setstate

        def __getstate__(self: Any) -> Any:
            layout = _layout(type(self))
            if layout is _NO_LAYOUT or (own_getstate is None and not layout.slots):
                # (the default state is the __dict__ itself: its placeholders come as they are)
                return _compact_state(self, get_own(self), plan)
            previous = _enter_raw(self)  # held values read as placeholders: sent as they are
            try:
                state = get_own(self)
            finally:
                _exit_raw(previous)
            return _compact_state(self, state, plan)

        def __setstate__(self: Any, state: Any) -> None:
            state, held_in_dict, held = _resolve_state(self, state, set_own is not None)
            if held_in_dict:
                if set_own is None and _set_lazy_dict(self, state):
                    return
                _lazy_dict_of(self)
            if set_own is None:
                default_setstate(self, state)
            else:
                set_own(self, state)
                if held:
                    _adopt_placeholders(self)

        functions: tuple[Any, ...] = (__getstate__, __setstate__)
        for function in functions:
            function.__qualname__ = f"{cls.__qualname__}.{function.__name__}"
            function.__module__ = cls.__module__
            function._compact_plan = plan
        __getstate__.__doc__ = f"State for pickle, with {', '.join(plan.names)} as int32 bytes."
        klass.__getstate__ = __getstate__
        klass.__setstate__ = __setstate__
        klass.__compact_ids__ = plan.names
        klass.__compact_lazy__ = tuple(name for name in plan.names if name in plan.lazy)
        global _last_layout
        _layouts.clear()  # layouts of its subclasses may change too
        _last_layout = (None, _NO_LAYOUT)
        return cls

    return decorate
