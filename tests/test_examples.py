"""examples/disagg_proxy.py end to end, on loopback, driven by the clients users have.

The proxy and both fake workers run in a background event loop; the official ``openai``
and ``anthropic`` clients, ``httpx`` + ``httpx-sse`` and aiohttp talk to it as they would to
a real server. What the client sees is checked against the workers' own definitions: every
token in order, the ids that reached the generation worker equal to those the context
worker made (the worker reports their CRC), and the usage carrying the context worker's
counts in each API's field names. Needs the ``test`` extra.
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
from httpx_sse import connect_sse

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "disagg_proxy.py"
PROMPT = "What is an int32 token id?"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("disagg_proxy", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = load_example()


class Stack:
    """Both workers and one proxy per mode, served from a background event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[Any] = []
        self.generation = example.make_generation_app()
        context_url = self.serve(example.make_context_app())
        generation_url = self.serve(self.generation)
        self.proxies = {mode: example.make_proxy_app(context_url, generation_url, mode=mode)
                        for mode in example.MODES}
        self.urls = {mode: self.serve(app) for mode, app in self.proxies.items()}

    def serve(self, app: Any) -> str:
        runner, url = asyncio.run_coroutine_threadsafe(example.start_app(app),
                                                       self.loop).result(30)
        self.runners.append(runner)
        return str(url)

    def counts(self) -> dict[str, int]:
        return dict(self.generation[example.GENERATIONS])

    def state(self, mode: str) -> Any:
        return self.proxies[mode][example.STATE]

    def close(self) -> None:
        for runner in reversed(self.runners):
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self.loop).result(30)
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


def openai_client(stack: Stack, mode: str = "tokcore") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.urls[mode]}/v1", api_key="unused", max_retries=0)


# --- the openai client: chat, completions, responses ---------------------------------------

@pytest.mark.parametrize("mode", ["tokcore", "plain"])
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


@pytest.mark.parametrize("mode", ["tokcore", "plain"])
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


@pytest.mark.parametrize("with_usage", [True, False])
def test_openai_completions(stack: Stack, with_usage: bool) -> None:
    prompt_tokens, max_tokens = 1500, 17
    client = openai_client(stack)
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


@pytest.mark.parametrize("mode", ["tokcore", "plain"])
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

@pytest.mark.parametrize("mode", ["tokcore", "plain"])
def test_anthropic_messages(stack: Stack, mode: str) -> None:
    prompt_tokens, max_tokens = 5000, 12
    client = anthropic.Anthropic(base_url=stack.urls[mode], api_key="unused", max_retries=0)
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


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses",
                                  "/v1/messages"])
@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_a_body_that_is_not_json_is_a_400(stack: Stack, path: str, body: bytes) -> None:
    answer = httpx.post(f"{stack.urls['tokcore']}{path}", content=body,
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    error = answer.json()
    if path == "/v1/messages":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    else:
        assert error["error"]["type"] == "invalid_request_error"


def test_client_going_away_closes_the_upstream(stack: Stack,
                                               caplog: pytest.LogCaptureFixture) -> None:
    before, proxy = stack.counts(), stack.state("tokcore")
    gone = proxy.disconnects
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": 200_000, "fake_prompt_tokens": 100}
    with caplog.at_level(logging.DEBUG):
        with httpx.Client(timeout=30) as client:
            with client.stream("POST", f"{stack.urls['tokcore']}/v1/chat/completions",
                               json=body) as response:
                for number, _ in enumerate(response.iter_bytes()):
                    if number == 3:
                        break  # the client goes away mid-stream
        deadline = time.monotonic() + 20
        while stack.counts().get("aborted", 0) == before.get("aborted", 0):
            assert time.monotonic() < deadline, "the generation stream was never closed"
            time.sleep(0.05)
    assert stack.counts().get("finished", 0) == before.get("finished", 0)
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


def run_example(*args: str) -> str:
    # the package is built in place, not installed: the example finds it through PYTHONPATH
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_help() -> None:
    out = run_example("--help")
    assert "--mode" in out and "--role" in out


@pytest.mark.parametrize("mode", ["tokcore", "plain"])
def test_demo_starts_workers_and_proxy(mode: str) -> None:
    out = run_example("--demo", "--mode", mode)
    assert out.startswith("READY http://127.0.0.1:")
    assert f"mode: {mode}" in out
    assert '"prompt_tokens": 40000' in out and '"cached_tokens": 19968' in out
