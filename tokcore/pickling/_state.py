"""State compaction of ``compact_ids``: a class's state with its named id values replaced by
markers on the way out (``_compact_state``), and markers resolved back (placeholders kept
where the type holds them lazily) on the way in (``_resolve_state``); the default state rules
that pickle applies when a class defines none (``default_state``, ``default_setstate``)."""

from __future__ import annotations

import copyreg
import dataclasses
import sys
from collections.abc import Callable, Container
from typing import Any, NamedTuple

from ..ids._width import INT64
from . import _held
from ._dict import _LazyDict
from ._held import MARKERS as _MARKERS
from ._held import _CompactIds, _HeldIds, _HeldRef
from ._held import holds as _holds
from ._layout import _layout, _list_of_held
from ._lazy_py import MISSING as _MISSING

# dataclasses gives frozen slots=True classes this __getstate__: a list of field values
_DATACLASS_GETSTATE = getattr(dataclasses, "_dataclass_getstate", None)
_OBJECT_GETSTATE = getattr(object, "__getstate__", None)  # Python 3.11+

_PACK_ERRORS = (TypeError, OverflowError, ValueError, RuntimeError)

_dict_get = dict.get
_dict_items = dict.items


def _compact(value: object, owner: object = None, lazy: bool = False) -> object:
    """``value`` as a marker when it is a flat list or tuple of int32s (or int64s) or a held
    placeholder, else ``value``."""
    kind = type(value)
    if kind is _HeldIds:
        return _HeldRef(value, owner, lazy)  # type: ignore[arg-type]
    if kind is not list and kind is not tuple:
        return value
    try:
        data = _held._codec.pack_ids(value)
    except OverflowError:  # an id outside int32 (a multimodal model's virtual ids): int64
        try:
            data = _held._codec.pack_ids(value, width=64)
        except _PACK_ERRORS:
            return value  # not an int64 id sequence either: pickle sends it as it is
        return _CompactIds(value, data, lazy, INT64)  # type: ignore[arg-type]
    except _PACK_ERRORS:
        return value  # not an id sequence: pickle sends it as it is
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
        return value.ids()  # type: ignore[attr-defined]
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

