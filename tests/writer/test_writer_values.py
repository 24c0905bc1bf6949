"""The stream writer on the values a server holds and the steps it writes (issue 42):
``int`` and ``float`` subclasses (an ``int``-mixin ``Enum``, numpy's floats) written as the
serializers write them, never through their own methods; an int too large for a float named
by its slot; every shape's finishing step of every
kind against its stack's oracle (vLLM keeps a reasoning or tool-call delta on its finish
chunk, and writes an empty delta ``{}``); a usage count the frame has no place for refused
as any other value; ``step(*Step(...))``. Every test runs on both twins."""

from __future__ import annotations

import enum
import json
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from _writer_oracles import (
    CREATED,
    FINGERPRINT,
    ID,
    MODEL,
    ORACLES,
    VChoice,
    VChunk,
    VDelta,
    VDeltaFunctionCall,
    VDeltaToolCall,
    _v_logprobs,
    _v_usage,
    sse,
)
from pydantic import BaseModel

from tokcore import PROBE, Step, StreamShape, TokenLogprob, TopLogprob


class Reason(int, enum.Enum):
    """An int-mixin Enum: its str() is ``Reason.EOS`` (IntEnum's, since 3.11, the number)."""

    EOS = 2
    CREATED = 1732000000


class Hostile(int):
    """An int subclass whose every method a writer could call writes garbage."""

    def __repr__(self) -> str:
        return "x"

    __str__ = __repr__

    def __int__(self) -> int:
        return 999

    def __index__(self) -> int:
        return 999

    def __float__(self) -> float:
        return 999.5


class HostileFloat(float):
    def __repr__(self) -> str:
        return "nope"

    __str__ = __repr__

    def __float__(self) -> float:
        return 999.5


def writer(twin: ModuleType, api: str = "chat", name: str = "vllm", **kw: Any) -> Any:
    kw.setdefault("created", CREATED)
    return twin.StreamWriter(StreamShape(api, name), id=ID, model=MODEL,  # type: ignore[arg-type]
                             system_fingerprint=FINGERPRINT, **kw)


def vllm_finish(kind: str, s: dict[str, Any]) -> bytes:
    """vLLM's finish chunk as its chat generator builds it (serving.py): the parser's delta
    of the step (its content, reasoning or tool-call arguments; ``DeltaMessage()`` when it
    gave none), the finish and stop reasons, the fingerprint (no usage chunk follows)."""
    delta = {"text": lambda: VDelta(content=s["text"]),
             "reasoning": lambda: VDelta(reasoning=s["text"]),
             "tool_args": lambda: VDelta(tool_calls=[VDeltaToolCall(
                 index=s.get("tool_index", 0),
                 function=VDeltaFunctionCall(arguments=s["text"]))]),
             }[kind]() if s["text"] is not None else VDelta()
    choice = VChoice(index=s["index"], delta=delta, logprobs=_v_logprobs(s["logprobs"]),
                     finish_reason=s["finish_reason"], stop_reason=s["stop_reason"],
                     token_ids=s["token_ids"])
    chunk = VChunk(id=ID, object="chat.completion.chunk", created=CREATED, choices=[choice],
                   model=MODEL)
    chunk.system_fingerprint = FINGERPRINT
    if s.get("usage") is not None:
        chunk.usage = _v_usage(s["usage"])
    return sse(chunk.model_dump_json(exclude_unset=True))


# --- int and float subclasses: their value, as pydantic and json.dumps write it

def test_the_serializers_write_a_subclass_by_its_value() -> None:
    """The oracle's premise, measured: pydantic and json.dumps write an int subclass (an
    int-mixin Enum) and a float subclass (numpy.float64) by their value."""

    class M(BaseModel):
        i: int
        f: float

    for value, number in ((Reason.EOS, 2), (Hostile(5), 5)):
        assert json.dumps(value) == str(number)
        assert M(i=value, f=1.0).model_dump_json() == f'{{"i":{number},"f":1.0}}'
    for value, number in ((HostileFloat(0.5), 0.5), (np.float64(1e-05), 1e-05)):
        assert json.dumps(value) == repr(number)
        assert M(i=0, f=value).model_dump_json() == M(i=0, f=number).model_dump_json()


def test_int_and_float_subclasses_are_written_as_their_value(writer_twin: ModuleType) -> None:
    """Every int and float slot of a step given a subclass: the bytes of the plain values
    (the vLLM oracle: pydantic's model_dump_json), valid JSON, no method of theirs run."""
    entry = TokenLogprob(" a", np.float64(-1e-05), b" a",
                         [TopLogprob(" a", HostileFloat(-0.5)), TopLogprob(" b", Hostile(-3))],
                         None)
    plain = TokenLogprob(" a", -1e-05, b" a", [TopLogprob(" a", -0.5), TopLogprob(" b", -3.0)],
                         None)
    odd = dict(text="!", index=Hostile(1), token_ids=[Hostile(5), Reason.EOS],
               logprobs=[entry], finish_reason="stop", stop_reason=Reason.EOS,
               usage=(Hostile(7), Reason.EOS, None, Hostile(1)))
    step = dict(text="!", index=1, token_ids=[5, 2], logprobs=[plain], finish_reason="stop",
                stop_reason=2, usage=(7, 2, None, 1))
    got = writer(writer_twin, created=Reason.CREATED).step(**odd)
    assert got == vllm_finish("text", step)
    assert json.loads(got[6:])["choices"][0]["stop_reason"] == 2
    assert got == writer(writer_twin).step(**step)


@pytest.mark.parametrize(("api", "name"), [("chat", "vllm"), ("chat", "openai"),
                                           ("responses", "openai"),
                                           ("messages", "anthropic")])
def test_created_as_an_int_enum(writer_twin: ModuleType, api: str, name: str) -> None:
    """``created`` of an Enum (an int subclass): its number, on every shape (the Responses
    one writes it as a float; Anthropic's has none), from both twins."""
    frame = {"chat": "start", "responses": "created", "messages": "message_start"}[api]
    got = writer(writer_twin, api, name, created=Reason.CREATED).write(frame)
    assert got == writer(writer_twin, api, name, created=1732000000).write(frame)
    assert b"Reason" not in got and (api == "messages") != (b"1732000000" in got)


def test_a_json_style_writes_a_float_subclass_as_json_dumps(writer_twin: ModuleType) -> None:
    """The ``json`` style writes floats by repr: a subclass's own repr is not used (an int
    subclass in a float slot: the float of its value, as the plain int's)."""
    probe = json.dumps({"t": PROBE.text, "lp": [{"token": PROBE.lp_token,
                                                  "logprob": PROBE.lp_logprob}]})
    shape = StreamShape("chat", {"text": probe}, style="json")
    w = writer_twin.StreamWriter(shape, id=ID, model=MODEL, created=1)
    values = [np.float64(-1e-05), HostileFloat(-0.25)]
    got = w.step("x", logprobs=[(" t", v) for v in values])
    want = json.dumps({"t": "x", "lp": [{"token": " t", "logprob": v} for v in values]})
    assert got == f"data: {want}\n\n".encode()
    assert w.step("x", logprobs=[(" t", Hostile(-3)), (" t", Reason.EOS)]) == \
        w.step("x", logprobs=[(" t", -3), (" t", 2)])


@pytest.mark.parametrize("top", [False, True])
def test_a_logprob_too_large_for_a_float_names_its_slot(writer_twin: ModuleType,
                                                        top: bool) -> None:
    huge = 2**1100
    entry = (" a", -1.0, None, [(" b", huge)]) if top else (" a", huge)
    slot = "logprobs[0].top[0].logprob" if top else "logprobs[0].logprob"
    with pytest.raises(OverflowError) as raised:
        writer(writer_twin).step("a", logprobs=[entry])
    assert str(raised.value) == f"{slot} = {huge} is outside the float range"
    with pytest.raises(OverflowError, match=r"^logprobs\[0\]\.logprob = an int of 20001 bits "
                                            r"is outside the float range$"):
        writer(writer_twin).step("a", logprobs=[(" a", 2**20000)])  # (too long for str())
    with pytest.raises(OverflowError, match=r"^logprobs\[0\]\.logprob = -\d+ is outside the "):
        writer(writer_twin).step("a", logprobs=[(" a", -(2**1024))])


# --- every shape's finishing step of every kind, against its stack

FINISHING = [(api, name, kind) for api, name, kinds in (
    ("chat", "vllm", ("text", "reasoning", "tool_args")),
    ("chat", "trtllm", ("text", "reasoning", "tool_args")),
    ("chat", "sglang", ("text", "reasoning")),
    ("chat", "openai", ("text", "tool_args")),
    ("completions", "vllm", ("text",)), ("completions", "trtllm", ("text",)),
    ("completions", "sglang", ("text",)), ("completions", "openai", ("text",)),
) for kind in kinds]


def oracle(api: str, name: str, kind: str, s: dict[str, Any]) -> bytes:
    """The finishing step as the stack writes it: vLLM's chat, its finish chunk with the
    step's delta; the others, the chunk of the step's kind with the finish reason in it
    (the chat ones whose finish chunk has no text: that chunk when the step has none)."""
    if (api, name) == ("chat", "vllm"):
        return vllm_finish(kind, s)
    if api == "chat" and name in ("sglang", "openai") and kind == "text" and s["text"] is None:
        return ORACLES[api, name]("finish", s)
    return ORACLES[api, name](kind, s)


def _texts(api: str, name: str, kind: str) -> tuple[str | None, ...]:
    """The finishing texts a stack writes for a kind: no text (None) only where its
    finishing chunk can go without one (vLLM's chat, and the chat text of SGLang and
    OpenAI); everywhere else the chunk always has its text."""
    textless = api == "chat" and (name == "vllm" or kind == "text" and name != "trtllm")
    return ("done.", "", None) if textless else ("done.", "")


@pytest.mark.parametrize(("api", "name", "kind", "text"),
                         [(*case, text) for case in FINISHING for text in _texts(*case)])
def test_a_finishing_step_of_each_kind(writer_twin: ModuleType, api: str, name: str,
                                       kind: str, text: str | None) -> None:
    entry = TokenLogprob(" d", -0.25, b" d", [TopLogprob(" d", -0.25, b" d")],
                         3 if api == "completions" else None)
    logprobs = None if kind != "text" or text is None else [entry]
    stop = None if name == "openai" else 7
    s = {"text": text, "index": 1, "token_ids": [5] if name == "vllm" else None,
         "logprobs": logprobs, "finish_reason": "stop", "stop_reason": stop, "usage": None,
         "fingerprint": FINGERPRINT, "tool_index": 0}
    w = writer(writer_twin, api, name)
    got = w.step(text, 1, kind=kind, token_ids=s["token_ids"], logprobs=logprobs,
                 finish_reason="stop", stop_reason=stop)
    assert got == oracle(api, name, kind, s)


def test_vllm_keeps_the_reasoning_on_its_finish_chunk(writer_twin: ModuleType) -> None:
    """The issue's case: not written as the answer's content."""
    got = json.loads(writer(writer_twin).step("so.", kind="reasoning",
                                              finish_reason="stop")[6:])
    assert got["choices"][0]["delta"] == {"reasoning": "so."}
    assert got["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("name", ["vllm", "trtllm", "sglang", "openai"])
def test_a_finishing_reasoning_step_without_a_reasoning_frame(writer_twin: ModuleType,
                                                              name: str) -> None:
    """Completions have no reasoning: a finishing reasoning step is refused as an unfinished
    one is, not written as the completion's text."""
    w = writer(writer_twin, "completions", name)
    with pytest.raises(ValueError) as unfinished:
        w.step("so.", kind="reasoning")
    assert str(unfinished.value) == "completions has no frame 'reasoning': its frames are " \
        "text, finish, usage, done"
    with pytest.raises(ValueError) as finishing:
        w.step("so.", kind="reasoning", finish_reason="stop")
    assert str(finishing.value) == str(unfinished.value)


def test_omit_none_takes_the_text_of_a_finish_frame_only() -> None:
    probe = json.dumps({"d": {"c": PROBE.text}, "f": PROBE.finish_reason})
    shape = StreamShape("chat", {"text": json.dumps({"t": PROBE.text}), "finish": probe},
                        omit_none=["finish.text"])
    assert shape._programs["finish"].omitted == {"text"}
    for name in ("text.text", "text", "start.text"):
        with pytest.raises(ValueError, match=f"omit_none: '{name}' is not a slot that may be "
                                             f"None .* or the text of a frame whose text is "
                                             f"optional"):
            StreamShape("chat", {"text": json.dumps({"t": PROBE.text})}, omit_none=[name])
    with pytest.raises(ValueError, match="cannot be left out"):
        StreamShape("chat", {"text": json.dumps({"t": PROBE.text}), "finish": json.dumps(
            {"d": {"c": PROBE.text, "r": 1}, "f": PROBE.finish_reason})},
            omit_none=["finish.text"])


# --- usage counts without a place; step(*Step(...))

@pytest.mark.parametrize(("api", "name", "counts", "missing"), [
    ("chat", "vllm", (1, 2, 3, None), "cached_tokens"),
    ("chat", "trtllm", (1, 2, None, 4), "reasoning_tokens"),
    ("chat", "sglang", (1, 2, None, 4), "reasoning_tokens"),
    ("completions", "vllm", (1, 2, None, 4), "reasoning_tokens"),
])
def test_a_usage_count_without_a_place_is_refused(writer_twin: ModuleType, api: str,
                                                  name: str, counts: tuple[int | None, ...],
                                                  missing: str) -> None:
    w = writer(writer_twin, api, name)
    with pytest.raises(ValueError, match=f"'text' frame of this {api} shape \\({name}\\) has "
                                         f"no {missing}"):
        w.step("a", usage=counts)
    if (api, name) in (("chat", "trtllm"), ("chat", "sglang")):
        with pytest.raises(ValueError, match=f"'usage' frame .* has no {missing}"):
            w.usage(*counts)
    fits = tuple(None if i >= 2 and c is not None else c for i, c in enumerate(counts))
    assert w.step("a", usage=fits) == writer(writer_twin, api, name).step("a", usage=fits)


@pytest.mark.parametrize(("api", "name"), [("chat", "vllm"), ("chat", "sglang"),
                                           ("completions", "openai")])
def test_a_step_tuple_is_steps_arguments(writer_twin: ModuleType, api: str,
                                         name: str) -> None:
    kind = "reasoning" if name == "sglang" else "text"
    step = Step("a", 2, kind, finish_reason="stop")
    assert writer(writer_twin, api, name).step(*step) == \
        writer(writer_twin, api, name).steps([step])


def test_vllm_with_a_usage_chunk_writes_the_fingerprint_on_it_alone(
        writer_twin: ModuleType) -> None:
    """The guide's way (vLLM with ``include_usage``): the steps from a writer made without
    the fingerprint, the usage chunk from one made with it, each as vLLM writes it."""
    steps = writer_twin.StreamWriter(StreamShape("chat", "vllm"), id=ID, model=MODEL,
                                     created=CREATED)
    last = writer(writer_twin)
    s = {"text": "!", "index": 0, "token_ids": None, "logprobs": None, "finish_reason": "stop",
         "stop_reason": None, "usage": None, "fingerprint": None}
    assert steps.step("!", finish_reason="stop") == ORACLES["chat", "vllm"]("finish", s)
    assert last.usage(12, 2, 3, 1) == ORACLES["chat", "vllm"]("usage", {
        "usage": (12, 2, 3, 1), "fingerprint": FINGERPRINT})
