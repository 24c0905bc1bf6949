"""The descriptors of ``compact_ids(lazy=True)``: the pure-Python reference twin.

A lazy name gets one of these on its class, a data descriptor, so that every read of the
attribute passes through it:

- ``LazyAttr`` for an attribute kept in the instance ``__dict__``;
- ``LazySlot`` for a ``__slots__`` attribute: it wraps the slot's member descriptor.

The value is stored where it would be without the descriptor (the same ``__dict__`` key, the
same slot). A read that finds a held placeholder (an instance of ``held_type``) hands it to
``on_held``, which returns what the reader gets (the list, built then). Both are given by
``tokcore.pickling``, which owns the placeholder and the codec; these classes only route.
The helpers for a missing attribute and for access on the class are shared with the Cython
twin (they are off the hot path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MISSING: Any = object()  # no class attribute was replaced (a LazyAttr's default)

_dict_getitem = dict.__getitem__
_dict_setitem = dict.__setitem__


def default_of(default: Any, obj: Any, owner: Any) -> Any:
    """A replaced class attribute as attribute lookup gives it (a descriptor is bound)."""
    getter = getattr(type(default), "__get__", None)
    return default if getter is None else getter(default, obj, owner)


def on_class(descriptor: Any, owner: Any) -> Any:
    """``Class.name``: the class attribute the descriptor replaced, or AttributeError."""
    if descriptor.default is MISSING:
        raise AttributeError(
            f"type object {getattr(owner, '__name__', owner)!r} has no attribute "
            f"{descriptor.name!r}"
        )
    return default_of(descriptor.default, None, owner)


def absent(descriptor: Any, obj: Any) -> Any:
    """``obj.name`` when ``__dict__`` has no such key: what it would be without us."""
    if descriptor.default is MISSING:
        raise no_attribute(obj, descriptor.name)
    return default_of(descriptor.default, obj, type(obj))


def absent_on_delete(descriptor: Any, obj: Any) -> None:
    raise no_attribute(obj, descriptor.name)


def no_attribute(obj: Any, name: str) -> AttributeError:
    """The AttributeError of a missing instance attribute, with ``name`` and ``obj`` set as
    the interpreter sets them (the constructor takes them as keywords only from 3.10 on)."""
    error = AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    error.name, error.obj = name, obj
    return error


class LazyAttr:
    """A lazy attribute kept in the instance ``__dict__`` (a data descriptor)."""

    __slots__ = ("name", "default", "held_type", "on_held")

    def __init__(self, name: str, default: Any, held_type: type,
                 on_held: Callable[[dict[Any, Any], str, Any], Any]) -> None:
        self.name = name
        self.default = default  # the class attribute it replaced (a dataclass default), if any
        self.held_type = held_type
        self.on_held = on_held  # (instance dict, name, placeholder) -> what the reader gets

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return on_class(self, owner)
        instance_dict = obj.__dict__
        try:
            value = _dict_getitem(instance_dict, self.name)
        except KeyError:
            return absent(self, obj)
        if type(value) is self.held_type:
            return self.on_held(instance_dict, self.name, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        _dict_setitem(obj.__dict__, self.name, value)

    def __delete__(self, obj: Any) -> None:
        try:
            dict.__delitem__(obj.__dict__, self.name)
        except KeyError:
            absent_on_delete(self, obj)


class LazySlot:
    """A lazy ``__slots__`` attribute: the slot's member descriptor, wrapped."""

    __slots__ = ("name", "member", "held_type", "on_held", "_get", "_set", "_delete")

    def __init__(self, name: str, member: Any, held_type: type,
                 on_held: Callable[[Any, Any, Any], Any]) -> None:
        self.name = name
        self.member = member
        self.held_type = held_type
        self.on_held = on_held  # (this descriptor, instance, placeholder) -> what it gets
        self._get = member.__get__
        self._set = member.__set__
        self._delete = member.__delete__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = self._get(obj)
        if type(value) is self.held_type:
            return self.on_held(self, obj, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        self._set(obj, value)

    def __delete__(self, obj: Any) -> None:
        self._delete(obj)
