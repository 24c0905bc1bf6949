"""UsageRelay against the pre-filters and json round trips a relay would otherwise use.

The stream is what vLLM/SGLang send: ~260-byte compact-JSON events of one token each, a
final usage event with "choices":[], then [DONE]. It is fed one event per ``feed`` (the
worst case: per-call cost dominates), and as 1 KiB and 64 KiB network reads.
Throughput for the read cases: the case name gives the stream size; 1 GB/s for 1 MiB is
a mean of at most 1.05 ms.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from _common import FAST, REFERENCE, Target, add, make_runner

from tokcore import _sse_c, _sse_py

PROMPT, CACHED = 40000, 32000
STREAM_BYTES = 1 << 20
WORDS = [" the", " model", " usage", " of", " tokens", ",", " and", "\n", " é", " 42"]

PREFILTER = "b'\"usage\"' in event"
FIND = "event.find(b'\"usage\"')"
LOADS = "json.loads per event"
ROUND_TRIP = "prefilter+json.loads+update+json.dumps"
NAIVE = "split+prefilter+json rewrite"

TARGETS = [
    Target("feed 1 event, pass-through", PREFILTER, 3),
    Target("feed 1 event, pass-through", LOADS, 30),
    Target('feed 1 event, "usage":null', PREFILTER, 3),
    Target('feed 1 event, "usage":null', LOADS, 30),
    Target("rewrite the usage event", ROUND_TRIP, 3),
    Target("relay 1 MiB in 64 KiB reads", NAIVE, 10),
]


def token_event(i: int, usage_null: bool) -> bytes:
    obj = {"id": "chatcmpl-8f3c2a1b4d5e6f708192a3b4c5d6e7f8", "object": "chat.completion.chunk",
           "created": 1732000000, "model": "Qwen/Qwen2.5-7B-Instruct",
           "choices": [{"index": 0, "delta": {"content": WORDS[i % len(WORDS)]},
                        "logprobs": None, "finish_reason": None}]}
    if usage_null:
        obj["usage"] = None
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() \
        + b"\n\n"


USAGE_EVENT = (b'data: {"id":"chatcmpl-8f3c2a1b4d5e6f708192a3b4c5d6e7f8","object":'
               b'"chat.completion.chunk","created":1732000000,"model":"Qwen/Qwen2.5-7B-Instruct",'
               b'"choices":[],"usage":{"prompt_tokens":12,"total_tokens":112,'
               b'"completion_tokens":100,"prompt_tokens_details":null}}\n\n')


def stream(usage_null: bool) -> bytes:
    events, size, i = [], 0, 0
    while size < STREAM_BYTES - 400:
        events.append(token_event(i, usage_null))
        size += len(events[-1])
        i += 1
    body = b"".join(events) + USAGE_EVENT + b"data: [DONE]\n\n"
    return body


def prefilter(event: bytes) -> bool:
    return b'"usage"' in event


def find(event: bytes) -> int:
    return event.find(b'"usage"')


def loads(event: bytes) -> object:
    return json.loads(event[6:])


def round_trip(event: bytes) -> bytes:
    if b'"usage"' not in event:
        return event
    obj = json.loads(event[6:])
    usage = obj.get("usage")
    if isinstance(usage, dict):
        usage["prompt_tokens"] = PROMPT
        usage["total_tokens"] = PROMPT + usage.get("completion_tokens", 0)
        usage["prompt_tokens_details"] = {"cached_tokens": CACHED}
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return event


def naive_relay(chunks: list[bytes]) -> list[bytes]:
    """What a relay without tokcore does: buffer, split on blank lines, pre-filter, json."""
    out, buffer = [], b""
    for chunk in chunks:
        buffer += chunk
        *events, buffer = buffer.split(b"\n\n")
        out.extend(round_trip(event + b"\n\n") for event in events)
    return out


def relay_all(twin: object, chunks: list[bytes]) -> list[bytes]:
    relay = twin.UsageRelay(PROMPT, CACHED)  # type: ignore[attr-defined]
    out = [relay.feed(chunk) for chunk in chunks]
    out.append(relay.close())
    return out


def feeder(twin: object) -> Callable[[bytes], bytes]:
    return twin.UsageRelay(PROMPT, CACHED).feed  # type: ignore[attr-defined,no-any-return]


def main() -> None:
    runner = make_runner()
    for case, event in (("feed 1 event, pass-through", token_event(1, False)),
                        ('feed 1 event, "usage":null', token_event(1, True))):
        assert feeder(_sse_c)(event) is event
        add(runner, case, FAST, feeder(_sse_c), event)
        add(runner, case, REFERENCE, feeder(_sse_py), event)
        add(runner, case, PREFILTER, prefilter, event)
        add(runner, case, FIND, find, event)
        add(runner, case, LOADS, loads, event)

    case = "rewrite the usage event"
    assert feeder(_sse_c)(USAGE_EVENT) == round_trip(USAGE_EVENT)
    add(runner, case, FAST, feeder(_sse_c), USAGE_EVENT)
    add(runner, case, REFERENCE, feeder(_sse_py), USAGE_EVENT)
    add(runner, case, ROUND_TRIP, round_trip, USAGE_EVENT)
    add(runner, case, "rewrite_usage(data) (tokcore-c)", _sse_c.rewrite_usage,
        USAGE_EVENT[6:-2], PROMPT, CACHED)

    for label, usage_null in (("", False), (', "usage":null', True)):
        body = stream(usage_null)
        expected = b"".join(relay_all(_sse_py, [body]))
        for read in (1024, 65536):
            chunks = [body[i:i + read] for i in range(0, len(body), read)]
            assert b"".join(relay_all(_sse_c, chunks)) == expected
            case = f"relay 1 MiB in {read // 1024} KiB reads{label}"
            add(runner, case, FAST, relay_all, _sse_c, chunks)
            if read == 65536 and not usage_null:
                add(runner, case, REFERENCE, relay_all, _sse_py, chunks)
            add(runner, case, NAIVE, naive_relay, chunks)


if __name__ == "__main__":
    main()
