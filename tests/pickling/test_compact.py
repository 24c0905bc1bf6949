"""compact_ids: round trips for every kind of class and every pickle protocol, copy, errors.

Oracles: pickle itself on the undecorated twin of each class (same state, same behaviour),
``struct`` for the int32 bytes in the stream, and an Unpickler that records every global a
pickle references (the compact form is a call to ``tokcore.pickling._ids_from_int32``).
"""

from __future__ import annotations

import array
import copy
import pickle
import pickletools
import sys
from types import ModuleType
from typing import Any

import _pickle_kinds
import numpy as np
import pytest
from _pickle_kinds import (
    EAGER_MARKER,
    IDS,
    INT32_MAX,
    PROTOCOLS,
    SLOTTED_DATACLASSES,
    SlotBase,
    define_kinds,
    int32_bytes,
    referenced_globals,
)

import tokcore
from tokcore import compact_ids
from tokcore.pickling import _held, _state

MARKER = EAGER_MARKER


@pytest.fixture(params=["c", "py"])
def codec(request: pytest.FixtureRequest, pack_twin: ModuleType,
          monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """compact_ids running on one twin of the token-id codec."""
    monkeypatch.setattr(_held, "_codec", pack_twin)
    return pack_twin


# --- every kind of class, decorated (_pickle_kinds; registered here, where pickle finds them) --

EAGER = define_kinds(lazy=False, prefix="", module_name=__name__)
Plain, Data, DataFrozen, Slotted, OwnState, DecoratedTwice = (
    EAGER[name] for name in ("Plain", "Data", "DataFrozen", "Slotted", "OwnState",
                             "DecoratedTwice"))
if SLOTTED_DATACLASSES:
    DataFrozenSlots = EAGER["DataFrozenSlots"]
KINDS = [kind for name, kind in EAGER.items() if name != "DecoratedBase"]


# --- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_round_trip_every_kind_and_protocol(kind: type, protocol: int, codec: ModuleType) -> None:
    more = tuple(range(-5, 300, 7))
    obj = kind(list(IDS), more, label="req-1")
    data = pickle.dumps(obj, protocol)
    back = pickle.loads(data)
    assert type(back) is kind
    assert type(back.ids) is list and back.ids == IDS
    assert type(back.more) is list and back.more == list(more)  # a tuple comes back a list
    assert back.label == "req-1"
    assert MARKER in referenced_globals(data)
    if protocol >= 3:  # raw bytes in the stream (0-2 spell bytes through _codecs.encode)
        assert int32_bytes(IDS) in data and int32_bytes(list(more)) in data
    assert obj.ids == IDS and obj.more == more  # the original is untouched
    if kind is OwnState:
        assert back.restored


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_values_that_are_not_int64_id_sequences_travel_unchanged(kind: type) -> None:
    odd_values: list[Any] = [
        None, [], (), [[1, 2], [3]], [1, 2.0], [1, "2"], [2**63], [-(2**63) - 1],
        [2**70], np.arange(5, dtype=np.int32), array.array("i", [1, 2]), "123", b"\x01\x00",
        {"a": 1}, {1, 2}, range(3), 17,
    ]
    for value in odd_values:
        for protocol in PROTOCOLS:
            back = pickle.loads(pickle.dumps(kind(value, value), protocol))
            if isinstance(value, np.ndarray):
                assert type(back.ids) is np.ndarray and np.array_equal(back.ids, value)
            elif value == [] or value == ():
                assert back.ids == [] and type(back.ids) is list  # empty: compact, a list
            else:
                assert type(back.ids) is type(value) and back.ids == value


def test_unchanged_values_leave_no_marker() -> None:
    data = pickle.dumps(Plain([1, 2**70], None, "x"))
    assert MARKER not in referenced_globals(data) and EAGER64_MARKER not in \
        referenced_globals(data)
    assert pickle.dumps(Plain([1, 2**70], None, "x")) == data


# --- ids outside int32: int64 bytes ---------------------------------------------------------

EAGER64_MARKER = ("tokcore.pickling", "_ids_from_int64")
WIDE = [151_644, 2**32, -(2**31) - 1, INT32_MAX + 1, 2**63 - 1, -(2**63), 0]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_ids_outside_int32_travel_as_int64(kind: type, protocol: int, codec: ModuleType) -> None:
    """A request whose ids do not fit int32 (a multimodal model's virtual ids) still travels
    compact: as int64 bytes, through _ids_from_int64; one that fits keeps int32."""
    obj = kind(list(WIDE), (1, 2**40))
    data = pickle.dumps(obj, protocol)
    back = pickle.loads(data)
    assert back.ids == WIDE and type(back.ids) is list and back.more == [1, 2**40]
    assert EAGER64_MARKER in referenced_globals(data)
    if protocol >= 3:
        assert np.asarray(WIDE, "<i8").tobytes() in data
    mixed = pickle.dumps(kind(list(IDS), (1, 2**40)), protocol)
    assert {MARKER, EAGER64_MARKER} <= referenced_globals(mixed)
    assert pickle.loads(mixed).ids == IDS


def test_int64_ids_are_8_bytes_an_id_and_no_int() -> None:
    """8 bytes an id (pickle writes 3 to 9 an int, one opcode each): no int is pickled."""
    ids = [2**32 + i for i in range(10_000)] + [5] * 10_000
    data = pickle.dumps(Plain(ids))
    assert len(data) < 8 * len(ids) + 300
    assert not any(op.name in ("LONG1", "BININT", "BININT1", "BININT2")
                   for op, _, _ in pickletools.genops(data))


def test_loading_int64_bytes_checks_their_length() -> None:
    from tokcore.pickling import _ids_from_int64

    with pytest.raises(ValueError, match="^int64 data must be a multiple of 8 bytes long"):
        _ids_from_int64(b"\x00" * 12)
    assert _ids_from_int64(np.asarray([2**40, -1], "<i8").tobytes()) == [2**40, -1]


def test_list_subclass_keeps_its_type() -> None:
    class Ids(list):  # type: ignore[type-arg]
        pass

    obj = Plain(Ids([1, 2, 3]))
    state = obj.__getstate__()
    assert state["ids"] is obj.ids  # not compacted: the subclass would be lost


def test_integer_like_items_come_back_as_ints() -> None:
    back = pickle.loads(pickle.dumps(Plain([True, False, np.int64(7), np.int32(-3)])))
    assert back.ids == [1, 0, 7, -3] and all(type(x) is int for x in back.ids)


def test_shared_list_becomes_two_equal_lists() -> None:
    obj = Plain([1, 2, 3])
    obj.label = obj.ids  # not a named attribute: pickled as usual
    back = pickle.loads(pickle.dumps(obj))
    assert back.ids == back.label == [1, 2, 3]


def test_unnamed_attributes_stay_ordinary() -> None:
    obj = Plain([1, 2], None, label=[3, 4])  # type: ignore[arg-type]
    state = obj.__getstate__()
    assert state["label"] is obj.label and type(state["ids"]) is _held._CompactIds


def test_missing_attributes_are_fine() -> None:
    obj = Slotted.__new__(Slotted)
    obj.label = "only this"
    back = pickle.loads(pickle.dumps(obj))
    assert back.label == "only this" and not hasattr(back, "ids")


def test_state_of_the_object_is_not_mutated() -> None:
    obj = Plain(list(IDS))
    own_dict = obj.__dict__
    pickle.dumps(obj)
    assert obj.__dict__ is own_dict and type(own_dict["ids"]) is list


def test_large_round_trip(codec: ModuleType) -> None:
    ids = list(range(-70_000, 130_000, 3))
    data = pickle.dumps(Data(ids), pickle.HIGHEST_PROTOCOL)
    assert len(data) < 4 * len(ids) + 200
    assert pickle.loads(data).ids == ids


# --- compatibility: before and after decoration, other states ----------------------------------

def make_class(name: str) -> type:
    return _pickle_kinds.make_class(name, __name__)


def test_pickles_made_before_decoration_still_load() -> None:
    cls = make_class("Legacy")
    try:
        old = [pickle.dumps(cls(list(IDS)), protocol) for protocol in PROTOCOLS]
        compact_ids("ids")(cls)
        for data in old:
            back = pickle.loads(data)
            assert back.ids == IDS and type(back).__getstate__ is cls.__getstate__
    finally:
        delattr(sys.modules[__name__], "Legacy")


def test_compact_pickles_load_into_an_undecorated_class() -> None:
    cls = make_class("Later")
    try:
        compact_ids("ids")(cls)
        data = pickle.dumps(cls(list(IDS)))
        make_class("Later")  # the class as a reader without the decorator defines it
        back = pickle.loads(data)
        assert back.ids == IDS and "__getstate__" not in type(back).__dict__
    finally:
        delattr(sys.modules[__name__], "Later")


@compact_ids("ids")
class OpaqueState:
    """A __getstate__ of a shape compact_ids does not know: pickling works as before."""

    def __init__(self, ids: Any) -> None:
        self.ids = ids

    def __getstate__(self) -> tuple[str, list[int]]:
        return ("v1", self.ids)

    def __setstate__(self, state: tuple[str, list[int]]) -> None:
        version, self.ids = state


@compact_ids("ids")
class OnlySetstate:
    def __init__(self, ids: Any) -> None:
        self.ids = ids

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.seen = type(state["ids"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_state_shapes_pickle_as_before(protocol: int) -> None:
    data = pickle.dumps(OpaqueState([1, 2, 3]), protocol)
    assert pickle.loads(data).ids == [1, 2, 3] and MARKER not in referenced_globals(data)
    back = pickle.loads(pickle.dumps(OnlySetstate([4, 5]), protocol))
    assert back.ids == [4, 5] and back.seen is list


def test_compact_names_accumulate() -> None:
    assert DecoratedTwice.__compact_ids__ == ("ids", "more")
    assert Plain.__compact_ids__ == ("ids", "more")


class UndecoratedPlain:
    pass


class UndecoratedSlots:
    __slots__ = ("a", "b")


class UndecoratedSlotsAndDict(SlotBase):
    pass


class UndecoratedInheritedSlots(SlotBase):
    __slots__ = ("more",)


def with_attributes(obj: Any, **values: Any) -> Any:
    for name, value in values.items():
        setattr(obj, name, value)
    return obj


DEFAULT_STATE_CASES = {
    "empty": lambda: UndecoratedPlain(),
    "dict": lambda: with_attributes(UndecoratedPlain(), ids=[1], x="y"),
    "slots, one set": lambda: with_attributes(UndecoratedSlots(), b=2),
    "slots, none set": lambda: UndecoratedSlots(),
    "slots+dict": lambda: with_attributes(UndecoratedSlotsAndDict(), ids=[1], more=2),
    "inherited slots": lambda: with_attributes(UndecoratedInheritedSlots(), ids=[1], more=2),
}


@pytest.mark.parametrize("emulate", [False, True], ids=["live", "3.9 rules"])
@pytest.mark.parametrize("case", DEFAULT_STATE_CASES)
def test_default_state_is_what_pickle_takes(case: str, emulate: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    obj = DEFAULT_STATE_CASES[case]()
    expected = object.__reduce_ex__(obj, 2)[2]  # the state pickle itself would save
    if emulate:
        monkeypatch.setattr(_state, "_OBJECT_GETSTATE", None)  # Python 3.9/3.10's path
    state = _state.default_state(obj)
    assert state == (expected or None)  # before 3.11 an empty __dict__ is {} rather than None


# --- copy ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_copy_and_deepcopy(kind: type) -> None:
    obj = kind(list(IDS), (1, 2), label="c")
    shallow = copy.copy(obj)
    assert shallow.ids is obj.ids and shallow.more is obj.more  # as without the decorator
    deep = copy.deepcopy(obj)
    assert deep.ids == IDS and deep.ids is not obj.ids and deep.more == (1, 2)
    assert deep.label == "c"


def test_state_outside_pickle_resolves_back() -> None:
    obj = Plain(list(IDS))
    state = obj.__getstate__()
    assert "7 ids" in repr(state["ids"])
    twin = Plain.__new__(Plain)
    twin.__setstate__(state)
    assert twin.ids is obj.ids
    pair = Slotted(list(IDS)).__getstate__()
    other = Slotted.__new__(Slotted)
    other.__setstate__(pair)
    assert other.ids == IDS
    if SLOTTED_DATACLASSES:
        frozen = DataFrozenSlots(list(IDS)).__getstate__()
        assert type(frozen[0]) is _held._CompactIds
        copy_ = DataFrozenSlots.__new__(DataFrozenSlots)
        copy_.__setstate__(frozen)
        assert copy_.ids == IDS


# --- errors ------------------------------------------------------------------------------------

def test_errors() -> None:
    with pytest.raises(TypeError, match="at least one"):
        compact_ids()
    with pytest.raises(TypeError, match=r"must be str, not int \(argument 1\)"):
        compact_ids("ids", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'a-b'"):
        compact_ids("a-b")
    with pytest.raises(TypeError, match="decorates classes"):
        compact_ids("ids")(lambda: None)  # type: ignore[type-var]

    class Reduces:
        def __reduce__(self) -> Any:
            return (Reduces, ())

    with pytest.raises(TypeError, match="defines __reduce__"):
        compact_ids("ids")(Reduces)

    class ReducesEx:
        def __reduce_ex__(self, protocol: Any) -> Any:
            return (ReducesEx, ())

    with pytest.raises(TypeError, match="defines __reduce_ex__"):
        compact_ids("ids")(ReducesEx)


def test_unpicklable_values_still_fail_as_usual() -> None:
    with pytest.raises((TypeError, pickle.PicklingError, AttributeError)):
        pickle.dumps(Plain(lambda: 1))


def test_exported() -> None:
    assert tokcore.compact_ids is compact_ids and "compact_ids" in tokcore.__all__
