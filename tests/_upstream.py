"""A real SSE upstream on loopback for the stream and adapter tests.

An aiohttp server on its own event loop in a thread (other servers may share that loop:
``Server.run``). ``/stream?id=X&events=N`` sends the usage event and N token events, then:
``end=1`` ends the stream; ``fail=1`` aborts the connection (an upstream that dies
mid-stream); ``quiet=1`` sends nothing more (a worker that is slow to answer); else a token
event every 10 ms, for ``lifetime`` seconds at most. ``status=N`` answers N with a JSON
error body instead. Until its lifetime ends, it watches its client's connection and records
when it is closed, and when it is done with the request (``served``).

``/answer?id=X&api=A`` (or the members of the request's ``"x_answer"`` object) answers as a
worker of API ``A`` (``chat``, ``completions``,
``responses``, ``messages``) with the worker's wrong usage (the whole prompt, 1 token,
counted as cached): an event stream when the request's body says ``"stream": true``, one
JSON body otherwise (``answers``); ``status=N&shape=S`` answers N with an error body of
shape S (``ERROR_SHAPES``), ``retry_after=S`` adds the header; ``hang=1`` answers only when
its client is gone; ``fail=1`` drops the connection mid-stream; ``linger=1`` stops before the
stream's end and sends comments until its client is gone; ``ctype=T`` sets another content
type on a 2xx body.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from aiohttp import web

PROMPT, CACHED = 40, 32
USAGE_EVENT = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n'
RELAYED_USAGE = (b'data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,'
                 b'"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}\n\n')
TOKEN_EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
#: how long an upstream may take to see its client go: generous for a loaded machine
RELEASE_TIMEOUT = 20.0
#: an upstream streams at most this long, so that a test that fails still ends
UPSTREAM_LIFETIME = 60.0
T = TypeVar("T")


class Upstream:
    """One request to the upstream server, as the server saw it."""

    def __init__(self) -> None:
        self.started = threading.Event()  # the request arrived
        self.released = threading.Event()  # the client went away (its connection closed)
        self.finished = threading.Event()  # the stream was sent to its end
        self.served = threading.Event()  # the server is done with it (no connection left)


class Server:
    """The upstream, on 127.0.0.1; ``url`` is its ``/stream`` URL."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.requests: dict[str, Upstream] = {}
        self._ids = itertools.count()
        app = web.Application()
        app.router.add_route("*", "/stream", self.stream)
        app.router.add_post("/answer", self.answer)
        self.runner = web.AppRunner(app, access_log=None)
        self.url = self.run(self.start())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the server's loop; its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    async def start(self) -> str:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/stream"

    def request(self, **query: str) -> tuple[str, Upstream]:
        """A new request id's URL and its record."""
        rid = str(next(self._ids))
        upstream = self.requests.setdefault(rid, Upstream())
        url = f"{self.url}?id={rid}" + "".join(f"&{k}={v}" for k, v in query.items())
        return url, upstream

    async def stream(self, request: web.Request) -> web.StreamResponse:
        upstream = self.requests.setdefault(request.query.get("id", ""), Upstream())
        upstream.started.set()
        if request.can_read_body:
            await request.read()
        try:
            if "status" in request.query:
                upstream.finished.set()
                return web.json_response({"error": "refused"},
                                         status=int(request.query["status"]))
            return await self._stream(request, upstream)
        finally:
            upstream.served.set()

    async def _stream(self, request: web.Request, upstream: Upstream) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(USAGE_EVENT)
            for _ in range(int(request.query.get("events", "2"))):
                await response.write(TOKEN_EVENT)
            if request.query.get("end"):
                await response.write_eof()
                upstream.finished.set()
                return response
            if request.query.get("fail"):
                await asyncio.sleep(0.05)  # let the events reach the client first
                assert request.transport is not None
                request.transport.abort()  # the worker died mid-stream
                upstream.finished.set()
                return response
            deadline = time.monotonic() + float(request.query.get("lifetime",
                                                                  UPSTREAM_LIFETIME))
            while time.monotonic() < deadline:
                transport = request.transport
                if transport is None or transport.is_closing():
                    break
                if not request.query.get("quiet"):
                    await response.write(TOKEN_EVENT)
                await asyncio.sleep(0.01)
            else:
                return response  # never released: the test waiting for it fails
        except ConnectionError:
            pass  # a write found the connection closed
        upstream.released.set()
        return response

    async def answer(self, request: web.Request) -> web.StreamResponse:
        query: Mapping[str, str] = request.query
        upstream = self.requests.setdefault(query.get("id", ""), Upstream())
        upstream.started.set()
        body = json.loads(await request.read() or b"{}")
        # the request's own "x_answer" may set the query's members (tests/test_docs.py:
        # an app forwards the client's body, not its query)
        query = {**query, **{k: str(v) for k, v in (body.get("x_answer") or {}).items()}}
        try:
            if "status" in query:
                upstream.finished.set()
                headers = {"Retry-After": query["retry_after"]} if "retry_after" in query \
                    else {}
                text, ctype = ERROR_SHAPES[query.get("shape", "vllm")]
                return web.Response(status=int(query["status"]), body=text,
                                    headers={"Content-Type": ctype, **headers})
            if query.get("hang"):
                while request.transport is not None and not request.transport.is_closing():
                    await asyncio.sleep(0.02)
                upstream.released.set()
                return web.Response(status=503)
            api = query.get("api", "chat")
            if body.get("stream") is not True:
                upstream.finished.set()
                return web.Response(body=answers(api, whole=True)[0], headers={
                    "Content-Type": query.get("ctype", "application/json")})
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            events = answers(api, whole=False)
            for event in events[:-2] if query.get("fail") or query.get("linger") else events:
                await response.write(event)
            if query.get("linger"):  # a comment every 10 ms until the client is gone
                try:
                    deadline = time.monotonic() + UPSTREAM_LIFETIME
                    while time.monotonic() < deadline:
                        transport = request.transport
                        if transport is None or transport.is_closing():
                            break
                        await response.write(b": ping\n\n")
                        await asyncio.sleep(0.01)
                    else:
                        return response
                except ConnectionError:
                    pass
                upstream.released.set()
                return response
            if query.get("fail"):
                await asyncio.sleep(0.05)  # let the events reach the client first
                assert request.transport is not None
                request.transport.abort()
            else:
                await response.write_eof()
            upstream.finished.set()
            return response
        finally:
            upstream.served.set()

    def close(self) -> None:
        self.run(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def released(upstream: Upstream) -> bool:
    return upstream.released.wait(RELEASE_TIMEOUT)


def served(upstream: Upstream) -> bool:
    """The server is done with the request: nothing of it is left open there."""
    return upstream.served.wait(RELEASE_TIMEOUT)


def still_open(upstream: Upstream) -> bool:
    """The upstream has not seen its client go (a short look: the test's own control)."""
    return not upstream.released.wait(0.3)


async def released_soon(upstream: Upstream) -> bool:
    """``released``, from inside an event loop, which goes on running meanwhile."""
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while not upstream.released.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return upstream.released.is_set()


# --- /answer: each API's answers, as a generation worker gives them --------------------------

#: the tokens of an /answer stream or body
TOKENS = 3
#: error bodies as servers write them: (body, content type)
ERROR_SHAPES = {
    "vllm": (b'{"error":{"message":"max_tokens must be at least 1, got -1.",'
             b'"type":"BadRequestError","param":"max_tokens","code":400}}', "application/json"),
    "sglang": (b'{"object":"error","message":"The server is overloaded.","type":"Service'
               b'Unavailable","param":null,"code":503}', "application/json"),
    "anthropic": (b'{"type":"error","error":{"type":"overloaded_error","message":'
                  b'"Overloaded"}}', "application/json"),
    "detail": (b'{"detail":[{"loc":["body","messages"],"msg":"Input should be a valid list",'
               b'"type":"list_type"}]}', "application/json"),
    "text": (b"Internal Server Error", "text/plain; charset=utf-8"),
    "empty": (b"", "application/json"),
}
#: the message each shape's error reaches the client with (None: the proxy's own)
ERROR_MESSAGES = {"vllm": "max_tokens must be at least 1, got -1.",
                  "sglang": "The server is overloaded.", "anthropic": "Overloaded",
                  "detail": "body.messages: Input should be a valid list",
                  "text": "Internal Server Error", "empty": None}


def _chat_chunk(choices: str, usage: str = "null") -> bytes:
    return (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[' + choices.encode() + b'],"usage":' + usage.encode() + b"}\n\n")


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def answers(api: str, whole: bool) -> list[bytes]:
    """The worker's answer in ``api``: the events of a stream, or ``[body]``."""
    n = TOKENS
    openai_usage = (f'{{"prompt_tokens":1,"completion_tokens":{n},"total_tokens":{n + 1},'
                    '"prompt_tokens_details":{"cached_tokens":1}}')
    if api in ("chat", "completions"):
        if whole:
            choice = ('{"index":0,"message":{"role":"assistant","content":"' + "x" * n
                      + '"},"finish_reason":"length"}' if api == "chat" else
                      '{"index":0,"text":"' + "x" * n + '","finish_reason":"length"}')
            kind = "chat.completion" if api == "chat" else "text_completion"
            return [(f'{{"id":"c1","object":"{kind}","created":1,"model":"m","choices":'
                     f'[{choice}],"usage":{openai_usage}}}').encode()]
        if api == "chat":
            events = [_chat_chunk('{"index":0,"delta":{"role":"assistant","content":""},'
                                  '"finish_reason":null}')]
            events += [_chat_chunk('{"index":0,"delta":{"content":"x"},"finish_reason":null}')
                       for _ in range(n)]
        else:
            events = [_chat_chunk('{"index":0,"text":"x","finish_reason":null}')
                      for _ in range(n)]
        return [*events, _chat_chunk("", openai_usage), b"data: [DONE]\n\n"]
    if api == "responses":
        usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 1},
                 "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": n + 1}
        message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "x" * n, "annotations": []}]}
        done = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m",
                "status": "completed", "output": [message], "usage": usage,
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
        if whole:
            return [json.dumps(done).encode()]
        started = {**done, "status": "in_progress", "output": [], "usage": None}
        return [_event("response.created", {"response": started, "sequence_number": 0}),
                *[_event("response.output_text.delta",
                         {"item_id": "msg_1", "output_index": 0, "content_index": 0,
                          "delta": "x", "sequence_number": i + 1}) for i in range(n)],
                _event("response.completed", {"response": done, "sequence_number": n + 1})]
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [{"type": "text", "text": "x" * n}], "stop_reason": "max_tokens",
               "stop_sequence": None,
               "usage": {"input_tokens": 0, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 1, "output_tokens": n}}
    if whole:
        return [json.dumps(message).encode()]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 1}}  # type: ignore[dict-item]
    return [_event("message_start", {"message": start}),
            _event("content_block_start", {"index": 0, "content_block": {"type": "text",
                                                                          "text": ""}}),
            *[_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                   "text": "x"}})
              for _ in range(n)],
            _event("content_block_stop", {"index": 0}),
            _event("message_delta", {"delta": {"stop_reason": "max_tokens",
                                               "stop_sequence": None},
                                     "usage": {"output_tokens": n}}),
            _event("message_stop", {})]
