"""The two fake workers behind examples/disagg_proxy.py, on aiohttp.

- The *context* worker runs the prompt: it "tokenizes" by inventing ``fake_prompt_tokens``
  ids (a request field; default: one per word of the prompt) and answers with those ids and
  a ``usage``, in the convention the request speaks. On ``/context`` (tokcore's own):
  ``{"request_id", "usage", "prompt_token_ids_b64"}`` (the ids as base64 of int32,
  ``tokcore.ids_to_b64``), or ``"prompt_token_ids"`` as a JSON int list when asked
  (``"ids_format": "list"``, the plain way). On the API paths, as the stacks' context
  workers answer: to TensorRT-LLM's ``disaggregated_params`` (``request_type:
  context_only``), a completion whose top level has ``prompt_token_ids`` (a JSON int array)
  or, when ``return_prompt_token_ids_b64`` asks, ``prompt_token_ids_b64``, and whose
  ``choices[0].disaggregated_params`` hold the hand-off; to vLLM's ``kv_transfer_params``
  (``do_remote_decode``), a one-token completion whose ``kv_transfer_params`` hold the KV's
  whereabouts and the prompt's ``prompt_token_ids``.
- The *generation* worker serves the four APIs (``/v1/chat/completions``,
  ``/v1/completions``, ``/v1/responses``, ``/v1/messages``) in the byte format the real
  servers write (compact JSON as vLLM's pydantic models dump it, ``event:`` lines where the
  API has them), streaming when the request says ``"stream": true`` and not otherwise, a
  usage chunk for chat and completions only when ``stream_options.include_usage`` asks. It
  streams ``max_tokens`` canned tokens as fast as it can. Its KV cache came from the context
  worker, so its usage counts the whole prompt as cached: the proxy must put the context
  worker's counts in. It reads the prompt's ids wherever a convention puts them
  (``prompt_token_ids_b64``, ``prompt_token_ids``, ``kv_transfer_params.prompt_token_ids``,
  a ``prompt`` of ids) and checks the convention's hand-off (TensorRT-LLM's
  ``generation_only`` params, vLLM's ``do_remote_prefill``).

Both read a body in MessagePack (msgspec) when the ``X-TRTLLM-Msgpack: 1`` header says so, as
TensorRT-LLM's workers do (its ``Content-Type`` stays ``application/json``), JSON otherwise.

Each runs alone with ``python examples/fake_workers.py --role context`` (or
``generation``), on 127.0.0.1, and prints ``READY <url>``; the orchestrators start both so.

Both answer a request they cannot use (not a JSON object, a member of the wrong type or
value) with a 400 in vLLM's error shape (``{"error": {"message", "type": "BadRequestError",
"param", "code": 400}}``) naming the member, as the real servers validate theirs; nothing
they are sent makes them log a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import time
import zlib
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import msgspec
from aiohttp import web

from tokcore import convert_ids, ids_to_b64, ids_to_json, pack_ids, set_member

VOCAB = 152_000
MODEL = "fake-model"
LOOPBACK = "127.0.0.1"
COMPACT = (",", ":")
JSON_HEADERS = {"Content-Type": "application/json"}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
# canned token texts; some look like JSON keys or SSE syntax to show only the usage changes
TOKEN_TEXTS = [" The", " usage", ' "usage": {"prompt_tokens": 1}', " of", " \u00e9t\u00e9",
               " data:", " [DONE]", "\n\n", " tokens", ' {"x": [1, 2]}', ",", " \\\"quoted\\\""]
#: the four endpoints, and the tokcore dialect (``api=``) each speaks
ENDPOINTS = {"/v1/chat/completions": "chat", "/v1/completions": "chat",
             "/v1/responses": "responses", "/v1/messages": "messages"}
GENERATIONS = web.AppKey("generations", dict)  # the worker's counts, for the tests
#: the header that says a body is MessagePack (TensorRT-LLM's orchestrator -> worker requests)
MSGPACK_HEADER = "X-TRTLLM-Msgpack"


def token_text(position: int) -> str:
    """The text of the generation worker's ``position``-th token (the tests' oracle too)."""
    return TOKEN_TEXTS[position % len(TOKEN_TEXTS)]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=COMPACT)


# --- bad requests: a 400, as vLLM answers them ------------------------------------------------

class BadRequest(ValueError):
    """A request the worker refuses: ``param`` names the member at fault."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@web.middleware
async def bad_requests(request: web.Request, handler: Any) -> web.StreamResponse:
    """A ``BadRequest`` becomes vLLM's 400 (``ErrorResponse``), not a traceback."""
    try:
        response: web.StreamResponse = await handler(request)
    except BadRequest as error:
        body = {"error": {"message": str(error), "type": "BadRequestError",
                          "param": error.param, "code": 400}}
        return web.Response(status=400, body=dumps(body).encode(), headers=JSON_HEADERS)
    return response


def is_msgpack(request: web.Request) -> bool:
    return request.headers.get(MSGPACK_HEADER) == "1"


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request's body: a JSON object, or a MessagePack map under ``X-TRTLLM-Msgpack``
    (msgspec reads both: a worker's own parsing costs the shared cores little)."""
    raw = await request.read()
    try:
        body = (msgspec.msgpack.decode(raw) if is_msgpack(request)
                else msgspec.json.decode(raw))
    except (ValueError, msgspec.DecodeError) as error:
        kind = "MessagePack" if is_msgpack(request) else "JSON"
        raise BadRequest(f"the body is not {kind}: {error}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body is not a JSON object")
    return body


def positive_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is not None and (type(value) is not int or value < 1):
        raise BadRequest(f"{key} must be a positive integer, got {dumps(value)}", key)
    return value


def text_of(content: Any, param: str) -> str:
    """A content's text: a string, a list of text parts, or nothing."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(part, dict | str) for part in content):
        return "".join(part if isinstance(part, str) else str(part.get("text", ""))
                       for part in content)
    raise BadRequest(f"{param} must be a string or a list of parts, got {dumps(content)}",
                     param)


# --- the context worker --------------------------------------------------------------------

@lru_cache(maxsize=64)
def fake_prompt_ids(text: str, count: int) -> tuple[int, ...]:
    """Stand-in for a tokenizer: ``count`` ids drawn from a seed made of the text."""
    rng = random.Random(zlib.crc32(text.encode()))
    return tuple(rng.randrange(VOCAB) for _ in range(count))


def cached_prompt_tokens(prompt_tokens: int) -> int:
    """Stand-in for a prefix-cache hit: about half the prompt, in 64-token blocks."""
    return prompt_tokens // 2 // 64 * 64


@lru_cache(maxsize=64)
def prompt_id_texts(text: str, count: int) -> tuple[bytes, str]:
    """The fake prompt's ids as a JSON array and as base64 of int32, written once: the
    context worker's answers cost the shared cores little."""
    ids = fake_prompt_ids(text, count)
    return ids_to_json(ids), ids_to_b64(ids)


def ids_fingerprint(ids: Any) -> str:
    """What the generation worker reports about the ids it got (the tests check it): ids,
    or their int32 bytes."""
    return f"fp_{zlib.crc32(ids if isinstance(ids, bytes) else pack_ids(ids)):08x}"


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt of a request of any of the four APIs (``BadRequest`` for a malformed one)."""
    if "prompt" in body:  # completions
        return text_of(body["prompt"], "prompt")
    if "input" in body:  # responses: a string or a list of messages
        items = body["input"]
        if isinstance(items, list) and all(isinstance(m, dict) for m in items):
            return "\n".join(text_of(m.get("content"), "input") for m in items)
        return text_of(items, "input")
    messages = body.get("messages", [])
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise BadRequest(f"messages must be a list of objects, got {dumps(messages)}",
                         "messages")
    parts = [text_of(body.get("system"), "system")] if body.get("system") else []
    parts += [text_of(m.get("content"), "messages") for m in messages]
    return "\n".join(parts)


def context_usage(count: int, completion: int = 0) -> dict[str, Any]:
    return {"prompt_tokens": count, "completion_tokens": completion,
            "total_tokens": count + completion,
            "prompt_tokens_details": {"cached_tokens": cached_prompt_tokens(count)}}


def hand_off(body: dict[str, Any], key: str, member: str, value: Any) -> dict[str, Any] | None:
    """The convention's object ``key`` of a context request, None when it has none
    (``BadRequest`` when it does not ask for a context phase: ``member`` is not ``value``)."""
    params = body.get(key)
    if params is None:
        return None
    if not isinstance(params, dict) or params.get(member) != value:
        raise BadRequest(f"{key}.{member} must be {dumps(value)} in a context request", key)
    return params


def trtllm_answer(path: str, body: dict[str, Any], text: str, count: int,
                  params: dict[str, Any]) -> bytes:
    """TensorRT-LLM's context answer: a completion whose first (and only) token is left to
    the generation worker, the hand-off in ``choices[0].disaggregated_params``, the ids at
    the top level as an int array or, when asked, as base64 of int32."""
    request_id = str(body.get("request_id"))
    ids_json, ids_b64 = prompt_id_texts(text, count)
    b64 = params.get("return_prompt_token_ids_b64") is True
    chat = path != "/v1/completions"
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "disaggregated_params": {
        "request_type": "context_only", "first_gen_tokens": [fake_prompt_ids(text, count)[-1]],
        "ctx_request_id": zlib.crc32(request_id.encode()), "encoded_opaque_state": None,
        "draft_tokens": None}}
    choice.update({"message": {"role": "assistant", "content": ""}} if chat else {"text": ""})
    answer = dumps({"id": f"{'chatcmpl' if chat else 'cmpl'}-{request_id}",
                    "object": "chat.completion" if chat else "text_completion",
                    "created": int(time.time()), "model": MODEL, "choices": [choice],
                    "usage": context_usage(count), "prompt_token_ids": None,
                    "prompt_token_ids_b64": ids_b64 if b64 else None}).encode()
    return answer if b64 else set_member(answer, "prompt_token_ids", ids_json, trusted=True)


def vllm_answer(body: dict[str, Any], text: str, count: int) -> bytes:
    """vLLM's prefill answer: a one-token completion whose ``kv_transfer_params`` say where
    the KV is (16-token blocks) and hold the prompt's ids."""
    request_id = str(body.get("request_id"))
    answer = dumps({
        "id": f"chatcmpl-{request_id}", "object": "chat.completion",
        "created": int(time.time()), "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": token_text(0)},
                     "logprobs": None, "finish_reason": "length", "stop_reason": None}],
        "usage": context_usage(count, 1),
        "kv_transfer_params": {
            "do_remote_prefill": True, "do_remote_decode": False,
            "remote_block_ids": list(range((count + 15) // 16)),
            "remote_engine_id": "fake-prefill-engine", "remote_request_id": request_id,
            "remote_host": LOOPBACK, "remote_port": 5600, "tp_size": 1,
            "prompt_token_ids": None}}).encode()
    return set_member(answer, ("kv_transfer_params", "prompt_token_ids"),
                      prompt_id_texts(text, count)[0], trusted=True)


async def context_handler(request: web.Request) -> web.Response:
    body = await json_object(request)
    text = prompt_text(body)
    count = positive_int(body, "fake_prompt_tokens") or len(text.split()) or 1
    trtllm = hand_off(body, "disaggregated_params", "request_type", "context_only")
    vllm = hand_off(body, "kv_transfer_params", "do_remote_decode", True)
    if trtllm is not None:
        answer = trtllm_answer(request.path, body, text, count, trtllm)
    elif vllm is not None:
        answer = vllm_answer(body, text, count)
    elif request.path != "/context":
        raise BadRequest("a context request on an API path says its convention "
                         "(disaggregated_params or kv_transfer_params)")
    else:  # tokcore's own call
        ids_json, ids_b64 = prompt_id_texts(text, count)
        head = {"request_id": body.get("request_id"), "usage": context_usage(count)}
        if body.get("ids_format") == "list":
            answer = set_member(dumps(head).encode(), "prompt_token_ids", ids_json,
                                trusted=True)
        else:
            answer = dumps({**head, "prompt_token_ids_b64": ids_b64}).encode()
    return web.Response(body=answer, headers=JSON_HEADERS)


def make_context_app() -> web.Application:
    app = web.Application(client_max_size=1 << 26, middlewares=[bad_requests])
    for path in ("/context", *ENDPOINTS):
        app.router.add_post(path, context_handler)
    return app


# --- the generation worker: one format per API ---------------------------------------------

class Generation:
    """One request to the generation worker: its ids, its tokens, its (wrong) usage."""

    def __init__(self, body: dict[str, Any]) -> None:
        check_hand_off(body)
        self.ids = prompt_ids(body)  # their int32 bytes
        self.body = body
        self.prompt = len(self.ids) // 4
        self.count = (positive_int(body, "max_tokens") or positive_int(body, "max_output_tokens")
                      or 16)
        if not isinstance(body.get("stream", False), bool):
            raise BadRequest(f"stream must be a boolean, got {dumps(body['stream'])}", "stream")
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise BadRequest(f"stream_options must be an object, got {dumps(options)}",
                             "stream_options")
        self.request_id = body.get("request_id")
        self.fingerprint = ids_fingerprint(self.ids)
        self.created = int(time.time())

    def texts(self) -> Iterator[str]:
        return (token_text(position) for position in range(self.count))

    def text(self) -> str:
        return "".join(self.texts())

    def openai_usage(self) -> dict[str, Any]:
        """The worker's chat usage: the whole prompt counted as cached (its KV came along)."""
        return {"prompt_tokens": self.prompt, "total_tokens": self.prompt + self.count,
                "completion_tokens": self.count,
                "prompt_tokens_details": {"cached_tokens": self.prompt}}

    def responses_usage(self) -> dict[str, Any]:
        return {"input_tokens": self.prompt,
                "input_tokens_details": {"cached_tokens": self.prompt},
                "output_tokens": self.count, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt + self.count}

    def messages_usage(self, output_tokens: int) -> dict[str, Any]:
        return {"input_tokens": 0, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": self.prompt, "output_tokens": output_tokens}


def check_hand_off(body: dict[str, Any]) -> None:
    """A convention's hand-off, when the request has one, says it is the generation phase
    (TensorRT-LLM's ``request_type``, vLLM's ``do_remote_prefill``)."""
    for key, member, value in (("disaggregated_params", "request_type", "generation_only"),
                               ("kv_transfer_params", "do_remote_prefill", True)):
        params = body.get(key)
        if params is not None and (not isinstance(params, dict) or params.get(member) != value):
            raise BadRequest(f"{key}.{member} must be {dumps(value)} in a generation request",
                             key)


def prompt_ids(body: dict[str, Any]) -> bytes:
    """The prompt's ids, as int32 bytes, from any convention's form (``BadRequest`` for
    none of them)."""
    if "prompt_token_ids_b64" in body:
        try:
            return convert_ids(body["prompt_token_ids_b64"], "b64", "int32")
        except (TypeError, ValueError) as error:  # binascii.Error is a ValueError
            raise BadRequest(f"prompt_token_ids_b64 is not base64 of int32 ids: {error}",
                             "prompt_token_ids_b64") from None
    param, ids = "prompt_token_ids", body.get("prompt_token_ids")
    params = body.get("kv_transfer_params")
    if ids is None and isinstance(params, dict):  # vLLM: in the prefill's hand-off
        param, ids = "kv_transfer_params", params.get("prompt_token_ids")
    elif ids is None and isinstance(body.get("prompt"), list):  # a prompt of ids
        param, ids = "prompt", body["prompt"]
    try:
        if not isinstance(ids, list):
            raise TypeError(type(ids).__name__)
        return pack_ids(ids)
    except (TypeError, OverflowError):
        raise BadRequest(f"{param} must be a list of int32 integers", param) from None


def include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def chat_body(g: Generation) -> dict[str, Any]:
    return {"id": f"chatcmpl-{g.request_id}", "object": "chat.completion", "created": g.created,
            "model": MODEL, "choices": [{"index": 0, "message": {
                "role": "assistant", "content": g.text(), "refusal": None, "tool_calls": []},
                "logprobs": None, "finish_reason": "length", "stop_reason": None}],
            "system_fingerprint": g.fingerprint, "usage": g.openai_usage()}


def chat_stream(g: Generation) -> Iterator[bytes]:
    head = dumps({"id": f"chatcmpl-{g.request_id}", "object": "chat.completion.chunk",
                  "created": g.created, "model": MODEL,
                  "system_fingerprint": g.fingerprint})[:-1]
    usage = include_usage(g.body)
    tail = ',"usage":null}' if usage else "}"

    def event(choice: str) -> bytes:
        return f'data: {head},"choices":[{choice}]{tail}\n\n'.encode()

    yield event('{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                '"finish_reason":null}')
    for position, text in enumerate(g.texts()):
        finish = '"length"' if position == g.count - 1 else "null"
        yield event(f'{{"index":0,"delta":{dumps({"content": text})},"logprobs":null,'
                    f'"finish_reason":{finish}}}')
    if usage:
        yield f'data: {head},"choices":[],"usage":{dumps(g.openai_usage())}}}\n\n'.encode()
    yield b"data: [DONE]\n\n"


def completion_body(g: Generation) -> dict[str, Any]:
    return {"id": f"cmpl-{g.request_id}", "object": "text_completion", "created": g.created,
            "model": MODEL, "choices": [{"index": 0, "text": g.text(), "logprobs": None,
                                         "finish_reason": "length", "stop_reason": None}],
            "system_fingerprint": g.fingerprint, "usage": g.openai_usage()}


def completion_stream(g: Generation) -> Iterator[bytes]:
    head = dumps({"id": f"cmpl-{g.request_id}", "object": "text_completion",
                  "created": g.created, "model": MODEL,
                  "system_fingerprint": g.fingerprint})[:-1]
    usage = include_usage(g.body)
    tail = ',"usage":null}' if usage else "}"
    for position, text in enumerate(g.texts()):
        finish = '"length"' if position == g.count - 1 else "null"
        yield (f'data: {head},"choices":[{{"index":0,"text":{dumps(text)},"logprobs":null,'
               f'"finish_reason":{finish},"stop_reason":null}}]{tail}\n\n').encode()
    if usage:
        yield f'data: {head},"choices":[],"usage":{dumps(g.openai_usage())}}}\n\n'.encode()
    yield b"data: [DONE]\n\n"


def response_object(g: Generation, status: str, text: str | None) -> dict[str, Any]:
    output = [] if text is None else [message_item(g, text, "completed")]
    return {"id": f"resp_{g.request_id}", "created_at": g.created, "model": MODEL,
            "object": "response", "output": output, "parallel_tool_calls": True,
            "status": status, "tool_choice": "auto", "tools": [],
            "metadata": {"system_fingerprint": g.fingerprint},
            "usage": g.responses_usage() if status == "completed" else None}


def message_item(g: Generation, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [{"annotations": [], "text": text, "type": "output_text",
                                        "logprobs": None}]
    return {"id": f"msg_{g.request_id}", "content": content, "role": "assistant",
            "status": status, "type": "message"}


def responses_stream(g: Generation) -> Iterator[bytes]:
    sequence = iter(range(1 << 30))

    def event(kind: str, **fields: Any) -> bytes:
        data = dumps({**fields, "sequence_number": next(sequence), "type": kind})
        return f"event: {kind}\ndata: {data}\n\n".encode()

    item = f"msg_{g.request_id}"
    yield event("response.created", response=response_object(g, "in_progress", None))
    yield event("response.in_progress", response=response_object(g, "in_progress", None))
    yield event("response.output_item.added", item=message_item(g, None, "in_progress"),
                output_index=0)
    yield event("response.content_part.added", content_index=0, item_id=item, output_index=0,
                part={"annotations": [], "text": "", "type": "output_text", "logprobs": None})
    for text in g.texts():
        yield event("response.output_text.delta", content_index=0, delta=text, item_id=item,
                    logprobs=[], output_index=0)
    text = g.text()
    yield event("response.output_text.done", content_index=0, item_id=item, logprobs=[],
                output_index=0, text=text)
    yield event("response.content_part.done", content_index=0, item_id=item, output_index=0,
                part={"annotations": [], "text": text, "type": "output_text", "logprobs": None})
    yield event("response.output_item.done", item=message_item(g, text, "completed"),
                output_index=0)
    yield event("response.completed", response=response_object(g, "completed", text))


def message_object(g: Generation, text: str | None, output_tokens: int) -> dict[str, Any]:
    return {"id": f"msg_{g.request_id}", "type": "message", "role": "assistant",
            "model": MODEL, "content": [] if text is None else [{"type": "text", "text": text}],
            "stop_reason": None if text is None else "max_tokens", "stop_sequence": None,
            "usage": g.messages_usage(output_tokens),
            "container": None, "fingerprint": g.fingerprint}


def messages_stream(g: Generation) -> Iterator[bytes]:
    def event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {dumps({'type': kind, **fields})}\n\n".encode()

    yield event("message_start", message=message_object(g, None, 1))
    yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
    yield event("ping")
    for text in g.texts():
        yield event("content_block_delta", index=0, delta={"type": "text_delta", "text": text})
    yield event("content_block_stop", index=0)
    yield event("message_delta", delta={"stop_reason": "max_tokens", "stop_sequence": None},
                usage={"output_tokens": g.count})
    yield event("message_stop")


FORMATS: dict[str, tuple[Callable[[Generation], dict[str, Any]],
                         Callable[[Generation], Iterator[bytes]]]] = {
    "/v1/chat/completions": (chat_body, chat_stream),
    "/v1/completions": (completion_body, completion_stream),
    "/v1/responses": (lambda g: response_object(g, "completed", g.text()), responses_stream),
    "/v1/messages": (lambda g: message_object(g, g.text(), g.count), messages_stream),
}


async def generation_handler(request: web.Request) -> web.StreamResponse:
    body = await json_object(request)
    g = Generation(body)
    whole, stream = FORMATS[request.path]
    counts = request.app[GENERATIONS]
    counts["started"] = counts.get("started", 0) + 1
    wire = "msgpack" if is_msgpack(request) else "json"  # the body's format, for the tests
    counts[wire] = counts.get(wire, 0) + 1
    if body.get("stream") is not True:  # the APIs' default: one JSON body
        counts["finished"] = counts.get("finished", 0) + 1
        return web.Response(body=dumps(whole(g)).encode(), headers=JSON_HEADERS)
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    try:
        for number, event in enumerate(stream(g)):
            await response.write(event)
            if number % 16 == 15:
                await asyncio.sleep(0)  # let the other streams have their turn
    except ConnectionResetError:  # the proxy closed the stream: stop generating
        counts["aborted"] = counts.get("aborted", 0) + 1
        return response
    await response.write_eof()
    counts["finished"] = counts.get("finished", 0) + 1
    return response


def make_generation_app() -> web.Application:
    app = web.Application(client_max_size=1 << 26, middlewares=[bad_requests])
    app[GENERATIONS] = {}
    for path in FORMATS:
        app.router.add_post(path, generation_handler)
    return app


# --- running them ---------------------------------------------------------------------------


async def start_app(app: web.Application, port: int = 0) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on 127.0.0.1 (``port`` 0: an ephemeral one); return the runner and URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, LOOPBACK, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://{LOOPBACK}:{bound}"


async def until_signalled() -> None:
    """Wait for SIGINT or SIGTERM, so that the caller's clean-up (stopping workers) runs."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


async def serve_worker(role: str, port: int = 0) -> None:
    """Serve one worker until signalled; say ``READY <url>`` first."""
    runner, url = await start_app(make_context_app() if role == "context"
                                  else make_generation_app(), port)
    print(f"READY {url}", flush=True)
    await until_signalled()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The example's fake workers, on loopback.")
    parser.add_argument("--role", choices=["context", "generation"], required=True)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: ephemeral)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve_worker(args.role, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
