"""Memory does not grow: every public function, on good input and on each error path.

Each case calls one function thousands of times after a warm-up, and measures the growth of
three things: the Python heap (tracemalloc: every object the C twin creates goes through
it), the C heap (``malloc`` blocks in use: buffers the C code takes with ``malloc`` or
``PyMem_RawMalloc``, such as the base64 exact path's output, which tracemalloc never sees),
and the process's resident memory (RSS: anything else, coarsely). A leak of one small
object or one small malloc block per call would add well over the thresholds. The measured
deltas are printed at the end of the module and written to build/leak-deltas.txt.

The C heap figure is glibc's ``mallinfo2()`` (``uordblks + hblkhd``: bytes in use in the
arenas and in mmapped blocks). Under the sanitizers (TOKCORE_SANITIZE=1) ASan replaces
malloc and its ``mallinfo2`` reads all zeros, so the figure is ASan's own count of bytes in
use (``__sanitizer_get_current_allocated_bytes``, freed blocks in quarantine not counted;
with PYTHONMALLOC=malloc it includes Python's objects). Without either (not glibc, or glibc
older than 2.33) the C heap tests skip and say so. ASan's quarantine holds freed memory on
purpose, so the RSS figure is recorded there but not asserted; the two heaps still are.
"""

from __future__ import annotations

import array
import ctypes
import gc
import importlib
import itertools
import json
import os
import pickle
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from _heap import own_objects_collected
from _index_objects import Resizer
from _twins import KINDS, report, twin

from tokcore import compact_ids

pytestmark = pytest.mark.memory

CALLS = 6_000                  # per case; ~65 cases a twin: ~400k calls a twin in all
WARM_UP = 600
HEAP_LIMIT = 64 * 1024         # bytes; one leaked int a call would be 6_000 * 28 = 168 KB
C_HEAP_LIMIT = 128 * 1024      # bytes; one leaked 24-byte malloc a call: 6_000 * 32 = 192 KB
RSS_LIMIT = 1024 * 1024        # bytes; one leaked 64-id result a call would be 1.6 MB
SANITIZED = os.environ.get("TOKCORE_SANITIZE", "") not in ("", "0")

Case = tuple[str, Callable[[ModuleType], Any], "type[BaseException] | None"]


def rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None  # not Linux: the heap figure still counts


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 and later): every field a ``size_t``."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def c_heap_probe() -> tuple[Callable[[], int] | None, str]:
    """A function giving the bytes of malloc blocks in use, and how it reads them (or None
    and why there is none here)."""
    try:
        process = ctypes.CDLL(None)
    except (OSError, TypeError):  # TypeError: no CDLL(None) on Windows
        return None, "no handle on the process's C library"
    asan = getattr(process, "__sanitizer_get_current_allocated_bytes", None)
    if asan is not None:  # ASan (or another sanitizer allocator) is malloc here
        asan.restype, asan.argtypes = ctypes.c_size_t, []
        return asan, "sanitizer allocator: __sanitizer_get_current_allocated_bytes()"
    if SANITIZED:
        return None, ("TOKCORE_SANITIZE=1 but no sanitizer allocator count: mallinfo2 reads "
                      "zeros under ASan")
    mallinfo2 = getattr(process, "mallinfo2", None)
    if mallinfo2 is None:
        return None, "the C library has no mallinfo2 (not glibc, or glibc older than 2.33)"
    mallinfo2.restype, mallinfo2.argtypes = MallInfo2, []

    def in_use() -> int:
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)

    return in_use, "glibc mallinfo2(): uordblks + hblkhd"


C_HEAP, C_HEAP_HOW = c_heap_probe()


def measure(call: Callable[[], Any], error: type[BaseException] | None,
            calls: int = CALLS) -> tuple[int, int | None, int | None]:
    """(Python heap growth, RSS growth, C heap growth) in bytes over ``calls`` calls."""
    def loop(n: int) -> None:
        for _ in range(n):
            try:
                call()
            except Exception as exc:
                if error is None or not isinstance(exc, error):
                    raise

    with own_objects_collected():  # the collections walk this test's objects alone
        loop(WARM_UP)  # caches, free lists, the id-object table fill here
        gc.collect()
        # read outside tracemalloc's run: its trace of every live block is itself malloc'ed
        # (under ASan with PYTHONMALLOC=malloc that alone is more than the limit); what
        # starting and stopping it leaves behind is a few KiB
        c_before = None if C_HEAP is None else C_HEAP()
        tracemalloc.start()
        try:
            # a second warm-up, traced: tracemalloc counts only blocks taken after its start,
            # so a bounded store of them (a free list, which an untraced block leaves and a
            # traced one joins) fills here, not in the measured loop. Without it a pickle
            # round trip of compact_ids measured 9-15 KiB on 3.11 and 11-68 KiB on a
            # free-threaded 3.13 whatever the number of calls; with it, under 6 and 1 KiB.
            loop(WARM_UP)
            gc.collect()
            rss_before = rss_bytes()
            heap_before = tracemalloc.get_traced_memory()[0]
            loop(calls)
            gc.collect()
            heap_after = tracemalloc.get_traced_memory()[0]
            rss_after = rss_bytes()
        finally:
            tracemalloc.stop()
    c_after = None if C_HEAP is None else C_HEAP()
    rss = None if rss_before is None or rss_after is None else rss_after - rss_before
    c_heap = None if c_before is None or c_after is None else c_after - c_before
    return heap_after - heap_before, rss, c_heap


RECORDED: list[str] = []  # every case's figures, for the whole session


@pytest.fixture(scope="module")
def record(pytestconfig: pytest.Config) -> Iterator[list[str]]:
    yield RECORDED
    report(pytestconfig, "leak-deltas.txt", f"leak deltas over {CALLS} calls a case "
           f"(heap = tracemalloc, malloc = C heap by {C_HEAP_HOW}, rss = resident)", RECORDED)


def check(record: list[str], twin: ModuleType, label: str, call: Callable[[], Any],
          error: type[BaseException] | None) -> None:
    try:  # the case does what it says once, outside the measured loop
        call()
    except Exception as exc:
        assert error is not None and isinstance(exc, error), f"{label}: raised {exc!r}"
    else:
        assert error is None, f"{label}: should raise {error.__name__}"
    heap, rss, c_heap = measure(call, error)
    kind = twin.__name__.rsplit("_", 1)[-1] if twin.__name__ != "tokcore" else "live"
    rss_text = "n/a" if rss is None else f"{rss / 1024:+.0f} KiB"
    c_text = "n/a" if c_heap is None else f"{c_heap / 1024:+.1f} KiB"
    record.append(f"  {kind:>4} {label:<44} heap {heap / 1024:+8.1f} KiB   malloc {c_text:>11}"
                  f"   rss {rss_text}")
    assert heap < HEAP_LIMIT, f"{label}: the heap grew by {heap} bytes over {CALLS} calls"
    if c_heap is not None:
        assert c_heap < C_HEAP_LIMIT, \
            f"{label}: malloc blocks in use grew by {c_heap} bytes over {CALLS} calls"
    if rss is not None and not SANITIZED:
        assert rss < RSS_LIMIT, f"{label}: RSS grew by {rss} bytes over {CALLS} calls"


# --- the detector detects ------------------------------------------------------------------

def test_measure_sees_a_leak() -> None:
    kept: list[bytes] = []
    heap, _, _ = measure(lambda: kept.append(bytes(30)), None)  # one small object a call
    assert heap > HEAP_LIMIT


def test_c_heap_probe_sees_a_malloc_leak_tracemalloc_does_not() -> None:
    """24 bytes from malloc a call, never freed (their addresses kept in a C array, so no
    Python object grows): the C heap figure passes its limit, the traced heap stays flat."""
    if C_HEAP is None:
        pytest.skip(f"no C heap probe: {C_HEAP_HOW}")
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    kept = (ctypes.c_void_p * (2 * WARM_UP + CALLS))()  # measure warms up twice
    slot = itertools.count()
    try:
        heap, _, c_heap = measure(lambda: kept.__setitem__(next(slot), libc.malloc(24)), None)
    finally:
        for address in kept:
            libc.free(address)
    assert c_heap is not None and c_heap > C_HEAP_LIMIT, (c_heap, C_HEAP_HOW)
    assert heap < HEAP_LIMIT, heap


def test_c_heap_probe_is_there_on_glibc_and_under_asan() -> None:
    """The probe is skipped only where it cannot work; under ASan it reads ASan's count."""
    if SANITIZED:
        assert C_HEAP is not None and "sanitizer" in C_HEAP_HOW, C_HEAP_HOW
    else:
        try:
            glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
        except (AttributeError, ValueError, OSError):
            glibc = ""
        if glibc.startswith("glibc ") and \
                tuple(map(int, glibc.split()[1].split(".")[:2])) >= (2, 33):
            assert C_HEAP is not None, C_HEAP_HOW


# --- token ids -----------------------------------------------------------------------------

IDS = list(range(100_000, 100_064))  # above the id cache: unpack_ids makes new ints
SMALL_IDS = list(range(64))


class Raiser:
    def __index__(self) -> int:
        raise KeyError("boom")


def resized() -> list[Any]:
    victim: list[Any] = [1, 2, 3]
    victim.append(Resizer(victim, grow=False))
    return victim


IDS_CASES: list[Case] = [
    ("pack_ids(list)", lambda t: t.pack_ids(IDS), None),
    ("pack_ids(tuple)", lambda t: t.pack_ids(tuple(IDS)), None),
    ("pack_ids(generator)", lambda t: t.pack_ids(i for i in SMALL_IDS), None),
    ("pack_ids(array q)", lambda t: t.pack_ids(array.array("q", IDS)), None),
    ("pack_ids(numpy int64[::-1])", lambda t: t.pack_ids(np.array(IDS)[::-1]), None),
    ("pack_ids(numpy >i4)", lambda t: t.pack_ids(np.array(IDS, ">i4")), None),
    ("pack_ids(list) int32 overflow", lambda t: t.pack_ids([1, 2, 2**31]), OverflowError),
    ("pack_ids(list) huge int", lambda t: t.pack_ids([1, 10**40]), OverflowError),
    ("pack_ids(numpy) overflow", lambda t: t.pack_ids(np.array([1, 2**40])), OverflowError),
    ("pack_ids(list) float item", lambda t: t.pack_ids([1, 2.5]), TypeError),
    ("pack_ids(str)", lambda t: t.pack_ids("abc"), TypeError),
    ("pack_ids(float array)", lambda t: t.pack_ids(np.zeros(4)), TypeError),
    ("pack_ids(datetime64 array)", lambda t: t.pack_ids(np.zeros(4, "M8[s]")), TypeError),
    ("unpack_ids(timedelta64 array)", lambda t: t.unpack_ids(np.zeros(4, "m8[s]")), TypeError),
    ("pack_ids(2-D array)", lambda t: t.pack_ids(np.zeros((2, 2), np.int32)), ValueError),
    ("pack_ids __index__ raises", lambda t: t.pack_ids([1, Raiser()]), KeyError),
    ("pack_ids list resized", lambda t: t.pack_ids(resized()), RuntimeError),
    ("unpack_ids(bytes)", lambda t: t.unpack_ids(PACKED), None),
    ("unpack_ids(small ids, cached)", lambda t: t.unpack_ids(PACKED_SMALL), None),
    ("unpack_ids(bytearray)", lambda t: t.unpack_ids(bytearray(PACKED)), None),
    ("unpack_ids(memoryview)", lambda t: t.unpack_ids(memoryview(PACKED)), None),
    ("unpack_ids bad length", lambda t: t.unpack_ids(PACKED[:-1]), ValueError),
    ("unpack_ids(str)", lambda t: t.unpack_ids("abcd"), TypeError),
    ("unpack_ids strided", lambda t: t.unpack_ids(memoryview(PACKED)[::2]), TypeError),
]
PACKED = b"".join(i.to_bytes(4, "little", signed=True) for i in IDS)
PACKED_SMALL = b"".join(i.to_bytes(4, "little", signed=True) for i in SMALL_IDS)


@pytest.mark.parametrize("label, call, error", IDS_CASES, ids=[c[0] for c in IDS_CASES])
def test_ids_memory_is_flat(record: list[str], pack_twin: ModuleType, label: str,
                            call: Callable[[ModuleType], Any],
                            error: type[BaseException] | None) -> None:
    check(record, pack_twin, label, lambda: call(pack_twin), error)


def test_rss_probe_works_here() -> None:
    if sys.platform.startswith("linux"):
        assert rss_bytes() is not None


# --- SSE -----------------------------------------------------------------------------------

CHUNK_EVENT = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,'
               b'"delta":{"content":" usage"},"finish_reason":null}]}\n\n')
USAGE_JSON = (b'{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,'
              b'"total_tokens":8,"prompt_tokens_details":null}}')
STREAM = CHUNK_EVENT * 3 + b"data: " + USAGE_JSON + b"\r\n\r\ndata: [DONE]\n\n"
DEEP = b'{"a":' + b"[" * 20 + b"]" * 20 + b',"usage":{"completion_tokens":1}}'


class Relayer:
    """One long-lived relay (or decoder) fed the same stream in odd-sized reads, call by call:
    held bytes are released as events complete, so memory must stay flat across calls."""

    def __init__(self, sse: ModuleType, decoder: bool = False, limit: int = 1 << 20) -> None:
        self.obj = (sse.EventDecoder(max_event_bytes=limit) if decoder
                    else sse.UsageRelay(40, 32, max_event_bytes=limit))
        self.pieces = [STREAM[i:i + 37] for i in range(0, len(STREAM), 37)]
        self.next = 0

    def __call__(self) -> Any:
        piece = self.pieces[self.next % len(self.pieces)]
        self.next += 1
        return self.obj.feed(piece)


def relay_once(sse: ModuleType) -> bytes:
    relay = sse.UsageRelay(40, 32)
    return relay.feed(STREAM[:50]) + relay.feed(STREAM[50:]) + relay.close()


SSE_CASES: list[tuple[str, Callable[[ModuleType], Callable[[], Any]], Any]] = [
    ("find_usage(chunk event)", lambda m: lambda: m.find_usage(CHUNK_EVENT[6:-2]), None),
    ("find_usage(usage)", lambda m: lambda: m.find_usage(USAGE_JSON), None),
    ("find_usage(20 nested)", lambda m: lambda: m.find_usage(DEEP), None),
    ("find_usage(bytearray, invalid UTF-8)",
     lambda m: lambda: m.find_usage(bytearray(b'{"\xff":1,"usage":{}}')), None),
    ("find_usage(str)", lambda m: lambda: m.find_usage("{}"), TypeError),
    ("rewrite_usage(usage)", lambda m: lambda: m.rewrite_usage(USAGE_JSON, 40, 32), None),
    ("rewrite_usage(no usage)", lambda m: lambda: m.rewrite_usage(CHUNK_EVENT, 40), None),
    ("rewrite_usage(memoryview)",
     lambda m: lambda: m.rewrite_usage(memoryview(USAGE_JSON), 40), None),
    ("rewrite_usage(20 nested)", lambda m: lambda: m.rewrite_usage(DEEP, 4, 1), None),
    ("rewrite_usage count < 0", lambda m: lambda: m.rewrite_usage(USAGE_JSON, -1), ValueError),
    ("rewrite_usage count str", lambda m: lambda: m.rewrite_usage(USAGE_JSON, "1"), TypeError),
    ("UsageRelay: new, 2 feeds, close", lambda m: lambda: relay_once(m), None),
    ("UsageRelay: one relay, 37-byte reads", lambda m: Relayer(m), None),
    ("UsageRelay: one relay, events > limit", lambda m: Relayer(m, limit=40), None),
    ("UsageRelay.feed(str)", lambda m: lambda: m.UsageRelay(1).feed("x"), TypeError),
    ("UsageRelay(-1)", lambda m: lambda: m.UsageRelay(-1), ValueError),
    ("EventDecoder: one decoder, 37-byte reads", lambda m: Relayer(m, decoder=True), None),
    ("EventDecoder: new, feed, close",
     lambda m: lambda: (lambda d: d.feed(STREAM) + d.close())(m.EventDecoder()), None),
    ("iter_events", lambda m: lambda: list(m.iter_events([STREAM[:9], STREAM[9:]])), None),
    ("EventDecoder.feed(str)", lambda m: lambda: m.EventDecoder().feed("x"), TypeError),
    ("EventDecoder: one decoder, events > limit",  # every feed drops four, keeps one
     lambda m: (lambda d: lambda: d.feed(STREAM))(m.EventDecoder(max_event_bytes=120)),
     ValueError),
    ("EventDecoder(max_event_bytes=0)",
     lambda m: lambda: m.EventDecoder(max_event_bytes=0), ValueError),
    ("iter_events, an event > limit",
     lambda m: lambda: list(m.iter_events([STREAM[:9], STREAM[9:]], max_event_bytes=100)),
     ValueError),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("label, make, error", SSE_CASES, ids=[c[0] for c in SSE_CASES])
def test_sse_memory_is_flat(record: list[str], kind: str, label: str,
                            make: Callable[[ModuleType], Callable[[], Any]], error: Any) -> None:
    sse = twin("stream", kind)
    check(record, sse, label, make(sse), error)


# --- base64 and the fused pair -------------------------------------------------------------

RAW = bytes(range(256)) * 2
B64 = __import__("base64").b64encode(RAW)
# the same in the url-safe alphabet: 3.15 warns about "+" and "/" in url-safe or altchars data
B64_URLSAFE = B64.translate(bytes.maketrans(b"+/", b"-_"))
IDS_B64 = __import__("base64").b64encode(PACKED).decode()

B64_CASES: list[tuple[str, Callable[[ModuleType], Any], Any]] = [
    ("b64encode(bytes)", lambda m: m.b64encode(RAW), None),
    ("b64encode(altchars)", lambda m: m.b64encode(RAW, b"-_"), None),
    ("urlsafe_b64encode(memoryview)", lambda m: m.urlsafe_b64encode(memoryview(RAW)), None),
    ("standard_b64encode(bytearray)", lambda m: m.standard_b64encode(bytearray(RAW)), None),
    ("b64decode(bytes)", lambda m: m.b64decode(B64), None),
    ("b64decode(str, validate)", lambda m: m.b64decode(B64.decode(), validate=True), None),
    ("b64decode(altchars)", lambda m: m.b64decode(B64_URLSAFE, b"-_"), None),
    ("urlsafe_b64decode(str)", lambda m: m.urlsafe_b64decode(B64_URLSAFE.decode()), None),
    ("standard_b64decode(garbage)", lambda m: m.standard_b64decode(b"*" + B64), None),
    ("b64decode bad padding", lambda m: m.b64decode(B64[:-1]), ValueError),
    ("b64decode validate garbage", lambda m: m.b64decode(B64 + b"*", validate=True), ValueError),
    ("b64decode(non-ASCII str)", lambda m: m.b64decode("é"), ValueError),
    ("b64encode(str)", lambda m: m.b64encode("abc"), TypeError),
    ("ids_to_b64(list)", lambda m: m.ids_to_b64(IDS), None),
    ("ids_to_b64(numpy)", lambda m: m.ids_to_b64(np.array(IDS)[::-1]), None),
    ("ids_to_b64 overflow", lambda m: m.ids_to_b64([1, 2**31]), OverflowError),
    ("ids_to_b64 float item", lambda m: m.ids_to_b64([1, 2.5]), TypeError),
    ("b64_to_ids(str)", lambda m: m.b64_to_ids(IDS_B64), None),
    ("b64_to_ids(bytes, validate)", lambda m: m.b64_to_ids(IDS_B64.encode(), validate=True),
     None),
    ("b64_to_ids bad length", lambda m: m.b64_to_ids("AAAAAAA="), ValueError),
    ("b64_to_ids garbage validate", lambda m: m.b64_to_ids("AA*A", validate=True), ValueError),
    ("b64_to_ids(None)", lambda m: m.b64_to_ids(None), TypeError),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("label, call, error", B64_CASES, ids=[c[0] for c in B64_CASES])
def test_b64_memory_is_flat(record: list[str], kind: str, label: str,
                            call: Callable[[ModuleType], Any], error: Any) -> None:
    b64 = twin("b64", kind)
    check(record, b64, label, lambda: call(b64), error)


WIRE_JSON = json.dumps(IDS).encode()
WIRE_MSGPACK = bytes([0xDC, 0, len(IDS)]) + b"".join(b"\xce" + v.to_bytes(4, "big") for v in IDS)
WIRE_CASES = [
    ("ids_to_json(list)", lambda m: m.ids_to_json(IDS), None),
    ("ids_to_msgpack(numpy)", lambda m: m.ids_to_msgpack(np.array(IDS)[::-1]), None),
    ("json_to_ids(bytes)", lambda m: m.json_to_ids(WIRE_JSON), None),
    ("json_to_ids(memoryview)", lambda m: m.json_to_ids(memoryview(WIRE_JSON)[1:-1]), ValueError),
    ("json_to_ids overflow", lambda m: m.json_to_ids(b"[1,99999999999]"), OverflowError),
    ("json_to_ids(None)", lambda m: m.json_to_ids(None), TypeError),
    ("msgpack_to_ids(bytes)", lambda m: m.msgpack_to_ids(WIRE_MSGPACK), None),
    ("msgpack_to_ids cut", lambda m: m.msgpack_to_ids(WIRE_MSGPACK[:-1]), ValueError),
    ("convert json->msgpack", lambda m: m.convert_ids(WIRE_JSON, "json", "msgpack"), None),
    ("convert b64 garbage", lambda m: m.convert_ids("AA*A", "b64", "json"), ValueError),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("label, call, error", WIRE_CASES, ids=[c[0] for c in WIRE_CASES])
def test_wire_memory_is_flat(record: list[str], kind: str, label: str,
                             call: Callable[[ModuleType], Any], error: Any) -> None:
    wire = twin("wire", kind)
    check(record, wire, label, lambda: call(wire), error)


# --- the stream helpers (on the live backend) ----------------------------------------------

async def _chunks() -> Any:
    for piece in (STREAM[:50], STREAM[50:]):
        yield piece


async def _arelay() -> bytes:
    from tokcore import arelay_usage

    return b"".join([out async for out in arelay_usage(_chunks(), 40, 32)])


def test_stream_helpers_memory_is_flat(record: list[str]) -> None:
    import asyncio

    import tokcore

    expected = relay_once(importlib.import_module(tokcore.UsageRelay.__module__))
    loop = asyncio.new_event_loop()
    try:
        for label, call in [
            ("relay_usage", lambda: b"".join(tokcore.relay_usage([STREAM[:50], STREAM[50:]],
                                                                 40, 32))),
            ("arelay_usage", lambda: loop.run_until_complete(_arelay())),
        ]:
            assert call() == expected
            check(record, tokcore, label, call, None)
    finally:
        loop.close()


# --- compact_ids pickling ------------------------------------------------------------------

@compact_ids("prompt_token_ids", "output_ids")
class Request:
    def __init__(self, prompt: Any, output: Any) -> None:
        self.prompt_token_ids, self.output_ids, self.rid = prompt, output, "r-1"


@pytest.mark.parametrize("label, request_", [
    ("compact_ids: list + tuple", Request(IDS, tuple(SMALL_IDS))),
    ("compact_ids: value out of int32 (as is)", Request([1, 2**40], None)),
    ("compact_ids: numpy (as is)", Request(np.array(IDS), [1.5])),
], ids=lambda v: v if isinstance(v, str) else "")
def test_compact_ids_memory_is_flat(record: list[str], label: str, request_: Request) -> None:
    import tokcore

    def round_trip() -> Any:
        return pickle.loads(pickle.dumps(request_, protocol=5))

    back = round_trip()
    assert back.rid == "r-1" and back.prompt_token_ids is not request_.prompt_token_ids
    check(record, tokcore, label, round_trip, None)
