# cython: language_level=3
# cython: freethreading_compatible=True
"""Token ids in the wire formats the serving stacks speak: the Cython twin of ``_wire_py``.

Every conversion goes through little-endian int32: a JSON array is read whole into int32
bytes first (``_wire_json.h``: sized for the most ids its length allows, so the text is read
once, and shrunk in place), a MessagePack array a small block on the stack at a time
(``_wire_msgpack.h``); a writer turns them into ints of the shared id cache for a list, or into
the output bytes. No Python int or list is made unless the caller asked for a list. An
output is allocated once at its bound and shrunk in place. The grammar's error kinds and
messages, and the argument checks, are ``_wire_py``'s.
"""

from cpython.buffer cimport (
    PyBUF_RECORDS_RO, PyBuffer_IsContiguous, PyBuffer_Release, PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_New
from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF
from libc.stdint cimport SIZE_MAX, int64_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memmove, memset

from tokcore._freethreading cimport tok_cs, tok_cs_begin, tok_cs_end
from tokcore.ids._pack_c cimport (
    TOK_MAX_IDS, pack_block, shared_id_objects, too_many, width_bits,
)

from tokcore._kernels import unknown_kernel
from tokcore.ids._b64_c import b64decode as _b64decode
from tokcore.ids._b64_c import b64encode as _b64encode
from tokcore.ids._pack_c import pack_ids
from tokcore.ids._pack_py import coerce_ids, length_error, overflow_error, unexportable_error
from tokcore.ids._wire_py import (
    FORMATS, JSON_WHAT, MSGPACK_WHAT, check_format, count_error, found, json_error_found,
    json_overflow, msgpack_error_found, text_bytes,
)
from tokcore.ids._width import INT32, INT64

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS_PTR "PySequence_Fast_ITEMS"(object o)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    int PyUnicode_READY(object o) except -1
    bint PyUnicode_IS_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_ssize_t PY_SSIZE_T_MAX

cdef extern from *:
    """
    /* a new bytes object of `size` bytes to write, or NULL with an exception */
    static PyObject *tok_new_bytes(Py_ssize_t size) {
        return PyBytes_FromStringAndSize(NULL, size);
    }
    /* `bytes` (a reference the caller gives up, held by nobody else) cut to `size` bytes in
     * place: the reference to the result, or NULL with an exception (the bytes freed) */
    static PyObject *tok_shrink_bytes(PyObject *bytes, Py_ssize_t size) {
        if (PyBytes_GET_SIZE(bytes) != size && _PyBytes_Resize(&bytes, size) < 0) return NULL;
        return bytes;
    }
    """
    PyObject *tok_new_bytes(Py_ssize_t size) except NULL
    object tok_shrink_bytes(PyObject *bytes, Py_ssize_t size)

cdef extern from "_intfast.h":
    int tok_fill_ids(PyObject **table, const unsigned char *src, Py_ssize_t n,
                     PyObject **items, int width) except -1
    PyObject *tok_id_object64(PyObject **table, int64_t value) except NULL

cdef extern from "_byteorder.h" nogil:
    int64_t tok_load_le64(const unsigned char *p)
    void tok_store_le64(unsigned char *p, int64_t v)

cdef extern from "_wire_width.h" nogil:
    void tok_widen_ids(const unsigned char *src, size_t n, unsigned char *out)
    size_t tok_narrow_ids(const unsigned char *src, size_t n, unsigned char *out)

cdef extern from "_wire_json.h" nogil:
    ctypedef struct tok_ij_reader:
        size_t pos
        size_t count
        int state
        int error
        size_t offset
        size_t end
    enum:
        TOK_IJ_OK
        TOK_IJ_OVERFLOW
        TOK_IJ_DONE
        TOK_IJ_KERNEL_SCALAR
        TOK_IJ_KERNEL_SWAR
        TOK_IJ_KERNEL_SIMD
        TOK_IJ_KERNEL_AVX2
        TOK_IJ_MAX_ID
        TOK_IJ_SLACK
    const char *TOK_IJ_SIMD_NAME
    void tok_ij_init(tok_ij_reader *r)
    size_t tok_ij_read(tok_ij_reader *r, const unsigned char *s, size_t n, unsigned char *out,
                       size_t cap, int kernel)
    int tok_ij_avx2()
    unsigned char *tok_ij_write(const unsigned char *ids, size_t n, unsigned char *out,
                                int first, int kernel)
    int tok_ij_resume64(tok_ij_reader *r, const unsigned char *s, size_t n, int64_t *value)
    enum:
        TOK_IJ_MAX_ID64
    unsigned char *tok_ij_write64(const unsigned char *ids, size_t n, unsigned char *out,
                                  int first, int kernel)

cdef extern from "_wire_msgpack.h" nogil:
    ctypedef struct tok_mp_reader:
        size_t pos
        size_t count
        size_t total
        int error
        size_t offset
        int is_unsigned
        int64_t value
        uint64_t uvalue
        size_t after
    enum:
        TOK_MP_OK
        TOK_MP_OVERFLOW
        TOK_MP_BIN_TRAILING
        TOK_MP_MAX_ID
        TOK_MP_MAX_HEADER
        TOK_MP_SLACK
    const size_t TOK_MP_MOST
    int tok_mp_header(tok_mp_reader *r, const unsigned char *s, size_t n)
    size_t tok_mp_read(tok_mp_reader *r, const unsigned char *s, size_t n, unsigned char *out,
                       size_t cap)
    int tok_mp_bin(const unsigned char *s, size_t n, size_t *start, size_t *length)
    unsigned char *tok_mp_write_header(unsigned char *out, size_t count)
    unsigned char *tok_mp_write_bin_header(unsigned char *out, size_t length)
    unsigned char *tok_mp_write(const unsigned char *ids, size_t n, unsigned char *out,
                                int simd)
    int tok_mp_avx2()
    int tok_mp_resume64(tok_mp_reader *r, int64_t *value)
    enum:
        TOK_MP_MAX_ID64
    unsigned char *tok_mp_write64(const unsigned char *ids, size_t n, unsigned char *out,
                                  int simd)

cdef extern from "_wire_list.h":
    int tok_mp_read_list(tok_mp_reader *r, const unsigned char *s, size_t n,
                         unsigned char *block, size_t cap, PyObject **table, PyObject **items,
                         size_t *got) except -1

cdef enum:
    ID_BYTES = 4
    ID64_BYTES = 8
    BLOCK_IDS = 1024  # ids a block holds: 4 KiB on the stack, in L1 between reader and writer
    NOGIL_MIN_BYTES = 64 * 1024  # below this, dropping the GIL costs more than it frees

cdef PyObject **_id_objects = shared_id_objects()
# The kernels, in the vocabulary of tokcore/_kernels.py, with their numbers in _wire_json.h:
# the JSON reader's (scalar; swar; its 64-byte windows on sse2 or neon; the windows' masks on
# avx2, where the CPU has it, with BMI1, BMI2 and POPCNT); with the windows, the JSON writer's
# 4-id steps (SSE2) and the MessagePack writer's (AVX2 where the CPU has it) too, else one id
# at a time. A host with neither SSE2 nor NEON reads with swar. Tests switch them.
_NUMBERS = {"scalar": TOK_IJ_KERNEL_SCALAR, "swar": TOK_IJ_KERNEL_SWAR}
if TOK_IJ_SIMD_NAME in (b"SSE2", b"NEON"):
    _NUMBERS[TOK_IJ_SIMD_NAME.decode().lower()] = TOK_IJ_KERNEL_SIMD
    if tok_ij_avx2():
        _NUMBERS["avx2"] = TOK_IJ_KERNEL_AVX2
_KERNELS = tuple(_NUMBERS)
cdef int _json_kernel = _NUMBERS[_KERNELS[len(_KERNELS) - 1]]  # the best
_MSGPACK_WRITE = "avx2" if tok_mp_avx2() else "scalar"

#: for python -m tokcore: what the MessagePack writer runs with the kernel in use
BUILD_INFO = {"msgpack write": _MSGPACK_WRITE if _json_kernel >= TOK_IJ_KERNEL_SIMD else "scalar"}


def _kernels():
    """The kernels this machine runs, the reference first and the best last."""
    return _KERNELS


def _kernel():
    """The kernel in use."""
    return next(name for name, number in _NUMBERS.items() if number == _json_kernel)


def _use_kernel(name):
    """Read (and write) with the kernel ``name`` (one of ``_kernels()``; for the tests and
    benchmarks); returns the name of the one in use before."""
    global _json_kernel
    if name not in _KERNELS:
        raise unknown_kernel(name, _KERNELS)
    before = _kernel()
    _json_kernel = _NUMBERS[name]
    BUILD_INFO["msgpack write"] = (_MSGPACK_WRITE if _json_kernel >= TOK_IJ_KERNEL_SIMD
                                   else "scalar")
    return before


# --- the source: a contiguous run of bytes -------------------------------------------------

cdef struct Data:
    const unsigned char *ptr
    size_t n
    bint held  # buf is a buffer to release
    Py_buffer buf


cdef object _open(Data *d, object data, object what, bint text):
    """``data``'s bytes into ``d`` (the caller calls ``_close``); returns the object that
    keeps them alive. The checks and messages are ``_wire_py.data_view``'s."""
    d.held = False
    if type(data) is bytes:
        d.ptr = <const unsigned char *>PyBytes_AS_STRING(data)
        d.n = <size_t>len(<bytes>data)
        return data
    if isinstance(data, str):
        if not text:
            raise TypeError(f"{what} must be a bytes-like object, not str")
        PyUnicode_READY(data)
        if not PyUnicode_IS_ASCII(data):
            data = text_bytes(data)  # the first character past ASCII is an error anyway
            d.ptr = <const unsigned char *>PyBytes_AS_STRING(data)
            d.n = <size_t>len(<bytes>data)
            return data
        d.ptr = <const unsigned char *>PyUnicode_DATA(data)
        d.n = <size_t>PyUnicode_GET_LENGTH(data)
        return data
    try:
        PyObject_GetBuffer(data, &d.buf, PyBUF_RECORDS_RO)
    except TypeError:
        kinds = "a bytes-like object or str" if text else "a bytes-like object"
        raise TypeError(f"{what} must be {kinds}, not {type(data).__name__}") from None
    except ValueError as exc:  # a buffer exporter that cannot export (datetime64 arrays)
        raise unexportable_error(f"{what} must be a bytes-like object", data, exc) from None
    if not PyBuffer_IsContiguous(&d.buf, b'C'):
        PyBuffer_Release(&d.buf)
        raise TypeError(f"{what} must be a contiguous bytes-like object")
    d.held = True
    d.ptr = <const unsigned char *>d.buf.buf
    d.n = <size_t>d.buf.len
    return data


cdef inline void _close(Data *d) noexcept:
    if d.held:
        d.held = False
        PyBuffer_Release(&d.buf)


cdef str _found(Data *d, size_t offset, bint text):
    """``_wire_py.found`` of the byte at ``offset`` (the byte alone, not a copy of all)."""
    piece = PyBytes_FromStringAndSize(<const char *>d.ptr + offset, 1) if offset < d.n else b""
    return found(piece, 0, text)


# --- readers: a source of little-endian int32 or int64 blocks ------------------------------

cdef enum Kind:
    K_INT32    # int32 ids where they are (raw)
    K_INT64    # int64 ids where they are (raw)
    K_MSGPACK  # a MessagePack array, read a run of int32 at a time (where wide, each integer
               # outside int32 taken by itself as an int64)

cdef struct Wide:  # an id outside int32 in a run of int32 ids (a 0 holds its place there)
    size_t index
    int64_t value

cdef struct Reader:
    Kind kind
    Data data
    bint wide          # its ids are read within int64, else int32
    Wide *wides        # K_INT32 of a JSON text read within int64: its ids outside int32,
    size_t nwides      # by index (malloc'ed: the call frees it)
    size_t total       # the ids it will give (exactly, unless its data is in error)
    size_t done        # raw: ids given so far
    const unsigned char *raw  # raw: the ids' bytes
    int kernel
    tok_mp_reader msgpack
    bint bad           # an id did not fit the int32 it was written as (the first one's:)
    size_t bad_index
    int64_t bad_value


cdef inline size_t _read(Reader *r, unsigned char *block, size_t cap) noexcept nogil:
    """Up to ``cap`` int32 ids into ``block``; 0 at the end or at an error (``_raise_read``)."""
    cdef size_t got
    if r.kind == K_MSGPACK:
        return tok_mp_read(&r.msgpack, r.data.ptr, r.data.n, block, cap)
    got = r.total - r.done
    if got > cap:
        got = cap
    memcpy(block, r.raw + r.done * ID_BYTES, got * ID_BYTES)
    r.done += got
    return got


cdef int _raise_read(Reader *r) except -1:
    """The MessagePack reader's error, if it has one (a reader stopped short of the end
    without one read a buffer that another thread changed during the call); then an id that
    did not fit the int32 it was to be written as."""
    cdef size_t offset
    spec = INT64 if r.wide else INT32
    if r.kind == K_MSGPACK:
        if r.msgpack.error == TOK_MP_OK and r.msgpack.count != r.msgpack.total:
            raise RuntimeError("the MessagePack data changed while it was read")
        if r.msgpack.error == TOK_MP_OVERFLOW:
            raise overflow_error(r.msgpack.count, r.msgpack.uvalue if r.msgpack.is_unsigned
                                 else r.msgpack.value, spec)
        if r.msgpack.error != TOK_MP_OK:
            offset = r.msgpack.offset
            raise msgpack_error_found(r.msgpack.error, offset, _found(&r.data, offset, False),
                                      spec)
    if r.bad:
        raise overflow_error(r.bad_index, r.bad_value, INT32)
    return 0


cdef class _Call:
    """What one call holds: the reader with its source's bytes and the output being written,
    both released however the call ends."""
    cdef Reader r
    cdef object keep  # what keeps the source's bytes alive
    cdef PyObject *out  # the output bytes, ours alone until _take hands it over

    def __cinit__(self):
        self.r.data.held = False
        self.r.wides = NULL
        self.r.nwides = 0
        self.out = NULL

    def __dealloc__(self):
        _close(&self.r.data)
        free(self.r.wides)
        Py_XDECREF(self.out)


cdef unsigned char *_new_out(_Call call, size_t size) except NULL:
    """A bytes object of ``size`` bytes for the call to write; where to write it."""
    call.out = tok_new_bytes(<Py_ssize_t>size)
    return <unsigned char *>PyBytes_AS_STRING(<object>call.out)


cdef size_t _out_size(size_t count, size_t most, size_t extra) except? 0:
    """``extra + count * most`` bytes: an output's bound, ``count`` ids of ``most`` bytes at
    most and ``extra`` besides; ``MemoryError`` where it is more than a bytes object holds
    (ids taken from a caller are fewer than ``TOK_MAX_IDS``, checked first with its error:
    this is for the ids of a source, whose bytes bound their count)."""
    if count > (<size_t>PY_SSIZE_T_MAX - extra) // most:
        raise MemoryError()
    return extra + count * most


cdef object _take(_Call call, size_t size):
    """The call's output, cut to ``size`` bytes in place (it was never shared)."""
    cdef PyObject *out = call.out
    call.out = NULL
    return tok_shrink_bytes(out, <Py_ssize_t>size)


cdef size_t _read_json(tok_ij_reader *r, const unsigned char *s, size_t n,
                       unsigned char *out, size_t cap, int kernel, Reader *wide) noexcept nogil:
    """Up to ``cap`` ids of a JSON text into ``out`` as int32, with the kernel asked for.
    Where ``wide`` is given, the reader goes on after each integer it stops at outside int32
    (``tok_ij_resume64``) that is within int64: its index and value kept in ``wide.wides``,
    a 0 in its place (``wide.nwides`` is SIZE_MAX when that memory could not be had)."""
    cdef size_t k = 0, size = 0
    cdef int64_t value
    cdef Wide *grown
    while True:
        k += tok_ij_read(r, s, n, out + k * ID_BYTES, cap - k, kernel)
        if wide is NULL or r.error != TOK_IJ_OVERFLOW or tok_ij_resume64(r, s, n, &value):
            return k
        if wide.nwides == size:  # room for more: twice as many (16 first)
            size = 16 if size == 0 else 2 * size
            grown = <Wide *>realloc(wide.wides, size * sizeof(Wide))
            if grown is NULL:
                wide.nwides = <size_t>-1
                return k
            wide.wides = grown
        wide.wides[wide.nwides].index = k
        wide.wides[wide.nwides].value = value
        wide.nwides += 1
        memset(out + k * ID_BYTES, 0, ID_BYTES)
        k += 1  # (the reader stopped before its cap at this id: it had room)


cdef object _json_int32(object data, int kernel, Reader *wide=NULL):
    """The ids of the JSON array ``data`` as little-endian int32 bytes (where ``wide`` is
    given, those outside int32 within int64 in it: ``_read_json``). The text is read once,
    into bytes sized for the most ids its length allows (each takes a digit and a separator
    at least: n // 2 + 1 ids), shrunk in place to the ids read; its error raised after it."""
    cdef Data d
    cdef tok_ij_reader r
    cdef size_t cap, got
    cdef unsigned char *out
    cdef _Call call = _Call.__new__(_Call)
    spec = INT32 if wide is NULL else INT64
    keep = _open(&call.r.data, data, JSON_WHAT, True)
    d = call.r.data
    cap = d.n // 2 + 1
    out = _new_out(call, _out_size(cap, ID_BYTES, 0))
    tok_ij_init(&r)
    if d.n >= NOGIL_MIN_BYTES:
        with nogil:
            got = _read_json(&r, d.ptr, d.n, out, cap, kernel, wide)
    else:
        got = _read_json(&r, d.ptr, d.n, out, cap, kernel, wide)
    if wide is not NULL and wide.nwides == <size_t>-1:
        wide.nwides = 0
        raise MemoryError()
    if r.error == TOK_IJ_OVERFLOW:
        raise json_overflow(r.count, PyBytes_FromStringAndSize(
            <const char *>d.ptr + r.offset, r.end - r.offset), spec)
    if r.error != TOK_IJ_OK:
        raise json_error_found(r.error, r.offset, _found(&d, r.offset, True), spec)
    if r.state != TOK_IJ_DONE:  # stopped at the bound: the text changed as it was read
        raise RuntimeError("the JSON data changed while it was read")
    return _take(call, got * ID_BYTES)


# --- readers: one for each format, by its number (the table below) ------------------------

cdef object _raw_ids(Reader *r, object keep):
    """The reader of int32 (int64 where ``r.wide``) bytes opened in ``r.data``; returns
    ``keep``."""
    cdef size_t size = ID64_BYTES if r.wide else ID_BYTES
    if r.data.n % size:
        raise length_error(r.data.n, INT64 if r.wide else INT32)
    r.kind = K_INT64 if r.wide else K_INT32
    r.raw = r.data.ptr
    r.total = r.data.n // size
    return keep


cdef object _open_raw(Reader *r, object data):
    return _raw_ids(r, _open(&r.data, data, "int64 data" if r.wide else "int32 data", False))


cdef object _open_b64(Reader *r, object data):
    keep = _b64decode(data, None, True)  # as b64_to_ids(data, validate=True) reads it
    _open(&r.data, keep, "int32 data", False)
    return _raw_ids(r, keep)


cdef object _open_json(Reader *r, object data):
    # read whole into int32 (where wide, those outside int32 kept beside: r.wides)
    keep = _json_int32(data, r.kernel, r if r.wide else NULL)
    _open(&r.data, keep, "int32 data", False)
    r.kind = K_INT32
    r.raw = r.data.ptr
    r.total = r.data.n // ID_BYTES
    return keep


cdef object _open_msgpack(Reader *r, object data):
    keep = _open(&r.data, data, MSGPACK_WHAT, False)
    r.kind = K_MSGPACK
    if tok_mp_header(&r.msgpack, r.data.ptr, r.data.n) != TOK_MP_OK:
        _raise_read(r)
    # every item takes a byte at least: a header that says more is cut short (the reader
    # names where), and the bound keeps the output's size to the data's
    r.total = r.msgpack.total
    if r.total > r.data.n:
        r.total = r.data.n
    return keep


cdef object _open_msgpack_bin(Reader *r, object data):
    cdef size_t start = 0, length = 0
    cdef int status
    keep = _open(&r.data, data, MSGPACK_WHAT, False)
    status = tok_mp_bin(r.data.ptr, r.data.n, &start, &length)
    if status != TOK_MP_OK:
        raise msgpack_error_found(status, start, _found(&r.data, start, False))
    r.raw = r.data.ptr + start
    if length % ID_BYTES:
        raise length_error(length)
    r.total = length // ID_BYTES
    return keep


# --- writers: the pieces of each format's output -------------------------------------------

cdef list _list_of(const unsigned char *raw, size_t count, bint wide):
    """``count`` int32 (int64 where ``wide``) ids as a list, of the shared int cache's ints
    (as unpack_ids)."""
    cdef list result = PyList_New(<Py_ssize_t>count)
    if wide:  # each width a constant (tok_fill_ids is inlined, one loop a width)
        tok_fill_ids(_id_objects, raw, <Py_ssize_t>count, PySequence_Fast_ITEMS_PTR(result),
                     ID64_BYTES)
    else:
        tok_fill_ids(_id_objects, raw, <Py_ssize_t>count, PySequence_Fast_ITEMS_PTR(result),
                     ID_BYTES)
    return result


cdef list _msgpack_list(Reader *r):
    """The ids of a MessagePack array as a list of the shared int cache's ints (as unpack_ids
    makes them), each made as the reader goes on (_wire_list.h), a block at a time; where
    ``r.wide``, each integer the reader stops at outside int32 made as an int64 and the
    reading resumed after it."""
    cdef unsigned char block[BLOCK_IDS * ID_BYTES]
    cdef size_t k = 0, got = 0
    cdef int64_t value
    cdef list result = PyList_New(<Py_ssize_t>r.total)
    cdef PyObject **items = PySequence_Fast_ITEMS_PTR(result)
    while True:
        tok_mp_read_list(&r.msgpack, r.data.ptr, r.data.n, block,
                         min(<size_t>BLOCK_IDS, r.total - k), _id_objects, items + k, &got)
        k += got
        if r.wide and r.msgpack.error == TOK_MP_OVERFLOW:
            if tok_mp_resume64(&r.msgpack, &value) == 0:
                items[k] = tok_id_object64(_id_objects, value)
                k += 1
                continue
        if got == 0:
            break
    _raise_read(r)
    return result


# What a format writes before its ids (the count known), the ids themselves (a run of them,
# the k-th id first; int32, or int64 for a body of int64), and after them; each returns
# where it stopped.
ctypedef unsigned char *(*head_fn)(unsigned char *out, size_t count) noexcept nogil
ctypedef unsigned char *(*body_fn)(const unsigned char *ids, size_t n, unsigned char *at,
                                   size_t k, int kernel) noexcept nogil
ctypedef unsigned char *(*tail_fn)(unsigned char *at) noexcept nogil


cdef unsigned char *_no_head(unsigned char *out, size_t count) noexcept nogil:
    return out


cdef unsigned char *_no_tail(unsigned char *at) noexcept nogil:
    return at


cdef unsigned char *_body_int32(const unsigned char *ids, size_t n, unsigned char *at,
                                size_t k, int kernel) noexcept nogil:
    memcpy(at, ids, n * ID_BYTES)
    return at + n * ID_BYTES


cdef unsigned char *_body_int64(const unsigned char *ids, size_t n, unsigned char *at,
                                size_t k, int kernel) noexcept nogil:
    memcpy(at, ids, n * ID64_BYTES)
    return at + n * ID64_BYTES


cdef unsigned char *_body_widen(const unsigned char *ids, size_t n, unsigned char *at,
                                size_t k, int kernel) noexcept nogil:
    tok_widen_ids(ids, n, at)
    return at + n * ID64_BYTES


cdef unsigned char *_head_json(unsigned char *out, size_t count) noexcept nogil:
    out[0] = b'['
    return out + 1


cdef unsigned char *_body_json(const unsigned char *ids, size_t n, unsigned char *at,
                               size_t k, int kernel) noexcept nogil:
    return tok_ij_write(ids, n, at, k == 0, kernel)


cdef unsigned char *_body_json64(const unsigned char *ids, size_t n, unsigned char *at,
                                 size_t k, int kernel) noexcept nogil:
    return tok_ij_write64(ids, n, at, k == 0, kernel)


cdef unsigned char *_tail_json(unsigned char *at) noexcept nogil:
    at[0] = b']'
    return at + 1


cdef unsigned char *_head_msgpack(unsigned char *out, size_t count) noexcept nogil:
    return tok_mp_write_header(out, count)


cdef unsigned char *_body_msgpack(const unsigned char *ids, size_t n, unsigned char *at,
                                  size_t k, int kernel) noexcept nogil:
    return tok_mp_write(ids, n, at, kernel >= TOK_IJ_KERNEL_SIMD)


cdef unsigned char *_body_msgpack64(const unsigned char *ids, size_t n, unsigned char *at,
                                    size_t k, int kernel) noexcept nogil:
    return tok_mp_write64(ids, n, at, kernel >= TOK_IJ_KERNEL_SIMD)


cdef unsigned char *_head_msgpack_bin(unsigned char *out, size_t count) noexcept nogil:
    return tok_mp_write_bin_header(out, count * ID_BYTES)


cdef object _finish_b64(object raw):
    return _b64encode(raw)


# --- the table of formats ------------------------------------------------------------------

cdef enum Format:  # numbered as _wire_py.FORMATS orders the names (spelled there only)
    F_INT32
    F_B64
    F_JSON
    F_MSGPACK
    F_MSGPACK_BIN
    F_INT64
    F_B64_INT64
    F_COUNT

ctypedef object (*open_fn)(Reader *r, object data)
ctypedef object (*finish_fn)(object raw)

cdef struct FormatRow:
    open_fn open      # a reader of a source: returns what keeps its bytes alive
    int bits          # the width of the ids in its bytes (_wire_py's Format.width), or 0:
                      # the call's (JSON and MessagePack arrays)
    size_t most32     # output bytes an id takes at most, given as int32
    size_t most64     # ... given as int64
    size_t extra      # output bytes besides the ids' (a header, brackets, the stores' slack)
    size_t most_ids   # the most ids it holds (_wire_py's Format.most), or SIZE_MAX: as many
                      # as a call takes (TOK_MAX_IDS)
    head_fn head
    body_fn body32    # the ids given as int32
    body_fn body64    # the ids given as int64 (None for a format of int32 bytes: an int64
                      # reader's ids are narrowed to int32 for it first, checked)
    tail_fn tail
    finish_fn finish  # the output as the caller gets it (its base64 text), or NULL: as written

cdef FormatRow _FORMATS[<int>F_COUNT]


cdef void _row(Format number, open_fn open, int bits, size_t most32, size_t most64,
               size_t extra, size_t most_ids, head_fn head, body_fn body32, body_fn body64,
               tail_fn tail, finish_fn finish) noexcept:
    _FORMATS[<int>number] = FormatRow(open, bits, most32, most64, extra, most_ids, head,
                                      body32, body64, tail, finish)


_row(F_INT32, _open_raw, 32, ID_BYTES, ID_BYTES, 0, SIZE_MAX, _no_head, _body_int32, NULL,
     _no_tail, NULL)
_row(F_B64, _open_b64, 32, ID_BYTES, ID_BYTES, 0, SIZE_MAX, _no_head, _body_int32, NULL,
     _no_tail, _finish_b64)
_row(F_JSON, _open_json, 0, TOK_IJ_MAX_ID, TOK_IJ_MAX_ID64, 2 + TOK_IJ_SLACK, SIZE_MAX,
     _head_json, _body_json, _body_json64, _tail_json, NULL)
_row(F_MSGPACK, _open_msgpack, 0, TOK_MP_MAX_ID, TOK_MP_MAX_ID64,
     TOK_MP_MAX_HEADER + TOK_MP_SLACK, TOK_MP_MOST, _head_msgpack, _body_msgpack,
     _body_msgpack64, _no_tail, NULL)
_row(F_MSGPACK_BIN, _open_msgpack_bin, 32, ID_BYTES, ID_BYTES, TOK_MP_MAX_HEADER,
     TOK_MP_MOST // ID_BYTES, _head_msgpack_bin, _body_int32, NULL, _no_tail, NULL)
_row(F_INT64, _open_raw, 64, ID64_BYTES, ID64_BYTES, 0, SIZE_MAX, _no_head, _body_widen,
     _body_int64, _no_tail, NULL)
_row(F_B64_INT64, _open_b64, 64, ID64_BYTES, ID64_BYTES, 0, SIZE_MAX, _no_head, _body_widen,
     _body_int64, _no_tail, _finish_b64)

#: a format's public name -> its number (its row)
cdef dict _FORMAT_NUMBERS = {name: number for number, name in enumerate(FORMATS)}
if len(_FORMAT_NUMBERS) != F_COUNT:
    raise ImportError(f"_wire_c has {F_COUNT} formats, _wire_py {len(_FORMAT_NUMBERS)}")
for _number, _spec in enumerate(FORMATS.values()):
    if _FORMATS[_number].bits != (_spec.width.bits if _spec.width is not None else 0):
        raise ImportError(f"_wire_c's format {_number} is not _wire_py's width")
    if _FORMATS[_number].most_ids != (_spec.most if _spec.most is not None else SIZE_MAX):
        raise ImportError(f"_wire_c's format {_number} is not _wire_py's most ids")
#: a format's public name by its number (for its errors)
cdef tuple FORMATS_NAMES = tuple(FORMATS)


cdef Format _format(object value, object name) except F_COUNT:
    """The number of the format named ``value``; ``check_format``'s errors for another."""
    if type(value) is str:
        number = _FORMAT_NUMBERS.get(value)
        if number is not None:
            return <Format><int>number
    check_format(value, name)  # raises
    return F_COUNT


# --- the count a format holds --------------------------------------------------------------

cdef unsigned char *_body_none(const unsigned char *ids, size_t n, unsigned char *at,
                               size_t k, int kernel) noexcept nogil:
    return at


cdef int _read_through(Reader *r) except -1:
    """Reads a MessagePack reader's ids to the end, writing them nowhere, and raises its
    error, if it has one: before a count of more ids than a format holds is refused, for a
    MessagePack array's count is a bound until it is read (its header's, at most its
    bytes'), and ``_wire_py`` reads a source whole before it writes it."""
    cdef unsigned char sink[1]
    cdef size_t k = 0
    _run(r, _body_none, _body_none, False, sink, &k)
    return _raise_read(r)


cdef int _check_count(Format dst, size_t count) except -1:
    """``_wire_py.check_count``: its error for more ids than format ``dst``'s output holds
    (the table's ``most_ids``; more than ``TOK_MAX_IDS``, checked first, is ``too_many``)."""
    if count > _FORMATS[<int>dst].most_ids:
        raise count_error(count, FORMATS_NAMES[<int>dst])
    return 0


def check_count(count, dst):
    """``_wire_py.check_count`` (for the tests: the count each caller checks)."""
    _check_count(_format(dst, "dst"), count)


cdef unsigned char *_out_for(_Call call, Format dst, size_t count, bint wide) except NULL:
    """The call's output for ``count`` ids (int64 where ``wide``, else int32) in format
    ``dst``, sized at its bound: ``_check_count``'s error first."""
    cdef FormatRow *row = &_FORMATS[<int>dst]
    _check_count(dst, count)
    return _new_out(call, _out_size(count, row.most64 if wide else row.most32, row.extra))


# --- a reader's ids through a format's writer ----------------------------------------------

cdef object _open_reader(Reader *r, object data, Format src, bint wide):
    """A reader of ``data`` in format ``src``, its ids read within int64 where ``wide``;
    returns what keeps its bytes alive (the caller calls ``_close(&r.data)``)."""
    r.data.held = False
    r.done = 0
    r.kernel = _json_kernel
    r.kind = K_INT32
    r.wide = wide
    r.bad = False
    return _FORMATS[<int>src].open(r, data)


cdef size_t _pump(Reader *r, body_fn body32, body_fn body64, bint narrow,
                  unsigned char *out, size_t *k) noexcept nogil:
    """Every id of ``r`` written after ``out``: int32 ids by ``body32``, int64 ones by
    ``body64``; returns the bytes written. Raw ids are written from where they are,
    MessagePack ones through a block on the stack: runs of int32, and (``r.wide``) each
    integer outside int32 by itself. ``narrow``: int64 ids are given to ``body32`` as int32,
    a block at a time; after the first that does not fit (``r.bad``), nothing more is
    written, but the rest is read (an error in the data comes first)."""
    cdef unsigned char block[BLOCK_IDS * ID_BYTES]
    cdef unsigned char one[ID64_BYTES]
    cdef unsigned char *at = out
    cdef const unsigned char *ids
    cdef size_t got, fit
    cdef int64_t value
    while True:
        if r.kind == K_MSGPACK:
            # never more than the output was sized for (a buffer another thread writes
            # to meanwhile cannot make it overflow)
            got = _read(r, block, min(<size_t>BLOCK_IDS, r.total - k[0]))
            if got and not r.bad:
                at = body32(block, got, at, k[0], r.kernel)
            k[0] += got
            if r.wide and r.msgpack.error == TOK_MP_OVERFLOW and \
                    tok_mp_resume64(&r.msgpack, &value) == 0:
                if narrow:
                    if not r.bad:
                        r.bad = True
                        r.bad_index = k[0]
                        r.bad_value = value
                elif not r.bad:
                    tok_store_le64(one, value)
                    at = body64(one, 1, at, k[0], r.kernel)
                k[0] += 1
            elif got == 0:
                break
            continue
        if r.kind == K_INT32:  # the runs between its ids outside int32, and each of those
            for got in range(r.nwides):
                fit = r.wides[got].index
                at = body32(r.raw + k[0] * ID_BYTES, fit - k[0], at, k[0], r.kernel)
                k[0] = fit
                if narrow:  # it does not fit: the text was read whole, nothing else to see
                    r.bad = True
                    r.bad_index = fit
                    r.bad_value = r.wides[got].value
                    return <size_t>(at - out)
                tok_store_le64(one, r.wides[got].value)
                at = body64(one, 1, at, k[0], r.kernel)
                k[0] += 1
            at = body32(r.raw + k[0] * ID_BYTES, r.total - k[0], at, k[0], r.kernel)
            k[0] = r.total
            r.done = r.total
            break
        # K_INT64: whole, or narrowed a block at a time
        if not narrow:
            at = body64(r.raw, r.total, at, k[0], r.kernel)
            k[0] += r.total
            r.done = r.total
            break
        got = r.total - r.done
        if got > BLOCK_IDS:
            got = BLOCK_IDS
        if got == 0:
            break
        ids = r.raw + r.done * ID64_BYTES
        fit = tok_narrow_ids(ids, got, block)
        if fit < got:  # raw ids: nothing after it can be in error
            r.bad = True
            r.bad_index = k[0] + fit
            r.bad_value = tok_load_le64(ids + fit * ID64_BYTES)
            break
        at = body32(block, got, at, k[0], r.kernel)
        k[0] += got
        r.done += got
    return <size_t>(at - out)


cdef size_t _run(Reader *r, body_fn body32, body_fn body64, bint narrow, unsigned char *out,
                 size_t *k) noexcept:
    """``_pump``, without the GIL for a large input."""
    cdef size_t written
    if r.data.n >= NOGIL_MIN_BYTES:
        with nogil:
            written = _pump(r, body32, body64, narrow, out, k)
    else:
        written = _pump(r, body32, body64, narrow, out, k)
    return written


cdef object _write(_Call call, Format dst, bint wide):
    """All the ids of the call's reader in format ``dst``, each within int64 where ``wide``
    (else int32: a reader's int64 ids narrowed, checked)."""
    cdef FormatRow *row = &_FORMATS[<int>dst]
    cdef Reader *r = &call.r
    cdef size_t k = 0
    cdef bint narrow = r.wide and not wide
    cdef bint given64 = r.wide and wide  # the bodies may get int64 ids
    cdef unsigned char *out
    cdef unsigned char *at
    if r.kind == K_MSGPACK and r.total > row.most_ids:  # its count is exact once read
        _read_through(r)
    out = _out_for(call, dst, r.total, given64)
    at = row.head(out, r.total)
    at += _run(r, row.body32, row.body64, narrow, at, &k)
    _raise_read(r)
    at = row.tail(at)
    result = _take(call, <size_t>(at - out))
    return result if row.finish is NULL else row.finish(result)


# --- ids in (a list or a buffer: pack_ids' rules and errors) -------------------------------

cdef object _from_packed(bytes packed, Format dst, bint wide):
    """Ids packed by pack_ids (int64 bytes where ``wide``, else int32) in format ``dst``."""
    cdef FormatRow *row = &_FORMATS[<int>dst]
    cdef _Call call = _Call.__new__(_Call)
    cdef size_t size = <size_t>len(packed) // (ID64_BYTES if wide else ID_BYTES)
    cdef const unsigned char *src = <const unsigned char *>PyBytes_AS_STRING(packed)
    cdef unsigned char *out = _out_for(call, dst, size, wide)
    cdef unsigned char *at = row.head(out, size)
    at = (row.body64 if wide else row.body32)(src, size, at, 0, _json_kernel)
    return _take(call, <size_t>(row.tail(at) - out))


cdef object _from_ids(object ids, Format dst, bint wide):
    """Token ids in format ``dst``, each within int64 where ``wide``, else int32: a list or
    a tuple packed a block at a time (pack_ids' reading of each int), its ids within int32
    written by the format's int32 body, a run at a time, and (``wide``) each other one by
    itself by its int64 body; any other argument packed by pack_ids first."""
    cdef FormatRow *row = &_FORMATS[<int>dst]
    cdef tok_cs cs
    cdef Py_ssize_t size, start = 0, count, got
    cdef int64_t value = 0
    cdef unsigned char block[BLOCK_IDS * ID_BYTES]
    cdef unsigned char one[ID64_BYTES]
    cdef unsigned char *out
    cdef unsigned char *at
    cdef _Call call
    if type(ids) is not list and type(ids) is not tuple:
        seq = coerce_ids(ids)
        if isinstance(seq, memoryview):  # a buffer of any integer type: packed (checked) first
            if len(seq) <= TOK_MAX_IDS:  # (more: pack_ids' MemoryError, every codec's)
                _check_count(dst, <size_t>len(seq))  # before its ids are packed
            return _from_packed(pack_ids(seq, width=64 if wide else 32), dst, wide)
        ids = seq
    call = _Call.__new__(_Call)
    tok_cs_begin(&cs, ids)
    size = PySequence_Fast_GET_SIZE(ids)
    tok_cs_end(&cs)
    if size > TOK_MAX_IDS:
        too_many(size)
    out = _out_for(call, dst, <size_t>size, wide)
    at = row.head(out, <size_t>size)
    while start < size:
        count = min(<Py_ssize_t>BLOCK_IDS, size - start)
        got = pack_block(ids, size, start, count, block, ID_BYTES, &value if wide else NULL)
        if got:
            at = row.body32(block, <size_t>got, at, <size_t>start, _json_kernel)
        start += got
        if got < count:  # (wide) the id at start is outside int32
            tok_store_le64(one, value)
            at = row.body64(one, 1, at, <size_t>start, _json_kernel)
            start += 1
    return _take(call, <size_t>(row.tail(at) - out))


# --- the public functions ------------------------------------------------------------------

def ids_to_json(ids, *, width=32):
    """Token ids -> the compact JSON array, ``json.dumps(ids, separators=(",", ":"))``."""
    return _from_ids(ids, F_JSON, width_bits(width) == 64)


def json_to_ids(data, *, width=32):
    """One JSON array of integers (bytes-like or str) -> the token ids."""
    cdef _Call call
    cdef size_t i
    cdef PyObject **items
    cdef PyObject *made
    if width_bits(width) == 32:
        raw = _json_int32(data, _json_kernel)
        return _list_of(<const unsigned char *>PyBytes_AS_STRING(raw),
                        <size_t>len(<bytes>raw) // ID_BYTES, False)
    call = _Call.__new__(_Call)  # its reader keeps the ids outside int32 (r.wides)
    call.r.wide = True
    raw = _json_int32(data, _json_kernel, &call.r)
    result = _list_of(<const unsigned char *>PyBytes_AS_STRING(raw),
                      <size_t>len(<bytes>raw) // ID_BYTES, False)
    items = PySequence_Fast_ITEMS_PTR(result)
    for i in range(call.r.nwides):  # each in place of the 0 that held it
        made = tok_id_object64(_id_objects, call.r.wides[i].value)
        Py_XDECREF(items[call.r.wides[i].index])
        items[call.r.wides[i].index] = made
    return result


def ids_to_msgpack(ids, *, width=32):
    """Token ids -> a MessagePack array, each int in its smallest encoding."""
    return _from_ids(ids, F_MSGPACK, width_bits(width) == 64)


def msgpack_to_ids(data, *, width=32):
    """One MessagePack array of ints (bytes-like) -> the token ids."""
    cdef bint wide = width_bits(width) == 64
    cdef _Call call = _Call.__new__(_Call)
    call.keep = _open_reader(&call.r, data, F_MSGPACK, wide)
    return _msgpack_list(&call.r)


cdef int _default_bits(Format src, Format dst) noexcept:
    """``_wire_py.convert_widths``' rule for ``width=None``: int64 when a byte format of
    int64 is on either side, else int32."""
    return 64 if _FORMATS[<int>src].bits == 64 or _FORMATS[<int>dst].bits == 64 else 32


def convert_ids(data, src, dst, *, width=None):
    """Token ids in format ``src`` -> the same ids in format ``dst`` (``"int32"``, ``"b64"``,
    ``"json"``, ``"msgpack"``, ``"msgpack_bin"``, ``"int64"``, ``"b64_int64"``)."""
    cdef Format source = _format(src, "src")
    cdef Format target = _format(dst, "dst")
    cdef int given = _default_bits(source, target) if width is None else width_bits(width)
    cdef int read_bits = _FORMATS[<int>source].bits or given
    cdef int write_bits = _FORMATS[<int>target].bits or given
    if source == F_JSON and target == F_INT32 and read_bits == 32:
        return _json_int32(data, _json_kernel)  # the JSON reader's own output, as it is
    cdef _Call call = _Call.__new__(_Call)
    call.keep = _open_reader(&call.r, data, source, read_bits == 64)
    return _write(call, target, write_bits == 64)
