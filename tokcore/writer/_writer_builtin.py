"""The built-in stream shapes: each server's frames written as probes (dicts holding the
sentinels of ``PROBE``, in the server's member order), its serializer and its null rules.

What each server writes was read from its sources (the member order of its models, which
members its code sets, how it dumps them); tests/writer/test_writer_shapes.py holds each
shape against models built the server's way and dumped by the server's serializer.

- ``vllm``: pydantic ``model_dump_json(exclude_unset=True)`` of vLLM's OpenAI models
  (``vllm/entrypoints/openai``, main of 2026): every member its code sets is written, a None
  it sets as ``null``; the final usage chunk adds ``exclude_none``.
- ``trtllm``: TensorRT-LLM's ``trtllm-serve`` (``tensorrt_llm/serve``): chat chunks with
  ``exclude_none=True`` (the first one framed ``data: {...} \\n\\n``, a space before the blank
  line, as it writes it), completions with every member, the usage chunk with every member.
- ``sglang``: SGLang's chat chunks as its msgspec structs write them (``sse_utils``:
  ``reasoning_content`` always there, ``role``/``content`` only when set, ``matched_stop``);
  its completions as its pydantic models' ``model_dump_json()``.
- ``openai``: the member order of OpenAI's API reference (its chunk and event objects), and
  ``anthropic``: the events of Anthropic's Messages streaming reference, both compact, strings
  and floats as orjson writes them.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ._writer_rules import PROBE as P

_CHUNK = "chat.completion.chunk"
_TEXT_COMPLETION = "text_completion"


def _frame(obj: object, event: str | None = None, end: str = "\n\n") -> str:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {data}{end}"


def _frames(frames: dict[str, Any], event: bool = False) -> dict[str, str]:
    return {name: _frame(obj, obj.get("type") if event else None)
            if isinstance(obj, dict) else obj for name, obj in frames.items()}


# --- vLLM: exclude_unset (OpenAIBaseModel; UsageInfo's order: prompt, total, completion)

def _vllm_chunk(choices: list[object], *, usage: object = None, last: bool = False,
                obj: str = _CHUNK, extra: dict[str, object] | None = None) -> dict[str, object]:
    chunk: dict[str, object] = {"id": P.id, "object": obj, "created": P.created,
                                "model": P.model, "choices": choices}
    if usage is not None:
        chunk["usage"] = usage
    if last:
        chunk["system_fingerprint"] = P.system_fingerprint
    chunk.update(extra or {})
    return chunk


_VLLM_USAGE = {"prompt_tokens": P.prompt_tokens, "total_tokens": P.total_tokens,
               "completion_tokens": P.completion_tokens,
               "completion_tokens_details": {"reasoning_tokens": P.reasoning_tokens}}
_VLLM_FINAL_USAGE = {"prompt_tokens": P.prompt_tokens, "total_tokens": P.total_tokens,
                     "completion_tokens": P.completion_tokens,
                     "prompt_tokens_details": {"cached_tokens": P.cached_tokens},
                     "completion_tokens_details": {"reasoning_tokens": P.reasoning_tokens}}
_VLLM_LOGPROBS = {"content": [{"token": P.lp_token, "logprob": P.lp_logprob,
                               "bytes": P.lp_bytes,
                               "top_logprobs": [{"token": P.top_token,
                                                 "logprob": P.top_logprob,
                                                 "bytes": P.top_bytes}]}]}


def _vllm_choice(delta: dict[str, object], finish: bool = False) -> dict[str, object]:
    choice: dict[str, object] = {"index": P.index, "delta": delta, "logprobs": _VLLM_LOGPROBS,
                                 "finish_reason": P.finish_reason if finish else None}
    if finish:
        choice["stop_reason"] = P.stop_reason
    choice["token_ids"] = P.token_ids
    return choice


_VLLM_CHAT = {
    "start": _vllm_chunk([{"index": P.index, "delta": {"role": P.role, "content": ""},
                           "logprobs": None, "finish_reason": None}], usage=_VLLM_USAGE,
                         extra={"prompt_token_ids": P.prompt_token_ids, "prompt_text": None}),
    "text": _vllm_chunk([_vllm_choice({"content": P.text})], usage=_VLLM_USAGE),
    "reasoning": _vllm_chunk([_vllm_choice({"reasoning": P.text})], usage=_VLLM_USAGE),
    "tool_start": _vllm_chunk([_vllm_choice({"tool_calls": [
        {"id": P.tool_id, "type": "function", "index": P.tool_index,
         "function": {"name": P.tool_name}}]})], usage=_VLLM_USAGE),
    "tool_args": _vllm_chunk([_vllm_choice({"tool_calls": [
        {"index": P.tool_index, "function": {"arguments": P.text}}]})], usage=_VLLM_USAGE),
    "finish": _vllm_chunk([_vllm_choice({"content": P.text}, finish=True)], usage=_VLLM_USAGE,
                          last=True),
    # the parser's reasoning or tool-call delta kept on the finish chunk
    "finish_reasoning": _vllm_chunk([_vllm_choice({"reasoning": P.text}, finish=True)],
                                    usage=_VLLM_USAGE, last=True),
    "finish_tool_args": _vllm_chunk([_vllm_choice({"tool_calls": [
        {"index": P.tool_index, "function": {"arguments": P.text}}]}, finish=True)],
        usage=_VLLM_USAGE, last=True),
    "usage": _vllm_chunk([], usage=_VLLM_FINAL_USAGE, last=True),
}
#: (finish.text: a finish chunk whose parser gave no delta is DeltaMessage(): "delta":{})
_VLLM_CHAT_OMIT = ("usage", "system_fingerprint", "usage.cached_tokens",
                   "usage.reasoning_tokens", "finish.text")

_VLLM_COMPLETION_LOGPROBS = {"text_offset": [P.lp_offset], "token_logprobs": [P.lp_logprob],
                             "tokens": [P.lp_token],
                             "top_logprobs": [{P.top_token: P.top_logprob}]}


def _vllm_completion(finish: bool) -> dict[str, object]:
    choice = {"index": P.index, "text": P.text, "logprobs": _VLLM_COMPLETION_LOGPROBS,
              "finish_reason": P.finish_reason, "stop_reason": P.stop_reason,
              "prompt_token_ids": P.prompt_token_ids, "token_ids": P.token_ids}
    return _vllm_chunk([choice], usage={k: v for k, v in _VLLM_USAGE.items()
                                        if k != "completion_tokens_details"},
                       last=finish, obj=_TEXT_COMPLETION)


_VLLM_COMPLETIONS = {
    "text": _vllm_completion(False),
    "finish": _vllm_completion(True),
    "usage": _vllm_chunk([], usage=_VLLM_FINAL_USAGE, last=True, obj=_TEXT_COMPLETION),
}


# --- TensorRT-LLM: chat exclude_none; completions and the usage chunk with every member
# (its UsageInfo: prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details)

_TRT_USAGE = {"prompt_tokens": P.prompt_tokens, "total_tokens": P.total_tokens,
              "completion_tokens": P.completion_tokens,
              "prompt_tokens_details": {"cached_tokens": P.cached_tokens}}
_TRT_LOGPROBS = {"content": [{"token": P.lp_token, "logprob": P.lp_logprob, "bytes": P.lp_bytes,
                              "top_logprobs": [{"token": P.top_token, "logprob": P.top_logprob,
                                                "bytes": P.top_bytes}]}]}


def _trt_chunk(delta: dict[str, object], finish: bool = True) -> dict[str, object]:
    choice: dict[str, object] = {"index": P.index, "delta": delta, "logprobs": _TRT_LOGPROBS}
    if finish:
        choice["finish_reason"] = P.finish_reason
    choice["stop_reason"] = P.stop_reason
    return {"id": P.id, "object": _CHUNK, "created": P.created, "model": P.model,
            "choices": [choice], "usage": _TRT_USAGE}


_TRT_CHAT = {
    "start": _frame({"id": P.id, "object": _CHUNK, "created": P.created, "model": P.model,
                     "choices": [{"index": P.index, "delta": {"role": P.role}}],
                     "usage": _TRT_USAGE}, end=" \n\n"),
    "text": _trt_chunk({"content": P.text, "reasoning_content": ""}),
    "reasoning": _trt_chunk({"content": "", "reasoning_content": P.text}),
    "tool_start": _trt_chunk({"content": "", "reasoning_content": "", "tool_calls": [
        {"id": P.tool_id, "type": "function", "index": P.tool_index,
         "function": {"name": P.tool_name, "arguments": P.text}}]}),
    "tool_args": _trt_chunk({"content": "", "reasoning_content": "", "tool_calls": [
        {"type": "function", "index": P.tool_index, "function": {"arguments": P.text}}]}),
    "usage": {"id": P.id, "object": _CHUNK, "created": P.created, "model": P.model,
              "choices": [], "usage": _TRT_USAGE},
}
#: exclude_none on every chunk but the usage one (model_dump_json() with every member)
_TRT_CHAT_OMIT = tuple(f"{frame}.{slot}" for frame in _TRT_CHAT if frame != "usage"
                       for slot in ("usage", "logprobs", "finish_reason", "stop_reason",
                                    "token_ids", "lp_bytes", "top_bytes", "top_logprobs",
                                    "cached_tokens"))


def _trt_completion() -> dict[str, object]:
    logprobs = {"text_offset": [P.lp_offset], "token_logprobs": [P.lp_logprob],
                "tokens": [P.lp_token], "top_logprobs": [{P.top_token: P.top_logprob}]}
    return {"id": P.id, "object": _TEXT_COMPLETION, "created": P.created, "model": P.model,
            "choices": [{"index": P.index, "text": P.text, "token_ids": P.token_ids,
                         "logprobs": logprobs, "finish_reason": P.finish_reason,
                         "stop_reason": P.stop_reason, "avg_decoded_tokens_per_iter": None}],
            "usage": _TRT_USAGE}


_TRT_COMPLETIONS = {
    "text": _trt_completion(),
    "usage": {"id": P.id, "object": _TEXT_COMPLETION, "created": P.created, "model": P.model,
              "choices": [], "usage": _TRT_USAGE},
}


# --- SGLang: msgspec chat chunks (sse_utils); completions by pydantic model_dump_json()

_SGL_LOGPROBS = {"content": [{"token": P.lp_token, "bytes": P.lp_bytes, "logprob": P.lp_logprob,
                              "top_logprobs": [{"token": P.top_token, "bytes": P.top_bytes,
                                                "logprob": P.top_logprob}]}]}
_SGL_USAGE = {"prompt_tokens": P.prompt_tokens, "total_tokens": P.total_tokens,
              "completion_tokens": P.completion_tokens,
              "prompt_tokens_details": {"cached_tokens": P.cached_tokens}}


def _sgl_chunk(delta: dict[str, object], *, start: bool = False) -> dict[str, object]:
    choice = {"index": P.index, "delta": delta, "logprobs": _SGL_LOGPROBS,
              "finish_reason": P.finish_reason, "matched_stop": P.stop_reason}
    if start:  # the role's chunk: nothing else set
        choice.update(logprobs=None, finish_reason=None, matched_stop=None)
    else:
        choice["token_ids"] = P.token_ids
    return {"id": P.id, "object": _CHUNK, "created": P.created, "model": P.model,
            "choices": [choice], "usage": _SGL_USAGE}


_SGL_CHAT = {
    "start": _sgl_chunk({"reasoning_content": None, "role": P.role, "content": ""},
                        start=True),
    "text": _sgl_chunk({"reasoning_content": None, "content": P.text}),
    "reasoning": _sgl_chunk({"reasoning_content": P.text}),
    "finish": _sgl_chunk({"reasoning_content": None}),
    "usage": {"id": P.id, "object": _CHUNK, "created": P.created, "model": P.model,
              "choices": [], "usage": _SGL_USAGE},
}
_SGL_CHAT_OMIT = ("usage", "token_ids")

_SGL_COMPLETIONS = {
    "text": {"id": P.id, "object": _TEXT_COMPLETION, "created": P.created, "model": P.model,
             "choices": [{"index": P.index, "text": P.text, "logprobs": {
                 "text_offset": [P.lp_offset], "token_logprobs": [P.lp_logprob],
                 "tokens": [P.lp_token], "top_logprobs": [{P.top_token: P.top_logprob}]},
                 "finish_reason": P.finish_reason, "matched_stop": P.stop_reason}],
             "usage": _SGL_USAGE},
    "usage": {"id": P.id, "object": _TEXT_COMPLETION, "created": P.created, "model": P.model,
              "choices": [], "usage": _SGL_USAGE},
}


# --- OpenAI's own wire order

_OAI_LOGPROBS = {"content": [{"token": P.lp_token, "logprob": P.lp_logprob, "bytes": P.lp_bytes,
                              "top_logprobs": [{"token": P.top_token, "logprob": P.top_logprob,
                                                "bytes": P.top_bytes}]}], "refusal": None}
_OAI_USAGE = {"prompt_tokens": P.prompt_tokens, "completion_tokens": P.completion_tokens,
              "total_tokens": P.total_tokens,
              "prompt_tokens_details": {"cached_tokens": P.cached_tokens},
              "completion_tokens_details": {"reasoning_tokens": P.reasoning_tokens}}


def _oai_chunk(choices: list[object], usage: object = _OAI_USAGE,
               obj: str = _CHUNK) -> dict[str, object]:
    return {"id": P.id, "object": obj, "created": P.created, "model": P.model,
            "system_fingerprint": P.system_fingerprint, "choices": choices, "usage": usage}


def _oai_choice(delta: dict[str, object]) -> dict[str, object]:
    return {"index": P.index, "delta": delta, "logprobs": _OAI_LOGPROBS,
            "finish_reason": P.finish_reason}


_OAI_CHAT = {
    "start": _oai_chunk([{"index": P.index, "delta": {"role": P.role, "content": "",
                                                        "refusal": None},
                          "logprobs": None, "finish_reason": None}]),
    "text": _oai_chunk([_oai_choice({"content": P.text})]),
    "tool_start": _oai_chunk([_oai_choice({"tool_calls": [
        {"index": P.tool_index, "id": P.tool_id, "type": "function",
         "function": {"name": P.tool_name, "arguments": ""}}]})]),
    "tool_args": _oai_chunk([_oai_choice({"tool_calls": [
        {"index": P.tool_index, "function": {"arguments": P.text}}]})]),
    "finish": _oai_chunk([_oai_choice({})]),
    "usage": _oai_chunk([]),
}
_OAI_COMPLETIONS = {
    "text": _oai_chunk([{"text": P.text, "index": P.index, "logprobs": {
        "tokens": [P.lp_token], "token_logprobs": [P.lp_logprob],
        "top_logprobs": [{P.top_token: P.top_logprob}], "text_offset": [P.lp_offset]},
        "finish_reason": P.finish_reason}], obj=_TEXT_COMPLETION),
    "usage": _oai_chunk([], obj=_TEXT_COMPLETION),
}
_OAI_OMIT = ("usage", "reasoning_tokens", "cached_tokens")


def _responses(kind: str, logprobs: bool) -> dict[str, object]:
    """A Responses delta event in OpenAI's order (``type`` first)."""
    event: dict[str, object] = {
        "type": f"response.{kind}.delta", "sequence_number": P.sequence_number,
        "item_id": P.item_id, "output_index": P.index, "content_index": P.content_index,
        "delta": P.text}
    if kind == "function_call_arguments":
        del event["content_index"]
    if logprobs:
        event["logprobs"] = [{"token": P.lp_token, "logprob": P.lp_logprob,
                              "top_logprobs": [{"token": P.top_token,
                                                "logprob": P.top_logprob}]}]
    return event


def _response(status: str, output: list[object], usage: object,
              incomplete: object = None) -> dict[str, object]:
    """A Response object in OpenAI's order: the stream's constants, its status and output,
    its usage; the members a request sets as OpenAI writes them for a request that set none
    (a server that echoes its request's makes its own probe)."""
    return {"id": P.id, "object": "response", "created_at": P.created, "status": status,
            "background": False, "error": None, "incomplete_details": incomplete,
            "instructions": None, "max_output_tokens": None, "model": P.model,
            "output": output, "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": False,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
            "tools": [], "top_p": 1.0, "truncation": "disabled", "usage": usage,
            "user": None, "metadata": {}}


def _part(text: str) -> dict[str, object]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _message(status: str, content: list[object]) -> dict[str, object]:
    return {"id": P.item_id, "type": "message", "status": status, "content": content,
            "role": P.role}


_RESPONSES_USAGE = {"input_tokens": P.prompt_tokens,
                    "input_tokens_details": {"cached_tokens": P.cached_tokens,
                                             "cache_write_tokens": 0},
                    "output_tokens": P.completion_tokens,
                    "output_tokens_details": {"reasoning_tokens": P.reasoning_tokens},
                    "total_tokens": P.total_tokens}


def _response_event(kind: str, response: dict[str, object]) -> dict[str, object]:
    return {"type": f"response.{kind}", "sequence_number": P.sequence_number,
            "response": response}


def _part_event(kind: str, text: str) -> dict[str, object]:
    return {"type": f"response.content_part.{kind}", "sequence_number": P.sequence_number,
            "item_id": P.item_id, "output_index": P.index, "content_index": P.content_index,
            "part": _part(text)}


def _item_event(kind: str, item: dict[str, object]) -> dict[str, object]:
    return {"type": f"response.output_item.{kind}", "sequence_number": P.sequence_number,
            "output_index": P.index, "item": item}


_RESPONSES = {
    "created": _response_event("created", _response("in_progress", [], None)),
    "in_progress": _response_event("in_progress", _response("in_progress", [], None)),
    "item_added": _item_event("added", _message("in_progress", [])),
    "part_added": _part_event("added", ""),
    "text": _responses("output_text", True),
    "reasoning": _responses("reasoning_text", False),
    "tool_args": _responses("function_call_arguments", False),
    "text_done": {"type": "response.output_text.done", "sequence_number": P.sequence_number,
                  "item_id": P.item_id, "output_index": P.index,
                  "content_index": P.content_index, "text": P.text, "logprobs": []},
    "part_done": _part_event("done", P.text),
    "item_done": _item_event("done", _message("completed", [_part(P.text)])),
    "completed": _response_event("completed", _response(
        "completed", [_message("completed", [_part(P.text)])], _RESPONSES_USAGE)),
    "incomplete": _response_event("incomplete", _response(
        "incomplete", [_message("incomplete", [_part(P.text)])], _RESPONSES_USAGE,
        {"reason": P.finish_reason})),
}


# --- Anthropic Messages: the events of Anthropic's streaming reference, in its order

def _messages() -> dict[str, object]:
    usage = {"input_tokens": P.prompt_tokens, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": P.cached_tokens, "output_tokens": P.completion_tokens}
    message: dict[str, object] = {
        "id": P.id, "type": "message", "role": P.role, "content": [], "model": P.model,
        "stop_reason": None, "stop_sequence": None, "usage": usage}

    def start(block: dict[str, object]) -> dict[str, object]:
        return {"type": "content_block_start", "index": P.index, "content_block": block}

    def delta(block: dict[str, object]) -> dict[str, object]:
        return {"type": "content_block_delta", "index": P.index, "delta": block}

    return {
        "message_start": {"type": "message_start", "message": message},
        "text_start": start({"type": "text", "text": ""}),
        "reasoning_start": start({"type": "thinking", "thinking": ""}),
        "tool_start": start({"type": "tool_use", "id": P.tool_id, "name": P.tool_name,
                             "input": {}}),
        "text": delta({"type": "text_delta", "text": P.text}),
        "reasoning": delta({"type": "thinking_delta", "thinking": P.text}),
        "tool_args": delta({"type": "input_json_delta", "partial_json": P.text}),
        "block_stop": {"type": "content_block_stop", "index": P.index},
        "message_delta": {"type": "message_delta",
                          "delta": {"stop_reason": P.finish_reason,
                                    "stop_sequence": P.stop_reason},
                          "usage": {"output_tokens": P.completion_tokens}},
        "message_stop": {"type": "message_stop"},
        "ping": {"type": "ping"},
    }


#: (api, name) -> (the frames' probes, the style, omit_none)
_BUILTIN: dict[tuple[str, str], tuple[dict[str, Any], str, object]] = {
    ("chat", "vllm"): (_VLLM_CHAT, "pydantic", _VLLM_CHAT_OMIT),
    ("chat", "trtllm"): (_TRT_CHAT, "pydantic", _TRT_CHAT_OMIT),
    ("chat", "sglang"): (_SGL_CHAT, "msgspec", _SGL_CHAT_OMIT),
    ("chat", "openai"): (_OAI_CHAT, "orjson", _OAI_OMIT),
    ("completions", "vllm"): (_VLLM_COMPLETIONS, "pydantic", _VLLM_CHAT_OMIT[:-1]),
    ("completions", "trtllm"): (_TRT_COMPLETIONS, "pydantic", False),
    ("completions", "sglang"): (_SGL_COMPLETIONS, "pydantic", False),
    ("completions", "openai"): (_OAI_COMPLETIONS, "orjson", _OAI_OMIT),
    ("responses", "openai"): (_RESPONSES, "orjson", False),
    ("messages", "anthropic"): (_messages(), "orjson", False),
}
#: the built-in shapes' names, by API
NAMES = {api: tuple(name for a, name in _BUILTIN if a == api)
         for api in ("chat", "completions", "responses", "messages")}


@cache
def builtin(api: str, name: str) -> tuple[dict[str, str], str, object]:
    """A built-in shape's probes (framed), style and omit_none (``ValueError`` for a name
    the API has not)."""
    if not isinstance(name, str):
        raise TypeError(f"a built-in shape is named by a str, not {type(name).__name__}")
    try:
        frames, style, omit = _BUILTIN[api, name]
    except KeyError:
        raise ValueError(f"no built-in {api} shape {name!r}: {api} has "
                         f"{', '.join(map(repr, NAMES[api]))}") from None
    typed = api in ("responses", "messages")
    return _frames(frames, typed), style, omit
