"""Threads: does the work scale with the threads, or serialise?

Each thread does the same units of work, a server's per-request share of tokcore: pack a 40k
id list (``pack_ids``), encode it as base64 (``ids_to_b64``) and relay a 200-event chat
stream through its own ``UsageRelay``, each thread on data it made (one list packed by
several threads at once takes turns on that list's lock, by design). 1, 2 and 4 threads run
the same total number of units; the figure is their throughput against one thread's. With
the GIL it stays near 1x (the threads take turns); on a free-threaded build with the GIL off
it should approach the number of cores (2x on 2 cores for 2 and 4 threads). Beside it, the
process's CPU time over the wall time: at most about 1 when the threads take turns, up to
the core count when they run at once. Best of several rounds, one run: ratios, not times.
Both twins. ``RUNNER = "plain"``: report.py prints what it prints; it needs no pyperf, so it
runs on a free-threaded build as it is (``python bench/bench_threads.py``).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType

from tokcore.ids import _b64_c, _b64_py, _pack_c, _pack_py
from tokcore.stream import _relay_c, _relay_py

RUNNER = "plain"
THREADS = (1, 2, 4)
UNITS = {"tokcore-c": 480, "tokcore-py": 24}  # a round (tens of ms), split between threads
ROUNDS = 5

_rng = random.Random(1)
IDS = [_rng.randrange(152_000) for _ in range(40_000)]  # uniform over _common's vocabulary
TOKEN = (b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
         b'"delta":{"content":" the"}}]}\n\n')
USAGE = (b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":200,'
         b'"total_tokens":201}}\n\ndata: [DONE]\n\n')
STREAM = [TOKEN] * 200 + [USAGE]


class Request:
    """One thread's data: its own id list and stream chunks. Objects another thread made
    are counted with atomic reference counts on a free-threaded build, so sharing one
    chunk object between threads would measure that instead."""

    def __init__(self) -> None:
        self.ids = list(IDS)
        self.stream = [bytes(bytearray(chunk)) for chunk in STREAM]


def unit(ids: ModuleType, b64: ModuleType, sse: ModuleType) -> Callable[[Request], None]:
    def work(request: Request) -> None:
        ids.pack_ids(request.ids)
        b64.ids_to_b64(request.ids)
        relay = sse.UsageRelay(40_000, 8)
        for chunk in request.stream:
            relay.feed(chunk)
        relay.close()
    return work


def wall_time(work: Callable[[Request], None], threads: int,
              units: int) -> tuple[float, float]:
    """Seconds for ``threads`` threads, released together, to do ``units`` between them,
    and the process's CPU seconds meanwhile (more than the wall time: threads ran at once)."""
    barrier = threading.Barrier(threads + 1)

    def run() -> None:
        request = Request()  # made by this thread, as a server's request data is
        barrier.wait()
        for _ in range(units // threads):
            work(request)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"{sys.version.split()[0]}, GIL {'on' if gil else 'off'}; a unit: pack_ids + "
          f"ids_to_b64 of 40k ids, a 200-event relay; best of {ROUNDS} rounds; throughput "
          "against 1 thread")
    for label, twins in (("tokcore-c", (_pack_c, _b64_c, _relay_c)),
                         ("tokcore-py", (_pack_py, _b64_py, _relay_py))):
        work, units = unit(*twins), UNITS[label]
        work(Request())  # warm up
        best = {n: min(wall_time(work, n, units) for _ in range(ROUNDS)) for n in THREADS}
        scaling = "  ".join(f"{n} threads {best[1][0] / best[n][0]:.2f}x "
                            f"(cpu/wall {best[n][1] / best[n][0]:.2f})" for n in THREADS[1:])
        print(f"  {label}: 1 thread {best[1][0] * 1e3 / units:.3f} ms a unit; {scaling}")


if __name__ == "__main__":
    main()
