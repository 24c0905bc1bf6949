"""Errors in each API's own shape, for a proxy that answers in that API.

OpenAI (``api="chat"`` and ``"responses"``): ``{"error": {"message", "type", "param",
"code"}}``; Anthropic (``"messages"``): ``{"type": "error", "error": {"type", "message"}}``.
A failure after a stream has begun cannot change the status any more; both APIs then send
an error event, which the official clients raise as an error (``stream_error_event``).
"""

from __future__ import annotations

import json

from .._args import Api

#: the type each API gives a status (the others: ``invalid_request_error`` below 500)
OPENAI_TYPES = {401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 500: "api_error"}
ANTHROPIC_TYPES = {401: "authentication_error", 403: "permission_error",
                   404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                   500: "api_error", 503: "overloaded_error", 529: "overloaded_error"}
#: what a failed upstream stream is called to the client
STREAM_FAILED = "the upstream stream failed"


def error_type(api: Api, status: int) -> str:
    """The error ``type`` of ``status`` in ``api``: a server error is OpenAI's
    ``server_error`` (``api_error`` for a 500, an error of the proxy itself) and Anthropic's
    ``api_error`` (``overloaded_error`` for 503 and 529)."""
    if api == "messages":
        return ANTHROPIC_TYPES.get(status, "api_error" if status >= 500
                                   else "invalid_request_error")
    return OPENAI_TYPES.get(status, "server_error" if status >= 500
                            else "invalid_request_error")


def error_body(api: Api, status: int, message: str, *, param: str | None = None) -> bytes:
    """The JSON error body of ``status`` in ``api``'s shape (``param``: OpenAI's, the
    request member at fault)."""
    kind = error_type(api, status)
    if api == "messages":
        error: dict[str, object] = {"type": "error", "error": {"type": kind,
                                                               "message": message}}
    else:
        error = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return json.dumps(error).encode()


def stream_error_event(api: Api, message: str = STREAM_FAILED) -> bytes:
    """The SSE event that ends a stream which failed after it began: ``data: {"error":
    ...}`` in OpenAI's APIs (the openai client raises ``APIError``), ``event: error`` in
    Anthropic's (the anthropic client raises an ``APIStatusError``)."""
    body = error_body(api, 502, message)  # the upstream failed: a bad gateway's type
    return (b"event: error\ndata: " if api == "messages" else b"data: ") + body + b"\n\n"
