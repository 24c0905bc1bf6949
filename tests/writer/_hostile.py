"""Hostile values for the stream writer: subclasses of the types it takes whose dunder
methods run Python code while a call writes its frame (mutating the lists being written,
calling back into the writer), for tests/writer/test_writer_hostile.py and
fuzz/fuzz_writer.py.

Every hostile value is worth what its plain counterpart is (its methods return the honest
result): the writer must write what the call's plain values write (each list as it holds
when the call reads it), or raise as the plain call does, in both twins, and never crash.
A case is a function ``case(module, hostile)`` that makes one writer of ``module`` and
returns ``{"out": the outcome of one call (:func:`outcome`), ...}`` (``met``: what the
callbacks into the writer met, ``seq``: its sequence number after): with ``hostile`` False
the same call on plain values, the oracle of the hostile one.

Run as a script (``python _hostile.py c|py case``, or ``c|py lying POSITION Lying|LyingTuple``)
it prints one case's outcome as JSON: the crash cases run so, in a subprocess of their own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

Result = dict[str, Any]


def outcome(call: Callable[[], bytes]) -> list[Any]:
    """``["bytes", hex]`` or ``["raise", type name, message]``."""
    try:
        out = call()
    except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
        return ["raise", type(e).__name__, str(e)]
    return ["bytes", out.hex()]


def shape(api: str = "chat", style: str = "vllm") -> Any:
    from tokcore import StreamShape
    return StreamShape(api, style)  # type: ignore[arg-type]


def writer(module: ModuleType, api: str = "chat", style: str = "vllm") -> Any:
    return module.StreamWriter(shape(api, style), id="chatcmpl-1", model="m", created=7)


class Hook:
    """What a hostile value does when one of its methods runs: a list of callbacks (each
    run once, at the first call), and the exceptions a callback that calls back into the
    writer met."""

    def __init__(self, *actions: Callable[[], object]) -> None:
        self.actions = list(actions)
        self.met: list[str] = []

    def __call__(self) -> None:
        actions, self.actions = self.actions, []
        for action in actions:
            try:
                action()
            except Exception as e:  # noqa: BLE001
                self.met.append(type(e).__name__)


def _hooked(base: type, names: tuple[str, ...]) -> type:
    """A subclass of ``base`` each of whose ``names`` methods runs the value's hook, then
    the base method."""
    def make(name: str) -> Callable[..., Any]:
        def method(self: Any, *args: Any) -> Any:
            self.hook()
            return getattr(base, name)(self, *args)
        method.__name__ = name
        return method
    namespace: dict[str, Any] = {name: make(name) for name in names}
    namespace["hook"] = lambda self: None
    return type(f"Hostile{base.__name__.capitalize()}", (base,), namespace)


_INT_NAMES = ("__index__", "__int__", "__float__", "__str__", "__repr__", "__format__",
              "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
              "__bool__", "__abs__", "__neg__", "__add__", "__radd__")
_SEQ_NAMES = ("__len__", "__iter__", "__getitem__", "__contains__", "__reversed__")
HostileInt = _hooked(int, _INT_NAMES)
HostileFloat = _hooked(float, ("__float__", "__repr__", "__str__", "__format__", "__eq__",
                               "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
                               "__bool__", "__abs__", "__neg__"))
HostileStr = _hooked(str, ("__eq__", "__ne__", "__hash__", "__str__", "__repr__", "__len__",
                           "__iter__", "__getitem__", "__contains__", "__format__",
                           "__lt__", "__gt__", "encode"))
HostileList = _hooked(list, _SEQ_NAMES)
HostileTuple = _hooked(tuple, _SEQ_NAMES)


def hostile(base_value: Any, hook: Hook) -> Any:
    """``base_value`` as a hostile subclass value that runs ``hook``."""
    cls = {int: HostileInt, float: HostileFloat, str: HostileStr, list: HostileList,
           tuple: HostileTuple}[type(base_value)]
    value = cls(base_value)
    value.hook = hook  # type: ignore[method-assign]
    return value


class Lying(list):  # type: ignore[type-arg]
    """A list whose ``__len__``, ``__iter__`` and ``__getitem__`` tell of other items than
    it holds: the writer reads the items it holds (as json's and orjson's encoders do)."""

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Any:
        return iter([])

    def __getitem__(self, i: Any) -> Any:
        raise IndexError(i)


class LyingTuple(tuple):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 99

    def __iter__(self) -> Any:
        return iter(("no", "such", "items"))

    def __getitem__(self, i: Any) -> Any:
        return "no such item"


def _grow(values: list[Any]) -> Callable[[], None]:
    def grow() -> None:
        values.extend(range(1000))
    return grow


# --- the cases: each one call, hostile or plain

def logprob_float_empties_entries(module: ModuleType, h: bool) -> Result:
    """An int logprob (a float slot: float() runs) that empties the entries list."""
    w = writer(module)
    entries: list[Any] = []
    hook = Hook(entries.clear)
    lp = hostile(-3, hook) if h else -3
    entries += [(" a", lp), (" b", -1.5), (" c", -2.5)]
    return {"out": outcome(lambda: w.step(" abc", logprobs=entries))}


def entry_iter_empties_entries(module: ModuleType, h: bool) -> Result:
    """A list-subclass logprob entry (tuple() of it runs __iter__) that empties the list of
    entries it is in."""
    w = writer(module)
    entries: list[Any] = []
    hook = Hook(entries.clear)
    entry = hostile([" a", -0.5], hook) if h else [" a", -0.5]
    entries += [entry, [" b", -1.5], (" c", -2.5, b"c")]
    return {"out": outcome(lambda: w.step(" abc", logprobs=entries))}


def kind_eq_empties_steps(module: ModuleType, h: bool) -> Result:
    """A str-subclass kind in steps() (== runs __eq__) that empties the steps list."""
    w = writer(module)
    steps: list[Any] = []
    hook = Hook(steps.clear)
    kind = hostile("text", hook) if h else "text"
    steps += [("a", 0, kind), ("b", 1), ("c", 2, "reasoning")]
    return {"out": outcome(lambda: w.steps(steps))}


def top_float_empties_tops(module: ModuleType, h: bool) -> Result:
    """An int top logprob that empties its entry's list of top logprobs."""
    w = writer(module)
    tops: list[Any] = []
    hook = Hook(tops.clear)
    tops += [(" a", hostile(-1, hook) if h else -1), (" b", -2.0, [98]), (" c", -3.0)]
    return {"out": outcome(lambda: w.step(" a", logprobs=[(" a", -1.0, None, tops)]))}


def logprob_float_rewrites_token_ids(module: ModuleType, h: bool) -> Result:
    """An int logprob whose float() puts a value that is no int64 in the token ids (written
    after the logprobs) and grows them: the ids as the call read them are written."""
    w = writer(module)
    ids = [5, 6]

    def rewrite() -> None:
        ids[1] = 2**70
        ids.append(-1)
    hook = Hook(rewrite)
    lp = hostile(-2, hook) if h else -2
    return {"out": outcome(lambda: w.step("x", token_ids=ids, logprobs=[("x", lp)]))}


def token_id_grows_its_list(module: ModuleType, h: bool) -> Result:
    """An int subclass token id whose methods grow the list it is in while it is written:
    the ids as the call read them are written, in both twins."""
    w = writer(module)
    ids: list[Any] = [5]
    hook = Hook(_grow(ids), _grow(ids), _grow(ids))
    ids += [hostile(6, hook) if h else 6, 7]
    return {"out": outcome(lambda: w.step("x", token_ids=ids))}


def bytes_list_emptied(module: ModuleType, h: bool) -> Result:
    """An int subclass in an entry's bytes list that empties that list."""
    w = writer(module)
    raw: list[Any] = [97]
    hook = Hook(raw.clear)
    raw += [hostile(98, hook) if h else 98, 99]
    return {"out": outcome(lambda: w.step("abc", logprobs=[("abc", -1.0, raw)]))}


def stop_reason_calls_back(module: ModuleType, h: bool) -> Result:
    """An int subclass stop reason whose methods call back into the writer (which is busy:
    RuntimeError, met and swallowed by the hook) and empty the token ids."""
    w = writer(module)
    ids = [1, 2, 3]
    hook = Hook(lambda: w.text("again"), ids.clear, lambda: w.steps([("x",)]))
    stop = hostile(9, hook) if h else 9
    out = outcome(lambda: w.step("x", token_ids=ids, finish_reason="stop", stop_reason=stop))
    return {"out": out, "met": hook.met}


def write_frame_name_hostile(module: ModuleType, h: bool) -> Result:
    """A str-subclass frame name in write() whose hash and == empty the token ids."""
    w = writer(module)
    ids = [1, 2, 3]
    hook = Hook(ids.clear)
    frame = hostile("text", hook) if h else "text"
    return {"out": outcome(lambda: w.write(frame, "x", token_ids=ids))}


def usage_count_empties_usage(module: ModuleType, h: bool) -> Result:
    """An int subclass usage count in a list usage that empties it."""
    w = writer(module)
    usage: list[Any] = [10]
    hook = Hook(usage.clear)
    usage += [hostile(2, hook) if h else 2, 3]
    return {"out": outcome(lambda: w.step("x", usage=usage))}


def text_str_subclass_empties_texts(module: ModuleType, h: bool) -> Result:
    """A str-subclass text in texts() whose methods empty the texts list."""
    w = writer(module)
    texts: list[Any] = []
    hook = Hook(texts.clear)
    texts += ["a", hostile("b\n", hook) if h else "b\n", "c"]
    return {"out": outcome(lambda: w.texts(texts))}


def responses_index_calls_back(module: ModuleType, h: bool) -> Result:
    """Responses deltas with an int subclass index whose methods call back into the writer
    (refused: it is busy), which must not count those events."""
    w = module.StreamWriter(shape("responses", "openai"), id="resp_1", model="m",
                            created=7, item_id="msg_1")
    hook = Hook(lambda: w.text("again"), lambda: w.texts(["again"]))
    index = hostile(0, hook) if h else 0
    out = outcome(lambda: w.texts(["a", "b"], index))
    return {"out": out, "met": hook.met, "seq": w.sequence_number}


CASES: dict[str, Callable[[ModuleType, bool], Result]] = {
    f.__name__: f for f in (
        logprob_float_empties_entries, entry_iter_empties_entries, kind_eq_empties_steps,
        top_float_empties_tops, logprob_float_rewrites_token_ids, token_id_grows_its_list,
        bytes_list_emptied, stop_reason_calls_back, write_frame_name_hostile,
        usage_count_empties_usage, text_str_subclass_empties_texts,
        responses_index_calls_back)}


def entry_with(**fields: Any) -> tuple[Any, ...]:
    base = {"token": " a", "logprob": -0.5, "bytes": [32, 97], "top": [(" a", -0.5)],
            "offset": 3}
    base.update(fields)
    return tuple(base.values())


# each argument position that takes a list or tuple: (call, keywords with VALUE, the
# plain value); the lying value is the plain one as a Lying list or LyingTuple
POSITIONS = {
    "token_ids": ("step", {"_args": ("x",), "token_ids": "VALUE"}, [1, 2, 3]),
    "prompt_token_ids": ("write", {"_args": ("start",), "prompt_token_ids": "VALUE"},
                         [4, 5]),
    "logprobs": ("step", {"_args": ("x",), "logprobs": "VALUE"},
                 [(" a", -0.5), (" b", -1.0, b"b")]),
    "logprob entry": ("step", {"_args": ("x",), "logprobs": [entry_with(), "ENTRY"]},
                      [" b", -1.0, [98]]),
    "entry bytes": ("step", {"_args": ("x",), "logprobs": [entry_with(bytes="VALUE")]},
                    [32, 97]),
    "top logprobs": ("step", {"_args": ("x",), "logprobs": [entry_with(top="VALUE")]},
                     [(" a", -0.5), (" b", -1.5)]),
    "top entry": ("step", {"_args": ("x",), "logprobs": [entry_with(top=["TOP"])]},
                  [" c", -2.0, [99]]),
    "usage": ("step", {"_args": ("x",), "usage": "VALUE"}, [10, 2]),
    "texts": ("texts", {"_args": ("VALUE",)}, ["a", "b\n", "é"]),
    "steps": ("steps", {"_args": ("VALUE",)}, [("a",), ("b", 1)]),
    "a step": ("steps", {"_args": ([("a",), "STEP"],)}, ["b", 1, "reasoning"]),
}


PLACES = ("VALUE", "ENTRY", "TOP", "STEP")


def _fill(value: Any, filler: Any) -> Any:
    """``value`` with each of PLACES (anywhere in its lists, tuples and dicts) replaced by
    ``filler`` (not looked into)."""
    if isinstance(value, str):
        return filler if value in PLACES else value
    if isinstance(value, dict):
        return {k: _fill(v, filler) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_fill(v, filler) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def lying(module: ModuleType, position: str, lying_type: str | None) -> Result:
    """The call of POSITIONS[position] with its value as a ``lying_type`` (Lying or
    LyingTuple; None: the plain value)."""
    call, kw, plain = POSITIONS[position]
    value = plain if lying_type is None else {"Lying": Lying, "LyingTuple": LyingTuple}[
        lying_type](plain)
    args = _fill(kw, value)
    positional = args.pop("_args", ())
    w = writer(module)
    return {"out": outcome(lambda: getattr(w, call)(*positional, **args))}


def module_of(kind: str) -> ModuleType:
    import importlib
    return importlib.import_module(f"tokcore.writer._writer_{kind}")


if __name__ == "__main__":
    kind, name = sys.argv[1], sys.argv[2]
    if name == "lying":
        print(json.dumps(lying(module_of(kind), sys.argv[3], sys.argv[4])))
    else:
        print(json.dumps(CASES[name](module_of(kind), True)))
