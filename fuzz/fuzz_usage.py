"""Fuzz find_usage / rewrite_usage: both twins, every dialect, json.loads as the oracle.

The first 4 bytes pick the api, the payload's type and the counts (:func:`draw_setup`); the
rest is the payload. Checked:
- arguments outside the contract raise exactly the error it names for them (``TypeError``
  for a payload that is not a contiguous bytes-like object, a count of another type than
  int, an api that is not a str; ``ValueError`` for a count outside [0, 2**63), cached >
  prompt (every api), an unknown api), each naming its argument; with a bytes-like
  payload and valid arguments, no exception at all;
- the twins give the same span and the same bytes;
- where the payload cannot spell a ``usage`` key: no span, and the payload back unchanged
  (the same object for ``bytes``);
- where it is a strict JSON text (``json.loads``, computed once): find_usage points at
  exactly the value at the dialect's first path that is present and not null, and
  rewrite_usage leaves every byte outside that value as it was and writes the dialect's
  rewrite (``_oracles.usage_outcome``) in its place, or returns the payload unchanged (the
  same object for ``bytes``) when the usage must stay as it came.
"""

from __future__ import annotations

import array
import sys
from typing import Any

from _oracles import (
    APIS,
    NOT_JSON,
    count_errors,
    may_name_usage,
    same_json,
    strict_json,
    usage_outcome,
)
from _parity import Allow, Draw, Raised, agree, fail, fuzz_main, instrumented, load_twins, outcomes

with instrumented(__name__ == "__main__" and "--random" not in sys.argv,
                  own=["stream._usage_py", "members._members_py", "stream._dialects", "_args"]):
    TWINS = load_twins("stream._usage")

PROMPTS = [0, 1, 7, 12_345, 40_000, 2**31 - 1, 2**31, 2**62, 2**63 - 1]
CACHED: list[Any] = [0, 1, 3, 7, 12_345, 2**31, 2**63 - 1]
# counts outside the contract: out of range (a 4300-digit one too) or of another type
BAD_COUNTS: list[Any] = [-1, 2**63, 2**64, 10**4300, True, False, 1.5, None, "3", b"3"]
BAD_APIS: list[Any] = [None, "Chat", "", "completions", b"chat", 1]
#: payload types: (make the argument from the bytes, the bytes the twins see or None if the
#: argument must be refused with a TypeError naming the payload)
PAYLOADS: list[Any] = [
    (bytearray, lambda b: b),
    (memoryview, lambda b: b),
    (lambda b: array.array("b", b), lambda b: b),  # a bytes-like object of another format
    # strided: refused unless Python calls the view contiguous (one item)
    (lambda b: memoryview(b)[::2], lambda b: b[::2] if memoryview(b)[::2].c_contiguous
     else None),
    (lambda b: b.decode("latin-1"), lambda b: None),  # text: refused
    (lambda b: None, lambda b: None),
]


def draw_setup(draw: Draw) -> tuple[Any, int, Any, Any]:
    """``(api, payload type, prompt, cached)``: mostly valid, bytes, no cached count."""
    api = draw.byte()
    api = APIS[api % 3] if api < 0xF0 else BAD_APIS[api % len(BAD_APIS)]
    kind = draw.byte()
    kind = 0 if kind < 0xC0 else 1 + kind % len(PAYLOADS)
    prompt = draw.byte()
    prompt = PROMPTS[prompt % len(PROMPTS)] if prompt < 0xE0 else \
        BAD_COUNTS[prompt % len(BAD_COUNTS)]
    cached = draw.byte()
    cached = None if cached < 0x80 else CACHED[cached % len(CACHED)] if cached < 0xF0 else \
        BAD_COUNTS[cached % len(BAD_COUNTS)]
    return api, kind, prompt, cached


def api_errors(api: Any) -> list[Allow]:
    if type(api) is not str:
        return [Allow(TypeError, "api")]
    return [] if api in APIS else [Allow(ValueError, "api")]


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    api, kind, prompt, cached = draw_setup(draw)
    payload = draw.rest()
    if kind:
        make, seen = PAYLOADS[kind - 1]
        arg, raw = make(payload), seen(payload)
    else:
        arg, raw = payload, payload
    errors = api_errors(api) + ([] if raw is not None else [Allow(TypeError, "payload")])
    span = agree(outcomes(TWINS, lambda t: t.find_usage(arg, api=api)), errors,
                 "find_usage", must_raise=bool(errors))
    errors += count_errors(prompt, "prompt_tokens")
    if cached is not None:
        errors += count_errors(cached, "cached_tokens")
        if type(prompt) is int and type(cached) is int and cached > prompt:
            errors.append(Allow(ValueError, "cached_tokens"))
    results = outcomes(TWINS, lambda t: t.rewrite_usage(arg, prompt, cached, api=api))
    rewritten = agree(results, errors, "rewrite_usage", must_raise=bool(errors))
    if errors or isinstance(span, Raised):
        return
    check_usage(raw, arg, span, rewritten, results, prompt, cached, api)


def check_usage(payload: bytes, arg: Any, span: Any, rewritten: bytes,
                results: dict[str, Any], prompt: int, cached: int | None, api: str) -> None:
    if span is not None and not (type(span) is tuple and len(span) == 2
                                 and 0 <= span[0] < span[1] <= len(payload)):
        fail(f"find_usage -> {span!r}, not a span of the {len(payload)}-byte payload")
    if type(rewritten) is not bytes:
        fail(f"rewrite_usage returned {type(rewritten).__name__}, not bytes")
    if not may_name_usage(payload):  # no spelling of the key: nothing to find or change
        if span is not None:
            fail(f"find_usage found {span!r} in a payload without a usage key")
        unchanged(payload, arg, rewritten, results, "a payload without a usage key")
        return
    document = strict_json(payload)
    if document is NOT_JSON:
        return  # not JSON: parity is all the contract promises (and no crash)
    fate = usage_outcome(document, prompt, cached, api)
    if fate.kind == "none":
        if span is not None:
            fail(f"{api}: find_usage found {span!r} where json.loads has no usage")
        unchanged(payload, arg, rewritten, results, "a payload without usage")
        return
    if span is None:
        fail(f"{api}: find_usage missed the usage {fate.usage!r} at {fate.path}")
    found = strict_json(payload[span[0]:span[1]])
    if found is NOT_JSON or not same_json(found, fate.usage):
        fail(f"{api}: find_usage span {span!r} holds {payload[span[0]:span[1]]!r}, not "
             f"{fate.usage!r}")
    if fate.kind != "rewritten":
        unchanged(payload, arg, rewritten, results, f"{fate.kind} usage")
        return
    start, end = span
    tail = len(payload) - end
    if rewritten[:start] != payload[:start] or rewritten[len(rewritten) - tail:] != \
            payload[end:]:
        fail(f"{api}: rewrite_usage changed bytes outside the usage value: {payload!r} -> "
             f"{rewritten!r}")
    value = strict_json(rewritten[start:len(rewritten) - tail])
    if value is NOT_JSON or not same_json(value, fate.new):
        fail(f"{api}: rewrite_usage wrote {rewritten[start:len(rewritten) - tail]!r} for "
             f"{fate.usage!r}, expected {fate.new!r}")
    whole = strict_json(rewritten)
    if whole is NOT_JSON or not same_json(whole, fate.expected):
        fail(f"{api}: rewrite_usage wrote {rewritten!r}, not the JSON text {fate.expected!r}")


def unchanged(payload: bytes, arg: Any, rewritten: bytes, results: dict[str, Any],
              what: str) -> None:
    if rewritten != payload:
        fail(f"rewrite_usage changed {what}: {payload!r} -> {rewritten!r}")
    if type(arg) is bytes:  # "the same object for bytes", each twin
        for name, result in results.items():
            if result is not arg:
                fail(f"{name} rewrite_usage copied {what} given as bytes")


if __name__ == "__main__":
    fuzz_main("usage", test_one_input)
