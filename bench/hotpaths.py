"""The hot paths as data: what ``bench/guard.py`` counts and ``bench/compare.py`` times.

Each case builds its input once and returns a function and its arguments, one call of which
is one repetition of the work (one event fed, one 1 MiB stream relayed, one call), and how
many units of the case's ``per`` (event, byte, id, call) that work is. Only public names
of ``tokcore`` are used, so a case runs on any build that has the names in its ``needs``:
the guard counts this tree, the comparison times this tree against an older commit's
build.

Usage (what guard.py runs under callgrind): python bench/hotpaths.py MARKS_LIB [CASE...]
builds each case (all of them by default) and runs its work ``reps`` times and then
``2 * reps`` times, the cyclic GC off, the counters zeroed before each stretch and dumped
after it (bench/icount/marks.c, loaded with ctypes): the two dumps differ by ``reps``
repetitions of the work and nothing else.
"""

from __future__ import annotations

import functools
import gc
import json
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tokcore  # noqa: E402

PROMPT, CACHED = 40000, 32000
B64_BYTES = 160 * 1024
N_IDS = 40_000

#: a repetition's function, its arguments and the units of work in one call
Work = tuple[Callable[..., Any], tuple[Any, ...], int]


class Case(NamedTuple):
    name: str
    per: str  # the unit of the figures: "event", "byte", "id" or "call"
    make: Callable[[int], Work]  # pool (repetitions the input must last) -> the work
    reps: int  # repetitions guard.py counts (and twice as many): enough work to dwarf noise
    needs: tuple[str, ...] = ()  # names the build's tokcore must have
    consumes: bool = False  # each call uses up one input of the pool (not timed by pyperf)

    def available(self, module: Any = tokcore) -> bool:
        return all(hasattr(module, need) or ((need.startswith("_") or "." in need)
                                             and _has_module(need))
                   for need in self.needs)


def _has_module(name: str) -> bool:
    """Whether the build has ``tokcore.<name>`` (a private module a case reaches into)."""
    import importlib.util

    try:
        return importlib.util.find_spec(f"tokcore.{name}") is not None
    except ModuleNotFoundError:  # its package is not there either (a build before the wings)
        return False


def _feed(event_of: Callable[[], bytes]) -> Callable[[int], Work]:
    def make(pool: int) -> Work:
        event = event_of()
        feed = tokcore.UsageRelay(PROMPT, CACHED).feed
        assert feed(event) is event
        return feed, (event,), 1
    return make


def _feed_each(usage_null: bool) -> Callable[[int], Work]:
    """A chat stream's first 1,000 events, each with its own text, one feed each: as a relay
    meets a stream (one event fed again and again is each time the text the relay saw last)."""
    def make(pool: int) -> Work:
        import bench_relay as s
        events = s.token_events(s.FEED_EVENTS, usage_null)
        feed = tokcore.UsageRelay(PROMPT, CACHED).feed
        assert all(feed(event) is event for event in events)
        return s.feed_each, (feed, events), len(events)
    return make


def _relay(api: str) -> Callable[[int], Work]:
    def make(pool: int) -> Work:
        import bench_relay as s
        body = {"chat": lambda: s.stream(False), "chat-null": lambda: s.stream(True),
                "responses": lambda: s.responses_stream(
            s.STREAM_BYTES), "messages": lambda: s.messages_stream(s.STREAM_BYTES)}[api]()
        chunks = s.reads(body, 65536)
        kwargs = {} if api.startswith("chat") else {"api": api}

        def work(chunks: list[bytes]) -> bytes:
            relay = tokcore.UsageRelay(PROMPT, CACHED, **kwargs)
            for chunk in chunks:
                relay.feed(chunk)
            return relay.close()
        return work, (chunks,), len(body)
    return make


def _usage_data() -> bytes:
    import bench_relay as s
    return s.USAGE_EVENT[6:-2]


def _rewrite(pool: int) -> Work:
    data = _usage_data()
    return tokcore.rewrite_usage, (data, PROMPT, CACHED), 1


def _find(pool: int) -> Work:
    data = _usage_data()
    return tokcore.find_usage, (data,), 1


def _json_body() -> tuple[bytes, bytes]:
    import bench_members as j
    return j.context_response(j.ids_b64()), j.generation_request()


def _find_member(pool: int) -> Work:
    import bench_members as j
    body, _ = _json_body()
    return tokcore.find_member, (body, j.KEY), 1


def _set_member(pool: int) -> Work:
    import bench_members as j
    body, request = _json_body()
    start, end = tokcore.find_member(body, j.KEY)
    value = body[start:end]
    # trusted=True: bytes cut by find_member, as the orchestrator moves them (the check is
    # the caller's choice, not this path's cost)
    return functools.partial(tokcore.set_member, trusted=True), (request, j.KEY, value), 1


def _ids(kind: str) -> list[int]:
    from _common import uniform_ids, zipf_ids
    return (uniform_ids if kind == "uniform" else zipf_ids)(N_IDS)


def _pack(pool: int) -> Work:
    ids = _ids("uniform")
    return tokcore.pack_ids, (ids,), len(ids)


def _unpack(pool: int) -> Work:
    data = tokcore.pack_ids(_ids("zipf"))
    return tokcore.unpack_ids, (data,), len(data) // 4


def _pack64(pool: int) -> Work:
    ids = _ids("uniform")
    return functools.partial(tokcore.pack_ids, width=64), (ids,), len(ids)


def _pack_numpy(width: int) -> Callable[[int], Work]:
    """numpy's default dtype, the common input: an int64 array, at either width."""
    def make(pool: int) -> Work:
        import numpy as np

        arr = np.asarray(_ids("uniform"), np.int64)
        return functools.partial(tokcore.pack_ids, width=width), (arr,), len(arr)
    return make


def _unpack64(pool: int) -> Work:
    data = tokcore.pack_ids(_ids("zipf"), width=64)
    return functools.partial(tokcore.unpack_ids, width=64), (data,), len(data) // 8


def _ids_to_b64_64(pool: int) -> Work:
    ids = _ids("uniform")
    return functools.partial(tokcore.ids_to_b64, width=64), (ids,), len(ids)


def _b64_to_ids64(pool: int) -> Work:
    text = tokcore.ids_to_b64(_ids("zipf"), width=64)
    return functools.partial(tokcore.b64_to_ids, width=64), (text,), N_IDS


def _ids_to_b64(pool: int) -> Work:
    ids = _ids("uniform")
    return tokcore.ids_to_b64, (ids,), len(ids)


def _b64_to_ids(pool: int) -> Work:
    text = tokcore.ids_to_b64(_ids("zipf"))
    return tokcore.b64_to_ids, (text,), N_IDS


def _random_bytes() -> bytes:
    import random
    return random.Random(7).randbytes(B64_BYTES)


def _b64encode(pool: int) -> Work:
    data = _random_bytes()
    return tokcore.b64encode, (data,), len(data)


def _b64decode(pool: int) -> Work:
    import base64
    text = base64.b64encode(_random_bytes())
    return tokcore.b64decode, (text, None, True), len(text)


def _wire(kind: str) -> Callable[[int], Work]:
    """A wire-format case on 40k uniform ids (the context answer's JSON array is 250 KB)."""
    def make(pool: int) -> Work:
        ids = _ids("uniform")
        text = tokcore.ids_to_json(ids)
        packed = tokcore.ids_to_msgpack(ids)
        if kind == "json_to_ids":
            return tokcore.json_to_ids, (text,), N_IDS
        if kind == "ids_to_json":
            return tokcore.ids_to_json, (ids,), N_IDS
        if kind == "ids_to_msgpack":
            return tokcore.ids_to_msgpack, (ids,), N_IDS
        if kind == "msgpack_to_ids":
            return tokcore.msgpack_to_ids, (packed,), N_IDS
        if kind == "json->int32":  # the JSON parse alone: per byte of the text
            return tokcore.convert_ids, (text, "json", "int32"), len(text)
        return tokcore.convert_ids, (text, "json", "msgpack"), N_IDS
    return make


def _wire64(kind: str) -> Callable[[int], Work]:
    """A wire-format case at width 64 on the same 40k uniform ids as ``_wire``'s."""
    def make(pool: int) -> Work:
        ids = _ids("uniform")
        text = tokcore.ids_to_json(ids)
        packed = tokcore.ids_to_msgpack(ids)
        if kind == "json->int64":  # the JSON parse alone: per byte of the text
            return tokcore.convert_ids, (text, "json", "int64"), len(text)
        if kind == "json->msgpack":
            return functools.partial(tokcore.convert_ids, width=64), \
                (text, "json", "msgpack"), N_IDS
        if kind == "int64->json":
            return tokcore.convert_ids, (tokcore.pack_ids(ids, width=64), "int64", "json"), \
                N_IDS
        arg = {"json_to_ids": text, "ids_to_json": ids, "ids_to_msgpack": ids,
               "msgpack_to_ids": packed}[kind]
        return functools.partial(getattr(tokcore, kind), width=64), (arg,), N_IDS
    return make


class LazyRequest:  # decorated by the case (builds before the lazy descriptors lack them)
    def __init__(self, prompt_token_ids: list[int]) -> None:
        self.request_id = "req-1"
        self.prompt_token_ids = prompt_token_ids


def _lazy_read(pool: int) -> Work:
    if "__getstate__" not in vars(LazyRequest):
        tokcore.compact_ids("prompt_token_ids", lazy=True)(LazyRequest)
    data = pickle.dumps(LazyRequest(_ids("zipf")), pickle.HIGHEST_PROTOCOL)
    objects = iter([pickle.loads(data) for _ in range(pool)])
    return (lambda objects: next(objects).prompt_token_ids), (objects,), 1


def _feed_event(usage_null: bool) -> Callable[[], bytes]:
    def event() -> bytes:
        import bench_relay as s
        return s.token_event(1, usage_null)
    return event


def _new_relay(pool: int) -> Work:
    return tokcore.UsageRelay, (PROMPT, CACHED), 1


def _new_decoder(pool: int) -> Work:
    return tokcore.EventDecoder, (), 1


def _new_big_event(pool: int) -> Work:
    # the relay starts one for each event over max_event_bytes; it has no public name
    from tokcore.stream._bigevent_c import BigEvent
    from tokcore.stream._usage_py import make_rules

    return BigEvent, (make_rules(PROMPT, CACHED, "chat"), 64, False), 1


LAZY = ("compact_ids", "ids_buffer")  # ids_buffer came with the lazy descriptors
WIDTH = ("ids._width",)  # width=64 came with the module that checks it
WRITER = ("StreamWriter",)


def _writer() -> Any:
    """A vLLM chat stream's writer (the built-in shape)."""
    shape = tokcore.StreamShape("chat", "vllm")
    return tokcore.StreamWriter(shape, id="chatcmpl-8f3c2a1b4d5e6f708192a3b4c5d6e7f8",
                                model="Qwen/Qwen2.5-7B-Instruct", created=1732000000)


def _delta(api: str, builtin: str, batch: int = 0) -> Callable[[int], Work]:
    """One text delta of an API whose frames carry ``event:`` lines (Responses: and its
    ``sequence_number``), through the built-in shape; or ``batch`` deltas in one call."""
    def make(pool: int) -> Work:
        shape = tokcore.StreamShape(api, builtin)
        w = tokcore.StreamWriter(shape, id="resp_8f3c2a1b4d5e6f708192a3b4c5d6e7f8",
                                 model="Qwen/Qwen2.5-7B-Instruct", created=1732000000,
                                 item_id="msg_8f3c2a1b4d5e6f708192a3b4c5d6e7f8")
        if batch:
            return w.texts, ([f" w{i}" for i in range(batch)],), batch
        return w.text, (" the",), 1
    return make


def _write(kind: str) -> Callable[[int], Work]:
    def make(pool: int) -> Work:
        import bench_writer as b
        w = _writer()
        if kind == "text":
            return w.text, (" the",), 1
        if kind == "text 1":
            w.text(" the", 1)  # (the choice's parts are made by its first frame)
            return w.text, (" the", 1), 1
        if kind == "step":
            return (lambda: w.step(" the", token_ids=[1820], usage=(40000, 17))), (), 1
        if kind == "logprobs":
            entries = [(" the", -0.0123, b" the", b.tops(20))]
            return (lambda: w.step(" the", logprobs=entries)), (), 1
        if kind == "batch":
            texts = [f" w{i}" for i in range(16)]
            return w.texts, (texts,), 16
        words = b.WORDS if kind == "ascii" else b.MIXED_WORDS
        text = b.text_of(words, 65536, 1 if kind == "ascii" else 2)
        return w.text, (text,), len(text.encode())
    return make


def _new_writer(pool: int) -> Work:
    shape = tokcore.StreamShape("chat", "vllm")
    return (lambda: tokcore.StreamWriter(shape, id="chatcmpl-1", model="m", created=1)), (), 1

CASES = [
    Case("feed 1 chat event", "event", _feed(_feed_event(False)), 20_000),
    Case('feed 1 chat event, "usage":null', "event", _feed(_feed_event(True)), 20_000),
    Case("relay 1 MiB chat in 64 KiB reads", "byte", _relay("chat"), 8),
    # include_usage: "usage":null in every chunk, several chunks a read
    Case('relay 1 MiB chat, "usage":null, in 64 KiB reads', "byte", _relay("chat-null"), 8),
    Case("relay 1 MiB responses in 64 KiB reads", "byte", _relay("responses"), 8,
         ("RelayCounts",)),
    Case("relay 1 MiB messages in 64 KiB reads", "byte", _relay("messages"), 8,
         ("RelayCounts",)),
    Case("rewrite_usage of the usage event", "call", _rewrite, 4_000),
    Case("find_usage of the usage event", "call", _find, 10_000),
    Case("find_member ids, 213 KB body", "call", _find_member, 40, ("find_member",)),
    Case("set_member ids into a generation request", "call", _set_member, 400,
         ("set_member",)),
    Case("pack_ids 40k uniform", "id", _pack, 40),
    Case("unpack_ids 40k zipf", "id", _unpack, 40),
    Case("ids_to_b64 40k uniform", "id", _ids_to_b64, 40),
    Case("b64_to_ids 40k zipf", "id", _b64_to_ids, 40),
    Case("b64encode 160 KiB", "byte", _b64encode, 200),
    Case("b64decode(validate=True) 160 KiB", "byte", _b64decode, 200),
    Case("lazy first read, 40k zipf", "call", _lazy_read, 40, LAZY, consumes=True),
    # every request makes a relay (and a decoder where the orchestrator reads events)
    Case("UsageRelay(40000, 32000)", "call", _new_relay, 20_000),
    Case("EventDecoder()", "call", _new_decoder, 20_000),
    Case("a big-event scan started", "call", _new_big_event, 20_000, ("stream._bigevent_c",)),
    Case("json_to_ids 40k uniform", "id", _wire("json_to_ids"), 20, ("json_to_ids",)),
    Case("ids_to_json 40k uniform", "id", _wire("ids_to_json"), 20, ("ids_to_json",)),
    Case("ids_to_msgpack 40k uniform", "id", _wire("ids_to_msgpack"), 20, ("ids_to_msgpack",)),
    Case("msgpack_to_ids 40k uniform", "id", _wire("msgpack_to_ids"), 20, ("msgpack_to_ids",)),
    Case("convert_ids json->int32 40k uniform", "byte", _wire("json->int32"), 20,
         ("convert_ids",)),
    Case("convert_ids json->msgpack 40k uniform", "id", _wire("json->msgpack"), 20,
         ("convert_ids",)),
    # the int64 width (issue 38), beside each int32 case above on the same ids
    Case("pack_ids width=64 40k uniform", "id", _pack64, 40, WIDTH),
    Case("pack_ids numpy int64 40k uniform", "id", _pack_numpy(32), 40, WIDTH),
    Case("pack_ids width=64 numpy int64 40k uniform", "id", _pack_numpy(64), 40, WIDTH),
    Case("unpack_ids width=64 40k zipf", "id", _unpack64, 40, WIDTH),
    Case("ids_to_b64 width=64 40k uniform", "id", _ids_to_b64_64, 40, WIDTH),
    Case("b64_to_ids width=64 40k zipf", "id", _b64_to_ids64, 40, WIDTH),
    Case("json_to_ids width=64 40k uniform", "id", _wire64("json_to_ids"), 20, WIDTH),
    Case("ids_to_json width=64 40k uniform", "id", _wire64("ids_to_json"), 20, WIDTH),
    Case("ids_to_msgpack width=64 40k uniform", "id", _wire64("ids_to_msgpack"), 20, WIDTH),
    Case("msgpack_to_ids width=64 40k uniform", "id", _wire64("msgpack_to_ids"), 20, WIDTH),
    Case("convert_ids json->int64 40k uniform", "byte", _wire64("json->int64"), 20, WIDTH),
    Case("convert_ids json->msgpack width=64 40k uniform", "id", _wire64("json->msgpack"), 20,
         WIDTH),
    Case("convert_ids int64->json 40k uniform", "id", _wire64("int64->json"), 20, WIDTH),
    # the stream writer (vLLM's chat shape): the common chunk, a choice's, the general path
    Case("writer: one text chunk", "call", _write("text"), 20_000, WRITER),
    Case("writer: one text chunk of choice 1", "call", _write("text 1"), 20_000, WRITER),
    Case("writer: a step with token ids and usage", "call", _write("step"), 10_000, WRITER),
    Case("writer: a chunk with 20 top logprobs", "call", _write("logprobs"), 2_000, WRITER),
    Case("writer: 16 steps in one call", "event", _write("batch"), 2_000, WRITER),
    Case("writer: a 64 KiB ASCII text escaped", "byte", _write("ascii"), 40, WRITER),
    Case("writer: a 64 KiB mixed UTF-8 text escaped", "byte", _write("mixed"), 40, WRITER),
    Case("writer: StreamWriter(shape, ...)", "call", _new_writer, 4_000, WRITER),
    Case("writer: one Responses text delta", "call", _delta("responses", "openai"), 20_000,
         WRITER),
    Case("writer: one Anthropic text delta", "call", _delta("messages", "anthropic"), 20_000,
         WRITER),
    Case("writer: 16 Responses deltas in one call", "event", _delta("responses", "openai", 16),
         2_000, WRITER),
    # include_usage: "usage":null in every chunk but the last, each with its own text (last:
    # the memory a thousand events leave changes the small-object pools the cases after it
    # would meet, and so their counts)
    Case("feed 1,000 chat events one at a time", "event", _feed_each(False), 20),
    Case('feed 1,000 chat events one at a time, "usage":null', "event", _feed_each(True), 20),
]


# --- what the goals of bench/compare.py measure tokcore against, in the same run

def _prefilter(pool: int) -> Work:
    import bench_relay as s
    return s.prefilter, (s.token_event(1, False),), 1


def _round_trip(pool: int) -> Work:
    import bench_relay as s
    return s.round_trip, (s.USAGE_EVENT,), 1


def _pybase64_on(path: str) -> Any:
    """pybase64 on its AVX2 kernels (the goals' yardstick as issue 22 set it), or on the best
    ones of this CPU (what its users get: AVX-512 VBMI where the CPU has it). The path is
    process-wide: bench/_timed.py makes a case's work just before it times it, in a worker
    process of its own."""
    import pybase64
    from pybase64 import _pybase64
    set_path = getattr(_pybase64, "_set_simd_path", None)
    if set_path is not None:
        runtime = _pybase64._get_simd_flags_runtime()
        flag = AVX2_FLAG if path == "AVX2" else 1 << (runtime.bit_length() - 1)
        if runtime & flag:
            set_path(flag)
    return pybase64


AVX2_FLAG = 64  # pybase64's flag of its AVX2 path (_pybase64._get_simd_name(64) == "AVX2")


def _pybase64_encode(path: str) -> Callable[[int], Work]:
    def make(pool: int) -> Work:
        return _pybase64_on(path).b64encode, (_random_bytes(),), B64_BYTES
    return make


def _pybase64_decode(path: str) -> Callable[[int], Work]:
    def make(pool: int) -> Work:
        import base64

        text = base64.b64encode(_random_bytes())
        return _pybase64_on(path).b64decode, (text, None, True), len(text)
    return make


BASELINES = [
    Case("b'\"usage\"' in event", "event", _prefilter, 0),
    Case("json round trip of the usage event", "call", _round_trip, 0),
    Case("pybase64.b64encode (AVX2) 160 KiB", "byte", _pybase64_encode("AVX2"), 0),
    Case("pybase64.b64decode(validate=True) (AVX2) 160 KiB", "byte", _pybase64_decode("AVX2"),
         0),
    Case("pybase64.b64encode (its best) 160 KiB", "byte", _pybase64_encode("best"), 0),
    Case("pybase64.b64decode(validate=True) (its best) 160 KiB", "byte",
         _pybase64_decode("best"), 0),
]
BY_NAME = {case.name: case for case in CASES}


def kernels() -> dict[str, str]:
    """The vector kernels this process picked (under valgrind: those of valgrind's CPU, which
    has AVX2 but no AVX-512)."""
    from tokcore._kernels import kernels_in_use
    return {name: kernel for name, (kernel, _) in kernels_in_use().items()}


def main() -> None:
    import ctypes

    marks = ctypes.CDLL(sys.argv[1])
    marks.tok_marks_dump.argtypes = [ctypes.c_char_p]
    if len(sys.argv) > 2 and sys.argv[2].startswith("--kernels="):  # what the counts ran on
        Path(sys.argv.pop(2).split("=", 1)[1]).write_text(json.dumps(kernels()))
    for case in [BY_NAME[name] for name in sys.argv[2:]] or CASES:
        if not case.available():
            continue
        func, args, units = case.make(3 * case.reps + 1)  # a pool for both stretches
        func(*args)  # a first call's one-off costs (caches, lazy imports) are not counted
        gc.collect()
        # one live block in each of pymalloc's small size classes while the case runs: a call
        # that makes and frees a small object (the writer's ~250-byte frame) would otherwise
        # empty its size class's pool when the cases before left no other block there, and
        # take a new pool on every call (90 instructions of a 875-instruction chunk), so a
        # case counted alone and in the whole run would differ. One block a class is not
        # enough: when it takes its pool's last free block, the pool is full and leaves the
        # class's list of pools with room (the text chunk counted 979 in the whole run, 885
        # alone). So 40 a class are made (several pools' worth) and all but the last freed:
        # every pool left on the list then holds a live block and has room.
        ballast = [[bytes(size) for _ in range(40)][-1] for size in range(8, 512, 8)]
        gc.disable()
        for reps in (case.reps, 2 * case.reps):
            marks.tok_marks_zero()
            for _ in range(reps):
                func(*args)
            marks.tok_marks_dump(f"{case.name}|{reps}|{units}".encode())
        gc.enable()
        del ballast


if __name__ == "__main__":
    main()
