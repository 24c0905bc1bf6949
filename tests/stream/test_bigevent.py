"""Events larger than ``max_event_bytes``: scanned as they stream, usage rewritten within the
bound.

The reference for an event's bytes is the same relay with a bound above the event, which
holds it whole (that path is checked against json elsewhere): an event of valid JSON with
one usage value at a dialect path comes out the same either way, however it is cut, as long
as the usage value itself is within the bound. Beyond that, both twins agree on every input,
byte for byte and count for count, and keep at most the bound after every read.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest
from _budget import examples
from _twins import twin
from hypothesis import given, settings
from hypothesis import strategies as st

KINDS = ["c", "py"]
APIS = ["chat", "responses", "messages"]
P, C = 40000, 32000
HUGE = 1 << 40  # a bound no test event reaches: the event is held whole
SMALL = 64 * 1024  # what a relay may keep beyond its bound


def relay_run(kind: str, chunks: list[bytes], api: str = "chat", limit: int = HUGE,
              cached: int | None = C) -> tuple[bytes, tuple[int, ...], list[int]]:
    """(output, counts, pending_bytes after each read) of one relay over the reads."""
    relay = twin("stream", kind).UsageRelay(P, cached, api=api, max_event_bytes=limit)
    out, pending = [], []
    for chunk in chunks:
        out.append(relay.feed(chunk))
        pending.append(relay.pending_bytes)
    out.append(relay.close())
    pending.append(relay.pending_bytes)
    return b"".join(out), tuple(relay.counts), pending


def cut(data: bytes, rng: random.Random, pieces: int) -> list[bytes]:
    points = sorted(rng.sample(range(1, len(data)), min(pieces, len(data) - 1))) \
        if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


# --- any bytes: the twins agree, and the cut changes nothing -------------------------------

FRAGMENTS = [b"data: ", b"data:", b"data", b"\n", b"\r\n", b"\r", b": c\n", b"event: x\n",
             b"{", b"}", b"[", b"]", b'"usage"', b":", b",", b'"response"', b'"message"',
             b'{"completion_tokens":3}', b'{"output_tokens":7,"input_tokens":1}', b"null",
             b'"x"', b"12", b" ", b"\\", b'"', b"\\u0075sage", b"\xef\xbb\xbf", b'"a":1',
             b"x" * 40, b"\n\n", b'{"usage":{"completion_tokens":5}}', b"9" * 30,
             b'{"response":{"usage":{"output_tokens":5}}}', b'{"message":{"usage":{}}}']


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=40), st.sampled_from(APIS),
       st.integers(1, 80), st.randoms(use_true_random=False))
def test_any_bytes_twins_agree_however_cut(parts: list[bytes], api: str, limit: int,
                                           rng: random.Random) -> None:
    data = b"".join(parts)
    whole = relay_run("py", [data], api, limit)
    assert whole[0] == data or whole[1][1] > 0  # bytes change only where usage is rewritten
    for kind in KINDS:
        for chunks in ([data], cut(data, rng, 6), [data[i:i + 1] for i in range(len(data))]):
            out, counts, pending = relay_run(kind, chunks, api, limit)
            assert (out, counts) == whole[:2], (kind, chunks)
            assert max(pending) <= limit + 2, (kind, chunks)


# --- valid JSON events: the same bytes as a held event --------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | \
    st.sampled_from(["usage", '"usage":{}', "}{][", "\\", "caf\u00e9", ""])
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["a", "usage", "response", "message", "x y"]), inner, max_size=3),
    max_leaves=8)
usage_values = st.fixed_dictionaries(
    {}, optional={"prompt_tokens": st.integers(0, 999), "completion_tokens": st.integers(0, 999),
                  "input_tokens": st.integers(0, 999), "output_tokens": st.integers(0, 999),
                  "total_tokens": st.integers(0, 999), "cost": st.floats(0, 1)})


def place_usage(api: str, usage: Any, nested: bool, other: dict[str, Any]) -> dict[str, Any]:
    """An event object with ``usage`` at one of the dialect's paths (and no other)."""
    body = {k: v for k, v in other.items() if k not in ("usage", "response", "message")}
    if nested and api != "chat":
        body[{"responses": "response", "messages": "message"}[api]] = {"id": "x", "usage": usage}
    else:
        body["usage"] = usage
    body["pad"] = "p" * 300  # makes the event larger than the bounds below
    return body


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(APIS), st.one_of(usage_values, usage_values, usage_values, json_values),
       st.booleans(),
       st.dictionaries(st.sampled_from(["id", "a", "choices", "usage"]), json_values,
                       max_size=3),
       st.sampled_from(["compact", "spaced", "lines"]), st.sampled_from([b"\n", b"\r\n", b"\r"]),
       st.booleans(), st.integers(100, 300), st.randoms(use_true_random=False))
def test_valid_json_events_come_out_as_if_held(api: str, usage: Any, nested: bool,
                                               other: dict[str, Any], style: str,
                                               line_end: bytes, pad_first: bool, limit: int,
                                               rng: random.Random) -> None:
    body = place_usage(api, usage, nested, other)
    if pad_first:  # the long member before the usage, or after it
        body = {"pad": body.pop("pad"), **body}
    if style == "lines":  # one data field per line of an indented text (sse-starlette)
        text = json.dumps(body, indent=1).encode()
    else:
        text = json.dumps(body, separators=(",", ":") if style == "compact" else None).encode()
    event = b"event: e" + line_end + b"".join(
        b"data: " + line + line_end for line in text.split(b"\n")) + line_end
    stream = event + b"data: [DONE]" + line_end + line_end
    held = relay_run("py", [stream], api)
    for kind in KINDS:
        out, counts, pending = relay_run(kind, cut(stream, rng, 5), api, limit)
        assert counts[5] == 1  # oversized: scanned as it streamed
        if counts[6]:  # too_large: the usage value itself is over the bound
            assert out == stream
            continue
        assert (out, counts[:5]) == (held[0], held[1][:5])
        assert max(pending) <= limit + 2


# --- large events: 1 to 50 MB ---------------------------------------------------------------

def vllm_first_chunk(ids: int, usage_first: bool) -> bytes:
    """vLLM's first chat chunk with ``return_token_ids`` and continuous usage stats: the
    prompt's ids in the event (300k ids: about 1.9 MiB)."""
    head = (b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
            b'"finish_reason":null,"token_ids":[]}]')
    usage = b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":0}' % (ids, ids)
    prompt_ids = b'"prompt_token_ids":[' + b",".join(
        b"%d" % (i * 7919 % 150000) for i in range(ids)) + b"]"
    members = [usage, prompt_ids] if usage_first else [prompt_ids, usage]
    return b"data: " + head + b"," + b",".join(members) + b"}\n\n"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ids, usage_first", [(300_000, True), (300_000, False),
                                              (1_200_000, False), (7_000_000, True)])
def test_large_events_rewritten_within_the_bound(kind: str, ids: int,
                                                 usage_first: bool) -> None:
    event = vllm_first_chunk(ids, usage_first)
    stream = event + b'data: {"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n'
    read = 64 * 1024
    chunks = [stream[i:i + read] for i in range(0, len(stream), read)]
    held = relay_run("c", [stream])  # the reference: held whole
    limit = 1 << 20  # the default bound
    assert len(event) > limit
    out, counts, pending = relay_run(kind, chunks, limit=limit)
    assert out == held[0] and out != stream
    assert counts == (3, 2, 0, 0, 0, 1, 0)
    assert max(pending) <= limit


@pytest.mark.parametrize("kind", KINDS)
def test_a_50_mb_event_keeps_at_most_the_bound(kind: str) -> None:
    """The heap a relay keeps after each read of a 50 MB event (usage at its end, a long
    string and an array before it) stays within the bound plus a small constant."""
    pad = b'"text":"' + b"y" * (30 << 20) + b'","ids":[' + b"12345," * (3 << 20) + b"0]"
    event = b"data: {" + pad + b',"usage":{"completion_tokens":5}}\n\n'
    read = 256 * 1024
    chunks = [event[i:i + read] for i in range(0, len(event), read)]
    limit = 1 << 20
    relay = twin("stream", kind).UsageRelay(P, C, max_event_bytes=limit)
    kept, tail = 0, b""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for chunk in chunks:
            out = relay.feed(chunk)
            tail = out[-200:] if out else tail
            del out
            kept = max(kept, tracemalloc.get_traced_memory()[0] - base - len(tail))
    finally:
        tracemalloc.stop()
    assert kept <= limit + SMALL, f"{kept} bytes kept, bound {limit}"
    assert tail.endswith(b'"usage":{"completion_tokens":5,"prompt_tokens":40000,'
                         b'"total_tokens":40005,"prompt_tokens_details":'
                         b'{"cached_tokens":32000}}}\n\n')
    assert tuple(relay.counts) == (1, 1, 0, 0, 0, 1, 0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_usage_value_over_the_bound_goes_out_as_it_came(kind: str) -> None:
    usage = b'{"completion_tokens":5,"junk":"' + b"z" * 300_000 + b'"}'
    event = b"data: {" + b'"pad":"' + b"p" * 200_000 + b'","usage":' + usage + b"}\n\n"
    chunks = [event[i:i + 10_000] for i in range(0, len(event), 10_000)]
    out, counts, pending = relay_run(kind, chunks, limit=100_000)
    assert out == event
    assert counts == (1, 0, 0, 0, 0, 1, 1)
    assert max(pending) <= 100_000


# --- what differs from a held event (stated in the README) ----------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_every_usage_member_of_an_oversized_event_is_rewritten(kind: str) -> None:
    """A held event rewrites the last of two usage members (the one json keeps); one too
    large to hold cannot wait for the last, so it rewrites each as it passes."""
    event = (b'data: {"usage":{"completion_tokens":1},"pad":"' + b"p" * 100 +
             b'","usage":{"completion_tokens":2}}\n\n')
    out, counts, _ = relay_run(kind, [event], limit=50)
    assert out.count(b'"prompt_tokens":40000') == 2 and counts[1] == 2
    held, held_counts, _ = relay_run(kind, [event])
    assert held.count(b'"prompt_tokens":40000') == 1 and held_counts[1] == 1
    assert json.loads(out[6:-2]) == json.loads(held[6:-2])


@pytest.mark.parametrize("kind", KINDS)
def test_oversized_event_that_is_not_json_is_unreadable_only_with_the_key(kind: str) -> None:
    text = b"data: " + b"w" * 500 + b"\n\n"
    assert relay_run(kind, [text], limit=100)[:2] == (text, (1, 0, 0, 0, 0, 1, 0))
    keyed = b'data: [{"usage":{"completion_tokens":1}}' + b" " * 500 + b"]\n\n"
    assert relay_run(kind, [keyed], limit=100)[:2] == (keyed, (1, 0, 0, 0, 1, 1, 0))


@pytest.mark.parametrize("kind", KINDS)
def test_oversized_first_event_after_a_bom(kind: str) -> None:
    event = b'\xef\xbb\xbfdata: {"usage":{"completion_tokens":1},"pad":"' + b"p" * 200 + \
        b'"}\n\n'
    held = relay_run(kind, [event])
    for size in (1, 2, 7):
        chunks = [event[i:i + size] for i in range(0, len(event), size)]
        assert relay_run(kind, chunks, limit=64)[:2] == (held[0], (*held[1][:5], 1, 0))
    assert held[0] != event


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit", [16, 22, 23, 24, 25, 26, 30])
@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_a_usage_value_never_closed_counts_the_same_however_cut(kind: str, limit: int,
                                                               line_end: bytes) -> None:
    """Found by fuzz_relay: a usage object still open when its (oversized) event ends was
    unreadable fed whole but too_large when a read ended inside it past the bound (and, with
    CRLF, the other way when a read ended between the blank line's CR and LF). Its size at
    the event's end, up to the blank line's CR or LF, decides, whatever the cut."""
    event = (b'data: {"pad":"' + b"p" * 40 + b'","usage":{"completion_tokens":1' + line_end
             + line_end)
    stream = event + b"data: next" + line_end + line_end
    whole = relay_run(kind, [stream], limit=limit)
    assert whole[0] == stream and whole[1][1] == 0
    assert whole[1][4] + whole[1][6] == 1  # unreadable or too_large, once
    for cut_at in range(1, len(stream)):
        assert relay_run(kind, [stream[:cut_at], stream[cut_at:]], limit=limit)[:2] == \
            whole[:2], cut_at
