"""Fuzz the base64 drop-ins: both twins and the stdlib base64 module on the same arguments.

The contract is "exactly the base64 module's signatures, results and exceptions", so the
stdlib is a third twin here: every function, every option (altchars of any length and type,
validate), every argument type (bytes, bytearray, memoryview, array, str with or without
non-ASCII), and data from valid encodings with every kind of garbage spliced in.
"""

from __future__ import annotations

import array
import base64
import sys
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

with instrumented(__name__ == "__main__" and "--random" not in sys.argv, own=["ids._b64_py"]):
    TWINS = load_twins("ids._b64")

# The stdlib decides, input by input, what the drop-ins must do: return its value, or raise
# its exception, of exactly its type with exactly its message: binascii.Error (a
# ValueError), TypeError, AssertionError (altchars whose length is not 2), BufferError (a
# non-contiguous view), OverflowError (a validate flag past C int range).
GARBAGE = [b"=", b"==", b"===", b"\n", b"\r\n", b" ", b"\t", b"\0", b"\xff", b"\x80", b"-",
           b"_", b"+", b"/", b"*", b"A=A", b"====", b"\\", b"\xc3\xa9"]


class Index:
    def __index__(self) -> int:
        return 1


class IntOnly:
    def __int__(self) -> int:
        return 1


# binascii reads validate (strict_mode) as a C int through __index__: None, str, float and
# __int__-only objects are a TypeError, 2**40 an OverflowError, any other int a flag
VALIDATE_VALUES: list[Any] = [False, True, False, True, 0, 1, -1, 2, None, "yes", 1.5, 2**40,
                              Index(), IntOnly()]


def draw_data(draw: Draw) -> bytes:
    """Bytes to decode: raw, or a valid encoding with garbage spliced in."""
    mode = draw.int(0, 4)
    raw = draw.bytes(draw.int(0, 200))
    if mode == 0:
        return raw
    encoded = bytearray(base64.b64encode(raw) if mode != 2 else base64.urlsafe_b64encode(raw))
    if mode == 3:  # drop or add padding and tail characters
        cut = draw.int(0, min(4, len(encoded)))
        return bytes(encoded[:len(encoded) - cut]) + draw.choice([b"", b"=", b"==", b"A"])
    if mode == 4:
        for _ in range(draw.int(1, 4)):
            where = draw.int(0, len(encoded))
            encoded[where:where] = draw.choice(GARBAGE)
    return bytes(encoded)


def as_arg(draw: Draw, data: bytes) -> Any:
    kind = draw.int(0, 7)
    if kind == 1:
        return bytearray(data)
    if kind == 2:
        return memoryview(data)
    if kind == 3:
        return data.decode("latin-1")  # str: non-ASCII characters included
    if kind == 4:
        return data.decode("ascii", "ignore")
    if kind == 5 and len(data) % 4 == 0:
        return array.array("i", data)  # a bytes-like object whose items are not bytes
    if kind == 6:
        return memoryview(data)[::2] if len(data) > 2 else 12  # not contiguous / not bytes
    return data


def draw_altchars(draw: Draw) -> Any:
    kind = draw.int(0, 6)
    if kind <= 2:
        return None
    if kind == 3:
        return draw.bytes(2).ljust(2, b"-")
    if kind == 4:
        return draw.choice([b"-_", b"+/", b"..", b"-", b"-_.", b"", "-_", "é_", bytearray(b"*!")])
    if kind == 5:
        return memoryview(b"~!")
    return draw.bytes(draw.int(0, 3))


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    which = draw.int(0, 5)
    payload = draw_data(draw) if which >= 3 else draw.bytes(draw.int(0, 300))
    arg = as_arg(draw, payload)
    if which == 0:
        altchars = draw_altchars(draw)
        call = (lambda m: m.b64encode(arg)) if altchars is None else \
            (lambda m: m.b64encode(arg, altchars))
    elif which == 1:
        call = lambda m: m.standard_b64encode(arg)  # noqa: E731
    elif which == 2:
        call = lambda m: m.urlsafe_b64encode(arg)  # noqa: E731
    elif which == 3:
        altchars = draw_altchars(draw)
        validate: Any = draw.choice(VALIDATE_VALUES)
        use_keyword = draw.bool()
        if use_keyword:
            call = lambda m: m.b64decode(arg, altchars=altchars, validate=validate)  # noqa: E731
        else:
            call = lambda m: m.b64decode(arg, altchars, validate)  # noqa: E731
    elif which == 4:
        call = lambda m: m.standard_b64decode(arg)  # noqa: E731
    else:
        call = lambda m: m.urlsafe_b64decode(arg)  # noqa: E731
    check_dropin(call, f"b64 function {which} on {type(arg).__name__}")


def check_dropin(call: Any, what: str) -> None:
    """Both twins do exactly what the stdlib does with the same arguments."""
    expected = outcome(lambda: call(base64))
    if isinstance(expected, Raised):
        allowed = [Allow(expected.type, str(expected.exc), "==")]
    else:
        allowed = []
    result = same_outcome(TWINS, call, allowed, what, must_raise=bool(allowed))
    if not allowed and not equal(result, expected):
        fail(f"{what}: {result!r}, the stdlib gives {expected!r}")


if __name__ == "__main__":
    fuzz_main("b64", test_one_input)
