"""Each built-in shape byte for byte as its stack writes it (tests/writer/_writer_oracles.py:
models shaped like the stack's, built as its serving code builds them, dumped by its
serializer), on hypothesis's frames; and shapes made from probes that the openai and
anthropic packages' own models wrote, against those models."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from _budget import examples
from _writer_oracles import (
    CREATED,
    FINGERPRINT,
    ID,
    MODEL,
    ORACLES,
    Step,
    loads,
    sse,
)
from _writer_oracles import ROLE as ROLE_
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcore import PROBE, StreamShape
from tokcore import Step as tokcore_step

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
FLOAT = st.floats()
COUNT = st.integers(0, 2**40)
BYTES = st.none() | st.binary(max_size=4)
USAGE = st.none() | st.tuples(COUNT, COUNT, st.none() | COUNT, st.none() | COUNT)


def logprobs(tops_may_be_none: bool) -> st.SearchStrategy[Any]:
    top = st.tuples(TEXT, FLOAT, BYTES)
    tops = st.lists(top, max_size=3)
    if tops_may_be_none:
        tops = st.none() | tops
    entry = st.tuples(TEXT, FLOAT, BYTES, tops, st.integers(0, 10**6))
    return st.none() | st.lists(entry, max_size=3)


#: the frames each built-in shape writes by step(): (kind, has finish)
STEP_KINDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("chat", "vllm"): ("text", "reasoning", "finish"),
    ("chat", "trtllm"): ("text", "reasoning", "finish"),
    ("chat", "sglang"): ("text", "reasoning", "finish"),
    ("chat", "openai"): ("text", "finish"),
    ("completions", "vllm"): ("text", "finish"),
    ("completions", "trtllm"): ("text", "finish"),
    ("completions", "sglang"): ("text", "finish"),
    ("completions", "openai"): ("text", "finish"),
}
#: the shapes whose token ids a step may carry, whose entries' top logprobs may be None
TOKEN_IDS = {("chat", "vllm"), ("chat", "sglang"), ("completions", "vllm"),
             ("completions", "trtllm")}
TOPS_NONE = {("chat", "trtllm"), ("completions", "vllm"), ("completions", "trtllm"),
             ("completions", "sglang"), ("completions", "openai")}


def oracle_kind(api: str, name: str, kind: str, step: Step) -> str:
    """The construction site the stack's code takes for a step: its finish chunk, or its
    text chunk with the finish reason in it."""
    if kind != "finish":
        return kind
    if api == "completions":
        return "text"
    if name == "vllm":
        return "finish"
    if name == "trtllm" or step.get("text") is not None:
        return "text"
    return "finish"


def fit_usage(api: str, name: str, usage: Any, frame: str = "text") -> Any:
    """A usage tuple with only the counts the shape's frame (its step frames share one
    usage) has a place for (another one is a ValueError, as any value a frame has no place
    for)."""
    if usage is None:
        return None
    slots = StreamShape(api, name)._programs[frame].slots
    return (usage[0], usage[1], usage[2] if "cached_tokens" in slots else None,
            usage[3] if "reasoning_tokens" in slots else None)


@st.composite
def steps(draw: st.DrawFn, api: str, name: str) -> tuple[str, Step]:
    kind = draw(st.sampled_from(STEP_KINDS[api, name]))
    step: Step = {"index": draw(st.integers(0, 7)),
                  "token_ids": draw(st.none() | st.lists(st.integers(0, 2**31 - 1), max_size=4))
                  if (api, name) in TOKEN_IDS else None,
                  "logprobs": None if kind == "reasoning" and name == "sglang"
                  else draw(logprobs((api, name) in TOPS_NONE)),
                  "usage": fit_usage(api, name, draw(USAGE)), "stop_reason": None,
                  "finish_reason": None}
    step["text"] = draw(TEXT)
    if (api, name) == ("completions", "vllm"):  # return_token_ids: the prompt's, first chunk
        step["prompt_token_ids"] = draw(st.none() | st.lists(st.integers(0, 2**31 - 1),
                                                             max_size=4))
    if kind == "finish":
        step["finish_reason"] = draw(st.sampled_from(["stop", "length", "tool_calls"]))
        if name != "openai":  # (OpenAI has no stop reason)
            step["stop_reason"] = draw(st.none() | st.integers(0, 10**6) | TEXT)
        if name in ("sglang", "openai") and api == "chat" and draw(st.booleans()):
            step["text"] = None
    elif name == "sglang":
        step["stop_reason"] = draw(st.none() | TEXT)
    if kind == "reasoning" and name == "trtllm":
        step["logprobs"] = None
    if api == "completions":
        for entry in step["logprobs"] or ():
            assert isinstance(entry, tuple)
    return kind, step


def writer(twin: ModuleType, api: str, name: str, fingerprint: str | None = FINGERPRINT) -> Any:
    return twin.StreamWriter(StreamShape(api, name), id=ID, model=MODEL,  # type: ignore[arg-type]
                             created=CREATED, system_fingerprint=fingerprint)


def write_step(w: Any, kind: str, s: Step) -> bytes:
    if s.get("prompt_token_ids") is None:  # (the argument's default)
        return w.step(s.get("text"), s["index"], kind="text" if kind == "finish" else kind,
                      token_ids=s.get("token_ids"), logprobs=s.get("logprobs"),
                      finish_reason=s.get("finish_reason"), stop_reason=s.get("stop_reason"),
                      usage=s.get("usage"))
    return w.step(s.get("text"), s["index"], kind="text" if kind == "finish" else kind,
                  token_ids=s.get("token_ids"), logprobs=s.get("logprobs"),
                  finish_reason=s.get("finish_reason"), stop_reason=s.get("stop_reason"),
                  usage=s.get("usage"), prompt_token_ids=s["prompt_token_ids"])


SHAPES = sorted(STEP_KINDS)


@pytest.mark.parametrize(("api", "name"), SHAPES)
@settings(max_examples=examples(200))
@given(data=st.data())
def test_steps_as_the_stack_writes_them(writer_twin: ModuleType, api: str, name: str,
                                        data: st.DataObject) -> None:
    fingerprint = data.draw(st.none() | st.just(FINGERPRINT))
    w = writer(writer_twin, api, name, fingerprint)
    kind, step = data.draw(steps(api, name))
    step["fingerprint"] = fingerprint
    got = write_step(w, kind, step)
    assert got == ORACLES[api, name](oracle_kind(api, name, kind, step), step)


@pytest.mark.parametrize(("api", "name"), SHAPES)
@settings(max_examples=examples(100))
@given(data=st.data())
def test_usage_frame(writer_twin: ModuleType, api: str, name: str, data: st.DataObject) -> None:
    fingerprint = data.draw(st.none() | st.just(FINGERPRINT))
    usage = data.draw(st.tuples(COUNT, COUNT, st.none() | COUNT, st.none() | COUNT))
    if name in ("trtllm", "sglang"):
        usage = usage[:3]
    if api == "completions" and name == "vllm":
        usage = usage[:3]
    got = writer(writer_twin, api, name, fingerprint).usage(*usage)
    assert got == ORACLES[api, name]("usage", {"usage": usage, "fingerprint": fingerprint})


@pytest.mark.parametrize("name", ["vllm", "trtllm", "sglang", "openai"])
@settings(max_examples=examples(60))
@given(index=st.integers(0, 7), usage=USAGE,
       prompt_ids=st.none() | st.lists(st.integers(0, 2**31 - 1), max_size=5) | st.binary(
           max_size=3))
def test_start_frame(writer_twin: ModuleType, name: str, index: int, usage: Any,
                     prompt_ids: Any) -> None:
    if name in ("sglang", "openai"):
        usage = None
    usage = fit_usage("chat", name, usage, "start")
    w = writer(writer_twin, "chat", name)
    if name != "vllm":  # (only vLLM's first chunk carries the prompt's ids)
        got = w.write("start", index=index, usage=usage)
        prompt_ids = None
    else:
        got = w.write("start", index=index, usage=usage, prompt_token_ids=prompt_ids)
    assert got == ORACLES["chat", name]("start", {
        "index": index, "usage": usage, "fingerprint": FINGERPRINT,
        "prompt_token_ids": None if prompt_ids is None else list(prompt_ids)})


def test_prompt_token_ids_only_where_the_shape_has_them(writer_twin: ModuleType) -> None:
    w = writer(writer_twin, "chat", "vllm")
    with pytest.raises(ValueError, match="'text' frame of this chat shape .vllm. has no "
                                         "prompt_token_ids"):
        w.step("a", prompt_token_ids=[1])
    with pytest.raises(TypeError, match=r"prompt_token_ids\[1\] must be an int, not str"):
        w.write("start", prompt_token_ids=[1, "2"])
    assert b'"prompt_token_ids":[7,8]' in writer(writer_twin, "completions", "vllm").steps(
        [tokcore_step("a", prompt_token_ids=[7, 8])])


@pytest.mark.parametrize("name", ["vllm", "trtllm", "openai"])
@settings(max_examples=examples(60))
@given(index=st.integers(0, 7), tool_index=st.integers(0, 5), text=TEXT, tool_id=TEXT,
       tool_name=TEXT, usage=USAGE)
def test_tool_call_frames(writer_twin: ModuleType, name: str, index: int, tool_index: int,
                          text: str, tool_id: str, tool_name: str, usage: Any) -> None:
    if name == "openai":
        usage = None
    usage = fit_usage("chat", name, usage, "tool_start")
    w = writer(writer_twin, "chat", name)
    step = {"index": index, "tool_index": tool_index, "text": text, "tool_id": tool_id,
            "tool_name": tool_name, "usage": usage, "logprobs": None, "token_ids": None,
            "finish_reason": None, "fingerprint": FINGERPRINT}
    first = w.write("tool_start", None if name in ("vllm", "openai") else text, index,
                    tool_index=tool_index, tool_id=tool_id, tool_name=tool_name, usage=usage)
    assert first == ORACLES["chat", name]("tool_start", step)
    more = w.write("tool_args", text, index, tool_index=tool_index, usage=usage)
    assert more == ORACLES["chat", name]("tool_args", step)


@settings(max_examples=examples(100))
@given(data=st.data())
def test_responses_deltas(writer_twin: ModuleType, data: st.DataObject) -> None:
    w = writer(writer_twin, "responses", "openai")
    start = data.draw(st.integers(0, 10**6))
    w.sequence_number = start
    kinds = data.draw(st.lists(st.sampled_from(["text", "reasoning", "tool_args"]),
                               min_size=1, max_size=4))
    expected, got = [], []
    for i, kind in enumerate(kinds):
        step = {"text": data.draw(TEXT), "index": data.draw(st.integers(0, 3)),
                "item_id": data.draw(TEXT), "content_index": data.draw(st.integers(0, 3)),
                "sequence_number": start + i,
                "logprobs": data.draw(logprobs(False)) if kind == "text" else None}
        if kind == "tool_args":
            step["content_index"] = 0
        got.append(w.write(kind, step["text"], step["index"], item_id=step["item_id"],
                           content_index=step["content_index"], logprobs=step["logprobs"]))
        expected.append(ORACLES["responses", "openai"](kind, step))
    assert got == expected
    assert w.sequence_number == start + len(kinds)


@settings(max_examples=examples(60))
@given(text=TEXT, index=st.integers(0, 3), usage=st.tuples(COUNT, COUNT, st.none() | COUNT),
       tool_id=TEXT, tool_name=TEXT, stop=st.sampled_from(["end_turn", "max_tokens"]),
       sequence=st.none() | TEXT)
def test_messages_stream(writer_twin: ModuleType, text: str, index: int, usage: Any, tool_id: str,
                         tool_name: str, stop: str, sequence: str | None) -> None:
    w = writer(writer_twin, "messages", "anthropic")
    oracle = ORACLES["messages", "anthropic"]
    s = {"text": text, "index": index, "usage": usage, "tool_id": tool_id,
         "tool_name": tool_name, "finish_reason": stop, "stop_reason": sequence}
    got = [w.write("message_start", usage=usage), w.write("text_start", index=index),
           w.text(text, index), w.write("reasoning_start", index=index),
           w.write("reasoning", text, index),
           w.write("tool_start", index=index, tool_id=tool_id, tool_name=tool_name),
           w.write("tool_args", text, index), w.write("block_stop", index=index),
           w.write("message_delta", finish_reason=stop, stop_reason=sequence,
                   usage=usage[:2]),  # (its usage: the output tokens alone)
           w.write("ping"), w.done()]
    kinds = ["message_start", "text_start", "text", "reasoning_start", "reasoning",
             "tool_start", "tool_args", "block_stop", "message_delta", "ping", "message_stop"]
    assert got == [oracle(kind, s) for kind in kinds]


@pytest.mark.parametrize(("api", "name"), SHAPES)
def test_done(writer_twin: ModuleType, api: str, name: str) -> None:
    assert writer(writer_twin, api, name).done() == b"data: [DONE]\n\n"


# --- probes made by the openai and anthropic packages' own models


def _openai_probes() -> dict[str, str]:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta, ChoiceLogprobs
    from openai.types.chat.chat_completion_token_logprob import (
        ChatCompletionTokenLogprob,
        TopLogprob,
    )

    def chunk(delta: ChoiceDelta, logprobs: bool, finish: bool) -> str:
        lp = ChoiceLogprobs.model_construct(content=[ChatCompletionTokenLogprob.model_construct(
            token=PROBE.lp_token, bytes=list(PROBE.lp_bytes), logprob=PROBE.lp_logprob,
            top_logprobs=[TopLogprob.model_construct(token=PROBE.top_token,
                                                     bytes=list(PROBE.top_bytes),
                                                     logprob=PROBE.top_logprob)])])
        choice = Choice.model_construct(delta=delta, index=PROBE.index,
                                        finish_reason=PROBE.finish_reason if finish else None,
                                        logprobs=lp if logprobs else None)
        return ChatCompletionChunk.model_construct(
            id=PROBE.id, choices=[choice], created=PROBE.created, model=PROBE.model,
            object="chat.completion.chunk").model_dump_json(exclude_unset=True)

    return {"text": chunk(ChoiceDelta.model_construct(content=PROBE.text), True, False),
            "finish": chunk(ChoiceDelta.model_construct(), False, True)}


def _openai_oracle(text: str | None, index: int, entries: Any, finish: str | None) -> bytes:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta, ChoiceLogprobs
    from openai.types.chat.chat_completion_token_logprob import (
        ChatCompletionTokenLogprob,
        TopLogprob,
    )

    lp = None if entries is None else ChoiceLogprobs(content=[ChatCompletionTokenLogprob(
        token=e[0], bytes=None if e[2] is None else list(e[2]), logprob=e[1],
        top_logprobs=[TopLogprob(token=t[0], bytes=None if t[2] is None else list(t[2]),
                                 logprob=t[1]) for t in e[3]]) for e in entries])
    delta = ChoiceDelta() if text is None else ChoiceDelta(content=text)
    choice = Choice(delta=delta, index=index, finish_reason=finish, logprobs=lp)  # type: ignore[arg-type]
    chunk = ChatCompletionChunk(id=ID, choices=[choice], created=CREATED, model=MODEL,
                                object="chat.completion.chunk")
    return sse(chunk.model_dump_json(exclude_unset=True))


@settings(max_examples=examples(150))
@given(text=TEXT, index=st.integers(0, 7), entries=logprobs(False))
def test_openai_package_probe(writer_twin: ModuleType, text: str, index: int, entries: Any) -> None:
    """A shape from probes the openai package's ChatCompletionChunk wrote (model_construct
    with the sentinels, model_dump_json(exclude_unset=True)): its own member order."""
    shape = StreamShape("chat", _openai_probes(), style="pydantic")
    w = writer_twin.StreamWriter(shape, id=ID, model=MODEL, created=CREATED)
    assert w.step(text, index, logprobs=entries) == _openai_oracle(text, index, entries, None)
    assert w.write("finish", index=index, finish_reason="length") == _openai_oracle(
        None, index, None, "length")


@settings(max_examples=examples(100))
@given(text=TEXT, index=st.integers(0, 7), stop=st.sampled_from(["end_turn", "max_tokens"]),
       output=COUNT)
def test_anthropic_package_probe(writer_twin: ModuleType, text: str, index: int, stop: str,
                                 output: int) -> None:
    """A shape from probes the anthropic package's event models wrote (its member order)."""
    from anthropic.types import (
        MessageDeltaUsage,
        RawContentBlockDeltaEvent,
        RawMessageDeltaEvent,
        TextDelta,
    )
    from anthropic.types.raw_message_delta_event import Delta

    def delta_event(delta: str, i: int) -> RawContentBlockDeltaEvent:
        return RawContentBlockDeltaEvent.model_construct(
            type="content_block_delta", index=i,
            delta=TextDelta.model_construct(type="text_delta", text=delta))

    def message_delta(reason: str, tokens: int, model: Any) -> Any:
        return model(type="message_delta", delta=Delta.model_construct(
            stop_reason=reason, stop_sequence=None),
            usage=MessageDeltaUsage.model_construct(output_tokens=tokens))

    probes = {"text": delta_event(PROBE.text, PROBE.index).model_dump_json(exclude_unset=True),
              "message_delta": message_delta(PROBE.finish_reason, PROBE.completion_tokens,
                                             RawMessageDeltaEvent.model_construct)
              .model_dump_json(exclude_unset=True)}
    shape = StreamShape("messages", probes, style="pydantic")
    w = writer_twin.StreamWriter(shape, id=ID, model=MODEL, created=CREATED)
    event = RawContentBlockDeltaEvent(type="content_block_delta", index=index,
                                      delta=TextDelta(type="text_delta", text=text))
    assert w.text(text, index) == sse(event.model_dump_json(exclude_unset=True),
                                      "content_block_delta")
    final = RawMessageDeltaEvent(type="message_delta", delta=Delta(stop_reason=stop,  # type: ignore[arg-type]
                                                                   stop_sequence=None),
                                 usage=MessageDeltaUsage(output_tokens=output))
    assert w.write("message_delta", finish_reason=stop, usage=(0, output)) == sse(
        final.model_dump_json(exclude_unset=True), "message_delta")


@pytest.mark.parametrize(("api", "name"), SHAPES)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_every_frame_is_json(writer_twin: ModuleType, api: str, name: str,
                             data: st.DataObject) -> None:
    """Whatever the text (escapes, non-ASCII), each frame's data parses, and holds it."""
    w = writer(writer_twin, api, name)
    texts = data.draw(st.lists(TEXT, max_size=5))
    for text, parsed in zip(texts, loads(w.texts(texts)), strict=True):
        assert json.dumps(parsed, ensure_ascii=False).count("") > 0
        choice = parsed["choices"][0]
        assert choice.get("text", (choice.get("delta") or {}).get("content")) == text


# --- a whole Responses stream: the response's events, an output message's, the deltas

RESPONSES_STREAM = ("created", "in_progress", "item_added", "part_added", "text", "text",
                    "text_done", "part_done", "item_done", "completed")


@settings(max_examples=examples(60))
@given(texts=st.lists(TEXT, min_size=2, max_size=2), item=TEXT, index=st.integers(0, 3),
       usage=st.tuples(COUNT, COUNT, COUNT, COUNT), start=st.integers(0, 10**6),
       incomplete=st.booleans())
def test_a_whole_responses_stream(writer_twin: ModuleType, texts: list[str], item: str,
                                  index: int, usage: Any, start: int, incomplete: bool) -> None:
    """Every event of a Responses stream, sequence numbers counted by the writer, byte for
    byte in OpenAI's order; each one a valid event of the openai package's models."""
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    w = writer_twin.StreamWriter(StreamShape("responses", "openai"), id=ID, model=MODEL,
                                 created=CREATED, item_id=item)
    w.sequence_number = start
    whole = "".join(texts)
    oracle = ORACLES["responses", "openai"]
    kinds = RESPONSES_STREAM[:-1] + (("incomplete",) if incomplete else ("completed",))
    got, expected, delta = [], [], iter(texts)
    for seq, kind in enumerate(kinds, start):
        s: dict[str, Any] = {"text": whole, "index": index, "item_id": item,
                             "content_index": 0, "sequence_number": seq, "logprobs": None,
                             "usage": usage, "finish_reason": "max_output_tokens"}
        if kind == "text":
            s["text"] = next(delta)
            got.append(w.write("text", s["text"], index))
        elif kind in ("completed", "incomplete"):
            got.append(w.write(kind, whole, usage=usage, finish_reason=(
                "max_output_tokens" if incomplete else None)))
        elif kind in ("text_done", "part_done", "item_done"):
            got.append(w.write(kind, whole, index))
        elif kind in ("item_added", "part_added"):
            got.append(w.write(kind, index=index))
        else:
            got.append(w.write(kind))
        expected.append(oracle(kind, s))
    assert got == expected
    assert w.sequence_number == start + len(kinds)
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    for frame in got:
        event_line, data_line = frame.decode().split("\n")[:2]
        event = adapter.validate_json(data_line[6:])
        assert event_line == f"event: {event.type}"
    final = adapter.validate_json(got[-1].decode().split("\n")[1][6:]).response
    assert final.output[0].content[0].text == whole
    assert (final.usage.input_tokens, final.usage.total_tokens) == (usage[0], usage[0] + usage[1])


def test_responses_has_no_done_frame(writer_twin: ModuleType) -> None:
    w = writer(writer_twin, "responses", "openai")
    with pytest.raises(ValueError, match=r"write\('completed'"):
        w.done()


def _responses_probes() -> dict[str, str]:
    """The lifecycle frames as the openai package's own models write them (model_construct
    with the sentinels, model_dump_json: its member order, its serializer)."""
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseContentPartAddedEvent,
        ResponseCreatedEvent,
        ResponseOutputItemAddedEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseTextDoneEvent,
        ResponseUsage,
    )
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    P = PROBE
    part = ResponseOutputText.model_construct(annotations=[], text=P.text, type="output_text")
    message = ResponseOutputMessage.model_construct(id=P.item_id, content=[part], role=P.role,
                                                    status="completed", type="message")
    usage = ResponseUsage.model_construct(
        input_tokens=P.prompt_tokens,
        input_tokens_details=InputTokensDetails.model_construct(cached_tokens=P.cached_tokens),
        output_tokens=P.completion_tokens,
        output_tokens_details=OutputTokensDetails.model_construct(
            reasoning_tokens=P.reasoning_tokens),
        total_tokens=P.total_tokens)

    def response(status: str, output: list[Any], used: Any) -> Any:
        return Response.model_construct(id=P.id, created_at=P.created, model=P.model,
                                        object="response", output=output,
                                        parallel_tool_calls=True, tool_choice="auto",
                                        tools=[], status=status, usage=used)

    def dump(model: Any) -> str:
        return str(model.model_dump_json(exclude_unset=True, warnings=False))

    return {
        "created": dump(ResponseCreatedEvent.model_construct(
            response=response("in_progress", [], None), sequence_number=P.sequence_number,
            type="response.created")),
        "item_added": dump(ResponseOutputItemAddedEvent.model_construct(
            item=ResponseOutputMessage.model_construct(id=P.item_id, content=[], role=P.role,
                                                       status="in_progress", type="message"),
            output_index=P.index, sequence_number=P.sequence_number,
            type="response.output_item.added")),
        "part_added": dump(ResponseContentPartAddedEvent.model_construct(
            content_index=P.content_index, item_id=P.item_id, output_index=P.index,
            part=ResponseOutputText.model_construct(annotations=[], text="", type="output_text"),
            sequence_number=P.sequence_number, type="response.content_part.added")),
        "text": '{"type":"response.output_text.delta","delta":"<<text>>"}',
        "text_done": dump(ResponseTextDoneEvent.model_construct(
            content_index=P.content_index, item_id=P.item_id, logprobs=[],
            output_index=P.index, sequence_number=P.sequence_number, text=P.text,
            type="response.output_text.done")),
        "completed": dump(ResponseCompletedEvent.model_construct(
            response=response("completed", [message], usage),
            sequence_number=P.sequence_number, type="response.completed")),
    }


@settings(max_examples=examples(60))
@given(text=TEXT, item=TEXT, index=st.integers(0, 3), content=st.integers(0, 3),
       usage=st.tuples(COUNT, COUNT, COUNT, COUNT))
def test_openai_package_responses_probes(writer_twin: ModuleType, text: str, item: str,
                                         index: int, content: int, usage: Any) -> None:
    """A shape from the lifecycle frames the openai package's models wrote, against the same
    models built with the values (model_construct, as a server that builds them does) and
    dumped by pydantic."""
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseContentPartAddedEvent,
        ResponseCreatedEvent,
        ResponseOutputItemAddedEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseTextDoneEvent,
        ResponseUsage,
    )
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    shape = StreamShape("responses", _responses_probes(), style="pydantic")
    w = writer_twin.StreamWriter(shape, id=ID, model=MODEL, created=CREATED, item_id=item)

    def response(status: str, output: list[Any], used: Any) -> Any:
        return Response.model_construct(id=ID, created_at=CREATED, model=MODEL,
                                        object="response", output=output,
                                        parallel_tool_calls=True, tool_choice="auto",
                                        tools=[], status=status, usage=used)

    def framed(model: Any) -> bytes:
        return sse(model.model_dump_json(exclude_unset=True, warnings=False), model.type)

    message = ResponseOutputMessage.model_construct(
        id=item, content=[ResponseOutputText.model_construct(annotations=[], text=text,
                                                             type="output_text")],
        role=ROLE_, status="completed", type="message")
    p, c, cached, reasoning = usage
    used = ResponseUsage.model_construct(
        input_tokens=p, input_tokens_details=InputTokensDetails.model_construct(
            cached_tokens=cached), output_tokens=c,
        output_tokens_details=OutputTokensDetails.model_construct(reasoning_tokens=reasoning),
        total_tokens=p + c)
    assert w.write("created") == framed(ResponseCreatedEvent.model_construct(
        response=response("in_progress", [], None), sequence_number=0,
        type="response.created"))
    assert w.write("item_added", index=index) == framed(
        ResponseOutputItemAddedEvent.model_construct(
            item=ResponseOutputMessage.model_construct(id=item, content=[], role=ROLE_,
                                                       status="in_progress", type="message"),
            output_index=index, sequence_number=1, type="response.output_item.added"))
    assert w.write("part_added", index=index, content_index=content) == framed(
        ResponseContentPartAddedEvent.model_construct(
            content_index=content, item_id=item, output_index=index,
            part=ResponseOutputText.model_construct(annotations=[], text="", type="output_text"),
            sequence_number=2, type="response.content_part.added"))
    assert w.write("text_done", text, index, content_index=content) == framed(
        ResponseTextDoneEvent.model_construct(
            content_index=content, item_id=item, logprobs=[], output_index=index,
            sequence_number=3, text=text, type="response.output_text.done"))
    assert w.write("completed", text, usage=usage) == framed(
        ResponseCompletedEvent.model_construct(response=response("completed", [message], used),
                                               sequence_number=4, type="response.completed"))


@pytest.mark.parametrize("usage", [(5, 2), (5, 2, None), (5, 2, None, None), (5, 2, 0, None)])
def test_responses_usage_counts_not_given_are_zero(writer_twin: ModuleType, usage: Any) -> None:
    """OpenAI's ResponseUsage has no null count (cached_tokens and reasoning_tokens are
    required ints): a count not given is written 0, and the response validates."""
    from openai.types.responses import ResponseCompletedEvent

    shape = StreamShape("responses", "openai")

    def completed(counts: Any) -> bytes:
        w = writer_twin.StreamWriter(shape, id="resp_1", model="m", created=CREATED,
                                     item_id="msg_1")
        return w.write("completed", "Hi", usage=counts)

    frame = completed(usage)
    assert frame == completed((5, 2, 0, 0))
    data = frame.split(b"\n")[1].removeprefix(b"data: ")
    event = ResponseCompletedEvent.model_validate_json(data)
    assert event.response.usage is not None
    details = event.response.usage.input_tokens_details
    assert (details.cached_tokens, event.response.usage.output_tokens_details.reasoning_tokens
            ) == (0, 0)


@given(texts=st.lists(TEXT, max_size=4), start=COUNT)
def test_openai_package_responses_delta(writer_twin: ModuleType, texts: list[str],
                                        start: int) -> None:
    """The text delta as the openai package's ResponseTextDeltaEvent writes it (pydantic's
    member order: the text before the sequence number), event after event."""
    from openai.types.responses import ResponseTextDeltaEvent

    probe = ResponseTextDeltaEvent.model_construct(
        content_index=PROBE.content_index, delta=PROBE.text, item_id=PROBE.item_id,
        logprobs=[], output_index=PROBE.index, sequence_number=PROBE.sequence_number,
        type="response.output_text.delta").model_dump_json(exclude_unset=True, warnings=False)
    shape = StreamShape("responses", {"text": probe}, style="pydantic")
    w = writer_twin.StreamWriter(shape, id=ID, model=MODEL, created=CREATED, item_id="msg_1")
    w.sequence_number = start
    for number, text in enumerate(texts, start):
        event = ResponseTextDeltaEvent(content_index=0, delta=text, item_id="msg_1",
                                       logprobs=[], output_index=0, sequence_number=number,
                                       type="response.output_text.delta")
        assert w.text(text) == sse(event.model_dump_json(exclude_unset=True), event.type)
