"""Fuzz UsageRelay: both twins fed the same bytes in fuzzer-chosen splits.

The first 4 bytes are the control: how to split the stream, the counts and the event size
bound; the rest is the upstream byte stream. Checked, beyond twin parity call by call:
- the concatenated output does not depend on how the stream was split;
- a stream with no possible spelling of a "usage" key comes out byte for byte;
- nothing held back exceeds max_event_bytes (pending_bytes after every feed);
- decoded by the WHATWG rules, the output has the same events as the input, with the same
  data except that each usage object (as json.loads sees it) is the contract's rewrite.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from _oracles import NOT_JSON, rewritten_usage, same_json, strict_json, whatwg_events
from _parity import Draw, chunks, equal, expect, fuzz_main, instrumented, load_twins, outcome

with instrumented(__name__ == "__main__" and "--random" not in sys.argv):
    TWINS = load_twins("sse")

LIMITS = [1 << 20, 1 << 20, 1 << 20, 1, 2, 7, 16, 64, 300, 4096]


def relay_output(twin: Any, pieces: list[Any], prompt: int, cached: int | None,
                 limit: int) -> list[Any]:
    """Every return value of feed (one per piece) and close, or the exception's type."""
    relay = twin.UsageRelay(prompt, cached, max_event_bytes=limit)
    results: list[Any] = []
    for piece in pieces:
        results.append(outcome(lambda p=piece: relay.feed(p)))
        pending = relay.pending_bytes
        expect(0 <= pending <= limit,
               f"{twin.__name__}: {pending} bytes pending, over max_event_bytes={limit}")
    results.append(outcome(relay.close))
    expect(relay.pending_bytes == 0, f"{twin.__name__}: bytes pending after close()")
    return results


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    control = draw.bytes(4).ljust(4, b"\0")
    stream = draw.rest()
    rng = random.Random(control)
    cuts = sorted(rng.randint(0, len(stream)) for _ in range(control[0] % 24))
    if control[0] & 0xE0 == 0xE0 and len(stream) <= 256:  # every byte on its own
        cuts = list(range(1, len(stream)))
    limit = LIMITS[control[1] % len(LIMITS)]
    prompt = control[2] * 1000 + 7
    cached = None if control[3] & 1 else control[3] * 3
    kinds = [bytes, bytearray, memoryview]
    pieces = [kinds[(control[3] >> 1) % 3](p) for p in chunks(stream, cuts)]

    outputs = {kind: relay_output(t, pieces, prompt, cached, limit) for kind, t in TWINS.items()}
    first_kind, first = next(iter(outputs.items()))
    for kind, output in outputs.items():
        for i, (a, b) in enumerate(zip(first, output)):
            expect(equal(a, b), f"relay call {i}: {first_kind} -> {a!r}, {kind} -> {b!r}")
    for result in first:
        expect(type(result) is bytes, f"UsageRelay returned {result!r}: it must never raise")
    relayed = b"".join(first)

    for kind, twin in TWINS.items():  # the contract: "for every way the input is split"
        whole = b"".join(relay_output(twin, [stream], prompt, cached, limit))
        expect(whole == relayed, f"{kind}: output depends on the split: {whole!r} vs "
               f"{relayed!r}")
    unbounded = limit >= len(stream)  # no event can outgrow max_event_bytes

    if b"usage" not in stream and b"\\u" not in stream:
        expect(relayed == stream, "a stream without usage was changed")
        return
    try:
        stream.decode("utf-8")
    except UnicodeDecodeError:
        return  # the decoder and json.loads would see replacement characters
    check_events(stream, relayed, prompt, cached, unscanned_ok=not unbounded)


def check_events(stream: bytes, relayed: bytes, prompt: int, cached: int | None,
                 unscanned_ok: bool) -> None:
    """Same events, same fields; data rewritten exactly where json.loads sees a usage object
    (or, where an event may have outgrown max_event_bytes, possibly left as it was)."""
    before, after = whatwg_events(stream), whatwg_events(relayed)
    expect(len(before) == len(after), f"{len(before)} events in, {len(after)} out")
    for old, new in zip(before, after):
        expect(old[0] == new[0] and old[2:] == new[2:], f"event fields changed: {old} {new}")
        document = strict_json(old[1])
        usage = document.get("usage") if type(document) is dict else None
        if document is NOT_JSON or type(usage) is not dict:
            if document is not NOT_JSON:
                expect(old[1] == new[1], f"data without a usage object changed: {old} {new}")
            continue
        out = strict_json(new[1])
        expect(type(out) is dict, f"the rewritten data is not a JSON object: {new[1]!r}")
        expected = dict(document)
        new_usage = rewritten_usage(usage, prompt, cached)
        if new_usage is None:  # left as it came
            expect(old[1] == new[1], f"usage the relay must leave changed: {old} {new}")
            continue
        expected["usage"] = new_usage
        if unscanned_ok and old[1] == new[1]:
            continue
        expect(same_json(out, expected), f"usage rewrite: {old[1]!r} -> {new[1]!r}")


if __name__ == "__main__":
    fuzz_main("relay", test_one_input)
