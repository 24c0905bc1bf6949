"""The stream writer given hostile values, on both twins: subclasses of the types it takes
whose dunder methods run Python code (emptying or growing the lists being written, calling
back into the writer), lists and tuples that lie about their items, several bad values in
one call, the constructor's bad arguments.

The compiled twin takes the exact built-in types on its C path and hands any call with
another value to the Python twin's code, which reads each list once, its items as stored:
so a hostile call writes what the same call with its plain values writes (the oracle here),
in both twins, and never crashes. The cases that crashed the compiled twin run in a
subprocess of their own (tests/writer/_hostile.py), so that a crash fails one test.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from enum import IntEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import _hostile
import pytest
from _hostile import outcome
from _twins import KINDS, twin

from tokcore import PROBE, StreamShape, TokenLogprob, TopLogprob, Usage

HERE = Path(__file__).resolve().parent


def isolated(kind: str, *case: str) -> dict[str, Any]:
    """One case of _hostile on the ``kind`` twin in a fresh interpreter (the environment
    as is: a sanitizer's preload too): its result, or a failure naming the crash."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, str(HERE / "_hostile.py"), kind, *case],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        pytest.fail(f"the {kind} twin's {case} ended with {done.returncode}:\n"
                    f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("case", sorted(_hostile.CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_hostile_values_write_what_plain_values_write(kind: str, case: str) -> None:
    """Item 1 and 6 of issue 42: a value whose methods empty, grow or rewrite the lists of
    the call, or call back into the writer: the plain values' bytes (or exception), and
    a call back refused with RuntimeError (the writer is busy)."""
    module = twin("writer", kind)
    got = isolated(kind, case)
    plain = _hostile.CASES[case](module, False)
    assert got["out"] == plain["out"]
    assert got.get("seq") == plain.get("seq")
    assert set(got.get("met", ())) <= {"RuntimeError"}


@pytest.mark.parametrize("case", sorted(_hostile.CASES))
def test_hostile_twins_agree(case: str) -> None:
    """The plain calls of the cases: the same outcome in both twins."""
    results = [_hostile.CASES[case](twin("writer", kind), False) for kind in KINDS]
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("lying_type", ["Lying", "LyingTuple"])
@pytest.mark.parametrize("position", sorted(_hostile.POSITIONS))
@pytest.mark.parametrize("kind", KINDS)
def test_lying_lists_are_read_as_stored(kind: str, position: str, lying_type: str) -> None:
    """Item 5: a list or tuple subclass whose __len__, __iter__ and __getitem__ tell of other
    items (the compiled twin read past a logprob entry's end): its items as stored are
    written (as json's and orjson's encoders read them), in both twins: the plain list's
    bytes."""
    twin("writer", kind)  # (skipped under TOKCORE_NO_EXTENSIONS)
    got = isolated(kind, "lying", position, lying_type)
    assert got["out"] == _hostile.lying(_hostile.module_of(kind), position, None)["out"]
    assert got["out"][0] == "bytes"


class GrowingList(list):  # type: ignore[type-arg]
    """A list whose iterator appends to it while it runs (without end, were it followed)."""

    def __iter__(self) -> Any:
        for k in range(10**6):
            self.append(k)
            yield k


class BytesOfOthers(bytes):
    def __iter__(self) -> Any:
        return iter(b"zzz")

    def __len__(self) -> int:
        return 0

    def __bytes__(self) -> bytes:
        return b"other"


def test_growing_lists_write_their_items_at_the_check(writer_twin: ModuleType) -> None:
    """Item 8: token ids that grow while they are written: the items the call read (both
    twins; the compiled one wrote 180 bytes, the Python one 200,174)."""
    w = _hostile.writer(writer_twin)
    grown = GrowingList([5, 6])
    assert w.step("x", token_ids=grown) == w.step("x", token_ids=[5, 6])
    entry = ("ab", -1.0, BytesOfOthers(b"ab"))
    assert w.step("ab", logprobs=[entry]) == w.step("ab", logprobs=[("ab", -1.0, b"ab")])


class Reason(IntEnum):
    EOS = 2


class Logprob(float):
    def __repr__(self) -> str:
        return "Logprob(...)"


@pytest.mark.parametrize("style", ["vllm", "sglang", "trtllm", "openai"])
def test_subclass_values_go_to_the_python_twin(style: str) -> None:
    """Item 1: the compiled twin's checks take no float or int subclass (numpy.float64 is
    a float subclass): such a call is the Python twin's, so both twins give one outcome."""
    shape = StreamShape("chat", style)  # type: ignore[arg-type]
    calls = [
        lambda w: w.step("x", logprobs=[(" a", Logprob(-0.5), None, [(" b", Logprob(-1.0))])]),
        lambda w: w.step("x", Reason.EOS, finish_reason="stop"),
        lambda w: w.step("x", token_ids=[1, Reason.EOS]),
        lambda w: w.usage(Reason.EOS, 3),
        lambda w: w.step("x", logprobs=[(" a", True)]),
    ]
    for call in calls:
        results = []
        for kind in KINDS:
            w = twin("writer", kind).StreamWriter(shape, id="i", model="m", created=1)
            results.append(outcome(lambda w=w, call=call: call(w)))  # type: ignore[misc]
        assert results[0] == results[-1]


def test_numpy_floats_go_to_the_python_twin() -> None:
    np = pytest.importorskip("numpy")
    results = []
    for kind in KINDS:
        w = _hostile.writer(twin("writer", kind))
        results.append(outcome(lambda w=w: w.step("x", logprobs=[("x", np.float64(-0.5))])))
    assert results[0] == results[-1]


# shapes and their frames with logprobs, for two bad values in one call
LOGPROB_SHAPES = [("chat", "vllm"), ("chat", "sglang"), ("chat", "trtllm"), ("chat", "openai"),
                  ("completions", "vllm"), ("completions", "sglang"),
                  ("completions", "trtllm"), ("completions", "openai")]


@pytest.mark.parametrize("key", LOGPROB_SHAPES, ids=lambda k: "-".join(k))
def test_two_bad_values_raise_the_first_in_the_documented_order(key: tuple[str, str]) -> None:
    """Item 5: a logprob of 2**1100 and a lone surrogate in one call: the same exception in
    both twins, the first bad value's in the order the StreamWriter docstring gives (the
    step's own arguments, then the logprobs entry by entry, then a logprob token's lone
    surrogate while written)."""
    shape = StreamShape(*key)  # type: ignore[arg-type]
    big = 2**1100
    offset = 0
    calls = {
        "surrogate text, big logprob": lambda w: w.step(
            "a\ud800", logprobs=[("a", big, None, [], offset)]),
        "surrogate finish_reason, big logprob": lambda w: w.step(
            "a", logprobs=[("a", big, None, [], offset)], finish_reason="stop\udc00"),
        "surrogate stop_reason, big logprob": lambda w: w.step(
            "a", logprobs=[("a", big, None, [], offset)], finish_reason="stop",
            stop_reason="\udc00"),
        "surrogate token, big logprob": lambda w: w.step(
            "a", logprobs=[("a\ud800", big, None, [], offset)]),
        "surrogate token, big logprob after": lambda w: w.step(
            "a", logprobs=[("a\ud800", -1.0, None, [], offset), ("b", big, None, [], offset)]),
        "big top logprob, surrogate top token": lambda w: w.step(
            "a", logprobs=[("a", -1.0, None, [("b\udfff", -1.0), ("c", big)], offset)]),
    }
    for name, call in calls.items():
        results = []
        for kind in KINDS:
            w = twin("writer", kind).StreamWriter(shape, id="i", model="m", created=1)
            results.append(outcome(lambda w=w, call=call: call(w)))  # type: ignore[misc]
        assert results[0] == results[-1], name
        assert results[0][0] == "raise", name
        surrogate = results[0][1] in ("UnicodeEncodeError", "TypeError")
        first = name.split(",")[0]
        assert surrogate == (first in ("surrogate text", "surrogate finish_reason",
                                       "surrogate stop_reason")), (name, results[0])


BAD_CONSTRUCTIONS = [
    ((PROBE,), {}),  # (not a shape: the TypeError of the value, after the arguments bind)
    (("SHAPE", "chatcmpl-1"), {"model": "m"}),
    (("SHAPE", "chatcmpl-1"), {}),
    (("SHAPE",), {"model": "m"}),
    (("SHAPE",), {}),
    (("SHAPE",), {"id": "i", "model": "m", "bogus": 1}),
    ((), {"id": "i", "model": "m"}),
    (("SHAPE",), {"id": 1, "model": "m", "created": "x"}),
    (("SHAPE",), {"id": "i", "model": "m", "created": Reason.EOS}),
]


@pytest.mark.parametrize("args, kw", BAD_CONSTRUCTIONS)
def test_constructor_errors_are_the_same(args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    """Item 8: arguments that do not bind (too many positional ones, a keyword-only one
    missing, an unknown one): the same TypeError and message in both twins."""
    shape = StreamShape("chat", "vllm")
    args = tuple(shape if a == "SHAPE" else a for a in args)
    results = []
    for kind in KINDS:
        module = twin("writer", kind)
        results.append(outcome(lambda m=module: m.StreamWriter(*args, **kw).text("x")))
    assert results[0] == results[-1]


def test_constructor_signature_is_the_same() -> None:
    """Item 8: help() and inspect show one signature (id and model keyword-only)."""
    def shown(module: ModuleType) -> list[tuple[str, Any, Any]]:
        signature = inspect.signature(module.StreamWriter)
        return [(p.name, p.kind, p.default) for p in signature.parameters.values()]
    assert shown(twin("writer", "c")) == shown(twin("writer", "py"))
    assert inspect.signature(twin("writer", "c").StreamWriter).parameters["id"].kind is \
        inspect.Parameter.KEYWORD_ONLY


def test_argument_tuples_take_the_c_path() -> None:
    """The package's own NamedTuples are tuples to the C path (not sent to the Python
    twin as subclasses): the same bytes as plain tuples."""
    w = _hostile.writer(twin("writer", "c"))
    named = w.step("x", logprobs=[TokenLogprob(" a", -0.5, b" a", [TopLogprob(" b", -1.0)])],
                   usage=Usage(3, 4))
    plain = w.step("x", logprobs=[(" a", -0.5, b" a", [(" b", -1.0)])], usage=(3, 4))
    assert named == plain
