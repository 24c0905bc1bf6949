"""The widths of token ids, int32 (every codec's default) and int64, and their one check.

Every codec of the wing takes ``width=32`` or ``width=64`` (keyword-only): the ids are
little-endian int32 or int64 bytes on the wire, and the values a reader accepts are that
type's. Both twins check the argument here, so a bad one is the same error in each.
"""

from __future__ import annotations

from array import array
from typing import Literal, NamedTuple

from .._args import shown

#: the ``width=`` of the id codecs: the bits of one id on the wire
Width = Literal[32, 64]


class IdWidth(NamedTuple):
    """What a width means: its size and range, and the names it goes by."""

    bits: int  # 32 or 64, as ``width=`` says it
    size: int  # bytes an id takes on the wire
    low: int  # the range of its values
    high: int
    typecode: str  # array.array's code of that size
    name: str  # the C type's name, in messages and the byte formats' names


INT32 = IdWidth(32, 4, -(2**31), 2**31 - 1, "i", "int32")
INT64 = IdWidth(64, 8, -(2**63), 2**63 - 1, "q", "int64")
#: each width by its ``width=`` value
WIDTHS = {32: INT32, 64: INT64}

for _width in WIDTHS.values():  # the wire's sizes are array's on every supported platform
    if array(_width.typecode).itemsize != _width.size:
        raise ImportError(f"array({_width.typecode!r}) is not {_width.size} bytes here")
del _width


def check_width(value: object) -> IdWidth:
    """``width=``: the int 32 or 64 (not a bool), else a ``TypeError`` (another type) or a
    ``ValueError`` (another int)."""
    if type(value) is not int:
        raise TypeError(f"width must be 32 or 64 (an int), not {type(value).__name__}")
    spec = WIDTHS.get(value)
    if spec is None:
        raise ValueError(f"width must be 32 or 64, not {shown(value)}")
    return spec
