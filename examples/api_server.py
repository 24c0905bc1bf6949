"""An OpenAI-compatible API server's streaming path, on FastAPI under uvicorn, written two
ways over the same fake engine: the stacks' way (``--mode pydantic``: a pydantic chunk built
per streamed token, shaped like vLLM's models, dumped with ``model_dump_json(exclude_unset=
True)`` and framed as a ``str``, as vLLM's chat_completion_stream_generator does) and
tokcore's (``--mode writer``: ``StreamWriter`` of vLLM's shape, frames as ``bytes``). Both
write the same bytes (tests/integration/test_api_server.py checks it); bench/bench_e2e.py
measures each one's CPU per streamed token.

The fake engine: each request's answer is ``max_tokens`` tokens, one an engine step (an
``await`` between them, so concurrent requests interleave as under a real engine), each a
word of a fixed text.

Usage: python examples/api_server.py [--mode pydantic|writer] [--port N]
(prints ``READY <url>``; ``GET /stats`` gives the process's CPU seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_serializer

import tokcore

LOOPBACK = "127.0.0.1"
WORDS = (" The", " answer", " streams", " token", " by", " token", ",", " each", " one",
         " a", " chunk", " of", " its", " own", ".", "\n")


async def engine(max_tokens: int) -> AsyncIterator[tuple[str, int]]:
    """A fake engine's steps for one request: (the token's text, its id)."""
    for i in range(max_tokens):
        await asyncio.sleep(0)  # the engine's step: every running request gets its token
        yield WORDS[i % len(WORDS)], 1000 + i % len(WORDS)


# --- the stacks' way: models shaped like vLLM's (its OpenAI protocol), one chunk a token


class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="allow")


class DeltaMessage(OpenAIBaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        data = handler(self)
        if len(data.get("tool_calls", [])) == 0:
            data.pop("tool_calls", None)
        return data


class ChoiceDelta(OpenAIBaseModel):
    index: int
    delta: DeltaMessage
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None


class UsageInfo(OpenAIBaseModel):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0


class ChatCompletionStreamResponse(OpenAIBaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChoiceDelta]
    usage: UsageInfo | None = None
    system_fingerprint: str | None = None
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None


async def pydantic_stream(request_id: str, created: int, model: str, prompt_tokens: int,
                          max_tokens: int) -> AsyncIterator[str]:
    """vLLM's stream generator's construction sites, each chunk built and dumped."""
    chunk_type: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    first = ChatCompletionStreamResponse(
        id=request_id, object=chunk_type, created=created, model=model,
        choices=[ChoiceDelta(index=0, delta=DeltaMessage(role="assistant", content=""),
                             logprobs=None, finish_reason=None)],
        prompt_token_ids=None, prompt_text=None)
    yield f"data: {first.model_dump_json(exclude_unset=True)}\n\n"
    count = 0
    async for text, _token_id in engine(max_tokens):
        count += 1
        if count < max_tokens:
            choice = ChoiceDelta(index=0, delta=DeltaMessage(content=text), logprobs=None,
                                 finish_reason=None, token_ids=None)
        else:
            choice = ChoiceDelta(index=0, delta=DeltaMessage(content=text), logprobs=None,
                                 finish_reason="length", stop_reason=None, token_ids=None)
        chunk = ChatCompletionStreamResponse(id=request_id, object=chunk_type, created=created,
                                             choices=[choice], model=model)
        yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
    final = ChatCompletionStreamResponse(
        id=request_id, object=chunk_type, created=created, choices=[], model=model,
        usage=UsageInfo(prompt_tokens=prompt_tokens, completion_tokens=count,
                        total_tokens=prompt_tokens + count), system_fingerprint=None)
    yield f"data: {final.model_dump_json(exclude_unset=True, exclude_none=True)}\n\n"
    yield "data: [DONE]\n\n"


# --- tokcore's: the same frames by StreamWriter

SHAPE = tokcore.StreamShape("chat", "vllm")  # once per server


async def writer_stream(request_id: str, created: int, model: str, prompt_tokens: int,
                        max_tokens: int) -> AsyncIterator[bytes]:
    writer = tokcore.StreamWriter(SHAPE, id=request_id, model=model, created=created)
    yield writer.write("start")
    count = 0
    async for text, _token_id in engine(max_tokens):
        count += 1
        yield writer.text(text) if count < max_tokens else writer.step(
            text, finish_reason="length")
    yield writer.usage(prompt_tokens, count)
    yield writer.done()


def make_app(mode: str) -> FastAPI:
    app = FastAPI()
    streams = {"pydantic": pydantic_stream, "writer": writer_stream}
    stream = streams[mode]
    counter = iter(range(1 << 62))

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> StreamingResponse:
        request_id = f"chatcmpl-{next(counter):016x}"
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", ()))
        frames = stream(request_id, int(body.get("created") or time.time()),
                        str(body.get("model", "fake-model")), len(prompt.split()),
                        int(body.get("max_tokens") or 16))
        return StreamingResponse(frames, media_type="text/event-stream")

    @app.get("/stats")
    async def stats() -> JSONResponse:
        """This process's CPU seconds so far (bench/bench_e2e.py reads them)."""
        times = os.times()
        return JSONResponse({"mode": mode, "cpu_seconds": times.user + times.system,
                             "system_seconds": times.system})

    return app


async def serve(mode: str, port: int) -> None:
    config = uvicorn.Config(make_app(mode), host=LOOPBACK, port=port, loop="asyncio",
                            log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    print(f"READY http://{LOOPBACK}:{server.servers[0].sockets[0].getsockname()[1]}",
          flush=True)
    await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("pydantic", "writer"), default="writer")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.mode, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
