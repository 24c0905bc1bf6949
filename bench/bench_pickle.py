"""Pickling a request object that holds token ids (a data-parallel broadcast, an IPC hop),
with ``compact_ids`` (eager and ``lazy=True``) and without, at 1k, 40k and 128k ids, uniform
and Zipf-distributed.

Three cases for each data set:

- ``pickle+unpickle``: ``pickle.loads(pickle.dumps(request))``, nothing read. Lazily, the
  ids are packed, travel as bytes and stay bytes: no list is built.
- ``pickle+unpickle+read``: the same, then the ids attribute read once (lazily, the first
  read builds the list; eagerly, and for plain pickle, it was built by the unpickler).
- ``relay hop``: ``pickle.dumps(pickle.loads(data))``, the attribute never read: what a
  process in the middle does (an orchestrator between an API server and its workers).
  Lazily, the held bytes are sent again as they came.

Allocator state matters here, so it is set the same way for every implementation. A compact
round trip allocates and frees a few blocks of 4 or 8 bytes per id (the packed ids, the
pickle and pickle's output buffer, the unpickler's copy of the payload, the list). In a young
glibc process blocks of 128 KiB or more are mapped and unmapped at every call, and the
dynamic thresholds rise only when such a block is freed (the mmap threshold to its size, the
trim threshold to twice that), so the pages are faulted in again at every call. A process that
has once handled a longer request, as a server that has seen a 128k-token prompt has, is out of
that pattern for anything shorter. So each worker first runs every compiled implementation on
128k ids (the parent process checks every implementation on every data set), and the timed
cases run in that state, as in a long-running server. The cases ``..., fresh process`` are
timed before that, in a worker that has made nothing larger than its own 40k request (and,
for the relay hop, pickled it once per implementation), so the report shows the young-process
figures too; they are not goals. ``MALLOC_MMAP_THRESHOLD_=4194304`` together with
``MALLOC_TRIM_THRESHOLD_=40000000`` removes the pattern in any process (either alone does not).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from _common import (
    FAST,
    REFERENCE,
    SIZES,
    SIZES_RUN,
    Target,
    add,
    make_runner,
    uniform_ids,
    zipf_ids,
)

from tokcore import compact_ids
from tokcore.ids import _pack_c, _pack_py
from tokcore.pickling import _compact, _held

LAZY, LAZY_REFERENCE = f"{FAST} lazy", f"{REFERENCE} lazy"
PLAIN, NUMPY = "plain pickle", "numpy int32 attribute"
ROUND_TRIP, READ, RELAY = "pickle+unpickle", "pickle+unpickle+read", "relay hop"
FRESH = "40k uniform, fresh process"

# Goals are the level reached (a ratchet; docs/contributing/benchmarks.md). Those with no
# comment: 0.7 times the lower ratio of two default 'make bench' runs on the 2-core AVX2
# development machine (their ratios differed by up to 40 %), rounded down; those issue 52
# re-set (below the lowest of several runs by more than their spread) say what from.
TARGETS = [
    Target(f"{ROUND_TRIP} 40k uniform", PLAIN, 6.5),
    Target(f"{ROUND_TRIP} 40k zipf", PLAIN, 8.3),
    # the lazy round trip and relay hop: at least 25x and 60x (asked; measured 29.7-35.7x
    # and 82.8-106x in the two runs, where 0.7 of the lower would be below the asked). On
    # the AVX-512 machine (issue 52, best values of four runs under load 7 to 11) the uniform
    # round trip measured 25.6-26.5x (six runs): 24x, below it by more than its 3 % spread
    Target(f"{ROUND_TRIP} 40k uniform", PLAIN, 24, LAZY),
    Target(f"{ROUND_TRIP} 40k zipf", PLAIN, 25, LAZY),
    # a relay hop sends the held bytes as they came: two copies of 160 KB (the unpickler's
    # and the pickler's), whose time is where they land, 17.5-19 us in most worker processes
    # and 20-24.5 us in about a third (issue 52: six runs; abd0a0f's build hops in the same
    # 17.6 us, best of four alternated rounds). A run whose two workers both drew the slow
    # copies measured 62.6x (uniform; the others 77-81x, zipf 78-85x; the 56x of issue 52
    # was a mean): 48x, below 62.6 by more than the 30 % spread, for both
    Target(f"{RELAY} 40k uniform", PLAIN, 48, LAZY),
    Target(f"{RELAY} 40k zipf", PLAIN, 48, LAZY),
    # reading the ids after a lazy round trip costs no more than the eager round trip (10 %);
    # uniform ids (40k ints made, none of them the small ones Python keeps) measured
    # 0.89-1.09x the eager round trip in six runs, a 24 % spread: at least 0.7 of it
    Target(f"{READ} 40k uniform", FAST, 0.7, LAZY),
    Target(f"{READ} 40k zipf", FAST, 1 / 1.1, LAZY),
]
PROTOCOL = pickle.HIGHEST_PROTOCOL


# plain classes, not dataclasses: report.py loads this file without registering it as a module
class Request:
    def __init__(self, request_id: str, prompt_token_ids: Any) -> None:
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.sampling = {"temperature": 0.7, "max_tokens": 256}
        self.output_token_ids: list[int] | None = None


@compact_ids("prompt_token_ids", "output_token_ids")
class CompactRequest(Request):
    pass


@compact_ids("prompt_token_ids", "output_token_ids", lazy=True)
class LazyRequest(Request):
    pass


Timed = Callable[[Any], Any]


def on(codec: ModuleType | None, run: Timed) -> Timed:
    """``run`` with compact_ids on ``codec`` (each pyperf worker times one function)."""
    if codec is None:
        return run

    def timed(arg: Any) -> Any:
        _held._codec = codec  # the codec seam of compact_ids
        return run(arg)
    return timed


def round_trip(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj, PROTOCOL))


def round_trip_read(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj, PROTOCOL)).prompt_token_ids


def round_trip_tolist(obj: Any) -> Any:  # the hand-made lazy attribute: keep the array
    return pickle.loads(pickle.dumps(obj, PROTOCOL)).prompt_token_ids.tolist()


def relay(data: bytes) -> bytes:
    return pickle.dumps(pickle.loads(data), PROTOCOL)


class Impl:
    """One implementation: its request class, codec, and whether it is timed everywhere."""

    def __init__(self, name: str, make: Callable[[list[int]], Any], codec: ModuleType | None,
                 read: Timed = round_trip_read, everywhere: bool = True) -> None:
        self.name, self.make, self.codec, self.read = name, make, codec, read
        self.everywhere = everywhere


IMPLS = [
    Impl(FAST, lambda ids: CompactRequest("req-1", ids), _pack_c),
    Impl(LAZY, lambda ids: LazyRequest("req-1", ids), _pack_c),
    # the Python twins: only the 40k round trips
    Impl(REFERENCE, lambda ids: CompactRequest("req-1", ids), _pack_py, everywhere=False),
    Impl(LAZY_REFERENCE, lambda ids: LazyRequest("req-1", ids), _pack_py, everywhere=False),
    Impl(PLAIN, lambda ids: Request("req-1", ids), None),
    # what a user might do by hand instead: keep the ids in a numpy int32 array (40k only)
    Impl(NUMPY, lambda ids: Request("req-1", np.asarray(ids, np.int32)), None,
         read=round_trip_tolist, everywhere=False),
]
FRESH_IMPLS = (FAST, LAZY, PLAIN)


def values(ids: Any) -> list[int]:
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)


def check(ids: list[int], impls: list[Impl]) -> None:
    """Every implementation gets ``ids`` back in every case (and leaves the allocator as a
    server's would be)."""
    for impl in impls:
        obj = impl.make(ids)
        back = on(impl.codec, round_trip)(obj)
        if impl.name in (LAZY, LAZY_REFERENCE):
            assert _compact._is_held(back, "prompt_token_ids")
        assert values(back.prompt_token_ids) == ids
        assert values(on(impl.codec, impl.read)(obj)) == ids
        data = on(impl.codec, relay)(pickle.dumps(obj, PROTOCOL))
        again = pickle.loads(data)
        if impl.name in (LAZY, LAZY_REFERENCE):
            assert _compact._is_held(again, "prompt_token_ids")
        assert values(again.prompt_token_ids) == ids


def add_cases(runner: Any, label: str, ids: list[int], impls: list[Impl]) -> None:
    for case, timed in ((ROUND_TRIP, round_trip), (READ, None), (RELAY, relay)):
        timed_here = [impl for impl in impls if impl.everywhere or (
            "40k" in label and (case == ROUND_TRIP or impl.name == NUMPY))]
        # (the Python twins: the 40k round trip; numpy: every 40k case)
        runs = [(impl, impl.read if timed is None else timed) for impl in timed_here]
        # every input of a case is made before any of its implementations is timed
        args = [pickle.dumps(impl.make(ids), PROTOCOL) if run is relay else impl.make(ids)
                for impl, run in runs]
        for (impl, run), arg in zip(runs, args):
            add(runner, f"{case} {label}", impl.name, on(impl.codec, run), arg)


def main() -> None:
    runner = make_runner()
    # timed before any large block has been freed in this worker: see the module's docstring
    fresh_ids = uniform_ids(SIZES["40k"])
    add_cases(runner, FRESH, fresh_ids, [i for i in IMPLS if i.name in FRESH_IMPLS])
    sets = [(f"{size} {kind}", make(SIZES[size])) for size in SIZES_RUN
            for kind, make in (("uniform", uniform_ids), ("zipf", zipf_ids))]
    big = ("128k uniform", uniform_ids(SIZES["128k"]))  # the allocator's warm-up, below
    # The parent process checks every implementation on every set; a worker (it times one
    # case) runs the compiled ones on 128k uniform ids, which puts it in the state above.
    if runner.parse_args().worker:
        check(big[1], [i for i in IMPLS if i.everywhere])
    else:
        for _, ids in sets:
            check(ids, IMPLS)
    for label, ids in sets:
        add_cases(runner, label, ids, IMPLS)


if __name__ == "__main__":
    main()
