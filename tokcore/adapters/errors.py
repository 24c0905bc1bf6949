"""Errors in each API's own shape, for a proxy that answers in that API.

OpenAI (``api="chat"`` and ``"responses"``): ``{"error": {"message", "type", "param",
"code"}}``; Anthropic (``"messages"``): ``{"type": "error", "error": {"type", "message"}}``.
A failure after a stream has begun cannot change the status any more; both APIs then send
an error event, which the official clients raise as an error (``stream_error_event``).

An upstream's own error answer (``relayed_error``) keeps its status and its message, put
into the API's shape; an upstream that cannot be reached or does not answer in time
(``failed_upstream``) is a 502 or a 504 naming it.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from .._args import Api

#: the type each API gives a status (the others: ``invalid_request_error`` below 500)
OPENAI_TYPES = {401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 500: "api_error"}
#: Anthropic's documented list (its errors page), with 503 as overloaded too
ANTHROPIC_TYPES = {401: "authentication_error", 402: "billing_error", 403: "permission_error",
                   404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                   500: "api_error", 503: "overloaded_error", 504: "timeout_error",
                   529: "overloaded_error"}
#: what a failed upstream stream is called to the client
STREAM_FAILED = "the upstream stream failed"
#: the most of an upstream's error body that is read for its message (the rest is dropped)
ERROR_BODY_LIMIT = 64 << 10
#: the longest message taken from an upstream's error body
MESSAGE_LIMIT = 2000


def error_type(api: Api, status: int) -> str:
    """The error ``type`` of ``status`` in ``api``: a server error is OpenAI's
    ``server_error`` (``api_error`` for a 500, an error of the proxy itself) and Anthropic's
    ``api_error`` (``overloaded_error`` for 503 and 529, ``timeout_error`` for 504)."""
    if api == "messages":
        return ANTHROPIC_TYPES.get(status, "api_error" if status >= 500
                                   else "invalid_request_error")
    return OPENAI_TYPES.get(status, "server_error" if status >= 500
                            else "invalid_request_error")


def error_body(api: Api, status: int, message: str, *, param: str | None = None,
               code: str | None = None) -> bytes:
    """The JSON error body of ``status`` in ``api``'s shape (``param``, ``code``: OpenAI's,
    the request member at fault and a machine-readable code)."""
    kind = error_type(api, status)
    if api == "messages":
        error: dict[str, object] = {"type": "error", "error": {"type": kind,
                                                               "message": message}}
    else:
        error = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return json.dumps(error).encode()


def stream_error_event(api: Api, message: str = STREAM_FAILED) -> bytes:
    """The SSE event that ends a stream which failed after it began: ``data: {"error":
    ...}`` in OpenAI's APIs (the openai client raises ``APIError``), ``event: error`` in
    Anthropic's (the anthropic client raises an ``APIStatusError``)."""
    body = error_body(api, 502, message)  # the upstream failed: a bad gateway's type
    return (b"event: error\ndata: " if api == "messages" else b"data: ") + body + b"\n\n"


# --- an upstream's errors --------------------------------------------------------------------

def client_status(upstream_status: int) -> int:
    """The status a client gets for an upstream's answer that is not a success: a 4xx or
    5xx is kept (a bad request stays the client's, an overloaded worker stays one); anything
    else (an informational, a redirect, a code past 599) is no answer a client can use: 502."""
    return upstream_status if 400 <= upstream_status <= 599 else 502


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def upstream_message(body: bytes) -> tuple[str | None, str | None, str | None]:
    """``(message, param, code)`` of an upstream's error body, each None when it has none.

    The shapes the servers write: OpenAI's and vLLM's ``{"error": {"message", "param",
    "code"}}``, SGLang's, TensorRT-LLM's and older vLLM's ``{"object": "error", "message",
    ...}``, Anthropic's ``{"type": "error", "error": {"type", "message"}}``, FastAPI's
    ``{"detail": "..."}`` or its list of validation errors, ``{"error": "..."}``; a body that
    is not JSON is its own message when it is short UTF-8 text. A ``code`` is kept only as
    a string (vLLM writes the status as an int there; OpenAI's codes are names).
    """
    try:
        data = json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        try:
            text = body.decode().strip()
        except UnicodeDecodeError:
            return None, None, None
        return (text if text and len(text) <= MESSAGE_LIMIT and text.isprintable()
                else None), None, None
    if not isinstance(data, dict):
        return None, None, None
    error = data.get("error")
    inner = error if isinstance(error, dict) else data
    message = _text(inner.get("message")) or _text(error)
    detail = data.get("detail")
    if message is None and isinstance(detail, list):  # FastAPI's validation errors
        parts = [f"{'.'.join(map(str, item.get('loc', ())))}: {item.get('msg', '')}"
                 for item in detail if isinstance(item, dict)]
        message = "; ".join(parts) or None
    message = message or _text(detail)
    if message is not None and len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + "..."
    return message, _text(inner.get("param")), _text(inner.get("code"))


def relayed_error(api: Api, upstream_status: int, body: bytes,
                  upstream: str = "the upstream") -> tuple[int, bytes]:
    """``(status, body)`` for the client of an upstream that answered ``upstream_status``
    (not a success) with ``body``: the status kept (``client_status``), the body in
    ``api``'s shape with the upstream's message (and OpenAI's ``param`` and ``code``) where
    it has one, else a message naming ``upstream`` and what it answered."""
    status = client_status(upstream_status)
    message, param, code = upstream_message(body)
    if message is None:
        try:
            reason = f" {HTTPStatus(upstream_status).phrase}"
        except ValueError:
            reason = ""
        message = f"{upstream} answered {upstream_status}{reason}"
    return status, error_body(api, status, message, param=param, code=code)


def failed_upstream(api: Api, error: BaseException, upstream: str = "the upstream", *,
                    timed_out: bool | None = None) -> tuple[int, bytes]:
    """``(status, body)`` for the client of an upstream that gave no answer: a timeout
    (``timed_out``; by default, ``error`` is a ``TimeoutError``) is a 504, ``upstream`` did
    not answer in time; anything else (refused, reset, a broken answer) a 502, ``upstream``
    could not be reached. The message names the error's class, not its text (which may hold
    the upstream's address)."""
    if timed_out is None:
        timed_out = isinstance(error, TimeoutError)
    status, what = (504, "did not answer in time") if timed_out else (502, "could not be reached")
    return status, error_body(api, status, f"{upstream} {what} ({type(error).__name__})")
