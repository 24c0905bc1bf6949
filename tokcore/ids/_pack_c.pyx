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

cdef extern from "_intfast.h":
    const char *TOK_INTFAST_KIND
    Py_ssize_t tok_pack_compact(PyObject **items, Py_ssize_t start, Py_ssize_t n,
                                unsigned char *out) noexcept
    Py_ssize_t tok_pack_compact64(PyObject **items, Py_ssize_t start, Py_ssize_t n,
                                  unsigned char *out) noexcept
    void tok_store_le32(unsigned char *p, int32_t v) noexcept nogil
    void tok_store_le64(unsigned char *p, int64_t v) noexcept nogil
    enum: TOK_ID_CACHE_LIMIT
    enum: TOK_ID_CACHE_ENABLED
    int tok_fill_ids(PyObject **table, const unsigned char *src, Py_ssize_t n,
                     PyObject **items) except -1
    int tok_fill_ids64(PyObject **table, const unsigned char *src, Py_ssize_t n,
                       PyObject **items) except -1

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


cdef bytes _pack_sequence(object seq):
    """``seq`` is a list or a tuple."""
    cdef tok_cs cs
    cdef Py_ssize_t i = 0, now
    cdef long value
    cdef object item = None
    # Without the GIL another thread may resize the list: its size and items are read under a
    # critical section on it (nothing inside runs Python code or fails, so it is never
    # suspended), and an item for the slow path leaves it as a reference of ours. With the
    # GIL the section is a no-op.
    tok_cs_begin(&cs, seq)
    cdef Py_ssize_t size = PySequence_Fast_GET_SIZE(seq)
    tok_cs_end(&cs)
    if size > TOK_MAX_IDS:
        too_many(size)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, size * ID_BYTES)
    cdef unsigned char *out = <unsigned char *>PyBytes_AS_STRING(result)
    while True:
        tok_cs_begin(&cs, seq)
        now = PySequence_Fast_GET_SIZE(seq)  # another thread may have resized it meanwhile
        if now == size:
            # common path in C: exact ints of one internal digit (|v| < 2**30, always in range)
            i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq), i, size, out)
            if i < size:  # the items array is read anew: the slow path may move it
                item = <object>PySequence_Fast_ITEMS_PTR(seq)[i]
        tok_cs_end(&cs)
        if now != size:
            raise resized_error(size, now)
        if i == size:
            return result
        value = _slow_value(seq, size, i, item, False)
        item = None  # dropped here, never inside the section
        tok_store_le32(out + i * ID_BYTES, <int32_t>value)
        i += 1


cdef int pack_block(object seq, Py_ssize_t size, Py_ssize_t start, Py_ssize_t count,
                    unsigned char *block) except -1:
    """``seq[start:start + count]`` (``seq`` a list or tuple of ``size`` items) into
    ``block``, 4 little-endian bytes an id, with ``pack_ids``' errors: the JSON and
    MessagePack writers pack a block at a time, never a whole bytes object. (``_b64_c``
    keeps its own copy of this loop, inlined: through this call it cost one instruction an
    id more, 6 % of ``ids_to_b64``.)"""
    cdef tok_cs cs  # a critical section on the list without the GIL, as _pack_sequence's
    cdef Py_ssize_t i = 0, now
    cdef long value
    cdef object item = None
    while True:
        tok_cs_begin(&cs, seq)
        now = PySequence_Fast_GET_SIZE(seq)  # another thread may have resized it
        if now == size:
            # common path in C (_intfast.h): exact ints of one digit, always inside int32;
            # the items array is read anew each time: the slow path may resize and move it
            i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq) + start, i, count, block)
            if i < count:
                item = <object>PySequence_Fast_ITEMS_PTR(seq)[start + i]
        tok_cs_end(&cs)
        if now != size:
            raise resized_error(size, now)
        if i == count:
            return 0
        value = _slow_value(seq, size, start + i, item, False)
        item = None  # dropped here, never inside the section
        tok_store_le32(block + i * ID_BYTES, <int32_t>value)
        i += 1


cdef int pack_block64(object seq, Py_ssize_t size, Py_ssize_t start, Py_ssize_t count,
                      unsigned char *block) except -1:
    """``pack_block`` for int64 ids: 8 little-endian bytes an id (``pack_ids(ids,
    width=64)`` packs a whole list with it)."""
    cdef tok_cs cs
    cdef Py_ssize_t i = 0, now
    cdef int64_t value
    cdef object item = None
    while True:
        tok_cs_begin(&cs, seq)
        now = PySequence_Fast_GET_SIZE(seq)
        if now == size:
            i = tok_pack_compact64(PySequence_Fast_ITEMS_PTR(seq) + start, i, count, block)
            if i < count:
                item = <object>PySequence_Fast_ITEMS_PTR(seq)[start + i]
        tok_cs_end(&cs)
        if now != size:
            raise resized_error(size, now)
        if i == count:
            return 0
        value = _slow_value(seq, size, start + i, item, True)
        item = None  # dropped here, never inside the section
        tok_store_le64(block + i * ID64_BYTES, value)
        i += 1


cdef Py_ssize_t pack_block_wide(object seq, Py_ssize_t size, Py_ssize_t start,
                                Py_ssize_t count, unsigned char *block,
                                int64_t *wide) except -1:
    """``pack_block`` for ids within int64 written as int32 where they fit (the JSON and
    MessagePack writers at width 64, which write those with their int32 code): the ids of
    ``seq[start:start + count]`` into ``block`` (4 bytes an id) until one outside int32;
    returns how many (``count``: all), that one's value in ``*wide``. The errors are
    ``pack_ids``' at width 64."""
    cdef tok_cs cs
    cdef Py_ssize_t i = 0, now
    cdef int64_t value
    cdef object item = None
    while True:
        tok_cs_begin(&cs, seq)
        now = PySequence_Fast_GET_SIZE(seq)
        if now == size:
            i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq) + start, i, count, block)
            if i < count:
                item = <object>PySequence_Fast_ITEMS_PTR(seq)[start + i]
        tok_cs_end(&cs)
        if now != size:
            raise resized_error(size, now)
        if i == count:
            return count
        value = _slow_value(seq, size, start + i, item, True)
        item = None  # dropped here, never inside the section
        if value < I32_MIN or value > I32_MAX:
            wide[0] = value
            return i
        tok_store_le32(block + i * ID_BYTES, <int32_t>value)
        i += 1


cdef bytes _pack_sequence64(object seq):
    """``seq`` is a list or a tuple: its ids as int64 bytes."""
    cdef tok_cs cs
    tok_cs_begin(&cs, seq)
    cdef Py_ssize_t size = PySequence_Fast_GET_SIZE(seq)
    tok_cs_end(&cs)
    if size > TOK_MAX_IDS:
        too_many(size)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, size * ID64_BYTES)
    pack_block64(seq, size, 0, size, <unsigned char *>PyBytes_AS_STRING(result))
    return result


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


cdef Py_ssize_t _convert(const char *src, Py_ssize_t stride, Py_ssize_t size,
                         unsigned char *out, any_int kind) noexcept nogil:
    """Native-order integers -> int32 LE; the index of the first out-of-range one, or -1."""
    cdef Py_ssize_t i
    cdef any_int value
    for i in range(size):
        memcpy(&value, src + i * stride, sizeof(any_int))  # no alignment assumed
        if any_int is uint8_t or any_int is uint16_t or any_int is int8_t or any_int is int16_t:
            pass  # always fits
        elif any_int is uint32_t or any_int is uint64_t:
            if <uint64_t>value > <uint64_t>I32_MAX:
                return i
        else:
            if <int64_t>value < I32_MIN or <int64_t>value > I32_MAX:
                return i
        tok_store_le32(out + i * ID_BYTES, <int32_t>value)
    return -1


cdef Py_ssize_t _convert64(const char *src, Py_ssize_t stride, Py_ssize_t size,
                           unsigned char *out, any_int kind) noexcept nogil:
    """Native-order integers -> int64 LE; the index of the first out-of-range one, or -1."""
    cdef Py_ssize_t i
    cdef any_int value
    for i in range(size):
        memcpy(&value, src + i * stride, sizeof(any_int))  # no alignment assumed
        if any_int is uint64_t:
            if <uint64_t>value > I64_MAX:
                return i
        tok_store_le64(out + i * ID64_BYTES, <int64_t>value)
    return -1


cdef Py_ssize_t _convert_any(const char *src, Py_ssize_t stride, Py_ssize_t size,
                             unsigned char *out, bint signed, Py_ssize_t itemsize,
                             bint wide) noexcept nogil:
    if wide:
        if signed:
            if itemsize == 1: return _convert64(src, stride, size, out, <int8_t>0)
            if itemsize == 2: return _convert64(src, stride, size, out, <int16_t>0)
            if itemsize == 4: return _convert64(src, stride, size, out, <int32_t>0)
            return _convert64(src, stride, size, out, <int64_t>0)
        if itemsize == 1: return _convert64(src, stride, size, out, <uint8_t>0)
        if itemsize == 2: return _convert64(src, stride, size, out, <uint16_t>0)
        if itemsize == 4: return _convert64(src, stride, size, out, <uint32_t>0)
        return _convert64(src, stride, size, out, <uint64_t>0)
    if signed:
        if itemsize == 1: return _convert(src, stride, size, out, <int8_t>0)
        if itemsize == 2: return _convert(src, stride, size, out, <int16_t>0)
        if itemsize == 4: return _convert(src, stride, size, out, <int32_t>0)
        return _convert(src, stride, size, out, <int64_t>0)
    if itemsize == 1: return _convert(src, stride, size, out, <uint8_t>0)
    if itemsize == 2: return _convert(src, stride, size, out, <uint16_t>0)
    if itemsize == 4: return _convert(src, stride, size, out, <uint32_t>0)
    return _convert(src, stride, size, out, <uint64_t>0)


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
        return _pack_sequence64(ids) if wide else _pack_sequence(ids)
    seq = coerce_ids(ids)
    if isinstance(seq, memoryview):
        return _pack_buffer(seq, wide)
    return _pack_sequence64(seq) if wide else _pack_sequence(seq)


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
        if wide:
            tok_fill_ids64(_id_objects, src, size, PySequence_Fast_ITEMS_PTR(result))
        else:
            tok_fill_ids(_id_objects, src, size, PySequence_Fast_ITEMS_PTR(result))
    finally:
        PyBuffer_Release(&buf)
    return result
