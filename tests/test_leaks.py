"""Memory does not grow: every public function, on good input and on each error path.

Each case calls one function tens of thousands of times after a warm-up, and measures the
growth of the Python heap (tracemalloc: every object the C twin creates goes through it) and
of the process's resident memory (RSS: catches raw allocations tracemalloc cannot see). A
leak of one small object per call would add well over the thresholds. The measured deltas
are printed at the end of the module and written to build/leak-deltas.txt for the record.

Under the sanitizers (TOKCORE_SANITIZE=1) ASan's quarantine holds freed memory on purpose,
so the RSS figure is recorded there but not asserted; tracemalloc still is.
"""

from __future__ import annotations

import array
import gc
import os
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tokcore._backend import NO_EXTENSIONS

CALLS = 10_000                 # per case; dozens of cases a twin: a few hundred thousand in all
WARM_UP = 1_000
HEAP_LIMIT = 64 * 1024         # bytes; one leaked int a call would be 10_000 * 28 = 280 KB
RSS_LIMIT = 2 * 1024 * 1024    # bytes; one leaked 64-id result a call would be 2.7 MB
SANITIZED = os.environ.get("TOKCORE_SANITIZE", "") not in ("", "0")
REPORT = Path(__file__).resolve().parent.parent / "build" / (
    "leak-deltas-python-only.txt" if NO_EXTENSIONS else "leak-deltas.txt")

Case = tuple[str, Callable[[ModuleType], Any], "type[BaseException] | None"]


def rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None  # not Linux: the heap figure still counts


def measure(call: Callable[[], Any], error: type[BaseException] | None,
            calls: int = CALLS) -> tuple[int, int | None]:
    """(heap growth, RSS growth) in bytes over ``calls`` calls of ``call``."""
    def loop(n: int) -> None:
        for _ in range(n):
            try:
                call()
            except Exception as exc:
                if error is None or not isinstance(exc, error):
                    raise

    loop(WARM_UP)  # caches, free lists, the id-object table fill here
    gc.collect()
    tracemalloc.start()
    try:
        rss_before = rss_bytes()
        heap_before = tracemalloc.get_traced_memory()[0]
        loop(calls)
        gc.collect()
        heap_after = tracemalloc.get_traced_memory()[0]
        rss_after = rss_bytes()
    finally:
        tracemalloc.stop()
    rss = None if rss_before is None or rss_after is None else rss_after - rss_before
    return heap_after - heap_before, rss


@pytest.fixture(scope="module")
def record(pytestconfig: pytest.Config) -> Iterator[list[str]]:
    lines: list[str] = []
    yield lines
    if not lines:
        return
    header = f"leak deltas over {CALLS} calls a case (heap = tracemalloc, rss = resident)"
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("\n".join([header, *lines]) + "\n")
    reporter = pytestconfig.pluginmanager.getplugin("terminalreporter")
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in (header, *lines):
                reporter.write_line(line)


def check(record: list[str], twin: ModuleType, label: str, call: Callable[[], Any],
          error: type[BaseException] | None) -> None:
    try:  # the case does what it says once, outside the measured loop
        call()
    except Exception as exc:
        assert error is not None and isinstance(exc, error), f"{label}: raised {exc!r}"
    else:
        assert error is None, f"{label}: should raise {error.__name__}"
    heap, rss = measure(call, error)
    kind = twin.__name__.rsplit("_", 1)[-1]
    rss_text = "n/a" if rss is None else f"{rss / 1024:+.0f} KiB"
    record.append(f"  {kind:>2} {label:<44} heap {heap / 1024:+8.1f} KiB   rss {rss_text}")
    assert heap < HEAP_LIMIT, f"{label}: the heap grew by {heap} bytes over {CALLS} calls"
    if rss is not None and not SANITIZED:
        assert rss < RSS_LIMIT, f"{label}: RSS grew by {rss} bytes over {CALLS} calls"


# --- the detector detects ------------------------------------------------------------------

def test_measure_sees_a_leak() -> None:
    kept: list[bytes] = []
    heap, _ = measure(lambda: kept.append(b"x" * 30), None)
    assert heap > HEAP_LIMIT


# --- token ids -----------------------------------------------------------------------------

IDS = list(range(100_000, 100_064))  # above the id cache: unpack_ids makes new ints
SMALL_IDS = list(range(64))


class Raiser:
    def __index__(self) -> int:
        raise KeyError("boom")


class Shrinker:
    def __init__(self, victim: list[Any]) -> None:
        self.victim = victim

    def __index__(self) -> int:
        self.victim.clear()
        return 1


def resized() -> list[Any]:
    victim: list[Any] = [1, 2, 3]
    victim.append(Shrinker(victim))
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
def test_ids_memory_is_flat(record: list[str], ids_twin: ModuleType, label: str,
                            call: Callable[[ModuleType], Any],
                            error: type[BaseException] | None) -> None:
    check(record, ids_twin, label, lambda: call(ids_twin), error)


def test_rss_probe_works_here() -> None:
    if sys.platform.startswith("linux"):
        assert rss_bytes() is not None
