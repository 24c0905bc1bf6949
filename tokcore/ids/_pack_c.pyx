# cython: language_level=3
# cython: freethreading_compatible=True
"""Token ids <-> little-endian int32 (or int64) bytes: the Cython twin of ``_pack_py``.

Argument checks and error messages come from ``_pack_py`` (they are off the hot path), so
the two twins accept, return and raise the same things.
"""

from cpython.buffer cimport (
    PyBUF_RECORDS_RO, PyBuffer_IsContiguous, PyBuffer_Release, PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_New
from cpython.number cimport PyNumber_Index
from cpython.object cimport PyObject
from libc.stdint cimport (
    int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
)
from libc.string cimport memcpy

from tokcore._freethreading cimport tok_cs, tok_cs_begin, tok_cs_end

from tokcore.ids._pack_py import (
    LITTLE_ENDIAN_HOST, MAX_IDS, _buffer_values, buffer_layout, coerce_ids, length_error,
    overflow_error, resized_error, too_many_error, type_error, unexportable_error,
)
from tokcore.ids._width import INT32, INT64, check_width

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS_PTR "PySequence_Fast_ITEMS"(object o)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef extern from "_byteorder.h" nogil:
    void tok_store_id(unsigned char *p, int64_t v, int width) noexcept

cdef extern from "_intfast.h":
    const char *TOK_INTFAST_KIND
    Py_ssize_t tok_pack_compact(PyObject **items, Py_ssize_t start, Py_ssize_t n,
                                unsigned char *out, int width) noexcept
    enum: TOK_ID_CACHE_LIMIT
    enum: TOK_ID_CACHE_ENABLED
    int tok_fill_ids(PyObject **table, const unsigned char *src, Py_ssize_t n,
                     PyObject **items, int width) except -1

cdef extern from "_wire_width.h" nogil:
    size_t tok_narrow_ids(const unsigned char *src, size_t n, unsigned char *out)

cdef enum:
    ID_BYTES = 4
    ID64_BYTES = 8
    NOGIL_MIN_BYTES = 64 * 1024  # below this, dropping the GIL costs more than it frees

cdef int64_t I32_MIN = -2147483648
cdef int64_t I32_MAX = 2147483647
cdef uint64_t I64_MAX = 9223372036854775807ULL


cdef int width_bits(object width) except -1:
    """``width=`` as its bits, 32 or 64; ``_width.check_width``'s errors for anything else
    (the one check: see _pack_c.pxd)."""
    if type(width) is int:
        if width == 32:
            return 32
        if width == 64:
            return 64
    return check_width(width).bits

if <Py_ssize_t>TOK_MAX_IDS != MAX_IDS:
    raise ImportError(f"_intfast.h's TOK_MAX_IDS is not _pack_py.MAX_IDS ({MAX_IDS})")


cdef int too_many(Py_ssize_t count) except -1:
    """``_pack_py.too_many_error`` for ``count`` ids (more than ``TOK_MAX_IDS``): every
    codec that takes ids checks their count against it before it sizes an output."""
    raise too_many_error(count)


BUILD_INFO = {
    "int read": TOK_INTFAST_KIND.decode(),
    "id cache": (f"ints 0..{TOK_ID_CACHE_LIMIT - 1}" if TOK_ID_CACHE_ENABLED else "off"),
}


# --- pack: lists and tuples ----------------------------------------------------------------

cdef int64_t _slow_value(object seq, Py_ssize_t size, Py_ssize_t i, object item,
                         bint wide) except? -1:
    """The value of an item that is not a small exact int, within int32 (int64 where
    ``wide``: that width's OverflowError outside it); may run Python code."""
    cdef int overflow = 0
    cdef long long value
    cdef tok_cs cs
    cdef Py_ssize_t now
    try:
        number = PyNumber_Index(item)
    except TypeError:
        raise type_error(i, item) from None
    tok_cs_begin(&cs, seq)
    now = PySequence_Fast_GET_SIZE(seq)
    tok_cs_end(&cs)
    if now != size:  # __index__ resized the list under us
        raise resized_error(size, now)
    value = PyLong_AsLongLongAndOverflow(number, &overflow)
    if overflow or (not wide and (value < I32_MIN or value > I32_MAX)):
        raise overflow_error(i, number, INT64 if wide else INT32)
    return <int64_t>value


cdef Py_ssize_t pack_block(object seq, Py_ssize_t size, Py_ssize_t start, Py_ssize_t count,
                           unsigned char *block, int width, int64_t *wide) except -1:
    """``seq[start:start + count]`` (``seq`` a list or tuple of ``size`` items) into
    ``block``, ``width`` little-endian bytes an id (4 or 8), with ``pack_ids``' errors at
    that width; returns ``count``. Where ``wide`` is given (``width`` 4: the JSON and
    MessagePack writers at width 64, which write the ids within int32 with their int32
    code), the ids are read within int64 and the packing stops at the first outside int32:
    returns how many were packed before it, its value in ``*wide``. The writers pack a
    block at a time with it, never a whole bytes object (``_pack_sequence`` keeps its own
    copies of the loop for ``pack_ids``).
    (``_b64_c`` keeps its own copy of this loop, inlined: through this call it cost one
    instruction an id more, 6 % of ``ids_to_b64``.)"""
    cdef tok_cs cs
    cdef Py_ssize_t i = 0, now
    cdef int64_t value
    cdef object item = None
    # Without the GIL another thread may resize the list: its size and items are read under a
    # critical section on it (nothing inside runs Python code or fails, so it is never
    # suspended), and an item for the slow path leaves it as a reference of ours. With the
    # GIL the section is a no-op.
    while True:
        tok_cs_begin(&cs, seq)
        now = PySequence_Fast_GET_SIZE(seq)  # another thread may have resized it meanwhile
        if now == size:
            # common path in C (_intfast.h): exact ints of one digit, always inside int32;
            # the items array is read anew each time: the slow path may resize and move it.
            # Each width a constant: the loop with the width an argument cost one
            # instruction an id more (pack_ids 40k uniform: 14.03 against 13.03)
            if width == ID64_BYTES:
                i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq) + start, i, count, block,
                                     ID64_BYTES)
            else:
                i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq) + start, i, count, block,
                                     ID_BYTES)
            if i < count:
                item = <object>PySequence_Fast_ITEMS_PTR(seq)[start + i]
        tok_cs_end(&cs)
        if now != size:
            raise resized_error(size, now)
        if i == count:
            return count
        value = _slow_value(seq, size, start + i, item, width == ID64_BYTES or wide != NULL)
        item = None  # dropped here, never inside the section
        if wide != NULL and (value < I32_MIN or value > I32_MAX):
            wide[0] = value
            return i
        tok_store_id(block + i * width, value, width)
        i += 1


cdef bytes _pack_sequence(object seq, int width):
    """``seq`` is a list or a tuple: its ids as bytes of ``width`` bytes an id."""
    cdef tok_cs cs
    cdef Py_ssize_t i = 0, now
    cdef int64_t value
    cdef object item = None
    tok_cs_begin(&cs, seq)
    cdef Py_ssize_t size = PySequence_Fast_GET_SIZE(seq)
    tok_cs_end(&cs)
    if size > TOK_MAX_IDS:
        too_many(size)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, size * width)
    cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(result)
    if width == ID64_BYTES:
        # int64: its own loop too: through pack_block the same instructions (14.05 an id)
        # ran 0.90x the time of the loop before the widths were merged (pack_ids width=64
        # 40k uniform, 43.6 against 39.2 us, bench/compare.py over 3 rounds). One loop with
        # a fused width tag (a copy a width, the width a constant) counted 14.02 and 14.05.
        while True:
            tok_cs_begin(&cs, seq)
            now = PySequence_Fast_GET_SIZE(seq)
            if now == size:
                i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq), i, size, out, ID64_BYTES)
                if i < size:
                    item = <object>PySequence_Fast_ITEMS_PTR(seq)[i]
            tok_cs_end(&cs)
            if now != size:
                raise resized_error(size, now)
            if i == size:
                return result
            value = _slow_value(seq, size, i, item, True)
            item = None  # dropped here, never inside the section
            tok_store_id(out + i * ID64_BYTES, value, ID64_BYTES)
            i += 1
    # int32: pack_block's loop, kept: through pack_block(seq, size, 0, size, out, ID_BYTES,
    # NULL), pack_ids 40k uniform cost 14.02 instructions an id against this copy's 13.02
    while True:
        tok_cs_begin(&cs, seq)
        now = PySequence_Fast_GET_SIZE(seq)
        if now == size:
            i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq), i, size, out, ID_BYTES)
            if i < size:
                item = <object>PySequence_Fast_ITEMS_PTR(seq)[i]
        tok_cs_end(&cs)
        if now != size:
            raise resized_error(size, now)
        if i == size:
            return result
        value = _slow_value(seq, size, i, item, False)
        item = None  # dropped here, never inside the section
        tok_store_id(out + i * ID_BYTES, value, ID_BYTES)
        i += 1


# --- pack: integer buffers -----------------------------------------------------------------

ctypedef fused any_int:
    int8_t
    uint8_t
    int16_t
    uint16_t
    int32_t
    uint32_t
    int64_t
    uint64_t


cdef inline Py_ssize_t _convert(const char *src, Py_ssize_t stride, Py_ssize_t size,
                                unsigned char *out, any_int kind, int width) noexcept nogil:
    """Native-order integers -> ids of ``width`` LE bytes (4 or 8: a constant where it is
    inlined); the index of the first out-of-range one, or -1."""
    cdef Py_ssize_t i
    cdef any_int value
    for i in range(size):
        memcpy(&value, src + i * stride, sizeof(any_int))  # no alignment assumed
        if any_int is uint8_t or any_int is uint16_t or any_int is int8_t or any_int is int16_t:
            pass  # always fits
        elif any_int is uint32_t or any_int is uint64_t:
            if <uint64_t>value > (I64_MAX if width == ID64_BYTES else <uint64_t>I32_MAX):
                return i
        elif any_int is int32_t:
            pass  # fits both widths
        else:
            if width == ID_BYTES and (<int64_t>value < I32_MIN or <int64_t>value > I32_MAX):
                return i
        tok_store_id(out + i * width, <int64_t>value, width)
    return -1


cdef Py_ssize_t _convert_width(const char *src, Py_ssize_t stride, Py_ssize_t size,
                               unsigned char *out, bint signed, Py_ssize_t itemsize,
                               int width) noexcept nogil:
    if signed:
        if itemsize == 1: return _convert(src, stride, size, out, <int8_t>0, width)
        if itemsize == 2: return _convert(src, stride, size, out, <int16_t>0, width)
        if itemsize == 4: return _convert(src, stride, size, out, <int32_t>0, width)
        return _convert(src, stride, size, out, <int64_t>0, width)
    if itemsize == 1: return _convert(src, stride, size, out, <uint8_t>0, width)
    if itemsize == 2: return _convert(src, stride, size, out, <uint16_t>0, width)
    if itemsize == 4: return _convert(src, stride, size, out, <uint32_t>0, width)
    return _convert(src, stride, size, out, <uint64_t>0, width)


cdef Py_ssize_t _convert_any(const char *src, Py_ssize_t stride, Py_ssize_t size,
                             unsigned char *out, bint signed, Py_ssize_t itemsize,
                             bint wide) noexcept nogil:
    if wide:  # each width a constant, folded in its copy of the loops
        return _convert_width(src, stride, size, out, signed, itemsize, ID64_BYTES)
    return _convert_width(src, stride, size, out, signed, itemsize, ID_BYTES)


cdef bytes _pack_buffer(object view, bint wide=False):
    """``view`` is a one-dimensional integer memoryview (checked by ``coerce_ids``): its ids
    as int32 bytes, or int64 where ``wide``."""
    signed, itemsize, little = buffer_layout(view)
    if len(view) > TOK_MAX_IDS:  # before anything is asked for (a broadcast numpy array)
        too_many(len(view))
    if little != LITTLE_ENDIAN_HOST:
        view = memoryview(_buffer_values(view))  # rare: swap into native order first
    cdef Py_buffer buf
    cdef Py_ssize_t bad = -1, size, stride
    cdef size_t fit
    cdef bytes result
    cdef unsigned char *out
    cdef const char *src
    cdef bint is_signed = signed
    PyObject_GetBuffer(view, &buf, PyBUF_RECORDS_RO)
    try:
        size = buf.shape[0]
        src = <const char *>buf.buf
        stride = buf.strides[0]
        if wide and is_signed and buf.itemsize == ID64_BYTES and stride == ID64_BYTES \
                and LITTLE_ENDIAN_HOST:
            return PyBytes_FromStringAndSize(src, size * ID64_BYTES)  # the wire's already
        result = PyBytes_FromStringAndSize(NULL, size * (ID64_BYTES if wide else ID_BYTES))
        out = <unsigned char *>PyBytes_AS_STRING(result)
        if not wide and is_signed and buf.itemsize == ID64_BYTES and stride == ID64_BYTES \
                and LITTLE_ENDIAN_HOST:
            # numpy's int64, the common input: narrowed eight a step, each checked
            if size * ID64_BYTES >= NOGIL_MIN_BYTES:
                with nogil:
                    fit = tok_narrow_ids(<const unsigned char *>src, <size_t>size, out)
            else:
                fit = tok_narrow_ids(<const unsigned char *>src, <size_t>size, out)
            bad = -1 if fit == <size_t>size else <Py_ssize_t>fit
        elif buf.itemsize * size >= NOGIL_MIN_BYTES:
            with nogil:
                bad = _convert_any(src, stride, size, out, is_signed, buf.itemsize, wide)
        else:
            bad = _convert_any(src, stride, size, out, is_signed, buf.itemsize, wide)
        if bad >= 0:
            raw = PyBytes_FromStringAndSize(src + bad * stride, buf.itemsize)
            raise overflow_error(bad, int.from_bytes(raw, "little" if LITTLE_ENDIAN_HOST
                                                     else "big", signed=signed),
                                 INT64 if wide else INT32)
    finally:
        PyBuffer_Release(&buf)
    return result


def pack_ids(ids, *, width=32):
    """Token ids -> little-endian int32 bytes (4 bytes an id), or int64 with ``width=64``."""
    cdef bint wide = width_bits(width) == 64
    if type(ids) is list or type(ids) is tuple:
        return _pack_sequence(ids, ID64_BYTES if wide else ID_BYTES)
    seq = coerce_ids(ids)
    if isinstance(seq, memoryview):
        return _pack_buffer(seq, wide)
    return _pack_sequence(seq, ID64_BYTES if wide else ID_BYTES)


# --- unpack --------------------------------------------------------------------------------

# One shared int object per id below the limit, made on first use and kept (ints are
# immutable, so sharing them is safe): the table is TOK_ID_CACHE_LIMIT pointers (2 MiB
# for 2**18) and holds at most that many ints (about 8 MiB when every id has been seen).
cdef PyObject *_id_objects[TOK_ID_CACHE_LIMIT]


cdef PyObject **shared_id_objects() noexcept:
    """The table itself, for the other modules that make id ints (see _pack_c.pxd)."""
    return _id_objects


def unpack_ids(data, *, width=32):
    """Little-endian int32 bytes (int64 with ``width=64``) -> a list of Python ints."""
    cdef bint wide = width_bits(width) == 64
    spec = INT64 if wide else INT32
    if isinstance(data, str):
        raise TypeError(f"{spec.name} data must be a bytes-like object, not str")
    cdef Py_buffer buf
    cdef Py_ssize_t size, item = ID64_BYTES if wide else ID_BYTES
    cdef const unsigned char *src
    try:
        PyObject_GetBuffer(data, &buf, PyBUF_RECORDS_RO)
    except ValueError as exc:  # a buffer exporter that cannot export (datetime64 arrays)
        raise unexportable_error(f"{spec.name} data must be a bytes-like object", data,
                                 exc) from None
    try:
        if not PyBuffer_IsContiguous(&buf, b'C'):
            raise TypeError(f"{spec.name} data must be a contiguous bytes-like object")
        if buf.len % item:
            raise length_error(buf.len, spec)
        size = buf.len // item
        src = <const unsigned char *>buf.buf
        result = PyList_New(size)
        if wide:  # each width a constant (tok_fill_ids is inlined, one loop a width)
            tok_fill_ids(_id_objects, src, size, PySequence_Fast_ITEMS_PTR(result), ID64_BYTES)
        else:
            tok_fill_ids(_id_objects, src, size, PySequence_Fast_ITEMS_PTR(result), ID_BYTES)
    finally:
        PyBuffer_Release(&buf)
    return result
