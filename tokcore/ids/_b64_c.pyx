# cython: language_level=3
# cython: freethreading_compatible=True
"""Base64, and token ids <-> base64 text: the Cython twin of ``_b64_py``.

The kernels are in ``_b64_core.h`` (scalar tables, AVX2 when the CPU has it, NEON on
aarch64 from ``_b64_neon.h``; ``_kernel()`` names the one in use). Argument
handling off the fast path (altchars, unusual argument types) and the error messages come
from ``_b64_py`` and ``_pack_py``; the int reading and the shared id-int table from
``_pack_c``; so the twins accept, return and raise the same things.
"""

from cpython.buffer cimport (
    PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_New
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from tokcore._freethreading cimport tok_cs, tok_cs_begin, tok_cs_end
from tokcore.ids._pack_c cimport (
    TOK_MAX_IDS, _slow_value, shared_id_objects, too_many, width_bits,
)

from binascii import a2b_base64 as _a2b_base64
from operator import index as _index

from tokcore.ids._b64_py import (
    GH145264_RULES, KEYWORDS_315, STRICT_MODE, STRICT_MODE_BY_TRUTH,
    STRICT_PAD_AFTER_QUAD_ERROR, UNSET, Error, apply_decode_altchars,
    apply_encode_altchars, check_legacy_validate, decode_data,
    standard_to_urlsafe, urlsafe_decode_315, urlsafe_to_standard,
)
from tokcore._kernels import unknown_kernel
from tokcore.ids import _b64_py as _py
from tokcore.ids._pack_c import pack_ids
from tokcore.ids._pack_py import buffer_layout, coerce_ids, length_error, resized_error
from tokcore.ids._width import INT64

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS_PTR "PySequence_Fast_ITEMS"(object o)
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    int PyUnicode_READY(object o) except -1
    bint PyUnicode_IS_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_ssize_t PY_SSIZE_T_MAX

cdef extern from "_byteorder.h" nogil:
    void tok_store_id(unsigned char *p, int64_t v, int width) noexcept

cdef extern from "_intfast.h":
    Py_ssize_t tok_pack_compact(PyObject **items, Py_ssize_t start, Py_ssize_t n,
                                unsigned char *out, int width) noexcept
    int tok_fill_ids(PyObject **table, const unsigned char *src, Py_ssize_t n,
                     PyObject **items, int width) except -1

cdef extern from "_b64_core.h":
    void tok_b64_init() noexcept
    int tok_b64_set_simd(int level) noexcept
    int tok_b64_cpu_level() noexcept
    const char *tok_b64_level_name(int level) noexcept
    const char *tok_b64_simd_name() noexcept
    void tok_b64_encode(const unsigned char *src, size_t n, unsigned char *out) noexcept nogil
    size_t tok_b64_decode_quads(const unsigned char *src, size_t nquads,
                                unsigned char *out) noexcept nogil
    int tok_b64_pads(const unsigned char *src, size_t n) noexcept nogil
    int tok_b64_decode_padded(const unsigned char *s, int pads,
                              unsigned char *out) noexcept nogil
    ptrdiff_t tok_b64_decode_fast(const unsigned char *src, size_t n,
                                  unsigned char *out) noexcept nogil
    int tok_b64_decode_exact(const unsigned char *src, size_t n, int mode,
                             unsigned char *out, size_t *outlen) noexcept nogil
    enum:
        TOK_B64_OK
        TOK_B64_LEADING_PAD
        TOK_B64_EXCESS
        TOK_B64_NOT_ALPHABET
        TOK_B64_DISCONTINUOUS
        TOK_B64_ONE_EXTRA
        TOK_B64_BAD_PADDING
        TOK_B64_EXCESS_PAD
        TOK_B64_NONSTRICT
        TOK_B64_STRICT
        TOK_B64_NO_PAD_AFTER_QUAD
        TOK_B64_GH145264

cdef enum:
    ID_BYTES = 4
    ID64_BYTES = 8
    NOGIL_MIN_BYTES = 64 * 1024  # below this, dropping the GIL costs more than it frees
    # ids staged per block: 3072 bytes = 4096 characters, no padding inside (a whole number
    # of ids of either width, so no id is cut between two blocks); int64 ids twice as many
    # bytes, as many ids a block (a block's steps cost per block, not per byte)
    BLOCK_IDS = 768
    BLOCK64_BYTES = BLOCK_IDS * 8
    BLOCK_BYTES = BLOCK_IDS * ID_BYTES
    BLOCK_QUADS = BLOCK_BYTES // 3

tok_b64_init()
cdef PyObject **_id_objects = shared_id_objects()

# the kernel vocabulary (tokcore/_kernels.py): scalar; avx2 or neon; avx512 (VBMI and BW),
# each level leaving what is too short for it to the one below


def _kernels():
    """The kernels this CPU runs, the portable ones first and its best last."""
    return tuple(tok_b64_level_name(level).decode() for level in range(tok_b64_cpu_level() + 1))


def _kernel():
    """The kernels in use."""
    return tok_b64_simd_name().decode()


def _use_kernel(name):
    """Run the kernels ``name`` (one of ``_kernels()``; for the tests and benchmarks);
    returns the name of the ones in use before."""
    kernels = _kernels()
    if name not in kernels:
        raise unknown_kernel(name, kernels)
    return tok_b64_level_name(tok_b64_set_simd(kernels.index(name))).decode()


# --- helpers -------------------------------------------------------------------------------

cdef int _raise_decode_error(int status, size_t count) except -1:
    """binascii.a2b_base64's error, with its message, for a TOK_B64_* status."""
    if status == TOK_B64_LEADING_PAD:
        raise Error("Leading padding not allowed")
    if status == TOK_B64_EXCESS:
        raise Error("Excess data after padding")
    if status == TOK_B64_NOT_ALPHABET:
        raise Error("Only base64 data is allowed")
    if status == TOK_B64_DISCONTINUOUS:
        raise Error("Discontinuous padding not allowed")
    if status == TOK_B64_EXCESS_PAD:
        raise Error("Excess padding not allowed")
    if status == TOK_B64_ONE_EXTRA:
        raise Error(f"Invalid base64-encoded string: number of data characters ({count}) "
                    "cannot be 1 more than a multiple of 4")
    raise Error("Incorrect padding")


cdef object _ascii_text(object s):
    """``s`` as bytes or an ASCII str (both readable as one byte a character)."""
    if type(s) is bytes:
        return s
    if type(s) is str:
        PyUnicode_READY(s)
        if PyUnicode_IS_ASCII(s):
            return s  # its characters are already stored one byte each: no copy
    return decode_data(s)  # everything else, with the stdlib's errors


cdef bint _strict(object text, object validate) except -1:
    """Whether the decode is binascii's strict mode; before 3.11, validate's own check."""
    if STRICT_MODE:
        if validate is True or validate is False:
            return validate
        # anything else is read as binascii reads strict_mode: a C int through __index__
        # on 3.11 and 3.12 (the same TypeError for None, str or float, OverflowError past
        # int), any object's truth from 3.13 on (the same error from a raising __bool__)
        _a2b_base64(b"", strict_mode=validate)
        return bool(validate) if STRICT_MODE_BY_TRUTH else _index(validate) != 0
    if not validate:
        return False
    check_legacy_validate(text.encode("ascii") if type(text) is str else text)
    return False


cdef inline const unsigned char *_text_data(object text, Py_ssize_t *n):
    if type(text) is bytes:
        n[0] = len(<bytes>text)
        return <const unsigned char *>PyBytes_AS_STRING(text)
    n[0] = PyUnicode_GET_LENGTH(text)
    return <const unsigned char *>PyUnicode_DATA(text)


# the running binascii's rules, as _b64_py probed them at import
cdef int _RULES = TOK_B64_GH145264 if GH145264_RULES else (
    TOK_B64_NO_PAD_AFTER_QUAD if STRICT_PAD_AFTER_QUAD_ERROR else 0)
cdef int _STRICT_RULES = TOK_B64_STRICT | _RULES
cdef int _NONSTRICT_RULES = TOK_B64_NONSTRICT | _RULES


cdef unsigned char *_decode_exact(const unsigned char *src, Py_ssize_t n, bint strict,
                                  size_t *outlen) except NULL:
    """The exact path into a new malloc'ed buffer (the caller frees it), or the error."""
    cdef int status
    cdef int mode = _STRICT_RULES if strict else _NONSTRICT_RULES
    cdef unsigned char *out = <unsigned char *>malloc(<size_t>(n // 4 * 3 + 3) + 1)
    if out is NULL:
        raise MemoryError()
    if n >= NOGIL_MIN_BYTES:
        with nogil:
            status = tok_b64_decode_exact(src, <size_t>n, mode, out, outlen)
    else:
        status = tok_b64_decode_exact(src, <size_t>n, mode, out, outlen)
    if status != TOK_B64_OK:
        free(out)
        _raise_decode_error(status, outlen[0])
    return out


# --- the base64 module's functions ---------------------------------------------------------

cdef void _encode_buffer(Py_buffer *buf, unsigned char *out) noexcept:
    """Encode a whole buffer into ``out``, without the GIL when it is large."""
    if buf.len >= NOGIL_MIN_BYTES:
        with nogil:
            tok_b64_encode(<const unsigned char *>buf.buf, <size_t>buf.len, out)
    else:
        tok_b64_encode(<const unsigned char *>buf.buf, <size_t>buf.len, out)


cdef bytes _encode(object s):
    cdef Py_buffer buf
    cdef bytes result
    cdef unsigned char *out
    PyObject_GetBuffer(s, &buf, PyBUF_SIMPLE)  # the same errors as binascii's argument
    try:
        if buf.len > (PY_SSIZE_T_MAX - 3) // 4 * 3:
            raise Error("Too much data for base64 line")
        result = PyBytes_FromStringAndSize(NULL, (buf.len + 2) // 3 * 4)
        out = <unsigned char *>PyBytes_AS_STRING(result)
        _encode_buffer(&buf, out)
    finally:
        PyBuffer_Release(&buf)
    return result


cdef object _decode_fast(object text):
    """``text`` (bytes or an ASCII str) decoded when it is well-formed (whole quads, the
    alphabet, at most two '=' at the end: every rule agrees on it), else None."""
    cdef Py_ssize_t n = 0
    cdef ptrdiff_t got = -1
    cdef int pads
    cdef const unsigned char *src = _text_data(text, &n)
    cdef unsigned char *out
    cdef bytes result
    if n % 4:
        return None
    pads = tok_b64_pads(src, <size_t>n)
    result = PyBytes_FromStringAndSize(NULL, n // 4 * 3 - pads)
    out = <unsigned char *>PyBytes_AS_STRING(result)
    if n >= NOGIL_MIN_BYTES:
        with nogil:
            got = tok_b64_decode_fast(src, <size_t>n, out)
    else:
        got = tok_b64_decode_fast(src, <size_t>n, out)
    return result if got >= 0 else None


cdef bytes _decode(object text, bint strict):
    """``text`` is bytes or an ASCII str."""
    cdef Py_ssize_t n = 0
    cdef size_t outlen = 0
    result = _decode_fast(text)
    if result is not None:
        return result
    cdef const unsigned char *src = _text_data(text, &n)
    cdef unsigned char *out = _decode_exact(src, n, strict, &outlen)
    try:
        return PyBytes_FromStringAndSize(<char *>out, <Py_ssize_t>outlen)
    finally:
        free(out)


# The new keywords (3.15's base64) and 3.15's altchars rules go through the Python twin,
# which follows base64 step by step; the calls without them stay here.
#
# So does a call the signature does not bind (an argument missing, one too many, a keyword
# the running base64 does not have): the Python twin's signature is the running base64's, so
# CPython words the TypeError as base64 does. The first parameter defaults to _MISSING and
# *extra takes what is too many (binding stays Cython's, at no cost to a right call). Each
# function's __signature__ is the Python twin's.

cdef object _MISSING = object()


cdef dict _given(dict keywords):
    """The keyword-only arguments the caller gave (not left at UNSET)."""
    return {name: value for name, value in keywords.items() if value is not UNSET}


def b64encode(s=_MISSING, altchars=None, *extra, padded=UNSET, wrapcol=UNSET):
    """Encode the bytes-like object s using Base64 and return a bytes object."""
    if s is _MISSING or extra or padded is not UNSET or wrapcol is not UNSET:
        return _py.b64encode(*((s, altchars) + extra if s is not _MISSING else ()),
                             **_given({"padded": padded, "wrapcol": wrapcol}))
    if altchars is None:
        return _encode(s)
    if not KEYWORDS_315:
        return apply_encode_altchars(_encode(s), altchars)
    return _py.b64encode(s, altchars)


def b64decode(s=_MISSING, altchars=None, validate=UNSET, *extra, padded=UNSET,
              ignorechars=UNSET, canonical=UNSET):
    """Decode the Base64 encoded bytes-like object or ASCII string s."""
    if s is _MISSING or extra or padded is not UNSET or ignorechars is not UNSET or \
            canonical is not UNSET or (altchars is not None and KEYWORDS_315):
        given = (s, altchars) if validate is UNSET else (s, altchars, validate)
        return _py.b64decode(*(given + extra if s is not _MISSING else ()),
                             **_given({"padded": padded, "ignorechars": ignorechars,
                                       "canonical": canonical}))
    if validate is UNSET:
        validate = False
    text = _ascii_text(s)
    if altchars is not None:
        if type(text) is str:
            text = (<str>text).encode("ascii")
        text = apply_decode_altchars(text, altchars)
    return _decode(text, _strict(text, validate))


def standard_b64encode(s=_MISSING, *extra):
    """Encode bytes-like object s using the standard Base64 alphabet."""
    if s is _MISSING or extra:
        return _py.standard_b64encode(*((s,) + extra if s is not _MISSING else ()))
    return _encode(s)


def standard_b64decode(s=_MISSING, *extra):
    """Decode bytes encoded with the standard Base64 alphabet."""
    if s is _MISSING or extra:
        return _py.standard_b64decode(*((s,) + extra if s is not _MISSING else ()))
    return _decode(_ascii_text(s), False)


def urlsafe_b64encode(s=_MISSING, *extra, padded=UNSET):
    """Encode bytes using the URL- and filesystem-safe Base64 alphabet."""
    if s is _MISSING or extra or padded is not UNSET:
        return _py.urlsafe_b64encode(*((s,) + extra if s is not _MISSING else ()),
                                     **_given({"padded": padded}))
    return standard_to_urlsafe(_encode(s))


def urlsafe_b64decode(s=_MISSING, *extra, padded=UNSET):
    """Decode bytes using the URL- and filesystem-safe Base64 alphabet."""
    if s is _MISSING or extra or (padded is not UNSET and not KEYWORDS_315):
        return _py.urlsafe_b64decode(*((s,) + extra if s is not _MISSING else ()),
                                     **_given({"padded": padded}))
    if not KEYWORDS_315:
        return _decode(urlsafe_to_standard(s), False)
    data = decode_data(s)
    if b"+" in data or b"/" in data:  # 3.15 warns about them: the twin does it
        return _py.urlsafe_b64decode(data, padded=padded)
    text = urlsafe_to_standard(data)
    result = _decode_fast(text)
    return result if result is not None else urlsafe_decode_315(text, padded)


def _python_signature(func):
    """The Python twin's signature of ``func``, without its annotations (as the stub has
    them), for inspect.signature: the one base64 has, not the sentinel behind it."""
    import inspect

    signature = inspect.signature(getattr(_py, func.__name__))
    return signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=signature.empty)


for _func in (b64encode, b64decode, standard_b64encode, standard_b64decode,
              urlsafe_b64encode, urlsafe_b64decode):
    _func.__signature__ = _python_signature(_func)


# --- fused: token ids -> base64 text -------------------------------------------------------

cdef str _new_text(Py_ssize_t nbytes, unsigned char **out):
    """An ASCII str for the Base64 text of nbytes bytes; *out is where to write it."""
    text = PyUnicode_New((nbytes + 2) // 3 * 4, 127)
    out[0] = <unsigned char *>PyUnicode_DATA(text)
    return text


cdef str _encode_sequence(object seq, int width):
    """``seq`` is a list or a tuple: its ids (``width`` bytes each, 4 or 8) go through a
    small block, never a bytes object (768 ids a block: 3072 bytes, 6144 for int64 ids)."""
    cdef tok_cs cs  # a critical section on the list without the GIL, as _pack_c's pack
    tok_cs_begin(&cs, seq)
    cdef Py_ssize_t size = PySequence_Fast_GET_SIZE(seq)
    tok_cs_end(&cs)
    if size > TOK_MAX_IDS:
        too_many(size)
    cdef Py_ssize_t start = 0, i, count, now
    cdef int64_t value
    cdef object item = None
    cdef unsigned char block[BLOCK64_BYTES]
    cdef unsigned char *out
    text = _new_text(size * width, &out)
    while start < size:
        count = min(<Py_ssize_t>BLOCK_IDS, size - start)
        i = 0
        while True:  # _pack_c.pack_block's loop (see there why a copy)
            tok_cs_begin(&cs, seq)
            now = PySequence_Fast_GET_SIZE(seq)  # another thread may have resized it
            if now == size:
                # common path in C (_intfast.h): exact ints of one digit, always inside int32;
                # the items array is read anew each time: the slow path may resize and move it
                # each width a constant (see pack_block: the argument cost 2 instructions
                # an id, ids_to_b64 40k uniform 18.05 against 16.06)
                if width == ID64_BYTES:
                    i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq) + start, i, count,
                                         block, ID64_BYTES)
                else:
                    i = tok_pack_compact(PySequence_Fast_ITEMS_PTR(seq) + start, i, count,
                                         block, ID_BYTES)
                if i < count:
                    item = <object>PySequence_Fast_ITEMS_PTR(seq)[start + i]
            tok_cs_end(&cs)
            if now != size:
                raise resized_error(size, now)
            if i == count:
                break
            value = _slow_value(seq, size, start + i, item, width == ID64_BYTES)
            item = None  # dropped here, never inside the section
            tok_store_id(block + i * width, value, width)
            i += 1
        # whole blocks are a multiple of 3 bytes: only the last one can end in padding
        tok_b64_encode(block, <size_t>(count * width), out)
        out += (count * width + 2) // 3 * 4
        start += count
    return text


cdef str _encode_bytes_like(object data):
    cdef Py_buffer buf
    cdef unsigned char *out
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        text = _new_text(buf.len, &out)
        _encode_buffer(&buf, out)
    finally:
        PyBuffer_Release(&buf)
    return text


def ids_to_b64(ids, *, width=32):
    """Token ids -> the Base64 text of their little-endian int32 bytes (int64 with
    ``width=64``)."""
    cdef bint wide = width_bits(width) == 64
    if type(ids) is list or type(ids) is tuple:
        return _encode_sequence(ids, ID64_BYTES if wide else ID_BYTES)
    seq = coerce_ids(ids)
    if isinstance(seq, memoryview):
        signed, itemsize, little = buffer_layout(seq)
        if signed and itemsize == (ID64_BYTES if wide else ID_BYTES) and little \
                and seq.c_contiguous:
            if len(seq) > TOK_MAX_IDS:
                too_many(len(seq))
            return _encode_bytes_like(seq)  # already the wire format: encode it in place
        return _encode_bytes_like(pack_ids(seq, width=width))  # other int types: converted
    return _encode_sequence(seq, ID64_BYTES if wide else ID_BYTES)


# --- fused: base64 text -> token ids -------------------------------------------------------

cdef list _ids_from_bytes(const unsigned char *data, Py_ssize_t nbytes, bint wide):
    if nbytes % (ID64_BYTES if wide else ID_BYTES):
        raise length_error(nbytes, INT64) if wide else length_error(nbytes)
    cdef Py_ssize_t size = nbytes // (ID64_BYTES if wide else ID_BYTES)
    result = PyList_New(size)
    if wide:  # each width a constant (tok_fill_ids is inlined, one loop a width)
        tok_fill_ids(_id_objects, data, size, PySequence_Fast_ITEMS_PTR(result), ID64_BYTES)
    else:
        tok_fill_ids(_id_objects, data, size, PySequence_Fast_ITEMS_PTR(result), ID_BYTES)
    return result


cdef object _ids_fast(const unsigned char *src, Py_ssize_t n, bint wide):
    """Well-formed text of a whole number of ids (int64 ones where ``wide``) -> the list,
    block by block; None when the text is anything else (the caller then takes the exact
    path)."""
    cdef int pads = tok_b64_pads(src, <size_t>n)
    cdef Py_ssize_t nbytes = n // 4 * 3 - pads
    cdef Py_ssize_t plain = n // 4 - (1 if pads else 0)
    cdef Py_ssize_t quad = 0, count, got, k = 0
    cdef Py_ssize_t item = ID64_BYTES if wide else ID_BYTES
    cdef unsigned char block[BLOCK_BYTES]  # (3072 bytes: 768 int32 ids, 384 int64 ones)
    if nbytes % item or plain < 0:
        return None
    result = PyList_New(nbytes // item)
    while True:
        count = min(<Py_ssize_t>BLOCK_QUADS, plain - quad)
        if tok_b64_decode_quads(src + quad * 4, <size_t>count, block) != <size_t>count:
            return None
        got = count * 3
        quad += count
        if quad == plain and pads:
            if tok_b64_decode_padded(src + quad * 4, pads, block + got) < 0:
                return None
            got += 3 - pads
        if wide:
            tok_fill_ids(_id_objects, block, got // ID64_BYTES,
                         PySequence_Fast_ITEMS_PTR(result) + k, ID64_BYTES)
        else:
            tok_fill_ids(_id_objects, block, got // ID_BYTES,
                         PySequence_Fast_ITEMS_PTR(result) + k, ID_BYTES)
        k += got // item
        if quad == plain:
            return result


def b64_to_ids(s, *, validate=False, width=32):
    """Base64 text (str or bytes-like) of little-endian int32 bytes (int64 with
    ``width=64``) -> token ids."""
    cdef Py_ssize_t n = 0
    cdef size_t outlen = 0
    cdef bint wide = width_bits(width) == 64
    text = _ascii_text(s)
    cdef bint strict = _strict(text, validate)
    cdef const unsigned char *src = _text_data(text, &n)
    if n == 0:
        return []
    if n % 4 == 0:
        result = _ids_fast(src, n, wide)
        if result is not None:
            return result
    cdef unsigned char *out = _decode_exact(src, n, strict, &outlen)
    try:
        return _ids_from_bytes(out, <Py_ssize_t>outlen, wide)
    finally:
        free(out)
