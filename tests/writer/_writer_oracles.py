"""The stacks' own ways of writing a stream's frames, as oracles for the stream writer: models
shaped like each stack's (their members in the stack's order, the stack's defaults) built
as the stack's serving code builds them and dumped by the stack's serializer.

Each oracle is ``frame(kind, step) -> bytes``: ``step`` holds a frame's values (text, index,
token ids, logprobs as TokenLogprob tuples, finish and stop reasons, usage as a Usage tuple,
tool call values) and the stream's constants (``ID``, ``MODEL``, ``CREATED``,
``FINGERPRINT``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec
import orjson
from _frames import loads as loads  # the frames' data, for the tests that import it here
from pydantic import BaseModel, ConfigDict, Field, model_serializer

ID, MODEL, CREATED = "chatcmpl-8f3c2a1b", "Qwen/Qwen2.5-7B-Instruct", 1732000000
FINGERPRINT, ROLE = "fp_44709d", "assistant"
Step = dict[str, Any]


def sse(data: str | bytes, event: str | None = None, end: str = "\n\n") -> bytes:
    if isinstance(data, bytes):
        data = data.decode()
    return ((f"event: {event}\n" if event else "") + f"data: {data}{end}").encode()


def _bytes(raw: object) -> list[int] | None:
    return None if raw is None else list(raw)  # type: ignore[call-overload]


# --- vLLM: OpenAIBaseModel (extra allowed), dumped with exclude_unset


class VBase(BaseModel):
    model_config = ConfigDict(extra="allow")


class VLogProb(VBase):
    token: str
    logprob: float = -9999.0
    bytes: list[int] | None = None


class VLogProbsContent(VLogProb):
    top_logprobs: list[VLogProb] = Field(default_factory=list)


class VLogProbs(VBase):
    content: list[VLogProbsContent] | None = None


class VDeltaFunctionCall(BaseModel):
    name: str | None = None
    arguments: str | None = None


class VDeltaToolCall(VBase):
    id: str | None = None
    type: Literal["function"] | None = None
    index: int
    function: VDeltaFunctionCall | None = None


class VDelta(VBase):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[VDeltaToolCall] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        data = handler(self)
        if len(data.get("tool_calls", [])) == 0:
            data.pop("tool_calls", None)
        return data


class VPromptDetails(VBase):
    cached_tokens: int | None = None
    created_cache_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None


class VCompletionDetails(VBase):
    reasoning_tokens: int = 0


class VUsage(VBase):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: VPromptDetails | None = None
    completion_tokens_details: VCompletionDetails | None = None


class VChoice(VBase):
    index: int
    delta: VDelta
    logprobs: VLogProbs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None


class VChunk(VBase):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[VChoice]
    usage: VUsage | None = None
    system_fingerprint: str | None = None
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None
    metrics: dict[str, Any] | None = None


class VCompletionLogProbs(VBase):
    text_offset: list[int] = Field(default_factory=list)
    token_logprobs: list[float | None] = Field(default_factory=list)
    tokens: list[str] = Field(default_factory=list)
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)


class VCompletionChoice(VBase):
    index: int
    text: str
    logprobs: VCompletionLogProbs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None


class VCompletionChunk(VBase):
    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[VCompletionChoice]
    usage: VUsage | None = None
    system_fingerprint: str | None = None
    metrics: dict[str, Any] | None = None


def _v_logprobs(entries: Any) -> VLogProbs | None:
    if entries is None:
        return None
    return VLogProbs(content=[VLogProbsContent(
        token=e[0], logprob=e[1], bytes=_bytes(e[2]),
        top_logprobs=[VLogProb(token=t[0], logprob=t[1], bytes=_bytes(t[2] if len(t) > 2 else None))
                      for t in e[3]]) for e in entries])


def _v_usage(usage: Any, final: bool = False) -> VUsage:
    p, c, cached, reasoning = (tuple(usage) + (None, None))[:4]
    out = VUsage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c,
                 completion_tokens_details=None if reasoning is None
                 else VCompletionDetails(reasoning_tokens=reasoning))
    if final:
        out.prompt_tokens_details = None if cached is None else VPromptDetails(
            cached_tokens=cached)
    return out


def vllm_chat(kind: str, s: Step) -> bytes:
    if kind == "usage":
        chunk = VChunk(id=ID, object="chat.completion.chunk", created=CREATED, choices=[],
                       model=MODEL, usage=_v_usage(s["usage"], final=True),
                       system_fingerprint=s.get("fingerprint"), metrics=None)
        return sse(chunk.model_dump_json(exclude_unset=True, exclude_none=True))
    if kind == "start":
        choice = VChoice(index=s["index"], delta=VDelta(role=ROLE, content=""),
                         logprobs=None, finish_reason=None)
        chunk = VChunk(id=ID, object="chat.completion.chunk", created=CREATED,
                       choices=[choice], model=MODEL,
                       prompt_token_ids=s.get("prompt_token_ids"), prompt_text=None)
    else:
        delta = {
            "text": lambda: VDelta(content=s["text"]),
            "finish": lambda: VDelta(content=s["text"]),
            "reasoning": lambda: VDelta(reasoning=s["text"]),
            "tool_start": lambda: VDelta(tool_calls=[VDeltaToolCall(
                id=s["tool_id"], type="function", index=s["tool_index"],
                function=VDeltaFunctionCall(name=s["tool_name"]))]),
            "tool_args": lambda: VDelta(tool_calls=[VDeltaToolCall(
                index=s["tool_index"], function=VDeltaFunctionCall(arguments=s["text"]))]),
        }[kind]()
        if kind == "finish":
            choice = VChoice(index=s["index"], delta=delta, logprobs=_v_logprobs(s["logprobs"]),
                             finish_reason=s["finish_reason"], stop_reason=s["stop_reason"],
                             token_ids=s["token_ids"])
        else:
            choice = VChoice(index=s["index"], delta=delta, logprobs=_v_logprobs(s["logprobs"]),
                             finish_reason=None, token_ids=s["token_ids"])
        chunk = VChunk(id=ID, object="chat.completion.chunk", created=CREATED,
                       choices=[choice], model=MODEL)
        if kind == "finish" and s.get("fingerprint") is not None:
            chunk.system_fingerprint = s["fingerprint"]
    if s.get("usage") is not None:
        chunk.usage = _v_usage(s["usage"])
    return sse(chunk.model_dump_json(exclude_unset=True))


def _v_completion_logprobs(entries: Any) -> VCompletionLogProbs | None:
    if entries is None:
        return None
    return VCompletionLogProbs(
        text_offset=[e[4] for e in entries], token_logprobs=[e[1] for e in entries],
        tokens=[e[0] for e in entries],
        top_logprobs=[None if e[3] is None else {t[0]: t[1] for t in e[3]} for e in entries])


def vllm_completions(kind: str, s: Step) -> bytes:
    if kind == "usage":
        usage = VUsage(prompt_tokens=s["usage"][0], completion_tokens=s["usage"][1],
                       total_tokens=s["usage"][0] + s["usage"][1])
        cached = (tuple(s["usage"]) + (None, None))[2]
        if cached is not None:
            usage.prompt_tokens_details = VPromptDetails(cached_tokens=cached)
        chunk = VCompletionChunk(id=ID, created=CREATED, model=MODEL, choices=[], usage=usage,
                                 system_fingerprint=s.get("fingerprint"), metrics=None)
        return sse(chunk.model_dump_json(exclude_unset=False, exclude_none=True))
    finish = s.get("finish_reason")
    chunk = VCompletionChunk(id=ID, object="text_completion", created=CREATED, model=MODEL,
                             choices=[VCompletionChoice(
                                 index=s["index"], text=s["text"],
                                 logprobs=_v_completion_logprobs(s["logprobs"]),
                                 finish_reason=finish, stop_reason=s["stop_reason"],
                                 prompt_token_ids=s.get("prompt_token_ids"),
                                 token_ids=s["token_ids"])])
    if finish is not None and s.get("fingerprint") is not None:
        chunk.system_fingerprint = s["fingerprint"]
    if s.get("usage") is not None:
        p, c = s["usage"][:2]
        chunk.usage = VUsage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c)
    return sse(chunk.model_dump_json(exclude_unset=True))


# --- TensorRT-LLM: OpenAIBaseModel (extra forbidden); chat with exclude_none


class TBase(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TPromptDetails(TBase):
    cached_tokens: int = 0


class TUsage(TBase):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: TPromptDetails | None = None


class TLogProb(TBase):
    token: str
    logprob: float = -9999.0
    bytes: list[int] | None = None


class TLogProbsContent(TLogProb):
    top_logprobs: list[TLogProb] | None = None


class TLogProbs(TBase):
    content: list[TLogProbsContent] | None = None


class TDeltaFunctionCall(TBase):
    name: str | None = None
    arguments: str | None = None


class TDeltaToolCall(TBase):
    id: str | None = None
    type: Literal["function"] = "function"
    index: int
    function: TDeltaFunctionCall | None = None


class TDelta(TBase):
    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[TDeltaToolCall] | None = None


class TChoice(TBase):
    index: int
    delta: TDelta
    logprobs: TLogProbs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    avg_decoded_tokens_per_iter: float | None = None


class TChunk(TBase):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[TChoice]
    usage: TUsage | None = None


class TCompletionLogProbs(TBase):
    text_offset: list[int] = Field(default_factory=list)
    token_logprobs: list[float | None] = Field(default_factory=list)
    tokens: list[str] = Field(default_factory=list)
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)


class TCompletionChoice(TBase):
    index: int
    text: str
    token_ids: list[int] | None = None
    logprobs: TCompletionLogProbs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    avg_decoded_tokens_per_iter: float | None = None


class TCompletionChunk(TBase):
    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[TCompletionChoice]
    usage: TUsage | None = None


def _t_usage(usage: Any) -> TUsage | None:
    if usage is None:
        return None
    p, c, cached = (tuple(usage) + (None, None))[:3]
    return TUsage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c,
                  prompt_tokens_details=None if cached is None
                  else TPromptDetails(cached_tokens=cached))


def _t_logprobs(entries: Any) -> TLogProbs | None:
    if entries is None:
        return None
    content = []
    for e in entries:
        item = TLogProbsContent(token=e[0], bytes=_bytes(e[2]))
        item.logprob = e[1]
        if e[3] is not None:
            item.top_logprobs = [TLogProbsContent(token=t[0], logprob=t[1],
                                                  bytes=_bytes(t[2] if len(t) > 2 else None))
                                 for t in e[3]]
        content.append(item)
    return TLogProbs(content=content)


def trtllm_chat(kind: str, s: Step) -> bytes:
    if kind == "usage":
        chunk = TChunk(choices=[], model=MODEL, usage=_t_usage(s["usage"]), id=ID,
                       created=CREATED)
        return sse(chunk.model_dump_json())
    if kind == "start":
        choice = TChoice(index=s["index"], delta=TDelta(role=ROLE, content=None),
                         finish_reason=None)
        chunk = TChunk(choices=[choice], model=MODEL, id=ID, created=CREATED)
        chunk.usage = _t_usage(s.get("usage"))
        return sse(chunk.model_dump_json(exclude_none=True), end=" \n\n")
    text = s.get("text") or ""
    if kind in ("tool_start", "tool_args"):
        first = kind == "tool_start"
        delta = TDelta(content="", reasoning_content="", tool_calls=[TDeltaToolCall(
            id=s["tool_id"] if first else None, index=s["tool_index"],
            function=TDeltaFunctionCall(name=s["tool_name"] if first else None,
                                        arguments=text))])
    elif kind == "reasoning":
        delta = TDelta(content="", reasoning_content=text, tool_calls=None)
    else:
        delta = TDelta(content=text, reasoning_content="", tool_calls=None)
    choice = TChoice(index=s["index"], delta=delta, avg_decoded_tokens_per_iter=None,
                     stop_reason=s.get("stop_reason"))
    if s.get("logprobs") is not None:
        choice.logprobs = _t_logprobs(s["logprobs"])
    if s.get("finish_reason") is not None:
        choice.finish_reason = s["finish_reason"]
        choice.stop_reason = s.get("stop_reason")
    chunk = TChunk(choices=[choice], model=MODEL, id=ID, created=CREATED)
    chunk.usage = _t_usage(s.get("usage"))
    return sse(chunk.model_dump_json(exclude_none=True))


def trtllm_completions(kind: str, s: Step) -> bytes:
    if kind == "usage":
        chunk = TCompletionChunk(choices=[], model=MODEL, usage=_t_usage(s["usage"]), id=ID,
                                 created=CREATED)
        return sse(chunk.model_dump_json())
    logprobs = None
    if s.get("logprobs") is not None:
        entries = s["logprobs"]
        logprobs = TCompletionLogProbs(
            text_offset=[e[4] for e in entries], token_logprobs=[e[1] for e in entries],
            tokens=[e[0] for e in entries],
            top_logprobs=[None if e[3] is None else {t[0]: t[1] for t in e[3]}
                          for e in entries])
    choice = TCompletionChoice(index=s["index"], text=s["text"], token_ids=s.get("token_ids"),
                               finish_reason=s.get("finish_reason"),
                               stop_reason=s.get("stop_reason"),
                               avg_decoded_tokens_per_iter=None)
    choice.logprobs = logprobs
    chunk = TCompletionChunk(model=MODEL, choices=[choice], id=ID, created=CREATED)
    chunk.usage = _t_usage(s.get("usage"))
    return sse(chunk.model_dump_json(exclude_unset=False))


# --- SGLang: msgspec structs for chat (sse_utils), pydantic model_dump_json() for completions


class SDelta(msgspec.Struct, omit_defaults=True):
    reasoning_content: str | None
    role: str | None = None
    content: str | None = None


class SChoice(msgspec.Struct):
    index: int
    delta: SDelta
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = None
    matched_stop: int | str | None = None


class SChunk(msgspec.Struct, omit_defaults=True):
    id: str
    object: str
    created: int
    model: str
    choices: list[SChoice]
    usage: dict[str, Any] | None = None


_SGL_ENCODER = msgspec.json.Encoder()


class STopLogprob(BaseModel):
    token: str
    bytes: list[int] | None = None
    logprob: float


class STokenLogprob(BaseModel):
    token: str
    bytes: list[int] | None = None
    logprob: float
    top_logprobs: list[STopLogprob]


class SChoiceLogprobs(BaseModel):
    content: list[STokenLogprob] | None = None


class SPromptDetails(BaseModel):
    cached_tokens: int = 0


class SUsage(BaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: SPromptDetails | None = None


def _s_usage(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    p, c, cached = (tuple(usage) + (None, None))[:3]
    return SUsage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c,
                  prompt_tokens_details=None if cached is None
                  else SPromptDetails(cached_tokens=cached)).model_dump()


def _s_logprobs(entries: Any) -> dict[str, Any] | None:
    if entries is None:
        return None
    return SChoiceLogprobs(content=[STokenLogprob(
        token=e[0], bytes=_bytes(e[2]), logprob=e[1],
        top_logprobs=[STopLogprob(token=t[0], bytes=_bytes(t[2] if len(t) > 2 else None),
                                  logprob=t[1]) for t in e[3]]) for e in entries]).model_dump()


def sglang_chat(kind: str, s: Step) -> bytes:
    """sse_utils.build_sse_content, the dict path when token ids are given."""
    usage = _s_usage(s.get("usage"))
    if kind == "usage":
        chunk = SChunk(id=ID, object="chat.completion.chunk", created=CREATED, model=MODEL,
                       choices=[], usage=usage)
        return sse(_SGL_ENCODER.encode(chunk))
    role = ROLE if kind == "start" else None
    content = "" if kind == "start" else (s.get("text") if kind in ("text", "finish") else None)
    reasoning = s.get("text") if kind == "reasoning" else None
    logprobs = _s_logprobs(s.get("logprobs"))
    token_ids = s.get("token_ids")
    if token_ids is not None:
        delta: dict[str, Any] = {"reasoning_content": reasoning}
        if role is not None:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        payload: dict[str, Any] = {"id": ID, "object": "chat.completion.chunk",
                                   "created": CREATED, "model": MODEL, "choices": [{
                                       "index": s["index"], "delta": delta,
                                       "logprobs": logprobs,
                                       "finish_reason": s.get("finish_reason"),
                                       "matched_stop": s.get("stop_reason"),
                                       "token_ids": token_ids}]}
        if usage is not None:
            payload["usage"] = usage
        return sse(_SGL_ENCODER.encode(payload))
    chunk = SChunk(id=ID, object="chat.completion.chunk", created=CREATED, model=MODEL,
                   choices=[SChoice(index=s["index"], delta=SDelta(
                       role=role, content=content, reasoning_content=reasoning),
                       logprobs=logprobs, finish_reason=s.get("finish_reason"),
                       matched_stop=s.get("stop_reason"))], usage=usage)
    return sse(_SGL_ENCODER.encode(chunk))


class SCompletionLogProbs(BaseModel):
    text_offset: list[int] = Field(default_factory=list)
    token_logprobs: list[float | None] = Field(default_factory=list)
    tokens: list[str] = Field(default_factory=list)
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)


class SCompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: SCompletionLogProbs | None = None
    finish_reason: str | None = None
    matched_stop: int | str | None = None


class SCompletionChunk(BaseModel):
    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[SCompletionChoice]
    usage: SUsage | None = None


def sglang_completions(kind: str, s: Step) -> bytes:
    usage = None if s.get("usage") is None else SUsage.model_validate(_s_usage(s["usage"]))
    if kind == "usage":
        chunk = SCompletionChunk(id=ID, created=CREATED, model=MODEL, choices=[], usage=usage)
        return sse(chunk.model_dump_json())
    logprobs = None
    if s.get("logprobs") is not None:
        entries = s["logprobs"]
        logprobs = SCompletionLogProbs(
            text_offset=[e[4] for e in entries], token_logprobs=[e[1] for e in entries],
            tokens=[e[0] for e in entries],
            top_logprobs=[None if e[3] is None else {t[0]: t[1] for t in e[3]}
                          for e in entries])
    chunk = SCompletionChunk(id=ID, object="text_completion", created=CREATED, model=MODEL,
                             choices=[SCompletionChoice(
                                 index=s["index"], text=s["text"], logprobs=logprobs,
                                 finish_reason=s.get("finish_reason"),
                                 matched_stop=s.get("stop_reason"))], usage=usage)
    return sse(chunk.model_dump_json())


# --- OpenAI's and Anthropic's wire order: dicts in the API reference's order, by orjson


def _o_usage(usage: Any) -> dict[str, Any]:
    p, c, cached, reasoning = (tuple(usage) + (None, None))[:4]
    out: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def _o_logprobs(entries: Any) -> dict[str, Any] | None:
    if entries is None:
        return None
    return {"content": [{"token": e[0], "logprob": e[1], "bytes": _bytes(e[2]),
                         "top_logprobs": [{"token": t[0], "logprob": t[1],
                                           "bytes": _bytes(t[2] if len(t) > 2 else None)}
                                          for t in e[3]]} for e in entries], "refusal": None}


def openai_chat(kind: str, s: Step) -> bytes:
    chunk: dict[str, Any] = {"id": ID, "object": "chat.completion.chunk", "created": CREATED,
                             "model": MODEL, "system_fingerprint": s.get("fingerprint")}
    if kind == "usage":
        chunk["choices"] = []
    elif kind == "start":
        chunk["choices"] = [{"index": s["index"], "delta": {"role": ROLE, "content": "",
                                                              "refusal": None},
                             "logprobs": None, "finish_reason": None}]
    else:
        delta: dict[str, Any] = {
            "text": lambda: {"content": s["text"]},
            "finish": lambda: {},
            "tool_start": lambda: {"tool_calls": [
                {"index": s["tool_index"], "id": s["tool_id"], "type": "function",
                 "function": {"name": s["tool_name"], "arguments": ""}}]},
            "tool_args": lambda: {"tool_calls": [
                {"index": s["tool_index"], "function": {"arguments": s["text"]}}]},
        }[kind]()
        chunk["choices"] = [{"index": s["index"], "delta": delta,
                             "logprobs": _o_logprobs(s.get("logprobs")),
                             "finish_reason": s.get("finish_reason")}]
    if s.get("usage") is not None:
        chunk["usage"] = _o_usage(s["usage"])
    return sse(orjson.dumps(chunk))


def openai_completions(kind: str, s: Step) -> bytes:
    chunk: dict[str, Any] = {"id": ID, "object": "text_completion", "created": CREATED,
                             "model": MODEL, "system_fingerprint": s.get("fingerprint")}
    if kind == "usage":
        chunk["choices"] = []
    else:
        entries = s.get("logprobs")
        logprobs = None if entries is None else {
            "tokens": [e[0] for e in entries], "token_logprobs": [e[1] for e in entries],
            "top_logprobs": [None if e[3] is None else {t[0]: t[1] for t in e[3]}
                             for e in entries],
            "text_offset": [e[4] for e in entries]}
        chunk["choices"] = [{"text": s["text"], "index": s["index"], "logprobs": logprobs,
                             "finish_reason": s.get("finish_reason")}]
    if s.get("usage") is not None:
        chunk["usage"] = _o_usage(s["usage"])
    return sse(orjson.dumps(chunk))


def _o_response(kind: str, s: Step) -> dict[str, Any]:
    """A Response object as OpenAI writes it for a request that set nothing it echoes."""
    status = {"created": "in_progress", "in_progress": "in_progress"}.get(kind, kind)
    output = [] if status == "in_progress" else [_o_message(status, [_o_part(s["text"])], s)]
    usage = None
    if s.get("usage") is not None and kind in ("completed", "incomplete"):
        p, c, cached, reasoning = (tuple(s["usage"]) + (None, None))[:4]
        usage = {"input_tokens": p,
                 "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                 "output_tokens": c,
                 "output_tokens_details": None if reasoning is None
                 else {"reasoning_tokens": reasoning},
                 "total_tokens": p + c}
    return {"id": ID, "object": "response", "created_at": CREATED, "status": status,
            "background": False, "error": None,
            "incomplete_details": {"reason": s["finish_reason"]} if kind == "incomplete"
            else None,
            "instructions": None, "max_output_tokens": None, "model": MODEL, "output": output,
            "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": False, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [],
            "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": None,
            "metadata": {}}


def _o_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _o_message(status: str, content: list[Any], s: Step) -> dict[str, Any]:
    return {"id": s["item_id"], "type": "message", "status": status, "content": content,
            "role": ROLE}


def openai_responses(kind: str, s: Step) -> bytes:
    """OpenAI's Responses events, in its order: the response's, an output message's and its
    text part's (the lifecycle) and the deltas."""
    seq = s["sequence_number"]
    event: dict[str, Any]
    if kind in ("created", "in_progress", "completed", "incomplete"):
        event = {"type": f"response.{kind}", "sequence_number": seq,
                 "response": _o_response(kind, s)}
        return sse(orjson.dumps(event), event["type"])
    if kind in ("item_added", "item_done"):
        done = kind == "item_done"
        event = {"type": f"response.output_item.{kind[5:]}", "sequence_number": seq,
                 "output_index": s["index"],
                 "item": _o_message("completed" if done else "in_progress",
                                    [_o_part(s["text"])] if done else [], s)}
        return sse(orjson.dumps(event), event["type"])
    if kind in ("part_added", "part_done"):
        event = {"type": f"response.content_part.{kind[5:]}", "sequence_number": seq,
                 "item_id": s["item_id"], "output_index": s["index"],
                 "content_index": s["content_index"],
                 "part": _o_part(s["text"] if kind == "part_done" else "")}
        return sse(orjson.dumps(event), event["type"])
    if kind == "text_done":
        event = {"type": "response.output_text.done", "sequence_number": seq,
                 "item_id": s["item_id"], "output_index": s["index"],
                 "content_index": s["content_index"], "text": s["text"], "logprobs": []}
        return sse(orjson.dumps(event), event["type"])
    name = {"text": "output_text", "reasoning": "reasoning_text",
            "tool_args": "function_call_arguments"}[kind]
    event: dict[str, Any] = {"type": f"response.{name}.delta",
                             "sequence_number": s["sequence_number"],
                             "item_id": s["item_id"], "output_index": s["index"]}
    if kind != "tool_args":
        event["content_index"] = s["content_index"]
    event["delta"] = s["text"]
    if kind == "text":
        event["logprobs"] = [{"token": e[0], "logprob": e[1],
                              "top_logprobs": [{"token": t[0], "logprob": t[1]}
                                               for t in e[3]]}
                             for e in s.get("logprobs") or ()]
    return sse(orjson.dumps(event), event["type"])


def anthropic_messages(kind: str, s: Step) -> bytes:
    index = s.get("index", 0)
    event: dict[str, Any]
    if kind == "message_start":
        p, c, cached = (tuple(s["usage"]) + (None, None))[:3]
        event = {"type": "message_start", "message": {
            "id": ID, "type": "message", "role": ROLE, "content": [], "model": MODEL,
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": p, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached, "output_tokens": c}}}
    elif kind.endswith("_start"):
        block: dict[str, Any] = {
            "text_start": {"type": "text", "text": ""},
            "reasoning_start": {"type": "thinking", "thinking": ""},
            "tool_start": {"type": "tool_use", "id": s.get("tool_id"),
                           "name": s.get("tool_name"), "input": {}},
        }[kind]
        event = {"type": "content_block_start", "index": index, "content_block": block}
    elif kind in ("text", "reasoning", "tool_args"):
        delta = {"text": {"type": "text_delta", "text": s["text"]},
                 "reasoning": {"type": "thinking_delta", "thinking": s["text"]},
                 "tool_args": {"type": "input_json_delta", "partial_json": s["text"]}}[kind]
        event = {"type": "content_block_delta", "index": index, "delta": delta}
    elif kind == "block_stop":
        event = {"type": "content_block_stop", "index": index}
    elif kind == "message_delta":
        event = {"type": "message_delta",
                 "delta": {"stop_reason": s.get("finish_reason"),
                           "stop_sequence": s.get("stop_reason")},
                 "usage": {"output_tokens": s["usage"][1]}}
    else:
        event = {"type": kind}
    return sse(orjson.dumps(event), event["type"])


#: (api, built-in shape) -> its oracle
ORACLES: dict[tuple[str, str], Callable[[str, Step], bytes]] = {
    ("chat", "vllm"): vllm_chat,
    ("chat", "trtllm"): trtllm_chat,
    ("chat", "sglang"): sglang_chat,
    ("chat", "openai"): openai_chat,
    ("completions", "vllm"): vllm_completions,
    ("completions", "trtllm"): trtllm_completions,
    ("completions", "sglang"): sglang_completions,
    ("completions", "openai"): openai_completions,
    ("responses", "openai"): openai_responses,
    ("messages", "anthropic"): anthropic_messages,
}
