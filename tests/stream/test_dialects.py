"""The usage dialects (chat, responses, messages) on the streams and bodies servers write.

Every stream of ``_streams`` goes through both twins of ``UsageRelay`` under each ``api``,
fed whole, event by event, split at every offset and in random pieces, with \\n, \\r\\n and
\\r line ends; every body goes through ``rewrite_usage``. The oracle is written here with
``json`` from docs/dialects.md's table: the data of each event as WHATWG builds it, parsed
by ``json.loads``, its usage found by the dialect's paths and rewritten by its rules; the
bytes expected are built member by member with ``json.JSONDecoder.raw_decode``.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from _streams import BODIES, STREAMS, Body, Stream
from _twins import twins

import tokcore

P = 40000
CACHED = (32000, None)
APIS = ("chat", "responses", "messages")
COUNT_FIELDS = ("events", "rewritten", "foreign", "not_object", "unreadable", "oversized",
                "too_large")

STREAM_IDS = [s.name for s in STREAMS]
BODY_IDS = [b.name for b in BODIES]


# --- the oracle: docs/dialects.md's table, with json --------------------------------------

class Rules(NamedTuple):
    paths: tuple[tuple[str, ...], ...]
    prompt: str
    output: str
    total: str | None
    details: str | None
    cached: str
    cached_excluded: bool


RULES = {
    "chat": Rules((("usage",),), "prompt_tokens", "completion_tokens", "total_tokens",
                  "prompt_tokens_details", "cached_tokens", False),
    "responses": Rules((("usage",), ("response", "usage")), "input_tokens", "output_tokens",
                       "total_tokens", "input_tokens_details", "cached_tokens", False),
    "messages": Rules((("usage",), ("message", "usage")), "input_tokens", "output_tokens",
                      None, None, "cache_read_input_tokens", True),
}

#: Anthropic's cache writes: the caller's counts cover the whole prompt, so they become 0
CREATION = "cache_creation_input_tokens"
NONE, REWRITTEN, FOREIGN, NOT_OBJECT, UNREADABLE = ("none", "rewritten", "foreign",
                                                    "not_object", "unreadable")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")


def event_data(event: bytes) -> bytes | None:
    """The event's data as the WHATWG rules build it (data fields joined by LF)."""
    values = []
    for line in _LINE_END.split(event):
        if not line or line.startswith(b":"):
            continue
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            values.append(value)
    return b"\n".join(values) if values else None


def data_span(event: bytes) -> tuple[int, int]:
    """Where the value of the one ``data`` line of a server's event is."""
    starts = [m.end() for m in re.finditer(rb"(?:\A|\n)data:", event)]
    assert len(starts) == 1, event
    start = starts[0] + (event[starts[0]:starts[0] + 1] == b" ")
    return start, event.index(b"\n", start)


def located(obj: Any, api: str) -> tuple[tuple[str, ...], Any] | None:
    """The dialect's usage value: the first path present whose value is not null."""
    for path in RULES[api].paths:
        node = obj
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]) is not None:
            return path, node[path[-1]]
    return None


def count_value(value: Any) -> int | None:
    """The output count: an int of at most 18 digits is itself, other values 0, None if
    longer (unreadable)."""
    if type(value) is not int:
        return 0
    return value if len(str(abs(value))) <= 18 else None


def outcome(data: bytes | None, api: str) -> str:
    """What the relay must do with an event's data under ``api``."""
    if data is None:
        return NONE
    try:
        obj = json.loads(data)
    except ValueError:
        # the servers' only data that is not JSON ([DONE]) holds no spelling of the key
        assert b"usage" not in data and b"\\" not in data, data
        return NONE
    if not isinstance(obj, dict):
        return NONE
    found = located(obj, api)
    if found is None:
        return NONE
    usage, rules = found[1], RULES[api]
    if not isinstance(usage, dict):
        return NOT_OBJECT
    if rules.prompt not in usage and rules.output not in usage:
        return FOREIGN
    if count_value(usage.get(rules.output)) is None:
        return UNREADABLE
    return REWRITTEN


def rewritten_usage(usage: dict[str, Any], api: str, prompt: int,
                    cached: int | None) -> dict[str, Any]:
    """The usage object the dialect's rules make (a copy; keys keep their places and new
    ones come last, in the order of the rules)."""
    rules = RULES[api]
    usage = json.loads(json.dumps(usage))
    if rules.cached_excluded:  # the parts of the prompt sum to it; None: nothing cached
        usage[rules.prompt] = prompt - (cached or 0)
        if cached is not None or rules.cached in usage:
            usage[rules.cached] = cached or 0
        if CREATION in usage:
            usage[CREATION] = 0
        return usage
    output = count_value(usage.get(rules.output))
    assert output is not None
    usage[rules.prompt] = prompt
    assert rules.total is not None and rules.details is not None
    usage[rules.total] = prompt + output
    if cached is not None:
        if not isinstance(usage.get(rules.details), dict):
            usage[rules.details] = {}
        usage[rules.details][rules.cached] = cached
    elif isinstance(usage.get(rules.details), dict) and rules.cached in usage[rules.details]:
        usage[rules.details][rules.cached] = 0  # None: no cached tokens
    return usage


def expected_object(data: bytes, api: str, prompt: int, cached: int | None) -> Any:
    """json.loads of the data, its usage (if it is to be rewritten) rewritten."""
    obj = json.loads(data)
    if outcome(data, api) == REWRITTEN:
        found = located(obj, api)
        assert found is not None
        path, usage = found
        node = obj
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = rewritten_usage(usage, api, prompt, cached)
    return obj


def set_keys(api: str, cached: int | None) -> set[str]:
    rules = RULES[api]
    keys = {rules.prompt}
    if rules.cached_excluded:  # an existing cache count is set to 0 without the caller's
        return keys | {rules.cached, CREATION}
    assert rules.total is not None and rules.details is not None
    return keys | {rules.total, rules.details}


# --- the oracle, in bytes: member spans found with json.JSONDecoder.raw_decode ---------------

_DECODER = json.JSONDecoder()


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def members(text: str, pos: int = 0) -> list[tuple[str, int, int]]:
    """``(key, value start, value end)`` of each member of the object at ``pos``."""
    pos = _skip_ws(text, pos)
    assert text[pos] == "{"
    pos = _skip_ws(text, pos + 1)
    found: list[tuple[str, int, int]] = []
    if text[pos] == "}":
        return found
    while True:
        key, pos = _DECODER.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        assert text[pos] == ":"
        start = _skip_ws(text, pos + 1)
        _, end = _DECODER.raw_decode(text, start)
        found.append((key, start, end))
        pos = _skip_ws(text, end)
        if text[pos] == "}":
            return found
        assert text[pos] == ","
        pos = _skip_ws(text, pos + 1)


def usage_span(text: str, api: str) -> tuple[int, int] | None:
    """The character span of the dialect's usage value (the last member of each key)."""
    for path in RULES[api].paths:
        start, span = _skip_ws(text, 0), None
        for depth, key in enumerate(path):
            hits = [m for m in members(text, start) if m[0] == key]
            if not hits:
                break
            _, value_start, value_end = hits[-1]
            if depth < len(path) - 1:
                if text[value_start] != "{":
                    break
                start = value_start
            else:
                span = (value_start, value_end)
        if span is not None and text[span[0]:span[1]] != "null":
            return span
    return None


def byte_span(text: str, span: tuple[int, int]) -> tuple[int, int]:
    return len(text[:span[0]].encode()), len(text[:span[1]].encode())


def member_text(obj: str, key: str) -> str | None:
    hits = [m for m in members(obj) if m[0] == key]
    return obj[hits[-1][1]:hits[-1][2]] if hits else None


def set_member_text(obj: str, key: str, value: str) -> str:
    """``key`` := ``value`` in an object text: in place, else after the last member."""
    found = members(obj)
    hits = [m for m in found if m[0] == key]
    if hits:
        return obj[:hits[-1][1]] + value + obj[hits[-1][2]:]
    member = json.dumps(key) + ":" + value
    if found:
        end = found[-1][2]
        return obj[:end] + "," + member + obj[end:]
    brace = obj.index("{") + 1
    return obj[:brace] + member + obj[brace:]


def text_count(raw: str | None) -> int:
    if raw is None or not _INTEGER.fullmatch(raw) or len(raw.lstrip("-")) > 18:
        return 0
    return int(raw)


def rewritten_usage_text(usage: str, api: str, prompt: int, cached: int | None) -> str:
    """The usage object's text after the rewrite, built from docs/dialects.md's in-place rules."""
    rules = RULES[api]
    if rules.cached_excluded:
        usage = set_member_text(usage, rules.prompt, str(prompt - (cached or 0)))
        if cached is not None or member_text(usage, rules.cached) is not None:
            usage = set_member_text(usage, rules.cached, str(cached or 0))
        if member_text(usage, CREATION) is not None:
            usage = set_member_text(usage, CREATION, "0")
        return usage
    assert rules.total is not None and rules.details is not None
    output = text_count(member_text(usage, rules.output))
    usage = set_member_text(usage, rules.prompt, str(prompt))
    usage = set_member_text(usage, rules.total, str(prompt + output))
    details = member_text(usage, rules.details)
    if cached is None and details is not None and details.startswith("{") \
            and member_text(details, rules.cached) is not None:
        usage = set_member_text(usage, rules.details,
                                set_member_text(details, rules.cached, "0"))
    if cached is not None:
        details = member_text(usage, rules.details)
        if details is not None and details.startswith("{"):
            details = set_member_text(details, rules.cached, str(cached))
        else:
            details = "{" + json.dumps(rules.cached) + ":" + str(cached) + "}"
        usage = set_member_text(usage, rules.details, details)
    return usage


def expected_data(data: bytes, api: str, prompt: int, cached: int | None) -> bytes:
    if outcome(data, api) != REWRITTEN:
        return data
    text = data.decode()
    span = usage_span(text, api)
    assert span is not None
    new = rewritten_usage_text(text[span[0]:span[1]], api, prompt, cached)
    return (text[:span[0]] + new + text[span[1]:]).encode()


def expected_event(event: bytes, api: str, prompt: int, cached: int | None) -> bytes:
    data = event_data(event)
    if outcome(data, api) != REWRITTEN:
        return event
    start, end = data_span(event)
    assert data is not None
    return event[:start] + expected_data(data, api, prompt, cached) + event[end:]


def expected_counts(stream: Stream, api: str) -> tuple[int, ...]:
    kinds = [outcome(event_data(e), api) for e in stream.events]
    return (len(stream.events), kinds.count(REWRITTEN), kinds.count(FOREIGN),
            kinds.count(NOT_OBJECT), kinds.count(UNREADABLE), 0, 0)


# --- helpers ------------------------------------------------------------------------------

def relay(twin: ModuleType, api: str, cached: int | None, **kwargs: Any) -> Any:
    return twin.UsageRelay(P, cached, api=api, **kwargs)


def run(twin: ModuleType, chunks: list[bytes], api: str, cached: int | None,
        **kwargs: Any) -> tuple[bytes, tuple[int, ...]]:
    r = relay(twin, api, cached, **kwargs)
    out = [r.feed(chunk) for chunk in chunks]
    out.append(r.close())
    return b"".join(out), tuple(r.counts)


def random_chunks(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` in 2 to 12 pieces, with empty and one-byte pieces among them."""
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 11)))
    if rng.random() < 0.5:
        at = rng.randrange(len(data))
        cuts = sorted([*cuts, at, at + 1])
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def check_members_kept(old: str, new: str, keys: set[str]) -> None:
    """The members of ``old`` not in ``keys`` keep their exact bytes and order in ``new``."""
    kept_old = [(k, old[s:e]) for k, s, e in members(old) if k not in keys]
    kept_new = [(k, new[s:e]) for k, s, e in members(new) if k not in keys]
    assert kept_new == kept_old


def check_usage_members(old: str, new: str, api: str, cached: int | None) -> None:
    """Members the rules do not set keep their exact bytes, in order; so do those of the
    details object but the cached count."""
    check_members_kept(old, new, set_keys(api, cached))
    rules = RULES[api]
    if cached is not None and rules.details is not None:
        old_details, new_details = member_text(old, rules.details), member_text(new, rules.details)
        assert new_details is not None
        if old_details is not None and old_details.startswith("{"):
            check_members_kept(old_details, new_details, {rules.cached})


def check_event(out: bytes, event: bytes, api: str, cached: int | None) -> str:
    """``out`` is what the relay made of ``event``: check it against the oracle."""
    data = event_data(event)
    kind = outcome(data, api)
    if kind != REWRITTEN:
        assert out == event
        return kind
    assert data is not None
    start, end = data_span(event)
    out_end = len(out) - (len(event) - end)
    assert out[:start] == event[:start] and out[out_end:] == event[end:]  # the other lines
    new = out[start:out_end]
    assert event_data(out) == new
    expected = expected_object(data, api, P, cached)
    got = json.loads(new)
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # the same key order too
    # the bytes around the usage value are the input's
    old_text, new_text = data.decode(), new.decode()
    old_span, new_span = usage_span(old_text, api), usage_span(new_text, api)
    assert old_span is not None and new_span is not None
    old_start, old_end = byte_span(old_text, old_span)
    new_start, new_end = byte_span(new_text, new_span)
    assert new[:new_start] == data[:old_start] and new[new_end:] == data[old_end:]
    check_usage_members(old_text[old_span[0]:old_span[1]], new_text[new_span[0]:new_span[1]],
                        api, cached)
    return kind


# --- the test data itself ----------------------------------------------------------------------

@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_streams_are_well_formed(stream: Stream) -> None:
    assert 1000 < len(stream.data) < 6000  # a few KB: every offset is split in the tests
    for event in stream.events:
        assert event.endswith(b"\n\n") and event.count(b"\n\n") == 1
        data = event_data(event)
        assert data is not None and data == event[slice(*data_span(event))]
        if data != b"[DONE]":
            assert isinstance(json.loads(data), dict)
    own = [outcome(event_data(e), stream.api) for e in stream.events]
    assert REWRITTEN in own and set(own) <= {NONE, REWRITTEN}
    # the key is spelled in token texts too, not only as the usage members' keys
    assert stream.data.count(b"usage") > stream.data.count(b'"usage":') + \
        stream.data.count(b'"usage": ')


@pytest.mark.parametrize("body", BODIES, ids=BODY_IDS)
def test_bodies_are_well_formed(body: Body) -> None:
    obj = json.loads(body.body)
    assert isinstance(obj.get("usage"), dict) and outcome(body.body, body.api) == REWRITTEN
    assert body.body.count(b"usage") > 1


def test_oracle_on_a_known_case() -> None:
    data = (b'{"a":[1,{"usage":2}],"usage":{"completion_tokens":5, "x" : [1, 2],'
            b'"prompt_tokens_details":null},"z":"usage"}')
    assert expected_data(data, "chat", 9, 4) == (
        b'{"a":[1,{"usage":2}],"usage":{"completion_tokens":5, "x" : [1, 2],'
        b'"prompt_tokens_details":{"cached_tokens":4},"prompt_tokens":9,"total_tokens":14},'
        b'"z":"usage"}')
    data = b'{"type": "message_delta", "usage": {"output_tokens": 15}}'
    assert expected_data(data, "messages", 9, 4) == (
        b'{"type": "message_delta", "usage": {"output_tokens": 15,"input_tokens":5,'
        b'"cache_read_input_tokens":4}}')
    assert expected_data(data, "chat", 9, 4) == data and outcome(data, "chat") == FOREIGN
    data = b'{"response":{"usage":null},"usage":null}'
    assert outcome(data, "responses") == NONE


# --- UsageRelay against the oracle -------------------------------------------------------------

@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_matches_oracle(relay_twin: ModuleType, stream: Stream, api: str,
                              cached: int | None) -> None:
    r = relay(relay_twin, api, cached)
    kinds = []
    outs = []
    for event in stream.events:  # one event per chunk: each comes out as soon as it ends
        out = r.feed(event)
        kinds.append(check_event(out, event, api, cached))
        if kinds[-1] == NONE:
            assert out is event  # a complete event with no usage: the chunk itself
        outs.append(out)
    assert r.close() == b""
    counts = r.counts
    assert counts._fields == COUNT_FIELDS
    assert tuple(counts) == expected_counts(stream, api)
    # the whole stream at once gives the same bytes and counts
    assert run(relay_twin, [stream.data], api, cached) == (b"".join(outs), tuple(counts))


@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_bytes_exact(relay_twin: ModuleType, stream: Stream, api: str,
                           cached: int | None) -> None:
    """Each count set where its member is, absent ones added after the last member, in
    the order of the rules; nothing else in the stream changes."""
    expected = b"".join(expected_event(e, api, P, cached) for e in stream.events)
    assert run(relay_twin, [stream.data], api, cached)[0] == expected


@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_groups_of_plain_events_come_back_as_they_are(relay_twin: ModuleType,
                                                            stream: Stream) -> None:
    """Runs of events with no usage object, fed as one chunk, come back as that object."""
    r = relay(relay_twin, stream.api, 32000)
    group: list[bytes] = []
    for event in [*stream.events, None]:
        if event is not None and outcome(event_data(event), stream.api) == NONE:
            group.append(event)
            continue
        if group:
            chunk = b"".join(group)
            assert r.feed(chunk) is chunk
            group = []
        if event is not None:
            assert r.feed(event) == expected_event(event, stream.api, P, 32000)


def split_points(stream: Stream, every: int) -> list[int]:
    """Every ``every``-th offset, and every offset within 2 bytes of an event's end."""
    points = set(range(0, len(stream.data) + 1, every))
    end = 0
    for event in stream.events:
        end += len(event)
        points.update(range(max(0, end - 2), min(len(stream.data), end + 2) + 1))
    return sorted(points)


# every offset with C; without C (the same framing, other counts) every 7th and the edges,
# which keeps the Python twin's run of this module short
@pytest.mark.parametrize("cached, every", [(32000, 1), (None, 7)], ids=["32000", "None"])
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_every_split(relay_twin: ModuleType, stream: Stream, cached: int | None,
                           every: int) -> None:
    data = stream.data
    expected = run(relay_twin, [data], stream.api, cached)
    assert expected[1] == expected_counts(stream, stream.api)
    for i in split_points(stream, every):
        r = relay(relay_twin, stream.api, cached)
        out = r.feed(data[:i]) + r.feed(data[i:]) + r.close()
        assert out == expected[0], i
        assert tuple(r.counts) == expected[1], i


@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_random_splits(relay_twin: ModuleType, stream: Stream, api: str,
                             cached: int | None) -> None:
    expected = run(relay_twin, [stream.data], api, cached)
    rng = random.Random(f"{stream.name} {api} {cached}")
    for _ in range(12):
        assert run(relay_twin, random_chunks(stream.data, rng), api, cached) == expected
    if api == stream.api:
        one_byte = [stream.data[i:i + 1] for i in range(len(stream.data))]
        assert run(relay_twin, one_byte, api, cached) == expected


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"], ids=["crlf", "cr"])
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_other_line_ends(relay_twin: ModuleType, stream: Stream, ending: bytes) -> None:
    """The same streams framed with CRLF or CR line ends (JSON here holds no raw LF)."""
    lf_out, counts = run(relay_twin, [stream.data], stream.api, 32000)
    data = stream.data.replace(b"\n", ending)
    expected = (lf_out.replace(b"\n", ending), counts)
    assert run(relay_twin, [data], stream.api, 32000) == expected
    rng = random.Random(f"{stream.name} {ending!r}")
    for _ in range(8):
        assert run(relay_twin, random_chunks(data, rng), stream.api, 32000) == expected
    if ending == b"\r\n" and stream.name == "trtllm-chat":  # its first line ends " \r\n"
        for i in range(len(data) + 1):  # a CR and its LF in different chunks among them
            assert run(relay_twin, [data[:i], data[i:]], stream.api, 32000) == expected, i


_USAGE_KEY = re.compile(rb'"usage"[ \t\n\r]*:[ \t\n\r]*')


def usage_text_size(data: bytes | None) -> int:
    """The raw size of the (last) usage value in an event's data, by json's own reading;
    0 when there is none (the servers' events hold at most one)."""
    keys = list(_USAGE_KEY.finditer(data or b""))
    if not keys:
        return 0
    assert data is not None
    text = data.decode()
    start = len(data[:keys[-1].end()].decode())
    return len(text[:json.JSONDecoder().raw_decode(text, start)[1]].encode()) - keys[-1].end()


@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_oversized_events_rewritten_as_they_stream(relay_twin: ModuleType,
                                                        stream: Stream) -> None:
    """With a bound below half the stream's events, those are not held but scanned as they
    pass: their usage values are rewritten just the same, unless a usage value is itself
    larger than the bound (then it goes out as it came, counted too_large)."""
    sizes = sorted({len(e) for e in stream.events})
    gaps = [(b - a, (a + b) // 2) for a, b in zip(sizes, sizes[1:]) if b - a >= 6]
    expected_out, oversized, too_large, rewritten = [], 0, 0, 0
    for limit in sorted({min(gaps, key=lambda gap: abs(gap[1] - sizes[len(sizes) // 2]))[1],
                         max(map(usage_text_size, map(event_data, stream.events))),
                         64}):
        expected_out, oversized, too_large, rewritten = [], 0, 0, 0
        for event in stream.events:
            data = event_data(event)
            oversized += len(event) > limit
            if usage_text_size(data) > limit and outcome(data, stream.api) != NONE:
                too_large += 1
                expected_out.append(event)
                continue
            rewritten += outcome(data, stream.api) == REWRITTEN
            expected_out.append(expected_event(event, stream.api, P, 32000))
        expected = (b"".join(expected_out),
                    (len(stream.events), rewritten, 0, 0, 0, oversized, too_large))
        assert oversized
        assert run(relay_twin, [stream.data], stream.api, 32000,
                   max_event_bytes=limit) == expected, limit
        rng = random.Random(stream.name)
        for _ in range(10):
            chunks = random_chunks(stream.data, rng)
            assert run(relay_twin, chunks, stream.api, 32000,
                       max_event_bytes=limit) == expected, limit


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("body", BODIES, ids=BODY_IDS)
def test_relay_multiline_data(relay_twin: ModuleType, body: Body, cached: int | None,
                              ending: bytes) -> None:
    """A body sent as one event, a ``data`` line per line of its text (as sse-starlette
    frames a multi-line string): the usage is found in the data joined by LF."""
    lines = body.body.split(b"\n")
    event = b"event: message\n" + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    event = event.replace(b"\n", ending)
    stream = Stream(body.name, body.api, (event, event))
    out, counts = run(relay_twin, [stream.data], body.api, cached)
    assert counts == expected_counts(stream, body.api) == (2, 2, 0, 0, 0, 0, 0)
    first = out[:len(out) // 2]
    assert out == first + first and first.startswith(b"event: message" + ending)
    data = event_data(first)
    assert data is not None
    assert json.loads(data) == expected_object(body.body, body.api, P, cached)
    if len(lines) == 1:
        assert first == event.replace(body.body, expected_data(body.body, body.api, P, cached))
    rng = random.Random(body.name)
    for _ in range(10):
        assert run(relay_twin, random_chunks(stream.data, rng), body.api, cached) == (out, counts)


# --- a stream in another API's dialect -------------------------------------------------------

WRONG_APIS = [(s, api) for s in STREAMS for api in APIS
              if (s.api == "chat") != (api == "chat")]


@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("stream, api", WRONG_APIS,
                         ids=[f"{s.name}-as-{api}" for s, api in WRONG_APIS])
def test_relay_other_api_stream(relay_twin: ModuleType, stream: Stream, api: str,
                                cached: int | None) -> None:
    """Chat usage has none of the responses/messages count keys and the other way round:
    such a stream comes out byte for byte, its usage counted foreign where it is found."""
    out, counts = run(relay_twin, [stream.data], api, cached)
    assert out == stream.data
    assert counts == expected_counts(stream, api)
    assert counts[1] == 0
    if stream.api != "responses":  # a Responses stream has no top-level usage
        assert counts[2] > 0


@pytest.mark.parametrize("stream", [s for s in STREAMS if s.api == "messages"],
                         ids=[s.name for s in STREAMS if s.api == "messages"])
def test_relay_anthropic_stream_as_chat(relay_twin: ModuleType, stream: Stream) -> None:
    r = relay(relay_twin, "chat", 32000)
    assert r.feed(stream.data) + r.close() == stream.data
    assert r.counts.foreign > 0 and r.counts.rewritten == 0


@pytest.mark.parametrize("stream", [s for s in STREAMS if s.api == "chat"],
                         ids=[s.name for s in STREAMS if s.api == "chat"])
def test_relay_chat_stream_as_messages(relay_twin: ModuleType, stream: Stream) -> None:
    r = relay(relay_twin, "messages", None)
    assert r.feed(stream.data) + r.close() == stream.data
    assert r.counts.foreign > 0 and r.counts.rewritten == 0


# --- the twins agree; the relay's rewrite is rewrite_usage's ----------------------------------

@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_twins_agree(stream: Stream, api: str, cached: int | None) -> None:
    rng = random.Random(stream.name)
    chunkings = [[stream.data], list(stream.events)] + [
        random_chunks(stream.data, rng) for _ in range(4)]
    results = {twin.__name__: [run(twin, chunks, api, cached) for chunks in chunkings]
               for twin in twins("relay")}
    assert len({repr(r) for r in results.values()}) == 1, results.keys()
    datas = [d for d in map(event_data, stream.events) if d is not None]
    rewrites = {twin.__name__: [twin.rewrite_usage(d, P, cached, api=api) for d in datas]
                for twin in twins("usage")}
    assert len({repr(r) for r in rewrites.values()}) == 1


@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_event_is_rewrite_usage_of_its_data(relay_twin: ModuleType, usage_twin: ModuleType,
                                                  stream: Stream, api: str,
                                                  cached: int | None) -> None:
    r = relay(relay_twin, api, cached)
    for event in stream.events:
        start, end = data_span(event)
        data = event[start:end]
        assert r.feed(event) == event[:start] + usage_twin.rewrite_usage(
            data, P, cached, api=api) + event[end:]


# --- find_usage and rewrite_usage on each event's data and on whole bodies ---------------------

def check_find_usage(twin: ModuleType, payload: bytes, api: str) -> None:
    text = payload.decode()
    span = usage_span(text, api)
    expected = None if span is None else byte_span(text, span)
    found = twin.find_usage(payload, api=api)
    assert found == expected
    if found is not None:
        obj = json.loads(payload)
        where = located(obj, api)
        assert where is not None and json.loads(payload[found[0]:found[1]]) == where[1]


def check_rewrite(twin: ModuleType, payload: bytes, api: str, cached: int | None) -> None:
    result = twin.rewrite_usage(payload, P, cached, api=api)
    if outcome(payload, api) != REWRITTEN:
        assert result is payload
        return
    got, expected = json.loads(result), expected_object(payload, api, P, cached)
    assert got == expected and json.dumps(got) == json.dumps(expected)
    assert result == expected_data(payload, api, P, cached)
    assert twin.rewrite_usage(bytearray(payload), P, cached, api=api) == result
    assert twin.rewrite_usage(memoryview(payload), P, cached, api=api) == result


@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_usage_on_event_data(usage_twin: ModuleType, stream: Stream, api: str,
                             cached: int | None) -> None:
    for data in map(event_data, stream.events):
        assert data is not None
        if data == b"[DONE]":
            assert usage_twin.find_usage(data, api=api) is None
            assert usage_twin.rewrite_usage(data, P, cached, api=api) is data
            continue
        check_find_usage(usage_twin, data, api)
        check_rewrite(usage_twin, data, api, cached)


@pytest.mark.parametrize("cached", CACHED)
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("body", BODIES, ids=BODY_IDS)
def test_usage_on_bodies(usage_twin: ModuleType, body: Body, api: str,
                         cached: int | None) -> None:
    check_find_usage(usage_twin, body.body, api)
    check_rewrite(usage_twin, body.body, api, cached)
    if (body.api == "chat") != (api == "chat"):  # the other dialect: not a byte changes
        assert usage_twin.rewrite_usage(body.body, P, cached, api=api) is body.body
    if api == body.api:
        assert usage_twin.rewrite_usage(body.body, P, cached, api=api) != body.body


def test_usage_on_bodies_known_results(usage_twin: ModuleType) -> None:
    bodies = {b.name: b.body for b in BODIES}
    out = usage_twin.rewrite_usage(bodies["vllm-chat"], P, 32000)
    assert (b'"usage":{"prompt_tokens":40000,"total_tokens":40012,"completion_tokens":12,'
            b'"prompt_tokens_details":{"cached_tokens":32000}},"prompt_logprobs":null') in out
    out = usage_twin.rewrite_usage(bodies["vllm-responses"], P, 32000, api="responses")
    assert (b'"usage":{"input_tokens":40000,"input_tokens_details":{"cached_tokens":32000,'
            b'"input_tokens_per_turn":[],"cached_tokens_per_turn":[]},"output_tokens":9,') in out
    assert b'"total_tokens":40009},"user":null' in out
    out = usage_twin.rewrite_usage(bodies["anthropic-api"], P, 32000, api="messages")
    assert (b'"usage":{"input_tokens":8000,"cache_creation_input_tokens":0,'
            b'"cache_read_input_tokens":32000,"cache_creation":') in out
    out = usage_twin.rewrite_usage(bodies["vllm-anthropic"], P, None, api="messages")
    assert out.endswith(b'"usage":{"input_tokens":40000,"output_tokens":12}}')
    out = usage_twin.rewrite_usage(bodies["anthropic-documented"], P, 32000, api="messages")
    assert out.endswith(b'"input_tokens": 8000,\n    "output_tokens": 503,'
                        b'"cache_read_input_tokens":32000\n  }\n}')


# --- messages: the cached count is part of the prompt count ------------------------------------

def test_messages_cached_above_prompt_is_an_error(relay_twin: ModuleType,
                                                  usage_twin: ModuleType) -> None:
    body = next(b.body for b in BODIES if b.api == "messages")
    with pytest.raises(ValueError):
        relay_twin.UsageRelay(100, 101, api="messages")
    with pytest.raises(ValueError):
        usage_twin.rewrite_usage(body, 100, 101, api="messages")
    with pytest.raises(ValueError):
        usage_twin.rewrite_usage(b'{"type": "ping"}', 100, 101, api="messages")
    # all of the prompt cached: nothing left uncached
    out = json.loads(usage_twin.rewrite_usage(body, 100, 100, api="messages"))
    assert out["usage"]["input_tokens"] == 0 and out["usage"]["cache_read_input_tokens"] == 100
    r = relay_twin.UsageRelay(100, 100, api="messages")
    stream = next(s for s in STREAMS if s.api == "messages")
    assert r.feed(stream.data) + r.close() == b"".join(
        expected_event(e, "messages", 100, 100) for e in stream.events)


# --- the stream helpers take api= and relay= ---------------------------------------------------

@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_relay_helpers(stream: Stream) -> None:
    expected = b"".join(expected_event(e, stream.api, P, 32000) for e in stream.events)
    chunks = random_chunks(stream.data, random.Random(stream.name))
    assert b"".join(tokcore.relay_usage(iter(chunks), P, 32000, api=stream.api)) == expected
    mine = tokcore.UsageRelay(P, 32000, api=stream.api)
    assert b"".join(tokcore.relay_usage(chunks, relay=mine)) == expected
    assert tuple(mine.counts) == expected_counts(stream, stream.api)

    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def collect(**kwargs: Any) -> bytes:
        return b"".join([out async for out in tokcore.arelay_usage(source(), **kwargs)])

    assert asyncio.run(collect(prompt_tokens=P, cached_tokens=32000, api=stream.api)) == expected
    mine = tokcore.UsageRelay(P, 32000, api=stream.api)
    assert asyncio.run(collect(relay=mine)) == expected
    assert tuple(mine.counts) == expected_counts(stream, stream.api)
