"""The disaggregated-serving orchestrator of disagg_proxy.py, on FastAPI under uvicorn.

The same four endpoints (``/v1/chat/completions``, ``/v1/completions``, ``/v1/responses``,
``/v1/messages``), streaming or not, in front of the same fake workers (fake_workers.py),
with the same steps (disagg_core.py): the context worker's answer read and its ids moved
into the generation request as bytes (zero-decode: ``find_member``/``set_member``, or
``convert_ids`` into a MessagePack body; ``--convention`` as the aiohttp one's), then the
generation worker's whole answer relayed by ``tokcore.adapters.starlette.relay_answer``: a
stream through the usage relay, a whole body with its usage rewritten, an error status as it
came, in the API's shape, and the same edges as the aiohttp one (404/405, 400, 413, 502,
504, each in the API's error shape).

The upstream client is aiohttp's ``ClientSession``, which ``relay_answer`` takes as it takes
an ``httpx.AsyncClient``: per streamed request it costs about a quarter of httpx's CPU
(httpx parses HTTP in Python, h11; aiohttp in C), which is most of this proxy's budget. For
the same reason uvicorn runs with httptools, its C parser, when it is installed (the
``examples`` extra has it; uvicorn falls back to h11, some 5-10 % more CPU per request here),
on asyncio's loop as the aiohttp orchestrator does. ``bench/bench_e2e.py`` measures this
orchestrator beside the aiohttp one, in the same run.

Run it:

    python examples/disagg_proxy_fastapi.py            # workers + proxy on loopback ports
    python examples/disagg_proxy_fastapi.py --demo     # ... one request, printed, then exit
    python examples/disagg_proxy_fastapi.py --convention vllm --demo   # in vLLM's convention
    python examples/disagg_proxy_fastapi.py --role proxy --context-url URL --generation-url URL

Everything binds to 127.0.0.1 only. Needs the ``examples`` extra (FastAPI, uvicorn,
httptools, aiohttp, msgspec).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from aiohttp import ClientSession, ClientTimeout, TCPConnector
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the modules beside this file
from disagg_core import (  # noqa: E402
    GENERATION_WORKER,
    MAX_BODY_BYTES,
    UPSTREAM_TIMEOUT,
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
)
from fake_workers import ENDPOINTS, LOOPBACK, until_signalled  # noqa: E402

from tokcore.adapters.starlette import relay_answer  # noqa: E402

log = logging.getLogger("disagg_proxy_fastapi")


def failure_response(failure: Failure) -> Response:
    return Response(failure.body, status_code=failure.status, headers=failure.headers)


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None when it is over ``limit`` bytes (read no further)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        return None
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def make_proxy_app(context_url: str, generation_url: str, *, convention: str = "b64",
                   max_body_bytes: int = MAX_BODY_BYTES,
                   upstream_timeout: float = UPSTREAM_TIMEOUT) -> FastAPI:
    """The proxy (tokcore's zero-decode mode); ``convention``: how the ids go between the
    workers (disagg_core's ``CONVENTIONS``); ``max_body_bytes``: the largest request body
    it reads (a 413 beyond); ``upstream_timeout``: seconds to connect to a worker and for its
    answer to begin (the whole answer when it is not a stream; a 504 beyond)."""
    handoff(convention, "tokcore")  # a ValueError for a convention that does not exist
    for url in (context_url, generation_url):
        check_loopback(url)
    state = ProxyState(context_url.rstrip("/"), generation_url.rstrip("/"), "tokcore",
                       "fastapi", upstream_timeout, convention)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        timeout = ClientTimeout(total=None, sock_connect=upstream_timeout)
        state.session = ClientSession(connector=TCPConnector(limit=0), timeout=timeout,
                                      auto_decompress=False)
        yield
        await state.session.close()

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    app.state.proxy = state

    async def proxy(request: Request) -> Response:
        """Context worker, then generation worker; the answer relayed in the API's format."""
        api = api_of(request.url.path)
        raw = await read_body(request, max_body_bytes)
        body = too_large(api, max_body_bytes) if raw is None else read_request(raw, api)
        if isinstance(body, Failure):
            state.count_error(body.status)
            return failure_response(body)
        request_id = state.next_request()
        context = await ask_context(state, request.url.path, body, request_id)
        if isinstance(context, Failure):
            log.warning("request to %s failed: %d", request.url.path, context.status)
            state.count_error(context.status)
            return failure_response(context)
        return await relay_answer(
            state.session, "POST", f"{state.generation_url}{request.url.path}",
            context.prompt_tokens, context.cached_tokens, api=api, upstream=GENERATION_WORKER,
            answer_timeout=upstream_timeout, on_complete=state.completed,
            data=generation_request(state, request.url.path, body, context, request_id),
            headers=state.handoff.headers)

    async def stats() -> JSONResponse:
        """This process's CPU seconds so far, for bench_e2e.py."""
        return JSONResponse(state.stats())

    async def http_error(request: Request, error: Exception) -> Response:
        """Starlette's own 404 and 405 in the API's error shape."""
        assert isinstance(error, HTTPException)
        if error.status_code == 405:
            allowed = (error.headers or {}).get("Allow", "POST")
            return failure_response(not_routed(request.url.path, 405, allowed))
        if error.status_code == 404:
            return failure_response(not_routed(request.url.path, 404))
        return failure_response(Failure(error.status_code, json.dumps(
            {"error": {"message": str(error.detail)}}).encode()))

    for path in ENDPOINTS:
        app.add_api_route(path, proxy, methods=["POST"])
    app.add_api_route("/stats", stats, methods=["GET"])
    app.add_exception_handler(HTTPException, http_error)
    return app


# --- running it ---------------------------------------------------------------------------

async def serve(app: FastAPI, port: int = 0) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 (``port`` 0: an ephemeral one), in this
    loop; the server, its task and its URL."""
    config = uvicorn.Config(app, host=LOOPBACK, port=port, loop="asyncio", lifespan="on",
                            log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.01)
    return server, task, f"http://{LOOPBACK}:{server.servers[0].sockets[0].getsockname()[1]}"


async def serve_forever(args: argparse.Namespace) -> None:
    workers: list[subprocess.Popen[str]] = []
    try:
        context_url, generation_url = args.context_url, args.generation_url
        if args.role == "all":
            workers, context_url, generation_url = await start_workers()
        elif not (context_url and generation_url):
            raise SystemExit("--role proxy needs --context-url and --generation-url")
        app = make_proxy_app(context_url, generation_url, convention=args.convention,
                             max_body_bytes=args.max_body_bytes,
                             upstream_timeout=args.upstream_timeout)
        server, task, url = await serve(app, args.port)
        print(f"READY {url}", flush=True)
        if args.role == "all" and args.demo:
            await demo(url, "tokcore, on FastAPI", args.convention)
        else:
            if args.role == "all":
                print(curl_hint(url, f"proxy (FastAPI, {args.convention} convention)"),
                      flush=True)
            await until_signalled()
        server.should_exit = True
        await task
    finally:
        stop_workers(workers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Disaggregated-serving proxy example on FastAPI (tokcore), on loopback.")
    proxy_arguments(parser, ["all", "proxy"])
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve_forever(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
