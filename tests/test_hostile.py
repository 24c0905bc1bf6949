"""Hostile input: whatever a peer or a buggy caller sends, tokcore raises the contract's error
(or returns the right answer), the same in both twins, and never crashes.

Run under ``make sanitize`` too, where a read past a buffer or of freed memory aborts.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from _index_objects import Index
from _twins import report, twin, twins

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Hostile(Exception):
    pass


def outcome(call: Callable[[], Any]) -> Any:
    """A call's result, or the type of the exception it raised."""
    try:
        return call()
    except Exception as exc:
        return type(exc)


def same_everywhere(name: str, call: Callable[[ModuleType], Any],
                    allowed: tuple[type[BaseException], ...]) -> Any:
    """``call`` on each twin: one outcome, and an exception only of the ``allowed`` types."""
    results = [outcome(lambda m=m: call(m)) for m in twins(name)]
    for result in results:
        if isinstance(result, type):
            assert issubclass(result, allowed), f"{result.__name__} is outside the contract"
    assert all(r == results[0] and type(r) is type(results[0]) for r in results), results
    return results[0]


# --- token ids: sequences whose __index__ raises or mutates --------------------------------

class Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __index__(self) -> int:
        raise self.exc


class Mutates:
    """An ``__index__`` that does something to the list being packed, then returns 5."""

    def __init__(self, victim: list[Any], action: str) -> None:
        self.victim, self.action = victim, action

    def __index__(self) -> int:
        v = self.victim
        if self.action == "clear":
            v.clear()
        elif self.action == "grow":
            v.extend(range(5000))
        elif self.action == "pop":
            v.pop()
        elif self.action == "insert":
            v.insert(0, 9)
        elif self.action == "replace-all":
            v[:] = [Raises(Hostile())] * len(v)  # same size, every item new (old ones freed)
        elif self.action == "replace-next":
            v[-1] = 10**20
        return 5


class ReturnsNonInt:
    def __index__(self) -> Any:
        return "7"


class ReturnsHuge:
    def __index__(self) -> int:
        return 2**100


@pytest.mark.parametrize("exc", [Hostile("x"), KeyError("k"), ValueError("v"),
                                 MemoryError(), RecursionError()])
@pytest.mark.parametrize("where", [0, 3, 7])
def test_index_that_raises(exc: BaseException, where: int) -> None:
    def call(m: ModuleType) -> Any:
        ids: list[Any] = list(range(8))
        ids[where] = Raises(exc)
        return m.pack_ids(ids)

    assert same_everywhere("pack", call, (type(exc),)) is type(exc)


@pytest.mark.parametrize("action", ["clear", "grow", "pop", "insert", "replace-all",
                                    "replace-next"])
@pytest.mark.parametrize("where", [0, 3, 7])
@pytest.mark.parametrize("container", ["list", "tuple-of-list-items"])
def test_index_that_mutates(action: str, where: int, container: str) -> None:
    def call(m: ModuleType) -> Any:
        victim: list[Any] = list(range(8))
        victim[where] = Mutates(victim, action)
        return m.pack_ids(victim if container == "list" else tuple(victim))

    result = same_everywhere("pack", call, (RuntimeError, OverflowError, Hostile))
    if container == "tuple-of-list-items":  # the tuple itself cannot change
        assert result == struct.pack("<8i", *[5 if i == where else i for i in range(8)])


@pytest.mark.parametrize("item, error", [(ReturnsNonInt(), TypeError),
                                         (ReturnsHuge(), OverflowError)])
def test_index_that_returns_nonsense(item: Any, error: type[BaseException]) -> None:
    assert same_everywhere("pack", lambda m: m.pack_ids([1, item]), (error,)) is error


def test_iterator_that_raises_midway() -> None:
    def gen() -> Any:
        yield 1
        raise Hostile("midway")

    assert same_everywhere("pack", lambda m: m.pack_ids(gen()), (Hostile,)) is Hostile


class LyingLength:
    def __len__(self) -> int:
        return 10**9

    def __iter__(self) -> Any:
        return iter([1, 2, 3])


def test_length_that_lies() -> None:
    assert same_everywhere("pack", lambda m: m.pack_ids(LyingLength()), ()) == \
        struct.pack("<3i", 1, 2, 3)


# --- token ids: numpy arrays of every integer dtype, any stride, the int32 edges ----------

DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"]
EDGES = [0, 1, -1, INT32_MAX - 1, INT32_MAX, INT32_MAX + 1, INT32_MIN + 1, INT32_MIN,
         INT32_MIN - 1, 2**32 - 1, 2**32, 2**63 - 1, -(2**63), 2**64 - 1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("step", [1, -1, 2, -3])
def test_every_dtype_stride_and_edge(dtype: str, order: str, step: int) -> None:
    dt = np.dtype(dtype).newbyteorder(order)
    info = np.iinfo(dt)
    for edge in EDGES:
        if not info.min <= edge <= info.max:
            continue
        arr = np.array([edge, 7, edge, 9, edge], dtype=dt)[::step]
        values = [int(v) for v in arr]
        result = same_everywhere("pack", lambda m, a=arr: m.pack_ids(a), (OverflowError,))
        if INT32_MIN <= edge <= INT32_MAX:
            assert result == struct.pack(f"<{len(values)}i", *values), (dtype, edge)
        else:
            assert result is OverflowError, (dtype, order, step, edge)
            for m in twins("pack"):  # the message names the first bad index and its value
                with pytest.raises(OverflowError, match=rf"ids\[{values.index(edge)}\] = {edge}\b"):
                    m.pack_ids(arr)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_and_empty_buffers(dtype: str) -> None:
    values = np.arange(-3, 50, dtype=dtype) if dtype[0] == "i" else np.arange(50, dtype=dtype)
    raw = b"\0" + values.tobytes()
    unaligned = np.frombuffer(raw, dtype=dtype, offset=1)  # every item straddles a boundary
    assert same_everywhere("pack", lambda m: m.pack_ids(unaligned), ()) == le32(values)
    empty = np.zeros(0, dtype)[::-1]
    assert same_everywhere("pack", lambda m: m.pack_ids(empty), ()) == b""


@pytest.mark.parametrize("bad", [np.zeros(3, "f2"), np.zeros(3, "?"), np.zeros(3, "c8"),
                                 np.zeros(3, "M8[s]"), np.zeros(3, "m8[s]"), np.zeros(3, "O"),
                                 np.zeros(3, "V4"), np.zeros(3, "U1"),
                                 np.zeros((3, 2), "i4")[:, 0], np.zeros((), "i4"),
                                 np.zeros((2, 3), "i4").T])
def test_buffers_that_are_not_id_vectors(bad: Any) -> None:
    result = same_everywhere("pack", lambda m: m.pack_ids(bad), (TypeError, ValueError))
    if isinstance(result, bytes):  # a strided column of a 2-D array is a 1-D view: fine
        assert result == le32(bad)


def le32(values: Any) -> bytes:
    return np.asarray(values, dtype="<i4").tobytes()


# --- token ids: data for unpack_ids --------------------------------------------------------

@pytest.mark.parametrize("data", [b"\0" * 3, b"\xff" * 5, b"\0\0\0\0\0", bytearray(7),
                                  memoryview(b"\0" * 9), np.zeros(3, np.uint8)])
def test_unpack_bad_lengths(data: Any) -> None:
    assert same_everywhere("pack", lambda m: m.unpack_ids(data), (ValueError,)) is ValueError


@pytest.mark.parametrize("data", ["", "abcd", 0, None, [0, 0, 0, 0], np.zeros(8, np.uint8)[::2],
                                  np.zeros((4, 4), np.uint8)[:, 1]])
def test_unpack_not_data(data: Any) -> None:
    assert same_everywhere("pack", lambda m: m.unpack_ids(data), (TypeError,)) is TypeError


@pytest.mark.parametrize("data", [memoryview(b"")[::2], memoryview(b"abcdefgh")[::8],
                                  np.zeros(0, np.uint8)[::-1]])
def test_unpack_views_that_hold_at_most_one_item(data: Any) -> None:
    """Found by fuzzing (fuzz/corpus/ids): an empty strided view is contiguous to the buffer
    protocol, so the Cython twin returned [] where the Python twin raised TypeError."""
    expected = [] if memoryview(data).nbytes == 0 else ValueError
    assert same_everywhere("pack", lambda m: m.unpack_ids(data), (ValueError,)) == expected


def test_unpack_nul_and_high_bytes() -> None:
    data = b"\0\0\0\0\xff\xff\xff\xff\0\0\0\x80\xff\xff\xff\x7f"
    assert same_everywhere("pack", lambda m: m.unpack_ids(data), ()) == \
        [0, -1, INT32_MIN, INT32_MAX]


# --- SSE: an upstream that never ends its event --------------------------------------------

SSE_ERRORS = (TypeError, ValueError)
USAGE_EVENT = (b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,'
               b'"completion_tokens":5,"total_tokens":8}}\n\n')
REWRITTEN_USAGE_EVENT = (b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":100,'
                         b'"completion_tokens":5,"total_tokens":105}}\n\n')


@pytest.mark.parametrize("kind", ["c", "py"])
@pytest.mark.parametrize("line_end", [b"", b"\n"])
def test_relay_memory_stays_bounded_without_a_blank_line(kind: str, line_end: bytes) -> None:
    """64 MiB in 64 KiB reads and no blank line (with or without single line ends): all of it
    is forwarded, and the heap the relay keeps between reads stays within max_event_bytes
    plus one read. Inside the one call that gives up holding, the held bytes and the output
    that carries them coexist: that call's peak is about twice the bound, never more.
    The next event after the blank line is rewritten again."""
    import tracemalloc

    sse = twin("stream", kind)
    limit, read = 1 << 20, 64 * 1024
    chunk = (b"data: " + b"x" * (read - 7 - len(line_end)) + b"u" + line_end)[:read]
    relay = sse.UsageRelay(100, max_event_bytes=limit)
    kept = 0
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        forwarded = 0
        for _ in range(1024):
            out = relay.feed(chunk)
            forwarded += len(out)
            del out
            assert relay.pending_bytes <= limit
            kept = max(kept, tracemalloc.get_traced_memory()[0] - base)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    RECORDED.append(f"relay without a blank line ({kind}, line end {line_end!r}): kept "
                    f"{kept / 1024:.0f} KiB, peak {peak / 1024:.0f} KiB, bound {limit >> 10} KiB")
    assert kept <= limit + read + 64 * 1024, f"{kept} bytes kept for a bound of {limit}"
    assert peak <= 2 * (limit + read) + 64 * 1024, f"peak heap {peak} bytes, bound {limit}"
    assert relay.feed(b"\n\n" + USAGE_EVENT) == b"\n\n" + REWRITTEN_USAGE_EVENT  # scanning again
    assert forwarded == 1024 * read  # nothing dropped, nothing added
    assert relay.close() == b""


RECORDED: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _print_recorded(pytestconfig: pytest.Config) -> Iterator[None]:
    yield
    report(pytestconfig, "hostile-memory.txt", "relay memory without a blank line", RECORDED)


@pytest.mark.parametrize("kind", ["c", "py"])
def test_decoder_without_line_ends_holds_what_it_must(kind: str) -> None:
    decoder = twin("stream", kind).EventDecoder()
    for _ in range(64):
        assert decoder.feed(b"data: " + b"y" * 16_000) == []
    events = decoder.feed(b"\n\n")
    assert len(events) == 1 and len(events[0].data) == 64 * 16_006 - 6


# --- SSE: a million nested brackets --------------------------------------------------------

MILLION = 1_000_000


@pytest.mark.parametrize("payload, span", [
    (b'{"a":' + b"[" * MILLION + b"]" * MILLION + b',"usage":{"completion_tokens":2}}',
     (5 + 2 * MILLION + 9, 5 + 2 * MILLION + 9 + 23)),
    (b'{"a":' + b"[" * MILLION, None),                       # never closed
    (b"[" * MILLION + b"]" * MILLION, None),                 # not an object
    (b'{"usage":' + b"{\"a\":" * MILLION + b"1" + b"}" * MILLION + b"}",
     (9, 9 + 5 * MILLION + 1 + MILLION)),
    (b'{"x":"' + b"[{" * MILLION + b'","usage":null}', None),  # brackets in a string
])
def test_a_million_nested_brackets(payload: bytes, span: Any) -> None:
    assert same_everywhere("stream", lambda m: m.find_usage(payload), ()) == span
    result = same_everywhere("stream", lambda m: m.rewrite_usage(payload, 7, 1), ())
    if span is None or payload.startswith(b'{"usage":{"a":'):
        # no usage, or one too deep for json.loads to rebuild: forwarded as it came
        assert result == payload
    else:
        assert result.endswith(b'"usage":{"completion_tokens":2,"prompt_tokens":7,'
                               b'"total_tokens":9,"prompt_tokens_details":{"cached_tokens":1}}}')


def test_relay_and_decoder_on_a_million_brackets() -> None:
    event = b'data: {"a":' + b"[" * MILLION + b"]" * MILLION + b"}\n\n"
    for m in twins("stream"):
        relay = m.UsageRelay(5)
        assert relay.feed(event[:777]) + relay.feed(event[777:]) + relay.close() == event
        assert [e.data for e in m.EventDecoder().feed(event)] == [event[6:-2].decode()]


# --- SSE: invalid UTF-8 and NUL bytes ------------------------------------------------------

@pytest.mark.parametrize("junk", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                                  b"\0", b"\0\0\0\0", b"\xef\xbb\xbf", b"\x80\x80"])
def test_invalid_utf8_and_nul_around_usage(junk: bytes) -> None:
    outside = b'{"x":"' + junk + b'","usage":{"completion_tokens":1}}'
    assert same_everywhere("stream", lambda m: m.find_usage(outside), ()) is not None
    out = same_everywhere("stream", lambda m: m.rewrite_usage(outside, 2), ())
    assert out == b'{"x":"' + junk + b'","usage":{"completion_tokens":1,"prompt_tokens":2,' \
        b'"total_tokens":3}}'
    inside = b'{"usage":{"completion_tokens":1,"x":"' + junk + b'"}}'
    result = same_everywhere("stream", lambda m: m.rewrite_usage(inside, 2), ())
    assert result.startswith(b'{"usage":{')  # rewritten or left as is, the same in both
    for payload in (junk, junk * 1000, b"data: " + junk + b"\n\n"):
        assert same_everywhere("stream", lambda m, p=payload: m.find_usage(p), ()) is None


def test_decoder_nul_and_invalid_utf8() -> None:
    stream = b"id: a\0b\ndata: \xff\0\xc3\n\nid: ok\ndata: \xe2\x82\n\n"
    for m in twins("stream"):
        events = [tuple(e) for e in m.EventDecoder().feed(stream)]
        assert events == [("message", "\ufffd\0\ufffd", None, None),
                          ("message", "\ufffd", "ok", None)]


# --- SSE: the "usage" key split across every possible pair of reads ------------------------

SPLIT_STREAM = (b'data: {"choices":[{"delta":{"content":"usage"}}]}\r\n\r\n'
                b'data: {"choices":[],"usage":{"completion_tokens":4}}\r\n\r\n'
                b"data: [DONE]\r\n\r\n")
SPLIT_EXPECTED = SPLIT_STREAM.replace(
    b'{"completion_tokens":4}',
    b'{"completion_tokens":4,"prompt_tokens":9,"total_tokens":13,'
    b'"prompt_tokens_details":{"cached_tokens":3}}')


def test_usage_key_split_across_every_pair_of_reads() -> None:
    data = SPLIT_STREAM
    for m in twins("stream"):
        for i in range(len(data) + 1):
            for j in range(i, len(data) + 1):
                relay = m.UsageRelay(9, 3)
                out = relay.feed(data[:i]) + relay.feed(data[i:j]) + relay.feed(data[j:])
                out += relay.close()
                assert out == SPLIT_EXPECTED, (m.__name__, i, j)


def test_decoder_split_across_every_pair_of_reads() -> None:
    data = SPLIT_STREAM
    for m in twins("stream"):
        whole = [tuple(e) for e in m.EventDecoder().feed(data)]
        assert len(whole) == 3
        for i in range(0, len(data) + 1, 3):
            for j in range(i, len(data) + 1):
                decoder = m.EventDecoder()
                got = decoder.feed(data[:i]) + decoder.feed(data[i:j]) + decoder.feed(data[j:])
                assert [tuple(e) for e in got + decoder.close()] == whole, (i, j)


def test_relay_duplicated_a_held_event_completed_with_more_data() -> None:
    """Found by fuzzing (fuzz/corpus/relay): the Cython relay sent a held event twice when
    the read that completed it carried another event."""
    for m in twins("stream"):
        relay = m.UsageRelay(5)
        assert relay.feed(b"data") + relay.feed(b"\n\ndata: {}\n\n") + relay.close() == \
            b"data\n\ndata: {}\n\n"


@pytest.mark.parametrize("bad", ["data: x\n\n", 5, None, [b"x"], np.zeros(4, np.uint8)[::2]])
def test_sse_wrong_types(bad: Any) -> None:
    assert same_everywhere("stream", lambda m: m.find_usage(bad), SSE_ERRORS) is TypeError
    assert same_everywhere("stream", lambda m: m.rewrite_usage(bad, 1), SSE_ERRORS) is TypeError
    assert same_everywhere("stream", lambda m: m.UsageRelay(1).feed(bad), SSE_ERRORS) is TypeError
    assert same_everywhere("stream", lambda m: m.EventDecoder().feed(bad), SSE_ERRORS) is TypeError


@pytest.mark.parametrize("prompt, cached", [(-1, None), (1, -1), (True, None), (1.5, None),
                                            ("3", None), (None, None), (1, "2")])
def test_sse_bad_counts(prompt: Any, cached: Any) -> None:
    payload = b'{"usage":{}}'
    expected = same_everywhere("stream", lambda m: m.rewrite_usage(payload, prompt, cached),
                               SSE_ERRORS)
    assert expected in (TypeError, ValueError)
    assert same_everywhere("stream", lambda m: m.UsageRelay(prompt, cached), SSE_ERRORS) is expected


# --- base64: every kind of garbage ---------------------------------------------------------

B64_GARBAGE = [b"=", b"==", b"===", b"\n", b"\r\n", b" ", b"\t", b"\0", b"\xff", b"\x80", b"-",
               b"_", b"+", b"/", b"*", b"A", b"\\", b"\xc3\xa9", b"="]
B64_VALID = base64.b64encode(bytes(range(7)) + b"\xfb\xff")  # 12 chars, "+" and "/" inside
# 3.15's base64 warns about "+" or "/" that the alphabet in use lacks (url-safe, altchars);
# the suite turns warnings into errors, so the drop-ins must raise the same ones
B64_WARNINGS = (FutureWarning, DeprecationWarning)


@pytest.mark.parametrize("garbage", B64_GARBAGE)
def test_b64decode_with_garbage_everywhere(garbage: bytes) -> None:
    for where in range(len(B64_VALID) + 1):
        data = B64_VALID[:where] + garbage + B64_VALID[where:]
        for arg in (data, data.decode("latin-1")):
            for validate in (False, True):
                expected = outcome(lambda a=arg, v=validate: base64.b64decode(a, validate=v))
                got = same_everywhere("b64", lambda m, a=arg, v=validate:
                                      m.b64decode(a, validate=v), (ValueError,))
                assert got == expected, (data, validate)
            for fn in ("standard_b64decode", "urlsafe_b64decode"):
                expected = outcome(lambda a=arg, f=fn: getattr(base64, f)(a))
                assert same_everywhere("b64", lambda m, a=arg, f=fn: getattr(m, f)(a),
                                       (ValueError, *B64_WARNINGS)) == expected


@pytest.mark.parametrize("altchars", [b"-_", b"..", b"-", b"-_=", b"", "-_", bytearray(b"*!"),
                                      memoryview(b"~!"), 5])
def test_b64_altchars_of_every_shape(altchars: Any) -> None:
    for data in (B64_VALID, b"ab-_cd~!", b"ab*!"):
        expected = outcome(lambda d=data: base64.b64decode(d, altchars))
        assert same_everywhere("b64", lambda m, d=data: m.b64decode(d, altchars),
                               (ValueError, TypeError, AssertionError, *B64_WARNINGS)) == expected
    expected = outcome(lambda: base64.b64encode(b"\xfb\xff\xfe", altchars))
    assert same_everywhere("b64", lambda m: m.b64encode(b"\xfb\xff\xfe", altchars),
                           (ValueError, TypeError, AssertionError)) == expected


@pytest.mark.parametrize("text", ["AAAA====", "AAA", "A", "AAAAAA==", "AAAA\0", "AAAAé",
                                  "////", "AAAA AAAA", b"\xff\xff\xff\xff"])
@pytest.mark.parametrize("validate", [False, True])
def test_b64_to_ids_on_garbage(text: Any, validate: bool) -> None:
    def composed() -> Any:
        return twins("pack")[0].unpack_ids(base64.b64decode(text, validate=validate))

    assert same_everywhere("b64", lambda m: m.b64_to_ids(text, validate=validate),
                           (ValueError, TypeError)) == outcome(composed)


class IntOnly:
    def __int__(self) -> int:
        return 1


class Unreadable:
    def __index__(self) -> int:
        raise ValueError("no index")

    def __bool__(self) -> bool:
        raise ValueError("no truth")


@pytest.mark.parametrize("validate", [False, True, 0, 2, -1, 2**40, None, "yes", 1.5,
                                      np.True_, np.int64(1), Index(1), IntOnly(),
                                      Unreadable()],
                         ids=lambda v: type(v).__name__ if " at 0x" in repr(v) else repr(v))
def test_b64_validate_of_every_type(validate: Any) -> None:
    """binascii reads validate as a C int through __index__ on 3.11 and 3.12, and as any
    object's truth from 3.13 on; so must both twins, in b64decode and in b64_to_ids, before
    looking at the data (empty data included)."""
    unpack = twins("pack")[0].unpack_ids
    for data in (b"", b"QQ==", b"Q*Q==", b"AAAAAAA="):
        expected = outcome(lambda d=data: base64.b64decode(d, validate=validate))
        assert same_everywhere("b64", lambda m, d=data: m.b64decode(d, validate=validate),
                               (TypeError, ValueError, OverflowError)) == expected, data
        composed = outcome(lambda d=data: unpack(base64.b64decode(d, validate=validate)))
        assert same_everywhere("b64", lambda m, d=data: m.b64_to_ids(d.decode(),
                                                                       validate=validate),
                               (TypeError, ValueError, OverflowError)) == composed, data


# --- compact_ids: a pickle whose compact value is damaged ----------------------------------

@pytest.mark.parametrize("data", [b"", b"\0", b"\0" * 5, b"\xff" * 4003, "text", None])
def test_compact_pickle_with_damaged_ids(data: Any) -> None:
    """The compact value's loader gets whatever a damaged (or hand-made) pickle holds: the
    contract's error (or the ids, for a valid length), never a crash."""
    import pickle

    from tokcore import pickling

    class Damaged:
        def __reduce__(self) -> Any:
            return pickling._ids_from_int32, (data,)

    blob = pickle.dumps(Damaged())
    result = outcome(lambda: pickle.loads(blob))
    if isinstance(data, bytes) and len(data) % 4 == 0:
        assert result == [0] * (len(data) // 4)
    else:
        assert result in (ValueError, TypeError)
