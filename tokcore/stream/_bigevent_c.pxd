# The scan of an event too large to hold, for the relay's Cython twin (cimport
# tokcore.stream._bigevent_c). The rules are _bigevent_py's; this file declares the state.

from tokcore._freethreading cimport tok_busy

cdef enum:
    TOK_KEY_MAX = 128  # a key's raw bytes kept while it may be a path's key (key_limit)

cdef class BigEvent:
    cdef object _rules  # _usage_py.Rules
    cdef Py_ssize_t _max
    cdef object _paths, _prefixes, _raw_keys
    cdef Py_ssize_t _key_limit
    # usage values by outcome (_dialects codes) since the relay last took them
    cdef Py_ssize_t outcomes[8]
    cdef int _line, _matched, _state, _bom, _role
    cdef bint _line_empty, _cr, _fields, _esc, _in_str, _handled, _needle, _holding
    cdef Py_ssize_t _nest
    cdef list _prefix
    cdef object _key_name
    cdef char _key[TOK_KEY_MAX]
    cdef Py_ssize_t _key_len
    cdef char _lit[8]
    cdef int _lit_len
    cdef char _tail[8]
    cdef int _tail_len
    cdef char *_hold  # a usage value's bytes from earlier reads (at most _max)
    cdef Py_ssize_t _hold_len, _hold_cap
    cdef list _out  # the pieces of one feed
    cdef Py_ssize_t _copied, _hold_from
    cdef tok_busy _busy  # feed or finish is running: __init__ is refused meanwhile

    # the bytes to forward (None: d[pos:end] as it came, d[pos:n] when end is -1); end is
    # set just past the event's blank line in d, or to -1
    cdef object feed(self, const char *d, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t *end)
    # the stream ended inside the event: what is still held, as it came
    cdef bytes finish(self)
    cdef Py_ssize_t held_bytes(self) noexcept
    cdef int _start(self, object rules, Py_ssize_t max_bytes, bint bom) except -1
    cdef object _feed(self, const char *d, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t *end)
    cdef bytes _finish(self)
    cdef int _emit(self, const char *d, Py_ssize_t start, Py_ssize_t stop) except -1
    cdef int _field(self) except -1
    cdef int _end(self, const char *d, Py_ssize_t at, bint lf) except -1
    cdef void _count(self, int outcome) noexcept
    cdef int _release(self, const char *d, Py_ssize_t at) except -1
    cdef int _keep(self, const char *d, Py_ssize_t at) except -1
    cdef int _value_end(self, const char *d, Py_ssize_t at) except -1
    cdef void _look_for_needle(self, const char *d, Py_ssize_t i, Py_ssize_t stop) noexcept
    cdef int _key_done(self) except -1
    cdef int _close(self) except -1
    cdef int _json(self, const char *d, Py_ssize_t i, Py_ssize_t stop) except -1
    cdef int _value_start(self, const char *d, Py_ssize_t at, unsigned char c) except -1

# A new scan, as BigEvent(rules, max_bytes, bom) but without binding the arguments in Python
# (the relay starts one for each event too large to hold).
cdef BigEvent tok_big_event(object rules, Py_ssize_t max_bytes, bint bom)
