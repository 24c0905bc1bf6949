"""A disaggregated-serving orchestrator on aiohttp, in front of two fake workers.

The client talks to the proxy in any of four APIs: ``/v1/chat/completions``,
``/v1/completions``, ``/v1/responses`` (OpenAI) and ``/v1/messages`` (Anthropic), streaming
or not. For each request the proxy asks the *context* worker to run the prompt, which answers
with the prompt's token ids and a ``usage``; it then hands those ids to the *generation*
worker, whose answer (a ``text/event-stream`` or one JSON body, in the API's own format) it
relays to the client. The generation worker only sees a prompt whose KV cache arrived from
elsewhere, so its usage is wrong; the proxy puts the context worker's prompt and cached
token counts into it, in each API's own field names. The workers are in fake_workers.py.

Three ways to do the proxy's job (``--mode``):

- ``tokcore`` (default), zero-decode: the ids travel as one base64 string of int32 bytes
  (``prompt_token_ids_b64``). The proxy finds that member in the context answer with
  ``tokcore.find_member`` and copies its bytes into the generation request with
  ``tokcore.set_member``: the 213 KB of a 40k-token prompt is never a Python ``str``, list or
  ``json`` value here; only the small rest of the answer (``tokcore.del_member``) is parsed.
  The stream goes through ``tokcore.arelay_usage(..., api=...)``, which forwards network
  reads as they come and rewrites only the usage values; a whole answer through
  ``tokcore.rewrite_usage``.
- ``plain``: the usual way. The ids travel as a JSON int list, and every streamed event (or
  the whole answer) is parsed with ``json.loads``, patched when it carries a usage, and
  serialised again.
- ``floor``: only what any proxy must do, and no correctness beyond the happy path: the
  counts and the ids member found by ``bytes.find`` and sliced, the stream and the answer
  forwarded untouched (the usage not rewritten). The cheapest this architecture (aiohttp in
  and out, two upstream calls, the stream copied) can be: ``bench/bench_e2e.py`` measures
  the other two against it.

The proxy follows the APIs' defaults: no ``stream`` key is a non-streaming answer; a usage
chunk comes only when the client asked (``stream_options.include_usage`` for chat and
completions). Its edges answer in each API's own error shape
(``tokcore.adapters.errors``), so the official clients raise their own typed errors:

- a body that is not a JSON object, or a bad value in it (``fake_prompt_tokens`` that is not
  a positive integer), is a 400 (``invalid_request_error``);
- a body over ``--max-body-bytes`` (default 64 MiB, what the workers accept: a prompt of
  about 250k tokens is some 1 MiB of text, far more as token ids) is a 413
  (``request_too_large`` in Anthropic's API);
- a worker that cannot be reached, or answers what the proxy cannot use, is a 502; one that
  says it is unavailable (503, or Anthropic's 529) is a 503 (Anthropic: 529,
  ``overloaded_error``); one that does not answer within ``--upstream-timeout`` is a 504:
  OpenAI's ``server_error``, Anthropic's ``api_error``;
- a stream that fails after it began ends with the API's error event; a client that goes
  away mid-stream closes the upstream stream. Neither logs a traceback.

Run it:

    python examples/disagg_proxy.py            # workers + proxy on ephemeral loopback ports
    python examples/disagg_proxy.py --demo     # ... then send one request, print it, exit
    python examples/disagg_proxy.py --role context   # one part alone (prints READY <url>)

Everything binds to 127.0.0.1 only; worker URLs given on the command line must be loopback
URLs too. Needs the ``examples`` extra (aiohttp).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import ClientError, ClientResponse, ClientSession, ClientTimeout, TCPConnector, web

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fake_workers, beside this file
from fake_workers import (  # noqa: E402
    COMPACT,
    ENDPOINTS,
    GENERATIONS,
    JSON_HEADERS,
    MODEL,
    SSE_HEADERS,
    cached_prompt_tokens,
    fake_prompt_ids,
    ids_fingerprint,
    make_context_app,
    make_generation_app,
    token_text,
)

from tokcore import arelay_usage, del_member, find_member, rewrite_usage, set_member  # noqa: E402
from tokcore.adapters.aiohttp import relay_response  # noqa: E402
from tokcore.adapters.errors import error_body  # noqa: E402

__all__ = ["GENERATIONS", "cached_prompt_tokens", "fake_prompt_ids", "ids_fingerprint",
           "token_text"]

LOOPBACK = "127.0.0.1"
MODES = ("tokcore", "plain", "floor")
IDS_KEY = "prompt_token_ids_b64"
#: request members that are the proxy's own business, not the generation worker's
CONTEXT_FIELDS = ("messages", "prompt", "input", "system", "instructions")
#: the largest request body the proxy reads by default: what the workers accept
MAX_BODY_BYTES = 64 << 20
#: how long the proxy waits for a worker's answer to begin (a whole answer to arrive)
UPSTREAM_TIMEOUT = 300.0
log = logging.getLogger("disagg_proxy")
T = TypeVar("T")


# --- the three ways to relay ---------------------------------------------------------------

def patch_usage_plain(message: dict[str, Any], api: str, prompt_tokens: int,
                      cached_tokens: int) -> None:
    """The usual way to fix a parsed message's usage, per API (a no-op when it has none)."""
    nested = message.get("response" if api == "responses" else "message")
    usage = message.get("usage") or (nested.get("usage") if isinstance(nested, dict) else None)
    if not isinstance(usage, dict):
        return
    if api == "messages":
        usage["input_tokens"] = prompt_tokens - cached_tokens
        usage["cache_read_input_tokens"] = cached_tokens
        return
    prompt, output, details = (("input_tokens", "output_tokens", "input_tokens_details")
                               if api == "responses" else
                               ("prompt_tokens", "completion_tokens", "prompt_tokens_details"))
    usage[prompt] = prompt_tokens
    usage["total_tokens"] = prompt_tokens + (usage.get(output) or 0)
    usage[details] = {**(usage.get(details) or {}), "cached_tokens": cached_tokens}


def patch_event_plain(event: bytes, api: str, prompt_tokens: int, cached_tokens: int) -> bytes:
    """One event the usual way: its data line parsed, patched and written again."""
    lines = event.split(b"\n")
    for number, line in enumerate(lines):
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            message = json.loads(line[5:])
            patch_usage_plain(message, api, prompt_tokens, cached_tokens)
            lines[number] = b"data: " + json.dumps(message, separators=COMPACT).encode()
    return b"\n".join(lines)


async def relay_plain(chunks: AsyncIterator[bytes], api: str, prompt_tokens: int,
                      cached_tokens: int) -> AsyncIterator[bytes]:
    """The usual way: split events, ``json.loads`` each, patch usage, serialise again."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *events, pending = pending.split(b"\n\n")
        if events:
            yield b"".join(patch_event_plain(event, api, prompt_tokens, cached_tokens) + b"\n\n"
                           for event in events)
    if pending:
        yield pending


async def relay_floor(chunks: AsyncIterator[bytes], api: str, prompt_tokens: int,
                      cached_tokens: int) -> AsyncIterator[bytes]:
    """The floor: the stream as it came."""
    async for chunk in chunks:
        yield chunk


async def relay_tokcore(chunks: AsyncIterator[bytes], api: str, prompt_tokens: int,
                        cached_tokens: int) -> AsyncIterator[bytes]:
    async for out in arelay_usage(chunks, prompt_tokens, cached_tokens, api=api):
        yield out


RELAYS = {"tokcore": relay_tokcore, "plain": relay_plain, "floor": relay_floor}


def whole_answer(mode: str, answer: bytes, api: str, prompt_tokens: int,
                 cached_tokens: int) -> bytes:
    """A non-streaming answer relayed in ``mode``."""
    if mode == "tokcore":
        return rewrite_usage(answer, prompt_tokens, cached_tokens, api=api)
    if mode == "plain":
        message = json.loads(answer)
        patch_usage_plain(message, api, prompt_tokens, cached_tokens)
        return json.dumps(message, separators=COMPACT).encode()
    return answer


class Context:
    """What the proxy takes from the context worker's answer: the counts and the ids."""

    def __init__(self, mode: str, answer: bytes) -> None:
        self.ids: Any  # what goes into the generation request
        if mode == "tokcore":  # zero-decode: the ids member's bytes, never a str or list
            span = find_member(answer, IDS_KEY)
            if span is None:
                raise ValueError(f"the context answer has no {IDS_KEY}")
            self.ids = memoryview(answer)[span[0]:span[1]]
            usage = json.loads(del_member(answer, IDS_KEY))["usage"]
        elif mode == "plain":
            context = json.loads(answer)
            self.ids, usage = context["prompt_token_ids"], context["usage"]
        else:  # the floor: bytes.find and slicing, the happy path only
            start = answer.index(b'"prompt_token_ids_b64":') + len(b'"prompt_token_ids_b64":')
            self.ids = answer[start:answer.index(b'"', start + 1) + 1]
            usage = {"prompt_tokens": floor_count(answer, b'"prompt_tokens":'),
                     "prompt_tokens_details": {
                         "cached_tokens": floor_count(answer, b'"cached_tokens":')}}
        self.prompt_tokens: int = usage["prompt_tokens"]
        self.cached_tokens: int = (usage.get("prompt_tokens_details") or {}).get(
            "cached_tokens", 0)


def floor_count(answer: bytes, key: bytes) -> int:
    start = answer.index(key) + len(key)
    end = start
    while answer[end:end + 1].isdigit():
        end += 1
    return int(answer[start:end])


def generation_request(mode: str, request: dict[str, Any], context: Context) -> bytes:
    """The client's request for the generation worker, with the ids in place of the prompt."""
    if mode == "plain":
        return json.dumps({**request, "prompt_token_ids": context.ids},
                          separators=COMPACT).encode()
    text = json.dumps(request, separators=COMPACT).encode()
    if mode == "tokcore":  # the one set_member call: the ids member's bytes, as they came
        return set_member(text, IDS_KEY, context.ids, trusted=True)
    return text[:-1] + b',"prompt_token_ids_b64":' + context.ids + b"}"


# --- the proxy ----------------------------------------------------------------------------

@dataclass
class ProxyState:
    context_url: str
    generation_url: str
    mode: str
    upstream_timeout: float = 300.0
    session: ClientSession | None = None
    requests: int = 0
    disconnects: int = 0
    errors: dict[int, int] = field(default_factory=dict)


class UpstreamError(Exception):
    """A worker failed: ``status`` is what the client gets for it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_response(api: str, status: int, message: str, *,
                   param: str | None = None) -> web.Response:
    """An error in the API's own JSON shape (``tokcore.adapters.errors``)."""
    return web.Response(status=status, body=error_body(api, status, message, param=param),
                        headers=JSON_HEADERS)


def check_upstream(api: str, worker: str, answer: ClientResponse) -> None:
    """A worker's status mapped to the proxy's: unavailable stays so (503; Anthropic's
    overloaded 529), a timeout stays a 504, anything else but 200 is a bad gateway."""
    if answer.status == 200:
        return
    if answer.status in (503, 529):
        status = 529 if api == "messages" else 503
    else:
        status = 504 if answer.status == 504 else 502
    raise UpstreamError(status, f"the {worker} worker answered {answer.status}")


def bad_value(body: dict[str, Any]) -> str | None:
    """The member of a request the proxy refuses, if any (the workers' checks are theirs)."""
    count = body.get("fake_prompt_tokens")
    if count is not None and (type(count) is not int or count < 1):
        return "fake_prompt_tokens"
    return None


async def read_request(request: web.Request, api: str) -> dict[str, Any] | web.Response:
    """The request's JSON object, or the API's error for what is wrong with it."""
    try:
        body = json.loads(await request.read())
    except web.HTTPRequestEntityTooLarge:
        return error_response(api, 413, "the request body is over "
                              f"{request.client_max_size} bytes")
    except ValueError as error:  # UnicodeDecodeError included
        body = error
    if not isinstance(body, dict):
        return error_response(api, 400, f"the request body is not a JSON object ({body})")
    param = bad_value(body)
    if param is not None:
        return error_response(api, 400, f"{param} must be a positive integer, not "
                              f"{json.dumps(body[param])}", param=param)
    return body


async def proxy_handler(request: web.Request) -> web.StreamResponse:
    """Context worker, then generation worker; the answer relayed in the API's format."""
    state: ProxyState = request.app[STATE]
    api = ENDPOINTS[request.path]
    body = await read_request(request, api)
    if isinstance(body, web.Response):
        state.errors[body.status] = state.errors.get(body.status, 0) + 1
        return body
    try:
        return await proxy(request, state, api, body)
    except UpstreamError as error:
        status, message = error.status, str(error)
    except TimeoutError:  # aiohttp's ServerTimeoutError is one
        status, message = 504, "a worker did not answer in time"
    except ClientError as error:  # refused, reset, a broken answer
        status, message = 502, f"a worker could not be reached ({type(error).__name__})"
    log.warning("request to %s failed: %d %s", request.path, status, message)
    state.errors[status] = state.errors.get(status, 0) + 1
    return error_response(api, status, message)


async def in_time(state: ProxyState, awaitable: Awaitable[T]) -> T:
    """``awaitable`` within the upstream timeout (asyncio.TimeoutError beyond). Only what
    comes before the stream is timed: a read timeout on the session would re-arm a timer at
    every chunk of every stream."""
    return await asyncio.wait_for(awaitable, state.upstream_timeout)


async def post(state: ProxyState, url: str, data: bytes) -> ClientResponse:
    """A worker's answer to ``data``, its status and headers read in time."""
    assert state.session is not None
    return await in_time(state, state.session.post(url, data=data, headers=JSON_HEADERS))


async def proxy(request: web.Request, state: ProxyState, api: str,
                body: dict[str, Any]) -> web.StreamResponse:
    stream = body.get("stream") is True  # every API's default is a whole answer
    state.requests += 1
    request_id = f"{os.getpid()}-{state.requests}"
    context_request = {"request_id": request_id,
                       "fake_prompt_tokens": body.get("fake_prompt_tokens"),
                       "ids_format": "list" if state.mode == "plain" else "b64",
                       **{k: body[k] for k in CONTEXT_FIELDS if k in body}}
    async with await post(state, f"{state.context_url}/context",
                          json.dumps(context_request).encode()) as answer:
        check_upstream(api, "context", answer)
        try:
            context = Context(state.mode, await in_time(state, answer.read()))
        except (ValueError, KeyError, TypeError) as error:
            raise UpstreamError(502, "the context worker's answer has no ids or usage "
                                f"({type(error).__name__})") from None

    forwarded = {k: v for k, v in body.items()
                 if k not in CONTEXT_FIELDS and k != "fake_prompt_tokens"}
    data = generation_request(state.mode, {"request_id": request_id, **forwarded}, context)
    async with await post(state, f"{state.generation_url}{request.path}", data) as upstream:
        check_upstream(api, "generation", upstream)
        if not stream:
            whole = whole_answer(state.mode, await in_time(state, upstream.read()), api,
                                 context.prompt_tokens, context.cached_tokens)
            return web.Response(body=whole, headers=JSON_HEADERS)
        if state.mode == "tokcore":  # the adapter: disconnects and upstream failures too
            response = await relay_response(request, upstream, context.prompt_tokens,
                                            context.cached_tokens, api=api,
                                            headers=SSE_HEADERS)
            if request.transport is None or request.transport.is_closing():
                state.disconnects += 1  # the client went away (the adapter closed upstream)
            return response
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        relay = RELAYS[state.mode](upstream.content.iter_any(), api, context.prompt_tokens,
                                   context.cached_tokens)
        try:
            async for out in relay:
                await response.write(out)
        except ConnectionResetError:  # the client went away: leaving closes the upstream
            state.disconnects += 1
            log.info("client of %s went away mid-stream", request_id)
            return response
        finally:
            await relay.aclose()  # type: ignore[attr-defined]
    await response.write_eof()
    return response


async def stats_handler(request: web.Request) -> web.Response:
    """This process's CPU seconds so far, for bench_e2e.py."""
    state: ProxyState = request.app[STATE]
    times = os.times()
    return web.json_response({"cpu_seconds": times.user + times.system,
                              "user_seconds": times.user, "system_seconds": times.system,
                              "requests": state.requests, "mode": state.mode,
                              "disconnects": state.disconnects, "pid": os.getpid()})


STATE = web.AppKey("state", ProxyState)


def make_proxy_app(context_url: str, generation_url: str, *, mode: str = "tokcore",
                   max_body_bytes: int = MAX_BODY_BYTES,
                   upstream_timeout: float = UPSTREAM_TIMEOUT) -> web.Application:
    """The proxy; ``max_body_bytes``: the largest request body it reads (a 413 beyond);
    ``upstream_timeout``: seconds to connect to a worker and for its answer to begin (the
    whole answer when it is not a stream; a 504 beyond)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    for url in (context_url, generation_url):
        check_loopback(url)
    app = web.Application(client_max_size=max_body_bytes)
    app[STATE] = state = ProxyState(context_url.rstrip("/"), generation_url.rstrip("/"), mode,
                                    upstream_timeout)
    timeout = ClientTimeout(total=None, sock_connect=upstream_timeout)

    async def session_context(app: web.Application) -> AsyncIterator[None]:
        state.session = ClientSession(connector=TCPConnector(limit=0), timeout=timeout,
                                      auto_decompress=False)
        yield
        await state.session.close()

    app.cleanup_ctx.append(session_context)
    for path in ENDPOINTS:
        app.router.add_post(path, proxy_handler)
    app.router.add_get("/stats", stats_handler)
    return app


# --- running it ---------------------------------------------------------------------------

def check_loopback(url: str) -> None:
    """Refuse any URL that is not http on a loopback address: this example stays local."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "http" or not loopback:
        raise ValueError(f"{url!r} is not an http URL on a loopback address")


async def start_app(app: web.Application, port: int = 0) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on 127.0.0.1 (``port`` 0: an ephemeral one); return the runner and URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, LOOPBACK, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://{LOOPBACK}:{bound}"


def spawn(role: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start one part of the example in its own process; wait for its ``READY <url>`` line."""
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", role, *extra],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"{role} did not start (said {line!r})")
    return process, line.split()[1]


async def stream_chat(session: ClientSession, url: str, prompt: str, max_tokens: int,
                      fake_prompt_tokens: int | None = None) -> list[dict[str, Any]]:
    """Send one streaming chat request; return the decoded events (the demo's client)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True},
            "fake_prompt_tokens": fake_prompt_tokens}
    async with session.post(f"{url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        text = (await response.read()).decode()
    events = [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-1:]
    return [json.loads(e) for e in events[:-1]]


async def until_signalled() -> None:
    """Wait for SIGINT or SIGTERM, so that the caller's clean-up (stopping workers) runs."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


async def serve_forever(role: str, port: int, args: argparse.Namespace) -> None:
    workers: list[subprocess.Popen[str]] = []
    try:
        if role == "context":
            app = make_context_app()
        elif role == "generation":
            app = make_generation_app()
        else:
            context_url, generation_url = args.context_url, args.generation_url
            if role == "all":
                (context, context_url), (generation, generation_url) = (
                    await asyncio.gather(asyncio.to_thread(spawn, "context"),
                                         asyncio.to_thread(spawn, "generation")))
                workers += [context, generation]
            elif not (context_url and generation_url):
                raise SystemExit("--role proxy needs --context-url and --generation-url")
            app = make_proxy_app(context_url, generation_url, mode=args.mode,
                                 max_body_bytes=args.max_body_bytes,
                                 upstream_timeout=args.upstream_timeout)
        runner, url = await start_app(app, port)
        print(f"READY {url}", flush=True)
        if role == "all" and args.demo:
            await demo(url, args.mode)
        else:
            if role == "all":
                print(f"proxy ({args.mode} mode) on {url}; try:\n"
                      f"  curl -N {url}/v1/chat/completions -d '{{\"messages\": [{{\"role\": "
                      f"\"user\", \"content\": \"hi there\"}}], \"max_tokens\": 5, "
                      f"\"stream\": true}}'", flush=True)
            await until_signalled()
        await runner.cleanup()
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=10)


async def demo(url: str, mode: str) -> None:
    async with ClientSession() as session:
        events = await stream_chat(session, url, "Tell me about int32 token ids.", 12, 40_000)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in events if c["choices"])
    print(f"mode: {mode}")
    print(f"streamed {len(events)} events; text: {text!r}")
    print(f"usage seen by the client: {json.dumps(events[-1]['usage'])}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Disaggregated-serving proxy example (tokcore vs plain JSON), on loopback.")
    parser.add_argument("--mode", choices=MODES, default="tokcore",
                        help="tokcore (default): zero-decode; plain: int lists in JSON, "
                             "json.loads on every event; floor: bytes.find, nothing rewritten")
    parser.add_argument("--plain", action="store_const", const="plain", dest="mode",
                        help="the same as --mode plain")
    parser.add_argument("--role", choices=["all", "proxy", "context", "generation"],
                        default="all", help="all (default): start both workers, serve the proxy")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: ephemeral)")
    parser.add_argument("--context-url", help="context worker (--role proxy), loopback only")
    parser.add_argument("--generation-url", help="generation worker (--role proxy), loopback only")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                        help="the largest request body (default 64 MiB; a 413 beyond)")
    parser.add_argument("--upstream-timeout", type=float, default=UPSTREAM_TIMEOUT,
                        help="seconds for a worker's answer to begin (a 504 beyond)")
    parser.add_argument("--demo", action="store_true",
                        help="with --role all: send one request, print what the client saw, exit")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve_forever(args.role, args.port, args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
