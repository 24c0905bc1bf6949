"""``compact_ids``: pickle the token-id attributes of a class as int32 bytes.

A serving stack pickles request objects (broadcast to data-parallel ranks, IPC to workers)
that carry tens of thousands of token ids; pickle writes one opcode and one int object per id.
With ``@compact_ids("prompt_token_ids")`` the attribute travels as a single bytes object
(``pack_ids``) and comes back as a ``list[int]`` (``unpack_ids``).

How it works. The decorator gives the class a ``__getstate__`` that takes the state the class
would have pickled anyway (its own ``__getstate__``, or the default one: ``__dict__`` and
``__slots__`` values) and replaces each named value that is a flat list or tuple of int32s by
a ``_CompactIds`` marker. A marker pickles as a call ``_ids_from_int32(<bytes>)``, so the
unpickler turns it back into a list *before* any ``__setstate__`` runs: the receiving class,
even an undecorated one, only ever sees plain lists. That call, a reference to a private
function of this module, is the marker in the pickle stream; no user value pickles like it.
The decorator also gives the class a ``__setstate__`` (wrapping the class's own, if any) that
resolves markers left in a state that never went through pickle (``copy.copy``).

What travels compact: a value whose type is exactly ``list`` or ``tuple`` and whose items
``pack_ids`` accepts and that fit int32. Anything else travels unchanged, as pickle would
send it: ``None``, nested lists, numpy arrays, ``array.array``, list subclasses, lists with
an item outside int32 or not an integer. Compact values come back as a ``list`` of plain
ints: a tuple comes back as a list, and ``bool`` or numpy integer items as the ints they
index to. A compact list is sent by value: if the same list object is also referenced from
elsewhere in what is pickled, the unpickled copies are two distinct lists.

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
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from . import _ids
from ._ids_py import ID_BYTES

_T = TypeVar("_T", bound=type)

# dataclasses gives frozen slots=True classes this __getstate__: a list of field values
_DATACLASS_GETSTATE = getattr(dataclasses, "_dataclass_getstate", None)
_OBJECT_GETSTATE = getattr(object, "__getstate__", None)  # Python 3.11+

#: the token-id codec in use: the dispatched twin (tests and benchmarks swap in either one)
_codec: ModuleType = _ids


def _ids_from_int32(data: bytes) -> list[int]:
    """What a compact value unpickles through. Its name is part of the pickle format."""
    ids: list[int] = _codec.unpack_ids(data)
    return ids


class _CompactIds:
    """A flat int32 id sequence on its way into a pickle."""

    __slots__ = ("value", "data")

    def __init__(self, value: list[int] | tuple[int, ...], data: bytes) -> None:
        self.value = value  # the original object, for copy.copy
        self.data = data

    def __reduce__(self) -> tuple[Callable[[bytes], list[int]], tuple[bytes]]:
        return _ids_from_int32, (self.data,)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(self.value, memo)

    def __repr__(self) -> str:
        return f"<compact int32 ids: {len(self.data) // ID_BYTES} ids>"


def _compact(value: object) -> object:
    """``value`` as a marker when it is a flat list or tuple of int32s, else ``value``."""
    if type(value) is not list and type(value) is not tuple:
        return value
    try:
        data = _codec.pack_ids(value)
    except (TypeError, OverflowError, ValueError, RuntimeError):
        return value  # not an int32 id sequence: pickle sends it as it is
    return _CompactIds(value, data)


def _compact_dict(state: dict[Any, Any], names: tuple[str, ...]) -> dict[Any, Any]:
    """A copy of ``state`` with the named values compacted (``state`` itself if none is)."""
    compacted = None
    for name in names:
        if name in state:
            value = state[name]
            packed = _compact(value)
            if packed is not value:
                if compacted is None:
                    compacted = dict(state)  # never touch the object's own __dict__
                compacted[name] = packed
    return state if compacted is None else compacted


def _compact_state(obj: object, state: Any, names: tuple[str, ...], by_field: bool) -> Any:
    if type(state) is dict:
        return _compact_dict(state, names)
    if type(state) is tuple and len(state) == 2:
        dict_state, slot_state = state
        if (dict_state is None or type(dict_state) is dict) and type(slot_state) is dict:
            new_dict = dict_state if dict_state is None else _compact_dict(dict_state, names)
            new_slots = _compact_dict(slot_state, names)
            if new_dict is not dict_state or new_slots is not slot_state:
                return (new_dict, new_slots)
        return state
    if by_field and type(state) is list:  # a frozen slots=True dataclass: values by field
        fields = [f.name for f in dataclasses.fields(obj)]  # type: ignore[arg-type]
        if len(fields) != len(state):
            return state
        state = list(state)
        for position, field in enumerate(fields):
            if field in names:
                state[position] = _compact(state[position])
        return state
    return state


def _resolve(value: object) -> object:
    return value.value if type(value) is _CompactIds else value


def _resolve_dict(state: dict[Any, Any]) -> dict[Any, Any]:
    if not any(type(value) is _CompactIds for value in state.values()):
        return state
    return {key: _resolve(value) for key, value in state.items()}


def _resolve_state(state: Any) -> Any:
    """Markers back to the values they stand for; only a state that skipped pickle has any."""
    if type(state) is dict:
        return _resolve_dict(state)
    if type(state) is tuple and len(state) == 2:
        dict_state, slot_state = state
        if (dict_state is None or type(dict_state) is dict) and type(slot_state) is dict:
            new_dict = dict_state if dict_state is None else _resolve_dict(dict_state)
            new_slots = _resolve_dict(slot_state)
            if new_dict is not dict_state or new_slots is not slot_state:
                return (new_dict, new_slots)
        return state
    if type(state) is list and any(type(value) is _CompactIds for value in state):
        return [_resolve(value) for value in state]
    return state


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


def _defines(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base other than ``object`` defines ``name``."""
    return any(name in vars(klass) for klass in cls.__mro__ if klass is not object)


def compact_ids(*names: str) -> Callable[[_T], _T]:
    """Class decorator: pickle the named token-id attributes as int32 bytes.

    Usage::

        @compact_ids("prompt_token_ids", "output_token_ids")
        @dataclass
        class Request:
            request_id: str
            prompt_token_ids: list[int]
            output_token_ids: list[int] | None = None

    Apply it on top of ``@dataclass``. Raises ``TypeError`` when no name is given, a name is
    not a ``str``, or the class pickles through its own ``__reduce__``/``__reduce_ex__``
    (which would bypass ``__getstate__``); ``ValueError`` for a name that is not an
    identifier.
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
        own_getstate = klass.__getstate__ if _defines(cls, "__getstate__") else None
        own_setstate = klass.__setstate__ if _defines(cls, "__setstate__") else None
        by_field = own_getstate is not None and own_getstate is _DATACLASS_GETSTATE

        def __getstate__(self: Any) -> Any:
            state = default_state(self) if own_getstate is None else own_getstate(self)
            return _compact_state(self, state, wanted, by_field)

        def __setstate__(self: Any, state: Any) -> None:
            state = _resolve_state(state)
            if own_setstate is None:
                default_setstate(self, state)
            else:
                own_setstate(self, state)

        for function in (__getstate__, __setstate__):
            function.__qualname__ = f"{cls.__qualname__}.{function.__name__}"
            function.__module__ = cls.__module__
        __getstate__.__doc__ = f"State for pickle, with {', '.join(wanted)} as int32 bytes."
        klass.__getstate__ = __getstate__
        klass.__setstate__ = __setstate__
        klass.__compact_ids__ = tuple(
            dict.fromkeys((*getattr(cls, "__compact_ids__", ()), *wanted))
        )
        return cls

    return decorate
