"""Fuzz the fused pair ids_to_b64 / b64_to_ids: both twins and their definition.

The contract defines them by composition: ``ids_to_b64(ids)`` is
``base64.b64encode(pack_ids(ids)).decode("ascii")`` and ``b64_to_ids(s, validate=v)`` is
``unpack_ids(base64.b64decode(s, validate=v))``, "with the same errors", at either width
(``width=64`` for a first byte of 192 or more, as in the ids harness). That composition
(stdlib base64 and the reference ids twin) is the third party to every comparison; the ids
inputs come from the ids harness (every container, hostile items, int32 and int64 edges).
"""

from __future__ import annotations

import base64
import sys
from types import SimpleNamespace
from typing import Any

from _parity import (
    Allow,
    Draw,
    Raised,
    equal,
    fail,
    fuzz_main,
    instrumented,
    load_twins,
    outcome,
    same_outcome,
)

with instrumented(__name__ == "__main__" and "--random" not in sys.argv,
                  own=["ids._b64_py", "ids._pack_py"]):
    TWINS = load_twins("ids._b64")
    IDS_PY = load_twins("ids._pack")["py"]

from fuzz_b64 import VALIDATE_VALUES  # noqa: E402
from fuzz_ids import build_ids, draw_kind, draw_values  # noqa: E402

COMPOSED = SimpleNamespace(
    ids_to_b64=lambda ids, width=32: base64.b64encode(
        IDS_PY.pack_ids(ids, width=width)).decode("ascii"),
    b64_to_ids=lambda s, validate=False, width=32: IDS_PY.unpack_ids(
        base64.b64decode(s, validate=validate), width=width),
)
GARBAGE = [b"=", b"==", b"\n", b" ", b"\0", b"\xff", b"-", b"_", b"*", b"A", b"AA"]


def draw_text(draw: Draw, width: int = 32) -> Any:
    mode = draw.int(0, 3)
    count = draw.int(0, 64)
    size = width // 8
    raw = draw.bytes(count * size + (draw.int(0, size - 1) if mode == 1 else 0))
    text = bytearray(base64.b64encode(raw)) if mode != 3 else bytearray(raw)
    if mode == 2:
        for _ in range(draw.int(1, 3)):
            where = draw.int(0, len(text))
            text[where:where] = draw.choice(GARBAGE)
    kind = draw.int(0, 4)
    if kind == 0:
        return text.decode("latin-1")
    if kind == 1:
        return bytes(text)
    if kind == 2:
        return text
    if kind == 3:
        return memoryview(bytes(text))
    return draw.choice([None, 5, ["AAAA"], text.decode("latin-1") + "é"])


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    kind, width = draw_kind(draw, 12)
    wide: dict[str, Any] = {"width": 64} if width == 64 else {}  # (int32: the default)
    values = draw_values(draw)
    make_ids, _ = build_ids(draw, kind, values, width)
    check_composed(lambda m: m.ids_to_b64(make_ids(), **wide), f"ids_to_b64 kind {kind} {wide}")
    text = draw_text(draw, width)
    validate: Any = draw.choice([*VALIDATE_VALUES, "default"])
    if validate == "default":
        call = lambda m: m.b64_to_ids(text, **wide)  # noqa: E731
    else:
        call = lambda m: m.b64_to_ids(text, validate=validate, **wide)  # noqa: E731
    check_composed(call, f"b64_to_ids({type(text).__name__}) {wide}")


def check_composed(call: Any, what: str) -> None:
    """Both twins do exactly what the composition does: its value, or its exception (the
    same type and message: binascii.Error, TypeError, ValueError, OverflowError from the
    decode; OverflowError, TypeError, ValueError, RuntimeError, HostileError from the
    packing, as the ids harness derives them)."""
    expected = outcome(lambda: call(COMPOSED))
    if isinstance(expected, Raised):
        allowed = [Allow(expected.type, str(expected.exc), "==")]
    else:
        allowed = []
    result = same_outcome(TWINS, call, allowed, what, must_raise=bool(allowed))
    if not allowed and not equal(result, expected):
        fail(f"{what}: {result!r}, the composition gives {expected!r}")


if __name__ == "__main__":
    fuzz_main("fused", test_one_input)
