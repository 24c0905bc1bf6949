"""pickle.dumps + pickle.loads of a request object holding token ids, with and without
compact_ids, at 1k, 40k and 128k ids (a data-parallel broadcast or an IPC hop).

Allocator state matters here, so it is set the same way for every implementation. A compact
round trip allocates and frees three large blocks: the pickle and the bytes object the
unpickler makes of the payload (4 bytes per id each), and the new list (8 bytes per id). They
add up to twice the list, and glibc's dynamic trim threshold is twice the largest block it
has freed from mmap, which in a young process is that same list. Such a process gives the
memory back to the system on every round trip and faults it in again (about 125 page faults
for 40k ids, 40 % of the round trip on this VM); a process that has once handled a longer
request, as a server that has seen a 128k-token prompt has, never does for 40k. So each
worker first checks every implementation on every data set, 128k included, and the timed
cases run in that state, as in a long-running server. One case, "40k uniform, fresh process",
is timed before those checks, so the report shows the young-process figure too; it is not a
goal. ``MALLOC_TRIM_THRESHOLD_=40000000`` removes the pattern in any process.
"""

from __future__ import annotations

import pickle
from types import ModuleType
from typing import Any

import numpy as np
from _common import FAST, REFERENCE, SIZES, Target, add, make_runner, uniform_ids, zipf_ids

from tokcore import _ids_c, _ids_py, compact_ids, pickling

TARGETS = [
    Target("pickle+unpickle 40k uniform", "plain pickle", 4),
    Target("pickle+unpickle 40k zipf", "plain pickle", 4),
]
PROTOCOL = pickle.HIGHEST_PROTOCOL
FRESH_CASE = "pickle+unpickle 40k uniform, fresh process"


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


def round_trip(obj: object) -> object:
    return pickle.loads(pickle.dumps(obj, PROTOCOL))


def round_trip_on(codec: ModuleType) -> Any:
    def run(obj: object) -> object:
        pickling._codec = codec  # each pyperf worker times one function: set its twin
        return pickle.loads(pickle.dumps(obj, PROTOCOL))
    return run


def check(ids: list[int]) -> None:
    """Every implementation round-trips ``ids`` (and leaves the allocator as a server's)."""
    for codec in (_ids_c, _ids_py):
        assert round_trip_on(codec)(CompactRequest("req-1", ids)).prompt_token_ids == ids
    assert round_trip(Request("req-1", ids)).prompt_token_ids == ids
    assert round_trip(Request("req-1", np.asarray(ids, np.int32))).prompt_token_ids.tolist() == ids


def main() -> None:
    runner = make_runner()
    sets = [("1k uniform", uniform_ids(SIZES["1k"])), ("40k uniform", uniform_ids(SIZES["40k"])),
            ("40k zipf", zipf_ids(SIZES["40k"])), ("128k uniform", uniform_ids(SIZES["128k"]))]
    # timed before any large round trip has run in this worker: see the module's docstring
    fresh_ids = dict(sets)["40k uniform"]
    add(runner, FRESH_CASE, FAST, round_trip_on(_ids_c), CompactRequest("req-1", fresh_ids))
    add(runner, FRESH_CASE, "plain pickle", round_trip, Request("req-1", fresh_ids))
    for _, ids in sets:
        check(ids)
    for label, ids in sets:
        case = f"pickle+unpickle {label}"
        compact = CompactRequest("req-1", ids)
        add(runner, case, FAST, round_trip_on(_ids_c), compact)
        add(runner, case, REFERENCE, round_trip_on(_ids_py), compact)
        add(runner, case, "plain pickle", round_trip, Request("req-1", ids))
        # what a user might do by hand instead: keep the ids in a numpy int32 array
        add(runner, case, "numpy int32 attribute", round_trip,
            Request("req-1", np.asarray(ids, np.int32)))


if __name__ == "__main__":
    main()
