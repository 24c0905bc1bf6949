# cython: language_level=3
# cython: freethreading_compatible=True
"""An event too large to hold, scanned as it streams through: the Cython twin of
``_bigevent_py``.

The same line and JSON states, byte for byte, in C loops; only the rare steps (a key at a
tracked level compared with the paths' keys, a held usage value rewritten by
``_fields.rewrite_value``) go through the Python helpers both twins share.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy

from tokcore._freethreading cimport tok_busy_enter, tok_busy_leave

from tokcore._args import in_use
from tokcore.stream._bigevent_py import N_OUTCOMES, PATH_KEYS, PathKeys, path_keys
from tokcore.stream._dialects import NONE, NOT_OBJECT, TOO_LARGE, UNREADABLE, Dialect
from tokcore.stream._usage_py import Rules
from tokcore.stream._fields import rewrite_value
from tokcore.members._members_py import decode_key

cdef extern from "_ssescan.h":
    Py_ssize_t tok_next_candidate(const char *p, Py_ssize_t n, int with_cr) noexcept nogil
    Py_ssize_t tok_line_end(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_nested_stop(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_string_stop(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil

# the states of _bigevent_py
cdef enum:
    L_BOM, L_NAME, L_NAMED, L_COLON, L_VALUE, L_OTHER
cdef enum:
    J_START, J_TOP, J_OPEN, J_KEY, J_IN_KEY, J_COLON, J_VALUE, J_IN_STR, J_IN_LIT, J_NESTED, \
        J_AFTER, J_DONE, J_LOST
cdef enum:
    SKIP, PREFIX, USAGE

cdef int O_NONE = NONE, O_NOT_OBJECT = NOT_OBJECT, O_TOO_LARGE = TOO_LARGE
cdef int O_UNREADABLE = UNREADABLE
assert N_OUTCOMES <= 8

# Rules, Dialect and PathKeys are named tuples, read here by position: a read by name goes
# through the type's attribute cache, whose hits depend on where the names' strings landed
# in memory (a scan's start counted 3,135 or 3,520 instructions by process before)
cdef Py_ssize_t R_DIALECT = Rules._fields.index("dialect")
cdef Py_ssize_t D_NAME = Dialect._fields.index("name")
cdef Py_ssize_t K_DIALECT = PathKeys._fields.index("dialect")
cdef Py_ssize_t K_PATHS = PathKeys._fields.index("paths")
cdef Py_ssize_t K_PREFIXES = PathKeys._fields.index("prefixes")
cdef Py_ssize_t K_RAW_KEYS = PathKeys._fields.index("raw_keys")
cdef Py_ssize_t K_KEY_LIMIT = PathKeys._fields.index("key_limit")
cdef dict KEYS_BY_NAME = PATH_KEYS


cdef tuple keys_of(object rules):
    """path_keys(rules.dialect), read by position for the built-in dialects."""
    cdef object dialect, keys
    if type(rules) is Rules:
        dialect = (<tuple>rules)[R_DIALECT]
        if type(dialect) is Dialect:
            keys = KEYS_BY_NAME.get((<tuple>dialect)[D_NAME])
            if keys is not None and (<tuple>keys)[K_DIALECT] is dialect:
                return <tuple>keys
    return tuple(path_keys(rules.dialect))
cdef const char *BOM = b"\xef\xbb\xbf"
cdef const char *DATA = b"data"
cdef const char *JOINER = b"\n"
cdef enum:
    NEEDLE_TAIL = 6  # the longer needle ('"usage"') less one byte
    KEEP_FREED = 1 << 16  # a hold buffer larger than this is freed when it empties

# byte classes
cdef unsigned char LITERAL_END[256]  # whitespace, { } [ ] : , "
cdef unsigned char WS[256]
for _c in range(256):
    LITERAL_END[_c] = _c in b' \t\n\r{}[]:,"'
    WS[_c] = _c in b" \t\n\r"


cdef class BigEvent:
    """One event too large to hold, from its first byte to its blank line."""

    def __cinit__(self):
        self._hold = NULL

    def __init__(self, rules, Py_ssize_t max_bytes, bint bom):
        # re-initialised while feed or finish runs (a hook inside rewrite_value), the scan
        # would lose the hold buffer that call writes to: refused, as in the Python twin
        if not tok_busy_enter(self, &self._busy):
            raise in_use("BigEvent")
        try:
            self._start(rules, max_bytes, bom)
        finally:
            tok_busy_leave(self, &self._busy)

    cdef int _start(self, object rules, Py_ssize_t max_bytes, bint bom) except -1:
        cdef int k
        self._rules = rules
        self._max = max_bytes
        cdef tuple keys = keys_of(rules)  # made once per dialect
        self._paths, self._prefixes = keys[K_PATHS], keys[K_PREFIXES]
        self._raw_keys, self._key_limit = keys[K_RAW_KEYS], keys[K_KEY_LIMIT]
        assert self._key_limit < TOK_KEY_MAX
        for k in range(8):
            self.outcomes[k] = 0
        self._line = L_BOM if bom else L_NAME
        self._matched = 0
        self._line_empty = True
        self._cr = False
        self._fields = False
        self._state = J_START
        self._bom = 0
        self._prefix = []
        self._key_len = 0
        self._key_name = None
        self._role = SKIP
        self._esc = False
        self._in_str = False
        self._nest = 0
        self._lit_len = 0
        self._handled = False
        self._needle = False
        self._tail_len = 0
        self._hold_len = self._hold_cap = 0
        self._holding = False
        self._out = []
        self._copied = self._hold_from = 0

    def __dealloc__(self):
        PyMem_Free(self._hold)

    cdef Py_ssize_t held_bytes(self) noexcept:
        return self._hold_len

    # --- lines ------------------------------------------------------------------------

    cdef object feed(self, const char *d, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t *end_out):
        if not tok_busy_enter(self, &self._busy):
            raise in_use("BigEvent")
        try:
            return self._feed(d, pos, n, end_out)
        finally:
            tok_busy_leave(self, &self._busy)

    cdef object _feed(self, const char *d, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t *end_out):
        cdef Py_ssize_t i = pos, stop, j, end = -1
        cdef unsigned char c
        cdef int line
        cdef bint lf
        self._out = []
        self._copied = pos
        self._hold_from = pos
        while i < n:
            if self._cr:
                self._cr = False
                if d[i] == 10:  # the LF of a CRLF
                    i += 1
                    continue
            line = self._line
            if line == L_VALUE or line == L_OTHER:
                j = tok_line_end(d, i, n)
                stop = n if j < 0 else j
                if line == L_VALUE and stop > i:
                    self._json(d, i, stop)
                i = stop
                if j < 0:
                    break
            c = <unsigned char>d[i]
            if c == 10 or c == 13:
                i += 1
                self._cr = c == 13
                if self._line_empty:  # a blank line: the event ends
                    lf = self._cr and i < n and d[i] == 10
                    if lf:
                        i += 1
                        self._cr = False
                    end = i
                    self._end(d, end, lf)
                    break
                if line == L_NAMED or line == L_COLON:
                    self._field()  # "data" or "data:" alone: an empty value
                self._line, self._matched, self._line_empty = L_NAME, 0, True
                continue
            self._line_empty = False
            if line == L_BOM:
                if c == <unsigned char>BOM[self._matched]:
                    self._matched += 1
                    if self._matched == 3:
                        self._line, self._matched = L_NAME, 0
                    i += 1
                else:
                    self._line = L_NAME if self._matched == 0 else L_OTHER
                    self._matched = 0
            elif line == L_NAME:
                if c == <unsigned char>DATA[self._matched]:
                    self._matched += 1
                    if self._matched == 4:
                        self._line = L_NAMED
                    i += 1
                else:
                    self._line = L_OTHER
            elif line == L_NAMED:
                if c == 58:
                    self._line = L_COLON
                    i += 1
                else:
                    self._line = L_OTHER
            else:  # L_COLON: the value starts here, after one optional space
                self._field()
                self._line = L_VALUE
                if c == 32:
                    i += 1
        stop = n if end < 0 else end
        if self._holding:
            self._keep(d, stop)
        end_out[0] = end
        if not self._out and self._copied == pos:
            return None  # d[pos:stop] goes out as it came (the relay may pass the chunk on)
        self._emit(d, self._copied, stop)
        out, self._out = self._out, []
        return b"".join(out)

    cdef bytes finish(self):
        if not tok_busy_enter(self, &self._busy):
            raise in_use("BigEvent")
        try:
            return self._finish()
        finally:
            tok_busy_leave(self, &self._busy)

    cdef bytes _finish(self):
        if self._line == L_NAMED or self._line == L_COLON:
            self._field()  # an unfinished last line still counts as a field
        self._out = []
        self._end(b"", 0, False)
        out, self._out = self._out, []
        return b"".join(out)

    cdef int _emit(self, const char *d, Py_ssize_t start, Py_ssize_t stop) except -1:
        if stop > start:
            self._out.append(PyBytes_FromStringAndSize(d + start, stop - start))
        return 0

    cdef int _field(self) except -1:
        if self._fields:
            self._json(JOINER, 0, 1)  # the joiner of two data values
        self._fields = True
        return 0

    cdef int _end(self, const char *d, Py_ssize_t at, bint lf) except -1:
        cdef Py_ssize_t size
        if self._holding:  # never closed: unreadable, or over the bound as a cut would say
            size = self._hold_len + at - self._hold_from - lf  # (see _bigevent_py._end)
            self._release(d, at)
            self._count(O_TOO_LARGE if size > self._max else O_UNREADABLE)
        elif self._fields and self._state != J_DONE and not self._handled and self._needle:
            self._count(O_UNREADABLE)
        return 0

    # --- holding a usage value ----------------------------------------------------------

    cdef void _count(self, int outcome) noexcept:
        self.outcomes[outcome] += 1
        if outcome != O_NONE:
            self._handled = True

    cdef int _release(self, const char *d, Py_ssize_t at) except -1:
        self._emit(self._hold, 0, self._hold_len)
        self._emit(d, self._hold_from, at)
        self._hold_len = 0
        if self._hold_cap > KEEP_FREED:
            PyMem_Free(self._hold)
            self._hold, self._hold_cap = NULL, 0
        self._holding = False
        self._copied = at
        return 0

    cdef int _keep(self, const char *d, Py_ssize_t at) except -1:
        cdef Py_ssize_t need = self._hold_len + at - self._hold_from, cap
        cdef char *grown
        if need > self._max:
            self._release(d, at)
            self._count(O_TOO_LARGE)
            return 0
        if need > self._hold_cap:  # never past the bound: a larger value is given up
            cap = min(max(2 * need, 256), self._max)
            grown = <char *>PyMem_Realloc(self._hold, cap)
            if grown == NULL:
                raise MemoryError()
            self._hold, self._hold_cap = grown, cap
        if need > self._hold_len:
            memcpy(self._hold + self._hold_len, d + self._hold_from, at - self._hold_from)
        self._hold_len = need
        self._copied = at
        return 0

    cdef int _value_end(self, const char *d, Py_ssize_t at) except -1:
        cdef Py_ssize_t size = self._hold_len + at - self._hold_from
        cdef bytes held = PyBytes_FromStringAndSize(NULL, size)
        cdef char *p = PyBytes_AS_STRING(held)
        if self._hold_len:  # (memcpy from NULL is undefined even for 0 bytes)
            memcpy(p, self._hold, self._hold_len)
        memcpy(p + self._hold_len, d + self._hold_from, at - self._hold_from)
        self._hold_len = 0
        if self._hold_cap > KEEP_FREED:
            PyMem_Free(self._hold)
            self._hold, self._hold_cap = NULL, 0
        self._holding = False
        self._copied = at
        if size > self._max:
            self._count(O_TOO_LARGE)
            self._out.append(held)
            return 0
        outcome, text = rewrite_value(held, self._rules)
        self._count(outcome)
        self._out.append(text)
        return 0

    # --- the JSON of the data -----------------------------------------------------------

    cdef void _look_for_needle(self, const char *d, Py_ssize_t i, Py_ssize_t stop) noexcept:
        cdef char head[32]  # (2 * NEEDLE_TAIL is enough; the SIMD scan may look at 17 bytes)
        cdef Py_ssize_t k = min(stop - i, <Py_ssize_t>NEEDLE_TAIL), size
        memcpy(head, self._tail, self._tail_len)
        memcpy(head + self._tail_len, d + i, k)
        if tok_next_candidate(head, self._tail_len + k, 0) >= 0 or \
                tok_next_candidate(d + i, stop - i, 0) >= 0:
            self._needle = True
            return
        # the last bytes of tail + d[i:stop]
        size = self._tail_len + stop - i
        if stop - i >= NEEDLE_TAIL:
            memcpy(self._tail, d + stop - NEEDLE_TAIL, NEEDLE_TAIL)
            self._tail_len = NEEDLE_TAIL
        else:
            memcpy(head + self._tail_len, d + i, stop - i)
            k = min(size, <Py_ssize_t>NEEDLE_TAIL)
            memcpy(self._tail, head + size - k, k)
            self._tail_len = <int>k

    cdef int _key_done(self) except -1:
        cdef Py_ssize_t size = self._key_len
        raw = PyBytes_FromStringAndSize(self._key, size)
        self._key_len = 0
        name = None
        if size <= self._key_limit:  # read as _members_py.key_is reads a key
            name = decode_key(raw) if b"\\" in raw else self._raw_keys.get(raw)
        self._key_name = name
        path = (*self._prefix, name)
        self._role = USAGE if path in self._paths else PREFIX if path in self._prefixes \
            else SKIP
        return 0

    cdef int _close(self) except -1:
        """A tracked object's ``}``."""
        if self._prefix:
            self._prefix.pop()
            self._state = J_AFTER
        else:
            self._state = J_DONE
        return 0

    cdef int _json(self, const char *d, Py_ssize_t i, Py_ssize_t stop) except -1:
        cdef int state
        cdef unsigned char c
        cdef Py_ssize_t j, take
        if not self._needle:
            self._look_for_needle(d, i, stop)
        while i < stop:
            state = self._state
            if state == J_NESTED:
                if self._esc:
                    self._esc = False
                    i += 1
                    continue
                if self._in_str:
                    i = tok_string_stop(d, i, stop)
                else:
                    i = tok_nested_stop(d, i, stop)
                if i == stop:
                    return 0
                c = <unsigned char>d[i]
                i += 1
                if self._in_str:
                    if c == 92:
                        self._esc = True
                    else:
                        self._in_str = False
                elif c == 34:
                    self._in_str = True
                elif c == 123 or c == 91:
                    self._nest += 1
                else:
                    self._nest -= 1
                    if self._nest == 0:
                        self._state = J_AFTER
                        if self._holding:
                            self._value_end(d, i)
                continue
            if state == J_IN_KEY or state == J_IN_STR:
                if self._esc:
                    self._esc = False
                    if state == J_IN_KEY and self._key_len <= self._key_limit:
                        self._key[self._key_len] = d[i]
                        self._key_len += 1
                    i += 1
                    continue
                j = tok_string_stop(d, i, stop)
                if state == J_IN_KEY and self._key_len <= self._key_limit:
                    take = min(j - i, self._key_limit + 1 - self._key_len)
                    memcpy(self._key + self._key_len, d + i, take)
                    self._key_len += take
                if j == stop:
                    return 0
                i = j + 1
                if d[j] == 92:
                    self._esc = True
                    if state == J_IN_KEY and self._key_len <= self._key_limit:
                        self._key[self._key_len] = 92
                        self._key_len += 1
                elif state == J_IN_KEY:
                    self._key_done()
                    self._state = J_COLON
                else:
                    self._state = J_AFTER
                continue
            if state == J_IN_LIT:
                j = i
                while j < stop and not LITERAL_END[<unsigned char>d[j]]:
                    j += 1
                if self._role == USAGE and self._lit_len < 5:
                    take = min(j - i, 5 - self._lit_len)
                    memcpy(self._lit + self._lit_len, d + i, take)
                    self._lit_len += <int>take
                if j == stop:
                    return 0
                i = j
                if self._role == USAGE:
                    self._count(O_NONE if self._lit_len == 4 and self._lit[:4] == b"null"
                                else O_NOT_OBJECT)
                self._state = J_AFTER  # the byte that ended the literal is read there
                continue
            if state == J_LOST:
                return 0
            c = <unsigned char>d[i]
            if state == J_START:
                if c == <unsigned char>BOM[self._bom]:
                    self._bom += 1
                    i += 1
                    if self._bom == 3:
                        self._state = J_TOP
                    continue
                self._state = J_LOST if self._bom else J_TOP
                continue
            if WS[c]:
                while i < stop and WS[<unsigned char>d[i]]:
                    i += 1
                if i == stop:
                    return 0
                c = <unsigned char>d[i]
            i += 1
            if state == J_TOP:
                self._state = J_OPEN if c == 123 else J_LOST
            elif state == J_OPEN or state == J_KEY:
                if c == 34:
                    self._key_len = 0
                    self._state = J_IN_KEY
                elif c == 125 and state == J_OPEN:
                    self._close()
                else:
                    self._state = J_LOST
            elif state == J_COLON:
                self._state = J_VALUE if c == 58 else J_LOST
            elif state == J_VALUE:
                self._value_start(d, i - 1, c)
            elif state == J_AFTER:
                if c == 44:
                    self._state = J_KEY
                elif c == 125:
                    self._close()
                else:
                    self._state = J_LOST
            else:  # J_DONE: only whitespace may follow the object
                self._state = J_LOST
        return 0

    cdef int _value_start(self, const char *d, Py_ssize_t at, unsigned char c) except -1:
        cdef int role = self._role
        if c == 123:
            if role == PREFIX:
                self._prefix.append(self._key_name)
                self._state = J_OPEN
                return 0
            self._state, self._nest, self._in_str = J_NESTED, 1, False
            if role == USAGE:  # hold from here to the value's end
                self._emit(d, self._copied, at)
                self._holding = True
                self._hold_from = at
            return 0
        if c == 125 or c == 93 or c == 58 or c == 44:
            self._state = J_LOST
            return 0
        if c == 91 or c == 34:
            if role == USAGE:
                self._count(O_NOT_OBJECT)
            if c == 91:
                self._state, self._nest, self._in_str = J_NESTED, 1, False
            else:
                self._state = J_IN_STR
            return 0
        self._state = J_IN_LIT
        self._lit[0] = <char>c
        self._lit_len = 1
        return 0


cdef BigEvent tok_big_event(object rules, Py_ssize_t max_bytes, bint bom):
    cdef BigEvent big = BigEvent.__new__(BigEvent)
    big._start(rules, max_bytes, bom)
    return big
