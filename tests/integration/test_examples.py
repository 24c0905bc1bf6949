"""The example orchestrators end to end, on loopback, driven by the clients users have.

examples/disagg_proxy.py (aiohttp, in its three modes), examples/disagg_proxy_fastapi.py
(FastAPI under uvicorn: ``fastapi`` below) and both fake workers run in a background event
loop; the official ``openai`` and ``anthropic`` clients, ``httpx`` + ``httpx-sse`` and aiohttp
talk to them as they would to a real server. What the client sees is checked against the
workers' own definitions: every token in order, the ids that reached the generation worker
equal to those the context worker made (the worker reports their CRC), and the usage
carrying the context worker's counts in each API's field names. Needs the ``test`` group.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import httpx
import openai
import pytest
from _clients import kept
from httpx_sse import connect_sse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "disagg_proxy.py"
FASTAPI_EXAMPLE = ROOT / "examples" / "disagg_proxy_fastapi.py"
PROMPT = "What is an int32 token id?"
#: the proxies in tokcore's mode: the aiohttp one and the FastAPI one
TOKCORE = ["tokcore", "fastapi"]
#: the aiohttp proxies of the stacks' conventions: name -> (convention, mode)
CONVENTION_PROXIES = {f"{convention}{'' if mode == 'tokcore' else '-' + mode}": (convention, mode)
                      for convention in ("trtllm", "trtllm-ctxbytes", "vllm")
                      for mode in ("tokcore", "stack")}
#: the FastAPI proxies of the stacks' conventions (tokcore's mode)
FASTAPI_CONVENTIONS = {"fastapi-trtllm": "trtllm", "fastapi-vllm": "vllm"}


def load_example(path: Path = EXAMPLE) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = load_example()
fastapi_example = load_example(FASTAPI_EXAMPLE)
core = sys.modules["disagg_core"]  # the hand-offs, which both examples import


class Stack:
    """Both workers, one aiohttp proxy per mode and the FastAPI one, served from a
    background event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stops: list[Any] = []
        self.generation = example.make_generation_app()
        self.context_url = self.serve(example.make_context_app())
        self.generation_url = self.serve(self.generation)
        self.proxies = {mode: example.make_proxy_app(self.context_url, self.generation_url,
                                                     mode=mode)
                        for mode in example.HANDOFFS["b64"]}
        self.proxies.update({name: example.make_proxy_app(
            self.context_url, self.generation_url, convention=convention, mode=mode)
            for name, (convention, mode) in CONVENTION_PROXIES.items()})
        self.urls = {mode: self.serve(app) for mode, app in self.proxies.items()}
        self.fastapi = fastapi_example.make_proxy_app(self.context_url, self.generation_url)
        self.urls["fastapi"] = self.serve(self.fastapi)
        for name, convention in FASTAPI_CONVENTIONS.items():
            self.urls[name] = self.serve(fastapi_example.make_proxy_app(
                self.context_url, self.generation_url, convention=convention))

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    def serve(self, app: Any) -> str:
        """Serve an aiohttp app, or an ASGI one under uvicorn; its URL."""
        if isinstance(app, example.web.Application):
            runner, url = self.run(example.start_app(app))
            self.stops.append(runner.cleanup)
            return str(url)
        server, task, url = self.run(fastapi_example.serve(app))

        async def stop() -> None:
            server.should_exit = True
            await task

        self.stops.append(stop)
        return str(url)

    def counts(self) -> dict[str, int]:
        return dict(self.generation[example.GENERATIONS])

    def state(self, mode: str) -> Any:
        if mode == "fastapi":
            return self.fastapi.state.proxy
        return self.proxies[mode][example.STATE]

    def close(self) -> None:
        for stop in reversed(self.stops):
            self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    running = Stack()
    yield running
    running.close()


def prompt_ids(prompt_tokens: int, text: str = PROMPT) -> tuple[int, ...]:
    return example.fake_prompt_ids(text, prompt_tokens)  # type: ignore[no-any-return]


def texts(count: int) -> list[str]:
    return [example.token_text(i) for i in range(count)]


def counts(prompt_tokens: int) -> tuple[int, int]:
    return prompt_tokens, example.cached_prompt_tokens(prompt_tokens)


# the clients a test made, closed when it ends: a client's pool otherwise holds its sockets
# until the collector finds it, in some later test (an unclosed-socket ResourceWarning)
def openai_client(stack: Stack, mode: str = "tokcore") -> openai.OpenAI:
    return openai_at(stack.urls[mode])


# --- the openai client: chat, completions, responses ---------------------------------------

@pytest.mark.parametrize("mode", ["tokcore", "plain", "fastapi"])
@pytest.mark.parametrize("with_usage", [True, False])
def test_openai_chat_stream(stack: Stack, mode: str, with_usage: bool) -> None:
    prompt_tokens, max_tokens = 3000, 20
    options = {"stream_options": {"include_usage": True}} if with_usage else {}
    chunks = list(openai_client(stack, mode).chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens,
        stream=True, extra_body={"fake_prompt_tokens": prompt_tokens}, **options))
    role, *tokens = [c for c in chunks if c.choices]
    assert role.choices[0].delta.role == "assistant"
    assert [c.choices[0].delta.content for c in tokens] == texts(max_tokens)  # all, in order
    assert {c.system_fingerprint for c in chunks} == {example.ids_fingerprint(
        prompt_ids(prompt_tokens))}
    usage_chunks = [c for c in chunks if c.usage is not None]
    if not with_usage:  # only when asked for, as the API says
        assert usage_chunks == [] and len(chunks) == max_tokens + 1
        return
    (last,) = usage_chunks
    assert last is chunks[-1] and last.choices == []
    prompt, cached = counts(prompt_tokens)
    assert last.usage is not None and last.usage.prompt_tokens == prompt
    assert last.usage.completion_tokens == max_tokens
    assert last.usage.total_tokens == prompt + max_tokens
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == cached


@pytest.mark.parametrize("mode", ["tokcore", "plain", "fastapi"])
def test_openai_chat_whole(stack: Stack, mode: str) -> None:
    prompt_tokens, max_tokens = 2000, 13
    answer = openai_client(stack, mode).chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens,
        extra_body={"fake_prompt_tokens": prompt_tokens})  # no stream key: a whole answer
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.content == "".join(texts(max_tokens))
    prompt, cached = counts(prompt_tokens)
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens,
            answer.usage.total_tokens) == (prompt, max_tokens, prompt + max_tokens)
    assert answer.usage.prompt_tokens_details is not None
    assert answer.usage.prompt_tokens_details.cached_tokens == cached


@pytest.mark.parametrize("mode", TOKCORE)
@pytest.mark.parametrize("with_usage", [True, False])
def test_openai_completions(stack: Stack, mode: str, with_usage: bool) -> None:
    prompt_tokens, max_tokens = 1500, 17
    client = openai_client(stack, mode)
    options = {"stream_options": {"include_usage": True}} if with_usage else {}
    chunks = list(client.completions.create(
        model="m", prompt=PROMPT, max_tokens=max_tokens, stream=True,
        extra_body={"fake_prompt_tokens": prompt_tokens}, **options))
    assert [c.choices[0].text for c in chunks if c.choices] == texts(max_tokens)
    prompt, cached = counts(prompt_tokens)
    usages = [c.usage for c in chunks if c.usage is not None]
    assert len(usages) == with_usage
    for usage in usages:
        assert (usage.prompt_tokens, usage.total_tokens) == (prompt, prompt + max_tokens)
        assert usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == cached
    answer = client.completions.create(model="m", prompt=PROMPT, max_tokens=max_tokens,
                                       extra_body={"fake_prompt_tokens": prompt_tokens})
    assert answer.choices[0].text == "".join(texts(max_tokens))
    assert answer.usage is not None and answer.usage.prompt_tokens == prompt
    assert answer.usage.total_tokens == prompt + max_tokens


@pytest.mark.parametrize("mode", ["tokcore", "plain", "fastapi"])
def test_openai_responses(stack: Stack, mode: str) -> None:
    prompt_tokens, max_tokens = 4000, 15
    client = openai_client(stack, mode)
    events = list(client.responses.create(model="m", input=PROMPT, max_output_tokens=max_tokens,
                                          stream=True,
                                          extra_body={"fake_prompt_tokens": prompt_tokens}))
    assert [e.delta for e in events if e.type == "response.output_text.delta"] == \
        texts(max_tokens)
    completed = events[-1]
    assert completed.type == "response.completed"
    prompt, cached = counts(prompt_tokens)
    for response in (completed.response, client.responses.create(
            model="m", input=[{"role": "user", "content": PROMPT}],
            max_output_tokens=max_tokens, extra_body={"fake_prompt_tokens": prompt_tokens})):
        assert response.output_text == "".join(texts(max_tokens))
        usage = response.usage
        assert usage is not None
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
            prompt, max_tokens, prompt + max_tokens)
        assert usage.input_tokens_details.cached_tokens == cached
        assert response.metadata == {"system_fingerprint": example.ids_fingerprint(
            prompt_ids(prompt_tokens))}


# --- the anthropic client: messages ----------------------------------------------------------

@pytest.mark.parametrize("mode", ["tokcore", "plain", "fastapi"])
def test_anthropic_messages(stack: Stack, mode: str) -> None:
    prompt_tokens, max_tokens = 5000, 12
    client = anthropic_at(stack.urls[mode])
    request: dict[str, Any] = {"model": "m", "max_tokens": max_tokens,
                               "messages": [{"role": "user", "content": PROMPT}],
                               "extra_body": {"fake_prompt_tokens": prompt_tokens}}
    prompt, cached = counts(prompt_tokens)
    with client.messages.stream(**request) as stream:
        assert list(stream.text_stream) == texts(max_tokens)
        final = stream.get_final_message()
    answer = client.messages.create(**request)
    for message in (final, answer):
        assert message.content[0].text == "".join(texts(max_tokens))  # type: ignore[union-attr]
        usage = message.usage
        # the API's prompt is the sum of its parts: the cache read is the context's count
        assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (
            prompt - cached, cached, max_tokens)
        assert usage.cache_creation_input_tokens == 0
    events = list(client.messages.create(stream=True, **request))
    start = events[0]
    assert start.type == "message_start"
    assert (start.message.usage.input_tokens, start.message.usage.cache_read_input_tokens) == (
        prompt - cached, cached)


# --- the stacks' conventions: TensorRT-LLM's, vLLM's ------------------------------------------

#: the body format each convention's generation request has
WIRE = {"trtllm": "msgpack", "trtllm-ctxbytes": "msgpack", "vllm": "json"}


@pytest.mark.parametrize("name", [*CONVENTION_PROXIES, *FASTAPI_CONVENTIONS])
def test_each_convention_serves_the_openai_client(stack: Stack, name: str) -> None:
    """The ids reach the generation worker (its fingerprint is theirs) in the convention's
    body format, and the client's usage is exact: a stream of chat, a whole completion
    (TensorRT-LLM's ids go in its ``prompt`` there)."""
    convention = FASTAPI_CONVENTIONS.get(name) or CONVENTION_PROXIES[name][0]
    prompt_tokens, max_tokens = 2500, 9
    client = openai_client(stack, name)
    before = stack.counts().get(WIRE[convention], 0)
    chunks = list(client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens,
        stream=True, stream_options={"include_usage": True},
        extra_body={"fake_prompt_tokens": prompt_tokens}))
    answer = client.completions.create(model="m", prompt=PROMPT, max_tokens=max_tokens,
                                       extra_body={"fake_prompt_tokens": prompt_tokens})
    assert stack.counts().get(WIRE[convention], 0) == before + 2
    fingerprint = example.ids_fingerprint(prompt_ids(prompt_tokens))
    assert {c.system_fingerprint for c in chunks} == {fingerprint} == {
        answer.system_fingerprint}
    assert [c.choices[0].delta.content for c in chunks[1:-1]] == texts(max_tokens)
    assert answer.choices[0].text == "".join(texts(max_tokens))
    prompt, cached = counts(prompt_tokens)
    for usage in (chunks[-1].usage, answer.usage):
        assert usage is not None
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
            prompt, max_tokens, prompt + max_tokens)
        assert usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == cached


def context_answer(convention: str, path: str, count: int, b64: bool = False) -> bytes:
    """The fake context worker's answer in ``convention`` (as it writes it)."""
    fake = sys.modules["fake_workers"]
    body = {"request_id": "r-7"}
    if convention == "vllm":
        return fake.vllm_answer(body, PROMPT, count)  # type: ignore[no-any-return]
    return fake.trtllm_answer(  # type: ignore[no-any-return]
        path, body, PROMPT, count, {"return_prompt_token_ids_b64": b64})


REQUEST = {"request_id": "r-7", "model": "m", "max_tokens": 5, "stream": True,
           "stream_options": {"include_usage": True}}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("b64", [False, True], ids=["array", "ctxbytes"])
@pytest.mark.parametrize("convention", ["trtllm", "trtllm-ctxbytes"])
def test_the_trtllm_generation_request_is_the_stacks_body(convention: str, b64: bool,
                                                          path: str) -> None:
    """tokcore's MessagePack body (the span converted, embedded with msgspec.Raw) is the
    bytes msgspec writes for the stack's own request dict, and decodes to that dict: the
    ids as a list (or TensorRT-LLM's ``prompt`` for completions), the context's hand-off as
    ``generation_only`` with its usage. Whichever form the context answered in (the base64
    string wins, as TensorRT-LLM's does), whichever the proxy asked for."""
    import msgspec

    ids = prompt_ids(3000)
    answer = context_answer("trtllm", path, 3000, b64)
    handoffs = core.HANDOFFS[convention]
    bodies = [handoffs[mode].write(path, REQUEST, handoffs[mode].read(answer))
              for mode in ("tokcore", "stack")]
    assert bodies[0] == bodies[1]
    sent = msgspec.msgpack.decode(bodies[0])
    message = json.loads(answer)
    key = "prompt_token_ids_b64" if b64 else (
        "prompt" if path == "/v1/completions" else "prompt_token_ids")
    assert sent == {**REQUEST, key: message["prompt_token_ids_b64"] if b64 else list(ids),
                    "disaggregated_params": {
                        **message["choices"][0]["disaggregated_params"],
                        "request_type": "generation_only", "ctx_usage": message["usage"]}}
    assert handoffs["tokcore"].headers == {"Content-Type": "application/json",
                                           "X-TRTLLM-Msgpack": "1"}


def test_the_base64_ids_win_in_both_ways() -> None:
    """An answer with both forms (TensorRT-LLM's servers send one): the base64 string goes
    on, in tokcore's way as in the stack's."""
    import msgspec

    ids = prompt_ids(100)
    answer = context_answer("trtllm", "/v1/chat/completions", 100, b64=True)
    answer = answer.replace(b'"prompt_token_ids":null', b'"prompt_token_ids":' + json.dumps(
        list(ids), separators=(",", ":")).encode())
    for convention in ("trtllm", "trtllm-ctxbytes"):
        handoffs = core.HANDOFFS[convention]
        bodies = {mode: handoffs[mode].write("/v1/chat/completions", REQUEST,
                                             handoffs[mode].read(answer))
                  for mode in ("tokcore", "stack")}
        assert bodies["tokcore"] == bodies["stack"]
        assert "prompt_token_ids" not in msgspec.msgpack.decode(bodies["stack"])


def test_the_vllm_decode_request_is_the_stacks_body() -> None:
    """tokcore copies the prefill answer's kv_transfer_params as bytes; the body is the one
    json.dumps writes for the stack's own dict, the ids inside as the prefill wrote them."""
    ids = prompt_ids(3000)
    answer = context_answer("vllm", "/v1/chat/completions", 3000)
    handoffs = core.HANDOFFS["vllm"]
    bodies = [handoffs[mode].write("/v1/chat/completions", REQUEST,
                                   handoffs[mode].read(answer))
              for mode in ("tokcore", "stack")]
    assert bodies[0] == bodies[1]
    sent = json.loads(bodies[0])
    assert sent["kv_transfer_params"] == json.loads(answer)["kv_transfer_params"]
    assert sent["kv_transfer_params"]["prompt_token_ids"] == list(ids)


@pytest.mark.parametrize("size", [0, 31, 32, 255, 256, 65535, 65536])
def test_a_json_string_goes_into_msgpack_as_msgspec_writes_it(size: int) -> None:
    import msgspec

    text = ("AQID" * (size // 4 + 1))[:size]
    data = b'{"k":"' + text.encode() + b'"}'
    assert core.msgpack_str(data, 5, len(data) - 1) == msgspec.msgpack.encode(text)
    escaped = json.dumps({"k": "a\\b\u00e9/" + text}).encode()  # escapes: the slow way
    assert core.msgpack_str(escaped, 6, len(escaped) - 1) == msgspec.msgpack.encode(
        "a\\b\u00e9/" + text)


@pytest.mark.parametrize("name", [*CONVENTION_PROXIES, "tokcore"])
def test_a_context_answer_without_the_ids_is_a_502(stack: Stack, failing: Failing,
                                                   name: str, no_traceback: None) -> None:
    convention, mode = CONVENTION_PROXIES.get(name, ("b64", "tokcore"))
    for how in ("noids", "notjson"):
        url = edge_proxy(stack, context=f"{failing.url}/{how}", convention=convention,
                         mode=mode)
        with pytest.raises(openai.InternalServerError) as raised:
            chat(url)
        assert raised.value.status_code == 502
        assert "the context worker's answer has no ids" in raised.value.message


def test_a_convention_and_a_mode_must_go_together() -> None:
    for convention, mode in (("vllm", "plain"), ("trtllm", "floor"), ("b64", "stack"),
                             ("sglang", "tokcore")):
        with pytest.raises(ValueError, match="convention"):
            example.make_proxy_app("http://127.0.0.1:1", "http://127.0.0.1:2",
                                   convention=convention, mode=mode)
    with pytest.raises(ValueError, match="convention"):
        fastapi_example.make_proxy_app("http://127.0.0.1:1", "http://127.0.0.1:2",
                                       convention="sglang")


def test_the_workers_check_the_conventions_hand_off(stack: Stack, no_traceback: None) -> None:
    """A MessagePack body that is not one, a generation request whose hand-off is not the
    generation phase's, a context request on an API path without a convention: 400s."""
    import msgspec

    msgpack = {"Content-Type": "application/json", "X-TRTLLM-Msgpack": "1"}
    for url, body, headers, member in (
            (f"{stack.generation_url}/v1/chat/completions", b"\xc1", msgpack, None),
            (f"{stack.context_url}/v1/chat/completions", b"\x93\x01\x02\x03", msgpack, None),
            (f"{stack.generation_url}/v1/chat/completions", msgspec.msgpack.encode(
                {"prompt_token_ids": [1], "disaggregated_params": {
                    "request_type": "context_only"}}), msgpack, "disaggregated_params"),
            (f"{stack.generation_url}/v1/completions", json.dumps(
                {"kv_transfer_params": {"do_remote_decode": True,
                                        "prompt_token_ids": [1]}}).encode(),
             JSON, "kv_transfer_params"),
            (f"{stack.generation_url}/v1/completions", json.dumps(
                {"kv_transfer_params": {"do_remote_prefill": True,
                                        "prompt_token_ids": "x"}}).encode(),
             JSON, "kv_transfer_params"),
            (f"{stack.context_url}/v1/chat/completions", json.dumps(
                {"prompt": "hi"}).encode(), JSON, None),
            (f"{stack.context_url}/v1/chat/completions", json.dumps(
                {"prompt": "hi", "kv_transfer_params": {"do_remote_prefill": True}}).encode(),
             JSON, "kv_transfer_params")):
        answer = httpx.post(url, content=body, headers=headers, timeout=30)
        assert answer.status_code == 400, (url, body, answer.text)
        assert answer.json()["error"]["param"] == member


JSON = {"Content-Type": "application/json"}


# --- httpx + httpx-sse, aiohttp, raw bodies ---------------------------------------------------

def test_httpx_sse_chat(stack: Stack) -> None:
    prompt_tokens, max_tokens = 40_000, 25
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": max_tokens, "stream_options": {"include_usage": True},
            "fake_prompt_tokens": prompt_tokens}
    with httpx.Client(timeout=30) as client, connect_sse(
            client, "POST", f"{stack.urls['tokcore']}/v1/chat/completions", json=body) as source:
        data = [event.data for event in source.iter_sse()]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]] == texts(max_tokens)
    assert [c["usage"] for c in chunks[:-1]] == [None] * (max_tokens + 1)
    prompt, cached = counts(prompt_tokens)
    assert chunks[-1]["usage"] == {"prompt_tokens": prompt, "total_tokens": prompt + max_tokens,
                                   "completion_tokens": max_tokens,
                                   "prompt_tokens_details": {"cached_tokens": cached}}


@pytest.mark.parametrize("mode", TOKCORE)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses",
                                  "/v1/messages"])
@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_a_body_that_is_not_json_is_a_400(stack: Stack, mode: str, path: str,
                                          body: bytes) -> None:
    answer = httpx.post(f"{stack.urls[mode]}{path}", content=body,
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    error = answer.json()
    if path == "/v1/messages":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    else:
        assert error["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("mode", TOKCORE)
def test_client_going_away_closes_the_upstream(stack: Stack, mode: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    before, proxy = stack.counts(), stack.state(mode)
    gone = proxy.disconnects
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": 200_000, "fake_prompt_tokens": 100}
    with caplog.at_level(logging.DEBUG):
        with httpx.Client(timeout=30) as client:
            with client.stream("POST", f"{stack.urls[mode]}/v1/chat/completions",
                               json=body) as response:
                for number, _ in enumerate(response.iter_bytes()):
                    if number == 3:
                        break  # the client goes away mid-stream
        deadline = time.monotonic() + 20
        while stack.counts().get("aborted", 0) == before.get("aborted", 0):
            assert time.monotonic() < deadline, "the generation stream was never closed"
            time.sleep(0.05)
    assert stack.counts().get("finished", 0) == before.get("finished", 0)
    deadline = time.monotonic() + 20  # the proxy counts it when its response has ended
    while proxy.disconnects == gone:
        assert time.monotonic() < deadline, "the proxy never counted the disconnect"
        time.sleep(0.05)
    assert proxy.disconnects == gone + 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.parametrize("mode", ["tokcore", "plain", "floor"])
def test_modes_give_the_same_stream_but_the_floor_keeps_the_usage(stack: Stack,
                                                                  mode: str) -> None:
    prompt_tokens, max_tokens = 3000, 30
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": max_tokens, "stream_options": {"include_usage": True},
            "fake_prompt_tokens": prompt_tokens}
    raw = httpx.post(f"{stack.urls[mode]}/v1/chat/completions", json=body, timeout=30).content
    text = raw.decode()
    assert text.endswith("\n\ndata: [DONE]\n\n")
    events = [json.loads(e[len("data: "):]) for e in text.split("\n\n")[:-2]]
    assert [e["choices"][0]["delta"]["content"] for e in events[1:-1]] == texts(max_tokens)
    prompt, cached = counts(prompt_tokens)
    usage = events[-1]["usage"]
    if mode == "floor":  # forwarded untouched: the generation worker's own (wrong) counts
        assert usage["prompt_tokens_details"] == {"cached_tokens": prompt}
    else:
        assert usage["prompt_tokens_details"] == {"cached_tokens": cached}
    assert usage["prompt_tokens"] == prompt


def test_loopback_only() -> None:
    for url in ("http://127.0.0.1:8000", "http://localhost:1", "http://[::1]:80",
                "http://127.8.9.10"):
        example.check_loopback(url)
    for url in ("http://10.0.0.1:8000", "http://example.com", "https://127.0.0.1:1",
                "http://0.0.0.0:80", "unix:///tmp/x"):
        with pytest.raises(ValueError, match="loopback"):
            example.check_loopback(url)
    with pytest.raises(ValueError, match="loopback"):
        example.make_proxy_app("http://127.0.0.1:1", "http://192.168.1.1:2")


#: how long an example's process may run before the test calls it hung: only a hang reaches
#: it (a demo starts three Python processes, each importing aiohttp or FastAPI and the
#: clients, and talks to them: on a loaded 2-core machine that took over 60 s)
HUNG = 600


def run_example(*args: str, script: Path = EXAMPLE) -> str:
    # the package is built in place, not installed: the example finds it through PYTHONPATH
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                          text=True, timeout=HUNG, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("script", [EXAMPLE, FASTAPI_EXAMPLE], ids=["aiohttp", "fastapi"])
def test_help(script: Path) -> None:
    out = run_example("--help", script=script)
    assert "--role" in out and "--upstream-timeout" in out and "--convention" in out
    assert ("--mode" in out) == (script == EXAMPLE)


@pytest.mark.parametrize(("script", "mode", "convention"), [
    (EXAMPLE, "tokcore", "b64"), (EXAMPLE, "plain", "b64"), (EXAMPLE, "tokcore", "trtllm"),
    (FASTAPI_EXAMPLE, "tokcore, on FastAPI", "vllm")],
    ids=["tokcore", "plain", "trtllm", "fastapi-vllm"])
def test_demo_starts_workers_and_proxy(script: Path, mode: str, convention: str) -> None:
    out = run_example("--demo", "--convention", convention,
                      *(["--mode", mode] if script == EXAMPLE else []), script=script)
    assert out.startswith("READY http://127.0.0.1:")
    assert f"mode: {mode}\nconvention: {convention}\n" in out
    assert '"prompt_tokens": 40000' in out and '"cached_tokens": 19968' in out


def test_a_mode_the_convention_has_not_is_a_usage_error() -> None:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(EXAMPLE), "--convention", "vllm", "--plain"],
                          capture_output=True, text=True, timeout=HUNG, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 2
    assert "the vllm convention's modes are ('tokcore', 'stack'), not 'plain'" in done.stderr


def test_the_printed_curl_line_asks_for_the_usage(stack: Stack) -> None:
    """The command the proxies print runs, and shows the usage event it rewrites."""
    hint = example.curl_hint(stack.urls["tokcore"], "proxy")
    body = json.loads(hint.split(" -d '", 1)[1].rstrip("'"))
    assert body["stream_options"] == {"include_usage": True} and body["stream"] is True
    for mode in TOKCORE:
        raw = httpx.post(f"{stack.urls[mode]}/v1/chat/completions", json=body, timeout=30)
        events = [json.loads(e[6:]) for e in raw.text.split("\n\n")[:-2]]
        prompt = len(body["messages"][0]["content"].split())
        assert events[-1]["usage"]["prompt_tokens"] == prompt
        assert events[-1]["usage"]["prompt_tokens_details"] == {
            "cached_tokens": example.cached_prompt_tokens(prompt)}


# --- the proxy at its edges: each API's own errors, as the official clients raise them -------

class Failing:
    """A worker that fails: ``/status/N/...`` answers N, ``/hang/...`` answers only when its
    client is gone, ``/abort/...`` streams two events then drops the connection,
    ``/noids/...`` answers 200 without the ids, ``/notjson/...`` 200 with HTML."""

    def __init__(self, stack: Stack) -> None:
        app = example.web.Application()
        app.router.add_post("/{how}/{tail:.*}", self.handle)
        self.url = stack.serve(app)

    async def handle(self, request: Any) -> Any:
        web = example.web
        how = request.match_info["how"]
        await request.read()
        if how.startswith("status"):
            return web.json_response({"detail": "no"}, status=int(how.split("-")[1]))
        if how == "hang":  # (not a sleep: the server's clean-up would wait for it)
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.02)
            return web.Response(status=503)
        if how == "noids":
            return web.json_response({"usage": {"prompt_tokens": 3}})
        if how == "notjson":
            return web.Response(body=b"<html>busy</html>", content_type="text/html")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[{"delta":{"content":"x"}}],"usage":null}\n\n'
                             if "chat" in request.path else
                             b'event: ping\ndata: {"type":"ping"}\n\n')
        await asyncio.sleep(0.05)
        request.transport.abort()
        return response


@pytest.fixture(scope="module")
def failing(stack: Stack) -> Failing:
    return Failing(stack)


def edge_proxy(stack: Stack, framework: str = "aiohttp", context: str | None = None,
               generation: str | None = None, **options: Any) -> str:
    """A tokcore-mode proxy on ``framework`` in front of the given workers (default: the
    good ones)."""
    context, generation = context or stack.context_url, generation or stack.generation_url
    if framework == "fastapi":
        return stack.serve(fastapi_example.make_proxy_app(context, generation, **options))
    return stack.serve(example.make_proxy_app(context, generation, **options))


@pytest.fixture
def no_traceback(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    with caplog.at_level(logging.DEBUG):
        yield
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


def openai_at(url: str) -> openai.OpenAI:
    client: openai.OpenAI = kept(openai.OpenAI(base_url=f"{url}/v1", api_key="unused",
                                               max_retries=0))
    return client


def anthropic_at(url: str) -> anthropic.Anthropic:
    client: anthropic.Anthropic = kept(anthropic.Anthropic(base_url=url, api_key="unused",
                                                           max_retries=0))
    return client


def chat(url: str, content: Any = PROMPT, stream: bool = False, **extra: Any) -> Any:
    answer = openai_at(url).chat.completions.create(
        model="m", messages=[{"role": "user", "content": content}], max_tokens=3,
        stream=stream, extra_body=extra)  # type: ignore[call-overload]
    return list(answer) if stream else answer


def message(url: str, content: Any = PROMPT, stream: bool = False, **extra: Any) -> Any:
    answer = anthropic_at(url).messages.create(
        model="m", messages=[{"role": "user", "content": content}], max_tokens=3,
        stream=stream, extra_body=extra)  # type: ignore[call-overload]
    return list(answer) if stream else answer


FRAMEWORKS = ["aiohttp", "fastapi"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_body_over_the_limit_is_a_413_in_each_apis_shape(stack: Stack, framework: str,
                                                           no_traceback: None) -> None:
    url = edge_proxy(stack, framework, max_body_bytes=4096)
    with pytest.raises(openai.APIStatusError) as raised:
        chat(url, "x" * 5000)
    assert type(raised.value) is openai.APIStatusError  # openai has no class for a 413
    assert raised.value.status_code == 413
    assert raised.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    assert "4096" in raised.value.body["message"]  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as too_large:
        message(url, "x" * 5000)
    assert too_large.value.status_code == 413
    assert too_large.value.body == {"type": "error", "error": {
        "type": "request_too_large", "message": "the request body is over 4096 bytes"}}
    assert chat(url, "small", fake_prompt_tokens=10).usage.prompt_tokens == 10


@pytest.mark.parametrize("mode", TOKCORE)
def test_the_default_limit_is_the_workers(stack: Stack, mode: str) -> None:
    """aiohttp's default (1 MiB) refused prompts of about 250k tokens; the proxy reads up
    to the 64 MiB the workers accept."""
    answer = chat(stack.urls[mode], "word " * (600 << 10), fake_prompt_tokens=300)
    assert answer.usage.prompt_tokens == 300  # a 3 MiB body
    assert example.MAX_BODY_BYTES == 64 << 20


@pytest.mark.parametrize("mode", TOKCORE)
@pytest.mark.parametrize("value", [-5, 0, "5", True, 1.5, [1]])
def test_a_bad_value_of_the_proxys_is_its_400_in_each_apis_shape(
        stack: Stack, mode: str, value: Any, no_traceback: None) -> None:
    url = stack.urls[mode]
    with pytest.raises(openai.BadRequestError) as raised:
        chat(url, fake_prompt_tokens=value)
    assert raised.value.status_code == 400
    assert raised.value.param == "fake_prompt_tokens"
    assert raised.value.type == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        message(url, stream=True, fake_prompt_tokens=value)
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


#: a client's bad value in a member the proxy forwards: (where, the member, its value, the
#: worker's message)
FORWARDED = {
    "messages": ("context", "messages", 5, "messages must be a list of objects, got 5"),
    "content": ("context", "messages", [{"role": "user", "content": 7}],
                "messages must be a string or a list of parts, got 7"),
    "max_tokens": ("generation", "max_tokens", "abc",
                   'max_tokens must be a positive integer, got "abc"'),
    "stream_options": ("generation", "stream_options", [1],
                       "stream_options must be an object, got [1]"),
}


@pytest.mark.parametrize("mode", TOKCORE)
@pytest.mark.parametrize("case", FORWARDED)
def test_a_bad_value_the_proxy_forwards_is_the_workers_400(
        stack: Stack, mode: str, case: str, no_traceback: None) -> None:
    """Never a 502 that blames the worker: the worker's 400 and its message, passed on."""
    where, member, value, text = FORWARDED[case]
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 3,
            member: value}
    for path in ("/v1/chat/completions", "/v1/messages"):
        answer = httpx.post(f"{stack.urls[mode]}{path}", json=body, timeout=30)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["message"] == text and error["type"] == "invalid_request_error"
        if path != "/v1/messages":
            assert error["param"] == member
    with pytest.raises(openai.BadRequestError) as raised:  # the official client's own class
        openai_at(stack.urls[mode]).chat.completions.create(
            model="m", messages=body["messages"], max_tokens=3,
            extra_body={member: value})  # type: ignore[call-overload]
    assert raised.value.param == member


def test_the_workers_answer_a_bad_request_with_a_400(stack: Stack, no_traceback: None) -> None:
    """vLLM's error shape, naming the member; never a traceback in the worker."""
    for url, body, member in (
            (f"{stack.context_url}/context", b"{oops", None),
            (f"{stack.context_url}/context", b'{"prompt": {"a": 1}}', "prompt"),
            (f"{stack.context_url}/context", b'{"fake_prompt_tokens": -1}',
             "fake_prompt_tokens"),
            (f"{stack.generation_url}/v1/chat/completions", b"[]", None),
            (f"{stack.generation_url}/v1/chat/completions",
             b'{"prompt_token_ids_b64": "!!"}', "prompt_token_ids_b64"),
            (f"{stack.generation_url}/v1/responses",
             b'{"prompt_token_ids": [1], "max_output_tokens": 0}', "max_output_tokens"),
            (f"{stack.generation_url}/v1/messages",
             b'{"prompt_token_ids": [1], "stream": "yes"}', "stream")):
        answer = httpx.post(url, content=body, timeout=30)
        assert answer.status_code == 400, (url, body, answer.text)
        error = answer.json()["error"]
        assert (error["type"], error["param"], error["code"]) == ("BadRequestError", member, 400)


@pytest.mark.parametrize("mode", TOKCORE)
@pytest.mark.parametrize(("path", "method", "status"), [
    ("/v1/embeddings", "POST", 404), ("/v2/messages", "POST", 404),
    ("/v1/messages/batches", "POST", 404), ("/v1/chat/completions", "GET", 405),
    ("/v1/messages", "PUT", 405)])
def test_an_unknown_path_or_method_is_the_apis_404_or_405(
        stack: Stack, mode: str, path: str, method: str, status: int,
        no_traceback: None) -> None:
    answer = httpx.request(method, f"{stack.urls[mode]}{path}", json={}, timeout=30)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()
    if path.startswith("/v1/messages"):
        assert error["type"] == "error"
        assert error["error"]["type"] == ("not_found_error" if status == 404
                                          else "invalid_request_error")
    else:
        assert error["error"]["type"] == ("not_found_error" if status == 404
                                          else "invalid_request_error")
    if status == 405:
        assert answer.headers["allow"] == "POST"


def test_an_unknown_path_is_the_official_clients_not_found_error(stack: Stack) -> None:
    with pytest.raises(openai.NotFoundError):
        openai_at(stack.urls["fastapi"]).embeddings.create(model="m", input="hi")
    with pytest.raises(anthropic.NotFoundError):
        anthropic_at(stack.urls["tokcore"]).messages.count_tokens(model="m", messages=[])


#: how each worker failure reaches each client: (where, how, openai's status, anthropic's
#: status, anthropic's class, its error type)
FAILURES = {
    "generation-503": ("generation", "status-503", 503, 503, anthropic.ServiceUnavailableError,
                       "overloaded_error"),
    "generation-529": ("generation", "status-529", 529, 529, anthropic.OverloadedError,
                       "overloaded_error"),
    "generation-500": ("generation", "status-500", 500, 500, anthropic.InternalServerError,
                       "api_error"),
    "generation-504": ("generation", "status-504", 504, 504, anthropic.GatewayTimeoutError,
                       "timeout_error"),
    "generation-hangs": ("generation", "hang", 504, 504, anthropic.GatewayTimeoutError,
                         "timeout_error"),
    "generation-down": ("generation", "down", 502, 502, anthropic.InternalServerError,
                        "api_error"),
    "context-503": ("context", "status-503", 503, 503, anthropic.ServiceUnavailableError,
                    "overloaded_error"),
    "context-no-ids": ("context", "noids", 502, 502, anthropic.InternalServerError,
                       "api_error"),
    "context-down": ("context", "down", 502, 502, anthropic.InternalServerError, "api_error"),
    "context-hangs": ("context", "hang", 504, 504, anthropic.GatewayTimeoutError,
                      "timeout_error"),
}


#: the proxy's upstream timeout in front of a worker that hangs (a 504 when the time is up)
HANG_TIMEOUT = 0.5


def failure_of(stack: Stack, framework: str, where: str, how: str, worker: str,
               call: Any, error: type[Exception]) -> Any:
    """The ``error`` that ``call(url)`` (a client's request to a proxy in front of the
    failing ``worker``) raises. Only a worker that hangs gets a short timeout: one that
    answers or refuses may be slow on a loaded machine, and a time up there would be a 504
    where its own answer is meant. When the generation worker hangs, the context worker must
    first answer within the same timeout; on a loaded machine it may not (the proxy then
    rightly answers 504 naming the context worker), so the timeout doubles until it did: the
    generation worker hangs, whatever the time."""
    timeout = HANG_TIMEOUT
    while True:
        options = {"upstream_timeout": timeout} if how == "hang" else {}
        url = edge_proxy(stack, framework, **options, **{where: worker})
        with pytest.raises(error) as raised:
            call(url)
        body = getattr(raised.value, "body", None)  # openai's: the error; anthropic's: whole
        said = body.get("error", body) if isinstance(body, dict) else None
        if not (how == "hang" and where == "generation" and isinstance(said, dict)
                and str(said.get("message", "")).startswith("the context worker")):
            return raised.value
        timeout *= 2


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", FAILURES)
def test_a_worker_failure_is_a_server_error_in_each_apis_shape(
        stack: Stack, failing: Failing, framework: str, case: str, no_traceback: None) -> None:
    where, how, openai_status, anthropic_status, anthropic_error, kind = FAILURES[case]
    worker = "http://127.0.0.1:9" if how == "down" else f"{failing.url}/{how}"
    raised = failure_of(stack, framework, where, how, worker,
                        lambda url: chat(url, stream=True), openai.InternalServerError)
    assert raised.status_code == openai_status
    assert raised.type == ("api_error" if openai_status == 500 else "server_error")
    worker_name = f"the {where} worker"
    if how in ("down", "hang"):  # no answer: the proxy names the worker
        assert raised.body["message"].startswith(worker_name)
    elif how.startswith("status"):  # the worker's own message
        assert raised.body["message"] == "no"
    failed = failure_of(stack, framework, where, how, worker, message, anthropic_error)
    assert type(failed) is anthropic_error
    assert failed.status_code == anthropic_status
    assert failed.body["error"]["type"] == kind


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_stream_that_fails_after_it_began_ends_with_the_apis_error_event(
        stack: Stack, failing: Failing, framework: str, no_traceback: None) -> None:
    url = edge_proxy(stack, framework, generation=f"{failing.url}/abort")
    with pytest.raises(openai.APIError, match="upstream stream failed") as raised:
        chat(url, stream=True)
    assert raised.value.body["type"] == "server_error"  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as failed:
        message(url, stream=True)
    assert failed.value.body["error"]["type"] == "api_error"  # type: ignore[index]
