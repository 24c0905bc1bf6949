"""The usage object rewrite_usage must produce, built with json: the tests' shared oracle."""

from __future__ import annotations

import json
from typing import Any


def expected_usage(usage: dict[str, Any], prompt: int, cached: int | None) -> dict[str, Any]:
    usage = json.loads(json.dumps(usage))  # a copy, key order kept
    completion = usage.get("completion_tokens")
    usage["prompt_tokens"] = prompt
    usage["total_tokens"] = prompt + (completion if type(completion) is int else 0)
    if cached is not None:
        if not isinstance(usage.get("prompt_tokens_details"), dict):
            usage["prompt_tokens_details"] = {}
        usage["prompt_tokens_details"]["cached_tokens"] = cached
    return usage
