"""pickle.dumps + pickle.loads of a request object holding token ids, with and without
compact_ids, at 1k, 40k and 128k ids (a data-parallel broadcast or an IPC hop).

Noise to know about: a round trip allocates and frees several blocks of 160-320 KB. With
glibc's default malloc settings the freed top of the heap is often given back to the system
and faulted in again on the next round (about 130 page faults per 40k round trip, a third of
its time); whether a pyperf worker process falls into that pattern varies, so the compact
40k uniform figure spreads widely between runs. ``MALLOC_TRIM_THRESHOLD_=40000000`` removes it
(for plain pickle too) if you want to see the steady state.
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


def main() -> None:
    runner = make_runner()
    sets = [("1k uniform", uniform_ids(SIZES["1k"])), ("40k uniform", uniform_ids(SIZES["40k"])),
            ("40k zipf", zipf_ids(SIZES["40k"])), ("128k uniform", uniform_ids(SIZES["128k"]))]
    for label, ids in sets:
        case = f"pickle+unpickle {label}"
        compact = CompactRequest("req-1", ids)
        assert round_trip_on(_ids_c)(compact).prompt_token_ids == ids
        add(runner, case, FAST, round_trip_on(_ids_c), compact)
        add(runner, case, REFERENCE, round_trip_on(_ids_py), compact)
        add(runner, case, "plain pickle", round_trip, Request("req-1", ids))
        # what a user might do by hand instead: keep the ids in a numpy int32 array
        add(runner, case, "numpy int32 attribute", round_trip,
            Request("req-1", np.asarray(ids, np.int32)))


if __name__ == "__main__":
    main()
