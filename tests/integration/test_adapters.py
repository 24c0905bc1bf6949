"""The framework adapters (tokcore.adapters), end to end on loopback with the real clients.

One real upstream (tests/_upstream.py: an aiohttp SSE server) and, on the same event loop,
the two server-side adapters in front of it: an aiohttp app using ``relay_response`` (once
as aiohttp runs it by default, once with ``handler_cancellation``, which cancels a handler
whose client went away) and a Starlette app served by uvicorn using ``aopen_relay`` and
``RelayResponse`` (and the same on FastAPI). The official ``openai`` and ``anthropic``
clients and httpx talk to them.
For each way a stream ends (its end, the client going away, the upstream failing, a
cancellation) the test checks what the client got, that the upstream saw its client go (no
connection left open: the upstream serves nothing any more) and that nothing was logged at
ERROR or with a traceback (caplog, every thread). ASGI 2.4's disconnect convention, which
uvicorn does not use, is driven by hand.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import fastapi
import httpx
import openai
import pytest
from _clients import AsgiClient, Fronts, kept
from _upstream import (
    CACHED,
    PROMPT,
    RELAYED_USAGE,
    TOKEN_EVENT,
    Server,
    Upstream,
    released,
    served,
    still_open,
)
from aiohttp import ClientSession, web
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tokcore import arelay_usage
from tokcore.adapters.aiohttp import relay_response
from tokcore.adapters.errors import STREAM_FAILED, error_body, error_type, stream_error_event
from tokcore.adapters.httpx import aopen_relay, open_relay
from tokcore.adapters.starlette import RelayResponse

APIS = {"/v1/chat/completions": "chat", "/v1/messages": "messages"}


# --- the apps under test ---------------------------------------------------------------------

def aiohttp_app(upstream_url: str) -> web.Application:
    """The README's aiohttp handler: one shared session, ``relay_response`` per request."""
    app = web.Application()
    session_key = web.AppKey("session", ClientSession)

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[session_key] = ClientSession()
        yield
        await app[session_key].close()

    async def relay(request: web.Request) -> web.StreamResponse:
        api = APIS[request.path]
        async with request.app[session_key].post(
                f"{upstream_url}&{request.query_string}") as upstream:
            if upstream.status != 200:
                return web.Response(status=502, body=error_body(api, 502, "upstream"),
                                    content_type="application/json")
            return await relay_response(request, upstream, PROMPT, CACHED, api=api)

    app.cleanup_ctx.append(session)
    for path in APIS:
        app.router.add_post(path, relay)
    return app


def starlette_app(upstream_url: str) -> Starlette:
    """The README's Starlette app: ``aopen_relay`` then ``RelayResponse``."""
    client = httpx.AsyncClient(timeout=None)

    async def relay(request: Request) -> Response:
        api = APIS[request.url.path]
        stream = await aopen_relay(client, "POST", f"{upstream_url}&{request.url.query}",
                                   PROMPT, CACHED, api=api)
        if stream.response.status_code != 200:
            await stream.aclose()
            return Response(error_body(api, 502, "upstream"), status_code=502,
                            media_type="application/json")
        return RelayResponse(stream, api=api)

    app = Starlette(routes=[Route(path, relay, methods=["POST"]) for path in APIS])
    app.state.client = client
    return app


def fastapi_app(upstream_url: str) -> fastapi.FastAPI:
    """The same on FastAPI: a route returns the ``RelayResponse``."""
    client = httpx.AsyncClient(timeout=None)
    app = fastapi.FastAPI()

    async def relay(request: fastapi.Request) -> Response:
        api = APIS[request.url.path]
        stream = await aopen_relay(client, "POST", f"{upstream_url}&{request.url.query}",
                                   PROMPT, CACHED, api=api)
        if stream.response.status_code != 200:
            await stream.aclose()
            return Response(error_body(api, 502, "upstream"), status_code=502,
                            media_type="application/json")
        return RelayResponse(stream, api=api)

    for path in APIS:
        app.add_api_route(path, relay, methods=["POST"])
    app.state.client = client
    return app


class Stack:
    """The upstream and the three fronts, on the upstream server's loop."""

    def __init__(self) -> None:
        self.server = Server()
        base = f"{self.server.url}?"
        self.fronts = Fronts()
        self.asgi = {"starlette": starlette_app(base), "fastapi": fastapi_app(base)}
        self.urls = {"aiohttp": self.server.run(self.fronts.serve_aiohttp(aiohttp_app(base))),
                     "aiohttp-cancel": self.server.run(self.fronts.serve_aiohttp(
                         aiohttp_app(base), handler_cancellation=True))}
        for name, app in self.asgi.items():
            self.urls[name] = self.server.run(self.fronts.serve_asgi(app))

    async def stop(self) -> None:
        await self.fronts.stop()
        for app in self.asgi.values():
            await app.state.client.aclose()

    def close(self) -> None:
        self.server.run(self.stop())
        self.server.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    running = Stack()
    yield running
    running.close()


FRONTS = ["aiohttp", "aiohttp-cancel", "starlette", "fastapi"]


def new_request(stack: Stack, **query: str) -> tuple[dict[str, str], Upstream]:
    """Query arguments that make the upstream serve one new request, and its record."""
    url, upstream = stack.server.request(**query)
    return dict(part.split("=") for part in url.split("?", 1)[1].split("&")), upstream


# --- server side: aiohttp and Starlette ------------------------------------------------------

@pytest.mark.parametrize("front", FRONTS)
def test_the_end_of_the_stream(stack: Stack, front: str,
                               quiet_logs: pytest.LogCaptureFixture) -> None:
    query, upstream = new_request(stack, events="3", end="1")
    client = kept(openai.OpenAI(base_url=f"{stack.urls[front]}/v1", api_key="-", max_retries=0))
    chunks = list(client.chat.completions.create(model="m", messages=[], stream=True,
                                                 extra_query=query))
    assert [c.usage.prompt_tokens for c in chunks if c.usage] == [PROMPT]
    details = chunks[0].usage.prompt_tokens_details  # type: ignore[union-attr]
    assert details is not None and details.cached_tokens == CACHED
    assert [c.choices[0].delta.content for c in chunks[1:]] == ["x"] * 3
    assert upstream.finished.wait(10) and served(upstream)


@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_goes_away_closes_the_upstream(
        stack: Stack, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, upstream = new_request(stack)
    with httpx.stream("POST", f"{stack.urls[front]}/v1/chat/completions", params=query,
                      timeout=30) as response:
        seen = b""
        for chunk in response.iter_raw():
            seen += chunk
            if TOKEN_EVENT in seen:
                break  # the client goes away mid-stream
    assert seen.startswith(RELAYED_USAGE)
    assert released(upstream) and served(upstream)
    # one DEBUG line, under uvicorn's ASGI 2.3 too (the stream cancelled by Starlette); a
    # cancelled handler (aiohttp's handler_cancellation) logs nothing: the cancellation goes on
    assert [r.levelname for r in quiet_logs.records if "went away" in r.getMessage()] == \
        ([] if front == "aiohttp-cancel" else ["DEBUG"])


@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_goes_away_from_a_quiet_upstream(
        stack: Stack, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    """The stream waits for an upstream that sends nothing: aiohttp with
    handler_cancellation and Starlette (ASGI 2.3: its disconnect listener) cancel it; plain
    aiohttp notices only at the next write, which here never comes (its documented way)."""
    query, upstream = new_request(stack, quiet="1", events="0", lifetime="3")
    with httpx.stream("POST", f"{stack.urls[front]}/v1/chat/completions", params=query,
                      timeout=30) as response:
        first = next(response.iter_raw())
    assert first == RELAYED_USAGE
    if front == "aiohttp":
        assert still_open(upstream)  # until the upstream's lifetime ends
        assert served(upstream)
        return
    assert released(upstream) and served(upstream)


@pytest.mark.parametrize("front", FRONTS)
def test_an_upstream_that_fails_mid_stream_is_an_openai_error(
        stack: Stack, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, upstream = new_request(stack, fail="1")
    client = kept(openai.OpenAI(base_url=f"{stack.urls[front]}/v1", api_key="-", max_retries=0))
    stream = client.chat.completions.create(model="m", messages=[], stream=True,
                                            extra_query=query)
    got = []
    with pytest.raises(openai.APIError, match=STREAM_FAILED) as raised:
        for chunk in stream:
            got.append(chunk)
    assert type(raised.value) is openai.APIError  # raised from the stream's error event
    assert raised.value.body == {"message": STREAM_FAILED, "type": "server_error",
                                 "param": None, "code": None}
    assert got[0].usage is not None and got[0].usage.prompt_tokens == PROMPT
    assert upstream.finished.wait(10) and served(upstream)
    assert [r.levelname for r in quiet_logs.records if "failed mid-stream" in r.getMessage()] \
        == ["WARNING"]


@pytest.mark.parametrize("front", FRONTS)
def test_an_upstream_that_fails_mid_stream_is_an_anthropic_error(
        stack: Stack, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, upstream = new_request(stack, fail="1")
    client = kept(anthropic.Anthropic(base_url=stack.urls[front], api_key="-", max_retries=0))
    with pytest.raises(anthropic.APIStatusError) as raised:
        for _ in client.messages.create(model="m", max_tokens=5, messages=[], stream=True,
                                        extra_query=query):
            pass
    assert raised.value.body == {"type": "error", "error": {"type": "api_error",
                                                            "message": STREAM_FAILED}}
    assert upstream.finished.wait(10) and served(upstream)


@pytest.mark.parametrize("front", FRONTS)
def test_an_upstream_error_status_is_the_apps_to_map(
        stack: Stack, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query, upstream = new_request(stack, status="503")
    client = kept(openai.OpenAI(base_url=f"{stack.urls[front]}/v1", api_key="-", max_retries=0))
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="m", messages=[], stream=True, extra_query=query)
    assert raised.value.status_code == 502
    assert upstream.finished.is_set() and served(upstream)


def test_relay_response_checks_its_arguments_before_sending(stack: Stack) -> None:
    async def run() -> None:
        request: Any = object()
        with pytest.raises(TypeError, match="prompt_tokens or relay="):
            await relay_response(request, object(), None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="api"):
            await relay_response(request, object(), 1, api="gpt")  # type: ignore[arg-type]

    asyncio.run(run())


# --- ASGI 2.4's convention, and a cancelled response, driven by hand --------------------------

async def relayed(url: str) -> tuple[httpx.AsyncClient, Any]:
    client = httpx.AsyncClient(timeout=None)
    return client, await aopen_relay(client, "GET", url, PROMPT, CACHED)


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
def test_relay_response_closes_the_stream_under_both_conventions(
        stack: Stack, spec: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    url, upstream = stack.server.request()

    async def run() -> list[bytes]:
        client, stream = await relayed(url)
        asgi = AsgiClient(spec, reads=2)
        try:
            # returns quietly: no ClientDisconnect left for the server to log
            await asyncio.wait_for(RelayResponse(stream)(asgi.scope("/"), asgi.receive,
                                                         asgi.send), 30)
            assert stream.response.is_closed
        finally:
            await client.aclose()
        return asgi.bodies

    bodies = asyncio.run(run())
    assert bodies[0] == RELAYED_USAGE
    assert released(upstream)


def test_a_plain_streaming_response_leaves_the_upstream_open(stack: Stack) -> None:
    """The control, and why RelayResponse exists: a ``StreamingResponse`` under a 2.4
    server does not close its stream when the client goes away, so the upstream stays open
    for as long as anything holds the response (here the test), until the stream is
    closed."""
    url, upstream = stack.server.request()

    async def run() -> None:
        client, stream = await relayed(url)
        plain = StreamingResponse(stream, media_type="text/event-stream")
        asgi = AsgiClient("2.4", reads=2)
        with pytest.raises(ClientDisconnect):
            await plain(asgi.scope("/"), asgi.receive, asgi.send)
        gc.collect()
        assert still_open(upstream)
        await stream.aclose()
        assert released(upstream)
        await client.aclose()

    asyncio.run(run())


def test_a_cancelled_relay_response_closes_its_stream(stack: Stack) -> None:
    url, upstream = stack.server.request(quiet="1")

    async def run() -> None:
        client, stream = await relayed(url)
        asgi = AsgiClient("2.4", reads=10)
        task = asyncio.ensure_future(RelayResponse(stream)(asgi.scope("/"), asgi.receive,
                                                           asgi.send))
        while not asgi.bodies:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert stream.response.is_closed
        await client.aclose()

    asyncio.run(run())
    assert released(upstream)


def test_relay_response_over_arelay_usage(stack: Stack) -> None:
    """Any closable stream will do: here ``arelay_usage`` over a source of one's own."""
    url, upstream = stack.server.request(events="1", end="1")

    async def run() -> list[bytes]:
        async with httpx.AsyncClient() as client:
            async def source() -> AsyncIterator[bytes]:
                async with client.stream("GET", url) as response:
                    async for chunk in response.aiter_bytes():
                        yield chunk

            asgi = AsgiClient("2.4", reads=1000)
            await RelayResponse(arelay_usage(source(), PROMPT, CACHED))(
                asgi.scope("/"), asgi.receive, asgi.send)
            return asgi.bodies

    assert b"".join(asyncio.run(run())) == RELAYED_USAGE + TOKEN_EVENT


# --- client side: httpx ----------------------------------------------------------------------

def test_httpx_the_end_of_the_stream(stack: Stack) -> None:
    url, upstream = stack.server.request(events="3", end="1")

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            stream = await aopen_relay(client, "GET", url, PROMPT, CACHED)
            assert b"".join([out async for out in stream]) == RELAYED_USAGE + TOKEN_EVENT * 3
            assert stream.response.is_closed and stream.relay.counts.rewritten == 1

    asyncio.run(run())
    assert upstream.finished.wait(10) and served(upstream)


def test_httpx_aclose_and_async_with_close_the_response(stack: Stack) -> None:
    early, upstream_early = stack.server.request()
    block, upstream_block = stack.server.request()

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            stream = await aopen_relay(client, "GET", early, PROMPT, CACHED)
            assert await stream.__anext__() == RELAYED_USAGE
            assert still_open(upstream_early)
            await stream.aclose()
            assert stream.response.is_closed
            await stream.aclose()  # again: nothing
            async with await aopen_relay(client, "GET", block, PROMPT, CACHED) as stream:
                async for out in stream:
                    assert out == RELAYED_USAGE
                    break
            assert stream.response.is_closed

    asyncio.run(run())
    assert released(upstream_early) and released(upstream_block)


def test_httpx_cancelled_while_waiting_closes_the_response(stack: Stack) -> None:
    url, upstream = stack.server.request(quiet="1", events="0")

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            stream = await aopen_relay(client, "GET", url, PROMPT, CACHED)

            async def read_all() -> None:
                async for _ in stream:
                    pass

            reading = asyncio.ensure_future(read_all())
            await asyncio.sleep(0.3)
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            assert stream.response.is_closed

    asyncio.run(run())
    assert released(upstream)


def test_httpx_an_upstream_that_fails_mid_stream(stack: Stack) -> None:
    url, upstream = stack.server.request(fail="1")

    async def run() -> bytes:
        seen = b""
        async with httpx.AsyncClient() as client:
            stream = await aopen_relay(client, "GET", url, PROMPT, CACHED)
            with pytest.raises(httpx.TransportError):
                async for out in stream:
                    seen += out
            assert stream.response.is_closed
        return seen

    assert asyncio.run(run()) == RELAYED_USAGE + TOKEN_EVENT * 2
    assert served(upstream)


def test_httpx_an_error_status_is_the_callers(stack: Stack) -> None:
    url, upstream = stack.server.request(status="529")

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            stream = await aopen_relay(client, "GET", url, PROMPT, CACHED)
            assert stream.response.status_code == 529
            assert json.loads(await stream.response.aread()) == {"error": "refused"}
            await stream.aclose()
            assert stream.response.is_closed

    asyncio.run(run())


def test_httpx_bad_arguments_send_nothing(stack: Stack) -> None:
    url, upstream = stack.server.request()

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            with pytest.raises(TypeError, match="not both"):
                await aopen_relay(client, "GET", url, PROMPT, relay=object())  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                await aopen_relay(client, "GET", url, -1)

    asyncio.run(run())
    with httpx.Client() as client, pytest.raises(TypeError, match="prompt_tokens or relay="):
        open_relay(client, "GET", url)
    assert not upstream.started.wait(0.3)


def test_httpx_sync(stack: Stack) -> None:
    whole, upstream_whole = stack.server.request(events="2", end="1")
    early, upstream_early = stack.server.request()
    with httpx.Client() as client:
        stream = open_relay(client, "GET", whole, PROMPT, CACHED)
        assert b"".join(stream) == RELAYED_USAGE + TOKEN_EVENT * 2
        assert stream.response.is_closed
        with open_relay(client, "GET", early, PROMPT, CACHED) as stream:
            for out in stream:
                assert out == RELAYED_USAGE
                break
        assert stream.response.is_closed
    assert upstream_whole.finished.wait(10) and released(upstream_early)


# --- errors and imports ----------------------------------------------------------------------

def test_error_shapes() -> None:
    assert json.loads(error_body("chat", 413, "too big", param="messages")) == {
        "error": {"message": "too big", "type": "invalid_request_error",
                  "param": "messages", "code": None}}
    assert json.loads(error_body("messages", 413, "too big")) == {
        "type": "error", "error": {"type": "request_too_large", "message": "too big"}}
    assert [error_type("chat", s) for s in (400, 500, 502, 503, 504)] == [
        "invalid_request_error", "api_error", "server_error", "server_error", "server_error"]
    assert [error_type("messages", s) for s in (400, 402, 500, 502, 503, 504, 529)] == [
        "invalid_request_error", "billing_error", "api_error", "api_error", "overloaded_error",
        "timeout_error", "overloaded_error"]
    assert stream_error_event("responses").startswith(b'data: {"error": {')
    assert stream_error_event("messages").startswith(b"event: error\ndata: {")


def test_import_tokcore_imports_no_framework() -> None:
    code = ("import sys, tokcore, tokcore.adapters, tokcore.adapters.errors; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'aiohttp', 'starlette', 'httpx', 'fastapi', 'anyio'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
