"""EventDecoder and iter_events on both twins: the WHATWG rules (the standard's examples and
each rule, split at every offset), the decoder's bound (max_event_bytes) and its argument
checks.

Under the bound, what is held is the unfinished line plus the event's data buffer (each data
value and a LF) and its event type; line ends are not held. An independent line-by-line model
of that rule (``model`` below: it reads the whole stream at once and decodes lines as text) is
the oracle for which events come out and at which stream offsets the bound is passed,
whatever the chunking; the twins must also agree call by call, errors included.
"""

from __future__ import annotations

import pickle
import re
import tracemalloc
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from _budget import examples
from _twins import twin as twin_of
from _twins import twins
from hypothesis import given, settings
from hypothesis import strategies as st

import tokcore
from tokcore.stream import _events_py
from tokcore.stream._events_py import DEFAULT_MAX_EVENT_BYTES, Event, EventTooLarge

MiB = 1 << 20
LINE_END = re.compile(rb"\r\n|\r|\n")


def model(stream: bytes, limit: int) -> tuple[list[tuple[Any, ...]], list[int]]:
    """(events, offsets where the bound was passed) by the WHATWG rules plus the bound."""
    events: list[tuple[Any, ...]] = []
    offsets: list[int] = []
    data: list[str] = []
    data_bytes = 0  # held: each data value's bytes and a LF
    kind, kind_bytes = "", 0
    last_id: str | None = None
    id_before: str | None = None
    retry: int | None = None
    skipping, first, pos = False, True, 0
    while pos < len(stream):
        match = LINE_END.search(stream, pos)
        end = match.start() if match else len(stream)
        raw = stream[pos:end]
        if skipping:
            if match and not raw:
                skipping = False
        elif data_bytes + kind_bytes + len(raw) > limit:
            offsets.append(pos + limit - data_bytes - kind_bytes)
            data, data_bytes, kind, kind_bytes, retry = [], 0, "", 0, None
            last_id, skipping, first = id_before, True, False
        elif match:
            if first:
                first = False
                raw = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
            line = raw.decode("utf-8", "replace")
            if not line:
                if data:
                    events.append((kind or "message", "\n".join(data), last_id, retry))
                data, data_bytes, kind, kind_bytes, retry = [], 0, "", 0, None
                id_before = last_id
            elif not line.startswith(":"):
                name, colon, value = line.partition(":")
                value = value[1:] if colon and value.startswith(" ") else value
                raw_value = raw.partition(b":")[2]  # held as bytes: count those
                size = len(raw_value) - raw_value.startswith(b" ")
                if name == "data":
                    data.append(value)
                    data_bytes += size + 1
                elif name == "event":
                    kind, kind_bytes = value, size
                elif name == "id" and "\0" not in value:
                    last_id = value
                elif name == "retry" and value.isascii() and value.isdigit():
                    retry = int(value)
        pos = match.end() if match else len(stream)
    return events, offsets


def outcome(call: Callable[[], list[Any]]) -> Any:
    """A call's result in comparable form: its events, or its error with what it carries."""
    try:
        return [tuple(e) for e in call()]
    except EventTooLarge as exc:
        return ("EventTooLarge", str(exc), [tuple(e) for e in exc.events], exc.offsets)


def run(twin: ModuleType, pieces: list[bytes], limit: int) -> list[Any]:
    """Every call's outcome; the held bytes checked against the bound after each one."""
    decoder = twin.EventDecoder(max_event_bytes=limit)
    results = []
    for piece in pieces:
        results.append(outcome(lambda p=piece: decoder.feed(p)))
        assert 0 <= decoder.pending_bytes <= limit
    results.append(outcome(decoder.close))
    assert decoder.pending_bytes == 0
    return results


def flatten(results: list[Any]) -> tuple[list[Any], list[int]]:
    events: list[Any] = []
    offsets: list[int] = []
    for result in results:
        if isinstance(result, list):
            events += result
        else:
            events += result[2]
            offsets += result[3]
    return events, offsets


def splits(stream: bytes) -> list[list[bytes]]:
    """Whole, every two-way split, 1-byte reads, and a few fixed read sizes."""
    ways = [[stream], [stream[i:i + 1] for i in range(len(stream))]]
    ways += [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    for size in (2, 3, 7, 64):
        ways.append([stream[i:i + size] for i in range(0, len(stream), size)])
    return ways


def check_everywhere(stream: bytes, limit: int) -> list[Any]:
    """Both twins, every split: the same outcome call by call, the model's events and
    offsets overall. Returns the whole-stream outcome."""
    expected = model(stream, limit)
    whole = None
    for pieces in splits(stream):
        results = [run(t, pieces, limit) for t in twins("events")]
        assert all(r == results[0] for r in results), (pieces, results)
        assert flatten(results[0]) == expected, pieces
        whole = whole or results[0]
    return whole or []


# --- the bound -------------------------------------------------------------------------------

def test_default_bound() -> None:
    assert DEFAULT_MAX_EVENT_BYTES == 64 * MiB
    for twin in twins("events"):
        assert twin.EventDecoder().pending_bytes == 0


@pytest.mark.parametrize("line_end", [b"\n", b"\r", b"\r\n"])
def test_an_event_of_exactly_the_bound_passes_one_byte_more_does_not(
        events_twin: ModuleType, line_end: bytes) -> None:
    # held: "data: abcdefgh" (14 bytes) as the unfinished line, then "abcdefgh" + LF (9)
    stream = b"data: abcdefgh" + line_end + line_end + b"data: ok" + line_end * 2
    decoder = events_twin.EventDecoder(max_event_bytes=14)
    assert decoder.feed(stream) == [Event(data="abcdefgh"), Event(data="ok")]
    decoder = events_twin.EventDecoder(max_event_bytes=13)
    with pytest.raises(EventTooLarge, match=r"max_event_bytes \(13\) at stream offset 13\b") \
            as caught:
        decoder.feed(stream)
    assert caught.value.events == [Event(data="ok")] and caught.value.offsets == [13]
    assert isinstance(caught.value, ValueError)
    check_everywhere(stream, 13)
    check_everywhere(stream, 14)


def test_data_lines_accumulate_up_to_the_bound(events_twin: ModuleType) -> None:
    # each "data: xxxx" line holds 5 bytes once complete; the 5th line is the first that
    # cannot be held whole while it arrives: 4 * 5 + 10 > 29
    stream = b"data: xxxx\n" * 6 + b"\ndata: next\n\n"
    decoder = events_twin.EventDecoder(max_event_bytes=29)
    with pytest.raises(EventTooLarge) as caught:
        decoder.feed(stream)
    assert caught.value.offsets == [4 * 11 + 9]
    assert caught.value.events == [Event(data="next")]
    assert check_everywhere(stream, 29)[0][3] == [53]


def test_the_event_type_is_held_too(events_twin: ModuleType) -> None:
    stream = b"event: " + b"t" * 20 + b"\ndata: " + b"d" * 10 + b"\n\ndata: after\n\n"
    events = [("t" * 20, "d" * 10, None, None), ("message", "after", None, None)]
    assert check_everywhere(stream, 36)[0] == events  # 20 + len("data: dddddddddd") = 36
    assert check_everywhere(stream, 35)[0][3] == [28 + 35 - 20]


def test_the_dropped_event_leaves_no_trace(events_twin: ModuleType) -> None:
    """Its data, type, retry and the id it set are dropped; the next event is whole."""
    stream = (b"id: 1\ndata: a\n\n"
              b"id: 2\nevent: big\nretry: 5\ndata: " + b"x" * 50 + b"\ndata: y\n\n"
              b"data: b\n\n"
              b"id: 3\ndata: " + b"z" * 50 + b"\n\n"
              b"data: c\n\n")
    decoder = events_twin.EventDecoder(max_event_bytes=40)
    with pytest.raises(EventTooLarge, match="2 events passed max_event_bytes") as caught:
        decoder.feed(stream)
    assert caught.value.events == [Event(data="a", id="1"), Event(data="b", id="1"),
                                   Event(data="c", id="1")]
    check_everywhere(stream, 40)


def test_the_skip_ends_at_the_blank_line_only(events_twin: ModuleType) -> None:
    stream = (b"data: " + b"x" * 30 + b"\rdata: more\r\n: comment\r\ndata: " + b"y" * 30
              + b"\r\r\ndata: after\r\n\r\n")
    whole = check_everywhere(stream, 12)
    assert whole[0][2] == [("message", "after", None, None)] and whole[0][3] == [12]


def test_a_line_end_split_across_chunks_while_skipping(events_twin: ModuleType) -> None:
    decoder = events_twin.EventDecoder(max_event_bytes=8)
    with pytest.raises(EventTooLarge):
        decoder.feed(b"data: 0123456789\r")
    assert decoder.feed(b"\n") == []  # the LF of the CRLF: no blank line yet
    assert decoder.feed(b"\r") == []  # the blank line
    assert decoder.feed(b"\ndata: x\n") == []  # its LF, then a new event
    assert decoder.feed(b"\n") == [Event(data="x")]


def test_after_an_error_the_decoder_goes_on(events_twin: ModuleType) -> None:
    decoder = events_twin.EventDecoder(max_event_bytes=100)
    assert decoder.feed(b"data: 1\n\n") == [Event(data="1")]
    with pytest.raises(EventTooLarge, match=r"at stream offset 109\b"):
        decoder.feed(b"data: " + b"x" * 200)
    assert decoder.pending_bytes == 0
    assert decoder.feed(b"x" * 10_000) == []  # the rest of the dropped event is not held
    assert decoder.pending_bytes == 0
    assert decoder.feed(b"\n\ndata: 2\n\n") == [Event(data="2")]
    assert decoder.close() == []


@pytest.mark.parametrize("limit", [4, 9, 1000])
def test_every_pair_of_line_ends_split_every_way(limit: int) -> None:
    """A CRLF at the end of a read and a LF first in the next are two line ends."""
    check_everywhere(b"data: a\r\n\ndata: b\r\r\ndata: c\n\r\n\r\r\ndata: d\r\n\r\n\n"
                     b"data: eeeeeeee\r\n\n\r\n", limit)


def test_bom_and_a_first_line_over_the_bound() -> None:
    check_everywhere(b"\xef\xbb\xbfdata: 12345\n\n\xef\xbb\xbfdata: 2\n\n", 8)
    check_everywhere(b"\xef\xbb\xbfdata: 1\n\ndata: 2\n\n", 10)


def test_invalid_utf8_is_held_as_bytes() -> None:
    check_everywhere(b"data: \xff\xfe\xe2\x82\ndata: \xc3\n\nevent: \xff\xff\ndata: x\n\n", 9)


LINES = [b"data: a", b"data:bb", b"data", b": c", b"event: e", b"event: eeeee", b"id: 1",
         b"id: 22", b"retry: 20", b"", b"x", b"data: " + b"z" * 12, b"\xef\xbb\xbf",
         b"data: \xff"]


@settings(max_examples=examples(120))
@given(st.lists(st.sampled_from(LINES), max_size=14),
       st.lists(st.sampled_from([b"\n", b"\r", b"\r\n"]), min_size=14, max_size=14),
       st.integers(1, 30), st.data())
def test_bound_agrees_with_the_model_for_any_split(lines: list[bytes], ends: list[bytes],
                                                   limit: int, data: st.DataObject) -> None:
    stream = b"".join(line + end for line, end in zip(lines, ends))
    if data.draw(st.booleans()):
        stream = stream[:data.draw(st.integers(0, len(stream)))]  # an unfinished end too
    expected = model(stream, limit)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    ways = [[stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])],
            [stream[i:i + 1] for i in range(len(stream))]]
    for pieces in ways:
        results = [run(t, pieces, limit) for t in twins("events")]
        assert all(r == results[0] for r in results)
        assert flatten(results[0]) == expected


@pytest.mark.parametrize("kind", ["c", "py"])
def test_100_mb_without_a_line_end_holds_at_most_the_bound(kind: str) -> None:
    """The default bound against 100 MB in 1 MiB reads with no line end: the held bytes
    (pending_bytes and the traced heap) stay within 64 MiB plus bytearray's over-allocation
    after every read; the bound is passed at offset 64 MiB exactly; then nothing is kept."""
    twin = next((t for t in twins("events") if t.__name__.endswith(kind)), None)
    if twin is None:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    read = b"data: " + b"x" * (MiB - 6)
    rest = b"x" * MiB
    decoder = twin.EventDecoder()
    errors = []
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        kept = 0
        for i in range(100):
            try:
                decoder.feed(read if i == 0 else rest)
            except EventTooLarge as exc:
                errors.append(exc.offsets)
            assert decoder.pending_bytes <= DEFAULT_MAX_EVENT_BYTES
            kept = max(kept, tracemalloc.get_traced_memory()[0] - base)
        after = tracemalloc.get_traced_memory()[0] - base
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert errors == [[DEFAULT_MAX_EVENT_BYTES]]
    slack = DEFAULT_MAX_EVENT_BYTES // 8 + MiB  # bytearray grows by an eighth, plus a read
    assert kept <= DEFAULT_MAX_EVENT_BYTES + slack, kept
    assert peak <= DEFAULT_MAX_EVENT_BYTES + slack, peak
    assert after < 64 * 1024, after  # dropped: nothing held while the rest is skipped
    assert decoder.feed(b"\n\ndata: next\n\n") == [Event(data="next")]


def test_iter_events_stops_at_the_bound_after_the_chunk_s_events(events_twin: ModuleType) -> None:
    chunks = [b"data: 1\n\n", b"data: 2\n\ndata: " + b"x" * 50 + b"\n\ndata: 3\n\n",
              b"data: 4\n\n"]
    got = []
    with pytest.raises(EventTooLarge, match=r"at stream offset 38\b"):
        for event in events_twin.iter_events(iter(chunks), max_event_bytes=20):
            got.append(event.data)
    assert got == ["1", "2", "3"]
    assert [e.data for e in events_twin.iter_events(chunks, max_event_bytes=56)] == \
        ["1", "2", "x" * 50, "3", "4"]


def test_the_error_pickles_and_is_public() -> None:
    error = _events_py.event_too_large(9, [3, 40], [Event(data="x")])
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is EventTooLarge and str(back) == str(error)
    assert back.events == [Event(data="x")] and back.offsets == [3, 40]
    assert tokcore.EventTooLarge is EventTooLarge and "EventTooLarge" in tokcore.__all__


def test_a_message_lists_a_few_offsets() -> None:
    message = str(_events_py.event_too_large(1, list(range(10)), []))
    assert "10 events passed max_event_bytes (1), at stream offsets 0, 1, 2, 3, 4, ...:" in message


# --- the argument --------------------------------------------------------------------------

@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (2**63, ValueError),
                                        (True, TypeError), (1.5, TypeError), ("8", TypeError),
                                        (None, TypeError)])
def test_max_event_bytes_is_checked(bad: Any, error: type[BaseException]) -> None:
    messages = set()
    for twin in twins("events"):
        for make in (lambda t=twin: t.EventDecoder(max_event_bytes=bad),
                     lambda t=twin: t.iter_events([], max_event_bytes=bad)):  # eager
            with pytest.raises(error, match="max_event_bytes") as caught:
                make()
            messages.add((caught.type, str(caught.value)))
    assert len(messages) == 1


def test_max_event_bytes_is_keyword_only(events_twin: ModuleType) -> None:
    with pytest.raises(TypeError):
        events_twin.EventDecoder(100)  # type: ignore[misc]
    assert events_twin.EventDecoder(max_event_bytes=2**63 - 1).feed(b"data: 1\n\n") == \
        [Event(data="1")]


def test_retry_of_more_digits_than_int_converts_is_ignored(events_twin: ModuleType) -> None:
    """Found here: a retry field past int()'s digit limit (4300) made feed raise."""
    stream = b"retry: " + b"9" * 5000 + b"\ndata: x\n\nretry: 12\ndata: y\n\n"
    assert events_twin.EventDecoder().feed(stream) == [Event(data="x"),
                                                       Event(data="y", retry=12)]


# --- the WHATWG rules ----------------------------------------------------------------------------

def decode(twin: ModuleType, chunks: list[bytes]) -> list[Any]:
    decoder = twin.EventDecoder()
    events = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    return events


def every_split(stream: bytes) -> list[list[bytes]]:
    return [[stream]] + [[stream[:i], stream[i:]] for i in range(len(stream) + 1)] + \
        [[stream[i:i + 1] for i in range(len(stream))]]


# the examples of the WHATWG HTML standard, section "Event stream interpretation"
SPEC_EXAMPLES = [
    (b"data: YHOO\ndata: +2\ndata: 10\n\n", [Event(data="YHOO\n+2\n10")]),
    (b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
     b"data:  third event\n\n",
     [Event(data="first event", id="1"), Event(data="second event", id=""),
      Event(data=" third event", id="")]),
    (b"data\n\ndata\ndata\n\ndata:", [Event(data=""), Event(data="\n")]),
    (b"data:test\n\ndata: test\n\n", [Event(data="test"), Event(data="test")]),
]


@pytest.mark.parametrize("stream, events", SPEC_EXAMPLES)
def test_event_decoder_spec_examples(events_twin: ModuleType, stream: bytes,
                                     events: list[Any]) -> None:
    for chunks in every_split(stream):
        assert decode(events_twin, chunks) == events


@pytest.mark.parametrize("stream, events", [
    (b"\xef\xbb\xbfdata: a\n\n", [Event(data="a")]),  # a BOM at the start is dropped
    (b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n", [Event(data="b")]),  # only one
    (b"event: add\ndata: 1\n\ndata: 2\n\n", [Event("add", "1"), Event(data="2")]),
    (b"event\ndata: 1\n\n", [Event(data="1")]),  # an empty type is "message"
    (b"id: 7\ndata: 1\n\nid: a\x00b\ndata: 2\n\n", [Event(data="1", id="7"),
                                                    Event(data="2", id="7")]),
    (b"retry: 1500\ndata: 1\n\nretry: 15x\ndata: 2\n\nretry:\ndata: 3\n\n",
     [Event(data="1", retry=1500), Event(data="2"), Event(data="3")]),
    (b"retry: \xd9\xa3\ndata: 1\n\n", [Event(data="1")]),  # only ASCII digits
    (b"event: x\nid: 3\n\ndata: 1\n\n", [Event(data="1", id="3")]),  # nothing dispatched
    (b"data: a\r\ndata: b\rdata: c\n\r\n", [Event(data="a\nb\nc")]),
    (b"data: a\r\rdata: b\r\n\r\n", [Event(data="a"), Event(data="b")]),
    (b"data: \xff\xfe\n\n", [Event(data="\ufffd\ufffd")]),
    (b"data: caf\xc3\xa9 \xe2\x82\xac\n\n", [Event(data="caf\u00e9 \u20ac")]),
    (b"data:x:y\nfoo: bar\ndata\n\n", [Event(data="x:y\n")]),
    (b"data: incomplete", []),
])
def test_event_decoder_rules(events_twin: ModuleType, stream: bytes, events: list[Any]) -> None:
    for chunks in every_split(stream):
        assert decode(events_twin, chunks) == events


def test_event_is_shared_and_small(events_twin: ModuleType) -> None:
    event = Event("message", "x", None, None)
    assert events_twin.Event is tokcore.Event is _events_py.Event
    assert event == Event(data="x") and repr(event).startswith("Event(")
    assert (event.event, event.data, event.id, event.retry) == ("message", "x", None, None)


def test_iter_events(events_twin: ModuleType) -> None:
    chunks = [b"data: a\r", b"\n\r\ndata: b\n", b"\n"]
    assert list(events_twin.iter_events(iter(chunks))) == [Event(data="a"), Event(data="b")]


def test_event_decoder_bad_input(events_twin: ModuleType) -> None:
    decoder = events_twin.EventDecoder()
    with pytest.raises(TypeError):
        decoder.feed("data: x\n\n")
    assert decoder.feed(bytearray(b"data: x\n\n")) == [Event(data="x")]
    decoder.close()
    with pytest.raises(ValueError):
        decoder.feed(b"data: y\n\n")


@settings(max_examples=examples(200))
@given(st.lists(st.sampled_from([b"data: a", b"data:b", b"data", b": c", b"event: e",
                                 b"id: 1", b"retry: 20", b"", b"x", b"\xef\xbb\xbf"]), max_size=12),
       st.lists(st.sampled_from([b"\n", b"\r", b"\r\n"]), min_size=12, max_size=12),
       st.data())
def test_event_decoder_split_invariance(lines: list[bytes], ends: list[bytes],
                                        data: st.DataObject) -> None:
    stream = b"".join(line + end for line, end in zip(lines, ends))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    for twin in twins("events"):
        assert decode(twin, chunks) == decode(twin_of("events", "py"), [stream])
