"""Threads: does the work scale with the threads, or serialise?

Each thread does the same units of work, a server's per-request share of tokcore: pack a 40k
id list (``pack_ids``), encode it as base64 (``ids_to_b64``) and relay a 200-event chat
stream through its own ``UsageRelay``. 1, 2 and 4 threads run the same total number of
units; the figure is their throughput against one thread's. With the GIL it stays near 1x
(the threads take turns); on a free-threaded build with the GIL off it should approach the
number of cores (2x on 2 cores for 2 and 4 threads). Best of several rounds, one run: ratios,
not times. Run with both twins; ``RUNNER = "plain"``: report.py prints what it prints.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType

from _common import uniform_ids

from tokcore import _b64_c, _b64_py, _ids_c, _ids_py, _sse_c, _sse_py

RUNNER = "plain"
THREADS = (1, 2, 4)
UNITS = 24  # per round, split evenly between the threads
ROUNDS = 5

IDS = uniform_ids(40_000)
TOKEN = (b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
         b'"delta":{"content":" the"}}]}\n\n')
USAGE = (b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":200,'
         b'"total_tokens":201}}\n\ndata: [DONE]\n\n')
STREAM = [TOKEN] * 200 + [USAGE]


def unit(ids: ModuleType, b64: ModuleType, sse: ModuleType) -> Callable[[], None]:
    def work() -> None:
        ids.pack_ids(IDS)
        b64.ids_to_b64(IDS)
        relay = sse.UsageRelay(40_000, 8)
        for chunk in STREAM:
            relay.feed(chunk)
        relay.close()
    return work


def wall_time(work: Callable[[], None], threads: int) -> float:
    """Seconds for ``threads`` threads, released together, to do UNITS units between them."""
    barrier = threading.Barrier(threads + 1)

    def run() -> None:
        barrier.wait()
        for _ in range(UNITS // threads):
            work()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start


def main() -> None:
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"{sys.version.split()[0]}, GIL {'on' if gil else 'off'}; {UNITS} units a round "
          "(pack_ids + ids_to_b64 of 40k ids, a 200-event relay), best of "
          f"{ROUNDS} rounds; throughput against 1 thread")
    for label, twins in (("tokcore-c", (_ids_c, _b64_c, _sse_c)),
                         ("tokcore-py", (_ids_py, _b64_py, _sse_py))):
        work = unit(*twins)
        work()  # warm up
        best = {n: min(wall_time(work, n) for _ in range(ROUNDS)) for n in THREADS}
        scaling = "  ".join(f"{n} threads {best[1] / best[n]:.2f}x" for n in THREADS[1:])
        print(f"  {label}: 1 thread {best[1] * 1e3 / UNITS:.2f} ms a unit; {scaling}")


if __name__ == "__main__":
    main()
