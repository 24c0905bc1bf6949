"""find_usage and rewrite_usage against json.loads, on both twins; a relayed event is
rewrite_usage of its data."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import _twins
import pytest
from _budget import examples
from _usage import expected_usage
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tokcore._backend import REQUIRE_EXTENSIONS
from tokcore.members import _members_py
from tokcore.stream import _usage_py

NOT_FOUND = object()
MARK = b"[987654321]"  # a value no generated payload holds


def oracle_usage(payload: bytes) -> Any:
    """What json.loads says the top-level usage value is (None: none), NOT_FOUND if invalid."""
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        return NOT_FOUND
    return obj.get("usage") if isinstance(obj, dict) else None


def check_span(payload: bytes, span: tuple[int, int] | None) -> None:
    """``span`` is exactly the top-level usage value json.loads keeps (the last one)."""
    expected = oracle_usage(payload)
    assert expected is not NOT_FOUND
    if expected is None:
        assert span is None
        return
    assert span is not None
    start, end = span
    assert json.loads(payload[start:end]) == expected
    marked = json.loads(payload[:start] + MARK + payload[end:])
    assert marked["usage"] == json.loads(MARK)


def check_rewrite(twin: ModuleType, payload: bytes, prompt: int, cached: int | None) -> None:
    result = twin.rewrite_usage(payload, prompt, cached)
    usage = oracle_usage(payload)
    expected = expected_usage(usage, prompt, cached) if isinstance(usage, dict) else None
    if expected is None:
        assert result is payload
        return
    start, end = twin.find_usage(payload)
    assert json.loads(result)["usage"] == expected
    # in place: the bytes before the usage value, after it and of every member not set stay
    new_end = end + len(result) - len(payload)
    assert result[:start] == payload[:start] and result[new_end:] == payload[end:]
    old, new = payload[start:end], result[start:new_end]
    for key in usage:
        if key not in SET_KEYS:
            old_span = _members_py.find_member(old, key)
            new_span = _members_py.find_member(new, key)
            assert old_span and new_span
            assert old[old_span[0]:old_span[1]] == new[new_span[0]:new_span[1]], key


SET_KEYS = {"prompt_tokens", "total_tokens", "prompt_tokens_details"}


# --- generated JSON --------------------------------------------------------------------------

KEYS = st.sampled_from(["usage", "id", "choices", "delta", "content", "prompt_tokens",
                        "completion_tokens", "total_tokens", "prompt_tokens_details",
                        "cached_tokens", "usag", "usagee", "Usage", 'us"age']) | st.text(max_size=6)
SCALARS = (st.none() | st.booleans() | st.integers(-(10**20), 10**20)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.sampled_from(["usage", '"usage":', '{"usage":1}', "\\", "\n"])
           | st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12)
USAGE = st.dictionaries(
    st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens",
                     "prompt_tokens_details", "completion_tokens_details", "x"]),
    st.none() | st.integers(-5, 10**19) | st.booleans()
    | st.dictionaries(st.sampled_from(["cached_tokens", "audio_tokens", "y"]),
                      st.none() | st.integers(0, 10**6) | st.booleans() | st.floats(0, 9),
                      max_size=3)
    | st.floats(0, 1e6, allow_nan=False),
    max_size=6)


@st.composite
def json_texts(draw: st.DrawFn) -> bytes:
    """A top-level object, written out by hand: repeated keys, odd spacing, escaped keys."""
    ws = st.sampled_from(["", "", " ", "\n", " \t\r\n"])
    members = draw(st.lists(st.tuples(KEYS, VALUES | USAGE), max_size=5))
    if draw(st.booleans()):
        members.insert(draw(st.integers(0, len(members))), ("usage", draw(USAGE | st.none())))
    parts = []
    for key, value in members:
        key_text = json.dumps(key, ensure_ascii=draw(st.booleans()))
        if key == "usage":
            key_text = draw(st.sampled_from(['"usage"', '"usage"', '"us\\u0061ge"',
                                             '"\\u0075sage"', '"usag\\u0065"']))
        value_text = json.dumps(value, ensure_ascii=draw(st.booleans()),
                                indent=draw(st.sampled_from([None, None, 1])),
                                separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
        parts.append(draw(ws) + key_text + draw(ws) + ":" + draw(ws) + value_text + draw(ws))
    text = draw(ws) + "{" + ",".join(parts) + draw(ws) + "}" + draw(ws)
    return text.encode("utf-8", "surrogatepass")


# --- find_usage --------------------------------------------------------------------------------

USAGE_VALUE = b'{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}'


@pytest.mark.parametrize("payload, found", [
    (b'{"usage":' + USAGE_VALUE + b"}", True),
    (b'{"id":"x","choices":[],"usage":' + USAGE_VALUE + b"}", True),
    (b'{"usage":null}', False),
    (b'{"a":1,"usage" : null }', False),
    (b'{"choices":[{"delta":{"content":"usage"}}]}', False),  # a streamed token
    (b'{"content":"\\"usage\\":{\\"a\\":1}"}', False),  # usage inside a string
    (b'{"a":{"usage":{"b":1}}}', False),  # nested, not top-level
    (b'[{"usage":{"b":1}}]', False),  # not an object
    (b'[DONE]', False),
    (b'', False),
    (b'{"usage":{"b":1}', False),  # truncated
    (b'{"usage":{"b":"}', False),  # truncated inside a string
    (b'{"usage":{"b":1}} x', False),  # trailing data
    (b'{"usage":{"a":1},"usage":null}', False),  # the last one wins
    (b'{"usage":null,"usage":{"a":1}}', True),
    (b'{"us\\u0061ge":{"a":1}}', True),  # an escaped spelling is the same key
    (b'{"\\u0075\\u0073\\u0061\\u0067\\u0065":{"a":1}}', True),
    (b'{"usage\\u0000":{"a":1}}', False),
    (b'\xef\xbb\xbf{"usage":{"a":1}}', True),  # json.loads(bytes) skips a BOM
    (b' \n{"usage":[1,2]}\r\n', True),
    (b'{"k\\"usage":null}', False),
    (b'{"k\\"usage":null,"usage":5}', True),
])
def test_find_usage_cases(stream_twin: ModuleType, payload: bytes, found: bool) -> None:
    span = stream_twin.find_usage(payload)
    assert (span is not None) == found
    if oracle_usage(payload) is not NOT_FOUND:
        check_span(payload, span)
    assert span == _usage_py.find_usage(payload)


def test_find_usage_accepts_bytes_like(stream_twin: ModuleType) -> None:
    payload = b'{"usage":{"a":1}}'
    for arg in (payload, bytearray(payload), memoryview(payload), memoryview(b"xx" + payload)[2:]):
        assert stream_twin.find_usage(arg) == (9, 16)
    assert stream_twin.find_usage(bytearray()) is None


@pytest.mark.parametrize("bad", ['{"usage":{}}', 5, None, ["x"]])
def test_find_usage_rejects_non_bytes(stream_twin: ModuleType, bad: object) -> None:
    with pytest.raises(TypeError):
        stream_twin.find_usage(bad)


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(json_texts())
def test_find_usage_agrees_with_json_loads(payload: bytes) -> None:
    assume(oracle_usage(payload) is not NOT_FOUND)
    for twin in twins():
        check_span(payload, twin.find_usage(payload))


@settings(max_examples=examples(300))
@given(json_texts(), st.data())
def test_find_usage_twins_agree_on_damaged_text(payload: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(payload)))
    junk = data.draw(st.binary(max_size=4) | st.sampled_from([b'"', b"\\", b"}", b"]", b","]))
    damaged = payload[:cut] + junk + payload[cut + data.draw(st.integers(0, 3)):]
    results = {twin.__name__: twin.find_usage(damaged) for twin in twins()}
    assert len(set(results.values())) == 1, results
    if oracle_usage(damaged) is not NOT_FOUND:
        check_span(damaged, next(iter(results.values())))


@given(st.binary(max_size=64))
def test_find_usage_twins_agree_on_any_bytes(payload: bytes) -> None:
    assert len({twin.find_usage(payload) for twin in twins()}) == 1


def twins() -> list[Any]:
    return _twins.twins("stream")


# --- rewrite_usage ---------------------------------------------------------------------------

def test_rewrite_usage_contract(stream_twin: ModuleType) -> None:
    payload = (b'{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,'
               b'"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":1}}}')
    assert stream_twin.rewrite_usage(payload, 40000, 32000) == (
        b'{"id":"c1","choices":[],"usage":{"prompt_tokens":40000,"completion_tokens":5,'
        b'"total_tokens":40005,"prompt_tokens_details":{"cached_tokens":32000,"audio_tokens":1}}}')
    assert stream_twin.rewrite_usage(payload, 10) == (
        b'{"id":"c1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,'
        b'"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":1}}}')


@pytest.mark.parametrize("usage, expected", [
    (b'{"prompt_tokens":1}',
     b'{"prompt_tokens":9,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":4}}'),
    (b'{ "completion_tokens" : 2 , "prompt_tokens_details" : null }',
     b'{ "completion_tokens" : 2 , "prompt_tokens_details" : {"cached_tokens":4},'
     b'"prompt_tokens":9,"total_tokens":11 }'),
    (b'{"total_tokens":1,"completion_tokens":null,"prompt_tokens_details":{}}',
     b'{"total_tokens":9,"completion_tokens":null,"prompt_tokens_details":{"cached_tokens":4},'
     b'"prompt_tokens":9}'),
    (b'{"completion_tokens":1.5,"x":[1, 2],"prompt_tokens_details":7}',
     b'{"completion_tokens":1.5,"x":[1, 2],"prompt_tokens_details":{"cached_tokens":4},'
     b'"prompt_tokens":9,"total_tokens":9}'),
    (b'{"completion_tokens":-0,"w":"\xc3\xa9","cost":1e400}',
     b'{"completion_tokens":-0,"w":"\xc3\xa9","cost":1e400,"prompt_tokens":9,"total_tokens":9,'
     b'"prompt_tokens_details":{"cached_tokens":4}}'),
    (b'{"completion_tokens":123456789012345678}',
     b'{"completion_tokens":123456789012345678,"prompt_tokens":9,'
     b'"total_tokens":123456789012345687,"prompt_tokens_details":{"cached_tokens":4}}'),
    (b'{"completion_tokens":1234567890123456789}',  # 19 digits: no count, left alone
     b'{"completion_tokens":1234567890123456789}'),
    (b'{"a":1,"a":2}', b'{"a":1,"a":2}'),  # no count key of this API: left alone
    (b'{}', b'{}'),
    (b'{"prompt_tokens":1,"prompt_tokens":2,"prompt_tokens_details":{"cached_tokens":0,'
     b'"cached_tokens":1}}',
     b'{"prompt_tokens":1,"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":0,'
     b'"cached_tokens":4},"total_tokens":9}'),  # the last of repeated keys, as json.loads
])
def test_rewrite_usage_values(stream_twin: ModuleType, usage: bytes, expected: bytes) -> None:
    payload = b'{"usage":' + usage + b',"z":0}'
    assert stream_twin.rewrite_usage(payload, 9, 4) == b'{"usage":' + expected + b',"z":0}'


@pytest.mark.parametrize("prompt", [2**62 - 1, 2**62, 2**63 - 3231, 2**63 - 1])
def test_rewrite_usage_total_past_int64(stream_twin: ModuleType, prompt: int) -> None:
    # the total of a count near 2**63 and the output count does not fit int64: no wraparound
    payload = b'{"usage":{"completion_tokens":3231},"id":{}}'
    assert json.loads(stream_twin.rewrite_usage(payload, prompt))["usage"] == {
        "completion_tokens": 3231, "prompt_tokens": prompt, "total_tokens": prompt + 3231}


@pytest.mark.parametrize("payload", [
    b'{"usage":null}', b'{"usage":{}}', b'{"usage":{"input_tokens":1}}', b'{"usage":5}',
    b'{"usage":[1]}', b'{"usage":"x"}', b'[DONE]', b"",
    b'{"usage":{"a":01}}', b'{"usage":{"a":1}', b'{"choices":[{"delta":{"content":"usage"}}]}',
])
def test_rewrite_usage_without_usage_object(stream_twin: ModuleType, payload: bytes) -> None:
    assert stream_twin.rewrite_usage(payload, 9, 4) is payload
    assert stream_twin.rewrite_usage(bytearray(payload), 9) == payload


@pytest.mark.parametrize("prompt, cached, error", [
    ("9", None, TypeError), (9.0, None, TypeError), (True, None, TypeError),
    (9, "1", TypeError), (9, False, TypeError), (-1, None, ValueError), (9, -2, ValueError),
    (2**63, None, ValueError), (9, 2**63, ValueError),
    pytest.param(10**5000, None, ValueError, id="10**5000"),
])
def test_rewrite_usage_checks_counts(stream_twin: ModuleType, prompt: Any, cached: Any,
                                     error: type[Exception]) -> None:
    with pytest.raises(error):
        stream_twin.rewrite_usage(b'{"usage":{"prompt_tokens":0}}', prompt, cached)
    with pytest.raises(error):
        stream_twin.UsageRelay(prompt, cached)


def test_rewrite_usage_rejects_str(stream_twin: ModuleType) -> None:
    with pytest.raises(TypeError):
        stream_twin.rewrite_usage('{"usage":{}}', 1)


@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
@given(json_texts(), st.integers(0, 2**63 - 1), st.none() | st.integers(0, 2**63 - 1))
def test_rewrite_usage_agrees_with_json_loads(payload: bytes, prompt: int,
                                              cached: int | None) -> None:
    assume(oracle_usage(payload) is not NOT_FOUND)
    if cached is not None and cached > prompt:  # the cached tokens are part of the prompt
        cached = prompt - cached % (prompt + 1)
    results = set()
    for twin in twins():
        check_rewrite(twin, payload, prompt, cached)
        results.add(twin.rewrite_usage(payload, prompt, cached))
    assert len(results) == 1


@settings(max_examples=examples(300))
@given(USAGE, st.integers(0, 10**6), st.none() | st.integers(0, 10**6), st.booleans())
def test_rewrite_usage_objects(usage: dict[str, Any], prompt: int, cached: int | None,
                               spaced: bool) -> None:
    if cached is not None and cached > prompt:  # the cached tokens are part of the prompt
        prompt, cached = cached, prompt
    seps = (", ", ": ") if spaced else (",", ":")
    payload = b'{"choices":[],"usage":' + json.dumps(usage, separators=seps).encode() + b"}"
    results = set()
    for twin in twins():
        check_rewrite(twin, payload, prompt, cached)
        results.add(twin.rewrite_usage(payload, prompt, cached))
    assert len(results) == 1


def test_backend_is_cython_when_required() -> None:
    if REQUIRE_EXTENSIONS:
        from tokcore._backend import LOADED
        assert all(LOADED[name] == "cython"
                   for name in ("members._members", "stream._usage", "stream._relay",
                                "stream._events"))


@pytest.mark.parametrize("key", [b'"usage"', b'"us\\u0061ge"'])
def test_find_usage_at_every_offset(stream_twin: ModuleType, key: bytes) -> None:
    # the Cython twin scans 16 bytes at a time: put the key across every block boundary
    for pad in range(70):
        payload = b'{"' + b"a" * pad + b'":"x\\"usage\\"",' + key + b':{"n":1}}'
        span = stream_twin.find_usage(payload)
        assert span is not None and payload[span[0]:span[1]] == b'{"n":1}', pad
        assert stream_twin.find_usage(payload.replace(key, b'"usagf"')) is None
        null = payload[:-8] + b" null }"
        assert stream_twin.find_usage(null) is None
        check_span(null, None)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(json_texts(), st.none() | st.integers(0, 10**6))
def test_relay_event_is_rewrite_usage_of_its_data(payload: bytes, cached: int | None) -> None:
    payload = payload.replace(b"\n", b" ").replace(b"\r", b" ")  # whitespace only in JSON
    event = b"data: " + payload + b"\n\n"
    for twin in twins():
        relay = twin.UsageRelay(10**6, cached)
        assert relay.feed(event) == \
            b"data: " + twin.rewrite_usage(payload, 10**6, cached) + b"\n\n"
