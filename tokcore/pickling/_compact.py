"""``compact_ids`` and ``ids_buffer``: the public decorator and the zero-copy view of held ids.

The package's docstring (``tokcore/pickling/__init__.py``) says how compact pickling works and
which module holds each part.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any, TypeVar

from ..ids._pack_py import LITTLE_ENDIAN_HOST
from ..ids._width import Width, check_width
from . import _held
from ._dict import _adopt_placeholders, _lazy_dict_of, _set_lazy_dict
from ._held import _HeldIds
from ._layout import _NO_LAYOUT, _defines, _hold_lazily, _layout
from ._layout import forget as _forget_layouts
from ._raw import _enter_raw, _exit_raw
from ._state import (
    _DATACLASS_GETSTATE,
    _compact_state,
    _Plan,
    _resolve_state,
    default_setstate,
    default_state,
)

__all__ = ["compact_ids", "ids_buffer"]

_T = TypeVar("_T", bound=type)

def _native(data: bytes, typecode: str) -> memoryview:
    """Little-endian ids as a view of native ones (a byte-swapped copy on a big-endian
    host)."""
    if LITTLE_ENDIAN_HOST:
        return memoryview(data).cast(typecode)  # type: ignore[call-overload,no-any-return]
    native = array(typecode)
    native.frombytes(data)
    native.byteswap()
    return memoryview(native)


def ids_buffer(obj: object, name: str, *, width: Width = 32) -> memoryview:
    """The int32 ids (int64 with ``width=64``) of ``obj.<name>`` as a read-only buffer,
    without building a list.

    An attribute that ``compact_ids(..., lazy=True)`` still holds (unpickled and never read)
    gives a view of its held bytes when they are of that width (int32 unless one of its ids
    is outside int32): no copy, and the attribute stays held; held ids of the other width are
    converted into a new buffer, checked (``pack_ids``' ``OverflowError`` for an int64 id
    outside int32). Any other value (a list once read or set, a tuple, a numpy array: whatever
    ``pack_ids`` takes) is packed now. The buffer is a one-dimensional memoryview of native
    int32 (format ``"i"``; int64, ``"q"``), so ``np.frombuffer(buf, np.int32)``,
    ``np.asarray(buf)`` and C++ bindings that take an int32 array (pybind11
    ``py::array_t<int32_t>``, nanobind) view it without a copy. On a big-endian host the held
    bytes are byte-swapped into a copy first.

    Raises ``AttributeError`` when the attribute is absent, what ``pack_ids`` raises for a
    value that is not an id sequence of the width (``TypeError`` for None), and ``TypeError``
    or ``ValueError`` for a ``width`` other than 32 and 64.
    """
    spec = check_width(width)
    previous = _enter_raw(obj)
    try:
        value = getattr(obj, name)
    finally:
        _exit_raw(previous)
    if type(value) is _HeldIds:
        if value.width is spec:
            return _native(value.data, spec.typecode)
        # the other width's bytes: through pack_ids (in C: no int per id), checked
        value = _native(value.data, value.width.typecode)
    return _native(_held._codec.pack_ids(value, width=width), spec.typecode)


def _is_held(obj: object, name: str) -> bool:
    """Whether ``obj.<name>`` is still held (tests, benchmarks)."""
    previous = _enter_raw(obj)
    try:
        return type(getattr(obj, name, None)) is _HeldIds
    finally:
        _exit_raw(previous)


def compact_ids(*names: str, lazy: bool = False) -> Callable[[_T], _T]:
    """Class decorator: pickle the named token-id attributes as int32 (or int64) bytes.

    Usage::

        @compact_ids("prompt_token_ids", "output_token_ids")
        @dataclass
        class Request:
            request_id: str
            prompt_token_ids: list[int]
            output_token_ids: list[int] | None = None

    Apply it on top of ``@dataclass``. A named attribute whose value is exactly a ``list``
    or ``tuple`` of ints travels as int32 bytes when every id fits int32, as int64 bytes when
    one does not (a multimodal model's virtual ids; a reader older than int64 support cannot
    load those), and any other value travels unchanged: pickling never fails for it. Eager
    (the default), it comes back as a ``list[int]``, even into a class without the
    decorator: the pickle calls a function of ``tokcore.pickling``. With ``lazy=True`` a
    named attribute that travelled compact comes back holding its bytes: the first read of
    the attribute builds the ``list[int]`` (later reads give that same list), and pickling
    the object again before that sends the bytes as they are; ``ids_buffer`` reads them
    without building the list. Such pickles load into a class decorated with
    ``compact_ids`` (lazy or not).

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
        _forget_layouts()  # layouts of its subclasses may change too
        return cls

    return decorate
