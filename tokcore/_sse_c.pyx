# cython: language_level=3
"""SSE usage relay: the Cython twin of ``_sse_py``.

The scans (blank lines, the ``"usage"`` needle, the top-level member scan) run in C over
the raw buffer. The rules are the Python twin's, step for step; argument checks, ``Event``,
the rewrite of an unusual usage value and of usage spread over several ``data`` fields
come from ``_sse_py``, so both twins give the same bytes.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int64_t
from libc.string cimport memchr, memcmp, memcpy, memset, strlen

from tokcore._sse_py import (
    DEFAULT_MAX_EVENT_BYTES, Event, check_counts,
    check_max_event_bytes, new_usage_value, payload_view, rewrite_event,
)

cdef extern from "_ssescan.h":
    const char *TOK_SCAN_KIND
    Py_ssize_t tok_next_candidate(const char *p, Py_ssize_t n, int with_cr) noexcept nogil
    Py_ssize_t tok_first_lflf(const char *p, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_last_lflf(const char *p, Py_ssize_t n) noexcept nogil

BUILD_INFO = {"byte scan": TOK_SCAN_KIND.decode()}

cdef enum:
    NULL_TAIL_WINDOW = 64  # the backwards "usage": null check looks at most this far back
    MAX_MEMBERS = 32  # usage objects with more members take the Python path
    MAX_DIGITS = 18  # integers up to this many digits fit int64 with room for a sum

cdef int64_t COUNT_LIMIT = 1 << 62  # larger token counts take the Python path

# byte classes for the member scan
cdef enum:
    C_OTHER = 0
    C_WS = 1
    C_STRUCT = 2
    C_QUOTE = 3

cdef unsigned char BYTE_CLASS[256]
memset(BYTE_CLASS, C_OTHER, sizeof(BYTE_CLASS))
for _b in bytearray(b" \t\n\r"):
    BYTE_CLASS[_b] = C_WS
for _b in bytearray(b"{}[]:,"):
    BYTE_CLASS[_b] = C_STRUCT
BYTE_CLASS[ord('"')] = C_QUOTE

# scanner states, as in _sse_py
cdef enum:
    S_BEFORE, S_FIRST_KEY, S_KEY, S_COLON_NEXT, S_VALUE, S_NESTED, S_AFTER, S_DONE


# --- find_usage ----------------------------------------------------------------------------

cdef inline bint _is_ws(unsigned char c) noexcept nogil:
    return c == 32 or c == 9 or c == 10 or c == 13


cdef inline int _hex(unsigned char c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef bint _is_usage_key(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """``s[:n]`` is a key's text between its quotes; does it decode to ``usage``?"""
    cdef const char *usage = b"usage"
    cdef Py_ssize_t i = 0, k = 0
    cdef int unit, h, j
    cdef unsigned char c
    if n == 5:
        return memcmp(s, usage, 5) == 0
    if memchr(s, 92, n) == NULL:
        return False
    while i < n:
        c = s[i]
        if c != 92:
            unit = c
            i += 1
        else:
            if i + 1 >= n:
                return False
            c = s[i + 1]
            if c == 34 or c == 92 or c == 47:
                unit = c
            elif c == 98:
                unit = 8
            elif c == 102:
                unit = 12
            elif c == 110:
                unit = 10
            elif c == 114:
                unit = 13
            elif c == 116:
                unit = 9
            elif c == 117 and i + 6 <= n:
                unit = 0
                for j in range(2, 6):
                    h = _hex(s[i + j])
                    if h < 0:
                        return False
                    unit = unit * 16 + h
                i += 4
            else:
                return False
            i += 2
            if k >= 5:
                return False
        if k >= 5 or unit != <unsigned char>usage[k]:
            # the Python twin compares the whole unit list at the end; a mismatch here
            # can only turn into False there too, unless a later escape is invalid (False)
            return False
        k += 1
    return k == 5


cdef inline Py_ssize_t _back_over_ws(const unsigned char *d, Py_ssize_t i) noexcept nogil:
    """The index of the last non-whitespace byte at or before ``i`` (-1 if none)."""
    while i >= 0 and _is_ws(d[i]):
        i -= 1
    return i


cdef inline Py_ssize_t _back_over_token(const unsigned char *d, Py_ssize_t i,
                                        const char *token, Py_ssize_t length) noexcept nogil:
    """Backwards over ``ws token`` from ``i``: the index just before the token, or -2 when
    the bytes there are not that token (-2 then fails every later step too)."""
    i = _back_over_ws(d, i)
    if i < length - 1 or memcmp(d + i - length + 1, token, length) != 0:
        return -2
    return i - length


cdef bint _ends_with_null_usage(const unsigned char *d, Py_ssize_t n) noexcept nogil:
    """Backwards: ``[,{] ws "usage" ws : ws null ws } ws END`` within the last 64 bytes."""
    cdef Py_ssize_t lowest = n - NULL_TAIL_WINDOW if n > NULL_TAIL_WINDOW else 0
    cdef Py_ssize_t i = _back_over_token(d, n - 1, b"}", 1)
    i = _back_over_token(d, i, b"null", 4)
    i = _back_over_token(d, i, b":", 1)
    i = _back_over_token(d, i, b'"usage"', 7)
    i = _back_over_ws(d, i)
    return i >= lowest and (d[i] == 44 or d[i] == 123)


cdef bint _scan_usage(const unsigned char *d, Py_ssize_t n,
                      Py_ssize_t *vstart, Py_ssize_t *vend) noexcept nogil:
    """The forward member scan of ``_sse_py.scan_usage``; True with the span when found."""
    cdef int state = S_BEFORE
    cdef Py_ssize_t depth = 0, i = 0, begin, value_start = 0
    cdef bint found = False, is_usage = False
    cdef unsigned char c, cls
    if n >= 3 and d[0] == 0xEF and d[1] == 0xBB and d[2] == 0xBF:
        i = 3
    while i < n:
        c = d[i]
        cls = BYTE_CLASS[c]
        begin = i
        if cls == C_WS:
            i += 1
            continue
        if cls == C_QUOTE:  # a whole string token, or a truncated text
            i += 1
            while True:
                if i >= n:
                    return False
                c = d[i]
                if c == 34:
                    break
                i += 2 if c == 92 else 1
            i += 1
            if state == S_NESTED:
                continue
            if state == S_FIRST_KEY or state == S_KEY:
                is_usage = _is_usage_key(d + begin + 1, i - begin - 2)
                state = S_COLON_NEXT
            elif state == S_VALUE:
                state = S_AFTER
                if is_usage:
                    found, vstart[0], vend[0] = True, begin, i
            else:
                return False
            continue
        if cls == C_OTHER:  # a literal run
            i += 1
            while i < n and BYTE_CLASS[d[i]] == C_OTHER:
                i += 1
            if state == S_NESTED:
                continue
            if state != S_VALUE:
                return False
            state = S_AFTER
            if is_usage:
                if i - begin == 4 and memcmp(d + begin, b"null", 4) == 0:
                    found = False
                else:
                    found, vstart[0], vend[0] = True, begin, i
            continue
        i += 1  # a structural byte
        if state == S_NESTED:
            if c == 123 or c == 91:
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
                if depth == 1:
                    state = S_AFTER
                    if is_usage:
                        found, vstart[0], vend[0] = True, value_start, i
        elif state == S_BEFORE:
            if c != 123:
                return False
            state, depth = S_FIRST_KEY, 1
        elif state == S_FIRST_KEY:
            if c != 125:
                return False
            state, depth = S_DONE, 0
        elif state == S_COLON_NEXT:
            if c != 58:
                return False
            state = S_VALUE
        elif state == S_VALUE:
            if c == 123 or c == 91:
                state, depth, value_start = S_NESTED, 2, begin
            else:
                return False
        elif state == S_AFTER:
            if c == 44:
                state = S_KEY
            elif c == 125:
                state, depth = S_DONE, 0
            else:
                return False
        else:  # S_KEY (a structural byte where a key must be) or S_DONE
            return False
    return found and state == S_DONE


cdef bint _find_usage(const char *data, Py_ssize_t n,
                      Py_ssize_t *vstart, Py_ssize_t *vend) noexcept nogil:
    if tok_next_candidate(data, n, 0) < 0:
        return False
    if _ends_with_null_usage(<const unsigned char *>data, n):
        return False
    return _scan_usage(<const unsigned char *>data, n, vstart, vend)


def find_usage(payload):
    """Byte span of the top-level ``"usage"`` value of a JSON object text, or None."""
    cdef Py_ssize_t start = 0, end = 0
    cdef const unsigned char[::1] view
    if type(payload) is bytes:
        found = _find_usage(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload), &start, &end)
    else:
        view = payload_view(payload)
        if view.shape[0] == 0:
            return None
        found = _find_usage(<const char *>&view[0], view.shape[0], &start, &end)
    return (start, end) if found else None


# --- the usage value -----------------------------------------------------------------------

cdef enum:
    K_INT, K_NULL, K_TRUE, K_FALSE, K_OBJECT

ctypedef struct Member:
    const unsigned char *key
    Py_ssize_t key_len
    int kind
    int64_t number
    int first_child  # K_OBJECT: its members are children[first_child:first_child + count]
    int child_count


ctypedef struct UsageParse:
    Member members[MAX_MEMBERS]
    Member children[MAX_MEMBERS]
    int count
    int child_total


cdef inline Py_ssize_t _skip_ws(const unsigned char *d, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and _is_ws(d[i]):
        i += 1
    return i


cdef Py_ssize_t _parse_scalar(const unsigned char *d, Py_ssize_t i, Py_ssize_t n,
                              Member *m) noexcept nogil:
    """An int of up to 18 digits, null, true or false; the index after it, or -1."""
    cdef Py_ssize_t start
    cdef int64_t value = 0
    cdef bint negative = False
    if i + 4 <= n and memcmp(d + i, b"null", 4) == 0:
        m.kind = K_NULL
        i += 4
    elif i + 4 <= n and memcmp(d + i, b"true", 4) == 0:
        m.kind = K_TRUE
        i += 4
    elif i + 5 <= n and memcmp(d + i, b"false", 5) == 0:
        m.kind = K_FALSE
        i += 5
    else:
        if i < n and d[i] == 45:
            negative = True
            i += 1
        start = i
        while i < n and 48 <= d[i] <= 57:
            if i - start >= MAX_DIGITS:
                return -1
            value = value * 10 + (d[i] - 48)
            i += 1
        if i == start or (d[start] == 48 and i - start > 1):
            return -1
        m.kind = K_INT
        m.number = -value if negative else value
    if i < n and not (_is_ws(d[i]) or d[i] == 44 or d[i] == 125):
        return -1  # a fraction, an exponent, or junk: the Python path decides
    return i


cdef Py_ssize_t _parse_object(const unsigned char *d, Py_ssize_t i, Py_ssize_t n,
                              UsageParse *u, bint nested, int *first, int *count) noexcept nogil:
    """``{...}`` of simple members from ``d[i]``; the index after it, or -1 (Python path)."""
    cdef Member *m
    cdef Member *table
    cdef int *used
    if nested:
        table, used = &u.children[0], &u.child_total
    else:
        table, used = &u.members[0], &u.count
    cdef int start = used[0], j
    cdef Py_ssize_t key_start
    cdef unsigned char c
    first[0] = start
    i = _skip_ws(d, i + 1, n)
    if i < n and d[i] == 125:
        count[0] = 0
        return i + 1
    while True:
        if i >= n or d[i] != 34 or used[0] >= MAX_MEMBERS:
            return -1
        m = &table[used[0]]
        key_start = i + 1
        i += 1
        while i < n:
            c = d[i]
            if c == 34:
                break
            if c < 0x20 or c > 0x7E or c == 92:
                return -1  # escapes, controls, non-ASCII: json.dumps may spell them otherwise
            i += 1
        if i >= n:
            return -1
        m.key, m.key_len = d + key_start, i - key_start
        for j in range(start, used[0]):  # a repeated key: json.loads keeps the last value
            if table[j].key_len == m.key_len and memcmp(table[j].key, m.key, m.key_len) == 0:
                return -1
        i = _skip_ws(d, i + 1, n)
        if i >= n or d[i] != 58:
            return -1
        i = _skip_ws(d, i + 1, n)
        if i < n and d[i] == 123:
            if nested:
                return -1
            m.kind = K_OBJECT
            used[0] += 1
            i = _parse_object(d, i, n, u, True, &m.first_child, &m.child_count)
            if i < 0:
                return -1
        else:
            i = _parse_scalar(d, i, n, m)
            if i < 0:
                return -1
            used[0] += 1
        i = _skip_ws(d, i, n)
        if i >= n:
            return -1
        if d[i] == 125:
            count[0] = used[0] - start
            return i + 1
        if d[i] != 44:
            return -1
        i = _skip_ws(d, i + 1, n)


cdef inline bint _key_is(const Member *m, const char *name, Py_ssize_t length) noexcept nogil:
    return m.key_len == length and memcmp(m.key, name, length) == 0


cdef char *_put(char *out, const char *s, Py_ssize_t n) noexcept nogil:
    memcpy(out, s, n)
    return out + n


cdef inline char *_puts(char *out, const char *s) noexcept nogil:
    return _put(out, s, strlen(s))


cdef char *_put_int(char *out, int64_t value) noexcept nogil:
    cdef char digits[24]
    cdef int k = 0
    cdef bint negative = value < 0
    cdef unsigned long long v = <unsigned long long>(-value if negative else value)
    while True:
        digits[k] = <char>(48 + v % 10)
        k += 1
        v //= 10
        if v == 0:
            break
    if negative:
        out[0] = 45
        out += 1
    while k:
        k -= 1
        out[0] = digits[k]
        out += 1
    return out


cdef char *_put_member(char *out, const Member *m, bint comma) noexcept nogil:
    if comma:
        out[0] = 44
        out += 1
    out[0] = 34
    out = _put(out + 1, <const char *>m.key, m.key_len)
    out[0] = 34
    out[1] = 58
    out += 2
    if m.kind == K_INT:
        return _put_int(out, m.number)
    if m.kind == K_NULL:
        return _put(out, b"null", 4)
    if m.kind == K_TRUE:
        return _put(out, b"true", 4)
    return _put(out, b"false", 5)


cdef object _fast_usage_value(const unsigned char *d, Py_ssize_t n, int64_t prompt,
                              int64_t cached, bint has_cached):
    """``_sse_py.new_usage_value`` for the usual usage objects, or None to take that path."""
    cdef UsageParse u
    cdef int first, count, i, j
    cdef Py_ssize_t end
    cdef int64_t completion = 0
    cdef bint seen_prompt = False, seen_total = False, seen_details = False, seen_cached
    cdef const Member *m
    cdef const Member *c
    cdef char *buf
    cdef char *out
    u.count = u.child_total = 0
    i = <int>_skip_ws(d, 0, n)
    if i >= n or d[i] != 123:
        return None
    end = _parse_object(d, i, n, &u, False, &first, &count)
    if end < 0 or _skip_ws(d, end, n) != n:
        return None
    for i in range(u.count):
        if _key_is(&u.members[i], b"completion_tokens", 17) and u.members[i].kind == K_INT:
            completion = u.members[i].number
    # every member and child written once, three counts of at most 20 digits, new keys
    buf = <char *>PyMem_Malloc(n + 256)
    if buf == NULL:
        raise MemoryError()
    try:
        out = buf
        out[0] = 123
        out += 1
        for i in range(u.count):
            m = &u.members[i]
            if _key_is(m, b"prompt_tokens", 13):
                seen_prompt = True
                out = _puts(out, b',"prompt_tokens":' if i else b'"prompt_tokens":')
                out = _put_int(out, prompt)
            elif _key_is(m, b"total_tokens", 12):
                seen_total = True
                out = _puts(out, b',"total_tokens":' if i else b'"total_tokens":')
                out = _put_int(out, prompt + completion)
            elif has_cached and _key_is(m, b"prompt_tokens_details", 21):
                seen_details = True
                out = _puts(out, b',"prompt_tokens_details":{' if i else
                           b'"prompt_tokens_details":{')
                seen_cached = False
                if m.kind == K_OBJECT:
                    for j in range(m.child_count):
                        c = &u.children[m.first_child + j]
                        if _key_is(c, b"cached_tokens", 13):
                            seen_cached = True
                            out = _puts(out, b',"cached_tokens":' if j else b'"cached_tokens":')
                            out = _put_int(out, cached)
                        else:
                            out = _put_member(out, c, j > 0)
                    if not seen_cached:
                        out = _puts(out, b',"cached_tokens":' if m.child_count else
                                   b'"cached_tokens":')
                        out = _put_int(out, cached)
                else:
                    out = _puts(out, b'"cached_tokens":')
                    out = _put_int(out, cached)
                out[0] = 125
                out += 1
            elif m.kind == K_OBJECT:
                if i:
                    out[0] = 44
                    out += 1
                out[0] = 34
                out = _put(out + 1, <const char *>m.key, m.key_len)
                out = _puts(out, b'":{')
                for j in range(m.child_count):
                    out = _put_member(out, &u.children[m.first_child + j], j > 0)
                out[0] = 125
                out += 1
            else:
                out = _put_member(out, m, i > 0)
        if not seen_prompt:
            out = _puts(out, b',"prompt_tokens":' if u.count else b'"prompt_tokens":')
            out = _put_int(out, prompt)
        if not seen_total:
            out = _puts(out, b',"total_tokens":')
            out = _put_int(out, prompt + completion)
        if has_cached and not seen_details:
            out = _puts(out, b',"prompt_tokens_details":{"cached_tokens":')
            out = _put_int(out, cached)
            out[0] = 125
            out += 1
        out[0] = 125
        out += 1
        return PyBytes_FromStringAndSize(buf, out - buf)
    finally:
        PyMem_Free(buf)


cdef object _usage_value(const char *d, Py_ssize_t n, object prompt, object cached):
    """The rewritten usage value (bytes), or None when it is not a JSON object."""
    cdef object value = None
    if prompt < COUNT_LIMIT and (cached is None or cached < COUNT_LIMIT):
        value = _fast_usage_value(<const unsigned char *>d, n, prompt,
                                  0 if cached is None else cached, cached is not None)
    if value is None:
        value = new_usage_value(PyBytes_FromStringAndSize(d, n), prompt, cached)
    return value


cdef bytes _splice(const char *d, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end, bytes value):
    cdef Py_ssize_t size = PyBytes_GET_SIZE(value)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, n - (end - start) + size)
    cdef char *out = PyBytes_AS_STRING(result)
    memcpy(out, d, start)
    memcpy(out + start, PyBytes_AS_STRING(value), size)
    memcpy(out + start + size, d + end, n - end)
    return result


def rewrite_usage(payload, prompt_tokens, cached_tokens=None):
    """The payload with only its usage value rewritten (see the contract)."""
    cdef Py_ssize_t start = 0, end = 0
    cdef const char *d
    cdef Py_ssize_t n
    if type(payload) is not bytes:
        payload = bytes(payload_view(payload))
    prompt, cached = check_counts(prompt_tokens, cached_tokens)
    d = PyBytes_AS_STRING(payload)
    n = PyBytes_GET_SIZE(payload)
    if not _find_usage(d, n, &start, &end):
        return payload
    value = _usage_value(d + start, end - start, prompt, cached)
    if value is None:
        return payload
    return _splice(d, n, start, end, value)


# --- UsageRelay ----------------------------------------------------------------------------

ctypedef struct Piece:
    const char *data
    Py_ssize_t size


cdef inline bint _may_hold_usage(const char *d, Py_ssize_t n) noexcept nogil:
    return tok_next_candidate(d, n, 0) >= 0


cdef class UsageRelay:
    """Relay a ``text/event-stream`` byte stream, rewriting usage values on the way."""

    cdef object _prompt, _cached
    cdef Py_ssize_t _max
    cdef char *_pend  # the start of an event whose blank line is not here yet
    cdef Py_ssize_t _pend_len, _pend_cap
    cdef bint _line_start, _cr, _skipping, _first
    cdef Piece *_pieces
    cdef Py_ssize_t _piece_cap

    def __cinit__(self):
        self._pend = NULL
        self._pieces = NULL

    def __init__(self, prompt_tokens, cached_tokens=None, *,
                 max_event_bytes=DEFAULT_MAX_EVENT_BYTES):
        self._prompt, self._cached = check_counts(prompt_tokens, cached_tokens)
        self._max = check_max_event_bytes(max_event_bytes)
        self._pend_len = 0
        self._line_start = True
        self._cr = False
        self._skipping = False
        self._first = True

    def __dealloc__(self):
        PyMem_Free(self._pend)
        PyMem_Free(self._pieces)

    @property
    def pending_bytes(self):
        """How many bytes are held back, waiting for the end of their event."""
        return self._pend_len

    cdef int _hold(self, const char *d, Py_ssize_t n) except -1:
        cdef Py_ssize_t need = self._pend_len + n
        cdef char *grown
        if need > self._pend_cap:
            grown = <char *>PyMem_Realloc(self._pend, need + need // 2 + 64)
            if grown == NULL:
                raise MemoryError()
            self._pend, self._pend_cap = grown, need + need // 2 + 64
        memcpy(self._pend + self._pend_len, d, n)
        self._pend_len = need
        return 0

    cdef Py_ssize_t _next_boundary(self, const char *d, Py_ssize_t pos, Py_ssize_t n,
                                   bint has_cr) noexcept nogil:
        """``_sse_py.next_boundary``: just past the first blank line from ``pos``, or -1."""
        cdef Py_ssize_t i, end
        cdef char c
        if pos < n and self._cr:
            if d[pos] == 10:
                pos += 1
            self._cr = False
        if pos >= n:
            return -1
        c = d[pos]
        if self._line_start and (c == 10 or c == 13):
            end = pos + 2 if c == 13 and pos + 1 < n and d[pos + 1] == 10 else pos + 1
            self._cr = d[end - 1] == 13
            return end
        if not has_cr:
            i = tok_first_lflf(d + pos, n - pos)
            if i >= 0:
                self._line_start = True
                return pos + i + 2
        else:
            i = pos
            while i < n:
                c = d[i]
                if c == 10:
                    end = i + 1
                elif c == 13:
                    end = i + 2 if i + 1 < n and d[i + 1] == 10 else i + 1
                else:
                    i += 1
                    continue
                if end < n and (d[end] == 10 or d[end] == 13):  # the next line is empty
                    if d[end] == 13 and end + 1 < n and d[end + 1] == 10:
                        end += 2
                    else:
                        end += 1
                    self._line_start = True
                    self._cr = d[end - 1] == 13
                    return end
                i = end
        c = d[n - 1]
        self._line_start = c == 10 or c == 13
        self._cr = c == 13
        return -1

    cdef bint _null_usage_event(self, const char *d, Py_ssize_t n) noexcept:
        """Whether ``d[:n]`` is one event of one ``data`` line whose last top-level member is
        ``"usage":null`` (``n`` >= 2, it ends with a blank line): nothing to rewrite."""
        cdef Py_ssize_t start = 5
        if n < 7 or memcmp(d, b"data:", 5) != 0 or memchr(d, 10, n - 2) != NULL \
                or memchr(d, 13, n) != NULL:
            return False
        if d[5] == 32:
            start = 6
        if not _ends_with_null_usage(<const unsigned char *>d + start, n - 2 - start):
            return False
        self._cr = False
        self._first = False
        return True

    cdef object _event(self, const char *d, Py_ssize_t n):
        """A complete event's rewritten bytes, or None when it goes out as it came."""
        # the size counts up to the blank line's CR or LF (as in _sse_py)
        if n - (n >= 2 and d[n - 2] == 13 and d[n - 1] == 10) > self._max:
            self._first = False
            return None
        return self._scan(d, n)

    cdef object _scan(self, const char *d, Py_ssize_t n):
        cdef bint bom = self._first
        cdef Py_ssize_t i = 0, line_end, rest, value_start = 0, value_end = 0, fields = 0
        cdef Py_ssize_t start = 0, end = 0
        cdef const char *lf
        cdef const char *cr
        self._first = False
        if not _may_hold_usage(d, n):
            return None
        if bom and n >= 3 and memcmp(d, b"\xef\xbb\xbf", 3) == 0:
            i = 3
        while i < n:  # the data fields (lines end with \r\n, \r or \n)
            lf = <const char *>memchr(d + i, 10, n - i)
            cr = <const char *>memchr(d + i, 13, (lf - d if lf != NULL else n) - i)
            if cr != NULL:
                line_end = cr - d
            elif lf != NULL:
                line_end = lf - d
            else:
                break  # an unterminated line is not a field yet
            if line_end - i >= 4 and memcmp(d + i, b"data", 4) == 0:
                rest = i + 4
                if rest == line_end or d[rest] == 58:
                    if rest < line_end:
                        rest += 1
                        if rest < line_end and d[rest] == 32:
                            rest += 1
                    fields += 1
                    value_start, value_end = rest, line_end
            i = line_end + 2 if d[line_end] == 13 and line_end + 1 < n and d[line_end + 1] == 10 \
                else line_end + 1
        if fields == 0:
            return None
        if fields > 1:  # usage JSON may run over several data fields: the shared path
            return rewrite_event(PyBytes_FromStringAndSize(d, n), bom, self._prompt,
                                 self._cached)
        if not _find_usage(d + value_start, value_end - value_start, &start, &end):
            return None
        value = _usage_value(d + value_start + start, end - start, self._prompt, self._cached)
        if value is None:
            return None
        return _splice(d, n, value_start + start, value_start + end, value)

    cdef int _add(self, Py_ssize_t *count, const char *d, Py_ssize_t n) except -1:
        cdef Piece *grown
        if n <= 0:
            return 0
        if count[0] >= self._piece_cap:
            grown = <Piece *>PyMem_Realloc(self._pieces, (self._piece_cap * 2 + 8) * sizeof(Piece))
            if grown == NULL:
                raise MemoryError()
            self._pieces, self._piece_cap = grown, self._piece_cap * 2 + 8
        self._pieces[count[0]].data = d
        self._pieces[count[0]].size = n
        count[0] += 1
        return 0

    def feed(self, chunk):
        """The bytes that can be forwarded now (possibly ``b""``)."""
        cdef const char *d
        cdef Py_ssize_t n, pos = 0, copied = 0, end, count = 0, total, k, hit
        cdef Py_ssize_t hold_from = -1  # the chunk's tail from here waits for more
        cdef bint has_cr, clean, drop_pending = False
        cdef bint holding = self._pend_len > 0  # an event started in an earlier chunk
        cdef bytes result
        cdef char *out
        if type(chunk) is not bytes:
            chunk = bytes(payload_view(chunk, "chunk"))
        d = PyBytes_AS_STRING(chunk)
        n = PyBytes_GET_SIZE(chunk)
        if n == 0:
            return b""
        clean = (self._pend_len == 0 and not self._skipping and self._line_start
                 and n >= 2 and d[n - 1] == 10 and d[n - 2] == 10)
        if clean:
            hit = tok_next_candidate(d, n, 1)
            if hit < 0:
                self._cr = False  # complete events, no CR, no usage key: the chunk itself
                self._first = False
                return chunk
            if d[hit] != 13 and self._null_usage_event(d, n):
                return chunk
        has_cr = memchr(d, 13, n) != NULL
        keep = []  # rewritten events the pieces point into
        hit = -1  # the next offset where usage may be; events before it need no scan
        while pos < n:
            if self._cr and not holding and not self._skipping and d[pos] == 10:
                pos += 1  # the LF of the CRLF that ended the last event: out with it
                self._cr = False
                continue
            if not holding and not self._skipping and not has_cr:
                if hit < pos:
                    hit = tok_next_candidate(d + pos, n - pos, 0)
                    hit = n if hit < 0 else pos + hit
                if hit == n:  # no usage key in the rest: out to its last blank line
                    end = tok_last_lflf(d + pos, n - pos)
                    end = pos + end + 2 if end >= 0 else (
                        pos + 1 if self._line_start and not self._cr and d[pos] == 10 else -1)
                    if end > pos:
                        self._line_start, self._cr, self._first = True, False, False
                        pos = end
                        if pos == n:
                            break
            end = self._next_boundary(d, pos, n, has_cr)
            if self._skipping:
                if end < 0:
                    pos = n
                    break
                self._skipping = False
                self._first = False
                pos = end
                continue
            if end < 0:
                if (self._pend_len if holding else 0) + n - pos >= self._max:
                    self._skipping = True  # forward what is held and the rest of this event
                    self._add(&count, d + copied, pos - copied)
                    if holding:
                        self._add(&count, self._pend, self._pend_len)
                        drop_pending = True
                    copied = pos
                    pos = n
                else:
                    self._add(&count, d + copied, pos - copied)
                    hold_from = copied = pos
                    pos = n
                break
            if holding:
                holding = False
                self._hold(d + pos, end - pos)
                rewritten = self._event(self._pend, self._pend_len)
                self._add(&count, d + copied, pos - copied)
                if rewritten is None:
                    self._add(&count, self._pend, self._pend_len)
                else:
                    keep.append(rewritten)
                    self._add(&count, PyBytes_AS_STRING(rewritten), PyBytes_GET_SIZE(rewritten))
                drop_pending = True
                copied = end
            else:
                rewritten = self._event(d + pos, end - pos)
                if rewritten is not None:
                    keep.append(rewritten)
                    self._add(&count, d + copied, pos - copied)
                    self._add(&count, PyBytes_AS_STRING(rewritten), PyBytes_GET_SIZE(rewritten))
                    copied = end
            pos = end
        if count == 0 and copied == 0 and hold_from < 0 and not drop_pending:
            return chunk  # complete events, none rewritten: the chunk itself
        self._add(&count, d + copied, (hold_from if hold_from >= 0 else pos) - copied)
        total = 0
        for k in range(count):
            total += self._pieces[k].size
        result = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(result)
        for k in range(count):
            memcpy(out, self._pieces[k].data, self._pieces[k].size)
            out += self._pieces[k].size
        if drop_pending:
            self._pend_len = 0
        if hold_from >= 0:
            self._hold(d + hold_from, n - hold_from)
        return result

    def close(self):
        """The rest: an incomplete last event, processed as if its blank line had come."""
        cdef bint skipping = self._skipping
        event = PyBytes_FromStringAndSize(self._pend, self._pend_len)
        self._pend_len = 0
        self._skipping = False
        self._line_start, self._cr = True, False
        if not event or skipping:
            return event
        # An unfinished last line still counts as a field: add a line end to read it and
        # take it off again, so the bytes forwarded are exactly the bytes received.
        ended = event if event.endswith((b"\n", b"\r")) else event + b"\n"
        rewritten = self._scan(PyBytes_AS_STRING(ended), PyBytes_GET_SIZE(ended))
        if rewritten is None:
            return event
        return rewritten if ended is event else rewritten[:len(rewritten) - 1]


# --- EventDecoder --------------------------------------------------------------------------

cdef class EventDecoder:
    """Bytes in, ``Event`` objects out, by the WHATWG HTML event-stream parsing rules.

    ``id`` is the last event ID in force when the event was dispatched (None until an
    ``id`` field sets one); ``retry`` is the reconnection time set by a ``retry`` field of
    this event, else None.
    """

    cdef bytearray _buffer  # an unfinished line
    cdef bint _started, _cr, _has_data, _closed
    cdef list _data
    cdef str _type
    cdef object _last_id, _retry

    def __init__(self):
        self._buffer = bytearray()
        self._started = self._cr = self._has_data = self._closed = False
        self._data = []
        self._type = ""
        self._last_id = self._retry = None

    def feed(self, chunk):
        cdef const char *d
        cdef const char *lf
        cdef const char *cr
        cdef Py_ssize_t n, i = 0, begin, line_end
        if type(chunk) is not bytes:
            chunk = bytes(payload_view(chunk, "chunk"))
        if self._closed:
            raise ValueError("feed() after close()")
        events = []
        d = PyBytes_AS_STRING(chunk)
        n = PyBytes_GET_SIZE(chunk)
        if n == 0:
            return events
        if self._cr and d[0] == 10:
            i = 1  # the LF of a CRLF split across chunks
        self._cr = False
        begin = i
        while i < n:
            lf = <const char *>memchr(d + i, 10, n - i)
            cr = <const char *>memchr(d + i, 13, (lf - d if lf != NULL else n) - i)
            if cr != NULL:
                line_end = cr - d
            elif lf != NULL:
                line_end = lf - d
            else:
                break
            line = PyBytes_FromStringAndSize(d + begin, line_end - begin)
            if self._buffer:
                self._buffer += line
                line = bytes(self._buffer)
                del self._buffer[:]
            self._line(line, events)
            if d[line_end] == 13:
                if line_end + 1 == n:
                    self._cr = True  # a LF may still follow in the next chunk
                    i = n
                elif d[line_end + 1] == 10:
                    i = line_end + 2
                else:
                    i = line_end + 1
            else:
                i = line_end + 1
            begin = i
        if begin < n:
            self._buffer += PyBytes_FromStringAndSize(d + begin, n - begin)
        return events

    def close(self):
        """End of stream: an unfinished last event is discarded, as the rules say."""
        self._closed = True
        del self._buffer[:]
        del self._data[:]
        return []

    cdef _line(self, bytes raw, list events):
        if not self._started:
            self._started = True
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw:
            self._dispatch(events)
            return
        if raw[0] == 58:  # a comment
            return
        line = raw.decode("utf-8", "replace")
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self._retry = int(value)

    cdef _dispatch(self, list events):
        if self._has_data:
            events.append(Event(self._type or "message", "\n".join(self._data),
                                self._last_id, self._retry))
        del self._data[:]
        self._has_data = False
        self._type = ""
        self._retry = None


def iter_events(chunks):
    """Decode an iterable of byte chunks into events."""
    decoder = EventDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()
