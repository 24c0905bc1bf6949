"""tokcore.stream.rewrite_body: a whole body's usage rewritten and counted as the relay
counts one event's (the relay itself, on the same text as an event's data, is the oracle),
over each usage twin's ``rewrite_usage``."""

from __future__ import annotations

import re
from types import ModuleType

import pytest

from tokcore import RelayCounts
from tokcore.stream import _body, rewrite_body

PROMPT, CACHED = 40000, 32000

BODIES = {
    "rewritten": b'{"id":"c","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}',
    "rewritten, pretty": b'{\n  "usage": {\n    "prompt_tokens": 1,\n    "completion_tokens": 2'
                         b'\n  }\n}',
    "foreign": b'{"id":"c","usage":{"input_tokens":1,"output_tokens":2}}',
    "not_object": b'{"id":"c","usage":[1,2]}',
    "unreadable": b'{"id":"c","usage":{"prompt_tokens":1}',
    "no usage": b'{"id":"c","choices":[]}',
    "null": b'{"id":"c","usage":null}',
    "not JSON": b"<html>502</html>",
}
EXPECTED = {"rewritten": "rewritten", "rewritten, pretty": "rewritten", "foreign": "foreign",
            "not_object": "not_object", "unreadable": "unreadable"}


@pytest.fixture
def twin_rewrite(usage_twin: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """rewrite_body over this usage twin's rewrite_usage."""
    monkeypatch.setattr(_body, "rewrite_usage", usage_twin.rewrite_usage)
    return usage_twin


def relayed(relay_twin: ModuleType, body: bytes, api: str) -> tuple[bytes, RelayCounts]:
    """The body as the data of one event, through the relay: its data and counts."""
    relay = relay_twin.UsageRelay(PROMPT, CACHED, api=api)
    lines = b"".join(b"data: " + line + b"\n" for line in body.split(b"\n"))
    out = relay.feed(lines + b"\n") + relay.close()
    data = b"\n".join(line[6:] for line in out[:-2].split(b"\n"))
    return data, relay.counts._replace(events=0)


@pytest.mark.parametrize("name", BODIES)
def test_counted_as_the_relay_counts_an_event(twin_rewrite: ModuleType, relay_twin: ModuleType,
                                              name: str) -> None:
    body = BODIES[name]
    out, counts = rewrite_body(body, PROMPT, CACHED)
    assert (out, counts) == relayed(relay_twin, body, "chat")
    expected = EXPECTED.get(name)
    assert counts == (RelayCounts(**{expected: 1}) if expected else RelayCounts())
    if expected == "rewritten":
        assert out == twin_rewrite.rewrite_usage(body, PROMPT, CACHED) != body
    else:
        assert out is body  # as it came, no copy


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_each_api(twin_rewrite: ModuleType, relay_twin: ModuleType, api: str) -> None:
    for body in BODIES.values():
        assert rewrite_body(body, PROMPT, CACHED, api=api) == relayed(relay_twin, body, api)


def test_any_bytes_like_payload(twin_rewrite: ModuleType) -> None:
    body = BODIES["foreign"]
    for payload in (bytearray(body), memoryview(body)):
        out, counts = rewrite_body(payload, PROMPT)
        assert type(out) is bytes and out == body and counts == RelayCounts(foreign=1)


def test_raises_what_rewrite_usage_raises(twin_rewrite: ModuleType) -> None:
    body = BODIES["rewritten"]
    for args, kwargs in (((body.decode(), PROMPT), {}), ((body, True), {}),
                         ((body, -1), {}), ((body, 1, 2), {}), ((body, 1), {"api": "gpt"})):
        with pytest.raises((TypeError, ValueError)) as expected:
            twin_rewrite.rewrite_usage(*args, **kwargs)
        with pytest.raises(expected.type, match=re.escape(str(expected.value))):
            rewrite_body(*args, **kwargs)
