"""A disaggregated-serving orchestrator on aiohttp, in front of two fake workers.

The client talks to the proxy in any of four APIs: ``/v1/chat/completions``,
``/v1/completions``, ``/v1/responses`` (OpenAI) and ``/v1/messages`` (Anthropic), streaming
or not. For each request the proxy asks the *context* worker to run the prompt, which answers
with the prompt's token ids and a ``usage``; it then hands those ids to the *generation*
worker, whose answer (a ``text/event-stream`` or one JSON body, in the API's own format) it
relays to the client. The generation worker only sees a prompt whose KV cache arrived from
elsewhere, so its usage is wrong; the proxy puts the context worker's prompt and cached
token counts into it, in each API's own field names. The workers are in fake_workers.py.

The steps every orchestrator takes, and the hand-off of the ids between the workers, are in
disagg_core.py, which disagg_proxy_fastapi.py (the same orchestrator on FastAPI) shares.
``--convention`` says how the workers pass the ids: ``b64`` (the default, below), or a
serving stack's own: ``trtllm`` (TensorRT-LLM's: the context answer's ids a JSON int array,
which the proxy converts straight into the MessagePack generation request with
``tokcore.convert_ids`` and embeds with ``msgspec.Raw``), ``trtllm-ctxbytes`` (the same, the
context answer's ids in base64) or ``vllm`` (the prefill answer's ``kv_transfer_params``, ids
inside, copied into the decode request with ``find_member``/``set_member``). In those,
``--mode stack`` does the hand-off as the stack's own orchestrator does (``json``, a list,
msgspec), the answer relayed by the same adapter, for comparison. In the default convention,
three ways to do the proxy's job (``--mode``):

- ``tokcore`` (default), zero-decode: the ids travel as one base64 string of int32 bytes
  (``prompt_token_ids_b64``). The proxy finds that member in the context answer with
  ``tokcore.find_member`` and copies its bytes into the generation request with
  ``tokcore.set_member``: the 213 KB of a 40k-token prompt is never a Python ``str``, list or
  ``json`` value here; only the small rest of the answer (``tokcore.del_member``) is parsed.
  The generation worker's whole answer goes through ``tokcore.adapters.aiohttp.relay_answer``:
  a stream through the relay, which forwards network reads as they come and rewrites only
  the usage values, a whole answer through ``tokcore.rewrite_usage``, an error status as it
  came, in the API's shape.
- ``plain``: the usual way. The ids travel as a JSON int list, and every streamed event (or
  the whole answer) is parsed with ``json.loads``, patched when it carries a usage, and
  serialised again.
- ``floor``: only what any proxy must do, and no correctness beyond the happy path: the
  counts and the ids member found by ``bytes.find`` and sliced, the stream and the answer
  forwarded untouched (the usage not rewritten). The cheapest this architecture (aiohttp in
  and out, two upstream calls, the stream copied) can be: ``bench/bench_e2e.py`` measures
  the others against it.

The proxy follows the APIs' defaults: no ``stream`` key is a non-streaming answer; a usage
chunk comes only when the client asked (``stream_options.include_usage`` for chat and
completions). Its edges answer in each API's own error shape
(``tokcore.adapters.errors``), so the official clients raise their own typed errors:

- a path it does not serve is a 404, a method other than POST a 405 (``Allow: POST``), in
  the shape of the API the path belongs to (Anthropic's under ``/v1/messages``);
- a body that is not a JSON object, or a bad value in a member of the proxy's own
  (``fake_prompt_tokens`` that is not a positive integer), is a 400
  (``invalid_request_error``); a bad value in a member it forwards (``"messages": 5``,
  ``"max_tokens": "abc"``) is the worker's 400, passed through with its message;
- a body over ``--max-body-bytes`` (default 64 MiB, what the workers accept: a prompt of
  about 250k tokens is some 1 MiB of text, far more as token ids) is a 413
  (``request_too_large`` in Anthropic's API);
- a worker's error status is passed through with its message (a 503 stays a 503, a 529 a
  529: ``overloaded_error`` in Anthropic's API); a worker that cannot be reached is a 502,
  one that does not answer within ``--upstream-timeout`` a 504, each naming the worker; a
  context answer without ids is a 502;
- a stream that fails after it began ends with the API's error event; a client that goes
  away mid-stream closes the upstream stream. Neither logs a traceback.

Run it:

    python examples/disagg_proxy.py            # workers + proxy on ephemeral loopback ports
    python examples/disagg_proxy.py --demo     # ... then send one request, print it, exit
    python examples/disagg_proxy.py --convention trtllm --demo   # in TensorRT-LLM's convention
    python examples/disagg_proxy.py --role context   # one part alone (prints READY <url>)

Everything binds to 127.0.0.1 only; worker URLs given on the command line must be loopback
URLs too. Needs the ``examples`` extra (aiohttp; msgspec for TensorRT-LLM's convention).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the modules beside this file
from disagg_core import (  # noqa: E402
    ADAPTER_MODES,
    CONVENTIONS,
    GENERATION_WORKER,
    HANDOFFS,
    MAX_BODY_BYTES,
    MODES,
    RELAYS,
    UPSTREAM_TIMEOUT,
    WORKERS,
    Failure,
    ProxyState,
    api_of,
    ask_context,
    check_loopback,
    curl_hint,
    demo,
    generation_request,
    handoff,
    not_routed,
    proxy_arguments,
    read_request,
    start_workers,
    stop_workers,
    too_large,
    whole_answer,
)
from disagg_core import spawn as spawn_script  # noqa: E402
from fake_workers import (  # noqa: E402
    ENDPOINTS,
    GENERATIONS,
    JSON_HEADERS,
    SSE_HEADERS,
    cached_prompt_tokens,
    fake_prompt_ids,
    ids_fingerprint,
    make_context_app,
    make_generation_app,
    serve_worker,
    start_app,
    token_text,
    until_signalled,
)

from tokcore.adapters.aiohttp import relay_answer  # noqa: E402
from tokcore.adapters.errors import failed_upstream, relayed_error  # noqa: E402

__all__ = ["CONVENTIONS", "GENERATIONS", "HANDOFFS", "MODES", "check_loopback",
           "cached_prompt_tokens", "fake_prompt_ids", "ids_fingerprint", "make_context_app",
           "make_generation_app", "make_proxy_app", "spawn", "start_app", "token_text"]

log = logging.getLogger("disagg_proxy")
STATE = web.AppKey("state", ProxyState)


def failure_response(failure: Failure) -> web.Response:
    return web.Response(status=failure.status, body=failure.body, headers=failure.headers)


@web.middleware
async def api_errors(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
    """aiohttp's own 404 and 405 (plain text) in the API's error shape."""
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed as error:
        return failure_response(not_routed(request.path, 405, ", ".join(
            sorted(error.allowed_methods))))
    except web.HTTPNotFound:
        return failure_response(not_routed(request.path, 404))


async def proxy_handler(request: web.Request) -> web.StreamResponse:
    """Context worker, then generation worker; the answer relayed in the API's format."""
    state: ProxyState = request.app[STATE]
    api = api_of(request.path)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        body: dict[str, Any] | Failure = too_large(api, request.client_max_size)
    else:
        body = read_request(raw, api)
    if isinstance(body, Failure):
        state.count_error(body.status)
        return failure_response(body)
    request_id = state.next_request()
    context = await ask_context(state, request.path, body, request_id)
    if isinstance(context, Failure):
        log.warning("request to %s failed: %d", request.path, context.status)
        state.count_error(context.status)
        return failure_response(context)
    data = generation_request(state, request.path, body, context, request_id)
    url = f"{state.generation_url}{request.path}"
    if state.mode in ADAPTER_MODES:  # the adapter: every kind of answer, the hook's counts
        return await relay_answer(request, state.session, "POST", url, context.prompt_tokens,
                                  context.cached_tokens, api=api, upstream=GENERATION_WORKER,
                                  answer_timeout=state.upstream_timeout,
                                  on_complete=state.completed, data=data,
                                  headers=state.handoff.headers)
    return await relay_baseline(request, state, api, body.get("stream") is True, url, data,
                                context.prompt_tokens, context.cached_tokens)


async def relay_baseline(request: web.Request, state: ProxyState, api: str, stream: bool,
                         url: str, data: bytes, prompt_tokens: int,
                         cached_tokens: int) -> web.StreamResponse:
    """The plain and floor modes' generation call and relay: what one writes without tokcore
    (the same error shapes, so that the modes differ only in their hot paths)."""
    assert state.session is not None
    upstream = None
    try:
        async with asyncio.timeout(state.upstream_timeout):
            upstream = await state.session.post(url, data=data, headers=JSON_HEADERS)
            whole = None if upstream.status == 200 and stream else await upstream.read()
    except (TimeoutError, ClientError, OSError) as error:
        if upstream is not None:
            upstream.close()
        status, error_body = failed_upstream(api, error, GENERATION_WORKER)
        state.count_error(status)
        return web.Response(status=status, body=error_body, headers=JSON_HEADERS)
    async with upstream:
        if upstream.status != 200:
            assert whole is not None
            status, error_body = relayed_error(api, upstream.status, whole,
                                               GENERATION_WORKER)
            state.count_error(status)
            return web.Response(status=status, body=error_body, headers=JSON_HEADERS)
        if whole is not None:
            return web.Response(body=whole_answer(state.mode, whole, api, prompt_tokens,
                                                  cached_tokens), headers=JSON_HEADERS)
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        relay = RELAYS[state.mode](upstream.content.iter_any(), api, prompt_tokens,
                                   cached_tokens)
        try:
            async for out in relay:
                await response.write(out)
        except ConnectionResetError:  # the client went away: leaving closes the upstream
            state.disconnects += 1
            log.info("a client of %s went away mid-stream", request.path)
            return response
        finally:
            await relay.aclose()  # type: ignore[attr-defined]
    await response.write_eof()
    return response


async def stats_handler(request: web.Request) -> web.Response:
    """This process's CPU seconds so far, for bench_e2e.py."""
    return web.json_response(request.app[STATE].stats())


def make_proxy_app(context_url: str, generation_url: str, *, mode: str = "tokcore",
                   convention: str = "b64", max_body_bytes: int = MAX_BODY_BYTES,
                   upstream_timeout: float = UPSTREAM_TIMEOUT) -> web.Application:
    """The proxy; ``convention``: how the ids go between the workers (``CONVENTIONS``), in
    ``mode`` (tokcore's way or a baseline: ``HANDOFFS`` has each convention's);
    ``max_body_bytes``: the largest request body it reads (a 413 beyond);
    ``upstream_timeout``: seconds to connect to a worker and for its answer to begin (the
    whole answer when it is not a stream; a 504 beyond)."""
    handoff(convention, mode)  # a ValueError for a pair that does not exist
    for url in (context_url, generation_url):
        check_loopback(url)
    app = web.Application(client_max_size=max_body_bytes, middlewares=[api_errors])
    app[STATE] = state = ProxyState(context_url.rstrip("/"), generation_url.rstrip("/"), mode,
                                    "aiohttp", upstream_timeout, convention)
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

def spawn(role: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start one part of the example in its own process (a worker, or this proxy with
    ``extra`` arguments); wait for its ``READY <url>`` line."""
    if role in ("context", "generation"):
        return spawn_script(WORKERS, "--role", role, *extra)
    return spawn_script(__file__, "--role", role, *extra)


async def serve_forever(role: str, port: int, args: argparse.Namespace) -> None:
    if role in ("context", "generation"):
        await serve_worker(role, port)
        return
    workers: list[subprocess.Popen[str]] = []
    try:
        context_url, generation_url = args.context_url, args.generation_url
        if role == "all":
            workers, context_url, generation_url = await start_workers()
        elif not (context_url and generation_url):
            raise SystemExit("--role proxy needs --context-url and --generation-url")
        app = make_proxy_app(context_url, generation_url, mode=args.mode,
                             convention=args.convention, max_body_bytes=args.max_body_bytes,
                             upstream_timeout=args.upstream_timeout)
        runner, url = await start_app(app, port)
        print(f"READY {url}", flush=True)
        if role == "all" and args.demo:
            await demo(url, args.mode, args.convention)
        else:
            if role == "all":
                print(curl_hint(url, f"proxy ({args.mode} mode, {args.convention} "
                                     "convention)"), flush=True)
            await until_signalled()
        await runner.cleanup()
    finally:
        stop_workers(workers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Disaggregated-serving proxy example (tokcore vs plain JSON), on loopback.")
    parser.add_argument("--mode", choices=MODES, default="tokcore",
                        help="tokcore (default): tokcore's functions, zero-decode; stack: the "
                             "stack's own way for --convention trtllm, trtllm-ctxbytes or vllm "
                             "(json, msgspec); with --convention b64: plain (int lists in "
                             "JSON, json.loads on every event) or floor (bytes.find, nothing "
                             "rewritten)")
    parser.add_argument("--plain", action="store_const", const="plain", dest="mode",
                        help="the same as --mode plain")
    proxy_arguments(parser, ["all", "proxy", "context", "generation"])
    args = parser.parse_args(argv)
    try:
        handoff(args.convention, args.mode)
    except ValueError as error:
        parser.error(str(error))
    try:
        asyncio.run(serve_forever(args.role, args.port, args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
