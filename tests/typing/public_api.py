"""tokcore's public API as a strict type checker sees it, whichever twin loads.

``make lint`` runs mypy --strict and pyright (strict) on this file; tests/test_typing.py runs
it too, so each use below also does at run time what its types say.

- The ``accepted_*`` functions: correct uses, each result's exact static type asserted
  with ``assert_type`` (a checker fails on any other type, ``Any`` included).
- ``rejected``: wrong uses, each an error the checkers must report, silenced on its line
  by ``# type: ignore[code]``. Unused ignores are errors (mypy's warn_unused_ignores, pyright's
  reportUnnecessaryTypeIgnoreComment), so a wrong use that a checker lets through fails the
  lint. At run time each one raises what the contract says (the few that cannot raise are
  marked).
"""

from __future__ import annotations

import array
import asyncio
import mmap
import pickle
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Literal, assert_type

import numpy as np
import pytest

import tokcore
from tokcore import Event, EventTooLarge, RelayCounts, UsageRelay

Span = tuple[int, int]
BODY = b'{"usage":{"prompt_tokens":1,"completion_tokens":2}}'
SSE = b"data: " + BODY + b"\n\n"


@tokcore.compact_ids("ids")
class Request:
    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


@tokcore.compact_ids("ids", lazy=True)
class LazyRequest:
    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


# --- correct uses: their exact types ---------------------------------------------------------

def accepted_ids() -> None:
    assert_type(tokcore.pack_ids([1, 2, 3]), bytes)
    assert_type(tokcore.pack_ids((1, 2)), bytes)
    assert_type(tokcore.pack_ids(range(3)), bytes)
    assert_type(tokcore.pack_ids(i for i in range(3)), bytes)
    assert_type(tokcore.pack_ids([True, np.int64(5)]), bytes)  # anything with __index__
    assert_type(tokcore.pack_ids(np.arange(3, dtype=np.int64)), bytes)
    assert_type(tokcore.pack_ids(array.array("q", [1])), bytes)
    assert_type(tokcore.pack_ids(memoryview(array.array("i", [1]))), bytes)
    data = tokcore.pack_ids([1, 2])
    assert tokcore.unpack_ids(data) == [1, 2]
    assert_type(tokcore.unpack_ids(data), list[int])
    assert_type(tokcore.unpack_ids(bytearray(data)), list[int])
    assert_type(tokcore.unpack_ids(memoryview(data)), list[int])
    assert_type(tokcore.unpack_ids(array.array("i", [1])), list[int])
    with mmap.mmap(-1, 8) as mapped:
        assert_type(tokcore.unpack_ids(mapped), list[int])
    ids = np.arange(2, dtype="<i4")
    assert_type(tokcore.unpack_ids(ids.data), list[int])  # a memoryview on every Python
    if sys.version_info >= (3, 12):  # numpy's stubs declare ndarray's buffer from 3.12 on
        assert_type(tokcore.unpack_ids(ids), list[int])


def accepted_b64() -> None:
    assert_type(tokcore.b64encode(b"x"), bytes)
    assert_type(tokcore.b64encode(bytearray(b"x"), altchars=b"-_"), bytes)
    assert_type(tokcore.b64encode(memoryview(b"x"), memoryview(b"-_")), bytes)
    assert_type(tokcore.b64decode("eA=="), bytes)
    assert_type(tokcore.b64decode(b"eA==", altchars="-_", validate=True), bytes)
    assert_type(tokcore.standard_b64encode(b"x"), bytes)
    assert_type(tokcore.standard_b64decode("eA=="), bytes)
    assert_type(tokcore.urlsafe_b64encode(b"\xff"), bytes)
    assert_type(tokcore.urlsafe_b64decode(b"_w=="), bytes)
    assert tokcore.ids_to_b64([1]) == "AQAAAA=="
    assert_type(tokcore.ids_to_b64([1]), str)
    assert_type(tokcore.ids_to_b64(np.arange(2, dtype=np.int32)), str)
    assert_type(tokcore.b64_to_ids("AQAAAA=="), list[int])
    assert_type(tokcore.b64_to_ids(b"AQAAAA==", validate=True), list[int])


def base64_keywords_of_315() -> None:
    """3.15's base64 keywords have the running Python's types, as typeshed gates them: from
    3.15 on they are accepted, before that each is a type error (and a TypeError at run
    time). ``make lint`` checks this file for 3.11 and 3.15 with mypy and pyright."""
    if sys.version_info >= (3, 15):
        assert_type(tokcore.b64encode(b"x", padded=False), bytes)
        assert_type(tokcore.b64encode(b"x" * 60, wrapcol=76), bytes)
        assert_type(tokcore.b64decode(b"AAAA", canonical=True), bytes)
        assert_type(tokcore.b64decode(b"eA", padded=False), bytes)
        assert_type(tokcore.b64decode(b"eA ==", ignorechars=b" "), bytes)
        assert_type(tokcore.urlsafe_b64encode(b"\xff", padded=False), bytes)
        assert_type(tokcore.urlsafe_b64decode(b"_w", padded=False), bytes)
    else:
        with pytest.raises(TypeError):
            tokcore.b64encode(b"x", padded=False)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            tokcore.b64encode(b"x", wrapcol=76)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            tokcore.b64decode(b"AAAA", canonical=True)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            tokcore.b64decode(b"eA", padded=False)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            tokcore.b64decode(b"eA ==", ignorechars=b" ")  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            tokcore.urlsafe_b64encode(b"\xff", padded=False)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            tokcore.urlsafe_b64decode(b"_w", padded=False)  # type: ignore[call-arg]


def accepted_json_and_usage() -> None:
    assert_type(tokcore.find_usage(BODY), Span | None)
    assert_type(tokcore.find_usage(bytearray(BODY), api="responses"), Span | None)
    assert_type(tokcore.rewrite_usage(BODY, 10), bytes)
    assert_type(tokcore.rewrite_usage(memoryview(BODY), 10, 2, api="messages"), bytes)
    api: Literal["chat", "responses", "messages"] = "responses"
    assert_type(tokcore.rewrite_usage(BODY, prompt_tokens=10, cached_tokens=None, api=api),
                bytes)
    assert_type(tokcore.find_member(b'{"a":{"b":1}}', ("a", "b")), Span | None)
    assert_type(tokcore.find_member(b'{"a":{"b":1}}', "a"), Span | None)
    assert_type(tokcore.set_member(b"{}", "a", b"1"), bytes)
    assert_type(tokcore.set_member(b"{}", ("a", "b"), b"1", trusted=True), bytes)
    assert_type(tokcore.set_member(bytearray(b"{}"), "a", memoryview(b"[]")), bytes)
    assert_type(tokcore.del_member(b'{"a":1}', "a"), bytes)
    assert_type(tokcore.del_member(b'{"a":{"b":1}}', ("a", "b")), bytes)


def accepted_relay() -> None:
    relay = UsageRelay(10, 2, api="chat", max_event_bytes=1 << 16)
    assert_type(relay, UsageRelay)
    assert_type(relay.feed(SSE), bytes)
    assert_type(relay.feed(bytearray(SSE)), bytes)
    assert_type(relay.close(), bytes)
    assert_type(relay.pending_bytes, int)
    counts = relay.counts
    assert_type(counts, RelayCounts)
    assert_type(counts.events, int)
    assert_type(counts.rewritten, int)
    assert_type(counts.foreign, int)
    assert_type(counts.not_object, int)
    assert_type(counts.unreadable, int)
    assert_type(counts.oversized, int)
    assert_type(counts.too_large, int)
    assert counts == RelayCounts(events=2, rewritten=2)
    assert_type(UsageRelay(prompt_tokens=1, api="messages"), UsageRelay)

    stream = tokcore.relay_usage([SSE], 10)
    assert_type(stream, Generator[bytes, None, None])
    assert_type(next(stream), bytes)
    stream.close()
    mine = UsageRelay(10, api="responses")
    assert_type(tokcore.relay_usage(iter([SSE]), relay=mine), Generator[bytes, None, None])
    assert_type(tokcore.relay_usage((SSE,), 10, None, api="messages", max_event_bytes=64),
                Generator[bytes, None, None])


async def accepted_async() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield SSE

    stream = tokcore.arelay_usage(chunks(), 10, api="responses")
    assert_type(stream, AsyncGenerator[bytes, None])
    async for out in stream:
        assert_type(out, bytes)
    await stream.aclose()
    assert_type(tokcore.arelay_usage(chunks(), relay=UsageRelay(1)), AsyncGenerator[bytes, None])


def accepted_events() -> None:
    decoder = tokcore.EventDecoder(max_event_bytes=1024)
    events = decoder.feed(b"id: 7\nretry: 10\ndata: x\n\n")
    assert_type(events, list[Event])
    assert_type(decoder.close(), list[Event])
    assert_type(decoder.pending_bytes, int)
    event = events[0]
    assert event == Event("message", "x", "7", 10)
    assert_type(event.event, str)
    assert_type(event.data, str)
    assert_type(event.id, str | None)
    assert_type(event.retry, int | None)
    assert_type(tokcore.iter_events([b"data: x\n\n"], max_event_bytes=64), Iterator[Event])
    try:
        tokcore.EventDecoder(max_event_bytes=4).feed(b"data: too long\n\n")
    except EventTooLarge as exc:
        assert_type(exc.events, list[Event])
        assert_type(exc.offsets, list[int])
        assert_type(exc, EventTooLarge)
    else:
        raise AssertionError("EventTooLarge was not raised")


def accepted_pickling_and_module() -> None:
    request = pickle.loads(pickle.dumps(Request([1, 2])))
    assert isinstance(request, Request) and request.ids == [1, 2]
    assert_type(Request([1]), Request)  # the decorator keeps the class's type
    assert_type(LazyRequest([1]), LazyRequest)
    assert_type(tokcore.ids_buffer(LazyRequest([1, 2]), "ids"), memoryview)
    assert_type(tokcore.BACKEND, Literal["cython", "python", "mixed"])
    assert_type(tokcore.__version__, str)


def accepted_wire() -> None:
    assert_type(tokcore.ids_to_json([1, 2]), bytes)
    assert_type(tokcore.ids_to_json(np.arange(3, dtype=np.int64)), bytes)
    assert_type(tokcore.ids_to_msgpack((1, 2)), bytes)
    assert_type(tokcore.json_to_ids(b"[1,2]"), list[int])
    assert_type(tokcore.json_to_ids("[1, 2]"), list[int])
    assert_type(tokcore.json_to_ids(memoryview(b"[1]")), list[int])
    assert_type(tokcore.msgpack_to_ids(b"\x92\x01\x02"), list[int])
    assert_type(tokcore.msgpack_to_ids(bytearray(b"\x90")), list[int])
    assert_type(tokcore.convert_ids(b"[1,2]", "json", "msgpack"), bytes)
    assert_type(tokcore.convert_ids("AQAAAA==", "b64", "msgpack_bin"), bytes)
    assert_type(tokcore.convert_ids(memoryview(b"\x01\x00\x00\x00"), "int32", "json"), bytes)


def accepted_width() -> None:
    """Every id codec at either width: the same types at both."""
    data = tokcore.pack_ids([1, 2**32], width=64)
    assert_type(data, bytes)
    assert_type(tokcore.pack_ids(np.arange(3, dtype=np.int64), width=32), bytes)
    assert_type(tokcore.unpack_ids(data, width=64), list[int])
    assert_type(tokcore.ids_to_b64([2**40], width=64), str)
    assert_type(tokcore.b64_to_ids("AQAAAAAAAAA=", validate=True, width=64), list[int])
    assert_type(tokcore.ids_to_json([2**40], width=64), bytes)
    assert_type(tokcore.json_to_ids(b"[4294967296]", width=64), list[int])
    assert_type(tokcore.ids_to_msgpack([2**40], width=64), bytes)
    assert_type(tokcore.msgpack_to_ids(b"\x91\x01", width=64), list[int])
    assert_type(tokcore.convert_ids(data, "int64", "json"), bytes)
    assert_type(tokcore.convert_ids(b"[1]", "json", "b64_int64", width=64), bytes)
    assert_type(tokcore.convert_ids(b"[1]", "json", "msgpack", width=None), bytes)
    assert_type(tokcore.ids_buffer(LazyRequest([1, 2]), "ids", width=64), memoryview)


# --- wrong uses: each a checker error (and an error at run time) -----------------------------

def accepted_writer() -> None:
    shape = tokcore.StreamShape("chat", "vllm")
    assert_type(shape, tokcore.StreamShape)
    assert_type(shape.frames, tuple[str, ...])
    own = tokcore.StreamShape("chat", {"text": f'{{"t":"{tokcore.PROBE.text}"}}'},
                              style="orjson", omit_none=("usage",))
    assert_type(own, tokcore.StreamShape)
    assert_type(tokcore.PROBE, tokcore.Probe)
    assert_type(tokcore.PROBE.index, int)
    w = tokcore.StreamWriter(shape, id="chatcmpl-1", model="m", created=1)
    assert_type(w, tokcore.StreamWriter)
    assert_type(w.text(" hi"), bytes)
    assert_type(w.texts([" a", " b"], 1), bytes)
    assert_type(w.step(" x", 0, token_ids=[1], logprobs=[(" x", -0.5)],
                       usage=tokcore.Usage(1, 2)), bytes)
    entry = tokcore.TokenLogprob(" x", -0.5, b" x", [tokcore.TopLogprob(" x", -0.5)])
    assert_type(w.step(" x", logprobs=[entry], finish_reason="stop", stop_reason=7), bytes)
    assert_type(w.steps([tokcore.Step(" y", 1), (" z", 2, "reasoning")]), bytes)
    assert_type(w.write("tool_start", tool_index=0, tool_id="call_1", tool_name="f"), bytes)
    assert_type(w.usage(10, 2, cached_tokens=4), bytes)
    assert_type(w.done(), bytes)
    assert_type(w.sequence_number, int)
    assert_type(w.item_id, str | None)
    assert_type(w.shape, tokcore.StreamShape)


def rejected() -> None:
    # token ids
    with pytest.raises(TypeError):
        tokcore.pack_ids("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.pack_ids(["1", "2"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        tokcore.pack_ids([1.5])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        tokcore.pack_ids(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.unpack_ids(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.unpack_ids("AAAA")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        tokcore.unpack_ids(b"").decode()  # type: ignore[attr-defined]
    text: str = tokcore.unpack_ids(b"")  # type: ignore[assignment]  # (no error at run time)
    del text
    with pytest.raises(ValueError):
        tokcore.pack_ids([1], width=16)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.unpack_ids(b"", width="64")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.pack_ids([1], 64)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        tokcore.convert_ids(b"[1]", "json", "int128")  # type: ignore[arg-type]

    # base64
    with pytest.raises(TypeError):
        tokcore.b64encode(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.b64encode("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.b64encode(b"x", altchars="-_")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.b64decode(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.urlsafe_b64encode("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.ids_to_b64("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.b64_to_ids(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.b64_to_ids("AQAAAA==", True)  # type: ignore[call-arg]
    encoded: bytes = tokcore.ids_to_b64([1])  # type: ignore[assignment]  # (no error at run time)
    del encoded

    # usage and JSON members
    with pytest.raises(TypeError):
        tokcore.find_usage("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tokcore.find_usage(BODY, api="chatgpt")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.find_usage(BODY, dialect="chat")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        tokcore.find_usage(BODY, "chat")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        tokcore.rewrite_usage(BODY, "10")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tokcore.rewrite_usage(BODY, 10, api="Chat")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.find_member(b"{}", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.find_member(b"{}", ["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.find_member(b'{"a":{}}', "a", "b")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        tokcore.set_member(b"{}", "k", b"1", True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        tokcore.set_member(b"{}", "k", "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.del_member("{}", "k")  # type: ignore[arg-type]
    span: tuple[int, int] = tokcore.find_usage(BODY)  # type: ignore[assignment]  # may be None
    del span

    # the relay and the stream helpers
    with pytest.raises(TypeError):
        UsageRelay("10")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        UsageRelay(10, api="completions")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        UsageRelay(10, max_event_size=64)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        UsageRelay(10).feed("data: x\n\n")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        UsageRelay(10).counts.rewritten = 1  # type: ignore[misc]
    with pytest.raises(ValueError):
        tokcore.relay_usage([SSE], 10, api="gpt")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        tokcore.relay_usage([SSE])  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        tokcore.relay_usage([SSE], 10, relay=UsageRelay(10))  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        list(tokcore.relay_usage(["data: x\n\n"], 10))  # type: ignore[list-item]
    with pytest.raises(TypeError):
        tokcore.arelay_usage([SSE], 10)  # type: ignore[call-overload]
    relayed: Iterator[str] = tokcore.relay_usage([SSE], 1)  # type: ignore[assignment]
    del relayed

    # events
    with pytest.raises(TypeError):
        tokcore.EventDecoder(1024)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        tokcore.EventDecoder(max_event_bytes="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.EventDecoder().feed("data: x\n\n")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        list(tokcore.iter_events("data: x\n\n"))  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        tokcore.Event().data.decode()  # type: ignore[attr-defined]

    # pickling, and the module's constants
    with pytest.raises(TypeError):
        tokcore.compact_ids("ids", lazy="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.compact_ids(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.compact_ids("ids")(accepted_ids)  # type: ignore[type-var]
    with pytest.raises(TypeError):
        tokcore.ids_buffer(Request([1]), 1)  # type: ignore[arg-type]
    # token ids in the wire formats
    with pytest.raises(TypeError):
        tokcore.json_to_ids(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.msgpack_to_ids("\x90")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.ids_to_json("123")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tokcore.convert_ids(b"[1]", "xml", "json")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tokcore.convert_ids(b"[1]", "json", "base64")  # type: ignore[arg-type]
    # the stream writer
    with pytest.raises(ValueError):
        tokcore.StreamShape("grpc", "vllm")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tokcore.StreamShape("chat", {"text": "{}"}, style="yaml")  # type: ignore[arg-type]
    writer = tokcore.StreamWriter(tokcore.StreamShape("chat", "vllm"), id="c", model="m")
    with pytest.raises(TypeError):
        writer.text(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        writer.step("x", token_ids="12")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tokcore.StreamWriter(tokcore.StreamShape("chat", "vllm"), "c", "m")  # type: ignore[call-arg]
    compiled = tokcore.BACKEND == "c"  # type: ignore[comparison-overlap]  # (no error at run time)
    assert not compiled


def run_all() -> None:
    """Every function above, at run time (tests/test_typing.py)."""
    accepted_ids()
    accepted_b64()
    base64_keywords_of_315()
    accepted_json_and_usage()
    accepted_relay()
    asyncio.run(accepted_async())
    accepted_events()
    accepted_pickling_and_module()
    accepted_wire()
    accepted_width()
    accepted_writer()
    rejected()
