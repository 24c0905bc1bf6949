"""UsageRelay, relay_usage and arelay_usage: the relay invariants of the contract.

Streams are built event by event as real servers write them; each event's expected bytes
come from json.loads/json.dumps of the usage object the test put there, not from the
scanner under test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import _twins
import pytest
from _budget import examples
from _usage import expected_usage, rewritten_text
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcore import arelay_usage, relay_usage

PROMPT, CACHED = 40000, 32000
COMPACT, SPACED = (",", ":"), (", ", ": ")

Event = tuple[bytes, bytes]  # (as the worker sends it, as the client must get it)


def twins() -> list[Any]:
    return _twins.twins("stream")


def new_usage(usage: dict[str, Any], cached: int | None = CACHED,
              seps: tuple[str, str] = COMPACT) -> bytes:
    """The in-place rewrite of ``json.dumps(usage, separators=seps)``."""
    expected = expected_usage(usage, PROMPT, cached)
    if expected is None:  # another API's usage (or an unreadable count): as it came
        return json.dumps(usage, separators=seps).encode()
    return rewritten_text(usage, expected, seps)


NEW1 = new_usage({"completion_tokens": 1})  # the rewrite of {"completion_tokens":1}


def chunk_object(content: str, index: int, **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-8f3c2a1b4d5e6f708192a3b4c5d6e7f8", "object": "chat.completion.chunk",
            "created": 1732000000, "model": "Qwen/Qwen2.5-7B-Instruct",
            "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None,
                         "finish_reason": None}], **extra}


def data_event(obj: Any, eol: bytes, seps: tuple[str, str] = COMPACT, *,
               usage: dict[str, Any] | None = None, lines: bytes = b"",
               trailing: bytes = b"") -> Event:
    """``obj`` as one data field; when ``usage`` is given, it goes in as obj's "usage"."""
    if usage is None:
        text = json.dumps(obj, separators=seps).encode()
        expected = text
    else:
        marked = json.dumps({**obj, "usage": "@USAGE@"}, separators=seps).encode()
        before, after = marked.split(b'"@USAGE@"')
        text = before + json.dumps(usage, separators=seps).encode() + after
        expected = before + new_usage(usage, seps=seps) + after
    head = lines.replace(b"\n", eol)
    return (head + b"data: " + text + trailing + eol + eol,
            head + b"data: " + expected + trailing + eol + eol)


def verbatim(raw: bytes, eol: bytes) -> Event:
    raw = raw.replace(b"\n", eol)
    return raw, raw


FINAL_USAGE = {"prompt_tokens": 12, "total_tokens": 112, "completion_tokens": 100,
               "prompt_tokens_details": None}


def vllm_stream(eol: bytes = b"\n") -> list[Event]:
    """vLLM/SGLang: pydantic's compact JSON, first event with a space before the line end,
    a final usage event with "choices":[], then [DONE]."""
    events = [data_event(chunk_object("", 0), eol, trailing=b" ")]
    events += [data_event(chunk_object(word, i), eol)
               for i, word in enumerate([" Hello", " usage", '"usage":{"completion_tokens":1}',
                                         "\\u00e9", "\n"])]
    events.append(data_event({"id": "chatcmpl-1", "choices": []}, eol, usage=FINAL_USAGE))
    events.append(verbatim(b"data: [DONE]\n\n", eol))
    return events


def openai_stream(eol: bytes = b"\n") -> list[Event]:
    """include_usage: every chunk carries "usage":null, spaced JSON, the last one the usage."""
    events = [data_event(chunk_object(word, i, usage=None), eol, SPACED)
              for i, word in enumerate(["Hi", " there", " usage"])]
    events.append(verbatim(b": keep-alive\n\n", eol))
    events.append(data_event({"id": "x", "object": "chat.completion.chunk", "choices": []}, eol,
                             SPACED, usage={"prompt_tokens": 5, "completion_tokens": 3,
                                            "total_tokens": 8,
                                            "prompt_tokens_details": {"cached_tokens": 0,
                                                                      "audio_tokens": 0},
                                            "completion_tokens_details": {"reasoning_tokens": 0}}))
    events.append(verbatim(b"data: [DONE]\n\n", eol))
    return events


def include_usage_stream(eol: bytes = b"\n") -> list[Event]:
    """vLLM with include_usage: compact JSON, "usage":null in every chunk but the last, whose
    texts differ from the one before in every way the relay's object memo reads (a quote, a
    backslash last, a LF escape, a "usage" key in the text); among them events that end in
    "usage":null but are no object or hold it in a string, spaced JSON, two data lines."""
    words = [" Hello", " the", ' say "hi"', " the", "a\\", " b", "\n", "é", "\\u00e9",
             '"usage":null}', ' "usage":null', "x" * 300, " end"]
    events = [data_event(chunk_object(word, i, usage=None), eol) for i, word in enumerate(words)]
    events[3:3] = [verbatim(b'data: {"id":"x","choices":[]],"usage":null}\n\n', eol),
                   verbatim(b'data: {"id":"x\\","usage":null}\n\n', eol),
                   verbatim(b'data: ["usage":null}\n\n', eol)]
    events[8:8] = [data_event(chunk_object(" spaced", 8, usage=None), eol, SPACED),
                   verbatim(b'data: {"id":"x",\ndata: "usage":null}\n\n', eol)]
    events.append(data_event({"id": "x", "choices": []}, eol, usage=FINAL_USAGE))
    events.append(verbatim(b"data: [DONE]\n\n", eol))
    return events


def continuous_stream(eol: bytes = b"\n") -> list[Event]:
    """continuous usage stats: usage in every event; event/id/retry lines; an error event."""
    events = [data_event(chunk_object(word, i), eol, usage={
        "prompt_tokens": 7, "total_tokens": 8 + i, "completion_tokens": 1 + i},
        lines=b"event: message\nid: %d\n" % i) for i, word in enumerate(["a", "b"])]
    events.append(verbatim(b"retry: 3000\n: comment with \"usage\":{}\n\n", eol))
    events.append(verbatim(b'event: error\ndata: {"error":{"message":"usage limit",'
                           b'"type":"BadRequestError","code":400}}\n\n', eol))
    events.append(verbatim(b"\n\n", eol))  # stray blank lines
    events.append(data_event({"choices": []}, eol, usage={"completion_tokens": 2}))
    return events


STREAMS = {
    "vllm": vllm_stream(),
    "vllm-crlf": vllm_stream(b"\r\n"),
    "vllm-cr": vllm_stream(b"\r"),
    "openai": openai_stream(),
    "openai-crlf": openai_stream(b"\r\n"),
    "include-usage": include_usage_stream(),
    "include-usage-crlf": include_usage_stream(b"\r\n"),
    "continuous": continuous_stream(),
    "continuous-cr": continuous_stream(b"\r"),
}


def joined(events: list[Event]) -> tuple[bytes, bytes]:
    return b"".join(raw for raw, _ in events), b"".join(out for _, out in events)


def relay(twin: ModuleType, chunks: list[bytes], **kwargs: Any) -> bytes:
    relay = twin.UsageRelay(PROMPT, CACHED, **kwargs)
    return b"".join([relay.feed(chunk) for chunk in chunks] + [relay.close()])


@pytest.mark.parametrize("name", STREAMS)
def test_every_split(stream_twin: ModuleType, name: str) -> None:
    stream, expected = joined(STREAMS[name])
    assert stream != expected  # every stream has usage to rewrite
    assert relay(stream_twin, [stream]) == expected
    for cut in range(len(stream) + 1):
        assert relay(stream_twin, [stream[:cut], stream[cut:]]) == expected, cut


def counts(twin: ModuleType, chunks: list[bytes]) -> tuple[int, ...]:
    relay = twin.UsageRelay(PROMPT, CACHED)
    for chunk in chunks:
        relay.feed(chunk)
    relay.close()
    return tuple(relay.counts)


@pytest.mark.parametrize("name", STREAMS)
def test_counts_in_every_split(stream_twin: ModuleType, name: str) -> None:
    """The counts do not depend on how the stream is read: each event in a read of its own
    (the Python twin) is the oracle for the whole stream in one read and in two at every
    offset (several "usage":null events in one read take the relay's per-event path)."""
    from tokcore.stream import _relay_py
    events = [raw for raw, _ in STREAMS[name]]
    stream = b"".join(events)
    expected = counts(_relay_py, events)
    assert counts(stream_twin, [stream]) == expected
    for cut in range(len(stream) + 1):
        assert counts(stream_twin, [stream[:cut], stream[cut:]]) == expected, cut


@pytest.mark.parametrize("name", STREAMS)
def test_forwarded_when_blank_line_arrives(stream_twin: ModuleType, name: str) -> None:
    events = STREAMS[name]
    relay = stream_twin.UsageRelay(PROMPT, CACHED)
    out = b""
    done = b""
    for raw, expected in events:
        for i in range(len(raw)):
            out += relay.feed(raw[i:i + 1])
        done += expected
        assert out == done
        assert relay.pending_bytes == 0
    assert relay.close() == b""


@settings(max_examples=examples(150), deadline=None)
@given(st.sampled_from(sorted(STREAMS)), st.data())
def test_random_splits(name: str, data: st.DataObject) -> None:
    stream, expected = joined(STREAMS[name])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    for twin in twins():
        assert relay(twin, chunks) == expected
        assert relay(twin, [bytearray(c) for c in chunks]) == expected


def test_zero_copy(stream_twin: ModuleType) -> None:
    relay = stream_twin.UsageRelay(PROMPT, CACHED)
    for name in ("vllm", "vllm-crlf", "vllm-cr", "openai"):
        for raw, expected in STREAMS[name]:
            out = relay.feed(raw)
            if raw == expected:
                assert out is raw  # nothing to rewrite, nothing pending: no copy
            else:
                assert out == expected
    passthrough = [raw for raw, out in STREAMS["openai"] if raw == out]
    many = b"".join(passthrough * 5)
    assert relay.feed(many) is many
    partial = b"data: {}\n\ndata: {"
    assert relay.feed(partial) == b"data: {}\n\n"
    assert relay.feed(b"}\n\n") == b"data: {}\n\n"


def test_crlf_split_between_events(stream_twin: ModuleType) -> None:
    relay = stream_twin.UsageRelay(PROMPT)
    first = b'data: {"a":1}\r\n\r'
    assert relay.feed(first) is first  # the blank line has ended on its CR
    lf = b"\n"
    assert relay.feed(lf) is lf  # the LF that completes it goes out at once
    assert relay.pending_bytes == 0
    # a CR ending a data line mid-event, the LF in the next read: still one event
    chunks = [b'data: {"usage":\r', b'\ndata: {"completion_tokens":1}}\r\n', b"\r\n"]
    assert b"".join(relay.feed(c) for c in chunks) == (
        b'data: {"usage":\r\ndata: {"completion_tokens":1,"prompt_tokens":40000,'
        b'"total_tokens":40001}}\r\n\r\n')


def test_multiline_data(stream_twin: ModuleType) -> None:
    usage = b'{"completion_tokens":3}'
    stream = (b'data: {"id":"x",\ndata: "usage":{"completion_tokens":\n: mid-value comment\n'
              b"data:3, \"x\": [1,\ndata: 2]},\ndata:\"y\":1}\n\n")
    out = relay(stream_twin, [stream])
    # in place: the lines stay, the new members go after the last one, on its line
    assert out == (b'data: {"id":"x",\ndata: "usage":{"completion_tokens":\n'
                   b': mid-value comment\ndata:3, "x": [1,\ndata: 2],"prompt_tokens":40000,'
                   b'"total_tokens":40003,"prompt_tokens_details":{"cached_tokens":32000}},\n'
                   b'data:"y":1}\n\n')
    # the client's view: the data fields joined with \n are the rewritten JSON
    (event,) = stream_twin.iter_events([out])
    assert json.loads(event.data) == {"id": "x", "usage": json.loads(new_usage(
        {"completion_tokens": 3, "x": [1, 2]})), "y": 1}
    simple = b"data: {\ndata: \"usage\": " + usage + b"\ndata: }\n\n"
    assert relay(stream_twin, [simple]) == (
        b'data: {\ndata: "usage": ' + new_usage({"completion_tokens": 3}) + b"\ndata: }\n\n")


def test_usage_only_in_data_fields(stream_twin: ModuleType) -> None:
    u = b'{"usage":{"completion_tokens":1}}'
    stream = (b"event: " + u + b"\nid: " + u + b"\n: " + u + b"\ndatax: " + u + b"\nDATA: " + u
              + b"\ndata: [DONE]\n\n")
    assert relay(stream_twin, [stream]) == stream
    assert relay(stream_twin, [b'data:{"usage":{"completion_tokens":1}}\n\n']) == (
        b'data:{"usage":' + NEW1 + b"}\n\n")


def test_bom_at_stream_start(stream_twin: ModuleType) -> None:
    event = b'data: {"usage":{"completion_tokens":1}}\n\n'
    expected = b'data: {"usage":' + NEW1 + b"}\n\n"
    stream = b"\xef\xbb\xbf" + event + b"\xef\xbb\xbf" + event
    assert relay(stream_twin, [stream]) == b"\xef\xbb\xbf" + expected + b"\xef\xbb\xbf" + event
    for cut in range(len(stream)):
        assert relay(stream_twin, [stream[:cut], stream[cut:]]) == relay(stream_twin, [stream])


@pytest.mark.parametrize("tail, expected", [
    (b'data: {"usage":{"completion_tokens":1}}', b'data: {"usage":' + NEW1 + b"}"),
    (b'data: {"usage":{"completion_tokens":1}}\n', b'data: {"usage":' + NEW1 + b"}\n"),
    (b'data: {"usage":{"completion_tokens":1}}\r', b'data: {"usage":' + NEW1 + b"}\r"),
    (b'data: {"usage":{"completion_tokens":1}', b'data: {"usage":{"completion_tokens":1}'),
    (b"data: [DONE]", b"data: [DONE]"),
    (b":", b":"),
])
def test_close_flushes_incomplete_event(stream_twin: ModuleType, tail: bytes,
                                        expected: bytes) -> None:
    head = b"data: {}\n\n"
    relay = stream_twin.UsageRelay(PROMPT, CACHED)
    assert relay.feed(head + tail) == head
    assert relay.pending_bytes == len(tail)
    assert relay.close() == expected
    assert relay.close() == b""


def test_bounded_memory_without_blank_lines(stream_twin: ModuleType) -> None:
    """One endless event: scanned as it streams, its first usage value rewritten; after the
    text that is no JSON object any more, nothing else is touched or dropped."""
    limit = 4096
    relay = stream_twin.UsageRelay(PROMPT, CACHED, max_event_bytes=limit)
    line = b'data: {"usage":{"prompt_tokens":1}} xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n'
    chunk = line * 20
    out = []
    for _ in range(2000):
        out.append(relay.feed(chunk))
        assert relay.pending_bytes <= limit
    out.append(relay.close())
    usage = new_usage({"prompt_tokens": 1})
    first = line.replace(b'{"prompt_tokens":1}', usage)
    assert b"".join(out) == first + (chunk * 2000)[len(line):]
    assert relay.counts[1:] == (1, 0, 0, 0, 1, 0)  # rewritten, ..., oversized, too_large
    # once the oversized event ends, events are held again
    event = b'data: {"usage":{"completion_tokens":1}}\n\n'
    assert relay.feed(b"\n" + event) == b'\ndata: {"usage":' + NEW1 + b"}\n\n"


def test_oversized_event_rewritten_as_it_streams(stream_twin: ModuleType) -> None:
    big = b'data: {"usage":{"completion_tokens":1},"pad":"' + b"x" * 100 + b'"}\n\n'
    small = b'data: {"usage":{"completion_tokens":1}}\n\n'
    rewritten = b'data: {"usage":' + NEW1 + b"}\n\n"
    value = len(b'{"completion_tokens":1}')
    big_rewritten = b'data: {"usage":' + NEW1 + b',"pad":"' + b"x" * 100 + b'"}\n\n'
    for limit in (value - 1, value, 50, len(big) - 1, len(big)):
        # held or not, the same bytes, as long as the usage value itself fits the bound
        expected = big + small if limit < value else big_rewritten + rewritten
        for cut in range(len(big) + 1):  # however the reads cut it: the same output
            chunks = [big[:cut], big[cut:] + small]
            assert relay(stream_twin, chunks, max_event_bytes=limit) == expected, (limit, cut)
    crlf = big.replace(b"\n", b"\r\n")  # the size counts to the blank line's CR
    for limit in (len(crlf) - 1, len(crlf) - 2, value, value - 1):
        for cut in range(len(crlf) + 1):
            r = stream_twin.UsageRelay(PROMPT, CACHED, max_event_bytes=limit)
            out = r.feed(crlf[:cut]) + r.feed(crlf[cut:]) + r.close()
            assert (out != crlf) == (limit >= value), (limit, cut)
            assert r.counts.oversized == (limit < len(crlf) - 1), (limit, cut)
            assert r.counts.too_large == (limit < value), (limit, cut)


def test_bad_input(stream_twin: ModuleType) -> None:
    relay = stream_twin.UsageRelay(PROMPT)
    with pytest.raises(TypeError):
        relay.feed("data: x\n\n")
    with pytest.raises(TypeError):
        relay.feed(None)
    assert relay.feed(b"") == b""
    assert relay.feed(memoryview(b"data: {}\n\n")) == b"data: {}\n\n"
    for bad in (0, -1, "9", 1.5):
        with pytest.raises((TypeError, ValueError)):
            stream_twin.UsageRelay(PROMPT, max_event_bytes=bad)


FRAGMENTS = [b"data: ", b"data:", b'{"usage":', b'{"usage":null}', b"{", b"}", b'"usage"',
             b"\\u0075", b"\\", b'"', b"null", b"[DONE]", b"\n", b"\r", b"\r\n", b": c",
             b"event: e", b'{"completion_tokens":2}', b",", b"\xef\xbb\xbf", b"\xff", b"1"]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30), st.data())
def test_twins_agree_on_anything(fragments: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(fragments)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    limit = data.draw(st.sampled_from([1, 16, 24, 64, 1 << 20]))
    reference = relay(_twins.twin("stream", "py"), [stream], max_event_bytes=limit)
    for twin in twins():  # never raises; the same bytes however the stream is cut
        assert relay(twin, chunks, max_event_bytes=limit) == reference


@given(st.binary(max_size=200), st.integers(1, 50))
def test_without_usage_nothing_changes(stream: bytes, step: int) -> None:
    stream = stream.replace(b'"usage"', b"").replace(b"\\u00", b"")
    chunks = [stream[i:i + step] for i in range(0, len(stream), step)]
    for twin in twins():
        assert relay(twin, chunks) == stream


def test_relay_usage_sync() -> None:
    stream, expected = joined(STREAMS["openai"])
    chunks = [stream[i:i + 7] for i in range(0, len(stream), 7)]
    outs = list(relay_usage(iter(chunks), PROMPT, CACHED))
    assert all(outs) and b"".join(outs) == expected
    assert list(relay_usage([b"data: [DONE]"], PROMPT)) == [b"data: [DONE]"]
    assert list(relay_usage([], PROMPT)) == []


def test_arelay_usage_async() -> None:
    stream, expected = joined(STREAMS["vllm-crlf"])

    async def body() -> AsyncIterator[bytes]:
        for i in range(0, len(stream), 100):
            await asyncio.sleep(0)
            yield stream[i:i + 100]

    async def run() -> list[bytes]:
        return [out async for out in arelay_usage(body(), PROMPT, CACHED, max_event_bytes=4096)]

    outs = asyncio.run(run())
    assert all(outs) and b"".join(outs) == expected


def test_blank_lines_at_every_offset(stream_twin: ModuleType) -> None:
    # events of every length around the 16-byte scan blocks, with usage here and there
    events = [b"data: " + b"x" * k + b"\n\n" for k in range(40)]
    usage_in = b'data: {"usage":{"completion_tokens":1}}\n\n'
    usage_out = b'data: {"usage":' + NEW1 + b"}\n\n"
    for every in (3, 7, 100):
        raw = b"".join(e + (usage_in if i % every == 0 else b"") for i, e in enumerate(events))
        out = b"".join(e + (usage_out if i % every == 0 else b"") for i, e in enumerate(events))
        for size in (1, 5, 16, 17, 33, 64, 1000):
            chunks = [raw[i:i + size] for i in range(0, len(raw), size)]
            assert relay(stream_twin, chunks) == out, (every, size)


USAGES = st.dictionaries(
    st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens",
                     "prompt_tokens_details", "completion_tokens_details"]),
    st.none() | st.integers(0, 10**9)
    | st.dictionaries(st.sampled_from(["cached_tokens", "reasoning_tokens"]),
                      st.integers(0, 10**6) | st.none(), max_size=2),
    max_size=5)


@st.composite
def generated_stream(draw: st.DrawFn) -> list[Event]:
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    seps = draw(st.sampled_from([COMPACT, SPACED]))
    events: list[Event] = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["token", "token", "null", "usage", "continuous", "other"]))
        content = draw(st.sampled_from(["usage", '"usage":{"completion_tokens":1}', "\\u00e9",
                                        "\n", "x"]) | st.text(max_size=5))
        if kind == "token":
            events.append(data_event(chunk_object(content, i), eol, seps))
        elif kind == "null":
            events.append(data_event(chunk_object(content, i, usage=None), eol, seps))
        elif kind == "usage":
            events.append(data_event({"id": "x", "choices": []}, eol, seps, usage=draw(USAGES)))
        elif kind == "continuous":
            events.append(data_event(chunk_object(content, i), eol, seps, usage=draw(USAGES),
                                     lines=draw(st.sampled_from([b"", b"id: 1\n", b": c\n"]))))
        else:
            events.append(verbatim(draw(st.sampled_from(
                [b"data: [DONE]\n\n", b": ping\n\n", b"event: error\ndata: {\"usage\":7}\n\n",
                 b"retry: 10\n\n", b"\n"])), eol))
    return events


@settings(max_examples=examples(200), deadline=None)
@given(generated_stream(), st.data())
def test_generated_streams_against_json(events: list[Event], data: st.DataObject) -> None:
    stream, expected = joined(events)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    for twin in twins():
        assert relay(twin, chunks) == expected
