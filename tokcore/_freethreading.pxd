# The free-threading helpers of _freethreading.h, for the Cython twins to cimport: each is a
# critical section, a strong reference or an atomic on a free-threaded build, and what the
# code did before on a GIL build.
from cpython.object cimport PyObject


cdef extern from "_freethreading.h":
    ctypedef struct tok_cs:
        pass
    void tok_cs_begin(tok_cs *cs, object o) noexcept
    void tok_cs_end(tok_cs *cs) noexcept
    # a busy flag: 0 when free (cdef classes start with it so)
    ctypedef size_t tok_busy
    bint tok_busy_enter(object owner, tok_busy *flag) noexcept
    void tok_busy_leave(object owner, tok_busy *flag) noexcept
    void tok_idle_begin(tok_cs *cs, object owner, tok_busy *flag) noexcept
    PyObject *tok_dict_get(object d, object key) except? NULL
    void tok_dict_release(PyObject *value) noexcept
