"""``_LazyDict``: the instance ``__dict__`` of an object that holds a placeholder there, and
how it is put in place (at load, after a class's own ``__setstate__``)."""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from typing import Any

from ._held import _HeldIds, holds
from ._lazy_py import MISSING as _MISSING
from ._raw import _dict_value, _list_in_dict, _raw_dict

_dict_get = dict.get
_dict_getitem = dict.__getitem__
_dict_items = dict.items
_object_getattribute = object.__getattribute__
_object_setattr = object.__setattr__
_intern = sys.intern


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
            return value.ids()
        return value

    def popitem(self) -> tuple[Any, Any]:
        key, value = dict.popitem(self)
        if type(value) is _HeldIds and not _raw_dict(self):
            value = value.ids()
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



def _adopt_placeholders(obj: object) -> None:
    """After a class's own ``__setstate__``: an instance ``__dict__`` it left holding a
    placeholder (``self.__dict__ = state``, ``self.ids = state["ids"]``) is made a
    ``_LazyDict``, so that reads through it see lists."""
    instance_dict = _instance_dict(obj)
    if type(instance_dict) is dict and holds(instance_dict.values()):
        _object_setattr(obj, "__dict__", _LazyDict(instance_dict))

