"""Class layout of ``compact_ids(lazy=True)``: the descriptors put on a class for its lazy
names (``_lazy``: ``LazyAttr`` for ``__dict__`` attributes, ``LazySlot`` for slots), and
where a type keeps those names (``_layout``, cached per type)."""

from __future__ import annotations

import weakref
from types import MemberDescriptorType, ModuleType
from typing import Any, NamedTuple

from . import _lazy
from ._dict import _instance_dict
from ._held import _HeldIds
from ._lazy_py import MISSING as _MISSING
from ._raw import _dict_value, _list_in_dict, _list_in_slot, _slot_value

_dict_items = dict.items

#: the twin whose descriptors the decorator puts on classes (tests swap in either one)
_descriptors: ModuleType = _lazy


def _descriptor_kind(value: object) -> str | None:
    """``"attr"`` or ``"slot"`` for a lazy descriptor of either twin, else None."""
    kind = type(value)
    if kind.__module__ in ("tokcore.pickling._lazy_py", "tokcore.pickling._lazy_c"):
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
    return held.ids()  # no longer held there: the same ids, a new list



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



def forget() -> None:
    """Drop the cached layouts: a class was just decorated, and its subclasses' layouts may
    change too."""
    global _last_layout
    _layouts.clear()
    _last_layout = (None, _NO_LAYOUT)
