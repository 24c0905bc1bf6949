"""The usage object rewrite_usage must produce, built with json: the tests' shared oracle.

Written from the dialect table of docs/dialects.md, not from tokcore's rules module.
"""

from __future__ import annotations

import json
from typing import Any

# api -> (prompt key, output key, total key or None, details key or None, cached key)
RULES = {
    "chat": ("prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
             "cached_tokens"),
    "responses": ("input_tokens", "output_tokens", "total_tokens", "input_tokens_details",
                  "cached_tokens"),
    "messages": ("input_tokens", "output_tokens", None, None, "cache_read_input_tokens"),
}


def expected_usage(usage: dict[str, Any], prompt: int, cached: int | None,
                   api: str = "chat") -> dict[str, Any] | None:
    """The rewritten usage object, or None when it is left as it came (foreign, unreadable)."""
    prompt_key, output_key, total_key, details_key, cached_key = RULES[api]
    if prompt_key not in usage and output_key not in usage:
        return None  # another API's usage
    usage = json.loads(json.dumps(usage))  # a copy, key order kept
    output = usage.get(output_key)
    if total_key is not None and type(output) is int and abs(output) >= 10**18:
        return None  # a count too long to be one: unreadable
    # None: no cached tokens. The caller's counts describe the whole prompt, so an existing
    # cached count becomes 0 and Anthropic's parts of the prompt sum to it.
    count = 0 if cached is None else cached
    usage[prompt_key] = prompt - count if api == "messages" else prompt
    if total_key is not None:
        usage[total_key] = prompt + (output if type(output) is int else 0)
    if details_key is None:
        if cached is not None or cached_key in usage:
            usage[cached_key] = count
    elif cached is not None:
        if not isinstance(usage.get(details_key), dict):
            usage[details_key] = {}
        usage[details_key][cached_key] = cached
    elif isinstance(usage.get(details_key), dict) and cached_key in usage[details_key]:
        usage[details_key][cached_key] = 0
    if api == "messages" and "cache_creation_input_tokens" in usage:
        usage["cache_creation_input_tokens"] = 0
    return usage


def rewritten_text(usage: dict[str, Any], expected: dict[str, Any],
                   seps: tuple[str, str] = (",", ":")) -> bytes:
    """The bytes of ``expected`` as an in-place rewrite of ``json.dumps(usage,
    separators=seps)`` writes them: members that were there keep their separators (and,
    unless set, their values' text); added members and objects put in place of another
    value are compact."""
    item_sep, key_sep = seps
    parts = []
    for i, (key, value) in enumerate(expected.items()):
        existed = key in usage
        if i:
            parts.append(item_sep if existed else ",")
        parts.append(json.dumps(key) + (key_sep if existed else ":"))
        if existed and isinstance(value, dict) and isinstance(usage[key], dict):
            parts.append(rewritten_text(usage[key], value, seps).decode())
        elif existed and not isinstance(value, dict):
            parts.append(json.dumps(value, separators=seps))
        else:
            parts.append(json.dumps(value, separators=(",", ":")))
    return ("{" + "".join(parts) + "}").encode()
