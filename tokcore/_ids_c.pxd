# The pieces of _ids_c that _b64_c reuses (cimported, so calls go straight to C).
from cpython.object cimport PyObject


cdef long _slow_value(object seq, Py_ssize_t size, Py_ssize_t i, object item) except? -1
cdef PyObject **shared_id_objects() noexcept
