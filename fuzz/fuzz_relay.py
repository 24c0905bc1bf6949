"""Fuzz UsageRelay: both twins fed the same bytes in fuzzer-chosen splits, in every dialect.

The first 9 bytes are the control (:func:`draw_setup`): the api, the counts, the event size
bound (a small one, 1..300, for 3 inputs in 8, so that events outgrow it), how to split the
stream and the chunk type; the rest is the upstream byte stream. Checked:
- constructor arguments outside the contract raise exactly the error it names for them;
- the Python and the Cython twin give the same bytes and hold the same number of bytes
  after every call, and the same counts; feed/close never raise, return bytes, and never
  hold more than max_event_bytes;
- split invariance: the Cython twin fed the stream whole gives the same bytes and counts;
- no byte lost: with nothing rewritten the output is the input, byte for byte; without any
  spelling of a usage key nothing is rewritten or counted as usage;
- the same events come out, every event without usage byte for byte, the others with only
  data lines changed; events within the bound whose data is a JSON text: exactly the
  dialect's rewrite (``json.loads`` and ``_oracles.usage_outcome``), counted; events over
  it: a JSON text stays a JSON text;
- ``counts.events`` is the number of events.
"""

from __future__ import annotations

import sys
from typing import Any

from _oracles import (
    APIS,
    BOM,
    NOT_JSON,
    Block,
    count_errors,
    event_count,
    may_name_usage,
    same_json,
    sse_blocks,
    strict_json,
    usage_outcome,
)
from _parity import (
    Allow,
    Draw,
    agree,
    chunks,
    cuts,
    fail,
    feed_all,
    fuzz_main,
    instrumented,
    load_twins,
    outcomes,
)

with instrumented(__name__ == "__main__" and "--random" not in sys.argv,
                  own=["stream._relay_py", "stream._usage_py", "stream._dialects"],
                  native_skip=["stream._bigevent_py", "members._members_py"]):
    TWINS = load_twins("stream._relay")
FAST = TWINS.get("c", TWINS["py"])  # the twin that replays the stream whole

DEFAULT_LIMIT = 1 << 20  # larger than any fuzz input: nothing is oversized
PROMPTS = [0, 1, 7, 12_345, 40_000, 2**31, 2**62, 2**63 - 1]
CACHED: list[Any] = [None, None, 0, 1, 5, 12_345, 2**63 - 1]
# arguments outside the contract (drawn for 1 input in 16): wrong types, out of range
BAD_COUNTS: list[Any] = [-1, 2**63, 10**4300, True, False, 1.5, "3", b"3"]
BAD_LIMITS: list[Any] = [0, -1, 2**63, 1.5, True, None, "1"]
BAD_APIS: list[Any] = [None, "Chat", "", b"chat"]
KINDS = [bytes, bytearray, memoryview]
USAGE_COUNTS = ("rewritten", "foreign", "not_object", "unreadable", "too_large")


def draw_setup(draw: Draw) -> tuple[Any, Any, Any, Any, int, int]:
    """``(api, prompt, cached, max_event_bytes, cut seed, chunk kind)`` from 9 bytes."""
    api = draw.choice(APIS)
    mode = draw.byte()
    if mode < 16:  # arguments outside the contract
        prompt = draw.choice(PROMPTS + BAD_COUNTS + [None])
        cached = draw.choice(CACHED + BAD_COUNTS)
        limit = draw.choice([1, 300, DEFAULT_LIMIT] + BAD_LIMITS)
        api = draw.choice([*APIS, *BAD_APIS])
    else:
        prompt = draw.choice(PROMPTS)
        cached = draw.choice(CACHED)
        limit = draw.int(1, 300)  # 2 bytes
        if mode >= 112:
            limit = DEFAULT_LIMIT
    return api, prompt, cached, limit, draw.byte() | draw.byte() << 8, draw.int(0, 2)


def relay_errors(prompt: Any, cached: Any, api: Any, limit: Any) -> list[Allow]:
    """The errors UsageRelay(prompt, cached, api=api, max_event_bytes=limit) may raise: one
    for each argument outside the contract (which one is raised first is not said)."""
    errors = count_errors(prompt, "prompt_tokens")
    if cached is not None:
        errors += count_errors(cached, "cached_tokens")
    if not errors and cached is not None and cached > prompt:
        errors.append(Allow(ValueError, "cached_tokens"))
    errors += count_errors(limit, "max_event_bytes", 1)
    if type(api) is not str:
        errors.append(Allow(TypeError, "api"))
    elif api not in APIS:
        errors.append(Allow(ValueError, "api"))
    return errors


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    api, prompt, cached, limit, seed, kind = draw_setup(draw)
    stream = draw.rest()

    def make(twin: Any) -> Any:
        return twin.UsageRelay(prompt, cached, api=api, max_event_bytes=limit)

    errors = relay_errors(prompt, cached, api, limit)
    if errors:
        agree(outcomes(TWINS, make), errors, "UsageRelay()", must_raise=True)
        return

    if seed >= 0xF800 and len(stream) <= 128:  # every byte on its own
        pieces = [stream[i:i + 1] for i in range(len(stream))]
    else:
        pieces = chunks(stream, cuts(len(stream), seed % 9, seed))
    if kind:
        pieces = [KINDS[kind](p) for p in pieces]

    relays = {name: make(twin) for name, twin in TWINS.items()}
    runs = {name: feed_all(relay, pieces, f"{name} UsageRelay", pending=True)
            for name, relay in relays.items()}
    count, relayed = check_runs(runs, relays, limit)
    whole = None
    if len(pieces) > 1:  # split invariance (uncut, the whole run is the run above)
        relay = make(FAST)
        whole = b"".join(feed_all(relay, [stream], "UsageRelay")), relay.counts
        if whole[0] != relayed:
            fail(f"the output depends on the split: {relayed!r} cut, {whole[0]!r} whole")
    check_stream(stream, relayed, count, prompt, cached, api, limit)
    if whole is not None and whole[1] != count:  # last: the other checks ran
        fail(f"the counts depend on the split: {count} cut, {whole[1]} whole")


def check_runs(runs: dict[str, list[Any]], relays: dict[str, Any],
               limit: int) -> tuple[Any, bytes]:
    """Twin parity call by call (bytes returned, then pending_bytes), the bound, the
    counts; returns the counts and the whole output."""
    first_name, first = next(iter(runs.items()))
    for name, run in runs.items():
        if run != first:
            fail(f"UsageRelay twins differ: {first_name} -> {first!r}, {name} -> {run!r}")
        if not all(type(out) is bytes for out in run[0::2]):
            fail(f"{name}: UsageRelay returned something else than bytes: {run!r}")
    pending = first[1::2]
    if max(pending) > limit:
        fail(f"{max(pending)} bytes pending, over max_event_bytes={limit}")
    if pending[-1]:
        fail("bytes pending after close()")
    counts = {name: relay.counts for name, relay in relays.items()}
    count = counts[first_name]
    if not all(c == count for c in counts.values()):
        fail(f"counts differ: {counts}")
    return count, b"".join(first[0::2])


def check_stream(stream: bytes, relayed: bytes, count: Any, prompt: int, cached: int | None,
                 api: str, limit: int) -> None:
    """No byte lost, the events counted, and (where the stream may hold usage) each event's
    fate (:func:`check_events`)."""
    same = relayed == stream
    if count.rewritten == 0 and not same:  # no byte lost, none changed
        fail(f"nothing rewritten, yet the output differs: {stream!r} -> {relayed!r}")
    usage = may_name_usage(stream)
    blocks = sse_blocks(stream) if usage else None
    events = len(blocks) if blocks is not None else event_count(stream)
    # the relay frames on bytes, where a first line that is only a BOM is not blank: it
    # counts one event more there (a reported discrepancy with the WHATWG framing)
    if count.events != events and not (count.events == events + 1 and bom_line(stream)):
        fail(f"counts.events {count.events}, the stream has {events} events: {stream!r}")
    if blocks is None:
        if any(getattr(count, n) for n in USAGE_COUNTS):
            fail(f"usage counted in a stream without a usage key: {count}")
        return
    check_events(blocks, blocks if same else sse_blocks(relayed), prompt, cached, api,
                 limit, count)


def bom_line(stream: bytes) -> bool:
    return stream.startswith(BOM) and stream[3:4] in (b"", b"\r", b"\n")


def check_events(blocks: list[Block], relayed: list[Block], prompt: int, cached: int | None,
                 api: str, limit: int, count: Any) -> None:
    """Event by event: what may change, and what it must become (see the docstring)."""
    if len(relayed) != len(blocks):
        fail(f"{len(blocks)} events in, {len(relayed)} out: {blocks!r} -> {relayed!r}")
    tally = dict.fromkeys(USAGE_COUNTS, 0)
    exact = True  # every event that may hold usage has a verdict: the counts must match
    for old, new in zip(blocks, relayed):
        # the size as the relay may count it is at most this: within it, the event is not
        # oversized whatever the CRLF and BOM accounting
        within = len(old.raw) + (not old.complete) <= limit
        exact = exact and within
        if new.raw == old.raw:
            changed = False
        elif old.data is None or not may_name_usage(old.data):
            fail(f"an event without usage in its data changed: {old.raw!r} -> {new.raw!r}")
        elif len(new.lines) != len(old.lines) or not all(
                a == b or a.startswith(b"data") and b.startswith(b"data")
                for a, b in zip(old.lines, new.lines)):
            fail(f"lines other than data changed: {old.raw!r} -> {new.raw!r}")
        else:
            changed = True
        if old.data is None or not may_name_usage(old.data):
            continue
        document = strict_json(old.data)
        if document is NOT_JSON:  # read leniently: parity and the framing are the contract
            exact = False
            continue
        if not within:  # oversized: scanned as it streams or forwarded; JSON stays JSON
            if changed and (new.data is None or strict_json(new.data) is NOT_JSON):
                fail(f"an oversized event's JSON data became invalid: {old.raw!r} -> "
                     f"{new.raw!r}")
            continue
        fate = usage_outcome(document, prompt, cached, api)
        if fate.kind == "rewritten":
            tally["rewritten"] += 1
            after = NOT_JSON if new.data is None else strict_json(new.data)
            if after is NOT_JSON or not same_json(after, fate.expected):
                fail(f"{api} usage rewrite: {old.data!r} -> {new.data!r}, expected "
                     f"{fate.expected!r}")
            continue
        if changed:
            fail(f"{api}: usage that must stay as it came ({fate.kind}) changed: "
                 f"{old.raw!r} -> {new.raw!r}")
        if fate.kind in tally:
            tally[fate.kind] += 1
        elif type(document) is not dict:  # a JSON text that is not an object
            if b'"usage"' in old.data:  # holds a spelling of the key: unreadable
                tally["unreadable"] += 1
            elif b"\\u" in old.data:
                exact = False  # an escape the pre-filter may take for a spelling of it
    if exact:
        got = {name: getattr(count, name) for name in USAGE_COUNTS}
        if got != tally or count.oversized:
            fail(f"counts {count}, the events give {tally}, none oversized or too large")


if __name__ == "__main__":
    fuzz_main("relay", test_one_input)
