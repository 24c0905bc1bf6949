"""Shared by the pyperf scripts: realistic data, the runner, the names, the targets.

A benchmark is named ``"<case> | <impl>"``. Each case measures tokcore's twins (impls
``tokcore-c`` and ``tokcore-py``) beside the baselines a user would otherwise write, on the
same data in the same run; ``report.py`` prints how many times faster ``tokcore-c`` is.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # imported when used: bench/hotpaths.py runs without pyperf
    import pyperf

#: how bench/report.py runs a script, its ``RUNNER``: ``"pyperf"`` (the default: with pyperf,
#: its cases' means in the report's table), ``"plain"`` (run as it is, what it prints in the
#: report) or ``"own"`` (a target of its own, with its own set-up, e.g. ``make bench-vllm``
#: in vLLM's venv: not run by the report, which names the target, ``OWN_TARGET``)
RUNNERS = ("pyperf", "plain", "own")


def runner(module: Any) -> str:
    """The script's ``RUNNER`` (ValueError for a value not in ``RUNNERS``)."""
    value = getattr(module, "RUNNER", "pyperf")
    if value not in RUNNERS:
        raise ValueError(f"{module.__name__}: RUNNER {value!r} is not one of {RUNNERS}")
    return str(value)


VOCAB = 152_000  # a Qwen-2-sized vocabulary
SIZES = {"1k": 1_000, "40k": 40_000, "128k": 128_000}
ZIPF_EXPONENT = 1.1  # token frequencies in text follow Zipf's law closely
SEP = " | "
#: BENCH_FULL=1: every size and read pattern; otherwise the cases the goals name and a few
#: beside them, so that 'make bench' ends within minutes (report.py passes it to workers)
FULL = os.environ.get("BENCH_FULL", "") not in ("", "0")
SIZES_RUN = tuple(SIZES) if FULL else ("40k",)
FAST, REFERENCE = "tokcore-c", "tokcore-py"


class Target(NamedTuple):
    """A speed goal: in ``case``, ``impl`` is at least ``ratio`` times faster than ``baseline``."""

    case: str
    baseline: str
    ratio: float
    impl: str = FAST


def uniform_ids(n: int, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(VOCAB) for _ in range(n)]


def zipf_ids(n: int, seed: int = 2) -> list[int]:
    """Ids drawn by Zipf rank; frequent tokens get small ids, as in BPE vocabularies."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = rng.zipf(ZIPF_EXPONENT, size=n)
    return [int(r) - 1 for r in np.minimum(ranks, VOCAB)]


def id_sets(sizes: tuple[str, ...] = SIZES_RUN) -> Iterator[tuple[str, list[int]]]:
    """("40k uniform", ids), ("40k zipf", ids), ... for each size."""
    for label in sizes:
        yield f"{label} uniform", uniform_ids(SIZES[label])
        yield f"{label} zipf", zipf_ids(SIZES[label])


def name(case: str, impl: str) -> str:
    return f"{case}{SEP}{impl}"


#: pyperf's worker processes a case in one run of a script, and values a process
#: (make_runner); bench/report.py runs each script PASSES times, appending to one result:
#: the passes are a whole script apart, so that a burst of other work on a shared machine,
#: which lasts seconds and would fall on every worker of a case that pyperf runs one after
#: the other, does not fall on all of a case's values
PROCESSES, VALUES, PASSES = 1, 3, 2


def make_runner() -> pyperf.Runner:
    # Few processes and short values: 'make bench' ends in minutes on 2 busy cores (each
    # value is CPU time: add, below). Pass pyperf's own options (e.g. --rigorous) through
    # BENCH_ARGS for more.
    import pyperf

    return pyperf.Runner(processes=PROCESSES, values=VALUES, warmups=1, min_time=0.02)


def cpu_timed(loops: int, func: Callable[..., Any], args: tuple[Any, ...]) -> float:
    """Seconds of this thread's CPU time (user and system: page faults count) that ``loops``
    calls take. Wall time on a machine shared with other work counts the time the process
    waits for a CPU; CPU time does not, so the figures of a busy machine stay comparable."""
    calls = itertools.repeat(None, loops)
    start = time.thread_time()
    for _ in calls:
        func(*args)
    return time.thread_time() - start


def add(runner: pyperf.Runner, case: str, impl: str, func: Callable[..., Any], *args: Any) -> None:
    runner.bench_time_func(name(case, impl), cpu_timed, func, args)
