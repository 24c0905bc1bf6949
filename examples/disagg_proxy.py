"""A disaggregated-serving orchestrator on aiohttp, in front of two fake workers.

The client talks to the proxy (OpenAI chat completions, streaming). For each request the
proxy asks the *context* worker to run the prompt, which answers with the prompt's token
ids and a ``usage``; it then hands those ids to the *generation* worker, whose
``text/event-stream`` of chat-completion chunks it relays to the client. The generation
worker only sees a prompt whose KV cache arrived from elsewhere, so its ``usage`` is wrong;
the proxy puts the context worker's prompt and cached token counts into it.

Two ways to do the proxy's job, one flag apart:

- tokcore (default): the ids travel as one base64 string of int32 bytes
  (``prompt_token_ids_b64``, made by ``tokcore.ids_to_b64``), which the proxy copies from
  one JSON body to the next without decoding it; the stream goes through
  ``tokcore.arelay_usage``, which forwards network reads as they are and rewrites only the
  usage value (a non-streaming answer, ``"stream": false``, through ``tokcore.rewrite_usage``).
- ``--plain``: the ids travel as a JSON int list, and every streamed event (or the whole
  answer) is parsed with ``json.loads``, patched when it carries a usage, and serialised again.

Run it:

    python examples/disagg_proxy.py            # workers + proxy on ephemeral loopback ports
    python examples/disagg_proxy.py --demo     # ... then send one request, print it, exit
    python examples/disagg_proxy.py --role context   # one part alone (prints READY <url>)

The fake workers are stand-ins: the context worker "tokenizes" by inventing
``fake_prompt_tokens`` ids (a request field; default: one per word of the prompt), the
generation worker streams ``max_tokens`` canned tokens as fast as it can. Everything binds to
127.0.0.1 only; worker URLs given on the command line must be loopback URLs too.
Needs the ``examples`` extra (aiohttp).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from tokcore import arelay_usage, b64_to_ids, ids_to_b64, pack_ids, rewrite_usage

LOOPBACK = "127.0.0.1"
VOCAB = 152_000
MODEL = "fake-model"
JSON_HEADERS = {"Content-Type": "application/json"}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
# canned token texts; some look like JSON keys to show that only the real usage is touched
TOKEN_TEXTS = [" The", " usage", ' "usage": {"prompt_tokens": 1}', " of", " \u00e9t\u00e9",
               " data:", " [DONE]", "\n\n", " tokens", ' {"x": [1, 2]}', ",", " \\\"quoted\\\""]
COMPACT = (",", ":")


def token_text(position: int) -> str:
    """The text of the generation worker's ``position``-th token (the test's oracle too)."""
    return TOKEN_TEXTS[position % len(TOKEN_TEXTS)]


# --- fake context worker ------------------------------------------------------------------

@lru_cache(maxsize=64)
def fake_prompt_ids(text: str, count: int) -> tuple[int, ...]:
    """Stand-in for a tokenizer: ``count`` ids drawn from a seed made of the text."""
    rng = random.Random(zlib.crc32(text.encode()))
    return tuple(rng.randrange(VOCAB) for _ in range(count))


def cached_prompt_tokens(prompt_tokens: int) -> int:
    """Stand-in for a prefix-cache hit: about half the prompt, in 64-token blocks."""
    return prompt_tokens // 2 // 64 * 64


def ids_fingerprint(ids: Any) -> str:
    """What the generation worker reports about the ids it got (the test checks it)."""
    return f"fp_{zlib.crc32(pack_ids(ids)):08x}"


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


async def context_handler(request: web.Request) -> web.Response:
    body = json.loads(await request.read())
    text = prompt_text(body)
    count = int(body.get("fake_prompt_tokens") or len(text.split()) or 1)
    ids = fake_prompt_ids(text, count)
    answer: dict[str, Any] = {
        "request_id": body.get("request_id"),
        "usage": {"prompt_tokens": count, "completion_tokens": 0, "total_tokens": count,
                  "prompt_tokens_details": {"cached_tokens": cached_prompt_tokens(count)}},
    }
    if body.get("ids_format") == "list":
        answer["prompt_token_ids"] = list(ids)
    else:
        answer["prompt_token_ids_b64"] = ids_to_b64(ids)
    return web.Response(body=json.dumps(answer, separators=COMPACT).encode(),
                        headers=JSON_HEADERS)


# --- fake generation worker --------------------------------------------------------------

def chunk_event(head: str, choice: str, tail: str = ',"usage":null') -> bytes:
    """One ``data:`` event in the compact form pydantic-based servers emit."""
    return f'data: {head},"choices":[{choice}]{tail}}}\n\n'.encode()


async def generation_handler(request: web.Request) -> web.StreamResponse:
    body = json.loads(await request.read())
    if "prompt_token_ids_b64" in body:
        ids: Any = b64_to_ids(body["prompt_token_ids_b64"])
    else:
        ids = body["prompt_token_ids"]
    prompt, count = len(ids), int(body.get("max_tokens") or 16)
    head = json.dumps({"id": f"chatcmpl-{body.get('request_id')}",
                       "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": MODEL, "system_fingerprint": ids_fingerprint(ids)},
                      separators=COMPACT)[:-1]
    # the KV cache came from the context worker: this worker counts the whole prompt cached
    usage = {"prompt_tokens": prompt, "completion_tokens": count, "total_tokens": prompt + count,
             "prompt_tokens_details": {"cached_tokens": prompt}}
    if body.get("stream") is False:
        text = "".join(token_text(position) for position in range(count))
        whole = head.replace('"chat.completion.chunk"', '"chat.completion"') + (
            ',"choices":[{"index":0,"message":{"role":"assistant","content":'
            f'{json.dumps(text)}}},"logprobs":null,"finish_reason":"length"}}],'
            f'"usage":{json.dumps(usage, separators=COMPACT)}}}')
        return web.Response(body=whole.encode(), headers=JSON_HEADERS)
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    await response.write(chunk_event(head, '{"index":0,"delta":{"role":"assistant",'
                                           '"content":""},"logprobs":null,"finish_reason":null}'))
    for position in range(count):
        finish = '"length"' if position == count - 1 else "null"
        delta = json.dumps({"content": token_text(position)}, separators=COMPACT)
        await response.write(chunk_event(
            head, f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}'))
        if position % 16 == 15:
            await asyncio.sleep(0)  # let the other streams have their turn
    await response.write(f'data: {head},"choices":[],"usage":'
                         f'{json.dumps(usage, separators=COMPACT)}}}\n\n'.encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


# --- the proxy ----------------------------------------------------------------------------

@dataclass
class ProxyState:
    context_url: str
    generation_url: str
    plain: bool
    session: ClientSession | None = None
    requests: int = 0


def patch_usage_plain(message: dict[str, Any], prompt_tokens: int, cached_tokens: int) -> None:
    """The usual way to fix a parsed message's usage (a no-op when it has none)."""
    usage = message.get("usage")
    if usage:
        usage["prompt_tokens"] = prompt_tokens
        usage["total_tokens"] = prompt_tokens + usage.get("completion_tokens", 0)
        details = usage.get("prompt_tokens_details") or {}
        details["cached_tokens"] = cached_tokens
        usage["prompt_tokens_details"] = details


async def relay_plain(chunks: AsyncIterator[bytes], prompt_tokens: int,
                      cached_tokens: int) -> AsyncIterator[bytes]:
    """The usual way: split events, ``json.loads`` each, patch usage, serialise again."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *events, pending = pending.split(b"\n\n")
        out = []
        for event in events:
            if event.startswith(b"data:") and event[5:].strip() != b"[DONE]":
                message = json.loads(event[5:])
                patch_usage_plain(message, prompt_tokens, cached_tokens)
                event = b"data: " + json.dumps(message, separators=COMPACT).encode()
            out.append(event + b"\n\n")
        if out:
            yield b"".join(out)
    if pending:
        yield pending


async def proxy_handler(request: web.Request) -> web.StreamResponse:
    """Context worker, then generation worker; streaming (the default) or not."""
    state: ProxyState = request.app[STATE]
    assert state.session is not None
    body = json.loads(await request.read())
    stream = body.get("stream", True) is not False
    state.requests += 1
    request_id = f"{os.getpid()}-{state.requests}"
    context_request = {"request_id": request_id, "messages": body.get("messages", []),
                       "fake_prompt_tokens": body.get("fake_prompt_tokens"),
                       "ids_format": "list" if state.plain else "b64"}
    async with state.session.post(f"{state.context_url}/context", headers=JSON_HEADERS,
                                  data=json.dumps(context_request).encode()) as answer:
        answer.raise_for_status()
        context = json.loads(await answer.read())
    usage = context["usage"]
    prompt_tokens = usage["prompt_tokens"]
    cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)

    generation_request: dict[str, Any] = {
        "request_id": request_id, "model": body.get("model", MODEL),
        "max_tokens": body.get("max_tokens", 16), "stream": stream,
    }
    if stream:
        generation_request["stream_options"] = {"include_usage": True}
    if state.plain:
        generation_request["prompt_token_ids"] = context["prompt_token_ids"]
    else:  # the base64 text goes on as it came: never decoded here
        generation_request["prompt_token_ids_b64"] = context["prompt_token_ids_b64"]
    async with state.session.post(f"{state.generation_url}/generate", headers=JSON_HEADERS,
                                  data=json.dumps(generation_request).encode()) as upstream:
        upstream.raise_for_status()
        if not stream:  # one JSON body: only its usage value changes
            whole = await upstream.read()
            if state.plain:
                message = json.loads(whole)
                patch_usage_plain(message, prompt_tokens, cached_tokens)
                whole = json.dumps(message, separators=COMPACT).encode()
            else:
                whole = rewrite_usage(whole, prompt_tokens, cached_tokens)
            return web.Response(body=whole, headers=JSON_HEADERS)
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        relay = relay_plain if state.plain else arelay_usage
        async for out in relay(upstream.content.iter_any(), prompt_tokens, cached_tokens):
            await response.write(out)
    await response.write_eof()
    return response


async def stats_handler(request: web.Request) -> web.Response:
    """This process's CPU seconds so far, for bench_e2e.py."""
    state: ProxyState = request.app[STATE]
    times = os.times()
    return web.json_response({"cpu_seconds": times.user + times.system,
                              "user_seconds": times.user, "system_seconds": times.system,
                              "requests": state.requests, "plain": state.plain,
                              "pid": os.getpid()})


STATE = web.AppKey("state", ProxyState)


def make_proxy_app(context_url: str, generation_url: str, *,
                   plain: bool = False) -> web.Application:
    for url in (context_url, generation_url):
        check_loopback(url)
    app = web.Application()
    app[STATE] = state = ProxyState(context_url.rstrip("/"), generation_url.rstrip("/"), plain)

    async def session_context(app: web.Application) -> AsyncIterator[None]:
        state.session = ClientSession(connector=TCPConnector(limit=0),
                                      timeout=ClientTimeout(total=None), auto_decompress=False)
        yield
        await state.session.close()

    app.cleanup_ctx.append(session_context)
    app.router.add_post("/v1/chat/completions", proxy_handler)
    app.router.add_get("/stats", stats_handler)
    return app


def make_context_app() -> web.Application:
    app = web.Application(client_max_size=1 << 26)
    app.router.add_post("/context", context_handler)
    return app


def make_generation_app() -> web.Application:
    app = web.Application(client_max_size=1 << 26)
    app.router.add_post("/generate", generation_handler)
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
            app = make_proxy_app(context_url, generation_url, plain=args.plain)
        runner, url = await start_app(app, port)
        print(f"READY {url}", flush=True)
        if role == "all" and args.demo:
            await demo(url, args.plain)
        else:
            if role == "all":
                print(f"proxy ({'plain' if args.plain else 'tokcore'} mode) on {url}; try:\n"
                      f"  curl -N {url}/v1/chat/completions -d '{{\"messages\": [{{\"role\": "
                      f"\"user\", \"content\": \"hi there\"}}], \"max_tokens\": 5}}'", flush=True)
            await until_signalled()
        await runner.cleanup()
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=10)


async def demo(url: str, plain: bool) -> None:
    async with ClientSession() as session:
        events = await stream_chat(session, url, "Tell me about int32 token ids.", 12, 40_000)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in events if c["choices"])
    print(f"mode: {'plain' if plain else 'tokcore'}")
    print(f"streamed {len(events)} events; text: {text!r}")
    print(f"usage seen by the client: {json.dumps(events[-1]['usage'])}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Disaggregated-serving proxy example (tokcore vs plain JSON), on loopback.")
    parser.add_argument("--plain", action="store_true",
                        help="the plain way: int lists in JSON, json.loads on every event")
    parser.add_argument("--role", choices=["all", "proxy", "context", "generation"],
                        default="all", help="all (default): start both workers, serve the proxy")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: ephemeral)")
    parser.add_argument("--context-url", help="context worker (--role proxy), loopback only")
    parser.add_argument("--generation-url", help="generation worker (--role proxy), loopback only")
    parser.add_argument("--demo", action="store_true",
                        help="with --role all: send one request, print what the client saw, exit")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve_forever(args.role, args.port, args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
