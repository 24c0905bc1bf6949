"""The repros of issue 21, each on both twins: usage that cannot mis-bill, held and streamed
events that agree, the member API's one key path and its checked value.

The expected bytes are written out by hand from docs/dialects.md's usage rules; the relay's are
the same as ``rewrite_usage``'s of the event's data.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from tokcore.stream import _relay_iter as relay_module

MESSAGE_START = (b'{"type":"message_start","message":{"usage":{"input_tokens":5,'
                 b'"cache_creation_input_tokens":500,"cache_read_input_tokens":7,'
                 b'"output_tokens":1}}}')
COUNT_FIELDS = ("events", "rewritten", "foreign", "not_object", "unreadable", "oversized",
                "too_large")


def counts(**nonzero: int) -> tuple[int, ...]:
    return tuple(nonzero.get(name, 0) for name in COUNT_FIELDS)


def usage_of(text: bytes, *path: str) -> Any:
    node = json.loads(text)
    for key in path:
        node = node[key]
    return node


def prompt_parts(usage: dict[str, int]) -> int:
    return sum(usage.get(key, 0) for key in ("input_tokens", "cache_creation_input_tokens",
                                             "cache_read_input_tokens"))


# --- 1. usage semantics --------------------------------------------------------------------

def test_anthropic_parts_sum_to_the_prompt(usage_twin: ModuleType) -> None:
    out = usage_twin.rewrite_usage(MESSAGE_START, 1000, 200, api="messages")
    assert out == (b'{"type":"message_start","message":{"usage":{"input_tokens":800,'
                   b'"cache_creation_input_tokens":0,"cache_read_input_tokens":200,'
                   b'"output_tokens":1}}}')
    assert prompt_parts(usage_of(out, "message", "usage")) == 1000


def test_anthropic_without_cached_reads_nothing_from_the_cache(usage_twin: ModuleType) -> None:
    out = usage_twin.rewrite_usage(MESSAGE_START, 1000, api="messages")
    assert usage_of(out, "message", "usage") == {
        "input_tokens": 1000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        "output_tokens": 1}
    # a vLLM-style upstream that reports the whole prompt as read from the cache
    upstream = b'{"usage":{"input_tokens":0,"cache_read_input_tokens":40000,"output_tokens":9}}'
    out = usage_twin.rewrite_usage(upstream, 40000, api="messages")
    assert out == b'{"usage":{"input_tokens":40000,"cache_read_input_tokens":0,"output_tokens":9}}'
    assert prompt_parts(usage_of(out, "usage")) == 40000
    # nothing is added where absent
    assert usage_twin.rewrite_usage(b'{"usage":{"output_tokens":3}}', 10, api="messages") == \
        b'{"usage":{"output_tokens":3,"input_tokens":10}}'


@pytest.mark.parametrize("cached, parts", [(None, (1000, 0, 0)), (0, (1000, 0, 0)),
                                           (1000, (0, 0, 1000)), (1, (999, 0, 1))])
def test_anthropic_parts_every_split(usage_twin: ModuleType, cached: int | None,
                                     parts: tuple[int, int, int]) -> None:
    out = usage_twin.rewrite_usage(MESSAGE_START, 1000, cached, api="messages")
    usage = usage_of(out, "message", "usage")
    assert (usage["input_tokens"], usage["cache_creation_input_tokens"],
            usage["cache_read_input_tokens"]) == parts


@pytest.mark.parametrize("api, details", [("chat", "prompt_tokens_details"),
                                          ("responses", "input_tokens_details")])
def test_cached_none_means_no_cached_tokens(usage_twin: ModuleType, api: str,
                                            details: str) -> None:
    prompt, output = ("prompt_tokens", "completion_tokens") if api == "chat" else \
        ("input_tokens", "output_tokens")
    body = json.dumps({"usage": {prompt: 5, output: 2, details: {"cached_tokens": 4,
                                                                 "audio_tokens": 1}}},
                      separators=(",", ":")).encode()
    out = usage_twin.rewrite_usage(body, 100, api=api)
    assert usage_of(out, "usage") == {prompt: 100, output: 2,
                                      details: {"cached_tokens": 0, "audio_tokens": 1},
                                      "total_tokens": 102}
    # nothing is added where absent: no details, details without the count, details null
    for usage in ({prompt: 5, output: 2}, {prompt: 5, output: 2, details: {"audio_tokens": 1}},
                  {prompt: 5, output: 2, details: None}):
        text = json.dumps({"usage": usage}, separators=(",", ":")).encode()
        assert usage_of(usage_twin.rewrite_usage(text, 100, api=api), "usage") == \
            {**usage, prompt: 100, "total_tokens": 102}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_cached_above_prompt_is_a_value_error_everywhere(stream_twin: Any, api: str) -> None:
    message = r"^cached_tokens \(20\) must not exceed prompt_tokens \(10\): "
    with pytest.raises(ValueError, match=message):
        stream_twin.rewrite_usage(b'{"usage":{"prompt_tokens":1}}', 10, 20, api=api)
    with pytest.raises(ValueError, match=message):
        stream_twin.UsageRelay(10, 20, api=api)
    assert stream_twin.rewrite_usage(b"{}", 10, 10, api=api) == b"{}"  # equal is fine


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_cached_above_prompt_at_the_stream_helpers_call(api: str) -> None:
    message = r"^cached_tokens \(20\) must not exceed prompt_tokens \(10\): "
    with pytest.raises(ValueError, match=message):
        relay_module.relay_usage([b"data: x\n\n"], 10, 20, api=api)

    async def chunks() -> Any:
        yield b"data: x\n\n"  # pragma: no cover - the call raises first

    with pytest.raises(ValueError, match=message):
        relay_module.arelay_usage(chunks(), 10, 20, api=api)


#: usage values that are not one JSON value: left as they came, counted unreadable
NOT_JSON_COUNTS = [b"007", b"+5", b"0x10", b"abc", b"nul", b"1.2.3", b".5", b"-", b"1.",
                   b'"\xff"', b'"\xc3"', b'"\xed\xa0\x80"', b"5\x00", b'"a\x01"', b"NaN",
                   b"Infinity", b"1e", b"--1", b"tru", b"[1,]", b'{"a":1,}']


@pytest.mark.parametrize("count", NOT_JSON_COUNTS)
def test_invalid_usage_json_is_unreadable(stream_twin: Any, count: bytes) -> None:
    data = b'{"usage":{"prompt_tokens":3,"completion_tokens":' + count + b"}}"
    assert stream_twin.rewrite_usage(data, 100, 10) is data
    event = b"data: " + data + b"\n\n"
    relay = stream_twin.UsageRelay(100, 10)
    assert relay.feed(event) is event
    assert tuple(relay.counts) == counts(events=1, unreadable=1)
    # streamed (the event over the bound, the usage value under it): the same
    relay = stream_twin.UsageRelay(100, 10, max_event_bytes=len(event) - 12)
    assert relay.feed(event[:7]) + relay.feed(event[7:]) + relay.close() == event
    assert tuple(relay.counts) == counts(events=1, unreadable=1, oversized=1)


@pytest.mark.parametrize("count, total", [(b"5.0", 100), (b'"5"', 100), (b"null", 100),
                                          (b"-0", 100), (b"5e0", 100), (b"5", 105)])
def test_valid_non_integer_counts_count_0(stream_twin: Any, count: bytes, total: int) -> None:
    data = b'{"usage":{"prompt_tokens":3,"completion_tokens":' + count + b"}}"
    out = stream_twin.rewrite_usage(data, 100)
    assert usage_of(out, "usage")["total_tokens"] == total
    relay = stream_twin.UsageRelay(100)
    relay.feed(b"data: " + data + b"\n\n")
    assert tuple(relay.counts) == counts(events=1, rewritten=1)


def test_the_issue_repro_007(relay_twin: ModuleType) -> None:
    event = b'data: {"usage":{"completion_tokens":007}}\n\n'
    relay = relay_twin.UsageRelay(100, 10)
    assert relay.feed(event) == event
    assert relay.counts.unreadable == 1 and relay.counts.rewritten == 0


def test_invalid_json_outside_the_usage_value_does_not_matter(usage_twin: ModuleType) -> None:
    # only the usage value must be one JSON value: the rest is read as before
    data = b'{"id":007,"usage":{"prompt_tokens":1,"completion_tokens":2}}'
    assert usage_of(usage_twin.rewrite_usage(data, 9).replace(b"007", b"7"), "usage") == \
        {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}


# --- 2. held and streamed events agree ------------------------------------------------------

@pytest.mark.parametrize("data", [b'xx{"usage":null}', b'[1,{"usage":null}',
                                  b'{"a":1}{"usage":null}', b'[{"usage":null}]',
                                  b' x {"a":1,"usage":null}', b'{"a":1}}{"usage":null}'])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_not_an_object_spelling_the_key_is_unreadable(relay_twin: ModuleType, data: bytes,
                                                     api: str) -> None:
    event = b"data: " + data + b"\n\n"
    held = relay_twin.UsageRelay(10, api=api)
    assert held.feed(event) is event
    assert tuple(held.counts) == counts(events=1, unreadable=1)
    streamed = relay_twin.UsageRelay(10, api=api, max_event_bytes=8)
    assert streamed.feed(event) is event
    assert tuple(streamed.counts) == counts(events=1, unreadable=1, oversized=1)


def test_find_usage_of_a_null_tail_that_is_no_object(usage_twin: ModuleType) -> None:
    for data in (b'xx{"usage":null}', b'{"a":1}{"usage":null}'):
        assert usage_twin.find_usage(data) is None
        assert usage_twin.rewrite_usage(data, 5) is data
    assert usage_twin.find_usage(b'{"a":1,"usage":null}') is None


@pytest.mark.parametrize("chunk", [b"data: xxxxxxxx\r\n\r\n", b'data: "usage" xxxxxx\n\n',
                                   b"data: a\n\ndata: xxxxxxxx\r\n\r\ndata: b\r\n\r\n",
                                   b'data: {"usage":null,"x":"yyyyyyyy"}\n\n'])
def test_a_chunk_passed_through_is_the_chunk_itself(relay_twin: ModuleType,
                                                    chunk: bytes) -> None:
    relay = relay_twin.UsageRelay(1, max_event_bytes=5)
    assert relay.feed(chunk) is chunk


@pytest.mark.parametrize("call", [
    lambda m: m.UsageRelay(1, 2, "chat"),
    lambda m: m.UsageRelay(),
    lambda m: m.UsageRelay(1, apí="chat"),
    lambda m: m.UsageRelay(1, cached_tokens=2, prompt_tokens=3),
    lambda m: m.EventDecoder(5),
    lambda m: m.EventDecoder(max_event_byte=5),
])
def test_constructors_raise_the_same_type_error(call: Any) -> None:
    from _twins import twins
    messages = set()
    for twin in twins("stream"):
        with pytest.raises(TypeError) as info:
            call(twin)
        messages.add(str(info.value))
    assert len(messages) == 1, messages
    (message,) = messages
    assert message.startswith(("UsageRelay.__init__() ", "EventDecoder.__init__() ")), message


# --- 3. the member API ----------------------------------------------------------------------

def test_set_member_checks_its_value(members_twin: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"^value is not one JSON value \(RFC 8259, UTF-8\): "
                                         r"it stops at offset 1$"):
        members_twin.set_member(b'{"a":1}', "k", b"not json")
    assert members_twin.set_member(b'{"a":1}', "k", b"not json", trusted=True) == \
        b'{"a":1,"k":not json}'  # the caller said it trusts the bytes
    for bad, offset in ((b"", 0), (b"[1,", 3), (b'"\xff"', 1), (b"1 2", 2), (b"{}x", 2)):
        with pytest.raises(ValueError, match=f"it stops at offset {offset}$"):
            members_twin.set_member(b"{}", "k", bad)
    assert members_twin.set_member(b"{}", "k", b' [1, {"a": "\xc3\xa9"}] ') == \
        b'{"k": [1, {"a": "\xc3\xa9"}] }'


def test_one_key_path_for_the_three(members_twin: ModuleType) -> None:
    text = b'{"a":{"b":1,"c":2},"d":3}'
    assert members_twin.find_member(text, ("a", "b")) == (10, 11)
    assert members_twin.set_member(text, ("a", "b"), b"5") == b'{"a":{"b":5,"c":2},"d":3}'
    assert members_twin.del_member(text, ("a", "b")) == b'{"a":{"c":2},"d":3}'
    assert members_twin.set_member(text, ("a", "e"), b"5") == b'{"a":{"b":1,"c":2,"e":5},"d":3}'
    assert members_twin.set_member(text, ("x", "y"), b"5") == \
        b'{"a":{"b":1,"c":2},"d":3,"x":{"y":5}}'
    assert members_twin.set_member(b"{}", ("x", "y", "z"), b"[]") == b'{"x":{"y":{"z":[]}}}'
    assert members_twin.del_member(text, ("x", "y")) is text  # absent on the way: unchanged
    assert members_twin.find_member(text, ("x", "y")) is None
    assert members_twin.find_member(text, "d") == members_twin.find_member(text, ("d",))


@pytest.mark.parametrize("text, path, message", [
    (b"[1]", "a", "payload is not a JSON object: the scan stopped at offset 0"),
    (b'{"a":1', ("a", "b"), "payload is not a JSON object: the scan stopped at offset 6"),
    (b'{"a":5}', ("a", "b"), "the value at ('a',) is not a JSON object: the scan stopped at "
                             "offset 5"),
    (b'{"a":{"b":[1]}}', ("a", "b", "c"), "the value at ('a', 'b') is not a JSON object: the "
                                          "scan stopped at offset 10"),
    (b'{"a":{"b" 1}}', ("a", "b"), "the value at ('a',) is not a JSON object: the scan "
                                   "stopped at offset 10"),
])
def test_one_rule_for_what_is_not_an_object(members_twin: ModuleType, text: bytes, path: Any,
                                            message: str) -> None:
    for call in (lambda: members_twin.find_member(text, path),
                 lambda: members_twin.set_member(text, path, b"1"),
                 lambda: members_twin.del_member(text, path)):
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == message


@pytest.mark.parametrize("path", [(), ["a"], ("a", 1), b"a", None, 1])
def test_a_path_is_a_str_or_a_tuple_of_str(members_twin: ModuleType, path: Any) -> None:
    error = ValueError if path == () else TypeError
    for call in (lambda: members_twin.find_member(b"{}", path),
                 lambda: members_twin.set_member(b"{}", path, b"1"),
                 lambda: members_twin.del_member(b"{}", path)):
        with pytest.raises(error):
            call()


def test_the_twins_say_the_same(members_twin: ModuleType) -> None:
    from _twins import twins
    calls = [lambda m: m.find_member(b"{}", ()), lambda m: m.find_member(b"{}", ("a", 1)),
             lambda m: m.set_member(b"{}", "a", b"1,"), lambda m: m.del_member(b"[", ("a",))]
    for call in calls:
        seen = set()
        for twin in twins("members"):
            try:
                call(twin)
            except (TypeError, ValueError) as exc:
                seen.add((type(exc), str(exc)))
        assert len(seen) == 1, seen
