"""What the compact_ids tests share: every kind of class a user decorates (eager, or lazy on
either descriptor twin), the pickle-stream oracles and the values that travel."""

from __future__ import annotations

import io
import pickle
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tokcore import compact_ids
from tokcore.pickling import _held

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
EAGER_MARKER = ("tokcore.pickling", "_ids_from_int32")
LAZY_MARKER = ("tokcore.pickling", "_held_ids_from_int32")
IDS = [151644, 872, 198, 0, INT32_MAX, INT32_MIN, 7]
SLOTTED_DATACLASSES = sys.version_info >= (3, 10)  # dataclass(slots=True) is 3.10+


class SlotBase:
    __slots__ = ("ids",)


def define_kinds(lazy: bool, prefix: str, module_name: str) -> dict[str, type]:
    """Every class kind, decorated with ``compact_ids(..., lazy=lazy)``, named ``prefix +
    <Kind>`` and registered in module ``module_name``, where pickle finds classes."""

    def compact(*names: str) -> Callable[[type], type]:
        return compact_ids(*names, lazy=lazy)

    @compact("ids", "more")
    class Plain:
        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label

    @compact("ids", "more")
    @dataclass
    class Data:
        ids: Any
        more: Any = None
        label: str = "x"

    @compact("ids", "more")
    @dataclass(frozen=True)
    class DataFrozen:
        ids: Any
        more: Any = None
        label: str = "x"

    @compact("ids", "more")
    class Slotted:
        __slots__ = ("ids", "more", "label")

        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label

    @compact("ids", "more")
    class SlotInherited(SlotBase):
        __slots__ = ("more", "label")

        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label

    @compact("ids", "more")
    class SlotsAndDict(SlotBase):  # ids in a slot, the rest in __dict__
        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label

    @compact("ids", "more")
    class OwnState:
        """Its own __getstate__/__setstate__ (dict state) must still run."""

        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label
            self.cache = object()  # not picklable: __getstate__ drops it

        def __getstate__(self) -> dict[str, Any]:
            state = self.__dict__.copy()
            del state["cache"]
            return state

        def __setstate__(self, state: dict[str, Any]) -> None:
            assert all(type(state[k]) is not _held._CompactIds for k in ("ids", "more"))
            self.__dict__.update(state)
            self.cache = object()
            self.restored = True

    @compact("ids", "more")
    class OwnGetstateOnly:
        """Its own __getstate__ (a dict) and pickle's default way of setting it back."""

        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label
            self.lock = threading.Lock()  # not picklable: __getstate__ drops it

        def __getstate__(self) -> dict[str, Any]:
            return {k: v for k, v in self.__dict__.items() if k != "lock"}

    @compact("ids", "more")
    class ReplacesDict:
        """A __setstate__ that makes the state its __dict__, then sets an attribute."""

        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label

        def __setstate__(self, state: dict[str, Any]) -> None:
            self.__dict__ = state
            self.more = state["more"]

    class DecoratedBase:
        def __init__(self, ids: Any, more: Any = None, label: str = "x") -> None:
            self.ids = ids
            self.more = more
            self.label = label

    compact("ids")(DecoratedBase)

    @compact("more")
    class DecoratedTwice(DecoratedBase):
        """Decorated on top of a decorated base: both names travel compact."""

    class InheritsDecorated(Plain):
        """Not decorated itself: it inherits the base's behaviour."""

    kinds: list[type] = [Plain, Data, DataFrozen, Slotted, SlotInherited, SlotsAndDict,
                         OwnState, OwnGetstateOnly, ReplacesDict, DecoratedBase, DecoratedTwice,
                         InheritsDecorated]
    if SLOTTED_DATACLASSES:
        @compact("ids", "more")
        @dataclass(slots=True)
        class DataSlots:
            ids: Any
            more: Any = None
            label: str = "x"

        @compact("ids", "more")
        @dataclass(frozen=True, slots=True)  # dataclasses gives it a list-of-fields state
        class DataFrozenSlots:
            ids: Any
            more: Any = None
            label: str = "x"

        kinds[3:3] = [DataSlots, DataFrozenSlots]
    module = sys.modules[module_name]
    for kind in kinds:
        kind.__qualname__ = kind.__name__ = prefix + kind.__name__
        kind.__module__ = module_name
        setattr(module, kind.__name__, kind)
    return {kind.__name__[len(prefix):]: kind for kind in kinds}


def int32_bytes(ids: list[int] | tuple[int, ...]) -> bytes:
    return struct.pack(f"<{len(ids)}i", *ids)


def referenced_globals(data: bytes) -> set[tuple[str, str]]:
    """Every global the pickle ``data`` references, as (module, name)."""
    found: set[tuple[str, str]] = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            found.add((module, name))
            return super().find_class(module, name)

    Recorder(io.BytesIO(data)).load()
    return found


def make_class(name: str, module_name: str) -> type:
    """An undecorated class ``name`` with an ``ids`` attribute, registered in the module."""
    def __init__(self: Any, ids: Any) -> None:
        self.ids = ids

    cls = type(name, (), {"__init__": __init__, "__module__": module_name})
    setattr(sys.modules[module_name], name, cls)
    return cls


# --- what travels: values of every shape, and what each one comes back as ----------------------

int32s = st.integers(INT32_MIN, INT32_MAX)
values = st.one_of(
    st.lists(int32s, max_size=50),
    st.lists(int32s, max_size=50).map(tuple),
    st.lists(st.integers(), max_size=20),
    st.lists(st.one_of(int32s, st.floats(allow_nan=False), st.text(max_size=3)), max_size=10),
    st.lists(st.lists(int32s, max_size=3), max_size=5),
    st.none(),
)


def expected_back(value: Any) -> Any:
    """A flat list or tuple of int32s comes back a list; anything else as it went."""
    if isinstance(value, (list, tuple)) and all(
        type(x) is int and INT32_MIN <= x <= INT32_MAX for x in value
    ):
        return list(value)
    return value
