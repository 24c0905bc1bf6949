"""Token ids <-> little-endian int32 (or int64) bytes: the pure-Python reference twin.

It leans on ``array.array`` (C loops inside the standard library) for speed and falls back
on a per-element scan only to name the offending index in an error. The argument checks
and error messages here are shared: the Cython twin imports them for its slow paths.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from operator import index as _index
from typing import Any, SupportsIndex

from .._args import Buffer, BytesLike
from ._width import INT32, IdWidth, Width, check_width

INT32_MIN = INT32.low
INT32_MAX = INT32.high
ID_BYTES = INT32.size  # an id is one little-endian int32 on the wire (int64: width=64)

LITTLE_ENDIAN_HOST = sys.byteorder == "little"

#: the most ids one call of a codec takes, at either width: 32 bytes an id bound the size of
#: every output of the wing (an int64 id takes 21 in JSON, 12 in base64 text) with what
#: surrounds the ids (JSON's brackets and the C writers' slack: 18), so no size the C twin
#: computes overflows a Py_ssize_t; more is ``too_many_error`` in both twins
MAX_IDS = sys.maxsize // 32

#: what ``pack_ids`` refuses outright: text and raw bytes are not id sequences
NOT_ID_SEQUENCES = (str, bytes, bytearray)

_INT_FORMATS = frozenset("bBhHiIlLqQnN")
_BYTE_ORDER_PREFIXES = frozenset("@=<>!")

#: token ids: integers (or anything with ``__index__``), or a buffer of them (numpy, array)
IdsArg = Iterable[SupportsIndex] | Buffer

# array typecode for (signed, itemsize) on this platform, e.g. (True, 4) -> "i"
_TYPECODES: dict[tuple[bool, int], str] = {}
for _code in "qlihbQLIHB":  # later (smaller, more usual) codes win on equal sizes
    _TYPECODES[(_code.islower(), array(_code).itemsize)] = _code
del _code


# --- error messages, shared by both twins -------------------------------------------------

def type_error(position: int, item: object) -> TypeError:
    return TypeError(
        f"ids[{position}] must be an integer, not {type(item).__name__}"
    )


def overflow_error(position: int, value: int | str, width: IdWidth = INT32) -> OverflowError:
    """``value``: the int, or its decimal text (as a JSON text wrote it), outside ``width``."""
    return OverflowError(
        f"ids[{position}] = {value} is outside the {width.name} range "
        f"[{width.low}, {width.high}]"
    )


def resized_error(before: int, after: int) -> RuntimeError:
    return RuntimeError(f"ids changed size during pack_ids (from {before} to {after})")


def too_many_error(count: int) -> MemoryError:
    """The error for more ids than a call takes (``MAX_IDS``): raised before any memory for
    them is asked for, by both twins, whatever the output's format and width."""
    return MemoryError(f"ids has {count} items, more than the {MAX_IDS} a call takes")


def _dtype_note(obj: object) -> str:
    """`` (numpy dtype <U3)`` for an object with a ``dtype``, else ``""`` (error paths only)."""
    try:
        dtype = obj.dtype  # type: ignore[attr-defined]
    except Exception:
        return ""
    return f" (numpy dtype {dtype})"


def unexportable_error(expected: str, obj: object, exc: BaseException) -> TypeError:
    """The ``TypeError`` for an object that has the buffer protocol but cannot export a
    buffer (numpy raises ``ValueError`` for datetime64 and timedelta64 arrays): it holds no
    integers, so it is a wrong type, as a float array is."""
    return TypeError(f"{expected}, not {type(obj).__name__}{_dtype_note(obj)}, which cannot "
                     f"export a buffer ({exc})")


def length_error(nbytes: int, width: IdWidth = INT32) -> ValueError:
    size = width.size
    return ValueError(
        f"{width.name} data must be a multiple of {size} bytes long, got {nbytes} "
        f"({nbytes % size} trailing byte(s) at offset {nbytes - nbytes % size})"
    )


# --- argument checks, shared by both twins -------------------------------------------------

def coerce_ids(ids: object) -> list[Any] | tuple[Any, ...] | memoryview:
    """Return ``ids`` as a list, a tuple or a one-dimensional integer memoryview.

    Lists and tuples come back as they are; buffers become memoryviews; any other iterable
    is materialised into a list. Everything else is a ``TypeError``.
    """
    if type(ids) is list or type(ids) is tuple:
        return ids
    if isinstance(ids, NOT_ID_SEQUENCES):
        raise TypeError(
            f"ids must be a sequence of integers, not {type(ids).__name__} "
            "(text and raw bytes are not token ids; use unpack_ids for int32 bytes)"
        )
    try:
        view = memoryview(ids)  # type: ignore[arg-type]
    except TypeError:
        pass
    except ValueError as exc:  # a buffer exporter that cannot export (datetime64 arrays)
        raise unexportable_error("ids must be integers", ids, exc) from None
    else:
        buffer_layout(view)
        return view
    try:  # list and tuple subclasses too: iteration is what they may redefine
        return list(ids)  # type: ignore[call-overload,no-any-return]
    except TypeError:
        if not isinstance(ids, Iterable):
            raise TypeError(
                f"ids must be a sequence of integers, not {type(ids).__name__}"
            ) from None
        raise


def buffer_layout(view: memoryview) -> tuple[bool, int, bool]:
    """``(signed, itemsize, little_endian)`` of an integer buffer, or an error."""
    fmt = view.format
    order = "@"
    if fmt and fmt[0] in _BYTE_ORDER_PREFIXES:
        order, fmt = fmt[0], fmt[1:]
    if len(fmt) != 1 or fmt not in _INT_FORMATS:
        raise TypeError(
            f"ids buffer must hold integers, not format {view.format!r}{_dtype_note(view.obj)}"
        )
    if view.ndim != 1:
        raise ValueError(f"ids buffer must be one-dimensional, not {view.ndim}-dimensional")
    little = LITTLE_ENDIAN_HOST if order in "@=" else order == "<"
    return fmt.islower(), view.itemsize, little


# --- the codec -----------------------------------------------------------------------------

def _check_each(ids: list[Any] | tuple[Any, ...] | array[int], size: int,
                width: IdWidth = INT32) -> None:
    """Raise the contract's error for the first bad element (the slow, exact path)."""
    for position in range(size):
        if len(ids) != size:
            raise resized_error(size, len(ids))
        item = ids[position]
        try:
            value = _index(item)
        except TypeError:
            raise type_error(position, item) from None
        if len(ids) != size:  # __index__ may have resized the list
            raise resized_error(size, len(ids))
        if not width.low <= value <= width.high:
            raise overflow_error(position, value, width)


def _buffer_values(view: memoryview) -> array[int]:
    """The integers of a one-dimensional buffer, in an array of the same type."""
    signed, itemsize, little = buffer_layout(view)
    values = array(_TYPECODES[(signed, itemsize)])
    values.frombytes(view.tobytes())  # tobytes follows strides, negative ones included
    if little != LITTLE_ENDIAN_HOST:
        values.byteswap()
    return values


def pack_ids(ids: IdsArg, *, width: Width = 32) -> bytes:
    """Token ids -> little-endian int32 bytes (4 bytes an id), or int64 with ``width=64``
    (8 bytes an id).

    Raises ``TypeError`` for an element that is not an integer (naming its index and type),
    for ``str``, ``bytes`` and ``bytearray`` (not id sequences) and for a buffer that is not
    of integers (naming its dtype); ``OverflowError`` for a value outside the width's range
    (naming its index and value); ``ValueError`` for a buffer of more than one dimension;
    ``RuntimeError`` for a list that an element's ``__index__`` resizes; ``MemoryError``
    for more than ``sys.maxsize // 32`` ids (a numpy array broadcast to that many: no output
    could hold them); ``TypeError`` or ``ValueError`` for a ``width`` other than 32 and 64.
    """
    spec = check_width(width)
    seq = coerce_ids(ids)
    if len(seq) > MAX_IDS:  # before a byte is asked for (as the Cython twin checks it)
        raise too_many_error(len(seq))
    if isinstance(seq, memoryview):
        signed, itemsize, little = buffer_layout(seq)
        if signed and itemsize == spec.size and little:
            return seq.tobytes()  # already the wire's integers: a copy is the whole job
        values: Any = _buffer_values(seq)
    else:
        values = seq
    size = len(values)
    try:
        packed = array(spec.typecode, values)
    except (TypeError, OverflowError, IndexError) as exc:
        _check_each(values, size, spec)
        if type(exc) is IndexError:  # it shrank under array() (another thread), and grew back
            raise resized_error(size, len(values)) from None
        raise  # not reached: the scan raises the precise error
    if len(values) != size:
        raise resized_error(size, len(values))
    if not LITTLE_ENDIAN_HOST:
        packed.byteswap()
    return packed.tobytes()


def unpack_ids(data: BytesLike, *, width: Width = 32) -> list[int]:
    """Little-endian int32 bytes (int64 with ``width=64``) -> a list of Python ints.

    Raises ``TypeError`` for an object that is not bytes-like; ``ValueError`` when the length
    is not a multiple of 4 (8 for int64; naming the trailing bytes' offset); ``TypeError``
    or ``ValueError`` for a ``width`` other than 32 and 64.
    """
    spec = check_width(width)
    if isinstance(data, str):
        raise TypeError(f"{spec.name} data must be a bytes-like object, not str")
    try:
        view = memoryview(data)
    except ValueError as exc:  # a buffer exporter that cannot export (datetime64 arrays)
        raise unexportable_error(f"{spec.name} data must be a bytes-like object", data,
                                 exc) from None
    with view:
        nbytes = view.nbytes
        if not nbytes:  # as PyBuffer_IsContiguous (the Cython twin) has it, empty is
            return []   # contiguous, even where memoryview.c_contiguous says otherwise
        if not view.c_contiguous:
            raise TypeError(f"{spec.name} data must be a contiguous bytes-like object")
        if nbytes % spec.size:
            raise length_error(nbytes, spec)
        values = array(spec.typecode)
        values.frombytes(view.cast("B"))  # frombytes wants a byte format
    if not LITTLE_ENDIAN_HOST:
        values.byteswap()
    return values.tolist()
