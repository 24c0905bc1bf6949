"""Every function from several threads at once, on shared inputs, every result checked.

The switch interval is cut to a few microseconds so that threads interleave inside the
calls. Large numpy inputs take pack_ids' no-GIL path, so they are also read while another
thread writes them: the result may mix old and new bytes (that race is the caller's), but
it never crashes and never holds a byte that was in neither. A per-stream object (an
EventDecoder) shared by mistake refuses overlapping calls with RuntimeError.
"""

from __future__ import annotations

import array
import base64
import pickle
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from _index_objects import Index

import tokcore
from tokcore import Event, compact_ids
from tokcore._args import in_use

THREADS = 6
ROUNDS = 40


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(5e-6)
    yield
    sys.setswitchinterval(before)


def run_together(*workers: Callable[[], None]) -> None:
    """Start every worker at the same instant; re-raise the first failure."""
    barrier = threading.Barrier(len(workers))
    errors: list[BaseException] = []

    def wrap(work: Callable[[], None]) -> None:
        try:
            barrier.wait()
            work()
        except BaseException as exc:  # reported below, on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    if errors:
        raise errors[0]


def race(write: Callable[[], None], read: Callable[[], None], rounds: int) -> None:
    """One thread calls ``write`` over and over while the others call ``read`` ``rounds``
    times each; the first to stop, or to fail, stops the writer."""
    stop = threading.Event()

    def writer() -> None:
        try:
            while not stop.is_set():
                write()
        finally:
            stop.set()

    def reader() -> None:
        try:
            for _ in range(rounds):
                read()
        finally:
            stop.set()

    run_together(writer, *[reader] * (THREADS - 1))


def flip(shared: Any, first: Any, second: Any) -> Callable[[], None]:
    """A writer that rewrites ``shared`` in place with ``first``, then ``second``."""
    def write() -> None:
        shared[:] = first
        shared[:] = second
    return write


def le32(values: Any) -> bytes:
    return np.asarray(values, dtype="<i4").tobytes()


# --- token ids -----------------------------------------------------------------------------

def test_ids_shared_inputs(pack_twin: ModuleType) -> None:
    rng = np.random.default_rng(1)
    values = rng.integers(-(2**31), 2**31, 30_000, dtype=np.int64)  # 240 KB: no-GIL path
    as_list = values.tolist()
    inputs: list[tuple[Any, bytes]] = [
        (as_list, le32(values)),
        (tuple(as_list[:5000]), le32(values[:5000])),
        (values, le32(values)),
        (values[::-3], le32(values[::-3])),
        (values.astype(">i8"), le32(values)),
        (values.astype("<i4"), le32(values)),
        (array.array("q", as_list), le32(values)),
    ]
    as_int32 = values.astype(np.int32)
    packed = le32(values)
    unpack_inputs: list[Any] = [packed, bytearray(packed), np.frombuffer(packed, np.uint8)]

    def worker() -> None:
        # a memoryview of the shared objects each: one memoryview shared by the threads is
        # released under them by 3.13t's non-atomic count of its exports (_twins.SHARED_VIEW)
        mine = [*inputs, (memoryview(as_int32), le32(values))]
        views = [*unpack_inputs, memoryview(packed)]
        for _ in range(ROUNDS // 4):
            for ids, expected in mine:
                assert pack_twin.pack_ids(ids) == expected
            for data in views:
                assert pack_twin.unpack_ids(data) == as_list

    run_together(*[worker] * THREADS)


# A writer's copy is not atomic per element (memcpy may go byte by byte, as under ASan), so a
# racing reader may see any mix of the old and new bytes of an id. The two contents differ
# only in bytes 2 and 3 (0 or 1): whatever the mix, every id keeps its index in its low
# bytes, stays inside int32, and its upper bytes are each 0 or 1.
RACE_IDS = np.arange(40_000, dtype=np.int64)
RACE_NEW = RACE_IDS + 0x01010000


def check_race(got: Any) -> None:
    got = np.asarray(got, dtype=np.int64)
    assert len(got) == len(RACE_IDS)
    assert ((got & 0xFFFF) == RACE_IDS).all(), "an id moved or changed outside the race"
    upper = got >> 16
    assert ((upper & 0xFF) <= 1).all() and ((upper >> 8) <= 1).all()


def test_pack_ids_of_an_array_another_thread_writes(pack_twin: ModuleType) -> None:
    shared = RACE_IDS.copy()  # 320 KB of int64: packed with the GIL released
    race(flip(shared, RACE_NEW, RACE_IDS),
         lambda: check_race(np.frombuffer(pack_twin.pack_ids(shared[::-1]), "<i4")[::-1]),
         ROUNDS)


def test_unpack_ids_of_a_bytearray_another_thread_writes(pack_twin: ModuleType) -> None:
    """unpack_ids reads with the GIL held, so a writer that needs the GIL (``shared[:] =``)
    never runs during a read and a race test with it cannot fail. numpy's copy releases the
    GIL: this writer rewrites the bytearray while unpack_ids reads it, and reads that caught a
    write half done (old and new ids in one result) must occur, each one still a valid mix."""
    old, new = le32(RACE_IDS), le32(RACE_NEW)
    shared = bytearray(old)  # rewritten at the same size: allowed while a view is held
    target = np.frombuffer(shared, np.uint8)
    old_bytes, new_bytes = np.frombuffer(old, np.uint8), np.frombuffer(new, np.uint8)
    old_ids, new_ids = RACE_IDS.tolist(), RACE_NEW.tolist()
    mixed: list[int] = []  # list.append is atomic

    def write() -> None:
        np.copyto(target, new_bytes)  # a plain copy: numpy drops the GIL for it
        np.copyto(target, old_bytes)

    def read() -> None:
        got = pack_twin.unpack_ids(shared)
        check_race(got)
        if got != old_ids and got != new_ids:
            mixed.append(1)

    for _ in range(20):  # a read overlaps a write most of the time, not every time
        race(write, read, ROUNDS // 2)
        if mixed:
            break
    assert mixed, "no read overlapped a write: the test did not race"


def test_pack_ids_of_a_list_another_thread_resizes(pack_twin: ModuleType) -> None:
    """``__index__`` runs Python code, so other threads get in mid-call and resize the list:
    the outcome is the packing of some state of the list, or the contract's RuntimeError."""
    shared: list[Any] = [Index(i) for i in range(2000)]
    outcomes: list[str] = []  # list.append is atomic; `counts[key] += 1` from threads is not

    def mutate() -> None:
        shared.append(Index(len(shared)))
        shared.pop()
        shared.extend([Index(1), Index(2)])
        del shared[-2:]

    def read() -> None:
        try:
            got = pack_twin.pack_ids(shared)
        except RuntimeError as exc:
            assert "changed size" in str(exc)
            outcomes.append("resized")
        else:
            ids = struct.unpack(f"<{len(got) // 4}i", got)
            assert list(ids[:2000]) == list(range(2000))
            assert set(ids[2000:]) <= {1, 2, 2000, 2001}
            outcomes.append("packed")

    race(mutate, read, ROUNDS)
    assert len(outcomes) == ROUNDS * (THREADS - 1)


# --- SSE -----------------------------------------------------------------------------------

USAGE_PAYLOAD = (b'{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":5,'
                 b'"total_tokens":6}}')
REWRITTEN_PAYLOAD = (b'{"id":"c","choices":[],"usage":{"prompt_tokens":70,'
                     b'"completion_tokens":5,"total_tokens":75,'
                     b'"prompt_tokens_details":{"cached_tokens":8}}}')
TOKEN_EVENT = b'data: {"choices":[{"delta":{"content":"\\"usage\\": 1"}}]}\n\n'
NULL_EVENT = b'data: {"choices":[{"delta":{"content":" usage"}}],"usage":null}\n\n'
SSE_STREAM = TOKEN_EVENT * 50 + b"data: " + USAGE_PAYLOAD + b"\n\ndata: [DONE]\n\n"
SSE_RELAYED = TOKEN_EVENT * 50 + b"data: " + REWRITTEN_PAYLOAD + b"\n\ndata: [DONE]\n\n"


def test_sse_shared_inputs(stream_twin: ModuleType) -> None:
    sse = stream_twin
    shared = [USAGE_PAYLOAD, bytearray(USAGE_PAYLOAD)]
    span = (USAGE_PAYLOAD.index(b'{"prompt'), len(USAGE_PAYLOAD) - 1)
    shared_stream = bytearray(SSE_STREAM)  # every thread reads it, in its own cut
    expected_events = [("message", TOKEN_EVENT[6:-2].decode(), None, None)] * 50 + \
        [("message", USAGE_PAYLOAD.decode(), None, None), ("message", "[DONE]", None, None)]

    def worker(seed: int) -> Callable[[], None]:
        # a memoryview of the shared bytes each: one memoryview shared by the threads is
        # released under them by 3.13t's non-atomic count of its exports (_twins.SHARED_VIEW)
        payloads = [*shared, memoryview(USAGE_PAYLOAD)]

        def work() -> None:
            for round_ in range(ROUNDS):
                for payload in payloads:
                    assert sse.find_usage(payload) == span
                    assert sse.rewrite_usage(payload, 70, 8) == REWRITTEN_PAYLOAD
                step = 1 + (seed * 7 + round_) % 97
                view = memoryview(shared_stream)
                relay, decoder = sse.UsageRelay(70, 8), sse.EventDecoder()
                out, events = [], []
                for i in range(0, len(view), step):
                    out.append(relay.feed(view[i:i + step]))
                    events += decoder.feed(view[i:i + step])
                out.append(relay.close())
                pieces = [view[i:i + step] for i in range(0, len(view), step)]
                streamed = [tuple(e) for e in sse.iter_events(pieces)]
                del pieces
                view.release()
                assert b"".join(out) == SSE_RELAYED
                assert [tuple(e) for e in events] == expected_events == streamed
        return work

    run_together(*[worker(i) for i in range(THREADS)])


# --- one EventDecoder shared by mistake ----------------------------------------------------

def decoder_chunk(seed: int, round_: int, count: int = 20) -> tuple[bytes, list[Event]]:
    """``count`` whole events naming their thread and round, and what they decode to."""
    chunk = b"".join(b"id: %d\ndata: %d-%d\ndata: %d\n\n" % (k, seed, round_, k)
                     for k in range(count))
    return chunk, [Event(data=f"{seed}-{round_}\n{k}", id=str(k)) for k in range(count)]


def test_one_event_decoder_fed_from_several_threads(events_twin: ModuleType) -> None:
    """A call that overlaps another on the same decoder raises RuntimeError and consumes
    nothing; every call that goes through returns exactly the events of its own chunk (each
    chunk is whole events, so any interleaving of two streams would show)."""
    decoder = events_twin.EventDecoder()
    refused: list[int] = []
    message = str(in_use("EventDecoder"))

    def worker(seed: int) -> Callable[[], None]:
        # made up front, so that the threads spend their time in feed()
        chunks = [decoder_chunk(seed, round_) for round_ in range(ROUNDS * 5)]

        def work() -> None:
            for chunk, expected in chunks:
                try:
                    events = decoder.feed(chunk)
                except RuntimeError as exc:
                    assert str(exc) == message
                    refused.append(1)
                else:
                    assert events == expected
        return work

    for _attempt in range(20):  # two feeds overlap most of the time, not every time
        run_together(*[worker(i) for i in range(THREADS)])
        if refused or not FREE_THREADED:
            break
    if FREE_THREADED:  # with the GIL a compiled feed never lets another thread in mid-call
        assert refused, "no two calls overlapped: the test did not race"
    assert decoder.feed(b"data: last\n\n") == [Event(data="last", id="19")]


def test_close_while_other_threads_feed(events_twin: ModuleType) -> None:
    """close() overlapping a feed raises RuntimeError too; once it goes through, every feed
    is the ValueError of a closed decoder, and no feed before it returned wrong events."""
    # Each feed is 400 whole events made up front, so a feeder spends most of its time inside
    # feed(), and the feeders go on until the decoder is closed: with 20 events a chunk built
    # in the loop, the feeders were mostly outside feed() or already done when close() came
    # (under pytest-run-parallel, 12 threads on 2 cores, no close overlapped in 20 rounds).
    chunks = {seed: [decoder_chunk(seed, round_, 400) for round_ in range(4)]
              for seed in (1, 2)}
    outcomes: list[str] = []  # list.append is atomic
    for _attempt in range(20):
        decoder = events_twin.EventDecoder()
        closed = threading.Event()
        fed: list[int] = []

        def feeder(seed: int, decoder: Any = decoder, closed: Any = closed,
                   fed: list[int] = fed) -> None:
            while True:  # until the decoder is closed (the closer always gets there)
                chunk, expected = chunks[seed][len(fed) % 4]
                try:
                    assert decoder.feed(chunk) == expected
                    fed.append(1)
                except RuntimeError:
                    outcomes.append("feed refused")
                except ValueError as exc:
                    # the closer sets the event once close() has returned: a feed may see
                    # the closed decoder first
                    assert str(exc) == "feed() after close()" and closed.wait()
                    return

        def closer(decoder: Any = decoder, closed: Any = closed, fed: list[int] = fed) -> None:
            deadline = time.monotonic() + 10
            while len(fed) < 3 and time.monotonic() < deadline:  # the feeders are under way
                time.sleep(0)
            while True:
                try:
                    assert decoder.close() == []
                except RuntimeError:
                    outcomes.append("close refused")
                else:
                    closed.set()
                    return

        run_together(lambda: feeder(1), lambda: feeder(2), closer)
        if "close refused" in outcomes:
            break
    if FREE_THREADED:  # with the GIL a compiled call may never let another thread in
        assert "close refused" in outcomes, "close() never overlapped a feed: no race"


def test_close_from_another_thread_inside_a_feed(events_twin: ModuleType) -> None:
    """The same refusal without leaving it to the scheduler: the feeding thread is held inside
    feed() (by a profile hook, while the decoder builds an Event) while another thread calls
    close() and feed(); both are refused, the held feed returns its own events, and the
    decoder then closes."""
    inside, release = threading.Event(), threading.Event()
    decoder = events_twin.EventDecoder()
    message = str(in_use("EventDecoder"))
    refusals: list[str] = []
    got: list[Any] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_globals.get("__name__") == "namedtuple_Event" \
                and not inside.is_set():
            inside.set()
            assert release.wait(30), "the other thread never let the feed go on"

    def feeder() -> None:
        sys.setprofile(hook)  # this thread's only
        try:
            got.extend(decoder.feed(b"data: held\r\n\r\ndata: too\n\n"))
        finally:
            sys.setprofile(None)

    def other() -> None:
        try:
            assert inside.wait(30), "the feed never reached the hook"
            for call in (decoder.close, lambda: decoder.feed(b"data: other\n\n")):
                try:
                    call()
                except RuntimeError as exc:
                    refusals.append(str(exc))
        finally:
            release.set()

    run_together(feeder, other)
    assert refusals == [message, message]
    assert got == [Event(data="held"), Event(data="too")]
    assert decoder.close() == []


def test_an_event_decoder_re_entered_from_inside_a_call(events_twin: ModuleType) -> None:
    """A call made from inside a running one (here by a profile hook, while the decoder
    builds an Event) is refused the same way, and the outer call is not disturbed."""
    decoder = events_twin.EventDecoder()
    inner: list[Any] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_globals.get("__name__") == "namedtuple_Event" \
                and len(inner) < 2:
            for call in (lambda: decoder.feed(b"data: inner\n\n"), decoder.close):
                try:
                    inner.append(call())
                except RuntimeError as exc:
                    inner.append(exc)

    sys.setprofile(hook)
    try:
        events = decoder.feed(b"data: outer\r\n\r\n")
    finally:
        sys.setprofile(None)
    assert events == [Event(data="outer")]
    assert len(inner) == 2 and all(isinstance(r, RuntimeError) for r in inner), inner
    assert decoder.feed(b"data: after\n\n") == [Event(data="after")]


# --- base64 and the fused pair -------------------------------------------------------------

def test_b64_shared_inputs(b64_twin: ModuleType) -> None:
    b64 = b64_twin
    raw = bytes(np.random.default_rng(2).integers(0, 256, 200_000, dtype=np.uint8))
    encoded = base64.b64encode(raw)
    urlsafe = base64.urlsafe_b64encode(raw)
    shared_raw, shared_text = bytearray(raw), bytearray(encoded)
    ids = np.random.default_rng(3).integers(0, 152_000, 50_000, dtype=np.int64)
    ids_text = base64.b64encode(le32(ids)).decode()
    ids_list = ids.tolist()

    def worker() -> None:
        for _ in range(ROUNDS // 4):
            assert b64.b64encode(shared_raw) == encoded
            assert b64.standard_b64encode(shared_raw) == encoded
            assert b64.standard_b64decode(shared_text) == raw
            assert b64.urlsafe_b64encode(memoryview(shared_raw)) == urlsafe
            assert b64.b64decode(shared_text) == raw
            assert b64.b64decode(memoryview(shared_text), validate=True) == raw
            assert b64.urlsafe_b64decode(urlsafe.decode()) == raw
            assert b64.ids_to_b64(ids) == ids_text
            assert b64.ids_to_b64(ids_list) == ids_text
            assert b64.b64_to_ids(ids_text) == ids_list

    run_together(*[worker] * THREADS)


def test_b64_of_a_buffer_another_thread_writes(b64_twin: ModuleType) -> None:
    """Encoding a bytearray while another thread rewrites it in place: the output is the
    encoding of some mix of the two contents, byte by byte (no crash, no stray bytes)."""
    old, new = bytes(300_000), b"\xff" * 300_000
    shared = bytearray(old)

    def read() -> None:
        got = base64.b64decode(b64_twin.b64encode(shared), validate=True)
        assert len(got) == len(old) and set(got) <= {0x00, 0xFF}

    race(flip(shared, new, old), read, ROUNDS // 2)


def test_relay_usage_shared_stream() -> None:
    """The stream helper (live backend) from every thread over one shared bytearray."""
    shared = bytearray(SSE_STREAM)

    def worker() -> None:
        for round_ in range(ROUNDS):
            step = 7 + round_
            view = memoryview(shared)
            pieces = [view[i:i + step] for i in range(0, len(view), step)]
            assert b"".join(tokcore.relay_usage(pieces, 70, 8)) == SSE_RELAYED
            del pieces
            view.release()

    run_together(*[worker] * THREADS)


@compact_ids("ids")
class Holder:
    def __init__(self, ids: Any) -> None:
        self.ids = ids


def test_compact_ids_pickling_shared_objects() -> None:
    ids = list(range(100_000, 120_000))
    shared = [Holder(ids), Holder(tuple(ids)), Holder([1, 2**40]), Holder(None)]

    def worker() -> None:
        for _ in range(ROUNDS // 2):
            for holder in shared:
                back = pickle.loads(pickle.dumps(holder))
                expected = list(holder.ids) if isinstance(holder.ids, tuple) else holder.ids
                assert back.ids == expected

    run_together(*[worker] * THREADS)


def test_compact_ids_first_pickles_of_new_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pickle of a class reads its dict while other threads' first pickles may
    add to it (copyreg caches __slotnames__ there): each new class, pickled by all threads
    at once, on every kind of layout."""
    def fresh_classes() -> list[type]:
        @compact_ids("ids")
        class Plain:
            def __init__(self) -> None:
                self.ids = [1, 2, 3]

        @compact_ids("ids", lazy=True)
        class Lazy:
            def __init__(self) -> None:
                self.ids = [1, 2, 3]

        @compact_ids("ids")
        class Slotted:
            __slots__ = ("ids", "other")

            def __init__(self) -> None:
                self.ids, self.other = [1, 2, 3], None

        return [Plain, Lazy, Slotted]

    for round_ in range(ROUNDS):
        classes = fresh_classes()
        for cls in classes:  # pickle finds a class by its module and name (monkeypatch
            # takes them away again, and tells pytest-run-parallel this test runs alone)
            cls.__qualname__ = cls.__name__ = f"_Fresh{cls.__name__}{round_}"
            monkeypatch.setitem(globals(), cls.__name__, cls)
        objects = [cls() for cls in classes]

        def worker(objects: list[Any] = objects) -> None:
            for obj in objects:
                assert pickle.loads(pickle.dumps(obj)).ids == [1, 2, 3]

        run_together(*[worker] * THREADS)


# --- shared objects, every thread released at once (the free-threaded build's stress) ------

FREE_THREADED = not getattr(sys, "_is_gil_enabled", lambda: True)()


def at_once(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` on ``count`` threads released by one barrier; what each returned."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(slot: int) -> None:
        barrier.wait()
        results[slot] = work(slot)

    run_together(*[lambda slot=slot: run(slot) for slot in range(count)])
    return results


MUTATED = list(range(5000))  # exact small ints: the compiled twins' critical-section path


def mutate_list(shared: list[int]) -> Callable[[], None]:
    """A writer that resizes ``shared`` and rewrites an item, always back to MUTATED."""
    def write() -> None:
        shared.append(-1)
        shared[7] = -7
        shared.pop()
        shared[7] = 7
        shared.extend((-2, -3))
        del shared[-2:]
    return write


def check_mutated_state(ids: tuple[int, ...]) -> None:
    """``ids`` is one state the writer left the list in."""
    size = len(MUTATED)
    assert len(ids) in (size, size + 1, size + 2), len(ids)
    assert ids[:7] == tuple(MUTATED[:7]) and ids[8:size] == tuple(MUTATED[8:])
    assert ids[7] in (7, -7)
    assert set(ids[size:]) <= {-1, -2, -3}


def test_pack_ids_of_a_list_another_thread_mutates(pack_twin: ModuleType) -> None:
    """A list of exact ints resized and rewritten by one thread while the others pack it:
    each result is one state of the list (never a torn read, never a crash), or the
    contract's RuntimeError when its size changed mid-call."""
    shared = list(MUTATED)

    def read() -> None:
        try:
            got = pack_twin.pack_ids(shared)
        except RuntimeError as exc:
            assert "changed size" in str(exc)
        else:
            check_mutated_state(struct.unpack(f"<{len(got) // 4}i", got))

    race(mutate_list(shared), read, ROUNDS * 5)


def test_ids_to_b64_of_a_list_another_thread_mutates(b64_twin: ModuleType) -> None:
    shared = list(MUTATED)

    def read() -> None:
        try:
            text = b64_twin.ids_to_b64(shared)
        except RuntimeError as exc:
            assert "changed size" in str(exc)
        else:
            data = base64.b64decode(text)
            check_mutated_state(struct.unpack(f"<{len(data) // 4}i", data))

    race(mutate_list(shared), read, ROUNDS * 5)


def test_threads_filling_the_id_cache_agree() -> None:
    """unpack_ids' shared int per small id: threads that make the same ids at the same
    instant all get the one int each slot kept (a compare and swap without the GIL)."""
    from _twins import twin

    ids_c = twin("pack", "c")
    if ids_c.BUILD_INFO["id cache"] == "off":
        pytest.skip("this build has no id cache")
    start = 200_000 + (int(time.monotonic_ns()) % 50_000)  # ids the cache may not hold yet
    data = le32(np.arange(start, start + 10_000))
    results = at_once(THREADS, lambda _slot: ids_c.unpack_ids(data))
    assert results[0] == list(range(start, start + 10_000))
    for other in results[1:]:
        assert all(a is b for a, b in zip(results[0], other)), "two ints for one id"


@pytest.mark.parametrize("descriptors", ["c", "py"])
@pytest.mark.parametrize("layout", ["dict", "slot"])
def test_simultaneous_first_reads_of_a_lazy_attribute(descriptors: str, layout: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Every thread reads one held attribute at the same instant: all get the one list that
    the object then keeps (a held placeholder is swapped once)."""
    from _twins import twin

    from tokcore.pickling import _compact, _layout

    # the seam and the module's names are process-wide: monkeypatch puts them back (and
    # tells pytest-run-parallel that this test runs alone)
    monkeypatch.setattr(_layout, "_descriptors", twin("lazy", descriptors))
    namespace: dict[str, Any] = {"__init__": lambda self, ids: setattr(self, "ids", ids),
                                 "__module__": __name__}
    if layout == "slot":
        namespace["__slots__"] = ("ids",)
    name = f"_FirstRead{descriptors}{layout}"
    cls = compact_ids("ids", lazy=True)(type(name, (), namespace))
    monkeypatch.setitem(globals(), name, cls)
    data = pickle.dumps(cls(list(range(20_000))))
    for _ in range(ROUNDS // 2):
        obj = pickle.loads(data)
        assert _compact._is_held(obj, "ids")
        lists = at_once(THREADS, lambda _slot, obj=obj: obj.ids)
        assert all(got is obj.ids for got in lists), "two first readers got two lists"
        assert obj.ids == list(range(20_000)) and not _compact._is_held(obj, "ids")


def test_two_threads_feeding_one_relay(stream_twin: ModuleType) -> None:
    """Two threads feed one relay at the same time, call after call: a call that overlaps
    the other raises RuntimeError and consumes nothing, every call that goes through returns
    exactly its own whole events, usage rewritten, and the counts add up."""
    relay = stream_twin.UsageRelay(70, 8)
    # Each thread makes several calls in a row, each of a few ms: on a loaded 2-core machine
    # both threads may share one core, and there a call overlaps the other thread's only when
    # its thread is preempted inside it. One call a thread per round never was (in two CI
    # runs no two calls overlapped in 30 s): the thread that ran first finished its call in
    # its time slice. The events each end in "usage":null, so each one is read (events
    # without the key go by in one pass, 200 of them in about 30 us).
    # (with the GIL a compiled call never overlaps another: a short run checks the rest)
    if stream_twin.__name__.endswith("_c"):
        events, calls = (20_000, 8) if FREE_THREADED else (200, 1)
    else:
        events, calls = 200, 8 if FREE_THREADED else 4
    chunk = NULL_EVENT * events + b"data: " + USAGE_PAYLOAD + b"\n\n"
    relayed = NULL_EVENT * events + b"data: " + REWRITTEN_PAYLOAD + b"\n\n"
    message = str(in_use("UsageRelay"))
    outcomes: list[str] = []  # list.append is atomic

    def feed(_slot: int) -> None:
        for _ in range(calls):
            try:
                out = relay.feed(chunk)
            except RuntimeError as exc:
                assert str(exc) == message
                outcomes.append("refused")
            else:
                assert out == relayed
                outcomes.append("fed")

    rounds = 0
    # until two calls overlapped (a loaded machine may run the two threads one after the
    # other for a while: rounds are counted, not timed), at least ROUNDS rounds
    while rounds < ROUNDS or ("refused" not in outcomes and FREE_THREADED
                              and rounds < 25 * ROUNDS):
        at_once(2, feed)
        rounds += 1
    fed = outcomes.count("fed")
    assert fed + outcomes.count("refused") == 2 * calls * rounds
    counts = relay.counts
    assert counts.events == fed * (events + 1) and counts.rewritten == fed
    assert relay.close() == b"" and relay.pending_bytes == 0
    if FREE_THREADED:  # with the GIL a call may well never overlap another
        assert "refused" in outcomes, "no two feeds overlapped: the test did not race"
