"""pack_ids / unpack_ids against struct, array, numpy and pickle at 1k, 40k and 128k ids."""

from __future__ import annotations

import pickle
import struct
from array import array

import numpy as np
from _common import FAST, REFERENCE, Target, add, id_sets, make_runner

from tokcore.ids import _pack_c, _pack_py

# Goals are the level reached (a ratchet; docs/contributing/benchmarks.md): 0.7 times the
# lower ratio of two default 'make bench' runs on the 2-core development machine (their
# ratios differed by up to 40 %), rounded down, never below the goal before.
TARGETS = [
    Target("pack 40k uniform", "struct.pack", 9.5),
    Target("pack 40k uniform", "array('i', ids).tobytes()", 12),
    Target("pack 40k zipf", "struct.pack", 13),
    Target("pack 40k zipf", "array('i', ids).tobytes()", 15),
    Target("unpack 40k zipf", "array.frombytes().tolist()", 5.4),
    Target("unpack 40k uniform", "array.frombytes().tolist()", 3.1),
]


def array_unpack(data: bytes) -> list[int]:
    values = array("i")
    values.frombytes(data)
    return values.tolist()


def main() -> None:
    runner = make_runner()
    for label, ids in id_sets():
        case = f"pack {label}"
        add(runner, case, FAST, _pack_c.pack_ids, ids)
        add(runner, case, REFERENCE, _pack_py.pack_ids, ids)
        add(runner, case, "struct.pack", lambda ids=ids: struct.pack(f"<{len(ids)}i", *ids))
        add(runner, case, "array('i', ids).tobytes()", lambda ids=ids: array("i", ids).tobytes())
        add(runner, case, "np.asarray(ids, int32).tobytes()",
            lambda ids=ids: np.asarray(ids, np.int32).tobytes())
        add(runner, case, "pickle.dumps(ids)", pickle.dumps, ids, pickle.HIGHEST_PROTOCOL)

        data = _pack_c.pack_ids(ids)
        pickled = pickle.dumps(ids, pickle.HIGHEST_PROTOCOL)
        case = f"unpack {label}"
        add(runner, case, FAST, _pack_c.unpack_ids, data)
        add(runner, case, REFERENCE, _pack_py.unpack_ids, data)
        add(runner, case, "array.frombytes().tolist()", array_unpack, data)
        add(runner, case, "np.frombuffer().tolist()",
            lambda data=data: np.frombuffer(data, "<i4").tolist())
        add(runner, case, "pickle.loads", pickle.loads, pickled)


if __name__ == "__main__":
    main()
