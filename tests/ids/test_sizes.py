"""More ids than any output could hold: every codec that takes ids, on both twins and at
both widths, raises the same ``MemoryError`` before it sizes an output (issue 42 item 2: the
Cython twin's ``count * 8`` wrapped to a 8-byte result, ``count * 4`` to a crash).

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
