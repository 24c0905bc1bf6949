"""The example API server (examples/api_server.py) in both modes: the stacks' pydantic
chunks and tokcore's StreamWriter write the same bytes, which the openai client reads as
the answer the fake engine made."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import openai
import pytest
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def api_server() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_server", ROOT / "examples" /
                                                  "api_server.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (pydantic looks its models' module up)
    spec.loader.exec_module(module)
    return module


def stream(app: object, max_tokens: int) -> bytes:
    with TestClient(app) as client:  # type: ignore[arg-type]
        answer = client.post("/v1/chat/completions", json={
            "model": "m", "max_tokens": max_tokens, "stream": True, "created": 1732000000,
            "messages": [{"role": "user", "content": "one two three"}]})
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        return answer.content


@pytest.mark.parametrize("max_tokens", [1, 2, 17, 300])
def test_both_modes_write_the_same_bytes(api_server: ModuleType, max_tokens: int) -> None:
    pydantic = stream(api_server.make_app("pydantic"), max_tokens)
    writer = stream(api_server.make_app("writer"), max_tokens)
    assert writer == pydantic
    assert writer.count(b"data: ") == max_tokens + 3  # role, tokens, usage, [DONE]


def test_the_openai_client_reads_the_answer(api_server: ModuleType) -> None:
    """The writer's stream, parsed by the openai package's own SSE and chunk models."""
    app = api_server.make_app("writer")
    with TestClient(app) as transport_client:
        client = openai.OpenAI(base_url=f"{transport_client.base_url}/v1", api_key="x",
                               http_client=transport_client)
        chunks = list(client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=20,
            stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    words = api_server.WORDS
    assert text == "".join(words[i % len(words)] for i in range(20))
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 20


def test_stats(api_server: ModuleType) -> None:
    with TestClient(api_server.make_app("pydantic")) as client:
        stats = client.get("/stats").json()
    assert stats["mode"] == "pydantic" and stats["cpu_seconds"] > 0
