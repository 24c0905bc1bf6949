"""Fuzz EventDecoder / iter_events: both twins, split anywhere, a WHATWG oracle.

The first 2 bytes choose the splits and the chunk type; the rest is the stream. Every feed
must return the same events in both twins, and all the events together must be what the
WHATWG event-stream rules dispatch for the whole stream, however it was split.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from _oracles import whatwg_events
from _parity import Draw, chunks, equal, expect, fuzz_main, instrumented, load_twins, outcome

with instrumented(__name__ == "__main__" and "--random" not in sys.argv):
    TWINS = load_twins("events")
# a twin may share the other's decoder class: decoding twice with it would prove nothing
DECODERS = {kind: t for kind, t in TWINS.items()
            if kind == "py" or t.EventDecoder is not TWINS["py"].EventDecoder}


def decode(twin: Any, pieces: list[Any]) -> list[Any]:
    decoder = twin.EventDecoder()
    results = [outcome(lambda p=piece: decoder.feed(p)) for piece in pieces]
    results.append(outcome(decoder.close))
    return results


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    control = draw.bytes(2).ljust(2, b"\0")
    stream = draw.rest()
    rng = random.Random(control)
    cuts = sorted(rng.randint(0, len(stream)) for _ in range(control[0] % 24))
    if control[0] & 0xE0 == 0xE0 and len(stream) <= 256:  # every byte on its own
        cuts = list(range(1, len(stream)))
    kinds = [bytes, bytearray, memoryview]
    pieces = [kinds[control[1] % 3](p) for p in chunks(stream, cuts)]

    outputs = {kind: decode(t, pieces) for kind, t in DECODERS.items()}
    first_kind, first = next(iter(outputs.items()))
    for kind, output in outputs.items():
        for i, (a, b) in enumerate(zip(first, output)):
            expect(equal([tuple(e) for e in a] if isinstance(a, list) else a,
                         [tuple(e) for e in b] if isinstance(b, list) else b),
                   f"decoder call {i}: {first_kind} -> {a!r}, {kind} -> {b!r}")
    for result in first:
        expect(isinstance(result, list), f"EventDecoder raised {result!r} on bytes")
    events = [tuple(e) for result in first for e in result]
    expected = whatwg_events(stream)
    expect(events == expected, f"events {events!r}, the WHATWG rules give {expected!r}")
    for result in first:
        for event in result:
            expect(type(event.event) is str and type(event.data) is str,
                   f"event fields must be str: {event!r}")
    if control[1] & 4:  # iter_events too (every twin has its own)
        for kind, twin in TWINS.items():
            streamed = [tuple(e) for e in twin.iter_events(iter(pieces))]
            expect(streamed == expected, f"{kind} iter_events -> {streamed!r}")


if __name__ == "__main__":
    fuzz_main("events", test_one_input)
