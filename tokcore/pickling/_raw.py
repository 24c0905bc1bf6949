"""Raw mode and first reads of ``compact_ids``' held values.

Raw mode: while the decorator's ``__getstate__`` runs (and while ``ids_buffer`` reads), reads
of that object's held values, in that thread, give the placeholders themselves, so pickling
it again sends the held bytes as they are. A first read outside raw mode builds the list and
swaps it in where the placeholder was (compare and set under ``_swap_lock``), so concurrent
first readers all get the one list that was stored.
"""

from __future__ import annotations

import threading
from typing import Any

from ._held import _HeldIds
from ._lazy_py import MISSING as _MISSING

_dict_get = dict.get
_dict_setitem = dict.__setitem__
_object_getattribute = object.__getattribute__

#: serialises the swap of a placeholder for its list (never held while unpacking)
_swap_lock = threading.Lock()

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
    ids = held.ids()
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


# --- where a held value lives: a slot -----------------------------------------------------

def _list_in_slot(slot: Any, obj: object, held: _HeldIds) -> Any:
    """The list for ``held`` in ``slot`` of ``obj``, swapped in as ``_list_in_dict`` does."""
    ids = held.ids()
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

