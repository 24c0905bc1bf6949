# cython: language_level=3
# cython: freethreading_compatible=True
"""JSON object members without parsing: the Cython twin of ``_json_py``.

The scan is ``_json_py.scan_object``'s, step for step, over the raw buffer: strings are
skipped with ``memchr`` to the next quote (escaped when an odd run of backslashes precedes
it), nested values by a depth counter. Keys spelled with escapes are decoded by
``_json_py.decode_key``; argument checks and messages come from ``_args``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memchr, memcmp, memcpy, memset

from tokcore._args import check_key, check_path, payload_bytes, payload_view
from tokcore._json_py import decode_key, key_text, utf8

# byte classes
cdef enum:
    C_OTHER = 0  # starts or continues a literal
    C_WS = 1
    C_QUOTE = 2
    C_OPEN = 3
    C_CLOSE = 4
    C_COLON = 5
    C_COMMA = 6

cdef unsigned char CLASS[256]
memset(CLASS, C_OTHER, sizeof(CLASS))
for _b in bytearray(b" \t\n\r"):
    CLASS[_b] = C_WS
CLASS[ord('"')] = C_QUOTE
CLASS[ord("{")] = CLASS[ord("[")] = C_OPEN
CLASS[ord("}")] = CLASS[ord("]")] = C_CLOSE
CLASS[ord(":")] = C_COLON
CLASS[ord(",")] = C_COMMA

# tok_object.state
cdef enum:
    O_FIRST, O_NEXT, O_CLOSED


cdef inline Py_ssize_t _skip_ws(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) noexcept nogil:
    while i < end and CLASS[d[i]] == C_WS:
        i += 1
    return i


cdef inline Py_ssize_t _skip_string(const unsigned char *d, Py_ssize_t i,
                                    Py_ssize_t end) noexcept nogil:
    """Just past the string whose quote is at ``i``; -1 when it does not close."""
    cdef const unsigned char *q
    cdef Py_ssize_t at, back
    i += 1
    while True:
        q = <const unsigned char *>memchr(d + i, 34, end - i)
        if q == NULL:
            return -1
        at = q - d
        back = at
        while back > i and d[back - 1] == 92:
            back -= 1
        if (at - back) % 2 == 0:
            return at + 1
        i = at + 1


cdef Py_ssize_t _skip_nested(const unsigned char *d, Py_ssize_t i, Py_ssize_t end) noexcept nogil:
    """Just past the object or array that opens at ``i``; -1 when it does not close."""
    cdef Py_ssize_t depth = 0
    cdef unsigned char cls
    while i < end:
        cls = CLASS[d[i]]
        if cls == C_QUOTE:
            i = _skip_string(d, i, end)
            if i < 0:
                return -1
            continue
        i += 1
        if cls == C_OPEN:
            depth += 1
        elif cls == C_CLOSE:
            depth -= 1
            if depth == 0:
                return i
    return -1


cdef inline int _fail(tok_object *o, Py_ssize_t at) noexcept nogil:
    o.error = at
    return -1


cdef int tok_object_open(tok_object *o, const unsigned char *d, Py_ssize_t start,
                         Py_ssize_t end, bint top) noexcept nogil:
    cdef Py_ssize_t i = start
    o.d, o.end, o.top, o.state, o.comma = d, end, top, O_FIRST, -1
    if top:
        if end - i >= 3 and d[i] == 0xEF and d[i + 1] == 0xBB and d[i + 2] == 0xBF:
            i += 3
        i = _skip_ws(d, i, end)
    if i >= end:
        return _fail(o, end)
    if d[i] != 123:
        return _fail(o, i)
    o.opening = i
    o.pos = _skip_ws(d, i + 1, end)
    return 0


cdef int _closed(tok_object *o, Py_ssize_t i) noexcept nogil:
    """The object's ``}`` was at ``i - 1``."""
    o.state = O_CLOSED
    if o.top:
        i = _skip_ws(o.d, i, o.end)
    if i != o.end:
        return _fail(o, i)
    o.pos = i
    return 0


cdef int tok_object_next(tok_object *o, tok_member *m) noexcept nogil:
    cdef const unsigned char *d = o.d
    cdef Py_ssize_t end = o.end, i = o.pos, k
    cdef unsigned char cls
    if o.state == O_CLOSED:
        return 0
    if o.state == O_FIRST:
        if i < end and d[i] == 125:
            return _closed(o, i + 1)
    else:  # after a member: "," or "}"
        if i >= end:
            return _fail(o, end)
        if d[i] == 125:
            return _closed(o, i + 1)
        if d[i] != 44:
            return _fail(o, i)
        o.comma = i
        i = _skip_ws(d, i + 1, end)
    if i >= end:
        return _fail(o, end)
    if d[i] != 34:
        return _fail(o, i)
    m.key_start, m.comma = i, o.comma
    k = _skip_string(d, i, end)
    if k < 0:
        return _fail(o, end)
    m.key_end = k
    m.key_escaped = memchr(d + m.key_start + 1, 92, k - m.key_start - 2) != NULL
    i = _skip_ws(d, k, end)
    if i >= end:
        return _fail(o, end)
    if d[i] != 58:
        return _fail(o, i)
    i = _skip_ws(d, i + 1, end)
    if i >= end:
        return _fail(o, end)
    m.value_start = i
    cls = CLASS[d[i]]
    if cls == C_QUOTE:
        i = _skip_string(d, i, end)
    elif cls == C_OPEN:
        i = _skip_nested(d, i, end)
    elif cls == C_OTHER:
        i += 1
        while i < end and CLASS[d[i]] == C_OTHER:
            i += 1
    else:
        return _fail(o, i)
    if i < 0:
        return _fail(o, end)
    m.value_end = i
    o.pos = _skip_ws(d, i, end)
    o.state = O_NEXT
    return 1


cdef int tok_key_is(const unsigned char *d, const tok_member *m, const char *key,
                    Py_ssize_t length, object str_key) except -1:
    cdef Py_ssize_t n = m.key_end - m.key_start - 2
    cdef const unsigned char *raw = d + m.key_start + 1
    if not m.key_escaped:
        return n == length and memcmp(raw, key, length) == 0
    return decode_key(PyBytes_FromStringAndSize(<const char *>raw, n)) == str_key


# --- the public functions ------------------------------------------------------------------

cdef int tok_last_member(tok_object *o, const char *key, Py_ssize_t length, object str_key,
                         tok_member *found, tok_member *last) except -2:
    cdef tok_member m
    cdef int r, hit = 0
    while True:
        r = tok_object_next(o, &m)
        if r <= 0:
            return -1 if r < 0 else hit
        if last != NULL:
            last[0] = m
        if tok_key_is(o.d, &m, key, length, str_key):
            found[0] = m
            hit = 1


def find_member(payload, *path):
    """The byte span of the value at ``path`` in a JSON object text, or None."""
    cdef tok_object o
    cdef tok_member found
    cdef const unsigned char *d
    cdef Py_ssize_t start = 0, end
    cdef bint top = True
    data = payload_bytes(payload)
    check_path(path)
    d = <const unsigned char *>PyBytes_AS_STRING(data)
    end = PyBytes_GET_SIZE(data)
    for key in path:
        if not top and d[start] != 123:
            return None
        raw = utf8(key)
        if tok_object_open(&o, d, start, end, top) < 0:
            return None
        if tok_last_member(&o, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), key, &found,
                           NULL) <= 0:
            return None
        start, end, top = found.value_start, found.value_end, False
    return start, end


cdef _not_an_object(Py_ssize_t offset):
    return ValueError(f"payload is not a JSON object: the scan stopped at offset {offset}")


cdef const unsigned char *_open_top(tok_object *o, bytes data) except NULL:
    """The whole text opened as an object, or the ``ValueError`` of a text that is not."""
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    if tok_object_open(o, d, 0, PyBytes_GET_SIZE(data), True) < 0:
        raise _not_an_object(o.error)
    return d


cdef int _next(tok_object *o, tok_member *m) except -1:
    """``tok_object_next``, with the ``ValueError`` of a text that is not an object."""
    cdef int r = tok_object_next(o, m)
    if r < 0:
        raise _not_an_object(o.error)
    return r


cdef bytes _joined(const char *d, Py_ssize_t n, Py_ssize_t at, Py_ssize_t cut,
                   bytes a, bytes b, bytes c, bytes e):
    """``d[:at] + a + b + c + e + d[cut:]`` in one allocation."""
    cdef Py_ssize_t size = at + n - cut
    cdef bytes part
    for part in (a, b, c, e):
        size += PyBytes_GET_SIZE(part)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, size)
    cdef char *out = PyBytes_AS_STRING(result)
    memcpy(out, d, at)
    out += at
    for part in (a, b, c, e):
        memcpy(out, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part))
        out += PyBytes_GET_SIZE(part)
    memcpy(out, d + cut, n - cut)
    return result


def set_member(payload, key, value):
    """``payload`` with its top-level member ``key`` set to the JSON text ``value``."""
    cdef tok_object o
    cdef tok_member m, found
    cdef const unsigned char *d
    cdef Py_ssize_t n, last_end = -1
    cdef bint hit = False
    data = payload_bytes(payload)
    check_key(key)
    text = value if type(value) is bytes else bytes(payload_view(value, "value"))
    raw = utf8(key)
    d = _open_top(&o, data)
    n = PyBytes_GET_SIZE(data)
    while _next(&o, &m):
        last_end = m.value_end
        if tok_key_is(d, &m, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), key):
            found, hit = m, True
    if hit:
        return _joined(<const char *>d, n, found.value_start, found.value_end, text, b"", b"",
                       b"")
    if last_end >= 0:
        return _joined(<const char *>d, n, last_end, last_end, b",", key_text(key), b":", text)
    return _joined(<const char *>d, n, o.opening + 1, o.opening + 1, key_text(key), b":", text,
                   b"")


def del_member(payload, key):
    """``payload`` without its top-level member ``key`` (every occurrence)."""
    cdef tok_object o
    cdef tok_member m
    cdef const unsigned char *d
    cdef Py_ssize_t n, first_key = -1, cut_from = -1, copied = 0
    cdef Py_ssize_t last_end = 0, removed = 0, size
    cdef bint kept = False
    data = payload_bytes(payload)
    check_key(key)
    raw = utf8(key)
    d = _open_top(&o, data)
    n = PyBytes_GET_SIZE(data)
    ranges = []  # (start, end) pairs to cut, in order (_json_py.removed_ranges' rule)
    while _next(&o, &m):
        if first_key < 0:
            first_key = m.key_start
        last_end = m.value_end
        if tok_key_is(d, &m, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), key):
            if kept:
                ranges.append((m.comma, m.value_end))
            elif cut_from < 0:
                cut_from = m.key_start
        elif not kept:
            kept = True
            if cut_from >= 0:
                ranges.append((cut_from, m.key_start))
    if not kept:
        if cut_from < 0:
            return data  # no members at all
        ranges.append((first_key, last_end))
    if not ranges:
        return data
    for start, end in ranges:
        removed += end - start
    result = PyBytes_FromStringAndSize(NULL, n - removed)
    cdef char *out = PyBytes_AS_STRING(result)
    for start, end in ranges:
        size = start - copied
        memcpy(out, d + copied, size)
        out += size
        copied = end
    memcpy(out, d + copied, n - copied)
    return result
