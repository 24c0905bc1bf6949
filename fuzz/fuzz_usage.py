"""Fuzz find_usage / rewrite_usage: both twins, json.loads as the oracle.

The first byte picks the counts and the payload's type; the rest is the payload. Where the
payload is a strict JSON object text, find_usage must point at exactly the value json.loads
gives for "usage" (the last one when the key repeats), and rewrite_usage must produce the
contract's usage object while leaving every byte outside the span as it was.
"""

from __future__ import annotations

import sys
from typing import Any

from _oracles import NOT_JSON, rewritten_usage, same_json, strict_json
from _parity import Draw, expect, fuzz_main, instrumented, load_twins, same_outcome

with instrumented(__name__ == "__main__" and "--random" not in sys.argv):
    TWINS = load_twins("usage")

FIND_ERRORS = (TypeError,)
REWRITE_ERRORS = (TypeError, ValueError, OverflowError)
COUNTS: list[Any] = [0, 1, 7, 40_000, 2**31 - 1, 2**31, 2**63, -1, True, 1.5, None, "3"]


def as_type(payload: bytes, kind: int) -> Any:
    if kind == 1:
        return bytearray(payload)
    if kind == 2:
        return memoryview(payload)
    if kind == 3:
        return payload.decode("latin-1")  # text: refused
    return payload


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    head = draw.byte()
    payload = draw.rest()
    kind = head & 3 if head & 0x80 else 0  # mostly bytes, the common case
    prompt = COUNTS[(head >> 2) % len(COUNTS)] if head & 0x40 else 12_345
    cached = None if head & 0x20 else COUNTS[(head >> 3) % 4]
    arg = as_type(payload, kind)

    span = same_outcome(TWINS, lambda t: t.find_usage(as_type(payload, kind)), FIND_ERRORS,
                        "find_usage")
    rewritten = same_outcome(TWINS, lambda t: t.rewrite_usage(as_type(payload, kind), prompt,
                                                              cached),
                             REWRITE_ERRORS, "rewrite_usage")
    if kind == 3:
        expect(getattr(span, "type", None) is TypeError, f"find_usage(str) -> {span!r}")
        return
    if span is not None:
        expect(type(span) is tuple and len(span) == 2 and 0 <= span[0] < span[1] <= len(payload),
               f"find_usage -> {span!r}, not a span of the {len(payload)}-byte payload")

    document = strict_json(payload)
    if document is NOT_JSON:
        return  # not JSON: parity is all the contract promises (and no crash)
    usage = document.get("usage") if type(document) is dict else None
    if usage is None:
        expect(span is None, f"find_usage found {span!r} where json.loads has no usage")
    else:
        expect(span is not None, f"find_usage missed usage {usage!r}")
        expect(strict_json(payload[span[0]:span[1]]) == usage,
               f"find_usage span {span!r} holds {payload[span[0]:span[1]]!r}, not {usage!r}")

    if getattr(rewritten, "type", None) is not None:
        return  # a bad count: the twins agreed on the error type
    if type(usage) is not dict:
        if usage is None:
            expect(rewritten == payload, "rewrite_usage changed a payload without usage")
            if type(arg) is bytes:  # "the same object for bytes": checked on each twin
                for twin in TWINS.values():
                    expect(twin.rewrite_usage(payload, prompt, cached) is payload,
                           f"{twin.__name__}.rewrite_usage copied an unchanged payload")
        return
    expected = rewritten_usage(usage, prompt, cached)
    if expected is None:
        expect(rewritten == payload, f"rewrite_usage changed usage it must leave: {usage!r}")
        return
    start, end = span
    tail = len(payload) - end
    expect(rewritten[:start] == payload[:start]
           and rewritten[len(rewritten) - tail:] == payload[end:],
           "rewrite_usage changed bytes outside the usage value")
    new_value = rewritten[start:len(rewritten) - tail]
    expect(same_json(strict_json(new_value), expected),
           f"rewrite_usage wrote {new_value!r} for {usage!r}")
    expect(strict_json(rewritten) is not NOT_JSON, "rewrite_usage wrote invalid JSON")


if __name__ == "__main__":
    fuzz_main("usage", test_one_input)
