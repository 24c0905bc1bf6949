"""A server's own stream (tokcore.adapters: EventStreamResponse, send_frames), end to end on
loopback with the real clients.

A fake engine's answers written by StreamWriter in an async generator of the server's, sent
by aiohttp (``send_frames``; once as aiohttp runs a handler by default, once with
``handler_cancellation``) and by Starlette and FastAPI under uvicorn
(``EventStreamResponse``), on one event loop in a thread of its own. The official ``openai``
client reads Chat Completions and Responses streams, ``anthropic`` Messages streams, httpx
the raw bytes. For each way a stream ends (its end, the client going away, the generator
failing, a cancellation) the test checks what the client got, that the generator was
closed (its ``finally`` ran) and that nothing was logged at ERROR or with a traceback.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

import anthropic
import fastapi
import httpx
import openai
import pytest
from _clients import AsgiClient, Fronts, kept
from aiohttp import web
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import tokcore
from tokcore.adapters.aiohttp import send_frames
from tokcore.adapters.errors import STREAM_FAILED
from tokcore.adapters.frames import FRAME_HEADERS, Frames
from tokcore.adapters.starlette import EventStreamResponse

T = TypeVar("T")
WORDS = ("Hello", ",", " world", "!", " How", " are", " you", "?")
SHAPES = {"chat": tokcore.StreamShape("chat", "vllm"),
          "messages": tokcore.StreamShape("messages", "anthropic"),
          "responses": tokcore.StreamShape("responses", "openai")}
PATHS = {"/v1/chat/completions": "chat", "/v1/messages": "messages", "/v1/responses": "responses"}
PROMPT = 7


class Generation:
    """One request's generator, as the test sees it."""

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.frames = 0


#: every request's record, by its id (the query's ``id``)
GENERATIONS: dict[str, Generation] = {}


async def engine(tokens: int, fail: int, wait: bool) -> AsyncIterator[str]:
    """A fake engine: a word a step; ``fail``: raise at that step; ``wait``: after the first
    word, wait as an engine that has nothing yet does."""
    for i in range(tokens):
        if i == fail:
            raise RuntimeError("the engine failed")
        if wait and i == 1:
            await asyncio.sleep(3600)
        await asyncio.sleep(0)
        yield WORDS[i % len(WORDS)]


def frames(api: str, query: Any) -> AsyncIterator[bytes]:
    """The server's stream for one request: StreamWriter's frames from the engine's words."""
    record = GENERATIONS.setdefault(query.get("id", "-"), Generation())
    tokens, fail = int(query.get("tokens", 4)), int(query.get("fail", -1))
    writer = tokcore.StreamWriter(SHAPES[api], id="gen-1", model="m", created=1732000000,
                                  item_id="msg_1")

    async def stream() -> AsyncIterator[bytes]:
        try:
            words = []
            if api == "chat":
                yield writer.write("start")
            elif api == "messages":
                yield writer.write("message_start", usage=(PROMPT, 0, 0))
                yield writer.write("text_start")
            else:
                for frame in ("created", "in_progress", "item_added", "part_added"):
                    yield writer.write(frame)
            async for word in engine(tokens, fail, query.get("wait") == "1"):
                words.append(word)
                record.frames += 1
                yield writer.text(word)
            text, count = "".join(words), len(words)
            if api == "chat":
                yield writer.step("", finish_reason="stop")
                yield writer.usage(PROMPT, count)
                yield writer.done()
            elif api == "messages":
                yield writer.write("block_stop")
                yield writer.write("message_delta", finish_reason="end_turn",
                                   usage=(PROMPT, count))
                yield writer.done()
            else:
                for frame in ("text_done", "part_done", "item_done"):
                    yield writer.write(frame, text)
                yield writer.write("completed", text, usage=(PROMPT, count, 0, 0))
        finally:
            record.closed.set()

    return stream()


# --- the apps under test ---------------------------------------------------------------------

def aiohttp_app() -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        api = PATHS[request.path]
        return await send_frames(request, frames(api, request.query), api=api)

    app = web.Application()
    for path in PATHS:
        app.router.add_post(path, handler)
    return app


def starlette_app() -> Starlette:
    async def handler(request: Request) -> Response:
        api = PATHS[request.url.path]
        return EventStreamResponse(frames(api, request.query_params), api=api)

    return Starlette(routes=[Route(path, handler, methods=["POST"]) for path in PATHS])


def fastapi_app() -> fastapi.FastAPI:
    app = fastapi.FastAPI()

    async def handler(request: fastapi.Request) -> Response:
        api = PATHS[request.url.path]
        return EventStreamResponse(frames(api, request.query_params), api=api)

    for path in PATHS:
        app.add_api_route(path, handler, methods=["POST"])
    return app


class Servers:
    """The four fronts, on one loop in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.fronts = Fronts()
        self.urls = {"aiohttp": self.run(self.fronts.serve_aiohttp(aiohttp_app())),
                     "aiohttp-cancel": self.run(self.fronts.serve_aiohttp(
                         aiohttp_app(), handler_cancellation=True)),
                     "starlette": self.run(self.fronts.serve_asgi(starlette_app())),
                     "fastapi": self.run(self.fronts.serve_asgi(fastapi_app()))}

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    def close(self) -> None:
        self.run(self.fronts.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    running = Servers()
    yield running
    running.close()


FRONTS = ["aiohttp", "aiohttp-cancel", "starlette", "fastapi"]
_ids = iter(range(1 << 30))


def new_request(**query: str) -> tuple[dict[str, str], Generation]:
    name = f"r{next(_ids)}"
    record = GENERATIONS[name] = Generation()
    return {"id": name, **query}, record


def expected_bytes(api: str, tokens: int = 4) -> bytes:
    """What the generator writes for a whole stream (the same writer, run here)."""
    async def collect() -> bytes:
        return b"".join([frame async for frame in frames(api, {"tokens": str(tokens)})])

    return asyncio.run(collect())


# --- the end of the stream, read by the official clients -------------------------------------

@pytest.mark.parametrize("front", FRONTS)
def test_chat_completions(servers: Servers, front: str,
                          quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request()
    client = kept(openai.OpenAI(base_url=f"{servers.urls[front]}/v1", api_key="-", max_retries=0))
    chunks = list(client.chat.completions.create(model="m", messages=[], stream=True,
                                                 extra_query=query))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
        "".join(WORDS[:4])
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == PROMPT + 4
    assert record.closed.wait(10)


@pytest.mark.parametrize("front", FRONTS)
def test_responses(servers: Servers, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request(tokens="5")
    client = kept(openai.OpenAI(base_url=f"{servers.urls[front]}/v1", api_key="-", max_retries=0))
    events = list(client.responses.create(model="m", input="hi", stream=True,
                                          extra_query=query))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response  # type: ignore[union-attr]
    assert final.output_text == "".join(deltas) == "".join(WORDS[:5])
    assert final.usage is not None and final.usage.output_tokens == 5
    assert record.closed.wait(10)


@pytest.mark.parametrize("front", FRONTS)
def test_messages(servers: Servers, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request(tokens="3")
    client = kept(anthropic.Anthropic(base_url=servers.urls[front], api_key="-", max_retries=0))
    with client.messages.stream(model="m", max_tokens=5, messages=[],
                                extra_query=query) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert text == "".join(WORDS[:3])
    assert message.usage.output_tokens == 3 and message.stop_reason == "end_turn"
    assert record.closed.wait(10)


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_the_bytes_and_headers_are_the_writers(servers: Servers, front: str, api: str,
                                               quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request()
    path = next(p for p, a in PATHS.items() if a == api)
    answer = httpx.post(f"{servers.urls[front]}{path}", params=query, timeout=30)
    assert answer.content == expected_bytes(api)
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["cache-control"] == FRAME_HEADERS["Cache-Control"]
    assert answer.headers["x-accel-buffering"] == "no"
    assert record.closed.wait(10)


# --- the client going away, the generator failing --------------------------------------------

@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_goes_away_closes_the_generator(
        servers: Servers, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request(tokens="100000")
    with httpx.stream("POST", f"{servers.urls[front]}/v1/chat/completions", params=query,
                      timeout=30) as response:
        for _ in response.iter_raw():
            if record.frames:
                break  # the client goes away mid-stream
    assert record.closed.wait(20)
    assert 0 < record.frames < 100000
    if front != "aiohttp-cancel":  # (a cancelled handler logs nothing: the cancellation goes on)
        assert any(r.levelname == "DEBUG" and "went away" in r.getMessage()
                   for r in _wait_for_records(quiet_logs, "went away"))


@pytest.mark.parametrize("front", ["aiohttp-cancel", "starlette", "fastapi"])
def test_a_client_that_goes_away_from_a_waiting_generator(
        servers: Servers, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    """The generator waits on its engine: aiohttp with handler_cancellation and Starlette
    (ASGI 2.3: its disconnect listener) cancel it, and its finally runs. (Plain aiohttp
    notices only at the next write, its documented way.)"""
    query, record = new_request(tokens="10", wait="1")
    with httpx.stream("POST", f"{servers.urls[front]}/v1/chat/completions", params=query,
                      timeout=30) as response:
        for _ in response.iter_raw():
            if record.frames:
                break
    assert record.closed.wait(20)
    assert record.frames == 1


@pytest.mark.parametrize("front", FRONTS)
def test_a_generator_that_fails_mid_stream_is_an_openai_error(
        servers: Servers, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request(tokens="6", fail="2")
    client = kept(openai.OpenAI(base_url=f"{servers.urls[front]}/v1", api_key="-", max_retries=0))
    got = []
    with pytest.raises(openai.APIError, match=STREAM_FAILED) as raised:
        for chunk in client.chat.completions.create(model="m", messages=[], stream=True,
                                                    extra_query=query):
            got.append(chunk)
    assert type(raised.value) is openai.APIError
    assert [c.choices[0].delta.content for c in got[1:]] == list(WORDS[:2])
    assert record.closed.wait(10)
    assert [r.levelname for r in _wait_for_records(quiet_logs, "failed mid-stream")] == \
        ["WARNING"]


@pytest.mark.parametrize("front", FRONTS)
def test_a_generator_that_fails_mid_stream_is_an_anthropic_error(
        servers: Servers, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request(tokens="6", fail="1")
    client = kept(anthropic.Anthropic(base_url=servers.urls[front], api_key="-", max_retries=0))
    with pytest.raises(anthropic.APIStatusError) as raised:
        for _ in client.messages.create(model="m", max_tokens=5, messages=[], stream=True,
                                        extra_query=query):
            pass
    assert raised.value.body == {"type": "error", "error": {"type": "api_error",
                                                            "message": STREAM_FAILED}}
    assert record.closed.wait(10)


def _wait_for_records(caplog: pytest.LogCaptureFixture, text: str) -> list[Any]:
    """The records that say ``text``, once the server's loop has logged them."""
    for _ in range(200):
        found = [r for r in caplog.records if text in r.getMessage()]
        if found:
            return found
        threading.Event().wait(0.05)
    return []


# --- cancellation, ASGI 2.4's convention, the sources it takes --------------------------------

@pytest.mark.parametrize("spec", ["2.3", "2.4"])
def test_event_stream_response_under_both_conventions(
        spec: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, record = new_request(tokens="100000")

    async def run() -> None:
        asgi = AsgiClient(spec, reads=3)
        await asyncio.wait_for(EventStreamResponse(frames("chat", query))(
            asgi.scope(), asgi.receive, asgi.send), 30)

    asyncio.run(run())
    assert record.closed.is_set()
    assert [r.levelname for r in quiet_logs.records if "went away" in r.getMessage()] == \
        ["DEBUG"]


def test_a_cancelled_event_stream_response_closes_its_generator() -> None:
    query, record = new_request(tokens="10", wait="1")
    completions: list[Any] = []

    async def run() -> None:
        asgi = AsgiClient("2.4", reads=1000)
        task = asyncio.ensure_future(EventStreamResponse(
            frames("chat", query), on_complete=completions.append)(
            asgi.scope(), asgi.receive, asgi.send))
        while not record.frames:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert record.closed.is_set()
    (done,) = completions
    assert done.client_gone and done.stream and done.upstream_error is None


def test_a_cancelled_send_frames_closes_its_generator() -> None:
    """aiohttp's handler cancelled (its handler_cancellation, a server's shutdown)."""
    query, record = new_request(tokens="10", wait="1")

    async def run() -> None:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await send_frames(request, frames("chat", query))

        app = web.Application()
        app.router.add_post("/", handler)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with httpx.AsyncClient() as client:
                async with client.stream("POST", f"http://127.0.0.1:{port}/") as response:
                    async for _ in response.aiter_raw():
                        if record.frames:
                            break
            for _ in range(200):
                if record.closed.is_set():
                    break
                await asyncio.sleep(0.05)
        finally:
            await runner.cleanup()

    asyncio.run(run())
    assert record.closed.is_set()


def test_frames_take_sync_sources_and_refuse_str() -> None:
    async def read(source: Any) -> list[bytes]:
        stream = Frames(source)
        try:
            return [frame async for frame in stream]
        finally:
            await stream.aclose()

    w = tokcore.StreamWriter(SHAPES["chat"], id="x", model="m", created=1)
    listed = [w.text("a"), w.text("b")]
    assert asyncio.run(read(listed)) == listed
    closed = []

    def generator() -> Iterator[bytes]:
        try:
            yield from listed
        finally:
            closed.append(True)

    async def first_only() -> bytes:
        stream = Frames(generator())
        frame = await stream.__anext__()
        await stream.aclose()
        await stream.aclose()  # again: nothing
        return frame

    assert asyncio.run(first_only()) == listed[0] and closed == [True]
    with pytest.raises(TypeError, match="frame 0 is a str, not bytes"):
        asyncio.run(read(["data: x\n\n"]))
    for bad in (b"data: x\n\n", "x", 5):
        with pytest.raises(TypeError, match="iterable of bytes frames"):
            Frames(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_complete"):
        EventStreamResponse(listed, on_complete=5)  # type: ignore[arg-type]
