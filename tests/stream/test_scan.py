"""The relay's byte scans (``_ssescan.h``): the vector loops (SSE2 on x86-64, NEON on aarch64)
and the portable ones against a Python oracle on short inputs, at every offset around the
16-byte blocks and on random bytes, and against each other on every input over a few bytes.
The Cython twin's ``_scan`` runs one scan of either kind on the same machine; only the
Cython twin has scans, so these tests need it. TOKCORE_TEST_QUICK=1 (the emulated aarch64
job) draws fewer examples and leaves out some oracle inputs, never the exhaustive check."""

from __future__ import annotations

import itertools
import platform
import re
from collections.abc import Callable
from types import ModuleType

import pytest
from _budget import QUICK, examples
from _cpu import cpu_has
from _twins import SWITCHES_KERNELS, twin
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcore._kernels import KERNELS

SCANS = ("next_candidate", "next_candidate_cr", "first_lflf", "last_lflf", "count_event_ends",
         "scan_events", "scan_events_cr", "nested_stop", "string_stop")
MACHINE = platform.machine().lower()
EXPECTED_KIND = {"x86_64": "sse2", "amd64": "sse2", "aarch64": "neon", "arm64": "neon"}


def oracle_candidate(data: bytes, with_cr: bool) -> int:
    found = (CANDIDATE_CR if with_cr else CANDIDATE).search(data)
    return found.start() if found else -1


CANDIDATE = re.compile(rb'"usage"|\\u00')
CANDIDATE_CR = re.compile(rb'"usage"|\\u00|\r')
# a LF that ends a line which is not empty and is followed by another LF
EVENT_END = re.compile(rb"(?<=[^\n])\n(?=\n)")

ORACLES: dict[str, Callable[[bytes], int]] = {
    "next_candidate": lambda d: oracle_candidate(d, False),
    "next_candidate_cr": lambda d: oracle_candidate(d, True),
    "first_lflf": lambda d: d.find(b"\n\n"),
    "last_lflf": lambda d: d.rfind(b"\n\n"),
    "count_event_ends": lambda d: len(EVENT_END.findall(d)),
    "scan_events": lambda d: events_number(d, False),
    "scan_events_cr": lambda d: events_number(d, True),
    "nested_stop": lambda d: stop_of(NESTED_STOP, d),
    "string_stop": lambda d: stop_of(STRING_STOP, d),
}
# the large-event scan's skips: the first of these bytes, or the input's length
NESTED_STOP = re.compile(rb'[{}\[\]"]')
STRING_STOP = re.compile(rb'["\\]')


def stop_of(stops: re.Pattern[bytes], data: bytes) -> int:
    found = stops.search(data)
    return found.start() if found else len(data)


def first_of(data: bytes, stops: bytes) -> int:
    """The first offset of one of ``stops`` in ``data``, or its length, byte by byte."""
    return next((k for k, c in enumerate(data) if c in stops), len(data))


def events_number(data: bytes, with_cr: bool) -> int:
    """tok_scan_events as _scan gives it: the candidate, else -1 - (ends << 32 | last + 1)."""
    hit = oracle_candidate(data, with_cr)
    if hit >= 0:
        return hit
    return -1 - (len(EVENT_END.findall(data)) << 32 | (data.rfind(b"\n\n") + 1))


def slow_oracles(data: bytes) -> dict[str, int]:
    """The same by their definitions, byte by byte, to check the regexes once."""
    def candidate(with_cr: bool) -> int:
        return next((k for k in range(len(data)) if data[k:].startswith((b'"usage"', b"\\u00"))
                     or (with_cr and data[k] == 13)), -1)
    pairs = [i for i in range(len(data) - 1) if data[i] == data[i + 1] == 10]
    ends = sum(1 for i in pairs if i > 0 and data[i - 1] != 10)
    last = max(pairs, default=-1)

    def events(with_cr: bool) -> int:
        hit = candidate(with_cr)
        return hit if hit >= 0 else -1 - ends * 2**32 - (last + 1)
    return {"next_candidate": candidate(False), "next_candidate_cr": candidate(True),
            "first_lflf": min(pairs, default=-1), "last_lflf": last,
            "count_event_ends": ends, "scan_events": events(False),
            "scan_events_cr": events(True), "nested_stop": first_of(data, b'{}[]"'),
            "string_stop": first_of(data, b'"\\')}


@pytest.fixture(scope="module")
def sse_c() -> ModuleType:
    module: ModuleType = twin("relay", "c")
    return module


def check(sse_c: ModuleType, data: bytes | list[bytes], scans: tuple[str, ...] = SCANS) -> None:
    """Each scan on the kernel in use (None: as the relay calls it) and on every other kernel
    (the one in use is not run twice: test_use_kernel holds that the dispatch picks it),
    against the oracles; on one input or a list of them, a scan at a time (the scans called
    by map, in C: the emulated aarch64 job runs every Python step about 100 times slower)."""
    inputs = [data] if isinstance(data, bytes) else data
    kernels = [None, *sorted({"scalar", *sse_c._kernels()} - {sse_c._kernel()})]
    for name in scans:
        expected = list(map(ORACLES[name], inputs))
        for kernel in kernels:
            got = list(map(sse_c._scan, itertools.repeat(name), inputs, itertools.repeat(kernel)))
            if got != expected:
                k = next(k for k in range(len(inputs)) if got[k] != expected[k])
                raise AssertionError((name, kernel, inputs[k], got[k], expected[k]))


def test_kind(sse_c: ModuleType) -> None:
    """The build uses the vector loops its CPU family has: a build that lost them (a wrong
    define, a compiler that does not target them) fails here instead of going slow."""
    assert sse_c._SCANS == SCANS
    kernels = sse_c._kernels()
    assert kernels[0] == EXPECTED_KIND.get(MACHINE, kernels[0])
    assert kernels[0] in ("sse2", "neon", "scalar") and set(kernels) <= set(KERNELS)
    assert sse_c._kernel() == kernels[-1]  # the best
    # the 32-byte loop of the forwarded reads runs wherever the CPU has AVX2
    has_avx2 = cpu_has("avx2")
    if has_avx2 is not None:
        assert kernels[1:] == (("avx2",) if kernels[0] == "sse2" and has_avx2 else ())


@SWITCHES_KERNELS
def test_use_kernel(sse_c: ModuleType) -> None:
    best = sse_c._kernel()
    try:
        for name in sse_c._kernels():
            assert sse_c._use_kernel(name) == best
            assert sse_c._kernel() == name
            data = b"data: {}\n\n" * 9 + b'data: {"usage"'
            assert sse_c._scan("scan_events", data) == ORACLES["scan_events"](data)
            sse_c._use_kernel(best)
    finally:
        sse_c._use_kernel(best)
    with pytest.raises(ValueError, match="no kernel 'AVX2' here .not a kernel name."):
        sse_c._use_kernel("AVX2")
    with pytest.raises(ValueError, match="no kernel 'avx512' here: "):
        sse_c._scan("first_lflf", b"", "avx512")


def test_unknown_scan(sse_c: ModuleType) -> None:
    with pytest.raises(ValueError):
        sse_c._scan("memmem", b"")


@pytest.mark.draw
def test_oracles() -> None:
    for n in range(5 if QUICK else 6):
        for chars in itertools.product(b'\n\r"\\ux', repeat=n):
            data = bytes(chars)
            assert {name: oracle(data) for name, oracle in ORACLES.items()} == slow_oracles(data)


@pytest.mark.draw
def test_every_short_input(sse_c: ModuleType) -> None:
    """Every input of up to 5 bytes over the bytes the scans look at: both kinds of loops
    against the oracles."""
    check(sse_c, [bytes(chars) for n in range(5 if QUICK else 6)
                  for chars in itertools.product(b'\n\r"\\ux', repeat=n)])


# (alphabet, longest input): every input up to that length, vector loops against portable
EXHAUSTIVE = [
    (b"\nx", 20),  # one 16-byte block, its look-behind and look-ahead, and the tails
    (b'\n\r"\\ux', 7),  # every byte a scan looks at
    (b'"\\ux', 10),  # false starts of the usage key in every lane
    (b"\n\rx", 12),
]


@pytest.mark.parametrize(("alphabet", "longest"), EXHAUSTIVE)
def test_vector_loops_agree_on_every_input(sse_c: ModuleType, alphabet: bytes,
                                           longest: int) -> None:
    """The vector loops return what the portable ones do on every input over a few bytes
    (about 4 million inputs in all, enumerated in C)."""
    for length in range(longest + 1):
        assert sse_c._scan_agree(alphabet, length) is None, (alphabet, length)


# (alphabet, window, fillers): the window at every offset of inputs of these lengths, which
# end in each part of the vector loops (the 32-byte steps, the 16-byte one, the last block,
# scan_events' 64-byte steps: one, two and the LF carried between them)
WINDOWS = [(b"\nx", 8, (b"x", b"\n")), (b'"\\u\rx', 4, (b"x",))]
TOTALS = (49, 64, 81, 95, 130)


@pytest.mark.parametrize(("alphabet", "window", "fillers"), WINDOWS)
def test_vector_loops_agree_in_every_window(sse_c: ModuleType, alphabet: bytes, window: int,
                                            fillers: tuple[bytes, ...]) -> None:
    """Every pattern of a few bytes in every lane of longer inputs, vector loops against
    portable (about 400,000 inputs, enumerated in C)."""
    for total in TOTALS:
        for filler in fillers:
            for at in range(total - window + 1):
                before, after = filler * at, filler * (total - window - at)
                assert sse_c._scan_agree(alphabet, window, before, after) is None, (total, at)


def test_scan_agree_arguments(sse_c: ModuleType) -> None:
    for alphabet, length in ((b"", 3), (b"x", 65), (b"x", -1), (bytes(range(16)), 7)):
        with pytest.raises(ValueError):
            sse_c._scan_agree(alphabet, length)
    assert sse_c._scan_agree(b"x", 0) is None
    assert sse_c._scan_agree(b"x", 1, b"\n") is None


NEEDLES = [b'"usage"', b"\\u00", b"\r", b"\n\n", b"\n\n\n", b"x\n\n", b'"usag', b"\\u0",
           b'"', b"\\", b"\n", b'"usage"\r', b"\\u00e9", b"[", b"]", b"{", b"}", b"\"]"]
FILLERS = [b"x", b"\n", b'"u', b"\\u", b"9,", b"\xdb\xfd"]  # the last two: numbers, brackets | 0x80


@pytest.mark.draw
def test_every_offset(sse_c: ModuleType) -> None:
    """Each needle at every offset of inputs of every length up to 50 (three blocks and the
    tails), in fillers that make false starts in every lane."""
    for filler in FILLERS[:2] + FILLERS[4:] if QUICK else FILLERS:
        check(sse_c, [(filler * n)[:k] + needle + (filler * n)[k + len(needle):n]
                      for n in range(51) for needle in NEEDLES
                      for k in range(n - len(needle) + 1)])


def test_two_needles_every_pair_of_offsets(sse_c: ModuleType) -> None:
    """Two needles: the first hit and the last pair are told apart wherever both fall."""
    n = 40
    inputs = []
    for first, second in ((b"\n\n", b"\n\n"), (b'"usage"', b"\r"), (b"\\u00", b'"usage"')):
        for i in range(n - len(first) + 1):
            for j in range(i + len(first), n - len(second) + 1):
                data = bytearray(b"x" * n)
                data[i:i + len(first)] = first
                data[j:j + len(second)] = second
                inputs.append(bytes(data))
    check(sse_c, inputs)


def test_many_events(sse_c: ModuleType) -> None:
    """Counts past NEON's 255-block flush of its per-lane counters."""
    for event in (b"data: x\n\n", b"\n\n", b"a\n\n\n", b"ab\n\n" * 4):
        for repeat in (255 * 16 // len(event), 9000):
            data = event * repeat
            for extra in (b"", b"\n", b"x\n\n"):
                check(sse_c, data + extra, ("count_event_ends", "last_lflf", "first_lflf",
                                            "scan_events", "scan_events_cr"))


@settings(max_examples=examples(400), deadline=None)
@given(data=st.lists(st.sampled_from([b"\n", b"\r", b'"', b"\\", b"u", b"x", b'"usage"',
                                      b"\\u00", b"\n\n", b"\x00", b"\xff"]),
                     max_size=120).map(b"".join))
def test_random(data: bytes) -> None:
    check(twin("relay", "c"), data)
