"""More ids than any output could hold: every codec that takes ids, on both twins and at
both widths, raises the same ``MemoryError`` before it sizes an output (issue 42 item 2: the
Cython twin's ``count * 8`` wrapped to a 8-byte result, ``count * 4`` to a crash). More ids
than a MessagePack array (2**32 - 1) or bin (2**32 - 1 bytes) holds: the same ``ValueError``
from both twins, before any id is packed or any output sized (the Cython twin cut the count
to 32 bits in the header; the Python twin raised ``int.to_bytes``' ``OverflowError``).

The ids are numpy arrays broadcast from one value (strides of 0: no memory behind them), so
a count far past any machine's memory costs nothing. Each call runs in a child process: a
crash fails its own test, not the session. The children of ``make sanitize`` run under its
sanitizers, told to answer a huge allocation with NULL (``MemoryError``), as malloc does.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from types import ModuleType

import numpy as np
import pytest
from _twins import KINDS, twin

#: the most ids a call takes, from the platform's Py_ssize_t alone (as the contract has it)
MOST = sys.maxsize // 32
#: the count of issue 42's report: 2**61 + 1 ids, of 8 bytes each 2**64 + 8 (wraps to 8)
ISSUE_COUNT = 2**61 + 1
#: the most items a MessagePack array holds (array32's count is 4 bytes), and the most int32
#: ids a bin holds (bin32's length is 4 bytes, 4 bytes an id)
ARRAY_MOST = 2**32 - 1
BIN_MOST = (2**32 - 1) // 4
#: the functions that take ids, by the fixture of their twins
TAKES_IDS = {"pack": ("pack_ids",), "b64": ("ids_to_b64",),
             "wire": ("ids_to_json", "ids_to_msgpack")}

CHILD = """
import json, sys
import numpy as np
from importlib import import_module
module, name, dtype, count, width = sys.argv[1:]
ids = np.broadcast_to(np.zeros(1, dtype), (int(count),))
func = getattr(import_module(module), name)
try:
    result = func(ids, width=int(width))
except BaseException as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
else:
    print(json.dumps(["returned", f"{type(result).__name__} of length {len(result)}"]))
"""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:  # make sanitize: a huge malloc fails as it does without ASan
        env["ASAN_OPTIONS"] += ":allocator_may_return_null=1"
    return env


def call_in_child(module: str, name: str, dtype: str, count: int, width: int) -> list[str]:
    """``module.name(ids, width=width)`` in a child process, ``ids`` ``count`` zeros of
    ``dtype`` broadcast; ``[exception type, message]``, or ``["returned", what]``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, module, name, dtype, str(count), str(width)],
        capture_output=True, text=True, env=_child_env(), check=False)
    assert done.returncode == 0, (
        f"{module}.{name} of {count} {dtype} ids at width {width} ended the process with "
        f"{done.returncode}:\n{done.stderr[-3000:]}")
    said: list[str] = json.loads(done.stdout.splitlines()[-1])
    return said


def too_many(count: int) -> list[str]:
    return ["MemoryError", f"ids has {count} items, more than the {MOST} a call takes"]


def array_too_long(count: int) -> list[str]:
    return ["ValueError", f"ids has {count} items, more than the {ARRAY_MOST} a MessagePack "
            "array holds"]


def bin_too_long(count: int) -> list[str]:
    return ["ValueError", f"ids has {count} items, more than the {BIN_MOST} a MessagePack "
            "bin of int32 ids holds"]


def _cases() -> list[tuple[str, str]]:
    return [(fixture, name) for fixture, names in TAKES_IDS.items() for name in names]


@pytest.fixture(params=_cases(), ids=lambda case: case[1])
def codec(request: pytest.FixtureRequest, kind: str) -> tuple[ModuleType, str]:
    """Each function that takes ids, of the twin ``kind``: ``(its module, its name)``."""
    hot_path, name = request.param
    module: ModuleType = twin(hot_path, kind)
    return module, name


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize(("dtype", "count"), [
    ("int8", ISSUE_COUNT),  # issue 42's: int32 bytes 2**63 + 4 (negative), int64 2**64 + 8
    ("int64", MOST + 1),  # the first count refused, of numpy's usual dtype
    ("uint8", sys.maxsize),  # the most a Py_ssize_t counts
])
def test_too_many_ids(codec: tuple[ModuleType, str], width: int, dtype: str,
                      count: int) -> None:
    module, name = codec
    assert call_in_child(module.__name__, name, dtype, count, width) == too_many(count)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [32, 64])
def test_most_ids_are_not_refused(codec: tuple[ModuleType, str], width: int) -> None:
    """``MOST`` ids are taken: the memory for them is asked for (and not had: a plain
    ``MemoryError``, not the count's), so the bound is neither lower nor higher than said."""
    module, name = codec
    kind, message = call_in_child(module.__name__, name, "int8", MOST, width)
    if name == "ids_to_msgpack":  # more than an array holds: refused before any is packed
        assert [kind, message] == array_too_long(MOST)
        return
    assert kind == "MemoryError"
    assert message != too_many(MOST)[1]
    assert str(MOST) not in message


@pytest.mark.parametrize("width", [32, 64])
def test_ids_buffer_too_many(width: int) -> None:
    """tokcore.ids_buffer packs a value with pack_ids (the twin loaded): its error too."""
    child = CHILD.replace("func = getattr(import_module(module), name)",
                          "from types import SimpleNamespace\n"
                          "from tokcore import ids_buffer\n"
                          "func = lambda ids, width: ids_buffer(SimpleNamespace(ids=ids), "
                          "'ids', width=width)")
    done = subprocess.run([sys.executable, "-c", child, "tokcore", "ids_buffer", "int8",
                           str(ISSUE_COUNT), str(width)],
                          capture_output=True, text=True, env=_child_env(), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == too_many(ISSUE_COUNT)


def test_broadcast_ids_are_packed_below_the_bound() -> None:
    """The arrays these tests broadcast are ids like any other when few: pack_ids of 5 of
    them is struct's bytes (so the refusals above are of the count, not of the array)."""
    from tokcore import pack_ids

    ids = np.broadcast_to(np.int8(-3), (5,))
    assert pack_ids(ids) == struct.pack("<5i", *[-3] * 5)
    assert pack_ids(ids, width=64) == struct.pack("<5q", *[-3] * 5)


# --- more ids than a MessagePack array or bin holds ----------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_msgpack_count_limits(kind: str) -> None:
    """The check every writer of a count calls: the most an array32 or a bin32 says is
    taken, one more refused; the other formats take as many as a call does."""
    check_count = twin("wire", kind).check_count
    check_count(ARRAY_MOST, "msgpack")
    check_count(BIN_MOST, "msgpack_bin")
    for dst in ("int32", "b64", "json", "int64", "b64_int64"):
        check_count(MOST, dst)
    with pytest.raises(ValueError) as array_error:
        check_count(ARRAY_MOST + 1, "msgpack")
    with pytest.raises(ValueError) as bin_error:
        check_count(BIN_MOST + 1, "msgpack_bin")
    assert ["ValueError", str(array_error.value)] == array_too_long(ARRAY_MOST + 1)
    assert ["ValueError", str(bin_error.value)] == bin_too_long(BIN_MOST + 1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("dtype", ["int8", "int64"])
def test_ids_to_msgpack_more_than_an_array(kind: str, width: int, dtype: str) -> None:
    """2**32 ids (a broadcast buffer) are refused before they are packed (16 or 32 GB) or an
    output sized: the Cython twin cut the count to 0 in the array32 header."""
    module = twin("wire", kind)
    assert call_in_child(module.__name__, "ids_to_msgpack", dtype, ARRAY_MOST + 1,
                         width) == array_too_long(ARRAY_MOST + 1)


class _Sized:
    """A stand-in for the Python twin's writers: only its length is looked at before the
    refusal (a real list or bytes of 2**32 items would take 32 or 4 GB)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_python_writers_refuse_the_count() -> None:
    """The Python twin's writers check the count themselves (convert_ids reads the source
    whole into a list first, as for every conversion, then checks it before it writes):
    msgpack_text of 2**32 values, bin_text of 2**32 bytes (2**30 int32 ids) raised
    int.to_bytes' OverflowError before."""
    wire_py = twin("wire", "py")
    with pytest.raises(ValueError) as array_error:
        wire_py.msgpack_text(_Sized(ARRAY_MOST + 1))
    with pytest.raises(ValueError) as bin_error:
        wire_py.bin_text(_Sized(4 * (BIN_MOST + 1)))
    assert ["ValueError", str(array_error.value)] == array_too_long(ARRAY_MOST + 1)
    assert ["ValueError", str(bin_error.value)] == bin_too_long(BIN_MOST + 1)


CONVERT_CHILD = """
import json, mmap, sys
from importlib import import_module
module, src, dst, nbytes, width, head = sys.argv[1:]
# zeros no memory holds: a private anonymous mapping, read-only where nothing is written
# (each page read is the kernel's one zero page), else with the header written in front
head = bytes.fromhex(head)
prot = mmap.PROT_READ | (mmap.PROT_WRITE if head else 0)
data = mmap.mmap(-1, int(nbytes), flags=mmap.MAP_PRIVATE, prot=prot)
if head:
    data[:len(head)] = head
try:
    result = import_module(module).convert_ids(data, src, dst, width=int(width))
except BaseException as exc:
    print(json.dumps([type(exc).__name__, str(exc)]))
else:
    print(json.dumps(["returned", f"{type(result).__name__} of length {len(result)}"]))
"""


def convert_in_child(module: str, src: str, dst: str, nbytes: int, width: int,
                     head: bytes = b"") -> list[str]:
    """``module.convert_ids(data, src, dst, width=width)`` in a child process, ``data``
    ``nbytes`` zero bytes mapped (``head`` written in front); as ``call_in_child``."""
    done = subprocess.run(
        [sys.executable, "-c", CONVERT_CHILD, module, src, dst, str(nbytes), str(width),
         head.hex()], capture_output=True, text=True, env=_child_env(), check=False)
    assert done.returncode == 0, (
        f"{module}.convert_ids of {nbytes} bytes {src} -> {dst} ended the process with "
        f"{done.returncode}:\n{done.stderr[-3000:]}")
    said: list[str] = json.loads(done.stdout.splitlines()[-1])
    return said


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize(("src", "dst", "count"), [
    ("int32", "msgpack", ARRAY_MOST + 1),
    ("int64", "msgpack", ARRAY_MOST + 1),
    ("int32", "msgpack_bin", BIN_MOST + 1),
    ("int64", "msgpack_bin", BIN_MOST + 1),
])
def test_convert_ids_more_than_msgpack_holds(src: str, dst: str, count: int,
                                            width: int) -> None:
    """The Cython twin refuses a byte source's count before an output is sized or an id read
    (``width`` is the array's; a bin's ids are int32). The Python twin is left out here: it
    reads the source whole into a list first (32 GB), and its check after that is
    test_python_writers_refuse_the_count's and test_msgpack_count_limits'."""
    module = twin("wire", "c")
    expected = array_too_long(count) if dst == "msgpack" else bin_too_long(count)
    nbytes = count * (8 if src == "int64" else 4)
    assert convert_in_child(module.__name__, src, dst, nbytes, width) == expected


#: a MessagePack array of 2**30 ids (array32), more than a bin holds
BIG_ARRAY_HEAD = bytes((0xDD,)) + (BIN_MOST + 1).to_bytes(4, "big")


@pytest.mark.parametrize("kind", KINDS)
def test_msgpack_source_errors_come_before_the_count(kind: str) -> None:
    """A MessagePack array's count is a bound until it is read: its data's error comes
    first, on both twins (the Python twin reads the source before it writes), here a
    non-integer first item."""
    module = twin("wire", kind)
    said = convert_in_child(module.__name__, "msgpack", "msgpack_bin", 5 + BIN_MOST + 1, 32,
                            BIG_ARRAY_HEAD + b"\xc1")
    assert said == ["ValueError", "not a MessagePack array of int32 ids: expected an integer "
                    "at offset 5, found byte 0xc1"]


def test_msgpack_source_more_than_a_bin() -> None:
    """A well-formed array of 2**30 ids (fixint zeros) to a bin: the Cython twin reads it
    through, writing nothing, then refuses its count (the Python twin would make a list of
    2**30 ints first: its check is that of test_msgpack_count_limits)."""
    module = twin("wire", "c")
    said = convert_in_child(module.__name__, "msgpack", "msgpack_bin", 5 + BIN_MOST + 1, 32,
                            BIG_ARRAY_HEAD)
    assert said == bin_too_long(BIN_MOST + 1)
