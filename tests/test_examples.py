"""examples/disagg_proxy.py end to end, in both modes, on loopback.

The client's view is checked with ``json.loads`` on every event (the oracle): every token in
order, the ids that reached the generation worker equal to those the context worker made
(the worker reports their CRC), and the final usage carrying the context worker's counts.
Needs aiohttp (in the ``test`` extra) and tokcore's base64 and relay functions.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp import ClientSession

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "disagg_proxy.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("disagg_proxy", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def run_once(example: ModuleType, plain: bool, prompt: str, prompt_tokens: int,
                   max_tokens: int, stream: bool = True) -> tuple[bytes, dict[str, Any]]:
    """Start both workers and the proxy in this loop; send one request; return the body."""
    runners = []
    try:
        for app in (example.make_context_app(), example.make_generation_app()):
            runner, url = await example.start_app(app)
            runners.append((runner, url))
        (_, context_url), (_, generation_url) = runners
        proxy, proxy_url = await example.start_app(
            example.make_proxy_app(context_url, generation_url, plain=plain))
        runners.append((proxy, proxy_url))
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "stream": stream, "fake_prompt_tokens": prompt_tokens,
                "stream_options": {"include_usage": True}}
        async with ClientSession() as session:
            async with session.post(f"{proxy_url}/v1/chat/completions", json=body) as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith(
                    "text/event-stream" if stream else "application/json")
                raw = await response.read()
            async with session.get(f"{proxy_url}/stats") as response:
                stats = await response.json()
        return raw, stats
    finally:
        for runner, _ in reversed(runners):
            await runner.cleanup()


@pytest.mark.parametrize("plain", [False, True], ids=["tokcore", "plain"])
@pytest.mark.parametrize("prompt_tokens", [1, 3000])
def test_proxy_end_to_end(example: ModuleType, plain: bool, prompt_tokens: int) -> None:
    prompt, max_tokens = "What is an int32 token id?", 30
    raw, stats = asyncio.run(run_once(example, plain, prompt, prompt_tokens, max_tokens))
    assert stats["requests"] == 1 and stats["plain"] is plain and stats["cpu_seconds"] > 0

    text = raw.decode()
    assert text.endswith("\n\ndata: [DONE]\n\n")
    events = [json.loads(e[len("data: "):]) for e in text.split("\n\n")[:-2]]
    assert all(e.startswith("data: ") for e in text.split("\n\n")[:-1])
    role, *tokens, last = events
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [t["choices"][0]["delta"]["content"] for t in tokens] == [
        example.token_text(i) for i in range(max_tokens)]  # every token, in order
    assert [t["usage"] for t in tokens] == [None] * max_tokens
    assert [t["choices"][0]["finish_reason"] for t in tokens][-2:] == [None, "length"]

    ids = example.fake_prompt_ids(prompt, prompt_tokens)
    assert {e["system_fingerprint"] for e in events} == {example.ids_fingerprint(ids)}
    assert last["choices"] == []
    assert last["usage"] == {  # the generation worker said cached_tokens = whole prompt
        "prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
        "total_tokens": prompt_tokens + max_tokens,
        "prompt_tokens_details": {"cached_tokens": example.cached_prompt_tokens(prompt_tokens)},
    }


@pytest.mark.parametrize("plain", [False, True], ids=["tokcore", "plain"])
def test_proxy_without_streaming(example: ModuleType, plain: bool) -> None:
    prompt, prompt_tokens, max_tokens = "Short answer, please.", 2000, 13
    raw, _ = asyncio.run(run_once(example, plain, prompt, prompt_tokens, max_tokens, False))
    answer = json.loads(raw)
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"] == "".join(
        example.token_text(i) for i in range(max_tokens))
    ids = example.fake_prompt_ids(prompt, prompt_tokens)
    assert answer["system_fingerprint"] == example.ids_fingerprint(ids)
    assert answer["usage"] == {
        "prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
        "total_tokens": prompt_tokens + max_tokens,
        "prompt_tokens_details": {"cached_tokens": example.cached_prompt_tokens(prompt_tokens)},
    }


def test_loopback_only(example: ModuleType) -> None:
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
    assert "--plain" in out and "--role" in out


@pytest.mark.parametrize("flags", [[], ["--plain"]], ids=["tokcore", "plain"])
def test_demo_starts_workers_and_proxy(flags: list[str]) -> None:
    out = run_example("--demo", *flags)
    assert out.startswith("READY http://127.0.0.1:")
    assert f"mode: {'plain' if flags else 'tokcore'}" in out
    assert '"prompt_tokens": 40000' in out and '"cached_tokens": 19968' in out
