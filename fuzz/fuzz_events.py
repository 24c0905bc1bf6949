"""Fuzz EventDecoder / iter_events: both twins, split anywhere, a WHATWG oracle, the bound.

The first 5 bytes choose the entry point, the bound, the splits and the chunk type
(:func:`draw_setup`); the rest is the stream. ``max_event_bytes`` is a small one (1..300)
for 3 inputs in 8, so that events pass it, else the default. The oracle
(``_oracles.whatwg_stream``, computed once) gives every event the WHATWG rules dispatch with
the offset of the byte that dispatches it, and the offset of every byte that passes the
bound (the event is dropped, as EventTooLarge says). Each input goes through one entry point
on both twins, and each call must do exactly what the oracle says for the bytes it was given:
- ``EventDecoder.feed`` piece by piece: the events dispatched by the piece's bytes, as
  ``Event`` objects with fields of the right types; where the piece passed the bound,
  exactly ``EventTooLarge`` with those events (``.events``) and those offsets
  (``.offsets``); never another exception on data; ``pending_bytes`` at most the bound and
  the same in both twins; ``close()`` gives nothing. For some inputs one more feed after
  ``close()``, which must raise exactly ``ValueError("feed() after close()")``; for some a
  ``str`` chunk first, which must raise exactly a ``TypeError`` naming the chunk;
- ``iter_events`` over the pieces: the events up to the piece that first passes the bound,
  which then ends it with that ``EventTooLarge``.
The twins must agree call by call, error messages included.
"""

from __future__ import annotations

import sys
from typing import Any

from _oracles import whatwg_stream
from _parity import (
    Allow,
    Draw,
    agree,
    chunks,
    cuts,
    fail,
    fuzz_main,
    instrumented,
    load_twins,
    outcomes,
)

with instrumented(__name__ == "__main__" and "--random" not in sys.argv,
                  own=["stream._events_py", "_args"], native_skip=["stream._events_py"]):
    TWINS = load_twins("stream._events")
# a twin may share the other's decoder class: decoding twice with it would prove nothing
DECODERS = {kind: t for kind, t in TWINS.items()
            if kind == "py" or t.EventDecoder is not TWINS["py"].EventDecoder}
EVENT = TWINS["py"].Event  # both twins make this class's objects
TOO_LARGE = TWINS["py"].EventTooLarge  # and raise this one
KINDS = [bytes, bytearray, memoryview]
AFTER_CLOSE = [Allow(ValueError, "feed() after close()", "==")]
NOT_BYTES = [Allow(TypeError, "chunk")]


def draw_setup(draw: Draw) -> tuple[int, int | None, int, int]:
    """``(mode, bound, cut seed, chunk kind)``: mode % 3 == 2 iter_events, else the decoder
    (bit 2: a feed after close, bit 3: a str chunk first); bound None: the default."""
    mode = draw.byte()
    small = draw.int(1, 300)  # 2 bytes
    bound = small if mode >= 160 else None
    seed = draw.byte() | draw.byte() << 8
    return mode, bound, seed, seed >> 14


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    mode, bound, seed, kind = draw_setup(draw)
    stream = draw.rest()
    if seed >= 0xF800 and len(stream) <= 128:  # every byte on its own
        pieces: list[Any] = [stream[i:i + 1] for i in range(len(stream))]
    else:
        pieces = chunks(stream, cuts(len(stream), seed % 17, seed))
    if kind % 3:
        pieces = [KINDS[kind % 3](p) for p in pieces]
    options = {} if bound is None else {"max_event_bytes": bound}
    expected = per_piece(pieces, *whatwg_stream(stream, bound))
    if mode % 3 == 2:
        check_iter(pieces, options, expected)
        return
    if mode & 8:  # a chunk of the wrong type: refused, exactly
        agree(outcomes(DECODERS, lambda t: t.EventDecoder(**options).feed(
            stream.decode("latin-1"))), NOT_BYTES, "EventDecoder.feed(str)", must_raise=True)
    decoders = {name: twin.EventDecoder(**options) for name, twin in DECODERS.items()}
    results = {name: decode(decoder, pieces, name) for name, decoder in decoders.items()}
    check_decoded(results, expected, bound)
    if mode & 4:  # the stream is over: one more feed is a ValueError, exactly
        agree(outcomes(decoders, lambda d: d.feed(b"data: x\n\n")), AFTER_CLOSE,
              "EventDecoder.feed() after close()", must_raise=True)


def per_piece(pieces: list[Any], events: list[Any], drops: list[int]) -> list[Any]:
    """For each piece, ``(the events its bytes dispatch, the drops among its bytes)``."""
    expected, start, e, d = [], 0, 0, 0
    for piece in pieces:
        end = start + len(piece)
        first_e, first_d = e, d
        while e < len(events) and events[e][1] < end:
            e += 1
        while d < len(drops) and drops[d] < end:
            d += 1
        expected.append(([event for event, _ in events[first_e:e]], drops[first_d:d]))
        start = end
    return expected


def decode(decoder: Any, pieces: list[Any], name: str) -> list[Any]:
    """What each feed gives (its events, or ``("too large", message, events, offsets)``)
    and pending_bytes after it, then what close gives; nothing else may be raised."""
    results: list[Any] = []
    try:
        for piece in pieces:
            try:
                results.append(decoder.feed(piece))
            except TOO_LARGE as exc:
                if type(exc) is not TOO_LARGE:
                    raise
                results.append(("too large", str(exc), exc.events, exc.offsets))
            results.append(decoder.pending_bytes)
        results.append(decoder.close())
    except Exception as exc:
        fail(f"{name} EventDecoder raised {exc!r} on bytes")
    return results


def check_decoded(results: dict[str, list[Any]], expected: list[Any], bound: int | None) -> None:
    first_name, first = next(iter(results.items()))
    for name, result in results.items():
        if result != first:
            fail(f"decoder twins differ: {first_name} -> {first!r}, {name} -> {result!r}")
    if first[-1] != []:
        fail(f"EventDecoder.close() gave {first[-1]!r}")
    for (events, drops), result, pending in zip(expected, first[0:-1:2], first[1:-1:2]):
        if bound is not None and not 0 <= pending <= bound:
            fail(f"{pending} bytes pending, over max_event_bytes={bound}")
        if drops:
            if type(result) is not tuple:
                fail(f"EventDecoder.feed returned {result!r}; its bytes pass the bound at "
                     f"{drops} (events {events!r})")
            check_events(result[2], events, "EventTooLarge.events")
            if result[3] != drops:
                fail(f"EventTooLarge.offsets {result[3]}, the bound is passed at {drops}")
        elif type(result) is not list:
            fail(f"EventDecoder.feed gave {result!r}, expected the events {events!r}")
        else:
            check_events(result, events, "EventDecoder.feed")


def check_iter(pieces: list[Any], options: dict[str, int], expected: list[Any]) -> None:
    """iter_events: each twin yields the events up to the piece that first passes the
    bound, then raises that EventTooLarge (the same one in both twins)."""
    want: list[Any] = []
    drops: list[int] = []
    for events, dropped in expected:
        want += events
        if dropped:
            drops = dropped
            break
    ends = {}
    for name, twin in TWINS.items():
        got: list[Any] = []
        try:
            for event in twin.iter_events(iter(pieces), **options):
                got.append(event)
            end: Any = None
        except TOO_LARGE as exc:
            end = (type(exc), str(exc), exc.offsets)
        except Exception as exc:
            fail(f"{name} iter_events raised {exc!r} on bytes")
        check_events(got, want, f"{name} iter_events")
        if (end is None) != (not drops) or end is not None and end[2] != drops:
            fail(f"{name} iter_events ended with {end!r}; the bound is passed at {drops}")
        ends[name] = end
    if len(set(map(repr, ends.values()))) > 1:
        fail(f"iter_events twins end differently: {ends}")


def check_events(events: list[Any], expected: list[Any], what: str) -> None:
    if events != expected:
        fail(f"{what} -> {events!r}, the WHATWG rules give {expected!r}")
    for event in events:
        if type(event) is not EVENT or type(event.event) is not str \
                or type(event.data) is not str or type(event.id) not in (str, type(None)) \
                or type(event.retry) not in (int, type(None)):
            fail(f"{what}: not an Event with fields of the right types: {event!r}")


if __name__ == "__main__":
    fuzz_main("events", test_one_input)
