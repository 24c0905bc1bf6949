"""The cycle collector run over what a memory test makes, not over the whole session.

A memory test collects cycles around its measured loop, so that garbage waiting for the
collector is not counted as growth. A full collection walks every object the collector
tracks: late in a suite run a worker holds some 400,000 of them (the imported modules,
hypothesis', numpy's and the other tests' data), and those collections took more than half
of test_leaks.py's and the lazy pickles' memory tests' time (241 s of 430 in one run of
tests/pickling, tests/writer, test_hostile.py and test_leaks.py). ``gc.freeze()`` moves the
objects alive before the test into the permanent generation, which collections skip; what
the test makes is collected as before (an object it makes is in a younger generation,
reachable or not on its own merits), and ``gc.unfreeze()`` hands the rest back at the end.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def own_objects_collected() -> Iterator[None]:
    """``gc.collect()`` inside the block walks only the objects made inside it."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
