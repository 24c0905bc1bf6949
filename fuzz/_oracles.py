"""Independent oracles for the SSE harnesses, written from the specs, not from tokcore.

- :func:`whatwg_events`: the WHATWG HTML "event stream" interpretation of a whole stream.
- :func:`strict_json`: ``json.loads`` limited to RFC 8259 (no NaN/Infinity, UTF-8 only).
- :func:`rewritten_usage`: the usage object as the contract says ``rewrite_usage`` leaves it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

NOT_JSON = object()  # strict_json's answer for text that is not JSON
# (event, data, id, retry); a runtime alias, so Optional (X | None needs 3.10 there)
EventTuple = tuple[str, str, Optional[str], Optional[int]]  # noqa: UP045

_LINE = re.compile(r"(.*?)(\r\n|\r|\n)", re.S)


def whatwg_events(stream: bytes) -> list[EventTuple]:
    """Every event a conforming client dispatches for ``stream`` (read to its end).

    The stream is decoded as UTF-8 with replacement and one leading BOM dropped; a last line
    without its line end and a last event without its blank line are not dispatched.
    ``id`` is the last event ID in force (None before any ``id`` field), ``retry`` the value
    of a valid ``retry`` field of this event (None without one): tokcore's reading of the
    fields the spec keeps on the EventSource.
    """
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    events: list[EventTuple] = []
    data: list[str] = []
    kind = ""
    last_id: str | None = None
    retry: int | None = None
    for match in _LINE.finditer(text):
        line = match.group(1)
        if line == "":  # dispatch
            if data:
                events.append((kind or "message", "\n".join(data), last_id, retry))
            data, kind, retry = [], "", None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            if "\0" not in value:
                last_id = value
        elif name == "retry":
            if value and all(c in "0123456789" for c in value):
                retry = int(value)
    return events


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(data: bytes | str) -> Any:
    """The value of a JSON text, or :data:`NOT_JSON` (invalid UTF-8, NaN, bad syntax...)."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if text.startswith("\ufeff"):  # json.loads(bytes) skips a UTF-8 BOM too
            text = text[1:]
        return json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return NOT_JSON


def rewritten_usage(usage: dict[str, Any], prompt: int,
                    cached: int | None) -> dict[str, Any] | None:
    """The chat usage object after rewrite_usage(prompt, cached), keys in the contract's
    order; None when the contract leaves it as it came (foreign, or a count too long)."""
    if "prompt_tokens" not in usage and "completion_tokens" not in usage:
        return None  # another API's usage
    usage = dict(usage)
    completion = usage.get("completion_tokens")
    if type(completion) is int and abs(completion) >= 10**18:
        return None  # more than 18 digits: unreadable
    usage["prompt_tokens"] = prompt
    # "completion_tokens (0 if absent)": a value that is not an integer counts as absent
    usage["total_tokens"] = prompt + (completion if type(completion) is int else 0)
    if cached is not None:
        details = usage.get("prompt_tokens_details")
        details = dict(details) if type(details) is dict else {}
        details["cached_tokens"] = cached
        usage["prompt_tokens_details"] = details
    return usage


def same_json(a: Any, b: Any) -> bool:
    """Equal JSON values with object keys in the same order."""
    return json.dumps(a) == json.dumps(b)
