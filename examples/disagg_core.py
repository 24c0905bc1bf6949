"""What the two example orchestrators share, whatever serves them (no server framework here).

``disagg_proxy.py`` (aiohttp) and ``disagg_proxy_fastapi.py`` (FastAPI under uvicorn) do the
same job for each request, in the same steps:

1. read the client's request (a JSON object; ``read_request``);
2. ask the context worker to run the prompt (``ask_context``, over an aiohttp
   ``ClientSession``: both orchestrators use aiohttp's client, the lighter one per request);
3. **hand the prompt's token ids over**: take them from the context worker's answer and put
   them into the generation worker's request (``HANDOFFS``: the one place a token-id
   convention lives, each in tokcore's way and its baselines'; a new convention is a new
   ``Handoff``). The conventions (``--convention``): ``b64``, tokcore's base64 of int32 in
   JSON; ``trtllm``, TensorRT-LLM's (the context answer's ids a JSON int array, every request
   to a worker in MessagePack with ``X-TRTLLM-Msgpack: 1``); ``trtllm-ctxbytes``, the same
   with the context answer's ids in base64 (its ``gen_tokids_ctxbytes``); ``vllm``, vLLM's
   (the prefill answer's ``kv_transfer_params``, the ids a JSON int array inside, copied
   into the decode request);
4. relay the generation worker's answer to the client with the context worker's counts in
   its usage (each framework's adapter: ``tokcore.adapters``).

At every step a failure becomes an answer in the API's own error shape
(``tokcore.adapters.errors``): a worker's own error status passes through with its message,
a worker that cannot be reached or does not answer in time is a 502 or a 504 naming it.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import msgspec
from aiohttp import ClientError, ClientSession
from fake_workers import COMPACT, ENDPOINTS, JSON_HEADERS, MODEL

from tokcore import arelay_usage, convert_ids, del_member, find_member, rewrite_usage, set_member
from tokcore.adapters.answer import Completion
from tokcore.adapters.errors import error_body, failed_upstream, relayed_error

#: how the proxy does its job (``--mode``): tokcore's functions, or a baseline (below)
MODES = ("tokcore", "stack", "plain", "floor")
IDS_KEY = "prompt_token_ids_b64"
#: request members that are the proxy's own business, not the generation worker's
CONTEXT_FIELDS = ("messages", "prompt", "input", "system", "instructions")
#: the largest request body the proxy reads by default: what the workers accept
MAX_BODY_BYTES = 64 << 20
#: how long the proxy waits for a worker's answer to begin (a whole answer to arrive)
UPSTREAM_TIMEOUT = 300.0
CONTEXT_WORKER, GENERATION_WORKER = "the context worker", "the generation worker"


# --- 1. the client's request --------------------------------------------------------------------

class Failure(NamedTuple):
    """An answer in the API's error shape, for the framework to send."""

    status: int
    body: bytes
    headers: dict[str, str] = JSON_HEADERS


def api_of(path: str) -> str:
    """The API a path speaks (an unknown one under ``/v1/messages`` is Anthropic's)."""
    return ENDPOINTS.get(path) or ("messages" if path.startswith("/v1/messages") else "chat")


def proxy_error(api: str, status: int, message: str, *, param: str | None = None) -> Failure:
    """An error of the proxy's own, in the API's shape."""
    return Failure(status, error_body(api, status, message, param=param))


def bad_value(body: dict[str, Any]) -> str | None:
    """The member of a request the proxy refuses, if any (the workers' checks are theirs:
    a bad value in a member the proxy forwards is the worker's 400, passed through)."""
    count = body.get("fake_prompt_tokens")
    if count is not None and (type(count) is not int or count < 1):
        return "fake_prompt_tokens"
    return None


def read_request(raw: bytes, api: str) -> dict[str, Any] | Failure:
    """The request's JSON object, or the API's 400 for what is wrong with it."""
    try:
        body = json.loads(raw)
    except ValueError as error:  # UnicodeDecodeError included
        body = error
    if not isinstance(body, dict):
        return proxy_error(api, 400, f"the request body is not a JSON object ({body})")
    param = bad_value(body)
    if param is not None:
        return proxy_error(api, 400, f"{param} must be a positive integer, not "
                           f"{json.dumps(body[param])}", param=param)
    return body


def too_large(api: str, limit: int) -> Failure:
    return proxy_error(api, 413, f"the request body is over {limit} bytes")


def not_routed(path: str, status: int, allowed: str = "POST") -> Failure:
    """A path the proxy does not serve (404), or a method it does not take there (405), in
    the shape of the API the path belongs to."""
    api = api_of(path)
    if status == 405:
        failure = proxy_error(api, 405, f"{path} takes {allowed} requests")
        return failure._replace(headers={**JSON_HEADERS, "Allow": allowed})
    return proxy_error(api, 404, f"no such endpoint: {path} (this proxy serves "
                       f"{', '.join(ENDPOINTS)})")


# --- 3. the hand-off: the prompt's ids, from the context answer into the generation request ---

class Context(NamedTuple):
    """What the proxy takes from the context worker's answer: the counts, the ids (in the
    form its hand-off writes them into the generation request) and what else the
    convention carries from one worker to the other (TensorRT-LLM's
    ``disaggregated_params``)."""

    prompt_tokens: int
    cached_tokens: int
    ids: Any
    params: Any = None


class Handoff:
    """One way to move the prompt's token ids from the context worker's answer into the
    generation worker's request, in one convention (what the workers speak):
    ``context_request`` writes the context worker's request (its path, body and headers),
    ``read`` takes the counts and the ids from its answer (``ValueError``, ``KeyError`` or
    ``TypeError`` when they are not there), ``write`` makes the generation request's body
    (sent with ``headers``) from the client's request and what ``read`` took."""

    ids_format = "b64"
    headers = JSON_HEADERS

    def context_request(self, path: str, request: dict[str, Any]) -> tuple[str, bytes,
                                                                            dict[str, str]]:
        """The context call for a client's request to ``path``: the worker's path, the body
        and its headers (by default tokcore's ``/context`` call, in JSON)."""
        return "/context", dumps({**request, "ids_format": self.ids_format}), JSON_HEADERS

    def read(self, answer: bytes) -> Context:
        raise NotImplementedError

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        raise NotImplementedError


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=COMPACT).encode()


def counts(usage: dict[str, Any]) -> tuple[int, int]:
    """(prompt, cached) tokens of the context worker's chat usage."""
    return usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get(
        "cached_tokens", 0)


def parsed_without(answer: bytes, span: tuple[int, int]) -> Any:
    """The answer parsed with the value at ``span`` (the ids) read as ``null``: only the
    small rest of it becomes Python objects."""
    return json.loads(b"".join((answer[:span[0]], b"null", answer[span[1]:])))


def value_span(answer: bytes, key: str, first: bytes) -> tuple[int, int] | None:
    """The span of the top-level member ``key`` when its value starts with one of the bytes
    of ``first`` (None when it is absent or another kind of value, ``null`` say)."""
    span = find_member(answer, key)
    return span if span is not None and answer[span[0]] in first else None


# base64 of int32 in JSON: tokcore's own convention (today's ``--convention b64``)

class ZeroDecode(Handoff):
    """tokcore: the ids member's bytes (base64 of int32) found with ``find_member`` and
    copied into the request with ``set_member``: the 213 KB of a 40k-token prompt never
    become a ``str``, a list or a ``json`` value; only the small rest of the answer is
    parsed."""

    def read(self, answer: bytes) -> Context:
        span = find_member(answer, IDS_KEY)
        if span is None:
            raise ValueError(f"the context answer has no {IDS_KEY}")
        prompt, cached = counts(json.loads(del_member(answer, IDS_KEY))["usage"])
        return Context(prompt, cached, memoryview(answer)[span[0]:span[1]])

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        text = json.dumps(request, separators=COMPACT).encode()
        return set_member(text, IDS_KEY, context.ids, trusted=True)  # the bytes as they came


class JsonList(Handoff):
    """The usual way: the ids as a JSON int list, parsed and dumped again."""

    ids_format = "list"

    def read(self, answer: bytes) -> Context:
        message = json.loads(answer)
        return Context(*counts(message["usage"]), message["prompt_token_ids"])

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        return dumps({**request, "prompt_token_ids": context.ids})


class Sliced(Handoff):
    """The floor: the member and the counts found with ``bytes.find`` and sliced, the
    happy path only."""

    def read(self, answer: bytes) -> Context:
        key = b'"prompt_token_ids_b64":'
        start = answer.index(key) + len(key)
        return Context(floor_count(answer, b'"prompt_tokens":'),
                       floor_count(answer, b'"cached_tokens":'),
                       answer[start:answer.index(b'"', start + 1) + 1])

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        text = json.dumps(request, separators=COMPACT).encode()
        return text[:-1] + b',"prompt_token_ids_b64":' + context.ids + b"}"


def floor_count(answer: bytes, key: bytes) -> int:
    start = answer.index(key) + len(key)
    end = start
    while answer[end:end + 1].isdigit():
        end += 1
    return int(answer[start:end])


# TensorRT-LLM: the context answer in JSON (the ids a JSON int array, or base64 of int32 when
# the orchestrator opts in), every orchestrator -> worker request in MessagePack (msgspec)

MSGPACK_HEADERS = {"Content-Type": "application/json", "X-TRTLLM-Msgpack": "1"}
TRTLLM_IDS = ("prompt_token_ids", "prompt_token_ids_b64")
MSGPACK = msgspec.msgpack.Encoder()


class TrtllmHandoff(Handoff):
    """TensorRT-LLM's convention. The context request says ``request_type: context_only``
    (and ``return_prompt_token_ids_b64`` for ``ctx_bytes``); the answer is a completion with
    the ids at its top level, ``prompt_token_ids`` (a JSON int array) or
    ``prompt_token_ids_b64`` (a base64 string, which wins when both are there), and the hand-off's
    state in ``choices[0].disaggregated_params``; the generation request carries the ids
    (``prompt`` for the Completions API), and those params as ``generation_only`` with the
    context's usage (``ctx_usage``). Both requests go in MessagePack, flagged by the
    ``X-TRTLLM-Msgpack: 1`` header with ``Content-Type`` left ``application/json``."""

    headers = MSGPACK_HEADERS

    def __init__(self, ctx_bytes: bool = False) -> None:
        self.ctx_bytes = ctx_bytes

    def context_request(self, path: str, request: dict[str, Any]) -> tuple[str, bytes,
                                                                            dict[str, str]]:
        params = {"request_type": "context_only", "return_prompt_token_ids_b64": self.ctx_bytes}
        return path, MSGPACK.encode({**request, "stream": False,
                                     "disaggregated_params": params}), MSGPACK_HEADERS

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        key, ids = context.ids
        if key == "prompt_token_ids" and path == "/v1/completions":
            key = "prompt"  # TensorRT-LLM's completions take the ids as the prompt
        return MSGPACK.encode({**request, key: ids, "disaggregated_params": context.params})


def generation_params(message: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The context answer's usage and the generation request's ``disaggregated_params``."""
    usage = message["usage"]
    params = message["choices"][0]["disaggregated_params"]
    if not isinstance(usage, dict) or not isinstance(params, dict):
        raise TypeError("usage and disaggregated_params must be objects")
    return usage, {**params, "request_type": "generation_only", "ctx_usage": usage}


class TrtllmStack(TrtllmHandoff):
    """TensorRT-LLM's orchestrator's own way: the whole answer parsed with ``json``, the ids
    a Python list (or ``str``) put into the request, the request encoded by msgspec."""

    def read(self, answer: bytes) -> Context:
        message = json.loads(answer)
        if not isinstance(message, dict):
            raise TypeError("the context answer is not a JSON object")
        key = next((k for k in reversed(TRTLLM_IDS) if message.get(k) is not None), None)
        ids = message.get(key) if key else None
        if not isinstance(ids, list if key == "prompt_token_ids" else str):
            raise ValueError("the context answer has no prompt_token_ids")
        usage, params = generation_params(message)
        return Context(*counts(usage), (key, ids), params)


class TrtllmZeroDecode(TrtllmHandoff):
    """tokcore: the ids' span found with ``find_member``, the JSON array converted straight
    into MessagePack's bytes (``convert_ids``, no list) and embedded as they are
    (``msgspec.Raw``); a base64 string goes in as a MessagePack ``str`` of the same bytes.
    Only the small rest of the answer is parsed. The body is the stack's, byte for byte."""

    def read(self, answer: bytes) -> Context:
        for key in reversed(TRTLLM_IDS):  # the base64 string wins, as the stack has it
            span = value_span(answer, key, b'"' if key.endswith("b64") else b"[")
            if span is not None:
                break
        else:
            raise ValueError("the context answer has no prompt_token_ids")
        ids = (msgpack_str(answer, *span) if key.endswith("b64")
               else convert_ids(memoryview(answer)[span[0]:span[1]], "json", "msgpack"))
        usage, params = generation_params(parsed_without(answer, span))
        return Context(*counts(usage), (key, msgspec.Raw(ids)), params)


def msgpack_str(data: bytes, start: int, end: int) -> bytes:
    """The JSON string at ``data[start:end]`` (its quotes included) as a MessagePack
    ``str``, the bytes msgspec writes for it: base64 never needs a JSON escape, so the
    string's bytes go in as they are."""
    if data.find(b"\\", start, end) < 0:
        text: bytes | memoryview = memoryview(data)[start + 1:end - 1]
    else:  # an escaped character after all: decode the string the slow way
        text = json.loads(data[start:end]).encode()
    size = len(text)
    head = (bytes((0xA0 | size,)) if size < 32 else b"\xd9" + bytes((size,)) if size < 256
            else b"\xda" + size.to_bytes(2, "big") if size < 1 << 16
            else b"\xdb" + size.to_bytes(4, "big"))
    return head + text


# vLLM: the prefill answer's kv_transfer_params (the ids a JSON int array inside it) go into
# the decode request as they are, JSON both ways

#: what vLLM's disaggregated proxy asks the prefill worker for
PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}
KV_KEY = "kv_transfer_params"


class VllmHandoff(Handoff):
    """vLLM's convention: the prefill request asks for a remote decode (``max_tokens`` 1,
    not streamed); the prefill answer's ``kv_transfer_params`` (the KV's whereabouts and the
    prompt's ``prompt_token_ids``, a JSON int array) go into the decode request whole."""

    def context_request(self, path: str, request: dict[str, Any]) -> tuple[str, bytes,
                                                                            dict[str, str]]:
        return path, dumps({**request, KV_KEY: PREFILL_PARAMS, "stream": False,
                            "max_tokens": 1}), JSON_HEADERS


class VllmStack(VllmHandoff):
    """vLLM's proxy's own way: the answer parsed with ``json``, its ``kv_transfer_params``
    put into the request dict, the request dumped again."""

    def read(self, answer: bytes) -> Context:
        message = json.loads(answer)
        params = message[KV_KEY]
        if not isinstance(params, dict):
            raise TypeError(f"{KV_KEY} must be an object")
        return Context(*counts(message["usage"]), params)

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        return dumps({**request, KV_KEY: context.ids})


class VllmZeroDecode(VllmHandoff):
    """tokcore: the ``kv_transfer_params`` object's bytes found with ``find_member`` and
    copied into the request with ``set_member``: its ids are never parsed. The body is the
    stack's, byte for byte, when the worker writes compact JSON."""

    def read(self, answer: bytes) -> Context:
        span = value_span(answer, KV_KEY, b"{")
        if span is None:
            raise ValueError(f"the context answer has no {KV_KEY} object")
        return Context(*counts(parsed_without(answer, span)["usage"]),
                       memoryview(answer)[span[0]:span[1]])

    def write(self, path: str, request: dict[str, Any], context: Context) -> bytes:
        return set_member(dumps(request), KV_KEY, context.ids, trusted=True)


#: each convention's hand-offs, by mode: ``tokcore`` (tokcore's functions) and the baselines:
#: ``stack`` (the stack's own orchestrator code: json, msgspec), and for tokcore's own
#: convention ``plain`` (ids as a JSON int list, json on every event) and ``floor``
HANDOFFS: dict[str, dict[str, Handoff]] = {
    "b64": {"tokcore": ZeroDecode(), "plain": JsonList(), "floor": Sliced()},
    "trtllm": {"tokcore": TrtllmZeroDecode(), "stack": TrtllmStack()},
    "trtllm-ctxbytes": {"tokcore": TrtllmZeroDecode(ctx_bytes=True),
                        "stack": TrtllmStack(ctx_bytes=True)},
    "vllm": {"tokcore": VllmZeroDecode(), "stack": VllmStack()},
}
CONVENTIONS = tuple(HANDOFFS)
#: the modes whose answer goes through tokcore's adapters (the others: relay_baseline)
ADAPTER_MODES = ("tokcore", "stack")


def handoff(convention: str, mode: str) -> Handoff:
    """The hand-off of ``convention`` in ``mode`` (``ValueError`` for a pair that has none)."""
    if convention not in HANDOFFS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, not {convention!r}")
    modes = HANDOFFS[convention]
    if mode not in modes:
        raise ValueError(f"the {convention} convention's modes are {tuple(modes)}, "
                         f"not {mode!r}")
    return modes[mode]


# --- 2. the context worker ------------------------------------------------------------------------

@dataclass
class ProxyState:
    """One orchestrator's settings, client and counters (its ``/stats``)."""

    context_url: str
    generation_url: str
    mode: str
    framework: str
    upstream_timeout: float = UPSTREAM_TIMEOUT
    convention: str = "b64"
    session: ClientSession | None = None
    requests: int = 0
    disconnects: int = 0
    errors: dict[int, int] = field(default_factory=dict)

    @property
    def handoff(self) -> Handoff:
        """The hand-off of this proxy's convention and mode."""
        return HANDOFFS[self.convention][self.mode]

    def next_request(self) -> str:
        """A new request's id (the workers see it in both calls)."""
        self.requests += 1
        return f"{os.getpid()}-{self.requests}"

    def count_error(self, status: int) -> None:
        self.errors[status] = self.errors.get(status, 0) + 1

    def completed(self, completion: Completion) -> None:
        """The adapters' completion hook: a relayed answer's end, counted."""
        if completion.client_gone:
            self.disconnects += 1
        if completion.status >= 400:
            self.count_error(completion.status)

    def stats(self) -> dict[str, Any]:
        """This process's CPU seconds so far, for bench_e2e.py, and the counters."""
        times = os.times()
        return {"cpu_seconds": times.user + times.system, "user_seconds": times.user,
                "system_seconds": times.system, "requests": self.requests, "mode": self.mode,
                "convention": self.convention, "framework": self.framework,
                "disconnects": self.disconnects, "errors": self.errors, "pid": os.getpid()}


async def ask_context(state: ProxyState, path: str, body: dict[str, Any],
                      request_id: str) -> Context | Failure:
    """Step 2: the context worker's counts and ids for the client's ``body`` (sent to
    ``path``), or the API's error for what went wrong (the worker's own error status passed
    through)."""
    assert state.session is not None
    api = api_of(path)
    handoff = state.handoff
    request = {"request_id": request_id,
               "fake_prompt_tokens": body.get("fake_prompt_tokens"),
               **{k: body[k] for k in CONTEXT_FIELDS if k in body}}
    where, data, headers = handoff.context_request(path, request)
    try:
        async with asyncio.timeout(state.upstream_timeout):
            async with state.session.post(f"{state.context_url}{where}", data=data,
                                          headers=headers) as answer:
                status, raw = answer.status, await answer.read()
                retry_after = answer.headers.get("Retry-After")
    except (TimeoutError, ClientError, OSError) as error:
        return Failure(*failed_upstream(api, error, CONTEXT_WORKER))
    if status != 200:
        code, error = relayed_error(api, status, raw, CONTEXT_WORKER)
        headers = JSON_HEADERS if retry_after is None else {**JSON_HEADERS,
                                                            "Retry-After": retry_after}
        return Failure(code, error, headers)
    try:
        return handoff.read(raw)
    except (ValueError, LookupError, TypeError) as error:  # not JSON, or the ids not there
        return proxy_error(api, 502, f"{CONTEXT_WORKER}'s answer has no ids or usage "
                           f"({type(error).__name__})")


def generation_request(state: ProxyState, path: str, body: dict[str, Any], context: Context,
                       request_id: str) -> bytes:
    """Step 3's other half: the client's request (to ``path``) as the generation worker
    gets it, with the ids in place of the prompt, in the proxy's convention (sent with
    ``state.handoff.headers``)."""
    forwarded = {k: v for k, v in body.items()
                 if k not in CONTEXT_FIELDS and k != "fake_prompt_tokens"}
    return state.handoff.write(path, {"request_id": request_id, **forwarded}, context)


# --- 4. the relays of the baselines (tokcore's is the adapters') --------------------------------

def patch_usage_plain(message: dict[str, Any], api: str, prompt_tokens: int,
                      cached_tokens: int) -> None:
    """The usual way to fix a parsed message's usage, per API (a no-op when it has none)."""
    nested = message.get("response" if api == "responses" else "message")
    usage = message.get("usage") or (nested.get("usage") if isinstance(nested, dict) else None)
    if not isinstance(usage, dict):
        return
    if api == "messages":
        usage["input_tokens"] = prompt_tokens - cached_tokens
        usage["cache_read_input_tokens"] = cached_tokens
        return
    prompt, output, details = (("input_tokens", "output_tokens", "input_tokens_details")
                               if api == "responses" else
                               ("prompt_tokens", "completion_tokens", "prompt_tokens_details"))
    usage[prompt] = prompt_tokens
    usage["total_tokens"] = prompt_tokens + (usage.get(output) or 0)
    usage[details] = {**(usage.get(details) or {}), "cached_tokens": cached_tokens}


def patch_event_plain(event: bytes, api: str, prompt_tokens: int, cached_tokens: int) -> bytes:
    """One event the usual way: its data line parsed, patched and written again."""
    lines = event.split(b"\n")
    for number, line in enumerate(lines):
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            message = json.loads(line[5:])
            patch_usage_plain(message, api, prompt_tokens, cached_tokens)
            lines[number] = b"data: " + json.dumps(message, separators=COMPACT).encode()
    return b"\n".join(lines)


async def relay_plain(chunks: AsyncIterator[bytes], api: str, prompt_tokens: int,
                      cached_tokens: int) -> AsyncIterator[bytes]:
    """The usual way: split events, ``json.loads`` each, patch usage, serialise again."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *events, pending = pending.split(b"\n\n")
        if events:
            yield b"".join(patch_event_plain(event, api, prompt_tokens, cached_tokens) + b"\n\n"
                           for event in events)
    if pending:
        yield pending


async def relay_floor(chunks: AsyncIterator[bytes], api: str, prompt_tokens: int,
                      cached_tokens: int) -> AsyncIterator[bytes]:
    """The floor: the stream as it came."""
    async for chunk in chunks:
        yield chunk


async def relay_tokcore(chunks: AsyncIterator[bytes], api: str, prompt_tokens: int,
                        cached_tokens: int) -> AsyncIterator[bytes]:
    """tokcore's relay as a plain generator (the orchestrators use the adapters instead)."""
    async for out in arelay_usage(chunks, prompt_tokens, cached_tokens, api=api):
        yield out


RELAYS = {"tokcore": relay_tokcore, "plain": relay_plain, "floor": relay_floor}


def whole_answer(mode: str, answer: bytes, api: str, prompt_tokens: int,
                 cached_tokens: int) -> bytes:
    """A non-streaming answer relayed in ``mode``."""
    if mode == "tokcore":
        return rewrite_usage(answer, prompt_tokens, cached_tokens, api=api)
    if mode == "plain":
        message = json.loads(answer)
        patch_usage_plain(message, api, prompt_tokens, cached_tokens)
        return json.dumps(message, separators=COMPACT).encode()
    return answer


# --- running ----------------------------------------------------------------------------------

def check_loopback(url: str) -> None:
    """Refuse any URL that is not http on a loopback address: these examples stay local."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "http" or not loopback:
        raise ValueError(f"{url!r} is not an http URL on a loopback address")


WORKERS = Path(__file__).resolve().with_name("fake_workers.py")


def spawn(script: Path | str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``script`` with ``args`` in its own process; wait for its ``READY <url>`` line."""
    process = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"{Path(script).name} {' '.join(args)} did not start "
                           f"(said {line!r})")
    return process, line.split()[1]


def stop_workers(workers: list[subprocess.Popen[str]]) -> None:
    """End the workers' processes: asked to, and killed if one is still running after 10 s
    (a loaded machine), so the demo never exits with a worker left behind or an error."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


async def start_workers() -> tuple[list[subprocess.Popen[str]], str, str]:
    """Both fake workers, each in its own process: the processes and the two URLs."""
    (context, context_url), (generation, generation_url) = await asyncio.gather(
        asyncio.to_thread(spawn, WORKERS, "--role", "context"),
        asyncio.to_thread(spawn, WORKERS, "--role", "generation"))
    return [context, generation], context_url, generation_url


async def stream_chat(url: str, prompt: str, max_tokens: int,
                      fake_prompt_tokens: int | None = None) -> list[dict[str, Any]]:
    """Send one streaming chat request; return the decoded events (the demo's client)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True},
            "fake_prompt_tokens": fake_prompt_tokens}
    async with ClientSession() as session, session.post(f"{url}/v1/chat/completions",
                                                        json=body) as response:
        response.raise_for_status()
        text = (await response.read()).decode()
    events = [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-1:]
    return [json.loads(e) for e in events[:-1]]


async def demo(url: str, mode: str, convention: str = "b64") -> None:
    """One streamed chat with a 40k-token prompt, and what its client saw."""
    events = await stream_chat(url, "Tell me about int32 token ids.", 12, 40_000)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in events if c["choices"])
    print(f"mode: {mode}")
    print(f"convention: {convention}")
    print(f"streamed {len(events)} events; text: {text!r}")
    print(f"usage seen by the client: {json.dumps(events[-1]['usage'])}")


def proxy_arguments(parser: argparse.ArgumentParser, roles: list[str]) -> None:
    """The command-line options both orchestrators take (``roles``: their ``--role``s)."""
    parser.add_argument("--role", choices=roles, default="all",
                        help="all (default): start both workers, serve the proxy")
    parser.add_argument("--convention", choices=CONVENTIONS, default="b64",
                        help="how the ids go from one worker to the other: b64 (default; "
                             "tokcore's base64 of int32 in JSON), trtllm (TensorRT-LLM: a JSON "
                             "int array in the context answer, the generation request in "
                             "MessagePack), trtllm-ctxbytes (the same, the context answer's "
                             "ids in base64), vllm (the prefill answer's kv_transfer_params, "
                             "ids inside, into the decode request)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: ephemeral)")
    parser.add_argument("--context-url", help="context worker (--role proxy), loopback only")
    parser.add_argument("--generation-url", help="generation worker (--role proxy), loopback only")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                        help="the largest request body (default 64 MiB; a 413 beyond)")
    parser.add_argument("--upstream-timeout", type=float, default=UPSTREAM_TIMEOUT,
                        help="seconds for a worker's answer to begin (a 504 beyond)")
    parser.add_argument("--demo", action="store_true",
                        help="with --role all: send one request, print what the client saw, exit")


def curl_hint(url: str, name: str) -> str:
    """The command the orchestrators print to try them: a streamed chat that asks for its
    usage, the event tokcore rewrites."""
    return (f"{name} on {url}; try:\n"
            f"  curl -N {url}/v1/chat/completions -d '{{\"messages\": [{{\"role\": "
            f"\"user\", \"content\": \"hi there\"}}], \"max_tokens\": 5, \"stream\": true, "
            f"\"stream_options\": {{\"include_usage\": true}}}}'")
