"""The whole answer relayed (tokcore.adapters.answer), end to end on loopback.

One real upstream (tests/_upstream.py's ``/answer``: each API's streams and bodies with the
worker's wrong usage, error statuses in the shapes servers write, an upstream that hangs or
fails mid-stream) and, on the same event loop, a proxy per front, each one call per request:
aiohttp's ``relay_answer`` with an aiohttp session and with an httpx client, Starlette's
``relay_answer`` with an httpx client and FastAPI's with an aiohttp session (both under
uvicorn). The official ``openai`` and ``anthropic`` clients talk to them, streaming and
not, in every API; the completion hook's record of each answer is checked too. The client
side (httpx's ``aopen_answer`` and ``open_answer``) is checked against the upstream directly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import aiohttp
import anthropic
import fastapi
import httpx
import openai
import pytest
from _clients import Fronts, kept
from _upstream import CACHED, ERROR_MESSAGES, PROMPT, TOKENS, Server, released, served
from aiohttp import web
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tokcore import RelayCounts
from tokcore.adapters import aiohttp as aiohttp_adapter
from tokcore.adapters import starlette as starlette_adapter
from tokcore.adapters.answer import Completion
from tokcore.adapters.errors import error_type
from tokcore.adapters.httpx import aopen_answer, open_answer

#: path -> (the relay's api=, the upstream's format)
ENDPOINTS = {"/v1/chat/completions": ("chat", "chat"), "/v1/completions": ("chat", "completions"),
             "/v1/responses": ("responses", "responses"), "/v1/messages": ("messages", "messages")}
FRONTS = ["aiohttp", "aiohttp+httpx", "starlette", "fastapi"]
UPSTREAM = "the generation worker"
#: how long a test lets an upstream that hangs go before the answer is a 504
ANSWER_TIMEOUT = 0.3


def dead_url() -> str:
    """A loopback URL nothing listens on (a port bound, then let go): connections refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Hooks:
    """The completion hooks' records, by the request's ``id``; a test waits for its own."""

    def __init__(self) -> None:
        self.records: dict[str, list[Completion]] = {}
        self.done: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def event(self, rid: str) -> threading.Event:
        with self.lock:
            return self.done.setdefault(rid, threading.Event())

    def record(self, rid: str, completion: Completion) -> None:
        with self.lock:
            self.records.setdefault(rid, []).append(completion)
        self.event(rid).set()

    def wait(self, rid: str) -> Completion:
        assert self.event(rid).wait(20), f"no completion for {rid}"
        (completion,) = self.records[rid]  # once per answer
        return completion


class Stack:
    """The upstream and the four fronts, on the upstream server's loop."""

    def __init__(self) -> None:
        self.server = Server()
        self.base = self.server.url.rsplit("/", 1)[0]
        self.dead = dead_url()
        self.hooks = Hooks()
        self.fronts = Fronts()
        self.closers: list[Any] = []
        self.urls = self.server.run(self.start())

    def target(self, path: str, query: dict[str, str]) -> tuple[str, str, float | None]:
        """(the upstream URL, the request id, the answer timeout) of a front's request."""
        api = ENDPOINTS[path][1]
        rest = "&".join(f"{k}={v}" for k, v in query.items())
        base = self.dead if query.get("down") else self.base
        timeout = ANSWER_TIMEOUT if query.get("hang") else None
        return f"{base}/answer?api={api}&{rest}", query.get("id", ""), timeout

    def hook(self, rid: str, kind: str) -> Any:
        if kind == "async":
            async def on_complete(completion: Completion) -> None:
                await asyncio.sleep(0)
                self.hooks.record(rid, completion)
            return on_complete
        return lambda completion: self.hooks.record(rid, completion)

    async def start(self) -> dict[str, str]:
        session = aiohttp.ClientSession()
        client = httpx.AsyncClient(timeout=None)
        self.closers += [self.fronts.stop, session.close, client.aclose]
        urls = {"aiohttp": await self.serve_aiohttp(session, "async"),
                "aiohttp+httpx": await self.serve_aiohttp(client, "sync"),
                "starlette": await self.fronts.serve_asgi(self.starlette_app(client)),
                "fastapi": await self.fronts.serve_asgi(self.fastapi_app(session))}
        return urls

    async def serve_aiohttp(self, client: Any, hook: str) -> str:
        async def relay(request: web.Request) -> web.StreamResponse:
            url, rid, timeout = self.target(request.path, dict(request.query))
            body = await request.read()
            options = ({"content": body} if isinstance(client, httpx.AsyncClient)
                       else {"data": body})
            return await aiohttp_adapter.relay_answer(
                request, client, "POST", url, PROMPT, CACHED, api=ENDPOINTS[request.path][0],
                upstream=UPSTREAM, answer_timeout=timeout, on_complete=self.hook(rid, hook),
                headers={"Content-Type": "application/json"}, **options)

        app = web.Application()
        for path in ENDPOINTS:
            app.router.add_post(path, relay)
        return await self.fronts.serve_aiohttp(app)

    async def starlette_relay(self, client: Any, request: Request, hook: str) -> Response:
        url, rid, timeout = self.target(request.url.path, dict(request.query_params))
        body = await request.body()
        options = ({"content": body} if isinstance(client, httpx.AsyncClient)
                   else {"data": body})
        return await starlette_adapter.relay_answer(
            client, "POST", url, PROMPT, CACHED, api=ENDPOINTS[request.url.path][0],
            upstream=UPSTREAM, answer_timeout=timeout, on_complete=self.hook(rid, hook),
            headers={"Content-Type": "application/json"}, **options)

    def starlette_app(self, client: httpx.AsyncClient) -> Starlette:
        async def relay(request: Request) -> Response:
            return await self.starlette_relay(client, request, "sync")

        return Starlette(routes=[Route(path, relay, methods=["POST"]) for path in ENDPOINTS])

    def fastapi_app(self, session: aiohttp.ClientSession) -> fastapi.FastAPI:
        app = fastapi.FastAPI()

        async def relay(request: fastapi.Request) -> Response:
            return await self.starlette_relay(session, request, "async")

        for path in ENDPOINTS:
            app.add_api_route(path, relay, methods=["POST"])
        return app

    async def stop(self) -> None:
        for close in self.closers:
            await close()

    def close(self) -> None:
        self.server.run(self.stop())
        self.server.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    running = Stack()
    yield running
    running.close()


def openai_client(stack: Stack, front: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{stack.urls[front]}/v1", api_key="-", max_retries=0)
    kept(client)
    return client


def anthropic_client(stack: Stack, front: str) -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=stack.urls[front], api_key="-", max_retries=0)
    kept(client)
    return client


def request_id(stack: Stack, **query: str) -> dict[str, str]:
    """The query of one new request (its ``id`` keys the upstream's and the hook's records)."""
    url, _ = stack.server.request()
    return {"id": url.rsplit("id=", 1)[1], **query}


def ask(stack: Stack, front: str, path: str, stream: bool, query: dict[str, str]) -> Any:
    """One request in the API of ``path`` with its official client: the answer, or the
    stream's events (a list)."""
    if path == "/v1/messages":
        answer: Any = anthropic_client(stack, front).messages.create(
            model="m", max_tokens=TOKENS, messages=[{"role": "user", "content": "hi"}],
            stream=stream, extra_query=query)
    else:
        client = openai_client(stack, front)
        if path == "/v1/chat/completions":
            answer = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=stream,
                extra_query=query,
                **({"stream_options": {"include_usage": True}} if stream else {}))
        elif path == "/v1/completions":
            answer = client.completions.create(
                model="m", prompt="hi", stream=stream, extra_query=query,
                **({"stream_options": {"include_usage": True}} if stream else {}))
        else:
            answer = client.responses.create(model="m", input="hi", stream=stream,
                                             extra_query=query)
    return list(answer) if stream else answer


def usage_of(path: str, answer: Any) -> Any:
    """The usage the client saw: a whole answer's, or a stream's (its last)."""
    if not isinstance(answer, list):
        return answer.usage
    if path == "/v1/messages":  # message_start has the prompt's, message_delta the output's
        start = answer[0].message.usage
        delta = [e for e in answer if e.type == "message_delta"][0].usage
        return start, delta
    if path == "/v1/responses":
        return answer[-1].response.usage
    return [c for c in answer if c.usage is not None][-1].usage


def check_usage(path: str, usage: Any) -> None:
    """The context's counts in the API's own fields (the worker said 1 token, all cached)."""
    if path == "/v1/messages":
        start, delta = usage if isinstance(usage, tuple) else (usage, usage)
        assert (start.input_tokens, start.cache_read_input_tokens) == (PROMPT - CACHED, CACHED)
        assert start.cache_creation_input_tokens == 0 and delta.output_tokens == TOKENS
    elif path == "/v1/responses":
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
            PROMPT, TOKENS, PROMPT + TOKENS)
        assert usage.input_tokens_details.cached_tokens == CACHED
    else:
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
            PROMPT, TOKENS, PROMPT + TOKENS)
        assert usage.prompt_tokens_details.cached_tokens == CACHED


# --- 2xx: a stream through the relay, a body rewritten ---------------------------------------

@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_success_reaches_the_client_with_the_contexts_usage(
        stack: Stack, front: str, path: str, stream: bool,
        quiet_logs: pytest.LogCaptureFixture) -> None:
    query = request_id(stack)
    answer = ask(stack, front, path, stream, query)
    check_usage(path, usage_of(path, answer))
    done = stack.hooks.wait(query["id"])
    assert (done.api, done.status, done.stream, done.client_gone, done.upstream_error) == (
        ENDPOINTS[path][0], 200, stream, False, None)
    assert done.counts.rewritten == (2 if stream and path == "/v1/messages" else 1)
    assert done.counts.events == (0 if not stream else done.counts.events)
    assert done.bytes_relayed > 0
    assert served(stack.server.requests[query["id"]])


@pytest.mark.parametrize("front", FRONTS)
def test_a_whole_body_is_json_with_its_length(stack: Stack, front: str) -> None:
    """The non-streaming answer the issue saw labelled text/event-stream, unrewritten."""
    query = request_id(stack)
    raw = httpx.post(f"{stack.urls[front]}/v1/chat/completions", params=query,
                     json={"model": "m", "messages": []})
    assert raw.status_code == 200
    assert raw.headers["content-type"] == "application/json"
    assert int(raw.headers["content-length"]) == len(raw.content)
    usage = json.loads(raw.content)["usage"]
    assert usage == {"prompt_tokens": PROMPT, "completion_tokens": TOKENS,
                     "total_tokens": PROMPT + TOKENS,
                     "prompt_tokens_details": {"cached_tokens": CACHED}}
    done = stack.hooks.wait(query["id"])
    assert done.counts == RelayCounts(rewritten=1) and done.bytes_relayed == len(raw.content)


def test_a_body_of_another_type_keeps_its_type(stack: Stack) -> None:
    query = request_id(stack, ctype="text/plain")
    raw = httpx.post(f"{stack.urls['aiohttp']}/v1/chat/completions", params=query, json={})
    assert raw.status_code == 200 and raw.headers["content-type"] == "text/plain"
    assert json.loads(raw.content)["usage"]["prompt_tokens"] == PROMPT


# --- an error status: the same status, the API's shape, the worker's message -----------------

#: (status, shape, openai's class, anthropic's class, anthropic's error type)
ERRORS = {
    "400-vllm": (400, "vllm", openai.BadRequestError, anthropic.BadRequestError,
                 "invalid_request_error"),
    "422-detail": (422, "detail", openai.UnprocessableEntityError,
                   anthropic.UnprocessableEntityError, "invalid_request_error"),
    "500-text": (500, "text", openai.InternalServerError, anthropic.InternalServerError,
                 "api_error"),
    "503-sglang": (503, "sglang", openai.InternalServerError,
                   anthropic.ServiceUnavailableError, "overloaded_error"),
    "529-anthropic": (529, "anthropic", openai.InternalServerError, anthropic.OverloadedError,
                      "overloaded_error"),
    "504-empty": (504, "empty", openai.InternalServerError, anthropic.GatewayTimeoutError,
                  "timeout_error"),
}


@pytest.mark.parametrize("case", ERRORS)
@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_error_status_is_the_apis_typed_error(
        stack: Stack, front: str, case: str, stream: bool,
        quiet_logs: pytest.LogCaptureFixture) -> None:
    status, shape, openai_error, anthropic_error, anthropic_type = ERRORS[case]
    message = ERROR_MESSAGES[shape] or f"{UPSTREAM} answered {status} {HTTPStatus(status).phrase}"
    query = request_id(stack, status=str(status), shape=shape)
    with pytest.raises(openai_error) as raised:
        ask(stack, front, "/v1/chat/completions", stream, query)
    assert type(raised.value) is openai_error and raised.value.status_code == status
    assert raised.value.body["message"] == message  # type: ignore[index]
    assert raised.value.type == error_type("chat", status)
    if shape == "vllm":  # the member at fault travels too
        assert raised.value.param == "max_tokens"
    done = stack.hooks.wait(query["id"])
    assert (done.status, done.upstream_error, done.counts) == (
        status, f"answered {status}", RelayCounts())
    query = request_id(stack, status=str(status), shape=shape)
    with pytest.raises(anthropic_error) as failed:
        ask(stack, front, "/v1/messages", stream, query)
    assert type(failed.value) is anthropic_error and failed.value.status_code == status
    assert failed.value.body["error"]["type"] == anthropic_type  # type: ignore[index]
    assert failed.value.body["error"]["message"] == message  # type: ignore[index]


@pytest.mark.parametrize("front", FRONTS)
def test_retry_after_goes_with_a_429(stack: Stack, front: str) -> None:
    query = request_id(stack, status="429", shape="vllm", retry_after="7")
    raw = httpx.post(f"{stack.urls[front]}/v1/responses", params=query, json={})
    assert (raw.status_code, raw.headers["retry-after"]) == (429, "7")
    assert raw.json()["error"]["type"] == "rate_limit_error"


def test_a_redirect_is_no_answer(stack: Stack) -> None:
    query = request_id(stack, status="302", shape="empty")
    with pytest.raises(openai.InternalServerError) as raised:
        ask(stack, "aiohttp+httpx", "/v1/responses", False, query)
    assert raised.value.status_code == 502
    assert raised.value.body["message"] == f"{UPSTREAM} answered 302 Found"  # type: ignore[index]


# --- no answer: 502 and 504 naming the upstream ----------------------------------------------

@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("how", ["down", "hang"])
def test_an_upstream_that_gives_no_answer_is_a_502_or_504(
        stack: Stack, front: str, how: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    status = 502 if how == "down" else 504
    what = "could not be reached" if how == "down" else "did not answer in time"
    query = request_id(stack, **{how: "1"})
    with pytest.raises(openai.InternalServerError) as raised:
        ask(stack, front, "/v1/chat/completions", True, query)
    assert raised.value.status_code == status and raised.value.type == "server_error"
    assert raised.value.body["message"].startswith(f"{UPSTREAM} {what} (")  # type: ignore[index]
    assert stack.hooks.wait(query["id"]).status == status
    query = request_id(stack, **{how: "1"})
    with pytest.raises(anthropic.InternalServerError) as failed:
        ask(stack, front, "/v1/messages", False, query)
    assert failed.value.status_code == status
    assert failed.value.body["error"]["type"] == (  # type: ignore[index]
        "api_error" if how == "down" else "timeout_error")
    if how == "hang":
        # The time may be up before the request reached the upstream (on a loaded machine
        # the proxy can still be connecting: the connect is cancelled, nothing is sent, and
        # the upstream never sees it); a request that reached it sees its client go. Either
        # way no request is left hanging there; one that arrives after this look is let go
        # the same way (its connection is already closed).
        upstream = stack.server.requests[query["id"]]
        assert not upstream.started.is_set() or released(upstream)
    assert [r.levelname for r in quiet_logs.records if "gave no answer" in r.getMessage()] == \
        ["WARNING"] * 2


# --- a stream that breaks, a client that goes away -------------------------------------------

@pytest.mark.parametrize("front", FRONTS)
def test_a_stream_that_fails_midway_ends_with_the_error_event(
        stack: Stack, front: str, quiet_logs: pytest.LogCaptureFixture) -> None:
    query = request_id(stack, fail="1")
    with pytest.raises(openai.APIError, match="upstream stream failed"):
        ask(stack, front, "/v1/chat/completions", True, query)
    done = stack.hooks.wait(query["id"])
    assert (done.status, done.client_gone, done.stream) == (200, False, True)
    assert done.upstream_error is not None and done.counts.rewritten == 0


@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_goes_away_is_in_the_record(stack: Stack, front: str,
                                                  quiet_logs: pytest.LogCaptureFixture) -> None:
    query = request_id(stack, linger="1")
    with httpx.stream("POST", f"{stack.urls[front]}/v1/messages", params=query,
                      json={"stream": True}, timeout=30) as response:
        assert response.status_code == 200
        next(response.iter_raw())  # the first read, then the client goes away
    done = stack.hooks.wait(query["id"])
    assert (done.api, done.stream, done.client_gone, done.upstream_error) == (
        "messages", True, True, None)
    assert done.counts.rewritten == 1 and done.bytes_relayed > 0  # message_start's usage
    assert stack.server.requests[query["id"]].released.wait(20)
    # one DEBUG line, under uvicorn (ASGI 2.3) too
    assert any("went away" in r.getMessage() and r.levelno == logging.DEBUG
                   for r in quiet_logs.records)


# --- the hook's own failures -----------------------------------------------------------------

def test_a_hook_that_raises_is_logged_not_raised(stack: Stack,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> tuple[int, bytes]:
        async def broken(completion: Completion) -> None:
            raise RuntimeError("the metrics backend is down")

        async with httpx.AsyncClient() as client:
            url = f"{stack.base}/answer?api=chat&" + "&".join(
                f"{k}={v}" for k, v in request_id(stack).items())
            answer = await aopen_answer(client, "POST", url, PROMPT, CACHED,
                                        on_complete=broken, json={"stream": False})
            assert answer.body is not None
            return answer.status, answer.body

    with caplog.at_level(logging.DEBUG):
        status, body = asyncio.run(run())
    assert status == 200 and json.loads(body)["usage"]["prompt_tokens"] == PROMPT
    (record,) = [r for r in caplog.records if "completion hook" in r.getMessage()]
    assert record.levelno == logging.ERROR and record.exc_info is not None


def test_the_arguments_are_checked_before_anything_is_sent(stack: Stack) -> None:
    query = request_id(stack)
    url = f"{stack.base}/answer?id={query['id']}"

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            with pytest.raises(TypeError, match="on_complete"):
                await aopen_answer(client, "POST", url, PROMPT, on_complete=5)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="cached_tokens"):
                await aopen_answer(client, "POST", url, 1, 2)
            with pytest.raises(ValueError, match="api"):
                await aopen_answer(client, "POST", url, 1, api="gpt")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="httpx.AsyncClient or an aiohttp"):
                await starlette_adapter.relay_answer(object(), "POST", url, 1)

    asyncio.run(run())
    assert not stack.server.requests[query["id"]].started.wait(0.2)


# --- the client side: httpx ------------------------------------------------------------------

def test_httpx_aopen_answer_every_branch(stack: Stack) -> None:
    records: list[Completion] = []

    async def run() -> None:
        async with httpx.AsyncClient() as client:
            async def open_(json_body: dict[str, Any], **query: str) -> Any:
                base = stack.dead if query.pop("down", None) else stack.base
                url = f"{base}/answer?api=chat&" + "&".join(
                    f"{k}={v}" for k, v in request_id(stack, **query).items())
                return await aopen_answer(client, "POST", url, PROMPT, CACHED,
                                          upstream=UPSTREAM, on_complete=records.append,
                                          json=json_body)

            async with await open_({"stream": True}) as answer:
                assert answer.status == 200 and answer.body is None
                assert answer.headers["Content-Type"] == "text/event-stream"
                relayed = b"".join([out async for out in answer.stream])
            assert b'"prompt_tokens":40,' in relayed and answer.stream.response.is_closed
            assert records[-1].counts.rewritten == 1 and not records[-1].client_gone
            assert records[-1].bytes_relayed == len(relayed)
            answer = await open_({"stream": False})
            assert (answer.status, answer.counts) == (200, RelayCounts(rewritten=1))
            answer = await open_({}, status="400", shape="vllm")
            assert answer.status == 400 and answer.upstream_status == 400
            assert json.loads(answer.body)["error"]["param"] == "max_tokens"
            answer = await open_({}, down="1")
            assert answer.status == 502 and answer.upstream_status is None
            answer = await open_({"stream": True})
            await answer.stream.__anext__()
            await answer.aclose()  # the consumer stops early: its client went away
            assert records[-1].client_gone and answer.stream.response.is_closed

    asyncio.run(run())
    assert len(records) == 5


def test_httpx_open_answer_sync(stack: Stack) -> None:
    records: list[Completion] = []

    def url(**query: str) -> str:
        base = stack.dead if query.pop("down", None) else stack.base
        return f"{base}/answer?api=messages&" + "&".join(
            f"{k}={v}" for k, v in request_id(stack, **query).items())

    with httpx.Client() as client:
        with open_answer(client, "POST", url(), PROMPT, CACHED, api="messages",
                         on_complete=records.append, json={"stream": True}) as answer:
            assert answer.stream is not None
            relayed = b"".join(answer.stream)
        assert b'"cache_read_input_tokens": 32' in relayed  # message_start's, in place
        assert b'"input_tokens":8,"cache_read_input_tokens":32}' in relayed  # message_delta's
        assert records[-1].counts.rewritten == 2 and records[-1].bytes_relayed == len(relayed)
        answer = open_answer(client, "POST", url(status="529", shape="anthropic"), PROMPT,
                             api="messages", on_complete=records.append)
        assert answer.status == 529 and json.loads(answer.body or b"") == {
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        answer = open_answer(client, "POST", url(down="1"), PROMPT, api="messages",
                             upstream=UPSTREAM, timeout=5)
        assert answer.status == 502
    assert len(records) == 2


def test_aiohttp_aopen_answer_closes_what_it_opened(stack: Stack) -> None:
    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            query = request_id(stack)
            url = f"{stack.base}/answer?api=chat&id={query['id']}"
            answer = await aiohttp_adapter.aopen_answer(session, "POST", url, PROMPT, CACHED,
                                                        json={"stream": True})
            assert answer.stream is not None
            await answer.stream.__anext__()
            await answer.aclose()
            await answer.aclose()  # again: nothing
            assert served(stack.server.requests[query["id"]])

    asyncio.run(run())



def test_a_sync_relay_refuses_an_async_hook_by_a_log_line(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    """A sync relay cannot await: the coroutine is closed (no 'never awaited' warning, an
    error under this suite's filterwarnings) and one ERROR line says why."""
    async def hook(completion: Completion) -> None:
        raise AssertionError("never run")

    url = f"{stack.base}/answer?api=chat&id={request_id(stack)['id']}"
    with caplog.at_level(logging.DEBUG), httpx.Client() as client:
        answer = open_answer(client, "POST", url, PROMPT, CACHED, on_complete=hook, json={})
    assert answer.status == 200 and answer.counts == RelayCounts(rewritten=1)
    (record,) = [r for r in caplog.records if "completion hook" in r.getMessage()]
    assert record.levelno == logging.ERROR and "cannot await" in record.getMessage()
