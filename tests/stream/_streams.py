"""Streams and response bodies, byte for byte as the servers write them: the dialect tests' data.

What each server writes (read from the servers' sources and the API docs, summarised here;
the events below are built from these facts, none of their code is used):

vLLM, ``/v1/chat/completions`` (vllm/entrypoints/openai/chat_completion/serving.py,
protocol.py; ``serve/engine/protocol.py`` for ``UsageInfo``):
- each chunk is ``data: <json>\\n\\n``; the JSON is pydantic's ``model_dump_json(
  exclude_unset=True)``: compact separators, non-ASCII as raw UTF-8, keys in field order
  (``id, object, created, model, choices, usage``), and only the fields the server set, so a
  chunk has no ``usage`` key at all unless usage is due.
- the first chunk has ``delta: {"role":"assistant","content":""}``, ``logprobs: null``,
  ``finish_reason: null``; the last token chunk adds ``finish_reason`` and
  ``stop_reason: null``; tool calls stream as ``delta.tool_calls`` with the arguments text
  in pieces.
- ``stream_options: {"include_usage": true}`` adds one last chunk with ``"choices":[]`` and
  ``usage``, dumped with ``exclude_none`` as well; ``UsageInfo`` is ordered
  ``prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details``, the details
  (``{"cached_tokens":N}``) only with ``--enable-prompt-tokens-details``.
- ``"continuous_usage_stats": true`` puts ``usage`` (prompt, total, completion) in every chunk,
  the first one included (completion 0).
- the stream ends with ``data: [DONE]\\n\\n``.

vLLM, ``/v1/completions`` (completion/serving.py): chunks ``object: "text_completion"``,
``choices[{index, text, logprobs, finish_reason, stop_reason}]``. The releases before the
``exclude_unset`` change dumped each chunk with ``exclude_unset=False``, so every chunk ends
with ``"usage":null``; that older form is the one below. The usage chunk is as for chat.

SGLang, ``/v1/chat/completions`` (python/sglang/srt/entrypoints/openai/serving_chat.py and
protocol.py of the 2025 releases): ``data: {chunk.model_dump_json()}\\n\\n``, a full dump, so
every chunk carries every field: ``delta`` with ``reasoning_content`` and ``tool_calls``
null, ``matched_stop`` in each choice, and ``"usage":null`` as the last member. The finish
chunk has an empty delta (all null) and ``matched_stop`` (the EOS id). The usage chunk has
``"choices":[]`` and ``UsageInfo`` ordered ``prompt_tokens, total_tokens, completion_tokens,
prompt_tokens_details`` (later releases add ``reasoning_tokens``, as below);
``prompt_tokens_details`` is ``null`` unless ``--enable-cache-report``. Ids are bare uuid hex.
(The newest releases build token chunks with msgspec and leave ``usage`` out instead.)

TensorRT-LLM, ``trtllm-serve`` (tensorrt_llm/serve/postprocess_handlers.py, openai_protocol.py):
chat chunks are ``model_dump_json(exclude_none=True)``; the first (role) chunk is written as
``data: <json> \\n\\n``, with a space before the line end; token chunks carry
``"reasoning_content":""`` when no reasoning parser runs. The usage chunk is a full
``model_dump_json()`` with ``"prompt_tokens_details":{"cached_tokens":N}`` always present.
Completions chunks are ``model_dump_json(exclude_unset=False)``: every null field is there,
``"usage":null`` included.

vLLM, ``/v1/responses`` (responses/api_router.py, protocol.py, and the openai SDK's event
types it reuses): every event is ``event: <type>\\ndata: <json>\\n\\n`` with the full dump
``model_dump_json(indent=None)``, so keys come in the SDK's field order (``response,
sequence_number, type``; ``content_index, delta, item_id, logprobs, output_index,
sequence_number, type``). ``response.created`` and ``response.in_progress`` hold the whole
response object with ``"usage":null``; ``response.completed`` holds it with ``usage`` =
``{"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
"output_tokens_details": {"reasoning_tokens"}, "total_tokens"}`` (newer releases add
``tool_output_tokens`` and per-turn lists to the details).

Anthropic Messages, as documented (docs.anthropic.com, "Streaming Messages"): events are
``event: <type>\\ndata: <json>\\n\\n`` in the order ``message_start`` (the message with empty
``content`` and ``usage: {"input_tokens": N, "output_tokens": 1}``), per content block
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta`` with a
``partial_json`` string) / ``content_block_stop``, any number of ``ping``, ``message_delta``
(``delta: {stop_reason, stop_sequence}`` and a top-level ``usage: {"output_tokens": N}``) and
``message_stop``. The documented JSON is spaced (``", "``, ``": "``), with a compact
``"stop_sequence":null`` in the ``message_delta`` example. Recorded API traffic (quoted on
public pages) is compact JSON with cache counters in both usages
(``cache_creation_input_tokens``, ``cache_read_input_tokens``, ``cache_creation``,
``service_tier``); its ``message_delta`` usage is cumulative and repeats ``input_tokens``;
``ping`` stays ``{"type": "ping"}``.

vLLM, ``/v1/messages`` (vllm/entrypoints/anthropic/serving.py, protocol.py): converts its
own chat stream (asked with ``include_usage`` and ``continuous_usage_stats``) and writes
``event: <type>\\ndata: <json>\\n\\n`` with ``model_dump_json(exclude_unset=True)``. Keys follow
vLLM's field order (``type, message, delta, content_block, index, ..., usage``); the
``message_start`` message has only the fields vLLM set (``id, content, model, stop_reason,
stop_sequence, usage``: no ``type``/``role``), usage ``{"input_tokens": P, "output_tokens":
0}``; ``message_delta`` has ``delta: {"stop_reason": ...}`` and ``usage: {"input_tokens",
"output_tokens"}`` (no cache fields); ``message_stop`` is ``{"type":"message_stop"}``; no
``ping``.

Non-streaming bodies are one JSON object: vLLM returns ``model_dump()`` through Starlette's
``JSONResponse`` (compact, raw UTF-8); the Anthropic API reference shows its message body
pretty-printed.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple


class Stream(NamedTuple):
    name: str
    #: the dialect the stream is in: "chat", "responses" or "messages"
    api: str
    events: tuple[bytes, ...]

    @property
    def data(self) -> bytes:
        return b"".join(self.events)


class Body(NamedTuple):
    name: str
    api: str
    body: bytes


def compact(obj: Any) -> str:
    """JSON as pydantic's ``model_dump_json`` and Starlette's ``JSONResponse`` write it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def data_line(text: str, *, event: str | None = None, tail: str = "") -> bytes:
    """One SSE event: an optional ``event:`` line, one ``data:`` line, a blank line."""
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {text}{tail}\n\n".encode()


DONE = b"data: [DONE]\n\n"

# Token texts, as a model streams them: the word "usage", JSON-looking text, non-ASCII.
TOKENS = ["Your", " token", " usage", " today", ":", ' {"usage":', " null}", " \u2014",
          " caf\u00e9", " na\u00efve", " \U0001f642", "."]
TOOL_ARGUMENTS = ['{"metric": "', "usage", '", "filter": {"usage": null', "}}"]


# --- vLLM --------------------------------------------------------------------------------------

VLLM_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
VLLM_CHAT_ID = "chatcmpl-8f14e45fceea467a9575b2d0f5e1c3a4"
CREATED = 1733148000


def _vllm_chunk(choices: list[Any], usage: Any = None, *, chat_id: str = VLLM_CHAT_ID,
                obj: str = "chat.completion.chunk", model: str = VLLM_MODEL) -> bytes:
    chunk: dict[str, Any] = {"id": chat_id, "object": obj, "created": CREATED, "model": model,
                             "choices": choices}
    if usage is not None:  # exclude_unset: no usage key unless the server set it
        chunk["usage"] = usage
    return data_line(compact(chunk))


def _vllm_usage(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
            "completion_tokens": completion, **extra}


def vllm_chat() -> Stream:
    """vLLM chat, ``stream_options.include_usage`` and prompt-token details on."""
    prompt = 37
    events = [_vllm_chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                            "logprobs": None, "finish_reason": None}])]
    for text in TOKENS[:-1]:
        events.append(_vllm_chunk([{"index": 0, "delta": {"content": text},
                                    "logprobs": None, "finish_reason": None}]))
    events.append(_vllm_chunk([{"index": 0, "delta": {"content": TOKENS[-1]}, "logprobs": None,
                                "finish_reason": "stop", "stop_reason": None}]))
    events.append(_vllm_chunk([], _vllm_usage(prompt, len(TOKENS),
                                              prompt_tokens_details={"cached_tokens": 32})))
    events.append(DONE)
    return Stream("vllm-chat", "chat", tuple(events))


def vllm_chat_continuous() -> Stream:
    """vLLM chat with ``continuous_usage_stats``: usage in every chunk; a tool call."""
    prompt, chat_id = 412, "chatcmpl-c4ca4238a0b923820dcc509a6f75849b"
    events = [_vllm_chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                            "logprobs": None, "finish_reason": None}],
                          _vllm_usage(prompt, 0), chat_id=chat_id)]
    done = 0
    for text in TOKENS[1:3]:
        done += 1
        events.append(_vllm_chunk([{"index": 0, "delta": {"content": text}, "logprobs": None,
                                    "finish_reason": None}], _vllm_usage(prompt, done),
                                  chat_id=chat_id))
    done += 1
    events.append(_vllm_chunk([{"index": 0, "delta": {"tool_calls": [
        {"id": "chatcmpl-tool-1f0e3dad99908345f7439f8ffabdffc4", "type": "function",
         "index": 0, "function": {"name": "get_usage_report"}}]},
        "logprobs": None, "finish_reason": None}], _vllm_usage(prompt, done), chat_id=chat_id))
    for piece in TOOL_ARGUMENTS:
        done += 1
        events.append(_vllm_chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": piece}}]}, "logprobs": None,
            "finish_reason": None}], _vllm_usage(prompt, done), chat_id=chat_id))
    done += 1
    events.append(_vllm_chunk([{"index": 0, "delta": {"content": ""}, "logprobs": None,
                                "finish_reason": "tool_calls", "stop_reason": None}],
                              _vllm_usage(prompt, done), chat_id=chat_id))
    events.append(_vllm_chunk([], _vllm_usage(prompt, done), chat_id=chat_id))
    events.append(DONE)
    return Stream("vllm-chat-continuous-usage", "chat", tuple(events))


def vllm_completions() -> Stream:
    """vLLM ``/v1/completions`` (``exclude_unset=False`` chunks: ``"usage":null`` in each)."""
    cmpl_id, prompt = "cmpl-45c48cce2e2d7fbdea1afc51c7c6ad26", 9
    texts = [" The", " word", " \u201cusage\u201d", " comes", " from", " Old", " French",
             " us\u00e1ge", ",", " \\\"usage\\\"", " in", " JSON"]
    events = []
    for i, text in enumerate(texts):
        last = i == len(texts) - 1
        events.append(data_line(compact({
            "id": cmpl_id, "object": "text_completion", "created": CREATED, "model": VLLM_MODEL,
            "choices": [{"index": 0, "text": text, "logprobs": None,
                         "finish_reason": "length" if last else None, "stop_reason": None}],
            "usage": None})))
    events.append(data_line(compact({
        "id": cmpl_id, "object": "text_completion", "created": CREATED, "model": VLLM_MODEL,
        "choices": [], "usage": _vllm_usage(prompt, len(texts))})))
    events.append(DONE)
    return Stream("vllm-completions", "chat", tuple(events))


# --- SGLang ------------------------------------------------------------------------------------

SGLANG_MODEL = "Qwen/Qwen2.5-7B-Instruct"
SGLANG_ID = "d3d9446802a44259755d38e6d163e820"


def _sglang_chunk(delta: dict[str, Any], finish: str | None = None,
                  matched: int | None = None) -> bytes:
    full_delta = {"role": None, "content": None, "reasoning_content": None, "tool_calls": None}
    full_delta.update(delta)
    return data_line(compact({
        "id": SGLANG_ID, "object": "chat.completion.chunk", "created": CREATED,
        "model": SGLANG_MODEL,
        "choices": [{"index": 0, "delta": full_delta, "logprobs": None, "finish_reason": finish,
                     "matched_stop": matched}],
        "usage": None}))


def sglang_chat() -> Stream:
    """SGLang chat, full pydantic dumps: ``"usage":null`` ends every chunk."""
    events = [_sglang_chunk({"role": "assistant", "content": ""})]
    for text in TOKENS:
        events.append(_sglang_chunk({"content": text}))
    events.append(_sglang_chunk({}, "stop", 151645))
    events.append(data_line(compact({
        "id": SGLANG_ID, "object": "chat.completion.chunk", "created": CREATED,
        "model": SGLANG_MODEL, "choices": [],
        "usage": {"prompt_tokens": 28, "total_tokens": 40, "completion_tokens": 12,
                  "prompt_tokens_details": None, "reasoning_tokens": 0}})))
    events.append(DONE)
    return Stream("sglang-chat", "chat", tuple(events))


# --- TensorRT-LLM ------------------------------------------------------------------------------

TRTLLM_MODEL = "nvidia/Llama-3.1-8B-Instruct-FP8"
TRTLLM_ID = "chatcmpl-6512bd43d9caa6e02c990b0a82652dca"


def trtllm_chat() -> Stream:
    """trtllm-serve chat: ``exclude_none`` chunks, the first with a space before its line end."""
    head = {"id": TRTLLM_ID, "object": "chat.completion.chunk", "created": CREATED,
            "model": TRTLLM_MODEL}
    events = [data_line(compact({**head, "choices": [
        {"index": 0, "delta": {"role": "assistant"}}]}), tail=" ")]
    for text in TOKENS[:-1]:
        events.append(data_line(compact({**head, "choices": [
            {"index": 0, "delta": {"content": text, "reasoning_content": ""}}]})))
    events.append(data_line(compact({**head, "choices": [
        {"index": 0, "delta": {"content": TOKENS[-1], "reasoning_content": ""},
         "finish_reason": "stop"}]})))
    events.append(data_line(compact({**head, "choices": [], "usage": {
        "prompt_tokens": 44, "total_tokens": 56, "completion_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 0}}})))
    events.append(DONE)
    return Stream("trtllm-chat", "chat", tuple(events))


def trtllm_completions() -> Stream:
    """trtllm-serve completions: ``exclude_unset=False``, every null field written."""
    cmpl_id = "cmpl-c20ad4d76fe97759aa27a0c99bff6710"
    texts = [" usage", " of", " the", " word", " \u00ab", "usage", "\u00bb", " is", " common",
             "."]
    events = []
    for i, text in enumerate(texts):
        last = i == len(texts) - 1
        events.append(data_line(compact({
            "id": cmpl_id, "object": "text_completion", "created": CREATED,
            "model": TRTLLM_MODEL,
            "choices": [{"index": 0, "text": text, "token_ids": None, "logprobs": None,
                         "finish_reason": "stop" if last else None, "stop_reason": None,
                         "avg_decoded_tokens_per_iter": None}],
            "usage": None})))
    events.append(data_line(compact({
        "id": cmpl_id, "object": "text_completion", "created": CREATED, "model": TRTLLM_MODEL,
        "choices": [], "usage": {"prompt_tokens": 6, "total_tokens": 16, "completion_tokens": 10,
                                 "prompt_tokens_details": {"cached_tokens": 0}}})))
    events.append(DONE)
    return Stream("trtllm-completions", "chat", tuple(events))


# --- vLLM Responses ----------------------------------------------------------------------------

RESP_ID = "resp_a87ff679a2f3471d8d1f6e2c7b3d4e5f"
MSG_ID = "msg_e4da3b7fbbce4345b3fa0b2a4c1d5e6f"
RESP_TEXTS = ["Your", " usage", " is 12 tokens (caf\u00e9 \u2192 ok)", "."]


def _response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {"id": RESP_ID, "created_at": CREATED, "incomplete_details": None,
            "instructions": None, "metadata": None, "model": VLLM_MODEL, "object": "response",
            "output": output, "parallel_tool_calls": True, "temperature": 0.7,
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "background": False,
            "max_output_tokens": 4096, "max_tool_calls": None, "previous_response_id": None,
            "prompt": None, "reasoning": None, "service_tier": "auto", "status": status,
            "text": None, "top_logprobs": None, "truncation": "disabled", "usage": usage,
            "user": None}


def _message_item(text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [
        {"annotations": [], "text": text, "type": "output_text", "logprobs": None}]
    return {"id": MSG_ID, "content": content, "role": "assistant", "status": status,
            "type": "message"}


def vllm_responses() -> Stream:
    """vLLM ``/v1/responses``: ``usage`` null until ``response.completed``'s ``response.usage``."""
    text = "".join(RESP_TEXTS)
    seq = iter(range(100))
    events = [data_line(compact({"response": _response("in_progress", [], None),
                                 "sequence_number": next(seq), "type": "response.created"}),
                        event="response.created"),
              data_line(compact({"response": _response("in_progress", [], None),
                                 "sequence_number": next(seq), "type": "response.in_progress"}),
                        event="response.in_progress"),
              data_line(compact({"item": _message_item(None, "in_progress"), "output_index": 0,
                                 "sequence_number": next(seq),
                                 "type": "response.output_item.added"}),
                        event="response.output_item.added"),
              data_line(compact({"content_index": 0, "item_id": MSG_ID, "output_index": 0,
                                 "part": {"annotations": [], "text": "", "type": "output_text",
                                          "logprobs": None},
                                 "sequence_number": next(seq),
                                 "type": "response.content_part.added"}),
                        event="response.content_part.added")]
    for delta in RESP_TEXTS:
        events.append(data_line(compact({
            "content_index": 0, "delta": delta, "item_id": MSG_ID, "logprobs": [],
            "output_index": 0, "sequence_number": next(seq),
            "type": "response.output_text.delta"}), event="response.output_text.delta"))
    events.append(data_line(compact({
        "content_index": 0, "item_id": MSG_ID, "logprobs": [], "output_index": 0,
        "sequence_number": next(seq), "text": text, "type": "response.output_text.done"}),
        event="response.output_text.done"))
    events.append(data_line(compact({
        "content_index": 0, "item_id": MSG_ID, "output_index": 0,
        "part": {"annotations": [], "text": text, "type": "output_text", "logprobs": None},
        "sequence_number": next(seq), "type": "response.content_part.done"}),
        event="response.content_part.done"))
    events.append(data_line(compact({
        "item": _message_item(text, "completed"), "output_index": 0,
        "sequence_number": next(seq), "type": "response.output_item.done"}),
        event="response.output_item.done"))
    usage = {"input_tokens": 52, "input_tokens_details": {"cached_tokens": 48},
             "output_tokens": len(RESP_TEXTS), "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 52 + len(RESP_TEXTS)}
    events.append(data_line(compact({
        "response": _response("completed", [_message_item(text, "completed")], usage),
        "sequence_number": next(seq), "type": "response.completed"}),
        event="response.completed"))
    return Stream("vllm-responses", "responses", tuple(events))


# --- Anthropic Messages ------------------------------------------------------------------------

def anthropic_documented() -> Stream:
    """The stream as Anthropic's docs show it (spaced JSON), a text block and a tool_use block."""
    events = [
        b'event: message_start\ndata: {"type": "message_start", "message": {"id": '
        b'"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", '
        b'"content": [], "model": "claude-sonnet-4-20250514", "stop_reason": null, '
        b'"stop_sequence": null, "usage": {"input_tokens": 472, "output_tokens": 2}}}\n\n',
        b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        b'"content_block": {"type": "text", "text": ""}}\n\n',
        b'event: ping\ndata: {"type": "ping"}\n\n',
    ]
    for text in ["Checking", " your", " usage", " (caf\\u00e9", " \\u2192", ' \\"usage\\":',
                 " {})"]:
        events.append(b'event: content_block_delta\ndata: {"type": "content_block_delta", '
                      b'"index": 0, "delta": {"type": "text_delta", "text": "'
                      + text.encode() + b'"}}\n\n')
    events += [
        b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n',
        b'event: content_block_start\ndata: {"type": "content_block_start", "index": 1, '
        b'"content_block": {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", '
        b'"name": "get_usage", "input": {}}}\n\n',
    ]
    for piece in ['{\\"metric\\": \\"us', 'age\\", \\"usage\\": null', ', \\"unit\\": '
                  '\\"tok\\u00e9n\\"}']:
        events.append(b'event: content_block_delta\ndata: {"type": "content_block_delta", '
                      b'"index": 1, "delta": {"type": "input_json_delta", "partial_json": "'
                      + piece.encode() + b'"}}\n\n')
    events += [
        b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 1}\n\n',
        b'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": '
        b'"tool_use", "stop_sequence":null}, "usage": {"output_tokens": 89}}\n\n',
        b'event: message_stop\ndata: {"type": "message_stop"}\n\n',
    ]
    return Stream("anthropic-documented", "messages", tuple(events))


def anthropic_api() -> Stream:
    """The stream as the API sends it: compact JSON, cache counters in both usages."""
    msg = {"model": "claude-sonnet-4-5-20250929", "id": "msg_01QC4g3HwBThD4BaNtBckFDJ",
           "type": "message", "role": "assistant", "content": [], "stop_reason": None,
           "stop_sequence": None,
           "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 3072,
                     "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                        "ephemeral_1h_input_tokens": 0},
                     "output_tokens": 1, "service_tier": "standard"}}
    events = [data_line(compact({"type": "message_start", "message": msg}),
                        event="message_start"),
              data_line(compact({"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
                        event="content_block_start"),
              b'event: ping\ndata: {"type": "ping"}\n\n']
    for text in ["Your", " cache", " usage", " is", " 3\u202f072", " tokens", " \u2014",
                 " tr\u00e8s", " bien", "."]:
        events.append(data_line(compact({"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": text}}),
                                event="content_block_delta"))
    events += [data_line(compact({"type": "content_block_stop", "index": 0}),
                         event="content_block_stop"),
               data_line(compact({"type": "message_delta",
                                  "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"input_tokens": 12,
                                            "cache_creation_input_tokens": 0,
                                            "cache_read_input_tokens": 3072,
                                            "output_tokens": 30}}),
                         event="message_delta"),
               data_line(compact({"type": "message_stop"}), event="message_stop")]
    return Stream("anthropic-api", "messages", tuple(events))


def vllm_anthropic() -> Stream:
    """vLLM ``/v1/messages``: ``exclude_unset`` dumps in vLLM's field order, no ping."""
    msg_id = "chatcmpl-1679091c5a880faf6fb5e6087eb1b2dc"
    events = [data_line(compact({"type": "message_start", "message": {
        "id": msg_id, "content": [], "model": SGLANG_MODEL, "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 31, "output_tokens": 0}}}),
        event="message_start"),
        data_line(compact({"type": "content_block_start",
                           "content_block": {"type": "text", "text": ""}, "index": 0}),
                  event="content_block_start")]
    for text in TOKENS[:6]:
        events.append(data_line(compact({"type": "content_block_delta",
                                         "delta": {"type": "text_delta", "text": text},
                                         "index": 0}), event="content_block_delta"))
    events += [data_line(compact({"type": "content_block_stop", "index": 0}),
                         event="content_block_stop"),
               data_line(compact({"type": "content_block_start", "content_block": {
                   "type": "tool_use", "id": "chatcmpl-tool-8e296a067a37563370ded05f5a3bf3ec",
                   "name": "get_usage_report", "input": {}}, "index": 1}),
                   event="content_block_start")]
    for piece in TOOL_ARGUMENTS:
        events.append(data_line(compact({"type": "content_block_delta", "delta": {
            "type": "input_json_delta", "partial_json": piece}, "index": 1}),
            event="content_block_delta"))
    events += [data_line(compact({"type": "content_block_stop", "index": 1}),
                         event="content_block_stop"),
               data_line(compact({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                  "usage": {"input_tokens": 31, "output_tokens": 11}}),
                         event="message_delta"),
               data_line(compact({"type": "message_stop"}), event="message_stop")]
    return Stream("vllm-anthropic", "messages", tuple(events))


STREAMS: tuple[Stream, ...] = (
    vllm_chat(), vllm_chat_continuous(), vllm_completions(), sglang_chat(), trtllm_chat(),
    trtllm_completions(), vllm_responses(), anthropic_documented(), anthropic_api(),
    vllm_anthropic(),
)


# --- whole (non-streaming) bodies --------------------------------------------------------------

def _bodies() -> tuple[Body, ...]:
    answer = "Your usage today: 12 tokens \u2014 caf\u00e9 \U0001f642"
    vllm_chat_body = compact({
        "id": VLLM_CHAT_ID, "object": "chat.completion", "created": CREATED,
        "model": VLLM_MODEL,
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": answer, "refusal": None, "annotations": None,
            "audio": None, "function_call": None, "tool_calls": [], "reasoning_content": None},
            "logprobs": None, "finish_reason": "stop", "stop_reason": None}],
        "service_tier": None, "system_fingerprint": None,
        "usage": {"prompt_tokens": 37, "total_tokens": 49, "completion_tokens": 12,
                  "prompt_tokens_details": None},
        "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None})
    vllm_tool_body = compact({
        "id": "chatcmpl-c9f0f895fb98ab9159f51fd0297e236d", "object": "chat.completion",
        "created": CREATED, "model": VLLM_MODEL,
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": None, "refusal": None, "annotations": None,
            "audio": None, "function_call": None,
            "tool_calls": [{"id": "chatcmpl-tool-45c48cce2e2d7fbd", "type": "function",
                            "function": {"name": "get_usage_report",
                                         "arguments": "".join(TOOL_ARGUMENTS)}}],
            "reasoning_content": None},
            "logprobs": None, "finish_reason": "tool_calls", "stop_reason": None}],
        "service_tier": None, "system_fingerprint": None,
        "usage": {"prompt_tokens": 412, "total_tokens": 433, "completion_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 400}},
        "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None})
    sglang_body = compact({
        "id": SGLANG_ID, "object": "chat.completion", "created": CREATED,
        "model": SGLANG_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer,
                                             "reasoning_content": None, "tool_calls": None},
                     "logprobs": None, "finish_reason": "stop", "matched_stop": 151645}],
        "usage": {"prompt_tokens": 28, "total_tokens": 40, "completion_tokens": 12,
                  "prompt_tokens_details": None, "reasoning_tokens": 0},
        "metadata": {"weight_version": "default"}})
    trtllm_body = compact({
        "id": TRTLLM_ID, "object": "chat.completion", "created": CREATED,
        "model": TRTLLM_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer,
                                             "reasoning_content": None, "tool_calls": []},
                     "logprobs": None, "finish_reason": "stop", "stop_reason": None,
                     "disaggregated_params": None}],
        "usage": {"prompt_tokens": 44, "total_tokens": 56, "completion_tokens": 12,
                  "prompt_tokens_details": {"cached_tokens": 0}},
        "prompt_token_ids": None})
    completion_body = compact({
        "id": "cmpl-45c48cce2e2d7fbdea1afc51c7c6ad26", "object": "text_completion",
        "created": CREATED, "model": VLLM_MODEL,
        "choices": [{"index": 0, "text": " The word \u201cusage\u201d comes from Old French",
                     "logprobs": None, "finish_reason": "length", "stop_reason": None,
                     "prompt_logprobs": None}],
        "usage": {"prompt_tokens": 9, "total_tokens": 16, "completion_tokens": 7,
                  "prompt_tokens_details": None},
        "kv_transfer_params": None})
    responses_body = compact({
        **_response("completed", [_message_item("".join(RESP_TEXTS), "completed")], {
            "input_tokens": 52,
            "input_tokens_details": {"cached_tokens": 48, "input_tokens_per_turn": [],
                                     "cached_tokens_per_turn": []},
            "output_tokens": 9,
            "output_tokens_details": {"reasoning_tokens": 0, "tool_output_tokens": 0,
                                      "output_tokens_per_turn": [],
                                      "tool_output_tokens_per_turn": []},
            "total_tokens": 61}),
        "input_messages": None, "output_messages": None})
    # the API reference's example body, pretty-printed as the docs show it
    anthropic_doc_body = json.dumps({
        "content": [{"text": "Hi! My name is Claude. Your usage: see \u00e9t\u00e9.",
                     "type": "text"}],
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF", "model": "claude-sonnet-4-20250514",
        "role": "assistant", "stop_reason": "end_turn", "stop_sequence": None,
        "type": "message", "usage": {"input_tokens": 2095, "output_tokens": 503}}, indent=2)
    anthropic_api_body = compact({
        "model": "claude-sonnet-4-5-20250929", "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "Your cache usage is 3\u202f072 tokens."}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 3072,
                  "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                     "ephemeral_1h_input_tokens": 0},
                  "output_tokens": 30, "service_tier": "standard"}})
    vllm_anthropic_body = compact({
        "id": "chatcmpl-1679091c5a880faf6fb5e6087eb1b2dc", "type": "message",
        "role": "assistant", "content": [{"type": "text", "text": answer}],
        "model": SGLANG_MODEL, "stop_reason": "end_turn",
        "usage": {"input_tokens": 31, "output_tokens": 12}})
    return (
        Body("vllm-chat", "chat", vllm_chat_body.encode()),
        Body("vllm-chat-tool-call", "chat", vllm_tool_body.encode()),
        Body("sglang-chat", "chat", sglang_body.encode()),
        Body("trtllm-chat", "chat", trtllm_body.encode()),
        Body("vllm-completion", "chat", completion_body.encode()),
        Body("vllm-responses", "responses", responses_body.encode()),
        Body("anthropic-documented", "messages", anthropic_doc_body.encode()),
        Body("anthropic-api", "messages", anthropic_api_body.encode()),
        Body("vllm-anthropic", "messages", vllm_anthropic_body.encode()),
    )


BODIES: tuple[Body, ...] = _bodies()
