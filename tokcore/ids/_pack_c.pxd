# The pieces of _pack_c that _b64_c and _wire_c reuse (cimported, so calls go straight to C).
from cpython.object cimport PyObject
from libc.stdint cimport int64_t


cdef extern from "_intfast.h":
    const Py_ssize_t TOK_MAX_IDS

cdef int width_bits(object width) except -1
cdef int too_many(Py_ssize_t count) except -1
cdef int64_t _slow_value(object seq, Py_ssize_t size, Py_ssize_t i, object item,
                         bint wide) except? -1
cdef Py_ssize_t pack_block(object seq, Py_ssize_t size, Py_ssize_t start, Py_ssize_t count,
                           unsigned char *block, int width, int64_t *wide) except -1
cdef PyObject **shared_id_objects() noexcept
