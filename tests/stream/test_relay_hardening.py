"""The hostile-input review's repros for the SSE/usage path, each on both twins.

Each test is one finding of that review, stated as what must happen instead: the relay
never raises on data and loses nothing; valid JSON in is valid JSON out, other members
untouched; what a relay keeps after a read is bounded; a relay used by two calls at once
refuses the second; both twins check ``max_event_bytes`` alike; nesting depth changes
nothing.
"""

from __future__ import annotations

import json
import sys
import threading
import tracemalloc
from types import ModuleType
from typing import Any

import pytest
from _twins import twin

KINDS = ["c", "py"]
#: what a relay may keep beyond its bound: the object, its state, a small buffer or two
SMALL = 64 * 1024


def strict_loads(text: bytes) -> Any:
    """json.loads as a strict client reads it: no NaN, no Infinity."""
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


# --- 1: a count that cannot be written leaves that usage as it came -----------------------

VALUE_4300 = b'{"completion_tokens":' + b"9" * 4300 + b"}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit, outcome", [
    (1 << 20, "unreadable"),  # held
    (len(VALUE_4300), "unreadable"),  # scanned as it streams, the value within the bound
    (16, "too_large")])  # the value itself larger than the bound
def test_relay_does_not_raise_on_a_4300_digit_count(kind: str, limit: int,
                                                    outcome: str) -> None:
    sse = twin("stream", kind)
    event = b'data: {"usage":' + VALUE_4300 + b"}\n\n"
    stream = event + b"data: next\n\n"
    relay = sse.UsageRelay(1, max_event_bytes=limit)
    assert relay.feed(stream) == stream
    assert relay.close() == b""
    counts = relay.counts
    assert (counts.events, counts.rewritten, getattr(counts, outcome)) == (2, 0, 1)
    assert sse.rewrite_usage(event[6:-2], 1) == event[6:-2]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prompt, cached, name", [
    pytest.param(10**5000, None, "prompt_tokens", id="10**5000"),
    pytest.param(2**63, None, "prompt_tokens", id="2**63"),
    pytest.param(1, 10**5000, "cached_tokens", id="cached-10**5000")])
def test_counts_past_2_63_are_refused_clearly(kind: str, prompt: int, cached: int | None,
                                              name: str) -> None:
    sse = twin("stream", kind)
    for call in (lambda: sse.UsageRelay(prompt, cached),
                 lambda: sse.rewrite_usage(b'{"usage":{}}', prompt, cached)):
        with pytest.raises(ValueError, match=rf"^{name} must be in \[0, 2\*\*63\)"):
            call()
    sse.UsageRelay(2**63 - 1, 2**63 - 1)  # the largest counts are fine


# --- 2: valid JSON in, valid JSON out, other members as they came ---------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_rewrite_keeps_every_other_member_byte_for_byte(kind: str) -> None:
    sse = twin("stream", kind)
    payload = b'{"usage":{"completion_tokens":5,"cost":1e400}}'
    out = sse.rewrite_usage(payload, 10)
    assert out == (b'{"usage":{"completion_tokens":5,"cost":1e400,"prompt_tokens":10,'
                   b'"total_tokens":15}}')
    strict_loads(out)  # no Infinity
    spelled = (b'{"usage" : {"cost":1.0E+2, "completion_tokens": 5 ,"w":"\\u00e9\\/",'
               b'"prompt_tokens":-0.0e0,"x":[1 ,2]} }')
    out = sse.rewrite_usage(spelled, 10)
    assert out == spelled.replace(b"-0.0e0", b"10").replace(b"[1 ,2]}", b'[1 ,2],'
                                                            b'"total_tokens":15}')


# --- 3: what a relay keeps after a read -----------------------------------------------------

def kept_after(relay: Any, reads: list[bytes]) -> list[int]:
    """The traced heap the relay holds after each read (its outputs dropped)."""
    kept = []
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for read in reads:
            out = relay.feed(read)
            del out
            kept.append(tracemalloc.get_traced_memory()[0] - base)
    finally:
        tracemalloc.stop()
    return kept


@pytest.mark.parametrize("kind", KINDS)
def test_relay_keeps_nothing_after_a_large_read_ends_the_event(kind: str) -> None:
    sse = twin("stream", kind)
    head = b"data: " + b"x" * 1000
    tail = b"y" * (50 << 20) + b"\n\n"
    relay = sse.UsageRelay(1)  # the 1 MiB default bound
    kept = kept_after(relay, [head, tail])
    assert relay.pending_bytes == 0
    assert kept[-1] <= SMALL, f"{kept[-1]} bytes kept after the event ended"


@pytest.mark.parametrize("kind", KINDS)
def test_relay_piece_table_does_not_stay_grown(kind: str) -> None:
    sse = twin("stream", kind)
    event = b'data: {"usage":{"completion_tokens":3}}\n\n'
    # every event rewritten (the piece table is the Cython twin's; the Python twin, whose
    # per-event cost is far higher under tracemalloc, gets a smaller read of the same kind)
    size = int(7.8 * (1 << 20)) if kind == "c" else 1 << 19
    read = event * (size // len(event))
    relay = sse.UsageRelay(1)
    kept = kept_after(relay, [read, event])
    assert max(kept) <= SMALL, f"{max(kept)} bytes kept after a 7.8 MiB read"


# --- 4: one relay, two calls at once --------------------------------------------------------

def long_feed_event(lines: int) -> bytes:
    """An event whose usage runs over many data lines: the twins' shared Python path, long
    enough for another thread to be scheduled in the middle of it."""
    body = b"\n".join(b"data: " + b'"x%d":%d,' % (i, i) for i in range(lines))
    return b"data: {\n" + body + b'\ndata: "usage":{"completion_tokens":1}}\n\n'


def _overlap_once(sse: ModuleType, event: bytes) -> tuple[list[bytes], list[BaseException]]:
    """One relay fed ``event`` on one thread while another feeds it pings until that call is
    done: what the long call returned, and the refusals the pings met."""
    relay = sse.UsageRelay(7)
    started, done = threading.Event(), threading.Event()
    refused: list[BaseException] = []
    results: list[bytes] = []

    def first() -> None:
        started.set()
        try:
            results.append(relay.feed(event))
        finally:
            done.set()

    def second() -> None:
        started.wait()
        while not done.is_set():
            try:
                relay.feed(b": ping\n\n")
            except RuntimeError as error:
                refused.append(error)
                return

    threads = [threading.Thread(target=second), threading.Thread(target=first)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert relay.feed(b"data: 1\n\n") == b"data: 1\n\n"  # usable again afterwards
    return results, refused


@pytest.mark.parametrize("kind", KINDS)
def test_a_relay_fed_from_two_threads_refuses_the_second_call(kind: str) -> None:
    """Each try: the call that ran is whole, and a call that overlapped it was refused, not
    interleaved. Whether the threads overlap at all is the scheduler's: on a loaded machine
    the pinging thread may not run until the long call is over, so the scenario is tried
    again until one try overlaps (no try is timed)."""
    sse = twin("stream", kind)
    event = long_feed_event(20000)
    expected = sse.UsageRelay(7).feed(event)
    assert expected != event
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for _ in range(500):
            results, refused = _overlap_once(sse, event)
            assert results == [expected]
            if refused:
                break
    finally:
        sys.setswitchinterval(interval)
    assert refused, "the overlapping call was never refused in 500 tries"
    assert "UsageRelay is already in use" in str(refused[0])


# --- 5: max_event_bytes is checked alike ----------------------------------------------------

@pytest.mark.parametrize("bad", [2**63, -1, 0, pytest.param(10**5000, id="10**5000")])
def test_max_event_bytes_twins_agree(bad: int) -> None:
    messages = set()
    for kind in KINDS:
        with pytest.raises(ValueError) as caught:
            twin("stream", kind).UsageRelay(1, max_event_bytes=bad)
        messages.add(str(caught.value))
    assert len(messages) == 1 and messages.pop().startswith("max_event_bytes must be in [1, 2**63)")
    for kind in KINDS:
        twin("stream", kind).UsageRelay(1, max_event_bytes=2**63 - 1)


# --- 7: depth changes nothing ----------------------------------------------------------------

def at_stack_depth(depth: int, call: Any) -> Any:
    return call() if depth == 0 else at_stack_depth(depth - 1, call)


@pytest.mark.parametrize("depth", [1, 950, 1000, 100_000])
def test_usage_after_deep_nesting_is_rewritten_by_both_twins(depth: int) -> None:
    """The scanners count brackets, they do not recurse: a usage member after a value nested
    any depth is found, one nested any depth is not the usage (only the dialect's paths
    are), and the caller's own stack depth plays no part."""
    deep = b'{"a":' + b"[" * depth + b"]" * depth
    body = deep + b',"usage":{"completion_tokens":5}}'
    nested = b'{"a":' + b'{"x":' * depth + b'{"usage":{"completion_tokens":5}}' + \
        b"}" * depth + b"}"
    expected = deep + (b',"usage":{"completion_tokens":5,"prompt_tokens":9,'
                       b'"total_tokens":14}}')
    for kind in KINDS:
        sse: ModuleType = twin("stream", kind)
        for stack in (0, 900):
            # called at once, inside this iteration: the lambdas see this loop's twin
            assert at_stack_depth(stack, lambda: sse.rewrite_usage(body, 9)) == expected  # noqa: B023
            assert at_stack_depth(stack, lambda: sse.rewrite_usage(nested, 9)) is nested  # noqa: B023
        for limit in (1 << 30, 64):  # held, and scanned as it streams
            relay = sse.UsageRelay(9, max_event_bytes=limit)
            assert relay.feed(b"data: " + body + b"\n\n") == b"data: " + expected + b"\n\n"
            relay = sse.UsageRelay(9, max_event_bytes=limit)
            event = b"data: " + nested + b"\n\n"
            assert relay.feed(event) == event


# --- issue 31: a busy object re-initialised, the largest bound, reads from inside a call ----

CHAT_EVENT = (b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
              b'"delta":{"content":"x"}}]}\n\n')
# usage over two data lines: the relay's shared Python path (_fields.rewrite_event)
TWO_LINES = b'data: {"choices":[],\ndata: "usage":{"prompt_tokens":1,"completion_tokens":5}}\n\n'
REENTRY_STREAM = CHAT_EVENT * 100 + TWO_LINES + CHAT_EVENT * 100


def profile_once(function: str, action: Any) -> Any:
    """A profile hook that runs ``action()`` once, on the first call of the Python function
    named ``function`` (or of one defined in the module of that name), and keeps what it
    returned or raised."""
    seen: list[Any] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not seen and function in (
                frame.f_code.co_name, frame.f_globals.get("__name__")):
            try:
                seen.append(action())
            except BaseException as error:  # kept for the test to look at
                seen.append(error)

    hook.seen = seen  # type: ignore[attr-defined]
    return hook


@pytest.mark.parametrize("kind", KINDS)
def test_a_relay_re_initialised_inside_its_feed_is_refused(kind: str) -> None:
    """The review's repro: a hook that re-initialises the relay inside its feed (at the
    shared rewrite of a two-line event) and feeds it again. It corrupted the Cython twin's
    heap (the inner feed freed the piece table the outer one still wrote). Now __init__ is
    refused like a call (RuntimeError), and the outer feed goes on untouched."""
    sse = twin("stream", kind)
    expected = sse.UsageRelay(40000, 8).feed(REENTRY_STREAM)
    relay = sse.UsageRelay(40000, 8)
    inner: list[Any] = []

    def reinit_and_feed() -> None:
        for call in (lambda: relay.__init__(40000), lambda: relay.feed(CHAT_EVENT * 3)):
            try:
                inner.append(call())
            except RuntimeError as error:
                inner.append(error)

    hook = profile_once("rewrite_event", reinit_and_feed)
    sys.setprofile(hook)
    try:
        out = relay.feed(REENTRY_STREAM)
    finally:
        sys.setprofile(None)
    assert hook.seen == [None], "the hook never ran: the repro no longer reaches it"
    assert [type(r) for r in inner] == [RuntimeError, RuntimeError], inner
    assert all("UsageRelay is already in use" in str(r) for r in inner)
    assert out == expected
    assert relay.counts == sse.RelayCounts(events=201, rewritten=1)
    relay.__init__(5)  # not busy: a fresh relay
    assert relay.counts == sse.RelayCounts() and relay.pending_bytes == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_decoder_re_initialised_inside_its_feed_is_refused(kind: str) -> None:
    sse = twin("stream", kind)
    decoder = sse.EventDecoder()
    # at the making of the first Event (a named tuple's __new__, Python code)
    hook = profile_once("namedtuple_Event", lambda: decoder.__init__(max_event_bytes=10))
    sys.setprofile(hook)
    try:
        events = decoder.feed(b"data: one\n\ndata: two\n\ndata: thr")
    finally:
        sys.setprofile(None)
    assert len(hook.seen) == 1 and isinstance(hook.seen[0], RuntimeError), hook.seen
    assert "EventDecoder is already in use" in str(hook.seen[0])
    assert [e.data for e in events] == ["one", "two"]
    assert decoder.feed(b"ee\n\n")[0].data == "three"  # the bound and the line it held kept
    decoder.feed(b"data: held")
    decoder.__init__()  # not busy: a fresh decoder, the line it held forgotten
    assert decoder.pending_bytes == 0 and decoder.feed(b"\n\ndata: x\n\n")[0].data == "x"


@pytest.mark.parametrize("kind", KINDS)
def test_a_big_event_scan_re_initialised_inside_its_feed_is_refused(kind: str) -> None:
    """The scan of an event too large to hold, re-initialised while it rewrites a usage value
    (reached through the relay's references, as any hook can)."""
    import gc

    from tokcore.stream._usage_py import make_rules

    sse = twin("stream", kind)
    event = (b'data: {"pad":"' + b"x" * 200 + b'","usage":{"prompt_tokens":1,'
             b'"completion_tokens":5}}\n\n')
    expected = sse.UsageRelay(9, max_event_bytes=64).feed(event)
    relay = sse.UsageRelay(9, max_event_bytes=64)
    relay.feed(event[:100])  # the scan has started

    def scans() -> list[Any]:
        return [o for o in gc.get_referents(relay) if type(o).__name__ == "BigEvent"]

    big, = scans()
    hook = profile_once("rewrite_value", lambda: big.__init__(make_rules(1, None, "chat"), 8,
                                                              False))
    sys.setprofile(hook)
    try:
        out = relay.feed(event[100:])
    finally:
        sys.setprofile(None)
    assert len(hook.seen) == 1 and isinstance(hook.seen[0], RuntimeError), hook.seen
    assert "BigEvent is already in use" in str(hook.seen[0])
    assert event[:100] + out == expected
    assert relay.counts.rewritten == 1 and relay.counts.oversized == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit", [1, 2, 3, 4, (1 << 62) - 1, (1 << 63) - 5, (1 << 63) - 1])
def test_the_largest_bounds_hold_and_count_alike(kind: str, limit: int) -> None:
    """Every max_event_bytes the API takes, up to 2**63 - 1: an unfinished event held (the
    hold computed ``max + 4``, a signed overflow at the top: UBSan aborts ``make sanitize``
    there), events held or scanned, close(); the same bytes and counts on both twins."""
    pieces = [b'data: {"a":1', b'}\n\ndata: {"usage":{"prompt_tokens":1,"completion_tokens":2}',
              b'}\r\n\r\n: c\n', b"\n", b'data: {"usage":', b"null}"]
    from tokcore.stream import (
        _relay_py,  # the reference, also where only the Cython twins are under
    )
    # test (make sanitize, whose UBSan run this test is for)

    results = []
    for relays in (_relay_py, twin("stream", kind)):
        relay = relays.UsageRelay(1, max_event_bytes=limit)
        out = [relay.feed(piece) for piece in pieces]
        out.append(relay.close())
        results.append((out, tuple(relay.counts), relay.pending_bytes))
    assert results[0] == results[1]
    # the usage value is rewritten where it fits the bound, else left as it came
    counts = twin("stream", kind).RelayCounts(*results[0][1])
    assert (counts.events, counts.rewritten, counts.too_large) == (
        (4, 1, 0) if limit > 100 else (4, 0, 1))
    decoder = twin("stream", kind).EventDecoder(max_event_bytes=limit)
    try:
        decoder.feed(b"data: x\n")
    except ValueError:
        assert limit < 7  # the line itself is over the bound
    else:
        assert decoder.pending_bytes == 2


@pytest.mark.parametrize("kind", KINDS)
def test_counts_and_pending_bytes_read_from_inside_a_call(kind: str) -> None:
    """A hook inside feed() reads the relay's counts and pending_bytes, and the decoder's:
    answered at once with the state the call has reached. On a free-threaded build the
    Cython twin waited for the busy flag its own thread held, for ever (make
    test-freethreaded runs this); the call runs in a thread of its own so that a hang fails
    the test instead of stopping the run."""
    sse = twin("stream", kind)
    relay = sse.UsageRelay(40000, 8)
    decoder = sse.EventDecoder()
    read: list[Any] = []

    def read_inside() -> tuple[Any, ...]:
        return relay.counts, relay.pending_bytes, decoder.pending_bytes

    def run() -> None:
        relay.feed(b"data: {")  # held: pending_bytes counts it
        decoder.feed(b"data: a\n")
        hooks = [profile_once("rewrite_event", read_inside),
                 profile_once("namedtuple_Event", read_inside)]
        for hook, call in zip(hooks, (lambda: relay.feed(b"}\n\n" + REENTRY_STREAM),
                                      lambda: decoder.feed(b"\n"))):
            sys.setprofile(hook)
            try:
                call()
            finally:
                sys.setprofile(None)
            read.append(hook.seen)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "a read from inside the call never returned"
    (in_feed,), (in_decode,) = read
    # the relay is at the two-line event, counted with the 101 before it; the held event it
    # completed is still in its buffer in the Cython twin (pieces point into it until the
    # output is joined), already let go in the Python one
    counts, pending, decoding = in_feed
    assert counts == sse.RelayCounts(events=102) and pending in (0, 10) and decoding == 2
    # the decoder is making its event: its data held, with its LF or not yet
    assert in_decode[:2] == (sse.RelayCounts(events=202, rewritten=1), 0) and \
        in_decode[2] in (1, 2)


class _Int(int):
    pass


class _Str(str):
    pass


CONSTRUCTIONS = [
    ((), {}), ((1, 2, 3), {}), ((), {"prompt_tokens": 9}), ((9,), {"cached_tokens": 2}),
    ((), {"cached_tokens": 2, "prompt_tokens": 9}), ((2, 9), {}), ((True,), {}),
    ((9, False), {}), ((_Int(9), _Int(2)), {}), ((9,), {"api": "messages"}),
    ((9,), {"api": _Str("chat")}), ((9,), {"api": "nope"}), ((9,), {"api": None}),
    ((9,), {"max_event_bytes": 0}), ((9,), {"max_event_bytes": 1 << 63}),
    ((9,), {"max_event_bytes": _Int(64)}), ((9,), {"max_event_bytes": 64.0}),
    ((9,), {"prompt_tokens": 9}), ((9, 2), {"cached_tokens": 2}), ((9,), {"other": 1}),
    ((-1,), {}), ((1 << 63,), {}), (((1 << 63) - 1, 0), {"api": "responses"}),
    ((9, None), {"max_event_bytes": 1}),
]


def constructed(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], feed: bytes) -> Any:
    try:
        obj = cls(*args, **kwargs)
        return obj.feed(feed), tuple(obj.counts) if hasattr(obj, "counts") else None
    except Exception as error:  # the twins' errors are compared
        return type(error).__name__, str(error)


@pytest.mark.parametrize(("args", "kwargs"), CONSTRUCTIONS)
def test_a_relay_is_made_alike_from_every_kind_of_argument(args: tuple[Any, ...],
                                                           kwargs: dict[str, Any]) -> None:
    """The Cython twin's constructor checks plain arguments itself and hands the rest to the
    Python twin: both give the same relay, or the same error with the same text."""
    event = (b'event: x\ndata: {"message":{"usage":{"input_tokens":3,"output_tokens":1}},'
             b'"usage":{"prompt_tokens":1,"completion_tokens":4,"output_tokens":4}}\n\n') * 2
    from tokcore.stream import _relay_py

    expected = constructed(_relay_py.UsageRelay, args, kwargs, event)
    assert constructed(twin("stream", "c").UsageRelay, args, kwargs, event) == expected


@pytest.mark.parametrize(("args", "kwargs"), [
    ((), {}), ((5,), {}), ((), {"max_event_bytes": 3}), ((), {"max_event_bytes": _Int(3)}),
    ((), {"max_event_bytes": 0}), ((), {"max_event_bytes": True}), ((), {"limit": 3}),
    ((), {"max_event_bytes": 3, "x": 1}), ((), {"max_event_bytes": (1 << 63) - 1}),
])
def test_a_decoder_is_made_alike_from_every_kind_of_argument(args: tuple[Any, ...],
                                                             kwargs: dict[str, Any]) -> None:
    from tokcore.stream import _events_py

    expected = constructed(_events_py.EventDecoder, args, kwargs, b"data: x\n\n")
    assert constructed(twin("stream", "c").EventDecoder, args, kwargs, b"data: x\n\n") == \
        expected
