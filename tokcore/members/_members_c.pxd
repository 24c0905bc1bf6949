from libc.string cimport memcmp

# named from tokcore/, the include path of every twin: the stream wing cimports this too
cdef extern from "members/_json_object_memo.h":
    ctypedef struct tok_object_memo:
        int taken
    void tok_object_memo_clear(tok_object_memo *memo) noexcept nogil

# The member scanner of _members_c, for the other Cython twins (cimport tokcore.members._members_c).

ctypedef struct tok_member:
    Py_ssize_t key_start  # the key's opening quote
    Py_ssize_t key_end  # just past its closing quote
    Py_ssize_t value_start
    Py_ssize_t value_end
    Py_ssize_t comma  # the comma before the member, -1 for the first
    bint key_escaped  # the key has a backslash: compare it with tok_key_is

ctypedef struct tok_object:
    const unsigned char *d
    Py_ssize_t end  # the scan reads d[...:end]
    Py_ssize_t pos  # the next byte to read
    Py_ssize_t opening  # the object's "{"
    Py_ssize_t error  # where the scan stopped, when a call returned -1
    Py_ssize_t comma  # the comma read last, -1 before the first member
    int state
    bint top  # the whole text: whitespace may follow the object

# Open the object in d[start:end] (top: the whole text, BOM and whitespace allowed around it;
# else exactly one object value). 0, or -1 with o.error set.
cdef int tok_object_open(tok_object *o, const unsigned char *d, Py_ssize_t start,
                         Py_ssize_t end, bint top) noexcept nogil
# The next member into m: 1; the object closed (and, when top, nothing but whitespace
# after it): 0; not an object: -1 with o.error set.
cdef int tok_object_next(tok_object *o, tok_member *m) noexcept nogil
# Whether d[:n] is a JSON object text as tok_object_next reads one (no member kept).
cdef bint tok_is_object_text(const unsigned char *d, Py_ssize_t n,
                             tok_object_memo *memo) noexcept nogil
# The same, with no LF or CR in d[:n] (the relay's data field: one line); memo: the caller's
# memo of its last object (a stream's events are alike: _json_object_memo.h), or NULL.
cdef bint tok_is_object_line(const unsigned char *d, Py_ssize_t n,
                             tok_object_memo *memo) noexcept nogil
# Whether m's key decodes to the key whose UTF-8 bytes are key[:length] (str_key: the same
# key as a str, for keys spelled with escapes, which are decoded by _members_py).
cdef int tok_key_is(const unsigned char *d, const tok_member *m, const char *key,
                    Py_ssize_t length, object str_key) except -1
# Scan the rest of the object: 1 with the last member of that key in found[0], 0 when it
# has none, -1 when it is not an object (o.error set). last, when not NULL, gets the
# object's last member (its key_start left as it was when the object has none).
cdef int tok_last_member(tok_object *o, const char *key, Py_ssize_t length, object str_key,
                         tok_member *found, tok_member *last) except -2
# The same for a key without escapes (m.key_escaped false), with no Python object.
cdef inline bint tok_raw_key_is(const unsigned char *d, const tok_member *m, const char *key,
                                Py_ssize_t length) noexcept nogil:
    return m.key_end - m.key_start - 2 == length and \
        memcmp(d + m.key_start + 1, key, length) == 0
# _members_py.value_error of d[start:end]: -1 for one JSON value (RFC 8259, UTF-8), else the
# offset where it stops; MemoryError for a nesting too deep for the memory left.
cdef Py_ssize_t tok_value_error(const unsigned char *d, Py_ssize_t start,
                                Py_ssize_t end) except -2
